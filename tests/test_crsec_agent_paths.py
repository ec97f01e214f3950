"""The CRSEC agent's paths that a rules run takes rarely or never on its own, and what it tells the
model (or the rule standing in for it) on the common ones: the persuasion inputs of a heard
conversation, each speaker's own memories, a synthesized norm said with the member that covers the
act, a norm's theme taken from the tracked norm it matches, a conflict a model sees where no held
norm is breached, a model's empty line, an action the world cannot parse or carry out, and when
synthesis is tried. Written for the real gaps a mutmut run on ``agents/crsec/agent.py`` left
(docs/testing.md). Rules engine, with scripted answers where only a model would take the path."""

import asyncio
import json

import pytest

from socialsim.model.society import SocietyModel

# persuasion settings unlike the defaults and unlike each other, so a context field read from the
# wrong setting (or left at its default) shows
PERSUASION = {"contrary_rate": 0.37, "recall_overlap": 0.6, "accept_against": 0.11, "accept_for": 0.93,
              "accept_neutral": 0.52}


def society(steps, rng=3, **kwargs):
    model = SocietyModel("hobbs-cafe", arch="crsec", model="rules", rng=rng, **kwargs)
    for _ in range(steps):
        model.step()
    return model


def record_asks(patch, watch_asks) -> list[tuple[str, int, object]]:
    """Every (operation, agent id, context) the agents ask, in the order answered."""
    asked = []
    watch_asks(patch, lambda op, ctx, agent_id, answer: asked.append((op.name, agent_id, ctx)))
    return asked


def recalled(agent) -> set[str]:
    """Everything ``agent`` could recall, as its prompts show a memory."""
    return {f"(step {m.step}, {m.kind}) {m.text}" for m in agent.stream.records}


@pytest.fixture(scope="module")
def asked_run(watch_asks):
    """A 30-step run with non-default persuasion settings, and every context its agents asked with."""
    with pytest.MonkeyPatch.context() as patch:
        asked = record_asks(patch, watch_asks)
        model = society(30, **PERSUASION)
    return model, asked


def test_a_heard_conversation_is_weighed_with_the_receivers_stance_memories_and_persuasion_settings(asked_run):
    model, asked = asked_run
    agents = {a.unique_id: a for a in model.agents}
    settings = model.society.settings
    heard = [(agents[i], ctx) for op, i, ctx in asked if op == "IdentifyNormFromChat"]
    assert len(heard) >= 10
    contrary_seen = 0
    for agent, ctx in heard:
        assert ctx.topic in {t.name for t in settings.tracked_norms}
        assert ctx.stance == agent.stance(ctx.topic)
        expected = {"for": 0.93, "against": 0.11}.get(ctx.stance, 0.52)
        assert ctx.accept == expected, (agent.name, ctx.topic, ctx.stance)
        assert (ctx.contrary_rate, ctx.recall_overlap) == (0.37, 0.6)
        # the settling norm the catalogue offers on the topic, and its contrary (held or not, it is on the topic)
        assert ctx.suggestion is not None and ctx.suggestion.about == ctx.topic and not ctx.suggestion.opposes
        if ctx.contrary is not None:
            contrary_seen += 1
            assert ctx.contrary.about == ctx.topic and ctx.contrary.opposes
        # the receiver's own memories, of the conversation's matter
        assert ctx.memories and set(ctx.memories) <= recalled(agent), agent.name
        assert ctx.matter and ctx.matter in ctx.source
    assert contrary_seen > 0
    # an agent not holding the contrary norm is offered it
    assert any(ctx.contrary is not None and not agent.norms.holds_content(ctx.contrary.content)
               for agent, ctx in heard)


def test_each_speaker_of_a_conversation_is_prompted_with_its_own_memories(asked_run):
    model, asked = asked_run
    agents = {a.name: a for a in model.agents}
    turns = [ctx for op, _, ctx in asked if op == "ConverseTurn"]
    assert {ctx.role for ctx in turns} == {"sender", "receiver"}
    own_only = 0
    for ctx in turns:
        speaker, partner = agents[ctx.speaker], agents[ctx.partner]
        assert ctx.memories and set(ctx.memories) <= recalled(speaker), (ctx.role, ctx.speaker)
        own_only += bool(set(ctx.memories) - recalled(partner))
        assert ctx.recall_overlap == 0.6
    assert own_only > len(turns) / 2  # mostly memories the partner does not have


