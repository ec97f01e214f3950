"""Broken scenario files and arguments: each gets one message naming the file, field and value
and what was expected, exit code 2, no traceback, and nothing is written."""

import copy

import pytest
import yaml

from socialsim.cli import main
from socialsim.scenarios.loader import DATA_DIR

BASE = yaml.safe_load((DATA_DIR / "hobbs-cafe.yaml").read_text())
BASE["default_arch"] = "generic"
for key in ("crsec", "asvo", "itcmas"):
    BASE.pop(key, None)


def edit(path, value):
    """A scenario with the field at ``path`` (dotted, list indices as numbers) set to ``value``,
    or removed when ``value`` is DELETE."""
    data = copy.deepcopy(BASE)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node = data
    for p in parents:
        node = node[p]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return data


DELETE = object()

# (case id, scenario data, fragments the message must contain besides the file's path)
FILE_CASES = [
    ("no-name", edit("name", DELETE), ["name", "Field required"]),
    ("empty-name", edit("name", ""), ["name", "at least 1 character"]),
    ("name-list", edit("name", [1]), ["name", "valid string"]),
    ("step-minutes-zero", edit("step_minutes", 0), ["step_minutes", "greater than 0", "got 0"]),
    ("step-minutes-negative", edit("step_minutes", -5), ["step_minutes", "greater than 0", "got -5"]),
    ("step-minutes-text", edit("step_minutes", "ten"), ["step_minutes", "valid number", "got 'ten'"]),
    ("default-steps-zero", edit("default_steps", 0), ["default_steps", "greater than or equal to 1", "got 0"]),
    ("default-steps-negative", edit("default_steps", -3), ["default_steps", "got -3"]),
    ("default-steps-float", edit("default_steps", 2.5), ["default_steps", "got 2.5"]),
    ("default-steps-text", edit("default_steps", "many"), ["default_steps", "got 'many'"]),
    ("preset-steps-negative", edit("presets.paper.steps", -4), ["presets.paper.steps", "whole number >= 1", "-4"]),
    ("preset-steps-zero", edit("presets.paper.steps", 0), ["presets.paper.steps", "whole number >= 1", "got 0"]),
    ("preset-steps-text", edit("presets.paper.steps", "all"), ["presets.paper.steps", "'all'"]),
    ("preset-steps-float", edit("presets.paper.steps", 1.5), ["presets.paper.steps", "1.5"]),
    ("preset-not-mapping", edit("presets.paper", 5), ["presets.paper", "valid dictionary"]),
    ("no-agents", edit("agents", []), ["agents", "at least 1 item"]),
    ("agents-missing", edit("agents", DELETE), ["agents", "Field required"]),
    ("agents-not-list", edit("agents", "Tom"), ["agents", "valid list"]),
    ("agent-no-name", edit("agents.0.name", DELETE), ["agents.0.name", "Field required"]),
    ("agent-empty-name", edit("agents.0.name", ""), ["agents.0.name", "at least 1 character"]),
    ("agent-no-description", edit("agents.0.description", DELETE), ["agents.0.description", "Field required"]),
    ("agent-empty-description", edit("agents.0.description", ""), ["agents.0.description"]),
    ("agent-typo-field", edit("agents.0.descripton", "x"), ["agents.0.descripton", "Extra inputs"]),
    ("agent-bad-start", edit("agents.0.start_area", "the moon"), ["agents[0]", "unknown start_area 'the moon'"]),
    ("agent-traits-list", edit("agents.0.traits", [1, 2]), ["agents.0.traits", "valid dictionary"]),
    ("agent-duplicate", edit("agents.1.name", BASE["agents"][0]["name"]), ["agents", "used twice",
                                                                           repr(BASE["agents"][0]["name"])]),
    ("unknown-top-field", edit("colour", "blue"), ["colour", "Extra inputs"]),
    ("typo-top-field", edit("defualt_steps", 3), ["defualt_steps", "Extra inputs"]),
    ("no-map-no-network", edit("map", DELETE), ["needs a 'map'", "or a 'network'"]),
    ("map-not-mapping", edit("map", [1]), ["map", "valid dictionary"]),
    ("map-no-areas", edit("map.areas", []), ["map.areas", "at least 1 item"]),
    ("area-no-name", edit("map.areas.0.name", DELETE), ["map.areas.0.name", "Field required"]),
    ("area-negative-x", edit("map.areas.0.x", -1), ["map.areas.0.x", "greater than or equal to 0", "got -1"]),
    ("area-negative-y", edit("map.areas.1.y", -2), ["map.areas.1.y", "got -2"]),
    ("area-zero-width", edit("map.areas.0.width", 0), ["map.areas.0.width", "greater than or equal to 1", "got 0"]),
    ("area-zero-height", edit("map.areas.2.height", 0), ["map.areas.2.height", "got 0"]),
    ("area-text-width", edit("map.areas.0.width", "wide"), ["map.areas.0.width", "got 'wide'"]),
    ("area-unknown-kind", edit("map.areas.0.kind", "lake"), ["map.areas.0.kind", "'room' or 'outside'", "got 'lake'"]),
    ("area-overlap", edit("map.areas.1.x", 1), ["overlap on the grid"]),
    ("area-duplicate", edit("map.areas.1.name", "the street outside"), ["areas", "used twice", "'the street outside'"]),
    ("area-typo-field", edit("map.areas.0.widht", 3), ["map.areas.0.widht", "Extra inputs"]),
    ("door-unknown", edit("map.doors.0", ["the street outside", "Narnia"]), ["doors[0]", "unknown area 'Narnia'"]),
    ("door-three-ends", edit("map.doors.0", ["a", "b", "c"]), ["map.doors.0", "at most 2 items"]),
    ("door-one-end", edit("map.doors.1", ["the street outside"]), ["map.doors.1", "Field required"]),
    ("doors-not-list", edit("map.doors", "all"), ["map.doors", "valid list"]),
    ("furniture-unknown-area", edit("map.furniture.0.area", "attic"), ["furniture[0]", "unknown area 'attic'"]),
    ("furniture-no-name", edit("map.furniture.0.name", DELETE), ["map.furniture.0.name", "Field required"]),
    ("furniture-no-area", edit("map.furniture.1.area", DELETE), ["map.furniture.1.area", "Field required"]),
    ("furniture-duplicate", edit("map.furniture.1.name", "bench 1"), ["furniture", "used twice", "'bench 1'"]),
    ("furniture-typo", edit("map.furniture.0.aera", "x"), ["map.furniture.0.aera", "Extra inputs"]),
    ("furniture-states-text", edit("map.furniture.0.states", 3), ["map.furniture.0.states", "valid list"]),
    ("network-unknown-agent", edit("network", {"edges": [["Ghost", BASE["agents"][0]["name"]]]}),
     ["network.edges[0]", "unknown agent 'Ghost'"]),
    ("network-bad-directed", edit("network", {"directed": "sideways"}), ["network.directed", "valid boolean",
                                                                         "got 'sideways'"]),
    ("network-typo", edit("network", {"egdes": []}), ["network.egdes", "Extra inputs"]),
    ("network-edge-short", edit("network", {"edges": [["x"]]}), ["network.edges.0", "Field required"]),
]
if BASE["map"].get("items"):
    FILE_CASES += [
        ("item-unknown-furniture", edit("map.items.0.placed_on", "shelf 99"), ["items[0]", "unknown furniture 'shelf 99'"]),
        ("item-unknown-owner", edit("map.items.0.owner", "Nobody"), ["map.items[0]", "unknown owner 'Nobody'"]),
        ("item-no-name", edit("map.items.0.name", DELETE), ["map.items.0.name", "Field required"]),
    ]
