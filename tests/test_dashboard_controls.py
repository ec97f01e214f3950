"""The dashboard's controls: parameters valid by construction from the declared settings, kept
per architecture; Step queued while the society is built; Play stopping at the run's length and
on a budget stop with the reason, pacing itself by the play interval; Pause and the page's reads
answering at once while a step waits on a slow provider (the project's fake OpenAI-compatible
server)."""

from __future__ import annotations

import re
import threading
import time

import pandas as pd
import pytest

from socialsim.agents import ARCHITECTURES
from socialsim.agents.params import parameters
from socialsim.dashboards import panels
from socialsim.dashboards.session import (
    LiveConfig,
    LiveSession,
    check_parameter,
    check_parameters,
    parameter_controls,
    scenario_default_arch,
)
from socialsim.llm.fake_server import FakeOpenAIServer
from socialsim.scenarios.loader import available_scenarios


def test_a_key_typed_in_a_text_parameter_is_neither_shown_back_nor_kept(monkeypatch):
    """A parameter's text box handed on what was typed as it was: a key pasted by mistake stayed in the
    box, reached the society, and a refused one was quoted whole under the parameters."""
    import ipyvuetify as v
    import solara

    from socialsim.dashboards import app

    key = "placeholder-typed-key-0123"
    monkeypatch.setenv("A_SERVICE_TOKEN", key)
    handed = []

    @solara.component
    def Parameters():
        values, set_values = solara.use_state({})
        app.ParameterControls("crsec", values, lambda name, v: handed.append(v) or set_values({**values, name: v}))

    box, rc = solara.render(Parameters(), handle_error=False)
    try:
        for name, typed in (("filler_behaviour", f"read {key}"), ("day_start", key)):
            typing = rc.find(v.TextField, label=name).widget
            typing.v_model = typed
            typing.fire_event("keyup.enter", None)
        assert handed == ["read [REDACTED]"]
        assert rc.find(v.TextField, label="filler_behaviour").widget.v_model == "read [REDACTED]"
        refusal = rc.find(v.Alert, class_="param-error").widget.children[0]
        assert "crsec.day_start" in refusal and "[REDACTED]" in refusal and key not in refusal
    finally:
        rc.close()
    assert key not in check_parameters("crsec", {"day_start": key})  # a value given with run --set


@pytest.mark.parametrize("arch", [a for a in ARCHITECTURES if a != "generic"])
def test_every_control_shows_its_declared_default_and_that_default_is_valid(arch):
    specs = parameter_controls(arch)
    declared = {p.name: p for p in parameters(arch)}
    assert specs and {s["name"] for s in specs} <= set(declared)
    for spec in specs:
        assert spec["default"] == declared[spec["name"]].default
        assert check_parameter(arch, spec["name"], spec["default"]) == (spec["default"], "")
        if spec["widget"] == "slider":  # a slider snaps to min + k*step: the default must be on that grid
            k = (spec["default"] - spec["low"]) / spec["step"]
            assert spec["low"] <= spec["default"] <= spec["high"] and abs(k - round(k)) < 1e-9
            assert check_parameter(arch, spec["name"], spec["low"])[1] == ""
            assert check_parameter(arch, spec["name"], spec["high"])[1] == ""
    # all defaults together build the settings model (what Reset does)
    assert check_parameters(arch, {s["name"]: s["default"] for s in specs}) == ""


def test_unbounded_integer_is_a_number_field_not_a_slider_that_moves_its_default():
    specs = {s["name"]: s for s in parameter_controls("crsec")}
    assert specs["synthesis_threshold"]["widget"] == "input"  # no upper bound: a slider would snap 350
    assert specs["initial_norms"]["widget"] == "slider" and specs["initial_norms"]["step"] == 1
    assert specs["enable_chat"]["widget"] == "checkbox"
    assert "tracked_norms" not in specs  # JSON values are set with --set, not a widget


def test_a_value_out_of_range_is_refused_with_the_set_message():
    value, why = check_parameter("crsec", "initial_norms", 50)
    assert value is None and "crsec.initial_norms" in why and "[1" in why and "20" in why
    assert check_parameter("asvo", "tom_scope", "observed") == ("observed", "")
    assert "one of" in check_parameter("asvo", "tom_scope", "psychic")[1]
    assert "blend_rate" in check_parameters("itcmas", {"blend_rate": 3.0})
    assert "no_such" in check_parameters("itcmas", {"no_such": 1})


def _slider_settings():
    """A settings model with a parameter of every control: closed and open ranges, wide and narrow
    integers, floats on and off their slider's grid, a range of no width."""
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, Field

    class Slider(BaseModel):
        model_config = ConfigDict(extra="forbid")
        count: int = Field(4, ge=2, le=10, description="a closed integer range")
        inside: int = Field(4, gt=1, lt=9)
        wide: int = Field(150, ge=100, le=300)  # 200 apart: still a slider
        wider: int = Field(0, ge=0, le=201)
        huge: int = Field(10, ge=0, le=1000)
        share: float = Field(2.5, ge=1, le=4)
        open_share: float = Field(0.5, gt=0, lt=1)
        off_grid: float = Field(0.123, ge=0, le=1)
        point: float = Field(1.0, ge=1, le=1)
        mode: Literal["a", "b"] = "b"
        listed: list[int] = [1]  # no control, and the ones after it still have theirs
        flag: bool = True
        words: str = "hello"

    return Slider


