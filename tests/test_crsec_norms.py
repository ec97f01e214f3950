"""The personal norm database and the validation of the scenario's crsec section."""

import copy
from pathlib import Path

import pytest

from socialsim.agents.crsec.settings import (
    CRSECSettings,
    ViolationSpec,
    clock_text,
    load_settings,
    minutes,
    with_params,
)
from socialsim.agents.norms import NormDatabase, norm_key
from socialsim.scenarios.loader import ScenarioError, load_scenario


def test_created_norms_are_qualified_and_identified_ones_are_not():
    db = NormDatabase("Abigail Chen")
    created = db.add("No smoking indoors.", 95, "injunctive", qualified=True, origin="created", step=1)
    heard = db.add("People tip after meals.", 60, "descriptive", qualified=False, origin="conversation", step=2)
    assert (created.activated, created.valid, created.qualified) == (True, True, True)
    assert (heard.activated, heard.valid, heard.qualified) == (False, False, False)
    assert db.qualified() == [created] and db.utility_sum() == 95
    assert heard.state == "pending"


def test_utility_is_clipped_to_1_100():
    db = NormDatabase("x")
    assert db.add("a", 250, "injunctive", qualified=True, origin="created", step=1).utility == 100
    assert db.add("b", -3, "injunctive", qualified=True, origin="created", step=1).utility == 1


def test_match_sets_what_a_norm_covers_and_holds_reads_only_qualified_norms():
    db = NormDatabase("x")
    pending = db.add("No smoking inside.", 90, "injunctive", qualified=False, origin="thought", step=1)
    db.set_match(pending, "no smoking indoors", None, step=1)
    assert pending.covers == {"no smoking indoors"} and not db.holds("no smoking indoors")
    db.qualify(pending, step=2)
    assert db.holds("no smoking indoors")


def test_rejected_norm_stays_unqualified_and_records_the_failed_check():
    db = NormDatabase("x")
    n = db.add("Be loud.", 40, "injunctive", qualified=False, origin="conversation", step=1)
    db.reject(n, "conflict", step=1)
    assert not n.qualified and n.failed_check == "conflict" and n.state == "rejected"
    assert db.changes[-1]["event"] == "failed conflict"


def test_abstract_norm_covers_its_members_and_members_are_deactivated_but_valid():
    db = NormDatabase("x")
    a = db.add("No smoking indoors.", 90, "injunctive", qualified=True, origin="created", step=1)
    b = db.add("Keep the air fresh.", 70, "injunctive", qualified=True, origin="created", step=1)
    db.set_match(a, "no smoking indoors", None, step=1)
    db.set_match(b, None, None, step=1)
    abstract = db.add("Maintain a healthy environment.", 80, "injunctive", qualified=False, origin="synthesis",
                      step=3, members=(a.id, b.id))
    db.set_match(abstract, None, None, step=3)
    db.qualify(abstract, step=3)
    db.deactivate(abstract.members, step=3, by=abstract.id)
    assert (a.activated, a.valid, b.activated, b.valid) == (False, True, False, True)
    assert db.qualified() == [abstract] and db.holds("no smoking indoors")
    assert [r["event"] for r in db.drain_changes()][-2:] == ["deactivated (synthesized into norm 2)"] * 2
    assert db.changes == []


def test_norm_key_ignores_case_and_punctuation():
    assert norm_key("No smoking, indoors!") == norm_key("no smoking indoors")


# --- the crsec section ---------------------------------------------------------------------------------


def hobbs():
    return load_scenario("hobbs-cafe")


def test_shipped_section_is_valid_and_has_the_papers_parameters():
    settings = load_settings(hobbs())
    assert (settings.initial_norms, settings.synthesis_threshold) == (5, 350)
    assert [t.name for t in settings.tracked_norms] == ["no smoking indoors", "be quiet in public", "tip after meals"]
    scenario = hobbs()
    assert scenario.default_arch == "crsec" and "paper" in scenario.presets
    entrepreneurs = [a.name for a in scenario.agents if a.traits.get("entrepreneur")]
    assert entrepreneurs == ["Bob Johnson", "Abigail Chen", "Francisco Lopez"] and len(scenario.agents) == 10


def broken(**changes):
    scenario = hobbs()
    section = copy.deepcopy(scenario.crsec)
    section.update(changes)
    return scenario.model_copy(update={"crsec": section})


