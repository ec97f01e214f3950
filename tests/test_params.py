"""Architecture parameters: one declared source for --set, sweeps and the dashboard."""

from __future__ import annotations

import pytest

from socialsim.agents.params import ParamError, parameters, parse_assignments
from socialsim.cli import main


@pytest.mark.parametrize("arch", ["crsec", "asvo", "itcmas"])
def test_every_architecture_declares_typed_parameters(arch):
    params = {p.name: p for p in parameters(arch)}
    assert params, arch
    for p in params.values():
        assert p.kind in {"bool", "int", "float", "choice", "text", "json"}
        if p.kind == "choice":
            assert p.default in p.choices or p.required
        if p.low is not None and p.high is not None:
            assert p.low <= p.high
        if p.kind in {"int", "float"} and p.default is not None and p.low is not None:
            assert p.default >= p.low, p.name  # defaults are valid by construction


def test_generic_has_no_parameters():
    assert parameters("generic") == []
    with pytest.raises(ParamError, match="has no parameters"):
        parse_assignments("generic", ["x=1"])


def test_assignments_are_typed_and_prefixed_keys_accepted():
    got = parse_assignments("crsec", ["crsec.enable_chat=false", "synthesis_threshold=100"])
    assert got == {"enable_chat": False, "synthesis_threshold": 100}
    assert isinstance(got["synthesis_threshold"], int)


@pytest.mark.parametrize("item, message", [
    ("crsec.nope=1", "unknown crsec parameter 'nope'"),
    ("asvo.use_svo=false", "'asvo' is not the architecture of this run"),
    ("synthesis_threshold=0", "expects an integer >= 1"),
    ("enable_chat=maybe", "expects true or false"),
    ("enable_chat", "expected KEY=VALUE"),
    ("=3", "expected KEY=VALUE"),
    # the field's own validator, when the value is given (the dashboard's field took 25:00 until Reset)
    ("day_start=25:00", "crsec.day_start: expected a time of day like '08:00', got '25:00'"),
])
def test_bad_assignments_name_key_value_and_expectation(item, message):
    with pytest.raises(ParamError, match=message.replace("(", r"\(")):
        parse_assignments("crsec", [item])


def test_a_check_of_the_whole_settings_is_left_to_the_build():
    assert parse_assignments("crsec", ["day_end=07:00"]) == {"day_end": "07:00"}  # before day_start: known at build


def test_cli_lists_parameters(capsys):
    assert main(["models", "--params", "crsec"]) == 0
    out = capsys.readouterr().out
    assert "enable_chat" in out and "bool" in out
    assert {line.split()[0]: line.split()[2] for line in out.splitlines()[1:] if "memory_decay" in line or
            "synthesis_threshold" in line} == {"memory_decay": "(0,", "synthesis_threshold": ">="}
    assert main(["models", "--params", "generic"]) == 0
    assert capsys.readouterr().out == "generic has no parameters\n"  # not a header over nothing


@pytest.mark.parametrize("arch", ["crsec", "asvo", "itcmas"])
def test_a_bound_is_accepted_exactly_when_its_range_says_so(arch):
    """``(0, 1]`` refuses 0 and takes 1; ``>= 1`` takes 1: the message never names a refused value as allowed."""
    checked = 0
    for p in parameters(arch):
        for bound, is_open, side in ((p.low, p.low_open, "low"), (p.high, p.high_open, "high")):
            if bound is None or p.kind not in ("int", "float"):
                continue
            checked += 1
            if is_open:
                with pytest.raises(ParamError, match=f"expects .*{'[(]' if side == 'low' else '[)]'}|expects .*[<>] "):
                    parse_assignments(arch, [f"{p.name}={bound}"])
            else:
                assert parse_assignments(arch, [f"{p.name}={bound}"]) == {p.name: bound}
    assert checked


