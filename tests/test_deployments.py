"""Several deployments behind one model name (--deployments FILE): litellm's Router shares the calls
over them, a deployment that is down is named and left to the others, the tape knows the model name
only (a pool's run replays with no server), a secret is only ever named, and a bad file is refused
naming the file and the field."""

import json
import logging
import random
import re
import uuid
from types import SimpleNamespace

import pandas as pd
import pytest

from socialsim.cli import main
from socialsim.llm.fake_server import FakeOpenAIServer, by_prompt
from socialsim.llm.loop import run_sync
from socialsim.llm.operations.generic import CHOOSE_ACTION, ActionContext
from socialsim.llm.routing import RouteTable

MODEL = "openai/fake-model"



@pytest.fixture
def servers(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    monkeypatch.setenv("POOL_KEY", "placeholder-pool-key")
    with FakeOpenAIServer(policy=by_prompt) as a, FakeOpenAIServer(policy=by_prompt) as b:
        yield a, b


def pool_file(path, *servers, key="api_key: os.environ/POOL_KEY", extra=""):
    entries = "".join(f"""
  - model_name: {MODEL}
    litellm_params:
      model: {MODEL}
      api_base: {s.api_base}
      {key}
""" for s in servers)
    path.write_text(f"model_list:{entries}{extra}")
    return path


def chats(server):
    """The requests a server got beyond the pre-flight's one-token ping."""
    return [r for r in server.requests if r.get("max_tokens") != 1]


RUN = ["run", "hobbs-cafe", "--arch", "generic", "--model", MODEL, "--steps", "2", "--no-progress"]


def test_a_pool_shares_the_calls_answers_as_one_server_and_replays_with_no_server(tmp_path, servers, capsys):
    a, b = servers
    pool = pool_file(tmp_path / "pool.yaml", a, b)
    assert main([*RUN, "--out", str(tmp_path / "pooled"), "--deployments", str(pool)]) == 0
    assert len(chats(a)) > 2 and len(chats(b)) > 2  # both deployments answered calls of the run
    calls = pd.read_parquet(tmp_path / "pooled" / "llm_calls.parquet")
    assert set(calls["status"]) == {"ok"} and set(calls["model"]) == {MODEL}
    assert len(chats(a)) + len(chats(b)) == calls["live_calls"].sum()
    # the same run against one server: the same frames, whichever deployment answered each call
    assert main([*RUN, "--out", str(tmp_path / "single"), "--api-base", b.api_base]) == 0
    for name in ("model.parquet", "agents.parquet", "tables/events.parquet", "tables/interactions.parquet"):
        pooled, single = (pd.read_parquet(tmp_path / run / name).drop(columns=["llm_latency_s"], errors="ignore")
                          for run in ("pooled", "single"))
        pd.testing.assert_frame_equal(pooled, single)
    config = json.loads((tmp_path / "pooled" / "config.json").read_text())["config"]
    assert config["deployments"] == str(pool.resolve())
    pool.unlink()  # a replay asks no server, so it needs no deployments file
    capsys.readouterr()
    assert main(["replay", str(tmp_path / "pooled"), "--no-progress"]) == 0
    assert "frames identical to the recording: yes" in capsys.readouterr().out


@pytest.mark.parametrize("settings", ["", "router_settings: {routing_strategy: least-busy}\n"])
def test_a_deployment_that_is_down_is_named_and_its_calls_go_to_the_others(tmp_path, servers, caplog, settings):
    """With README's least-busy strategy the Router kept sending calls to the deployment found down (it
    fails at once, so it looks least busy), and they fell back: the pre-flight now leaves it out."""
    a, b = servers
    a.down = True
    pool = pool_file(tmp_path / "pool.yaml", a, b, extra=settings)
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert main([*RUN, "--out", str(tmp_path / "r"), "--deployments", str(pool)]) == 0
    warned = [r.getMessage() for r in caplog.records if "deployment 1" in r.getMessage()]
    assert len(warned) == 1 and a.api_base in warned[0] and "its calls go to the other 1 deployment(s)" in warned[0]
    calls = pd.read_parquet(tmp_path / "r" / "llm_calls.parquet")
    assert set(calls["status"]) == {"ok"}  # no call fell back: the Router asked the deployment that answers
    assert len(chats(b)) == calls["live_calls"].sum()


def test_the_dashboards_society_leaves_out_a_deployment_found_down_as_a_run_does(tmp_path, servers):
    """The dashboard checks its models as `run` does; the deployment its check found down must be
    left out of its Router too, or under least-busy its calls go there first and fall back."""
    from socialsim.dashboards.session import LiveConfig, LiveSession

    a, b = servers
    a.down = True
    pool = pool_file(tmp_path / "pool.yaml", a, b, extra="router_settings: {routing_strategy: least-busy}\n")
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", MODEL, seed=3, steps=2,
                                     call_options={"deployments": str(pool)}))
    session.step(1)
    assert session.wait(120) and session.error == "" and session.frames.steps_done == 1
    rows = session.model.llm.ledger.rows
    assert rows and all(row.status == "ok" for row in rows)  # no call fell back
    assert len(chats(b)) == sum(row.live_calls for row in rows)


def test_a_pool_where_no_deployment_answers_is_refused_before_step_1(tmp_path, servers, capsys):
    a, b = servers
    a.down = b.down = True
    pool = pool_file(tmp_path / "pool.yaml", a, b)
    assert main([*RUN, "--out", str(tmp_path / "r"), "--deployments", str(pool)]) == 2
    error = capsys.readouterr().err
    assert f"model '{MODEL}': no deployment in {pool.resolve()} answers" in error
    assert "deployment 1" in error and "deployment 2" in error
    assert not (tmp_path / "r").exists() and chats(a) == chats(b) == []


def test_a_secret_is_only_ever_named_and_never_reaches_the_run_directory(tmp_path, servers, capsys, monkeypatch):
    a, b = servers
    secret = "placeholder-" + "q7" * 12  # built here: no literal key in the test's source
    written = pool_file(tmp_path / "written.yaml", a, key=f"api_key: {secret}")
    assert main([*RUN, "--out", str(tmp_path / "w"), "--deployments", str(written)]) == 2
    error = capsys.readouterr().err
    assert "model_list[0].litellm_params.api_key holds a secret written out: write os.environ/NAME" in error
    assert secret not in error and not (tmp_path / "w").exists()
    # named: read from the environment, and found nowhere in what the run writes
    monkeypatch.setenv("POOL_KEY", secret)
    named = pool_file(tmp_path / "named.yaml", a, b)
    assert main([*RUN, "--out", str(tmp_path / "r"), "--deployments", str(named)]) == 0
    for path in (tmp_path / "r").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_a_variable_the_file_names_but_nobody_set_is_named(tmp_path, servers, capsys, monkeypatch):
    a, _ = servers
    monkeypatch.delenv("POOL_KEY")
    pool = pool_file(tmp_path / "pool.yaml", a)
    assert main([*RUN, "--out", str(tmp_path / "r"), "--deployments", str(pool)]) == 2
    assert "api_key names the environment variable POOL_KEY, which is not set" in capsys.readouterr().err