def test_a_thought_is_weighed_with_the_observers_persuasion_settings(asked_run):
    model, asked = asked_run
    agents = {a.unique_id: a for a in model.agents}
    thoughts = [(agents[i], ctx) for op, i, ctx in asked if op == "IdentifyNormFromThought"]
    assert {ctx.stance for _, ctx in thoughts} >= {"for", "against"}
    for agent, ctx in thoughts:
        assert ctx.stance == agent.stance(ctx.topic)
        assert ctx.accept == {"for": 0.93, "against": 0.11}.get(agent.stance(ctx.topic), 0.52)
        assert (ctx.contrary_rate, ctx.recall_overlap) == (0.37, 0.6)
        assert ctx.memories and set(ctx.memories) <= recalled(agent)
        assert ctx.matter and ctx.matter in ctx.source  # what was seen being done, as the thought says it
    # the thought itself is had in the observer's stance, recalling its own memories
    had = [(agents[i], ctx) for op, i, ctx in asked if op == "GenerateThought"]
    assert {ctx.stance for _, ctx in had} >= {"for", "against"}
    for agent, ctx in had:
        assert ctx.stance == agent.stance(ctx.fact.concerns[0]) and ctx.recall_overlap == 0.6
        assert set(ctx.memories) <= recalled(agent)


def test_a_heard_conversation_persuades_by_the_receivers_stance_and_the_contrary_rate():
    """Talk alone (no thoughts): the receivers of norm talk are the ones seen breaching, so mostly
    against the norm; they take it as often as ``accept_against`` lets them, and answer with the
    contrary norm only as often as ``contrary_rate`` does."""
    def heard(model):
        changes = model.datacollector.get_table_dataframe("norm_changes")
        return changes[(changes["origin"] == "conversation") & (changes["event"] == "matched")]

    never = heard(society(30, enable_thoughts=False, accept_against=0.0, contrary_rate=0.0))
    assert never.empty  # against, never persuaded, no contrary norm: nothing taken from talk
    taken = heard(society(30, enable_thoughts=False, accept_against=1.0, contrary_rate=0.0))
    assert len(taken) > 0 and (taken["opposes"] == "").all()
    contrary = heard(society(30, enable_thoughts=False, accept_against=0.0, contrary_rate=1.0))
    assert len(contrary) > 0 and (contrary["opposes"] != "").all()


def test_a_synthesized_norm_is_said_with_the_member_that_covers_the_act(asked_run):
    model, _ = asked_run
    chats = model.datacollector.get_table_dataframe("conversations")
    openings = chats[chats["turn"] == 0]
    said_abstract = 0
    for _, line in openings.iterrows():
        sender = model.agent_named(line["sender"])
        for norm in (n for n in sender.norms.norms if n.origin == "synthesis" and n.content in line["text"]):
            member = next(sender.norms.get(m) for m in norm.members if line["topic"] in sender.norms.get(m).covers)
            assert f"{norm.content} ({member.content})" in line["text"], line["text"]
            said_abstract += 1
    assert said_abstract > 0


def test_a_created_norm_outside_the_catalogue_takes_the_theme_of_the_tracked_norm_it_matches(scripted):
    drafts = [{"content": "Nobody should smoke a cigarette inside the cafe.", "type": "injunctive", "utility": 90},
              {"content": "Keep your voice low and quiet when others read.", "type": "injunctive", "utility": 80},
              {"content": "Greet the barista by name every morning.", "type": "descriptive", "utility": 40}]
    scripted(default=json.dumps({"norms": drafts}))
    model = society(1, routes={"CreateNorm": "openai/scripted"})
    bob = model.agent_named("Bob Johnson")
    created = {n.content: n for n in bob.norms.norms if n.origin == "created"}
    assert (created[drafts[0]["content"]].canonical, created[drafts[0]["content"]].theme) == (
        "no smoking indoors", "health")
    assert (created[drafts[1]["content"]].canonical, created[drafts[1]["content"]].theme) == (
        "be quiet in public", "calm")
    assert (created[drafts[2]["content"]].canonical, created[drafts[2]["content"]].theme) == (None, None)


