"""What each questionnaire task shows the judge, built from a small hand-written record of a run:
each pair's material is exactly what the run recorded (the norms held at the time, the
conversation and the norm its listener took from it, the verdict of a check), and nothing the
run did not record (a refused action, a chat, another listener's norm, another conversation)."""

import random

import pandas as pd
import pytest

from socialsim.agents.crsec import questionnaire as q

COLUMNS = ["step", "agent", "norm_id", "content", "event", "state", "utility", "type", "origin", "source"]
TALK_AB = "B: You should tip the server.\nA: I will, thanks."
TALK_BC = "B: Speak softly in here.\nC: Sure."


def change(step, agent, norm_id, content, event, state, origin, source="", utility=60, kind="injunctive"):
    return dict(zip(COLUMNS, [step, agent, norm_id, content, event, state, utility, kind, origin, source], strict=True))


@pytest.fixture
def tables():
    changes = pd.DataFrame([
        change(1, "A", 0, "no smoking indoors", "created", "qualified", "created", utility=80),
        change(1, "B", 0, "tip the server", "created", "qualified", "created"),
        # decoys: a norm A took from another conversation, and one the speaker took from its own words
        change(2, "A", 2, "always wear a hat", "identified", "pending", "conversation", "B: Nice hat.\nA: Thanks."),
        change(2, "B", 1, "whisper always", "identified", "pending", "conversation", TALK_BC),
        change(2, "A", 1, "tip the server", "identified", "pending", "conversation", TALK_AB),
        change(2, "A", 1, "tip the server", "qualified", "qualified", "conversation", TALK_AB),
        change(3, "C", 0, "speak softly", "identified", "pending", "conversation", TALK_BC, kind="descriptive"),
        change(3, "C", 0, "speak softly", "failed consistency", "rejected", "conversation", TALK_BC, kind="descriptive"),
        change(4, "A", 3, "keep the cafe calm", "identified", "pending", "synthesis",
               "- no smoking indoors\n- tip the server", utility=90),
        change(4, "A", 4, "smoke outside", "identified", "pending", "thought", "Carlos is smoking outside"),
    ])
    conversations = pd.DataFrame([
        {"step": 2, "sender": "B", "receiver": "A", "topic": "tips", "turn": 0, "speaker": "B",
         "text": "You should tip the server."},
        {"step": 2, "sender": "B", "receiver": "A", "topic": "tips", "turn": 1, "speaker": "A", "text": "I will, thanks."},
        {"step": 2, "sender": "B", "receiver": "C", "topic": "noise", "turn": 0, "speaker": "B",
         "text": "Speak softly in here."},
        {"step": 2, "sender": "B", "receiver": "C", "topic": "noise", "turn": 1, "speaker": "C", "text": "Sure."},
    ])
    decisions = pd.DataFrame([
        {"step": 2, "agent": "A", "observation": "Carlos is smoking a cigarette", "conflict": True,
         "identity": "a norm entrepreneur", "talk": True},
        {"step": 3, "agent": "A", "observation": "Carlos is smoking outside", "conflict": True,
         "identity": "a norm entrepreneur", "talk": False},
        {"step": 3, "agent": "C", "observation": "Ann is reading", "conflict": False,
         "identity": "an ordinary citizen", "talk": None},
    ])
    plans = pd.DataFrame([
        {"step": 2, "agent": "A", "day": 1, "time": "08:00", "activity": "open the cafe", "place": "counter", "then": ""},
        {"step": 2, "agent": "A", "day": 1, "time": "09:00", "activity": "smoke", "place": "street",
         "then": "wash hands"},
    ])
    events = pd.DataFrame([
        {"step": 2, "agent": "A", "area": "cafe", "action": "drink a coffee", "verb": "do", "ok": True},
        {"step": 2, "agent": "A", "area": "cafe", "action": "go to the moon", "verb": "go to", "ok": False},
        {"step": 2, "agent": "A", "area": "cafe", "action": "chat with B", "verb": "chat with", "ok": True},
        {"step": 2, "agent": "A", "area": "cafe", "action": "read quietly", "verb": "do", "ok": True},
    ])
    thoughts = pd.DataFrame([
        {"step": 4, "agent": "A", "observation": "Carlos is smoking outside", "thought": "He is fine out there.",
         "normative_info": "smoke outside"},
        {"step": 4, "agent": "C", "observation": "Ann is reading", "thought": "Quiet morning.", "normative_info": ""},
    ])
    return {"norm_changes": changes, "conversations": conversations, "sender_decisions": decisions,
            "plans": plans, "events": events, "thoughts": thoughts}


