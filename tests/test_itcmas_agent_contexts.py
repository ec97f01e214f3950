"""What the ITCMA-S agent tells each operation, field by field, against what the agent held when
it asked: the rules read some fields and the model's prompt shows others, so a field left out or
taken from the wrong place changes a rating, a protention, a choice, a verdict or a prompt. Written
for the survivors of mutmut's run on ``agents/itcmas/agent.py`` (docs/testing.md). Rules engine."""

import json
import math

import pytest

from socialsim.agents.itcmas import agent as itcmas_agent
from socialsim.agents.itcmas import phenomenal
from socialsim.agents.itcmas.agent import action_type, kind_of
from socialsim.agents.itcmas.ltrha import FILTERED_PREFIX, home_owner, place_kind, success_rate
from socialsim.agents.itcmas.operations import CHAT, CHOOSE, ELIM, RANK_AGENTS, SOCIAL_FILTER
from socialsim.llm.questions import QUOTED
from socialsim.model.society import SocietyModel
from socialsim.spaces.actions import Action

STEPS = 12
VERBS = ("go to", "leave", "chat with", "use", "take", "put")


def valley(rng=3, **params):
    return SocietyModel("irollan-valley", model="rules", rng=rng, **params)


def _kind(model, agent, area):
    return place_kind(area, agent.name, agent.cfg.homes, not model.world.is_inside(area))


def _state(model, agent):
    kind = _kind(model, agent, agent.area)
    return {"name": agent.name, "area": agent.area, "goal": agent.goal, "driver": agent.emotion.driver,
            "describe": agent.emotion.describe(), "P": agent.emotion.P, "observation": agent.observation,
            "visited": list(agent.visited), "pi": list(agent.pi.keys), "imagine": list(agent.imagine.keys),
            "actions": list(agent.action_space), "filtered_lately": list(agent.filtered_lately),
            "kind": kind, "habits": {v: agent.habitus.preference(kind, v) for v in VERBS},
            "habits_text": agent.habitus.describe(kind), "resources": agent.resources,
            "topics": dict(model.society.topics), "intent": agent.intent, "thought": agent.last_thought}


@pytest.fixture(scope="module")
def asked(watch_asks):
    """Every (operation, agent's name, step, context, answer, the agent's state when it asked) of a
    12-step run with the matrix every 5 steps; for the matrix, every agent's state."""
    model = valley(max_candidates=40)
    agents = {a.unique_id: a for a in model.agents}
    rows = []

    def answered(op, ctx, agent_id, answer):
        agent = agents.get(agent_id)
        if agent is None:
            state = {a.name: {"last_action": a.last_action, "last_status": a.last_status, "resources": a.resources,
                              "goal": a.goal, "area": a.area} for a in model.agents}
            state["topics"] = dict(model.society.topics)
        else:
            state = _state(model, agent)
        rows.append((op.name, agent.name if agent else None, model.steps, ctx, answer.value, state))

    with pytest.MonkeyPatch.context() as patch:
        watch_asks(patch, answered)
        for _ in range(STEPS):
            model.step()
    return model, rows


def of(rows, op):
    return [(name, step, ctx, value, state) for o, name, step, ctx, value, state in rows if o == op.name]


def spoke(model, speaker, listener, first, last):
    """Whether ``speaker`` chatted to ``listener`` (and was heard) at a step in [first, last]."""
    return any(e.verb == "chat with" and e.ok and e.agent == speaker and e.target == listener and first <= e.step <= last
               for e in model.world.events)


def noun(action):
    return kind_of(action.item or action.target) if action.verb in ("use", "take", "put") else ""


# --- Elim ----------------------------------------------------------------------------------------------


