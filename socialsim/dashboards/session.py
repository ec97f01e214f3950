"""What the dashboard drives: a live society stepped on a worker thread, or a finished run replayed.

A step may wait minutes on LLM calls, so the model is built and stepped only on a worker thread;
the page reads an immutable ``Frames`` snapshot taken after each completed step, plus a progress
line the worker keeps current, and so never waits for (or reads half of) a step. A replay reads
a run directory's recorded frames and tape: no model is stepped and no LLM is called.
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from socialsim.dashboards.panels import Frames, frames_from_model, frames_from_run

log = logging.getLogger("socialsim.dashboard")

# Each architecture's settings model; its bool/int/float fields become the parameter controls.
SETTINGS = {
    "crsec": "socialsim.agents.crsec.settings:CRSECSettings",
    "asvo": "socialsim.agents.asvo.settings:ASVOSettings",
    "itcmas": "socialsim.agents.itcmas.settings:ITCMASConfig",
}


def _settings_class(arch: str) -> Any:
    try:
        module, _, name = SETTINGS[arch].partition(":")
        return getattr(importlib.import_module(module), name)
    except (KeyError, ImportError, AttributeError):
        return None


def arch_parameters(arch: str, current: dict[str, Any] | None = None) -> dict[str, dict]:
    """Mesa user-parameter specs (``SliderInt``, ``SliderFloat``, ``Checkbox``) built from the
    numeric and boolean fields of an architecture's settings model, valued at ``current`` (the
    built model's effective settings) or the field defaults. Empty for ``generic``."""
    cls = _settings_class(arch)
    if cls is None:
        return {}
    current = current or {}
    params: dict[str, dict] = {}
    for name, info in cls.model_fields.items():
        ann = info.annotation
        default = current.get(name, info.default)
        if ann is bool and isinstance(default, bool):
            params[name] = {"type": "Checkbox", "value": default, "label": name}
            continue
        if ann not in (int, float) or not isinstance(default, int | float) or isinstance(default, bool):
            continue
        low = high = None
        for m in info.metadata:
            low = getattr(m, "ge", None) if getattr(m, "ge", None) is not None else low
            low = getattr(m, "gt", None) if low is None and getattr(m, "gt", None) is not None else low
            high = getattr(m, "le", None) if getattr(m, "le", None) is not None else high
        low = 0 if low is None else low
        if high is None:
            high = max(default * 4, low + (10 if ann is int else 1.0))
        if ann is int:
            params[name] = {"type": "SliderInt", "value": int(default), "min": int(low), "max": int(high),
                            "step": max(1, int(high - low) // 100), "label": name}
        else:
            params[name] = {"type": "SliderFloat", "value": float(default), "min": float(low), "max": float(high),
                            "step": round((high - low) / 100, 6) or 0.01, "label": name}
    return params


def effective_settings(model: Any) -> dict[str, Any]:
    """The settings a built model runs with (its architecture's shared state), if it has any."""
    shared = model.society
    for attr in ("settings", "config"):
        value = getattr(shared, attr, None)
        if hasattr(value, "model_dump"):
            return value.model_dump()
    return {}


@dataclass
class LiveConfig:
    """What the controls choose; ``params`` holds only the parameters the user changed."""

    scenario: str = "hobbs-cafe"
    arch: str | None = None
    model: str | None = None
    seed: int = 42
    params: dict[str, Any] = field(default_factory=dict)


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
        self._running = False  # the worker owns the model while this is set
        self._playing = False
        self._pending = 0
        self._started = 0.0
        self._rows_before = 0
        self._step_no = 0

    # --- commands (return at once) -------------------------------------------------------------
    def start(self) -> None:
        """Build the model (on the worker)."""
        self._launch(0)

    def step(self, n: int = 1) -> None:
        self._launch(n)

    def play(self) -> None:
        self._playing = True
        self._launch(1)

    def pause(self) -> None:
        """Stop after the step now running (a step is never cut in half)."""
        self._playing = False
        self._pending = 0

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
        rows = self.model.llm.ledger.rows
        done = len(rows) - self._rows_before
        last = rows[-1].op if done > 0 else "perceiving"
        return (f"step {self._step_no} running: {done} decisions so far (last: {last}), "
                f"{time.monotonic() - self._started:.0f}s")

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
            self._thread = threading.Thread(target=self._work, name="socialsim-dashboard-step", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        try:
            if self.model is None:
                self._started = time.monotonic()
                self._build()
            while self._next():
                self._started = time.monotonic()
                self._rows_before = len(self.model.llm.ledger.rows)
                self._step_no = (self.frames.steps_done if self.frames else 0) + 1
                self.model.step()
                self._snapshot(f"step {self._step_no} done")
        except Exception as exc:  # shown on the page; the model keeps what it recorded
            from socialsim.llm.redact import redact

            self._playing = False
            self.error = redact(f"{type(exc).__name__}: {exc}")
            log.error("dashboard step failed:\n%s", redact(traceback.format_exc()))
            if self.model is not None:
                self._snapshot(f"stopped: {self.error}")
            with self._lock:
                self._running = False

    def _next(self) -> bool:
        """Take the next step to run, or release the model (under the lock, so a command given
        while the worker finishes is never lost)."""
        with self._lock:
            if self._pending > 0 or self._playing:
                self._pending = max(0, self._pending - 1)
                return True
            self._running = False
            return False

    def _build(self) -> None:
        from socialsim.llm.engines import check_models, engine_note
        from socialsim.llm.routing import default_model
        from socialsim.model.society import SocietyModel

        c = self.config
        model_name = default_model(c.model)
        check_models({model_name})
        self.notes = [n for n in [engine_note(model_name)] if n]
        self.model = SocietyModel(c.scenario, arch=c.arch, model=model_name, rng=c.seed, **c.params)
        self.settings = effective_settings(self.model)
        self._snapshot("built: press Step or Run")

    def _snapshot(self, status: str) -> None:
        self.frames = frames_from_model(self.model, status)
        self.version += 1


class ReplaySession:
    """A finished run directory, read once; the page scrubs its steps."""

    replay = True
    busy = False
    playing = False
    error = ""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.frames = frames_from_run(self.run_dir)
        self.version = 1
        self.notes: list[str] = []
        self.settings = {}
        recorded = json.loads((self.run_dir / "config.json").read_text())["config"]
        # Reset from a replay re-runs the same society live
        self.config = LiveConfig(scenario=recorded.get("scenario", self.frames.scenario), arch=self.frames.arch,
                                 model=recorded.get("model"), seed=int(recorded.get("rng", 42)),
                                 params=dict(recorded.get("arch_params") or {}))

    def progress(self) -> str:
        return ""

    def wait(self, timeout: float | None = None) -> bool:
        return True


def is_run_dir(path: str | Path) -> bool:
    return (Path(path) / "config.json").is_file()
