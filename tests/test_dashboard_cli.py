"""`socialsim dashboard`: what it accepts, where it listens and what it keeps from the network."""

from __future__ import annotations

import json
import logging
import re
import shutil

import pytest

from socialsim import cli
from socialsim.dashboards import server
from socialsim.scenarios.loader import ScenarioError


def _fake_run_dir(path):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"config": {"scenario": "hobbs-cafe"}}))
    return path


def test_target_is_a_scenario_or_a_run_directory(tmp_path):
    assert server.check_target("hobbs-cafe") == "hobbs-cafe"
    run_dir = _fake_run_dir(tmp_path / "run")
    assert server.check_target(str(run_dir)) == str(run_dir.resolve())
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a run directory"):
        server.check_target(str(tmp_path / "empty"))
    with pytest.raises(ScenarioError):
        server.check_target("no-such-scenario")


def test_server_stays_offline_and_on_loopback():
    env = server.server_env("hobbs-cafe", "crsec", "rules", 7)
    assert env["SOLARA_TELEMETRY_MIXPANEL_ENABLE"] == "False"
    assert env["SOLARA_ASSETS_CDN"].startswith("http://127.0.0.1:")
    assert (env["SOCIALSIM_DASHBOARD_TARGET"], env["SOCIALSIM_DASHBOARD_ARCH"], env["SOCIALSIM_DASHBOARD_MODEL"],
            env["SOCIALSIM_DASHBOARD_SEED"]) == ("hobbs-cafe", "crsec", "rules", "7")
    command = server.server_command("127.0.0.1", 9999)
    assert "--no-check-version" in command  # solara would ask PyPI for its newest version
    assert command[command.index("--host") + 1] == "127.0.0.1" and command[command.index("--port") + 1] == "9999"
    assert server.host_warning("127.0.0.1") is None and server.host_warning("localhost") is None
    assert "no login" in server.host_warning("0.0.0.0")


def test_cli_rejects_a_bad_target_with_a_message(capsys):
    assert cli.main(["dashboard", "no-such-scenario"]) == 2
    assert "no-such-scenario" in capsys.readouterr().err


def test_cli_warns_when_listening_beyond_this_machine(monkeypatch, caplog):
    calls = []
    monkeypatch.setattr(server, "serve", lambda *a, **kw: calls.append((a, kw)) or 0)
    monkeypatch.setattr(server, "port_in_use", lambda host, port: None)  # whatever else this machine runs
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert cli.main(["dashboard", "hobbs-cafe", "--host", "0.0.0.0", "--port", "9000", "--model", "rules"]) == 0
    assert calls == [(("hobbs-cafe", "0.0.0.0", 9000), {"arch": None, "model": "rules", "seed": 42})]
    assert any("0.0.0.0" in r.getMessage() and "no login" in r.getMessage() for r in caplog.records)
    calls.clear()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert cli.main(["dashboard"]) == 0
    assert calls[0][0][1] == "127.0.0.1" and not caplog.records


def test_the_page_opens_what_the_command_line_named(monkeypatch, tmp_path):
    from socialsim.dashboards import app
    from socialsim.dashboards.session import LiveSession, ReplaySession

    started = []
    monkeypatch.setattr(LiveSession, "start", lambda self: started.append(self.config))
    monkeypatch.setenv("SOCIALSIM_DASHBOARD_TARGET", "irollan-valley")
    monkeypatch.setenv("SOCIALSIM_DASHBOARD_MODEL", "rules")
    monkeypatch.setenv("SOCIALSIM_DASHBOARD_SEED", "5")
    session = app.initial_session()
    assert isinstance(session, LiveSession) and started == [session.config]
    assert (session.config.scenario, session.config.model, session.config.seed) == ("irollan-valley", "rules", 5)
    monkeypatch.setattr(ReplaySession, "__init__", lambda self, run_dir: setattr(self, "run_dir", run_dir))
    monkeypatch.setenv("SOCIALSIM_DASHBOARD_TARGET", str(_fake_run_dir(tmp_path / "run")))
    assert isinstance(app.initial_session(), ReplaySession)