@pytest.mark.parametrize("changes, expected", [
    ({"synthesis_threshold": "lots"}, "crsec.synthesis_threshold"),
    ({"day_start": "8 am"}, "crsec.day_start"),
    ({"tracked_norms": []}, "crsec.tracked_norms"),
    ({"surprise": 1}, "crsec.surprise"),
    ({"filler_behaviour": "juggle"}, "crsec.filler_behaviour: unknown behaviour 'juggle'"),
])
def test_a_broken_section_names_the_field(changes, expected):
    with pytest.raises(ScenarioError, match="hobbs-cafe") as info:
        load_settings(broken(**changes))
    assert expected in str(info.value)


def test_a_catalogue_entry_about_an_unknown_norm_is_named():
    scenario = hobbs()
    section = copy.deepcopy(scenario.crsec)
    section["norm_catalogue"][0]["about"] = "no skateboards"
    with pytest.raises(ScenarioError, match=r"norm_catalogue\[0\].about: unknown tracked norm 'no skateboards'"):
        load_settings(scenario.model_copy(update={"crsec": section}))


def test_bad_agent_traits_are_named_with_the_agent():
    scenario = hobbs()
    agents = [a.model_copy(deep=True) for a in scenario.agents]
    agents[2].traits["stance"] = {"no smoking indoors": "maybe"}
    agents[3].traits["habits"] = ["fly a kite"]
    with pytest.raises(ScenarioError) as info:
        load_settings(scenario.model_copy(update={"agents": agents}))
    message = str(info.value)
    assert "agents[2] (Tom Gomez).traits.stance.no smoking indoors" in message
    assert "agents[3] (Tamara Taylor).traits.habits: unknown behaviour 'fly a kite'" in message


def test_missing_section_is_explained():
    with pytest.raises(ScenarioError, match="needs a 'crsec:' section"):
        load_settings(hobbs().model_copy(update={"crsec": None}))


def test_unknown_architecture_parameter_is_rejected():
    from socialsim.model.society import SocietyModel

    with pytest.raises(ValueError, match=r"unknown crsec parameter\(s\) \['synthesis_treshold'\]; "
                                         r"did you mean synthesis_threshold\?"):
        SocietyModel("hobbs-cafe", arch="crsec", model="rules", synthesis_treshold=10)


def test_an_invalid_parameter_value_is_named_with_the_range_it_breaks():
    """Every bad value at once, each by its key, as for a scenario's own section; no pydantic boilerplate."""
    from socialsim.model.society import SocietyModel

    with pytest.raises(ValueError) as caught:
        SocietyModel("hobbs-cafe", arch="crsec", model="rules", memory_decay=0, synthesis_threshold=-1)
    message = str(caught.value)
    assert message.splitlines() == ["invalid crsec parameters",
                                    "  crsec.memory_decay: Input should be greater than 0 (got 0)",
                                    "  crsec.synthesis_threshold: Input should be greater than or equal to 1 (got -1)"]


def test_settings_model_has_sensible_defaults():
    settings = CRSECSettings.model_validate({"tracked_norms": [
        {"name": "n", "type": "injunctive", "violated_by": {"tags": ["smoke"]}, "keywords": ["smok"]}]})
    assert settings.day_minutes == 14 * 60 and settings.recall_overlap == 1.0


# --- the clock, the hours a norm holds, and the messages of a bad section or parameter -------------------------
def violation(**hours):
    return ViolationSpec(tags=["saw"], **hours)


@pytest.mark.parametrize("hours, clock, holds", [
    ({}, "03:00", True),  # no hours: all day
    ({"from_time": "17:00"}, "16:59", False), ({"from_time": "17:00"}, "17:00", True),
    ({"from_time": "17:00"}, "23:59", True), ({"from_time": "17:00"}, "00:00", False),  # until midnight
    ({"until_time": "07:00"}, "00:00", True), ({"until_time": "07:00"}, "06:59", True),
    ({"until_time": "07:00"}, "07:00", False),  # the end is not in the window
    ({"from_time": "09:00", "until_time": "12:00"}, "08:59", False),
    ({"from_time": "09:00", "until_time": "12:00"}, "09:00", True),
    ({"from_time": "09:00", "until_time": "12:00"}, "11:59", True),
    ({"from_time": "09:00", "until_time": "12:00"}, "12:00", False),
])
def test_a_norm_holds_from_its_start_until_before_its_end(hours, clock, holds):
    assert violation(**hours).holds_at(minutes(clock)) is holds


