"""The generic agent, the base of every architecture: what it perceives and remembers, what it tells
the model when it chooses an action and composes a line, and what its act leaves behind."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pytest

from socialsim.agents.generic import MEMORY_SIZE, GenerativeAgent
from socialsim.llm.operations.generic import CHOOSE_ACTION, COMPOSE_CHAT, ActionContext, ChatContext
from socialsim.llm.questions import QUOTED, Choice, Text
from socialsim.model.society import SocietyModel
from socialsim.spaces.actions import Action, Outcome


@pytest.fixture
def cafe():
    """Hobbs Cafe on the rules, nothing stepped: Wolfgang, Tamara and Carlos share the dining room."""
    model = SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=0)
    model.steps = 5
    return model


def chat(model, speaker: str, listener: str, words: str, step: int) -> None:
    """``speaker`` says ``words`` to ``listener`` at ``step``, through the world."""
    outcome = model.world.execute(model.agent_named(speaker), Action("chat with", listener, content=words), step)
    assert outcome.ok, outcome.reason


def answering(agent, *answers):
    """Replace the agent's gateway question by one that answers in turn and keeps what it was asked."""
    asked, queue = [], list(answers)

    async def ask(op, ctx):
        asked.append((op, ctx))
        return SimpleNamespace(value=queue.pop(0))

    agent.ask = ask
    return asked


def test_an_agent_starts_with_its_scenario_self_and_nothing_done(cafe):
    """What the live inspector and the agents' frame show before the agent's first act."""
    from socialsim.dashboards.panels import live_details, outcome_text

    spec = next(s for s in cafe.scenario_spec.agents if s.name == "Wolfgang Schulz")
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    assert (wolfgang.name, wolfgang.description, wolfgang.traits) == (spec.name, spec.description, spec.traits)
    assert wolfgang.traits is not spec.traits  # its own copy
    assert (list(wolfgang.memory), wolfgang.memory.maxlen, wolfgang.last_action) == ([], MEMORY_SIZE, "")
    assert wolfgang.last_outcome == Outcome(ok=True)
    details = live_details(wolfgang)
    assert (details["last_thought"], details["last_action"], details["outcome"]) == ("", "", outcome_text(True, "", ""))


def test_an_agents_stream_before_its_first_phase_is_the_same_in_every_run():
    """Anything drawn before the gateway hands out the phase streams is reproducible."""
    first, again = (SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=0) for _ in range(2))
    assert [a.phase_rng.random() for a in first.agents] == [a.phase_rng.random() for a in again.agents]


def test_a_memory_is_stamped_with_its_step_and_keeps_the_last_ten(cafe):
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    for i in range(MEMORY_SIZE + 2):
        wolfgang.remember(f"thing {i}")
    assert list(wolfgang.memory) == [f"[step 5] thing {i}" for i in range(2, MEMORY_SIZE + 2)]


def test_what_a_partner_said_is_heard_for_three_steps_and_only_from_them(cafe):
    chat(cafe, "Tamara Taylor", "Wolfgang Schulz", "too old", 1)
    chat(cafe, "Tamara Taylor", "Wolfgang Schulz", "just in time", 2)
    chat(cafe, "Carlos Gomez", "Wolfgang Schulz", "not hers", 3)
    chat(cafe, "Tamara Taylor", "Carlos Gomez", "not to him", 4)
    chat(cafe, "Tamara Taylor", "Wolfgang Schulz", "lately", 4)
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    assert wolfgang.heard_from("Tamara Taylor") == ["just in time", "lately"]
    assert wolfgang.heard_from("Tamara Taylor", steps=1) == ["lately"]


