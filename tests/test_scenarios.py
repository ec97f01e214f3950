"""Scenario files: the shipped ones load; broken ones name the file, the field and the problem."""

from pathlib import Path

import pytest

from socialsim.scenarios.loader import ScenarioError, available_scenarios, load_scenario
from socialsim.scenarios.schema import toml_lines

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


@pytest.mark.parametrize("suffix", [".yaml", ".toml"])
def test_a_scenario_read_again_is_a_copy_of_its_own_and_a_file_edited_between_is_read_anew(tmp_path, suffix):
    """The parsed text is kept for the process (a sweep reads the same file for every run): a run that
    changes the scenario it was given (here a nested mapping and a list) changes no later reading of it,
    and an edit of the file is seen."""
    first = load_scenario("irollan-valley")
    first.itcmas["homes"]["Someone"] = "nowhere"
    first.itcmas.setdefault("extra", []).append(1)
    second = load_scenario("irollan-valley")
    assert "Someone" not in second.itcmas["homes"] and "extra" not in second.itcmas
    path = tmp_path / f"tiny{suffix}"
    if suffix == ".yaml":
        path.write_text(GOOD)
        assert load_scenario(path).agents[0].name == "Ann"
        path.write_text(GOOD.replace("name: Ann", "name: Bea"))
    else:
        toml = ('name = "tiny"\n[[agents]]\nname = "Ann"\ndescription = "x"\n'
                '[map]\nareas = [{name = "room", x = 0, y = 0, width = 1, height = 1}]\n')
        path.write_text(toml)
        assert load_scenario(path).agents[0].name == "Ann"
        path.write_text(toml.replace('"Ann"', '"Bea"'))
    assert load_scenario(path).agents[0].name == "Bea"


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
                what = "who observes whom" if needed == "network" else "areas to move in"
                assert f"the {arch} architecture needs a scenario with a '{needed}:' ({what})" in message
                assert f"{name}.yaml has a {'map' if needed == 'network' else 'network'} instead" in message
            else:  # the space is there: what is missing is the architecture's own section
                assert f"needs a '{arch}:' section" in message, message
            continue
        for _ in range(2):
            model.step()
        assert model.steps == 2
        ran += 1
    assert ran >= 2  # CRSEC: the two scenarios with a crsec section


@pytest.mark.parametrize(("where", "make", "expected"), [
    ("scenario file", "scenario", "  map.areas.0.width: Input should be greater than or equal to 1 (got -2)"),
    ("crsec --set", "crsec", "  crsec.synthesis_threshold: Input should be greater than or equal to 1 (got -1)"),
    ("asvo --set", "asvo", "  asvo.update_noise: Input should be less than or equal to 1 (got 2.0)"),
    ("itcmas --set", "itcmas", "  itcmas.blend_threshold: Input should be a valid number, "
                               "unable to parse string as a number (got 'many')"),
    ("asvo --set, a check of its own", "asvo mix", "  asvo.svo_mix: unknown SVO type 'saint'"),
    ("asvo section", "asvo section", "invalid asvo section: asvo.svo_assignment: Input should be 'cycle', 'mix' "
                                     "or 'explicit' (got 12)"),
])
def test_a_bad_value_reads_the_same_way_wherever_it_is_set(tmp_path, where, make, expected):
    """One wording for every file section and run parameter: the field's path, pydantic's reason
    without its 'Value error, ' prefix, and the value given (not a whole section)."""
    from socialsim.model.society import SocietyModel
    from socialsim.scenarios.loader import scenario_path

    with pytest.raises(ValueError) as raised:
        if make == "scenario":
            path = tmp_path / "broken.yaml"
            path.write_text(GOOD.replace("width: 2", "width: -2"))
            load_scenario(path)
        elif make == "crsec":
            SocietyModel("hobbs-cafe", arch="crsec", model="rules", rng=1, synthesis_threshold=-1)
        elif make == "asvo":
            SocietyModel("school-micro", arch="asvo", model="rules", rng=1, update_noise=2.0)
        elif make == "asvo mix":
            SocietyModel("school-micro", arch="asvo", model="rules", rng=1, svo_mix={"saint": 1.0})
        elif make == "itcmas":
            SocietyModel("irollan-valley", arch="itcmas", model="rules", rng=1, blend_threshold="many")
        else:
            copy = tmp_path / "school.yaml"
            copy.write_text(scenario_path("school-micro").read_text().replace(
                "  svo_assignment: explicit", "  svo_assignment: 12", 1))
            SocietyModel(str(copy), arch="asvo", model="rules", rng=1)
    message = str(raised.value)
    assert expected in message
    assert "Value error," not in message
    assert "(got {" not in message and "(got [" not in message


