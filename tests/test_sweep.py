"""Sweeps: grid size, resume after a kill, Dask equals local, shared tape, sweep-file errors.

All sweeps run the generic architecture of Hobbs Café on the rules engine (no LLM), except the
shared-tape test, which talks to a local OpenAI-compatible server through the real litellm.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import socket
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
import yaml

from socialsim.batch.exports import export
from socialsim.batch.sweepfile import SweepFileError, load_sweep, validate_sweep
from socialsim.batch.sweeps import RUNS, SweepModel, earlier_attempt_through, is_done, plan, sweep
from socialsim.llm.engines import ModelUnavailable
from socialsim.llm.fake_server import by_prompt
from socialsim.model.society import SocietyModel
from socialsim.scenarios.loader import DATA_DIR

# 2 routes x 2 lengths x 2 replicates = 8 runs; with `model: rules` the routes cannot change a
# result, but they are distinct grid points (the way an ablation that an architecture ignores is).
GRID = {
    "name": "grid",
    "seeds": [3, 4],
    "parameters": {
        "scenario": "hobbs-cafe",
        "arch": "generic",
        "model": "rules",
        "routes": [{}, {"action": "rules"}],
        "steps": [2, 3],
    },
}
AGENTS = 10  # Hobbs Café


class Killed(BaseException):
    """Stands in for SIGKILL / Ctrl-C: not an Exception, so nothing in the sweep catches it."""


def frames(path) -> dict[str, pd.DataFrame]:
    """An export's frames, sorted so they compare independently of run order."""
    out = {}
    for name, df in export(path, write=False).frames().items():
        keys = [c for c in ("run_id", "step", "agent_id", "agent", "op") if c in df.columns]
        out[name] = df.sort_values(keys, kind="stable").reset_index(drop=True) if keys else df
    return out


def assert_same_results(a, b) -> None:
    left, right = frames(a), frames(b)
    assert left.keys() == right.keys()
    for name in left:
        if name == "llm_calls":  # latencies are wall-clock; everything else must match
            left[name] = left[name].drop(columns=["latency_s"])
            right[name] = right[name].drop(columns=["latency_s"])
        pd.testing.assert_frame_equal(left[name], right[name], obj=name)


def test_2x2x2_grid_gives_expected_runs_and_rows(tmp_path):
    result = sweep(GRID, tmp_path / "s", progress=False)
    runs = result.runs
    assert len(runs) == 8 and runs["run_id"].is_unique
    assert (runs["status"] == "completed").all()
    assert sorted(runs["steps_done"]) == [2] * 4 + [3] * 4
    assert runs.groupby(["routes", "steps"]).size().eq(2).all()  # every grid point twice
    assert set(runs["rng"]) == {3, 4} and set(runs["replicate"]) == {0, 1}
    # per-run usage columns: the rules engine decides everything and calls no LLM
    assert (runs["llm_calls"] == 0).all() and (runs["live_calls"] == 0).all()
    assert (runs["rule_decisions"] > 0).all() and (runs["cost_usd"] == 0).all()
    assert (tmp_path / "s" / "runs.parquet").is_file() and (tmp_path / "s" / "runs.csv").is_file()

    exp = export(tmp_path / "s")
    steps_total = 2 * 2 * (2 + 3)  # replicates x routes x (2 + 3 steps)
    assert len(exp.model) == steps_total
    assert len(exp.agents) == steps_total * AGENTS
    assert exp.agents.groupby(["run_id", "step"]).size().eq(AGENTS).all()
    assert len(exp.types) == steps_total and (exp.types["n_agents"] == AGENTS).all()
    assert len(exp.runs) == 8
    assert len(exp.tables["events"]) == steps_total * AGENTS  # one action per agent per step
    # replicates differ (different seeds), grid points that cannot differ do not
    by_seed = exp.agents[exp.agents["steps"] == 3].groupby("rng")["area"].apply(tuple)
    assert by_seed.nunique() == 2


def test_same_sweep_twice_runs_nothing_the_second_time(tmp_path):
    first = sweep(GRID, tmp_path / "s", progress=False)
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "s" / RUNS).glob("*/model.parquet")}
    second = sweep(GRID, tmp_path / "s", progress=False)
    assert len(first.executed) == 8 and second.executed == [] and len(second.skipped) == 8
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes
    pd.testing.assert_frame_equal(first.runs, second.runs)


def test_resume_after_a_kill_does_not_repeat_finished_runs(tmp_path, monkeypatch):
    steps = {"n": 0}
    original = SocietyModel.step

    def counting_step(self):
        steps["n"] += 1
        if kill_at is not None and steps["n"] == kill_at:
            raise Killed()
        original(self)

    monkeypatch.setattr(SocietyModel, "step", counting_step)
    # runs go grid point by grid point, seeds innermost: lengths 2, 2, 3, 3, 2, 2, 3, 3, so step
    # 6 is the middle of the third run
    kill_at = 6
    with pytest.raises(Killed):
        sweep(GRID, tmp_path / "s", progress=False)
    done = [p for p in plan(load_grid()) if is_done(tmp_path / "s", p.run_id)]
    assert len(done) == 2  # the interrupted third run left nothing that counts as done
    assert sorted(p.rng for p in done) == [3, 4] and {p.config.steps for p in done} == {2}
    before = {p.run_id: (tmp_path / "s" / RUNS / p.run_id / "config.json").stat().st_mtime_ns for p in done}

    kill_at, steps["n"] = None, 0
    result = sweep(GRID, tmp_path / "s", progress=False)
    assert sorted(result.skipped) == sorted(before) and len(result.executed) == 6
    assert steps["n"] == 2 * 2 * (2 + 3) - (2 + 2)  # every step except those of the two finished runs
    assert {r: (tmp_path / "s" / RUNS / r / "config.json").stat().st_mtime_ns for r in before} == before
    assert (result.runs["status"] == "completed").all()

    # and the result is the one an uninterrupted sweep gives
    sweep(GRID, tmp_path / "clean", progress=False)
    assert_same_results(tmp_path / "s", tmp_path / "clean")


def test_a_run_killed_while_writing_is_not_taken_as_done(tmp_path, monkeypatch):
    import socialsim.batch.sweeps as sweeps

    real_save = sweeps.save

    def save_then_die(model, run_dir, *args):
        real_save(model, run_dir, *args)  # the files are there, but the run was never renamed
        raise Killed()

    monkeypatch.setattr(sweeps, "save", save_then_die)
    with pytest.raises(Killed):
        sweep(GRID, tmp_path / "s", progress=False)
    runs_dir = tmp_path / "s" / RUNS
    assert [p.name.startswith(".partial-") for p in runs_dir.iterdir()] == [True]
    assert export(tmp_path / "s", write=False).runs.empty  # a partial folder is no result

    monkeypatch.setattr(sweeps, "save", real_save)
    (runs_dir / ".partial-run-000000000000-99999-1" / "tables").mkdir(parents=True)  # another process's leftovers
    result = sweep(GRID, tmp_path / "s", progress=False)
    assert len(result.executed) == 8 and (result.runs["status"] == "completed").all()
    assert not list(runs_dir.glob(".partial-*"))


def dask_tasks(stream) -> list[str]:
    """The sweep tasks a Dask scheduler ran (one ``run_one`` per run)."""
    return [t["key"] for t in stream.data if str(t["key"]).startswith("run_one-")]