def test_a_nested_reference_reaches_the_server_as_its_value(tmp_path, servers, monkeypatch):
    """litellm's Router reads only top-level ``os.environ/`` references; a header named in
    extra_headers (which the file must name, being a token) was sent as the text ``os.environ/...``."""
    a, b = servers
    monkeypatch.setenv("POOL_TOKEN", "placeholder-pool-token")
    pool = pool_file(tmp_path / "pool.yaml", a, b, key="extra_headers: {X-Pool-Token: os.environ/POOL_TOKEN}")
    assert main([*RUN, "--out", str(tmp_path / "r"), "--deployments", str(pool)]) == 0
    sent = [h.get("x-pool-token") for server in (a, b) for h in server.headers]
    assert len(sent) > 4 and set(sent) == {"placeholder-pool-token"}  # the pre-flight's pings and the run's calls


def test_a_router_setting_naming_a_variable_nobody_set_is_named_before_step_1(tmp_path, servers, capsys):
    a, _ = servers
    pool = pool_file(tmp_path / "pool.yaml", a, extra="router_settings: {redis_password: os.environ/NO_SUCH_VAR}\n")
    assert main([*RUN, "--out", str(tmp_path / "r"), "--deployments", str(pool)]) == 2
    assert ("router_settings.redis_password names the environment variable NO_SUCH_VAR, which is not set"
            in capsys.readouterr().err)
    assert not chats(a)


def test_a_shared_files_other_models_are_not_the_runs_concern(tmp_path, servers, monkeypatch):
    """A file serving several models: a variable another model's deployment names but nobody set here
    refused the run (session 32's first pre-flight read every deployment); the Router leaves it as written."""
    from socialsim.llm import deployments
    from socialsim.llm.litellm_setup import litellm

    a, _ = servers
    pool = pool_file(tmp_path / "pool.yaml", a, extra="  - model_name: anthropic/other\n    litellm_params: "
                     "{model: anthropic/other, api_key: os.environ/UNSET_OTHER_KEY,\n"
                     "                     extra_headers: {X-Token: os.environ/UNSET_OTHER_TOKEN}}\n")
    assert main([*RUN, "--out", str(tmp_path / "r"), "--deployments", str(pool)]) == 0
    assert len(chats(a)) > 2
    given = {}
    monkeypatch.setattr(litellm, "Router", lambda **kwargs: given.update(kwargs))
    loaded = deployments.load_deployments(pool)
    loaded.new_router({MODEL})
    assert given["model_list"][1]["litellm_params"]["extra_headers"] == {"X-Token": "os.environ/UNSET_OTHER_TOKEN"}
    with pytest.raises(deployments.DeploymentsError, match="anthropic/other's extra_headers.X-Token names the "
                       "environment variable UNSET_OTHER_TOKEN"):
        loaded.new_router({MODEL, "anthropic/other"})
    # a workload-identity pointer (*_ref) is litellm's to resolve: the pre-flight hands it on as written
    ref = loaded.of("anthropic/other")[0].model_copy(update={"litellm_params": {"model": "anthropic/other",
                                                                                 "token_ref": "os.environ/UNSET_REF"}})
    assert loaded.resolved_params(ref)["token_ref"] == "os.environ/UNSET_REF"


def test_the_router_is_given_router_settings_with_their_references_read(tmp_path, monkeypatch):
    from socialsim.llm import deployments
    from socialsim.llm.litellm_setup import litellm

    monkeypatch.setenv("POOL_KEY", "placeholder-pool-key")
    monkeypatch.setenv("CACHE_SECRET", "placeholder-cache-secret")
    path = tmp_path / "pool.yaml"
    path.write_text("model_list:\n  - {model_name: m, litellm_params: {model: openai/m, api_key: os.environ/POOL_KEY,"
                    " extra_headers: {X-Token: os.environ/POOL_KEY}}}\n"
                    "router_settings: {cache_kwargs: {password: os.environ/CACHE_SECRET}}\n")
    pool = deployments.load_deployments(path)  # before litellm's Router is replaced: the file's check reads it
    given = {}
    monkeypatch.setattr(litellm, "Router", lambda **kwargs: given.update(kwargs))
    pool.new_router()
    assert given["cache_kwargs"] == {"password": "placeholder-cache-secret"}
    params = given["model_list"][0]["litellm_params"]
    assert params["extra_headers"] == {"X-Token": "placeholder-pool-key"}
    assert params["api_key"] == "os.environ/POOL_KEY"  # litellm reads its top level itself (and keeps its pointers)
    assert given["enable_weighted_failover"] is True  # ours: a failed call goes to another deployment
    path.write_text(path.read_text().replace("{cache_kwargs:", "{enable_weighted_failover: false, cache_kwargs:"))
    deployments.load_deployments(path).new_router()  # litellm's Router's parameters, read already
    assert given["enable_weighted_failover"] is False  # the file's choice wins