def test_a_check_of_the_whole_section_is_named_as_such_and_its_reason_shown_once():
    """A rule over several fields (a model validator) has no field of its own."""
    from pydantic import ValidationError, model_validator

    from socialsim.scenarios.schema import Strict, field_problems

    class Pair(Strict):
        low: int = 0
        high: int = 1

        @model_validator(mode="after")
        def _ordered(self):
            if self.low > self.high:
                raise ValueError("low must not exceed high")
            return self

    with pytest.raises(ValidationError) as raised:
        Pair(low=3, high=2)
    assert field_problems(raised.value) == ["(top level): low must not exceed high"]
    assert field_problems(raised.value, "pair") == ["pair: low must not exceed high"]
    with pytest.raises(ValidationError) as raised:
        Pair(low="x")
    assert field_problems(raised.value, "pair") == [
        "pair.low: Input should be a valid integer, unable to parse string as an integer (got 'x')"]


def test_a_validator_that_names_where_the_problem_is_gets_that_field_said_once():
    """A scenario's bad preset used to read "presets: presets.paper.steps: ..."."""
    from pydantic import ValidationError, field_validator

    from socialsim.scenarios.schema import Strict, field_problems

    class Section(Strict):
        presets: dict = {}
        parameters: dict = {}

        @field_validator("presets")
        @classmethod
        def _whole_path(cls, value):
            raise ValueError("presets.paper.steps: expected a whole number >= 1, got 0")

        @field_validator("parameters")
        @classmethod
        def _relative(cls, value):
            raise ValueError("steps: expected a whole number >= 1, got 0")

    with pytest.raises(ValidationError) as raised:
        Section(presets={"paper": {"steps": 0}}, parameters={"steps": 0})
    assert field_problems(raised.value) == ["presets.paper.steps: expected a whole number >= 1, got 0",
                                            "parameters.steps: expected a whole number >= 1, got 0"]
    assert field_problems(raised.value, "crsec") == ["crsec.presets.paper.steps: expected a whole number >= 1, got 0",
                                                     "crsec.parameters.steps: expected a whole number >= 1, got 0"]


def _presets():
    return [(name, preset) for name in available_scenarios() for preset in load_scenario(name).presets]


@pytest.mark.parametrize(("name", "preset"), _presets())
def test_every_shipped_preset_builds_and_steps_on_the_rules(name, preset):
    """A preset is a set of run parameters shipped in the file: each must be accepted by the
    scenario's architecture (a renamed parameter would otherwise fail only when a user picks it)."""
    from socialsim.model.runner import RunConfig
    from socialsim.model.society import SocietyModel

    config = RunConfig(scenario=name, preset=preset, model="rules", rng=1).resolved()
    expected_steps = load_scenario(name).presets[preset].get("steps")
    assert config.steps == (expected_steps or load_scenario(name).default_steps)
    model = SocietyModel(name, arch=config.arch, model="rules", rng=1, **config.arch_params)
    model.step()
    totals = model.llm.ledger.totals()
    assert model.steps == 1 and totals["rule_decisions"] > 0 and totals["fallbacks"] == totals["llm_failures"] == 0


def test_a_number_is_always_shown_and_a_text_the_message_quotes_is_not_repeated():
    from pydantic import Field, ValidationError, field_validator

    from socialsim.scenarios.schema import Strict, field_problems

    class Section(Strict):
        rate: float = Field(0.5, gt=0)
        place: str = "cafe"

        @field_validator("place")
        @classmethod
        def _known(cls, v):
            if v != "cafe":
                raise ValueError(f"unknown place {v!r}")
            return v

    with pytest.raises(ValidationError) as raised:
        Section(rate=0, place="attic")
    assert field_problems(raised.value, "s") == ["s.rate: Input should be greater than 0 (got 0)",
                                                 "s.place: unknown place 'attic'"]


def test_two_areas_overlap_exactly_when_they_share_a_grid_cell():
    """Checked against the cells each covers, for every placement around a 3x2 area."""
    from socialsim.scenarios.schema import AreaSpec, _overlap

    a = AreaSpec(name="a", x=4, y=4, width=3, height=2)
    cells_a = {(x, y) for x in range(4, 7) for y in range(4, 6)}
    for bx in range(0, 10):
        for by in range(0, 9):
            b = AreaSpec(name="b", x=bx, y=by, width=2, height=3)
            cells_b = {(x, y) for x in range(bx, bx + 2) for y in range(by, by + 3)}
            assert _overlap(a, b) == _overlap(b, a) == bool(cells_a & cells_b), (bx, by)


