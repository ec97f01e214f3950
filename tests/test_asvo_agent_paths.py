"""What the ASVO agent tells the model (or the rule standing in for it), and what its steps record:
every prompt filled in, the unseen person's action guessed from what was seen of them last, the
others' predicted actions brought into the imagined outcomes, the step's gains and rank moves, the
catalogue's people, and a persona's own starting desires. Written for the survivors of a mutmut
run on ``agents/asvo/agent.py`` (docs/testing.md). Rules engine."""

import re
from statistics import mean

import pytest

from socialsim.model.society import SocietyModel

STEPS = 6
SCENARIO = "workplace-meso"
AT_CALL: dict[int, dict] = {}  # id(context) -> the asking agent's desires and action when it asked
UPDATES: list[tuple] = []  # (agent, the reflections an update was told of, the agent's reflections) per UpdateDesire


def record(model, steps, patch, watch_asks):
    """Run ``steps`` steps; every (operation, agent, step, context, answer, what the agent had seen,
    the messages a model would have been sent) the agents asked. The agent's state is read as the
    answer comes back: nothing the snapshot holds changes while the agent waits for it."""
    agents = {a.unique_id: a for a in model.agents}
    asked = []

    def answered(op, ctx, agent_id, answer):
        agent = agents.get(agent_id)
        seen = dict(agent.last_seen) if agent is not None else {}
        if agent is not None:
            AT_CALL[id(ctx)] = {"values": dict(agent.state.values), "action": agent.action,
                                "previous": agent.previous_action}
        if op.name == "UpdateDesire":
            UPDATES.append((agent, list(ctx.unreasonable), list(agent.unreasonable)))
        text = "\n".join(m["content"] for m in op.messages(ctx))
        asked.append((op.name, agent, model.steps, ctx, answer.value, seen, text))

    watch_asks(patch, answered)
    for _ in range(steps):
        model.step()
    return asked


@pytest.fixture(scope="module")
def recorded(watch_asks):
    model = SocietyModel(SCENARIO, model="rules", rng=1)
    with pytest.MonkeyPatch.context() as patch:
        asked = record(model, STEPS, patch, watch_asks)
    return model, asked


def of(asked, op):
    return [row for row in asked if row[0] == op]


ABOUT_THE_AGENT = {"ProposeActions", "SimulateOutcome", "SelectAction", "PredictObservedDesires",
                   "PredictGuessedDesires", "GuessHiddenAction", "UpdateDesire", "JudgeAction"}


def test_every_prompt_an_agent_builds_is_filled_in(recorded):
    """A context field dropped or mixed up changes nothing the rules read, only what a model is told."""
    _, asked = recorded
    assert {op for op, *_ in asked} >= ABOUT_THE_AGENT
    for op, agent, _, ctx, _, _, text in asked:
        assert not re.search(r"\bNone\b", text), (op, text)
        if op in ABOUT_THE_AGENT:
            assert agent.name in text, op
        if op in ("ProposeActions", "SimulateOutcome", "SelectAction"):  # the desires as of the step's start
            assert ctx.desires == {d: round(v, 2) for d, v in AT_CALL[id(ctx)]["values"].items()}, op
        if op == "ProposeActions":
            assert agent.description in text and agent.model.scenario_spec.context in text and agent.svo in text
        if op in ("SimulateOutcome", "SelectAction"):
            assert agent.svo in text.lower(), op
        if op in ("PredictObservedDesires", "PredictGuessedDesires"):
            assert ctx.target in text and ctx.action in text and agent.setting in text


def test_an_unseen_persons_action_is_guessed_from_what_was_last_seen_of_them(monkeypatch, watch_asks):
    """Who acts out of view (here: someone whose action nobody saw this step) is guessed from what
    was last seen of them; a guess that repeats it keeps its stance, the ordinary action is neutral."""
    model = SocietyModel(SCENARIO, model="rules", rng=1)
    for _ in range(2):
        model.step()
    hidden = sorted(model.agents, key=lambda a: a.unique_id)[0]
    hidden.action = ""  # out of view in the next step's perception
    asked = record(model, 1, monkeypatch, watch_asks)
    minds = {(row[1].name, row[3].target): row[3] for row in of(asked, "PredictGuessedDesires")}
    guesses = [row for row in of(asked, "GuessHiddenAction") if row[3].target == hidden.name]
    assert guesses
    repeated = 0
    for _, agent, _, ctx, value, seen, _ in guesses:
        last, stance = seen[hidden.name]  # what this observer saw of them the step before
        assert ctx.last_known_action == last and ctx.observer == agent.name
        assert ctx.own_action == AT_CALL[id(ctx)]["action"] and ctx.own_action
        default = model.society.ordinary_action(agent.name)[0]
        assert ctx.default_action == default
        mind = minds[(agent.name, hidden.name)]
        assert mind.action == value.text
        assert mind.stance == (stance if value.text == last else ("Neutral" if value.text == default else None))
        repeated += value.text == last and stance != "Neutral"
    assert repeated > 0