def test_recent_partners_are_those_one_chatted_with_in_the_last_three_steps_once_each(cafe):
    chat(cafe, "Wolfgang Schulz", "Francisco Lopez", "long ago", 1)
    chat(cafe, "Wolfgang Schulz", "Carlos Gomez", "just in time", 2)
    chat(cafe, "Wolfgang Schulz", "Tamara Taylor", "hello", 3)
    chat(cafe, "Wolfgang Schulz", "Tamara Taylor", "again", 4)
    chat(cafe, "Carlos Gomez", "Abigail Chen", "not mine", 4)
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    refused = cafe.world.execute(wolfgang, Action("chat with", "Tom Gomez", content="out of reach"), 4)
    assert not refused.ok  # Tom is in the street
    cafe.world.execute(wolfgang, Action("do", "speak loudly"), 4)
    assert wolfgang.recent_partners() == ["Carlos Gomez", "Tamara Taylor"]
    assert wolfgang.recent_partners(steps=1) == ["Tamara Taylor"]
    assert cafe.agent_named("Tamara Taylor").recent_partners() == []


def test_perceiving_reads_the_world_and_remembers_only_last_steps_lines(cafe):
    chat(cafe, "Tamara Taylor", "Wolfgang Schulz", "before", 3)
    chat(cafe, "Carlos Gomez", "Wolfgang Schulz", "nice light", 4)
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    wolfgang.perceive()
    assert wolfgang.observation == cafe.world.observe(wolfgang)
    assert wolfgang.action_space == cafe.world.action_space(wolfgang)
    assert list(wolfgang.memory) == ['[step 5] Carlos Gomez said to me: "nice light"']


def test_an_agent_tells_the_model_who_and_where_it_is_what_it_can_do_and_what_it_remembers(cafe):
    chat(cafe, "Wolfgang Schulz", "Carlos Gomez", "hi", 4)
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    wolfgang.perceive()
    wolfgang.remember("I lit the stage")
    texts = [a.text for a in wolfgang.action_space]
    asked = answering(wolfgang, SimpleNamespace(index=texts.index("speak loudly")))
    asyncio.run(wolfgang.decide())
    [(op, ctx)] = asked
    assert op is CHOOSE_ACTION
    assert (ctx.name, ctx.description, ctx.setting, ctx.observation) == (
        "Wolfgang Schulz", wolfgang.description, cafe.scenario_spec.context, wolfgang.observation)
    assert (ctx.actions, ctx.memory, ctx.recent_partners) == (texts, ["[step 5] I lit the stage"], ["Carlos Gomez"])
    assert sorted(ctx.people_here) == ["Abigail Chen", "Carlos Gomez", "Francisco Lopez", "Tamara Taylor"]
    assert wolfgang.intent == wolfgang.action_space[texts.index("speak loudly")]


def test_choosing_a_chat_asks_for_the_line_with_what_the_partner_said(cafe):
    chat(cafe, "Tamara Taylor", "Wolfgang Schulz", "too loud", 4)
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    wolfgang.perceive()
    texts = [a.text for a in wolfgang.action_space]
    asked = answering(wolfgang, SimpleNamespace(index=texts.index("chat with Tamara Taylor")),
                      SimpleNamespace(text="sorry"))
    asyncio.run(wolfgang.decide())
    op, ctx = asked[1]
    assert op is COMPOSE_CHAT
    assert (ctx.name, ctx.description, ctx.setting, ctx.observation, ctx.partner, ctx.heard, ctx.memory) == (
        "Wolfgang Schulz", wolfgang.description, cafe.scenario_spec.context, wolfgang.observation,
        "Tamara Taylor", ["too loud"], ['[step 5] Tamara Taylor said to me: "too loud"'])
    assert wolfgang.intent == wolfgang.action_space[texts.index("chat with Tamara Taylor")].with_content("sorry")
    assert wolfgang.intent.content == "sorry"


def test_an_agent_asks_the_run_gateway_for_itself_with_its_phase_stream(cafe):
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    seen = []

    async def ask(op, ctx, *, agent_id, rng):
        seen.append((op, ctx, agent_id, rng))
        return "answer"

    cafe.llm = SimpleNamespace(ask=ask)
    assert asyncio.run(wolfgang.ask(CHOOSE_ACTION, "ctx")) == "answer"
    assert seen == [(CHOOSE_ACTION, "ctx", wolfgang.unique_id, wolfgang.phase_rng)]


