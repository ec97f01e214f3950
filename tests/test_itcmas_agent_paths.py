"""What the ITCMA-S agent takes in, tells the model (or the rule standing in for it) and records of
its own steps: a chat heard and a chat ignored, the impression's places and mood, the candidates
Elim keeps and their order, the protention of the chosen action, each context's social facts, and
what an act leaves behind. Written for the hand mutants of ``agents/itcmas/agent.py`` that survived
the ITCMA-S tests (docs/testing.md). Rules engine."""

import asyncio
import math

import pytest

from socialsim.agents.itcmas.phenomenal import field_from_text
from socialsim.model.society import SocietyModel
from socialsim.spaces.actions import Action

STEPS = 12


def valley(rng=3, **params):
    return SocietyModel("irollan-valley", model="rules", rng=rng, **params)


@pytest.fixture(scope="module")
def recorded(watch_asks):
    """A run, every (operation, agent, step, context, answer) its agents asked, what each agent's
    state held when it asked (taken apart from the agent's own helpers; deliberation changes none
    of it), and each step's protention."""
    model = valley(max_candidates=40)
    agents = {a.unique_id: a for a in model.agents}
    asked = []
    kept = {}  # (agent, step) -> the protention field the agent keeps for its next step

    def answered(op, ctx, agent_id, answer):
        agent = agents.get(agent_id)
        state = {}
        if agent is not None:
            state = {"memory": list(agent.memory), "imagine": list(agent.imagine.keys) if agent.imagine else [],
                     "pi": list(agent.pi.keys) if agent.pi else [],
                     "long_term": [(m.area, list(m.keys)) for m in agent.consciousness.long_term],
                     "people": sorted(p.name for p in model.world.people_in(agent.area, besides=agent)),
                     "area": agent.area}
        asked.append((op.name, agent.name if agent else None, model.steps, ctx, answer.value, state))

    with pytest.MonkeyPatch.context() as patch:
        watch_asks(patch, answered)
        for _ in range(STEPS):
            model.step()
            kept.update({(a.name, model.steps): a.protention_field for a in model.agents})
    return model, asked, kept


def of(asked, op):
    return [(name, step, ctx, value, state) for o, name, step, ctx, value, state in asked if o == op]


def chats_to(model, name, step):
    return [e for e in model.world.events if e.verb == "chat with" and e.ok and e.target == name and e.step == step]


# --- perceive -------------------------------------------------------------------------------------


def test_a_chat_heard_last_step_is_remembered_and_names_who_spoke_for_the_social_filter(recorded):
    model, asked, _ = recorded
    filters = of(asked, "SocialFilter")
    heard = 0
    for name, step, ctx, _, state in filters:
        said = chats_to(model, name, step - 1)
        assert ctx.addressed_by == sorted({e.agent for e in said}), (name, step)
        assert ctx.people_here == state["people"]
        for event in said:
            heard += 1
            assert f'{event.agent} said to me: "{event.content}"' in " ".join(state["memory"])
    assert heard > 0


def _perceive_at(agent, step):
    agent.model.steps = step
    agent.perceive()


def _beside(agent, other):
    other.cell = agent.cell  # in the same area, so a chat between them is possible


def test_being_spoken_to_is_felt_as_desire_and_a_chat_left_unanswered_as_pain():
    model = valley()
    for _ in range(2):
        model.step()
    a, b, c = sorted(model.agents, key=lambda x: x.name)[:3]
    _beside(a, b)
    _beside(a, c)
    step = model.steps + 1
    assert model.world.execute(a, Action("chat with", b.name, content="Hello there."), step).ok
    assert model.world.execute(c, Action("chat with", b.name, content="Nice day."), step).ok
    scale, decay = b.cfg.signal_scale, b.cfg.emotion_decay
    desire, pain = b.emotion.desire, b.emotion.pain
    _perceive_at(b, step + 1)
    assert b.emotion.desire == pytest.approx(desire * decay + 2 * 0.5 * scale)
    assert b.emotion.pain == pytest.approx(pain * decay)
    assert b.addressed_by == sorted([a.name, c.name])
    assert f'{a.name} said to me: "Hello there."' in " ".join(b.memory)
    # two steps on: a spoke to b, who never answered; c spoke to a, which is no answer from b
    assert model.world.execute(c, Action("chat with", a.name, content="Fine."), step + 1).ok
    pain = a.emotion.pain
    _perceive_at(a, step + 2)
    assert a.emotion.pain == pytest.approx(pain * decay + 0.5 * scale)
    pain = a.emotion.pain
    _perceive_at(a, step + 3)  # a chat three steps old is no longer waited on
    assert a.emotion.pain == pytest.approx(pain * decay)