def test_each_control_is_the_widget_its_declared_range_allows(monkeypatch):
    from socialsim.agents import params

    monkeypatch.setattr(params, "settings_model", lambda arch: _slider_settings())
    specs = {s.pop("name"): s for s in parameter_controls("toy")}

    def slider(kind, default, low, high, step, shown_low=None, shown_high=None):
        return {"kind": kind, "default": default, "help": "", "low": low if shown_low is None else shown_low,
                "high": high if shown_high is None else shown_high, "widget": "slider", "step": step}

    assert specs["count"] == {**slider("int", 4, 2, 10, 1), "help": "a closed integer range"}
    assert specs["inside"] == slider("int", 4, 1, 9, 1, shown_low=2, shown_high=8)  # an open bound is not a value
    assert specs["wide"] == slider("int", 150, 100, 300, 1)
    assert specs["wider"]["widget"] == specs["huge"]["widget"] == "input"  # more than 200 values: typed
    assert specs["share"] == slider("float", 2.5, 1, 4, pytest.approx(0.03))
    assert specs["open_share"] == slider("float", 0.5, 0, 1, pytest.approx(0.01), shown_low=pytest.approx(0.01),
                                         shown_high=pytest.approx(0.99))
    assert specs["off_grid"] == {"kind": "float", "default": 0.123, "help": "", "low": 0, "high": 1, "widget": "input"}
    assert specs["point"]["widget"] == "input"  # a range of one value has no slider
    assert specs["mode"] == {"kind": "choice", "default": "b", "help": "", "low": None, "high": None,
                             "widget": "select", "choices": ["a", "b"]}
    assert specs["flag"]["widget"] == "checkbox" and specs["words"]["widget"] == "input"
    assert "listed" not in specs


def test_a_value_is_read_as_set_reads_it_and_refused_without_naming_set():
    assert check_parameter("itcmas", "social_words", '["chat"]') == (["chat"], "")  # text as --set writes it
    weights, why = check_parameter("itcmas", "emotion", {"P": 0.5, "A": 0.25, "D": 0.25})  # a value as a value
    assert why == "" and (weights.P, weights.A, weights.D) == (0.5, 0.25, 0.25)
    assert check_parameter("crsec", "initial_norms", 50) == (
        None, "'initial_norms=50': crsec.initial_norms expects an integer in [1, 20]")


def test_parameters_given_together_are_refused_by_name_each_problem_once():
    assert check_parameters("itcmas", {"no_such": 1, "also_not": 2}) == "unknown itcmas parameters: also_not, no_such"
    assert check_parameters("itcmas", {"blend_rate": 3.0, "emotion": {"P": "x"}}) == (
        "itcmas.emotion.P: Input should be a valid number, unable to parse string as a number; "
        "itcmas.blend_rate: Input should be less than or equal to 1")
    assert check_parameters("generic", {}) == ""
    assert check_parameters("generic", {"x": 1}) == "architecture 'generic' has no parameters"


def test_a_scenario_that_does_not_load_gets_the_generic_architecture_and_ten_steps():
    from socialsim.dashboards.session import scenario_length

    assert (scenario_default_arch("hobbs-cafe"), scenario_length("hobbs-cafe")) == ("crsec", 2)
    assert (scenario_default_arch("no-such-scenario"), scenario_length("no-such-scenario")) == ("generic", 10)


def test_the_missing_files_note_names_each_missing_part():
    from types import SimpleNamespace

    from socialsim.dashboards.session import missing_note

    assert missing_note(SimpleNamespace(missing=[])) == ""
    assert missing_note(SimpleNamespace(missing=["steps.parquet", "events.parquet"])) == (
        "This run directory lacks what its config.json says it recorded, so some steps or panels are empty: "
        "steps.parquet; events.parquet.")


def test_every_scenarios_default_architecture_has_its_controls():
    for scenario in available_scenarios():
        arch = scenario_default_arch(scenario)
        assert arch in ARCHITECTURES
        assert (parameter_controls(arch) != []) == (arch != "generic"), scenario


def test_a_new_society_is_idle_with_nothing_to_show_and_plays_to_its_scenarios_length():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules"))
    assert (session.frames, session.version, session.error, session.stop_reason, session.notes, session.settings) == (
        None, 0, "", "", [], {})
    assert session.busy is False and session.playing is False  # booleans, as the page reads them
    assert session.progress() == "" and session.wait() is True
    assert session.length == 2 and session.error_title == "The society stopped"  # hobbs-cafe's default length


def test_a_society_that_could_not_be_built_is_not_said_to_have_stopped():
    """A Reset with a bad seed (or a model nobody serves) showed "The society stopped: ..." for a
    society that never existed; the stop line under it already said it "could not be built"."""
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=-7))
    session.start()
    assert session.wait(60)
    assert session.error_title == "The society could not be built"
    assert session.error == "ValueError: seed expects a whole number >= 0, got -7"


def test_a_live_society_is_built_as_configured_asking_the_model_named_or_else_the_default(monkeypatch):
    from socialsim.llm.engines import engine_note

    monkeypatch.setenv("SOCIALSIM_MODEL", "rules")
    unnamed = LiveSession(LiveConfig("makerspace", "generic", None, seed=0, max_calls=9, max_cost=0.5))
    unnamed.start()
    assert unnamed.wait(60) and unnamed.error == ""  # a seed of 0 is a seed
    assert (unnamed.frames.scenario, unnamed.frames.arch, unnamed.model.llm.routes.default) == (
        "makerspace", "generic", "rules")
    budget = unnamed.model.llm.ledger.budget
    assert (budget.max_calls, budget.max_cost) == (9, 0.5) and unnamed.notes == [engine_note("rules")]
    monkeypatch.setenv("SOCIALSIM_MODEL", "nosuchprovider/x")
    named = LiveSession(LiveConfig("makerspace", "generic", " rules ", seed=0))  # as typed in the model box
    named.start()
    assert named.wait(60) and named.error == "" and named.model.llm.routes.default == "rules"


def test_step_never_waits_the_play_interval():
    """Only Play paces itself; Step's steps (and the last of them) follow each other at once."""
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, play_interval_ms=600_000))
    session.step(3)
    assert session.wait(30) and session.frames.steps_done == 3


def test_a_model_whose_step_schedule_stopped_is_an_error_not_a_spin():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3))
    session.start()
    assert session.wait(60)
    session.model.step = lambda: None  # Mesa runs nothing: the model's step count stays where it was
    session.step(1)
    assert session.wait(60)
    assert session.error == "RuntimeError: the model did not step (Mesa stopped its step schedule)"


def test_a_step_given_while_the_society_is_built_is_not_lost():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3))
    session.start()
    session.step(1)  # what a click right after Reset does
    assert session.wait(120) and session.error == ""
    assert session.frames.steps_done == 1


