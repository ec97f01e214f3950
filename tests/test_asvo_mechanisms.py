"""ASVO's mechanisms on the rules engine: SVO-shaped desire updates, the reasonableness check and
reflection loop, the two theory-of-mind paths, and SVO-separated actions."""


import os

import pandas as pd
import pytest
import yaml

from socialsim.agents.asvo import operations as ops
from socialsim.agents.asvo.svo import PAYOFF, STANCES, rule_update
from socialsim.model.society import SocietyModel

CATALOGUE = [{"text": f"{s.lower()} move toward {{other}}", "self": PAYOFF[s][0], "others": PAYOFF[s][1]}
             for s in STANCES]


@pytest.fixture
def triad(tmp_path):
    """Alice observes Bob only; Bob and Carol observe each other (directed edges)."""
    data = {
        "name": "triad", "context": "Three people in a room.", "step_minutes": 20, "default_arch": "asvo",
        "agents": [{"name": n, "description": f"{n} is a person."} for n in ("Alice", "Bob", "Carol")],
        "network": {"directed": True, "edges": [["Alice", "Bob"], ["Bob", "Carol"], ["Carol", "Bob"]]},
        "asvo": {"summary": "Three people in a room.", "actions": CATALOGUE},
    }
    path = tmp_path / "triad.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def force_stances(monkeypatch, stances: dict[str, str]):
    """Every candidate an agent proposes has the stance given for it (others: Neutral)."""
    def propose(ctx, rng):
        stance = stances.get(ctx.name, "Neutral")
        text = next(t for t, _, _ in ctx.catalogue if t.startswith(stance.lower() + " "))
        activity = ops.Activity(text=text, stance=stance)
        return ops.candidates_model(ctx.n)(activities=[activity] * ctx.n)
    monkeypatch.setattr(ops.PROPOSE_ACTIONS, "rule", propose)


def alice_after_one_step(scenario, monkeypatch, alice_svo, carol_stance):
    force_stances(monkeypatch, {"Alice": "Neutral", "Bob": "Neutral", "Carol": carol_stance})
    model = SocietyModel(scenario, model="rules", rng=3, svo_assignment="explicit",
                         svo_agents={"Alice": alice_svo, "Bob": "individualistic", "Carol": "individualistic"})
    model.step()
    alice = model.agent_named("Alice")
    return alice, sum(alice.state.values.values())


def test_altruists_follow_others_outcomes_and_competitors_follow_rank(triad, monkeypatch):
    # Carol helping Bob makes Bob (whom Alice watches) better off, but lets Bob overtake Alice;
    # Carol attacking Bob leaves Bob worse off and Alice on top. Alice's own action and gain are equal.
    helped, helped_sum = alice_after_one_step(triad, monkeypatch, "altruistic", "Cooperation")
    attacked, attacked_sum = alice_after_one_step(triad, monkeypatch, "altruistic", "Competition")
    assert helped.channels["own"] == attacked.channels["own"]
    assert helped.channels["others"] > attacked.channels["others"]
    assert helped.channels["rank"] < attacked.channels["rank"]
    assert helped_sum > attacked_sum  # the altruist feels better when others do well

    _, helped_sum = alice_after_one_step(triad, monkeypatch, "competitive", "Cooperation")
    _, attacked_sum = alice_after_one_step(triad, monkeypatch, "competitive", "Competition")
    assert attacked_sum > helped_sum  # the competitor feels better when it ranks higher


def test_rule_update_direction_by_svo():
    others_up = {"own": 0.0, "others": 1.0, "rank": 0.0, "equity": 0.0}
    others_down = {"own": 0.0, "others": -1.0, "rank": 0.0, "equity": 0.0}
    rank_up = {"own": 0.0, "others": 0.0, "rank": 1.0, "equity": 0.0}
    rank_down = {"own": 0.0, "others": 0.0, "rank": -1.0, "equity": 0.0}
    assert rule_update("joyfulness", 5, others_up, "altruistic") > 5 > rule_update("joyfulness", 5, others_down, "altruistic")
    assert rule_update("joyfulness", 5, others_up, "competitive") == 5  # indifferent to others
    assert rule_update("joyfulness", 5, rank_up, "competitive") > 5 > rule_update("joyfulness", 5, rank_down, "competitive")
    assert rule_update("sense of superiority", 5, rank_up, "altruistic") == 5  # rank means nothing to an altruist
    assert rule_update("joyfulness", 5, others_up, "individualistic") == 5


def test_an_unreasonable_update_is_reflected_on_retried_and_then_kept(triad, monkeypatch):
    force_stances(monkeypatch, {})
    seen_histories = []

    def absurd(ctx, rng):  # always drops comfort to 0; other desires keep the real rule
        if ctx.desire == "comfort":
            seen_histories.append(list(ctx.unreasonable))
            return ops.Letter(letter="a", level=0)
        return ops.UpdateDesire.rule(ops.UPDATE_DESIRE, ctx, rng)

    monkeypatch.setattr(ops.UPDATE_DESIRE, "rule", absurd)
    model = SocietyModel(triad, model="rules", rng=1, update_noise=0.0, max_retries=1, decay_per_hour=0.0)
    model.step()
    updates = model.datacollector.get_table_dataframe("asvo_updates")
    reflections = model.datacollector.get_table_dataframe("asvo_reflections")
    comfort = updates[updates["desire"] == "comfort"]
    assert (comfort["proposed"] == 0).all() and (comfort["attempts"] == 2).all()
    assert (~comfort["accepted"]).all() and (comfort["after"] == comfort["before"]).all()  # kept
    for agent in model.agents:
        assert agent.state.values["comfort"] == 5.0
        assert agent.reflections_total == 2  # one reflection per failed check
    assert len(reflections) == 6 and (reflections["desire"] == "comfort").all()
    first = reflections["reflection"].iloc[0]
    assert first.startswith("After '") and "comfort updated from 5 to 0 is not reasonable because:" in first
    # the retry sees the reflection just made; the agent's history keeps it for later steps
    assert [] in seen_histories and any(len(h) == 1 and h[0].startswith("After '") for h in seen_histories)
    assert all(len(a.unreasonable) == 2 for a in model.agents)