def test_the_impression_places_people_furniture_and_doors_where_they_are_and_carries_the_mood(recorded):
    model, _, _ = recorded
    checked = {"person": 0, "furniture": 0, "door": 0}
    for agent in model.agents:
        field = agent.perceive_field()
        me = agent.cell.coordinate
        for phrase, (angle, _, distance) in field.position_of().items():
            if phrase.startswith("a person named "):
                other = next(o for o in model.agents if phrase.startswith(f"a person named {o.name} "))
                where, kind = other.cell.coordinate, "person"
            elif phrase.startswith("a door to "):
                there = model.world.areas[phrase.removeprefix("a door to ")]
                here = model.world.areas[agent.area]
                cx, cy = there.x + there.width / 2, there.y + there.height / 2
                where = (int(min(max(cx, here.x), here.x + here.width - 1)),
                         int(min(max(cy, here.y), here.y + here.height - 1)))
                kind = "door"
            elif phrase.removeprefix("the ").split(" in the ")[0] in model.world.furniture:
                where = model.world.furniture[phrase.removeprefix("the ").split(" in the ")[0]].coordinate
                kind = "furniture"
            else:
                continue
            assert distance == pytest.approx(math.hypot(where[0] - me[0], where[1] - me[1])), phrase
            assert angle == pytest.approx(math.atan2(where[1] - me[1], where[0] - me[0])), phrase
            checked[kind] += where != me
        assert agent.pi.pad == agent.emotion.pad  # the impression is stored with the mood it was felt in
    assert all(checked.values()), checked


# --- deliberate -----------------------------------------------------------------------------------


def test_elim_keeps_the_types_rated_at_or_above_the_threshold_or_else_the_best_rated(recorded):
    model, asked, _ = recorded
    threshold, most = model.society.config.elim_threshold, 40  # the fixture's max_candidates
    ratings, at_threshold = {}, 0
    for name, step, ctx, value, _ in of(asked, "Elim"):
        ratings.setdefault((name, step), {})[ctx.action] = value.value
    for name, step, ctx, _, _ in of(asked, "ITCMAChooseAction"):
        mus = ratings[(name, step)]
        kept = {mu for mu in mus.values() if mu >= threshold} or {max(mus.values())}
        offered = [c.mu for c in ctx.candidates]
        assert set(offered) <= kept, (name, step)
        if len(offered) < most:  # nothing cut by max_candidates: every kept rating is offered
            assert set(offered) == kept, (name, step)
            at_threshold += threshold in kept and max(mus.values()) > threshold
        assert offered == sorted(offered, reverse=True)  # best rated first
    assert at_threshold > 0


def test_ties_in_rating_are_listed_in_a_drawn_order_not_the_worlds(recorded):
    _, asked, _ = recorded
    elims = {}
    for name, step, ctx, _, _ in of(asked, "Elim"):
        elims.setdefault((name, step), ctx.action_space)
    reordered = 0
    for name, step, ctx, _, _ in of(asked, "ITCMAChooseAction"):
        order = elims[(name, step)]
        for mu in {c.mu for c in ctx.candidates}:
            tied = [c.action for c in ctx.candidates if c.mu == mu]
            types = [next(t for t in order if a == t or a.startswith(t.split(" ")[0])) for a in tied]
            reordered += types != sorted(types, key=order.index)
    assert reordered > 0


