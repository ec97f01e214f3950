"""Sweeps: ``mesa.batch_run`` over a grid of SocietyModel parameters, resumable, one shared tape.

How a sweep runs, and why:

- ``mesa.batch_run`` builds and steps every model (local backend: ``number_processes`` = 1 or a
  process pool; the Dask backend calls the same ``batch_run`` for one combination per task), so
  both backends run exactly the same code and give the same results for the same seeds.
- Mesa builds each model from keyword parameters only, so the model class it gets is
  ``SweepModel``: a ``SocietyModel`` that resolves its parameters into a ``RunConfig``, names
  itself by a hash of that config (the run id), answers LLM calls from the sweep's shared tape,
  and writes its own run directory when it finishes. ``batch_run``'s return value is not used:
  results are read back from the run directories, which is what makes a sweep resumable.
- A run directory is written to ``runs/.partial-*`` and renamed to ``runs/<run_id>`` in one
  step; only a renamed directory whose status is ``completed`` counts as done. A sweep started
  again skips done runs (their models are never built) and redoes anything else; an
  interrupted run leaves at most a ``.partial-*`` folder, which the next start removes.
- All runs read and append ``SWEEP_DIR/tape.jsonl``; a call whose key (model, messages,
  parameters, seed) is already there costs nothing, so repeating a sweep makes no LLM calls.
  Each run directory also gets the records it used, so ``socialsim replay`` works on it.
  Runs side by side (processes, Dask workers) may ask the same call at the same moment: the first
  claims it (a file under ``SWEEP_DIR/.claims``) and the others wait for its answer on the tape.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from mesa import DataCollector, Model

from socialsim.agents import agent_class
from socialsim.agents.params import typed_values
from socialsim.batch.sweepfile import (
    CONFIG_PARAMS,
    LIMITS,
    SweepFileError,
    SweepSpec,
    encode,
    load_sweep,
    validate_sweep,
)
from socialsim.llm.deployments import load_deployments
from socialsim.llm.engines import engine_note
from socialsim.llm.gateway import Gateway, ProviderOutage
from socialsim.llm.ledger import Budget, BudgetExhausted, Ledger
from socialsim.llm.limiter import DEFAULT_CONCURRENCY
from socialsim.llm.redact import redacted_json
from socialsim.llm.routing import RouteTable, default_model
from socialsim.llm.tape import Tape, TapeRecord, answered, record_of
from socialsim.model.run_dir import LOCK, SWEEP_FILE, not_for_a_batch, writing
from socialsim.model.runner import RunConfig, call_settings, keep_scenario, off_tape_told, report_run, save
from socialsim.model.society import SocietyModel
from socialsim.scenarios.loader import scenario_path

try:
    import fcntl
except ImportError:  # Windows: one finisher at a time is not enforced
    fcntl = None

log = logging.getLogger("socialsim.batch")

RUNS = "runs"
PARTIAL = ".partial-"
FINISHING = ".finishing"  # SWEEP_DIR/.finishing: locked while a run directory is moved into place
COMMAND = ".command"  # SWEEP_DIR/.command: the sweep command whose runs may go on (``SweepModel.step``)
NOT_IDENTITY = {"max_concurrency", "max_cost", "max_calls", "api_base", "rpm", "tpm", "price", "timeout_s",
                "num_retries", "deployments"}


# --- run identity -------------------------------------------------------------------------------
def run_config(params: dict[str, Any], rng: int) -> RunConfig:
    """The resolved RunConfig of one grid point and seed (the same in the client and a worker);
    limits and the endpoint are taken from ``params`` when given (a worker's run)."""
    config = {k: params[k] for k in CONFIG_PARAMS if k in params and params[k] is not None}
    extra = {k: params[k] for k in LIMITS if k in params and params[k] is not None}
    arch_params = {k: v for k, v in params.items() if k not in CONFIG_PARAMS and k not in LIMITS}
    resolved = RunConfig(**config, **extra, rng=rng, arch_params=arch_params).resolved()
    return resolved.model_copy(update={"arch_params": typed_values(resolved.arch, resolved.arch_params)})


def run_id_of(config: RunConfig) -> str:
    """A run's name: a hash of everything that determines it, so a changed grid never reuses a
    finished run by mistake and an unchanged one always finds it."""
    # Limits and the endpoint do not change what a completed run recorded: raising a budget
    # continues the same run (its calls so far come from the tape for free).
    # The scenario counts by its content, not its name or path: an edited file is a different run, the
    # same file named from another folder (or copied) the same one.
    scenario = hashlib.sha256(scenario_path(config.scenario).read_bytes()).hexdigest()
    canonical = json.dumps({**config.model_dump(exclude=NOT_IDENTITY | {"scenario"}), "scenario_content": scenario},
                           sort_keys=True, default=str)
    return "run-" + hashlib.sha256(canonical.encode()).hexdigest()[:12]


def run_status(run_dir: Path) -> str | None:
    """The recorded status of a run directory, or None if it holds no finished run."""
    try:
        return json.loads((run_dir / "config.json").read_text())["status"]
    except (OSError, ValueError, KeyError):
        return None


def is_done(sweep_dir: str | Path, run_id: str) -> bool:
    return run_status(Path(sweep_dir) / RUNS / run_id) == "completed"


# --- the tape shared by a sweep's runs ------------------------------------------------------------
CLAIMS = ".claims"  # SWEEP_DIR/.claims/KEY: a call one of the sweep's runs is making now
WAIT_NOTE_S = 30.0  # a wait for another run's call is said every this many seconds
TAKING = ".taking-"  # a claim being written, under a name of its own (``_take``)
UNREADABLE_STALE_S = 5.0  # an empty or unreadable claim this old was left by a process killed writing it


def _claimer(claim: Path) -> tuple[str, str] | None:
    """(host, pid) written in a claim file; None when it is gone, empty or unreadable."""
    try:
        host, pid = claim.read_text().split()
    except (OSError, ValueError):
        return None
    return host, pid


def _holder(claim: Path) -> str:
    if (claimer := _claimer(claim)) is None:
        return "its claim is gone"
    host, pid = claimer
    return f"process {pid}" + ("" if host == socket.gethostname() else f" on {host}")
class SharedTape(Tape):
    """The sweep's tape file, shared by concurrent runs (processes, Dask workers on one disk).

    A lookup that misses, or finds only a failure, re-reads what other runs appended since, so a
    call another replicate already made is not made again; appends are locked (``tape.append_line``). The keys a run
    used are kept, to give its run directory a tape of its own.
    """

    def __init__(self, path: str | Path) -> None:
        self._offset = 0
        # key -> the record this run took (its own answer, or one another run recorded), in order: its
        # run directory's tape; what another run records for the key later does not change it
        self.used: dict[str, TapeRecord] = {}
        self._refresh_lock = threading.Lock()
        super().__init__(path)

    def _load(self, path: Path) -> None:
        self._refresh()

    def _refresh(self) -> None:
        if self.path is None or not self.path.exists():
            return
        with self._refresh_lock:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
            end = chunk.rfind(b"\n") + 1  # a line still being written is read next time
            for line in chunk[:end].decode("utf-8", errors="replace").split("\n"):  # not splitlines(): U+2028
                if not line.strip():
                    continue
                try:
                    record = record_of(line)
                except (ValueError, TypeError):
                    log.warning("%s: skipping a torn tape line (a run killed while writing)", self.path)
                    continue
                self._keep(record)  # the first answer wins; an answer replaces a recorded error
            self._offset += end

    def get(self, key: str) -> TapeRecord | None:
        if answered(taken := self.used.get(key)):
            return taken
        record = super().get(key)
        if not answered(record):  # none yet, or a failure (an outage's) that another run may have answered since
            self._refresh()
            record = super().get(key)
        if record is not None:
            self.used[key] = record
        return record

    def add(self, record: TapeRecord) -> None:
        super().add(record)
        self.used[record.key] = record  # this run's answer, even where another run's was kept first

    @contextlib.asynccontextmanager
    async def claim(self, key: str, stale_after_s: float = 600.0) -> AsyncIterator[TapeRecord | None]:
        """One run at a time asks a given call: the first to create ``.claims/KEY`` makes it; the
        others poll the tape until its answer is there (yielded to them: a free tape hit) or the
        claim is gone without one (the claimer failed, or stopped: then they claim it). A claim
        whose process has died on this host, or older than ``stale_after_s``, is taken over."""
        claim = self.path.parent / CLAIMS / key
        pause, started, said = 0.02, time.monotonic(), 0.0
        while True:
            record = self.get(key)
            if answered(record):
                yield record
                return
            try:
                _take(claim)
            except FileNotFoundError:  # no folder yet, or a finishing sweep just removed it
                claim.parent.mkdir(exist_ok=True)
                continue
            except FileExistsError:
                judged = _identity(claim)
                if _stale(claim, stale_after_s):
                    _take_over(claim, judged)
                    continue
                waited = time.monotonic() - started
                if waited - said >= WAIT_NOTE_S:  # a claimer stopped (Ctrl-Z) or slow: not a silent hang
                    said = waited
                    log.warning("waiting %.0f s for a call another run of this sweep is making (%s); it is "
                                "taken over when that process ends or after %.0f s", waited, _holder(claim),
                                stale_after_s)
                await asyncio.sleep(pause)
                pause = min(pause * 1.5, 0.5)
                continue
            break
        try:
            record = self.get(key)  # answered between the look above and the claim
            yield record if answered(record) else None
        finally:
            claim.unlink(missing_ok=True)

    def write_used(self, path: Path) -> None:
        target = Tape(path)
        for record in self.used.values():
            target.add(record)


def _take(claim: Path) -> None:
    """Create ``claim`` holding this process's host and pid, or raise FileExistsError. It is written
    under a name of its own first and then linked to its name, so no one ever reads it empty (a
    process killed between creating and writing it left an empty claim that no one took over)."""
    claimer = f"{socket.gethostname()} {os.getpid()}\n"
    fd, taking = tempfile.mkstemp(dir=claim.parent, prefix=TAKING)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(claimer)
        try:
            os.link(taking, claim)  # fails if the claim exists, as O_EXCL does, on NFS too
        except (FileExistsError, FileNotFoundError):
            raise
        except OSError:  # a file system without hard links (FAT, some shares): created, then written
            with os.fdopen(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY), "w") as fh:
                fh.write(claimer)
    finally:
        os.unlink(taking)


