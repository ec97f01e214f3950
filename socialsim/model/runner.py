"""Run a scenario into a run directory, replay a run from its tape, resume a stopped run.

A run directory holds: ``config.json`` (no secrets), ``tape.jsonl`` (every LLM call),
``model.parquet`` / ``agents.parquet`` (DataCollector frames), ``tables/*.parquet`` (events,
interactions, architecture tables), ``llm_calls.parquet`` and ``usage.csv`` (accounting),
``run.log``, figures and ``report.md``. ``config.json`` is written before step 1; after every
complete step the new rows are appended under ``parts/`` with a manifest (``model.steplog``), and
the whole frames are written however the run ends (completed, budget stop, Ctrl-C, SIGTERM,
error); the tape is appended call by call, so nothing recorded is lost and a killed run resumes.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from socialsim.agents import agent_class
from socialsim.agents.params import check_params
from socialsim.llm.engines import check_models, engine_note
from socialsim.llm.gateway import (
    DEFAULT_BREAKER,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    ApiBase,
    Gateway,
    ProviderOutage,
    UnitPrice,
    token_cost,
)
from socialsim.llm.ledger import Budget, BudgetExhausted, Ledger
from socialsim.llm.limiter import DEFAULT_CONCURRENCY
from socialsim.llm.redact import RedactingFilter, redact, redacted_json
from socialsim.llm.routing import RouteTable, default_model
from socialsim.llm.tape import Tape, TapeMiss
from socialsim.model.run_dir import SCENARIO_COPY, being_written, recorded_scenario, writing
from socialsim.model.society import SocietyModel
from socialsim.model.steplog import StepLog, consolidate
from socialsim.scenarios.loader import ScenarioError, load_scenario, scenario_path
from socialsim.scenarios.schema import field_problems

log = logging.getLogger("socialsim")


class RunConfig(BaseModel):
    """Everything that determines a run (and nothing secret)."""

    # a misspelt budget must not go unnoticed (max_cost_usd=1); a refusal does not quote what was given
    # (an endpoint with a password in it, whose refusal said why and then quoted it whole)
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    scenario: str = "hobbs-cafe"
    arch: str | None = None
    model: str | None = None
    routes: dict[str, str] = Field(default_factory=dict)
    steps: int | None = Field(default=None, ge=1)
    preset: str | None = None
    rng: int = Field(default=42, ge=0)  # a numpy seed: a whole number >= 0
    max_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    max_calls: int | None = Field(default=None, ge=0)
    max_concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1)
    rpm: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    tpm: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    api_base: ApiBase | None = None  # endpoint for provider models (vLLM, Ollama, a proxy); never a key
    price: UnitPrice | None = None  # USD per 1M (prompt, completion) tokens, for unpriced models
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, allow_inf_nan=False)  # per call attempt
    num_retries: int = Field(default=DEFAULT_RETRIES, ge=0)
    json_schema: bool | None = None  # None: where litellm knows support; True: declared capable
    breaker: int = Field(default=DEFAULT_BREAKER, ge=0)  # live calls failing in a row that stop the run; 0: off
    # a file of several deployments behind model names (litellm's model_list; llm/deployments.py)
    deployments: str | None = None
    arch_params: dict[str, Any] = Field(default_factory=dict)

    def resolved(self, source: str | None = None) -> RunConfig:
        """Fill in the scenario's defaults so the saved config alone reproduces the run
        (``source``: the scenario file to read instead of ``scenario``, e.g. a run's own copy)."""
        scenario = load_scenario(source or self.scenario)
        preset = scenario.presets.get(self.preset, {}) if self.preset else {}
        if self.preset and self.preset not in scenario.presets:
            raise ValueError(f"{scenario.where} has no preset {self.preset!r} "
                             f"(presets: {', '.join(scenario.presets) or 'none'})")
        arch = self.arch or scenario.default_arch
        preset_params = {k: v for k, v in preset.items() if k != "steps"}
        # a scenario file's own mistakes are named with the file and the field they are in
        try:
            agent_class(arch)
        except ValueError as exc:
            if self.arch:  # the user's --arch: said as it is
                raise
            raise ScenarioError(f"{scenario.where}: default_arch: {exc}") from None
        try:
            check_params(arch, preset_params)
        except ValueError as exc:
            raise ScenarioError(f"{scenario.where}: presets.{self.preset}: {exc}") from None
        return self.model_copy(update={
            "arch": arch,
            "model": default_model(self.model),
            "steps": self.steps or preset.get("steps") or scenario.default_steps,
            "arch_params": {**preset_params, **self.arch_params},
        })


@dataclass
class RunResult:
    run_dir: Path
    status: str
    steps_done: int
    model: SocietyModel


def build_model(config: RunConfig, gateway: Gateway, source: str | None = None) -> SocietyModel:
    return SocietyModel(source or config.scenario, arch=config.arch, gateway=gateway, rng=config.rng,
                        **config.arch_params)


def keep_scenario(run_dir: Path, scenario: str | Path) -> None:
    """Copy the scenario file (byte for byte, secrets redacted) into the run directory: once the file it names is
    edited, moved or out of reach (another folder), replay, ``--resume`` and the dashboard build the
    society from this copy (``run_dir.recorded_scenario``)."""
    source = scenario_path(scenario)  # the copy itself, going on from it: written again unchanged
    kept = redact(source.read_bytes().decode("utf-8")).encode("utf-8")  # no secret value; line endings kept
    _write_whole(run_dir / f"{SCENARIO_COPY}{source.suffix}", lambda tmp: tmp.write_bytes(kept))


def run(
    config: RunConfig,
    out: str | Path | None = None,
    *,
    replay_from: str | Path | None = None,
    progress: bool = True,
    preflight: bool = True,
    order_probe: int | None = None,
    cut_short: str | None = None,
    measurement_cut: str | None = None,
) -> RunResult:
    """Run (or, with ``replay_from``, replay) a scenario and write its run directory.

    If ``out`` already holds a tape (a stopped run), its recorded calls are reused for free:
    that is how a run stopped by its budget resumes. ``cut_short``: the status of a recording that
    stopped before its last step, whose replay then skips the end-of-run measurements as it did;
    ``measurement_cut``: the status of one whose end-of-run measurement was stopped, which its replay
    then makes as far as the tape goes.
    """
    replay = replay_from is not None
    source = _scenario_source(config, replay_from if replay else out)
    config = config.resolved(source)
    run_dir = Path(out) if out else new_run_dir(config)
    with contextlib.ExitStack() as held:
        # one writer: two would interleave tapes. A resume reads its tape under the lock: read while
        # another resume of it ran, it lacked that one's later calls, which it then paid for again
        going_on = not replay and (run_dir / "config.json").is_file()  # a resume
        if going_on:
            held.enter_context(writing(run_dir))
        gateway = _gateway(config, Path(replay_from) if replay else run_dir, replay, order_probe)
        held.callback(gateway.close)  # after the end-of-run measurements, which may still ask its models
        # a completed run gone over again (a reproduction rewriting its report) finds every call on its
        # tape: its model need not be reachable, as a replay's need not
        preflight = preflight and not (going_on and _completed_before(run_dir))
        model = _checked_model(config, gateway, source, replay=replay, preflight=preflight,
                               claimed=None if out else run_dir)
        model.run_cut_short = cut_short
        model.measurement_cut = measurement_cut
        if not going_on:
            run_dir.mkdir(parents=True, exist_ok=True)
            held.enter_context(writing(run_dir))
        held.enter_context(_logging_to(run_dir / "run.log"))
        keep_scenario(run_dir, source)
        notes = [n for m in sorted(gateway.routes.models()) if (n := engine_note(m))]  # the actors' engines
        for note in notes:
            log.warning(note)
        status = _step_all(model, run_dir, config, notes, progress, _recorded_through(gateway, replay))
        # a replay has nothing to resume: it is made again, whole, from the recording's tape
        return report_run(model, run_dir, config, status, notes,
                          **({"go_on": "the replay is cut short; the recording is as it was: run the replay again"}
                             if replay else {}))


def _completed_before(run_dir: Path) -> bool:
    """Whether the run directory's config.json says its run completed (False if it cannot be read)."""
    try:
        return json.loads((run_dir / "config.json").read_text(encoding="utf-8")).get("status") == "completed"
    except (OSError, ValueError, AttributeError):
        return False


def _recorded_through(gateway: Gateway, replay: bool) -> int | None:
    """The last step a resumed run's tape holds calls of (None for a new run or a replay): every
    call of the steps before it was recorded, so a resumed run asks them all of its tape."""
    if replay:
        return None
    return gateway.tape.last_step()


def _scenario_source(config: RunConfig, earlier: str | Path | None) -> str:
    """The scenario file to build from: the one the config names, or, going on from a recorded run
    directory (a replay, a resume), the run's own copy once that file was edited or is out of reach."""
    if earlier is None:
        return config.scenario
    source = recorded_scenario(earlier, config.scenario)
    if source != config.scenario:
        log.warning("scenario %s is not what %s recorded (edited, moved or read from another folder): "
                    "using the run's own copy, %s", config.scenario, earlier, source)
    return source


# RunConfig's settings of how calls are made (pace, endpoint, price, timeout, retries, schema, breaker),
# handed to the Gateway under the same names: a run, a sweep's run and a dashboard's Reset all pass these
CALL_SETTINGS = ("max_concurrency", "rpm", "tpm", "api_base", "price", "timeout_s", "num_retries", "json_schema",
                 "breaker", "deployments")


def call_settings(config: RunConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in CALL_SETTINGS}


def _gateway(config: RunConfig, tape_dir: Path, replay: bool, order_probe: int | None) -> Gateway:
    """The run's one gateway: its routes, its tape (the recording's, for a replay), its budget."""
    gateway = Gateway(RouteTable(config.model, dict(config.routes)), Tape(tape_dir / "tape.jsonl"),
                      Ledger(Budget(config.max_cost, config.max_calls)), replay=replay, **call_settings(config))
    if order_probe is not None:
        gateway.order_probe = random.Random(order_probe)
    return gateway


def _checked_model(config: RunConfig, gateway: Gateway, source: str, *, replay: bool, preflight: bool,
                   claimed: Path | None) -> SocietyModel:
    """The society, with everything that can refuse the run checked before anything is written; a
    refusal removes the directory ``claimed`` for it (and an empty ``runs/``)."""
    try:
        model = build_model(config, gateway, source)  # bad parameters ...
        models = gateway.models()  # the routes' and any judge's the architecture's settings name
        if config.max_cost is not None and not replay:
            check_priced(config, models)  # ... a budget that cannot be kept ...
        if preflight and not replay:  # ... an unknown or unreachable model, asked as the run will ask it
            gateway.deployments_left_out = check_models(models, api_base=config.api_base, timeout_s=config.timeout_s,
                                                        num_retries=config.num_retries,
                                                        deployments=gateway.deployments, rpm=config.rpm, tpm=config.tpm)
        return model
    except BaseException:
        if claimed is not None:
            claimed.rmdir()
            with contextlib.suppress(OSError):
                claimed.parent.rmdir()
        raise


def _step_all(model: SocietyModel, run_dir: Path, config: RunConfig, notes: list[str], progress: bool,
              recorded_through: int | None = None) -> str:
    """Step the society, each complete step on disk as it ends; the run's status. A budget or an
    outage stops it cleanly, Ctrl-C too; everything recorded is saved however it ends.
    ``recorded_through``: a resumed run's last recorded step (see :func:`off_tape_told`)."""
    save(model, run_dir, config, "running", notes)  # config.json from the start: a killed run resumes
    step_log = StepLog(run_dir, _tidy)
    status = "completed"
    steps = range(config.steps)
    if progress:
        from tqdm import tqdm

        steps = tqdm(steps, desc=f"{config.scenario} [{config.arch}]", unit="step")
    try:
        for _ in steps:
            try:
                model.step()
            except BudgetExhausted as exc:
                status = f"stopped by budget: {exc}"
                log.warning("%s; everything recorded so far is saved; resume with --resume", status)
                break
            except ProviderOutage as exc:
                status = f"stopped by provider outage: {exc}"
                log.warning("%s; everything recorded so far is saved; resume with --resume "
                            "when the provider is back", status)
                break
            step_log.append_new(new_rows(model, step_log.rows), _steps_done(model))  # every complete step is on disk
            save_meta(model, run_dir, config, "running", notes)
            if recorded_through is not None and off_tape_told(model, recorded_through):
                recorded_through = None  # said once, or no longer to be told
    except KeyboardInterrupt:
        status = "interrupted"
    except TapeMiss as exc:  # a replay whose tape lacks a call: the caller names it (not a bug of the run)
        status = f"failed: {type(exc).__name__}: {exc}"
        raise
    except Exception as exc:  # a bug (ours, or an architecture's): the run is saved, its traceback in run.log
        status = f"failed: {type(exc).__name__}: {exc}"
        log.error("step %d failed (%s: %s); everything recorded so far is saved", _steps_done(model) + 1,
                  type(exc).__name__, exc, exc_info=True)
        raise RunFailed(run_dir, status) from exc
    finally:
        # every step done is not yet "completed": the end-of-run measurements come first (report_run);
        # a kill during them leaves "running", which a replay and --resume read as not measured
        save(model, run_dir, config, "running" if status == "completed" else status, notes)
        step_log.close()
    return status


def off_tape_told(model: SocietyModel, recorded_through: int, subject: str = "this resumed run") -> bool:
    """Say so if a resumed run's step, one its recording completed, made calls its tape did not hold:
    the code, the scenario or the settings differ from the recording's, so the run no longer follows
    it and those calls are paid again. True once said, or once it cannot be told: a call the recording
    failed or got an empty reply to is asked again, and from its new answer the run goes its own way."""
    step = model.steps
    if step >= recorded_through or model.llm.reasked:
        return True
    off_tape = model.llm.off_tape[step]
    if not off_tape:
        return False
    log.warning("step %d made %d call%s the tape did not hold, though the recording went on to step %d: "
                "the code, scenario or settings differ from the recording's, so %s no longer follows it, and "
                "pays for calls it had recorded", step, off_tape, "" if off_tape == 1 else "s", recorded_through,
                subject)
    return True


class RunFailed(RuntimeError):
    """A run stopped by an error in the simulation itself (not a budget, an outage or Ctrl-C):
    what it recorded is saved, the traceback is in its run.log, and ``--resume`` goes on from its
    last complete step once the cause is fixed."""

    def __init__(self, run_dir: Path, status: str) -> None:
        super().__init__(f"{run_dir}: {status}")
        self.run_dir, self.status = run_dir, status


def report_run(model: SocietyModel, run_dir: Path, config: RunConfig, status: str, notes: list[str], *,
               go_on: str = "everything recorded so far is saved; resume with --resume") -> RunResult:
    """Write the report (a single run's, a sweep run's); a measurement it makes after the last step
    (a judge) may stop the run, whose status then says so, and ``go_on`` what to do next."""
    result = RunResult(run_dir, status, _steps_done(model), model)
    if status != "completed":
        model.run_cut_short = model.run_cut_short or status
    recorded = len(model.llm.ledger.rows)
    try:
        result.status = status = write_report(result, notes)  # not "completed" if a judge was stopped
    except KeyboardInterrupt:  # Ctrl-C in an end-of-run measurement: a clean stop, as in a step
        model.measurement_stopped = result.status = status = INTERRUPTED_MEASURING
        log.warning("%s; %s", status, go_on)
    if len(model.llm.ledger.rows) != recorded:
        save(model, run_dir, config, status, notes)  # the report asked a model (e.g. a judge): keep its rows
    else:  # its final status ("running" until measured, or why a measurement stopped): the frames stand
        save_meta(model, run_dir, config, status, notes)
    return result


INTERRUPTED_MEASURING = "interrupted in the end-of-run measurement"


def new_run_dir(config: RunConfig, parent: Path = Path("runs")) -> Path:
    """A new, empty ``runs/SCENARIO-ARCH-TIME``, claimed by creating it: runs started in the same
    second (a shell loop over seeds) each get their own directory (``-2``, ``-3``, ... after the
    first) instead of writing over one another."""
    base = f"{Path(config.scenario).stem}-{config.arch}-{time.strftime('%Y%m%d-%H%M%S')}"
    parent.mkdir(parents=True, exist_ok=True)
    path, n = parent / base, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = parent / f"{base}-{n}"


def check_priced(config: RunConfig, models: set[str], budget: str = "--max-cost ",
                 price: str = "--price IN,OUT") -> None:
    """A budget needs prices: refuse --max-cost when a model the run may ask (its routes' and any
    judge's) has none (before anything is written). ``budget`` and ``price`` name the two settings
    as the user wrote them (a sweep file says ``max_cost: `` and ``price: [IN, OUT]``)."""
    unpriced = sorted(m for m in models if m != "rules" and token_cost(m, 1, 1, config.price) is None)
    if unpriced:
        raise ValueError(f"{budget}{config.max_cost:g} cannot be kept: {', '.join(unpriced)} "
                         f"has no price in litellm's cost map; give {price} (USD per 1M prompt "
                         f"and completion tokens)")


def check_order(run_dir: str | Path, progress: bool = False, probes: tuple[int, ...] = (1, 2)) -> str | None:
    """Replay a run twice more with its concurrent calls finishing in other orders (a random
    pause before each answer); None if every frame and table is the same, else the first
    difference: some phase reads or writes state shared between agents while it runs."""
    run_dir = Path(run_dir)
    for probe in probes:
        result, _ = replay(run_dir, run_dir / f"check-order-{probe}", progress=progress, order_probe=probe)
        difference = first_difference(run_dir, result.run_dir, up_to=result.steps_done)
        if difference:
            return difference
    return None


def recorded_config(data: Any, path: Path) -> RunConfig:
    """The RunConfig a run directory recorded; a setting this version does not know (a file written
    by another version) is named, not a pydantic report."""
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"{path}: not a run configuration this version can read: "
                         + "; ".join(field_problems(exc))) from None


