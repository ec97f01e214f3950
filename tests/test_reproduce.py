"""`socialsim reproduce`: projection first, runs only when allowed, the paper beside the runs."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from socialsim.model import reproduce as rp


def _protocol(judge=None):
    def measure(run_dir):
        saved = json.loads((run_dir / "config.json").read_text())
        return {"steps_done": float(saved["steps_done"]), "seed_echo": float(saved["config"]["rng"])}

    return rp.Protocol(
        arch="generic",
        runs=[rp.ProtocolRun("cafe", "hobbs-cafe", steps=2)],
        measure=measure,
        paper=pd.DataFrame([{"label": "*", "metric": "steps_done", "paper": 2.0}]),
        description="a toy protocol",
    )


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: _protocol(judge))


def test_projection_counts_rule_decisions_and_prompt_tokens(toy):
    proj = rp.project(_protocol(), "openai/gpt-4o-mini", seeds=3)
    assert proj.calls == proj.decisions > 0 and proj.prompt_tokens > proj.calls  # every call has a rendered prompt
    assert proj.cost_usd == pytest.approx(rp.price("openai/gpt-4o-mini", proj.prompt_tokens, proj.completion_tokens))
    one = rp.project(_protocol(), "openai/gpt-4o-mini", seeds=1)
    assert proj.calls == 3 * one.calls


def test_a_rules_projection_has_decisions_but_no_llm_call(toy):
    proj = rp.project(_protocol(), "rules", seeds=2)
    assert proj.decisions > 0 and proj.calls == 0 and proj.prompt_tokens == 0 and proj.cost_usd == 0.0
    assert proj.per_model["model"].tolist() == ["rules"]


@pytest.fixture
def no_model_may_answer(monkeypatch):
    """Counts every call that would reach a provider; a dry run must make none."""
    from socialsim.llm.gateway import Gateway

    asked = []

    async def refuse(self, model, messages, params, fmt):
        asked.append(model)
        raise ConnectionError("a projection asked a model")

    monkeypatch.setattr(Gateway, "_acompletion", refuse)
    return asked


def test_a_projection_asks_no_model_and_prices_the_judge_at_its_own_model(no_model_may_answer):
    protocol = rp.load_protocol("crsec", judge="openai/gpt-4o")
    proj = rp.project(protocol, "openai/gpt-4o-mini", seeds=1, probe_steps=1)
    assert no_model_may_answer == []
    by_model = proj.per_model.set_index("model")
    assert set(by_model.index) == {"openai/gpt-4o", "openai/gpt-4o-mini"}  # the judge's decisions on its route
    assert by_model.loc["openai/gpt-4o", "decisions"] > 0
    expected = sum(rp.price(m, row.prompt_tokens, row.completion_tokens) for m, row in by_model.iterrows())
    assert proj.cost_usd == pytest.approx(expected)
    assert proj.calls == by_model["decisions"].sum()


def test_a_judge_that_is_also_the_actors_model_is_refused_before_anything_runs(no_model_may_answer):
    protocol = rp.load_protocol("crsec", judge="openai/gpt-4o-mini")
    with pytest.raises(ValueError, match="also an actors' model"):
        rp.project(protocol, "openai/gpt-4o-mini", seeds=1, probe_steps=1)
    assert no_model_may_answer == []


def test_price_from_litellms_local_map():
    assert rp.price("openai/gpt-4o-mini", 1_000_000, 0) > 0
    assert rp.price("rules", 10**9, 10**9) == 0.0
    assert rp.price("nobody/knows-this-model", 1000, 1000) is None


def test_not_run_without_yes_or_budget(toy, tmp_path):
    said = []
    assert rp.reproduce("generic", "rules", seeds=2, out=tmp_path / "r", echo=said.append) is None
    assert not (tmp_path / "r").exists()
    assert any("Projected" in s for s in said) and any("--yes" in s for s in said)


def test_budget_below_an_unknown_price_refuses(toy, tmp_path):
    said = []
    assert rp.reproduce("generic", "nobody/knows-this-model", seeds=1, max_cost=1.0, out=tmp_path / "r",
                        echo=said.append) is None
    assert "unknown" in " ".join(said)


def test_runs_every_seed_and_puts_the_paper_beside_the_mean(toy, tmp_path):
    summary = rp.reproduce("generic", "rules", seeds=3, yes=True, out=tmp_path / "r", echo=lambda s: None)
    row = summary.set_index("metric").loc["steps_done"]
    assert row["paper"] == 2.0 and row["mean"] == 2.0 and row["n"] == 3
    seeds = summary.set_index("metric").loc["seed_echo"]
    assert seeds["mean"] == 2.0 and seeds["std"] == pytest.approx(1.0)  # seeds 1, 2, 3
    assert sorted(p.name for p in (tmp_path / "r" / "cafe").iterdir()) == ["seed-1", "seed-2", "seed-3"]
    report = (tmp_path / "r" / "report.md").read_text()
    assert "rules baseline" in report and "| steps_done |" in report


def test_unknown_architecture_protocol():
    with pytest.raises(ValueError, match="no paper protocol"):
        rp.load_protocol("generic")