def _identity(claim: Path) -> tuple[int, int] | None:
    try:
        found = claim.stat()
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns


def _take_over(claim: Path, judged: tuple[int, int] | None) -> None:
    """Remove the stale claim that was judged, and only it: moved aside first (of two processes
    that both judged it stale, one moves it; the other finds it gone), then checked to be the
    one judged. Unlinking it by name removed, for the slower of the two, the fresh claim the other
    had just made in its place, and the call was made twice."""
    aside = claim.with_name(f"{TAKING}stale-{os.getpid()}-{threading.get_ident()}")
    try:
        os.rename(claim, aside)
    except FileNotFoundError:
        return
    if _identity(aside) != judged:  # a fresh claim made since: back under its name
        try:
            os.link(aside, claim)
        except FileExistsError:
            pass
        except OSError:  # no hard links on this file system (as in _take): moved back unless taken again
            if not claim.exists():
                os.rename(aside, claim)
    aside.unlink(missing_ok=True)


def release_claims(sweep_dir: Path) -> None:
    """After Ctrl-C: the claims of this process and of dead ones are let go (a cancelled call may
    not reach its own release), so none is left for the next command to take over. A dead one's is
    taken over as in a claim (:func:`_take_over`): a run that claimed the call afresh meanwhile keeps it."""
    for claim in (sweep_dir / CLAIMS).glob("*"):
        judged = _identity(claim)
        if _claimer(claim) == (socket.gethostname(), str(os.getpid())):
            claim.unlink(missing_ok=True)
        elif _stale(claim, float("inf")):
            _take_over(claim, judged)


