"""Runs end to end: run directories, replay with zero calls, budget stop and resume, bad models.

Provider-path tests talk to a local OpenAI-compatible server (FakeOpenAIServer on 127.0.0.1)
through the real litellm client.
"""

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from socialsim.llm.engines import ModelUnavailable, check_model_names
from socialsim.llm.fake_server import FakeOpenAIServer, by_prompt
from socialsim.metrics.report import without_figures
from socialsim.model.runner import RunConfig, first_difference, replay, run


def replay_unfigured(*args, **kwargs):
    """A replay whose report draws no figures: it is compared by its frames, and its recording drew
    the same figures."""
    with without_figures():
        return replay(*args, **kwargs)


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt) as s:
        yield s


def provider_config(server, **kw):
    return RunConfig(scenario="hobbs-cafe", arch="generic", model="openai/fake-model", steps=3, rng=11,
                     api_base=server.api_base, **kw)


@pytest.mark.figures
def test_rules_run_writes_a_complete_run_directory(tmp_path):
    result = run(RunConfig(arch="generic", model="rules", steps=3), tmp_path / "run", progress=False)
    d = result.run_dir
    assert result.status == "completed" and result.steps_done == 3
    for name in ["config.json", "model.parquet", "agents.parquet", "llm_calls.parquet", "usage.csv", "run.log",
                 "report.md", "tables/events.parquet", "tables/interactions.parquet", "figures/interactions.png"]:
        assert (d / name).is_file(), name
    agents = pd.read_parquet(d / "agents.parquet")
    assert len(agents) == 3 * 10 and set(agents["name"]) == {a.name for a in result.model.agents}
    events = pd.read_parquet(d / "tables/events.parquet")
    assert len(events) == 30 and events["ok"].all()
    interactions = pd.read_parquet(d / "tables/interactions.parquet")
    assert len(interactions) == sum(w for *_, w in result.model.interactions.edges(data="weight"))
    assert "rule-based baseline" in (d / "report.md").read_text()


def test_same_seed_same_run_different_seed_different_run(tmp_path):
    a = run(RunConfig(arch="generic", model="rules", steps=3, rng=1), tmp_path / "a", progress=False)
    b = run(RunConfig(arch="generic", model="rules", steps=3, rng=1), tmp_path / "b", progress=False)
    c = run(RunConfig(arch="generic", model="rules", steps=3, rng=2), tmp_path / "c", progress=False)
    assert first_difference(a.run_dir, b.run_dir) is None
    assert not pd.read_parquet(a.run_dir / "tables/events.parquet").equals(pd.read_parquet(c.run_dir / "tables/events.parquet"))


def test_provider_run_replays_identically_with_zero_calls(tmp_path, server):
    original = run(provider_config(server), tmp_path / "run", progress=False)
    calls = len(server.requests) - 1  # the first request is the pre-flight check
    assert calls > 0 and original.model.llm.ledger.live_calls == calls
    assert (tmp_path / "run" / "tape.jsonl").read_text().count("\n") == calls

    result, same = replay_unfigured(tmp_path / "run", progress=False)
    assert same
    assert len(server.requests) == calls + 1  # no request reached the server
    assert result.model.llm.ledger.live_calls == 0
    assert pd.read_parquet(result.run_dir / "tables/events.parquet").equals(
        pd.read_parquet(tmp_path / "run" / "tables/events.parquet"))