def test_a_retry_that_becomes_reasonable_is_accepted(triad, monkeypatch):
    force_stances(monkeypatch, {"Bob": "Cooperation", "Carol": "Cooperation"})
    calls = {}

    def wrong_once(ctx, rng):
        key = (ctx.name, ctx.desire)
        calls[key] = calls.get(key, 0) + 1
        real = ops.UpdateDesire.rule(ops.UPDATE_DESIRE, ctx, rng)
        if calls[key] == 1 and real.level != ops._level(ctx.value):
            wrong = 10 if real.level < ctx.value else 0  # the opposite way
            return ops.Letter(letter="abcdefghijk"[wrong], level=wrong)
        return real

    monkeypatch.setattr(ops.UPDATE_DESIRE, "rule", wrong_once)
    model = SocietyModel(triad, model="rules", rng=1, update_noise=0.0, max_retries=1)
    model.step()
    updates = model.datacollector.get_table_dataframe("asvo_updates")
    retried = updates[updates["attempts"] == 2]
    assert len(retried) > 0 and retried["accepted"].all()
    assert (retried["after"] == retried["proposed"]).all() and (retried["after"] != retried["before"]).all()


def test_without_retries_an_unreasonable_update_is_kept_after_one_reflection(triad, monkeypatch):
    force_stances(monkeypatch, {})
    def contrary(ctx, rng):  # always the opposite of what the outcome calls for
        real = ops.UpdateDesire.rule(ops.UPDATE_DESIRE, ctx, rng)
        level = 0 if real.level > ops._level(ctx.value) else 10
        return ops.Letter(letter="abcdefghijk"[level], level=level)

    monkeypatch.setattr(ops.UPDATE_DESIRE, "rule", contrary)
    model = SocietyModel(triad, model="rules", rng=1, update_noise=0.0, max_retries=0, decay_per_hour=0.0)
    model.step()
    updates = model.datacollector.get_table_dataframe("asvo_updates")
    assert (updates["attempts"] == 1).all() and not updates["accepted"].any()
    assert all(a.reflections_total == 8 and set(a.state.values.values()) == {5.0} for a in model.agents)


def test_observable_and_unobservable_theory_of_mind_paths(triad, monkeypatch):
    force_stances(monkeypatch, {"Bob": "Cooperation", "Carol": "Competition"})
    model = SocietyModel(triad, model="rules", rng=2)
    model.step()  # step 1: no one has acted yet, so no one is observable
    model.step()  # step 2: Alice sees Bob's last action, never Carol's
    ledger = model.llm.ledger.frame()
    per_step = ledger.groupby(["step", "op"]).size()
    assert (1, "PredictObservedDesires") not in per_step
    assert per_step[(1, "GuessHiddenAction")] == 6 and per_step[(1, "PredictGuessedDesires")] == 6
    predictions = model.datacollector.get_table_dataframe("asvo_predictions")
    step2 = predictions[predictions["step"] == 2].drop_duplicates(["observer", "target"]).set_index(["observer", "target"])
    assert bool(step2.loc[("Alice", "Bob"), "observable"]) is True
    assert bool(step2.loc[("Alice", "Carol"), "observable"]) is False
    assert bool(step2.loc[("Bob", "Carol"), "observable"]) is True
    assert bool(step2.loc[("Bob", "Alice"), "observable"]) is False  # Bob does not observe Alice
    # the observed action is the real one; the hidden one is guessed (never seen: an ordinary action)
    assert step2.loc[("Alice", "Bob"), "action"] == model.agent_named("Bob").previous_action
    assert step2.loc[("Alice", "Carol"), "action"] == "neutral move toward Alice"
    # the two-step path asks for the action first, then the desires
    alice_ops = ledger[(ledger["step"] == 2) & (ledger["agent"] == model.agent_named("Alice").unique_id)]["op"].tolist()
    assert alice_ops.count("GuessHiddenAction") == 1 and alice_ops.count("PredictGuessedDesires") == 1
    assert alice_ops.count("PredictObservedDesires") == 1
    assert alice_ops.index("GuessHiddenAction") < alice_ops.index("PredictGuessedDesires")