def _stale(claim: Path, stale_after_s: float) -> bool:
    """A claim left by a run that will not answer it: its process on this host is gone (killed),
    or it is older than any call can take (a process on another Dask host)."""
    claimer = _claimer(claim)
    try:
        age = time.time() - claim.stat().st_mtime
    except OSError:  # gone already
        return False
    if claimer is None:  # empty or unreadable: never so since _take, but an older version wrote the
        return age > UNREADABLE_STALE_S  # pid after creating the file; a few seconds is ample for that
    host, pid = claimer
    if age > stale_after_s:
        return True
    if host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, ValueError):
        return False
    return False


# --- the model Mesa's batch_run builds ----------------------------------------------------------
class SweepModel(SocietyModel):
    """A SocietyModel that writes its own run directory into a sweep when it finishes.

    ``mesa.batch_run(SweepModel, parameters={..., "sweep_dir": [DIR]}, rng=[...])`` runs a sweep;
    a run already done in DIR builds no society and stops at once. Such a run of the user's own (no
    ``command``) is refused a bad parameter, an unknown model or an unpriced ``max_cost`` when it is built,
    as ``socialsim sweep`` refuses its grid; a model that does not answer stops its run (the status in its
    run directory says so), and a deployments file's dead deployments are not left out.
    """

    def __init__(self, scenario: str = "hobbs-cafe", *, sweep_dir: str, rng: Any = None,
                 max_cost: float | None = None, max_calls: int | None = None, api_base: str | None = None,
                 max_concurrency: int = DEFAULT_CONCURRENCY, rpm: float | None = None, tpm: float | None = None,
                 price: tuple[float, float] | None = None, deployments: str | None = None,
                 replicate_seed: int | None = None, pool_parent: int | None = None,
                 command: str | None = None, deployments_left_out: tuple[int, ...] = (),
                 deployments_checked: str | None = None, **params: Any) -> None:
        if pool_parent is not None:  # a worker of run_local's process pool
            _stop_with(pool_parent)
        self.pool_parent = pool_parent
        self.command = command  # the sweep command that started this run (None: a batch_run of the user's own)
        rng = replicate_seed if replicate_seed is not None else rng  # the seed, when the grid hands it (run_local)
        params = {"scenario": scenario, **params}
        extra = {"max_cost": max_cost, "max_calls": max_calls, "api_base": api_base, "max_concurrency": max_concurrency,
                 "rpm": rpm, "tpm": tpm, "price": price, "deployments": deployments}
        self.run_config = run_config({**params, **extra}, rng)
        self.run_id = run_id_of(self.run_config)
        self.sweep_dir = Path(sweep_dir)
        self.deployments_to_check = False
        if is_done(self.sweep_dir, self.run_id):
            Model.__init__(self, rng=rng)
            self.datacollector = DataCollector()
            self.running = False
            return
        cfg = self.run_config
        self.tape = SharedTape(self.sweep_dir / "tape.jsonl")
        routes = RouteTable(cfg.model, dict(cfg.routes))
        gateway = Gateway(routes, self.tape, Ledger(Budget(cfg.max_cost, cfg.max_calls)), **call_settings(cfg))
        gateway.deployments_left_out = frozenset(deployments_left_out)  # found down by the sweep's check (check_grid)
        self.notes = [n for m in sorted(routes.models()) if (n := engine_note(m))]
        self.recorded_through = earlier_attempt_through(self.sweep_dir / RUNS / self.run_id)
        super().__init__(cfg.scenario, arch=cfg.arch, gateway=gateway, rng=cfg.rng, **cfg.arch_params)
        if command is None:  # a batch_run of the user's own: no sweep command checked its grid (check_grid)
            _check_own_run(cfg, gateway.models())
        # the deployments file is not the one the sweep checked (``deployments_checked``: its model_list's
        # fingerprint): edited since, the places found down may be other deployments; checked again at step 1,
        # whose check replaces the places before the run's first call (nothing calls before step 1)
        if deployments_checked is not None and gateway.deployments is not None \
                and gateway.deployments.fingerprint != deployments_checked:
            self.deployments_to_check = True

    def step(self) -> None:
        _exit_if_orphaned(self.pool_parent)
        if self.command is not None and not _still_running(self.sweep_dir, self.command):
            # its command was stopped (Ctrl-C, SIGTERM) or another took the folder over: a Dask worker's run,
            # which nothing interrupts, went on paying calls and finishing runs behind the command's back
            log.warning("run %s stops: the sweep command that started it has stopped", self.run_id)
            self.running = False
            return
        try:
            if self.deployments_to_check:  # in here: all of a model's deployments down is this run's failure
                self.deployments_to_check = False
                self.llm.deployments_left_out = _deployments_down(self.llm, self.run_config, self.run_id)
            super().step()
        except BudgetExhausted as exc:
            self.finish(f"stopped by budget: {exc}")
            return
        except ProviderOutage as exc:  # as a single run words it; the same sweep command retries the run
            self.finish(f"stopped by provider outage: {exc}")
            return
        except Exception as exc:  # one broken run must not end a sweep of hundreds; it is recorded
            log.exception("run %s failed at step %s", self.run_id, self.steps)
            self.finish(f"failed: {type(exc).__name__}: {exc}")
            return
        if self.recorded_through is not None and off_tape_told(
                self, self.recorded_through, f"run {self.run_id}, going on from its first attempt,"):
            self.recorded_through = None  # said once (as a resumed single run says it), or no longer to be told
        if self.steps >= self.run_config.steps:
            self.finish("completed")

    def finish(self, status: str) -> Path:
        """Write the run directory next to its final place, then rename it there in one step: the
        same directory a single run writes, its report and end-of-run measurements (a judge's
        questionnaire, embeddings) included, which a stop inside them leaves to be redone; only the
        report's figures are not drawn."""
        _exit_if_orphaned(self.pool_parent)  # a step may end long after its sweep died
        self.running = False
        runs = self.sweep_dir / RUNS
        partial = runs / f"{PARTIAL}{self.run_id}-{os.getpid()}-{threading.get_ident()}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        save(self, partial, self.run_config, status, self.notes)
        keep_scenario(partial, self.run_config.scenario)  # replayable from any folder
        if status == "completed":  # a run stopped short is measured when it is done
            from socialsim.metrics.report import without_figures

            with without_figures():  # drawing was four fifths of a short rules run's time
                report_run(self, partial, self.run_config, status, self.notes,
                           go_on="everything recorded so far is saved; the same sweep command goes on from it")
        meta = json.loads((partial / "config.json").read_text())
        meta["run_id"] = self.run_id
        (partial / "config.json").write_text(redacted_json(meta, indent=2))
        self.tape.write_used(partial / "tape.jsonl")
        final = runs / self.run_id
        with _one_finisher(self.sweep_dir):
            if run_status(final) == "completed":  # by another process meanwhile (a killed sweep's worker)
                shutil.rmtree(partial)
                return final
            if final.exists():  # an earlier attempt that did not complete
                shutil.rmtree(final)
            os.rename(partial, final)
        return final


