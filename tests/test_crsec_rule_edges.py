"""The CRSEC rules at their edges, on a small world written here: time-of-day windows, places the
world does not know, follow-ups from a plan or from a norm held since, temptation towards the
agent's own home, which of several reasons makes a duplicate, which norm a verdict names. Written
after mutmut on the rules of ``agents/crsec/operations.py`` left these unpinned."""

import dataclasses
import random

import pytest

from socialsim.agents.crsec import operations as ops
from socialsim.agents.crsec.settings import CatalogueNorm, TrackedNorm

QUIET = TrackedNorm(name="quiet in the evening", type="injunctive", keywords=["quiet"],
                    violated_by={"tags": ["loud"], "where": "inside", "from_time": "20:00", "until_time": "23:00"})
NO_SMOKING = TrackedNorm(name="no smoking indoors", type="injunctive", keywords=["smok"],
                         violated_by={"tags": ["smoke"], "where": "inside"})
NO_CALLS = TrackedNorm(name="no phone calls", type="injunctive", keywords=["phone"],
                       violated_by={"tags": ["call"], "where": "anywhere"},
                       alternatives={"call a friend": "text a friend"})
TIP = TrackedNorm(name="tip after lunch", type="descriptive", keywords=["tip"],
                  violated_by={"tags": ["meal"], "unless_followed_by": "tip", "from_time": "11:00",
                               "until_time": "15:00"})
TRACKED = [QUIET, NO_SMOKING, NO_CALLS, TIP]

HOME, OUT, HALL = "the lounge", "the garden", "the hall"
TAGS = {"play drums": ("loud",), "smoke a pipe": ("smoke",), "call a friend": ("call",), "text a friend": ("text",),
        "eat lunch": ("meal",), "tip the cook": ("tip",), "read a book": ("quiet",), "drink tea": ("drink",)}
INSIDE = {HOME: True, OUT: False, HALL: True}


def held(*tracked):
    return [ops.NormView(f"Keep to {t.name}.", t.type, 80, t.name, None, (t.name,)) for t in tracked]


def plan_ctx(norms=(), habits=("play drums",), start=8 * 60, end=22 * 60, schedule=None, stance=None,
             tracked=TRACKED, temptation=0.0):
    return ops.PlanContext("Ann", "d", "g", 1, start, end, 60, list(norms), tuple(sorted(TAGS)), tuple(INSIDE),
                           HOME, OUT, list(habits), "drink tea", list(tracked), TAGS, INSIDE, dict(stance or {}),
                           schedule=dict(schedule or {}), temptation=temptation)


def rule(op, ctx, seed=1):
    return op.rule(ctx, random.Random(seed))


# --- one act against one norm ------------------------------------------------------------------------------


def test_an_act_breaches_a_prohibition_only_with_its_tags_place_and_hours():
    assert ops.breaches(("loud",), True, QUIET, 21 * 60)
    assert not ops.breaches(("loud",), True, QUIET, 10 * 60)  # outside the norm's hours
    assert not ops.breaches(("loud",), False, QUIET, 21 * 60)  # outside, where it is fine
    assert not ops.breaches(("quiet",), True, QUIET, 21 * 60)  # other tags
    assert ops.breaches(("call",), True, NO_CALLS, 9 * 60) and ops.breaches(("call",), False, NO_CALLS, 9 * 60)
    assert not ops.breaches(("meal",), True, TIP, 12 * 60)  # a follow-up norm is no prohibition