@pytest.mark.parametrize("arch, item, message", [
    ("crsec", "memory_decay=0", "crsec.memory_decay expects a number in (0, 1]"),
    ("itcmas", "s_max=0", "itcmas.s_max expects a number > 0"),
    ("crsec", "synthesis_threshold=0", "crsec.synthesis_threshold expects an integer >= 1"),
])
def test_an_open_bound_is_named_as_open(arch, item, message):
    with pytest.raises(ParamError) as caught:
        parse_assignments(arch, [item])
    assert message in str(caught.value)


def test_cli_set_rejects_a_bad_value_with_exit_2(capsys, tmp_path):
    code = main(["run", "hobbs-cafe", "--model", "rules", "--steps", "1", "--out", str(tmp_path / "r"),
                 "--set", "crsec.synthesis_threshold=-5", "--no-progress"])
    assert code == 2
    assert "synthesis_threshold" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_cli_set_reaches_the_model(tmp_path):
    import json

    out = tmp_path / "r"
    assert main(["run", "hobbs-cafe", "--arch", "crsec", "--model", "rules", "--steps", "1", "--out", str(out),
                 "--set", "crsec.enable_chat=false", "--no-progress"]) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["config"]["arch_params"]["enable_chat"] is False


@pytest.mark.parametrize("arch", ["crsec", "asvo", "itcmas"])
def test_every_parameter_says_what_it_means(arch):
    """`socialsim models --params ARCH` and the dashboard show each parameter's meaning."""
    assert [p.name for p in parameters(arch) if len(p.help.strip()) < 12] == []