@pytest.mark.parametrize(("text", "expected"), [
    ("model_list: [", "is not valid YAML: did not find expected node content at line 2, column 1"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x, api_key: *hunter2hunter2}}\n",
     "is not valid YAML: found undefined alias at line 2, column 64"),
    ("\n\nmodel_list:\n  - {model_name: x, litellm_params: {model: openai/x, api_key: *hunter2hunter2}}\n",
     "is not valid YAML: found undefined alias at line 4, column 64"),  # the file's lines, blank ones too
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x, api_key: hunter2hunter2}}}\n",
     "is not valid YAML: did not find expected '-' indicator at line 2, column 80"),  # and no quote of the line
    ("routes: {}\n", "model_list: Field required; routes: Extra inputs are not permitted"),
    ("model_list:\n  - model_name: x\n    litellm_params: {model: openai/x, api_base: http://a:1/v1,\n"
     "                     api_base: http://b:1/v1}\n",  # the second server, silently the only one
     "is not valid YAML: duplicate key api_base (first at line 3): a key is given once at line 4, column 22"),
    ("model_list: []\n", "model_list: List should have at least 1 item"),
    ("model_list:\n  - model_name: x\n    litellm_params: {api_base: http://127.0.0.1:1/v1}\n",
     "model_list[0].litellm_params: no 'model'"),
    ("model_list:\n  - litellm_params: {model: openai/x}\n", "model_list.0.model_name: Field required"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x}}\nrouter_settings: {routing_stratgy: x}\n",
     "router_settings: litellm's Router takes no routing_stratgy"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x}}\n"
     "router_settings: {redis_password: hunter2hunter2}\n", "router_settings.redis_password holds a secret written out"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x, api_base: 'http://me:hunter2@h:8000/v1'}}\n",
     "model_list[0].litellm_params.api_base: the endpoint carries a credential (a password in it)"),
    # nested, in model_info, in router_settings' own dicts, in another field's address
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x, extra_headers: {Authorization: "
     "'Bearer hunter2hunter2'}}}\n", "model_list[0].litellm_params.extra_headers.Authorization holds a secret"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x}, model_info: {api_key: hunter2hunter2}}\n",
     "model_list[0].model_info.api_key holds a secret"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x}}\nrouter_settings: "
     "{cache_kwargs: {password: hunter2hunter2}}\n", "router_settings.cache_kwargs.password holds a secret"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x, base_url: 'http://u:hunter2@h/v1'}}\n",
     "model_list[0].litellm_params.base_url: the endpoint carries a credential"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x}}\nrouter_settings: "
     "{redis_url: 'redis://:hunter2@h:6379'}\n", "router_settings.redis_url: the endpoint carries a credential"),
    # every word that makes a name a secret's
    ("model_list:\n  - {model_name: x, litellm_params: {model: bedrock/x, aws_secret_access_key: hunter2hunter2}}\n",
     "model_list[0].litellm_params.aws_secret_access_key holds a secret"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: azure/x, client_secret: hunter2hunter2}}\n",
     "model_list[0].litellm_params.client_secret holds a secret"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: azure/x, azure_ad_token: hunter2hunter2}}\n",
     "model_list[0].litellm_params.azure_ad_token holds a secret"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: vertex_ai/x, vertex_credentials: hunter2hunter2}}\n",
     "model_list[0].litellm_params.vertex_credentials holds a secret"),
    # a mapping's fields each by its own name: the service account's key, not its type
    ("model_list:\n  - {model_name: x, litellm_params: {model: vertex_ai/x, vertex_credentials: "
     "{type: service_account, private_key: hunter2hunter2}}}\n",
     "model_list[0].litellm_params.vertex_credentials.private_key holds a secret written out"),
    ("model_list:\n  - {model_name: '', litellm_params: {model: openai/x}}\n",
     "model_list.0.model_name: String should have at least 1 character"),
    ("- {model_name: x, litellm_params: {model: openai/x}}\n", "the file: Input should be a valid dictionary"),
    ("", "model_list: Field required"),
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x}}\nrouter_settings: {model_list: [], self: 1}\n",
     "router_settings: litellm's Router takes no model_list, self"),
    ("model_list:\n  - {model_name: x, litellm_params: {api_key: hunter2hunter2}}\n",  # every problem, in order
     "model_list[0].litellm_params: no 'model' (the litellm model string this deployment calls); "
     "model_list[0].litellm_params.api_key holds a secret written out"),
    ("model_list: \xe9\n".encode("latin-1"), "not UTF-8 text (line 1 has the byte 0xe9)"),  # not a traceback
    ("model_list: \x07\n", "is not valid YAML: ReaderError\n"),  # a character YAML refuses: no line or column
    # a list under a secret's name holds secrets
    ("model_list:\n  - {model_name: x, litellm_params: {model: openai/x}, model_info: {api_keys: [EMPTY, hunter2hunter2]}}\n",
     "model_list[0].model_info.api_keys[1] holds a secret written out"),
])
def test_a_bad_deployments_file_is_refused_naming_the_file_and_the_field(tmp_path, capsys, text, expected):
    path = tmp_path / "pool.yaml"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    assert main([*RUN, "--out", str(tmp_path / "r"), "--deployments", str(path)]) == 2
    error = capsys.readouterr().err
    # the first problem right after the file's name: the field named from the file's top
    assert f"deployments file {path.resolve()}{' ' if expected.startswith('is not') else ': '}{expected}" in error
    assert "hunter2" not in error and not (tmp_path / "r").exists()


def test_a_missing_deployments_file_is_named(tmp_path, capsys):
    assert main([*RUN, "--deployments", str(tmp_path / "nowhere.yaml")]) == 2
    assert f"deployments file {tmp_path / 'nowhere.yaml'}: No such file or directory" in capsys.readouterr().err
    assert main([*RUN, "--deployments", str(tmp_path)]) == 2  # there, but not a file to read
    assert f"deployments file {tmp_path.resolve()}: Is a directory\n" in capsys.readouterr().err


def test_a_resumed_run_may_go_on_with_other_deployments(tmp_path, servers, capsys):
    a, b = servers
    pool = pool_file(tmp_path / "pool.yaml", a, b)
    assert main([*RUN, "--out", str(tmp_path / "r"), "--deployments", str(pool), "--max-calls", "15"]) == 3
    other = pool_file(tmp_path / "other.yaml", b)  # a server of the pool gone: the rest goes to the other
    pool.unlink()
    assert main(["run", "--resume", str(tmp_path / "r"), "--no-progress"]) == 2
    assert (f"deployments file {pool.resolve()}: No such file or directory; `--resume {tmp_path / 'r'} "
            "--deployments FILE` goes on with another file") in capsys.readouterr().err
    before = len(chats(a))
    assert main(["run", "--resume", str(tmp_path / "r"), "--deployments", str(other), "--no-progress"]) == 0
    assert len(chats(a)) == before
    meta = json.loads((tmp_path / "r" / "config.json").read_text())
    assert meta["status"] == "completed" and meta["config"]["deployments"] == str(other.resolve())


def test_a_sweep_sends_its_runs_calls_to_the_pool_and_keeps_their_names(tmp_path, servers):
    from socialsim.batch import load_sweep, sweep

    a, b = servers
    folder = tmp_path / "study"
    folder.mkdir()
    pool_file(folder / "pool.yaml", a, b)
    grid = {"name": "pooled", "seeds": [1, 2], "steps": 1,
            "parameters": {"scenario": "hobbs-cafe", "arch": "generic", "model": MODEL}}
    (folder / "sweep.json").write_text(json.dumps({**grid, "deployments": "pool.yaml"}))
    (folder / "sweep.yaml").write_text((folder / "sweep.json").read_text())  # YAML reads JSON
    spec = load_sweep(folder / "sweep.yaml")
    assert spec.deployments == str((folder / "pool.yaml").resolve())  # from the sweep file's folder
    pooled = sweep(spec, tmp_path / "pooled", progress=False, figures=False)
    assert pooled.runs["status"].tolist() == ["completed", "completed"]
    assert chats(a) and chats(b)
    single = sweep({**grid, "api_base": b.api_base}, tmp_path / "single", progress=False, figures=False)
    assert pooled.runs["run_id"].tolist() == single.runs["run_id"].tolist()  # where calls go is no identity


def sweep_on(backend: str, grid: dict, out):
    """The sweep of ``grid`` in ``out``, in this process or on a Dask cluster of one in-process worker,
    and every run's llm_calls."""
    from socialsim.batch import sweep

    if backend == "dask":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
                Client(cluster) as client:
            result = sweep(grid, out, client=client, progress=False, figures=False)
    else:
        result = sweep(grid, out, progress=False, figures=False)
    return result, pd.concat(pd.read_parquet(out / "runs" / run / "llm_calls.parquet") for run in result.runs["run_id"])