def test_the_normative_choice_reads_every_held_norm_the_hour_and_unknown_places_as_inside():
    ctx = plan_ctx(norms=held(NO_SMOKING))  # QUIET comes first in the list and is not held
    assert ops.normative_choice("smoke a pipe", HOME, ctx, 9 * 60) == ("smoke a pipe", OUT)
    assert ops.normative_choice("smoke a pipe", "the attic", ctx, 9 * 60) == ("smoke a pipe", OUT)  # unknown: inside
    assert ops.normative_choice("smoke a pipe", OUT, ctx, 9 * 60) == ("smoke a pipe", OUT)
    assert ops.normative_choice("dance a jig", HOME, ctx, 9 * 60) == ("dance a jig", HOME)  # no tags: nothing
    quiet = plan_ctx(norms=held(QUIET))
    assert ops.normative_choice("play drums", HOME, quiet, 10 * 60) == ("play drums", HOME)
    assert ops.normative_choice("play drums", HOME, quiet, 21 * 60) == ("play drums", OUT)
    chew = NO_SMOKING.model_copy(update={"name": "chew, not smoke", "alternatives": {"smoke a pipe": "chew gum"}})
    alt = plan_ctx(norms=held(chew), tracked=[chew])
    assert ops.normative_choice("smoke a pipe", HOME, alt, 9 * 60) == ("chew gum", HOME)
    assert ops.normative_choice("smoke a pipe", OUT, alt, 9 * 60) == ("smoke a pipe", OUT)  # outside it is fine
    calls = plan_ctx(norms=held(NO_CALLS))
    assert ops.normative_choice("call a friend", HOME, calls, 9 * 60) == ("text a friend", HOME)  # the alternative


def test_follow_ups_come_from_follow_up_norms_held_or_backed_and_only_for_their_tags():
    none_held = plan_ctx()
    assert ops.needs_follow_up("eat lunch", none_held) and not ops.needs_follow_up("smoke a pipe", none_held)
    assert not ops.needs_follow_up("dance a jig", none_held)  # a behaviour without tags
    assert ops.follow_up_for("eat lunch", none_held) is None
    assert ops.follow_up_for("eat lunch", plan_ctx(norms=held(TIP))) == "tip the cook"
    assert ops.follow_up_for("eat lunch", plan_ctx(stance={TIP.name: "for"})) == "tip the cook"
    assert ops.follow_up_for("eat lunch", plan_ctx(stance={TIP.name: "against"})) is None
    assert ops.follow_up_for("smoke a pipe", plan_ctx(norms=held(TIP))) is None
    assert ops.follow_up_for("dance a jig", plan_ctx(norms=held(TIP))) is None
    no_tip_behaviour = dataclasses.replace(plan_ctx(norms=held(TIP)), tags={"eat lunch": ("meal",)})
    assert ops.follow_up_for("eat lunch", no_tip_behaviour) is None  # nothing in the world is a tip


# --- plans -------------------------------------------------------------------------------------------------


def test_a_rule_plan_alternates_habits_and_the_filler_and_takes_scheduled_places():
    ctx = plan_ctx(habits=("read a book", "smoke a pipe"), start=8 * 60, end=14 * 60,
                   schedule={12 * 60: ("eat lunch", OUT), 13 * 60: ("eat lunch", None)})
    items = ops.plan_items(rule(ops.GENERATE_NORMATIVE_PLANS, ctx))
    assert [(i["time"], i["activity"], i["place"], i["then"]) for i in items] == [
        ("08:00", "read a book", HOME, None), ("09:00", "drink tea", HOME, None),
        ("10:00", "smoke a pipe", HOME, None), ("11:00", "drink tea", HOME, None),
        ("12:00", "eat lunch", OUT, None), ("13:00", "eat lunch", HOME, None)]


# a scheduled activity with a follow-up that a time-window norm replaces by its alternative (the
# makerspace's 17:00 'saw a plank', then sketching instead, with 'sweep after sawing' held)
NO_LATE_LUNCH = TrackedNorm(name="no lunch after 14:00", type="injunctive", keywords=["lunch"],
                            violated_by={"tags": ["meal"], "from_time": "14:00"},
                            alternatives={"eat lunch": "read a book"})


def test_a_scheduled_activity_a_norm_replaces_gets_the_follow_up_of_its_alternative_not_its_own():
    """The follow-up belongs to the activity planned: the 17:00 saw replaced by a sketch was planned
    with the saw's sweep ('sketch a design', then 'sweep the workbench')."""
    ctx = plan_ctx(norms=held(TIP, NO_LATE_LUNCH), start=13 * 60, end=15 * 60,
                   schedule={13 * 60: ("eat lunch", None), 14 * 60: ("eat lunch", None)},
                   tracked=[*TRACKED, NO_LATE_LUNCH])
    items = ops.plan_items(rule(ops.GENERATE_NORMATIVE_PLANS, ctx))
    assert [(i["time"], i["activity"], i["then"]) for i in items] == [
        ("13:00", "eat lunch", "tip the cook"), ("14:00", "read a book", None)]