def test_a_replay_directory_is_neither_resumed_nor_replayed_it_names_the_recording(tmp_path, server, capsys):
    """A replay keeps no tape: going on from it would have made every call again, live."""
    from socialsim.cli import main

    run(provider_config(server), tmp_path / "run", progress=False)
    calls = len(server.requests)
    result, same = replay_unfigured(tmp_path / "run", progress=False)
    assert same and result.run_dir == tmp_path / "run" / "replay"  # the default folder, inside the recording
    assert json.loads((result.run_dir / "config.json").read_text())["replay_of"] == str(tmp_path / "run")
    assert "replay_of" not in json.loads((tmp_path / "run" / "config.json").read_text())
    assert main(["run", "--resume", str(result.run_dir), "--steps", "4", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"is a replay of {tmp_path / 'run'}: it keeps no tape" in err
    assert f"socialsim run --resume {tmp_path / 'run'}" in err
    assert main(["replay", str(result.run_dir), "--no-progress"]) == 2
    assert f"is itself a replay of {tmp_path / 'run'}" in capsys.readouterr().err
    assert len(server.requests) == calls  # neither reached the provider
    assert json.loads((result.run_dir / "config.json").read_text())["steps_done"] == 3  # left as it was


def test_replay_with_a_damaged_tape_names_the_missing_call(tmp_path, server):
    from socialsim.llm.tape import TapeMiss

    run(provider_config(server), tmp_path / "run", progress=False)
    tape = tmp_path / "run" / "tape.jsonl"
    tape.write_text("\n".join(tape.read_text().splitlines()[1:]) + "\n")
    with pytest.raises(TapeMiss, match="the tape has no record of ChooseAction for agent"):
        replay(tmp_path / "run", progress=False)


def test_budget_stop_keeps_everything_and_resume_continues_for_free(tmp_path, server):
    stopped = run(provider_config(server, max_calls=25), tmp_path / "run", progress=False)
    assert stopped.status.startswith("stopped by budget: max_calls=25")
    assert len(server.requests) == 1 + 25  # pre-flight + the budget
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["steps_done"] == stopped.steps_done < 3
    assert len(pd.read_parquet(tmp_path / "run" / "model.parquet")) == stopped.steps_done
    assert (tmp_path / "run" / "tape.jsonl").read_text().count("\n") == 25

    resumed = run(provider_config(server), tmp_path / "run", progress=False)
    assert resumed.status == "completed" and resumed.steps_done == 3
    assert resumed.model.llm.ledger.live_calls == len(server.requests) - 2 - 25  # recorded calls were free
    fresh = run(provider_config(server), tmp_path / "fresh", progress=False)
    assert fresh.status == "completed"
    resumed_model, fresh_model = (pd.read_parquet(p / "model.parquet").drop(columns="llm_latency_s")
                                  for p in (tmp_path / "run", tmp_path / "fresh"))
    assert resumed_model.equals(fresh_model)  # same decisions, tokens and counts (latency is live)
    assert pd.read_parquet(tmp_path / "run" / "agents.parquet").equals(pd.read_parquet(tmp_path / "fresh" / "agents.parquet"))


def test_unknown_model_fails_before_step_one(tmp_path):
    with pytest.raises(ModelUnavailable, match="unknown model 'nosuchprovider/x'"):
        run(RunConfig(arch="generic", model="nosuchprovider/x", steps=1), tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "model.parquet").exists()


def test_a_misspelt_model_in_python_is_named_when_the_model_is_built():
    """``SocietyModel(model="rulez")`` was built, then failed call after call in step 1 (13 s) before
    an outage named it; the command line checks models before step 1, Python now too, a judge's too."""
    from socialsim.model.society import SocietyModel

    for kwargs, named in [({"model": "rulez"}, "unknown model 'rulez'"),
                          ({"model": "rules", "routes": {"ChooseAction": "nosuchprovider/x"}},
                           "unknown model 'nosuchprovider/x'"),
                          ({"model": "rules", "routes": {"ChooseAction": "typoprovider/x"}},  # after "rules"
                           "unknown model 'typoprovider/x'"),
                          ({"model": "local/smollm3"}, "unknown embedded model 'local/smollm3'")]:
        with pytest.raises(ModelUnavailable, match=named):
            SocietyModel("hobbs-cafe", arch="generic", rng=1, **kwargs)
    with pytest.raises(ModelUnavailable, match="unknown model 'typo-00/x'"):  # the same one named every time
        check_model_names({f"typo-{i:02}/x" for i in range(20)})
    assert SocietyModel("hobbs-cafe", arch="generic", model="openai/gpt-4o-mini", rng=1).steps == 0  # no key read
    # a judge CRSEC's settings name (ASVO checks its own judges): built, it failed when first asked
    with pytest.raises(ModelUnavailable, match="unknown model 'opnai/gpt-4o'"):
        SocietyModel("makerspace", arch="crsec", model="rules", rng=1, judge="opnai/gpt-4o")
    assert SocietyModel("makerspace", arch="crsec", model="rules", rng=1, judge="openai/gpt-4o").steps == 0


@pytest.mark.parametrize("scenario", [None, 5, ["hobbs-cafe"]])
def test_a_scenario_that_is_no_name_path_or_scenario_is_refused_by_what_it_is(scenario):
    """``SocietyModel(None)`` failed inside pathlib: "argument should be a str or an os.PathLike object"."""
    from socialsim.model.society import SocietyModel

    with pytest.raises(TypeError, match=f"^scenario is a built-in scenario's name, .* not {type(scenario).__name__} "):
        SocietyModel(scenario, model="rules", rng=1)


@pytest.mark.parametrize("given", [{"model": "openai/gpt-4o-mini"}, {"routes": {"ChooseAction": "rules"}},
                                   {"max_cost": 1.0}, {"max_calls": 0}, {"price": (1.0, 2.0)}])
def test_a_model_route_or_budget_beside_a_gateway_is_refused_not_dropped(given):
    """``SocietyModel(gateway=g, max_calls=10)`` ran on the gateway's own routes and budget: the
    limit the user set was ignored without a word."""
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.ledger import Ledger
    from socialsim.llm.routing import RouteTable
    from socialsim.model.society import SocietyModel

    gateway = Gateway(RouteTable("rules"), ledger=Ledger())
    with pytest.raises(ValueError, match=f"^{next(iter(given))} and gateway= were both given"):
        SocietyModel("hobbs-cafe", arch="generic", gateway=gateway, rng=1, **given)
    assert SocietyModel("hobbs-cafe", arch="generic", gateway=gateway, rng=1).llm is gateway


def test_a_judge_named_in_the_settings_is_checked_before_step_one(tmp_path, monkeypatch):
    """A judge is a model the run asks too: unknown or without its key, it stops the run before
    anything is written (not six failed calls into step 1)."""
    with pytest.raises(ModelUnavailable, match="unknown model 'nosuchprovider/judge'"):
        run(RunConfig(arch="crsec", model="rules", steps=1, arch_params={"judge": "nosuchprovider/judge"}),
            tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for arch, scenario, params in [("crsec", "hobbs-cafe", {"judge": "openai/gpt-4o"}),
                                   ("asvo", "school-micro", {"judges": ["openai/gpt-4o"]})]:
        with pytest.raises(ModelUnavailable, match="'openai/gpt-4o' needs OPENAI_API_KEY"):
            run(RunConfig(scenario=scenario, arch=arch, model="rules", steps=1, arch_params=params),
                tmp_path / arch, progress=False)
        assert not (tmp_path / arch).exists()


def test_a_budget_needs_a_price_for_the_judge_too(tmp_path):
    with pytest.raises(ValueError, match=r"openai/unpriced-judge has no price"):
        run(RunConfig(arch="crsec", model="rules", steps=1, max_cost=1.0,
                      arch_params={"judge": "openai/unpriced-judge"}), tmp_path / "run", progress=False, preflight=False)
    assert not (tmp_path / "run").exists()


def test_missing_key_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelUnavailable, match="OPENAI_API_KEY"):
        run(RunConfig(arch="generic", model="openai/gpt-4o-mini", steps=1), tmp_path / "run", progress=False)


def test_unreachable_model_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with pytest.raises(ModelUnavailable, match="model 'openai/fake-model' is unreachable"):
        run(RunConfig(arch="generic", model="openai/fake-model", steps=1, api_base="http://127.0.0.1:9/v1"), tmp_path / "r",
            progress=False)


def test_provider_outage_mid_run_falls_back_and_is_counted(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt, fail_first=1000) as failing:
        config = RunConfig(arch="generic", model="openai/fake-model", steps=1, api_base=failing.api_base,
                           breaker=0)  # the breaker off: every failure falls back
        result = run(config, tmp_path / "run", progress=False, preflight=False)
    assert result.status == "completed"
    totals = result.model.llm.ledger.totals()
    assert totals["fallbacks"] == 10 and totals["llm_failures"] == 10
    assert "provider error" in (tmp_path / "run" / "run.log").read_text()


def test_no_key_reaches_the_run_directory(tmp_path, monkeypatch):
    secret = "sk-test-0123456789abcdefghijklmnop"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    with FakeOpenAIServer(policy=lambda messages: f"1 {secret}") as echoing:
        run(RunConfig(arch="generic", model="openai/fake-model", steps=1, api_base=echoing.api_base), tmp_path / "run",
            progress=False)
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("config", [None, "{not json", "[1, 2]", '{"status": "stopped"}'])
def test_a_run_gone_over_again_is_not_completed_unless_its_config_says_so(config, tmp_path):
    """No config.json, a damaged one or another status: the model is checked, as for any run going on."""
    from socialsim.model.runner import _completed_before

    if config is not None:
        (tmp_path / "config.json").write_text(config, encoding="utf-8")
    assert _completed_before(tmp_path) is False
    (tmp_path / "config.json").write_text('{"status": "completed"}', encoding="utf-8")
    assert _completed_before(tmp_path) is True


def test_a_completed_run_gone_over_again_needs_no_reachable_model_but_a_stopped_one_does(tmp_path, monkeypatch):
    """Re-running a completed reproduction only to rewrite its report failed while the provider was
    down: the one-token check asked a model that no call would reach (every one is on the tape)."""
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    done, cut = tmp_path / "done", tmp_path / "cut"
    with FakeOpenAIServer(policy=by_prompt) as server:
        first = run(provider_config(server), done, progress=False)
        assert run(provider_config(server, max_calls=3), cut, progress=False).status.startswith("stopped")
        server.down = True  # every request answered HTTP 500 from here
        asked = len(server.requests)
        again = run(provider_config(server), done, progress=False)
        assert again.status == "completed" and again.model.llm.ledger.live_calls == 0
        assert len(server.requests) == asked  # nothing asked, not even the check
        assert first.model.llm.ledger.totals()["llm_calls"] == again.model.llm.ledger.totals()["llm_calls"]
        with pytest.raises(ModelUnavailable, match="is unreachable"):  # a stopped run has calls left to make
            run(provider_config(server, num_retries=0), cut, progress=False)


def test_the_check_before_step_1_asks_with_the_runs_timeout_and_retries(tmp_path, monkeypatch):
    """It had its own 30 s and no retry: a slow-loading local server (the case for --timeout) was
    declared unreachable after 30 s whatever --timeout said, and one transient 500 refused a run
    given --retries 1."""
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt, faults=lambda n, messages: "hang" if n == 1 else None, hang_s=1.0) as slow:
        with pytest.raises(ModelUnavailable, match="is unreachable: Timeout"):  # --timeout 0.3 reached it
            run(provider_config(slow, timeout_s=0.3, num_retries=0), tmp_path / "slow", progress=False)
    with FakeOpenAIServer(policy=by_prompt, fail_first=1) as flaky:
        result = run(provider_config(flaky, num_retries=1), tmp_path / "flaky", progress=False)
        assert result.status == "completed" and flaky.injected["500"] == 1  # the check's first try, retried


HTTP_HANDLER = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"  # litellm's switch between its client and the SDK's


@pytest.mark.parametrize("http_handler", ["true", "false"])
def test_the_check_before_step_1_makes_the_runs_attempts_on_either_of_litellms_request_paths(monkeypatch,
                                                                                             http_handler):
    """--retries 2 is three attempts, as a call's: through the OpenAI SDK (litellm's switch false) litellm
    passed the retries to the SDK and then retried the SDK's failure as many times again, five."""
    from socialsim.llm.engines import check_models

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    monkeypatch.setenv(HTTP_HANDLER, http_handler)
    with FakeOpenAIServer(faults=lambda n, messages: "500") as down:
        with pytest.raises(ModelUnavailable, match="is unreachable: InternalServerError"):
            check_models({"openai/fake-model"}, api_base=down.api_base, num_retries=2)
    assert len(down.requests) == 3


def test_the_check_before_step_1_takes_its_requests_from_the_runs_rate_limit(tmp_path, monkeypatch):
    """The provider counts the check's requests against the quota --rpm states, a retry's too: they went
    past the limiter, and at rpm 1 the check's retry and step 1's first call were sent in the same second."""
    import socialsim.llm.gateway as gateway_module
    import socialsim.llm.limiter as limiter_module
    from socialsim.llm.limiter import RateLimiter

    now = [0.0]

    async def sleep(seconds):  # the limiter's clock, moved on by its waits only
        now[0] += seconds

    limiter, limits = RateLimiter(rpm=1, clock=lambda: now[0], sleep=sleep), []
    for module in (limiter_module, gateway_module):
        monkeypatch.setattr(module, "shared_limiter", lambda *asked: limits.append(asked) or limiter)
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    sent_at = []
    with FakeOpenAIServer(policy=by_prompt, faults=lambda n, messages: sent_at.append(now[0]) or (
            "429" if n == 1 else None)) as server:
        result = run(provider_config(server, rpm=1, num_retries=1), tmp_path / "r", progress=False)
    assert result.status == "completed"
    # the check and its retry a minute apart, and step 1's calls (read at the server: each after its own
    # turn at the limiter) a minute later at the earliest
    assert sent_at[:2] == [0.0, 60.0] and min(sent_at[2:]) >= 120.0
    assert limits[0] == ("openai/fake-model", 1, None)  # the model's own limiter, which its calls take from


@pytest.mark.filterwarnings("ignore:Items .*ReadOnly:UserWarning")  # litellm's Ollama types, on import
def test_a_local_ollama_needs_no_key_and_an_unreachable_one_says_how_to_point_at_it(monkeypatch):
    """OLLAMA_API_BASE is no key: litellm calls a local Ollama without it, and --api-base names
    another (the check stopped both with "needs OLLAMA_API_BASE in the environment")."""
    from socialsim.llm.engines import check_models

    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)
    check_models({"ollama/llama3.1"}, ping=False)
    check_models({"ollama/llama3.1"}, ping=False, api_base="http://127.0.0.1:11434")
    with pytest.raises(ModelUnavailable, match="unreachable") as down:
        check_models({"ollama/llama3.1"}, api_base="http://127.0.0.1:9")
    assert str(down.value).endswith("is its server running? --api-base URL gives its address")
    assert "ssl:<" not in str(down.value)  # aiohttp's SSL context, by its memory address