def test_a_window_that_starts_when_it_ends_is_refused():
    """22:00 to 22:00 would hold never (or, read another way, all day): the author meant something else."""
    with pytest.raises(ValueError, match=r"from_time and until_time are both 22:00: a window of no time "
                                         r"\(leave both out for all day\)"):
        violation(from_time="22:00", until_time="22:00")
    with pytest.raises(ValueError, match="both 7:00"):
        violation(from_time="7:00", until_time="07:00")  # the same minute, written two ways
    assert violation(from_time="22:00", until_time="22:01").holds_at(minutes("22:00"))


def test_a_norm_holds_whatever_the_day_and_always_when_the_time_is_unknown():
    evening = violation(from_time="17:00")
    assert evening.holds_at(24 * 60 + 17 * 60 + 10) and not evening.holds_at(24 * 60 + 16 * 60 + 50)  # day 2
    assert evening.holds_at(3 * 24 * 60 + 17 * 60) and not evening.holds_at(3 * 24 * 60 + 10 * 60)  # day 4
    assert evening.holds_at(None) and violation(until_time="07:00").holds_at(None) and violation().holds_at(None)


def test_clock_text_and_minutes_are_each_others_inverse():
    assert [minutes(c) for c in ("00:00", "08:05", "9:30", "23:59")] == [0, 485, 570, 1439]
    assert [clock_text(m) for m in (0, 5, 485, 1439)] == ["00:00", "00:05", "08:05", "23:59"]


def test_a_step_falls_on_its_day_and_minute_and_days_wrap_at_day_end():
    settings = load_settings(hobbs())  # 08:00-22:00: 840 minutes a day
    assert [settings.clock_of_step(s, 20) for s in (1, 2, 42, 43, 85)] == [(1, 480), (1, 500), (1, 1300), (2, 480),
                                                                          (3, 480)]
    assert settings.clock_of_step(4, 7.5) == (1, 502)  # 22.5 minutes in, whole minutes
    late = settings.model_copy(update={"day_start": "09:30", "day_end": "10:30"})
    assert [late.clock_of_step(s, 25) for s in (1, 3, 4)] == [(1, 570), (1, 620), (2, 585)]


def test_a_tracked_norm_is_looked_up_by_its_name():
    settings = load_settings(hobbs())
    assert settings.tracked("tip after meals") is settings.tracked_norms[2]
    assert settings.tracked("no smoking indoors").type == "injunctive"
    with pytest.raises(KeyError, match=r"no tracked norm 'no skateboards' \(tracked: no smoking indoors, "):
        settings.tracked("no skateboards")


@pytest.mark.parametrize("changes, expected", [
    ({"day_start": "22:00", "day_end": "08:00"}, "day_end (08:00) must be after day_start (22:00)"),
    ({"day_start": "08:00", "day_end": "08:00"}, "day_end (08:00) must be after day_start (08:00)"),
    ({"plan_item_minutes": 60, "action_minutes": 7}, "plan_item_minutes must be a multiple of action_minutes"),
    ({"day_end": "24:00"}, "crsec.day_end: expected a time of day like '08:00', got '24:00'"),
    ({"day_start": "8:60"}, "crsec.day_start: expected a time of day like '08:00', got '8:60'"),
])
def test_the_day_and_plan_grid_are_checked(changes, expected):
    with pytest.raises(ScenarioError) as info:
        load_settings(broken(**changes))
    assert expected in str(info.value)


def test_a_tracked_norm_named_twice_is_refused():
    section = copy.deepcopy(hobbs().crsec)
    section["tracked_norms"].append(copy.deepcopy(section["tracked_norms"][0]))
    with pytest.raises(ScenarioError, match="tracked_norms: a name is used twice"):
        load_settings(hobbs().model_copy(update={"crsec": section}))