def replay(run_dir: str | Path, out: str | Path | None = None, progress: bool = True,
           order_probe: int | None = None) -> tuple[RunResult, bool]:
    """Re-run a run from its tape with zero LLM calls; returns the result and whether the
    replayed DataCollector frames equal the recorded ones. Ctrl-C goes on to the caller once the
    replay's folder is saved."""
    run_dir = Path(run_dir)
    if pid := being_written(run_dir):
        raise ValueError(f"{run_dir} is being written by another process (pid {pid}): replay it once it has "
                         "finished or been stopped")
    consolidate(run_dir)  # a killed run: its complete steps, from the per-step records
    saved = json.loads((run_dir / "config.json").read_text())
    if recording := saved.get("replay_of"):
        raise ValueError(f"{run_dir} is itself a replay of {recording} and keeps no tape of its own: "
                         f"replay the recording (socialsim replay {recording})")
    config = recorded_config(saved["config"], run_dir / "config.json")
    steps_done = saved.get("steps_done", config.steps)
    if not steps_done:
        raise ValueError(f"{run_dir} completed no step ({saved.get('status', 'status unknown')}): there is nothing "
                         f"to replay; continue it with `socialsim run --resume {run_dir}`")
    status = saved.get("status")
    cut_short = status if steps_done < config.steps else None  # it measured nothing at its end
    measurement_cut = status if not cut_short and status != "completed" else None  # its measurement stopped
    config = config.model_copy(update={"steps": steps_done, "max_cost": None, "max_calls": None})
    result = run(config, out or run_dir / "replay", replay_from=run_dir, progress=progress, order_probe=order_probe,
                 cut_short=cut_short, measurement_cut=measurement_cut)
    if result.steps_done < steps_done or result.status == INTERRUPTED_MEASURING != status:
        raise KeyboardInterrupt  # Ctrl-C or SIGTERM (its folder saved as interrupted): a cut replay compares nothing
    difference = first_difference(run_dir, result.run_dir, up_to=steps_done)
    if difference:
        log.warning("replay differs from the recording: %s", difference)
    return result, difference is None


