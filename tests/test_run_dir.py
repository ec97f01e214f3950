"""A directory that is not a run but holds runs (a reproduction's, a sweep's) gets a message naming
them, from every command that takes a run directory."""

import json
import os
import shutil

import pytest

from socialsim.cli import main
from socialsim.dashboards import server
from socialsim.model.run_dir import not_a_run_dir, runs_below


def _runs(root, *relative):
    for rel in relative:
        (root / rel).mkdir(parents=True)
        (root / rel / "config.json").write_text(json.dumps({"config": {}}))
    return [root / rel for rel in relative]


def test_the_runs_of_a_reproduction_and_of_a_sweep_are_found_and_named(tmp_path):
    repro = _runs(tmp_path / "repro", "full/seed-1", "base/seed-1", "base/seed-2", "ltrha/seed-1")
    (tmp_path / "repro" / "summary.csv").write_text("")
    assert runs_below(tmp_path / "repro") == sorted(repro)
    message = not_a_run_dir(tmp_path / "repro")
    assert message.startswith(f"{tmp_path / 'repro'} is not a run directory (no config.json); it holds 4 runs (")
    assert f"{repro[1]}, {repro[2]}, {repro[0]} and 1 more): give one of them" in message
    sweep = _runs(tmp_path / "sweep", "runs/abc123")
    assert not_a_run_dir(tmp_path / "sweep").endswith(f"it holds 1 run ({sweep[0]}): give one of them")
    three = _runs(tmp_path / "three", "a/seed-1", "a/seed-2", "b/seed-1")  # all named, no "and 0 more"
    assert not_a_run_dir(tmp_path / "three").endswith(f"3 runs ({three[0]}, {three[1]}, {three[2]}): give one of them")
    three_down = _runs(tmp_path / "sweeps", "hobbs/runs/abc")
    assert runs_below(tmp_path / "sweeps") == three_down
    _runs(tmp_path / "deep", "a/b/c/d")  # four levels down: not searched
    assert not_a_run_dir(tmp_path / "deep") == f"{tmp_path / 'deep'} is not a run directory (no config.json)"
    assert runs_below(tmp_path / "nowhere") == []


def test_a_sweeps_run_being_written_is_not_one_of_its_runs(tmp_path):
    """A sweep writes each run in ``runs/.partial-*`` and renames it when done; the dashboard listed
    that folder first, a run that is never a result and is gone (renamed or removed) once opened."""
    done = _runs(tmp_path / "sweep", "runs/run-0bf245a66356")
    _runs(tmp_path / "sweep", "runs/.partial-run-1b335a669fd5-4242-1")
    assert runs_below(tmp_path / "sweep") == done
    assert not_a_run_dir(tmp_path / "sweep").endswith(f"it holds 1 run ({done[0]}): give one of them")
    assert runs_below(tmp_path / "sweep" / "runs") == done


def test_a_run_below_a_hidden_folder_is_not_listed_but_a_folder_inside_a_hidden_one_lists_its_runs(tmp_path):
    """Only a hidden folder below the one looked in is skipped (a run in ``.trash/``, below a
    ``.partial-*``); a sweep kept under ``~/.cache`` is not hidden from itself."""
    sweep = tmp_path / ".cache" / "sweep"
    done = _runs(sweep, "runs/run-0bf245a66356")
    _runs(sweep, ".trash/run-1b335a669fd5", "runs/.partial-x/old/run-9ddfbc4b72f8")
    assert runs_below(sweep) == done


def test_a_runs_own_replays_are_not_runs_of_its_folder(tmp_path):
    """A replay of a reproduction's run (``seed-1/replay``, ``seed-1/check-order-1``) made the
    reproduction refuse its own folder as holding "runs that are not a reproduction's"."""
    from socialsim.model.run_dir import not_for_a_batch

    runs = _runs(tmp_path / "repro", "full/seed-1", "full/seed-2")
    _runs(tmp_path / "repro", "full/seed-1/replay", "full/seed-1/check-order-1", "full/seed-2/replay")
    assert runs_below(tmp_path / "repro") == runs
    assert not_for_a_batch(tmp_path / "repro", "reproduction") is None
    assert runs_below(tmp_path / "repro" / "full" / "seed-1") == [tmp_path / "repro" / "full" / "seed-1" / name
                                                                  for name in ("check-order-1", "replay")]