def test_each_prediction_records_the_belief_it_replaced(triad, monkeypatch):
    """The ToM baseline: the first belief is the neutral midpoint, every later one the observer's
    previous estimate of that target; its error is against the same true value."""
    force_stances(monkeypatch, {"Bob": "Cooperation", "Carol": "Competition"})
    model = SocietyModel(triad, model="rules", rng=2)
    for _ in range(3):
        model.step()
    p = model.datacollector.get_table_dataframe("asvo_predictions")
    first = p[p["step"] == 1]
    assert (first["prior"] == ops.NEUTRAL_BELIEF).all()
    assert ((p["prior"] - p["true"]).abs() == p["prior_error"]).all()
    earlier = p[p["step"] == 2].set_index(["observer", "target", "desire"])["predicted"]
    later = p[p["step"] == 3].set_index(["observer", "target", "desire"])["prior"]
    pd.testing.assert_series_equal(later.sort_index(), earlier.sort_index(), check_names=False)
    assert (p[p["step"] > 1]["prior"] != ops.NEUTRAL_BELIEF).any()  # beliefs moved, so the check above bites


def test_the_tom_table_puts_prediction_error_beside_the_belief_before_and_chance():
    from socialsim.agents.asvo.metrics import tom_table

    def rows(observable, desire, predicted, true, prior):
        return [{"observable": observable, "desire": d, "predicted": pr, "true": t, "error": abs(pr - t),
                 "prior": b, "prior_error": abs(b - t)} for d, pr, t, b in zip(desire, predicted, true, prior, strict=True)]

    # exact predictions of two agents whose values differ: chance is off, the old beliefs further
    exact = pd.DataFrame(rows(True, ["love", "love"], [2.0, 8.0], [2.0, 8.0], [5.0, 5.0]))
    table = tom_table(exact).set_index("estimated from")
    assert table.loc["a seen action", "mean_abs_error"] == 0.0
    assert table.loc["a seen action", "belief_before_error"] == 3.0
    assert 0.0 < table.loc["a seen action", "shuffled_targets_error"] < 6.0
    # chance shuffles within a desire: two desires, each the same in everyone, has no chance error
    by_desire = pd.DataFrame(rows(False, ["love", "love", "rest", "rest"], [1.0, 1.0, 9.0, 9.0],
                                  [1.0, 1.0, 9.0, 9.0], [5.0] * 4))
    table = tom_table(by_desire).set_index("estimated from")
    assert table.loc["a guessed action", "shuffled_targets_error"] == 0.0 and table.loc["a guessed action", "estimates"] == 4
    assert tom_table(exact.iloc[:0]).empty


def run_actions(scenario: str = "school-macro", steps: int = 3, seed: int = 7, **params) -> pd.DataFrame:
    model = SocietyModel(scenario, model="rules", rng=seed, **params)
    for _ in range(steps):
        model.step()
    return model.datacollector.get_table_dataframe("asvo_actions")


def test_every_svo_is_offered_the_same_candidates_and_the_svo_acts_only_by_weighting_outcomes():
    with_svo, without = run_actions(use_svo=True), run_actions(use_svo=False)
    # the same RNG draws give the same candidate lists whatever the SVO (and without it) ...
    assert with_svo["candidates"].tolist() == without["candidates"].tolist()
    # ... and no candidate text carries an SVO word
    from socialsim.agents.asvo.svo import SVO_TYPES
    assert not any(t in c for c in with_svo["candidates"] for t in SVO_TYPES)
    # weighting the simulated outcomes by the SVO changes what is chosen from them
    assert (with_svo["action"] != without["action"]).mean() > 0.2
    by_svo = with_svo.groupby("svo")["others_gain"].size()
    assert len(by_svo) == 4


@pytest.mark.parametrize("n", [1, 5])
def test_each_agent_is_offered_n_candidates_and_chooses_among_them(n):
    """``n_candidates``, the doc's "N candidates" (3 by default): exactly N are offered, one is chosen."""
    actions = run_actions(steps=1, n_candidates=n)
    offered = actions["candidates"].str.split(" || ", regex=False)
    assert offered.map(len).eq(n).all()
    assert all(action in options for action, options in zip(actions["action"], offered, strict=True))


def test_altruists_choose_what_helps_others_more_than_competitors_from_the_same_candidates():
    actions = run_actions(use_svo=True, steps=4)
    effects = {t: (o, g) for t, o, g in SocietyModel("school-macro", model="rules", rng=7).society.catalogue([], 0)}
    assert effects  # the catalogue is read from the scenario
    label_rank = {s: i for i, s in enumerate(STANCES)}
    mean_label = actions.assign(r=actions["label"].map(label_rank)).groupby("svo")["r"].mean()
    assert mean_label["altruistic"] < mean_label["competitive"]  # lower = more cooperative, judged from effects


def test_theory_of_mind_changes_selections_in_meso_and_macro_scenarios():
    for scenario in ("school-meso", "workplace-macro"):
        with_tom = run_actions(scenario, steps=3, tom_scope="all")
        without = run_actions(scenario, steps=3, tom_scope="none")
        first_with, first_without = with_tom[with_tom["step"] == 1], without[without["step"] == 1]
        assert first_with["candidates"].tolist() == first_without["candidates"].tolist()  # same offers
        assert (with_tom["action"] != without["action"]).any(), scenario  # different choices