def test_the_imagined_outcomes_hold_the_others_predicted_actions_and_desires(recorded):
    model, asked = recorded
    desires = set(model.society.desires)
    outcomes = of(asked, "SimulateOutcome")
    assert outcomes
    for _, agent, step, ctx, _, _, _ in outcomes:
        predictions = [row for row in of(asked, "PredictObservedDesires") + of(asked, "PredictGuessedDesires")
                       if row[1] is agent and row[2] == step]
        assert len(ctx.others_view) == len(predictions) > 0
        for line in ctx.others_view:
            named = [d for d in desires if d in line]
            assert named, line  # the desires of the prediction, about the agent's own desires
        targets = {row[3].target for row in predictions}
        assert all(any(line.startswith(f"{t}: likely does") for line in ctx.others_view) for t in targets)
        assert -1.0 <= ctx.others_need <= 1.0


def test_each_step_gains_and_rank_moves_follow_from_everyones_effects():
    check_gains(SocietyModel(SCENARIO, model="rules", rng=1))


def check_gains(fresh, steps=8):
    """Step by step: each agent's gain is its own effect plus the mean effect of those observing it;
    its rank move is the change of its rank, as a share of the scale (clipped to [-1, 1])."""
    agents = sorted(fresh.agents, key=lambda a: a.unique_id)
    n, moved = len(agents), 0

    def ranks(scores):  # 1 = best, ties share their mean rank
        order = sorted(scores.values(), reverse=True)
        return {name: mean(i + 1 for i, v in enumerate(order) if v == s) for name, s in scores.items()}

    for _ in range(steps):
        before = {a.name: a.score for a in agents}
        fresh.step()
        received = {a.name: [] for a in agents}
        for a in agents:
            for o in a.observed():
                received[o.name].append(a.effect[1])
        gains = {a.name: a.effect[0] + (mean(received[a.name]) if received[a.name] else 0.0) for a in agents}
        rank_before, rank_after = ranks(before), ranks({a.name: a.score for a in agents})
        for a in agents:
            assert a.score == round(before[a.name] + gains[a.name], 6)
            others = [gains[o.name] for o in a.observed()]
            move = max(-1.0, min(1.0, (rank_before[a.name] - rank_after[a.name]) * 2 / (n - 1)))
            assert a.channels["own"] == round(gains[a.name], 6)
            assert a.channels["others"] == round(mean(others) if others else 0.0, 6)
            assert a.channels["rank"] == pytest.approx(move, abs=1e-6), a.name
            moved += move != 0
    assert moved > 0


def test_the_catalogue_names_the_observed_people_in_turn_step_by_step():
    model = SocietyModel(SCENARIO, model="rules", rng=1)
    runtime = model.society
    people = ["Ann", "Ben", "Cy"]
    named = [t for t, _, _ in runtime.catalogue(people, 0) if any(p in t for p in people)]
    assert len(named) >= 2
    for step in range(3):
        now = runtime.catalogue(people, step)
        later = runtime.catalogue(people, step + 1)
        for i in range(len(now) - 1):
            who_now = next((p for p in people if p in now[i + 1][0]), None)
            who_later = next((p for p in people if p in later[i][0]), None)
            if who_now and who_later:
                assert who_later == who_now  # action i names next step whom action i + 1 names now


