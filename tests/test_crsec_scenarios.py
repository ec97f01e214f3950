"""CRSEC on a second setting written from the docs alone (the makerspace): its own places, behaviours,
hours and norms drive the run; a bad schedule entry is named with the field and what was expected."""

import asyncio
import copy
import re

import pytest

from socialsim.agents.crsec.metrics import series
from socialsim.agents.crsec.settings import load_settings
from socialsim.model.society import SocietyModel
from socialsim.scenarios.loader import DATA_DIR, ScenarioError, load_scenario


def run(scenario, steps, **params):
    model = SocietyModel(scenario, arch="crsec", model="rules", rng=1, **params)
    for _ in range(steps):
        model.step()
    return model


def test_the_makerspace_measures_its_own_norms_and_they_spread():
    model = run("makerspace", 60)
    frame = series(model)
    adoption = sorted(c for c in frame.columns if c.startswith("adoption["))
    assert adoption == ["adoption[no phone calls indoors]", "adoption[no sawing after 17:00]",
                        "adoption[sweep after sawing]"]
    for column in adoption:
        assert frame[column].max() > frame[column].iloc[0]  # beyond the entrepreneurs
    breaches = model.datacollector.get_table_dataframe("breaches")
    assert set(breaches["norm"]) == {"no phone calls indoors", "sweep after sawing", "no sawing after 17:00"}
    plans = model.datacollector.get_table_dataframe("plans")
    assert set(plans.loc[plans["time"] == "10:00", "activity"]) == {"saw a plank"}  # its own schedule


def test_the_makerspace_schedule_drives_the_follow_up_norm():
    """Without the scheduled sawing, nothing can breach 'sweep after sawing'."""
    spec = load_scenario("makerspace")
    spec.crsec = {**spec.crsec, "schedule": []}
    model = SocietyModel(spec, arch="crsec", model="rules", rng=1)
    for _ in range(30):
        model.step()
    breaches = model.datacollector.get_table_dataframe("breaches")
    assert "sweep after sawing" not in set(breaches["norm"])


def test_a_scheduled_saw_in_a_long_plan_item_is_judged_at_its_own_time():
    """With 90-minute plan items the 17:00 saw is planned in the item at 16:30: an agent who holds 'no
    sawing after 17:00' planned to saw there (the norm was judged at 16:30). It is judged at 17:00, its
    own time, as with hourly items."""
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=1, plan_item_minutes=90)
    model.step()
    late = {a.name: next(i for i in a.plan if i["time"] == "16:30") for a in model.agents}
    holders = {a.name for a in model.agents if a.norms.holds("no sawing after 17:00")}
    assert holders and all(late[name]["activity"] == "sketch a design" for name in holders)
    assert all(late[name]["activity"] == "saw a plank" for name in set(late) - holders)


def test_with_two_hour_items_the_17_00_saw_is_still_planned():
    """09:00-18:00 in 2-hour items: the settings put the 17:00 saw in an item at 17:00, and the rule
    made four items (the last 15:00-18:00, which planned the 15:00 saw): the 17:00 saw was never planned."""
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=1, plan_item_minutes=120)
    model.step()
    late = {a.name: a.plan[-1] for a in model.agents}
    holders = {a.name for a in model.agents if a.norms.holds("no sawing after 17:00")}
    assert {i["time"] for i in late.values()} == {"17:00"} and holders < set(late)
    assert all(late[name]["activity"] == ("sketch a design" if name in holders else "saw a plank") for name in late)


@pytest.mark.parametrize("compliance", [False, True])
def test_a_plan_that_saws_on_into_the_quiet_hours_is_judged_to_break_them(compliance):
    """With 3-hour items a 16:00 saw is planned in the item at 15:00, which lasts to the day's end
    (18:00): the saw is fine at 16:00, but the plan saws on past 17:00. The plan judge read the item
    at 15:00 only and found the plan of an agent holding 'no sawing after 17:00' compliant. Planned
    without regard to norms (``enable_compliance`` off) the plan saws; with it, its holder sketches in
    that item, and the judge finds the plan compliant."""
    spec = load_scenario("makerspace")
    spec.crsec = {**spec.crsec, "plan_item_minutes": 180, "enable_compliance": compliance,
                  "schedule": [{"time": "16:00", "behaviour": "saw a plank", "place": "the workshop"}]}
    model = SocietyModel(spec, arch="crsec", model="rules", rng=1)
    model.step()
    lars = model.agent_named("Lars Nyberg")
    assert lars.norms.adopted("no sawing after 17:00") and lars.plan[-1]["time"] == "15:00"
    assert lars.plan[-1]["activity"] == ("sketch a design" if compliance else "saw a plank")
    assert lars.plan_ok["no sawing after 17:00"] is compliance


