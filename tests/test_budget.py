"""The budget: cost reserved before each call so concurrent calls cannot overshoot max_cost; a
model without a price needs --price; a stop before the first step writes a valid empty run."""

import json
import logging
import shutil
import zlib

import pandas as pd
import pytest

from socialsim.llm.fake_server import FakeOpenAIServer, by_prompt
from socialsim.llm.ledger import Budget, BudgetExhausted, Ledger
from socialsim.model.runner import RunConfig, run


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=by_prompt, delay_s=0.02) as s:
        yield s


def config(server, **kw):
    return RunConfig(**{"arch": "generic", "model": "openai/fake-model", "steps": 3, "rng": 2,
                        "api_base": server.api_base, **kw})


def test_reservations_of_calls_in_flight_count_against_max_cost():
    ledger = Ledger(Budget(max_cost=1.0))
    ledger.check_budget(0.4)
    ledger.check_budget(0.4)
    with pytest.raises(BudgetExhausted, match=r"\$0.8000 reserved"):
        ledger.check_budget(0.4)  # 0.8 in flight + 0.4 would pass 1.0 even though nothing is spent
    ledger.add_live(0.1, 0.4)
    ledger.release(0.4)
    ledger.check_budget(0.4)  # 0.1 spent + 0.4 reserved + 0.4 <= 1.0


def test_a_call_reserves_its_prompt_at_three_characters_a_token_and_a_full_reply():
    """The reservation errs high: a token per 3 characters of every message, 8 more a message and 16
    for the request, and all of ``max_tokens``; a model without a price reserves nothing."""
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.routing import RouteTable

    messages = [{"role": "system", "content": "x" * 32}, {"role": "user", "content": "y" * 5}]
    prompt_tokens = 37 // 3 + 8 * 2 + 16
    priced = Gateway(RouteTable("openai/fake-model"), price=(1.0, 2.0))
    assert priced.worst_case_cost("openai/fake-model", messages, 100) == pytest.approx(
        (prompt_tokens * 1.0 + 100 * 2.0) / 1e6)
    assert Gateway(RouteTable("openai/fake-model")).worst_case_cost("openai/fake-model", messages, 100) == 0.0


def test_max_cost_is_never_overshot_with_sixteen_concurrent_calls(tmp_path, server):
    budget = 0.05
    result = run(config(server, max_cost=budget, price=(20.0, 20.0), max_concurrency=16), tmp_path / "r",
                 progress=False, preflight=False)
    assert result.status.startswith("stopped by budget: max_cost")
    ledger = result.model.llm.ledger
    assert 0 < ledger.live_cost <= budget
    assert ledger.live_calls >= 2
    assert json.loads((tmp_path / "r" / "config.json").read_text())["status"].startswith("stopped by budget")


def test_max_cost_on_an_unpriced_model_is_refused_before_anything_runs(tmp_path, server):
    with pytest.raises(ValueError, match=r"openai/fake-model has no price .*--price IN,OUT"):
        run(config(server, max_cost=1.0), tmp_path / "r", progress=False, preflight=False)
    assert server.requests == []


def test_price_prices_an_unknown_model(tmp_path, server):
    result = run(config(server, price=(1.0, 3.0), steps=1), tmp_path / "r", progress=False, preflight=False)
    calls = pd.read_parquet(tmp_path / "r" / "llm_calls.parquet")
    expected = (calls["prompt_tokens"] * 1.0 + calls["completion_tokens"] * 3.0) / 1e6
    assert result.model.llm.ledger.live_cost == pytest.approx(expected.sum())
    assert result.model.llm.ledger.live_cost > 0


def test_a_budget_stop_at_step_zero_writes_a_valid_empty_run(tmp_path, server):
    result = run(config(server, max_cost=1e-9, price=(1.0, 1.0)), tmp_path / "r", progress=False, preflight=False)
    assert result.status.startswith("stopped by budget") and result.steps_done == 0
    assert server.requests == []
    saved = json.loads((tmp_path / "r" / "config.json").read_text())
    assert saved["steps_done"] == 0
    for name in ("model.parquet", "agents.parquet", "llm_calls.parquet"):
        assert len(pd.read_parquet(tmp_path / "r" / name)) == 0, name