def test_expected_values_follow_each_desires_degree_coding_and_fixed_defaults_and_a_persona_may_bring_its_own(
        tmp_path):
    """Appendix C.3: E = 10 - (3 - s) for a desire decreasing by degree step s, E = 3 - s for a
    reverse-coded one, unless the scenario fixes E. A persona's own degrees and starting values
    replace the scenario's for that agent only."""
    import yaml

    from socialsim.agents.desires import DEGREE_STEP
    from socialsim.scenarios.loader import DATA_DIR

    spec = yaml.safe_load((DATA_DIR / f"{SCENARIO}.yaml").read_text())
    desires = SocietyModel(SCENARIO, model="rules", rng=1).society.desires
    spec["asvo"].update(initial={desires[4]: 7.0}, reverse=[desires[1]], expected_defaults={desires[2]: 7.5},
                        degrees={desires[0]: "slightly", desires[1]: "extremely"})
    first = spec["agents"][0]["name"]
    spec["agents"][0]["traits"] = {**spec["agents"][0].get("traits", {}),
                                   "degrees": {desires[0]: "extremely"}, "initial": {desires[3]: 2.5}}
    path = tmp_path / "persona.yaml"
    path.write_text(yaml.safe_dump(spec))
    model = SocietyModel(str(path), model="rules", rng=1)
    for agent in model.agents:
        state, own = agent.state, agent.name == first
        assert state.reverse == frozenset({desires[1]})
        assert state.expected[desires[0]] == 10 - (3 - DEGREE_STEP["extremely" if own else "slightly"])
        assert state.expected[desires[1]] == 3 - DEGREE_STEP["extremely"]  # reverse-coded
        assert state.expected[desires[2]] == 7.5  # fixed by the scenario
        assert state.expected[desires[3]] == 10 - (3 - DEGREE_STEP["moderately"])  # no degree given
        if own:  # the persona's starting values replace the scenario's; what it leaves out starts at 5
            assert state.values[desires[3]] == 2.5 and state.values[desires[4]] == 5.0
        else:
            assert state.values[desires[4]] == 7.0 and state.values[desires[3]] == 5.0


@pytest.mark.parametrize("scenario", ["workplace-micro", "school-meso"])
def test_gains_and_rank_moves_in_other_societies(scenario):
    """Two people (one rank step is the whole scale) and a larger group."""
    check_gains(SocietyModel(scenario, model="rules", rng=2))


def test_the_judges_calls_are_recorded_at_the_step_they_judge(recorded):
    model, _ = recorded
    ledger = model.llm.ledger.frame()
    judged = ledger[ledger["op"].isin(["JudgeAction", "ClassifyBehaviour"])]
    assert len(judged) > 0 and set(judged["step"]) == set(range(1, STEPS + 1))


def test_a_guess_with_nothing_seen_is_neutral_only_when_it_is_the_ordinary_action(recorded):
    model, asked = recorded
    minds = {(row[1].name, row[2], row[3].target): row[3] for row in of(asked, "PredictGuessedDesires")}
    kinds = set()
    for _, agent, step, ctx, value, seen, _ in of(asked, "GuessHiddenAction"):
        known = seen.get(ctx.target)
        default = model.society.ordinary_action(agent.name)[0]
        expected = known[1] if known and value.text == known[0] else ("Neutral" if value.text == default else None)
        assert minds[(agent.name, step, ctx.target)].stance == expected
        kinds.add(expected)
    assert "Neutral" in kinds


def test_a_guess_of_some_other_action_has_no_stance(scripted):
    scripted(default="water the office plants")
    model = SocietyModel(SCENARIO, model="rules", rng=1, routes={"GuessHiddenAction": "openai/scripted"})
    model.step()  # nobody has acted yet: every person is guessed
    predictions = [p for a in model.agents for p in a.predictions]
    assert predictions and all(not p["observable"] for p in predictions)
    assert {(p["action"], p["stance"]) for p in predictions} == {("water the office plants", None)}


def test_an_actions_effects_are_the_catalogues_and_the_others_predicted_actions_reach_the_outcomes(recorded):
    from socialsim.agents.asvo.svo import PAYOFF

    model, asked = recorded
    catalogues = {}
    for _, agent, step, ctx, _, _, _ in of(asked, "ProposeActions"):
        catalogues[(agent.name, step)] = {t: (own, others) for t, own, others in ctx.catalogue}
    for _, agent, step, ctx, _, _, _ in of(asked, "SimulateOutcome"):
        known = catalogues[(agent.name, step)]
        assert (ctx.own, ctx.others) == known.get(ctx.action, (ctx.own, ctx.others))
        predictions = [row[3] for row in of(asked, "PredictObservedDesires") + of(asked, "PredictGuessedDesires")
                       if row[1] is agent and row[2] == step]
        effects = [known.get(p.action, PAYOFF[p.stance or "Neutral"]) for p in predictions]
        assert ctx.received == pytest.approx(mean(o for _, o in effects))
        assert ctx.others_own == pytest.approx(mean(own for own, _ in effects))
    for agent in model.agents:  # what was done last has the catalogue's effect, and is the agent's last action
        assert agent.last_action == agent.action
        if agent.effect_source == "catalogue":
            assert agent.effect in set(catalogues[(agent.name, STEPS)].values())


