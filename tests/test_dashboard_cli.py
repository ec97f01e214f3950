"""`socialsim dashboard`: what it accepts, where it listens and what it keeps from the network."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from types import SimpleNamespace

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


def test_a_replay_of_a_run_that_recorded_no_seed_resets_with_the_seed_it_ran_with(tmp_path):
    """A config.json with no ``rng`` ran with the runner's default seed: a Reset builds that society."""
    from socialsim.dashboards.session import ReplaySession
    from socialsim.model.runner import RunConfig

    assert ReplaySession(_fake_run_dir(tmp_path / "run")).config.seed == RunConfig.model_fields["rng"].default == 42


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


class _Exited:
    """Stands in for the server's process: uvicorn failing to bind exits 1."""

    def __init__(self, code: int = 1) -> None:
        self.code = code

    def wait(self) -> int:
        return self.code


def test_a_port_taken_after_the_check_is_refused_before_the_address_is_printed(monkeypatch, capsys):
    """The command checked the port, then printed its address and started Solara, whose uvicorn bound
    the port seconds later: a port taken in between (a second dashboard started meanwhile) left an
    address printed and uvicorn's traceback, or showed the other dashboard's page at that address."""
    import socket

    started = []
    monkeypatch.setattr(server.subprocess, "Popen", lambda *a, **kw: started.append(a) or _Exited())
    monkeypatch.setattr(server, "port_in_use", lambda host, port: None)  # free when checked ...
    with socket.socket() as other:  # ... taken by the time the server binds it
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        assert cli.main(["dashboard", "hobbs-cafe", "--model", "rules", "--port", str(port)]) == 2
    said = capsys.readouterr()
    assert f"socialsim: error: cannot listen on 127.0.0.1:{port} (Address already in use)" in said.err
    assert not started and "socialsim dashboard on" not in said.out


def test_the_server_is_handed_the_port_already_listening_so_nothing_takes_it_while_it_starts(monkeypatch, capsys):
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    handed = {}

    class _ServerThatExits:
        def wait(self):
            # the command's own copy is closed once the server has its own: a server that has stopped
            # leaves the port free while the command still waits on it (this stand-in holds no copy)
            with socket.socket() as again:
                again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                again.bind(("127.0.0.1", port))
                again.listen()
            return 0

    def start(command, env, pass_fds):
        handed.update(command=command, fd=int(env[server.FD_VARIABLE]), pass_fds=pass_fds)
        listener = socket.socket(fileno=os.dup(handed["fd"]))
        handed["address"] = listener.getsockname()
        listener.close()
        with socket.socket() as other, pytest.raises(OSError):  # another process starting meanwhile
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            other.bind(("127.0.0.1", port))
            other.listen()
        return _ServerThatExits()

    monkeypatch.setattr(server.subprocess, "Popen", start)
    assert server.serve("hobbs-cafe", "127.0.0.1", port) == 0
    assert handed["pass_fds"] == (handed["fd"],) and handed["address"] == ("127.0.0.1", port)
    assert handed["command"] == server.server_command("127.0.0.1", port)
    assert f"socialsim dashboard on http://127.0.0.1:{port}" in capsys.readouterr().out


@pytest.mark.skipif(os.name != "posix", reason="the socket is handed to the server on POSIX only")
def test_port_0_serves_on_a_port_the_system_picks_and_prints_it(monkeypatch, capsys):
    """--port 0 was refused: the server would have picked a port the printed address never named.
    The command binds the port before it prints the address, so it can name the system's pick."""
    import socket

    handed = {}

    def start(command, env, pass_fds):
        listener = socket.socket(fileno=os.dup(int(env[server.FD_VARIABLE])))
        handed.update(command=command, address=listener.getsockname())
        listener.close()
        return _Exited(0)

    monkeypatch.setattr(server.subprocess, "Popen", start)
    assert cli.main(["dashboard", "hobbs-cafe", "--model", "rules", "--port", "0"]) == 0
    host, port = handed["address"]
    assert host == "127.0.0.1" and port > 0
    assert handed["command"][handed["command"].index("--port") + 1] == str(port)
    assert f"socialsim dashboard on http://127.0.0.1:{port}  (Ctrl-C stops it)" in capsys.readouterr().out