def test_every_bad_reference_of_a_section_is_named_in_one_message():
    scenario = hobbs()
    section = copy.deepcopy(scenario.crsec)
    section["tracked_norms"][0]["alternatives"] = {"smoke": "smoke a cigarette outside"}
    section["schedule"] = [{"time": "12:00", "behaviour": "eat a meal", "place": "the roof"}]
    section["filler_behaviour"] = "zzzz"
    agents = [a.model_copy(deep=True) for a in scenario.agents]
    agents[0].traits["stance"] = {"no spitting": "for"}
    agents[1].traits["home_area"] = "the attic"
    agents[2].traits["talk_propensity"] = 2
    with pytest.raises(ScenarioError) as info:
        load_settings(scenario.model_copy(update={"crsec": section, "agents": agents}))
    text = Path(scenario.where).read_text().splitlines()  # a field pydantic checks is given its line in the file
    tom = next(i for i, t in enumerate(text, 1) if i > text.index("  - name: Tom Gomez") and t.startswith("    traits:"))
    assert str(info.value).splitlines() == [
        f"{scenario.where}: invalid crsec settings",
        "  crsec.tracked_norms (no smoking indoors).alternatives: unknown behaviour 'smoke' (a behaviour is referred "
        "to by its text: 'smoke a cigarette')",
        "  crsec.tracked_norms (no smoking indoors).alternatives: unknown behaviour 'smoke a cigarette outside' "
        "(did you mean 'smoke a cigarette'? a behaviour is referred to by its text in map.behaviours)",
        "  crsec.schedule[0].place: unknown area 'the roof' (expected one of ['Hobbs Cafe counter', "
        "'Hobbs Cafe dining room', 'Hobbs Cafe kitchen', 'the street outside'])",
        "  crsec.filler_behaviour: unknown behaviour 'zzzz' (a behaviour is referred to by its text in map.behaviours)",
        "  agents[0] (Isabella Rodriguez).traits.stance: unknown tracked norm 'no spitting' (known: "
        "['be quiet in public', 'no smoking indoors', 'tip after meals'])",
        "  agents[1] (Wolfgang Schulz).traits.home_area: unknown area 'the attic'",
        f"  agents[2] (Tom Gomez).traits.talk_propensity: Input should be less than or equal to 1 (got 2), at line {tom}",
    ]


def test_a_section_without_a_map_is_refused_and_one_without_behaviours_checks_none():
    scenario = hobbs()
    with pytest.raises(ScenarioError, match=r"(?s)invalid crsec settings\n.*  map: the crsec architecture needs a map "
                                            r"\(areas inside and outside\)$"):
        load_settings(scenario.model_copy(update={"map": None}))
    section = {**copy.deepcopy(scenario.crsec), "filler_behaviour": "whistle",
               "schedule": [{"time": "12:00", "behaviour": "dance", "place": "Hobbs Cafe counter"}]}
    bare = scenario.map.model_copy(update={"behaviours": []})  # no behaviours listed: any text goes
    assert load_settings(scenario.model_copy(update={"crsec": section, "map": bare})).filler_behaviour == "whistle"


def test_run_parameters_are_laid_over_the_section_or_refused_naming_each():
    scenario = hobbs()
    settings = load_settings(scenario)
    assert with_params(settings, {}) is settings
    merged = with_params(settings, {"temptation": 0, "day_end": "20:00"}, scenario)
    assert (merged.temptation, merged.day_end, merged.day_minutes) == (0, "20:00", 720)
    assert merged.tracked_norms == settings.tracked_norms and settings.temptation == 0.25
    with pytest.raises(ScenarioError) as info:
        with_params(settings, {"tempation": 0, "judg": "rules"})
    assert str(info.value) == f"unknown crsec parameter(s) ['judg', 'tempation']; known: {sorted(CRSECSettings.model_fields)}"
    with pytest.raises(ScenarioError) as info:
        with_params(settings, {"temptation": 2, "memory_k": 0})
    assert str(info.value).splitlines() == ["invalid crsec parameters",
                                            "  crsec.temptation: Input should be less than or equal to 1 (got 2)",
                                            "  crsec.memory_k: Input should be greater than or equal to 1 (got 0)"]
    assert with_params(settings, {"filler_behaviour": "zzzz"}).filler_behaviour == "zzzz"  # no scenario: unchecked
    with pytest.raises(ScenarioError) as info:
        with_params(settings, {"filler_behaviour": "zzzz", "schedule": [{"time": "12:00", "behaviour": "eat"}]}, scenario)
    assert str(info.value).splitlines() == [
        "invalid crsec parameters",
        "  crsec.schedule[0].behaviour: unknown behaviour 'eat' (a behaviour is referred to by its text: 'eat a meal')",
        "  crsec.filler_behaviour: unknown behaviour 'zzzz' (a behaviour is referred to by its text in map.behaviours)"]