# Columns that legitimately differ between a recording and its replay.
_REPLAY_VARIANT_COLUMNS = {"llm_calls.parquet": ["live_calls"]}


def recorded_files(run_dir: str | Path) -> list[str]:
    """Every frame and table of a run directory, as paths relative to it, in a fixed order."""
    root = Path(run_dir)
    names = [n for n in ("model.parquet", "agents.parquet", "llm_calls.parquet") if (root / n).exists()]
    return names + sorted(str(p.relative_to(root)) for p in (root / "tables").glob("*.parquet"))


def first_difference(a: str | Path, b: str | Path, up_to: int | None = None) -> str | None:
    """The first difference between two runs' frames and tables (file, row, column, both
    values), or None when every frame and table is equal. ``up_to``: only the rows of steps 1 to
    ``up_to`` (a stopped run's ledger also holds the paid calls of the step it cut short, which its
    replay, of the complete steps, does not make)."""
    a, b = Path(a), Path(b)
    left_files, right_files = recorded_files(a), recorded_files(b)
    if left_files != right_files:
        return f"different files: {sorted(set(left_files) ^ set(right_files))} present in only one run"
    for name in left_files:
        drop = _REPLAY_VARIANT_COLUMNS.get(name, [])
        left, right = (_steps_up_to(pd.read_parquet(d / name).drop(columns=drop, errors="ignore"), up_to)
                       for d in (a, b))
        if list(left.columns) != list(right.columns):
            return f"{name}: columns {list(left.columns)} vs {list(right.columns)}"
        if len(left) != len(right):
            return f"{name}: {len(left)} rows vs {len(right)} rows"
        for col in left.columns:
            l_col, r_col = left[col], right[col]
            # a missing value beside a present one compares as missing (nullable columns), not as equal
            same = (l_col == r_col).fillna(False).astype(bool) | (l_col.isna() & r_col.isna())
            if not bool(same.all()):
                row = int((~same).to_numpy().nonzero()[0][0])
                return f"{name}: row {row}, column {col!r}: {l_col.iloc[row]!r} vs {r_col.iloc[row]!r}"
    return None