if BASE["map"].get("behaviours"):
    FILE_CASES += [
        ("behaviour-unknown-area", edit("map.behaviours.0.areas", ["Mars"]), ["behaviours[0]", "unknown area 'Mars'"]),
        ("behaviour-no-text", edit("map.behaviours.0.text", DELETE), ["map.behaviours.0.text", "Field required"]),
        ("behaviour-empty-text", edit("map.behaviours.0.text", ""), ["map.behaviours.0.text", "at least 1 character"]),
    ]

RAW_CASES = [  # (case id, file name, text, fragments)
    ("yaml-syntax", "s.yaml", "name: [unclosed\n", ["not valid YAML"]),
    ("yaml-tab-indent", "s.yaml", "name: x\n\tagents: []\n", ["not valid YAML"]),
    # PyYAML keeps the last of a key given twice: a second `agents:` would drop the first silently
    ("yaml-duplicate-key", "s.yaml", "name: x\nagents: []\nname: y\n",
     ["not valid YAML", "duplicate key name (first at line 1)", "line 3, column 1"]),
    ("toml-syntax", "s.toml", "name = \n", ["not valid TOML"]),
    # a file of the other format under this suffix: said so
    ("toml-named-yaml", "s.yaml", 'name = "x"\n[map]\nareas = []\n', ["expected a mapping of scenario fields at the top level (it reads as TOML: name it s.toml)"]),
    ("quoted-toml-named-yaml", "s.yaml", '"name" = "x"\n', ["not valid YAML (it reads as TOML: name it s.toml)"]),
    ("yaml-named-toml", "s.toml", "name: x\nagents: []\n", ["not valid TOML (it reads as YAML: name it s.yaml)"]),
    ("yaml-scalar", "s.yaml", "just a string\n", ["expected a mapping of scenario fields"]),
    ("yaml-list", "s.yaml", "- a\n- b\n", ["expected a mapping of scenario fields"]),
    ("yaml-empty", "s.yaml", "", ["expected a mapping of scenario fields"]),
    ("yml-suffix", "s.yml", "name: x\n", ["agents", "Field required"]),
    # a file saved in another encoding: it was a UnicodeDecodeError's traceback
    ("latin-1", "s.yaml", "name: caf\u00e9\nagents: []\n".encode("latin-1"), ["not UTF-8 text (line 1 has the byte 0xe9)",
                                                                      "save it as UTF-8"]),
    ("utf-16", "s.toml", 'name = "x"\n'.encode("utf-16"), ["not UTF-8 text (line 1 has the byte 0xff)"]),
    # a YAML file's problem says the line of its field (of the entry that lacks a missing one)
    ("yaml-line-of-a-field", "s.yaml", "name: x\nagents:\n  - name: A\n    description: d\n    start_aera: r\n"
     "map: {areas: [{name: r, x: 0, y: 0, width: 1, height: 1}]}\n", ["agents.0.start_aera: Extra inputs are not "
                                                                     "permitted (got 'r'), at line 5"]),
    ("yaml-line-of-a-missing-field", "s.yaml", "name: x\nagents:\n  - {name: A}\n"
     "map: {areas: [{name: r, x: 0, y: 0, width: 1, height: 1}]}\n", ["agents.0.description: Field required, at line 3"]),
    ("yaml-line-of-a-reference", "s.yaml", "name: x\nagents:\n  - {name: A, description: d}\nmap:\n  areas:\n"
     "    - {name: r, x: 0, y: 0, width: 1, height: 1}\n  doors:\n    - [r, attic]\n",
     ["map.doors[0]: unknown area 'attic' (areas: ['r']), at line 8"]),
    ("toml-missing-agents", "s.toml", 'name = "x"\n[map]\nareas = [{name = "a", x = 0, y = 0, width = 1, height = 1}]\n',
     ["agents", "Field required"]),
    # a TOML file's problems name their lines as a YAML file's do (tomllib keeps none: read again)
    ("toml-line-of-a-typo", "s.toml", 'name = "x"\ncontext = """two\nlines"""\n[[agents]]\nname = "A"\ndescription = "d"\n'
     '[[agents]]\nname = "B"\ndescription = "d"\nstart_aera = "r"\n[map]\n'
     'areas = [{name = "r", x = 0, y = 0, width = 1, height = 1}]\n',
     ["agents.1.start_aera: Extra inputs are not permitted (got 'r'), at line 10"]),
    ("toml-line-of-a-missing-field", "s.toml", 'name = "x"\n[[agents]]\nname = "A"\n[map]\n'
     'areas = [{name = "r", x = 0, y = 0, width = 1, height = 1}]\n', ["agents.0.description: Field required, at line 2"]),
    ("toml-line-of-a-reference", "s.toml", 'name = "x"\n[[agents]]\nname = "A"\ndescription = "d"\n[map]\n'
     'areas = [\n  {name = "r", x = 0, y = 0, width = 1, height = 1},\n]\ndoors = [["r", "attic"]]\n',
     ["map.doors[0]: unknown area 'attic' (areas: ['r']), at line 9"]),
    ("toml-no-line-but-the-nearest", "s.toml", 'name = "x"\n[[agents]]\nname = "A"\ndescription = "d"\n[map]\n'
     'areas = [\n  {name = "r", x = 0, y = 0, width = 0, height = 1},\n]\n',  # multi-line: the table's line
     ["map.areas.0.width: Input should be greater than or equal to 1 (got 0), at line 5"]),
]