def test_a_habit_a_held_norm_asks_a_follow_up_of_is_planned_with_it():
    """An agent holding 'tip after lunch' whose habit is lunch: only a scheduled lunch was planned with
    its tip, so the rule plan's habit lunch had none (its actions tip) and the plan judge found the
    plan breaking the norm the agent holds."""
    ctx = plan_ctx(norms=held(TIP), habits=("eat lunch",), start=12 * 60, end=14 * 60)
    items = ops.plan_items(rule(ops.GENERATE_NORMATIVE_PLANS, ctx))
    assert [(i["activity"], i["then"]) for i in items] == [("eat lunch", "tip the cook"), ("drink tea", None)]
    assert verdict(TIP, *items, day_end=14 * 60).index == 0


def test_a_scheduled_activity_the_plan_does_not_know_leaves_its_item_to_the_habits():
    ctx = plan_ctx(start=12 * 60, end=14 * 60, schedule={12 * 60: ("juggle", HALL), 13 * 60: ("eat lunch", HALL)})
    items = ops.plan_items(rule(ops.GENERATE_NORMATIVE_PLANS, ctx))
    assert [(i["activity"], i["place"]) for i in items] == [("play drums", HOME), ("eat lunch", HALL)]


def test_a_day_that_is_no_whole_number_of_items_ends_with_a_shorter_one():
    """08:00-09:30 in hourly items: the slots (an LLM's times) are 08:00 and 09:00, and the settings put
    a 09:15 activity in the 09:00 item; the rule made one item, at 08:00, and never planned it. A day
    shorter than one item had no item at all."""
    ctx = plan_ctx(start=8 * 60, end=9 * 60 + 30, schedule={9 * 60 + 15: ("eat lunch", HALL)})
    assert ctx.slots == ("08:00", "09:00") and ctx.items == 2
    items = ops.plan_items(rule(ops.GENERATE_NORMATIVE_PLANS, ctx))
    assert [(i["time"], i["activity"], i["place"]) for i in items] == [("08:00", "play drums", HOME),
                                                                       ("09:00", "eat lunch", HALL)]
    short = plan_ctx(start=8 * 60, end=8 * 60 + 30)
    assert [i["time"] for i in ops.plan_items(rule(ops.GENERATE_NORMATIVE_PLANS, short))] == ["08:00"]
    assert [i["time"] for i in ops.plan_items(ops.GENERATE_NORMATIVE_PLANS.fallback(short))] == ["08:00"]


def test_a_scheduled_activity_in_a_long_plan_item_is_judged_at_its_own_time_not_the_items_start():
    """With 90-minute items the 20:00 drums fall in the item at 19:30 and the 14:00 lunch in the one at
    13:30: each is judged at its scheduled time (quiet from 20:00; no lunch after 14:00), not at 19:30
    or 13:30, when the norm was silent and the drums stayed indoors, the lunch kept its tip."""
    ctx = dataclasses.replace(
        plan_ctx(norms=held(QUIET, TIP, NO_LATE_LUNCH), start=12 * 60, end=21 * 60, tracked=[*TRACKED, NO_LATE_LUNCH],
                 schedule={12 * 60 + 30: ("eat lunch", None), 14 * 60: ("eat lunch", None),
                           20 * 60: ("play drums", HOME)}),
        item_minutes=90)
    items = ops.plan_items(rule(ops.GENERATE_NORMATIVE_PLANS, ctx))
    assert [(i["time"], i["activity"], i["place"], i["then"]) for i in items] == [
        ("12:00", "eat lunch", HOME, "tip the cook"), ("13:30", "read a book", HOME, None),
        ("15:00", "play drums", HOME, None), ("16:30", "drink tea", HOME, None),
        ("18:00", "play drums", HOME, None), ("19:30", "play drums", OUT, None)]