def test_play_stops_at_the_runs_length_and_says_so():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, steps=2))
    session.start()
    session.play()
    assert session.wait(120) and session.error == ""
    assert session.frames.steps_done == 2 and not session.playing
    assert session.stop_reason == "reached step 2, where Play stops"
    session.play()  # at the end Play refuses, Step still goes further
    assert not session.busy and session.frames.steps_done == 2
    assert session.stop_reason.startswith("reached step 2, where Play stops; Step goes further")
    session.step(1)
    assert session.wait(120) and session.frames.steps_done == 3
    session.set_length(5)  # "Play stops at step" changed live: Play goes on, no Reset
    session.play()
    assert session.wait(120) and session.frames.steps_done == 5
    session.set_length(None)  # the scenario's own length, now behind: Play says whose length it is
    session.play()
    assert session.stop_reason.startswith(f"reached the scenario's length ({session.length} steps)")


class _HeldBuild(LiveSession):
    """A live session whose worker waits at the build until the test lets it go: the session is busy
    for as long as the test needs, with no sleep."""

    def __init__(self, config):
        import threading

        super().__init__(config)
        self.go, self.building = threading.Event(), threading.Event()

    def _build(self, tape=None):
        self.building.set()
        assert self.go.wait(60)
        super()._build(tape)


def test_pause_while_busy_says_so_and_play_clears_it():
    session = _HeldBuild(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, steps=2))
    session.start()
    session.pause()
    assert session.stop_reason == "paused: the step now running completes, then the society waits"
    session.go.set()
    assert session.wait(60) and session.frames.steps_done == 0
    session.play()
    assert session.stop_reason == ""
    assert session.wait(60) and session.frames.steps_done == 2


def test_steps_given_while_the_society_is_built_add_up_and_wait_says_when_it_is_still_busy():
    import threading

    session = _HeldBuild(LiveConfig("hobbs-cafe", "generic", "rules", seed=3))
    before = set(threading.enumerate())
    session.start()
    session.step(2)
    session.step(1)
    assert session.building.wait(60)
    assert session.wait(0.05) is False and session.busy  # the build is still held
    # the worker never keeps the process alive: closing the command ends it even mid-step
    workers = [t for t in threading.enumerate() if t.name == "socialsim-dashboard-step" and t not in before]
    assert [t.daemon for t in workers] == [True]
    session.go.set()
    assert session.wait(60) is True and session.error == "" and session.frames.steps_done == 3


def test_the_progress_line_while_the_society_is_built_counts_the_seconds_since_the_build_began():
    session = _HeldBuild(LiveConfig("hobbs-cafe", "generic", "rules", seed=3))
    assert session.progress() == ""  # idle: no line
    session.start()
    assert session.building.wait(60)
    assert re.fullmatch(r"building the society \(\d+s\)", session.progress())
    session._started = time.monotonic() - 30  # as if the build began 30 s ago
    seconds = re.fullmatch(r"building the society \((\d+)s\)", session.progress())
    session.go.set()
    assert seconds and 30 <= int(seconds[1]) < 90
    assert session.wait(60) and session.progress() == ""


class _HeldWorker(LiveSession):
    """A live session whose worker waits before its first line until the test lets it go."""

    def __init__(self, config):
        import threading

        super().__init__(config)
        self.go = threading.Event()

    def _work(self):
        assert self.go.wait(60)
        super()._work()


def test_the_progress_line_before_the_worker_begins_counts_from_start_not_from_the_clocks_zero():
    session = _HeldWorker(LiveConfig("hobbs-cafe", "generic", "rules", seed=3))
    began = time.monotonic()
    session.start()
    line = session.progress()  # the page's poll right after Start, before the worker's first line
    since = time.monotonic() - began
    session.go.set()
    seconds = re.fullmatch(r"building the society \((\d+)s\)", line)
    assert seconds and int(seconds[1]) <= since + 1, line  # it said the seconds since the machine booted
    assert session.wait(60) and session.error == "" and session.frames.steps_done == 0


def test_the_progress_line_names_the_step_its_decisions_so_far_and_the_runs_usage():
    """Read while step 2 runs: before it has decided anything, then after one decision (a recorded
    LLM call that needed a fallback) — the run's totals include step 1's and step 2's so far."""
    import threading

    from socialsim.llm.ledger import LedgerRow

    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3))
    session.step(1)
    assert session.wait(60) and session.frames.steps_done == 1
    ledger, step = session.model.llm.ledger, session.model.step
    held, go, lines = threading.Event(), threading.Event(), []

    def read_at_hold():
        held.set()
        assert go.wait(60)
        go.clear()

    def step_read_twice():
        read_at_hold()
        ledger.record(LedgerRow(step=2, agent=0, op="Marker", module="test", model="openai/x", engine="llm",
                                status="fallback", calls=2, live_calls=2, prompt_tokens=30, completion_tokens=7,
                                latency_s=0.1, cost_usd=0.0123))
        read_at_hold()
        step()

    session.model.step = step_read_twice
    session.step(1)
    for _ in range(2):
        assert held.wait(60)
        held.clear()
        assert session.progress().startswith("step 2 running: ")
        session._started = time.monotonic() - 30  # as if the step began 30 s ago
        lines.append(session.progress())
        go.set()
    assert session.wait(60) and session.error == "" and session.frames.steps_done == 2
    shape = r"step 2 running: (\d+) decisions so far \(last: (\w+)\), (\d+)s · run so far: (.*)"
    parsed = [re.fullmatch(shape, line).groups() for line in lines]
    assert [(done, last, usage) for done, last, _, usage in parsed] == [
        ("0", "perceiving", "0 LLM calls, 0 tokens, $0.0000, 0 fallbacks"),
        ("1", "Marker", "2 LLM calls, 37 tokens, $0.0123, 1 fallbacks")]
    assert all(30 <= int(seconds) < 90 for _, _, seconds, _ in parsed)


class _HeldAfterBuild(LiveSession):
    """A live session whose worker waits once the society is built (its first snapshot taken), before
    it takes its first step."""

    def __init__(self, config):
        import threading

        super().__init__(config)
        self.go, self.built = threading.Event(), threading.Event()

    def _next(self):
        if self.frames.steps_done == 0 and not self.built.is_set():
            self.built.set()
            assert self.go.wait(60)
        return super()._next()