def test_when_no_type_reaches_the_threshold_only_the_best_rated_are_kept(monkeypatch, watch_asks):
    model = valley(elim_threshold=5, max_candidates=40)
    ratings, chosen = {}, []

    def answered(op, ctx, agent_id, answer):
        if op.name == "Elim":
            ratings.setdefault((agent_id, model.steps), []).append(answer.value.value)
        if op.name == "ITCMAChooseAction":
            chosen.append((agent_id, model.steps, [c.mu for c in ctx.candidates]))

    watch_asks(monkeypatch, answered)
    for _ in range(4):
        model.step()
    none_reached = [(mus, ratings[(a, s)]) for a, s, mus in chosen if max(ratings[(a, s)]) < 5]
    assert none_reached
    for mus, rated in none_reached:
        assert set(mus) == {max(rated)}


def test_a_move_is_imagined_from_the_latest_memory_of_the_place(recorded):
    _, asked, _ = recorded
    remembered = 0
    for _, _, ctx, _, state in of(asked, "Protention"):
        if ctx.verb != "go to":
            assert ctx.remembered_phrases == []
            continue
        memories = [keys for area, keys in state["long_term"] if area == ctx.target]
        assert ctx.remembered_phrases == (memories[-1] if memories else [])
        remembered += bool(memories) and memories[0] != memories[-1]
    assert remembered > 0


def test_each_candidate_carries_the_change_its_protention_expects_and_the_chosen_ones_is_kept(recorded):
    model, asked, kept = recorded
    changes = [c.change for _, _, ctx, _, _ in of(asked, "ITCMAChooseAction") for c in ctx.candidates]
    assert any(ch > 0 for ch in changes) and len(set(changes)) > 3
    for name, step, ctx, value, _ in of(asked, "ITCMAChooseAction"):
        chosen = ctx.candidates[value.action - 1]
        field = kept[(name, step)]
        assert field is not None and field.step == step + 1
        assert list(field.keys) == list(field_from_text(chosen.protention, {}, step=step + 1).keys), (name, step)


def test_a_chat_says_what_the_chat_operation_answered_with_what_the_partner_said_lately(recorded):
    model, asked, _ = recorded
    said = {(e.agent, e.target, e.step): e.content for e in model.world.events if e.verb == "chat with" and e.ok}
    chats = of(asked, "ITCMAChat")
    assert chats
    heard = 0
    for name, step, ctx, value, _ in chats:
        if (name, ctx.partner, step) in said:
            assert said[(name, ctx.partner, step)] == value.text and value.text
        earlier = [c for (a, t, s), c in said.items() if a == ctx.partner and t == name and step - 3 <= s < step]
        assert sorted(ctx.heard) == sorted(earlier), (name, step)
        heard += bool(ctx.heard)
    assert heard > 0


def test_the_choice_is_told_the_past_frames_the_latest_memories_and_what_is_only_imagined(recorded):
    _, asked, _ = recorded
    imagined = 0
    for _, step, ctx, _, state in of(asked, "ITCMAChooseAction"):
        assert not any(line.startswith(f"step {step} in") for line in ctx.retention)  # not the present
        assert ctx.retention[len(ctx.retention) - len(state["memory"][-3:]):] == state["memory"][-3:]
        extra = [k for k in state["imagine"] if k not in state["pi"]]
        assert any(line.startswith("imagined here: ") for line in ctx.memory) == bool(extra)
        imagined += bool(extra)
    assert imagined > 0