def test_the_judges_never_see_the_svo_and_label_from_effects():
    ctx = ops.JudgeContext("Amy", "A dorm.", "help Bob with the review", -0.5, 1.0)
    import dataclasses
    assert not {"svo", "stance", "label"} & {f.name for f in dataclasses.fields(ctx)}
    from socialsim.agents.asvo.svo import PERSONALITY, SVO_TYPES
    for op in (ops.JUDGE_ACTION, ops.CLASSIFY_BEHAVIOUR):
        prompt = op.prompt(ctx)
        # ("competitive" may appear in the category definitions: "no clear ... competitive intent")
        assert not any(t in prompt for t in SVO_TYPES if t != "competitive")
        assert not any(t in prompt for t in PERSONALITY.values()) and "orientation" not in prompt
    import random
    labels = [ops.CLASSIFY_BEHAVIOUR.rule(ops.JudgeContext("A", "", "x", 0.0, g), random.Random(0)).text
              for g in (1.0, 0.25, 0.0, -0.5, -1.0)]
    assert labels == list(STANCES)


def test_interactions_are_recorded_for_asvo():
    model = SocietyModel("school-meso", model="rules", rng=1)
    model.step()
    interactions = model.datacollector.get_table_dataframe("interactions")
    assert len(interactions) > 0
    assert set(interactions["kind"]) <= set(STANCES)
    names = {a.name for a in model.agents}
    assert set(interactions["initiator"]) <= names and set(interactions["receiver"]) <= names


def test_the_ablation_removes_the_svo_text_and_instructions_from_every_prompt():
    from socialsim.agents.asvo.svo import PERSONALITY

    desires = dict.fromkeys(ops.DESIRES, 5.0)
    for svo in ("competitive", None):
        prompts = [
            ops.PROPOSE_ACTIONS.prompt(ops.PlanContext("Amy", "Amy is a student.", svo, "A dorm.", [], desires, desires,
                                                       [], 3, [(c["text"], c["self"], c["others"]) for c in CATALOGUE])),
            ops.SIMULATE_OUTCOME.prompt(ops.OutcomeContext("Amy", svo, desires, "study", 0.5, 0.0)),
            ops.SELECT_ACTION.prompt(ops.SelectContext("Amy", svo, desires, desires, ["a", "b"], [desires, desires])),
            ops.UPDATE_DESIRE.prompt(ops.UpdateContext("Amy", "", svo, "comfort", 5, "study", "fine", {})),
        ]
        for prompt in prompts:
            if svo:
                assert PERSONALITY[svo] in prompt
            else:
                assert "orientation" not in prompt and "personality" not in prompt
                assert not any(text in prompt for text in PERSONALITY.values())


def _tables(scenario: str = "school-meso", steps: int = 3, seed: int = 3, **params):
    model = SocietyModel(scenario, model="rules", rng=seed, **params)
    for _ in range(steps):
        model.step()
    dc = model.datacollector
    return {t: dc.get_table_dataframe(t) for t in ("asvo_actions", "asvo_updates", "asvo_reflections")}


def test_svo_names_take_their_article():
    desires = dict.fromkeys(ops.DESIRES, 5.0)
    for svo, named in (("altruistic", "an altruistic"), ("individualistic", "an individualistic"),
                       ("prosocial", "a prosocial"), ("competitive", "a competitive")):
        for prompt in (ops.UPDATE_DESIRE.prompt(ops.UpdateContext("Amy", "", svo, "comfort", 5, "study", "fine", {})),
                       ops.SIMULATE_OUTCOME.prompt(ops.OutcomeContext("Amy", svo, desires, "study", 0.5, 0.0))):
            assert f"{named} social personality" in prompt


@pytest.mark.parametrize("op", [ops.UPDATE_DESIRE, ops.CHECK_UPDATE, ops.REFLECT_UPDATE])
def test_an_agents_desire_prompts_of_one_step_differ_only_after_its_action_and_consequence(op):
    """The desire comes last, so the embedded engine evaluates the agent's head (its description,
    action, consequence and earlier reflections) once for all its desires in a step."""
    def messages(desire, value):
        ctx = ops.UpdateContext("Amy", "Amy is a student in a dorm.", "altruistic", desire, value, "lend a pen",
                                "Alice can write her test.", {}, ["an earlier reflection"], proposed=2)
        return op.messages(ctx)

    comfort, recognition = messages("comfort", 5), messages("recognition", 7)
    assert comfort[0] == recognition[0]
    head = comfort[1]["content"][:len(os.path.commonprefix([comfort[1]["content"], recognition[1]["content"]]))]
    for shared in ("Amy is a student in a dorm.", "lend a pen", "Alice can write her test."):
        assert shared in head
    assert "comfort" not in head and "recognition" not in head


def test_reflection_runs_under_rules_and_each_update_switch_changes_what_is_recorded():
    on = _tables()
    assert len(on["asvo_reflections"]) > 0  # careless rule updates are caught, reflected on, retried
    retried = on["asvo_updates"][on["asvo_updates"]["attempts"] > 1]
    assert len(retried) > 0 and retried["accepted"].any()
    # no reflection: an unreasonable update is dropped at once, never retried, nothing reflected
    off = _tables(reflection=False)
    assert off["asvo_reflections"].empty and (off["asvo_updates"]["attempts"] <= 1).all()
    assert (~off["asvo_updates"]["accepted"]).any()
    # no check: every proposal is kept, careless ones included
    unchecked = _tables(check_updates=False)
    assert unchecked["asvo_updates"]["accepted"].all() and unchecked["asvo_reflections"].empty
    assert (unchecked["asvo_updates"]["after"] - unchecked["asvo_updates"]["before"]).abs().max() >= 3
    # no desire update: nothing moves but decay
    frozen = _tables(update_desires=False)
    assert (frozen["asvo_updates"]["after"] == frozen["asvo_updates"]["before"]).all()
    assert (on["asvo_updates"]["after"] != on["asvo_updates"]["before"]).any()


