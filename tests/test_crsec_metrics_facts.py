"""CRSEC's measurements read straight from world facts written here, in the makerspace (a second
setting, from its own file): breaches by tags, place and hour; the follow-up rule; compliant acts;
what an agent observes; the day axis. Written after mutmut on ``agents/crsec/metrics.py`` showed
these were pinned only through whole runs."""

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from socialsim.agents.crsec import metrics
from socialsim.agents.crsec.metrics import Breach
from socialsim.agents.crsec.operations import ObservedFact
from socialsim.model.society import SocietyModel
from socialsim.spaces.world import WorldEvent

FLOOR, YARD, BREAK = "the workshop", "the yard", "the break room"
CALL, SAW, SWEEP, TEXT, SKETCH = ("take a phone call", "saw a plank", "sweep the workbench", "send a text message",
                                  "sketch a design")
TAGS = {CALL: ("call",), SAW: ("saw",), SWEEP: ("sweep",), TEXT: ("quiet",), SKETCH: ("quiet",)}
PHONES, SWEEPING, LATE_SAWING = "no phone calls indoors", "sweep after sawing", "no sawing after 17:00"
MORNING, FOUR_PM, HALF_FIVE = 2, 43, 52  # steps of 10 minutes from 09:00: 09:10, 16:00, 17:30
# a missed follow-up in plain words: the follow-up's behaviour, not "saw a plank without a follow-up" (a
# chat said "doing saw a plank without a follow-up in the workshop floor bothers people")
MISSED_SWEEP = f"{SAW} without sweeping the workbench"


@pytest.fixture(scope="module")
def model():
    return SocietyModel("makerspace", arch="crsec", model="rules", rng=1)


@pytest.fixture
def world(model):
    saved = list(model.world.events)
    model.world.events.clear()
    yield model.world
    model.world.events[:] = saved


def act(step, agent, action, area=FLOOR, ok=True):
    return WorldEvent(step, agent, area, action, action.split()[0], "", ok, tags=TAGS[action])


def breaches(model, step):
    return metrics.breaches(model.world, model.society.settings, step, model.scenario_spec.step_minutes)


def test_a_call_breaches_inside_only_and_a_refused_act_is_no_fact(model, world):
    world.events += [act(MORNING, "Ann", CALL), act(MORNING, "Bob", CALL, YARD), act(MORNING, "Cid", CALL, ok=False)]
    assert breaches(model, MORNING) == [Breach(MORNING, "Ann", PHONES, FLOOR, CALL)]


def test_late_sawing_breaches_only_within_its_hours(model, world):
    world.events += [act(FOUR_PM, "Ann", SAW), act(FOUR_PM + 1, "Ann", SAW), act(HALF_FIVE, "Bob", SAW, YARD)]
    assert breaches(model, FOUR_PM) == []
    assert breaches(model, HALF_FIVE) == [Breach(HALF_FIVE, "Bob", LATE_SAWING, YARD, SAW)]


def test_sawing_needs_a_sweep_the_step_after_unless_one_is_still_sawing(model, world):
    world.events += [act(1, "Ann", SAW), act(1, "Bob", SAW, BREAK), act(1, "Cid", SAW),
                     act(2, "Ann", SAW), act(2, "Cid", SWEEP), act(2, "Dee", CALL)]
    found = breaches(model, 2)
    assert Breach(2, "Bob", SWEEPING, BREAK, MISSED_SWEEP) in found
    assert {b.agent for b in found if b.norm == SWEEPING} == {"Bob"}  # Ann still saws; Cid swept
    assert Breach(2, "Dee", PHONES, FLOOR, CALL) in found  # the prohibitions are read as well
    world.events += [act(3, "Ann", TEXT)]
    assert [b.agent for b in breaches(model, 3) if b.norm == SWEEPING] == ["Ann"]