_DOWN: dict[tuple[str, frozenset[str]], frozenset[int]] = {}  # (model_list, models) -> places found down


def _check_own_run(config: RunConfig, models: set[str]) -> None:
    """What a run of a user's own ``mesa.batch_run(SweepModel, ...)`` is refused before step 1, asking no
    model: one no engine knows (an actor's or a judge's; it failed call after call), and a ``max_cost``
    on a model with no price (its calls were counted at $0, so the budget never stopped the run).
    Whether they answer is not asked here: that is a call each run makes, where the sweep command asks
    once before its first run (``check_grid``), and leaves out the deployments found down."""
    from socialsim.llm.engines import check_model_names
    from socialsim.model.runner import check_priced

    check_model_names(models)
    if config.max_cost is not None:
        check_priced(config, models, budget="max_cost=", price="price=(IN, OUT)")


def _deployments_down(gateway: Gateway, config: RunConfig, run_id: str) -> frozenset[int]:
    """The places of the deployments that do not answer in a deployments file edited since the sweep's
    check before its first run, checked as a single run checks its own before step 1; once a process
    and file version (a pool's or Dask's worker runs many runs)."""
    from socialsim.llm.engines import check_models

    deployments = gateway.deployments
    models = frozenset(m for m in gateway.models() if deployments.serves(m))
    key = (deployments.fingerprint, models)
    if key not in _DOWN:
        log.warning("%s is not the one the sweep checked before its first run (edited since): run %s checks its "
                    "deployments again and leaves out those that do not answer", deployments.path, run_id)
        _DOWN[key] = check_models(set(models), api_base=config.api_base, timeout_s=config.timeout_s,
                                  num_retries=config.num_retries, deployments=deployments) if models else frozenset()
    return _DOWN[key]