def test_a_rule_plan_keeps_a_held_norm_over_each_item_as_the_plan_judge_reads_it():
    """An item lasts until the next one starts: the 19:00 drums (a habit, 90-minute items) go on to
    20:30, into the quiet hours from 20:00. The rule judged a habit at its item's start, where the
    norm is silent, and planned the drums indoors: the plan judge found its holder's own plan breaking
    the norm."""
    ctx = dataclasses.replace(plan_ctx(norms=held(QUIET), start=19 * 60, end=22 * 60), item_minutes=90)
    items = ops.plan_items(rule(ops.GENERATE_NORMATIVE_PLANS, ctx))
    assert [(i["time"], i["activity"], i["place"]) for i in items] == [("19:00", "play drums", OUT),
                                                                       ("20:30", "drink tea", HOME)]
    assert verdict(QUIET, *items, day_end=22 * 60).index == 0
    over_before = dataclasses.replace(ctx, start=18 * 60 + 30)  # 18:30 to 20:00: over as the quiet hours begin
    assert [i["place"] for i in ops.plan_items(rule(ops.GENERATE_NORMATIVE_PLANS, over_before))][0] == HOME
    # hourly from 17:30, a day over at 20:00: the last item (drums) lasts until 20:00, not an hour
    day_over = plan_ctx(norms=held(QUIET), start=17 * 60 + 30, end=20 * 60)
    last = ops.plan_items(rule(ops.GENERATE_NORMATIVE_PLANS, day_over))[-1]
    assert (last["time"], last["activity"], last["place"]) == ("19:30", "play drums", HOME)


def test_the_normative_choice_reads_the_whole_span_it_is_given():
    quiet = plan_ctx(norms=held(QUIET))
    assert ops.normative_choice("play drums", HOME, quiet, 19 * 60, 20 * 60 + 30) == ("play drums", OUT)
    assert ops.normative_choice("play drums", HOME, quiet, 19 * 60, 20 * 60) == ("play drums", HOME)
    assert ops.normative_choice("play drums", HOME, quiet, 19 * 60) == ("play drums", HOME)  # no end: its start
    assert ops.normative_choice("play drums", HOME, quiet, 23 * 60, 23 * 60 + 30) == ("play drums", HOME)  # after them


def test_actions_give_the_follow_up_of_the_activity_done_not_of_the_planned_one_a_norm_replaced():
    """A plan made before the norm was held: at 14:00 the actions read instead of eating, and leave
    out the tip the plan had for the meal (and tip after a meal the norm leaves alone)."""
    plan = plan_ctx(norms=held(TIP, NO_LATE_LUNCH), tracked=[*TRACKED, NO_LATE_LUNCH])
    lunch = {"time": "14:00", "activity": "eat lunch", "place": HOME, "then": "tip the cook"}
    assert actions(lunch, plan, paths={}) == ["read a book"] * 3 + ["drink tea"] * 3
    assert actions({**lunch, "time": "13:00"}, plan, paths={})[:4] == ["eat lunch"] * 3 + ["tip the cook"]


def test_actions_give_the_follow_up_of_an_alternative_that_asks_for_one():
    """A norm held since the plan replaced its drums at noon by lunch: the actions tip after that
    lunch, though the drums planned asked for no follow-up."""
    no_drums = TrackedNorm(name="no drums at noon", type="injunctive", keywords=["drum"],
                           violated_by={"tags": ["loud"], "where": "anywhere", "from_time": "12:00",
                                        "until_time": "13:00"}, alternatives={"play drums": "eat lunch"})
    plan = plan_ctx(norms=held(TIP, no_drums), tracked=[*TRACKED, no_drums])
    drums = {"time": "12:00", "activity": "play drums", "place": HOME, "then": None}
    assert actions(drums, plan, paths={}) == ["eat lunch"] * 3 + ["tip the cook"] + ["drink tea"] * 2


def test_a_rule_plan_keeps_a_held_norm_only_within_its_hours():
    items = ops.plan_items(rule(ops.GENERATE_NORMATIVE_PLANS, plan_ctx(norms=held(QUIET), start=18 * 60, end=23 * 60)))
    places = {i["time"]: i["place"] for i in items if i["activity"] == "play drums"}
    assert places == {"18:00": HOME, "20:00": OUT, "22:00": OUT}


# --- actions -----------------------------------------------------------------------------------------------