def test_a_missed_follow_up_is_named_by_the_follow_ups_behaviour_or_plainly_without_one(model):
    assert metrics.follow_up_text(model.world, "sweep") == "sweeping the workbench"
    assert metrics.follow_up_text(model.world, "applause") == "a follow-up"  # no behaviour of the world has it
    # two behaviours with the tag: the first by its text, the one the rules plan (follow_up_for)
    sweep = model.world.behaviours["sweep the workbench"]
    model.world.behaviours["clear the sawdust"] = sweep.model_copy(update={"text": "clear the sawdust"})
    try:
        assert metrics.follow_up_text(model.world, "sweep") == "clearing the sawdust"
    finally:
        del model.world.behaviours["clear the sawdust"]


def test_an_act_is_judged_by_its_tags_place_and_hour(model):
    settings = model.society.settings
    judge = metrics.judge_act
    assert judge(("saw",), SAW, True, settings, 16 * 60) == ([], [])
    assert judge(("saw",), SAW, True, settings, 17 * 60 + 30) == ([LATE_SAWING], [])
    assert judge(("call",), CALL, False, settings, 600) == ([], [PHONES])  # outside: visibly fine
    assert judge(("quiet",), TEXT, True, settings, 600) == ([], [PHONES])  # the compliant alternative
    assert judge(("sweep",), SWEEP, True, settings, 600) == ([], [SWEEPING])
    assert judge(("drink",), "drink tea", True, settings, 600) == ([], [])
    assert judge(("quiet",), SKETCH, True, settings, 16 * 60) == ([], [])  # an alternative, out of hours
    reordered = settings.model_copy(update={"tracked_norms": [settings.tracked(LATE_SAWING), settings.tracked(PHONES)]})
    assert judge(("call",), CALL, True, reordered, 600) == ([PHONES], [])  # a norm out of hours skips only itself


def test_compliant_acts_collect_every_agents_visible_compliance_at_the_step(model, world):
    world.events += [act(FOUR_PM, "Ann", CALL, YARD), act(FOUR_PM, "Bob", TEXT), act(FOUR_PM, "Cid", CALL),
                     act(FOUR_PM, "Dee", SKETCH), act(FOUR_PM + 1, "Eve", SWEEP)]
    found = metrics.compliant_acts(model.world, model.society.settings, FOUR_PM, model.scenario_spec.step_minutes)
    assert found == [("Ann", PHONES), ("Bob", PHONES)]


def test_an_agent_observes_the_others_tagged_acts_in_its_area_and_their_missed_follow_ups(model, world):
    settings = model.society.settings
    world.events += [act(2, "Ann", CALL), act(2, "Ann", CALL), act(2, "Bob", TEXT), act(2, "Cid", CALL, YARD),
                     act(2, "Me", SAW), WorldEvent(2, "Dee", FLOOR, "wait", "wait", "", True)]
    saved = list(model.society.breaches)
    model.society.breaches[:] = [Breach(2, "Eve", SWEEPING, FLOOR, MISSED_SWEEP),
                                 Breach(2, "Fay", SWEEPING, BREAK, MISSED_SWEEP),
                                 Breach(1, "Gus", SWEEPING, FLOOR, MISSED_SWEEP),
                                 Breach(2, "Me", SWEEPING, FLOOR, MISSED_SWEEP),
                                 Breach(2, "Ann", PHONES, FLOOR, CALL)]
    try:
        me = SimpleNamespace(name="Me", area=FLOOR)
        facts = metrics.observed_facts(model, me, 2)
    finally:
        model.society.breaches[:] = saved
    assert facts == [
        ObservedFact("Ann", CALL, ("call",), FLOOR, True, f"Ann is taking a phone call in {FLOOR}",
                     f"taking a phone call in {FLOOR}", (PHONES,), ()),
        ObservedFact("Bob", TEXT, ("quiet",), FLOOR, True, f"Bob is sending a text message in {FLOOR}",
                     f"sending a text message in {FLOOR}", (), (PHONES,)),
        ObservedFact("Eve", MISSED_SWEEP, tuple(settings.tracked(SWEEPING).violated_by.tags), FLOOR,
                     True, f"Eve finished sawing a plank without sweeping the workbench in {FLOOR}",
                     f"sawing a plank without sweeping the workbench in {FLOOR}", (SWEEPING,), ())]
    assert metrics.observed_facts(model, me, 0) == []
    world.events += [act(1, "Bob", SAW, FLOOR)]
    assert [f.actor for f in metrics.observed_facts(model, me, 1)] == ["Bob"]  # the first step is observed