def test_switching_off_outcome_simulation_changes_choices_and_skips_the_calls():
    on, off = _tables(), _tables(simulate_outcomes=False)
    assert (on["asvo_actions"]["action"] != off["asvo_actions"]["action"]).any()
    model = SocietyModel("school-meso", model="rules", rng=3, simulate_outcomes=False)
    model.step()
    assert "SimulateOutcome" not in set(model.llm.ledger.frame()["op"])


def test_switching_off_decay_changes_recorded_desires():
    def desires(**params):
        model = SocietyModel("school-micro", model="rules", rng=3, update_desires=False, **params)
        for _ in range(3):
            model.step()
        frame = model.datacollector.get_agent_vars_dataframe()
        return frame[[c for c in frame.columns if c.startswith("desire_")]]
    decayed, kept = desires(), desires(decay_per_hour=0.0)
    assert (kept == 5.0).all().all()  # nothing moves without decay or updates
    assert (decayed < 5.0).any().any()


def test_the_satisfaction_cap_and_floor_bound_every_agents_desires():
    """The parameters reach the agents' decay (LinearDecay's own bounds are tested apart): the
    scenario's start of 5 is held at the cap, and decay stops at the floor."""
    model = SocietyModel("school-micro", model="rules", rng=3, update_desires=False, decay_per_hour=1.5,
                         satisfaction_floor=4.0, satisfaction_cap=4.5)  # 0.5 a 20-minute step
    values = lambda: {v for a in model.agents for v in a.state.values.values()}  # noqa: E731
    assert values() == {4.5}  # not 5: above the cap
    model.step()
    assert values() == {4.0}
    model.step()
    assert values() == {4.0}  # not 3.5: below the floor


def test_step_minutes_overrides_the_scenarios_step_length_in_the_decay():
    """Decay is a rate per simulated hour: a 60-minute step loses a whole point, not the scenario's
    20-minute third of one."""
    def after_one_step(**params):
        model = SocietyModel("school-micro", model="rules", rng=3, update_desires=False, **params)
        model.step()
        return {v for a in model.agents for v in a.state.values.values()}

    assert after_one_step(step_minutes=60) == {4.0}
    assert after_one_step() == {round(5 - 1 / 3, 6)}


def test_the_papers_context_text_reaches_the_planning_prompt():
    model = SocietyModel("school-micro", model="rules", rng=1)
    context = model.scenario_spec.context
    assert "bunk beds and compact study desks" in context  # the appendix's Figure 3, quoted
    agent = model.agent_named("Alice")
    ctx = ops.PlanContext(agent.name, agent.description, agent.svo, agent.setting, [], dict(agent.state.values),
                          dict(agent.state.expected), [], 3, model.society.catalogue(["Amy"], 0), context)
    assert context in ops.PROPOSE_ACTIONS.prompt(ctx)


@pytest.mark.parametrize("bad", ["", "  ", '{"$defs": {"Activity": {"properties": {}}}}', "**", "activities: []"])
def test_unusable_actions_are_refused(bad):
    assert ops.repair_action(bad) is None


def test_actions_are_repaired_or_replaced_and_counted(triad, monkeypatch):
    assert ops.repair_action('  "Action: help Bob"  ') == "help Bob"
    prompt = "You are Amy. Generate 3 possible activity sequences that can best fulfil your desires."
    assert ops.repair_action("Generate 3 possible activity sequences that can best fulfil your desires", prompt) is None

    def schema_text(ctx, rng):
        bad = ops.Activity(text='{"$defs": {"Activity": {}}}', stance="Neutral")
        return ops.candidates_model(ctx.n)(activities=[bad] * ctx.n)

    monkeypatch.setattr(ops.PROPOSE_ACTIONS, "rule", schema_text)
    model = SocietyModel(triad, model="rules", rng=1)
    model.step()
    assert all("$defs" not in a.action and a.action for a in model.agents)
    assert model.datacollector.get_model_vars_dataframe()["invalid_actions"].iloc[-1] == 3 * 3
    # and counted where a user looks first: the failures of ProposeActions (usage line, closing summary)
    assert model.llm.ledger.failures["ProposeActions"] == 9 and model.llm.ledger.totals()["llm_failures"] == 9
    model.step()  # the model column is a running total since step 1, as docs/asvo.md says, not the step's own count
    assert model.datacollector.get_model_vars_dataframe()["invalid_actions"].iloc[-2:].tolist() == [9, 18]


def test_the_report_names_the_arm_the_run_is(tmp_path):
    """A w/o-ASVO run's report says so, and sets its separability beside Table 2 as that arm's."""
    from socialsim.agents.asvo.metrics import report_sections

    def report(**params):
        model = SocietyModel("school-micro", model="rules", rng=1, **params)
        model.step()
        return "\n".join(report_sections(model, tmp_path))

    with_svo, without = report(), report(use_svo=False)
    assert "SVO (used): Alice: altruistic, Amy: competitive." in with_svo
    assert "| **ASVO@School (this run)** |" in with_svo
    assert "SVO (ablation w/o ASVO: assigned but not shown to the agents): Alice: altruistic" in without
    assert "| **w/o ASVO@School (this run)** |" in without and "| **ASVO@School (this run)** |" not in without