def test_the_same_seed_gives_the_same_run():
    def run():
        model = SocietyModel(SCENARIO, model="rules", rng=5)
        for _ in range(3):
            model.step()
        return [(a.name, a.action, a.score, tuple(a.state.values.values())) for a in model.agents]

    assert run() == run()


@pytest.mark.parametrize("copied", ["include only actions possible in the present environment",  # a passage
                                    "Your recent memory: 4.9"])  # a heading of the prompt
def test_a_proposal_that_copies_the_prompt_is_replaced_by_the_ordinary_action(scripted, copied):
    import json

    scripted(default=json.dumps({"activities": [{"text": copied, "stance": "Cooperation"}] * 3}))
    model = SocietyModel(SCENARIO, model="rules", rng=1, routes={"ProposeActions": "openai/scripted"})
    model.step()
    for agent in model.agents:
        ordinary = model.society.ordinary_action(agent.name)
        assert agent.invalid_actions == 3
        assert agent.action == ordinary[0] and agent.effect == (ordinary[1], ordinary[2])


def test_desires_are_predicted_with_the_societys_own_decay(monkeypatch, watch_asks):
    model = SocietyModel(SCENARIO, model="rules", rng=1, decay_per_hour=0.3)
    asked = record(model, 2, monkeypatch, watch_asks)
    minds = [row[3] for row in asked if row[0] in ("PredictObservedDesires", "PredictGuessedDesires")]
    assert {row[0] for row in asked} >= {"PredictObservedDesires", "PredictGuessedDesires"}
    assert minds and all(ctx.decay == model.society.decay for ctx in minds)
    assert model.society.decay != type(model.society.decay)()  # not the default rule


def test_a_step_leaves_its_updates_reflections_predictions_and_gains_in_the_tables(recorded):
    model, asked = recorded
    dc = model.datacollector
    desires = set(model.society.desires)
    updates = dc.get_table_dataframe("asvo_updates")
    for (step, name), rows in updates.groupby(["step", "agent"]):
        assert set(rows["desire"]) == desires, (step, name)  # one row per desire, each naming it
    actions = dc.get_table_dataframe("asvo_actions")
    reflections = dc.get_table_dataframe("asvo_reflections")
    predictions = dc.get_table_dataframe("asvo_predictions")
    interactions = dc.get_table_dataframe("interactions")
    assert (predictions["error"] == (predictions["predicted"] - predictions["true"]).abs()).all()
    for agent in model.agents:
        last = actions[(actions["agent"] == agent.name) & (actions["step"] == STEPS)].iloc[0]
        assert (last["own_gain"], last["others_gain"]) == (agent.channels["own"], agent.channels["others"])
        assert agent.memory[-1] == f"I did: {agent.action} | {agent.consequence}"
        mine = reflections[reflections["agent"] == agent.name]
        assert agent.reflections_total == len(mine)
        if len(mine):
            assert agent.last_thought == f"on {mine.iloc[-1]['desire']}: {mine.iloc[-1]['reflection']}"
        errors = predictions[(predictions["observer"] == agent.name) & (predictions["step"] == STEPS)
                             & (predictions["status"] != "fallback")]["error"]
        assert agent.tom_error == (round(errors.mean(), 6) if len(errors) else None)
        said = interactions[interactions["initiator"] == agent.name]
        done = set(actions.loc[actions["agent"] == agent.name, "action"])
        assert set(said["content"]) <= done
    assert len(reflections) > 0 and len(interactions) > 0


def test_repeated_option_texts_are_numbered_apart():
    from socialsim.agents.asvo.agent import _distinct

    assert _distinct(["a", "b", "a", "a", "b"]) == ["a", "b", "a (option 2)", "a (option 3)", "b (option 2)"]
    assert _distinct([]) == []


