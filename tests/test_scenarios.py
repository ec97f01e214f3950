"""Scenario files: the shipped ones load; broken ones name the file, the field and the problem."""

import pytest

from socialsim.scenarios.loader import ScenarioError, available_scenarios, load_scenario

GOOD = """
name: tiny
agents:
  - {name: Ann, description: A tester., start_area: room}
map:
  areas: [{name: room, x: 0, y: 0, width: 2, height: 2}]
"""


def test_every_shipped_scenario_loads():
    assert "hobbs-cafe" in available_scenarios()
    for name in available_scenarios():
        assert load_scenario(name).agents


def test_hobbs_cafe_has_the_papers_agents_and_areas():
    s = load_scenario("hobbs-cafe")
    assert len(s.agents) == 10
    assert sorted(a.name for a in s.agents if a.traits.get("entrepreneur")) == ["Abigail Chen", "Bob Johnson", "Francisco Lopez"]
    areas = {a.name: a.kind for a in s.map.areas}
    assert areas["the street outside"] == "outside"
    assert {"Hobbs Cafe counter", "Hobbs Cafe kitchen", "Hobbs Cafe dining room"} <= set(areas)
    assert "smoking" in next(a.description for a in s.agents if a.name == "Carlos Gomez")


def test_a_good_yaml_and_toml_file_load(tmp_path):
    (tmp_path / "tiny.yaml").write_text(GOOD)
    assert load_scenario(tmp_path / "tiny.yaml").name == "tiny"
    (tmp_path / "tiny.toml").write_text(
        'name = "tiny"\n[[agents]]\nname = "Ann"\ndescription = "x"\n'
        '[map]\nareas = [{name = "room", x = 0, y = 0, width = 1, height = 1}]\n'
    )
    assert load_scenario(tmp_path / "tiny.toml").map.areas[0].name == "room"


@pytest.mark.parametrize(
    "change,expected",
    [
        (("start_area: room", "start_area: attic"), "unknown start_area 'attic'"),
        (("width: 2", "width: -2"), "map.areas.0.width"),
        (("name: tiny", "name: tiny\nsteps_per_day: 3"), "steps_per_day: Extra inputs are not permitted"),
        (("description: A tester.", "descriptio: A tester."), "agents.0.description: Field required"),
    ],
)
def test_errors_name_the_file_and_the_field(tmp_path, change, expected):
    path = tmp_path / "broken.yaml"
    path.write_text(GOOD.replace(*change))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert str(path) in str(err.value) and expected in str(err.value)


def test_unparseable_and_unknown_files(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: [unclosed")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(path)
    with pytest.raises(ScenarioError, match="unknown scenario 'atlantis'"):
        load_scenario("atlantis")


def test_cross_references_are_checked(tmp_path):
    path = tmp_path / "doors.yaml"
    path.write_text(GOOD + "  doors: [[room, garden]]\n")
    with pytest.raises(ScenarioError, match="doors\\[0\\]: unknown area 'garden'"):
        load_scenario(path)


@pytest.mark.parametrize(("shipped", "broken", "arch", "error"), [
    ("makerspace", ("  tracked_norms:", "  tracked_norms: 3\n  ignored_norms:"), "crsec", ScenarioError),
    ("school-micro", ("  svo_assignment: explicit", "  svo_assignment: 12"), "asvo", ValueError),
    ("irollan-valley", ("  blend_threshold: 0.9", "  blend_threshold: many"), "itcmas", ValueError),
])
def test_an_error_in_a_copied_scenario_names_the_copy_not_the_shipped_file(tmp_path, shipped, broken, arch, error):
    """A copy keeps the shipped scenario's `name:`; the error named the shipped file instead (crsec)
    or only the name (asvo, itcmas)."""
    from socialsim.model.society import SocietyModel
    from socialsim.scenarios.loader import scenario_path

    text = scenario_path(shipped).read_text()
    assert broken[0] in text
    copy = tmp_path / f"my-{shipped}.yaml"
    copy.write_text(text.replace(broken[0], broken[1], 1))
    with pytest.raises(error, match=f"^{copy}: .*{arch}") as raised:
        SocietyModel(str(copy), arch=arch, model="rules", rng=1)
    assert str(scenario_path(shipped)) not in str(raised.value)


@pytest.mark.parametrize("arch", ["crsec", "asvo", "itcmas", "generic"])
def test_every_shipped_scenario_runs_under_each_architecture_or_says_what_it_lacks(arch):
    """A map architecture on a network scenario (or the reverse) is refused before step 1 with the
    space it needs; every pairing that builds runs two steps on the rules."""
    from socialsim.model.society import SocietyModel

    ran = 0
    for name in available_scenarios():
        scenario = load_scenario(name)
        try:
            model = SocietyModel(name, arch=arch, model="rules", rng=1)
        except ScenarioError as exc:
            message = str(exc)
            needed = "network" if arch == "asvo" else "map"
            if getattr(scenario, needed) is None:
                assert f"the {arch} architecture needs a scenario with a '{needed}:'" in message
                assert f"{name!r} has a {'map' if needed == 'network' else 'network'} instead" in message
            else:  # the space is there: what is missing is the architecture's own section
                assert f"needs a '{arch}:' section" in message, message
            continue
        for _ in range(2):
            model.step()
        assert model.steps == 2
        ran += 1
    assert ran >= 2  # CRSEC: the two scenarios with a crsec section