def test_the_report_says_how_many_proposed_actions_were_replaced(triad, monkeypatch, tmp_path):
    from socialsim.agents.asvo.metrics import report_sections

    honest = SocietyModel(triad, model="rules", rng=1)
    honest.step()
    assert not any("not actions" in part for part in report_sections(honest, tmp_path))

    def half_schema_text(ctx, rng):
        good = ops.Activity(text="help Bob with the dishes", stance="Cooperation")
        bad = ops.Activity(text="Text", stance="Neutral")
        return ops.candidates_model(ctx.n)(activities=[good, *[bad] * (ctx.n - 1)])

    monkeypatch.setattr(ops.PROPOSE_ACTIONS, "rule", half_schema_text)
    model = SocietyModel(triad, model="rules", rng=1)
    model.step()
    line = next(part for part in report_sections(model, tmp_path) if "not actions" in part)
    assert ": 6 of 9, each replaced" in line  # 3 agents x 3 candidates, 2 of each agent's 3 refused


def per_svo_table(parts: list[str]) -> str:
    return parts[parts.index("Per SVO type:") + 2]


def actions_in_per_svo_table(parts: list[str]) -> int:
    """The ``actions`` column of the report's per-SVO table, summed."""
    header, _, *rows = per_svo_table(parts).splitlines()
    column = [c.strip() for c in header.strip("|").split("|")].index("actions")
    return sum(int(row.strip("|").split("|")[column]) for row in rows)


@pytest.mark.figures
def test_the_report_says_when_the_rule_judge_s_labels_are_the_actors_declared_stances(triad, monkeypatch, tmp_path,
                                                                                     scripted):
    """An action outside the catalogue has no simulated effect but its declared stance's payoff, so
    the rule judge reads back the actor's own stance: the report must not pass that off as measured."""
    from socialsim.agents.asvo.metrics import report_sections

    honest = SocietyModel(triad, model="rules", rng=1)
    honest.step()
    sources = honest.datacollector.get_table_dataframe("asvo_actions")["effect_source"]
    assert set(sources) == {"catalogue"}
    honest_parts = report_sections(honest, tmp_path)
    assert not any("not in the scenario's catalogue" in part for part in honest_parts)
    assert actions_in_per_svo_table(honest_parts) == 3  # measured labels: every action counted
    assert (tmp_path / "figures" / "asvo_cooperation.png").exists()  # so the one left out below is the rule's doing

    def novel(ctx, rng):
        return ops.candidates_model(ctx.n)(activities=[
            ops.Activity(text=f"invent game {i} for everyone", stance="Cooperation") for i in range(ctx.n)])

    monkeypatch.setattr(ops.PROPOSE_ACTIONS, "rule", novel)
    model = SocietyModel(triad, model="rules", rng=1)
    model.step()
    actions = model.datacollector.get_table_dataframe("asvo_actions")
    assert set(actions["effect_source"]) == {"declared stance"}
    assert set(actions["label"]) == {"Cooperation"}  # the rule judge gave back the declared stance
    declared_dir = tmp_path / "declared"
    declared_dir.mkdir()
    parts = report_sections(model, declared_dir)
    line = next(p for p in parts if "not in the scenario's catalogue" in p)
    assert line.startswith("**3 of 3 actions") and "left out of the tables below" in line
    # ... and the tables leave those self-reports out: nothing measured, so no rates and no figure
    assert per_svo_table(parts) == "(nothing recorded)"
    assert "(No cooperation figure: no action has a measured label.)" in parts
    assert not (declared_dir / "figures" / "asvo_cooperation.png").exists()

    scripted(default="1")  # an LLM judge labels the same actions itself: nothing to warn of
    judged = SocietyModel(triad, model="rules", rng=1, judges=["openai/scripted-judge"])
    judged.step()
    assert set(judged.datacollector.get_table_dataframe("asvo_actions")["effect_source"]) == {"declared stance"}
    judged_parts = report_sections(judged, tmp_path)
    assert not any("not in the scenario's catalogue" in part for part in judged_parts)
    assert actions_in_per_svo_table(judged_parts) == 3  # an LLM judge's labels are measurements: counted


def test_the_report_counts_the_catalogue_actions_beside_the_declared_ones_in_both_tables(triad, monkeypatch, tmp_path):
    """Only the self-reports are left out: an action from the catalogue is measured by its simulated effect, in
    the per-SVO and the per-agent table alike, when the others' actions were outside the catalogue."""
    from socialsim.agents.asvo.metrics import report_sections

    def alice_from_the_catalogue(ctx, rng):
        text = "competition move toward Bob" if ctx.name == "Alice" else f"invent a game with {ctx.name}"
        return ops.candidates_model(ctx.n)(activities=[ops.Activity(text=text, stance="Competition"
                                                                    if ctx.name == "Alice" else "Cooperation")] * ctx.n)

    monkeypatch.setattr(ops.PROPOSE_ACTIONS, "rule", alice_from_the_catalogue)
    model = SocietyModel(triad, model="rules", rng=1)
    model.step()
    actions = model.datacollector.get_table_dataframe("asvo_actions").set_index("agent")
    assert actions["effect_source"].to_dict() == {"Alice": "catalogue", "Bob": "declared stance",
                                                  "Carol": "declared stance"}
    parts = report_sections(model, tmp_path)
    assert next(p for p in parts if "not in the scenario's catalogue" in p).startswith("**2 of 3 actions")
    assert actions_in_per_svo_table(parts) == 1
    per_agent = parts[parts.index("Per agent:") + 2].splitlines()
    assert len(per_agent) == 3 and per_agent[2].startswith("| Alice |")  # a header, its rule, Alice's row only


