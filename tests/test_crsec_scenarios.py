"""CRSEC on a second setting written from the docs alone (the makerspace): its own places, behaviours,
hours and norms drive the run; a bad schedule entry is named with the field and what was expected."""

import copy

import pytest

from socialsim.agents.crsec.metrics import series
from socialsim.agents.crsec.settings import load_settings
from socialsim.model.society import SocietyModel
from socialsim.scenarios.loader import ScenarioError, load_scenario


def run(scenario, steps, **params):
    model = SocietyModel(scenario, arch="crsec", model="rules", rng=1, **params)
    for _ in range(steps):
        model.step()
    return model


def test_the_makerspace_measures_its_own_norms_and_they_spread():
    model = run("makerspace", 60)
    frame = series(model)
    adoption = sorted(c for c in frame.columns if c.startswith("adoption["))
    assert adoption == ["adoption[no phone calls indoors]", "adoption[sweep after sawing]"]
    for column in adoption:
        assert frame[column].max() > frame[column].iloc[0]  # beyond the two entrepreneurs
    breaches = model.datacollector.get_table_dataframe("breaches")
    assert set(breaches["norm"]) == {"no phone calls indoors", "sweep after sawing"}
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


@pytest.mark.parametrize("entry, expected", [
    ({"time": "10:00", "behaviour": "fly"}, "crsec.schedule[0].behaviour: unknown behaviour 'fly'"),
    ({"time": "10:00", "behaviour": "saw a plank", "place": "the moon"}, "crsec.schedule[0].place: unknown area"),
    ({"time": "25:00", "behaviour": "saw a plank"}, "expected a time of day like '12:00'"),
])
def test_a_bad_schedule_entry_is_named(entry, expected):
    spec = copy.deepcopy(load_scenario("makerspace"))
    spec.crsec = {**spec.crsec, "schedule": [entry]}
    with pytest.raises(ScenarioError, match=expected.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        load_settings(spec)
