"""The per-step records of a running run (``model/steplog.py``), without killing a process: each
step's new rows appended, only the rows the manifest marks complete read back, a torn or extra
tail left out with a warning, a missing record named, the frames rebuilt and the parts removed.
(``test_crash_resume.py`` kills real runs; these are the edges it cannot aim at.)"""

import json
import logging

import pandas as pd
import pyarrow.parquet as pq
import pytest

from socialsim.model.steplog import MANIFEST, PARTS, StepLog, consolidate, has_parts, read_parts


def tidy(frame):
    return frame


def grow(steps):
    """The frames a run holds after ``steps`` steps: the model frame grows every step, a table every
    other step, with text that is not ASCII."""
    model = pd.DataFrame({"step": range(1, steps + 1), "rate": [s / 10 for s in range(1, steps + 1)]})
    talk = pd.DataFrame({"step": [s for s in range(1, steps + 1) if s % 2 == 0],
                         "line": [f"café n°{s} — 漢字" for s in range(1, steps + 1) if s % 2 == 0]})
    return {"model.parquet": model, "tables/conversations.parquet": talk}


def logged(run_dir, steps):
    log = StepLog(run_dir, tidy)
    for step in range(1, steps + 1):
        log.append(grow(step), steps_done=step)
    return log


def test_each_step_appends_only_its_new_rows_and_the_manifest_marks_them(tmp_path):
    logged(tmp_path, 3)
    parts = tmp_path / PARTS
    assert json.loads((parts / MANIFEST).read_text()) == {
        "steps_done": 3, "rows": {"model.parquet": 3, "tables/conversations.parquet": 1},
        "columns": {"model.parquet": ["step", "rate"], "tables/conversations.parquet": ["step", "line"]},
        "nullable": {}}  # no nullable integer column
    assert (parts / "model.jsonl").read_text().count("\n") == 3  # one line a row, none repeated or run together
    assert len((parts / "tables__conversations.jsonl").read_text().splitlines()) == 1
    frames, steps = read_parts(tmp_path)
    assert steps == 3
    for name, frame in grow(3).items():
        pd.testing.assert_frame_equal(frames[name], frame)


def test_a_new_step_log_starts_from_nothing(tmp_path):
    logged(tmp_path, 3)
    StepLog(tmp_path, tidy).append(grow(1), steps_done=1)  # a resume re-runs from its own start
    frames, steps = read_parts(tmp_path)
    assert steps == 1 and len(frames["model.parquet"]) == 1


def test_rows_past_the_last_complete_step_are_left_out_with_a_warning_naming_the_file(tmp_path, caplog):
    logged(tmp_path, 2)
    path = tmp_path / PARTS / "model.jsonl"
    with path.open("a", encoding="utf-8") as out:  # step 3 written, then killed before its manifest
        out.write('{"step": 3, "rate": 0.3}\n{"step": 4, "ra')
    with caplog.at_level(logging.WARNING, logger="socialsim.records"):
        frames, steps = read_parts(tmp_path)
    assert steps == 2 and list(frames["model.parquet"]["step"]) == [1, 2]
    assert [r.getMessage() for r in caplog.records] == [f"{path}: 2 line(s) after the last complete step left out"]


def test_a_record_the_manifest_counts_on_but_missing_or_short_is_an_error_naming_it(tmp_path):
    logged(tmp_path, 3)
    path = tmp_path / PARTS / "model.jsonl"
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{path}: 2 lines, but the manifest marks 3 rows complete$"):
        read_parts(tmp_path)
    path.unlink()
    with pytest.raises(ValueError, match=f"^{path}: 0 lines, but the manifest marks 3 rows complete$"):
        read_parts(tmp_path)


def test_consolidate_writes_the_complete_steps_frames_and_removes_the_parts(tmp_path, caplog):
    assert consolidate(tmp_path) is None  # a run that ended wrote its frames: nothing to rebuild
    logged(tmp_path, 4)
    assert has_parts(tmp_path)
    with caplog.at_level(logging.WARNING, logger="socialsim.records"):
        assert consolidate(tmp_path) == 4
    assert not has_parts(tmp_path) and not (tmp_path / PARTS).exists()
    for name, frame in grow(4).items():
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / name), frame)
        assert pq.read_schema(tmp_path / name).names == list(frame.columns)  # no index column for other readers
    assert f"{tmp_path}: rebuilt 4 complete step(s) from the per-step records of an interrupted run" in [
        r.getMessage() for r in caplog.records]


def test_close_removes_the_parts(tmp_path):
    logged(tmp_path, 2).close()
    assert not (tmp_path / PARTS).exists() and not has_parts(tmp_path)