def materials(tables, task):
    return [(i.agent, i.step, i.material) for i in q.BUILDERS[task](tables)]


def test_creation_shows_each_created_norm_and_nothing_else(tables):
    assert materials(tables, "Creation") == [
        ("A", 1, "NORM CREATED: no smoking indoors (type: injunctive, utility: 80)"),
        ("B", 1, "NORM CREATED: tip the server (type: injunctive, utility: 60)")]


def test_a_sender_pair_shows_the_norms_held_before_the_step_and_its_decision(tables):
    assert materials(tables, "Sender") == [
        ("A", 2, "PERSONAL NORMS:\n- no smoking indoors\n\nOBSERVATION: Carlos is smoking a cigarette\n"
                 "DETECTED A CONFLICT: yes\nIDENTITY: a norm entrepreneur\nDECIDED TO TALK: yes"),
        ("A", 3, "PERSONAL NORMS:\n- no smoking indoors\n- tip the server\n\nOBSERVATION: Carlos is smoking outside\n"
                 "DETECTED A CONFLICT: yes\nIDENTITY: a norm entrepreneur\nDECIDED TO TALK: no"),
        ("C", 3, "PERSONAL NORMS:\n(none)\n\nOBSERVATION: Ann is reading\nDETECTED A CONFLICT: no\n"
                 "IDENTITY: an ordinary citizen\nDECIDED TO TALK: not asked (no conflict)")]


def test_a_receiver_pair_is_the_listeners_with_the_norm_it_took_from_that_conversation(tables):
    """The listener's norm from this conversation, in its step or the next; not a norm it took from
    another conversation, nor another listener's."""
    assert materials(tables, "Receiver") == [
        ("A", 2, f"CONVERSATION:\n{TALK_AB}\n\nRELATED NORM: tip the server (type: injunctive, utility: 60)"),
        ("C", 2, f"CONVERSATION:\n{TALK_BC}\n\nRELATED NORM: speak softly (type: descriptive, utility: 60)")]
    later = dict(tables, norm_changes=tables["norm_changes"].assign(
        step=lambda f: f["step"].where(f["agent"] != "C", 4)))  # C took it two steps later: not from this talk
    assert materials(later, "Receiver")[1] == ("C", 2, f"CONVERSATION:\n{TALK_BC}\n\nRELATED NORM: none identified")


def test_a_conversation_is_recognized_by_all_its_lines_and_their_speakers():
    assert q._same_talk('B: "Tip."\nA: "Sure."', [("B", "Tip."), ("A", "Sure.")])  # as the agent keeps it
    assert q._same_talk("B: Tip.\nA: Sure.", [("B", "Tip."), ("A", "Sure.")])
    assert not q._same_talk("B: Tip.\nA: Sure.\nB: Thanks.", [("B", "Tip."), ("A", "Sure.")])  # a longer talk
    assert not q._same_talk("B: Tip.\nA: No.", [("B", "Tip."), ("A", "Sure.")])  # one line in common is another talk
    # the rules' lines are the same words from every sender: the speaker tells the conversations apart
    assert not q._same_talk("D: Tip.\nA: Sure.", [("B", "Tip."), ("A", "Sure.")])
    assert not q._same_talk("anything", [])


def test_a_conversation_the_receiver_never_heard_is_no_receiver_pair(tables):
    unheard = dict(tables, conversations=tables["conversations"].assign(
        heard=lambda f: f["receiver"] != "C"))  # C had heard its share of conversations that step
    assert [(a, step) for a, step, _ in materials(unheard, "Receiver")] == [("A", 2)]


def test_an_observation_pair_shows_the_thought_and_what_was_drawn_from_it(tables):
    assert materials(tables, "Observation") == [
        ("A", 4, "OBSERVATION: Carlos is smoking outside\nTHOUGHT: He is fine out there.\n\nRELATED NORM: smoke outside"),
        ("C", 4, "OBSERVATION: Ann is reading\nTHOUGHT: Quiet morning.\n\nRELATED NORM: none identified")]