def test_elim_is_told_each_action_type_with_its_verb_noun_the_drive_and_who_spoke_lately(asked):
    model, rows = asked
    society = model.society
    seen = {"noun": 0, "spoke": 0, "spoke_earlier": 0, "new": 0, "old": 0}
    for name, step, ctx, _, state in of(rows, ELIM):
        types = {}
        for a in state["actions"]:
            types.setdefault(action_type(a), []).append(a)
        first = types[ctx.action][0]
        assert ctx.action_space == list(types) and ctx.goal == state["goal"]
        assert f"Will '{ctx.action}' be relevant?" in ELIM.prompt(ctx)
        assert (ctx.verb, ctx.noun) == (first.verb, noun(first)), (name, step, ctx.action)
        assert ctx.driver == state["driver"]
        assert ctx.vocabulary == society.vocabulary and ctx.setting == society.setting
        talked = first.verb == "chat with" and spoke(model, first.target, name, step - 2, step - 1)
        assert ctx.spoke_to_me == talked, (name, step, ctx.action)
        assert ctx.new_place == (first.verb == "go to" and first.target not in state["visited"]), (name, step)
        seen["noun"] += bool(ctx.noun) and first.verb == "use"
        seen["spoke"] += talked
        seen["spoke_earlier"] += (first.verb == "chat with" and not talked
                                  and spoke(model, first.target, name, step - 3, step - 3))
        seen["new"] += ctx.new_place
        seen["old"] += first.verb == "go to" and not ctx.new_place
    assert all(seen.values()), seen


# --- protention ------------------------------------------------------------------------------------------


def test_each_protention_is_asked_about_one_candidate_with_the_agents_present_and_imagination(asked):
    model, rows = asked
    checked = {"take": 0, "go to": 0}
    for name, step, ctx, _, state in of(rows, model.society.protention_op):
        action = next(a for a in state["actions"] if a.text == ctx.action)
        assert (ctx.name, ctx.observation, ctx.driver_text) == (name, state["observation"], state["describe"])
        assert (ctx.verb, ctx.target, ctx.item) == (action.verb, action.target, action.item), (name, step)
        assert ctx.imagination == state["imagine"] and ctx.current_phrases == state["pi"]
        assert ctx.setting == model.society.setting
        prompt = model.society.protention_op.prompt(ctx)
        assert prompt.startswith(f"You are {name}. {state['observation']}") and f"If you now '{action.text}'," in prompt
        assert state["describe"] in prompt
        checked[ctx.verb] = checked.get(ctx.verb, 0) + 1
    assert checked["take"] and checked["go to"], checked


def test_only_a_move_is_imagined_from_memory_leaving_a_place_is_not(monkeypatch, watch_asks):
    """Leaving names the place one is in: its memories are no picture of where one goes."""
    model = valley(elimination=False, max_candidates=40)  # Elim would drop "leave" (rated 2)
    asked = []
    watch_asks(monkeypatch, lambda op, ctx, agent_id, answer: asked.append(ctx) if op.name == "Protention" else None)
    for _ in range(4):
        model.step()
    leaving = [ctx for ctx in asked if ctx.verb == "leave" and ctx.target in
               {m.area for a in model.agents for m in a.consciousness.long_term}]
    assert leaving and all(ctx.remembered_phrases == [] for ctx in leaving)


# --- the choice -------------------------------------------------------------------------------------------