def test_the_progress_line_between_the_build_and_step_1_says_the_society_is_built():
    session = _HeldAfterBuild(LiveConfig("hobbs-cafe", "generic", "rules", seed=3))
    session.step(1)
    assert session.built.wait(60)
    line = session.progress()
    session.go.set()
    assert session.wait(60) and session.frames.steps_done == 1
    assert line == "the society is built"  # it said "step 0 running: 0 decisions so far"


def test_the_progress_line_in_plays_pause_between_steps_names_the_step_done():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, steps=5, play_interval_ms=60_000))
    session.play()
    deadline = time.monotonic() + 60
    while session.frames is None or session.frames.steps_done < 1:  # step 1 done: Play waits a minute
        assert time.monotonic() < deadline and session.error == ""
        time.sleep(0.01)
    line = session.progress()
    session.pause()
    assert session.wait(60) and session.frames.steps_done == 1
    assert line == "step 1 done"  # it said "step 1 running" for the whole pause


def test_play_before_the_build_plays_from_step_0_and_step_takes_one_step():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, steps=1))
    session.play()  # nothing built yet: no step done, so Play has a step to go
    assert session.wait(60) and session.frames.steps_done == 1 and session.stop_reason.startswith("reached step 1")
    session.step()
    assert session.wait(60) and session.frames.steps_done == 2


def test_a_length_changed_live_is_where_play_says_it_stopped_and_clears_the_old_reached():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, steps=1))
    session.play()
    assert session.wait(60) and session.stop_reason == "reached step 1, where Play stops"
    session.set_length(2)
    assert session.stop_reason == "" and session.config.steps == 2  # a Reset keeps it too
    session.play()
    assert session.wait(60) and session.stop_reason == "reached step 2, where Play stops"


def _play_for(session: LiveSession, seconds: float) -> int:
    """Steps Play completes in ``seconds`` (then paused, and waited for)."""
    start = session.frames.steps_done if session.frames else 0
    session.play()
    time.sleep(seconds)
    session.pause()
    assert session.wait(60)
    return session.frames.steps_done - start


def test_play_waits_its_interval_between_steps_and_pause_ends_the_wait_at_once():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, steps=500, play_interval_ms=400))
    session.start()
    assert session.wait(120)
    assert _play_for(session, 1.0) <= 3  # a rules step takes milliseconds: the interval paces Play
    session.play_interval_ms = 0  # changed live, as the page's slider does
    assert _play_for(session, 1.0) > 3
    session.play_interval_ms = 60_000
    session.play()
    time.sleep(0.5)  # the first step is done; the worker now waits out its minute
    session.pause()
    assert session.wait(5) and not session.busy  # Pause ended the minute's wait


@pytest.fixture
def slow_provider(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(delay_s=0.6) as server:
        yield server


def _played_to_its_budget(provider, steps: int, max_calls: int) -> LiveSession:
    """A society of generic agents on an instant test server, played until its call budget stops it."""
    provider.delay_s = 0.0
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "openai/fake-model", seed=3, steps=steps,
                                     max_calls=max_calls, api_base=provider.api_base))
    session.start()
    session.play()
    assert session.wait(120)
    return session


def test_play_stops_on_a_budget_stop_with_the_reason_and_keeps_the_record(slow_provider):
    session = _played_to_its_budget(slow_provider, steps=20, max_calls=15)
    assert session.stop_reason.startswith("stopped by budget") and "max_calls=15" in session.stop_reason
    assert session.error == "" and not session.playing
    frames = session.frames
    assert 1 <= frames.steps_done < 20 and frames.status == session.stop_reason  # steps before the stop are kept
    assert 0 < panels.usage_totals(frames, frames.steps_done)["llm_calls"] <= 15


def test_the_budget_changes_live_and_a_negative_one_is_refused(slow_provider):
    session = _played_to_its_budget(slow_provider, steps=5, max_calls=15)
    assert session.stop_reason.startswith("stopped by budget: max_calls=15 reached")
    with pytest.raises(ValueError, match="max LLM calls expects a whole number >= 0"):
        session.set_max_calls(-5)
    stopped_at, paid = session.frames.steps_done, session.model.llm.ledger.live_calls
    asked = len(slow_provider.requests)
    session.set_max_calls(None)  # no limit now: it goes on, the society built again from its own tape
    session.step(1)  # from where it stopped, not from the start
    assert stopped_at >= 1 and session.wait(120) and session.frames.steps_done == stopped_at + 1, session.stop_reason
    assert session.frames.earlier == []  # the budget cut a step of answered calls: none failed, nothing to say
    session.play()
    assert session.wait(120) and session.frames.steps_done == 5 and session.error == "", session.stop_reason
    assert session.model.llm.ledger.live_calls >= paid  # what was paid before the stop still counts
    made = len(slow_provider.requests) - asked - 1  # the calls made on; 1: the rebuild's check of the model
    whole = LiveSession(LiveConfig("hobbs-cafe", "generic", "openai/fake-model", seed=3, steps=5,
                                   api_base=slow_provider.api_base))
    whole.start()
    whole.play()
    assert whole.wait(120) and whole.frames.steps_done == 5
    timed = ["llm_latency_s"]  # a live session's own clock; everything it decided is the same
    pd.testing.assert_frame_equal(session.frames.model.drop(columns=timed), whole.frames.model.drop(columns=timed))
    # the steps before the stop were answered by its tape: only the calls not made yet reached the provider
    assert made == whole.model.llm.ledger.live_calls - paid == session.model.llm.ledger.live_calls - paid
    session.set_max_calls(session.model.llm.ledger.live_calls + 3)  # a budget given live reaches the next call
    session.set_length(10)
    session.play()
    assert session.wait(120) and session.stop_reason.startswith(f"stopped by budget: max_calls={session.config.max_calls}")


def test_a_budget_of_zero_calls_is_accepted_and_only_a_negative_one_is_refused():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules"))
    session.set_max_calls(0)
    assert session.config.max_calls == 0
    with pytest.raises(ValueError, match="got -1"):
        session.set_max_calls(-1)