def test_a_holders_habit_that_saws_on_into_the_quiet_hours_is_planned_to_keep_them():
    """A day from 08:30 puts Lars Nyberg's habit (a saw, here) in the item at 16:30, which lasts until
    17:30: he holds 'no sawing after 17:00', yet the plan rule read the item at 16:30 only and planned
    the saw, and the plan judge, reading the item until 17:30, found his plan breaking it."""
    spec = load_scenario("makerspace")
    spec.crsec = {**spec.crsec, "day_start": "08:30", "schedule": []}
    lars = next(a for a in spec.agents if a.name == "Lars Nyberg")
    lars.traits = {**lars.traits, "habits": ["saw a plank"]}
    model = SocietyModel(spec, arch="crsec", model="rules", rng=1)
    model.step()
    lars = model.agent_named("Lars Nyberg")
    assert lars.norms.adopted("no sawing after 17:00")
    assert [(i["time"], i["activity"]) for i in lars.plan[-3:]] == [("15:30", "drink tea"), ("16:30", "sketch a design"),
                                                                    ("17:30", "drink tea")]
    assert lars.plan_ok["no sawing after 17:00"] and "saw a plank" in {i["activity"] for i in lars.plan}


def test_an_actions_call_that_runs_past_17_00_keeps_the_quiet_hours(monkeypatch):
    """A saw planned at 16:50 (before the norm was held, say) in an item lasting until 18:00: the call
    from 16:50 covers six 5-minute actions, to 17:20. The actions rule judged it at 16:50 only, and
    Lars Nyberg, who holds 'no sawing after 17:00', sawed at 17:00."""
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=1)
    model.step()
    lars = model.agent_named("Lars Nyberg")
    lars.plan = [{"time": "09:00", "activity": "drink tea", "place": "the break room", "then": None},
                 {"time": "16:50", "activity": "saw a plank", "place": "the workshop", "then": None}]
    monkeypatch.setattr(lars, "clock", lambda: (1, 16 * 60 + 50))
    asyncio.run(lars._plan())
    assert [m for m, _ in lars.actions] == list(range(16 * 60 + 50, 17 * 60 + 20, 5))
    done = {text for _, text in lars.actions}
    assert "sketch a design" in done and "saw a plank" not in done


def test_a_missed_follow_up_reads_as_plain_english_in_breaches_thoughts_and_chats():
    """A missed sweep was written "saw a plank without a follow-up": chats said "Excuse me, Ruben Diaz:
    doing saw a plank without a follow-up in the workshop floor bothers people." and thoughts "Ruben Diaz
    did saw a plank without a follow-up". They name the follow-up and keep the verb's form."""
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=1)
    for _ in range(12):
        model.step()
    tables = {name: model.datacollector.get_table_dataframe(name) for name in ("breaches", "thoughts", "conversations")}
    missed = tables["breaches"].loc[tables["breaches"]["norm"] == "sweep after sawing", "behaviour"]
    assert set(missed) == {"saw a plank without sweeping the workbench"}
    observed = tables["thoughts"]["observation"]
    assert observed.str.contains(" finished sawing a plank without sweeping the workbench in ").any()
    said = tables["conversations"]["text"]
    assert said.str.contains(": sawing a plank without sweeping the workbench in the workshop bothers").any()
    for text in [*missed, *observed, *tables["thoughts"]["thought"], *said]:
        assert "follow-up" not in text and " did saw" not in text and "doing saw" not in text, text


def test_an_agent_without_a_goal_spends_the_day_at_its_own_scenario():
    """The default goal was Hobbs Cafe's, in the prompts of every other CRSEC setting."""
    spec = load_scenario("makerspace")
    spec.agents[0].traits = {k: v for k, v in spec.agents[0].traits.items() if k != "goal"}
    model = SocietyModel(spec, arch="crsec", model="rules", rng=1)
    goals = [a.crsec_traits.goal for a in model.agents]
    assert "spend the day at Riverside Makerspace" in goals and not any("Hobbs" in g for g in goals)


def _hour_of(model, step):
    return model.society.settings.clock_of_step(step, model.scenario_spec.step_minutes)[1] // 60


def test_a_norm_with_hours_is_breached_only_within_them():
    """'no sawing after 17:00': the 10:00 and 15:00 sawing breaks nothing, the 17:00 sawing does."""
    model = run("makerspace", 60)
    breaches = model.datacollector.get_table_dataframe("breaches")
    late = breaches[breaches["norm"] == "no sawing after 17:00"]
    assert len(late) > 0 and {_hour_of(model, s) for s in late["step"]} == {17}
    sawing_hours = {_hour_of(model, e.step) for e in model.world.events if "saw" in e.tags}
    assert {10, 15} <= sawing_hours  # the same act earlier in the day was done, and not counted