def test_the_choice_is_told_the_agents_goal_mood_standing_and_each_candidates_social_facts(asked):
    model, rows = asked
    seen = {"topic": 0, "habit": 0, "filtered": 0, "chatted": 0, "chatted_before": 0, "spoke": 0, "new": 0, "noun": 0}
    for name, step, ctx, _, state in of(rows, CHOOSE):
        assert (ctx.name, ctx.goal, ctx.observation) == (name, state["goal"], state["observation"])
        assert (ctx.driver_text, ctx.driver, ctx.pleasure) == (state["describe"], state["driver"], state["P"])
        assert ctx.resources == state["resources"] and ctx.topic == state["topics"].get(state["area"])
        assert ctx.vocabulary == model.society.vocabulary and ctx.setting == model.society.setting
        tpc = state["topics"].get(state["area"])
        mood = "unknown" if tpc is None or math.isnan(tpc) else f"{tpc:+.2f}"
        assert ctx.social_text == (f"Your resources: {state['resources']:+.2f} (an action succeeds with probability "
                                   f"{success_rate(state['resources']):.2f}). The topic (atmosphere) here: {mood}. "
                                   f"{state['habits_text']}"), (name, step)
        seen["topic"] += mood != "unknown"
        recent = {a.name for a in model.agents if spoke(model, name, a.name, step - 2, step - 1)}
        for c in ctx.candidates:
            action = next(a for a in state["actions"] if a.text == c.action)
            assert (c.verb, c.target, c.noun) == (action.verb, action.target, noun(action)), (name, step, c.action)
            assert c.new_place == (c.verb == "go to" and c.target not in state["visited"])
            talked = c.verb == "chat with" and spoke(model, c.target, name, step - 2, step - 1)
            assert c.spoke_to_me == talked and c.chatted_lately == (c.verb == "chat with" and c.target in recent)
            assert c.habit == state["habits"][c.verb] and c.filtered_before == (c.action in state["filtered_lately"])
            seen["habit"] += c.habit > 0
            seen["filtered"] += c.filtered_before
            seen["chatted"] += c.chatted_lately
            seen["chatted_before"] += (c.verb == "chat with" and not c.chatted_lately
                                       and spoke(model, name, c.target, step - 3, step - 3))
            seen["spoke"] += c.spoke_to_me
            seen["new"] += c.new_place
            seen["noun"] += bool(c.noun)
    assert all(seen.values()), seen


def test_a_chats_words_are_asked_with_the_thought_the_place_and_the_public_rooms_elsewhere(asked):
    model, rows = asked
    society = model.society
    chats = of(rows, CHAT)
    chosen = {(name, step): ctx.candidates[value.action - 1] for name, step, ctx, value, _ in of(rows, CHOOSE)}
    assert chats
    moods = 0
    for name, step, ctx, _, state in chats:
        assert ctx.partner == chosen[(name, step)].target and chosen[(name, step)].verb == "chat with"
        assert (ctx.name, ctx.observation, ctx.thought) == (name, state["observation"], state["thought"])
        assert ctx.thought and ctx.place == state["area"] and ctx.topic == state["topics"].get(state["area"])
        assert ctx.places == [p for p in society.public_rooms if p != state["area"]] and ctx.setting == society.setting
        moods += ctx.topic is not None and not math.isnan(ctx.topic)
    assert moods


def test_the_social_filter_is_told_the_chosen_action_where_and_whose_it_is(asked):
    model, rows = asked
    homes = model.society.config.homes
    seen = {"home": 0, "item": 0}  # whose item: this run takes none (test_itcmas_agent_paths.py does)
    for name, step, ctx, _, state in of(rows, SOCIAL_FILTER):
        intent = state["intent"]
        assert (ctx.name, ctx.area, ctx.action, ctx.verb) == (name, state["area"], intent.text, intent.verb)
        assert ctx.area_owner == home_owner(state["area"], homes) and ctx.setting == model.society.setting
        item = model.world._item(intent.item) if intent.item else None
        assert ctx.item_owner == (item.owner if item else None), (name, step, intent.text)
        seen["home"] += ctx.area_owner is not None
        seen["item"] += intent.item is not None
        assert f"{name} wants to ({QUOTED}): {intent.text}." in SOCIAL_FILTER.prompt(ctx)
    assert all(seen.values()), seen


def test_the_matrix_is_told_each_agents_last_act_standing_goal_place_and_its_topic(asked):
    model, rows = asked
    ranks = of(rows, RANK_AGENTS)
    every = model.society.config.matrix_every
    assert [step for _, step, _, _, _ in ranks] == [s for s in range(1, STEPS + 1) if s % every == 0]
    for _, step, ctx, _, state in ranks:
        assert sorted(e.name for e in ctx.entries) == sorted(a.name for a in model.agents)
        for e in ctx.entries:
            mine = state[e.name]
            assert (e.action, e.status, e.resources, e.goal, e.area) == (
                mine["last_action"], mine["last_status"], mine["resources"], mine["goal"], mine["area"]), (step, e.name)
            assert e.topic == state["topics"][mine["area"]]
            assert e.action and e.status in ("done", "refused", "failed", "filtered")


# --- perceive -------------------------------------------------------------------------------------------