def test_a_resumed_run_says_so_when_it_no_longer_follows_its_recording(tmp_path, server, caplog):
    """A resumed run asks its tape again for every call of the steps its recording made; one that
    finds them missing (the code, scenario or settings changed since) used to pay them all silently."""
    stopped = run(config(server, max_calls=15), tmp_path / "r", progress=False)
    assert stopped.status.startswith("stopped by budget") and stopped.steps_done == 1
    untouched = tmp_path / "untouched"
    shutil.copytree(tmp_path / "r", untouched)
    # the step the budget cut (step 2) was never complete: its calls missing from the tape say nothing
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert run(config(server), untouched, progress=False).status == "completed"
    assert "the tape did not hold" not in caplog.text
    caplog.clear()
    # step 1's prompts as a changed code would ask them: none is on the tape any more
    tape = tmp_path / "r" / "tape.jsonl"
    records = [json.loads(line) for line in tape.read_text().splitlines()]
    assert {r["step"] for r in records} == {1, 2}
    tape.write_text("".join(json.dumps({**r, "key": "changed" + r["key"]}) + "\n" if r["step"] == 1
                            else json.dumps(r) + "\n" for r in records))
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert run(config(server), tmp_path / "r", progress=False).status == "completed"
    warned = [r.getMessage() for r in caplog.records if "the tape did not hold" in r.getMessage()]
    assert warned == ["step 1 made 10 calls the tape did not hold, though the recording went on to step 2: the "
                      "code, scenario or settings differ from the recording's, so this resumed run no longer "
                      "follows it, and pays for calls it had recorded"]


def test_a_judges_calls_count_as_the_runs_own(tmp_path, server):
    """A derived gateway (an architecture's judges) counts its calls off the tape on the run's own
    gateway, where the resume check reads them."""
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.routing import RouteTable

    run_gateway = Gateway(RouteTable("rules"))
    judge = run_gateway.derive(RouteTable("rules")).derive(RouteTable("rules"))
    assert judge._root() is run_gateway and run_gateway._root() is run_gateway


def test_a_resumed_run_that_asks_its_failed_calls_again_is_not_told_its_code_changed(tmp_path, server, caplog):
    """A failed call of the recording is asked again on resume; its new answer takes the run its own
    way, and the calls after it are not on the tape: expected, not a sign of changed code."""
    server.faults = lambda count, messages: "500" if count <= 14 and zlib.crc32(
        messages[-1]["content"].encode()) % 5 == 0 else None
    stopped = run(config(server, steps=4, max_calls=25, num_retries=0), tmp_path / "r", progress=False,
                  preflight=False)
    assert stopped.status.startswith("stopped by budget") and server.injected["500"] > 0
    server.faults = None
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        resumed = run(config(server, steps=4, num_retries=0), tmp_path / "r", progress=False, preflight=False)
    assert resumed.status == "completed" and resumed.model.llm.reasked
    assert "the tape did not hold" not in caplog.text


@pytest.mark.parametrize(("scenario", "arch"), [("hobbs-cafe", "crsec"), ("irollan-valley", "itcmas"),
                                                ("school-micro", "asvo"), ("hobbs-cafe", "generic")])
def test_a_run_stopped_by_its_budget_in_its_first_step_writes_its_report(tmp_path, server, scenario, arch):
    """ITCMA-S's figures of a run with no step crashed its report ('no numeric data to plot'): the
    run ended 'failed', and a resume under the same budget failed again."""
    result = run(config(server, scenario=scenario, arch=arch, steps=2, max_calls=3), tmp_path / "r", progress=False,
                 preflight=False)
    assert result.status.startswith("stopped by budget") and result.steps_done == 0
    report = (tmp_path / "r" / "report.md").read_text()
    assert "\nStatus: stopped by budget: max_calls=3 reached" in report and report.rstrip().count("\n") > 10
    assert json.loads((tmp_path / "r" / "config.json").read_text())["status"] == result.status