@pytest.mark.parametrize("argv", [["replay", "{dir}"], ["run", "--resume", "{dir}"]])
def test_replay_and_resume_name_the_runs_inside(argv, tmp_path, capsys):
    (run,) = _runs(tmp_path / "repro", "full/seed-1")
    assert main([a.format(dir=tmp_path / "repro") for a in argv] + ["--no-progress"]) == 2
    assert f"it holds 1 run ({run}): give one of them" in capsys.readouterr().err


def test_the_dashboard_names_the_runs_inside(tmp_path):
    from socialsim.dashboards.session import ReplaySession

    (run,) = _runs(tmp_path / "sweep", "runs/abc")
    with pytest.raises(ValueError, match="it holds 1 run .*: give one of them"):
        server.check_target(str(tmp_path / "sweep"))  # socialsim dashboard FOLDER
    with pytest.raises(FileNotFoundError, match=f"it holds 1 run \\({run}\\): give one of them"):
        ReplaySession(tmp_path / "sweep")  # the page's "Replay a run" card


def test_runs_started_in_the_same_second_each_get_their_own_directory(tmp_path, monkeypatch):
    """A shell loop starting seeds in parallel used to write three runs into one
    ``runs/SCENARIO-ARCH-TIME``: one run's config beside another's frames."""
    from concurrent.futures import ThreadPoolExecutor

    from socialsim.model import runner

    monkeypatch.setattr(runner.time, "strftime", lambda fmt: "20261126-120000")
    config = runner.RunConfig(scenario="hobbs-cafe", model="rules", steps=1).resolved()
    with ThreadPoolExecutor(8) as pool:
        claimed = list(pool.map(lambda _: runner.new_run_dir(config, tmp_path / "runs"), range(8)))
    names = sorted(p.name for p in claimed)
    base = "hobbs-cafe-crsec-20261126-120000"
    assert names == sorted([base] + [f"{base}-{n}" for n in range(2, 9)])
    assert all(p.is_dir() and not any(p.iterdir()) for p in claimed)

    monkeypatch.chdir(tmp_path)
    for path in claimed:
        path.rmdir()
    first, second = (runner.run(config.model_copy(update={"rng": seed}), progress=False).run_dir for seed in (1, 2))
    assert (first.name, second.name) == (base, f"{base}-2")
    assert [json.loads((d / "config.json").read_text())["config"]["rng"] for d in (first, second)] == [1, 2]
    with pytest.raises(ValueError, match="no_such_switch"):  # refused before anything is written ...
        runner.run(config.model_copy(update={"arch_params": {"no_such_switch": 1}}), progress=False)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [base, f"{base}-2"]  # ... and no empty directory
    for path in (first, second):
        shutil.rmtree(path)
    with pytest.raises(ValueError, match="no_such_switch"):
        runner.run(config.model_copy(update={"arch_params": {"no_such_switch": 1}}), progress=False)
    assert not (tmp_path / "runs").exists()  # not even an empty runs/