def test_observed_late_sawing_is_judged_at_its_hour(model, world):
    world.events += [act(FOUR_PM, "Bob", SAW), act(HALF_FIVE, "Bob", SAW)]
    me = SimpleNamespace(name="Me", area=FLOOR)
    assert metrics.observed_facts(model, me, FOUR_PM)[0].violates == ()
    assert metrics.observed_facts(model, me, HALF_FIVE)[0].violates == (LATE_SAWING,)


def test_the_day_axis_and_shares(model):
    steps_per_day = model.society.settings.day_minutes / model.scenario_spec.step_minutes
    assert metrics.steps_per_day(model) == steps_per_day == 54
    fresh = SocietyModel("makerspace", arch="crsec", model="rules", rng=1)
    fresh.step()
    fresh.step()
    frame = metrics.series(fresh)
    assert list(frame["day"]) == [(s - 1) / 54 for s in frame["step"]]
    crowd = SimpleNamespace(agents=[SimpleNamespace(ok=v) for v in (True, False, False, False)])
    assert metrics.share(lambda a: a.ok)(crowd) == 0.25
    assert metrics.share(lambda a: a.ok)(SimpleNamespace(agents=[])) == 0


def test_adoption_against_compliance_counts_each_agent_once_by_which_came_first():
    def agent(adopted=None, acted=None):
        return SimpleNamespace(first_adopted={} if adopted is None else {PHONES: adopted},
                               first_compliant_act={} if acted is None else {PHONES: acted})

    people = [agent(1, 3), agent(), agent(2, 5), agent(4, 2), agent(3, 3), agent(adopted=6), agent(acted=1)]
    settings = SimpleNamespace(tracked_norms=[SimpleNamespace(name=PHONES), SimpleNamespace(name=SWEEPING)])
    model = SimpleNamespace(agents=people, society=SimpleNamespace(settings=settings))
    table = metrics.adoption_vs_compliance(model)
    assert table.to_dict("records") == [
        {"norm": PHONES, "adopt_first": 2, "comply_first": 1, "same_step": 1, "adopt_only": 1, "comply_only": 1},
        {"norm": SWEEPING, "adopt_first": 0, "comply_first": 0, "same_step": 0, "adopt_only": 0, "comply_only": 0}]


def test_a_follow_up_norm_out_of_its_hours_and_the_first_step_are_skipped_without_stopping(model, world):
    settings = model.society.settings
    evening_sweep = settings.tracked(SWEEPING).model_copy(
        update={"violated_by": settings.tracked(SWEEPING).violated_by.model_copy(update={"from_time": "17:00"})})
    reordered = settings.model_copy(update={"tracked_norms": [evening_sweep, settings.tracked(PHONES)]})
    world.events += [act(1, "Ann", CALL), act(2, "Bob", SAW), act(3, "Bob", TEXT)]
    found = metrics.breaches(model.world, reordered, 1, model.scenario_spec.step_minutes)
    assert found == [Breach(1, "Ann", PHONES, FLOOR, CALL)]  # nothing ended before step 1; phones still read
    assert metrics.breaches(model.world, reordered, 3, model.scenario_spec.step_minutes) == []  # 09:10: no hours


def test_a_share_of_one_agent_is_whole():
    assert metrics.share(lambda a: True)(SimpleNamespace(agents=[SimpleNamespace()])) == 1.0