def test_port_0_is_refused_where_the_socket_cannot_be_handed_to_the_server(monkeypatch, capsys):
    """Without POSIX's socket handing the server binds its port itself: at --port 0 it would pick one the
    printed address could not name, so the command says so and starts nothing."""
    started = []
    monkeypatch.setattr(server.subprocess, "Popen", lambda *args, **kwargs: started.append(args) or _Exited(0))
    monkeypatch.setattr(server, "os", SimpleNamespace(name="nt", environ=os.environ, sep=os.sep))  # the server's view
    assert cli.main(["dashboard", "hobbs-cafe", "--model", "rules", "--port", "0"]) != 0
    assert "--port 0 (a port the system picks) needs a POSIX system" in capsys.readouterr().err and not started


def test_the_server_serves_on_the_socket_it_was_handed(monkeypatch):
    """Solara's `run` takes no socket: uvicorn's Server.run is given the one the command listens on;
    without one it binds the port itself, as `python -m solara` does."""
    import socket

    import solara.__main__
    import uvicorn

    from socialsim.dashboards import solara_run

    given = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: given.append(sockets))
    monkeypatch.setattr(solara.__main__, "main", lambda: uvicorn.Server.run(object()))
    monkeypatch.setattr(solara_run.sys, "argv", ["solara_run.py", "run", "socialsim.dashboards.app"])
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        monkeypatch.setenv(server.FD_VARIABLE, str(os.dup(listener.fileno())))
        solara_run.main()
        assert [[sock.getsockname() for sock in sockets] for sockets in given] == [[listener.getsockname()]]
        given[0][0].close()
    assert solara_run.sys.argv[0] == "solara" and server.FD_VARIABLE not in os.environ
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: given.append(sockets))
    solara_run.main()
    assert given[1] is None


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
        # deadlines only against a hang: generous, so a loaded machine (one run failed at load 21) passes
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and command.poll() is None
            time.sleep(0.05)
        server_pid = int(pid_file.read_text())
        command.send_signal(sig)
        assert command.wait(timeout=120) == 0
        deadline = time.monotonic() + 120
        with pytest.raises(ProcessLookupError):  # the stand-in server is gone too (and reaped)
            while time.monotonic() < deadline:
                os.kill(server_pid, 0)
                time.sleep(0.05)


def test_a_target_with_an_unknown_architecture_a_folder_named_like_a_scenario_and_bad_ports(tmp_path, monkeypatch,
                                                                                         capsys):
    """The page used to show only a traceback for an unknown architecture; a folder called
    hobbs-cafe hid the scenario; --port 99999 gave a traceback and --port 0 announced port 0."""
    with pytest.raises(ValueError, match=r"--arch: unknown architecture 'bogus' \(known: asvo, crsec, generic, itcmas\)"):
        server.check_target("hobbs-cafe", "bogus")
    # a scenario without the architecture's space, as `run` refuses it (the server started, the page said it at Reset)
    with pytest.raises(ValueError, match=r"^the crsec architecture needs a scenario with a 'map:' \(areas to move "
                                         r"in\); \S+/school-micro.yaml has a network instead$"):
        server.check_target("school-micro", "crsec")
    assert cli.main(["dashboard", "school-micro", "--arch", "crsec", "--model", "rules"]) == 2
    assert "the crsec architecture needs a scenario with a 'map:'" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text((server.Path(__file__).parent.parent / "socialsim/scenarios/data/hobbs-cafe.yaml").read_text()
                   .replace("default_arch: crsec", "default_arch: crsek"))
    with pytest.raises(ValueError, match=f"{bad}: default_arch: unknown architecture 'crsek'"):
        server.check_target(str(bad))
    # a file of one's own whose architecture refuses it, as `run` does (the server started, the page said it at Reset)
    bad.write_text((server.Path(__file__).parent.parent / "socialsim/scenarios/data/makerspace.yaml").read_text()
                   .replace("filler_behaviour: drink tea", "filler_behaviour: drink coffee"))
    with pytest.raises(ValueError, match=f"(?s)^{bad}: invalid crsec settings\n  crsec.filler_behaviour: unknown "
                                         "behaviour 'drink coffee'"):
        server.check_target(str(bad))
    assert cli.main(["dashboard", str(bad), "--model", "rules"]) == 2
    assert "crsec.filler_behaviour: unknown behaviour 'drink coffee'" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hobbs-cafe").mkdir()
    assert server.check_target("hobbs-cafe") == "hobbs-cafe"
    _fake_run_dir(tmp_path / "hobbs-cafe" / "r1")
    with pytest.raises(ValueError, match="it holds 1 run"):
        server.check_target("hobbs-cafe")
    with pytest.raises(ValueError, match="does not exist"):
        server.check_target(str(tmp_path / "runs" / "nowhere"))  # a path: not taken for a scenario's name
    for port in ("99999", "-1"):
        assert cli.main(["dashboard", "--port", port]) == 2
        assert f"--port expects a port number from 0 to 65535 (0: any free port), got {port}" in capsys.readouterr().err
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
    (["--rng", "-3"], "--rng expects a whole number >= 0, got -3"),  # as run's: it served a page that could not build
], ids=["max-calls", "max-calls 0", "unpriced", "steps", "max-cost", "api-base", "no file", "bad file", "rng"])
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