def test_a_required_parameter_is_listed_as_required_not_as_a_default_of_none(capsys):
    """`models --params crsec` showed `tracked_norms json = None`, a default it does not have."""
    from socialsim.cli import main

    assert main(["models", "--params", "crsec"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert " json required  measurement:" in lines["tracked_norms"]
    assert " = 0.25  " in lines["temptation"] and "required" not in lines["temptation"]


def test_each_kind_of_bound_reads_as_written():
    from pydantic import BaseModel, Field

    from socialsim.agents.params import _param

    class Knobs(BaseModel):
        closed: float = Field(0.5, ge=0, le=1)
        half_open: float = Field(0.5, gt=0, le=1)
        open_: float = Field(0.5, gt=0, lt=1)
        below: int = Field(3, lt=10)
        at_most: int = Field(3, le=10)
        above: int = Field(3, gt=0)
        free: int = 3

    limits = {name: _param(name, f).limits() for name, f in Knobs.model_fields.items()}
    assert limits == {"closed": "[0, 1]", "half_open": "(0, 1]", "open_": "(0, 1)", "below": "< 10",
                      "at_most": "<= 10", "above": "> 0", "free": ""}


# --- each kind of declaration, as the dashboard's control and `--set` see it (toy settings) --------

def _toy_settings():
    from typing import Literal

    from pydantic import BaseModel, Field

    class Sub(BaseModel):
        w: float = 0.5

    class Toy(BaseModel):
        rate: float | None = Field(0.5, description="an optional number with a value")
        step: float | None = Field(None, gt=0, description="an optional number without one")
        either: int | str = Field(1, description="two kinds")
        mode: Literal["x", "y"] = Field("x", description="a choice")
        plain: bool = True
        weights: Sub = Field(default_factory=Sub, description="a section")
        items: list[int] = Field(default_factory=lambda: [1, 2], description="a list")
        needed: int = Field(ge=1, description="no default")
        share: float = Field(0.5, gt=0, lt=1, description="strictly between")
        name: str = Field("a", description="some text")
        cap: int = Field(3, le=5, description="at most five")
        kind: Literal["a", "b"] = Field(description="a choice without a default")

    return Toy


def test_each_kind_of_declaration_becomes_the_parameter_it_needs():
    from socialsim.agents.params import _param

    toy = _toy_settings()
    got = {name: _param(name, field) for name, field in toy.model_fields.items()}
    shown = {n: (p.kind, p.default, p.low, p.high, p.low_open, p.high_open, p.required) for n, p in got.items()}
    assert shown == {
        "rate": ("float", 0.5, None, None, False, False, False),  # optional with a value: still a number
        "step": ("json", None, 0, None, True, False, False),  # optional without one: null allowed
        "either": ("json", 1, None, None, False, False, False),
        "mode": ("choice", "x", None, None, False, False, False),
        "plain": ("bool", True, None, None, False, False, False),
        "weights": ("json", {"w": 0.5}, None, None, False, False, False),  # a section as its values
        "items": ("json", [1, 2], None, None, False, False, False),  # a default factory called
        "needed": ("int", None, 1, None, False, False, True),
        "share": ("float", 0.5, 0, 1, True, True, False),
        "name": ("text", "a", None, None, False, False, False),
        "cap": ("int", 3, None, 5, False, False, False),
        "kind": ("choice", None, None, None, False, False, True),
    }
    assert got["mode"].choices == ("x", "y") and got["plain"].help == "" and got["rate"].help == (
        "an optional number with a value")


def test_set_values_are_read_as_people_write_them(monkeypatch):
    from socialsim.agents import params

    monkeypatch.setattr(params, "settings_model", lambda arch: _toy_settings())
    read = [params.parse_assignments("toy", [f"step={raw}"])["step"] for raw in ("null", "None", "NULL", "2.5")]
    assert read == [None, None, None, 2.5]
    read = [params.parse_assignments("toy", [f"plain={raw}"])["plain"]
            for raw in ("on", "YES", "true", "Off", "no", "FALSE")]
    assert read == [True, True, True, False, False, False]
    assert params.parse_assignments("toy", ["name=a=b", "items=[3, 4]"]) == {"name": "a=b", "items": [3, 4]}
    assert params.parse_assignments("toy", ["name=yes", "cap=5"]) == {"name": "yes", "cap": 5}  # a word stays a word
    assert params.parse_assignments("toy", ["toy.name= spaced "]) == {"name": "spaced"}
    with pytest.raises(ParamError, match=r"^--set 'toy\.x\.name=1': 'toy\.x' is not the architecture of this run \('toy'\)$"):
        params.parse_assignments("toy", ["toy.x.name=1"])


def test_a_refused_set_value_says_what_was_expected_and_why(monkeypatch):
    from socialsim.agents import params

    monkeypatch.setattr(params, "settings_model", lambda arch: _toy_settings())

    def refusal(item):
        with pytest.raises(ParamError) as raised:
            params.parse_assignments("toy", [item])
        return str(raised.value)

    assert refusal("nope=1") == ("--set 'nope=1': unknown toy parameter 'nope' (known: rate, step, either, mode, "
                                 "plain, weights, items, needed, share, name, cap, kind)")
    # a misspelt name is refused with the nearest known one, as SocietyModel's keywords are (docs/extending.md)
    assert refusal("raet=1").startswith("--set 'raet=1': unknown toy parameter 'raet'; did you mean rate? (known: ")
    assert refusal("mode=z") == "--set 'mode=z': toy.mode expects one of x, y (Input should be 'x' or 'y')"
    assert refusal('items=["a", "b"]') == (
        "--set 'items=[\"a\", \"b\"]': toy.items expects a JSON value (Input should be a valid integer, unable to "
        "parse string as an integer; Input should be a valid integer, unable to parse string as an integer)")
    assert refusal("share=1") == "--set 'share=1': toy.share expects a number in (0, 1)"
    assert refusal("share=0") == "--set 'share=0': toy.share expects a number in (0, 1)"
    assert refusal("step=0") == "--set 'step=0': toy.step expects a number > 0, or null"
    assert refusal("needed=0") == "--set 'needed=0': toy.needed expects an integer >= 1"
    assert refusal("cap=6") == "--set 'cap=6': toy.cap expects an integer <= 5"
    assert refusal("name=[1]") == "--set 'name=[1]': toy.name expects text (Input should be a valid string)"
    assert params.parse_assignments("toy", ["share=0.999", "needed=1"]) == {"share": 0.999, "needed": 1}


def test_an_optional_bounded_parameter_can_be_set_back_to_null():
    """`--set asvo.step_minutes=null` (its default: the scenario's step length) raised TypeError on
    the range check before anything ran."""
    assert parse_assignments("asvo", ["asvo.step_minutes=null"]) == {"step_minutes": None}
    assert parse_assignments("asvo", ["asvo.step_minutes=20"]) == {"step_minutes": 20.0}
    with pytest.raises(ParamError, match="expects a number > 0, or null$"):
        parse_assignments("asvo", ["asvo.step_minutes=0"])
    with pytest.raises(ParamError, match=r"expects text, or null \(Input should be a valid string\)$"):
        parse_assignments("asvo", ["asvo.embedding_model=[1]"])


def test_a_choices_own_word_is_taken_as_that_word_not_as_null():
    """`--set asvo.tom_scope=none` was read as null and refused ("expects one of all, observed, none")."""
    assert parse_assignments("asvo", ["asvo.tom_scope=none"]) == {"tom_scope": "none"}
    assert parse_assignments("asvo", ["tom_scope=observed"]) == {"tom_scope": "observed"}
    assert parse_assignments("asvo", ["embedding_model=none"]) == {"embedding_model": None}  # not a choice: null


def test_a_parameter_given_to_an_architecture_without_parameters_is_refused(tmp_path):
    """A generic society took any keyword (a misspelt `temprature`, an `api_base` meant for the
    gateway) and ignored it: two 'different' sweep runs were the same run."""
    from socialsim.batch.sweepfile import SweepFileError
    from socialsim.batch.sweeps import sweep
    from socialsim.model.society import SocietyModel

    with pytest.raises(ValueError, match="architecture 'generic' has no parameters; given: api_base, temprature"):
        SocietyModel("hobbs-cafe", arch="generic", model="rules", temprature=0.1, api_base="http://x")
    with pytest.raises(SweepFileError, match="cannot be built: architecture 'generic' has no parameters; given: temprature"):
        sweep({"name": "t", "seeds": [1], "parameters": {"arch": "generic", "model": "rules", "temprature": [0.1, 0.9]}},
              tmp_path / "s", progress=False)


def test_a_plug_in_s_aliases_and_allowed_extras_pass_the_check_its_own_model_makes(monkeypatch, caplog):
    """check_params refused what a plug-in's settings model accepts: a field given by its alias, and
    any name where the model allows extras; a typo is still refused where it does not."""
    from pydantic import BaseModel, ConfigDict, Field

    from socialsim.agents import params

    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")
        own: float = Field(default=0.5, ge=0, le=1, alias="w")

    class Closed(BaseModel):
        own: float = Field(default=0.5, ge=0, le=1, alias="w")

    monkeypatch.setattr(params, "settings_model", lambda arch: {"open": Open, "closed": Closed}[arch])
    assert params.check_params("open", {"w": "0.25", "knob": 3}) == {"w": 0.25, "knob": 3}
    import logging

    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert params.check_params("open", {"ownn": 3}) == {"ownn": 3}  # allowed, but said: like a field's name
    assert "open parameter 'ownn' is taken as an extra; did you mean 'own'?" in caplog.text
    assert Open(**params.check_params("open", {"w": 0.25})).own == 0.25  # as the plug-in reads it
    with pytest.raises(params.ParamError, match="closed parameter 'own' is given twice, as 'own' and 'w'"):
        params.check_params("closed", {"own": 1, "w": 0})
    with pytest.raises(params.ParamError, match="closed parameter 'own' is read by its alias: give it as 'w'"):
        params.check_params("closed", {"own": 1})  # the model would ignore it and keep 0.5
    with pytest.raises(params.ParamError, match=r"invalid closed parameters\n  closed.own: Input should be less"):
        params.check_params("closed", {"w": 2})
    with pytest.raises(params.ParamError, match=r"unknown closed parameter\(s\) \['knob'\]"):
        params.check_params("closed", {"knob": 3})