def _steps_up_to(frame: pd.DataFrame, up_to: int | None) -> pd.DataFrame:
    step = next((c for c in ("step", "Step") if c in frame.columns), None)
    if up_to is None or step is None:
        return frame
    return frame[frame[step] <= up_to].reset_index(drop=True)


# --- saving -------------------------------------------------------------------------------------
@contextlib.contextmanager
def _logging_to(path: Path) -> Iterator[None]:
    """The run's log file (secrets redacted) for as long as it runs."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("socialsim")
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()


def _tidy(df: pd.DataFrame) -> pd.DataFrame:
    """Parquet-friendly: index as columns, object columns of mixed types as strings."""
    df = df.reset_index() if not isinstance(df.index, pd.RangeIndex) else df.copy()
    for col in df.columns:
        if df[col].dtype == object:
            kinds = {type(v) for v in df[col].dropna()}
            if len(kinds) > 1 or (kinds and not kinds <= {str, bool}):
                df[col] = df[col].map(lambda v: v if v is None else (v if isinstance(v, str) else json.dumps(v, default=str)))
    return df


def _agent_frame(dc) -> pd.DataFrame:
    """The agent frame; before any step, empty with its columns (Mesa would turn the index
    names into two rows of None)."""
    if not any(dc._agent_records.values()):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in ["Step", "AgentID", *dc.agent_reporters]})
    return dc.get_agent_vars_dataframe()


def _write_whole(path: Path, write) -> None:
    """Write ``path`` whole or not at all (a run killed mid-write keeps the previous complete
    file): ``write(tmp)`` fills a temporary file that then replaces it."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    _write_whole(path, lambda tmp: df.to_parquet(tmp, index=False))