def test_the_servers_environment_holds_each_live_setting_as_text_offline_and_keeps_the_rest(monkeypatch, tmp_path):
    """What the page reads (app.initial_session): every setting the command line named, none as
    "None", a price as IN,OUT; the asset cache, no CDN and no telemetry; the user's own variables."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("SOCIALSIM_TEST_OWN_VARIABLE", "kept")
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)  # the server's litellm reads its own copy
    env = server.server_env("irollan-valley", "crsec", "rules", 7, steps=3, max_calls=0, max_cost=1.5,
                            price=(1.0, 2.5), api_base="http://127.0.0.1:8000/v1", deployments="/pools/pool.yaml")
    assert {k: v for k, v in env.items() if k.startswith("SOCIALSIM_DASHBOARD_")} == {
        "SOCIALSIM_DASHBOARD_TARGET": "irollan-valley", "SOCIALSIM_DASHBOARD_ARCH": "crsec",
        "SOCIALSIM_DASHBOARD_MODEL": "rules", "SOCIALSIM_DASHBOARD_SEED": "7", "SOCIALSIM_DASHBOARD_STEPS": "3",
        "SOCIALSIM_DASHBOARD_MAX_CALLS": "0", "SOCIALSIM_DASHBOARD_MAX_COST": "1.5",
        "SOCIALSIM_DASHBOARD_PRICE": "1.0,2.5", "SOCIALSIM_DASHBOARD_API_BASE": "http://127.0.0.1:8000/v1",
        "SOCIALSIM_DASHBOARD_DEPLOYMENTS": "/pools/pool.yaml"}
    assert env["SOCIALSIM_TEST_OWN_VARIABLE"] == "kept"
    assert (env["SOLARA_ASSETS_CDN"], env["SOLARA_TELEMETRY_MIXPANEL_ENABLE"], env["LITELLM_LOCAL_MODEL_COST_MAP"]) == (
        "http://127.0.0.1:9/npm/", "False", "True")
    assert env["SOLARA_ASSETS_PROXY_CACHE_DIR"] == str(tmp_path / "xdg" / "socialsim" / "solara-cdn")
    given = server.server_env("hobbs-cafe")  # nothing named: empty, the page's defaults apply
    assert {k: v for k, v in given.items() if k.startswith("SOCIALSIM_DASHBOARD_") and v} == {
        "SOCIALSIM_DASHBOARD_TARGET": "hobbs-cafe", "SOCIALSIM_DASHBOARD_SEED": "42"}
    with pytest.raises(TypeError, match=r"^server_env: no live setting budget, rng$"):
        server.server_env("hobbs-cafe", rng=3, budget=1)


@pytest.mark.parametrize(("value", "text"), [
    (None, ""), ((1.0, 2.5), "1.0,2.5"), ([3, 4], "3,4"), (0, "0"), (0.0, "0.0"), ("rules", "rules")])
def test_a_setting_is_held_as_text_nothing_as_empty_and_a_price_as_in_comma_out(value, text):
    assert server._as_text(value) == text


def test_the_server_command_runs_solara_on_the_dashboard_quietly_and_offline():
    assert server.server_command("::1", 9001) == [
        server.sys.executable, "-m", "socialsim.dashboards.solara_run", "run", "socialsim.dashboards.app",
        "--host", "::1", "--port", "9001", "--production", "--no-open", "--no-check-version", "--log-level", "warning"]
    command = server.server_command()
    assert command[command.index("--host") + 1:command.index("--port") + 2] == ["127.0.0.1", "--port", "8765"]


def test_only_a_host_beyond_this_machine_is_warned_of_by_name():
    for loopback in ("127.0.0.1", "localhost", "::1"):
        assert server.host_warning(loopback) is None
    assert server.host_warning("192.168.1.5") == (
        "the dashboard will listen on 192.168.1.5, not only on this machine: it has no login, so anyone who can "
        "reach it can run the simulation and spend its LLM budget")


def test_a_port_is_free_even_while_a_closed_connection_waits_and_taken_while_something_listens():
    """As uvicorn binds (SO_REUSEADDR): a port whose last connection a dashboard closed (TIME_WAIT)
    can be listened on again at once, and is not reported in use."""
    import socket

    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the last dashboard's uvicorn
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert server.port_in_use("127.0.0.1", port) == (
            f"cannot listen on 127.0.0.1:{port} (Address already in use): is another dashboard running? "
            "--port N picks another port")
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the server's side closes first: its port waits in TIME_WAIT
        client.close()
    assert server.port_in_use("127.0.0.1", port) is None


def test_an_ipv6_host_is_probed_as_ipv6_and_an_unknown_host_is_named_without_an_errno():
    import socket

    with socket.socket(socket.AF_INET6) as free:
        free.bind(("::1", 0))
        port = free.getsockname()[1]
    assert server.port_in_use("::1", port) is None
    said = server.port_in_use("no.such.host.invalid", 8765)
    assert re.fullmatch(r"cannot listen on no\.such\.host\.invalid: [A-Z][^\[(]+ "
                        r"\(--host takes this machine's name or address\)", said), said


def test_a_missing_path_is_refused_as_missing_and_a_scenario_file_path_is_read_as_a_scenario(tmp_path, monkeypatch):
    """A path that names no scenario file and does not exist is no run directory; one ending in a
    scenario's suffix is loaded as a scenario, saying why it cannot be."""
    with pytest.raises(ValueError, match=r"^runs/nowhere does not exist \(no such run directory\)$"):
        server.check_target("runs/nowhere")
    with pytest.raises(ScenarioError, match="nowhere.yaml"):
        server.check_target("runs/nowhere.yaml")
    scenario = tmp_path / "my-cafe.yaml"
    scenario.write_text((server.Path(__file__).parent.parent / "socialsim/scenarios/data/hobbs-cafe.yaml").read_text())
    assert server.check_target(str(scenario)) == str(scenario)
    assert server.check_target("hobbs-cafe", "generic") == "hobbs-cafe"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-folder").mkdir()
    with pytest.raises(ValueError, match=r"^my-folder is not a run directory \(no config\.json\)$"):
        server.check_target("my-folder")