def test_a_conflict_a_model_sees_without_a_breached_held_norm_is_a_conversation_without_a_topic(scripted, monkeypatch,
                                                                                              watch_asks):
    """A model may see a conflict in an act that breaches none of the sender's norms (the rules never
    do): the sender then says its first qualified norm, the table records no topic, and the receiver
    is offered no norm to settle it (nothing is taken from such a talk by the rules)."""
    scripted(default="Yes")
    asked = record_asks(monkeypatch, watch_asks)
    model = society(4, routes={"DetectConflict": "openai/scripted"}, enable_synthesis=False)
    chats = model.datacollector.get_table_dataframe("conversations")
    topicless = chats[chats["topic"] == ""]
    assert len(topicless) > 0 and len(chats[chats["topic"] != ""]) > 0
    heard = [ctx for op, _, ctx in asked if op == "IdentifyNormFromChat" and ctx.topic is None]
    assert 0 < len(heard) <= topicless[["step", "sender", "receiver"]].drop_duplicates().shape[0]
    for ctx in heard:  # a receiver hears a few conversations a step (MAX_CONVERSATIONS_HEARD)
        assert any(text in ctx.source for text in topicless.loc[topicless["turn"] == 0, "text"])
        assert ctx.suggestion is None and ctx.contrary is None and ctx.stance == "neutral"
    changes = model.datacollector.get_table_dataframe("norm_changes")
    from_talk = changes[changes["origin"] == "conversation"]
    openings = set(topicless.loc[topicless["turn"] == 0, "text"])
    assert not any(opening in source for opening in openings for source in from_talk["source"])
    assert not changes["event"].str.startswith("deactivated").any()  # so a norm once qualified stays so
    qualified = changes[changes["state"] == "qualified"]
    for (step, sender), lines in topicless.groupby(["step", "sender"]):
        held = qualified[(qualified["agent"] == sender) & (qualified["step"] <= step)]
        first = held.loc[held["norm_id"].idxmin(), "content"]
        assert lines.sort_values("turn")["text"].iloc[0].endswith(first), (step, sender)


def test_a_models_line_that_is_all_framing_is_replaced_by_the_turns_fallback(scripted):
    """A small model may answer a turn with the request's framing only ("My next line to Sam Moore
    is:"): nothing is said, so the conversation records the turn's fallback line, never an empty one."""
    names = [spec.name for spec in SocietyModel("hobbs-cafe", arch="crsec", model="rules").scenario_spec.agents]
    scripted(replies={f"Say your next line to {n}.": [f"My next line to {n} is:"] for n in names})
    model = society(3, routes={"ConverseTurn": "openai/scripted"})
    chats = model.datacollector.get_table_dataframe("conversations")
    assert len(chats) > 0
    is_sender = chats["speaker"] == chats["sender"]
    assert (chats.loc[is_sender, "text"] == "Please think about it.").all()
    assert (chats.loc[~is_sender, "text"] == "I see.").all()
    assert model.llm.ledger.frame().query("op == 'ConverseTurn'")["status"].eq("ok").all()  # answered, not failed


def test_an_action_the_world_cannot_parse_is_tried_as_a_behaviour_and_a_failed_action_is_remembered():
    model = society(1)
    agent = model.agent_named("Isabella Rodriguez")
    _, now = agent.clock()
    minutes = model.society.settings.action_minutes
    agent.actions = [(now, "levitate above the counter"), (now + minutes, "go to the moon")]
    before = len(model.world.events)
    agent.act()
    events = [e for e in model.world.events[before:] if e.agent == agent.name]
    assert [(e.verb, e.target, e.ok) for e in events] == [("do", "levitate above the counter", False),
                                                          ("go to", "the moon", False)]
    assert agent.last_action == "go to the moon" and not agent.last_outcome.ok
    tried = [m for m in agent.memory if "I tried to" in m]
    assert len(tried) == 2
    assert "I tried to levitate above the counter, but" in tried[0] and events[0].reason in tried[0]
    assert "I tried to go to the moon, but there is no place called the moon" in tried[1]


def test_synthesis_is_tried_above_the_threshold_and_once_per_set_of_qualified_norms(monkeypatch):
    model = society(1, synthesis_threshold=100_000)
    bob = model.agent_named("Bob Johnson")
    total = bob.norms.utility_sum()
    assert total > 0 and not bob.inbox
    tried = []

    async def synthesize():
        tried.append(tuple(n.id for n in bob.norms.qualified()))

    monkeypatch.setattr(bob, "_synthesize", synthesize)

    def reflect_with(threshold, enabled=True):
        bob.settings = bob.settings.model_copy(update={"synthesis_threshold": threshold, "enable_synthesis": enabled})
        asyncio.run(bob.reflect())
        return len(tried)

    assert reflect_with(total) == 0  # at the threshold: not above it
    assert reflect_with(total - 1, enabled=False) == 0  # switched off
    assert reflect_with(total - 1) == 1
    assert reflect_with(total - 1) == 1  # the same norms are not classified again
    bob.norms.add("Wipe the table after eating.", 50, "injunctive", qualified=True, origin="created", step=1)
    assert reflect_with(total - 1) == 2  # a new qualified norm: tried again
    assert tried[1] == tried[0] + (len(bob.norms.norms) - 1,)


