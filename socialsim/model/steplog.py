"""Append-only records of a running run: each completed step's new rows, and a manifest.

Rewriting every frame after every step costs time that grows with the run (at 100 steps of a
rules Hobbs Café run, saving was half the run). Instead, after each step the rows added to each
frame and table are appended as JSON lines under ``parts/``, then ``parts/manifest.json`` is
replaced (atomically) with the number of complete steps and each file's complete rows. A run that
is killed keeps every complete step: ``consolidate`` rebuilds the frames from the parts, reading
only the rows the manifest marks complete (a torn last line is left out with a warning). However
a run ends, its whole frames are written once and ``parts/`` is removed.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd

log = logging.getLogger("socialsim.records")

PARTS = "parts"
MANIFEST = "manifest.json"


def _part_path(parts: Path, name: str) -> Path:
    """``tables/events.parquet`` -> ``parts/tables__events.jsonl``."""
    return parts / (name.removesuffix(".parquet").replace("/", "__") + ".jsonl")


class StepLog:
    """The per-step appender of one run directory (a new run starts it empty)."""

    def __init__(self, run_dir: Path, tidy: Callable[[pd.DataFrame], pd.DataFrame]) -> None:
        self.parts = Path(run_dir) / PARTS
        self.tidy = tidy
        shutil.rmtree(self.parts, ignore_errors=True)  # parts of an earlier attempt (a resume re-runs)
        self.parts.mkdir(parents=True)
        self.rows: dict[str, int] = {}
        self.columns: dict[str, list[str]] = {}
        self.nullable: dict[str, dict[str, str]] = {}  # nullable integer columns: JSON gives them back as floats

    def append(self, frames: dict[str, pd.DataFrame], steps_done: int) -> None:
        """Append the rows each frame gained since the last call, then mark the step complete."""
        self.append_new({name: frame.iloc[self.rows.get(name, 0):].reset_index(drop=True)
                         for name, frame in frames.items()}, steps_done)

    def append_new(self, new: dict[str, pd.DataFrame], steps_done: int) -> None:
        """Append each frame's rows added since the last call (``new`` holds only those, with all
        the frame's columns), then mark the step complete."""
        for name, tail in new.items():
            if len(tail):
                # Python's own JSON floats, the shortest text that reads back to the same double: pandas'
                # to_json keeps 10 digits, and a killed run rebuilt from them replayed as "not identical"
                text = "".join(json.dumps(row, ensure_ascii=False, default=_plain) + "\n"
                               for row in self.tidy(tail).to_dict("records"))
                with _part_path(self.parts, name).open("a", encoding="utf-8") as out:
                    out.write(text)  # one line a row, each ended by a newline
            self.rows[name] = self.rows.get(name, 0) + len(tail)
            self.columns[name] = [str(c) for c in tail.columns]
            nullable = {str(c): str(t) for c, t in tail.dtypes.items()
                        if isinstance(t, pd.api.extensions.ExtensionDtype) and pd.api.types.is_integer_dtype(t)}
            if nullable:
                self.nullable[name] = nullable
        # the columns too: a table still without rows (ASVO's events) keeps its schema when rebuilt
        manifest = {"steps_done": steps_done, "rows": self.rows, "columns": self.columns, "nullable": self.nullable}
        tmp = self.parts / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=1))
        os.replace(tmp, self.parts / MANIFEST)

    def close(self) -> None:
        """The whole frames are written: the parts are no longer needed."""
        shutil.rmtree(self.parts, ignore_errors=True)


def _plain(value):
    """A cell JSON has no type for: missing (pandas' NA, NaT) as null, anything else as its text."""
    return None if pd.isna(value) is True else str(value)


def has_parts(run_dir: str | Path) -> bool:
    return (Path(run_dir) / PARTS / MANIFEST).is_file()


def read_parts(run_dir: str | Path) -> tuple[dict[str, pd.DataFrame], int]:
    """The frames of a killed run rebuilt from its parts (complete steps only), and their count."""
    parts = Path(run_dir) / PARTS
    manifest = json.loads((parts / MANIFEST).read_text())
    frames: dict[str, pd.DataFrame] = {}
    for name, rows in manifest["rows"].items():
        path = _part_path(parts, name)
        # rows end at "\n" only (not splitlines(): a text may hold U+2028); a torn last row has none
        lines = (path.read_text(encoding="utf-8") if path.is_file() else "").split("\n")
        if lines[-1] == "":
            lines.pop()
        if len(lines) < rows:
            raise ValueError(f"{path}: {len(lines)} lines, but the manifest marks {rows} rows complete")
        extra = len(lines) - rows
        if extra:  # a step cut short, or a torn last line: not part of a complete step
            log.warning("%s: %d line(s) after the last complete step left out", path, extra)
        records = [json.loads(line) for line in lines[:rows]]
        columns = manifest.get("columns", {}).get(name)  # absent in records written before it was kept
        frame = pd.DataFrame.from_records(records, columns=columns if columns and not records else None)
        nullable = {c: t for c, t in manifest.get("nullable", {}).get(name, {}).items() if c in frame.columns}
        frames[name] = frame.astype(nullable) if nullable else frame
    return frames, int(manifest["steps_done"])


def consolidate(run_dir: str | Path) -> int | None:
    """Write a killed run's whole frames from its parts (and remove them); the number of complete
    steps, or None when the run directory has no parts (it ended and wrote its frames) or is being
    written by a live process (its parts are still growing)."""
    from socialsim.model.run_dir import being_written

    run_dir = Path(run_dir)
    if not has_parts(run_dir) or being_written(run_dir):  # a running run's parts are its writer's
        return None
    frames, steps = read_parts(run_dir)
    for name, frame in frames.items():
        path = run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    _count_in_config(run_dir, steps)
    shutil.rmtree(run_dir / PARTS, ignore_errors=True)
    log.warning("%s: rebuilt %d complete step(s) from the per-step records of an interrupted run", run_dir, steps)
    return steps


def _count_in_config(run_dir: Path, steps: int) -> None:
    """config.json's ``steps_done`` raised to the steps rebuilt: a kill between a step's records and
    config.json's update left it one short, and a replay then refused a run with a complete step."""
    path = run_dir / "config.json"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if meta.get("steps_done", 0) < steps:
        meta["steps_done"] = steps
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(meta, indent=2, default=str))
        os.replace(tmp, path)


def frame_reader(run_dir: str | Path) -> Callable[[Path], pd.DataFrame]:
    """A reader of a run directory's frames however it stands: a killed run's per-step records are
    made into its frames first (``consolidate``); a run being written is read from its records,
    which are left in place; a finished run from its Parquet files. A missing file reads empty."""
    from socialsim.model.run_dir import being_written

    run_dir = Path(run_dir)
    writer = being_written(run_dir)
    live = read_parts(run_dir)[0] if writer and has_parts(run_dir) else {}
    if not writer:
        consolidate(run_dir)

    def read(path: Path) -> pd.DataFrame:
        name = Path(path).relative_to(run_dir).as_posix()
        if name in live:
            return live[name]
        return pd.read_parquet(path) if Path(path).is_file() else pd.DataFrame()

    return read
