"""The personal norm database and the validation of the scenario's crsec section."""

import copy

import pytest

from socialsim.agents.crsec.settings import CRSECSettings, load_settings
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