def test_a_run_that_cannot_be_opened_is_refused_naming_it_and_one_lacking_files_is_opened_with_a_warning(
        tmp_path, monkeypatch, caplog):
    from socialsim.dashboards import session

    run_dir = _fake_run_dir(tmp_path / "run")
    (run_dir / "config.json").write_text("{")
    with pytest.raises(ValueError, match=rf"^cannot open {re.escape(str(run_dir))}: .*config\.json is damaged"):
        server.check_run(str(run_dir))
    monkeypatch.setattr(session, "ReplaySession", lambda path: SimpleNamespace(frames=f"frames of {path}"))
    monkeypatch.setattr(session, "missing_note", lambda frames: f"{frames} lack model.parquet")
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert server.check_run("run") == str(run_dir.resolve())
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("socialsim", logging.WARNING, "run: frames of run lack model.parquet")]
    caplog.clear()
    monkeypatch.setattr(session, "missing_note", lambda frames: "")
    assert server.check_run("run") == str(run_dir.resolve()) and not caplog.records


class _Server:
    """A stand-in for the Solara server's process: ``wait`` answers each of ``codes`` in turn (an
    exception is raised, as Ctrl-C raises KeyboardInterrupt in the waiting command)."""

    def __init__(self, command, env, codes, while_waiting=lambda: None):
        self.command, self.env, self.codes, self.signals = command, env, list(codes), []
        self.while_waiting, self.waits = while_waiting, 0

    def wait(self):
        self.waits += 1
        self.while_waiting()
        code = self.codes.pop(0)
        if isinstance(code, BaseException):
            raise code
        return code

    def send_signal(self, sig):
        self.signals.append(sig)