def test_compliance_that_holds_from_the_first_step_is_not_dated():
    """Agents who never do a behaviour comply by construction: 70% compliance at step 1 says nothing
    about whether adoption came first, so the report does not give it a date."""
    frame = pd.DataFrame({"day": [0.0, 0.25, 0.5, 0.75], "compliance[n]": [0.9, 0.6, 0.8, 0.8],
                          "compliance[m]": [0.4, 0.6, 0.8, 0.8]})
    assert metrics._compliance_reached(frame, "n").startswith("already at the first step (90%")
    assert metrics._compliance_reached(frame, "m") == "at day 0.50"


@pytest.fixture
def at_step(model):
    """The model at a step of the test's choosing with no breach on record; restored afterwards."""
    saved = model.steps, {a.name: dict(a.last_breach) for a in model.agents}
    for a in model.agents:
        a.last_breach.clear()
    yield model
    model.steps = saved[0]
    for a in model.agents:
        a.last_breach.clear()
        a.last_breach.update(saved[1][a.name])


def acting_compliance(model, norm):
    from socialsim.agents.crsec.agent import CRSECAgent

    return CRSECAgent.scenario_reporters(model)[f"acting_compliance[{norm}]"](model)


def test_compliance_among_those_who_acted_leaves_out_an_agent_who_never_acted(at_step, world):
    """``compliance[NORM]`` counts an agent who did nothing the norm speaks about as complying;
    ``acting_compliance[NORM]`` counts only the agents whose executed acts in the window bore on it."""
    model, step = at_step, MORNING + 5
    model.steps = step
    window = model.society.settings.compliance_window_steps
    ann, bob, cid, dee, eve, fay = (a.name for a in model.agents)
    world.events += [act(step - window, dee, CALL, YARD),  # acted, but before the window
                     act(step - window + 1, cid, TEXT),  # kept it: the compliant alternative, at the window's start
                     act(step - 1, bob, CALL, YARD),  # kept it: a call outside
                     act(step, ann, CALL),  # breached (inside)
                     act(step, eve, CALL, YARD, ok=False),  # a refused act is no fact
                     act(step, fay, SWEEP)]  # another norm's behaviour (events come in step order)
    model.agent_named(ann).last_breach[PHONES] = step  # as ``account`` reads it from the world facts
    assert metrics.acting_counts(model, PHONES) == (2, 3)
    assert acting_compliance(model, PHONES) == pytest.approx(2 / 3)
    everyone = metrics.share(lambda a: a.complies(PHONES))(model)
    assert everyone == pytest.approx(5 / 6)  # the paper's definition, kept: the idle count as complying


def test_those_who_acted_are_read_within_compliance_window_steps():
    """The window is the setting's: the test above reads it back at its default, so a constant 6 passed."""
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=1, compliance_window_steps=3)
    step = MORNING + 5
    model.steps = step
    ann, bob = (a.name for a in model.agents[:2])
    model.world.events[:] = [act(step - 3, ann, CALL, YARD),  # a call outside, just before the window
                             act(step - 2, bob, CALL, YARD)]  # and at its first step
    assert metrics.acting_counts(model, PHONES) == (1, 1)


def test_an_agent_whose_breach_is_read_late_counts_though_its_act_left_the_window(at_step, world):
    """A missed follow-up is read after the meal: the breach itself shows the agent had the chance."""
    model = at_step
    model.steps = 30
    ann = model.agents[0].name
    model.agent_named(ann).last_breach[SWEEPING] = 30
    assert metrics.acting_counts(model, SWEEPING) == (0, 1)
    assert acting_compliance(model, SWEEPING) == 0.0


def test_compliance_among_those_who_acted_is_not_measured_when_nobody_did(at_step, world):
    model = at_step
    model.steps = FOUR_PM
    world.events += [act(FOUR_PM, model.agents[0].name, SWEEP), act(FOUR_PM, model.agents[1].name, SKETCH)]
    assert metrics.acting_counts(model, PHONES) == (0, 0)
    assert math.isnan(acting_compliance(model, PHONES))
    assert math.isnan(acting_compliance(model, LATE_SAWING))  # a sketch before 17:00 bears on no quiet hours
    assert metrics.share(lambda a: a.complies(PHONES))(model) == 1.0  # where the old share says all comply