def test_with_updates_switched_off_each_desire_keeps_its_value_in_a_row_of_its_own():
    model = SocietyModel(SCENARIO, model="rules", rng=1, update_desires=False)
    model.step()
    updates = model.datacollector.get_table_dataframe("asvo_updates")
    assert len(updates) == len(model.society.desires) * len(model.agents)
    for (_, name), rows in updates.groupby(["step", "agent"]):
        assert sorted(rows["desire"]) == sorted(model.society.desires), name
    assert (updates["attempts"] == 0).all() and updates["accepted"].astype(bool).all()
    assert ((updates["before"] == updates["proposed"]) & (updates["proposed"] == updates["after"])).all()


@pytest.mark.parametrize("reply", ['{"naturalness": 5, "human_likeness": 1, "reason": "seen it"}', "not a record"])
def test_an_agents_judged_naturalness_is_the_mean_of_the_judges_that_answered(scripted, reply):
    """Two judges: the rules and a model. A model's unusable answer falls back and is no judgement."""
    scripted(default=reply)
    model = SocietyModel(SCENARIO, model="rules", rng=1, judges=["rules", "openai/scripted-judge"])
    model.step()
    answered = reply != "not a record"
    halves = set()
    for agent in model.agents:
        statuses = {j["judge"]: j["status"] for j in agent.judgements}
        assert (statuses["openai/scripted-judge"] != "fallback") == answered
        scored = [j for j in agent.judgements if j["status"] != "fallback"]
        assert len(scored) == (2 if answered else 1)
        assert agent.naturalness == round(mean(j["naturalness"] for j in scored), 6)
        assert agent.human_likeness == round(mean(j["human_likeness"] for j in scored), 6)
        halves |= {name for name, v in [("naturalness", agent.naturalness), ("human_likeness", agent.human_likeness)]
                   if v % 1 != 0}
    assert halves == ({"naturalness", "human_likeness"} if answered else set())  # odd disagreements give halves


def test_the_equity_channel_compares_ones_gain_with_the_observed_peoples(recorded):
    from socialsim.agents.asvo.svo import equity

    model, _ = recorded
    for agent in model.agents:
        assert set(agent.channels) == {"own", "others", "rank", "equity"}
        assert agent.channels["equity"] == pytest.approx(equity(agent.channels["own"], agent.channels["others"]), abs=2e-6)
    assert len({a.channels["equity"] for a in model.agents}) > 1


def test_a_desire_update_is_told_the_agents_latest_reflections_and_nothing_when_it_keeps_none(monkeypatch, watch_asks):
    for keep in (2, 0):
        UPDATES.clear()
        model = SocietyModel(SCENARIO, model="rules", rng=1, reflection_examples=keep)
        record(model, STEPS, monkeypatch, watch_asks)
        told = 0
        for _, shown, earlier in UPDATES:
            latest = earlier[-keep:] if keep else []
            assert shown[:len(latest)] == latest
            assert len(shown) - len(latest) <= model.society.settings.max_retries  # then this update's own
            told += bool(latest)
        assert (told > 0) == bool(keep) and any(earlier for *_, earlier in UPDATES)


def test_the_judge_sees_the_action_its_effects_and_the_one_before_and_each_call_is_the_agents(recorded):
    model, asked = recorded
    judged = of(asked, "JudgeAction")
    assert judged
    for _, agent, _, ctx, _, _, _ in judged:
        assert ctx.agent == agent.name and ctx.action == AT_CALL[id(ctx)]["action"]
        assert ctx.previous_action == (AT_CALL[id(ctx)]["previous"] or "")
    assert any(row[3].previous_action for row in judged)
    ledger = model.llm.ledger.frame()
    ids = {a.unique_id for a in model.agents}
    assert set(ledger.loc[ledger["op"].isin(["JudgeAction", "ClassifyBehaviour"]), "agent"]) == ids


def test_without_evaluation_no_action_is_judged_or_labelled():
    model = SocietyModel(SCENARIO, model="rules", rng=1, evaluate=False)
    model.step()
    actions = model.datacollector.get_table_dataframe("asvo_actions")
    assert len(actions) == len(model.agents) and (actions["label"] == "").all()
    assert all(a.judgements == [] and a.naturalness is None for a in model.agents)