def earlier_attempt_through(run_dir: Path) -> int | None:
    """The last step an earlier attempt at a sweep's run (stopped by its budget, an outage or an
    error, its directory kept under runs/) made calls in; None for a run not tried before. The same
    sweep command goes on from the shared tape, so a step up to it that asks a call the tape lacks
    means the code, the scenario or the settings changed since (``runner.off_tape_told``)."""
    tape = run_dir / "tape.jsonl"
    try:
        return Tape(tape).last_step() if tape.is_file() else None
    except (OSError, ValueError) as exc:  # a damaged copy: the check only advises; the run goes on from the shared tape
        log.warning("%s: cannot read it (%s), so whether this run still follows its first attempt is not checked",
                    tape, exc)
        return None


@contextlib.contextmanager
def _one_finisher(sweep_dir: Path) -> Iterator[None]:
    """One process at a time moves a run directory into ``runs/``: two finishing one run (a killed
    sweep's worker and the sweep started again) replaced each other's folder, or failed renaming
    onto one being replaced."""
    if fcntl is None:
        yield
        return
    with open(sweep_dir / FINISHING, "a") as handle:  # never removed: a lock file removed may be locked twice
        fcntl.flock(handle, fcntl.LOCK_EX)  # let go when the file is closed
        yield


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _stop_with(parent: int) -> None:
    """A pool worker stops when the sweep process that started it dies (``kill -9`` of it alone):
    left running, it went on paying calls and finishing runs, and renamed them over the folders of
    the sweep started again. On Linux the kernel sends it SIGTERM, which ends it at once (Mesa starts
    workers with "spawn": they run none of our signal handlers), as the pool's own terminate does;
    elsewhere, or if the sweep died before this, it stops at its next step (``_exit_if_orphaned``)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    _exit_if_orphaned(parent)


def _still_running(sweep_dir: Path, command: str) -> bool:
    try:
        return (sweep_dir / COMMAND).read_text() == command
    except OSError:
        return False


def stop_runs(sweep_dir: Path) -> None:
    """The runs of the sweep command in ``sweep_dir`` stop at their next step (``SweepModel.step``)."""
    (sweep_dir / COMMAND).unlink(missing_ok=True)


def _exit_if_orphaned(parent: int | None) -> None:
    """End this worker if ``parent``, the sweep process that started it, is gone (it is then the
    child of another process)."""
    if parent is not None and os.getppid() != parent:
        raise SystemExit(f"socialsim: the sweep (process {parent}) that started this worker is gone; stopping")


# --- planning and running -----------------------------------------------------------------------
@dataclass
class PlannedRun:
    run_id: str
    replicate: int
    rng: int
    params: dict[str, Any]  # the grid point, as written in the sweep
    config: RunConfig

    def kwargs(self, sweep_dir: Path, spec: SweepSpec, command: str | None = None,
               left_out: frozenset[int] = frozenset(), checked: str | None = None,
               processes: int = 1) -> dict[str, Any]:
        """The SweepModel keyword arguments of this run (without rng)."""
        return {**self.params, "model": self.config.model,
                **sweep_settings(sweep_dir, spec, command, left_out, checked, processes)}


def sweep_settings(sweep_dir: Path, spec: SweepSpec, command: str | None, left_out: frozenset[int],
                   checked: str | None, processes: int = 1) -> dict[str, Any]:
    """The SweepModel keyword arguments every run of a sweep shares, as ``run_local``'s grid and a
    Dask task (``PlannedRun.kwargs``) both hand them: limits (rpm and tpm each process's share of
    them, :func:`process_limits`), endpoint, deployments and the places in its file of those found
    down (a sorted tuple: one value of batch_run's grid, the same in every process), the command its
    runs follow."""
    rpm, tpm = process_limits(spec, processes)
    return {"sweep_dir": str(sweep_dir), "max_cost": spec.max_cost, "max_calls": spec.max_calls,
            "api_base": spec.api_base, "max_concurrency": spec.max_concurrency, "rpm": rpm, "tpm": tpm,
            "price": spec.price, "deployments": spec.deployments, "command": command,
            "deployments_left_out": tuple(sorted(left_out)), "deployments_checked": checked}


def process_limits(spec: SweepSpec, processes: int) -> tuple[float | None, float | None]:
    """The rpm and tpm each of a sweep's ``processes`` worker processes keeps to: the sweep file's
    shared out evenly. A limiter is one per model and process (``llm/limiter.py``), so N processes
    each given the whole quota made N times it together; the runs of one process share its part."""
    return tuple(None if limit is None else limit / processes for limit in (spec.rpm, spec.tpm))


@dataclass
class SweepResult:
    sweep_dir: Path
    runs: pd.DataFrame  # one row per planned run: parameters, status, usage, final outcomes
    executed: list[str] = field(default_factory=list)  # run ids run by this call
    skipped: list[str] = field(default_factory=list)  # run ids already done before it
    figure_problems: list[str] = field(default_factory=list)  # figures not drawn and why, or drawn pooling runs

    @property
    def failed(self) -> pd.DataFrame:
        return self.runs[self.runs["status"] != "completed"]


def plan(spec: SweepSpec) -> list[PlannedRun]:
    """Every run of the sweep, replicate by replicate, in grid order."""
    model = {"model": default_model(None)}  # resolved once here, so workers do not read their own env
    planned = []
    for replicate, seed in enumerate(spec.seed_list()):
        for params in spec.combinations():
            config = run_config({**model, **params}, seed)  # its identity: limits are not part of it
            planned.append(PlannedRun(run_id_of(config), replicate, seed, params, config))
    return planned


def sweep(
    spec: SweepSpec | dict[str, Any] | str | Path,
    out: str | Path | None = None,
    *,
    processes: int | None = None,
    cluster: str | None = None,
    scheduler: str | None = None,
    client: Any = None,
    progress: bool = True,
    preflight: bool = True,
    figures: bool = True,
) -> SweepResult:
    """Run a sweep (a sweep file, a mapping or a SweepSpec) into ``out`` and return its runs.

    Local by default (``processes`` from the argument or the sweep file); ``cluster="local"``
    starts a Dask LocalCluster, ``scheduler="tcp://host:port"`` or ``client=`` uses an existing
    Dask cluster, whose workers must see ``out`` at the same path (a shared disk).
    """
    if isinstance(spec, str | Path):
        spec = load_sweep(spec)
    else:
        spec = validate_sweep(spec)
    sweep_dir = Path(out) if out else Path("sweeps") / spec.name
    if why := not_for_a_batch(sweep_dir, "sweep"):
        raise ValueError(why)
    made = [p for p in (sweep_dir, *sweep_dir.parents) if not p.exists()]  # the folders this call makes
    (sweep_dir / RUNS).mkdir(parents=True, exist_ok=True)
    # one command at a time in a folder: a second one would remove the first's partial runs, rename over
    # its finished ones and count its calls as its own
    try:
        with writing(sweep_dir):
            return _sweep_in(spec, sweep_dir, processes=processes, cluster=cluster, scheduler=scheduler,
                             client=client, progress=progress, preflight=preflight, figures=figures)
    except Exception:
        _unmake(made)
        raise


def _unmake(made: list[Path]) -> None:
    """Take away the folders a refused sweep made (a grid point that cannot be built, a model that
    cannot be reached), as long as nothing was written in them: a refused scenario left an empty
    sweep folder behind, which the next ``socialsim sweep`` would take for its own."""
    if not made:
        return
    with contextlib.suppress(OSError):  # a folder something was written in stays
        (made[0] / RUNS).rmdir()
        (made[0] / LOCK).unlink(missing_ok=True)
        for folder in made:  # innermost first; rmdir refuses a folder that is not empty
            folder.rmdir()


def _sweep_in(spec: SweepSpec, sweep_dir: Path, *, processes: int | None, cluster: str | None,
              scheduler: str | None, client: Any, progress: bool, preflight: bool, figures: bool) -> SweepResult:
    """``sweep``'s work, in a folder this process holds."""
    for stale in (sweep_dir / RUNS).glob(f"{PARTIAL}*"):  # left by a killed run; never a result
        shutil.rmtree(stale, ignore_errors=True)
    planned = plan(spec)
    ids = [p.run_id for p in planned]
    if len(set(ids)) != len(ids):
        first = {}  # run id -> the grid point that gave it first
        for p in planned:
            if (seen := first.setdefault(p.run_id, p)) is not p:
                points = [", ".join(f"{k}={encode(v)}" for k, v in q.params.items()) for q in (seen, p)]
                raise ValueError(f"two grid points resolve to the same run ({points[0]} and {points[1]}: a value "
                                 "listed twice, a parameter equal to its default listed beside it, or two scenario "
                                 "files of the same content); remove the duplicate values")
    skipped = [p.run_id for p in planned if is_done(sweep_dir, p.run_id)]
    # the deployments found down before the first run: every run leaves them out, as a single run does
    # (and which model_list they are places in: a run reading the file edited since checks it again)
    workers = processes or spec.processes
    quota = [name for name in ("rpm", "tpm") if getattr(spec, name) is not None]
    if (scheduler or client is not None) and quota:
        raise SweepFileError(f"{spec.source}: {', '.join(quota)}: a quota is kept by each process's limiter, and the workers "
                             "of a Dask scheduler are not known to the sweep (how many, how many threads), so it "
                             "cannot share the quota out among them; run it with --cluster local or processes")
    left_out, checked = (check_grid(planned, spec, done=set(skipped), processes=workers) if preflight
                         else (frozenset(), None))
    # run_ids: the runs of this grid, so an export leaves out those of an earlier grid in the same folder;
    # written once the grid is accepted: a refused edit left the folder exporting none of its runs
    (sweep_dir / SWEEP_FILE).write_text(redacted_json(
        {**spec.model_dump(), "swept": spec.swept(), "seed_list": spec.seed_list(), "run_ids": ids}, indent=2))
    command = f"{socket.gethostname()} {os.getpid()} {time.time_ns()}"
    (sweep_dir / COMMAND).write_text(command)
    try:
        if cluster or scheduler or client is not None:
            from socialsim.batch.dask_backend import run_on_dask

            run_on_dask(planned, spec, sweep_dir, set(skipped), cluster=cluster, scheduler=scheduler, client=client,
                        processes=workers, progress=progress, command=command, left_out=left_out, checked=checked)
        else:
            run_local(spec, sweep_dir, workers, progress, _max_steps(planned), command, left_out, checked)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM: the runs table says what is done; the same command goes on
        stop_runs(sweep_dir)
        release_claims(sweep_dir)
        write_table(summarize(sweep_dir, planned), sweep_dir / "runs")
        raise
    finally:
        stop_runs(sweep_dir)
    with contextlib.suppress(OSError):  # empty unless another sweep of this folder is still asking
        (sweep_dir / CLAIMS).rmdir()
    runs = summarize(sweep_dir, planned)
    write_table(runs, sweep_dir / "runs")
    result = SweepResult(sweep_dir, runs, [i for i in ids if i not in set(skipped)], skipped)
    if figures:  # drawn again, and an earlier version's figures taken away
        from socialsim.batch.figures import sweep_figures

        result.figure_problems = sweep_figures(result, spec)
    return result


# Columns of the runs table besides the grid's parameters and the models' reporters (``summarize``).
RUN_COLUMNS = ("run_id", "replicate", "rng", "status", "steps_done", "live_calls", "live_cost_usd", "step")
# A run's settings the runs table has whether or not a parameter sets them (as its config.json resolved them:
# the scenario's default steps, no preset): its length and preset are not otherwise told from the table.
RUN_SETTINGS = ("preset", "steps")


def check_grid(planned: list[PlannedRun], spec: SweepSpec, done: set[str] = frozenset(),
               processes: int = 1) -> tuple[frozenset[int], str | None]:
    """Fail before the first run, naming the sweep file, if a grid point cannot be built (an
    architecture parameter it rejects), a model of a run still to do cannot be reached, or a
    figure asks for an outcome no run records; a sweep should not stop hours in on a typo (a model is
    asked within one process's share of ``rpm``/``tpm``, as its runs will ask it). Returns
    the places in the deployments file of those that did not answer, which the runs leave out, and the
    fingerprint of the file's model_list they are places in (None: no file)."""
    from socialsim.llm.engines import check_models

    asked: dict[str, set[str]] = {}  # grid point -> every model its runs ask (routes' and settings', a judge)
    models: set[str] = set()  # those of the runs still to do
    outcomes: set[str] = set(RUN_COLUMNS) | set(spec.grid())
    for p in planned:
        c = p.config
        key = json.dumps([c.scenario, c.arch, c.arch_params, c.model, c.routes], sort_keys=True, default=str)
        if key not in asked:
            if p.run_id in done and not spec.figures:  # a done run is built only for the outcomes a figure
                continue  # may ask for
            # built with the run's own routes (so a judge that is also an actors' model is refused here),
            # on a dry-run gateway: nothing is asked of any model and no engine is loaded
            dry = Gateway(RouteTable(c.model, dict(c.routes)), ledger=Ledger(), dry_run=True)
            try:
                model = SocietyModel(c.scenario, arch=c.arch, gateway=dry, rng=0, **c.arch_params)
            except (ValueError, TypeError) as exc:
                where = ", ".join(f"{k}={encode(v)}" for k, v in p.params.items())
                raise SweepFileError(f"{spec.source}: parameters: the run with {where} cannot be built: {exc}") from None
            outcomes |= set(model.datacollector.model_reporters) | measured_at_the_end(c.arch)
            asked[key] = model.llm.models()
        if p.run_id not in done:
            models |= asked[key]
    _check_figure_outcomes(spec, outcomes)
    if spec.max_cost is not None:  # a budget needs prices: refused as `socialsim run --max-cost` is
        from socialsim.model.runner import check_priced

        try:
            check_priced(RunConfig(max_cost=spec.max_cost, price=spec.price), models,
                         budget="max_cost: ", price="price: [IN, OUT]")
        except ValueError as exc:
            raise SweepFileError(f"{spec.source}: {exc}") from None
    calls = planned[0].config  # a sweep file sets no timeout or retries: every run has RunConfig's defaults
    deployments = load_deployments(spec.deployments)
    rpm, tpm = process_limits(spec, processes)
    down = check_models(models, api_base=spec.api_base, timeout_s=calls.timeout_s, num_retries=calls.num_retries,
                        deployments=deployments, rpm=rpm, tpm=tpm)
    return down, None if deployments is None else deployments.fingerprint


def measured_at_the_end(arch: str) -> set[str]:
    """The runs table's columns an architecture measures once at a run's end (ASVO's ``separability_*``):
    its ``run_measures`` of a run directory that holds no measurement names them."""
    with tempfile.TemporaryDirectory() as empty:
        return set(run_measures(Path(empty), arch))


def _check_figure_outcomes(spec: SweepSpec, outcomes: set[str]) -> None:
    """Each figure's outcome is a column some run will record, or the sweep file is refused with
    the near ones: "adopton" or "adoption" finds every "adoption[<norm>]" (names are compared
    without their bracket)."""
    for i, figure in enumerate(spec.figures):
        if figure.outcome not in outcomes:
            near = set(difflib.get_close_matches(figure.outcome, {o.split("[")[0] for o in outcomes}, n=1))
            close = sorted(o for o in outcomes if o.split("[")[0] in near)
            raise SweepFileError(f"{spec.source}: figures.{i}.outcome: no run records {figure.outcome!r}"
                                 + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else "")
                                 + f"; the runs record {', '.join(sorted(outcomes))}")