def test_without_its_hours_the_same_norm_is_breached_all_day():
    """The time-of-day window is what spares the morning sawing: drop it and the morning breaches."""
    spec = copy.deepcopy(load_scenario("makerspace"))
    for norm in spec.crsec["tracked_norms"]:
        norm["violated_by"].pop("from_time", None)
    model = SocietyModel(spec, arch="crsec", model="rules", rng=1)
    for _ in range(60):
        model.step()
    breaches = model.datacollector.get_table_dataframe("breaches")
    late = breaches[breaches["norm"] == "no sawing after 17:00"]
    assert 10 in {_hour_of(model, s) for s in late["step"]}


def test_plans_keep_a_held_norm_only_within_its_hours():
    """Day 2: agents who hold the quiet-hours norm sketch at 17:00 instead of sawing, yet still saw at 10:00."""
    model = run("makerspace", 56)  # day 2 starts at step 55
    plans = model.datacollector.get_table_dataframe("plans")
    day2 = plans[plans["day"] == 2]
    holders = {a.name for a in model.agents if a.norms.holds("no sawing after 17:00")}
    assert holders
    late = day2[(day2["time"] == "17:00") & day2["agent"].isin(holders)]
    morning = day2[(day2["time"] == "10:00") & day2["agent"].isin(holders)]
    assert set(late["activity"]) == {"sketch a design"} and set(morning["activity"]) == {"saw a plank"}


@pytest.mark.parametrize("clock, holds", [("21:59", False), ("22:00", True), ("03:00", True), ("07:00", False)])
def test_a_window_may_wrap_past_midnight(clock, holds):
    from socialsim.agents.crsec.settings import ViolationSpec, minutes
    spec = ViolationSpec(tags=["loud"], from_time="22:00", until_time="07:00")
    assert spec.holds_at(minutes(clock)) is holds


@pytest.mark.parametrize("entry, expected", [
    ({"time": "10:00", "behaviour": "fly"}, "crsec.schedule[0].behaviour: unknown behaviour 'fly'"),
    # a behaviour's name where its text is meant: the text is named
    ({"time": "10:00", "behaviour": "saw"}, "crsec.schedule[0].behaviour: unknown behaviour 'saw' (a behaviour is "
                                            "referred to by its text: 'saw a plank')"),
    ({"time": "10:00", "behaviour": "saw plank"}, "unknown behaviour 'saw plank' (did you mean 'saw a plank'? "
                                                  "a behaviour is referred to by its text in map.behaviours)"),
    ({"time": "10:00", "behaviour": "saw a plank", "place": "the moon"}, "crsec.schedule[0].place: unknown area"),
    ({"time": "25:00", "behaviour": "saw a plank"}, "expected a time of day like '12:00'"),
    # a time outside the day (before it, at its end) is in no plan item: it was never planned, silently
    ({"time": "08:00", "behaviour": "saw a plank"}, "crsec.schedule[0].time: 08:00 is outside the day"),
    ({"time": "08:59", "behaviour": "saw a plank"}, "crsec.schedule[0].time: 08:59 is outside the day (09:00 to 18:00)"),
    ({"time": "18:00", "behaviour": "saw a plank"}, "crsec.schedule[0].time: 18:00 is outside the day"),
])
def test_a_bad_schedule_entry_is_named(entry, expected):
    spec = copy.deepcopy(load_scenario("makerspace"))
    spec.crsec = {**spec.crsec, "schedule": [entry]}
    with pytest.raises(ScenarioError, match=re.escape(expected)):
        load_settings(spec)


def test_a_misspelt_trait_is_named_not_run_on_its_default():
    """traits.stnace ran with every stance neutral, without a word; a key crsec does not read and is
    near none of its own (another architecture's, or yours) is left alone."""
    spec = copy.deepcopy(load_scenario("makerspace"))
    traits = spec.agents[2].traits
    traits["stnace"] = traits.pop("stance")
    traits["talk_propensty"] = traits.pop("talk_propensity")
    traits["svo"] = "prosocial"
    with pytest.raises(ScenarioError) as refused:
        load_settings(spec)
    assert str(refused.value).endswith(
        "\n  agents[2] (Priya Raman).traits.stnace: not a trait crsec reads (did you mean 'stance'?)"
        "\n  agents[2] (Priya Raman).traits.talk_propensty: not a trait crsec reads (did you mean 'talk_propensity'?)")
    assert "svo" not in str(refused.value)


def test_a_bad_crsec_field_of_a_yaml_file_is_named_with_its_line(tmp_path):
    text = (DATA_DIR / "makerspace.yaml").read_text()
    path = tmp_path / "mine.yaml"
    path.write_text(text.replace("  filler_behaviour: drink tea", "  filler_behavior: drink tea"))
    line = text.splitlines().index("  filler_behaviour: drink tea") + 1
    with pytest.raises(ScenarioError, match=f"crsec.filler_behavior: Extra inputs are not permitted "
                                            f"\\(got 'drink tea'\\), at line {line}$"):
        load_settings(load_scenario(path))