def test_a_new_run_or_a_replay_is_refused_a_directory_that_holds_a_run(tmp_path, capsys):
    """``--out`` naming an earlier run used to replace it without a word."""
    done, stopped = _runs(tmp_path, "done", "stopped")
    (done / "config.json").write_text(json.dumps({"config": {}, "status": "completed", "steps_done": 6}))
    (stopped / "config.json").write_text(json.dumps({"config": {}, "status": "interrupted", "steps_done": 2}))
    (stopped / "tape.jsonl").write_text("")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    run = ["run", "hobbs-cafe", "--model", "rules", "--steps", "1", "--no-progress", "--out"]
    assert main(run + [str(done)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"socialsim: error: --out {done} already holds a run (completed, 6 steps); nothing was written. "
        f"To keep it, extend it with `socialsim run --resume {done} --steps N`, or give another --out")
    assert main(run + [str(stopped)]) == 2
    assert (f"already holds a run (interrupted, 2 steps); nothing was written. To keep it, continue it with "
            f"`socialsim run --resume {stopped}`, or") in capsys.readouterr().err
    assert main(["replay", str(done), "--out", str(done), "--no-progress"]) == 2
    assert f"--out {done} is the run being replayed: give another --out" in capsys.readouterr().err
    # another run, recorded with a tape or not (a rules run has none: it was overwritten, a data loss)
    (done / "tape.jsonl").unlink(missing_ok=True)
    for source, out in ((done, stopped), (stopped, done)):
        assert main(["replay", str(source), "--out", str(out), "--no-progress"]) == 2
        assert f"--out {out} already holds a run" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert main(run + [str(tmp_path / "new")]) == 0  # a new directory, or ...
    assert main(run + [str(tmp_path / "new" / "replay")]) == 0  # ... one below a run, is fine
    assert main(["replay", str(tmp_path / "new"), "--no-progress"]) == 0
    assert main(["replay", str(tmp_path / "new"), "--out", str(tmp_path / "new" / "replay"), "--no-progress"]) == 0  # its own


def test_a_default_run_directory_is_named_by_scenario_architecture_and_time(tmp_path):
    import re

    from socialsim.model import runner

    config = runner.RunConfig(scenario="school-meso", model="rules").resolved()
    path = runner.new_run_dir(config, tmp_path / "not" / "yet")  # its folders are made as needed
    assert re.fullmatch(r"school-meso-asvo-20\d{6}-\d{6}", path.name) and path.is_dir()


def test_a_run_directory_being_written_is_refused_to_a_second_process(tmp_path, capsys):
    """Two terminals resuming one run interleaved two tapes and two sets of frames."""
    from socialsim.model.run_dir import writing

    run = ["run", "hobbs-cafe", "--model", "rules", "--steps", "1", "--no-progress", "--out", str(tmp_path / "r")]
    assert main(run) == 0
    before = {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()}
    with writing(tmp_path / "r"):  # as another process would hold it (a lock per open file)
        assert main(["run", "--resume", str(tmp_path / "r"), "--steps", "2", "--no-progress"]) == 2
        assert capsys.readouterr().err.strip() == (
            f"socialsim: error: {tmp_path / 'r'} is being written by another process (pid {os.getpid()}): "
            "let it finish or stop it (Ctrl-C saves it), then try again")
    after = {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()}
    assert {p: b for p, b in after.items() if p.name != ".lock"} == {p: b for p, b in before.items() if p.name != ".lock"}
    assert after[tmp_path / "r" / ".lock"] == b""  # released: no pid left behind
    assert main(["run", "--resume", str(tmp_path / "r"), "--steps", "2", "--no-progress"]) == 0


def test_a_resume_reads_its_tape_under_the_runs_lock(tmp_path, monkeypatch):
    """A second --resume started while a first ran read the tape then, got the lock once the first
    had ended, and paid again for every call the first made after that read (measured: a 3-step run's
    35 calls made twice, each twice on its tape, and its replay then reported a difference)."""
    from socialsim.model import runner
    from socialsim.model.run_dir import being_written

    run_dir = tmp_path / "r"
    writer_when_written = []  # a new run holds the lock from its first file (the scenario's copy) on
    keep_scenario = runner.keep_scenario
    monkeypatch.setattr(runner, "keep_scenario", lambda folder, *rest: (
        writer_when_written.append(being_written(folder)), keep_scenario(folder, *rest))[1])
    assert main(["run", "hobbs-cafe", "--model", "rules", "--steps", "1", "--no-progress", "--out", str(run_dir)]) == 0
    writer_when_read = []
    gateway = runner._gateway
    monkeypatch.setattr(runner, "_gateway", lambda config, tape_dir, *rest: (
        writer_when_read.append(being_written(tape_dir)), gateway(config, tape_dir, *rest))[1])
    assert main(["run", "--resume", str(run_dir), "--steps", "2", "--no-progress"]) == 0
    assert writer_when_read == [str(os.getpid())]
    assert writer_when_written == [str(os.getpid())] * 2


def test_folder_names_and_the_messages_edges(tmp_path):
    from socialsim.model.run_dir import already_a_run, folder_name

    assert folder_name("family-meso / w/o ASVO") == "family-meso___w_o_ASVO"  # a reproduction's arm
    assert folder_name("__a b_") == "a_b" and folder_name("über_1-x") == "über_1-x" and folder_name("//") == "run"
    two = _runs(tmp_path / "two", "a/seed-1", "a/seed-2")
    assert not_a_run_dir(tmp_path / "two").endswith(f"it holds 2 runs ({two[0]}, {two[1]}): give one of them")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")  # a run's config cut short
    assert already_a_run(tmp_path / "broken") == (
        f"--out {tmp_path / 'broken'} already holds a run; nothing was written. To keep it, continue it with "
        f"`socialsim run --resume {tmp_path / 'broken'}`, or give another --out")
    assert already_a_run(tmp_path / "nothing-here") is None
    assert already_a_run(tmp_path / "two") == (  # a reproduction's folder would read as one run
        f"--out {tmp_path / 'two'} holds 2 runs below it (e.g. {two[0]}); nothing was written: give a folder of "
        f"its own, e.g. {tmp_path / 'two' / 'my-run'}")
    _runs(tmp_path / "one", "runs/abc")
    assert f"--out {tmp_path / 'one'} holds 1 run below it" in already_a_run(tmp_path / "one")


def test_a_sweep_or_a_reproduction_needs_a_folder_of_its_own(tmp_path, capsys):
    """A sweep written into a run directory, or a reproduction into a sweep's folder, mixed their
    runs: the export and the findings then read the other's too."""
    from socialsim.model.run_dir import not_for_a_batch

    (run,) = _runs(tmp_path, "a-run")
    sweep_runs = _runs(tmp_path / "a-sweep", "runs/run-1", "runs/run-2")
    (tmp_path / "a-sweep" / "sweep.json").write_text("{}")
    repro = _runs(tmp_path / "a-repro", "full/seed-1", "rules-null-model/full/seed-1")
    _runs(tmp_path / "mixed", "full/seed-1", "mine")
    for what in ("sweep", "reproduction"):
        assert not_for_a_batch(run, what) == f"--out {run} is a run directory; a {what} needs a folder of its own"
        assert not_for_a_batch(tmp_path / "new", what) is None
    assert not_for_a_batch(tmp_path / "a-sweep", "sweep") is None  # its own folder: resumed
    assert not_for_a_batch(tmp_path / "a-repro", "reproduction") is None
    assert not_for_a_batch(tmp_path / "a-sweep", "reproduction") == (
        f"--out {tmp_path / 'a-sweep'} holds 2 runs that are not a reproduction's (e.g. {sweep_runs[0]}); "
        "nothing was written: give a folder of its own")
    assert not_for_a_batch(tmp_path / "a-repro", "sweep").startswith(
        f"--out {tmp_path / 'a-repro'} holds 2 runs that are not a sweep's (e.g. {repro[0]})")
    assert "holds 2 runs that are not a reproduction's" in not_for_a_batch(tmp_path / "mixed", "reproduction")

    sweep_file = tmp_path / "s.yaml"
    sweep_file.write_text("name: s\nseeds: [1]\nsteps: 1\nparameters: {arch: generic, model: rules}\n")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main(["sweep", str(sweep_file), "--out", str(run), "--no-progress"]) == 2
    assert f"--out {run} is a run directory; a sweep needs a folder of its own" in capsys.readouterr().err
    assert main(["reproduce", "itcmas", "--model", "rules", "--seeds", "1", "--steps", "1",
                 "--out", str(tmp_path / "a-sweep")]) == 2
    assert "holds 2 runs that are not a reproduction's" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_run_being_written_is_read_as_it_is_never_consolidated_or_replayed(tmp_path, capsys):
    """The dashboard, replay and consolidate turned a running run's per-step records into its frames
    and removed them under the writer's feet."""
    import pandas as pd

    from socialsim.dashboards.panels import frames_from_run
    from socialsim.model.run_dir import being_written, writing
    from socialsim.model.runner import RunConfig, replay, run
    from socialsim.model.steplog import StepLog, consolidate, has_parts

    run_dir = run(RunConfig(scenario="hobbs-cafe", arch="generic", model="rules", steps=3), tmp_path / "r",
                  progress=False).run_dir
    model = pd.read_parquet(run_dir / "model.parquet")
    log = StepLog(run_dir, lambda frame: frame)  # as the writer leaves them after its second step
    for step in (1, 2):
        log.append({"model.parquet": model[model["step"] <= step]}, steps_done=step)
    assert being_written(run_dir) is None
    with writing(run_dir):
        assert being_written(run_dir) == str(os.getpid())
        assert consolidate(run_dir) is None and has_parts(run_dir)  # left to its writer
        assert frames_from_run(run_dir).model["step"].tolist() == [1, 2]  # its complete steps so far
        assert has_parts(run_dir)
        with pytest.raises(ValueError, match=f"is being written by another process \\(pid {os.getpid()}\\)"):
            replay(run_dir, tmp_path / "replay", progress=False)
        assert main(["replay", str(run_dir), "--out", str(tmp_path / "replay"), "--no-progress"]) == 2
        assert "replay it once it has finished or been stopped" in capsys.readouterr().err
    assert not (tmp_path / "replay").exists()
    assert consolidate(run_dir) == 2 and not has_parts(run_dir)  # its writer gone: a killed run's records


def test_without_advisory_locks_a_run_directory_is_simply_not_guarded(tmp_path, monkeypatch):
    """Windows has no ``fcntl``: runs still run there, unguarded, instead of failing to import."""
    from socialsim.model import run_dir as rd

    monkeypatch.setattr(rd, "fcntl", None)
    with rd.writing(tmp_path), rd.writing(tmp_path):  # no refusal
        assert rd.being_written(tmp_path) is None
    assert not (tmp_path / rd.LOCK).exists()


def test_a_resume_never_shortens_a_run_and_a_finished_one_is_left_as_it_is(tmp_path, capsys):
    """``--resume RUN --steps 2`` on a run of 4 steps wrote a 2-step run over it."""
    run = ["--model", "rules", "--no-progress"]
    assert main(["run", "hobbs-cafe", "--steps", "4", "--out", str(tmp_path / "r"), *run]) == 0
    before = {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["run", "--resume", str(tmp_path / "r"), "--steps", "2", "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"socialsim: error: --steps 2 is fewer than the 4 steps {tmp_path / 'r'} has completed: a resumed run only "
        "goes on (start a new run, without --resume, for a shorter one)")
    for steps in ([], ["--steps", "4"]):  # nothing left to do: said, and nothing run or written
        assert main(["run", "--resume", str(tmp_path / "r"), *steps, "--no-progress"]) == 0
        assert capsys.readouterr().out.strip() == (
            f"{tmp_path / 'r'} has already completed its 4 steps: nothing to resume (--steps N, more than 4, extends it)")
    assert {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()} == before
    assert main(["run", "--resume", str(tmp_path / "r"), "--steps", "5", "--no-progress"]) == 0
    assert json.loads((tmp_path / "r" / "config.json").read_text())["steps_done"] == 5
