"""What the dashboard drives: a live society stepped on a worker thread, or a finished run replayed.

A step may wait minutes on LLM calls, so the model is built and stepped only on a worker thread;
the page reads an immutable ``Frames`` snapshot taken after each completed step, plus a progress
line the worker keeps current, and so never waits for (or reads half of) a step. A replay reads
a run directory's recorded frames and tape: no model is stepped and no LLM is called.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from socialsim.dashboards.panels import (
    Frames,
    effective_settings,
    frames_from_model,
    frames_from_run,
    run_meta,
    run_report,
)
from socialsim.model.run_dir import recorded_scenario

log = logging.getLogger("socialsim.dashboard")

def parameter_controls(arch: str) -> list[dict]:
    """One control spec per parameter a page can set, from the architecture's declared settings
    (``agents.params.parameters``: the same source as ``--set`` and sweeps).

    Valid by construction: a slider only where the field declares both bounds and its default
    lies on the slider's grid (a slider snaps its value to the grid, which would silently change
    the default); otherwise a number field whose entries are checked like ``--set``. JSON-valued
    parameters (lists, dicts) have no control here; they are set with ``--set``.
    """
    from socialsim.agents.params import parameters

    specs: list[dict] = []
    for p in parameters(arch):
        spec = {"name": p.name, "kind": p.kind, "default": p.default, "help": p.help, "low": p.low, "high": p.high}
        if p.kind == "bool":
            spec["widget"] = "checkbox"
        elif p.kind == "choice":
            spec.update(widget="select", choices=list(p.choices))
        elif p.kind == "int" and p.low is not None and p.high is not None and p.high - p.low <= 200:
            low = p.low if check_parameter(arch, p.name, p.low)[1] == "" else p.low + 1
            high = p.high if check_parameter(arch, p.name, p.high)[1] == "" else p.high - 1
            spec.update(widget="slider", step=1, low=low, high=high)
        elif p.kind == "float" and p.low is not None and p.high is not None and _on_grid(p.default, p.low, p.high):
            step = (p.high - p.low) / 100
            # an exclusive bound (gt/lt) is not a value: the slider stops one step inside it
            low = p.low if check_parameter(arch, p.name, p.low)[1] == "" else p.low + step
            high = p.high if check_parameter(arch, p.name, p.high)[1] == "" else p.high - step
            spec.update(widget="slider", step=step, low=low, high=high)
        elif p.kind in ("int", "float", "text"):
            spec["widget"] = "input"
        else:
            continue
        specs.append(spec)
    return specs


def _on_grid(value: Any, low: float, high: float) -> bool:
    if not isinstance(value, int | float) or high <= low:
        return False
    k = (value - low) / ((high - low) / 100)
    return abs(k - round(k)) < 1e-9


def check_parameter(arch: str, name: str, value: Any) -> tuple[Any, str]:
    """(typed value, "") or (None, message): the check ``--set arch.name=value`` makes, of what was
    typed redacted: a key pasted in a text box by mistake is neither shown back in the refusal nor
    kept in the box, nor handed to the society (which a scenario's key never reaches either)."""
    from socialsim.agents.params import ParamError, parse_assignments
    from socialsim.llm.redact import redact

    raw = redact(value if isinstance(value, str) and not isinstance(value, bool) else json.dumps(value))
    try:
        return parse_assignments(arch, [f"{name}={raw}"])[name], ""
    except ParamError as exc:
        return None, str(exc).replace("--set ", "")


def check_parameters(arch: str, values: dict[str, Any]) -> str:
    """"" when the architecture's settings model accepts ``values`` together, else why not."""
    from pydantic import ValidationError

    from socialsim.agents.params import settings_model

    model = settings_model(arch)
    if not values:
        return ""
    if model is None:
        return f"architecture {arch!r} has no parameters"
    unknown = sorted(set(values) - set(model.model_fields))
    if unknown:
        return f"unknown {arch} parameters: {', '.join(unknown)}"
    try:
        model(**values)
    except ValidationError as exc:
        from socialsim.llm.redact import redact  # a key given as a value (run --set) is not shown back

        # fields the scenario supplies (e.g. CRSEC's tracked norms) are not the page's to give
        errors = [e for e in exc.errors() if e["type"] != "missing"]
        return redact("; ".join(f"{arch}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors))
    return ""


def scenario_default_arch(scenario: str) -> str:
    from socialsim.scenarios.loader import load_scenario

    try:
        return load_scenario(scenario).default_arch
    except Exception:  # a scenario that does not load shows its error on Reset
        return "generic"


def scenario_length(scenario: str) -> int:
    from socialsim.scenarios.loader import load_scenario

    try:
        return int(load_scenario(scenario).default_steps)
    except Exception:
        return 10


PLAY_INTERVAL_MS = 100  # as Mesa's SolaraViz: a fast (rules) step leaves the page time to draw and answer


@dataclass
class LiveConfig:
    """What the controls choose; ``params`` holds only the parameters the user changed."""

    scenario: str = "hobbs-cafe"
    arch: str | None = None
    model: str | None = None
    seed: int = 42
    params: dict[str, Any] = field(default_factory=dict)
    max_calls: int | None = None  # the run's budget: Play stops, with the reason shown, when spent
    max_cost: float | None = None
    api_base: str | None = None  # a provider endpoint (vLLM, Ollama, the test server)
    steps: int | None = None  # where Play stops; None: the scenario's default length
    play_interval_ms: int = PLAY_INTERVAL_MS  # the pause Play makes between steps (Mesa's SolaraViz: 100)
    routes: dict[str, str] = field(default_factory=dict)  # a replayed run's, kept for its Reset
    # the rest of a replayed run's call settings (price, timeout_s, num_retries, json_schema, breaker,
    # rpm, tpm, max_concurrency): a Reset from it asks as the recording asked
    call_options: dict[str, Any] = field(default_factory=dict)


class LiveSession:
    """One society, built and stepped on a worker thread; the page reads ``frames``."""

    replay = False

    def __init__(self, config: LiveConfig) -> None:
        self.config = config
        self.model: Any = None
        self.frames: Frames | None = None
        self.version = 0  # bumped whenever frames change
        self.error = ""
        self.notes: list[str] = []
        self.settings: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()  # set by Pause: ends the wait between two played steps at once
        self.play_interval_ms = config.play_interval_ms  # read before each wait: changed live by the page
        self._running = False  # the worker owns the model while this is set
        self._playing = False
        self._pending = 0
        self._started = 0.0
        self._rows_before = 0
        self._step_no = 0
        self.length = config.steps or scenario_length(config.scenario)  # Play stops here; Step goes further
        self.stop_reason = ""
        self.error_title = "The society stopped"  # what the page says before ``error``
        self._cut = ""  # why a step was cut short: the society cannot step again as it is
        self._rebuild = False  # set by Step or Play after a budget or outage stop: build it again from its tape
        self._earlier: list[str] = []  # what the usage panel says of calls the rebuilt ledger does not hold

    # --- commands (return at once) -------------------------------------------------------------
    def start(self) -> None:
        """Build the model (on the worker)."""
        self._launch(0)

    def step(self, n: int = 1) -> None:
        if not self._refused():
            self._launch(n)

    def play(self) -> None:
        """Step until Pause, the scenario's length or the budget stops it."""
        if self._refused():
            return
        done = self.frames.steps_done if self.frames else 0
        if done >= self.length:
            self.stop_reason = f"reached {self._end()}; Step goes further, or raise \"Play stops at step\""
            return
        self.stop_reason = ""
        self._playing = True
        self._wake.clear()
        self._launch(0)

    def _refused(self) -> bool:
        """A society stopped in the middle of a step cannot step on as it is: its step is half done, and
        Mesa schedules no further step. After a budget or an outage it goes on by being built again from
        its own tape (as ``--resume`` does: its steps so far are answered for free, then it continues);
        after an error it is refused, naming Reset."""
        if not self._cut:
            return False
        if self._cut.startswith("stopped by an error"):
            where = ("could not be built" if self.model is None else
                     f"stopped in the middle of step {self._step_no}")
            self.stop_reason = f"{self._cut}; this society {where} and cannot go on: Reset builds it again"
            return True
        self._rebuild = True  # the worker builds it again from its tape, then steps on
        return False

    def pause(self) -> None:
        """Stop after the step now running (a step is never cut in half); returns at once."""
        self._playing = False
        self._pending = 0
        self._wake.set()
        if self._running:
            self.stop_reason = "paused: the step now running completes, then the society waits"

    def set_length(self, steps: int | None) -> None:
        """Where Play stops (None: the scenario's length), changed live: no Reset needed."""
        self.config.steps = steps
        self.length = steps or scenario_length(self.config.scenario)
        if self.stop_reason.startswith("reached"):
            self.stop_reason = ""

    def set_max_calls(self, max_calls: int | None) -> None:
        """The budget of LLM calls (None: no limit), changed live: the next call is checked against it."""
        self.config.max_calls = _checked_max_calls(max_calls)
        if self.model is not None:
            self.model.llm.ledger.budget.max_calls = max_calls

    @property
    def busy(self) -> bool:
        return self._running

    @property
    def playing(self) -> bool:
        return self._playing

    def progress(self) -> str:
        """One line on what the worker is doing now (read by the page while a step runs)."""
        if not self.busy:
            return ""
        if self.model is None:
            return f"building the society ({time.monotonic() - self._started:.0f}s)"
        done = self.frames.steps_done if self.frames else 0
        if self._step_no <= done:  # between a snapshot and the next step's start, or in Play's pause
            return "the society is built" if done == 0 else f"step {done} done"
        ledger = self.model.llm.ledger
        rows = ledger.rows
        done = len(rows) - self._rows_before
        last = rows[-1].op if done > 0 else "perceiving"
        t = ledger.totals()  # the run's usage up to the last completed call, read live
        return (f"step {self._step_no} running: {done} decisions so far (last: {last}), "
                f"{time.monotonic() - self._started:.0f}s · run so far: {t['llm_calls']} LLM calls, "
                f"{t['prompt_tokens'] + t['completion_tokens']} tokens, ${t['cost_usd']:.4f}, "
                f"{t['fallbacks']} fallbacks")

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the worker (tests and the command line); True if it is idle."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return not self.busy

    # --- the worker ------------------------------------------------------------------------------
    def _launch(self, n: int) -> None:
        with self._lock:
            if self._running:
                self._pending += n
                return
            self._pending, self._running = n, True
            self._started = time.monotonic()  # a poll before the worker's first line counts from here
            self._thread = threading.Thread(target=self._work, name="socialsim-dashboard-step", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        from socialsim.llm.gateway import ProviderOutage
        from socialsim.llm.ledger import BudgetExhausted

        try:
            if self.model is None:
                self._started = time.monotonic()
                self._build()
            elif self._rebuild:
                self._started = time.monotonic()
                if not self._continue_from_tape():
                    return
            while self._next():
                self._started = time.monotonic()
                self._rows_before = len(self.model.llm.ledger.rows)
                self._step_no = (self.frames.steps_done if self.frames else 0) + 1
                before = self.model.steps
                self.model.step()
                if self.model.steps == before:  # Mesa's step schedule was stopped: never spin on nothing
                    raise RuntimeError("the model did not step (Mesa stopped its step schedule)")
                self._snapshot(f"step {self._step_no} done")
                if self._playing and self._pending == 0:  # Play's interval; Pause ends it at once
                    self._wake.wait(max(0, self.play_interval_ms) / 1000)
                else:
                    time.sleep(0.01)  # a fast (rules) step holds the GIL: let the page render between steps
        except (BudgetExhausted, ProviderOutage) as exc:  # a clean stop: everything recorded stays
            self._playing = False
            self._pending = 0
            kind = "budget" if isinstance(exc, BudgetExhausted) else "provider outage"
            self.stop_reason = self._cut = f"stopped by {kind}: {exc}"
            self._snapshot(self.stop_reason)
            with self._lock:
                self._running = False
        except Exception as exc:  # shown on the page; the model keeps what it recorded
            from socialsim.llm.redact import redact

            self._playing = False
            self.error = redact(f"{type(exc).__name__}: {exc}")
            log.error("dashboard step failed:\n%s", redact(traceback.format_exc()))
            self._cut = "stopped by an error"
            if self.model is not None:
                self._snapshot(f"stopped: {self.error}")
            else:  # never built: nothing stopped
                self.error_title = "The society could not be built"
            with self._lock:
                self._running = False

    def _next(self) -> bool:
        """Take the next step to run, or release the model (under the lock, so a command given
        while the worker finishes is never lost)."""
        with self._lock:
            done = self.frames.steps_done if self.frames else 0
            if self._playing and self._pending == 0 and done >= self.length:
                self._playing = False
                self.stop_reason = f"reached {self._end()}"
            if self._pending > 0 or self._playing:
                self._pending = max(0, self._pending - 1)
                return True
            self._running = False
            return False

    def _end(self) -> str:
        return f"step {self.length}, where Play stops" if self.config.steps else \
            f"the scenario's length ({self.length} steps)"

    def _continue_from_tape(self) -> bool:
        """The society a budget or an outage cut mid-step, built again on the calls it made (its tape):
        its complete steps are run again from the tape, free and the same, and it goes on from there;
        its live calls and cost so far still count against the budget. False, the worker released and
        the society left as it was, when its model cannot be reached yet (the provider still down):
        the stop stays one that Step or Play can go on from, not an error that asks for Reset."""
        from socialsim.llm.engines import ModelUnavailable
        from socialsim.llm.redact import redact

        old = self.model.llm
        done = self.frames.steps_done if self.frames else 0
        # a provider's error is asked again; an answer the agent could not use is on the tape, read again
        failed = sum(1 for row in old.ledger.rows if row.step > done and (row.error or "").startswith("provider error"))
        try:
            self._build(tape=old.tape)
        except ModelUnavailable as exc:
            self._playing, self._pending = False, 0
            self.stop_reason = redact(f"{self._cut}; it could not be built again from its tape ({exc}): "
                                      "Step or Play tries again")
            with self._lock:
                self._running = False
            return False
        if failed:  # the rebuilt step asks them again: its ledger holds only the new answers
            cause = self._cut.removeprefix("stopped by ").split(":")[0]
            self._earlier.append(f"Step {done + 1}, cut by the {cause}, had {failed} failed call"
                                 f"{'' if failed == 1 else 's'} before the society was built again from its "
                                 f"tape at step {done}; they were asked again.")
        self.model.llm.ledger.live_calls, self.model.llm.ledger.live_cost = old.ledger.live_calls, old.ledger.live_cost
        for _ in range(done):
            self.model.step()
        self._cut, self._rebuild, self.stop_reason = "", False, ""
        self._snapshot(f"built again from its tape at step {done}")
        return True

    def _build(self, tape: Any = None) -> None:
        from socialsim.llm.engines import check_models, engine_note
        from socialsim.llm.gateway import Gateway
        from socialsim.llm.ledger import Budget, Ledger
        from socialsim.llm.routing import RouteTable, default_model
        from socialsim.model.society import SocietyModel

        c = self.config
        if c.seed < 0:  # the page's seed box takes any whole number; numpy's seeds are >= 0
            raise ValueError(_seed_problem(c.seed))
        _checked_max_calls(c.max_calls)
        model_name = default_model(c.model.strip() if c.model else None)
        gateway = Gateway(RouteTable(model_name, dict(c.routes)), tape,
                          ledger=Ledger(Budget(c.max_cost, c.max_calls)), api_base=c.api_base, **c.call_options)
        model = SocietyModel(c.scenario, arch=c.arch, rng=c.seed, gateway=gateway, **c.params)
        if c.max_cost is not None:  # a budget needs prices: else no call would ever count against it
            from socialsim.model.runner import RunConfig, check_priced

            check_priced(RunConfig(max_cost=c.max_cost, price=c.call_options.get("price")), gateway.models(),
                         budget="max cost ")
        # the routes' and a judge's models too, before step 1, asked as the run will ask them
        gateway.deployments_left_out = check_models(gateway.models(), api_base=c.api_base, timeout_s=gateway.timeout_s,
                                                    num_retries=gateway.num_retries, deployments=gateway.deployments,
                                                    rpm=gateway.rpm, tpm=gateway.tpm)
        self.model = model
        self.notes = [n for m in sorted(gateway.models()) if (n := engine_note(m))]
        self.settings = effective_settings(self.model)
        self._snapshot("built: press Step or Run")

    def _snapshot(self, status: str) -> None:
        self.frames = frames_from_model(self.model, status)
        self.frames.earlier = list(self._earlier)
        self.version += 1


def _seed_problem(seed: int) -> str:
    return f"seed expects a whole number >= 0, got {seed}"


def reset_problem(config: LiveConfig) -> str:
    """Why a society of ``config`` cannot be built, as far as is known without building it ("" if
    nothing is): a negative seed, a model name no provider serves (no key read, no call). Reset asks
    first, so a typo in the model box leaves the society shown as it is instead of replacing it
    with one that could not be built."""
    from socialsim.llm.engines import ModelUnavailable, check_model_names
    from socialsim.llm.routing import RouteTable, default_model

    if config.seed < 0:
        return _seed_problem(config.seed)
    try:
        check_model_names(RouteTable(default_model(config.model.strip() if config.model else None),
                                     dict(config.routes)).models())
    except ModelUnavailable as exc:  # a key pasted in the model box by mistake is not shown back
        from socialsim.llm.redact import redact

        return redact(str(exc))
    return ""


def _checked_max_calls(max_calls: int | None) -> int | None:
    if max_calls is not None and max_calls < 0:
        raise ValueError(f"max LLM calls expects a whole number >= 0 (0: no limit), got {max_calls}")
    return max_calls


def how_it_ended(run_dir: Path, meta: dict, shown: int | None = None) -> str:
    """One line on a recorded run that did not simply complete (the page shows it above the steps);
    "" for a completed run. ``shown``: the steps the page can show, fewer than config.json's when
    the run directory lacks some of its frames (the page's missing-files warning says which)."""
    from socialsim.model.run_dir import being_written

    status, done = meta.get("status", ""), meta.get("steps_done", 0)
    steps = f"its {done} complete steps" if shown is None or shown >= done else \
        f"{shown} of its {done} complete steps"
    if meta.get("replay_of"):
        return f"A replay of {meta['replay_of']} (it keeps no tape: open or continue that run)."
    if status == "completed":
        return ""
    if status == "running":
        if pid := being_written(run_dir):
            return (f"Being written by another process (pid {pid}): {steps} so far; open it "
                    "again for more.")
        return (f"Killed while running (its process is gone): {steps} are shown; "
                f"`socialsim run --resume {run_dir}` continues it.")
    return (f"This run did not complete ({status or 'no status recorded'}) after {done} steps; "
            f"`socialsim run --resume {run_dir}` continues it.")


def missing_note(frames: Frames) -> str:
    """The page's warning on a replayed run that lacks files its config.json says it recorded."""
    if not frames.missing:
        return ""
    return ("This run directory lacks what its config.json says it recorded, so some steps or panels are "
            f"empty: {'; '.join(frames.missing)}.")


class ReplaySession:
    """A finished run directory, read once; the page scrubs its steps."""

    replay = True
    busy = False
    playing = False
    error = ""
    stop_reason = ""  # a replay never plays, so never stops; the page's poll reads it all the same

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.frames = frames_from_run(self.run_dir)
        self.version = 1
        self.notes: list[str] = []
        self.settings = {}
        meta = run_meta(self.run_dir)
        self.ending = how_it_ended(self.run_dir, meta, self.frames.steps_done)
        self.report = run_report(self.run_dir)  # markdown; "" when the run has written none yet
        recorded = meta["config"]
        # Reset from a replay re-runs the same society live: its model, routes, budget, endpoint, length
        # and call settings as recorded (without them a Reset ran with no budget, or asked another endpoint)
        from socialsim.model.runner import CALL_SETTINGS

        named = recorded.get("scenario", self.frames.scenario)
        self.config = LiveConfig(scenario=recorded_scenario(self.run_dir, named), arch=self.frames.arch,
                                 model=recorded.get("model"), seed=int(recorded.get("rng", 42)),
                                 params=dict(recorded.get("arch_params") or {}), max_calls=recorded.get("max_calls"),
                                 max_cost=recorded.get("max_cost"), api_base=recorded.get("api_base"),
                                 steps=recorded.get("steps"), routes=dict(recorded.get("routes") or {}),
                                 call_options={k: recorded[k] for k in CALL_SETTINGS
                                               if k != "api_base" and recorded.get(k) is not None})

    def progress(self) -> str:
        return ""

    def wait(self, timeout: float | None = None) -> bool:
        return True


