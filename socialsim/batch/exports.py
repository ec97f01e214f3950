"""Exports: a run, sweep or reproduction directory as tidy pandas DataFrames, Parquet and CSV.

``socialsim.export(PATH)`` reads what the runs recorded (their DataCollector frames and tables)
and returns one frame per kind, every row tagged with its run and the run's parameters, the way
``mesa.batch_run`` tags its rows; see ``docs/outputs.md`` for the columns. Nothing is recomputed:
a run's frames are the ones its DataCollector produced. A reproduction's rows are tagged with their
arm too, and its ``summary.csv`` and ``findings.csv`` come along as they were written.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from socialsim.batch.sweepfile import CONFIG_PARAMS, encode
from socialsim.batch.sweeps import RUN_SETTINGS, RUNS, last_row, run_measures, write_table
from socialsim.model.run_dir import SWEEP_FILE
from socialsim.model.runner import _tidy
from socialsim.model.steplog import frame_reader

RUN_COLUMNS = ("run_id", "replicate", "rng")
log = logging.getLogger("socialsim.batch")


@dataclass
class Export:
    """The tidy frames of one run or one sweep."""

    runs: pd.DataFrame  # one row per run: parameters, status, usage, final model reporters
    model: pd.DataFrame  # one row per run x step
    agents: pd.DataFrame  # one row per run x step x agent
    types: pd.DataFrame  # one row per run x step x agent type (numeric agent columns averaged)
    llm_calls: pd.DataFrame  # one row per operation decision (LLM, tape or rule)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # events, interactions, ...
    parameters: list[str] = field(default_factory=list)  # the parameter columns
    reproduction: dict[str, pd.DataFrame] = field(default_factory=dict)  # a reproduction's summary, findings

    def frames(self) -> dict[str, pd.DataFrame]:
        """Every frame by its file name (tables as ``tables/<name>``)."""
        return {"runs": self.runs, "model": self.model, "agents": self.agents, "types": self.types,
                "llm_calls": self.llm_calls, **{f"tables/{k}": v for k, v in self.tables.items()},
                **self.reproduction}


def run_dirs(path: Path, run_ids: list[str] | None = None) -> list[Path]:
    """The finished run directories of a sweep (``.partial-*`` folders are not results); with
    ``run_ids`` (the sweep's latest grid) only those, in the grid's order, leaving out runs of an
    earlier grid that was run into the same folder."""
    root = path / RUNS
    dirs = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")
                  and (d / "config.json").is_file())
    if run_ids is None:  # a sweep folder written before sweep.json listed its runs
        return dirs
    order = {run_id: i for i, run_id in enumerate(run_ids)}  # the grid's order, as the sweep's runs table
    if left_out := [d.name for d in dirs if d.name not in order]:
        log.info("%s: %d run(s) of an earlier grid left out of the export: %s", path, len(left_out),
                 ", ".join(left_out))
    return sorted((d for d in dirs if d.name in order), key=lambda d: order[d.name])


def export(path: str | Path, out: str | Path | None = None, formats: tuple[str, ...] = ("parquet", "csv"),
           write: bool = True) -> Export:
    """Read RUN_DIR, SWEEP_DIR or a reproduction's directory into tidy frames; write them to ``out``
    (default PATH/export), which must not hold a run, a sweep or a reproduction (their own tables
    would be replaced: a sweep's ``runs.parquet``)."""
    path = Path(path)
    if write and out is not None and (why := _not_an_export_folder(Path(out))):
        raise ValueError(why)
    arms: dict[Path, str] = {}  # a reproduction's run directory -> its arm's label
    reproduction: dict[str, pd.DataFrame] = {}
    if (path / RUNS).is_dir():
        sweep_meta = _json(path / SWEEP_FILE)
        dirs = run_dirs(path, sweep_meta.get("run_ids"))
        names = list(sweep_meta.get("parameters", {}))
        if sweep_meta.get("steps") is not None and "steps" not in names:  # steps set for the whole sweep
            names.append("steps")
        seeds = sweep_meta.get("seed_list") or []
    elif (path / "config.json").is_file():
        dirs, seeds = [path], []
        config = _json(path / "config.json").get("config", {})
        names = ["scenario", "arch", "model", *config.get("arch_params", {})]
    elif (path / REPRODUCTION_SUMMARY).is_file():
        dirs, seeds, names, arms = _reproduction_runs(path)
        reproduction = {stem: pd.read_csv(path / f"{stem}.csv") for stem in ("summary", "findings")
                        if (path / f"{stem}.csv").is_file()}
    else:
        raise FileNotFoundError(f"{path}: neither a run directory (config.json), a sweep directory (runs/) "
                                f"nor a reproduction's ({REPRODUCTION_SUMMARY})")

    runs, model, agents, llm, tables = [], [], [], [], {}
    for d in dirs:
        meta = _json(d / "config.json")
        tags = ({"arm": arms[d]} if arms else {}) | _tags(d, meta, names, seeds)
        if arms:  # a reproduction's folders are ARM/seed-K: the seed's folder alone is not unique
            tags["run_id"] = f"{d.parent.name}/{d.name}"
        read = frame_reader(d)  # a killed run's complete steps too (and a running run's so far)
        frame = read(d / "model.parquet")
        model.append(_tag(frame, tags))
        final = last_row(frame)
        measured = run_measures(d, meta.get("config", {}).get("arch"))  # at the run's end (ASVO's separability)
        values = {**final, **{k: v for k, v in measured.items() if k not in final}}  # as the sweep's runs table
        settings = {k: encode(meta.get("config", {}).get(k)) for k in RUN_SETTINGS if k not in tags}
        runs.append({**tags, **settings, "status": _status(d, meta), "steps_done": meta.get("steps_done", 0),
                     "live_calls": meta.get("live_calls", 0), "live_cost_usd": meta.get("live_cost_usd", 0.0),
                     **{(f"final_{k}" if k in tags or k in settings else k): v for k, v in values.items()}})  # never dropped
        ag = read(d / "agents.parquet").rename(columns={"Step": "step", "AgentID": "agent_id"})
        agents.append(_tag(ag.assign(agent_type=meta.get("config", {}).get("arch")), tags))
        # the ledger's `model` is the model that answered each call; `model` the run's default
        llm.append(_tag(read(d / "llm_calls.parquet").rename(columns={"model": "call_model"}), tags))
        if (d / "tables").is_dir():
            for table in sorted((d / "tables").glob("*.parquet")):
                tables.setdefault(table.stem, []).append(_tag(read(table), tags))
    result = Export(
        runs=_tidy(pd.DataFrame(runs)),
        model=_frame(model),
        agents=_frame(agents),
        types=pd.DataFrame(),
        llm_calls=_frame(llm),
        tables={name: _frame(parts) for name, parts in sorted(tables.items())},
        parameters=names,
        reproduction=reproduction,
    )
    keys = ["arm"] if arms else []
    result.types = _types(result.agents, [c for c in result.runs.columns if c in (*keys, *RUN_COLUMNS, *names)])
    if write:
        write_export(result, Path(out) if out else path / "export", formats)
    return result


def write_export(result: Export, out: Path, formats: tuple[str, ...] = ("parquet", "csv")) -> None:
    for name, frame in result.frames().items():
        stem = out / name
        stem.parent.mkdir(parents=True, exist_ok=True)
        write_table(frame, stem, formats)


def read_export(out: str | Path) -> dict[str, pd.DataFrame]:
    """The frames an export wrote, read back from its Parquet files. A folder that is no export is
    refused: a misspelt one read as no frames, and a run or a sweep as its own files mixed with its
    export's (``model`` beside ``export/model``)."""
    out = Path(out)
    if not (out / "runs.parquet").is_file() or (out / SWEEP_FILE).is_file():
        exported = _is_run(out) or any((out / name).is_file() for name in (SWEEP_FILE, REPRODUCTION_SUMMARY))
        raise FileNotFoundError(f"{out} holds no export: " + (
            f"it is a run, a sweep or a reproduction, whose export is {out / 'export'}" if exported else
            "give the folder socialsim.export or `socialsim report` wrote (by default PATH/export)"))
    return {str(p.relative_to(out).with_suffix("")): pd.read_parquet(p) for p in sorted(out.rglob("*.parquet"))}


# --- helpers ------------------------------------------------------------------------------------
REPRODUCTION_SUMMARY = "summary.csv"  # what `socialsim reproduce` writes beside its arms' folders


def _reproduction_runs(path: Path) -> tuple[list[Path], list[int], list[str], dict[Path, str]]:
    """A reproduction's runs (OUT/ARM/seed-K), the seeds, the parameters any of them sets (scenario,
    architecture, model, preset and every architecture parameter) and each run's arm, named by the
    label ``summary.csv`` gives it (the folder is that label made file-safe)."""
    from socialsim.model.run_dir import folder_name

    dirs = sorted(d.parent for d in path.glob("*/seed-*/config.json"))
    configs = [_json(d / "config.json").get("config", {}) for d in dirs]
    seeds = sorted({c.get("rng") for c in configs if c.get("rng") is not None})
    params = sorted({k for c in configs for k in c.get("arch_params", {})})
    labels = pd.read_csv(path / REPRODUCTION_SUMMARY).get("label", pd.Series(dtype=str)).dropna().unique()
    by_folder = {folder_name(str(label)): str(label) for label in labels}
    arms = {d: by_folder.get(d.parent.name, d.parent.name) for d in dirs}
    return dirs, seeds, ["scenario", "arch", "model", "preset", *params], arms


def _status(run_dir: Path, meta: dict[str, Any]) -> str | None:
    """A run's recorded status; "killed" for one still marked running that no process writes (its
    process ended without saving: ``kill -9``, a crash), not "running"."""
    from socialsim.model.run_dir import being_written

    status = meta.get("status")
    return "killed" if status == "running" and not being_written(run_dir) else status


def _not_an_export_folder(out: Path) -> str | None:
    from socialsim.model.run_dir import runs_below

    # an export of a reproduction holds its summary.csv too, beside the runs.parquet no reproduction writes
    exported = (out / "runs.parquet").is_file()
    marks = [name for name in ("config.json", SWEEP_FILE, REPRODUCTION_SUMMARY) if (out / name).is_file()
             and not (exported and name == REPRODUCTION_SUMMARY)]
    if marks or runs_below(out):
        return (f"export out={out} holds a run, a sweep or a reproduction ({', '.join(marks) or 'runs below it'}), "
                "whose tables an export would replace: give a folder of its own")
    # inside one (RUN/tables: its frames would sit among the run's own, and its replay never match),
    # except in the folder an export of it takes by default, PATH/export
    resolved = out.resolve()
    for parent in resolved.parents:  # the nearest run, sweep or reproduction around it decides
        if _is_run(parent) or any((parent / name).is_file() for name in (SWEEP_FILE, REPRODUCTION_SUMMARY)):
            if resolved.relative_to(parent).parts[0] != "export":
                return (f"export out={out} is inside {parent}, a run, a sweep or a reproduction, among whose own "
                        f"files it would write: give a folder outside it, or {parent / 'export'}")
            break
    return None


def _is_run(folder: Path) -> bool:
    """A socialsim run directory (its config.json has the run's config and steps), not any folder
    that happens to hold a config.json."""
    meta = _json(folder / "config.json")
    return "config" in meta and "steps_done" in meta


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _tags(run_dir: Path, meta: dict[str, Any], names: list[str], seeds: list[int]) -> dict[str, Any]:
    """A run's identifying columns: run id, replicate, seed and its parameter values."""
    config = meta.get("config", {})
    rng = config.get("rng")
    tags: dict[str, Any] = {"run_id": meta.get("run_id", run_dir.name),
                            "replicate": seeds.index(rng) if rng in seeds else 0, "rng": rng}
    for name in names:
        value = config.get(name) if name in CONFIG_PARAMS else config.get("arch_params", {}).get(name)
        tags[name] = encode(value)
    return tags


def _tag(frame: pd.DataFrame, tags: dict[str, Any]) -> pd.DataFrame:
    """Prefix a run's frame with its identifying columns (like batch_run's rows). A recorded column
    is never replaced: a parameter named like one (ASVO's ``reflection`` beside the reflections'
    text) is added as ``param_NAME``."""
    tagged = pd.DataFrame({(f"param_{k}" if k in frame.columns else k): [v] * len(frame) for k, v in tags.items()},
                          index=frame.index)
    return pd.concat([tagged, frame], axis=1)


def _frame(parts: list[pd.DataFrame]) -> pd.DataFrame:
    parts = [p for p in parts or [] if len(p.columns)]
    if not parts:
        return pd.DataFrame()
    # a run's part without rows (a table it never wrote to) has float columns: concatenated, it made every
    # run's seed, replicate and whole-number parameters floats; it adds only the columns the others lack
    filled = [p for p in parts if len(p)]
    frame = pd.concat(filled or parts, ignore_index=True)
    for column in (c for p in parts for c in p.columns if c not in frame.columns):
        frame[column] = None
    frame = _tidy(frame)
    # Mesa records an agent frame's Step as a float (model time); steps are whole numbers
    if "step" in frame.columns and pd.api.types.is_float_dtype(frame["step"]):
        steps = frame["step"]
        if steps.notna().all() and (steps == steps.round()).all():
            frame["step"] = steps.astype("int64")
    return frame


def _types(agents: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per run, step and agent type: the number of agents and the mean of each numeric column
    (a boolean's mean is the share of agents for which it holds)."""
    if agents.empty:
        return pd.DataFrame()
    by = [*keys, "step", "agent_type"]
    numeric = [c for c in agents.columns if c not in by and c != "agent_id"
               and (pd.api.types.is_numeric_dtype(agents[c]) or pd.api.types.is_bool_dtype(agents[c]))]
    grouped = agents.groupby(by, sort=True, dropna=False)
    out = grouped.size().rename("n_agents").to_frame()
    if numeric:
        out = out.join(grouped[numeric].mean())
    return out.reset_index()