def test_dask_local_cluster_equals_local_run(tmp_path):
    from distributed import Client, LocalCluster, get_task_stream

    local = sweep(GRID, tmp_path / "local", progress=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client, get_task_stream(client) as stream:
        distributed = sweep(GRID, tmp_path / "dask", client=client, progress=False)
    assert len(dask_tasks(stream)) == 8  # run on the cluster, not locally
    assert sorted(distributed.executed) == sorted(local.executed)
    pd.testing.assert_frame_equal(local.runs, distributed.runs)
    assert_same_results(tmp_path / "local", tmp_path / "dask")


def test_sweep_model_keeps_mesa_datacollector_frames(tmp_path):
    model = SweepModel("hobbs-cafe", arch="generic", model="rules", steps=3, sweep_dir=str(tmp_path), rng=5)
    while model.running:
        model.step()
    assert model.steps == 3 and is_done(tmp_path, model.run_id)
    dc_model = model.datacollector.get_model_vars_dataframe()
    dc_agents = model.datacollector.get_agent_vars_dataframe()
    assert len(dc_model) == 3 and len(dc_agents) == 3 * AGENTS
    exp = export(tmp_path / RUNS / model.run_id, write=False)
    assert exp.model["llm_calls"].tolist() == dc_model["llm_calls"].tolist()
    assert exp.model["rule_decisions"].tolist() == dc_model["rule_decisions"].tolist()
    assert exp.agents["area"].tolist() == dc_agents["area"].tolist()
    assert exp.agents["agent_id"].tolist() == dc_agents.index.get_level_values("AgentID").tolist()
    # a finished run is not built again
    again = SweepModel("hobbs-cafe", arch="generic", model="rules", steps=3, sweep_dir=str(tmp_path), rng=5)
    assert not again.running and len(again.agents) == 0


def test_a_run_stops_at_its_next_step_once_its_sweep_command_has_stopped(tmp_path, caplog):
    """Ctrl-C or SIGTERM interrupts no Dask task: a run on a --scheduler's workers went on paying calls
    and finished behind the stopped command's back (measured: 24 calls and 2 runs after it exited); a
    run of a command another has since replaced goes no further either. It writes nothing that counts."""
    from socialsim.batch.sweeps import COMMAND, stop_runs

    (tmp_path / COMMAND).write_text("this command")
    run = {"scenario": "hobbs-cafe", "arch": "generic", "model": "rules", "steps": 3, "sweep_dir": str(tmp_path)}
    stopped, replaced = SweepModel(**run, rng=5, command="this command"), SweepModel(**run, rng=6, command="this command")
    for model in (stopped, replaced):
        model.step()
        assert model.running and len(model.datacollector.get_model_vars_dataframe()) == 1
    stop_runs(tmp_path)
    stopped.step()
    (tmp_path / COMMAND).write_text("the next command")
    replaced.step()
    for model in (stopped, replaced):
        assert not model.running and len(model.datacollector.get_model_vars_dataframe()) == 1
        assert f"run {model.run_id} stops: the sweep command that started it has stopped" in caplog.messages
    assert not list((tmp_path / RUNS).glob("*"))
    alone = SweepModel(**run, rng=7)  # a batch_run of the user's own: no command to follow
    while alone.running:
        alone.step()
    assert is_done(tmp_path, alone.run_id)


@pytest.mark.parametrize("params,refusal", [
    ({"model": "opnai/gpt-4o-mini"}, "unknown model 'opnai/gpt-4o-mini'"),
    ({"scenario": "makerspace", "arch": "crsec", "judge": "opnai/gpt-4o"}, "unknown model 'opnai/gpt-4o'"),
    ({"model": "hosted_vllm/our-model", "max_cost": 1.0},
     "max_cost=1 cannot be kept: hosted_vllm/our-model has no price in litellm's cost map; give price=(IN, OUT)"),
])
def test_a_users_own_batch_run_of_sweep_models_is_refused_what_the_sweep_command_refuses(tmp_path, params, refusal):
    """``mesa.batch_run(SweepModel, ...)`` of the user's own has no sweep command to check its grid first:
    a misspelt model (an actor's or a judge's) was built and failed call after call in step 1, and a
    max_cost on a model with no price counted its calls at $0, so the budget never stopped a run."""
    run = {"scenario": "hobbs-cafe", "arch": "generic", "model": "rules", "steps": 1, "sweep_dir": str(tmp_path)}
    with pytest.raises((ModelUnavailable, ValueError), match=re.escape(refusal)):
        SweepModel(**{**run, **params}, rng=1)
    assert not (tmp_path / RUNS).exists()
    priced = SweepModel(**{**run, **params, "price": (1.0, 2.0)}, rng=1) if "max_cost" in params else None
    assert priced is None or priced.running  # a price given, the budget can be kept
    checked = SweepModel(**{**run, **params}, rng=1, command="the sweep command")  # its grid checked first
    assert checked.running


def test_repeating_a_sweep_costs_no_calls(tmp_path, monkeypatch):
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as server:
        spec = {"name": "llm", "seeds": [1, 2], "api_base": server.api_base,
                "parameters": {"arch": "generic", "model": "openai/fake-model", "steps": 2}}
        first = sweep(spec, tmp_path / "s", progress=False, preflight=False)
        calls_made = len(server.requests)
        assert (first.runs["live_calls"] > 0).all()
        tape = (tmp_path / "s" / "tape.jsonl").read_text().splitlines()
        assert len(tape) == first.runs["live_calls"].sum()  # every live call is on the shared tape
        assert "placeholder-key" not in (tmp_path / "s" / "tape.jsonl").read_text()
        # throw the results away but keep the tape: the whole sweep again, for free
        for run in (tmp_path / "s" / RUNS).iterdir():
            for f in sorted(run.rglob("*"), reverse=True):
                f.unlink() if f.is_file() else f.rmdir()
            run.rmdir()
        second = sweep(spec, tmp_path / "s", progress=False, preflight=False)
        assert len(server.requests) == calls_made  # the server saw no new request
    assert len(second.executed) == 2 and (second.runs["live_calls"] == 0).all()
    assert (second.runs["llm_calls"] == first.runs["llm_calls"]).all()
    pd.testing.assert_series_equal(first.runs["completion_tokens"], second.runs["completion_tokens"])
    # each run directory has the calls it used, so `socialsim replay` works on it
    run_tape = tmp_path / "s" / RUNS / second.runs["run_id"][0] / "tape.jsonl"
    assert len(run_tape.read_text().splitlines()) == second.runs["llm_calls"][0]


# --- the sweep file -----------------------------------------------------------------------------
def load_grid():
    from socialsim.batch.sweepfile import validate_sweep

    return validate_sweep(GRID)


def write(tmp_path, text, name="bad.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, field, expected", [
    ("parameters:\n  arch: [generic, crsecc]\n", "parameters.arch", "expected one of asvo, crsec, generic, itcmas, got 'crsecc'"),
    ("replicate: 3\n", "replicate", "Extra inputs are not permitted"),
    ("replicates: 0\n", "replicates", "greater than or equal to 1"),
    ("seeds: [1, 2]\nreplicates: 2\n", "replicates", "either `seeds`"),
    ("seeds: [3, -1]\n", "seeds.1", "greater than or equal to 0 (got -1)"),  # numpy takes no negative seed
    ("replicates: 2\nseed: -3\n", "seed", "greater than or equal to 0 (got -3)"),
    ("parameters:\n  enable_chat: []\n", "parameters.enable_chat", "expected a value or a non-empty list"),
    ("parameters:\n  rng: [1, 2]\n", "parameters.rng", "not a grid parameter"),
    ("parameters:\n  steps: [2, two]\n", "parameters.steps", "expected a whole number >= 1, got 'two'"),
    ("parameters:\n  routes: {generic: 3}\n", "parameters.routes", "expected a mapping OPERATION: MODEL"),
    ("parameters: {arch: generic}\nfigures:\n  - {outcome: llm_calls, x: enable_chat}\n", "figures.0.x",
     "expected one of the parameters"),
    ("parameters: {arch: [generic, crsec]}\nfigures:\n  - {outcome: llm_calls, x: arch, hue: arch}\n", "figures.0.hue",
     "expected another parameter than x ('arch'), or no hue"),  # drawn, it failed after every run
    ("parameters:\n  arch: [generic, crsec]\n  crsec.temptation: 0.5\n", "parameters.crsec.temptation",
     "'crsec' is not the architecture of every run (arch: crsec, generic)"),
    ("parameters:\n  arch: crsec\n  temptation: 0.1\n  crsec.temptation: 0.5\n", "parameters.crsec.temptation",
     "given twice, also as 'temptation'"),
])
def test_bad_sweep_file_names_file_field_and_expectation(tmp_path, text, field, expected):
    path = write(tmp_path, text)
    with pytest.raises(SweepFileError) as info:
        load_sweep(path)
    message = str(info.value)
    assert message.startswith(f"{path}: invalid sweep file")
    assert f"  {field}: " in message and expected in message


def test_bad_sweep_file_syntax_scenario_and_cli(tmp_path, capsys):
    from socialsim.cli import main

    path = write(tmp_path, "parameters: [unclosed\n")
    with pytest.raises(SweepFileError, match=re.escape(f"{path}: not valid YAML")):
        load_sweep(path)
    path = write(tmp_path, "parameters:\n  steps: [1, 2]\n  arch: [generic]\n  steps: [3]\n", "twice.yaml")
    with pytest.raises(SweepFileError, match="(?s)" + re.escape(f"{path}: not valid YAML") + ".*"
                       + re.escape("duplicate key steps (first at line 2)")):
        load_sweep(path)  # PyYAML would have swept steps 3 only
    path = tmp_path / "latin.yaml"
    path.write_bytes("name: caf\u00e9\nparameters: {arch: generic}\n".encode("latin-1"))  # was a traceback
    with pytest.raises(SweepFileError, match=re.escape(f"{path}: not UTF-8 text (line 1 has the byte 0xe9)")):
        load_sweep(path)
    path = write(tmp_path, "parameters:\n  scenario: [hobbs-cafe, nowhere-cafe]\n", "scen.yaml")
    with pytest.raises(SweepFileError, match=re.escape(f"{path}: parameters.scenario: unknown scenario 'nowhere-cafe'")):
        load_sweep(path)
    path = write(tmp_path, "[parameters]\narch = 'borg'\n", "bad.toml")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: invalid sweep file" in err and "parameters.arch: expected one of" in err and "'borg'" in err
    assert not (tmp_path / "out").exists()


def test_a_sweep_refused_before_its_first_run_leaves_no_folder_behind(tmp_path, monkeypatch, capsys):
    """A scenario file its architecture refuses left sweeps/NAME (a lock and an empty runs/); a folder
    that was there before stays, with what it holds."""
    from socialsim.cli import main

    monkeypatch.chdir(tmp_path)
    data = yaml.safe_load((DATA_DIR / "makerspace.yaml").read_text())
    data["agents"][0]["traits"]["stnace"] = data["agents"][0]["traits"].pop("stance")
    write(tmp_path, yaml.safe_dump(data), "mine.yaml")
    path = write(tmp_path, "name: mine\nsteps: 1\nparameters: {scenario: mine.yaml, model: rules}\n", "sweep.yaml")
    assert main(["sweep", str(path), "--no-progress"]) == 2
    assert "traits.stnace: not a trait crsec reads" in capsys.readouterr().err
    assert not (tmp_path / "sweeps").exists()
    (tmp_path / "kept" / "notes").mkdir(parents=True)
    assert main(["sweep", str(path), "--out", "kept", "--no-progress"]) == 2
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == [".lock", "notes", "runs"]


def test_cli_sweep_runs_resumes_and_exports(tmp_path, capsys):
    from socialsim.cli import main

    path = write(tmp_path, json.dumps(GRID), "grid.yaml")  # JSON is YAML
    assert main(["sweep", str(path), "--out", str(tmp_path / "s"), "--no-progress"]) == 0
    assert "runs: 8 (8 run now, 0 already done, 0 not completed)" in capsys.readouterr().out
    assert main(["sweep", str(path), "--out", str(tmp_path / "s"), "--no-progress", "--export"]) == 0
    out = capsys.readouterr().out
    assert "runs: 8 (0 run now, 8 already done, 0 not completed)" in out
    assert (tmp_path / "s" / "export" / "agents.parquet").is_file()
    assert (tmp_path / "s" / "export" / "tables" / "events.csv").is_file()


def test_example_sweep_file_is_valid():
    from pathlib import Path

    spec = load_sweep(Path(__file__).parent.parent / "examples" / "sweep-hobbs.yaml")
    assert spec.n_runs() == 2 * 2 * 3 and spec.swept() == ["enable_chat", "enable_synthesis"]


def test_a_parameter_written_as_set_writes_it_is_the_architectures_parameter(tmp_path):
    """``crsec.temptation`` (as ``--set`` takes it) was refused in a sweep file: "did you mean temptation?"."""
    path = write(tmp_path, "parameters:\n  arch: crsec\n  crsec.temptation: [0.1, 0.5]\n"
                           "figures:\n  - {outcome: conflicts_total, x: crsec.temptation}\n", "prefixed.yaml")
    spec = load_sweep(path)
    assert spec.swept() == ["temptation"] and spec.figures[0].x == "temptation"
    bare = load_sweep(write(tmp_path, "parameters:\n  arch: crsec\n  temptation: [0.1, 0.5]\n", "bare.yaml"))
    assert spec.combinations() == bare.combinations()  # the same runs, so the same run ids


def test_a_prefixed_parameter_may_be_a_figures_hue_too(tmp_path):
    path = write(tmp_path, "parameters:\n  arch: crsec\n  crsec.temptation: [0.1, 0.5]\n  enable_chat: [true, false]\n"
                           "figures:\n  - {outcome: conflicts_total, x: enable_chat, hue: crsec.temptation}\n")
    assert load_sweep(path).figures[0].hue == "temptation"


@pytest.mark.parametrize("parameters, read", [
    ({"crsec.temptation": 0.5}, {"temptation": 0.5}),  # no arch named: the scenario's, checked before any run
    ({"arch": [None, "crsec"], "crsec.temptation": 0.5}, {"arch": [None, "crsec"], "temptation": 0.5}),
    ({"arch": "crsec", "foo.temptation": 0.5}, {"arch": "crsec", "foo.temptation": 0.5}),  # no architecture's
    ({"arch": "crsec", "crsec.temptation.x": 0.5}, {"arch": "crsec", "crsec.temptation.x": 0.5}),  # as --set reads it
])
def test_only_an_architectures_prefix_before_the_last_dot_is_taken_off(parameters, read):
    assert validate_sweep({"parameters": parameters}).parameters == read


@pytest.mark.parametrize("data, field, expected", [
    ({"parameters": {"crsec.temptation": 0.5, "itcmas.temptation": 0.4}}, "parameters.itcmas.temptation",
     "given twice, also as 'temptation'"),
    ({"parameters": {"arch": "crsec", "crsec.temptation": [0.1, 0.5]},
      "figures": {"outcome": "conflicts_total", "x": "crsec.temptation"}}, "figures", "Input should be a valid list"),
    ({"parameters": {"arch": "crsec", "temptation": [0.1, 0.5]},
      "figures": {"outcome": "conflicts_total", "x": "temptation"}}, "figures", "Input should be a valid list"),
    ({"parameters": {"arch": "crsec", "crsec.temptation": [0.1, 0.5]}, "figures": ["conflicts_total"]}, "figures.0",
     "Input should be a valid dictionary"),
    (["not", "a", "mapping"], "(top level)", "Input should be a valid dictionary"),
])
def test_a_sweep_given_in_code_is_refused_alike_with_prefixed_parameters_or_not(data, field, expected):
    """A figures mapping (not a list) was accepted once a parameter was prefixed, refused otherwise."""
    with pytest.raises(SweepFileError) as info:
        validate_sweep(data)
    assert f"  {field}: {expected}" in str(info.value)


def test_a_parameter_the_architecture_rejects_fails_before_any_run(tmp_path):
    path = write(tmp_path, "parameters:\n  arch: crsec\n  model: rules\n  enable_chatt: [true, false]\n", "typo.yaml")
    with pytest.raises(SweepFileError) as info:
        sweep(path, tmp_path / "out", progress=False)
    message = str(info.value)
    assert message.startswith(f"{path}: parameters: the run with arch=crsec, model=rules, enable_chatt=True")
    assert "unknown crsec parameter(s) ['enable_chatt']; did you mean enable_chat?" in message
    assert not (tmp_path / "out").exists()  # nor an empty sweep folder


def test_an_unknown_judge_in_the_grid_fails_before_any_run(tmp_path):
    path = write(tmp_path, "parameters:\n  arch: crsec\n  model: rules\n  judge: [rules, nosuchprovider/judge]\n",
                 "judge.yaml")
    with pytest.raises(ModelUnavailable, match="unknown model 'nosuchprovider/judge'"):
        sweep(path, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()  # nor an empty sweep folder


KILL_SCRIPT = """
import os, signal, sys
from socialsim.model.society import SocietyModel
from socialsim.batch.sweeps import sweep
sys.path.insert(0, {tests!r})
from test_sweep import GRID

original, count = SocietyModel.step, [0]
def step(self):
    count[0] += 1
    if count[0] == 7:  # the middle of the third run
        os.kill(os.getpid(), signal.SIGKILL)
    original(self)
SocietyModel.step = step
sweep(GRID, {out!r}, progress=False)
"""


def test_resume_after_sigkill_of_the_sweep_process(tmp_path):
    import signal
    import subprocess
    import sys
    from pathlib import Path

    script = KILL_SCRIPT.format(tests=str(Path(__file__).parent), out=str(tmp_path / "s"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    finished = [p.run_id for p in plan(load_grid()) if is_done(tmp_path / "s", p.run_id)]
    assert len(finished) == 2
    result = sweep(GRID, tmp_path / "s", progress=False)
    assert sorted(result.skipped) == sorted(finished) and len(result.executed) == 6
    assert (result.runs["status"] == "completed").all()


# Two short runs, then two long ones (a few seconds each): once the short ones are done, the pool's
# two workers are each inside a long run.
ORPHANS = {"name": "orphans", "seeds": [1, 2], "processes": 2,
           "parameters": {"scenario": "hobbs-cafe", "arch": "generic", "model": "rules", "steps": [1, 3000]}}


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(stat.parent.name))
    return kids


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's new parent may never reap it)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_workers_of_a_sweep_killed_alone_stop_and_change_no_run(tmp_path):
    """``kill -9`` of only the sweep's process left its pool's workers running: they went on paying
    calls and finished their runs, renaming them over the folders of the sweep started again."""
    import signal
    import subprocess
    import time

    from socialsim.batch.sweepfile import validate_sweep

    out = tmp_path / "s"
    short = [p.run_id for p in plan(validate_sweep(ORPHANS)) if p.config.steps == 1]
    script = f"from socialsim.batch.sweeps import sweep; sweep({ORPHANS!r}, {str(out)!r}, progress=False)"
    sweeping = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not all(is_done(out, run_id) for run_id in short):
            assert sweeping.poll() is None and time.monotonic() < deadline, "the short runs did not finish"
            time.sleep(0.05)
        workers = _children(sweeping.pid)
        sweeping.send_signal(signal.SIGKILL)
        sweeping.wait()
        runs = sorted(os.listdir(out / RUNS))
        deadline = time.monotonic() + 30
        while any(_running(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(workers) >= 2 and not [w for w in workers if _running(w)]
        assert sorted(os.listdir(out / RUNS)) == runs  # no long run finished behind the kill
    finally:
        sweeping.kill()
        for worker in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)


def test_a_run_another_process_finished_meanwhile_is_kept(tmp_path):
    """Two processes finishing one run (a killed sweep's worker and the sweep started again): the
    second removed the first's finished folder and renamed its own over it (or failed renaming
    onto it, while the first's rename was under way)."""
    from socialsim.batch.sweeps import PARTIAL

    (tmp_path / RUNS).mkdir()
    run = {"scenario": "hobbs-cafe", "arch": "generic", "model": "rules", "steps": 1, "sweep_dir": str(tmp_path)}
    first, second = SweepModel(**run, rng=1), SweepModel(**run, rng=1)  # both started before either finished
    first.step()
    final = tmp_path / RUNS / first.run_id
    finished = (final / "config.json").stat().st_ino
    second.step()
    assert (final / "config.json").stat().st_ino == finished and is_done(tmp_path, first.run_id)
    assert not [p for p in (tmp_path / RUNS).iterdir() if p.name.startswith(PARTIAL)]


def test_a_pool_workers_run_stops_at_its_next_step_once_its_sweep_is_gone(tmp_path):
    """Where the kernel does not end it (not Linux, or the sweep died before the worker asked it
    to), a worker whose sweep died went on paying calls: it is then another process's child."""
    (tmp_path / RUNS).mkdir()
    model = SweepModel("hobbs-cafe", arch="generic", model="rules", steps=2, sweep_dir=str(tmp_path), rng=1)
    model.pool_parent = os.getppid() + 1  # the sweep that started it, no longer its parent
    with pytest.raises(SystemExit, match=f"the sweep \\(process {model.pool_parent}\\) that started this worker "
                                         "is gone; stopping"):
        model.step()
    assert model.llm.step == 0 and not (tmp_path / RUNS / model.run_id).exists()  # no phase run, nothing written


@pytest.mark.skipif(sys.platform == "win32", reason="no flock")
def test_a_run_directory_is_moved_into_place_while_no_other_process_is_moving_one(tmp_path, monkeypatch):
    """The look for a run finished meanwhile and the rename are one step among a sweep's processes."""
    import fcntl
    import threading

    from socialsim.batch import sweeps

    (tmp_path / RUNS).mkdir()
    model = SweepModel("hobbs-cafe", arch="generic", model="rules", steps=1, sweep_dir=str(tmp_path), rng=1)
    flock, waiting = fcntl.flock, threading.Event()
    monkeypatch.setattr(sweeps.fcntl, "flock", lambda handle, how: (waiting.set(), flock(handle, how)))
    with open(tmp_path / sweeps.FINISHING, "a") as other:
        flock(other, fcntl.LOCK_EX)  # another process moving a run into place
        finishing = threading.Thread(target=model.step)
        finishing.start()
        assert waiting.wait(30)
        assert not (tmp_path / RUNS / model.run_id).exists()
    finishing.join(30)
    assert is_done(tmp_path, model.run_id)


def test_shared_tape_survives_a_torn_line_and_sees_other_writers(tmp_path):
    from socialsim.batch.sweeps import SharedTape
    from socialsim.llm.tape import Tape, TapeRecord

    def record(key):
        return TapeRecord(key, "m", "Op", 1, 1, [{"role": "user", "content": "hi"}], {}, "ok", 1, 1, 0.0, 0.0)

    path = tmp_path / "tape.jsonl"
    Tape(path).add(record("a"))
    with path.open("a") as fh:
        fh.write('{"key": "torn", "mod')  # a writer killed mid-line
    reader = SharedTape(path)
    Tape(path).add(record("b"))  # another run appends after the torn line, on a line of its own
    assert reader.get("b") is not None  # a miss re-reads what others appended
    assert reader.get("torn") is None and set(reader.used) == {"b"}
    assert path.read_text().splitlines()[-1].startswith('{"key": "b"')


def test_a_run_is_keyed_by_the_scenario_content_not_its_name(tmp_path):
    """Editing a scenario file gives its runs a new id, so stale results are never reused."""
    from socialsim.batch.sweeps import run_config, run_id_of

    path = tmp_path / "cafe.yaml"
    text = (DATA_DIR / "hobbs-cafe.yaml").read_text()
    path.write_text(text)
    params = {"scenario": str(path), "arch": "generic", "model": "rules", "steps": 1}
    before = run_id_of(run_config(params, 1))
    assert run_id_of(run_config(params, 1)) == before
    path.write_text(text.replace("step_minutes: 10", "step_minutes: 15"))
    assert run_id_of(run_config(params, 1)) != before


def test_a_judge_that_is_also_a_grid_points_actors_model_fails_before_any_run(tmp_path):
    path = write(tmp_path, "parameters:\n  arch: crsec\n  model: [rules, openai/gpt-4o-mini]\n"
                           "  judge: openai/gpt-4o-mini\n", "self-judge.yaml")
    with pytest.raises(SweepFileError, match="model=openai/gpt-4o-mini.*cannot be built: crsec judge "
                                             "'openai/gpt-4o-mini' is also an actors' model"):
        sweep(path, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_a_figure_of_an_outcome_no_run_records_fails_before_any_run_and_names_the_near_ones(tmp_path):
    path = write(tmp_path, "parameters:\n  arch: crsec\n  model: rules\n  steps: 1\n"
                           "figures:\n  - {outcome: rule_decisions, x: arch}\n  - {outcome: adopton, x: arch}\n",
                 "typo.yaml")
    with pytest.raises(SweepFileError) as info:
        sweep(path, tmp_path / "out", progress=False)
    message = str(info.value)
    assert message.startswith(f"{path}: figures.1.outcome: no run records 'adopton' (did you mean "
                              "'adoption[be quiet in public]' or 'adoption[no smoking indoors]' or "
                              "'adoption[tip after meals]'?); the runs record ")
    assert "rule_decisions" in message.split("the runs record ")[1]
    assert not (tmp_path / "out").exists()  # nor an empty sweep folder


def test_a_figure_of_what_an_architecture_measures_at_a_run_s_end_is_drawn_not_refused(tmp_path):
    """ASVO's separability is a column of the runs table (docs/asvo.md: so ASVO and w/o-ASVO runs compare
    there), but only the model reporters were known before the first run: its figure was refused."""
    grid = {"name": "sep", "seeds": [1], "steps": 4,
            "parameters": {"scenario": "school-micro", "arch": "asvo", "model": "rules", "use_svo": [True, False]},
            "figures": [{"outcome": "separability_silhouette", "x": "use_svo"}]}
    result = sweep(grid, tmp_path / "s", progress=False)
    assert not result.figure_problems
    assert result.runs["separability_silhouette"].notna().all()  # measured: 8 actions, 2 agents
    assert [p.name for p in (tmp_path / "s" / "figures").iterdir()] == ["separability_silhouette-by-use_svo.png"]
    with pytest.raises(SweepFileError, match="no run records 'separability_silhuette' \\(did you mean "
                                             "'separability_silhouette'"):
        sweep({**grid, "figures": [{"outcome": "separability_silhuette", "x": "use_svo"}]}, tmp_path / "t",
              progress=False)


def test_a_figure_of_an_outcome_no_completed_run_has_a_value_of_is_reported_not_drawn_empty(tmp_path, caplog):
    """ASVO's separability is not measured on 4 actions (2 agents, 2 steps): every run's is None, and an
    empty chart titled '0 replicates' was written as if it were a result."""
    grid = {"name": "sep", "seeds": [1], "steps": 2,
            "parameters": {"scenario": "school-micro", "arch": "asvo", "model": "rules", "use_svo": [True, False]},
            "figures": [{"outcome": "separability_silhouette", "x": "use_svo"},
                        {"outcome": "cooperation_rate", "x": "use_svo"}]}
    result = sweep(grid, tmp_path / "s", progress=False)
    assert result.runs["separability_silhouette"].isna().all()
    assert result.figure_problems == ["figures.0 (separability_silhouette by use_svo) not drawn: no completed run "
                                      "has a value of 'separability_silhouette' (e.g. a measurement none of them made)"]
    assert [p.name for p in (tmp_path / "s" / "figures").iterdir()] == ["cooperation_rate-by-use_svo.png"]


def test_a_refused_edit_of_a_sweep_leaves_its_folder_exporting_its_runs(tmp_path):
    """The refused grid's run ids were written to sweep.json first, so the export then held none of its runs."""
    grid = {"name": "one", "seeds": [1], "steps": 1, "parameters": {"arch": "generic", "model": "rules"}}
    first = sweep(grid, tmp_path / "s", progress=False, figures=False)
    kept = (tmp_path / "s" / "sweep.json").read_text()
    edited = {**grid, "parameters": {**grid["parameters"], "arch": ["generic", "crsec"]},
              "figures": [{"outcome": "adopton", "x": "arch"}]}
    with pytest.raises(SweepFileError, match="no run records 'adopton'"):
        sweep(edited, tmp_path / "s", progress=False)
    assert (tmp_path / "s" / "sweep.json").read_text() == kept
    assert list(export(tmp_path / "s", out=tmp_path / "x").runs["run_id"]) == first.executed


def test_a_figure_of_an_outcome_only_finished_runs_record_is_drawn_when_the_sweep_is_run_again(tmp_path):
    """The outcomes are those of every grid point, not only of the runs still to do."""
    grid = {"name": "two", "seeds": [1], "steps": 1,
            "parameters": {"arch": ["generic", "crsec"], "model": "rules"}}
    first = sweep(grid, tmp_path / "s", progress=False)
    again = sweep({**grid, "figures": [{"outcome": "adoption[no smoking indoors]", "x": "arch"}]},
                  tmp_path / "s", progress=False)
    assert len(again.skipped) == 2 and again.skipped == first.executed and not again.figure_problems
    assert [p.name for p in (tmp_path / "s" / "figures").iterdir()] == ["adoption_no_smoking_indoors_-by-arch.png"]


def test_an_edited_sweep_file_s_figures_replace_the_ones_an_earlier_version_of_it_drew(tmp_path):
    """A figure taken out of the sweep file stayed in figures/, drawn from the earlier grid's runs,
    beside the figures of the grid the runs table now holds."""
    grid = {"name": "drawn", "seeds": [1], "steps": 1, "parameters": {"arch": "generic", "model": "rules"},
            "figures": [{"outcome": "rule_decisions", "x": "arch"}]}
    sweep(grid, tmp_path / "s", progress=False)
    assert [p.name for p in (tmp_path / "s" / "figures").iterdir()] == ["rule_decisions-by-arch.png"]
    sweep({**grid, "steps": 2, "figures": [{"outcome": "llm_calls", "x": "arch"}]}, tmp_path / "s", progress=False)
    assert [p.name for p in (tmp_path / "s" / "figures").iterdir()] == ["llm_calls-by-arch.png"]
    sweep({**grid, "figures": []}, tmp_path / "s", progress=False)  # none asked for any more
    assert not (tmp_path / "s" / "figures").exists()  # nor an empty folder where they were


@pytest.mark.figures
def test_a_sweep_s_run_and_a_sweep_without_figures_leave_no_empty_figures_folder(tmp_path):
    """A sweep's run draws no figure, yet kept an empty figures/ folder, as did a sweep whose
    figures none could be drawn; a run on its own keeps its figures."""
    from socialsim.model.runner import RunConfig, run

    grid = {"name": "bare", "seeds": [1], "steps": 1, "parameters": {"arch": "generic", "model": "rules"},
            "figures": [{"outcome": "model", "x": "arch"}]}  # a text: not drawn
    result = sweep(grid, tmp_path / "s", progress=False)
    run_dir = tmp_path / "s" / "runs" / result.runs["run_id"].iloc[0]
    assert (run_dir / "report.md").is_file() and not (run_dir / "figures").exists()
    assert len(result.figure_problems) == 1 and not (tmp_path / "s" / "figures").exists()
    alone = run(RunConfig(arch="generic", model="rules", steps=1, rng=1), tmp_path / "r", progress=False)
    assert sorted(p.name for p in (alone.run_dir / "figures").iterdir()) == ["interactions.png", "llm_usage.png"]


def test_a_figure_that_cannot_be_drawn_is_reported_and_the_others_are_still_drawn(tmp_path, capsys, caplog):
    """After the runs, a figure of an outcome that is not a number cannot be drawn: a warning, not
    a traceback that hides the results; said once (the command printed the logged warning again)."""
    from socialsim.cli import main

    path = write(tmp_path, "seeds: [1]\nsteps: 1\nparameters:\n  arch: generic\n  model: [rules]\n"
                           "figures:\n  - {outcome: model, x: arch}\n  - {outcome: rule_decisions, x: arch}\n",
                 "words.yaml")
    assert main(["sweep", str(path), "--out", str(tmp_path / "s"), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "runs: 1 (1 run now, 0 already done, 0 not completed)" in out
    warned = [r.getMessage() for r in caplog.records if "not drawn" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith(f"{path}: figures.0 (model by arch) not drawn: ")
    assert "not drawn" not in err and "Traceback" not in err
    assert [p.name for p in (tmp_path / "s" / "figures").iterdir()] == ["rule_decisions-by-arch.png"]
    assert (tmp_path / "s" / "runs.parquet").is_file()


def test_a_run_stopped_by_its_budget_is_redone_and_a_raised_budget_pays_only_for_the_calls_not_yet_made(
        tmp_path, monkeypatch, caplog):
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as server:
        spec = {"name": "budget", "seeds": [1, 2], "api_base": server.api_base, "max_calls": 15,
                "parameters": {"arch": "generic", "model": "openai/fake-model", "steps": 3}}
        stopped = sweep(spec, tmp_path / "s", progress=False, preflight=False)
        assert [status.startswith("stopped by budget: max_calls=15 reached") for status in stopped.runs["status"]] == [
            True, True]
        assert (stopped.runs["live_calls"] == 15).all() and (stopped.runs["steps_done"] < 3).all()
        assert len(stopped.failed) == 2 and not any(is_done(tmp_path / "s", i) for i in stopped.runs["run_id"])
        before = len(server.requests)
        with caplog.at_level(logging.WARNING, logger="socialsim"):
            done = sweep({**spec, "max_calls": 100}, tmp_path / "s", progress=False, preflight=False)
        assert "the tape did not hold" not in caplog.text  # it follows its first attempt
        # the budget is not part of a run's identity: the same runs, continued
        assert sorted(done.executed) == sorted(stopped.runs["run_id"]) and not done.skipped
        assert (done.runs["status"] == "completed").all() and (done.runs["steps_done"] == 3).all()
        # the calls the stopped runs made come from the shared tape; only the rest reach the server
        assert (done.runs["live_calls"] == done.runs["llm_calls"] - stopped.runs["live_calls"]).all()
        assert len(server.requests) - before == done.runs["live_calls"].sum() > 0


def test_the_sweep_command_says_why_runs_did_not_complete_and_how_they_go_on(tmp_path, monkeypatch, capsys):
    from socialsim.cli import main
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as server:
        (tmp_path / "s.yaml").write_text(f"name: b\nseeds: [1, 2]\nsteps: 3\napi_base: {server.api_base}\n"
                                         "max_calls: 15\nparameters: {arch: generic, model: openai/fake-model}\n")
        assert main(["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "s"), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert (f"not completed: 2 stopped by budget: max_calls=15 reached (listed in {tmp_path / 's' / 'runs.csv'}). "
            "The same sweep command goes on with them, their recorded calls free from the shared tape; a budget "
            "stopped some: raise max_cost or max_calls in the sweep file") in err


def test_a_stopped_run_the_sweep_goes_on_with_says_so_when_it_no_longer_follows_its_first_attempt(
        tmp_path, monkeypatch, caplog):
    """As a resumed run does (runner.off_tape_told): a step the first attempt completed asking calls the
    shared tape lacks means the code, the scenario or the settings changed since; those calls are paid
    again, and that used to go unsaid in a sweep."""
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as server:
        spec = {"name": "budget", "seeds": [1], "api_base": server.api_base, "max_calls": 15,
                "parameters": {"arch": "generic", "model": "openai/fake-model", "steps": 3}}
        stopped = sweep(spec, tmp_path / "s", progress=False, preflight=False)
        assert stopped.runs["status"].iloc[0].startswith("stopped by budget") and stopped.runs["steps_done"].iloc[0] == 1
        tape = tmp_path / "s" / "tape.jsonl"  # step 1's prompts as changed code would ask them
        records = [json.loads(line) for line in tape.read_text().splitlines()]
        tape.write_text("".join(json.dumps({**r, "key": "changed" + r["key"]} if r["step"] == 1 else r) + "\n"
                                for r in records))
        with caplog.at_level(logging.WARNING, logger="socialsim"):
            done = sweep({**spec, "max_calls": 100}, tmp_path / "s", progress=False, preflight=False)
    assert (done.runs["status"] == "completed").all()
    warned = [r.getMessage() for r in caplog.records if "the tape did not hold" in r.getMessage()]
    run_id = done.runs["run_id"].iloc[0]
    assert warned == ["step 1 made 10 calls the tape did not hold, though the recording went on to step 2: the "
                      f"code, scenario or settings differ from the recording's, so run {run_id}, going on from its "
                      "first attempt, no longer follows it, and pays for calls it had recorded"]
    (tmp_path / "s" / "runs" / run_id / "tape.jsonl").write_text("not a tape\n{}\n")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert earlier_attempt_through(tmp_path / "s" / "runs" / run_id) is None  # advice only, said
    assert "cannot read it" in caplog.text and "is not checked" in caplog.text


@pytest.mark.parametrize(("text", "name", "message"), [
    (None, "none.yaml", "no such sweep file"),
    ("name: x\n", "sweep.json", "expected a .yaml, .yml or .toml sweep file"),
    ("- name: x\n", "list.yml", "expected a mapping of sweep fields at the top level"),
    ("name = [\n", "broken.toml", "not valid TOML: "),
])
def test_a_sweep_file_that_is_missing_misnamed_or_not_a_mapping_is_named(tmp_path, text, name, message):
    path = tmp_path / name if text is None else write(tmp_path, text, name)
    with pytest.raises(SweepFileError, match="^" + re.escape(f"{path}: {message}")):
        load_sweep(path)


def test_a_directory_given_as_the_sweep_file_is_called_a_directory(tmp_path, capsys):
    """``socialsim sweep /tmp`` said "no such sweep file" of a folder that exists."""
    from socialsim.cli import main

    with pytest.raises(SweepFileError, match="^" + re.escape(f"{tmp_path}: a directory, not a sweep file")):
        load_sweep(tmp_path)
    assert main(["sweep", str(tmp_path), "--no-progress"]) == 2
    assert capsys.readouterr().err == (f"socialsim: error: {tmp_path}: a directory, not a sweep file "
                                       "(give its .yaml, .yml or .toml file)\n")


def test_a_scenario_file_beside_the_sweep_file_is_found_from_any_folder(tmp_path, monkeypatch):
    from socialsim.scenarios.loader import DATA_DIR

    study = tmp_path / "study"
    study.mkdir()
    (study / "my-cafe.yaml").write_text((DATA_DIR / "hobbs-cafe.yaml").read_text())
    path = write(study, "parameters:\n  scenario: [my-cafe.yaml, hobbs-cafe]\n  arch: generic\n", "s.yaml")
    monkeypatch.chdir(tmp_path)  # not the sweep file's folder
    spec = load_sweep(path)
    assert spec.parameters["scenario"] == [str(study / "my-cafe.yaml"), "hobbs-cafe"]
    assert spec.name == "s"  # a file without a name is named after itself


def test_a_shared_tape_skips_a_torn_line_left_mid_file_by_an_older_version_and_reads_on(tmp_path, caplog):
    """Before appends cut a torn tail, a killed writer's half line could end up mid-file: the
    lines after it are still read, the torn one is skipped with a warning naming the tape, and
    later appends are read from where the reader stopped, without warnings."""
    from dataclasses import asdict

    from socialsim.batch.sweeps import SharedTape
    from socialsim.llm.tape import Tape, TapeRecord, append_line

    def record(key):
        return TapeRecord(key, "m", "Op", 1, 1, [{"role": "user", "content": "hi"}], {}, "ok", 1, 1, 0.0, 0.0)

    path = tmp_path / "tape.jsonl"
    Tape(path).add(record("a"))
    whole = path.read_text()
    Tape(path).add(record("b"))
    path.write_text(whole + '{"key": "torn", "mod\n' + path.read_text()[len(whole):])  # a, torn, b
    with caplog.at_level("WARNING", logger="socialsim.batch"):
        reader = SharedTape(path)
    assert reader.get("a") is not None and reader.get("b") is not None
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: skipping a torn tape line (a run killed while writing)"]
    caplog.clear()
    for key in ("c", "d", "e"):  # one at a time: each miss re-reads only what was appended since
        append_line(path, json.dumps(asdict(record(key))))  # what another run's tape writes
        assert reader.get(key).key == key
    assert not caplog.records and list(reader.used) == ["a", "b", "c", "d", "e"]


def test_a_shared_tape_skips_a_line_with_a_field_of_another_type(tmp_path):
    """A null ``raw`` (a hand edit) was kept and stopped the sweep with an AttributeError."""
    from dataclasses import asdict

    from socialsim.batch.sweeps import SharedTape
    from socialsim.llm.tape import TapeRecord

    def line(key, raw):
        return json.dumps({**asdict(TapeRecord(key, "m", "Op", 1, 1, [], {}, "ok", 1, 1, 0.0, 0.0)), "raw": raw})

    path = tmp_path / "tape.jsonl"
    path.write_text(line("a", None) + "\n" + line("b", "2") + "\n")
    reader = SharedTape(path)
    assert reader.get("a") is None and reader.get("b").raw == "2"


def test_a_sweep_whose_runs_are_all_done_asks_nothing_of_their_models(tmp_path, monkeypatch):
    """Checking the models is for the runs still to do: a finished sweep opened again (to redraw
    its figures, to export) does not need its provider's key or endpoint any more."""
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as server:
        spec = {"name": "done", "seeds": [1], "api_base": server.api_base, "steps": 1,
                "parameters": {"arch": "generic", "model": "openai/fake-model"}}
        first = sweep(spec, tmp_path / "s", progress=False)
    monkeypatch.delenv("OPENAI_API_KEY")
    again = sweep({**spec, "figures": [{"outcome": "llm_calls", "x": "arch"}]}, tmp_path / "s", progress=False)
    assert again.skipped == first.executed and not again.executed
    with pytest.raises(ModelUnavailable, match="needs OPENAI_API_KEY"):  # a run still to do is checked
        sweep({**spec, "seeds": [1, 2]}, tmp_path / "s", progress=False)


def test_a_sweeps_check_of_its_models_retries_as_its_runs_will(tmp_path, monkeypatch):
    """A sweep's runs retry a failed call once; its check before the first run did not, so one
    transient 500 refused the whole sweep."""
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt, fail_first=1) as flaky:
        spec = {"name": "flaky", "seeds": [1], "api_base": flaky.api_base, "steps": 1,
                "parameters": {"arch": "generic", "model": "openai/fake-model"}}
        result = sweep(spec, tmp_path / "s", progress=False, figures=False)
    assert result.runs["status"].tolist() == ["completed"] and flaky.injected["500"] == 1


def test_a_sweep_hands_mesa_batch_run_its_grid_seeds_limits_and_process_count(tmp_path, monkeypatch):
    import mesa.batchrunner

    seen = {}
    monkeypatch.setattr(mesa.batchrunner, "batch_run", lambda model_cls, **kw: seen.update(kw, cls=model_cls))
    spec = {"name": "args", "seeds": [5, 6], "steps": 3, "processes": 2, "max_cost": 0.5, "max_calls": 7,
            "max_concurrency": 9, "rpm": 90, "tpm": 3000, "api_base": "http://127.0.0.1:9/v1",
            "parameters": {"arch": "crsec", "model": "rules", "enable_chat": [True, False]}}
    result = sweep(spec, tmp_path / "s", progress=False, preflight=False)
    (command,) = seen["parameters"].pop("command")  # the command its runs follow, gone once it ends
    assert str(os.getpid()) in command and not (tmp_path / "s" / ".command").exists()
    assert seen["cls"] is SweepModel and seen["rng"] == [None] and seen["max_steps"] == 4
    assert (seen["number_processes"], seen["data_collection_period"], seen["display_progress"]) == (2, -1, False)
    assert seen["parameters"] == {"arch": ["crsec"], "model": ["rules"], "enable_chat": [True, False], "steps": [3],
                                  "sweep_dir": [str(tmp_path / "s")], "max_cost": [0.5], "max_calls": [7],
                                  "api_base": ["http://127.0.0.1:9/v1"], "max_concurrency": [9], "price": [None],
                                  "rpm": [45.0], "tpm": [1500.0],  # each of the 2 processes its half of the quota
                                  "deployments": [None], "deployments_left_out": [()], "deployments_checked": [None],
                                  "pool_parent": [os.getpid()], "replicate_seed": [5, 6]}
    assert list(seen["parameters"])[-1] == "replicate_seed"  # innermost: side by side, a grid point's other seeds
    # the settings every run shares, as a Dask task is handed them (one helper builds both)
    task = plan(validate_sweep(spec))[0]
    shared = {k: v for k, v in task.kwargs(tmp_path / "s", validate_sweep(spec), command, processes=2).items()
              if k not in task.params and k != "model"}
    assert {k: [v] for k, v in shared.items()} == {k: seen["parameters"].get(k) for k in shared} | {"command": [command]}
    sweep(spec, tmp_path / "s", processes=1, progress=True, preflight=False)  # the argument wins over the file
    assert (seen["number_processes"], seen["display_progress"]) == (1, True)
    assert (seen["parameters"]["rpm"], seen["parameters"]["tpm"]) == ([90.0], [3000.0])  # one process: all of it
    assert seen["parameters"]["command"] != [command]  # each command its own
    assert "pool_parent" not in seen["parameters"]  # one process: no pool, no worker to stop
    # nothing ran: every planned run is listed, as not run
    assert result.runs[["status", "steps_done", "live_calls", "live_cost_usd"]].drop_duplicates().values.tolist() == [
        ["not run", 0, 0, 0.0]]
    assert len(result.runs) == 4 and len(result.failed) == 4


def test_a_planned_run_hands_its_sweep_model_the_grid_point_its_model_and_the_sweeps_limits(tmp_path):
    """What a Dask task builds its run from: every other test compared it with itself."""
    from socialsim.batch.sweepfile import SweepSpec

    spec = SweepSpec.model_validate({"seeds": [5], "steps": 2, "max_cost": 0.5, "max_calls": 7, "max_concurrency": 9,
                           "api_base": "http://127.0.0.1:9/v1", "price": [1.0, 2.0], "deployments": "d.yaml",
                           "rpm": 60, "parameters": {"arch": "crsec", "model": "rules", "enable_chat": False}})
    (planned,) = plan(spec)
    assert planned.kwargs(tmp_path, spec, "host 1 2") == {
        **planned.params, "model": "rules", "sweep_dir": str(tmp_path), "max_cost": 0.5, "max_calls": 7,
        "api_base": "http://127.0.0.1:9/v1", "max_concurrency": 9, "rpm": 60.0, "tpm": None, "price": spec.price,
        "deployments": "d.yaml", "command": "host 1 2", "deployments_left_out": (), "deployments_checked": None}
    # a LocalCluster's task: its worker's share of the quota (one of 4)
    assert (planned.kwargs(tmp_path, spec, processes=4)["rpm"], planned.kwargs(tmp_path, spec, processes=4)["tpm"]) \
        == (15.0, None)
    assert planned.params["enable_chat"] is False and planned.kwargs(tmp_path, spec)["command"] is None
    assert planned.kwargs(tmp_path, spec, left_out=frozenset({8, 1}))["deployments_left_out"] == (1, 8)  # sorted: a set gives (8, 1)
    assert planned.kwargs(tmp_path, spec, checked="0123abcd")["deployments_checked"] == "0123abcd"


def test_a_sweep_naming_no_model_hands_mesa_the_default_one(tmp_path, monkeypatch):
    import mesa.batchrunner

    from socialsim.llm.routing import default_model

    seen = {}
    monkeypatch.setattr(mesa.batchrunner, "batch_run", lambda model_cls, **kw: seen.update(kw))
    sweep({"seeds": [1], "steps": 1, "parameters": {"arch": "generic"}}, tmp_path / "s", progress=False,
          preflight=False)
    assert seen["parameters"]["model"] == [default_model(None)]


def test_a_sweep_without_a_folder_goes_to_sweeps_slash_its_name_and_can_skip_its_figures(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = {"name": "nameless", "seeds": [1], "steps": 1, "parameters": {"arch": "generic", "model": "rules"},
            "figures": [{"outcome": "rule_decisions", "x": "arch"}]}
    result = sweep(spec, progress=False, figures=False)
    assert result.sweep_dir == Path("sweeps") / "nameless" and (tmp_path / "sweeps" / "nameless" / "runs.csv").is_file()
    assert not (tmp_path / "sweeps" / "nameless" / "figures").exists()


def test_two_grid_points_that_are_the_same_run_are_refused_before_any_run(tmp_path):
    spec = {"name": "twice", "parameters": {"arch": "crsec", "model": "rules", "enable_chat": [True, True]}}
    with pytest.raises(ValueError) as raised:
        sweep(spec, tmp_path / "s", progress=False)
    assert str(raised.value) == (
        "two grid points resolve to the same run (arch=crsec, model=rules, enable_chat=True and arch=crsec, "
        "model=rules, enable_chat=True: a value listed twice, a parameter equal to its default listed beside it, or "
        "two scenario files of the same content); remove the duplicate values")
    assert not (tmp_path / "s").exists()  # nor an empty sweep folder
    # a copy of a scenario file under another name is the same scenario: the message names both
    (tmp_path / "mine.yaml").write_text((DATA_DIR / "hobbs-cafe.yaml").read_text())
    copied = {"name": "copy", "steps": 1,
              "parameters": {"scenario": ["hobbs-cafe", str(tmp_path / "mine.yaml")], "arch": "generic"}}
    with pytest.raises(ValueError, match=f"same run \\(scenario=hobbs-cafe, arch=generic, steps=1 and scenario="
                                         f"{tmp_path / 'mine.yaml'}, arch=generic, steps=1: "):
        sweep(copied, tmp_path / "c", progress=False)


def test_a_run_that_fails_is_recorded_with_its_error_and_the_sweep_goes_on(tmp_path, monkeypatch, caplog):
    original = SocietyModel.step

    def step(self):
        if self.run_config.rng == 2 and self.steps == 2:  # Mesa counts the step before running it
            raise RuntimeError("boom")
        original(self)

    monkeypatch.setattr(SocietyModel, "step", step)
    spec = {"name": "fails", "seeds": [1, 2], "steps": 3, "parameters": {"arch": "generic", "model": "rules"}}
    with caplog.at_level("ERROR", logger="socialsim.batch"):
        result = sweep(spec, tmp_path / "s", progress=False)
    runs = result.runs.set_index("rng")
    assert runs.loc[1, "status"] == "completed" and runs.loc[2, "status"] == "failed: RuntimeError: boom"
    assert runs.loc[2, "steps_done"] == 1 and not is_done(tmp_path / "s", runs.loc[2, "run_id"])
    assert [r.getMessage() for r in caplog.records if "failed at step" in r.getMessage()] == [
        f"run {runs.loc[2, 'run_id']} failed at step 2"]
    monkeypatch.setattr(SocietyModel, "step", original)  # fixed: the failed run is redone, the other kept
    again = sweep(spec, tmp_path / "s", progress=False)
    assert again.executed == [runs.loc[2, "run_id"]] and (again.runs["status"] == "completed").all()


def test_a_sweep_runs_config_names_its_run_its_live_cost_and_its_engine(tmp_path):
    from socialsim.llm.engines import NOTES, RULES
    from socialsim.scenarios.loader import scenario_path

    result = sweep({"name": "meta", "seeds": [1], "steps": 1, "parameters": {"arch": "generic", "model": "rules"}},
                   tmp_path / "s", progress=False)
    run_id = result.runs["run_id"][0]
    assert re.fullmatch(r"run-[0-9a-f]{12}", run_id)
    meta = json.loads((tmp_path / "s" / RUNS / run_id / "config.json").read_text())
    assert (meta["run_id"], meta["live_cost_usd"], meta["engine_notes"]) == (run_id, 0.0, [NOTES[RULES]])
    kept = (tmp_path / "s" / RUNS / run_id / "scenario.yaml").read_bytes()  # to replay from any folder
    assert kept == scenario_path("hobbs-cafe").read_bytes()


def test_a_sweeps_routes_send_an_operation_to_another_model(tmp_path, monkeypatch):
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as server:
        spec = {"name": "routes", "seeds": [1], "steps": 2, "api_base": server.api_base,
                "parameters": {"arch": "generic", "model": "openai/fake-model", "routes": {"ComposeChat": "rules"}}}
        result = sweep(spec, tmp_path / "s", progress=False, preflight=False)
    calls = pd.read_parquet(tmp_path / "s" / RUNS / result.runs["run_id"][0] / "llm_calls.parquet")
    by_op = calls.groupby("op")["model"].unique().apply(list).to_dict()
    assert by_op["ChooseAction"] == ["openai/fake-model"]
    assert by_op["ComposeChat"] == ["rules"] and len(server.requests) == result.runs["live_calls"][0]


def test_seeds_from_a_first_seed_and_a_count_or_the_first_seed_alone():
    from socialsim.batch.sweepfile import validate_sweep

    assert validate_sweep({"seed": 10, "replicates": 3}).seed_list() == [10, 11, 12]
    assert validate_sweep({"seed": 7}).seed_list() == [7]
    assert validate_sweep({"seeds": [4, 2]}).seed_list() == [4, 2]


def test_a_table_cell_holds_a_mapping_or_list_as_sorted_json():
    from socialsim.batch.sweepfile import encode

    assert encode({"b": 1, "a": Path("x")}) == '{"a": "x", "b": 1}'
    assert [encode(v) for v in (None, "s", 3, 0.5, True)] == [None, "s", 3, 0.5, True]
    assert encode([2, 1]) == "[2, 1]"


def test_a_sweep_files_values_are_shown_when_they_help(tmp_path):
    """A wrong value is shown; a whole section is not, nor a value our message already gives."""
    path = write(tmp_path, 'replicates: three\nparameters:\n  steps: [1, "two"]\nfigures: {x: 1}\n')
    with pytest.raises(SweepFileError) as raised:
        load_sweep(path)
    lines = str(raised.value).splitlines()[1:]
    assert "  replicates: Input should be a valid integer, unable to parse string as an integer (got 'three')" in lines
    assert "  parameters.steps: expected a whole number >= 1, got 'two'" in lines
    assert "  figures: Input should be a valid list" in lines


def test_a_single_scenario_file_beside_the_sweep_file_stays_a_single_value(tmp_path):
    from socialsim.scenarios.loader import DATA_DIR

    (tmp_path / "cafe.yaml").write_text((DATA_DIR / "hobbs-cafe.yaml").read_text())
    spec = load_sweep(write(tmp_path, "parameters:\n  scenario: cafe.yaml\n", "one.yaml"))
    assert spec.parameters["scenario"] == str(tmp_path / "cafe.yaml") and spec.swept() == []


def test_a_run_keeps_its_id_when_the_sweep_file_lists_its_parameters_in_another_order():
    from socialsim.batch.sweeps import run_config, run_id_of

    one = {"arch": "crsec", "model": "rules", "enable_chat": False, "temptation": 0.2, "steps": 2}
    other = dict(reversed(list(one.items())))
    assert run_id_of(run_config(one, 1)) == run_id_of(run_config(other, 1))
    assert run_id_of(run_config({**one, "temptation": 0.3}, 1)) != run_id_of(run_config(one, 1))


def test_a_sweeps_cost_limit_and_concurrency_reach_each_run(tmp_path, monkeypatch):
    """A priced model (litellm's price for gpt-4o-mini) behind the test server: a budget below one
    call's worst case stops the run before it spends anything; a budget for about a step and a half
    stops it in its second step, and the spend is recorded to the fraction of a cent."""
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as server:
        spec = {"name": "cost", "seeds": [1], "steps": 3, "api_base": server.api_base, "max_cost": 1e-9,
                "max_concurrency": 3, "parameters": {"arch": "generic", "model": "openai/gpt-4o-mini"}}
        broke = sweep(spec, tmp_path / "a", progress=False, preflight=False)
        assert broke.runs["status"][0].startswith("stopped by budget: max_cost=$1e-09 reached")
        assert broke.runs["live_calls"][0] == 0 and not server.requests
        some = sweep({**spec, "max_cost": 0.001}, tmp_path / "b", progress=False, preflight=False)
    row = some.runs.iloc[0]
    assert row["status"].startswith("stopped by budget: max_cost=$0.001 reached") and row["steps_done"] < 3
    # what the run paid, the cut step's calls included, to the fraction of a cent; never past the budget
    assert row["cost_usd"] <= row["live_cost_usd"] <= 0.001 and 0 < row["live_cost_usd"] < 0.01
    model = SweepModel("hobbs-cafe", arch="generic", model="rules", steps=1, sweep_dir=str(tmp_path / "c"), rng=1,
                       max_concurrency=3)
    assert model.llm.max_concurrency == 3


def test_a_sweep_run_continued_with_resume_still_says_what_it_paid(tmp_path, monkeypatch):
    """``socialsim run --resume`` on a sweep's budget-stopped run: its config.json (which the export
    reads) keeps saying what that execution paid, instead of losing the sweep's cost column."""
    from socialsim.cli import main
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as server:
        spec = {"name": "cost", "seeds": [1], "steps": 2, "api_base": server.api_base, "max_cost": 0.0005,
                "parameters": {"arch": "generic", "model": "openai/gpt-4o-mini"}}
        stopped = sweep(spec, tmp_path, progress=False, preflight=False)
        run_id = stopped.runs["run_id"][0]
        assert stopped.runs["status"][0].startswith("stopped by budget")
        asked = len(server.requests)
        assert main(["run", "--resume", str(tmp_path / RUNS / run_id), "--max-cost", "0.01", "--no-progress"]) == 0
        probes = [r for r in server.requests[asked:] if r["messages"][-1]["content"] == "Say OK."]
        continued = len(server.requests) - asked - len(probes)  # the resume's pre-flight asks once
    assert len(probes) == 1
    meta = json.loads((tmp_path / RUNS / run_id / "config.json").read_text())
    assert meta["status"] == "completed" and meta["live_calls"] == continued > 0
    calls = pd.read_parquet(tmp_path / RUNS / run_id / "llm_calls.parquet")
    paid = calls.loc[calls["live_calls"] > 0, "cost_usd"].sum()
    assert 0 < meta["live_cost_usd"] < calls["cost_usd"].sum()  # only the calls this execution made
    assert meta["live_cost_usd"] == pytest.approx(paid, rel=1e-6)
    assert export(tmp_path).runs["live_cost_usd"].tolist() == [meta["live_cost_usd"]]


def test_a_sweep_reaches_dask_by_a_scheduler_address_or_a_local_cluster_of_its_own(tmp_path, monkeypatch):
    import distributed
    from distributed import Client, LocalCluster, get_task_stream

    spec = {"name": "d", "seeds": [1, 2], "steps": 1, "parameters": {"arch": "generic", "model": "rules"}}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as watcher, get_task_stream(watcher) as stream:
        by_address = sweep(spec, tmp_path / "a", scheduler=cluster.scheduler_address, progress=False)
    assert len(dask_tasks(stream)) == 2 and (by_address.runs["status"] == "completed").all()

    built = []

    def in_process_cluster(**kw):  # --cluster local, with its workers in this process (a test's speed)
        built.append(kw)
        return LocalCluster(**{k: v for k, v in kw.items() if k not in ("host", "processes")}, processes=False)

    monkeypatch.setattr(distributed, "LocalCluster", in_process_cluster)
    with socket.socket() as taken, warnings.catch_warnings(record=True) as warned:  # dask's default port in use:
        warnings.simplefilter("always")  # its own cluster was moved off it with a warning
        with contextlib.suppress(OSError):  # taken already (another cluster): as good
            taken.bind(("", 8787))
            taken.listen()
        own = sweep({**spec, "processes": 2}, tmp_path / "b", cluster="local", progress=False)
    assert not [w for w in warned if "8787" in str(w.message)]
    assert [(kw["n_workers"], kw["threads_per_worker"], kw["processes"]) for kw in built] == [(2, 1, True)]
    assert (own.runs["status"] == "completed").all()
    with pytest.raises(ValueError, match="unknown cluster 'remote'"):
        sweep(spec, tmp_path / "c", cluster="remote", progress=False)


def test_a_local_cluster_s_workers_end_by_themselves_when_the_sweep_is_done(tmp_path, caplog):
    """Every --cluster local sweep ended with distributed's "Worker process still alive after 4.0
    seconds, killing": a worker that has run socialsim takes longer to end on a busy machine. Its
    workers here take 5 s to exit whatever the machine (an exit handler of a worker preload)."""
    import dask

    preload = tmp_path / "slow_exit.py"
    preload.write_text("import atexit, time\n\n\ndef dask_setup(worker):\n    atexit.register(time.sleep, 5)\n")
    spec = {"name": "own", "seeds": [1], "steps": 1, "parameters": {"arch": "generic", "model": "rules"}}
    with dask.config.set({"distributed.worker.preload": [str(preload)]}), \
            caplog.at_level(logging.WARNING, logger="distributed"):
        result = sweep(spec, tmp_path / "s", cluster="local", progress=False, figures=False)
    assert (result.runs["status"] == "completed").all()
    assert not [r.getMessage() for r in caplog.records if "still alive" in r.getMessage()]


def test_a_nested_sweep_field_is_named_by_its_path_and_a_non_mapping_by_the_top_level():
    from socialsim.batch.sweepfile import validate_sweep

    with pytest.raises(SweepFileError) as raised:
        validate_sweep({"parameters": {"arch": "generic"}, "figures": [{"outcome": "", "x": "arch"}]}, source="s.yaml")
    assert str(raised.value) == ("s.yaml: invalid sweep file\n  figures.0.outcome: String should have at least "
                                 "1 character (got '')")
    with pytest.raises(SweepFileError, match=r"^sweep: invalid sweep file\n  \(top level\): Input should be a valid"):
        validate_sweep(["not", "a", "mapping"])


def test_a_sweep_without_a_model_uses_the_default_and_checks_a_routed_model_before_any_run(tmp_path, monkeypatch):
    monkeypatch.setenv("SOCIALSIM_MODEL", "rules")
    spec = {"name": "default", "seeds": [1], "steps": 1, "parameters": {"arch": "generic"}}
    result = sweep(spec, tmp_path / "a", progress=False)
    meta = json.loads((tmp_path / "a" / RUNS / result.runs["run_id"][0] / "config.json").read_text())
    assert meta["config"]["model"] == "rules"
    assert (result.runs["status"] == "completed").all() and result.runs["llm_calls"].tolist() == [0]
    routed = {**spec, "parameters": {"arch": "generic", "routes": {"ComposeChat": "nosuchprovider/chat"}}}
    with pytest.raises(ModelUnavailable, match="unknown model 'nosuchprovider/chat'"):
        sweep(routed, tmp_path / "b", progress=False)
    assert not (tmp_path / "b").exists()
    misspelt = {**spec, "parameters": {"arch": "generic", "routes": {"ComposChat": "rules"}}}
    with pytest.raises(SweepFileError, match="route to no operation or module: 'ComposChat' \\(did you mean "
                                             "'ComposeChat'"):  # before any run, not a silent no-op route
        sweep(misspelt, tmp_path / "c", progress=False)
    assert not (tmp_path / "c").exists()


def test_a_judge_of_a_run_still_to_do_is_checked_when_a_finished_run_of_its_grid_point_came_first(
        tmp_path, monkeypatch):
    """With figures, finished runs are built for their outcomes; a later seed of the same grid point
    must still have its models checked (it was skipped as already seen)."""
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    spec = {"name": "judged", "seeds": [1], "steps": 1, "figures": [{"outcome": "llm_calls", "x": "arch"}],
            "parameters": {"arch": "crsec", "model": "rules", "judge": "openai/fake-judge"}}
    with FakeOpenAIServer(policy=by_prompt) as server:
        first = sweep({**spec, "api_base": server.api_base}, tmp_path / "s", progress=False)
        assert (first.runs["status"] == "completed").all()
        monkeypatch.delenv("OPENAI_API_KEY")
        with pytest.raises(ModelUnavailable, match="'openai/fake-judge' needs OPENAI_API_KEY"):
            sweep({**spec, "api_base": server.api_base, "seeds": [1, 2]}, tmp_path / "s", progress=False)


def test_ctrl_c_stops_a_sweep_with_its_runs_table_and_the_same_command_goes_on(tmp_path, monkeypatch, capsys):
    """Ctrl-C (or SIGTERM) used to end a sweep in a traceback, with no runs table for what was done."""
    from socialsim.cli import main

    original = SocietyModel.step

    def step(self):
        if self.run_config.rng == 2 and self.steps == 1:
            raise KeyboardInterrupt
        original(self)

    monkeypatch.setattr(SocietyModel, "step", step)
    (tmp_path / "s.yaml").write_text("name: ctrlc\nseeds: [1, 2]\nsteps: 2\nparameters: {arch: generic, model: rules}\n")
    argv = ["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "s"), "--no-progress"]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"sweep interrupted: 1 of 2 runs completed (listed in {tmp_path / 's' / 'runs.csv'}); the same command " \
           "goes on from there" in err
    runs = pd.read_csv(tmp_path / "s" / "runs.csv").set_index("rng")
    assert runs.loc[1, "status"] == "completed" and runs.loc[2, "status"] == "not run"
    monkeypatch.setattr(SocietyModel, "step", original)
    assert main(argv) == 0
    assert "runs: 2 (1 run now, 1 already done, 0 not completed)" in capsys.readouterr().out


def test_a_sweep_interrupted_before_its_runs_says_so(tmp_path, monkeypatch, capsys):
    from socialsim.batch import sweeps
    from socialsim.cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweeps, "check_grid", interrupted)
    (tmp_path / "s.yaml").write_text("name: early\nseeds: [1]\nsteps: 1\nparameters: {arch: generic, model: rules}\n")
    assert main(["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "s"), "--no-progress"]) == 130
    assert capsys.readouterr().err.strip() == "socialsim: sweep interrupted before its first run"
    # an earlier grid's runs table there is not what this command did ("1 of 1 runs completed" it said)
    monkeypatch.undo()
    sweep(load_sweep(tmp_path / "s.yaml"), tmp_path / "s", progress=False)
    (tmp_path / "s.yaml").write_text("name: early\nseeds: [1, 2]\nsteps: 1\nparameters: {arch: generic, model: rules}\n")
    monkeypatch.setattr(sweeps, "check_grid", interrupted)
    assert main(["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "s"), "--no-progress"]) == 130
    assert capsys.readouterr().err.strip() == "socialsim: sweep interrupted before its first run"


def test_a_run_stopped_by_a_provider_outage_says_so_and_is_redone(tmp_path, monkeypatch):
    from socialsim.llm.gateway import ProviderOutage

    original = SocietyModel.step

    def step(self):
        if self.run_config.rng == 2:
            raise ProviderOutage("5 calls in a row failed after their retries")
        original(self)

    monkeypatch.setattr(SocietyModel, "step", step)
    spec = {"name": "outage", "seeds": [1, 2], "steps": 2, "parameters": {"arch": "generic", "model": "rules"}}
    runs = sweep(spec, tmp_path / "s", progress=False).runs.set_index("rng")
    assert runs.loc[2, "status"] == "stopped by provider outage: 5 calls in a row failed after their retries"
    assert runs.loc[1, "status"] == "completed"
    monkeypatch.setattr(SocietyModel, "step", original)
    assert sweep(spec, tmp_path / "s", progress=False).executed == [runs.loc[2, "run_id"]]


def test_a_sweeps_budget_on_a_model_without_a_price_is_refused_unless_the_file_gives_one(tmp_path, monkeypatch):
    """A sweep's max_cost on a model litellm cannot price was silently not kept (46 calls on a budget of
    a millionth of a dollar); a sweep file had no way to give a price."""
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as server:
        spec = {"name": "unpriced", "seeds": [1], "steps": 2, "api_base": server.api_base, "max_cost": 1e-6,
                "parameters": {"arch": "generic", "model": "hosted_vllm/no-price-known"}}
        with pytest.raises(SweepFileError, match=r": max_cost: 1e-06 cannot be kept: hosted_vllm/no-price-known "
                                                 r"has no price in litellm's cost map; give price: \[IN, OUT\]"):
            sweep(spec, tmp_path / "a", progress=False)
        assert not server.requests[1:]  # nothing asked but the pre-flight probe, if any
        priced = sweep({**spec, "price": [100.0, 100.0]}, tmp_path / "b", progress=False)
    row = priced.runs.iloc[0]
    assert row["status"].startswith("stopped by budget: max_cost=$1e-06 reached") and row["live_cost_usd"] <= 1e-6
    with pytest.raises(SweepFileError, match="price"):
        load_sweep_text(tmp_path, "name: x\nprice: [nan, 1]\nparameters: {arch: generic, model: rules}\n")


def load_sweep_text(tmp_path, text):
    (tmp_path / "bad.yaml").write_text(text)
    return load_sweep(tmp_path / "bad.yaml")


@pytest.mark.figures
def test_a_sweeps_run_is_measured_and_reported_as_a_single_run_is_only_its_figures_left_out(tmp_path):
    """Sweep runs skipped every end-of-run measurement (ITCMA-S's judge, CRSEC's questionnaire, ASVO's
    embeddings) and wrote no report."""
    from socialsim.model.runner import RunConfig, run

    result = sweep({"name": "measured", "seeds": [1], "steps": 2,
                    "parameters": {"scenario": "irollan-valley", "arch": "itcmas", "model": "rules"}},
                   tmp_path / "s", progress=False)
    swept = tmp_path / "s" / RUNS / result.runs["run_id"].iloc[0]
    single = run(RunConfig(scenario="irollan-valley", arch="itcmas", model="rules", steps=2, rng=1), tmp_path / "r",
                 progress=False).run_dir
    judged = pd.read_parquet(swept / "tables" / "itcmas_judge.parquet")
    assert len(judged) > 0 and judged.equals(pd.read_parquet(single / "tables" / "itcmas_judge.parquet"))
    report = (swept / "report.md").read_text()
    assert "Not drawn for a sweep's runs" in report and "](figures/" not in report
    assert not list((swept / "figures").glob("*.png")) and list((single / "figures").glob("*.png"))
    assert "](figures/" in (single / "report.md").read_text()  # a single run still draws and links them


def test_dask_is_given_the_runs_grid_point_by_grid_point_seeds_innermost(tmp_path, monkeypatch):
    """With two workers, the two runs of one seed ran side by side and both paid for the calls they
    share (184 calls for 92 on the tape); now side by side are other seeds of one grid point."""
    from socialsim.batch.dask_backend import run_on_dask
    from socialsim.batch.sweepfile import validate_sweep

    class Recording:  # a Dask client that records the order of its tasks and runs none
        def __init__(self):
            self.order = []

        def submit(self, fn, kwargs, rng, max_steps, pure):
            self.order.append((kwargs["steps"], rng))
            return None

    spec = validate_sweep({"name": "o", "seeds": [1, 2, 3], "parameters": {"arch": "generic", "model": "rules",
                                                                          "steps": [1, 2]}})
    import distributed

    monkeypatch.setattr(distributed, "as_completed", lambda futures: iter(()))  # nothing is run
    client = Recording()
    planned = plan(spec)
    run_on_dask(planned, spec, tmp_path, {planned[0].run_id}, client=client, progress=False)
    assert client.order == [(1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]  # (steps 1, seed 1) is done


def test_a_run_a_dask_worker_cannot_build_is_named_as_the_worker_s(tmp_path, monkeypatch):
    """An architecture installed here but not on the workers: the sweep (checked here) stopped with
    "unknown architecture 'gossip'; known: asvo, ...", which `socialsim models` here contradicts."""
    import distributed

    from socialsim.batch.dask_backend import run_on_dask
    from socialsim.batch.sweepfile import validate_sweep

    class Refused:  # a worker's task: its socialsim knows no such architecture
        def result(self):
            raise ValueError("unknown architecture 'gossip'; known: asvo, crsec, generic, itcmas")

    class Client:
        def submit(self, *args, **kw):
            return Refused()

    monkeypatch.setattr(distributed, "as_completed", lambda futures: iter(futures))
    spec = validate_sweep({"name": "o", "seeds": [1], "parameters": {"arch": "generic", "model": "rules"}})
    planned = plan(spec)
    with pytest.raises(ValueError) as refused:
        run_on_dask(planned, spec, tmp_path, set(), client=Client(), progress=False)
    assert str(refused.value) == (
        f"a Dask worker could not build {planned[0].run_id}: unknown architecture 'gossip'; known: asvo, crsec, "
        "generic, itcmas (a worker runs with its own installed socialsim and architectures, which must be this "
        "machine's)")


def test_dask_is_given_each_runs_arguments_counts_them_and_closes_only_what_it_opened(tmp_path, monkeypatch):
    """Stand-ins for the scheduler's client, the local cluster and the progress bar: what each is asked."""
    import distributed
    import tqdm.auto

    from socialsim.batch.dask_backend import run_on_dask
    from socialsim.batch.sweepfile import validate_sweep
    from socialsim.batch.sweeps import _max_steps, run_one

    calls = []
    handed = []  # each task's SweepModel arguments

    class Future:
        def __init__(self, kwargs):
            handed.append(kwargs)
            self.failed = kwargs["steps"] == 3
            self.command = kwargs["command"]

        def result(self):
            calls.append("result")
            if self.failed:
                raise RuntimeError("the run failed on its worker")

    class Client:
        def __init__(self, address=None):
            calls.append(("client", address))
            self.submitted = []

        def submit(self, *args, **kw):
            self.submitted.append((args, kw))
            return Future(args[1])

        def close(self):
            calls.append("client closed")

    class Cluster:
        workers = {}

        def __init__(self, **kw):
            calls.append(("cluster", kw))

        def sync(self, close_workers):
            calls.append("workers closed")
            asyncio.run(close_workers())

        def close(self):
            calls.append("cluster closed")

    class Bar:
        def __init__(self, **kw):
            calls.append(("bar", kw))

        def update(self):
            calls.append("bar +1")

        def close(self):
            calls.append("bar closed")

    monkeypatch.setattr(distributed, "Client", Client)
    monkeypatch.setattr(distributed, "LocalCluster", Cluster)
    monkeypatch.setattr(distributed, "as_completed", lambda futures: iter(futures))
    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    spec = validate_sweep({"name": "o", "seeds": [1], "parameters": {"arch": "generic", "model": "rules",
                                                                     "steps": [1, 2]}})
    planned = plan(spec)
    monkeypatch.chdir(tmp_path)
    given = Client("given")
    calls.clear()
    run_on_dask(planned, spec, Path("rel"), {planned[0].run_id}, client=given)
    assert given.submitted == [((run_one, planned[1].kwargs(tmp_path / "rel", spec), 1, _max_steps(planned)),
                                {"pure": False})]  # the folder as the workers see it, the longest run's steps
    assert calls == [("bar", {"total": 2, "initial": 1, "desc": "sweep o (dask)"}), "result", "bar +1", "bar closed"]

    calls.clear()
    run_on_dask(planned, spec, tmp_path, set(), scheduler="tcp://sched:8786", progress=False)
    assert calls == [("client", "tcp://sched:8786"), "result", "result", "client closed"]
    calls.clear()
    run_on_dask(planned, spec, tmp_path, set(), cluster="local", processes=3, progress=False)
    assert calls[0] == ("cluster", {"n_workers": 3, "threads_per_worker": 1, "processes": True,
                                    "dashboard_address": ":0", "host": "127.0.0.1"})
    assert calls[1][0] == "client" and isinstance(calls[1][1], Cluster)  # the client of the cluster it started
    # its workers let end by themselves first (distributed's close kills them after 4 s)
    assert calls[2:] == ["result", "result", "client closed", "workers closed", "cluster closed"]
    quota = validate_sweep({**spec.model_dump(), "rpm": 30, "tpm": 900})
    handed.clear()
    run_on_dask(planned, quota, tmp_path, set(), cluster="local", processes=3, progress=False)
    assert [(task["rpm"], task["tpm"]) for task in handed] == [(10.0, 300.0)] * 2  # each of the 3 workers its third

    three = validate_sweep({"name": "o", "seeds": [1], "parameters": {"arch": "generic", "model": "rules",
                                                                      "steps": [3, 1]}})
    calls.clear()
    with pytest.raises(RuntimeError, match="failed on its worker"):  # a task's error is raised here
        run_on_dask(plan(three), three, tmp_path, set(), cluster="local", progress=False)
    assert calls[-3:] == ["result", "client closed", "cluster closed"]  # and what it started is closed

    calls.clear()
    (tmp_path / ".command").write_text("c")

    def interrupted(futures):
        calls.append(("tasks told", [f.command for f in futures]))
        raise KeyboardInterrupt

    monkeypatch.setattr(distributed, "as_completed", interrupted)
    monkeypatch.setattr(Cluster, "close", lambda self: calls.append(("closed", (tmp_path / ".command").exists())))
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C: the runs going on are told to stop before the cluster is closed
        run_on_dask(planned, spec, tmp_path, set(), cluster="local", progress=False, command="c")
    assert calls[-3:] == [("tasks told", ["c", "c"]), "client closed", ("closed", False)]


def _one_paid_run(tmp_path, server, name: str) -> list[str]:
    """The command line of a one-run sweep of generic agents on the test server, into ``tmp_path/name``."""
    spec = {"name": name, "seeds": [1], "steps": 1, "api_base": server.api_base,
            "parameters": {"arch": "generic", "model": "openai/fake-model"}}
    return ["sweep", str(write(tmp_path, json.dumps(spec), f"{name}.yaml")), "--out", str(tmp_path / name),
            "--no-progress"]


def test_the_command_line_counts_only_what_this_command_paid(tmp_path, monkeypatch, capsys):
    """A finished sweep run again said "live LLM calls: 52" while the provider saw no request."""
    from socialsim.cli import main
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as server:
        argv = _one_paid_run(tmp_path, server, "paid")
        assert main(argv) == 0
        first = capsys.readouterr().out
        asked = len(server.requests)
        assert main(argv) == 0
        assert len(server.requests) == asked
    made = int(re.search(r"live LLM calls answered now: (\d+)", first)[1])
    assert made > 0 and "live LLM calls answered now: 0, live cost now: $0.0000" in capsys.readouterr().out


def test_the_command_line_counts_the_fallbacks_of_the_runs_it_made(tmp_path, monkeypatch, capsys):
    """A run answered by fallbacks (an outage shorter than the breaker's count, unreadable answers)
    completes; a single run's closing line counts them, a sweep said nothing of them."""
    from socialsim.cli import main
    from socialsim.llm.fake_server import FakeOpenAIServer, always

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=always("banana")) as server:
        argv = _one_paid_run(tmp_path, server, "garbled")
        assert main(argv) == 0
        out = capsys.readouterr().out
        runs = pd.read_parquet(tmp_path / "garbled" / "runs.parquet")
        assert runs["status"].tolist() == ["completed"] and int(runs["fallbacks"].iloc[0]) == 10  # every agent
        assert ("unusable answers in the runs made now: 10 answered by the operation's fallback (a provider error "
                "or an answer that could not be read); per run: the runs table's fallbacks and llm_failures") in out
        assert main(argv) == 0  # nothing made now: nothing to count
        assert "unusable answers" not in capsys.readouterr().out
    with FakeOpenAIServer(policy=by_prompt) as server:
        assert main(_one_paid_run(tmp_path, server, "fine")) == 0
        assert "unusable answers" not in capsys.readouterr().out


def test_the_runs_table_holds_each_parameter_as_the_run_took_it(tmp_path):
    """``enable_chat: ["false", true]`` (written either way, one run's value) ran every run and then could
    not write runs.parquet (a column of text and booleans); written "false" alone, the runs table said
    "false" where the run and its export had False."""
    spec = {"name": "typed", "seeds": [1], "steps": 1,
            "parameters": {"arch": "crsec", "model": "rules", "enable_chat": ["false", True], "temptation": "0.5"}}
    result = sweep(spec, tmp_path / "s", progress=False)
    runs = pd.read_parquet(tmp_path / "s" / "runs.parquet")
    assert runs["enable_chat"].tolist() == [False, True] and runs["temptation"].tolist() == [0.5, 0.5]
    exported = export(tmp_path / "s", write=False).runs.set_index("run_id").loc[runs["run_id"]]
    assert exported["enable_chat"].tolist() == [False, True] and exported["temptation"].tolist() == [0.5, 0.5]
    assert result.runs["enable_chat"].tolist() == [False, True]


def test_one_run_named_from_another_folder_or_written_another_way_keeps_its_id(tmp_path, monkeypatch):
    """The same scenario file named from another folder, or `enable_chat: "false"` for false, was a new
    run done again."""
    from socialsim.batch.sweeps import run_config, run_id_of
    from socialsim.scenarios.loader import DATA_DIR

    (tmp_path / "custom").mkdir()
    (tmp_path / "custom" / "cafe.yaml").write_text((DATA_DIR / "hobbs-cafe.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    params = {"arch": "crsec", "model": "rules", "steps": 1, "enable_chat": False}
    here = run_id_of(run_config({**params, "scenario": "custom/cafe.yaml"}, 1))
    monkeypatch.chdir(tmp_path / "custom")
    assert run_id_of(run_config({**params, "scenario": "cafe.yaml"}, 1)) == here
    assert run_id_of(run_config({**params, "scenario": "cafe.yaml", "enable_chat": "false"}, 1)) == here
    assert run_config({**params, "scenario": "cafe.yaml", "enable_chat": "false"}, 1).arch_params["enable_chat"] is False
    assert run_id_of(run_config({**params, "scenario": "cafe.yaml", "enable_chat": True}, 1)) != here


def test_a_figure_that_pools_a_swept_parameter_says_so(tmp_path):
    """A figure by enable_chat of a chat x synthesis sweep mixed the synthesis-off and -on runs in one
    spread, titled "mean ± sd of 6 replicates" (there were 3)."""
    spec = {"name": "pool", "seeds": [1, 2, 3], "steps": 1,
            "parameters": {"arch": "crsec", "model": "rules", "enable_chat": [True, False],
                           "enable_synthesis": [True, False]},
            "figures": [{"outcome": "llm_calls", "x": "enable_chat"},
                        {"outcome": "llm_calls", "x": "enable_chat", "hue": "enable_synthesis"}]}
    result = sweep(spec, tmp_path / "s", progress=False)
    assert result.figure_problems == ["figures.0 (llm_calls by enable_chat) pools the runs of every enable_synthesis "
                                      "(neither its x nor its hue): its spread mixes them"]
    from socialsim.batch.figures import plot_outcome

    fig = plot_outcome(result.runs, "llm_calls", "enable_chat", pooled=("enable_synthesis",))
    assert "mean ± sd of 6 runs pooled over enable_synthesis" in fig.axes[0].get_title()
    assert len(list((tmp_path / "s" / "figures").glob("*.png"))) == 2  # both drawn


def test_a_sweep_run_cut_in_its_report_says_the_sweep_command_goes_on(tmp_path, monkeypatch, caplog):
    """It logged "resume with --resume", a single run's advice: a sweep's run is redone by its sweep command."""
    from socialsim.model import runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "write_report", interrupted)
    spec = {"name": "cut", "seeds": [1], "steps": 1, "parameters": {"arch": "generic", "model": "rules"}}
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        result = sweep(spec, tmp_path / "s", progress=False, figures=False)
    assert result.runs["status"].tolist() == ["interrupted in the end-of-run measurement"]
    warned = [r.getMessage() for r in caplog.records if "end-of-run measurement" in r.getMessage()]
    assert warned == ["interrupted in the end-of-run measurement; everything recorded so far is saved; the same "
                      "sweep command goes on from it"]


def test_a_sweeps_rpm_holds_every_request_of_its_check_and_its_runs(tmp_path, monkeypatch):
    """A sweep file had no rpm or tpm (as --rpm/--tpm): a sweep against a provider's quota could not be
    held to it. Now the check before the first run and both runs (one process) take each request from
    one limiter at the file's rpm: 6 at once, then 6 more each minute (a fake clock)."""
    from socialsim.llm import limiter
    from socialsim.llm.fake_server import FakeOpenAIServer

    now = [0.0]

    async def sleep(seconds):
        now[0] += seconds

    real = limiter.RateLimiter
    monkeypatch.setattr(limiter, "_SHARED", {})
    monkeypatch.setattr(limiter, "RateLimiter", lambda rpm, tpm, **kw: real(rpm, tpm, clock=lambda: now[0], sleep=sleep,
                                                                          **kw))
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as server:
        spec = {"name": "quota", "seeds": [1, 2], "steps": 1, "api_base": server.api_base, "rpm": 6, "tpm": 10**9,
                "parameters": {"arch": "generic", "model": "openai/fake-model"}}
        result = sweep(spec, tmp_path / "s", progress=False, figures=False)
    assert (result.runs["status"] == "completed").all()
    (shared,) = limiter._SHARED.items()
    assert shared[0] == f"openai/fake-model|6.0|{1e9}"
    requests = len(server.requests)
    minutes = -(-requests // 6)  # the clock moves on only by the limiter's waits: a minute for each 6 sent
    assert requests > 6 and shared[1].waited_s == (minutes - 1) * 60.0
    config = json.loads((tmp_path / "s" / RUNS / result.runs["run_id"][0] / "config.json").read_text())["config"]
    assert (config["rpm"], config["tpm"]) == (6.0, 1e9)  # what its gateway kept to, recorded


def test_a_sweeps_check_before_its_first_run_asks_within_one_processs_share(tmp_path, monkeypatch):
    import mesa.batchrunner

    from socialsim.llm import engines

    asked = {}
    monkeypatch.setattr(engines, "check_models", lambda models, **kw: asked.update(kw, models=models) or frozenset())
    monkeypatch.setattr(mesa.batchrunner, "batch_run", lambda model_cls, **kw: None)
    spec = {"name": "share", "seeds": [1], "steps": 1, "processes": 4, "rpm": 100, "tpm": 8000,
            "parameters": {"arch": "generic", "model": "openai/fake-model"}}
    sweep(spec, tmp_path / "s", progress=False, figures=False)
    assert (asked["models"], asked["rpm"], asked["tpm"]) == ({"openai/fake-model"}, 25.0, 2000.0)
    sweep(spec, tmp_path / "t", processes=1, progress=False, figures=False)
    assert (asked["rpm"], asked["tpm"]) == (100.0, 8000.0)


def test_a_sweeps_quota_is_shared_out_among_a_local_clusters_workers_and_refused_on_a_scheduler(tmp_path, monkeypatch):
    """Each Dask worker is a process with its own limiter: N workers each at the file's rpm made N times
    it. A LocalCluster's workers each get their share; a scheduler's workers are not known to the sweep."""
    from socialsim.batch import dask_backend

    handed = []
    monkeypatch.setattr(dask_backend, "run_on_dask", lambda planned, spec, sweep_dir, done, **kw: handed.append(
        [p.kwargs(sweep_dir, spec, kw["command"], processes=kw["processes"]) for p in planned]))
    spec = {"name": "dask", "seeds": [1, 2], "steps": 1, "processes": 2, "rpm": 30, "tpm": 5000,
            "parameters": {"arch": "generic", "model": "rules"}}
    sweep(spec, tmp_path / "s", cluster="local", progress=False, figures=False)
    assert [(task["rpm"], task["tpm"]) for task in handed[0]] == [(15.0, 2500.0)] * 2
    for where, given, named in [({"scheduler": "tcp://127.0.0.1:9"}, {}, "rpm, tpm"),
                                ({"client": object()}, {"tpm": None}, "rpm"),
                                ({"scheduler": "tcp://127.0.0.1:9"}, {"rpm": None}, "tpm")]:
        with pytest.raises(SweepFileError, match=f"^sweep: {named}: a quota is kept by each process's limiter, "
                                                 "and the workers of a Dask scheduler are not known"):
            sweep({**spec, **given}, tmp_path / "r", progress=False, **where)
        assert not (tmp_path / "r").exists()  # refused before anything is asked or written
    # without a quota a scheduler is used as before
    sweep({**spec, "rpm": None, "tpm": None}, tmp_path / "o", scheduler="tcp://127.0.0.1:9", progress=False,
          figures=False)
    assert [(task["rpm"], task["tpm"]) for task in handed[-1]] == [(None, None)] * 2


@pytest.mark.parametrize(("line", "problem"), [
    ("rpm: 0", "rpm: Input should be greater than 0 (got 0)"),
    ("rpm: -1", "rpm: Input should be greater than 0 (got -1)"),
    ("rpm: fast", "rpm: Input should be a valid number, unable to parse string as a number"),
    ("tpm: .inf", "tpm: Input should be a finite number (got inf)"),
    ("tpm: 0.0", "tpm: Input should be greater than 0 (got 0.0)"),
    # YAML's yes and true are booleans, which a lax number took as 1: 1 request a minute
    ("rpm: yes", "rpm: expected a number, and YAML reads yes/no and true/false as booleans (got True)"),
    ("processes: true", "processes: expected a number, and YAML reads yes/no and true/false as booleans (got True)"),
    ("max_calls: no", "max_calls: expected a number, and YAML reads yes/no and true/false as booleans (got False)"),
    ("seeds: [1, true]", "seeds: expected a number, and YAML reads yes/no and true/false as booleans (got [1, True])"),
])
def test_a_sweep_files_rpm_or_tpm_that_is_no_positive_number_is_refused_by_name(tmp_path, line, problem):
    with pytest.raises(SweepFileError, match="^" + re.escape(f"{tmp_path / 'bad.yaml'}: invalid sweep file\n  {problem}")):
        load_sweep_text(tmp_path, f"name: x\n{line}\nparameters: {{arch: generic, model: rules}}\n")
    with pytest.raises(SweepFileError, match="rpm: set it at the top level of the sweep file"):
        load_sweep_text(tmp_path, "name: x\nparameters: {arch: generic, model: rules, rpm: [10, 20]}\n")


@pytest.mark.parametrize("field", ["seeds", "replicates", "seed", "steps", "processes", "max_cost", "max_calls",
                                   "max_concurrency", "rpm", "tpm"])
def test_every_count_seed_and_limit_of_a_sweep_file_refuses_yamls_yes_which_a_number_took_as_1(tmp_path, field):
    """``steps: yes`` was a sweep of one-step runs, ``max_cost: true`` a budget of $1, ``seed: true``
    seed 1: each is refused by name; the same numbers from numpy (a script's grid) are taken."""
    import numpy as np

    from socialsim.batch.sweepfile import SweepSpec

    value = "[yes]" if field == "seeds" else "yes"
    got = "[True]" if field == "seeds" else "True"
    with pytest.raises(SweepFileError, match=re.escape(f"\n  {field}: expected a number, and YAML reads yes/no "
                                                       f"and true/false as booleans (got {got})")):
        load_sweep_text(tmp_path, f"name: x\n{field}: {value}\nparameters: {{arch: generic, model: rules}}\n")
    number = [np.int64(2)] if field == "seeds" else np.float64(2) if field in ("max_cost", "rpm", "tpm") else np.int64(2)
    spec = SweepSpec(parameters={"arch": "generic", "model": "rules"}, **{field: number})
    assert getattr(spec, field) == ([2] if field == "seeds" else 2)