def test_the_social_filter_is_told_whose_item_and_whose_home_it_is():
    model = valley()
    model.step()
    agent = next(a for a in model.agents if a.name == "LL")
    owned = next(it for it in model.world.items.values() if it.owner and it.owner != agent.name and not it.held)
    homes = set(model.society.config.homes.values())
    furniture = next(f for f in model.world.furniture.values()  # in a public room: only the item is someone's
                     if f.area not in homes and model.world.is_inside(f.area))
    owned.holder = furniture.name
    agent.cell = model.world.cells_of(furniture.area)[0]
    agent.addressed_by = []
    agent.intent = Action("take", furniture.name, owned.label)
    asyncio.run(agent.judge_intent())
    assert agent.filter_verdict  # taking someone else's item
    agent.addressed_by = ["WM"]
    agent.intent = Action("leave", agent.area)
    asyncio.run(agent.judge_intent())
    assert agent.filter_verdict  # walking away from someone who just spoke
    agent.addressed_by = []
    asyncio.run(agent.judge_intent())
    assert not agent.filter_verdict


# --- act ------------------------------------------------------------------------------------------


def test_an_act_leaves_its_status_its_memory_and_its_feeling_once():
    model = valley()
    model.step()
    agent = sorted(model.agents, key=lambda a: a.name)[0]
    scale = agent.cfg.signal_scale

    def act(action, verdict=False):
        agent.intent, agent.filter_verdict = action, verdict
        pain, desire, rows = agent.emotion.pain, agent.emotion.desire, len(table(model))
        agent.act()
        agent.act()  # the intent is spent: a second call does nothing
        assert len(table(model)) == rows + 1
        return table(model).iloc[-1], agent.emotion.pain - pain, agent.emotion.desire - desire

    row, hurt, _ = act(Action("go to", "nowhere at all"))
    assert (row["status"], bool(row["reason"])) == ("refused", True)
    assert hurt == pytest.approx(scale) and agent.memory[-1].endswith(f"I tried to go to nowhere at all, but {row['reason']}")
    row, hurt, _ = act(Action("use", "a bed"), verdict=True)
    assert row["status"] == "filtered" and hurt == pytest.approx(scale)
    assert agent.memory[-1].endswith("I wanted to use a bed, but it was filtered as harmful to others")
    door = next(a for a in agent.world.action_space(agent) if a.verb == "go to")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("socialsim.agents.itcmas.agent.success_rate", lambda resources: 0.0)  # eq. 18 at its floor
        row, hurt, _ = act(door)
    assert row["status"] == "failed" and hurt == pytest.approx(scale)
    assert agent.memory[-1].endswith(f"I tried to {door.text}, but I failed")
    door = next(a for a in agent.world.action_space(agent) if a.verb == "go to")
    row, _, gained = act(door)
    assert row["status"] == "done" and gained == pytest.approx(scale)
    assert agent.memory[-1].endswith(f"I did: {door.text}")


def table(model):
    return model.datacollector.get_table_dataframe("itcmas_actions")


def test_homes_must_name_the_scenarios_agents_and_areas():
    with pytest.raises(ValueError, match=r"homes: unknown agent 'Nobody'"):
        valley(homes={"Nobody": "AY's Home"})


def test_an_agents_own_goal_is_its_trait_and_the_matrix_needs_more_than_two_agents(tmp_path):
    import yaml

    from socialsim.scenarios.loader import DATA_DIR

    spec = yaml.safe_load((DATA_DIR / "irollan-valley.yaml").read_text())
    spec["agents"][0]["traits"] = {"goal": "Read every book in the valley."}

    def society(n):
        spec["agents"] = spec["agents"][:n]
        names = {a["name"] for a in spec["agents"]}
        spec["map"]["items"] = [it for it in spec["map"]["items"] if it.get("owner") in (None, *names)]
        spec["itcmas"]["homes"] = {a["name"]: a["start_area"] for a in spec["agents"]}
        spec["itcmas"]["matrix_every"] = 1
        path = tmp_path / f"valley-{n}.yaml"
        path.write_text(yaml.safe_dump(spec))
        model = SocietyModel(str(path), model="rules", rng=1)
        for _ in range(2):
            model.step()
        return model

    three = society(3)
    assert three.society.matrix_runs == 2
    assert three.agent_named("AY").goal == "Read every book in the valley."
    assert three.agent_named("SG").goal == three.society.config.goal
    assert society(2).society.matrix_runs == 0