def test_a_bad_crsec_field_of_a_toml_file_is_named_with_its_line(tmp_path):
    """tomllib keeps no positions: a TOML scenario's problems named no line, where a YAML one's did."""
    path = tmp_path / "mine.toml"
    path.write_text('name = "tiny"\n[[agents]]\nname = "Ann"\ndescription = "x"\n[map]\n'
                    'areas = [{name = "room", x = 0, y = 0, width = 1, height = 1}]\n'
                    '[crsec]\nfiller_behavior = "drink tea"\n')
    with pytest.raises(ScenarioError, match="crsec.filler_behavior: Extra inputs are not permitted "
                                            "\\(got 'drink tea'\\), at line 8$"):
        load_settings(load_scenario(path))


def test_a_bad_norm_hour_is_named():
    spec = copy.deepcopy(load_scenario("makerspace"))
    spec.crsec["tracked_norms"][2]["violated_by"]["from_time"] = "5pm"
    with pytest.raises(ScenarioError, match=r"(?s)makerspace.yaml.*crsec.tracked_norms.2.violated_by.from_time: expected a time of day like '22:00', got '5pm', at line \d+$"):
        load_settings(spec)


def _rule_plan(**params) -> list[tuple[str, str]]:
    """Lars's first rule-made plan in the makerspace: (time, activity) per plan item."""
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=1, **params)
    model.step()
    lars = next(a for a in model.agents if a.name == "Lars Nyberg")
    return [(item["time"], item["activity"]) for item in lars.plan]


def test_a_scheduled_activity_is_planned_in_the_plan_item_its_time_falls_in():
    """A schedule time no plan item starts at (10:30 between hourly items, or the makerspace's 10:00
    and 17:00 with items every 90 minutes from 09:00) was left out of every rule-made plan without a
    word; it is planned in the item that covers it."""
    spec = copy.deepcopy(load_scenario("makerspace"))
    hourly = _rule_plan()
    assert ("10:00", "saw a plank") in hourly and ("17:00", "saw a plank") not in hourly  # Lars holds the 17:00 norm
    longer = _rule_plan(plan_item_minutes=90)
    assert [t for t, _ in longer] == ["09:00", "10:30", "12:00", "13:30", "15:00", "16:30"]
    assert ("09:00", "saw a plank") in longer and ("15:00", "saw a plank") in longer
    assert _rule_plan(schedule=[{"time": "10:30", "behaviour": "saw a plank"}])[1] == ("10:00", "saw a plank")
    spec.crsec = {**spec.crsec, "schedule": [{"time": "10:30", "behaviour": "saw a plank"}]}
    assert load_settings(spec).schedule[0].time == "10:30"


def test_the_days_first_and_last_minutes_take_a_scheduled_activity():
    """The day runs from day_start up to, not including, day_end: an activity at its first minute is
    planned in the first plan item, and one at its last minute is accepted too."""
    plan = _rule_plan(schedule=[{"time": "09:00", "behaviour": "saw a plank"},
                                {"time": "17:59", "behaviour": "saw a plank"}])
    assert plan[0] == ("09:00", "saw a plank")


def test_two_scheduled_activities_in_one_plan_item_are_refused():
    """A plan item holds one activity: of two scheduled in it, one would be dropped without a word."""
    with pytest.raises(ScenarioError, match=r"crsec.schedule\[1\].time: 10:45 falls in the plan item at 10:00, as "
                                            r"schedule\[0\] does \(10:15\); a plan item holds one activity \(plan "
                                            r"items last 60 minutes from 09:00\)"):
        SocietyModel("makerspace", arch="crsec", model="rules", schedule=[
            {"time": "10:15", "behaviour": "saw a plank"}, {"time": "10:45", "behaviour": "saw a plank"}])
    with pytest.raises(ScenarioError, match=r"crsec.schedule\[2\].time: 17:00 falls in the plan item at 15:00, as "
                                            r"schedule\[1\] does \(15:00\)"):
        SocietyModel("makerspace", arch="crsec", model="rules", plan_item_minutes=180)


@pytest.mark.parametrize("params", [{"filler_behaviour": "bogusthing"},
                                    {"schedule": [{"time": "10:00", "behaviour": "saw"}]}])
def test_a_run_parameter_naming_a_behaviour_is_checked_as_the_scenario_s_own_section_is(params):
    """--set crsec.filler_behaviour=bogusthing ran to 'completed': only the scenario file's own value was checked."""
    with pytest.raises(ScenarioError, match="invalid crsec parameters\n  crsec.(filler_behaviour|schedule.0..behaviour): "
                                            "unknown behaviour"):
        SocietyModel("makerspace", arch="crsec", model="rules", **params)