def actions_ctx(item, plan, now=None, count=6, paths=None, until=None):
    paths = {HOME: [HALL, HOME], OUT: [HALL, OUT]} if paths is None else paths
    return ops.ActionsContext("Ann", "d", item, ops.plan_text([item]), plan.norms, HALL, paths, count,
                              (), plan, now, until)


def actions(item, plan, **kw):
    return ops.action_list(rule(ops.GENERATE_NORMATIVE_ACTIONS, actions_ctx(item, plan, **kw)))


def test_actions_walk_there_do_the_activity_half_the_time_then_the_follow_up_and_the_filler():
    item = {"time": "09:00", "activity": "read a book", "place": HOME, "then": "play drums"}
    assert actions(item, plan_ctx()) == ["go to the hall", "go to the lounge", "read a book", "read a book",
                                         "play drums", "drink tea"]
    assert actions(item, plan_ctx(), count=10) == ["go to the hall", "go to the lounge", *["read a book"] * 4,
                                                   "play drums", *["drink tea"] * 3]
    assert actions(item, plan_ctx(), paths={}) == ["read a book"] * 3 + ["play drums", "drink tea", "drink tea"]
    assert actions(item, plan_ctx(), count=2) == ["go to the hall", "go to the lounge"]
    assert actions(item, plan_ctx(), count=4) == ["go to the hall", "go to the lounge", "read a book", "play drums"]


def test_actions_add_the_follow_up_a_norm_held_since_the_plan_asks_for_and_drop_one_no_longer_held():
    lunch = {"time": "12:00", "activity": "eat lunch", "place": HOME, "then": None}
    assert actions(lunch, plan_ctx(norms=held(TIP)), paths={})[:4] == ["eat lunch"] * 3 + ["tip the cook"]
    tipped = {**lunch, "then": "tip the cook"}
    assert "tip the cook" not in actions(tipped, plan_ctx(), paths={})


def test_actions_use_the_time_they_start_at_before_the_plan_items_time():
    drums = {"time": "10:00", "activity": "play drums", "place": HOME, "then": None}
    plan = plan_ctx(norms=held(QUIET))
    assert actions(drums, plan)[:2] == ["go to the hall", "go to the lounge"]  # 10:00: the norm is silent
    assert actions(drums, plan, now=21 * 60)[:2] == ["go to the hall", "go to the garden"]
    assert actions({**drums, "time": "21:00"}, plan)[:2] == ["go to the hall", "go to the garden"]


def test_actions_keep_a_held_norm_over_the_whole_call_not_only_its_first_minute():
    """A call from 19:50 lasts until 20:20 and plays its drums at 20:00, in the quiet hours: judged at
    19:50 only, a holder played them indoors. A call over before 20:00 may."""
    drums = {"time": "19:00", "activity": "play drums", "place": HOME, "then": None}
    plan = plan_ctx(norms=held(QUIET))
    assert actions(drums, plan, now=19 * 60 + 50, until=20 * 60 + 20)[:2] == ["go to the hall", "go to the garden"]
    assert actions(drums, plan, now=19 * 60 + 30, until=20 * 60)[:2] == ["go to the hall", "go to the lounge"]
    tempted = dataclasses.replace(plan, temptation=1.0)  # the habit done indoors: the norm moved it over the call
    assert actions(drums, tempted, now=19 * 60 + 50, until=20 * 60 + 20)[:3] == [
        "go to the hall", "go to the lounge", "play drums"]


def test_temptation_takes_the_habit_home_only_when_the_norm_moved_it_from_there():
    plan = plan_ctx(norms=held(QUIET), temptation=1.0)
    drums = {"time": "21:00", "activity": "play drums", "place": OUT, "then": None}
    assert actions(drums, plan)[:3] == ["go to the hall", "go to the lounge", "play drums"]  # the norm broken
    morning = {**drums, "time": "09:00"}  # the norm is silent: playing outside is the agent's own choice
    assert actions(morning, plan)[:3] == ["go to the hall", "go to the garden", "play drums"]
    garden_home = dataclasses.replace(plan_ctx(norms=held(NO_CALLS), habits=("call a friend",), temptation=1.0),
                                      home=OUT)
    call = {"time": "09:00", "activity": "call a friend", "place": OUT, "then": None}
    assert actions(call, garden_home)[2] == "call a friend"  # the anywhere-norm's alternative given up at home
    tea = {"time": "21:00", "activity": "drink tea", "place": HOME, "then": None}
    assert actions(tea, plan)[:3] == ["go to the hall", "go to the lounge", "drink tea"]  # nothing tempts