# --- the small helpers the phases lean on --------------------------------------------------------


def test_an_observation_matters_more_when_it_bears_on_a_held_norm_and_more_again_when_it_breaches_one():
    model = society(0)
    checked = {"held": 0, "breach": 0, "plain": 0}
    for _ in range(20):
        model.step()
        check_observations(model, checked)
    assert all(checked.values()), checked


def check_observations(model, checked):
    for agent in model.agents:
        before = len(agent.stream.records)
        agent.perceive()  # this step's perception again, recorded at the same step
        new = agent.stream.records[before:]
        held = agent.norms.covered()
        assert [(m.kind, m.text) for m in new] == [("observation", f.text) for f in agent.facts]
        for memory, fact in zip(new, agent.facts, strict=True):
            bears, breaches = bool(set(fact.concerns) & held), bool(fact.violates)
            assert memory.importance == 2 + 4 * bears + 2 * breaches, (agent.name, fact.text)
            checked["held"] += bears
            checked["breach"] += breaches
            checked["plain"] += not (bears or breaches)


def test_persuasion_chance_is_read_by_stance():
    model = society(1, accept_for=0.8, accept_against=0.2, accept_neutral=0.4)
    agent = next(a for a in model.agents if {"for", "against"} <= set(a.crsec_traits.stance.values()))
    by_stance = {stance: agent.accept(topic) for topic, stance in agent.crsec_traits.stance.items()}
    assert by_stance["for"] == 0.8 and by_stance["against"] == 0.2
    assert agent.stance("a norm nobody tracks") == "neutral" and agent.accept("a norm nobody tracks") == 0.4
    assert agent.stance(None) == "neutral" and agent.accept(None) == 0.4


def _catalogue(agent, *entries):
    from socialsim.agents.crsec.settings import CatalogueNorm

    agent.settings = agent.settings.model_copy(
        update={"norm_catalogue": [CatalogueNorm(theme="health", **e) for e in entries]})


def test_the_suggested_norm_is_the_catalogues_best_supporting_one_never_a_contrary_one():
    agent = society(1).agent_named("Sam Moore")
    topic = "no smoking indoors"
    _catalogue(agent, {"content": "Smoke wherever you like.", "type": "injunctive", "utility": 99, "about": topic,
                       "opposes": True},
               {"content": "Smoke outside only.", "type": "injunctive", "utility": 70, "about": topic},
               {"content": "No cigarettes in the cafe.", "type": "injunctive", "utility": 90, "about": topic},
               {"content": "Speak softly.", "type": "injunctive", "utility": 95, "about": "be quiet in public"})
    assert agent._catalogue_for(topic, exclude_held=False).content == "No cigarettes in the cafe."
    agent.norms.add("No cigarettes in the cafe.", 90, "injunctive", qualified=True, origin="created", step=1)
    assert agent._catalogue_for(topic, exclude_held=False).content == "No cigarettes in the cafe."
    assert agent._catalogue_for(topic, exclude_held=True).content == "Smoke outside only."  # not what it holds
    # the contrary norm offered to an unpersuaded agent: the catalogue's, until it holds it
    assert agent._contrary_for(topic).content == "Smoke wherever you like."
    agent.norms.add("Smoke wherever you like.", 99, "injunctive", qualified=True, origin="thought", step=1)
    assert agent._contrary_for(topic) is None


def test_without_a_catalogue_entry_the_suggestion_is_the_tracked_norm_itself_unless_already_held():
    model = society(1)
    agent = model.agent_named("Sam Moore")
    _catalogue(agent)
    suggested = agent._catalogue_for("be quiet in public", exclude_held=True)
    tracked = model.society.settings.tracked("be quiet in public")
    assert (suggested.content, suggested.type, suggested.utility, suggested.theme, suggested.about) == (
        "Be quiet in public.", tracked.type, 80, "calm", "be quiet in public")
    assert agent._contrary_for("be quiet in public") is None
    norm = agent.norms.add("Be quiet in public.", 80, "injunctive", qualified=True, origin="created", step=1)
    agent.norms.set_match(norm, "be quiet in public", None, 1)
    assert agent._catalogue_for("be quiet in public", exclude_held=True) is None  # nothing new to take
    assert agent._catalogue_for("be quiet in public", exclude_held=False).content == "Be quiet in public."