def run_local(spec: SweepSpec, sweep_dir: Path, processes: int, progress: bool, max_steps: int,
              command: str | None = None, left_out: frozenset[int] = frozenset(), checked: str | None = None) -> None:
    """The whole grid through ``mesa.batch_run``: Mesa forms the cartesian product and the
    replicates, runs them in ``processes`` processes and shows the progress bar."""
    from mesa.batchrunner import batch_run

    grid = spec.grid()
    grid["model"] = [default_model(m) for m in grid.get("model", [None])]
    # the seeds are the grid's last (innermost) parameter, not batch_run's rng (its outer loop): the runs
    # a pool starts side by side are then other seeds of one grid point, and a run of the next grid point
    # finds on the shared tape the calls its seed shares with it, instead of making them at the same time
    settings = sweep_settings(sweep_dir, spec, command, left_out, checked, processes)
    parameters = {**grid, **{name: [value] for name, value in settings.items()},
                  **({"pool_parent": [os.getpid()]} if processes > 1 else {}),  # its workers stop if it dies
                  "replicate_seed": spec.seed_list()}
    batch_run(SweepModel, parameters=parameters, rng=[None], max_steps=max_steps,
              number_processes=processes, data_collection_period=-1, display_progress=progress)


def run_one(kwargs: dict[str, Any], rng: int, max_steps: int) -> None:
    """One run through ``mesa.batch_run`` (what a Dask task does); like every run, it writes its
    own run directory, which is where the sweep reads its result."""
    from mesa.batchrunner import batch_run

    batch_run(SweepModel, parameters={k: [v] for k, v in kwargs.items()}, rng=[rng], max_steps=max_steps,
              number_processes=1, data_collection_period=-1, display_progress=False)