@pytest.mark.parametrize("backend", ["local", "dask"])
def test_a_sweeps_runs_leave_out_a_deployment_its_check_found_down(tmp_path, servers, backend):
    """The check before a sweep's first run found deployment 1 down, but its runs were built with every
    deployment, so under least-busy their calls went to the dead one (it fails at once) and fell back."""
    a, b = servers
    a.down = True
    pool = pool_file(tmp_path / "pool.yaml", a, b, extra="router_settings: {routing_strategy: least-busy}\n")
    grid = {"name": "pooled", "seeds": [1, 2], "steps": 2, "deployments": str(pool),
            "parameters": {"scenario": "hobbs-cafe", "arch": "generic", "model": MODEL}}
    result, calls = sweep_on(backend, grid, tmp_path / "s")
    assert result.runs["status"].tolist() == ["completed", "completed"]
    assert set(calls["status"]) == {"ok"}  # no call fell back
    assert chats(a) == [] and len(chats(b)) == calls["live_calls"].sum()


@pytest.mark.parametrize("backend", ["local", "dask"])
def test_a_sweeps_runs_check_again_a_deployments_file_edited_since_its_check(tmp_path, servers, backend,
                                                                            monkeypatch, caplog):
    """The runs left out the places the sweep's check found down in the file as the runs read it: edited
    in between (here its two deployments swapped), they left out the one that answers and sent every
    call to the dead one. A run that reads another model_list than the one checked now checks it again."""
    import os

    from socialsim.batch import sweep, sweeps

    a, b = servers
    a.down = True
    pool = pool_file(tmp_path / "pool.yaml", a, b, extra="router_settings: {routing_strategy: least-busy}\n")
    checked = sweeps.check_grid

    def check_then_edit(*args, **kwargs):  # the user edits the file once the sweep has checked it
        found = checked(*args, **kwargs)
        pool_file(pool, b, a, extra="router_settings: {routing_strategy: least-busy}\n")
        os.utime(pool, ns=(os.stat(pool).st_atime_ns, os.stat(pool).st_mtime_ns + 10**9))  # another version
        return found

    monkeypatch.setattr(sweeps, "check_grid", check_then_edit)
    grid = {"name": "pooled", "seeds": [1, 2], "steps": 2, "deployments": str(pool),
            "parameters": {"scenario": "hobbs-cafe", "arch": "generic", "model": MODEL}}
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        result, calls = sweep_on(backend, grid, tmp_path / "s")
    assert result.runs["status"].tolist() == ["completed", "completed"]
    assert set(calls["status"]) == {"ok"}  # no call fell back
    assert chats(a) == [] and len(chats(b)) == calls["live_calls"].sum()
    edited = [r.getMessage() for r in caplog.records if "not the one the sweep checked" in r.getMessage()]
    assert len(edited) == 1 and str(pool.resolve()) in edited[0]  # said once a process, naming the file
    # a file the runs read as it was checked is not checked again: its one ping per deployment is the sweep's
    b.requests.clear()
    pool_file(pool, b, extra="router_settings: {routing_strategy: least-busy}\n")
    monkeypatch.setattr(sweeps, "check_grid", checked)
    sweep({**grid, "name": "again", "seeds": [3, 4]}, tmp_path / "s2", progress=False, figures=False)
    assert len([r for r in b.requests if r.get("max_tokens") == 1]) == 1


def test_a_runs_check_of_an_edited_file_asks_the_files_models_once_per_version_and_models(tmp_path, monkeypatch):
    """A sweep's run that finds the deployments file edited since the sweep's check checks it again, as
    a single run does: only the models the file serves (the sweep's check before its first run checked
    the others, which the edit does not touch), once per file version and set of models in a process."""
    from socialsim.batch import sweeps
    from socialsim.llm import engines
    from socialsim.llm.deployments import load_deployments
    from socialsim.model.runner import RunConfig

    path = tmp_path / "pool.yaml"
    path.write_text(f"model_list:\n  - {{model_name: {MODEL}, litellm_params: {{model: {MODEL}}}}}\n"
                    "  - {model_name: openai/second, litellm_params: {model: openai/second}}\n")
    asked = []
    monkeypatch.setattr(engines, "check_models", lambda models, **kw: asked.append(models) or frozenset({len(asked)}))
    monkeypatch.setattr(sweeps, "_DOWN", {})

    class Runs:  # what the check reads of a run's gateway
        def __init__(self, *models):
            self.deployments, self._models = load_deployments(path), set(models)

        def models(self):
            return self._models

    config = RunConfig()
    assert sweeps._deployments_down(Runs(MODEL, "openai/judge"), config, "r1") == {1}
    assert asked == [{MODEL}]  # the judge is not in the file
    assert sweeps._deployments_down(Runs(MODEL), config, "r2") == {1} and len(asked) == 1  # the same: once
    assert sweeps._deployments_down(Runs(MODEL, "openai/second"), config, "r3") == {2}  # other models: again
    assert asked[1] == {MODEL, "openai/second"}


def test_a_file_that_serves_none_of_the_runs_models_says_so(tmp_path, servers, caplog):
    """A misspelt model_name would leave the pool unused, every call going to the model's own endpoint."""
    a, b = servers
    pool = pool_file(tmp_path / "pool.yaml", a)
    pool.write_text(pool.read_text().replace(f"model_name: {MODEL}", "model_name: openai/fake-modle"))
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert main([*RUN, "--out", str(tmp_path / "r"), "--deployments", str(pool), "--api-base", b.api_base]) == 0
    assert (f"{pool.resolve()} serves none of the run's models ({MODEL}), only openai/fake-modle: its deployments "
            "are not used") in caplog.text
    assert chats(a) == [] and chats(b)


def test_a_model_list_is_known_by_its_deployments_not_by_how_the_file_writes_them(tmp_path):
    """A sweep's runs compare the fingerprint of the model_list they read with the one the sweep
    checked: the same deployments written with their keys in another order are the same list (no
    check again), another deployment or another order of them is not (places in the list change)."""
    from socialsim.llm.deployments import load_deployments

    def fingerprint(name, text):
        (path := tmp_path / name).write_text(text)
        return load_deployments(path).fingerprint

    one = "{model_name: m, litellm_params: {model: openai/x, api_base: 'http://a', timeout: 5}, model_info: {id: 1}}"
    same = "{model_info: {id: 1}, litellm_params: {timeout: 5, api_base: 'http://a', model: openai/x}, model_name: m}"
    two = "{model_name: m, litellm_params: {model: openai/x, api_base: 'http://b'}}"
    assert fingerprint("a.yaml", f"model_list: [{one}]") == fingerprint("b.yaml", f"model_list: [{same}]")
    assert fingerprint("c.yaml", f"model_list: [{one}, {two}]") != fingerprint("d.yaml", f"model_list: [{two}, {one}]")
    assert fingerprint("e.yaml", f"model_list: [{one}]") != fingerprint("f.yaml", f"model_list: [{two}]")