@pytest.mark.parametrize("window", [6, 3])
def test_actions_keep_a_norm_from_the_start_and_again_a_full_window_after_a_breach(window):
    """A full ``compliance_window_steps`` after a breach (read back at its default, a constant 6 passed)."""
    model = society(1, compliance_window_steps=window)
    agent = model.agent_named("Sam Moore")
    agent.last_breach.clear()
    assert model.steps == 1 and agent.complies("no smoking indoors")  # no breach yet, even at step 1
    agent.last_breach["no smoking indoors"] = 1
    kept = []
    for step in range(1, window + 3):
        model.steps = step
        kept.append(agent.complies("no smoking indoors"))
    assert kept == [False] * window + [True, True]
    assert agent.complies("be quiet in public")  # another norm's breach does not count


def test_the_memory_settings_weigh_each_agents_retrieval():
    from socialsim.agents.memory import RetrievalWeights

    model = society(0, memory_recency=0.3, memory_importance=0.7, memory_relevance=0.2, memory_decay=0.95)
    assert all(a.stream.weights == RetrievalWeights(0.3, 0.7, 0.2, 0.95) for a in model.agents)


@pytest.mark.parametrize("k", [1, 7])
def test_an_agent_recalls_memory_k_memories(k):
    """``memory_k`` is how many memories a prompt gets (the stream holds more by step 4); only its
    bounds were tested, so a constant 4 passed."""
    agent = society(4, memory_k=k).agents[0]
    assert len(agent.stream) > 7
    assert len(asyncio.run(agent.recall("smoking a cigarette"))) == k


def test_with_memory_off_no_agent_keeps_or_recalls_a_memory():
    """``enable_memory=false`` leaves every stream empty and every prompt without memories (with it
    on, the same run keeps some)."""
    off, on = society(3, enable_memory=False), society(3)
    assert [len(a.stream) for a in off.agents] == [0] * len(off.agents)
    assert sum(len(a.stream) for a in on.agents) > 0
    assert asyncio.run(off.agents[0].recall("smoking a cigarette")) == []


@pytest.mark.parametrize("minutes, times", [(60, [f"{h:02d}:00" for h in range(8, 22)]),
                                            (120, [f"{h:02d}:00" for h in range(8, 22, 2)])])
def test_rule_made_plan_items_start_every_plan_item_minutes(minutes, times):
    """Plan items start at day_start and every ``plan_item_minutes`` before day_end; only its bounds
    were tested, so a constant 60 passed."""
    model = society(1, plan_item_minutes=minutes)
    assert all([item["time"] for item in agent.plan] == times for agent in model.agents)


@pytest.mark.parametrize("filler", ["drink a coffee", "read quietly"])
def test_the_rules_fill_every_other_hour_of_the_plan_with_the_filler_behaviour(filler):
    """The rule-made plan alternates habits with ``filler_behaviour`` (no scheduled meal falls on an
    odd hour); Hobbs Cafe's filler is the default, so a constant 'drink a coffee' passed."""
    model = society(1, filler_behaviour=filler)
    assert all([item["activity"] for item in agent.plan[1::2]] == [filler] * 7 for agent in model.agents)


def test_the_rule_made_plan_spans_the_scenarios_own_day():
    """The makerspace's day is 09:00-18:00 (``day_start``, ``day_end``): plans made over Hobbs Cafe's
    08:00-22:00 passed every CRSEC test (only the clock's arithmetic was tested)."""
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=1)
    model.step()
    assert all([item["time"] for item in agent.plan] == [f"{h:02d}:00" for h in range(9, 18)]
               for agent in model.agents)


def test_the_outside_is_the_area_of_kind_outside_wherever_the_scenario_lists_it(tmp_path):
    import yaml

    from socialsim.scenarios.loader import DATA_DIR

    spec = yaml.safe_load((DATA_DIR / "hobbs-cafe.yaml").read_text())
    spec["map"]["areas"].append(spec["map"]["areas"].pop(0))  # the street listed last
    path = tmp_path / "hobbs-street-last.yaml"
    path.write_text(yaml.safe_dump(spec))
    model = SocietyModel(str(path), arch="crsec", model="rules", rng=1)
    assert model.society.outside == "the street outside"
    assert model.society.inside["the street outside"] is False


