"""What a run directory is (a directory with the run's ``config.json``), and a message naming the
runs inside a directory that is not one, such as a reproduction's or a sweep's, so the user can
pick one. Imports nothing heavy: the command line uses it before any model is built."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from socialsim.llm.redact import redact
from socialsim.scenarios.loader import SUFFIXES, ScenarioError, scenario_path

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, so a run directory is not guarded there
    fcntl = None

# a reproduction's runs are OUT/ARM/seed-K, a sweep's SWEEP/runs/ID: two levels below, at most three
_RUNS_BELOW = ("*/config.json", "*/*/config.json", "*/*/*/config.json")
_NAMED = 3
SWEEP_FILE = "sweep.json"  # what makes a folder a sweep's
LOCK = ".lock"  # held by the process writing a run directory (``writing``)
SCENARIO_COPY = "scenario"  # a run directory's copy of its scenario file: scenario.yaml or .toml


def _runs(n: int) -> str:
    return f"{n} run{'s' if n > 1 else ''}"


def folder_name(label: str) -> str:
    """A label made safe as a folder's name (a reproduction's arm, a run's settings)."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in label).strip("_") or "run"


def kept_scenario(run_dir: str | Path) -> Path | None:
    """The copy of its scenario file a run directory keeps (``scenario.yaml`` or ``.toml``), if any:
    what replay, ``--resume`` and the dashboard build the society from."""
    return next((p for s in SUFFIXES if (p := Path(run_dir) / f"{SCENARIO_COPY}{s}").is_file()), None)


def recorded_scenario(run_dir: str | Path, named: str) -> str:
    """What a recorded run's society is built from: the scenario it names while that file still
    holds what the run kept, else the run's own copy (the file was edited or moved, or the run is
    read from another folder); the name when the run kept no copy (written before copies were)."""
    copy = kept_scenario(run_dir)
    if copy is None:
        return named
    try:
        same = redact(scenario_path(named).read_text(encoding="utf-8")) == copy.read_text(encoding="utf-8")
    except (ScenarioError, OSError, UnicodeDecodeError):
        same = False
    return named if same else str(copy)


@contextmanager
def writing(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` while this process writes it: a second run, ``--resume`` or replay into it
    meanwhile (another terminal) is refused instead of interleaving two tapes and two sets of
    frames. The hold is a lock on ``.lock`` that goes with the process, even on ``kill -9``."""
    if fcntl is None:
        yield
        return
    with open(run_dir / LOCK, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            pid = handle.read().strip()
            raise ValueError(f"{run_dir} is being written by another process{f' (pid {pid})' if pid else ''}: "
                             "let it finish or stop it (Ctrl-C saves it), then try again") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)


def being_written(run_dir: str | Path) -> str | None:
    """The pid of the process writing ``run_dir`` now (it holds its lock), else None. A run being
    written is read as it is, never consolidated or replayed under its writer's feet."""
    lock = Path(run_dir) / LOCK
    if fcntl is None or not lock.is_file():
        return None
    with open(lock, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            return handle.read().strip() or "?"
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def is_run_dir(path: str | Path) -> bool:
    return (Path(path) / "config.json").is_file()


def runs_below(path: str | Path) -> list[Path]:
    """The run directories up to three levels below ``path``, in order; not those inside another run
    (its replays, ``RUN/replay`` and ``RUN/check-order-K``, are checks of it, not runs of their own),
    nor hidden ones (a sweep's ``runs/.partial-*``: a run being written, or killed while written)."""
    path = Path(path)
    if not path.is_dir():
        return []
    found = {config.parent for pattern in _RUNS_BELOW for config in path.glob(pattern)
             if not any(part.startswith(".") for part in config.parent.relative_to(path).parts)}
    return sorted(run for run in found if not any(parent in found for parent in run.parents))


class NotARunDir(FileNotFoundError):
    """``path`` has no config.json; ``runs`` are the run directories below it, so a caller can offer
    them (the dashboard lists them) without looking for them again."""

    def __init__(self, path: str | Path) -> None:
        self.runs = runs_below(path)
        message = (f"{path} is not a run directory (no config.json)" if Path(path).exists()
                   else f"{path} does not exist (no such run directory)")
        if self.runs:
            runs = self.runs
            named = ", ".join(str(r) for r in runs[:_NAMED]) + (f" and {len(runs) - _NAMED} more"
                                                               if len(runs) > _NAMED else "")
            message += f"; it holds {_runs(len(runs))} ({named}): give one of them"
        super().__init__(message)


def already_a_run(path: str | Path, flag: str = "--out") -> str | None:
    """Why ``path`` cannot take a new run: it holds one (its status and steps named), which writing
    there would replace, or runs below it (a sweep's, a reproduction's, ``runs/``), whose folder
    would then read as one run. None when it holds none."""
    path = Path(path)
    if not is_run_dir(path):
        inside = runs_below(path)
        if not inside:
            return None
        return (f"{flag} {path} holds {_runs(len(inside))} below it (e.g. {inside[0]}); "
                f"nothing was written: give a folder of its own, e.g. {path / 'my-run'}")
    try:
        meta = json.loads((path / "config.json").read_text())
        status, steps = meta["status"], meta["steps_done"]
    except (OSError, ValueError, KeyError, TypeError):
        status, steps = None, None
    what = f" ({status}, {steps} step{'' if steps == 1 else 's'})" if status is not None else ""
    go_on = (f"extend it with `socialsim run --resume {path} --steps N`" if status == "completed"
             else f"continue it with `socialsim run --resume {path}`")
    return f"{flag} {path} already holds a run{what}; nothing was written. To keep it, {go_on}, or give another {flag}"


def not_for_a_batch(path: str | Path, what: str) -> str | None:
    """Why ``path`` cannot hold a sweep or a reproduction (``what``): it is a run directory, or holds
    runs that are not that batch's (a run, a sweep or a reproduction written there before), which
    would be mixed into its tables. None when it can (new, empty, or that batch's own folder)."""
    path = Path(path)
    if is_run_dir(path):
        return f"--out {path} is a run directory; a {what} needs a folder of its own"
    inside = runs_below(path)
    if what == "sweep":
        own = (path / SWEEP_FILE).is_file()
    else:  # a reproduction's runs are ARM/seed-K (and its null model's, rules-null-model/ARM/seed-K)
        own = not (path / SWEEP_FILE).is_file() and all(r.name.startswith("seed-") for r in inside)
    if own or not inside:
        return None
    return (f"--out {path} holds {_runs(len(inside))} that are not a {what}'s "
            f"(e.g. {inside[0]}); nothing was written: give a folder of its own")


def not_a_run_dir(path: str | Path) -> str:
    """Why ``path`` is not a run directory, naming the runs it holds if it holds some."""
    return str(NotARunDir(path))