def frames(model: SocietyModel) -> dict[str, pd.DataFrame]:
    """Every frame and table of the model, by its path in the run directory (index as columns);
    the ledger in (step, agent, call index) order, so identical runs give identical files. Tables
    keep the order the model wrote them in (their rows must not be in completion order)."""
    dc = model.datacollector
    out = {"model.parquet": dc.get_model_vars_dataframe(), "agents.parquet": _agent_frame(dc)}
    for name in dc.tables:
        out[f"tables/{name}.parquet"] = dc.get_table_dataframe(name)
    out["llm_calls.parquet"] = model.llm.ledger.frame()
    return {name: df.reset_index() if not isinstance(df.index, pd.RangeIndex) else df for name, df in out.items()}


def new_rows(model: SocietyModel, since: dict[str, int]) -> dict[str, pd.DataFrame]:
    """The rows of each of ``frames(model)`` from the ``since[name]``-th on, the same rows and
    columns, built without the rows before: a run appends each step's rows (``StepLog``), and
    building every whole frame after each step took as long as the steps themselves by step 84
    of a rules Hobbs Cafe run, and longer with every step."""
    dc = model.datacollector
    first = {name: since.get(name, 0) for name in ("model.parquet", "agents.parquet", "llm_calls.parquet")}
    out = {"model.parquet": pd.DataFrame({k: v[first["model.parquet"]:] for k, v in dc.model_vars.items()})}
    records = itertools.islice(itertools.chain.from_iterable(dc._agent_records.values()), first["agents.parquet"], None)
    out["agents.parquet"] = pd.DataFrame.from_records(list(records), columns=["Step", "AgentID", *dc.agent_reporters])
    for name, table in dc.tables.items():
        start = since.get(f"tables/{name}.parquet", 0)
        out[f"tables/{name}.parquet"] = pd.DataFrame({column: values[start:] for column, values in table.items()})
    out["llm_calls.parquet"] = model.llm.ledger.frame(first["llm_calls.parquet"])
    return out