def test_a_table_without_rows_keeps_its_columns_when_rebuilt(tmp_path):
    """A killed ASVO run's events table (no world: no rows) was rebuilt with no columns, so its replay,
    which has them, never matched, and the dashboard and the export lost the table's schema."""
    log = StepLog(tmp_path, tidy)
    empty = pd.DataFrame(columns=["step", "agent", "action"])
    log.append({"tables/events.parquet": empty, **grow(1)}, steps_done=1)
    frames, _ = read_parts(tmp_path)
    assert list(frames["tables/events.parquet"].columns) == ["step", "agent", "action"]
    assert frames["tables/events.parquet"].empty
    consolidate(tmp_path)
    assert pq.read_schema(tmp_path / "tables" / "events.parquet").names == ["step", "agent", "action"]


def test_a_kill_between_a_step_s_records_and_config_json_leaves_the_step_counted(tmp_path):
    """The manifest marked step 2 complete while config.json, written just after, still said 1: the
    rebuilt frames had two steps, and a replay said the run had fewer (or none) to replay."""
    (tmp_path / "config.json").write_text(json.dumps({"config": {"arch": "generic"}, "status": "running",
                                                       "steps_done": 1}))
    logged(tmp_path, 2)
    assert consolidate(tmp_path) == 2
    meta = json.loads((tmp_path / "config.json").read_text())
    assert meta == {"config": {"arch": "generic"}, "status": "running", "steps_done": 2}


def test_a_rebuilt_frame_keeps_every_digit_its_values_and_types(tmp_path):
    """A Gini of 0.123456789012345 came back from the records as 0.1234567890, so a killed run's
    replay said 'not identical' at some kills (pandas' JSON keeps 10 digits)."""
    import math

    frame = pd.DataFrame({"step": [1, 2], "gini": [0.123456789012345, 1 / 3], "big": [2**53 - 1, -(2**40)],
                          "missing": [float("nan"), 2.5e-300], "ok": [True, False], "who": ["Ann", None]})
    log = StepLog(tmp_path, tidy)
    log.append({"model.parquet": frame}, steps_done=2)
    got = read_parts(tmp_path)[0]["model.parquet"]
    assert got["gini"].tolist() == frame["gini"].tolist() and got["big"].tolist() == frame["big"].tolist()
    assert math.isnan(got["missing"][0]) and got["missing"][1] == 2.5e-300
    assert got["ok"].tolist() == [True, False] and got["who"][0] == "Ann" and pd.isna(got["who"][1])
    assert got.dtypes.to_dict() == frame.dtypes.to_dict()
    nullable = pd.DataFrame({"n": pd.array([1, None], dtype="Int64"), "when": [pd.Timestamp("2026-11-27"), pd.NaT]})
    StepLog(tmp_path / "b", tidy).append({"model.parquet": nullable}, steps_done=1)
    rebuilt = read_parts(tmp_path / "b")[0]["model.parquet"]
    assert rebuilt["n"][0] == 1 and pd.isna(rebuilt["n"][1]) and pd.isna(rebuilt["when"][1])
    assert rebuilt["n"].dtype == "Int64"  # not the float JSON's null made it (the ledger's agent column)
    assert rebuilt["when"][0] == "2026-11-27 00:00:00"


@pytest.mark.parametrize("scenario,arch", [("hobbs-cafe", "crsec"), ("school-meso", "asvo"), ("irollan-valley", "itcmas")])
def test_each_steps_new_rows_are_the_tails_of_the_whole_frames_written_alike(tmp_path, scenario, arch):
    """``new_rows`` builds only the rows a step added; the step log writes the same bytes from them
    as from the whole frames (a killed run's rebuilt frames would otherwise differ)."""
    from socialsim.model.runner import _tidy, frames, new_rows
    from socialsim.model.society import SocietyModel

    model = SocietyModel(scenario, arch=arch, model="rules", rng=2)
    whole, tails = StepLog(tmp_path / "whole", _tidy), StepLog(tmp_path / "tails", _tidy)
    for step in range(1, 4):
        model.step()
        whole.append(frames(model), steps_done=step)
        tails.append_new(new_rows(model, tails.rows), steps_done=step)
    written = sorted(p.name for p in (tmp_path / "whole" / PARTS).iterdir())
    assert written == sorted(p.name for p in (tmp_path / "tails" / PARTS).iterdir()) and len(written) > 3
    for name in written:
        assert (tmp_path / "whole" / PARTS / name).read_bytes() == (tmp_path / "tails" / PARTS / name).read_bytes()


def test_a_run_builds_its_whole_frames_only_when_it_saves_them_not_after_each_step(tmp_path, monkeypatch):
    """Each step's rows reach the step log without every whole frame being built again (by step 84 of
    a rules Hobbs Cafe run that took as long as the steps); the whole frames are built to be written at
    the start and at the end."""
    from socialsim.model import runner

    built = []
    monkeypatch.setattr(runner, "frames", lambda model, whole=runner.frames: built.append(model.steps) or whole(model))
    result = runner.run(runner.RunConfig(scenario="hobbs-cafe", model="rules", steps=5, rng=1), tmp_path / "r",
                        progress=False)
    assert result.status == "completed" and result.steps_done == 5
    assert built == [0, 5]  # the save before the first step, the save after the last