def test_every_comparison_of_fields_uses_the_scenarios_similarity_weights(monkeypatch):
    """Retention (A), protention (D), activation, blending and compression all compare fields by
    FieldSim; a similarity weighting set for the scenario must reach each of them."""
    model = valley(similarity={"gamma": 0.5, "theta": 0.25, "phi": 0.25, "a": 0.2, "pos": 0.8})
    weights = model.society.config.sim_weights
    assert weights != phenomenal.SimWeights()
    used = []

    def spy(name, f, position):
        def wrapped(*args, **kwargs):
            used.append((name, kwargs.get("w", args[position] if len(args) > position else None)))
            return f(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(itcmas_agent, "diff", spy("diff", phenomenal.diff, 2))
    monkeypatch.setattr(itcmas_agent, "blend", spy("blend", phenomenal.blend, 5))
    monkeypatch.setattr(phenomenal.Consciousness, "activate",
                        spy("activate", phenomenal.Consciousness.activate, 3))
    monkeypatch.setattr(phenomenal.Consciousness, "compress",
                        spy("compress", phenomenal.Consciousness.compress, 5))
    for _ in range(STEPS):
        model.step()
    assert {name for name, _ in used} == {"diff", "blend", "activate", "compress"}
    assert all(w == weights for _, w in used), [(n, w) for n, w in used if w != weights][:3]


def test_a_chat_answered_is_no_pain_and_an_answer_given_before_it_is_no_answer():
    model = valley()
    for _ in range(2):
        model.step()
    a, b = sorted(model.agents, key=lambda x: x.name)[:2]
    b.cell = a.cell
    decay, scale = a.cfg.emotion_decay, a.cfg.signal_scale
    step = model.steps + 1
    assert model.world.execute(b, Action("chat with", a.name, content="Earlier words."), step).ok
    assert model.world.execute(a, Action("chat with", b.name, content="Hello."), step + 1).ok
    assert model.world.execute(b, Action("chat with", a.name, content="Hi back."), step + 2).ok
    pain = a.emotion.pain
    a.model.steps = step + 3  # a's chat two steps ago was answered the step after it
    a.perceive()
    assert a.emotion.pain == pytest.approx(pain * decay)
    # c's chat at step + 2 to a, to which a spoke only before (at step + 1): still unanswered
    c = sorted(model.agents, key=lambda x: x.name)[2]
    c.cell = a.cell
    assert model.world.execute(a, Action("chat with", c.name, content="Before."), step + 1).ok
    assert model.world.execute(c, Action("chat with", a.name, content="After."), step + 2).ok
    pain = c.emotion.pain
    c.model.steps = step + 4
    c.perceive()
    assert c.emotion.pain == pytest.approx(pain * decay + 0.5 * scale)


def test_without_protention_or_habitus_a_candidate_expects_nothing_and_has_no_habit(monkeypatch, watch_asks):
    model = valley(protention=False, habitus=False, max_candidates=40)
    chosen = []
    watch_asks(monkeypatch, lambda op, ctx, agent_id, answer: chosen.append(ctx) if op.name == CHOOSE.name else None)
    for _ in range(4):
        model.step()
    candidates = [c for ctx in chosen for c in ctx.candidates]
    assert candidates and {(c.protention, c.change, c.habit) for c in candidates} == {("", 0.0, 0.0)}
    assert all(a.protention_field is None for a in model.agents)


def test_only_the_activation_k_memories_most_like_the_present_come_to_mind():
    for k in (1, 3):
        model = valley(activation_k=k)
        counts = []
        for _ in range(6):
            model.step()
            counts += [len(a.activated) for a in model.agents]
        assert max(counts) == k, k


# --- act and allocate ------------------------------------------------------------------------------------


def test_each_act_row_is_the_agents_step_place_choice_thought_mood_and_standing(asked):
    model, rows = asked
    table = model.datacollector.get_table_dataframe("itcmas_actions")
    frame = model.datacollector.get_agent_vars_dataframe()  # each agent after each step
    ids = {a.name: a.unique_id for a in model.agents}
    choices = {(name, step): (ctx, value, state) for name, step, ctx, value, state in of(rows, CHOOSE)}
    every = model.society.config.matrix_every
    assert sorted(zip(table["agent"], table["step"], strict=True)) == sorted(choices)
    compared = 0
    for row in table.itertuples():
        ctx, value, state = choices[(row.agent, row.step)]
        chosen = ctx.candidates[value.action - 1].action
        assert row.area == state["area"] and row.thought == value.thought
        done = row.action.removeprefix(FILTERED_PREFIX)
        assert done == chosen or (done.startswith(f"{chosen}: ") and chosen.startswith("chat with ")), (done, chosen)
        assert (row.actions_available, row.candidates) == (len(state["actions"]), len(ctx.candidates))
        after = frame.loc[(row.step, ids[row.agent])]
        assert row.status == after["status"] and row.action == after["action"]
        if row.step % every:  # no matrix after the act: the step ends with the act's mood and standing
            assert (row.driver, row.P, row.A, row.D, row.resources) == (
                after["driver"], after["P"], after["A"], after["D"], after["resources"]), (row.agent, row.step)
            compared += 1
    assert compared


def test_every_chat_done_is_an_interaction_of_kind_chat_with_its_words(asked):
    model, _ = asked
    said = [(e.step, e.agent, e.target, "chat", e.content) for e in model.world.events
            if e.verb == "chat with" and e.ok]
    table = model.datacollector.get_table_dataframe("interactions")
    assert said and sorted(map(tuple, table[["step", "initiator", "receiver", "kind", "content"]].values.tolist())) == sorted(said)


def test_a_done_act_is_learned_as_a_habit_of_the_kind_of_place_it_was_done_in():
    model = valley()
    model.step()
    agent = next(a for a in model.agents if a.area == a.cfg.homes.get(a.name))  # at home
    door = next(a for a in agent.world.action_space(agent) if a.verb == "go to")
    before = {kind: dict(counts) for kind, counts in agent.habitus.counts.items()}
    agent.intent, agent.filter_verdict = door, False
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(itcmas_agent, "success_rate", lambda resources: 1.0)
        agent.act()
    assert agent.last_status == "done" and agent.area == door.target
    assert agent.habitus.counts["own home"]["go to"] == before.get("own home", {}).get("go to", 0) + 1
    assert sum(sum(c.values()) for c in agent.habitus.counts.values()) == sum(
        sum(c.values()) for c in before.values()) + 1


def test_an_act_done_outside_is_learned_as_a_habit_of_the_outside():
    model = valley()
    model.step()
    outside = next(a.name for a in model.world.areas.values() if a.kind == "outside")
    agent = sorted(model.agents, key=lambda a: a.name)[0]
    agent.cell = model.world.cells_of(outside)[0]
    door = next(a for a in agent.world.action_space(agent) if a.verb == "go to")
    agent.intent, agent.filter_verdict = door, False
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(itcmas_agent, "success_rate", lambda resources: 1.0)
        agent.act()
    assert agent.last_status == "done" and agent.habitus.counts["outside"]["go to"] == 1


def test_the_matrix_table_says_the_ranking_each_ranked_agents_change_and_everyones_resources():
    model = valley(matrix_every=2, s_max=0.123456789)  # changes with more digits than the table keeps
    held = {}  # step -> everyone's resources when it began (only the matrix changes them)
    for step in range(1, 6):
        held[step] = {a.name: a.resources for a in model.agents}
        if step < 5:
            model.step()
    rows = model.datacollector.get_table_dataframe("matrix")
    assert list(rows["step"]) == [2, 4]
    for row in rows.itertuples():
        ranking = row.ranking.split(",")
        before, after = held[row.step], held[row.step + 1]
        assert sorted(ranking) == sorted(before)
        deltas, resources = json.loads(row.deltas), json.loads(row.resources)
        assert deltas == {name: round(after[name] - before[name], 6) for name in ranking}
        assert list(deltas) == ranking and resources == {name: round(after[name], 6) for name in sorted(after)}
        assert list(resources) == sorted(after)
        assert deltas[ranking[0]] == round(0.123456789, 6) and deltas[ranking[-1]] == -round(0.123456789, 6)
