"""Crash safety: a run killed with SIGKILL in any step but the last resumes (``--resume``), and resumes
again after a kill of its resumed process, to frames and tables identical to an uninterrupted run;
a resumed run refuses changed arguments."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from socialsim.llm.fake_server import FakeOpenAIServer, by_prompt

ROOT = Path(__file__).resolve().parents[1]
STEPS = 4



def cli(*args, **popen):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "OPENAI_API_KEY": "placeholder-key"}
    return subprocess.Popen([sys.executable, "-m", "socialsim.cli", "run", *args, "--no-progress"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def steps_done(run_dir: Path) -> int:
    try:
        return json.loads((run_dir / "config.json").read_text())["steps_done"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return -1


def frames(run_dir: Path) -> dict[str, pd.DataFrame]:
    """Every frame and table, without live latency (which no two runs share)."""
    names = ["model.parquet", "agents.parquet", *(f"tables/{p.name}" for p in sorted((run_dir / "tables").glob("*")))]
    return {n: pd.read_parquet(run_dir / n).drop(columns=["llm_latency_s"], errors="ignore") for n in names}


@pytest.fixture(scope="module")
def server():
    with FakeOpenAIServer(policy=by_prompt) as s:
        yield s


@pytest.fixture(scope="module")
def uninterrupted(server, tmp_path_factory):
    """The killed run's arguments run through once in this process (the kills need processes of their
    own; this one does not, and a process of its own imported litellm again: ~5 s of CPU)."""
    from socialsim.model.runner import RunConfig, run

    out = tmp_path_factory.mktemp("full") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "placeholder-key")
        result = run(RunConfig(arch="generic", model="openai/fake-model", api_base=server.api_base, steps=STEPS,
                               rng=3), out, progress=False)
    assert result.status == "completed"
    return frames(out)


def kill_when_done(proc: subprocess.Popen, run_dir: Path, steps: int) -> int:
    """SIGKILL ``proc`` once ``run_dir`` records ``steps`` complete steps (so it dies in a later
    one); returns the steps it had recorded."""
    deadline = time.monotonic() + 240
    while steps_done(run_dir) < steps and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert (run_dir / "config.json").is_file()
    return steps_done(run_dir)


@pytest.fixture(scope="module")
def killed_in_every_step(server, tmp_path_factory):
    """One run killed with SIGKILL in each step but the last: started and killed, then resumed and
    killed again (each resumed process records at least one more step), then resumed to its end.
    Returns the run directory, a copy of it as the last kill left it, and the steps recorded at
    each kill."""
    base = tmp_path_factory.mktemp("killed")
    out = base / "run"
    proc = cli("--arch", "generic", "--model", "openai/fake-model", "--api-base", server.api_base,
               "--steps", str(STEPS), "--rng", "3", "--out", str(out))
    killed_at: list[int] = []
    for kill_after in range(STEPS - 1):
        killed_at.append(kill_when_done(proc, out, max(kill_after, killed_at[-1] + 1 if killed_at else 0)))
        if len(killed_at) == STEPS - 1:
            shutil.copytree(out, base / "as-killed")
        proc = cli("--resume", str(out))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return out, base / "as-killed", killed_at


def test_kill_9_in_each_step_then_resume_gives_the_uninterrupted_frames(killed_in_every_step, uninterrupted):
    """A resumed run resumes again after its own kill, and the end is the uninterrupted run's."""
    out, _, killed_at = killed_in_every_step
    assert killed_at == sorted(set(killed_at)) and killed_at[0] >= 0 and killed_at[-1] < STEPS  # killed in 3 steps
    assert json.loads((out / "config.json").read_text())["steps_done"] == STEPS
    got = frames(out)
    assert list(got) == list(uninterrupted)
    for name, frame in uninterrupted.items():
        pd.testing.assert_frame_equal(got[name], frame, obj=name)


def test_resume_refuses_changed_arguments_and_lists_them(tmp_path):
    out = tmp_path / "run"
    first = cli("--arch", "generic", "--model", "rules", "--steps", "1", "--out", str(out))
    first.communicate(timeout=120)
    assert first.returncode == 0
    before = (out / "model.parquet").read_bytes()
    proc = cli("--resume", str(out), "--model", "openai/other", "--rng", "7", "--set", "generic.x=1")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert "refuses changed arguments" in err and "Traceback" not in err
    assert "--model 'openai/other' (recorded: 'rules')" in err and "--rng 7 (recorded: 42)" in err and "--set" in err
    assert (out / "model.parquet").read_bytes() == before


def test_a_killed_runs_complete_steps_are_read_from_its_per_step_records(killed_in_every_step, uninterrupted,
                                                                         tmp_path):
    from socialsim.model.steplog import consolidate, has_parts

    _, as_killed, killed_ats = killed_in_every_step
    out = shutil.copytree(as_killed, tmp_path / "run")
    killed_at = steps_done(out)
    assert killed_at == killed_ats[-1] and 2 <= killed_at < STEPS and has_parts(out)
    with (out / "parts" / "model.jsonl").open("a") as torn:  # a line cut by the kill
        torn.write('{"step": 99, "llm_ca')
    assert consolidate(out) >= killed_at and not has_parts(out)
    got = frames(out)
    for name in ("model.parquet", "agents.parquet", "tables/interactions.parquet"):
        full = uninterrupted[name]
        steps = got[name]["step" if "step" in got[name] else "Step"].astype(int)
        last = int(steps.max())
        assert set(steps) <= set(range(1, last + 1)) and last >= killed_at  # complete steps only, none torn
        expected = full[full["step" if "step" in full else "Step"] <= last].reset_index(drop=True)
        pd.testing.assert_frame_equal(got[name][list(expected.columns)], expected, check_dtype=False, obj=name)


@pytest.mark.parametrize(("scenario", "arch"), [("school-macro", "asvo"), ("irollan-valley", "itcmas")])
def test_a_run_killed_after_its_first_step_replays_equal(tmp_path, scenario, arch):
    """ASVO's events table (no world: no rows) lost its columns in the killed run's rebuilt frames, and
    ITCMA-S's replay judged the run the recording never finished: both replays said NO."""
    from socialsim.model.runner import replay

    out = tmp_path / "run"
    proc = cli(scenario, "--arch", arch, "--model", "rules", "--steps", "40", "--out", str(out))
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:  # killed once a step is on record
        try:
            if json.loads((out / "parts" / "manifest.json").read_text())["steps_done"] >= 1:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    result, same = replay(out, progress=False)  # killed maybe before config.json counted the step: still 1
    assert same and 1 <= result.steps_done < 40
    assert not (result.run_dir / "tables" / "itcmas_judge.parquet").exists()  # nothing judged of half a run