def test_every_problem_of_a_scenario_file_is_on_its_own_line_and_an_unknown_name_lists_the_known(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(GOOD.replace("width: 2", "width: -2").replace("name: tiny", "name: tiny\nsteps: 0"))
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    assert str(raised.value).splitlines() == [
        f"{path}: invalid scenario",
        "  map.areas.0.width: Input should be greater than or equal to 1 (got -2), at line 7",
        "  steps: Extra inputs are not permitted (got 0), at line 3"]
    with pytest.raises(ScenarioError) as raised:
        load_scenario("atlantis")
    assert str(raised.value).endswith("not one of " + ", ".join(available_scenarios()))


def test_a_good_scenario_file_is_loaded_without_finding_its_fields_lines(monkeypatch):
    """Composing the YAML again for its lines cost more than loading it (65 ms of 83 for Hobbs Cafe),
    in every run, sweep run and test; only a problem needs them."""
    from socialsim.scenarios import loader, schema

    def composed(text):
        raise AssertionError("lines found for a scenario with no problem")

    monkeypatch.setattr(schema, "yaml_lines", composed)
    monkeypatch.setattr(loader, "yaml_lines", composed)
    for name in available_scenarios():
        assert load_scenario(name).name


def test_a_scenario_files_field_lines_are_found_once_when_a_problem_first_needs_them(monkeypatch):
    from socialsim.scenarios import schema
    from socialsim.scenarios.schema import Scenario

    composed = []
    yaml_lines = schema.yaml_lines
    monkeypatch.setattr(schema, "yaml_lines", lambda text: composed.append(text) or yaml_lines(text))
    scenario = load_scenario("hobbs-cafe")
    written = Path(scenario._file).read_text().splitlines()
    assert written[scenario.lines[("agents", 0, "name")] - 1].strip() == f"- name: {scenario.agents[0].name}"
    assert scenario.lines is scenario.lines and len(composed) == 1  # composed once, then kept
    assert Scenario.model_validate(scenario.model_dump()).lines == {}  # no file: no lines


@pytest.mark.parametrize(("edit", "preset", "expected"), [
    (("default_arch: crsec", "default_arch: crsecc"), None,
     ": default_arch: unknown architecture 'crsecc'; known: asvo, crsec, generic, itcmas"),
    (("    steps: 168", "    steps: 168\n    enable_chatt: false"), "paper",
     ": presets.paper: unknown crsec parameter(s) ['enable_chatt']; did you mean enable_chat?"),
    (("    steps: 168", "    steps: 168\n    synthesis_threshold: 0"), "paper",
     ": presets.paper: invalid crsec parameters\n  crsec.synthesis_threshold: Input should be greater than or equal "
     "to 1 (got 0)"),
])
def test_a_scenario_file_s_own_bad_arch_or_preset_names_the_file_and_field(tmp_path, edit, preset, expected):
    """A preset's misspelt parameter or a misspelt default_arch said where it was written, not as if
    the user had typed it."""
    from socialsim.model.runner import RunConfig
    from socialsim.scenarios.loader import scenario_path

    path = tmp_path / "cafe.yaml"
    text = scenario_path("hobbs-cafe").read_text()
    assert edit[0] in text
    path.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(ScenarioError) as raised:
        RunConfig(scenario=str(path), model="rules", preset=preset).resolved()
    assert str(raised.value).startswith(f"{path}{expected}"), str(raised.value)


def test_a_society_built_without_a_scenario_is_hobbs_cafe_under_its_default_architecture():
    from socialsim.model.society import SocietyModel

    model = SocietyModel(model="rules", rng=1)
    assert (model.scenario_spec.name, model.arch) == ("hobbs-cafe", "crsec")


def test_the_same_rng_builds_the_same_society_and_draws_the_same_next_numbers():
    """The seed reaches the model's own stream, which places the agents (and later orders them)."""
    from socialsim.model.society import SocietyModel

    one, two = (SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=5) for _ in range(2))
    assert [a.cell.coordinate for a in one.agents] == [a.cell.coordinate for a in two.agents]
    assert [one.random.random() for _ in range(3)] == [two.random.random() for _ in range(3)]