# --- judging a plan ----------------------------------------------------------------------------------------


def verdict(norm, *items, day_end=None):
    items = [{"then": None, **i} for i in items]
    return rule(ops.JUDGE_PLAN_COMPLIANCE, ops.JudgePlanContext("Ann", norm, items, TAGS, INSIDE,
                                                               day_end))


def test_a_plan_is_judged_by_its_follow_ups_hours_and_places():
    lunch = {"time": "12:00", "activity": "eat lunch", "place": HOME}
    assert verdict(TIP, {**lunch, "then": "tip the cook"}) == ops.Choice(index=0, text="complies")
    assert verdict(TIP, lunch) == ops.Choice(index=1, text="breaks it")
    assert verdict(TIP, {**lunch, "time": "18:00"}).index == 0  # dinner: outside the norm's hours
    assert verdict(TIP, {**lunch, "time": "18:00"}, day_end=22 * 60).index == 0  # they began before it
    assert verdict(TIP, {"time": "12:00", "activity": "drink tea", "place": HOME}).index == 0
    assert verdict(TIP, {"time": "12:00", "activity": "dance a jig", "place": HOME}).index == 0
    drums = {"time": "21:00", "activity": "play drums", "place": HOME}
    assert verdict(QUIET, drums) == ops.Choice(index=1, text="breaks it")
    assert verdict(QUIET, {**drums, "time": "10:00"}).index == 0
    assert verdict(QUIET, {**drums, "place": OUT}).index == 0
    assert verdict(QUIET, {**drums, "place": "the attic"}).index == 1  # a place the world does not know: inside


def test_a_plan_item_is_judged_while_it_lasts_not_only_at_its_start():
    """An item lasts until the next one starts (the last until the day's end): drums at 19:00 with
    nothing after them go on into the quiet hours from 20:00, and a lunch at 10:00 until 12:00 into
    the tipping hours from 11:00. Judged at their starts only, both plans complied."""
    drums = {"time": "19:00", "activity": "play drums", "place": HOME}
    tea = {"time": "20:00", "activity": "drink tea", "place": HOME}
    assert verdict(QUIET, drums, day_end=22 * 60).index == 1
    assert verdict(QUIET, drums, tea, day_end=22 * 60).index == 0  # over before the quiet hours
    assert verdict(QUIET, tea, drums, day_end=22 * 60).index == 0  # the next item by its time, in any order
    assert verdict(QUIET, drums, day_end=20 * 60).index == 0  # the day ends as the quiet hours begin
    assert verdict(QUIET, drums).index == 0  # no day's end known: the last item is judged at its start
    assert verdict(QUIET, drums, {**tea, "time": "19:30"}, {**tea, "time": "21:00"}, day_end=22 * 60).index == 0  # the next ends it
    lunch = {"time": "10:00", "activity": "eat lunch", "place": HOME}
    assert verdict(TIP, lunch, {**tea, "time": "12:00"}).index == 1
    assert verdict(TIP, lunch, {**tea, "time": "11:00"}).index == 0
    assert verdict(TIP, {**lunch, "then": "tip the cook"}, {**tea, "time": "12:00"}).index == 0


def test_the_plan_judges_prompt_gives_each_item_its_span():
    """An LLM judge saw each item at its start time alone ("2) 16:30: play drums ..."), and nothing said
    an item goes on until the next one starts: it could not read the drums into the quiet hours."""
    tea = {"time": "09:00", "activity": "drink tea", "place": HOME, "then": None}
    drums = {"time": "16:30", "activity": "play drums", "place": HOME, "then": "drink tea"}

    def prompt(*items, day_end=18 * 60):
        ctx = ops.JudgePlanContext("Ann", QUIET, list(items), TAGS, INSIDE, day_end)
        return ops.JUDGE_PLAN_COMPLIANCE.messages(ctx)[-1]["content"]

    said = prompt(tea, drums)
    assert "\n1) 09:00-16:30: drink tea at the lounge\n2) 16:30-18:00: play drums, then drink tea at the lounge" in said
    assert "until the next item starts, the last until 18:00" in said
    assert "1) 16:30-18:00: play drums" in prompt(drums, tea) and "2) 09:00-16:30: drink tea" in prompt(drums, tea)
    unknown_end = prompt(tea, drums, day_end=None)
    assert "2) 16:30: play drums" in unknown_end and "the last until" not in unknown_end