class _Snapshots(LiveSession):
    """A live session that keeps what each of its snapshots showed, in order."""

    def __init__(self, config):
        super().__init__(config)
        self.shown: list[tuple[str, int, int]] = []

    def _snapshot(self, status):
        super()._snapshot(status)
        self.shown.append((self.frames.status, self.frames.steps_done, self.version))


def _stops_next_step(session: LiveSession, exc: Exception) -> None:
    """The society's next step raises ``exc`` (a budget or the provider giving out mid-step)."""
    session.model.step = lambda: (_ for _ in ()).throw(exc)


def test_a_budget_stop_mid_step_is_built_again_from_its_tape_and_steps_on_with_what_it_paid():
    from socialsim.llm.ledger import BudgetExhausted

    session = _Snapshots(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, steps=5))
    session.step(1)
    assert session.wait(60) and session.frames.steps_done == 1
    first, ledger = session.model, session.model.llm.ledger
    ledger.live_calls, ledger.live_cost = 7, 0.25  # what it paid so far
    _stops_next_step(session, BudgetExhausted("max_calls=7 reached"))
    session.step(3)  # the two steps still queued when the budget stops it are dropped
    assert session.wait(60) and session.error == "" and session.busy is False
    assert session.stop_reason == "stopped by budget: max_calls=7 reached"
    assert (session.frames.status, session.frames.steps_done) == (session.stop_reason, 1)  # step 1 kept
    session.step(1)
    assert session.wait(60) and session.error == "" and session.stop_reason == ""
    assert session.model is not first and session.frames.steps_done == 2  # one step on, not three
    assert (session.model.llm.ledger.live_calls, session.model.llm.ledger.live_cost) == (7, 0.25)
    assert session.shown == [("built: press Step or Run", 0, 1), ("step 1 done", 1, 2),
                             ("stopped by budget: max_calls=7 reached", 1, 3),
                             ("built: press Step or Run", 0, 4),  # the society built again ...
                             ("built again from its tape at step 1", 1, 5),  # ... and its step 1 run again
                             ("step 2 done", 2, 6)]
    session.step(1)  # built again once: from now on it simply steps on
    assert session.wait(60) and session.shown[6:] == [("step 3 done", 3, 7)]


def test_the_progress_line_while_built_again_from_its_tape_counts_the_seconds_since_that_build_began():
    from socialsim.llm.ledger import BudgetExhausted

    session = _HeldBuild(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, steps=5))
    session.go.set()
    session.step(1)
    assert session.wait(60) and session.frames.steps_done == 1
    _stops_next_step(session, BudgetExhausted("max_calls=7 reached"))
    session.step(1)
    assert session.wait(60) and session.stop_reason.startswith("stopped by budget")
    session._started = time.monotonic() - 1000  # the stopped step began long ago
    session.go.clear()
    session.building.clear()
    session.step(1)  # built again from its tape: held at the build
    assert session.building.wait(60)
    line = session.progress()
    session.go.set()
    seconds = re.fullmatch(r"step 2 running: \d+ decisions so far \(last: \w+\), (\d+)s · run so far: .*", line)
    assert seconds and int(seconds[1]) < 500
    assert session.wait(60) and session.error == "" and session.frames.steps_done == 2


def test_a_provider_outage_stops_play_saying_so_and_play_goes_on_after_it():
    from socialsim.llm.gateway import ProviderOutage

    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, steps=3))
    session.start()
    assert session.wait(60)
    _stops_next_step(session, ProviderOutage("3 live calls in a row failed"))
    session.play()
    assert session.wait(60) and session.playing is False and session.error == ""
    assert session.stop_reason == session.frames.status == "stopped by provider outage: 3 live calls in a row failed"
    session.play()  # built again from its tape, then played to its length
    assert session.wait(60) and session.frames.steps_done == 3
    assert session.stop_reason == "reached step 3, where Play stops"


def test_a_stopped_society_its_provider_still_fails_to_build_again_stays_stopped_and_steps_on_later(monkeypatch):
    """A Step given after an outage while the provider was still down (its model unreachable when the
    society was built again from its tape) turned the stop into an error asking for Reset: the society
    could not go on even once the provider was back, and the usage panel said its failed calls had been
    asked again."""
    import dataclasses

    from socialsim.llm import engines
    from socialsim.llm.gateway import ProviderOutage

    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, steps=3))
    session.step(1)
    assert session.wait(60) and session.frames.steps_done == 1
    first, rows = session.model, session.model.llm.ledger.rows
    rows.append(dataclasses.replace(rows[-1], step=2, error="provider error: HTTP 500"))  # one the outage failed
    _stops_next_step(session, ProviderOutage("3 live calls in a row failed"))
    session.step(1)
    assert session.wait(60) and session.stop_reason == "stopped by provider outage: 3 live calls in a row failed"
    check_models = engines.check_models
    still_down = engines.ModelUnavailable("model 'openai/m' is unreachable: HTTP 500")
    monkeypatch.setattr(engines, "check_models", lambda *args, **kw: (_ for _ in ()).throw(still_down))
    session.step(1)
    assert session.wait(60) and session.error == "" and session.model is first
    assert session.stop_reason == ("stopped by provider outage: 3 live calls in a row failed; it could not be "
                                   "built again from its tape (model 'openai/m' is unreachable: HTTP 500): "
                                   "Step or Play tries again")
    assert session.frames.steps_done == 1 and session.frames.earlier == []  # nothing was asked again yet
    monkeypatch.setattr(engines, "check_models", check_models)  # the provider is back
    session.step(1)
    assert session.wait(60) and session.error == "" and session.stop_reason == ""
    assert session.model is not first and session.frames.steps_done == 2
    assert session.frames.earlier == [
        "Step 2, cut by the provider outage, had 1 failed call before the society was built again from its "
        "tape at step 1; they were asked again."]