def test_the_first_time_most_of_those_who_acted_complied_is_dated_and_unmeasured_steps_reach_nothing():
    frame = pd.DataFrame({"day": [0.0, 0.25, 0.5, 0.75], "acting_compliance[n]": [float("nan"), 0.5, 0.75, None],
                          "acting_compliance[m]": [float("nan")] * 4})
    assert metrics._acting_reached(frame, "n") == "at day 0.50"
    assert metrics._acting_reached(frame, "m") == "not measured (nobody acted on it)"
    assert metrics._acting_reached(frame, "absent") == "not measured (nobody acted on it)"


def test_acts_bearing_on_a_norm_are_read_by_hour_from_strings_tuples_or_no_tags(model):
    """``reproduce``'s acting compliance over a stretch of a run's events frame: an act out of the
    norm's hours, refused, or before the stretch bears on nothing; tags come comma-joined (a run's
    table), as a tuple, or missing; the agents are the acts' own, so a breacher who acted counts once."""
    settings, minutes = model.society.settings, model.scenario_spec.step_minutes
    events = pd.DataFrame([(FOUR_PM + 1, "Ann", SAW, True, "saw"),  # 16:10: before the quiet hours
                           (FOUR_PM, "Old", SAW, True, "saw"),  # the stretch starts after this step
                           (HALF_FIVE, "Bob", SAW, True, ("saw",)),  # a breach
                           (HALF_FIVE, "Bob", SAW, True, "saw,wood"),
                           (HALF_FIVE, "Cid", SKETCH, True, None),  # the compliant alternative
                           (HALF_FIVE, "Dee", SAW, False, "saw"),  # refused: no fact
                           (HALF_FIVE + 1, "Eve", SKETCH, True, ())],
                          columns=["step", "agent", "action", "ok", "tags"])
    assert metrics._acts_bearing_on(events, settings, minutes, LATE_SAWING, FOUR_PM) == ["Bob", "Bob", "Cid", "Eve"]
    assert metrics.acts_bearing_on(events, settings, minutes, LATE_SAWING, FOUR_PM) == 4
    assert metrics._acts_bearing_on(events, settings, minutes, SWEEPING, FOUR_PM) == ["Ann", "Bob", "Bob"]
    assert metrics.acts_bearing_on(events.iloc[:0], settings, minutes, LATE_SAWING, FOUR_PM) == 0
    breached = pd.DataFrame({"step": [HALF_FIVE, HALF_FIVE], "agent": ["Bob", "Ann"],
                             "norm": [LATE_SAWING, SWEEPING]})
    # of Bob, Cid and Eve, Bob breached; Ann's breach of another norm is no chance here
    assert metrics.acting_unbroken_share(events, breached, settings, minutes, LATE_SAWING, FOUR_PM) \
        == pytest.approx(2 / 3)
    assert math.isnan(metrics.acting_unbroken_share(events, breached, settings, minutes, PHONES, FOUR_PM))


def test_a_follow_up_norm_judges_the_act_that_ended_its_window_not_a_later_one(model, world):
    """With ``within_steps`` 2, sawing at step 1 and sweeping at step 2 keeps the norm: sawing again at
    step 3 is not that saw's breach (its own window ends at step 5, and it is judged then, once)."""
    settings = model.society.settings
    sweeping = settings.tracked(SWEEPING)
    two_steps = sweeping.model_copy(update={"violated_by": sweeping.violated_by.model_copy(update={"within_steps": 2})})
    patient = settings.model_copy(update={"tracked_norms": [two_steps]})
    world.events += [act(1, "Ann", SAW), act(2, "Ann", SWEEP), act(3, "Ann", SAW), act(4, "Ann", TEXT),
                     act(5, "Ann", TEXT)]

    def found(step):
        return metrics.breaches(model.world, patient, step, model.scenario_spec.step_minutes)

    assert found(3) == []
    assert found(5) == [Breach(5, "Ann", SWEEPING, FLOOR, MISSED_SWEEP)]