def test_a_done_chat_is_remembered_and_counted_as_an_interaction(cafe):
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    wolfgang.intent = Action("chat with", "Tamara Taylor", content="hello")
    wolfgang.act()
    assert (wolfgang.last_action, wolfgang.last_outcome.ok, wolfgang.intent) == (
        "chat with Tamara Taylor: hello", True, None)
    assert list(wolfgang.memory) == ["[step 5] I did: chat with Tamara Taylor: hello"]
    assert cafe.interactions["Wolfgang Schulz"]["Tamara Taylor"]["weight"] == 1
    rows = cafe.datacollector.get_table_dataframe("interactions").to_dict("records")
    assert rows == [{"step": 5, "initiator": "Wolfgang Schulz", "receiver": "Tamara Taylor", "kind": "chat",
                     "content": "hello"}]
    assert cafe.world.events[-1].step == 5


def test_a_refused_act_is_remembered_with_its_reason_and_counts_no_interaction(cafe):
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    wolfgang.intent = Action("chat with", "Tom Gomez", content="hello")
    wolfgang.act()
    reason = cafe.world.events[-1].reason
    assert reason and (wolfgang.last_action, wolfgang.last_outcome.ok, wolfgang.intent) == (
        "chat with Tom Gomez: hello", False, None)
    assert list(wolfgang.memory) == [f"[step 5] I tried to chat with Tom Gomez: hello, but {reason}"]
    assert cafe.interactions.number_of_edges() == 0


def test_a_done_act_that_is_no_chat_counts_no_interaction_and_no_intent_does_nothing(cafe):
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    wolfgang.act()
    assert (cafe.world.events, list(wolfgang.memory), wolfgang.last_action) == ([], [], "")
    wolfgang.intent = Action("do", "speak loudly")
    wolfgang.act()
    assert list(wolfgang.memory) == ["[step 5] I did: speak loudly"]
    assert cafe.interactions.number_of_edges() == 0


def test_the_agents_frame_records_each_agents_area_action_and_whether_it_was_done(cafe):
    reporters = GenerativeAgent.agent_reporters()
    assert (set(reporters), reporters["area"], reporters["action"]) == ({"area", "action", "action_ok"}, "area",
                                                                          "last_action")
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    assert reporters["action_ok"](wolfgang) is True
    wolfgang.last_outcome = Outcome(ok=False, reason="no")
    assert reporters["action_ok"](wolfgang) is False


def test_each_world_event_is_one_row_of_the_events_table_with_its_tags_joined(cafe):
    """The events table is what CRSEC's acting compliance reads back (tags as a comma-joined string);
    each act is written once, at the first collection after it."""
    wolfgang = cafe.agent_named("Wolfgang Schulz")
    cafe.world.execute(wolfgang, Action("do", "sing loudly"), 5)
    cafe._collect()
    cafe.world.execute(wolfgang, Action("go to", "nowhere"), 6)
    cafe._collect()
    rows = cafe.datacollector.get_table_dataframe("events").to_dict("records")
    assert rows == [
        {"step": 5, "agent": "Wolfgang Schulz", "area": "Hobbs Cafe dining room", "action": "sing loudly",
         "verb": "do", "target": "sing loudly", "ok": True, "reason": "", "tags": "loud,sing", "content": ""},
        {"step": 6, "agent": "Wolfgang Schulz", "area": "Hobbs Cafe dining room", "action": "go to nowhere",
         "verb": "go to", "target": "nowhere", "ok": False, "reason": "there is no place called nowhere",
         "tags": "", "content": ""},
    ]


def choosing(actions, people_here=(), recent_partners=(), memory=()):
    return ActionContext(name="Ann", description="A baker.", setting="A cafe.", observation="It is busy.",
                         actions=list(actions), memory=list(memory), people_here=list(people_here),
                         recent_partners=list(recent_partners))