def test_the_usage_panel_counts_as_asked_again_only_the_cut_steps_provider_errors():
    """An answer the model gave but the agent could not use is on the tape: the rebuilt step reads it
    again, free, and falls back again, so its row is in the rebuilt ledger. The note counted it as a
    failed call asked again (a CRSEC run on a model answering badly: every fallback, twice over)."""
    import dataclasses

    from socialsim.llm.ledger import BudgetExhausted

    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=3, steps=3))
    session.step(1)
    assert session.wait(60) and session.frames.steps_done == 1
    rows = session.model.llm.ledger.rows
    rows += [dataclasses.replace(rows[-1], step=2, error="provider error: HTTP 500"),
             dataclasses.replace(rows[-1], step=2, error="unusable answer after repair (expected a number)")]
    _stops_next_step(session, BudgetExhausted("max_calls=7 reached"))
    session.step(1)
    assert session.wait(60) and session.stop_reason == "stopped by budget: max_calls=7 reached"
    session.step(1)
    assert session.wait(60) and session.error == "" and session.frames.steps_done == 2
    assert session.frames.earlier == [
        "Step 2, cut by the budget, had 1 failed call before the society was built again from its tape at "
        "step 1; they were asked again."]


def test_a_society_an_error_stopped_mid_step_asks_for_reset(monkeypatch, caplog):
    from socialsim.model.society import SocietyModel

    session = LiveSession(LiveConfig(scenario="makerspace", arch="generic", model="rules", seed=1))
    session.step(1)
    assert session.wait(60) and session.frames.steps_done == 1
    monkeypatch.setattr(SocietyModel, "_collect", lambda self: (_ for _ in ()).throw(RuntimeError("boom")))
    session.step(1)
    assert session.wait(60) and session.error == "RuntimeError: boom"
    assert (session.busy, session.playing) == (False, False)
    assert (session.frames.status, session.frames.steps_done) == ("stopped: RuntimeError: boom", 1)
    logged = [r.getMessage() for r in caplog.records if r.name == "socialsim.dashboard"]
    assert len(logged) == 1 and logged[0].startswith("dashboard step failed:\nTraceback (most recent call last)")
    assert logged[0].rstrip().endswith("RuntimeError: boom")  # the whole traceback, for run.log
    version = session.version
    session.play()
    session.step(1)  # used to spin for ever on steps Mesa no longer scheduled
    assert session.wait(5) and not session.busy and session.frames.steps_done == 1
    assert session.version == version and not session.playing  # refused: no worker tried the step
    assert session.stop_reason == ("stopped by an error; this society stopped in the middle of step 2 and cannot go "
                                   "on: Reset builds it again")


def _playing_on(provider) -> LiveSession:
    """A built society of generic agents on the test server, playing (Play stops at step 20)."""
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "openai/fake-model", seed=3, steps=20,
                                     api_base=provider.api_base))
    session.start()
    assert session.wait(120) and session.error == ""
    session.play()
    return session


def test_pause_and_the_pages_reads_answer_while_a_step_waits_on_its_provider(monkeypatch):
    """The provider holds every reply until the test lets it go: a Pause or a read of the page that
    waited on the running step could not return before that, so their returning shows they did not
    (no clock: the join's limit only keeps a page that waits from hanging the suite)."""
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    gate = threading.Event()

    def held_reply(messages):
        gate.wait(300)
        return "1"

    with FakeOpenAIServer(policy=held_reply) as held:
        gate.set()  # the society is built (its model check answered) before the gate closes
        session = _playing_on(held)
        gate.clear()
        try:
            deadline = time.monotonic() + 60
            while held.in_flight == 0:  # a step is waiting on the provider
                assert time.monotonic() < deadline
                time.sleep(0.01)
            read: dict = {}
            page = threading.Thread(target=lambda: read.update(text=session.progress(), version=session.version,
                                                               paused=session.pause()))
            page.start()
            page.join(120)
            assert not page.is_alive() and held.in_flight > 0, "the page waited on the running step"
            assert read["text"].startswith("step 1 running") and not session.playing and session.busy
            assert session.frames.steps_done == 0 and read["version"] == session.version  # the last snapshot
            assert "paused" in session.stop_reason
        finally:
            gate.set()
        assert session.wait(120)
        assert session.frames.steps_done == 1  # the running step completed, no further one began


def test_the_progress_line_counts_the_runs_calls_while_a_step_waits(slow_provider):
    session = _playing_on(slow_provider)
    deadline = time.monotonic() + 60
    while not (session.frames.steps_done == 1 and slow_provider.in_flight > 0):  # step 2 waits on its calls
        assert time.monotonic() < deadline and session.error == ""
        time.sleep(0.01)
    text = session.progress()
    session.pause()
    step1 = panels.usage_totals(session.frames, 1)["llm_calls"]
    assert step1 > 0 and text.startswith("step 2 running")
    calls = int(re.search(r"run so far: (\d+) LLM calls", text)[1])
    assert step1 <= calls < 2 * step1  # step 1's calls (and any of step 2's done), read while step 2 runs
    assert session.wait(120)


def test_while_playing_the_panels_draw_a_new_snapshot_only_every_render_interval_steps():
    from types import SimpleNamespace

    from socialsim.dashboards.app import frames_to_draw

    def at(step):
        return SimpleNamespace(steps_done=step)

    drawn = at(10)
    assert frames_to_draw(drawn, at(12), playing=True, every=5) is drawn  # 2 steps on: keep drawing step 10
    assert frames_to_draw(drawn, at(15), playing=True, every=5).steps_done == 15  # 5 steps on: redraw
    assert frames_to_draw(drawn, at(11), playing=True, every=1).steps_done == 11  # Mesa's default: every step
    assert frames_to_draw(drawn, at(12), playing=False, every=5).steps_done == 12  # paused or stepping: latest
    assert frames_to_draw(drawn, at(0), playing=True, every=5).steps_done == 0  # a Reset: the new society
    assert frames_to_draw(None, at(3), playing=True, every=5).steps_done == 3


class _FinishingWhileRead(LiveSession):
    """A live session whose worker finishes its step just as a render first reads its frames: it
    stores the step's frames, then stops being busy (the worker's order)."""

    def __init__(self, config, before, after):
        super().__init__(config)
        self._now, self._after, self._busy_now = before, after, True

    @property
    def frames(self):
        shown = self._now
        if self._after is not None:
            self._now, self._after, self._busy_now = self._after, None, False
        return shown

    @frames.setter
    def frames(self, value):  # set by LiveSession.__init__; this session's frames are scripted
        pass

    @property
    def busy(self):
        return self._busy_now