def test_a_model_its_budget_stopped_refuses_to_step_again_and_says_why(scripted):
    """Mesa schedules no step after one that raised: step() then did nothing, silently."""
    from socialsim.model.society import SocietyModel

    scripted(default="1")
    model = SocietyModel("hobbs-cafe", arch="generic", model="openai/gpt-4o-mini", rng=1, max_calls=15)
    model.step()  # ten agents, ten calls
    with pytest.raises(BudgetExhausted):
        model.step()
    assert not model.running
    with pytest.raises(RuntimeError, match=r"stopped in step 2 \(BudgetExhausted: max_calls=15 reached"):
        model.step()
    assert len(model.datacollector.get_model_vars_dataframe()) == 1


def test_a_model_interrupted_mid_step_refuses_to_step_again(monkeypatch):
    """Ctrl-C in a notebook: the model is cut mid-step, and says so when stepped again."""
    from socialsim.agents.generic import GenerativeAgent
    from socialsim.model.society import SocietyModel

    model = SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=1)
    model.run_until(1)  # a model that did not stop steps on by every way
    assert model.steps == 1

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(GenerativeAgent, "perceive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        model.run_for(1)  # Mesa's other way to step
    monkeypatch.undo()
    for go_on in (model.step, lambda: model.run_for(2), lambda: model.run_until(5)):
        with pytest.raises(RuntimeError) as refused:
            go_on()
        assert str(refused.value) == ("this model stopped in step 2 (KeyboardInterrupt): it is cut mid-step and steps no "
                                      "more; build a new SocietyModel (a run directory goes on with "
                                      "`socialsim run --resume`)")
    assert model.steps == 2 and len(model.datacollector.get_model_vars_dataframe()) == 1


def test_a_society_models_budget_on_an_unpriced_model_is_kept_at_its_price(server, monkeypatch):
    """SocietyModel had no price to give: its max_cost on a model litellm cannot price counted every
    call at $0 and never stopped the run. Now ``price=`` prices them, and without it the budget is
    refused as ``run --max-cost`` refuses it."""
    from socialsim.model.society import SocietyModel

    monkeypatch.setenv("OPENAI_API_BASE", server.api_base)
    with pytest.raises(ValueError, match=r"max_cost=0.001 cannot be kept: openai/fake-model has no price .*"
                                         r"give price=\(IN, OUT\)"):
        SocietyModel("hobbs-cafe", arch="generic", model="openai/fake-model", rng=2, max_cost=0.001)
    assert server.requests == []
    model = SocietyModel("hobbs-cafe", arch="generic", model="openai/fake-model", rng=2, max_cost=0.05,
                         price=(20.0, 20.0))
    with pytest.raises(BudgetExhausted, match=r"max_cost=\$0.05"):
        for _ in range(10):
            model.step()
    ledger = model.llm.ledger
    assert 0 < ledger.live_cost <= 0.05 and ledger.live_calls == len(server.requests) > 0
    calls = pd.DataFrame([vars(row) for row in ledger.rows])
    assert ledger.live_cost == pytest.approx(((calls["prompt_tokens"] + calls["completion_tokens"]) * 20.0 / 1e6).sum())


@pytest.mark.parametrize("price", [(float("nan"), 1.0), (-1.0, 1.0), (1.0,), "cheap"])
def test_a_society_models_price_is_checked_as_the_command_lines_is(price):
    from pydantic import ValidationError

    from socialsim.model.society import SocietyModel

    with pytest.raises(ValidationError):
        SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=1, price=price)


def test_a_society_models_budget_is_refused_when_its_judge_has_no_price():
    """A judge the architecture's settings name is asked on the run's budget too: a max_cost with the
    agents on rules and an LLM judge litellm cannot price counted the judge's calls at $0."""
    from socialsim.model.society import SocietyModel

    with pytest.raises(ValueError, match=r"max_cost=0.01 cannot be kept: openai/fake-judge has no price"):
        SocietyModel("school-micro", arch="asvo", model="rules", rng=1, max_cost=0.01, judges=["openai/fake-judge"])
    priced = SocietyModel("school-micro", arch="asvo", model="rules", rng=1, max_cost=0.01, price=(1.0, 2.0),
                          judges=["openai/fake-judge"])
    assert "openai/fake-judge" in priced.llm.models()