def test_a_port_in_use_is_refused_before_the_server_starts(monkeypatch, capsys):
    import socket

    started = []
    monkeypatch.setattr(server.subprocess, "Popen", lambda *a, **kw: started.append(a))
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        assert cli.main(["dashboard", "hobbs-cafe", "--port", str(port)]) == 2
    err = capsys.readouterr()
    assert f"127.0.0.1:{port}" in err.err and "--port" in err.err and not started
    assert "socialsim dashboard on" not in err.out


def test_stopping_the_command_stops_its_server(tmp_path):
    """SIGTERM (``kill``, a process manager) or SIGHUP (a closed terminal) to `socialsim dashboard`
    reaches the server it started; it used to keep running on the port, orphaned."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "server.pid"
    stand_in = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    script = ("import sys; from socialsim.dashboards import server; "
              f"server.server_command = lambda host, port: [sys.executable, '-c', {stand_in!r}]; "
              "sys.exit(server.serve('hobbs-cafe', port=0))")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        pid_file.unlink(missing_ok=True)
        command = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and command.poll() is None
            time.sleep(0.05)
        server_pid = int(pid_file.read_text())
        command.send_signal(sig)
        assert command.wait(timeout=30) == 0
        with pytest.raises(ProcessLookupError):  # the stand-in server is gone too (and reaped)
            for _ in range(200):
                os.kill(server_pid, 0)
                time.sleep(0.05)


def test_a_target_with_an_unknown_architecture_a_folder_named_like_a_scenario_and_bad_ports(tmp_path, monkeypatch,
                                                                                         capsys):
    """The page used to show only a traceback for an unknown architecture; a folder called
    hobbs-cafe hid the scenario; --port 99999 gave a traceback and --port 0 announced port 0."""
    with pytest.raises(ValueError, match=r"--arch: unknown architecture 'bogus' \(known: asvo, crsec, generic, itcmas\)"):
        server.check_target("hobbs-cafe", "bogus")
    bad = tmp_path / "bad.yaml"
    bad.write_text((server.Path(__file__).parent.parent / "socialsim/scenarios/data/hobbs-cafe.yaml").read_text()
                   .replace("default_arch: crsec", "default_arch: crsek"))
    with pytest.raises(ValueError, match=f"{bad}: default_arch: unknown architecture 'crsek'"):
        server.check_target(str(bad))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hobbs-cafe").mkdir()
    assert server.check_target("hobbs-cafe") == "hobbs-cafe"
    _fake_run_dir(tmp_path / "hobbs-cafe" / "r1")
    with pytest.raises(ValueError, match="it holds 1 run"):
        server.check_target("hobbs-cafe")
    with pytest.raises(ValueError, match="does not exist"):
        server.check_target(str(tmp_path / "runs" / "nowhere"))  # a path: not taken for a scenario's name
    for port in ("99999", "0", "-1"):
        assert cli.main(["dashboard", "--port", port]) == 2
        assert f"--port expects a port number from 1 to 65535, got {port}" in capsys.readouterr().err
    assert "--host takes this machine's name or address" in server.port_in_use("no.such.host.invalid", 8765)


def test_cli_names_an_unknown_model_before_serving_and_says_a_replay_ignores_live_settings(
        monkeypatch, tmp_path, capsys, caplog):
    calls = []
    monkeypatch.setattr(server, "serve", lambda *a, **kw: calls.append((a, kw)) or 0)
    monkeypatch.setattr(server, "port_in_use", lambda host, port: None)
    assert cli.main(["dashboard", "hobbs-cafe", "--model", "nosuch/model"]) == 2
    assert "nosuch/model" in capsys.readouterr().err and not calls  # the page would have found it only on Reset
    run_dir = str(_fake_run_dir(tmp_path / "run"))
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert cli.main(["dashboard", run_dir, "--model", "rules", "--rng", "3"]) == 0
    assert any("--model, --rng: of a live society" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert cli.main(["dashboard", run_dir]) == 0
    assert not caplog.records and calls[-1][1]["seed"] == 42


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    from socialsim.model.runner import RunConfig, run

    out = tmp_path_factory.mktemp("finished")
    return run(RunConfig(scenario="hobbs-cafe", arch="crsec", model="rules", steps=2, rng=1), out, progress=False,
               preflight=False).run_dir


def _cut_short(path):
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _without_config_section(path):
    meta = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in meta.items() if k != "config"}))


@pytest.mark.parametrize(("damage", "named"), [
    (lambda run: _cut_short(run / "config.json"), "config.json is damaged (cut short, or not JSON"),
    (lambda run: _without_config_section(run / "config.json"), "config.json is damaged: it has no 'config' section"),
    (lambda run: _cut_short(run / "model.parquet"), "model.parquet cannot be read"),
    (lambda run: _cut_short(run / "tables" / "norm_changes.parquet"), "norm_changes.parquet cannot be read"),
], ids=["config.json cut short", "no config section", "model.parquet cut short", "a table cut short"])
def test_a_damaged_run_is_refused_naming_the_file(finished_run, tmp_path, monkeypatch, damage, named):
    """A config.json cut short passed the check (it exists) and the page died on a JSONDecodeError; a
    missing 'config' key said only "cannot open …: 'config'"."""
    from socialsim.dashboards import app
    from socialsim.dashboards.session import ReplaySession

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    damage(run_dir)
    with pytest.raises(ValueError, match=re.escape(named)):
        server.check_target(str(run_dir))
    with pytest.raises(ValueError, match=re.escape(named)):  # what "Open" shows after "cannot open …:"
        ReplaySession(run_dir)
    monkeypatch.setenv("SOCIALSIM_DASHBOARD_TARGET", str(run_dir))  # damaged after the command line checked it
    session = app.initial_session()
    assert not session.replay and session.frames is None and session.model is None  # nothing built or started
    assert session.error_title == "Cannot open the run directory" and named in session.error


@pytest.mark.parametrize(("remove", "named"), [
    ("model.parquet", "model.parquet (config.json records 2 complete steps)"),
    ("agents.parquet", "agents.parquet (config.json records 2 complete steps)"),
    ("tables/events.parquet", "tables/events.parquet"),
    ("tables/thoughts.parquet", "tables/thoughts.parquet"),
])
def test_a_run_lacking_a_recorded_file_opens_saying_which(finished_run, tmp_path, caplog, remove, named):
    """model.parquet missing showed "Step 0 of 0" with no word of why; a missing table or agents.parquet
    left panels empty unexplained."""
    from socialsim.dashboards.session import ReplaySession, missing_note

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    (run_dir / remove).unlink()
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert server.check_target(str(run_dir)) == str(run_dir.resolve())
    assert any(named in r.getMessage() for r in caplog.records)
    session = ReplaySession(run_dir)
    assert session.frames.missing == [named] and named in missing_note(session.frames)
    assert ReplaySession(finished_run).frames.missing == []  # the whole run lacks nothing


def test_a_live_societys_budget_length_endpoint_and_deployments_reach_the_page(monkeypatch, tmp_path, caplog):
    """`socialsim dashboard --api-base/--deployments/--max-calls/--max-cost/--steps`: what `run`
    takes for a live society, passed through the server's environment into the page's society."""
    from socialsim.dashboards import app
    from socialsim.dashboards.session import LiveSession
    from socialsim.llm.fake_server import FakeOpenAIServer, by_prompt

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    served = []
    monkeypatch.setattr(server, "serve", lambda *a, **kw: served.append((a, kw)) or 0)
    monkeypatch.setattr(server, "port_in_use", lambda host, port: None)
    with FakeOpenAIServer(policy=by_prompt) as a, FakeOpenAIServer(policy=by_prompt) as b:
        pool = tmp_path / "pool.yaml"
        pool.write_text("model_list:\n" + "".join(f"  - {{model_name: openai/fake-model, litellm_params: "
                                                  f"{{model: openai/fake-model, api_base: '{s.api_base}'}}}}\n"
                                                  for s in (a, b)))
        args = ["dashboard", "hobbs-cafe", "--arch", "generic", "--model", "openai/fake-model", "--steps", "2",
                "--max-calls", "500", "--max-cost", "1.5", "--price", "1,2", "--api-base", "http://127.0.0.1:9/v1",
                "--deployments", str(tmp_path / "." / "pool.yaml")]
        assert cli.main(args) == 0
        (target, host, port), live = served[-1]
        assert live == {"arch": "generic", "model": "openai/fake-model", "seed": 42, "steps": 2, "max_calls": 500,
                        "max_cost": 1.5, "price": (1.0, 2.0), "api_base": "http://127.0.0.1:9/v1",
                        "deployments": str(pool.resolve())}
        env = server.server_env(target, **live)
        for name, value in env.items():
            if name.startswith("SOCIALSIM_DASHBOARD_"):
                monkeypatch.setenv(name, value)
        monkeypatch.setattr(LiveSession, "start", lambda self: None)
        session = app.initial_session()
        config = session.config
        assert (config.steps, config.max_calls, config.max_cost, config.api_base) == (2, 500, 1.5,
                                                                                        "http://127.0.0.1:9/v1")
        assert config.call_options == {"deployments": str(pool.resolve()), "price": (1.0, 2.0)}
        session._build()  # the page's society: its calls go to the pool, not to --api-base (nobody there)
        session.model.step()
        assert len(a.requests) > 1 and len(b.requests) > 1
        assert session.model.llm.ledger.live_cost > 0  # priced at --price: the budget counts every call
        monkeypatch.setenv("SOCIALSIM_DASHBOARD_MAX_COST", "0.0")  # --max-cost 0: no live call, as for run
        assert app.initial_session().config.max_cost == 0.0
        # a replay takes none of them: said, and not passed on
        run_dir = str(_fake_run_dir(tmp_path / "run"))
        with caplog.at_level(logging.WARNING, logger="socialsim"):
            assert cli.main(["dashboard", run_dir, "--max-calls", "5", "--deployments", str(pool)]) == 0
        assert any("--max-calls, --deployments: of a live society" in r.getMessage() for r in caplog.records)
        assert served[-1][1] == {"arch": None, "model": None, "seed": 42}


@pytest.mark.parametrize(("flags", "said"), [
    (["--max-calls", "-1"], "--max-calls expects a whole number >= 1 (without it, no limit), got -1"),
    (["--max-calls", "0"], "--max-calls expects a whole number >= 1"),  # the page's box reads 0 as no limit
    (["--model", "openai/fake-model", "--max-cost", "1"], "--max-cost 1 cannot be kept: openai/fake-model has no "
                                                         "price in litellm's cost map; give --price IN,OUT"),
    (["--steps", "0"], "--steps expects a whole number >= 1, got 0"),
    (["--max-cost", "-2"], "--max-cost expects a number of USD >= 0, got -2.0"),
    (["--api-base", "http://user:hunter2@127.0.0.1:8000/v1"], "the endpoint carries a credential"),
    (["--deployments", "no-such-file.yaml"], "no-such-file.yaml: No such file or directory"),
    (["--deployments", "BAD"], "is not valid YAML"),
], ids=["max-calls", "max-calls 0", "unpriced", "steps", "max-cost", "api-base", "no file", "bad file"])
def test_a_live_setting_that_cannot_work_is_refused_before_serving(monkeypatch, tmp_path, capsys, flags, said):
    served = []
    monkeypatch.setattr(server, "serve", lambda *a, **kw: served.append(a) or 0)
    monkeypatch.setattr(server, "port_in_use", lambda host, port: None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    (tmp_path / "BAD").write_text("model_list: [")
    assert cli.main(["dashboard", "hobbs-cafe", *flags]) == 2
    err = capsys.readouterr().err
    assert said in err and "hunter2" not in err and not served


def test_the_pages_society_refuses_a_budget_it_cannot_keep(monkeypatch):
    """A Reset with a budget in USD and a model with no price: no call would have counted against it."""
    from socialsim.dashboards.session import LiveConfig, LiveSession

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "openai/fake-model", max_cost=0.01,
                                     api_base="http://127.0.0.1:9/v1"))
    with pytest.raises(ValueError, match="max cost 0.01 cannot be kept: openai/fake-model has no price"):
        session._build()
    priced = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", max_cost=0.01))
    priced._build()  # the rules cost nothing: nothing to price
    assert priced.model is not None