def test_counts_named_like_secrets_pass_and_an_edited_file_is_read_again(tmp_path):
    import os

    from socialsim.llm.deployments import load_deployments

    path = tmp_path / "pool.yaml"
    path.write_text("model_list:\n  - {model_name: one, litellm_params: {model: openai/x, max_tokens: 100, "
                    "api_key: os.environ/ANY, tpm: 1000, max_completion_tokens: '256', "  # a count, though a string
                    "default_api_key_tpm_limit: 100, use_xai_oauth: true}, "  # a count, a yes: named for a key
                    "model_info: {input_cost_per_token: 0.000001}}\n"
                    "  - {model_name: one, litellm_params: {model: openai/x, api_key: EMPTY}}\n"  # vLLM's no-key
                    "  - {model_name: one, litellm_params: {model: openai/x, api_key: ''}}\n")
    os.utime(path, ns=(10**18, 10**18))
    assert load_deployments(path).names == {"one"}
    assert load_deployments(path) is load_deployments(path)  # one Router per file for a process's runs
    path.write_text(path.read_text().replace("model_name: one", "model_name: two"))
    os.utime(path, ns=(10**18 + 1, 10**18 + 1))
    assert load_deployments(path).names == {"two"}
    # edited within one tick of the file system's clock: the same modification time, another text
    path.write_text(path.read_text().replace("model_name: two", "model_name: three"))
    os.utime(path, ns=(10**18 + 1, 10**18 + 1))
    assert load_deployments(path).names == {"three"}


def test_a_pool_that_goes_down_mid_run_is_an_outage_and_a_resume_in_the_same_process_goes_on(tmp_path, servers):
    """Every deployment cooling down after failures made litellm's Router raise its own error (no
    deployment available), which the gateway took for a bug: the run 'failed'. And the Router, kept
    for the process, still held the cooldowns when the same process resumed the run."""
    from socialsim.model.runner import RunConfig, run

    a, b = servers
    pool = pool_file(tmp_path / "pool.yaml", a, b)

    def down_after(count, messages):
        if count >= 6:
            a.down = b.down = True
        return None

    a.faults = b.faults = down_after
    config = RunConfig(arch="generic", model=MODEL, steps=3, deployments=str(pool), breaker=5, num_retries=0)
    stopped = run(config, tmp_path / "r", progress=False)
    assert stopped.status.startswith("stopped by provider outage") and stopped.steps_done < 3
    a.down = b.down = False
    a.faults = b.faults = None
    resumed = run(config, tmp_path / "r", progress=False)
    assert resumed.status == "completed"
    assert not resumed.model.llm.ledger.with_status("fallback")
    # with the breaker off, every call the pool cannot answer falls back and the run goes on
    a.down = b.down = True
    unbroken = run(config.model_copy(update={"breaker": 0}), tmp_path / "off", progress=False,
                   preflight=False)
    assert unbroken.status == "completed" and unbroken.model.llm.ledger.with_status("fallback")


def test_a_deployments_own_timeout_and_max_tokens_pass_the_check_before_step_1(tmp_path, servers):
    """The check asked each deployment with its own parameters beside its own timeout and max_tokens:
    'got multiple values for keyword argument', and a working pool was refused."""
    a, b = servers
    pool = pool_file(tmp_path / "pool.yaml", a, b)
    text = pool.read_text().split("  - model_name")
    pool.write_text(text[0] + "  - model_name" + text[1] + "      timeout: 60\n      num_retries: 2\n"
                    + "  - model_name" + text[2] + "      max_tokens: 200\n")
    assert main([*RUN, "--out", str(tmp_path / "r"), "--deployments", str(pool)]) == 0
    assert len(chats(a)) > 2 and len(chats(b)) > 2
    pings = [r for s in (a, b) for r in s.requests if r.get("max_tokens") == 1]
    assert len(pings) == 2  # one each, of one token whatever the deployment's own max_tokens


def test_a_pooled_embedding_model_is_asked_through_the_pool(tmp_path, monkeypatch):
    """Embeddings (CRSEC's memory, ASVO's separability) went to litellm directly, where a pool's
    model name means nothing, and fell back."""
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.litellm_setup import litellm

    asked = []

    async def aembedding(self, model, input, **kwargs):
        asked.append((model, list(input), "api_base" in kwargs))
        return SimpleNamespace(data=[{"embedding": [1.0, float(len(t))]} for t in input],
                               usage=SimpleNamespace(prompt_tokens=3))

    monkeypatch.setattr(litellm.Router, "aembedding", aembedding)
    pool = tmp_path / "pool.yaml"
    pool.write_text("model_list:\n  - {model_name: embed-pool, litellm_params: {model: openai/e, api_base: "
                    "'http://127.0.0.1:9/v1'}}\n")
    gateway = Gateway(api_base="http://127.0.0.1:8/v1", deployments=pool)
    assert gateway.embed("embed-pool", ["hello", "hi"]) == [[1.0, 5.0], [1.0, 2.0]]
    assert asked == [("embed-pool", ["hello", "hi"], False)]


def test_a_secret_named_by_a_variable_is_redacted_whatever_the_variable_is_called(tmp_path, monkeypatch):
    """``api_key: os.environ/VLLM_ACCESS``: the variable's name says nothing of a secret, the file does."""
    from socialsim.llm.deployments import load_deployments
    from socialsim.llm.redact import redact

    value = "vllm-auth-" + "z9" * 10  # no other secret of the environment in it (e.g. a test's "placeholder")
    variable = f"VLLM_ACCESS_{uuid.uuid4().hex[:8].upper()}"  # named by no earlier test of this process
    monkeypatch.setenv(variable, value)
    assert redact(f"sent {value}") == f"sent {value}"
    path = tmp_path / "pool.yaml"
    path.write_text("model_list:\n  - {model_name: one, litellm_params: {model: openai/x, "
                    f"api_key: os.environ/{variable}}}}}\n")
    load_deployments(path)
    assert redact(f"sent {value}") == "sent [REDACTED]"


# where a credential is given in a deployment: litellm's parameters that hold one (GenericLiteLLMParams, 1.106),
# and headers a provider or a gateway in front of a server reads a key from
CREDENTIAL_NAMES = [
    "api_key", "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "aws_web_identity_token",
    "azure_ad_token", "azure_password", "client_secret", "vertex_credentials", "s3_access_key_id",
    "s3_secret_access_key", "valkey_password", "anthropic_identity_token", "anthropic_keycloak_client_secret_ref",
    "anthropic_issuer_signing_key_ref", "zen_api_key", "token",
    "extra_headers.Authorization", "extra_headers.X-Auth", "extra_headers.x-api-key", "extra_headers.api-key",
    "extra_headers.Ocp-Apim-Subscription-Key", "extra_headers.X-Amz-Security-Token", "extra_headers.x_sig",
    "extra_body.AccessKeyId"]  # cut at its capitals (lowered first, "accesskeyid" ends with no credential's word)