def test_a_classification_that_fell_back_leaves_the_action_unlabelled_not_neutral(triad, tmp_path, scripted):
    """The classifier's fallback is 'Neutral': counted as a label it would lower every cooperation
    rate toward a judgement nobody made."""
    from socialsim.agents.asvo.metrics import report_sections

    scripted(default="9")  # no such choice, again on the repair: every classification falls back
    model = SocietyModel(triad, model="rules", rng=1, judges=["openai/scripted-judge"])
    model.step()
    actions = model.datacollector.get_table_dataframe("asvo_actions")
    assert len(actions) == 3 and set(actions["label"]) == {""}
    frame = model.datacollector.get_model_vars_dataframe()
    assert frame["cooperation_rate"].isna().all()
    # nor are they counted in the run's rates, with or without self-declared labels: nothing was labelled
    run = ["cooperation_rate_run", "competition_index_run", "cooperation_rate_run_simulated",
           "competition_index_run_simulated", "self_declared_run"]
    assert frame[run].isna().all().all()
    assert model.llm.ledger.failures.get("ClassifyBehaviour", 0) >= 3
    assert any(p.startswith("**3 of 3 actions are unlabelled**") for p in report_sections(model, tmp_path))


def test_a_kept_belief_is_no_prediction_and_stays_out_of_the_tom_error(triad, tmp_path, scripted):
    """When the prediction's answer is unusable the observer keeps its previous belief (the
    simulation goes on); that belief is recorded but is no measure of theory of mind."""
    from socialsim.agents.asvo.metrics import report_sections
    from socialsim.dashboards import panels

    scripted(default="not a record")  # every ToM prediction falls back, on its LLM route only
    model = SocietyModel(triad, model="rules", rng=1,
                         routes={"PredictGuessedDesires": "openai/scripted", "PredictObservedDesires": "openai/scripted"})
    model.step()
    predictions = model.datacollector.get_table_dataframe("asvo_predictions")
    assert len(predictions) > 0 and set(predictions["status"]) == {"fallback"}
    assert all(a.tom_error is None for a in model.agents)  # no prediction, no error
    lines = report_sections(model, tmp_path)
    assert f"Not counted: {len(predictions)} of {len(predictions)} estimates" in "\n".join(lines)
    assert "(no usable prediction)" in lines
    assert panels.tom_predictions(panels.frames_from_model(model), 1).empty
    ruled = SocietyModel(triad, model="rules", rng=1)
    ruled.step()
    assert all(a.tom_error is not None for a in ruled.agents)
    assert set(ruled.datacollector.get_table_dataframe("asvo_predictions")["status"]) == {"rules"}


def test_the_run_rates_are_over_every_labelled_action_so_far():
    """A sweep's or batch_run's row is a run's last step: cooperation_rate there is one step's few
    actions; cooperation_rate_run is the rate over all of them, as the report's tables count it."""
    from socialsim.agents.asvo.metrics import cooperation_table

    model = SocietyModel("school-meso", model="rules", rng=1)
    for _ in range(6):
        model.step()
    frame = model.datacollector.get_model_vars_dataframe().reset_index(drop=True)
    actions = model.datacollector.get_table_dataframe("asvo_actions")
    for step in range(1, 7):
        upto = cooperation_table(actions[actions["step"] <= step].assign(run="run"), "run").iloc[0]
        row = frame.iloc[step - 1]
        assert row["cooperation_rate_run"] == pytest.approx(upto["cooperation_rate"], abs=1e-6)  # rounded to 6 places
        assert row["competition_index_run"] == pytest.approx(upto["competition_index"], abs=1e-6)
    assert frame["cooperation_rate_run"].iloc[-1] != frame["cooperation_rate"].iloc[-1]  # the last step alone differs


def test_an_action_naming_someone_is_an_interaction_with_them_alone_else_with_everyone_it_touches():
    model = SocietyModel("workplace-meso", model="rules", rng=2)
    for _ in range(4):
        model.step()
    interactions = model.datacollector.get_table_dataframe("interactions")
    assert len(interactions) > 0
    for (step, actor, content), rows in interactions.groupby(["step", "initiator", "content"]):
        observed = {o.name for o in model.agent_named(actor).observed()}
        named = {name for name in observed if name in content}
        assert set(rows["receiver"]) == (named or observed), (step, actor, content)
    assert any(len(rows) == 1 for _, rows in interactions.groupby(["step", "initiator"]))  # a named one
    assert any(len(rows) > 1 for _, rows in interactions.groupby(["step", "initiator"]))  # one to the team
    actions = model.datacollector.get_table_dataframe("asvo_actions")
    aloof = actions[(actions["others_gain"].abs() < 1e-9)
                    & ~actions.apply(lambda r: any(o.name in r["action"] for o in model.agent_named(r["agent"]).observed()),
                                     axis=1)]
    assert len(aloof) > 0  # actions that name no one and touch no one: no interaction
    for _, action in aloof.iterrows():
        assert not ((interactions["step"] == action["step"]) & (interactions["initiator"] == action["agent"])).any()