def _max_steps(planned: list[PlannedRun]) -> int:
    """batch_run's step limit: the longest run (each SweepModel stops itself at its own length)."""
    return max(p.config.steps for p in planned) + 1


# --- results ------------------------------------------------------------------------------------
def summarize(sweep_dir: Path, planned: list[PlannedRun]) -> pd.DataFrame:
    """One row per planned run: run id, replicate, seed, parameters, status, live usage, and the
    final value of every model reporter (the usage totals among them)."""
    rows = []
    for p in planned:
        run_dir = sweep_dir / RUNS / p.run_id
        row: dict[str, Any] = {"run_id": p.run_id, "replicate": p.replicate, "rng": p.rng}
        typed = p.config.arch_params  # as the run took them ("false" is false), as its export tags them
        row.update({k: encode(v if k in CONFIG_PARAMS else typed.get(k, v)) for k, v in p.params.items()})
        row.update({k: encode(getattr(p.config, k)) for k in RUN_SETTINGS if k not in row})
        tags = set(row)  # a final value named like one is kept beside it, as in the export
        meta = _meta(run_dir)
        row["status"] = meta.get("status", "not run")
        row["steps_done"] = meta.get("steps_done", 0)
        row["live_calls"] = meta.get("live_calls", 0)
        row["live_cost_usd"] = meta.get("live_cost_usd", 0.0)
        model_file = run_dir / "model.parquet"
        if model_file.exists():
            frame = pd.read_parquet(model_file)
            for col, value in last_row(frame).items():
                row.setdefault(f"final_{col}" if col in tags else col, value)
        for col, value in run_measures(run_dir, p.config.arch).items():  # measured at the run's end
            row.setdefault(col, value)
        rows.append(row)
    return pd.DataFrame(rows)