# a word of a credential's inside another word, a price, a count, which parameters a caller may set
NOT_CREDENTIAL_NAMES = [
    "author", "design_temperature", "keyword_boost", "signal", "tokenizer", "anthropic_keycloak_client_id",
    "anthropic_keycloak_scope", "max_tokens_per_doc", "input_cost_per_token", "configurable_clientside_auth_params"]


def _deployment_with(path, name, value):
    """A file whose one deployment gives ``name`` (``extra_headers.X-Auth``: nested) the YAML ``value``."""
    *outer, leaf = name.split(".")
    given = f"{{{leaf}: {value}}}"
    for field in reversed(outer):
        given = f"{{{field}: {given}}}"
    path.write_text(f"model_list:\n  - {{model_name: one, litellm_params: {{model: openai/x, {given[1:-1]}}}}}\n")
    return path


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_a_credential_is_refused_written_out_and_redacted_named_by_a_variable(tmp_path, monkeypatch, name):
    from socialsim.llm.deployments import DeploymentsError, load_deployments
    from socialsim.llm.redact import redact

    with pytest.raises(DeploymentsError, match=re.escape(f"model_list[0].litellm_params.{name} holds a secret")):
        load_deployments(_deployment_with(tmp_path / "written.yaml", name, "hunter2hunter2"))
    value = "named-" + "z9" * 10
    variable = f"POOL_{uuid.uuid4().hex[:8].upper()}"  # named by no earlier test of this process
    monkeypatch.setenv(variable, value)
    load_deployments(_deployment_with(tmp_path / "named.yaml", name, f"os.environ/{variable}"))
    assert redact(f"sent {value}") == "sent [REDACTED]"


@pytest.mark.parametrize("name", NOT_CREDENTIAL_NAMES)
def test_a_parameter_named_with_a_credentials_word_but_for_none_is_written_out_and_not_redacted(tmp_path, monkeypatch,
                                                                                              name):
    """Found by a word inside a name (``key`` in ``keyword_boost``, ``keycloak``), such a parameter's value
    was refused as a secret written out; redact's names_a_credential judges names by their whole parts."""
    from socialsim.llm.deployments import load_deployments
    from socialsim.llm.redact import redact

    value = "[api_base]" if name.startswith("configurable") else "1e-6" if "cost" in name else "plain-1"
    assert load_deployments(_deployment_with(tmp_path / "written.yaml", name, value)).names == {"one"}
    plain = "plain-" + "z9" * 10
    variable = f"POOL_{uuid.uuid4().hex[:8].upper()}"
    monkeypatch.setenv(variable, plain)
    load_deployments(_deployment_with(tmp_path / "named.yaml", name, f"os.environ/{variable}"))
    assert redact(f"sent {plain}") == f"sent {plain}"


def test_a_deployment_is_named_as_the_file_writes_it_not_by_its_variables_value(tmp_path, servers, caplog,
                                                                                 monkeypatch):
    a, b = servers
    a.down = True
    monkeypatch.setenv("POOL_BASE", a.api_base)
    pool = pool_file(tmp_path / "pool.yaml", a, b)
    pool.write_text(pool.read_text().replace(f"api_base: {a.api_base}", "api_base: os.environ/POOL_BASE"))
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert main([*RUN, "--steps", "1", "--out", str(tmp_path / "r"), "--deployments", str(pool)]) == 0
    warned = [r.getMessage() for r in caplog.records if "deployment 1" in r.getMessage()]
    assert len(warned) == 1 and "deployment 1 (os.environ/POOL_BASE)" in warned[0]


def test_the_router_built_without_the_check_names_an_unset_variable_and_its_field(tmp_path, monkeypatch):
    """A run without the check before step 1 (``preflight=False``) builds the Router at its first
    pooled call: a variable unset there is named with where the file names it, at any depth."""
    from socialsim.llm import deployments
    from socialsim.llm.litellm_setup import litellm

    path = tmp_path / "pool.yaml"
    for settings, params, where in [
        ("{redis_password: os.environ/NO_SUCH_VAR}", "{model: openai/m}", "router_settings.redis_password"),
        ("{}", "{model: openai/m, extra_headers: {X-Token: os.environ/NO_SUCH_VAR}}", "m's extra_headers.X-Token"),
        ("{cache_kwargs: {startup_nodes: [{host: h}, {host: g, password: os.environ/NO_SUCH_VAR}]}}",
         "{model: openai/m}", "router_settings.cache_kwargs.startup_nodes[1].password")]:
        path.write_text(f"model_list:\n  - {{model_name: m, litellm_params: {params}}}\nrouter_settings: {settings}\n")
        pool = deployments.load_deployments(path)
        monkeypatch.setattr(litellm, "Router", lambda **kwargs: kwargs)
        with pytest.raises(deployments.DeploymentsError) as raised:
            pool.new_router()
        assert str(raised.value) == (f"{path.resolve()}: {where} names the environment variable NO_SUCH_VAR, "
                                     "which is not set")


def test_a_reference_in_a_list_is_read_for_the_router_and_the_check(tmp_path, monkeypatch):
    from socialsim.llm import deployments
    from socialsim.llm.litellm_setup import litellm

    monkeypatch.setenv("CACHE_SECRET", "placeholder-cache-secret")
    monkeypatch.setenv("STOP_WORD", "DONE")
    path = tmp_path / "pool.yaml"
    path.write_text("model_list:\n  - {model_name: m, litellm_params: {model: openai/m, extra_body: {stop: "
                    "[END, os.environ/STOP_WORD]}}}\n"
                    "router_settings: {cache_kwargs: {startup_nodes: [{host: h, password: os.environ/CACHE_SECRET}]}}\n")
    pool = deployments.load_deployments(path)
    monkeypatch.setattr(litellm, "Router", lambda **kwargs: kwargs)
    given = pool.new_router()
    assert given["cache_kwargs"] == {"startup_nodes": [{"host": "h", "password": "placeholder-cache-secret"}]}
    assert given["model_list"][0]["litellm_params"]["extra_body"] == {"stop": ["END", "DONE"]}
    assert pool.resolved_params(pool.of("m")[0])["extra_body"] == {"stop": ["END", "DONE"]}  # the check's