def test_the_dynamic_expected_switch_moves_expected_values_toward_the_values_only_when_on():
    def one_step(on):
        model = SocietyModel("school-micro", model="rules", rng=3, dynamic_expected=on)
        start = {a.name: dict(a.state.expected) for a in model.agents}
        model.step()
        return start, {a.name: (dict(a.state.expected), dict(a.state.values)) for a in model.agents}

    start, kept = one_step(False)
    assert all(kept[name][0] == start[name] for name in start)
    start, moved = one_step(True)
    for name, (expected, values) in moved.items():  # a tenth of the way to the step's value
        for d, before in start[name].items():
            assert expected[d] == pytest.approx(before + 0.1 * (values[d] - before), abs=1e-6)
    assert any(moved[name][0] != start[name] for name in start)


def test_tom_scope_observed_estimates_only_the_agents_one_observes(triad):
    def targets(scope):
        model = SocietyModel(triad, model="rules", rng=2, tom_scope=scope)
        model.step()
        p = model.datacollector.get_table_dataframe("asvo_predictions")
        return {(o, t) for o, t in zip(p["observer"], p["target"], strict=True)}

    observed = targets("observed")
    assert observed == {("Alice", "Bob"), ("Bob", "Carol"), ("Carol", "Bob")}  # the triad's edges
    assert targets("all") > observed and not targets("none")


def test_without_imagined_outcomes_the_choice_is_a_draw_among_the_candidates():
    model = SocietyModel("school-meso", model="rules", rng=3, simulate_outcomes=False)
    for _ in range(3):
        model.step()
    actions = model.datacollector.get_table_dataframe("asvo_actions")
    position = [row["candidates"].split(" || ").index(row["action"]) for _, row in actions.iterrows()]
    assert len(set(position)) > 1  # not always the first (nor any one place)


def test_an_action_naming_someone_is_no_interaction_with_another_whose_name_is_part_of_theirs(tmp_path):
    """Ann is not named by "help Anna": P1 is not by "help P10" (found on a 12-node Watts-Strogatz ring)."""
    data = {"name": "names", "context": "A room.", "default_arch": "asvo",
            "agents": [{"name": n, "description": f"{n} is a person."} for n in ("Bo", "Ann", "Anna")],
            "network": {"directed": True, "edges": [["Bo", "Ann"], ["Bo", "Anna"]]},
            "asvo": {"actions": CATALOGUE}}
    (path := tmp_path / "names.yaml").write_text(yaml.safe_dump(data))
    model = SocietyModel(str(path), model="rules", rng=1)
    bo = model.agent_named("Bo")
    bo.action, bo.effect, bo.label = "help Anna, then Ann's friend", (0.0, 1.0), "Cooperation"
    bo._record_interactions()
    bo.action = "help Anna with the homework"
    bo._record_interactions()
    rows = model.datacollector.get_table_dataframe("interactions")
    assert list(rows["receiver"]) == ["Ann", "Anna", "Anna"]


@pytest.mark.parametrize("stance, invented, rate", [
    ("Cooperation", "invent a game for everyone", "cooperation_rate"),
    ("Competition", "invent a race to win everyone's chips", "competition_index"),
])
def test_the_model_frame_carries_its_rates_without_self_declared_labels(triad, monkeypatch, scripted, stance,
                                                                        invented, rate):
    """With the rule judge, the model frame's cooperation_rate and competition_index counted an action
    outside the catalogue by the stance its actor declared (a self-report); their _simulated and
    _run_simulated columns leave those out, beside the existing columns, which keep their meaning."""
    def propose(ctx, rng):  # Alice invents a game of her stance; Bob and Carol take the catalogue's neutral move
        if ctx.name == "Alice":
            activity = ops.Activity(text=invented, stance=stance)
        else:
            activity = ops.Activity(text=next(t for t, _, _ in ctx.catalogue if t.startswith("neutral ")),
                                    stance="Neutral")
        return ops.candidates_model(ctx.n)(activities=[activity] * ctx.n)

    monkeypatch.setattr(ops.PROPOSE_ACTIONS, "rule", propose)
    model = SocietyModel(triad, model="rules", rng=1)
    model.step()
    model.step()
    frame = model.datacollector.get_model_vars_dataframe().iloc[-1]
    assert frame[rate] == pytest.approx(1 / 3)  # Alice's declared stance counted
    assert frame[f"{rate}_run"] == pytest.approx(1 / 3)
    assert frame[f"{rate}_simulated"] == 0.0 and frame[f"{rate}_run_simulated"] == 0.0
    assert frame["self_declared_run"] == pytest.approx(2 / 6)

    scripted(default="1")  # an LLM judge labels every action itself: nothing is self-declared
    judged = SocietyModel(triad, model="rules", rng=1, judges=["openai/scripted-judge"])
    judged.step()
    row = judged.datacollector.get_model_vars_dataframe().iloc[-1]
    assert row["self_declared_run"] == 0.0
    assert row[f"{rate}_simulated"] == row[rate]
    assert row[f"{rate}_run_simulated"] == row[f"{rate}_run"]
    # the label is the first judge's: the rule judge after an LLM judge declares nothing
    judged = SocietyModel(triad, model="rules", rng=1, judges=["openai/scripted-judge", "rules"])
    judged.step()
    assert judged.datacollector.get_model_vars_dataframe().iloc[-1]["self_declared_run"] == 0.0