def test_a_page_that_says_idle_shows_the_last_step_even_if_the_step_ends_during_its_render(monkeypatch):
    """The page reads the worker's state before its frames: read the other way round, a step ending
    between the two reads gave a render saying "idle" beside the step before (seen as a flaky
    browser test: Pause, idle at step 5, then step 6 appeared)."""
    import solara

    from socialsim.dashboards import app

    config = LiveConfig(scenario="makerspace", arch="generic", model="rules", seed=1)
    live = LiveSession(config)
    live.step(2)
    assert live.wait(60)
    two = live.frames
    live.step(1)
    assert live.wait(60)
    session = _FinishingWhileRead(config, two, live.frames)
    monkeypatch.setattr(app, "initial_session", lambda: session)
    texts: list[tuple[str, str]] = []
    text = solara.Text
    monkeypatch.setattr(solara, "Text", lambda t, **kw: (texts.append((kw.get("classes", [""])[0], t)), text(t, **kw))[1])
    solara.render(app.Page(), handle_error=False)
    shown, counter = [], None
    for kind, value in texts:
        if kind == "step-counter":
            counter = value.split(" · ")[0]
        elif kind == "run-state":
            shown.append((counter, value.split(" · ")[0]))
    assert ("Step 2", "stepping") in shown and shown[-1] == ("Step 3", "idle")
    assert ("Step 2", "idle") not in shown


def test_the_step_counter_names_the_scenarios_architecture_before_the_society_is_built(monkeypatch):
    """With "(scenario default)" chosen, the counter read "Step 0 · hobbs-cafe ·  · live" while the
    society was built, and for good when the build failed (a bad seed or model)."""
    import solara

    from socialsim.dashboards import app

    session = LiveSession(LiveConfig(scenario="hobbs-cafe", arch=None, model="rules", seed=1))  # never started
    monkeypatch.setattr(app, "initial_session", lambda: session)
    texts: list[tuple[str, str]] = []
    text = solara.Text
    monkeypatch.setattr(solara, "Text", lambda t, **kw: (texts.append((kw.get("classes", [""])[0], t)), text(t, **kw))[1])
    solara.render(app.Page(), handle_error=False)
    assert [t for kind, t in texts if kind == "step-counter"][-1] == "Step 0 · hobbs-cafe · crsec · live"


def test_reset_or_closing_the_page_stops_the_society_it_replaces(monkeypatch):
    """Reset left the old society playing (and calling its model) unseen behind the new one."""
    import ipyvuetify as v
    import solara

    from socialsim.dashboards import app

    playing = LiveSession(LiveConfig(scenario="makerspace", arch="generic", model="rules", seed=1, steps=10_000,
                                     play_interval_ms=0))
    playing.start()
    monkeypatch.setattr(app, "initial_session", lambda: playing)
    box, rc = solara.render(solara.AppLayout(children=[app.Page()]), handle_error=False)  # the sidebar's layout
    playing.play()
    assert playing.playing
    rc.find(v.Btn, class_="btn-reset").widget.click()
    assert not playing.playing and playing.wait(60)
    stopped_at = playing.frames.steps_done
    time.sleep(0.3)
    assert playing.frames.steps_done == stopped_at  # it stays where it was
    rc.find(v.Btn, class_="btn-play").widget.click()  # the new society plays ...
    assert _stepping_soon()
    rc.close()  # ... until the page is closed or reloaded
    assert not _stepping_soon(expected=False)


ENGINE_BOX = "model / engine (litellm string, rules, local/smollm2)"


@pytest.mark.parametrize("box, typed, said", [(ENGINE_BOX, "rulez", "unknown model 'rulez'"),
                                              ("seed", -7, "seed expects a whole number >= 0, got -7"),
                                              # a key pasted in the model box: redacted, as `run --model` says it
                                              (ENGINE_BOX, "sk-proj-" + "k3y" * 10, "unknown model '[REDACTED]'")])
def test_a_reset_that_could_not_build_its_society_leaves_the_one_shown(monkeypatch, box, typed, said):
    """A typo in the model box replaced the society shown, and everything it had done, with one
    that "could not be built"."""
    import ipyvuetify as v
    import solara

    from socialsim.dashboards import app

    shown = LiveSession(LiveConfig(scenario="makerspace", arch="generic", model="rules", seed=1))
    shown.step(2)
    assert shown.wait(60)
    built = []
    monkeypatch.setattr(app, "LiveSession", lambda config: built.append(config) or LiveSession(config))
    monkeypatch.setattr(app, "initial_session", lambda: shown)
    box_, rc = solara.render(solara.AppLayout(children=[app.Page()]), handle_error=False)
    try:
        typing = rc.find(v.TextField, label=box).widget
        typing.v_model = typed
        typing.fire_event("keyup.enter", None)  # the box hands on what was typed at Enter or on leaving it
        rc.find(v.Btn, class_="btn-reset").widget.click()
        assert built == [] and said in rc.find(v.Alert, class_="reset-error").widget.children[0]
        assert shown.frames.steps_done == 2 and not shown.error
        typing = rc.find(v.TextField, label=box).widget
        typing.v_model = "rules" if box == ENGINE_BOX else 3
        typing.fire_event("keyup.enter", None)
        rc.find(v.Btn, class_="btn-reset").widget.click()  # put right, Reset builds a new society
        assert len(built) == 1
        rc.find(v.Alert, class_="reset-error").assert_empty()
    finally:
        rc.close()