@pytest.mark.parametrize(("time", "minute"), [("09:30", 570), (" 7:05 pm", 425), ("21:00", 1260), ("noon", None),
                                              (None, None), ("", None)])
def test_item_minute_reads_the_clock_at_the_start_of_the_time(time, minute):
    assert ops.item_minute({"time": time}) == minute
    assert ops.item_minute({}) is None


# --- creation, talk, identification ------------------------------------------------------------------------


def catalogue_norm(content, utility, about=None, opposes=False):
    return CatalogueNorm(content=content, type="injunctive", utility=utility, theme="t", about=about, opposes=opposes)


def test_creation_takes_one_backed_norm_per_topic_then_general_ones_by_importance():
    catalogue = [catalogue_norm("General low.", 20), catalogue_norm("General high.", 90),
                 catalogue_norm("Smoke-free air.", 60, NO_SMOKING.name), catalogue_norm("No pipes.", 80, NO_SMOKING.name),
                 catalogue_norm("Quiet please.", 70, QUIET.name)]
    ctx = ops.CreateContext("Ann", "d", 5, {NO_SMOKING.name: "for"}, catalogue)
    assert [d.content for d in rule(ops.CREATE_NORM, ctx).norms] == ["No pipes.", "General high.", "General low."]
    assert rule(ops.CREATE_NORM, ops.CreateContext("Ann", "d", 5, {}, [])).norms == []


def test_conversation_lines_follow_the_turn_and_the_receivers_stance():
    base = ops.TurnContext("Ann", "d", "Bob", "sender", "smoking in the lounge", "No smoking indoors.", "for")
    assert rule(ops.CONVERSE_TURN, base).text == "Excuse me, Bob: smoking in the lounge bothers people. No smoking indoors."
    assert rule(ops.CONVERSE_TURN, dataclasses.replace(base, turn=1)).text == (
        "I understand, but please remember: No smoking indoors.")
    receiver = dataclasses.replace(base, role="receiver", norm=None)
    assert rule(ops.CONVERSE_TURN, dataclasses.replace(receiver, stance="against")).text == (
        "It is just my habit and I like it, but I hear what you are saying.")
    assert rule(ops.CONVERSE_TURN, receiver).text == "You are right, I am sorry. I will keep that in mind."


def identify(stance="for", accept=1.0, topic=TIP.name, suggestion_utility=10, contrary=None, contrary_rate=0.0):
    suggestion = CatalogueNorm(content="Tip the cook.", type="descriptive", utility=suggestion_utility, theme="t",
                               about=TIP.name)
    return rule(ops.IDENTIFY_FROM_CHAT, ops.IdentifyContext("Ann", "src", topic, suggestion, stance, "tipping",
                                                            accept=accept, contrary=contrary,
                                                            contrary_rate=contrary_rate))


def test_identification_keeps_the_suggestions_type_and_lowers_an_opponents_utility_to_at_least_one():
    info = identify()
    assert (info.found, info.type, info.utility) == (True, "descriptive", 10)
    assert identify(suggestion_utility=60, stance="against").utility == 45
    assert identify(stance="against").utility == 1
    assert not identify(topic=None).found  # a suggestion without a topic is no normative information
    contrary = CatalogueNorm(content="Tips are not owed.", type="descriptive", utility=35, theme="t",
                             about=TIP.name, opposes=True)
    info = identify(stance="against", accept=0.0, contrary=contrary, contrary_rate=1.0)
    assert (info.content, info.type, info.utility) == ("Tips are not owed.", "descriptive", 35)


def test_a_thought_about_an_act_no_norm_speaks_about_is_a_plain_restatement():
    fact = ops.ObservedFact("Bob", "drink tea", ("drink",), HOME, True, "Bob is drinking tea in the lounge",
                            "drinking tea in the lounge")
    assert rule(ops.GENERATE_THOUGHT, ops.ThoughtContext("Ann", "d", fact, "neutral")).text == (
        "Bob is drinking tea in the lounge.")