def test_a_deployments_file_is_known_by_its_full_path_from_home_or_the_working_folder(tmp_path, monkeypatch):
    """The path goes into the run's config.json and names the file in every message: a resume from
    another folder must find the same file."""
    from socialsim.llm.deployments import load_deployments

    (tmp_path / "pool.yaml").write_text("model_list:\n  - {model_name: m, litellm_params: {model: openai/m}}\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_deployments("~/pool.yaml").path == (tmp_path / "pool.yaml").resolve()
    monkeypatch.chdir(tmp_path)
    assert load_deployments("pool.yaml").path == (tmp_path / "pool.yaml").resolve()
    assert load_deployments(None) is None


def test_a_file_serves_each_of_its_model_names_and_a_models_deployments_are_its_own(tmp_path):
    from socialsim.llm.deployments import load_deployments

    path = tmp_path / "pool.yaml"
    path.write_text("model_list:\n  - {model_name: small, litellm_params: {model: openai/s}}\n"
                    "  - {model_name: big, litellm_params: {model: openai/b, api_base: 'http://h1/v1'}}\n"
                    "  - {model_name: big, litellm_params: {model: openai/b, api_base: 'http://h2/v1'}}\n")
    pool = load_deployments(path)
    assert pool.serves("big") and pool.serves("small") and not pool.serves("openai/b")
    assert [d.litellm_params.get("api_base") for d in pool.of("big")] == ["http://h1/v1", "http://h2/v1"]
    assert [d.litellm_params["model"] for d in pool.of("small")] == ["openai/s"]


class CountingLimiter:
    """The run's limiter of a test: each request it lets go, and whether a --concurrency place was held then."""

    def __init__(self, gateway):
        self.gateway, self.taken = gateway, []

    async def acquire(self, tokens=0):
        self.taken.append(self.gateway._root()._semaphore.locked())


def counted(monkeypatch, gateway) -> CountingLimiter:
    from socialsim.llm import gateway as gateway_module

    limiter = CountingLimiter(gateway)
    monkeypatch.setattr(gateway_module, "shared_limiter", lambda model, rpm, tpm: limiter)
    return limiter


def ask(gateway):
    return run_sync(gateway.ask(CHOOSE_ACTION, ActionContext("Ann", "A poet.", "A cafe.", "In the cafe.", ["sit", "leave"]),
                                agent_id=1, rng=random.Random(1)))


def test_a_pooled_call_is_retried_by_the_gateway_each_attempt_through_the_limiter(tmp_path, monkeypatch):
    """A pool's calls were retried by its Router (given the run's --retries) inside one attempt of the
    gateway's: the retries went past --rpm/--tpm, --concurrency and the gateway's Retry-After waits. The
    Router now makes one attempt a call, and the gateway retries it as a single model's call."""
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.litellm_setup import litellm

    asked = []

    async def acompletion(self, model, messages, **kwargs):
        asked.append(kwargs["num_retries"])
        raise litellm.InternalServerError("down", llm_provider="openai", model=model)

    monkeypatch.setattr(litellm.Router, "acompletion", acompletion)
    pool = pool_file(tmp_path / "pool.yaml", SimpleNamespace(api_base="http://127.0.0.1:9/v1"))
    gateway = Gateway(RouteTable(MODEL), deployments=pool, num_retries=2, breaker=0, max_concurrency=1)
    limiter = counted(monkeypatch, gateway)
    answer = ask(gateway)
    assert (answer.status, asked) == ("fallback", [0, 0, 0])  # 1 + --retries attempts, none retried by the Router
    assert limiter.taken == [True, True, True]  # each through the limiter, in a --concurrency place
    assert "after 3 attempts" in answer.error


def test_a_pooled_embedding_is_retried_by_the_gateway_each_attempt_through_the_limiter(tmp_path, monkeypatch):
    """As a pooled chat call: the Router makes one attempt, the gateway the run's retries."""
    from socialsim.llm.gateway import Gateway, ProviderError
    from socialsim.llm.litellm_setup import litellm

    asked = []

    async def aembedding(self, model, input, **kwargs):
        asked.append(kwargs["num_retries"])
        raise litellm.InternalServerError("down", llm_provider="openai", model=model)

    monkeypatch.setattr(litellm.Router, "aembedding", aembedding)
    pool = tmp_path / "pool.yaml"
    pool.write_text("model_list:\n  - {model_name: embed-pool, litellm_params: {model: openai/e, api_base: "
                    "'http://127.0.0.1:9/v1'}}\n")
    gateway = Gateway(deployments=pool, num_retries=2, breaker=0, max_concurrency=1)
    limiter = counted(monkeypatch, gateway)
    with pytest.raises(ProviderError) as failed:
        gateway.embed("embed-pool", ["hello"])
    assert asked == [0, 0, 0] and limiter.taken == [True, True, True]
    assert "after 3 attempts" in str(failed.value)


def test_a_pools_retry_goes_to_the_other_deployment_once_the_first_is_cooling_down(tmp_path, servers, monkeypatch):
    """A deployment answering 429 is cooled down by the Router, so the gateway's retry (a new Router call)
    is sent to the other: every request the servers got was one the limiter let go. (The weights make the
    Router ask ``a`` while it is not cooling down; no failover within an attempt: see the next test.)"""
    from socialsim.llm.gateway import Gateway

    a, b = servers
    order = []
    a.faults = lambda n, messages: order.append("a") or "429"
    b.faults = lambda n, messages: order.append("b") or "500"
    pool = tmp_path / "pool.yaml"
    pool.write_text("model_list:\n" + "".join(
        f"  - {{model_name: {MODEL}, litellm_params: {{model: {MODEL}, api_base: '{s.api_base}', "
        f"api_key: os.environ/POOL_KEY, weight: {weight}}}}}\n" for s, weight in ((a, 1), (b, 0)))
        + "router_settings: {enable_weighted_failover: false}\n")
    gateway = Gateway(RouteTable(MODEL), deployments=pool, num_retries=2, breaker=0, max_concurrency=1)
    limiter = counted(monkeypatch, gateway)
    answer = ask(gateway)
    assert answer.status == "fallback" and "after 3 attempts" in answer.error
    assert order == ["a", "b", "b"]  # the retries: to the other deployment, while the first cools down
    assert len(limiter.taken) == 3 and all(limiter.taken)


def test_a_pools_failover_to_another_deployment_takes_its_own_request_from_the_limiter(tmp_path, servers, monkeypatch):
    """Once a deployment fails, the Router's failover (ours by default: enable_weighted_failover) asks the
    other within the same attempt of the gateway's, with no retry of ours: that request went past --rpm
    and --tpm (both deployments answering 500 at --retries 1: 4 requests, the limiter saw 2)."""
    from socialsim.llm.gateway import Gateway

    a, b = servers
    a.down = b.down = True
    pool = pool_file(tmp_path / "pool.yaml", a, b)
    gateway = Gateway(RouteTable(MODEL), deployments=pool, num_retries=1, breaker=0, max_concurrency=1)
    limiter = counted(monkeypatch, gateway)
    assert ask(gateway).status == "fallback"
    assert len(a.requests) == len(b.requests) == 2  # each attempt asked both deployments
    assert len(limiter.taken) == 4 and all(limiter.taken)  # each request through the limiter, in the call's place


def test_a_pool_whose_every_deployment_cools_down_is_asked_again_once_the_cooldown_is_over(tmp_path, monkeypatch,
                                                                                        waits_written_down):
    """Every deployment cooling down after failures, the Router refuses a call at once ("no deployments
    available, try again in N seconds"): the gateway's retry, made at once, was refused at once too."""
    from litellm.types.router import RouterRateLimitError

    from socialsim.llm.gateway import Gateway
    from socialsim.llm.litellm_setup import litellm

    happened = []

    async def acompletion(self, model, messages, **kwargs):
        happened.append("attempt")
        if happened.count("attempt") == 1:
            raise RouterRateLimitError(model=model, cooldown_time=7, enable_pre_call_checks=False, cooldown_list=[])
        message = SimpleNamespace(content="1")
        return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")], usage=None)

    monkeypatch.setattr(litellm.Router, "acompletion", acompletion)
    waits_written_down(happened)
    pool = pool_file(tmp_path / "pool.yaml", SimpleNamespace(api_base="http://127.0.0.1:9/v1"))
    assert ask(Gateway(RouteTable(MODEL), deployments=pool, num_retries=1, breaker=0)).status == "ok"
    assert happened == ["attempt", 7.0, "attempt"]


@pytest.fixture
def routers_built(monkeypatch):
    """Weak references to the litellm Routers built while the test runs, in order."""
    import weakref

    from socialsim.llm.litellm_setup import litellm

    built, new_router = [], litellm.Router.__init__

    def remember(self, *args, **kwargs):
        built.append(weakref.ref(self))
        new_router(self, *args, **kwargs)

    monkeypatch.setattr(litellm.Router, "__init__", remember)
    return built


def hooked(router) -> bool:
    """Whether ``router``'s methods are in litellm's process-wide success or failure callbacks."""
    from socialsim.llm.litellm_setup import litellm

    lists = (litellm._async_success_callback, litellm.success_callback, litellm._async_failure_callback,
             litellm.failure_callback)
    return router is not None and any(getattr(c, "__self__", None) is router for cbs in lists for c in cbs)


def test_a_runs_router_leaves_litellms_callbacks_when_the_run_is_gone(tmp_path, servers, routers_built):
    """litellm's Router hooks its methods into litellm's process-wide callback lists and leaves them
    there: every later call of the process (a dashboard's Reset, a sweep's next run, a notebook's next
    model) ran every earlier run's Router's callbacks, a failed call formatting a traceback for each."""
    pool = pool_file(tmp_path / "pool.yaml", *servers)
    for n in range(2):
        assert main([*RUN, "--steps", "1", "--out", str(tmp_path / f"run{n}"), "--deployments", str(pool)]) == 0
    assert len(routers_built) == 2  # one Router a run
    assert not any(hooked(ref()) for ref in routers_built)  # neither still called


def test_a_gateway_given_up_without_closing_unhooks_its_router_once_it_is_gone(tmp_path, servers):
    """A notebook's or a dashboard's model is dropped, not closed: its Router leaves litellm's
    callback lists when its gateway is collected."""
    import gc

    from socialsim.llm.gateway import Gateway

    gateway = Gateway(deployments=pool_file(tmp_path / "pool.yaml", *servers))
    router = gateway._router()
    assert gateway.derive(gateway.routes)._router() is router and hooked(router)
    del gateway
    gc.collect()
    assert not hooked(router)


def test_a_runs_end_of_run_judge_on_the_pool_asks_the_runs_router_and_leaves_none_hooked(tmp_path, servers,
                                                                                         routers_built):
    """The gateway is closed after the end-of-run measurements, not before: closed before, ITCMA-S's
    judge (asked after the last step) built a second Router for the run, which started without the
    first one's record of the deployments (their cooldowns, their usage)."""
    judge = "openai/fake-judge"
    a, _ = servers
    pool = pool_file(tmp_path / "pool.yaml", a, extra=f"""  - model_name: {judge}
    litellm_params:
      model: {judge}
      api_base: {a.api_base}
      api_key: os.environ/POOL_KEY
""")
    assert main(["run", "irollan-valley", "--arch", "itcmas", "--model", MODEL, "--route", f"itcmas_judge={judge}",
                 "--steps", "1", "--no-progress", "--out", str(tmp_path / "run"), "--deployments", str(pool)]) == 0
    judged = pd.read_parquet(tmp_path / "run" / "llm_calls.parquet")
    assert (judged["model"] == judge).any() and (judged["model"] == MODEL).any()  # both asked of the pool
    assert len(routers_built) == 1  # the run's one Router answered the judge too
    assert not hooked(routers_built[0]())


def test_a_closed_gateways_next_pooled_call_gets_a_router_of_its_own_which_the_next_close_unhooks(tmp_path, servers):
    """``close`` is the run's, whichever of its gateways is closed (a judge's is derived), and a pooled
    call after it (a notebook's model stepped again) is made by a new Router hooked into litellm's
    callbacks, as a Router needs to be to put a failing deployment in cooldown, not by the one unhooked."""
    from socialsim.llm.gateway import Gateway

    gateway = Gateway(deployments=pool_file(tmp_path / "pool.yaml", *servers))
    first = gateway._router()
    gateway.derive(gateway.routes).close()
    assert not hooked(first)
    second = gateway._router()
    assert second is not first and hooked(second)
    gateway.close()
    gateway.close()  # twice: nothing more to do
    assert not hooked(second)


def test_a_pooled_model_litellm_has_no_price_for_stays_unpriced_after_the_pool_is_used(tmp_path, servers, capsys):
    """litellm's Router enters each of its deployments' models in litellm's cost map with no fields, and
    litellm prices such an entry at $0: a model first priced after its pool's Router was built (an
    end-of-run judge) counted as priced at $0 for the rest of the process (a sweep's worker, a notebook),
    so a later run's --max-cost on it was kept at $0 instead of refused."""
    a, _ = servers
    judge = f"openai/unpriced-judge-{uuid.uuid4().hex[:8]}"  # a name no earlier test priced
    pool = pool_file(tmp_path / "pool.yaml", a, extra=f"  - model_name: {judge}\n    litellm_params:\n"
                     f"      model: {judge}\n      api_base: {a.api_base}\n      api_key: os.environ/POOL_KEY\n")
    run = ["run", "irollan-valley", "--arch", "itcmas", "--model", MODEL, "--route", f"itcmas_judge={judge}",
           "--steps", "1", "--no-progress", "--deployments", str(pool)]
    assert main([*run, "--out", str(tmp_path / "first")]) == 0
    capsys.readouterr()
    assert main([*run, "--out", str(tmp_path / "budgeted"), "--max-cost", "0.01"]) != 0
    refusal = capsys.readouterr().err
    assert f"cannot be kept: {MODEL}, {judge} has no price" in refusal  # the judge's calls would be counted at $0