def test_an_update_a_model_judges_unreasonable_every_time_is_dropped_after_its_reflections(scripted):
    """Check and reflection on a model's route: every change is refused, each refusal is reflected
    on (in the model's words) and retried, and the desire keeps its value, in a row that names it."""
    scripted(replies={"Continue this sentence": ["I overreacted to a small setback."]}, default="b")
    model = SocietyModel(SCENARIO, model="rules", rng=1, update_noise=1.0, max_retries=1,
                         routes={"CheckUpdate": "openai/scripted", "ReflectUpdate": "openai/scripted"})
    model.step()
    updates = model.datacollector.get_table_dataframe("asvo_updates")
    changed = updates[updates["attempts"] > 0]
    refused = changed[~changed["accepted"].astype(bool)]
    assert len(refused) > 0 and set(refused["desire"]) <= set(model.society.desires)
    assert (refused["after"] == refused["before"]).all() and (refused["attempts"] == 2).all()
    reflections = model.datacollector.get_table_dataframe("asvo_reflections")
    assert len(reflections) >= 2 * len(refused)  # two per refused update (others gave up changing after one)
    assert reflections["reflection"].str.endswith("I overreacted to a small setback.").all()
    assert model.llm.ledger.failures.get("CheckUpdate", 0) == 0


def test_with_fewer_desires_every_estimate_and_imagined_outcome_is_of_the_agents_own(monkeypatch, watch_asks):
    """``desire_pool`` below eight: theory of mind starts from a neutral belief about the pool's
    desires, and the rules, a model's prompt and the record it must fill hold those desires only."""
    from socialsim.agents.asvo import operations as ops
    from socialsim.agents.desires import DESIRES

    model = SocietyModel(SCENARIO, model="rules", rng=1, desire_pool=4)
    asked = record(model, 2, monkeypatch, watch_asks)
    pool = model.society.desires
    assert len(pool) == 4
    left_out = [d for d in DESIRES if d not in pool]
    estimates = of(asked, "PredictObservedDesires") + of(asked, "PredictGuessedDesires")
    outcomes = of(asked, "SimulateOutcome")
    assert {row[2] for row in estimates} == {1, 2} and outcomes
    assert all(ctx.prior == dict.fromkeys(pool, ops.NEUTRAL_BELIEF) for _, _, step, ctx, *_ in estimates if step == 1)
    for op, _, _, _, answer, _, text in estimates + outcomes:
        fields = set(type(answer).model_fields) - {"reason"}
        assert fields == {d.replace(" ", "_") for d in pool}, op
        assert not any(d in text for d in left_out), (op, text)
    for op, ctx in ((ops.PREDICT_OBSERVED_DESIRES, estimates[0][3]), (ops.SIMULATE_OUTCOME, outcomes[0][3])):
        assert set(op.question(ctx).model.model_fields) - {"reason"} == {d.replace(" ", "_") for d in pool}
    predictions = [p for a in model.agents for p in a.predictions]
    assert predictions and all(p["status"] != "fallback" and set(p["values"]) == set(pool) for p in predictions)
    assert model.datacollector.get_model_vars_dataframe()["tom_error"].notna().all()


def test_a_model_judges_requests_are_the_same_for_the_same_seed(scripted):
    """Each judge's request carries a seed drawn from the agent's RNG, so a rerun (or a replay from
    the tape, keyed by the request) asks the judge exactly the same."""
    def judge_seeds(seed):
        fake = scripted(default='{"naturalness": 5, "human_likeness": 4, "reason": "fine"}')
        model = SocietyModel(SCENARIO, model="rules", rng=seed, judges=["rules", "openai/scripted-judge"])
        model.step()
        return sorted(c["params"]["seed"] for c in fake.calls)

    first = judge_seeds(3)
    assert len(first) == len(list(SocietyModel(SCENARIO, model="rules").agents))  # one JudgeAction an agent
    assert judge_seeds(3) == first
    assert judge_seeds(4) != first


@pytest.mark.figures
def test_the_reports_desire_figure_draws_the_desires_the_agents_have(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from socialsim.agents.asvo.metrics import plot_desires

    model = SocietyModel(SCENARIO, model="rules", rng=1, desire_pool=3)
    for _ in range(2):
        model.step()
    drawn = []
    monkeypatch.setattr(plt, "close", lambda fig: drawn.append(fig))
    plot_desires(model.datacollector.get_agent_vars_dataframe(), tmp_path / "desires.png")
    legend = drawn[0].axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["comfort", "joyfulness", "spiritual satisfaction"]
    assert (tmp_path / "desires.png").stat().st_size > 0