def _serving(monkeypatch, codes, while_waiting=lambda: None):
    import socket

    started = []
    monkeypatch.setattr(server, "_listening", lambda host, port: socket.socket())  # whatever this machine runs
    monkeypatch.setattr(server.subprocess, "Popen", lambda command, env, pass_fds: started.append(
        _Server(command, env, codes, while_waiting)) or started[-1])
    return started


@pytest.mark.parametrize(("code", "returned"), [
    (0, 0), (-2, 0), (-15, 0), (-1, 0),  # stopped: exit, Ctrl-C, SIGTERM, SIGHUP
    (1, 1), (3, 3), (-9, -9),  # failed, or killed outright: said as the server said it
])
def test_serve_runs_the_command_with_its_environment_and_says_how_the_server_ended(monkeypatch, tmp_path, capsys,
                                                                                    code, returned):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    started = _serving(monkeypatch, [code])
    assert server.serve("irollan-valley", "0.0.0.0", 9002, "crsec", "rules", 5, steps=4) == returned
    (proc,) = started
    assert proc.command == server.server_command("0.0.0.0", 9002)
    assert {k: proc.env[f"SOCIALSIM_DASHBOARD_{k}"] for k in ("TARGET", "ARCH", "MODEL", "SEED", "STEPS")} == {
        "TARGET": "irollan-valley", "ARCH": "crsec", "MODEL": "rules", "SEED": "5", "STEPS": "4"}
    assert capsys.readouterr().out == "socialsim dashboard on http://0.0.0.0:9002  (Ctrl-C stops it)\n"