@pytest.fixture
def out(tmp_path):
    return tmp_path / "out"


def run_cli(capsys, *argv):
    code = main(["run", *argv, "--no-progress"])
    captured = capsys.readouterr()
    return code, captured.err


def check(code, err, out, fragments):
    assert code == 2, err
    assert "Traceback" not in err
    assert err.startswith("socialsim: error: ")
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert not out.exists()


@pytest.mark.parametrize("data,fragments", [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_broken_scenario_file(data, fragments, tmp_path, out, capsys):
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    code, err = run_cli(capsys, str(path), "--arch", "generic", "--model", "rules", "--out", str(out))
    check(code, err, out, [str(path), *fragments])


@pytest.mark.parametrize("name,text,fragments", [c[1:] for c in RAW_CASES], ids=[c[0] for c in RAW_CASES])
def test_broken_scenario_text(name, text, fragments, tmp_path, out, capsys):
    path = tmp_path / name
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    code, err = run_cli(capsys, str(path), "--arch", "generic", "--model", "rules", "--out", str(out))
    check(code, err, out, [str(path), *fragments])


ARG_CASES = [
    ("steps-zero", ["--steps", "0"], ["--steps expects a whole number >= 1, got 0"]),
    ("steps-negative", ["--steps", "-1"], ["--steps expects a whole number >= 1, got -1"]),
    ("rng-negative", ["--rng", "-5"], ["--rng expects a whole number >= 0, got -5"]),  # not numpy's message
    ("concurrency-zero", ["--concurrency", "0"], ["--concurrency expects a whole number >= 1, got 0"]),
    ("max-calls-negative", ["--max-calls", "-2"], ["--max-calls expects a whole number >= 0, got -2"]),
    ("max-cost-negative", ["--max-cost", "-1"], ["--max-cost expects a number of USD >= 0, got -1.0"]),
    ("rpm-zero", ["--rpm", "0"], ["--rpm expects a number > 0, got 0.0"]),
    ("tpm-negative", ["--tpm", "-5"], ["--tpm expects a number > 0, got -5.0"]),
    ("timeout-zero", ["--timeout", "0"], ["--timeout expects a number > 0, got 0.0"]),
    ("retries-negative", ["--retries", "-1"], ["--retries expects a whole number >= 0, got -1"]),
    ("unknown-scenario", ["no-such-scenario"], ["unknown scenario 'no-such-scenario'"]),
    ("missing-file", ["missing.yaml"], ["missing.yaml: no such scenario file"]),
    ("unknown-preset", ["--preset", "nope"], ["no preset 'nope'", "presets: paper"]),
    ("unknown-arch-param", ["--set", "generic.nope=1"], ["nope"]),
    ("unpriced-max-cost", ["--model", "openai/unknown-model-xyz", "--max-cost", "1"],
     ["openai/unknown-model-xyz has no price", "--price IN,OUT"]),
    ("unpriced-routed-max-cost", ["--route", "action=openai/unknown-model-xyz", "--max-cost", "1"],
     ["openai/unknown-model-xyz has no price"]),  # a route's model needs a price too
    ("misspelt-route", ["--route", "CreatNorm=rules"],  # it routed nothing, silently
     ["route to no operation or module: 'CreatNorm' (did you mean 'CreateNorm'", "`socialsim models` lists them"]),
    ("resume-not-a-run", ["--resume", "/nonexistent/run"], ["--resume /nonexistent/run does not exist (no such run directory)"]),
    ("out-unwritable", ["--out", "/proc/forbidden/run"], ["--out /proc/forbidden/run: cannot write there"]),
    ("unknown-model", ["--model", "nosuch/model"], ["unknown model 'nosuch/model'", "PROVIDER/MODEL"]),
    ("breaker-negative", ["--breaker", "-1"], ["--breaker expects a whole number >= 0, got -1"]),
    ("crsec-judge-is-the-actor", ["--arch", "crsec", "--model", "openai/gpt-4o-mini", "--set",
                                  "crsec.judge=openai/gpt-4o-mini"], ["also an actors' model"]),
]


@pytest.mark.parametrize("argv,fragments", [c[1:] for c in ARG_CASES], ids=[c[0] for c in ARG_CASES])
def test_broken_argument(argv, fragments, out, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")  # a provider model gets past the key check
    extra = [] if "--out" in argv else ["--out", str(out)]
    model = [] if "--model" in argv else ["--model", "rules"]
    arch = [] if "--arch" in argv else ["--arch", "generic"]
    scenario = [] if argv[0] in ("no-such-scenario", "missing.yaml") else ["hobbs-cafe"]
    code, err = run_cli(capsys, *scenario, *arch, *model, *argv, *extra)
    check(code, err, out, fragments)
    assert not (tmp_path / "runs").exists()


def test_a_file_with_another_suffix_is_said_to_need_a_scenario_suffix(tmp_path, out, capsys):
    """It was "not a file and not one of" the shipped scenarios, of a file."""
    (tmp_path / "mine.yaml.txt").write_text("name: x\n")
    code, err = run_cli(capsys, str(tmp_path / "mine.yaml.txt"), "--model", "rules", "--out", str(out))
    check(code, err, out, [f"{tmp_path / 'mine.yaml.txt'}: a scenario file's name ends in .yaml, .yml, .toml"])


def test_a_folder_named_like_a_scenario_file_is_said_to_be_a_folder(tmp_path, out, capsys):
    """It was "no such scenario file", of a path that exists."""
    (tmp_path / "mine.yaml").mkdir()
    code, err = run_cli(capsys, str(tmp_path / "mine.yaml"), "--model", "rules", "--out", str(out))
    check(code, err, out, [f"{tmp_path / 'mine.yaml'}: a folder, not a scenario file"])


PARSE_CASES = [  # rejected by argparse itself (exit 2, usage message)
    ("steps-text", ["--steps", "many"], "--steps: invalid int value: 'many'"),
    ("rng-text", ["--rng", "x"], "--rng: invalid int value: 'x'"),
    ("price-one-number", ["--price", "1"], "--price: expects IN,OUT"),
    ("price-negative", ["--price=-1,2"], "--price: expects IN,OUT"),
    ("price-text", ["--price", "a,b"], "--price: expects IN,OUT"),
    ("json-schema-bad", ["--json-schema", "maybe"], "--json-schema: invalid choice: 'maybe'"),
    ("max-cost-text", ["--max-cost", "lots"], "--max-cost: expects a number, got 'lots'"),
    ("max-cost-nan", ["--max-cost", "nan"], "--max-cost: expects a finite number, got 'nan'"),  # it kept no budget
    ("price-nan", ["--price", "nan,nan"], "--price: expects IN,OUT"),  # its NaN cost never reached a budget
    ("price-infinite", ["--price", "inf,1"], "--price: expects IN,OUT"),
    ("rpm-infinite", ["--rpm", "inf"], "--rpm: expects a finite number, got 'inf'"),
    ("timeout-text", ["--timeout", "soon"], "--timeout: expects a number, got 'soon'"),
]


@pytest.mark.parametrize("argv,fragment", [c[1:] for c in PARSE_CASES], ids=[c[0] for c in PARSE_CASES])
def test_malformed_argument(argv, fragment, out, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--model", "rules", "--out", str(out), *argv])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and fragment in err and "Traceback" not in err
    assert not out.exists()


def test_the_table_is_large_enough():
    assert len(FILE_CASES) + len(RAW_CASES) + len(ARG_CASES) + len(PARSE_CASES) >= 80