def save(model: SocietyModel, run_dir: Path, config: RunConfig, status: str, notes: list[str]) -> None:
    """Write the config and every frame, table and the accounting whole (at the start and however
    the run ends; after each step ``StepLog`` appends the new rows instead)."""
    (run_dir / "tables").mkdir(exist_ok=True)
    recorded = frames(model)
    for name, df in recorded.items():
        _write_parquet(_tidy(df), run_dir / name)
    model.llm.ledger.by_operation(recorded["llm_calls.parquet"]).to_csv(run_dir / "usage.csv", index=False)
    save_meta(model, run_dir, config, status, notes)


def save_meta(model: SocietyModel, run_dir: Path, config: RunConfig, status: str, notes: list[str]) -> None:
    """``config.json``: the configuration (no secrets), status, complete steps and accounting."""
    ledger = model.llm.ledger
    meta = {
        "config": config.model_dump(),
        "status": status,
        "steps_done": _steps_done(model),
        "engine_notes": notes,
        "usage": ledger.totals(),
        "live_calls": ledger.live_calls,
        "live_cost_usd": round(ledger.live_cost, 8),  # what this execution paid (tape hits are free)
        "failures_by_operation": dict(ledger.failures),
        "capped_replies": {"replies": model.llm.capped_replies, "characters_cut": model.llm.capped_chars},
    }
    if model.llm.replay and model.llm.tape.path is not None:  # a check of a recording, with no tape of its own
        meta["replay_of"] = str(model.llm.tape.path.parent)
    text = redacted_json(meta, indent=2)
    _write_whole(run_dir / "config.json", lambda tmp: tmp.write_text(text))


def _steps_done(model: SocietyModel) -> int:
    """Completed steps: those the DataCollector recorded (a step cut short is not one)."""
    return len(model.datacollector.model_vars.get("step", []))


def write_report(result: RunResult, notes: list[str]) -> str:
    """Write the report; returns the run's final status (an end-of-run measurement may stop it)."""
    from socialsim.metrics.report import run_status
    from socialsim.metrics.report import write_report as _write

    _write(result.model, result.run_dir, result.status, notes)
    return run_status(result.model, result.status)