def test_a_society_records_the_step_the_usage_its_architectures_and_scenarios_columns_and_tables():
    """What the runs' files and the dashboard read: the model frame's step, usage totals, the
    architecture's figures and one per tracked norm (CRSEC's, from the scenario); the agents' names;
    the events, interactions and the architecture's own tables."""
    from socialsim.agents.crsec.agent import CRSECAgent
    from socialsim.llm.ledger import TOTALS
    from socialsim.model.society import EVENT_COLUMNS, INTERACTION_COLUMNS, SocietyModel

    model = SocietyModel("hobbs-cafe", model="rules", rng=1)
    model.step()
    frame = model.datacollector.get_model_vars_dataframe()
    norms = [f"{kind}[{norm}]" for norm in ("no smoking indoors", "be quiet in public", "tip after meals")
             for kind in ("adoption", "plan_compliance", "action_compliance", "compliance", "acting_compliance")]
    assert set(frame.columns) == {"step", *TOTALS, *CRSECAgent.model_reporters(), *norms}
    assert frame["step"].tolist() == [1] and frame["rule_decisions"].tolist() == [model.usage["rule_decisions"]] != [0]
    agents = model.datacollector.get_agent_vars_dataframe()
    assert set(agents.columns) == {"name", *CRSECAgent.agent_reporters()}
    assert sorted(agents["name"]) == sorted(a.name for a in model.agents)
    tables = {name: list(model.datacollector.get_table_dataframe(name).columns) for name in model.datacollector.tables}
    assert tables == {"events": EVENT_COLUMNS, "interactions": INTERACTION_COLUMNS, **CRSECAgent.tables()}


def test_a_reference_check_names_its_field_as_the_path_it_wrote_not_the_top_level():
    """The map's and the scenario's reference checks say where with an index and a name; those lines
    read "(top level): agents[0] (Ann): ..." and "map: doors[0]: ..." before."""
    from pydantic import ValidationError

    from socialsim.scenarios.schema import Scenario, field_problems

    base = {"name": "pub", "agents": [{"name": "Ann", "description": "a teacher", "start_area": "bar"}],
            "map": {"areas": [{"name": "bar", "x": 0, "y": 0, "width": 2, "height": 2}]}}
    problems = []
    for edit in ({"agents": [{**base["agents"][0], "start_area": "pub"}]},
                 {"map": {**base["map"], "doors": [["bar", "gardn"]]}},
                 {"map": {**base["map"], "furniture": [{"name": "counter", "area": "pib"}]}},
                 {"network": {"edges": [["Ann", "Dan"]]}},
                 {"network": {"edges": [["Ann", "Ann"]]}}):
        with pytest.raises(ValidationError) as raised:
            Scenario.model_validate({**base, **edit})
        problems += field_problems(raised.value)
    assert problems == ["agents[0] (Ann): unknown start_area 'pub'",
                        "map.doors[0]: unknown area 'gardn' (areas: ['bar'])",
                        "map.furniture[0] (counter): unknown area 'pib'",
                        "network.edges[0]: unknown agent 'Dan'",
                        "network.edges[0]: 'Ann' tied to itself (an agent does not observe itself)"]


def test_a_preset_ones_own_scenario_file_lacks_is_refused_naming_that_file(tmp_path):
    """A copy keeps its ``name:``: "scenario 'makerspace' has no preset" sent people to the shipped file."""
    from socialsim.model.runner import RunConfig
    from socialsim.scenarios.loader import scenario_path

    copy = tmp_path / "mine.yaml"
    copy.write_text(scenario_path("makerspace").read_text())
    with pytest.raises(ValueError) as refused:
        RunConfig(scenario=str(copy), preset="fast", model="rules").resolved()
    assert str(refused.value) == f"{copy} has no preset 'fast' (presets: paper)"


def test_toml_lines_names_the_line_that_writes_each_field_indented_quoted_dotted_or_by_its_header():
    """A field's line is the first to write it: an indented key or header, a quoted key, each part of a
    dotted key or header; a later [[agents]] item's keys are its own, not the first item's."""
    text = ('name = "x"\n[[agents]]\nname = "A"\n  description = "d"\ntraits.stance = {a = "for"}\n[[agents]]\n'
            'name = "B"\n"description" = "d"\n  [map]\nareas = [{name = "r", x = 0, y = 0, width = 1, height = 1}]\n'
            '[crsec.extra]\na = 1\n')
    assert toml_lines(text) == {
        ("name",): 1, ("agents",): 2, ("agents", 0): 2, ("agents", 0, "name"): 3, ("agents", 0, "description"): 4,
        ("agents", 0, "traits"): 5, ("agents", 0, "traits", "stance"): 5, ("agents", 1): 6, ("agents", 1, "name"): 7,
        ("agents", 1, "description"): 8, ("map",): 9, ("map", "areas"): 10, ("crsec",): 11, ("crsec", "extra"): 11,
        ("crsec", "extra", "a"): 12}