def last_row(frame: pd.DataFrame) -> dict[str, Any]:
    """A run's final model values, each of its column's type (``iloc[-1]`` is one Series: counts
    beside shares came out as floats); none for a frame without rows."""
    return frame.iloc[-1:].to_dict("records")[0] if len(frame) else {}


def run_measures(run_dir: Path, arch: str | None) -> dict[str, Any]:
    """A run's figures measured at its end (its architecture's ``run_measures``: ASVO's
    separability); none for a run that has not measured them or an architecture not installed now."""
    try:
        cls = agent_class(arch) if arch else None
    except ValueError:
        return {}
    return cls.run_measures(run_dir) if cls else {}


def _meta(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return {}


def write_table(df: pd.DataFrame, stem: Path, formats: tuple[str, ...] = ("parquet", "csv")) -> None:
    """Parquet and/or CSV, each written to a temporary name and renamed, so a reader never sees half."""
    writers = {"parquet": lambda p: df.to_parquet(p, index=False), "csv": lambda p: df.to_csv(p, index=False)}
    unknown = set(formats) - set(writers)
    if unknown:
        raise ValueError(f"unknown export format(s) {sorted(unknown)}; expected parquet and/or csv")
    for fmt in formats:
        target = stem.with_name(f"{stem.name}.{fmt}")
        writer = writers[fmt]
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        writer(tmp)
        os.replace(tmp, target)