@pytest.mark.figures
def test_names_the_figure_font_lacks_are_noted_once_not_warned_per_glyph(tmp_path, caplog, recwarn):
    """A scenario with CJK names: matplotlib's default font has no such glyphs and warns once per
    character per figure; the run says it once, naming the characters and the remedy."""
    from socialsim.scenarios.loader import scenario_path

    path = tmp_path / "cafe.yaml"
    path.write_text(scenario_path("hobbs-cafe").read_text(encoding="utf-8").replace("Isabella Rodriguez", "李雷"),
                    encoding="utf-8")
    with caplog.at_level("WARNING", logger="socialsim"):
        result = run(RunConfig(scenario=str(path), model="rules", steps=2), tmp_path / "r", progress=False)
    assert result.status == "completed" and "李雷" in (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    notes = [r.getMessage() for r in caplog.records if "drawn as boxes" in r.getMessage()]
    assert notes == [f"{tmp_path / 'r'}: the figures' font has no 李 雷, drawn as boxes; install a font that has "
                     "them (e.g. Debian's fonts-noto-cjk) and add it to font.sans-serif in a matplotlibrc"]
    assert not [w for w in recwarn if "Glyph" in str(w.message)]


def test_the_glyph_note_lets_every_other_warning_through():
    import warnings

    from socialsim.metrics.report import missing_glyphs_noted

    with pytest.warns(DeprecationWarning, match="old call"), missing_glyphs_noted("here"):
        warnings.warn("Glyph 26446 (\\N{CJK UNIFIED IDEOGRAPH-674E}) missing from font(s) DejaVu Sans.", UserWarning,
                      stacklevel=1)
        warnings.warn("old call", DeprecationWarning, stacklevel=1)


def test_a_misspelt_run_setting_is_refused_not_ignored():
    """`RunConfig(max_cost_usd=1)` ran with no budget at all."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="max_cost_usd"):
        RunConfig(model="rules", max_cost_usd=1.0)
    with pytest.raises(ValidationError, match="rng\n  Input should be greater than or equal to 0"):
        RunConfig(model="rules", rng=-1)  # refused here, not by numpy's "expected non-negative integer" later


def test_a_run_directory_written_with_an_unknown_setting_is_named_on_replay_and_resume(tmp_path, capsys):
    from socialsim.cli import main

    result = run(RunConfig(model="rules", steps=1), tmp_path / "r", progress=False)
    meta = json.loads((result.run_dir / "config.json").read_text())
    meta["config"]["retired_setting"] = 1
    (result.run_dir / "config.json").write_text(json.dumps(meta))
    expected = (f"{result.run_dir / 'config.json'}: not a run configuration this version can read: "
                "retired_setting: Extra inputs are not permitted (got 1)")
    with pytest.raises(ValueError, match=re.escape(expected)):
        replay(result.run_dir, tmp_path / "replay", progress=False)
    assert main(["run", "--resume", str(result.run_dir), "--no-progress"]) == 2
    assert expected in capsys.readouterr().err


def test_a_run_resumes_on_another_endpoint_with_other_pacing(tmp_path, server, capsys):
    """A provider that rate-limits, or a server restarted on another port, is what a resume is often
    for: --api-base, --concurrency, --rpm and --tpm were refused as changed arguments."""
    from socialsim.cli import main

    stopped = run(provider_config(server, max_calls=25), tmp_path / "run", progress=False)
    assert stopped.status.startswith("stopped by budget")
    with FakeOpenAIServer(policy=by_prompt) as moved:
        assert main(["run", "--resume", str(tmp_path / "run"), "--api-base", moved.api_base, "--concurrency", "3",
                     "--rpm", "60000", "--tpm", "9000000", "--no-progress"]) == 0
        asked_there = [r for r in moved.requests if r["messages"][-1]["content"] != "Say OK."]
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["status"] == "completed" and saved["live_calls"] == len(asked_there) > 0
    assert len(server.requests) == 1 + 25  # the first endpoint was asked nothing more
    config = saved["config"]
    assert (config["api_base"], config["max_concurrency"], config["rpm"], config["tpm"]) == (
        moved.api_base, 3, 60000.0, 9000000.0)
    run(provider_config(server), tmp_path / "fresh", progress=False)
    resumed, fresh = (pd.read_parquet(p / "model.parquet").drop(columns="llm_latency_s")
                      for p in (tmp_path / "run", tmp_path / "fresh"))
    assert resumed.equals(fresh)  # the same run as one never stopped (latency is live)
    assert main(["run", "--resume", str(tmp_path / "run"), "--rng", "5", "--no-progress"]) == 2  # a seed is the run's
    assert "--rng 5 (recorded: 11)" in capsys.readouterr().err


def test_a_budget_stopped_run_replays_its_complete_steps_and_one_with_none_is_refused(tmp_path, server):
    stopped = run(provider_config(server, max_calls=25), tmp_path / "run", progress=False)
    assert stopped.status.startswith("stopped by budget") and stopped.steps_done == 2 < 3
    asked = len(server.requests)
    result, same = replay_unfigured(tmp_path / "run", tmp_path / "replay", progress=False)  # its two complete steps
    assert same and result.steps_done == 2 and result.status == "completed" and len(server.requests) == asked
    # the recording's ledger also holds the paid calls of the step the budget cut: not replayed, not compared
    whole = first_difference(tmp_path / "run", tmp_path / "replay")
    assert whole.startswith("llm_calls.parquet: ") and "rows vs" in whole
    none = run(provider_config(server, max_calls=3), tmp_path / "none", progress=False)
    assert none.steps_done == 0
    with pytest.raises(ValueError, match=re.escape(
            f"{tmp_path / 'none'} completed no step (stopped by budget: max_calls=3 reached")) as refused:
        replay(tmp_path / "none", tmp_path / "none-replay", progress=False)
    assert str(refused.value).endswith(f"there is nothing to replay; continue it with `socialsim run --resume {tmp_path / 'none'}`")
    assert not (tmp_path / "none-replay").exists()  # not "the tape has no record", as before


def test_the_first_difference_names_a_missing_table_and_an_agents_frame(tmp_path):
    a = run(RunConfig(arch="generic", model="rules", steps=2, rng=1), tmp_path / "a", progress=False).run_dir
    b = run(RunConfig(arch="generic", model="rules", steps=2, rng=1), tmp_path / "b", progress=False).run_dir
    assert first_difference(a, b) is None
    model = pd.read_parquet(b / "model.parquet")
    model.loc[1, "llm_calls"] = float("nan")  # a value gone missing is a difference; missing on both sides is not
    model.to_parquet(b / "model.parquet")
    assert first_difference(a, b) == "model.parquet: row 1, column 'llm_calls': np.int64(0) vs np.float64(nan)"
    model.drop(columns="llm_calls").to_parquet(b / "model.parquet")
    left, right = first_difference(a, b).split(" vs ")
    assert left.startswith("model.parquet: columns ['step', 'llm_calls', ") and right.startswith("['step', ")
    assert "'llm_calls'" not in right
    shutil.copy(a / "model.parquet", b / "model.parquet")
    agents = pd.read_parquet(b / "agents.parquet")
    agents["AgentID"] = agents["AgentID"][::-1].to_numpy()  # the same rows under other agents
    agents.to_parquet(b / "agents.parquet")
    assert first_difference(a, b).startswith("agents.parquet: row ")
    (b / "tables" / "events.parquet").unlink()
    assert first_difference(a, b) == "different files: ['tables/events.parquet'] present in only one run"


def test_every_call_setting_of_the_config_reaches_the_runs_gateway(tmp_path):
    config = RunConfig(arch="generic", model="rules", steps=1, max_concurrency=7, rpm=120.0, tpm=9000.0,
                       timeout_s=12.5, num_retries=3, json_schema=True, breaker=2, api_base="http://127.0.0.1:1/v1",
                       price=(0.1, 0.2), max_calls=50, max_cost=1.0)
    llm = run(config, tmp_path / "r", progress=False).model.llm
    assert (llm.max_concurrency, llm.rpm, llm.tpm, llm.timeout_s, llm.num_retries, llm.json_schema, llm.breaker,
            llm.api_base, llm.price) == (7, 120.0, 9000.0, 12.5, 3, True, 2, "http://127.0.0.1:1/v1", (0.1, 0.2))
    assert (llm.ledger.budget.max_calls, llm.ledger.budget.max_cost) == (50, 1.0)


@pytest.mark.parametrize("field", [{"max_cost": float("nan")}, {"max_cost": float("inf")}, {"price": (float("nan"), 1.0)},
                                   {"rpm": float("inf")}, {"timeout_s": float("nan")}])
def test_a_run_config_refuses_a_limit_or_price_that_is_not_a_finite_number(field):
    """NaN compares false with every cost: a NaN budget was no budget at all."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="finite number"):
        RunConfig(**field)


# --- the check before step 1, with litellm's call and key check stood in (no server, no wait) ---------

@pytest.fixture
def stand_in_litellm(monkeypatch):
    """Records what the check asks litellm; ``failing`` names the api_bases whose ping raises, and
    ``env`` what litellm's key check reports for a model (default: every key there)."""
    from types import SimpleNamespace

    from socialsim.llm.litellm_setup import litellm

    seen = SimpleNamespace(asked=[], validated=[], failing={}, env={})

    async def acompletion(**request):
        seen.asked.append(request)
        if request.get("api_base") in seen.failing:
            raise seen.failing[request.get("api_base")]

    def validate_environment(**asked):
        seen.validated.append(asked)
        return seen.env.get(asked["model"], {"keys_in_environment": True, "missing_keys": []})

    monkeypatch.setattr(litellm, "acompletion", acompletion)
    monkeypatch.setattr(litellm, "validate_environment", validate_environment)
    return seen


def test_the_check_asks_each_provider_model_for_one_token_with_the_runs_settings(stand_in_litellm, monkeypatch):
    from socialsim.llm import engines
    from socialsim.llm.engines import embedded
    from socialsim.llm.gateway import DEFAULT_TIMEOUT_S

    local = []
    monkeypatch.setattr(embedded, "check_embedded", local.append)
    engines.check_models({"openai/b", "rules", "openai/a", "local/smollm2", "together_ai/c"},
                         api_base="http://here/v1", timeout_s=7, num_retries=3)
    say_ok = [{"role": "user", "content": "Say OK."}]
    assert stand_in_litellm.asked == [
        {"model": model, "messages": say_ok, "timeout": 7, "num_retries": 0, "api_base": "http://here/v1",
         "max_tokens": 1} for model in ("openai/a", "openai/b", "together_ai/c")]  # in name order; retries are ours
    assert stand_in_litellm.validated == [{"model": model, "api_base": "http://here/v1", "api_key": None}
                                          for model in ("openai/a", "openai/b", "together_ai/c")]
    assert local == ["local/smollm2"]  # the embedded engine is checked as such; the rules need nothing
    stand_in_litellm.asked.clear()
    engines.check_models({"openai/a"})  # no settings: the gateway's own, and no api_base at all
    assert stand_in_litellm.asked == [{"model": "openai/a", "messages": say_ok, "timeout": DEFAULT_TIMEOUT_S,
                                       "num_retries": 0, "max_tokens": 1}]
    engines.check_models({"openai/a", "rules"}, ping=False)
    assert len(stand_in_litellm.asked) == 1 and len(stand_in_litellm.validated) == 5  # keys still checked
    with pytest.raises(ModelUnavailable) as raised:
        engines.check_models({"nosuchprovider/x"}, ping=False)
    assert str(raised.value) == ("unknown model 'nosuchprovider/x': litellm knows no provider for it (use "
                                 "PROVIDER/MODEL, e.g. openai/gpt-4o-mini or ollama/llama3.1; or 'local/smollm2' or "
                                 "'rules')")


def test_a_missing_key_is_named_but_an_endpoint_litellm_wants_is_not(stand_in_litellm):
    from socialsim.llm.engines import check_models

    env = stand_in_litellm.env
    env["openai/a"] = {"keys_in_environment": False, "missing_keys": ["A_KEY", "OLLAMA_API_BASE", "B_KEY"]}
    with pytest.raises(ModelUnavailable) as raised:
        check_models({"openai/a"})
    assert str(raised.value) == ("model 'openai/a' needs A_KEY, B_KEY in the environment (keys are read from "
                                 "the environment only)")
    assert stand_in_litellm.asked == []  # refused before any request
    for reported in ({"keys_in_environment": False, "missing_keys": ["OLLAMA_API_BASE"]},
                     {"keys_in_environment": True, "missing_keys": ["A_KEY"]},  # litellm found them after all
                     {"missing_keys": ["A_KEY"]}, {"keys_in_environment": False}):
        env["openai/a"] = reported
        check_models({"openai/a"}, ping=False)


def test_an_unreachable_model_is_named_with_its_error_redacted_and_cut(stand_in_litellm, monkeypatch):
    from socialsim.llm.engines import check_models
    from socialsim.llm.litellm_setup import litellm

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key-0123456789")
    stand_in_litellm.failing["http://down/v1"] = RuntimeError(
        "sent placeholder-key-0123456789 to host ssl:<ssl.SSLContext object at 0x7f00> " + "x" * 300)
    with pytest.raises(ModelUnavailable) as raised:
        check_models({"openai/a"}, api_base="http://down/v1")
    detail = ("sent [REDACTED] to host " + "x" * 300)[:200]
    assert str(raised.value) == f"model 'openai/a' is unreachable: RuntimeError: {detail}"
    stand_in_litellm.failing["http://down/v1"] = litellm.APIConnectionError(message="refused", model="openai/a",
                                                                            llm_provider="openai")
    with pytest.raises(ModelUnavailable) as raised:
        check_models({"openai/a"}, api_base="http://down/v1")
    assert str(raised.value) == ("model 'openai/a' is unreachable: APIConnectionError: litellm.APIConnectionError: "
                                 "refused; is its server running? --api-base URL gives its address")


def test_the_deployments_found_down_are_named_by_their_places_in_the_whole_file(stand_in_litellm, tmp_path):
    """The run's Router leaves out the places the check returns: in a file whose models' deployments
    are interleaved, a place counted within its own model's pool would leave out another deployment
    (one that answers) and keep the one found down; every pooled model's are kept, not the last's."""
    from socialsim.llm import engines
    from socialsim.llm.deployments import load_deployments

    path = tmp_path / "pool.yaml"
    path.write_text("model_list:\n" + "".join(
        f"  - {{model_name: {name}, litellm_params: {{model: openai/{model}, api_base: 'http://{model}/v1'}}}}\n"
        for name, model in (("a-pool", "m1"), ("b-pool", "m3"), ("a-pool", "m2"), ("b-pool", "m4"))))
    stand_in_litellm.failing.update({"http://m3/v1": RuntimeError("down"), "http://m2/v1": RuntimeError("down")})
    assert engines.check_models({"a-pool", "b-pool"}, deployments=load_deployments(path)) == {1, 2}


def test_the_check_takes_from_the_limiter_the_calls_will_and_retries_as_a_deployment_says(stand_in_litellm,
                                                                                         monkeypatch, tmp_path):
    """A pool's calls take from the pool's limiter, so do its deployments' checks; a ping takes its prompt's
    tokens and its one-token reply; a deployment's own num_retries (its Router's) is the check's retries."""
    import socialsim.llm.limiter as limiter_module
    from socialsim.llm import engines
    from socialsim.llm.deployments import load_deployments
    from socialsim.llm.litellm_setup import litellm

    asked = []

    class Limiter:
        async def acquire(self, tokens=0):
            asked.append(tokens)

    monkeypatch.setattr(limiter_module, "shared_limiter", lambda *limits: asked.append(limits) or Limiter())
    path = tmp_path / "pool.yaml"
    path.write_text("model_list:\n  - {model_name: a-pool, litellm_params: {model: openai/m1, api_base: "
                    "'http://one/v1', num_retries: 2}}\n")
    stand_in_litellm.failing["http://one/v1"] = litellm.InternalServerError("down", llm_provider="openai",
                                                                            model="openai/m1")
    with pytest.raises(ModelUnavailable, match="no deployment"):
        engines.check_models({"a-pool"}, num_retries=0, deployments=load_deployments(path), rpm=5.0, tpm=900.0)
    assert len(stand_in_litellm.asked) == 3  # the deployment's 2 retries, not the run's none
    ping = len("Say OK.") // 4 + 1
    assert asked == [("a-pool", 5.0, 900.0), ping, ping, ping]
    asked.clear()
    engines.check_models({"openai/x"}, rpm=5.0)
    assert asked == [("openai/x", 5.0, None), ping]


def test_a_pool_is_checked_deployment_by_deployment_each_with_its_own_parameters(stand_in_litellm, monkeypatch,
                                                                                   tmp_path, caplog):
    import logging

    from socialsim.llm import engines
    from socialsim.llm.deployments import load_deployments

    monkeypatch.setenv("POOL_BASE", "http://one/v1")
    monkeypatch.setenv("POOL_KEY", "placeholder-pool-key")
    path = tmp_path / "pool.yaml"
    path.write_text("model_list:\n"
                    "  - {model_name: a-pool, litellm_params: {model: openai/m1, api_base: os.environ/POOL_BASE, "
                    "api_key: os.environ/POOL_KEY, timeout: 5}}\n"
                    "  - {model_name: a-pool, litellm_params: {model: openai/m2}}\n"
                    "  - {model_name: b-pool, litellm_params: {model: openai/m3}}\n")
    pool = load_deployments(path)
    stand_in_litellm.failing["http://one/v1"] = RuntimeError("down")
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        down = engines.check_models({"a-pool", "rules", "openai/x"}, api_base="http://run/v1", timeout_s=7,
                                    num_retries=2, deployments=pool)
    assert down == {0}  # the first of the file's model_list: the run's Router leaves it out
    say_ok = [{"role": "user", "content": "Say OK."}]
    assert stand_in_litellm.asked == [  # a deployment's own api_base, key and timeout; never the run's api_base
        {"model": "openai/m1", "messages": say_ok, "timeout": 5, "num_retries": 0, "api_base": "http://one/v1",
         "api_key": "placeholder-pool-key", "max_tokens": 1},
        {"model": "openai/m2", "messages": say_ok, "timeout": 7, "num_retries": 0, "max_tokens": 1},
        {"model": "openai/x", "messages": say_ok, "timeout": 7, "num_retries": 0, "api_base": "http://run/v1",
         "max_tokens": 1}]  # a model the file does not serve: as without it
    assert stand_in_litellm.validated == [
        {"model": "openai/m1", "api_base": "http://one/v1", "api_key": "placeholder-pool-key"},
        {"model": "openai/m2", "api_base": None, "api_key": None},
        {"model": "openai/x", "api_base": "http://run/v1", "api_key": None}]
    failure = "deployment 1 (os.environ/POOL_BASE): model 'openai/m1' is unreachable: RuntimeError: down"
    assert [r.getMessage() for r in caplog.records] == [
        f"model a-pool, {failure}; left out of this run, its calls go to the other 1 deployment(s) (a resume "
        "checks it again)"]
    stand_in_litellm.failing[None] = RuntimeError("down too")
    with pytest.raises(ModelUnavailable) as raised:
        engines.check_models({"a-pool"}, deployments=pool, ping=True)
    assert str(raised.value) == (f"model 'a-pool': no deployment in {path.resolve()} answers: {failure}; "
                                 "deployment 2 (openai/m2): model 'openai/m2' is unreachable: RuntimeError: down too")
    monkeypatch.delenv("POOL_KEY")  # a variable the file names, not set: named before anything is asked
    with pytest.raises(ModelUnavailable) as raised:
        engines.check_models({"a-pool"}, deployments=pool)
    unset = (f"{path.resolve()}: a-pool's api_key names the environment variable POOL_KEY, which is not set")
    assert str(raised.value) == unset
    with pytest.raises(ModelUnavailable) as raised:
        engines._check_deployments("a-pool", pool, False, None, None)
    assert str(raised.value) == unset
    path.write_text(path.read_text().replace("api_key: os.environ/POOL_KEY, ", "")
                    + "router_settings: {redis_password: os.environ/POOL_KEY}\n")  # the Router's own, read too
    with pytest.raises(ModelUnavailable) as raised:
        engines.check_models({"a-pool"}, deployments=load_deployments(path), ping=False)
    assert str(raised.value) == (f"{path.resolve()}: router_settings.redis_password names the environment "
                                 "variable POOL_KEY, which is not set")


def test_a_deployments_file_serving_none_of_the_runs_models_is_said_and_left_alone(stand_in_litellm, tmp_path,
                                                                                    caplog):
    import logging

    from socialsim.llm.deployments import load_deployments
    from socialsim.llm.engines import check_models

    path = tmp_path / "pool.yaml"
    path.write_text("model_list:\n  - {model_name: b-pool, litellm_params: {model: openai/m, api_key: os.environ/UNSET}}\n"
                    "  - {model_name: a-pool, litellm_params: {model: openai/m}}\n")
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        check_models({"rules", "openai/x"}, deployments=load_deployments(path), ping=False)
    assert [r.getMessage() for r in caplog.records] == [
        f"{path.resolve()} serves none of the run's models (openai/x, rules), only a-pool, b-pool: its "
        "deployments are not used"]
    assert [v["model"] for v in stand_in_litellm.validated] == ["openai/x"]  # asked as without the file


@pytest.mark.parametrize("secret", ['placeholder"quoted-value', "placeholder\\slashed-value", "placeholder-välue-ü"])
def test_a_secret_that_json_escapes_is_redacted_in_config_json(secret, tmp_path, monkeypatch):
    """config.json was redacted after json.dumps: a secret's quote, backslash or non-ASCII letter was
    written escaped (\\", \\\\, \\u00e4) and no longer matched, so the secret (in a scenario's path) was kept."""
    monkeypatch.setenv("SOCIALSIM_TEST_TOKEN", secret)
    folder = tmp_path / f"in-{secret}"
    folder.mkdir()
    shutil.copy(Path(__file__).parents[1] / "socialsim" / "scenarios" / "data" / "hobbs-cafe.yaml", folder / "cafe.yaml")
    run(RunConfig(scenario=str(folder / "cafe.yaml"), arch="generic", model="rules", steps=1), tmp_path / "run",
        progress=False)
    text = (tmp_path / "run" / "config.json").read_text(encoding="utf-8")
    escaped = json.dumps(secret)[1:-1]
    assert secret not in text and escaped not in text
    assert json.loads(text)["config"]["scenario"] == str(tmp_path / "in-[REDACTED]" / "cafe.yaml")