def test_an_evaluation_pair_is_each_verdict_on_a_norm_taken_in_with_the_norms_held_before(tables):
    assert materials(tables, "Immediate evaluation") == [
        ("A", 2, f"SOURCE (conversation): {TALK_AB}\n\nPERSONAL NORMS:\n- no smoking indoors\n\n"
                 "NORM: tip the server (type: injunctive, utility: 60)\nTHE AGENT'S EVALUATION: kept (passed every check)"),
        ("C", 3, f"SOURCE (conversation): {TALK_BC}\n\nPERSONAL NORMS:\n(none)\n\n"
                 "NORM: speak softly (type: descriptive, utility: 60)\n"
                 "THE AGENT'S EVALUATION: rejected (failed consistency check)")]
    # a norm already held (being re-checked) is not shown among the norms it is checked against
    again = dict(tables, norm_changes=pd.concat([tables["norm_changes"], pd.DataFrame([
        change(5, "A", 1, "tip the server", "qualified", "qualified", "conversation", TALK_AB)])]))
    last = materials(again, "Immediate evaluation")[-1]
    assert last[:2] == ("A", 5) and "PERSONAL NORMS:\n- no smoking indoors\n\nNORM: tip the server" in last[2]


def test_a_synthesis_pair_shows_the_specific_norms_and_the_abstract_one(tables):
    assert materials(tables, "Long-term synthesis") == [
        ("A", 4, "SPECIFIC NORMS:\n- no smoking indoors\n- tip the server\n\n"
                 "ABSTRACT NORM: keep the cafe calm (type: injunctive, utility: 90)")]


def test_a_plan_pair_shows_the_whole_plan_with_its_follow_ups(tables):
    assert materials(tables, "Plan") == [
        ("A", 2, "PERSONAL NORMS:\n- no smoking indoors\n- tip the server\n\n"
                 "PLAN:\n1) 08:00: open the cafe at counter\n2) 09:00: smoke, then wash hands at street")]


def test_a_plan_pair_shows_each_items_span_as_the_plan_judge_reads_it(tables):
    """A rater, like the plan judge, is told an item goes on until the next starts: smoking from
    09:00 to the day's end is judged over all that time, not only at 09:00."""
    plans = [i for i in q.sample_items(tables, random.Random(1), per_task=3, day_end=22 * 60) if i.task == "Plan"]
    assert [(i.agent, i.step, i.material) for i in plans] == [
        ("A", 2, "PERSONAL NORMS:\n- no smoking indoors\n- tip the server\n\n"
                 "PLAN (each item goes on until the next starts, the last until 22:00):\n"
                 "1) 08:00-09:00: open the cafe at counter\n2) 09:00-22:00: smoke, then wash hands at street")]


def test_an_action_pair_shows_what_was_done_not_refused_actions_or_chats(tables):
    assert materials(tables, "Action") == [
        ("A", 2, "PERSONAL NORMS:\n- no smoking indoors\n- tip the server\n\n"
                 "ACTIONS:\ndrink a coffee (in cafe)\nread quietly (in cafe)")]


def test_a_task_with_exactly_as_many_pairs_as_asked_keeps_them_all_in_order(tables):
    every = q.BUILDERS["Sender"](tables)
    sampled = [i for i in q.sample_items(tables, random.Random(1), per_task=3) if i.task == "Sender"]
    assert sampled == every  # nothing to draw: all of them, in the record's order


def test_each_question_is_numbered_from_one_and_the_judge_told_who_the_agent_is(scripted):
    from socialsim.model.society import SocietyModel

    fake = scripted(default='{"score": 5}')
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=2, judge="openai/judge-model")
    items = [q.Item("Sender", "Ann", 3, "OBSERVATION: x"), q.Item("Plan", "Bo", 3, "PLAN: y")]
    ratings = q.ask_questionnaire(model.society.judge, items, {"Ann": "Ann keeps the makerspace tidy."},
                                  random.Random(0))
    assert list(ratings["question"]) == [1, 2, 1] and list(ratings["item"]) == [0, 0, 1]
    prompts = [c["messages"][-1]["content"] for c in fake.calls]
    assert sum("AGENT DESCRIPTION: Ann keeps the makerspace tidy." in p for p in prompts) == 2
    summary = q.summary(ratings).set_index("task")
    assert summary.loc["Plan", "pairs"] == 1 and pd.isna(summary.loc["Plan", "sd"])  # no spread from one pair