@pytest.mark.parametrize(("content", "type_", "check"), [
    ("Clean up your table after eating.", "injunctive", "consistency"),  # about no tracked norm the thought saw
    ("No smoking indoors.", "descriptive", "type"),  # the tracked norm is injunctive
])
def test_a_norm_a_model_draws_from_a_thought_is_checked_against_what_the_thought_was_about(scripted, content,
                                                                                           type_, check):
    """The rules only ever draw the catalogue's norm on the thought's own topic and of its type, so
    they never fail these two checks; a model may draw another topic's norm, or the wrong type."""
    scripted(default=json.dumps({"found": True, "content": content, "type": type_, "utility": 70}))
    model = society(20, routes={"IdentifyNormFromThought": "openai/scripted"}, enable_chat=False)
    drawn = [(a, n) for a in model.agents for n in a.norms.norms if n.origin == "thought"]
    assert len(drawn) >= 3
    failed = [n.failed_check for _, n in drawn]
    assert None not in failed and not any(n.qualified for _, n in drawn)
    assert check in failed
    changes = model.datacollector.get_table_dataframe("norm_changes")
    rejected = changes[(changes["origin"] == "thought") & changes["event"].str.startswith("failed ")]
    assert len(rejected) == len(drawn)
    for agent, norm in drawn:  # rejected in the step it was drawn
        row = rejected[(rejected["agent"] == agent.name) & (rejected["norm_id"] == norm.id)]
        assert row["step"].tolist() == [norm.step]
    retyped = changes[(changes["origin"] == "thought") & (changes["event"] == "type corrected")]
    assert len(retyped) == failed.count("type")
    for agent, norm in drawn:
        if norm.failed_check == "type":  # the type the check gave, when it was given
            assert norm.type == "injunctive"
            row = retyped[(retyped["agent"] == agent.name) & (retyped["norm_id"] == norm.id)]
            assert row["step"].tolist() == [norm.step]


def test_actions_are_asked_for_from_the_minute_the_step_starts(asked_run):
    """The plan item's actions start now, not at the item's start: an agent asking again in the
    middle of an item (a norm taken up) is told the time it is, and the rule times them from it."""
    model, asked = asked_run
    settings, step_minutes = model.society.settings, model.scenario_spec.step_minutes
    from socialsim.agents.crsec.operations import minutes, time_of

    contexts = [ctx for op, _, ctx in asked if op == "GenerateNormativeActions"]
    assert contexts
    late = 0
    for ctx in contexts:
        assert ctx.now is not None and (ctx.now - minutes(settings.day_start)) % step_minutes == 0
        assert ctx.now >= time_of(ctx.item)
        late += ctx.now > time_of(ctx.item)
    assert late > 0  # some asked after their item began


def test_the_way_to_an_unknown_place_or_to_where_one_is_is_no_walk():
    state = society(0).society
    assert state.path("Hobbs Cafe kitchen", "the street outside") == ["Hobbs Cafe counter", "Hobbs Cafe dining room",
                                                                      "the street outside"]
    assert state.path("Hobbs Cafe counter", "the moon") == []
    assert state.path("Hobbs Cafe counter", "Hobbs Cafe counter") == []


def test_observing_someone_keep_a_norm_teaches_it_too():
    """Observation: a thought about what was seen and the norm drawn from it, whether the act breached a
    tracked norm or visibly kept it (smoking outside). Only breaches taught went unnoticed before."""
    from socialsim.agents.crsec.operations import ObservedFact
    from socialsim.llm.loop import run_sync

    model = society(1, accept_for=1.0, accept_neutral=1.0, accept_against=1.0)
    observer = next(a for a in model.agents if not a.entrepreneur and not a.norms.holds("no smoking indoors"))
    outside = model.society.outside
    fact = ObservedFact("Carlos Gomez", "smoke a cigarette", ("smoke",), outside, False,
                        f"Carlos Gomez is smoking a cigarette in {outside}", f"smoking a cigarette in {outside}",
                        violates=(), complies=("no smoking indoors",))
    run_sync(observer._observe([fact]))
    thoughts = [row for table, row in observer._rows if table == "thoughts"]
    assert [t["observation"] for t in thoughts] == [fact.text] and thoughts[0]["normative_info"]
    assert observer.counts["norm_thoughts"] == 1 and observer.norms.holds("no smoking indoors")