# --- the four checks, matching, synthesis ------------------------------------------------------------------


def check(info, qualified=(), topic=None, theme=None, expected=None):
    return ops.CheckContext(info, "src", topic, theme, list(qualified), expected)


def test_consistency_needs_the_same_norm_or_theme_unless_the_source_has_no_topic():
    other = ops.NormView("Water the plants.", "injunctive", 50, theme="garden")
    assert rule(ops.CHECK_CONSISTENCY, check(other)).yes is True
    assert rule(ops.CHECK_CONSISTENCY, check(other, topic=QUIET.name, theme="calm")).yes is False


def test_a_duplicate_is_the_same_text_or_the_same_tracked_norm_or_the_same_contrary():
    smoke = ops.NormView("No smoking in here.", "injunctive", 80, NO_SMOKING.name, None, (NO_SMOKING.name,))
    same_text = ops.NormView("no smoking in here", "injunctive", 20)
    assert rule(ops.CHECK_DUPLICATION, check(same_text, [smoke])).yes
    other_words = ops.NormView("Pipes stay outside.", "injunctive", 60, NO_SMOKING.name)
    assert rule(ops.CHECK_DUPLICATION, check(other_words, [smoke])).yes
    anti = ops.NormView("Tips are not owed.", "injunctive", 40, None, TIP.name)
    anti_again = ops.NormView("Nobody must tip.", "injunctive", 40, None, TIP.name)
    assert rule(ops.CHECK_DUPLICATION, check(anti_again, [anti])).yes
    anti_other = ops.NormView("Calls are fine.", "injunctive", 40, None, NO_CALLS.name)
    assert not rule(ops.CHECK_DUPLICATION, check(anti_other, [anti, smoke])).yes
    assert not rule(ops.CHECK_DUPLICATION, check(ops.NormView("Be kind.", "injunctive", 40), [anti, smoke])).yes


def test_type_verdicts_name_the_type_the_tracked_norm_has():
    info = ops.NormView("People tip.", "injunctive", 50, TIP.name)
    assert rule(ops.CHECK_TYPE, check(info, expected="descriptive")) == ops.Choice(index=1, text="wrong: it is descriptive")
    assert rule(ops.CHECK_TYPE, check(info, expected="injunctive")) == ops.Choice(index=0, text="correct")
    desc = dataclasses.replace(info, type="descriptive")
    assert rule(ops.CHECK_TYPE, check(desc, expected="injunctive")) == ops.Choice(index=2, text="wrong: it is injunctive")


def test_a_contrary_norm_conflicts_only_with_the_norm_it_opposes():
    anti_tip = ops.NormView("Tips are not owed.", "injunctive", 40, None, TIP.name)
    smoke = held(NO_SMOKING)[0]
    assert not rule(ops.CHECK_CONFLICT, check(anti_tip, [smoke])).yes
    assert rule(ops.CHECK_CONFLICT, check(anti_tip, held(TIP))).yes


def test_match_answers_carry_the_text_of_the_option_they_pick():
    tracked = [NO_SMOKING, TIP]
    for content in ("Smoking is banned.", "Tip well.", "Nothing to see.", "Never tip."):
        ctx = ops.MatchContext(content, tracked)
        choice = rule(ops.MATCH_NORM, ctx)
        assert choice.text == ctx.options[choice.index]
    never = ops.MatchContext("Do not tip.", [NO_SMOKING, TIP.model_copy(update={"contrary": ["do not tip"]})])
    assert rule(ops.MATCH_NORM, never) == ops.Choice(index=4, text="the opposite of: tip after lunch")
    assert ops.match_result(never, ops.Choice(index=5, text="x")) == (None, None)  # out of range: nothing


def test_an_abstract_norms_weights_are_its_members_shares_of_utility():
    members = [ops.NormView("A.", "injunctive", 30), ops.NormView("B.", "injunctive", 90)]
    weights = rule(ops.GENERATE_ABSTRACT_NORM, ops.AbstractContext("t", members)).weights
    assert weights == pytest.approx([0.25, 0.75])