def _stepping_soon(expected: bool = True, seconds: float = 10.0) -> bool:
    """Whether a dashboard society's worker thread is alive, waiting up to ``seconds`` for the
    ``expected`` answer."""
    import threading

    deadline = time.monotonic() + seconds
    while True:
        alive = any(t.name == "socialsim-dashboard-step" and t.is_alive() for t in threading.enumerate())
        if alive == expected or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def test_the_usage_panel_keeps_the_calls_an_outage_failed_after_the_society_is_built_again(slow_provider):
    """Built again from its tape after an outage, the society asks the cut step's failed calls
    again: the usage panel still says they failed once, instead of dropping them from its counts."""
    from socialsim.dashboards import panels

    slow_provider.delay_s = 0.0
    slow_provider.faults = lambda n, messages: "500" if n == 3 else None  # one failed call of step 1 (a fallback)
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "openai/fake-model", seed=3, steps=5,
                                     api_base=slow_provider.api_base, call_options={"num_retries": 0}))
    session.step(1)
    assert session.wait(120) and session.error == "" and session.frames.steps_done == 1
    assert panels.usage_totals(session.frames, 1)["failures"] == 1
    slow_provider.down = True
    session.step(1)
    assert session.wait(120) and session.stop_reason.startswith("stopped by provider outage")
    failed = panels.usage_totals(session.frames, 1)["failures"] - 1  # the cut step's: step 1's is on the tape
    assert failed >= 5  # the breaker's calls in a row, shown while the society is stopped
    slow_provider.down = False
    session.step(1)
    assert session.wait(120) and session.error == "" and session.frames.steps_done == 2
    assert panels.usage_totals(session.frames, 2)["failures"] == 0  # the rebuilt run's own calls all answered
    assert session.frames.earlier == [
        f"Step 2, cut by the provider outage, had {failed} failed calls before the society was built again "
        "from its tape at step 1; they were asked again."]


def test_reset_refuses_a_negative_seed_and_a_routed_model_no_provider_serves_and_takes_seed_0_and_no_model():
    """Reset asks first, without building: seed 0 and the default model (none typed) build fine; a
    route to a model no provider serves (a replayed run's routes are kept for its Reset) does not."""
    from socialsim.dashboards.session import reset_problem

    assert reset_problem(LiveConfig(seed=0, model=None)) == ""
    assert reset_problem(LiveConfig(seed=0, model=" rules ")) == ""
    assert reset_problem(LiveConfig(seed=-1)) == "seed expects a whole number >= 0, got -1"
    routed = reset_problem(LiveConfig(model="rules", routes={"ChooseAction": "rulez"}))
    assert "unknown model 'rulez'" in routed


class _GatedPollClock:
    """Stands for the page's ``time`` module: the poll's sleep returns only when the test lets the
    poll go round once more, and the test's own thread (where a click runs) reads an earlier time
    than the poll's thread: a click that took its time before the poll asked, and set it after.
    Threads running before it was made (other tests' pages, still polling) keep the real clock."""

    def __init__(self):
        self.arrived, self.go = threading.Semaphore(0), threading.Semaphore(0)
        self._later = 100.0
        self._others = set(threading.enumerate())

    def monotonic(self) -> float:
        if threading.current_thread() in self._others:
            return 1.0 if threading.current_thread() is threading.main_thread() else time.monotonic()
        self._later += 1.0
        return self._later

    def sleep(self, seconds: float) -> None:
        if threading.current_thread() in self._others:
            return time.sleep(seconds)
        self.arrived.release()
        self.go.acquire()

    def poll_once(self) -> None:
        """Let the parked poll go round once, and wait until it is parked again."""
        self.go.release()
        assert self.arrived.acquire(timeout=60), "the page's poll did not come round"


def _page_after_one_step_with_its_poll_gated(monkeypatch):
    """A live makerspace session one step in, and its page rendered with the poll's clock gated."""
    import solara

    from socialsim.dashboards import app

    session = LiveSession(LiveConfig(scenario="makerspace", arch="generic", model="rules", seed=1))
    session.step(1)
    assert session.wait(60)
    clock = _GatedPollClock()
    monkeypatch.setattr(app, "time", clock)
    monkeypatch.setattr(app, "initial_session", lambda: session)
    _, rc = solara.render(solara.AppLayout(children=[app.Page()]), handle_error=False)
    return session, clock, rc


def test_a_clicks_rerender_landing_after_the_polls_never_stops_the_page_following_the_worker(monkeypatch):
    """The poll asked a re-render with the time and waited for a render at or after it; a click
    asked one with its own time. A click whose time was taken before the poll's, and set after,
    left the page's last render "older" than the poll's request, and the poll never asked again:
    the page stopped following the worker until the next click (a browser test under load waited
    90 s for the map to catch up with the counter)."""
    import ipyvuetify as v

    session, clock, rc = _page_after_one_step_with_its_poll_gated(monkeypatch)

    def counter() -> str:  # what this page's step counter shows now
        return rc.find(v.Html, class_="step-counter").widget.children[0].split(" · ")[0]

    try:
        assert clock.arrived.acquire(timeout=60)  # the poll asked its first re-render, and is parked
        rc.find(v.Btn, class_="btn-step").widget.click()  # the click's re-render lands after the poll's
        assert session.wait(60) and session.frames.steps_done == 2
        session.step(1)  # the worker moves on with no click: only the poll can show it
        assert session.wait(60) and session.frames.steps_done == 3
        for _ in range(3):
            clock.poll_once()
        assert counter() == "Step 3"
    finally:
        rc.close()
        clock.go.release()  # the cancelled poll leaves its last sleep


def test_a_click_redraws_the_page_at_once_not_at_the_next_poll(monkeypatch):
    """A command's button re-renders the page itself: with the poll parked, Step shows its step
    started (or done) at once."""
    import ipyvuetify as v

    session, clock, rc = _page_after_one_step_with_its_poll_gated(monkeypatch)

    def shown() -> tuple[str, str]:  # the step counter and the worker's state, as the page shows them now
        return (rc.find(v.Html, class_="step-counter").widget.children[0].split(" · ")[0],
                rc.find(v.Html, class_="run-state").widget.children[0].split(" · ")[0])

    try:
        assert clock.arrived.acquire(timeout=60)  # the poll asked its first re-render, and is parked
        assert shown() == ("Step 1", "idle")
        rc.find(v.Btn, class_="btn-step").widget.click()
        assert shown() != ("Step 1", "idle")  # "stepping", or already step 2
        assert session.wait(60)
    finally:
        rc.close()
        clock.go.release()  # the cancelled poll leaves its last sleep