def test_serve_names_an_ipv6_address_in_brackets_and_waits_out_a_ctrl_c(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    started = _serving(monkeypatch, [KeyboardInterrupt(), KeyboardInterrupt(), -2])
    assert server.serve("hobbs-cafe", "::1") == 0
    assert started[0].waits == 3 and started[0].command == server.server_command("::1", 8765)
    assert started[0].env["SOCIALSIM_DASHBOARD_SEED"] == "42" and started[0].env["SOCIALSIM_DASHBOARD_ARCH"] == ""
    assert capsys.readouterr().out == "socialsim dashboard on http://[::1]:8765  (Ctrl-C stops it)\n"


def test_while_serving_sigterm_and_sighup_reach_the_server_and_the_handlers_are_given_back(monkeypatch, tmp_path):
    import signal

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def own(sig, frame):  # the caller's handlers, before and after
        pass

    before = {sig: signal.signal(sig, own) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        def a_terminal_closes_and_kill_is_run():
            signal.getsignal(signal.SIGHUP)(signal.SIGHUP, None)
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)

        started = _serving(monkeypatch, [-15], a_terminal_closes_and_kill_is_run)
        assert server.serve("hobbs-cafe") == 0
        assert started[0].command == server.server_command("127.0.0.1", 8765)  # this machine only, by default
        assert started[0].signals == [signal.SIGHUP, signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is own and signal.getsignal(signal.SIGHUP) is own
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_the_asset_cache_links_every_installed_asset_and_aliases_vega_to_its_newest_version(monkeypatch, tmp_path):
    """Each of solara-assets' files and folders is linked (nothing copied), Vega's major versions
    answer with the newest installed, and a link left to an older one is replaced."""
    cdn = tmp_path / "prefix" / "share" / "solara" / "cdn"
    for name in ("vega@5.1.0", "vega@5.2.0", "vega-lite@5.6.1", "vega-embed@6.20.0", "requirejs@2.3.6"):
        (cdn / name).mkdir(parents=True)
    (cdn / "styles.css").write_text("body {}")
    monkeypatch.setattr(server.sys, "prefix", str(tmp_path / "prefix"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache = server.offline_assets()
    assert cache == tmp_path / "xdg" / "socialsim" / "solara-cdn"
    installed = {e.name: e for e in cdn.iterdir()}
    assert {link.name: link.readlink() for link in cache.iterdir()} == {
        **installed, "vega@5": cdn / "vega@5.2.0", "vega-lite@5": cdn / "vega-lite@5.6.1",
        "vega-embed@6": cdn / "vega-embed@6.20.0"}
    assert (cache / "styles.css").read_text() == "body {}" and (cache / "vega@5").is_dir()
    (cdn / "vega@5.10.0").mkdir()  # solara-assets upgraded (a name's order would put it before 5.2.0)
    assert server.offline_assets() == cache
    assert (cache / "vega@5").readlink() == cdn / "vega@5.10.0" and (cache / "vega@5.10.0").is_symlink()
    assert (cache / "vega-lite@5").readlink() == cdn / "vega-lite@5.6.1"


def test_the_asset_cache_is_under_the_users_cache_folder_and_empty_without_solara_assets(monkeypatch, tmp_path):
    monkeypatch.setattr(server.sys, "prefix", str(tmp_path / "no-assets"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cache = server.offline_assets()
    assert cache == tmp_path / "home" / ".cache" / "socialsim" / "solara-cdn" and list(cache.iterdir()) == []
    given = server.offline_assets(tmp_path / "given" / "cdn")
    assert given == tmp_path / "given" / "cdn" and given.is_dir()


def _page_society(monkeypatch, **env):
    """The live society the page builds from the server's environment ``env`` (not started)."""
    from socialsim.dashboards import app
    from socialsim.dashboards.session import LiveSession

    for name in server.LIVE_SETTINGS.values():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SOCIALSIM_DASHBOARD_TARGET", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(f"SOCIALSIM_DASHBOARD_{name}", value)
    started = []
    monkeypatch.setattr(LiveSession, "start", lambda self: started.append(self))
    session = app.initial_session()
    assert started == [session]
    return session.config


def test_the_page_reads_each_setting_the_server_was_given_and_defaults_the_rest(monkeypatch):
    from socialsim.dashboards.session import LiveConfig

    assert _page_society(monkeypatch) == LiveConfig()  # the server's defaults: hobbs-cafe, seed 42, no limits
    empty = {name: "" for name in ("ARCH", "MODEL", "STEPS", "MAX_CALLS", "MAX_COST", "PRICE", "API_BASE",
                                   "DEPLOYMENTS")}
    assert _page_society(monkeypatch, TARGET="makerspace", SEED="42", **empty) == LiveConfig("makerspace")
    assert _page_society(monkeypatch, TARGET="irollan-valley", ARCH="crsec", MODEL="rules", SEED="0", STEPS="6",
                         MAX_CALLS="30", MAX_COST="0.25", PRICE="1.5,4", API_BASE="http://127.0.0.1:9/v1",
                         DEPLOYMENTS="/pools/pool.yaml") == LiveConfig(
        "irollan-valley", "crsec", "rules", 0, steps=6, max_calls=30, max_cost=0.25, api_base="http://127.0.0.1:9/v1",
        call_options={"deployments": "/pools/pool.yaml", "price": (1.5, 4.0)})
    assert _page_society(monkeypatch, STEPS="0", MAX_CALLS="0", MAX_COST="0").max_cost == 0.0  # 0 is a budget
    assert _page_society(monkeypatch, STEPS="0", MAX_CALLS="0") == LiveConfig()  # 0 steps or calls: no limit
    assert _page_society(monkeypatch, PRICE="2").call_options == {"price": (2.0,)}


def test_the_page_replays_the_run_named_and_says_why_when_it_cannot_open_it(monkeypatch, tmp_path):
    from socialsim.dashboards import app
    from socialsim.dashboards.session import LiveConfig, LiveSession, ReplaySession

    run_dir = _fake_run_dir(tmp_path / "run")
    monkeypatch.setenv("SOCIALSIM_DASHBOARD_TARGET", str(run_dir))
    monkeypatch.setattr(ReplaySession, "__init__", lambda self, path: setattr(self, "run_dir", path))
    assert app.initial_session().run_dir == str(run_dir)
    monkeypatch.undo()
    started = []
    monkeypatch.setattr(LiveSession, "start", lambda self: started.append(self))
    monkeypatch.setenv("SOCIALSIM_DASHBOARD_TARGET", str(run_dir))
    (run_dir / "config.json").write_text("{")  # damaged after the command line checked it
    session = app.initial_session()
    assert isinstance(session, LiveSession) and session.config == LiveConfig() and not started  # nothing built
    assert session.error_title == "Cannot open the run directory"
    assert re.fullmatch(rf"{re.escape(str(run_dir))}: .*config\.json is damaged.*", session.error)


def _copy_run(run_dir, to, status="completed", **settings):
    """A copy of ``run_dir`` recorded with other settings (``rng`` or architecture parameters)."""
    shutil.copytree(run_dir, to)
    meta = json.loads((to / "config.json").read_text())
    meta["status"] = status
    meta["config"]["rng"] = settings.pop("rng", meta["config"]["rng"])
    meta["config"]["arch_params"] = {**(meta["config"].get("arch_params") or {}), **settings}
    (to / "config.json").write_text(json.dumps(meta))
    return to


def test_the_replay_card_lists_a_sweeps_runs_by_their_seed_and_swept_settings_and_opens_the_one_chosen(
        finished_run, tmp_path, monkeypatch):
    """A sweep's runs are runs/run-<hash>: the card listed four such paths, none a user could tell
    apart, under a reproduction's findings table (40 lines for ASVO's)."""
    import ipyvuetify as v
    import solara

    from socialsim.dashboards import app
    from socialsim.dashboards.session import ReplaySession

    sweep = tmp_path / "sweep"
    _copy_run(finished_run, sweep / "runs" / "run-0bf245a66356", rng=0, enable_chat=True)
    chosen = _copy_run(finished_run, sweep / "runs" / "run-1b335a669fd5", rng=1, enable_chat=False)
    _copy_run(finished_run, sweep / "runs" / "run-9ddfbc4b72f8", status="interrupted", rng=1, enable_chat=True)
    (sweep / "findings.csv").write_text("finding,verdict,seeds_holding,seeds_measured\nall adopt,holds,1,1\n")
    monkeypatch.setattr(app, "initial_session", lambda: ReplaySession(finished_run))
    opened: list[str] = []
    monkeypatch.setattr(app, "ReplaySession", lambda path: opened.append(path) or ReplaySession(path))
    box, rc = solara.render(solara.AppLayout(children=[app.Page()]), handle_error=False)
    try:
        rc.find(v.TextField, label="run directory").widget.v_model = str(sweep)
        rc.find(v.Btn, class_="btn-open").widget.click()
        picker = rc.find(v.Select, class_="run-picker").widget
        assert picker.items == ["runs/run-0bf245a66356 · enable_chat=True, seed 0",
                                "runs/run-1b335a669fd5 · enable_chat=False, seed 1",
                                "runs/run-9ddfbc4b72f8 · enable_chat=True, seed 1 · interrupted, 2 steps"]
        structure = rc.find(class_="panel-replay")._current_structure()
        assert structure.index("run-picker") < structure.index("reproduction-findings")  # the list first
        picker.v_model = picker.items[1]
        assert rc.find(v.TextField, label="run directory").widget.v_model == str(chosen)
        # the folder tried once, the run picked opened once; and picked from the replay's own card
        # (its controls rebuilt for it), the other run opens once too
        rc.find(v.TextField, label="run directory").widget.v_model = str(sweep)
        rc.find(v.Btn, class_="btn-open").widget.click()
        picker = rc.find(v.Select, class_="run-picker").widget
        assert picker.v_model is None  # a new list, nothing picked in it yet
        picker.v_model = picker.items[0]
        assert opened == [str(sweep), str(chosen), str(sweep), str(sweep / "runs" / "run-0bf245a66356")]
    finally:
        rc.close()


def test_the_replay_box_reads_a_run_directory_under_the_home_folder_written_with_a_tilde(
        finished_run, tmp_path, monkeypatch):
    """~/runs/x, as a shell would take it: the box looked for a folder named "~" and could not open it."""
    import ipyvuetify as v
    import solara

    from socialsim.dashboards import app
    from socialsim.dashboards.session import ReplaySession

    monkeypatch.setenv("HOME", str(tmp_path))
    shutil.copytree(finished_run, tmp_path / "runs" / "x")
    monkeypatch.setattr(app, "initial_session", lambda: ReplaySession(finished_run))
    box, rc = solara.render(solara.AppLayout(children=[app.Page()]), handle_error=False)
    try:
        rc.find(v.TextField, label="run directory").widget.v_model = "~/runs/x "
        rc.find(v.Btn, class_="btn-open").widget.click()
        assert not [w.children for w in rc.find(v.Alert).widgets if "cannot open" in str(w.children)]
        assert rc.find(v.TextField, label="run directory").widget.v_model == str(tmp_path / "runs" / "x")
    finally:
        rc.close()