def test_the_rule_chats_with_the_first_one_present_not_talked_to_lately_if_it_can():
    ctx = choosing(["go to the hall", "chat with Bob", "chat with Cy"], people_here=["Dee", "Bob", "Cy"])
    assert CHOOSE_ACTION.rule(ctx, random.Random(0)) == Choice(index=1, text="chat with Bob")  # no action for Dee
    ctx.recent_partners = ["Bob"]
    assert CHOOSE_ACTION.rule(ctx, random.Random(0)) == Choice(index=2, text="chat with Cy")


def test_otherwise_the_rule_draws_an_action_that_is_no_chat_from_its_stream():
    ctx = choosing(["go to the hall", "chat with Bob", "sit down", "chat with Cy"], people_here=["Bob"],
                   recent_partners=["Bob"])
    picked = [CHOOSE_ACTION.rule(ctx, random.Random(seed)) for seed in range(40)]
    assert picked == [Choice(index=i, text=ctx.actions[i]) for i in (random.Random(s).choice([0, 2]) for s in range(40))]
    assert {c.index for c in picked} == {0, 2}


def test_with_only_chats_and_everyone_talked_to_the_rule_draws_any_of_them():
    ctx = choosing(["chat with Bob", "chat with Cy"], people_here=["Bob", "Cy"], recent_partners=["Cy", "Bob"])
    picked = [CHOOSE_ACTION.rule(ctx, random.Random(seed)) for seed in range(20)]
    assert picked == [Choice(index=i, text=ctx.actions[i]) for i in (random.Random(s).choice([0, 1]) for s in range(20))]


def test_without_an_answer_the_agent_takes_the_first_action_or_greets_its_partner():
    assert CHOOSE_ACTION.fallback(choosing(["go to the hall", "sit down"])) == Choice(index=0, text="go to the hall")
    assert COMPOSE_CHAT.fallback(talking()) == Text(text="Hello Bob.")


def test_the_prompt_shows_the_last_five_memories_in_order_or_says_there_are_none():
    shown = CHOOSE_ACTION.prompt(choosing(["sit down"], memory=[f"m{i}" for i in range(1, 8)]))
    assert shown == (f"You are Ann. A baker.\n\nSetting: A cafe.\n\nWhat you remember of the last moments ({QUOTED}):\n"
                     "- m3\n- m4\n- m5\n- m6\n- m7\n\nObservation: It is busy.\n\nWhat do you do next?")
    assert f"({QUOTED}):\n- (nothing yet)\n\nObservation" in CHOOSE_ACTION.prompt(choosing(["sit down"]))


def talking(heard=(), memory=()):
    return ChatContext(name="Ann", description="A baker.", setting="A cafe.", observation="Bob is here.",
                       partner="Bob", heard=list(heard), memory=list(memory))


def test_a_line_is_asked_with_the_last_three_things_the_partner_said_quoted():
    shown = COMPOSE_CHAT.prompt(talking(heard=["one", "two", "three", "four"], memory=["m1"]))
    assert shown == (f"You are Ann. A baker.\n\nSetting: A cafe.\n\nWhat you remember of the last moments ({QUOTED}):\n"
                     f"- m1\n\nObservation: Bob is here.\n\nRecently between you ({QUOTED}):\n"
                     '- Bob said: "two"\n- Bob said: "three"\n- Bob said: "four"\n\n'
                     "You start talking to Bob. What do you say? Reply with your words only.")
    assert f"between you ({QUOTED}):\n- (nothing yet)\n\nYou start" in COMPOSE_CHAT.prompt(talking())
    assert COMPOSE_CHAT.question(talking()).max_chars == 240


def test_the_rule_greets_a_partner_or_answers_what_they_said():
    assert COMPOSE_CHAT.rule(talking(), random.Random(0)) == Text(text="Hello Bob, how are you today?")
    assert COMPOSE_CHAT.rule(talking(heard=["hi"]), random.Random(0)) == Text(text="I hear you, Bob. Tell me more.")
