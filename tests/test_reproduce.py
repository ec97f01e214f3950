"""`socialsim reproduce`: projection first, runs only when allowed, the paper beside the runs."""

from __future__ import annotations

import json
import math
import re

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


def test_the_projection_scales_each_models_probe_to_the_runs_length_then_the_seeds(monkeypatch):
    """A stand-in society whose every step makes two decisions of the actors' model (prompts of
    100 + the step's number and 50 tokens, 7 completion tokens each) and one of the rules: a
    3-step arm is its 2-step probe times 1.5, rounded up, then times the seeds; a 1-step arm is
    probed for its one step; the judge's after-run calls are its share at its measured tokens."""
    from socialsim.llm.ledger import LedgerRow
    from socialsim.model import society as society_module

    actors, judge, built = "nobody/knows-this-model", "nobody/judge", []

    def decided(step, model, prompt, completion):
        return LedgerRow(step, 1, "act", "m", model, "rules", "rules", 0, 0, prompt, completion, 0.0, 0.0)

    class Probed:
        def __init__(self, scenario, *, arch, gateway, rng, **params):
            self.llm, self.done = gateway, 0
            built.append((arch, rng, gateway.dry_run))

        def step(self):
            self.done += 1
            for model, prompt, completion in ((actors, 100 + self.done, 7), (actors, 50, 7), ("rules", 0, 0)):
                self.llm.ledger.record(decided(self.done, model, prompt, completion))

    monkeypatch.setattr(society_module, "SocietyModel", Probed)
    protocol = _protocol()
    protocol.runs = [rp.ProtocolRun("short", "hobbs-cafe", steps=3), rp.ProtocolRun("one", "hobbs-cafe", steps=1)]
    protocol.after_run = lambda spec: ("the judge", 3) if spec.label == "one" else None
    protocol.after_run_probe = lambda society, steps: society.llm.ledger.record(decided(steps, judge, 40, 9))
    proj = rp.project(protocol, actors, seeds=2, unit_price=(1.0, 2.0))
    assert built == [("generic", 1, True)] * 2  # a dry run of each arm, seed 1
    assert proj.per_run.values.tolist() == [["short", 3, 18, 12, 2 * math.ceil(1.5 * 303), 84],
                                            ["one", 1, 2 * (3 + 3), 2 * (2 + 3), 2 * (151 + 3 * 40), 2 * (14 + 3 * 9)]]
    assert proj.per_model.set_index("model").to_dict("index") == {
        actors: {"decisions": 16, "prompt_tokens": 910 + 302, "completion_tokens": 112, "cost_usd": pytest.approx(
            (1212 + 2 * 112) / 1e6)},
        judge: {"decisions": 6, "prompt_tokens": 240, "completion_tokens": 54, "cost_usd": pytest.approx(348 / 1e6)},
        "rules": {"decisions": 8, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}}
    assert proj.per_model["model"].tolist() == [judge, actors, "rules"]  # by name, as printed: whole numbers
    assert all(pd.api.types.is_integer_dtype(proj.per_model[c]) for c in ("decisions", "prompt_tokens",
                                                                           "completion_tokens"))
    assert (proj.decisions, proj.calls, proj.prompt_tokens, proj.completion_tokens) == (30, 22, 1452, 166)
    assert proj.cost_usd == pytest.approx((1452 + 2 * 166) / 1e6)
    assert proj.after_run == {"the judge": 6} and proj.not_projected == {}
    assert rp.project(protocol, actors, seeds=2).cost_usd is None  # no price for it in litellm's map
    assert rp.project(protocol, actors, seeds=1, probe_steps=1).per_run["prompt_tokens"].tolist() == \
        [3 * 151, 151 + 3 * 40]  # a 1-step probe times 3
    protocol.after_run = lambda spec: ("the judge", 3)
    assert rp.project(protocol, actors, seeds=2).after_run == {"the judge": 12}  # both arms' calls


def test_each_arm_is_probed_at_its_presets_length_with_its_parameters_on_the_protocols_routes(monkeypatch):
    """An arm with a preset and no steps of its own lasts the preset's 75 steps and gets the preset's
    parameters with its own; the dry run asks each operation on the protocol's routes."""
    from socialsim.llm.ledger import LedgerRow
    from socialsim.model import society as society_module

    built = []

    class Probed:
        def __init__(self, scenario, *, arch, gateway, rng, **params):
            self.llm = gateway
            built.append((scenario, arch, params, gateway.routes.default, gateway.routes.routes))

        def step(self):
            self.llm.ledger.record(LedgerRow(1, 1, "act", "m", "rules", "rules", "rules", 0, 0, 0, 0, 0.0, 0.0))

    monkeypatch.setattr(society_module, "SocietyModel", Probed)
    protocol = rp.Protocol(arch="itcmas", runs=[rp.ProtocolRun("ltrha", "irollan-valley", preset="ltrha",
                                                               arch_params={"max_candidates": 3})],
                           measure=dict, paper=pd.DataFrame(), routes={"judge": "nobody/judge"})
    proj = rp.project(protocol, "rules", seeds=1)
    assert built == [("irollan-valley", "itcmas", {"ablation": "ltrha", "max_candidates": 3}, "rules",
                      {"judge": "nobody/judge"})]
    assert proj.per_run[["steps", "decisions"]].values.tolist() == [[75, 75]]


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


def test_price_at_a_given_rate_per_million_tokens():
    assert rp.price("nobody/knows-this-model", 1_000_000, 2_000_000, unit_price=(1.0, 2.0)) == pytest.approx(5.0)
    assert rp.price("nobody/knows-this-model", 500_000, 0, unit_price=(3.0, 0.0)) == pytest.approx(1.5)
    assert rp.price("rules", 1_000_000, 1_000_000, unit_price=(1.0, 1.0)) == 0.0  # the rules are free at any rate


def test_not_run_without_yes_or_budget(toy, tmp_path, no_model_may_answer):
    said = []
    assert rp.reproduce("generic", "openai/gpt-4o-mini", seeds=2, out=tmp_path / "r", echo=said.append) is None
    assert not (tmp_path / "r").exists() and no_model_may_answer == []
    assert any("Projected" in s for s in said) and any("Not run: add --yes" in s for s in said)
    assert "Each run's figures are for its 2 seeds together:" in said  # the table's rows are not one run's


def test_a_protocol_no_model_is_asked_in_runs_without_yes(toy, tmp_path):
    said = []
    summary = rp.reproduce("generic", "rules", seeds=1, out=tmp_path / "r", echo=said.append)
    assert summary is not None and summary.attrs["complete"] and (tmp_path / "r" / "report.md").is_file()
    assert "No model is asked (the rules answer every decision): running without --yes." in said


def test_calls_after_the_runs_still_need_yes_with_the_rules_as_actors(monkeypatch, tmp_path):
    protocol = _protocol()
    protocol.after_run = lambda spec: ("a judge's questionnaire", 3)  # a judge model asked after each run
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: protocol)
    said = []
    assert rp.reproduce("generic", "rules", seeds=1, out=tmp_path / "r", echo=said.append) is None
    assert not (tmp_path / "r").exists() and any("Not run: add --yes" in s for s in said)


def test_budget_below_an_unknown_price_refuses_and_a_price_given_keeps_it(toy, tmp_path, scripted, monkeypatch):
    """reproduce's refusal told the user to give --price, which it did not take (nor --api-base)."""
    from socialsim.model import runner

    said = []
    for yes in (False, True):  # a bad argument, as for `run` (exit 2), not a projection left to the user (exit 4)
        with pytest.raises(ValueError, match=re.escape("--max-cost 1 cannot be kept: nobody/knows-this-model has no "
                                                       "price in litellm's cost map; give --price IN,OUT")):
            rp.reproduce("generic", "nobody/knows-this-model", seeds=1, max_cost=1.0, out=tmp_path / "r",
                         echo=said.append, yes=yes)
    assert not (tmp_path / "r").exists()
    monkeypatch.setattr(runner, "check_models", lambda models, **settings: None)  # no provider to reach
    scripted(default="1")
    summary = rp.reproduce("generic", "hosted_vllm/knows-no-price", seeds=1, max_cost=1.0, out=tmp_path / "p",
                           echo=said.append, unit_price=(1.0, 2.0), api_base="http://127.0.0.1:9/v1", null_model=False)
    assert summary is not None and any(line.startswith("Projected:") and "cost $0.0" in line for line in said)
    config = json.loads((tmp_path / "p" / "cafe" / "seed-1" / "config.json").read_text())
    assert config["config"]["price"] == [1.0, 2.0] and config["config"]["api_base"] == "http://127.0.0.1:9/v1"
    assert config["usage"]["cost_usd"] > 0  # priced at --price


def test_runs_every_seed_and_puts_the_paper_beside_the_mean(toy, tmp_path):
    summary = rp.reproduce("generic", "rules", seeds=3, yes=True, out=tmp_path / "r", echo=lambda s: None)
    row = summary.set_index("metric").loc["steps_done"]
    assert row["paper"] == 2.0 and row["mean"] == 2.0 and row["n"] == 3
    seeds = summary.set_index("metric").loc["seed_echo"]
    assert seeds["mean"] == 2.0 and seeds["std"] == pytest.approx(1.0)  # seeds 1, 2, 3
    assert sorted(p.name for p in (tmp_path / "r" / "cafe").iterdir()) == ["seed-1", "seed-2", "seed-3"]
    report = (tmp_path / "r" / "report.md").read_text()
    assert "rules baseline" in report and "| steps_done |" in report


def test_the_summary_is_each_arms_mean_std_and_count_beside_the_papers_figure():
    """An arm's own paper figure wins over one for every arm ("*"); a figure that is not a number
    is not counted; the rows come in the order the arms and metrics were measured."""
    paper = pd.DataFrame([{"label": "A", "metric": "x", "paper": 10.0}, {"label": "*", "metric": "y", "paper": 5.0},
                          {"label": "B", "metric": "y", "paper": 7.0}])
    protocol = rp.Protocol("generic", [], measure=dict, paper=paper)
    measured = pd.DataFrame([{"label": "A", "seed": 1, "x": 1.0, "y": 2.0}, {"label": "A", "seed": 2, "x": 3.0, "y": "n/a"},
                             {"label": "B", "seed": 1, "x": 4.0, "y": 1.0}, {"label": "B", "seed": 2, "x": 6.0, "y": 3.0}])
    summary = rp.summarize(protocol, measured)
    assert summary.columns.tolist() == ["label", "metric", "paper", "mean", "std", "n"]
    nan, root2 = math.nan, math.sqrt(2)
    expected = pd.DataFrame([["A", "x", 10.0, 2.0, root2, 2], ["B", "x", nan, 5.0, root2, 2],
                             ["A", "y", 5.0, 2.0, nan, 1], ["B", "y", 7.0, 2.0, root2, 2]], columns=summary.columns)
    pd.testing.assert_frame_equal(summary, expected, check_dtype=False)
    only_arms = rp.Protocol("generic", [], measure=dict, paper=paper[paper["label"] != "*"])
    assert rp.summarize(only_arms, measured)["paper"].fillna(0).tolist() == [10.0, 0, 0, 7.0]
    empty = rp.summarize(protocol, pd.DataFrame())  # every run stopped before it could be measured
    assert empty.empty and empty.columns.tolist() == ["label", "metric", "paper", "mean", "std", "n"]


def test_unknown_architecture_protocol():
    with pytest.raises(ValueError, match="no paper protocol"):
        rp.load_protocol("generic")


# --- the paper's findings, checked ------------------------------------------------------------------
def _measured(rows):
    return pd.DataFrame(rows, columns=["label", "seed", "score", "chance"])


FINDINGS = [rp.compare("A scores above B", ("A", "score"), ">", ("B", "score")),
            rp.compare("A scores above chance", ("A", "score"), ">", ("A", "chance")),
            rp.compare("B scores at least 1", ("B", "score"), ">=", 1.0)]


def test_a_finding_is_checked_on_the_mean_and_counted_seed_by_seed():
    protocol = rp.Protocol("generic", [], measure=dict, paper=pd.DataFrame(), findings=FINDINGS)
    measured = _measured([("A", 1, 3.0, 0.5), ("B", 1, 1.0, 0.5),   # seed 1: A above B
                          ("A", 2, 1.0, 2.0), ("B", 2, 2.0, 0.5),   # seed 2: B above A, A below chance
                          ("A", 3, 2.5, float("nan")), ("B", 3, 1.0, 0.5)])
    checked = rp.check_findings(protocol, measured).set_index("finding")
    # means: A 2.17 > B 1.33; A's chance is measured in two seeds only (mean 1.25)
    assert checked.loc["A scores above B"].tolist() == ["holds", 2, 3, 0.5]  # 4 of 8 coin-flip outcomes
    assert checked.loc["A scores above chance"].tolist() == ["holds", 1, 2, 0.75]  # seed 3: not measured
    assert checked.loc["B scores at least 1"].tolist() == ["holds", 3, 3, 0.125]
    worse = measured.assign(score=measured["score"] - 1.0)  # B's mean drops to 0.33
    assert rp.check_findings(protocol, worse).set_index("finding").loc["B scores at least 1", "verdict"] == "does not hold"


def test_a_finding_whose_figure_is_missing_or_nan_is_not_measured():
    protocol = rp.Protocol("generic", [], measure=dict, paper=pd.DataFrame(), findings=FINDINGS)
    only_a = _measured([("A", 1, 3.0, float("nan"))])
    checked = rp.check_findings(protocol, only_a)
    assert checked["verdict"].tolist() == ["not measured"] * 3
    assert checked["seeds_measured"].tolist() == [0, 0, 0]
    assert "3 could not be measured" in rp.findings_section(checked, "rules")


def _toy_with_findings(steps=2):
    protocol = _protocol()
    protocol.runs[0].steps = steps
    protocol.findings = [rp.compare("every run completes its steps", ("cafe", "steps_done"), ">=", 2.0),
                         rp.compare("the seed is above 5", ("cafe", "seed_echo"), ">", 5.0)]
    return protocol


def test_the_report_says_which_findings_this_engine_does_not_reproduce(monkeypatch, tmp_path):
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: _toy_with_findings())
    said = []
    summary = rp.reproduce("generic", "rules", seeds=2, yes=True, out=tmp_path / "r", echo=said.append)
    assert summary.attrs["complete"]
    found = pd.read_csv(tmp_path / "r" / "findings.csv").set_index("finding")
    assert found.loc["every run completes its steps", "verdict"] == "holds"
    assert found.loc["the seed is above 5", "verdict"] == "does not hold"
    report = (tmp_path / "r" / "report.md").read_text()
    assert "| the seed is above 5 | does not hold | 0 of 2 |" in report
    assert "1 of 2 findings hold on the mean; 1 do not (not reproduced by this engine" in report
    assert not (tmp_path / "r" / rp.NULL_DIR).exists() and "rules null model" not in report  # it is the null model
    assert "| steps_done |" in report  # the figures stay beside the paper's
    assert "--steps" not in report  # the protocol's own length: no shortened-run note
    rp.reproduce("generic", "rules", seeds=1, yes=True, steps=1, out=tmp_path / "short", echo=said.append)
    assert "Every run was cut to 1 steps (--steps)" in (tmp_path / "short" / "report.md").read_text()


def test_a_run_stopped_short_stops_the_protocol_and_is_not_measured(monkeypatch, tmp_path):
    """Ctrl-C in seed 2's run: seed 1 is reported, seed 2 is listed, seed 3 never starts."""
    from socialsim.model.society import SocietyModel

    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: _toy_with_findings())
    step = SocietyModel.step

    def interrupted_in_seed_2(self):
        if self._seed == 2:  # Mesa's record of the rng the run was given
            raise KeyboardInterrupt
        step(self)

    monkeypatch.setattr(SocietyModel, "step", interrupted_in_seed_2)
    said = []
    summary = rp.reproduce("generic", "rules", seeds=3, yes=True, out=tmp_path / "r", echo=said.append)
    assert not summary.attrs["complete"]
    assert summary.set_index("metric").loc["steps_done", "n"] == 1  # seed 1 only
    assert not (tmp_path / "r" / "cafe" / "seed-3").exists()
    report = (tmp_path / "r" / "report.md").read_text()
    assert "cafe seed 2: interrupted after 0 steps" in report and "Not started (1): cafe seed 3" in report
    assert any(line.startswith("[2/3] cafe seed 2: interrupted") for line in said)
    monkeypatch.setattr(SocietyModel, "step", step)  # the same command again: it resumes and completes
    again = rp.reproduce("generic", "rules", seeds=3, yes=True, out=tmp_path / "r", echo=said.append)
    assert again.attrs["complete"] and again.set_index("metric").loc["steps_done", "n"] == 3
    assert "Not started" not in (tmp_path / "r" / "report.md").read_text()


def test_a_run_that_cannot_be_measured_keeps_the_others_figures(monkeypatch, tmp_path, caplog):
    protocol = _toy_with_findings()
    measure = protocol.measure

    def fails_on_seed_2(run_dir):
        if run_dir.name == "seed-2":
            raise FileNotFoundError("tables/missing.parquet")
        return measure(run_dir)

    protocol.measure = fails_on_seed_2
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: protocol)
    summary = rp.reproduce("generic", "rules", seeds=3, yes=True, out=tmp_path / "r", echo=lambda _: None)
    assert not summary.attrs["complete"]
    assert summary.set_index("metric").loc["seed_echo", "mean"] == 2.0  # seeds 1 and 3
    assert "cafe seed 2: could not be measured (FileNotFoundError" in (tmp_path / "r" / "report.md").read_text()
    warned = [r.getMessage() for r in caplog.records if "could not be measured" in r.getMessage()]
    assert warned == ["cafe seed 2 could not be measured: FileNotFoundError: tables/missing.parquet"]


def test_a_measure_naming_a_figure_seed_or_label_is_refused_not_silently_merged(monkeypatch, tmp_path):
    protocol = _toy_with_findings()
    protocol.measure = lambda run_dir: {"seed": 5.0, "steps_done": 2.0}  # would overwrite the row's seed
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: protocol)
    summary = rp.reproduce("generic", "rules", seeds=1, yes=True, out=tmp_path / "r", echo=lambda _: None)
    assert not summary.attrs["complete"] and summary["mean"].isna().all()
    assert "could not be measured (ValueError: the protocol's measure returned ['seed']" \
        in (tmp_path / "r" / "report.md").read_text()


def _judge_usage(proj, judge="openai/gpt-4o"):
    return proj.per_model.set_index("model").loc[judge]


def test_calls_after_each_run_are_priced_from_their_prompts_on_the_dry_run(no_model_may_answer):
    questionnaire = "the Appendix-E questionnaire asked of openai/gpt-4o"
    crsec = rp.load_protocol("crsec", judge="openai/gpt-4o")
    with_it = rp.project(crsec, "openai/gpt-4o-mini", seeds=2, probe_steps=1)
    crsec.runs[0].arch_params["questionnaire_items"] = 0
    without = rp.project(crsec, "openai/gpt-4o-mini", seeds=2, probe_steps=1)
    assert with_it.after_run == {questionnaire: 2 * 20 * 11} and with_it.not_projected == {}
    extra = _judge_usage(with_it) - _judge_usage(without)
    assert extra["decisions"] == 2 * 20 * 11 and 200 < extra["prompt_tokens"] / extra["decisions"] < 2000
    assert with_it.cost_usd == pytest.approx(without.cost_usd + rp.price("openai/gpt-4o", extra["prompt_tokens"],
                                                                           extra["completion_tokens"]))
    assert rp.project(rp.load_protocol("crsec"), "rules", seeds=2, probe_steps=1).after_run == {}

    itcmas = rp.load_protocol("itcmas", judge="openai/gpt-4o")
    itcmas.runs = itcmas.runs[:1]  # one of the five variants, to keep the test short
    long = rp.project(itcmas, "rules", seeds=3, probe_steps=2)
    assert long.after_run == {"the five-dimension judge openai/gpt-4o": 3 * 6} and long.calls == 3 * 6
    itcmas.runs[0].steps = 2
    short = rp.project(itcmas, "rules", seeds=3, probe_steps=2)
    # the judge reads each agent's trajectory: 75 steps make a longer prompt than the probe's 2
    assert _judge_usage(long)["decisions"] == _judge_usage(short)["decisions"] == 18
    assert _judge_usage(long)["prompt_tokens"] > 3 * _judge_usage(short)["prompt_tokens"]
    assert no_model_may_answer == []


def test_calls_after_a_run_with_nothing_to_ask_on_the_probe_are_counted_not_priced(monkeypatch, tmp_path):
    protocol = _protocol()
    protocol.after_run = lambda spec: ("a judge's questionnaire", 3)
    protocol.after_run_probe = lambda society, steps: None  # the probe's steps gave it nothing to ask
    protocol.runs.append(rp.ProtocolRun("cafe again", "hobbs-cafe", steps=1))
    proj = rp.project(protocol, "openai/gpt-4o-mini", seeds=2)
    assert proj.not_projected == {"a judge's questionnaire": 12} and proj.after_run == {}  # both arms' calls


def test_calls_after_a_run_are_each_models_share_of_the_most_at_its_mean_tokens():
    """Three calls on the probe (two of model a, one of b) stand for 6 after the run: a's share is
    4 calls at its mean prompt (15) and completion (100) tokens, b's 2 at its own; earlier rows
    of the ledger (the probe's steps) are not the after-run calls'."""
    from types import SimpleNamespace

    def row(model, prompt, completion):
        return SimpleNamespace(model=model, prompt_tokens=prompt, completion_tokens=completion)

    society = SimpleNamespace(llm=SimpleNamespace(ledger=SimpleNamespace(rows=[row("a", 1000, 1000)])))
    lengths = []

    def probe(society, steps):
        lengths.append(steps)
        society.llm.ledger.rows += [row("b", 30, 50), row("a", 10, 100), row("a", 20, 100)]

    protocol = _protocol()
    protocol.after_run_probe = probe
    usage = rp.after_run_usage(protocol, society, 75, 6)
    assert lengths == [75]  # asked as if the run had lasted its steps
    assert usage.to_dict("index") == {"a": {"decisions": 4, "prompt_tokens": 60, "completion_tokens": 400},
                                      "b": {"decisions": 2, "prompt_tokens": 60, "completion_tokens": 100}}
    assert rp.after_run_usage(protocol, society, 75, 7).to_dict("index")["b"] == \
        {"decisions": 3, "prompt_tokens": 70, "completion_tokens": 117}  # 7/3 calls, rounded up
    protocol.after_run_probe = lambda society, steps: None
    assert rp.after_run_usage(protocol, society, 75, 6) is None  # nothing asked: counted, not priced


def test_the_projection_says_what_it_does_not_price(monkeypatch, tmp_path):
    protocol = _protocol()
    protocol.after_run = lambda spec: ("a judge's questionnaire", 3)
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: protocol)
    said = []
    rp.reproduce("generic", "rules", seeds=2, out=tmp_path / "r", echo=said.append)
    assert "Not in the projection: a judge's questionnaire, up to 6 more calls in all" in " ".join(said)


def test_nothing_measured_gives_an_empty_findings_table_and_no_section():
    protocol = rp.Protocol("generic", [], measure=dict, paper=pd.DataFrame(), findings=FINDINGS)
    checked = rp.check_findings(protocol, pd.DataFrame())  # every run stopped before it could be measured
    assert checked.empty and checked.columns.tolist() == ["finding", "verdict", "seeds_holding", "seeds_measured",
                                                          "sign_p"]
    assert rp.findings_section(checked, "rules") == ""


def test_the_verdict_line_counts_each_kind_and_says_only_what_applies():
    def checked(*verdicts):
        return pd.DataFrame({"finding": [f"f{i}" for i in range(len(verdicts))], "verdict": list(verdicts),
                             "seeds_holding": 0, "seeds_measured": 1, "sign_p": 1.0})

    all_hold = rp.findings_section(checked("holds", "holds"), "openai/gpt-4o")
    assert "**2 of 2 findings hold on the mean; 0 do not.**" in all_hold
    none_hold = rp.findings_section(checked("does not hold", "not measured"), "rules")
    assert ("**0 of 2 findings hold on the mean; 1 do not (not reproduced by this engine: "
            "a result, not a bug); 1 could not be measured.**") in none_hold
    assert "## The paper's findings on rules" in none_hold and "| f0 | does not hold | 0 of 1 | 1 |" in none_hold


def test_a_finding_held_in_every_seed_is_beyond_chance_only_from_five_seeds():
    """The sign test: unanimous seeds are p = 0.5 ** n, so two seeds (0.25) or four (0.0625) cannot
    tell a finding from a coin flip and the report says so; five (0.03125) can."""
    assert rp.sign_test(2, 2) == 0.25 and rp.sign_test(4, 4) == 0.0625 and rp.sign_test(5, 5) == 0.03125
    assert rp.sign_test(0, 3) == 1.0 and math.isnan(rp.sign_test(0, 0))
    protocol = rp.Protocol("generic", [], measure=dict, paper=pd.DataFrame(), findings=FINDINGS[2:])

    def section(seeds):
        measured = _measured([row for s in range(1, seeds + 1) for row in (("A", s, 1.0, 0.0), ("B", s, 2.0, 0.0))])
        return rp.findings_section(rp.check_findings(protocol, measured), "rules")

    assert "| B scores at least 1 | holds | 2 of 2 | 0.25 |" in section(2)
    assert section(2).endswith("Held in more seeds than chance would give (sign test, p < 0.05): 0 of the 1; "
                               "with 2 seeds none can: the sign test needs at least 5.")
    assert "| B scores at least 1 | holds | 5 of 5 | 0.0312 |" in section(5)
    assert section(5).endswith("Held in more seeds than chance would give (sign test, p < 0.05): 1 of the 1.")


def test_the_sign_test_of_few_seeds_is_the_binomial_tail():
    """P(at least k heads of n fair coins), by hand: one seed that holds is a coin flip."""
    assert rp.sign_test(1, 1) == 0.5 and rp.sign_test(0, 1) == 1.0
    assert rp.sign_test(2, 3) == 0.5 and rp.sign_test(3, 4) == 5 / 16 and rp.sign_test(1, 3) == 7 / 8


def test_only_what_the_arms_set_differently_is_theirs_to_vary():
    arms = [rp.ProtocolRun("with", "school-micro", arch_params={"use_svo": True, "n_candidates": 3}),
            rp.ProtocolRun("without", "school-micro", arch_params={"use_svo": False, "n_candidates": 3})]
    protocol = rp.Protocol(arch="asvo", runs=arms, measure=lambda d: {}, paper=pd.DataFrame())
    assert rp._varied_between_arms(protocol) == {"use_svo"}  # n_candidates is the same in both: --set may change it
    protocol.runs = arms[:1]
    assert rp._varied_between_arms(protocol) == set()
    protocol.runs = []
    assert rp._varied_between_arms(protocol) == set()


def test_the_arms_presets_count_as_what_they_vary_but_their_length_does_not():
    """ITCMA-S's arms are its scenario's presets (``base``: ``ablation: base``, 75 steps, ...)."""
    arms = [rp.ProtocolRun(v, "irollan-valley", preset=v) for v in ("base", "full")]
    protocol = rp.Protocol(arch="itcmas", runs=arms, measure=lambda d: {}, paper=pd.DataFrame())
    assert rp._varied_between_arms(protocol) == {"ablation"}
    protocol.runs = [rp.ProtocolRun("paper", "irollan-valley", preset="paper", steps=10),
                     rp.ProtocolRun("none", "irollan-valley", steps=75)]  # "paper" sets only the steps
    assert rp._varied_between_arms(protocol) == set()
    protocol.runs = [rp.ProtocolRun("base", "irollan-valley", preset="base"),
                     rp.ProtocolRun("own", "irollan-valley", arch_params={"ablation": "full"})]
    assert rp._varied_between_arms(protocol) == {"ablation"}
    protocol.runs[1].arch_params = {"ablation": "base"}  # its own parameter, the same as the preset's
    assert rp._varied_between_arms(protocol) == set()


def test_a_finding_failing_on_the_mean_is_not_counted_beyond_chance_however_many_seeds_hold():
    protocol = rp.Protocol("generic", [], measure=dict, paper=pd.DataFrame(), findings=FINDINGS[:1])
    rows = [row for s in range(1, 10) for row in (("A", s, 1.1, 0.0), ("B", s, 1.0, 0.0))]  # A above B in 9 seeds
    rows += [("A", 10, 0.0, 0.0), ("B", 10, 5.0, 0.0)]  # ... and far below in the tenth: below on the mean
    checked = rp.check_findings(protocol, _measured(rows))
    assert checked[["verdict", "seeds_holding", "seeds_measured"]].values.tolist() == [["does not hold", 9, 10]]
    assert checked.loc[0, "sign_p"] < 0.05
    assert "sign test, p < 0.05): 0 of the 0." in rp.findings_section(checked, "rules")


def test_with_a_model_each_finding_stands_beside_the_rules_null_models_verdict(scripted, monkeypatch, tmp_path):
    """A finding the null model reproduces too says nothing about the engine's reasoning: with a
    model, reproduce runs the same protocol and seeds on the rules and puts both verdicts side by side."""
    from socialsim.model import runner

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    monkeypatch.setattr(runner, "check_models", lambda models, **settings: None)  # no provider to reach
    scripted(default="1")
    protocol = _toy_with_findings()
    measure = protocol.measure

    def with_engine(run_dir):
        engine = json.loads((run_dir / "config.json").read_text())["config"]["model"]
        return {**measure(run_dir), "asked_a_model": float(engine != "rules")}

    def load(arch, judge=None):
        protocol.measure = with_engine
        protocol.findings = [*protocol.findings[:1],
                             rp.compare("a model answered", ("cafe", "asked_a_model"), ">", 0.5)]
        return protocol

    monkeypatch.setattr(rp, "load_protocol", load)
    said = []
    rp.reproduce("generic", "openai/scripted", seeds=2, yes=True, out=tmp_path / "r", echo=said.append)
    assert any(line.startswith("Afterwards: the same protocol and seeds on the rules null model") for line in said)
    null_config = json.loads((tmp_path / "r" / rp.NULL_DIR / "cafe" / "seed-2" / "config.json").read_text())
    assert null_config["config"]["model"] == "rules" and null_config["config"]["rng"] == 2  # same protocol, seeds
    found = pd.read_csv(tmp_path / "r" / "findings.csv").set_index("finding")
    assert found.loc["a model answered", ["verdict", "null_verdict", "null_seeds_holding"]].tolist() == \
        ["holds", "does not hold", 0]
    assert found.loc["every run completes its steps", ["verdict", "null_verdict"]].tolist() == ["holds", "holds"]
    report = (tmp_path / "r" / "report.md").read_text()
    assert "| every run completes its steps | holds | 2 of 2 | 0.25 | holds (2 of 2) |" in report
    assert "| a model answered | holds | 2 of 2 | 0.25 | does not hold (0 of 2) |" in report
    assert ("Under the rules null model (the same protocol and seeds; the rules act and judge, no language model) "
            "1 of the 2 hold as well: they come out without any model's reasoning") in report
    skipped = rp.reproduce("generic", "openai/scripted", seeds=1, yes=True, out=tmp_path / "s", echo=said.append,
                           null_model=False)
    assert skipped is not None and not (tmp_path / "s" / rp.NULL_DIR).exists()
    assert "null_verdict" not in pd.read_csv(tmp_path / "s" / "findings.csv")


def test_the_null_model_line_counts_only_findings_holding_under_both():
    checked = pd.DataFrame({"finding": ["A", "B", "C"], "verdict": ["holds", "does not hold", "holds"],
                            "seeds_holding": [3, 0, 3], "seeds_measured": [3, 3, 3], "sign_p": [0.125, 1.0, 0.125]})
    null = checked.assign(verdict=["holds", "holds", "does not hold"], seeds_holding=[2, 3, 1])
    section = rp.findings_section(rp.with_null_model(checked, null), "openai/gpt-4o")
    assert "| B | does not hold | 0 of 3 | 1 | holds (3 of 3) |" in section
    assert "1 of the 2 hold as well" in section  # A only: B does not hold for the engine


def test_another_protocol_is_refused_the_folder_of_a_reproduction(toy, tmp_path, no_model_may_answer):
    """The same command with the same ``--out`` resumes; another model, another architecture's runs
    or another setting there used to replace runs already paid for, leaving one summary over two
    protocols' folders."""
    out = tmp_path / "r"
    assert rp.reproduce("generic", "rules", seeds=1, out=out, echo=lambda s: None).attrs["complete"]
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    said = []
    with pytest.raises(ValueError) as refused:
        rp.reproduce("generic", "openai/gpt-4o-mini", seeds=1, yes=True, out=out, echo=said.append)
    assert str(refused.value) == (f"--out {out} holds another protocol's runs ({out / 'cafe' / 'seed-1'}: model 'rules' "
                                  "(now 'openai/gpt-4o-mini')); running there would replace them: give another --out")
    assert said == [] and no_model_may_answer == []  # refused before the projection, nothing asked
    config = json.loads((out / "cafe" / "seed-1" / "config.json").read_text())
    config["config"]["arch_params"] = {"judge": "x"}
    (out / "cafe" / "seed-1" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"seed-1: arch_params \{'judge': 'x'\} \(now \{\}\)\); running there"):
        rp.reproduce("generic", "rules", seeds=1, out=out, echo=lambda s: None)
    (out / "cafe" / "seed-1" / "config.json").write_bytes(before[out / "cafe" / "seed-1" / "config.json"])
    (out / "asvo-arm" / "seed-1").mkdir(parents=True)
    (out / "asvo-arm" / "seed-1" / "config.json").write_text(json.dumps({"config": {"arch": "asvo"}}))
    with pytest.raises(ValueError, match=r"asvo-arm/seed-1: arch 'asvo' \(now 'generic'\)\)"):
        rp.reproduce("generic", "rules", seeds=1, out=out, echo=lambda s: None)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and "asvo-arm" not in str(p)} == before
    (out / "asvo-arm" / "seed-1" / "config.json").write_text(json.dumps({"config": {"arch": "generic"}}))
    with pytest.raises(ValueError, match=r"cafe/seed-1: 2 steps done \(now 1\)\); running there would replace them"):
        rp.reproduce("generic", "rules", seeds=1, steps=1, out=out, echo=lambda s: None)  # shorter runs over them
    # the same protocol with more seeds and more steps goes on there
    summary = rp.reproduce("generic", "rules", seeds=2, steps=3, out=out, echo=lambda s: None)
    assert summary.set_index("metric").loc["steps_done", ["n", "mean"]].tolist() == [2, 3.0]


def test_a_run_directory_or_a_folder_of_other_runs_is_refused_as_a_reproductions(tmp_path):
    (tmp_path / "run" / "config.json").parent.mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps({"config": {"arch": "generic"}}))
    with pytest.raises(ValueError, match=r"is a run directory; a reproduction needs a folder of its own"):
        rp._refuse_another_protocols_runs(tmp_path / "run", "generic", {})
    with pytest.raises(ValueError, match=r"holds 1 run that (is|are) not a reproduction's"):
        rp._refuse_another_protocols_runs(tmp_path, "generic", {})


def test_a_folder_is_refused_for_the_first_run_another_protocol_wrote_there(tmp_path):
    """Configs that cannot be read are passed over (the runs after them are still checked); a run
    planned now differs by what makes a protocol, every difference named in order (a budget is not
    one), one not planned (the null model's) by its architecture only; as many steps done as planned
    or no count is a resume, more steps done are refused."""
    from socialsim.model.runner import RunConfig

    def config(**changes):
        return RunConfig(**{"scenario": "hobbs-cafe", "arch": "generic", "model": "rules", "steps": 2, "rng": 1,
                            **changes})

    def wrote(run, meta):
        (tmp_path / run).mkdir(parents=True, exist_ok=True)
        (tmp_path / run / "config.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))

    def recorded(done=None, **changes):
        return {"config": json.loads(config(**changes).resolved().model_dump_json()),
                **({} if done is None else {"steps_done": done})}

    def refusal():
        with pytest.raises(ValueError) as refused:
            rp._refuse_another_protocols_runs(tmp_path, "generic", planned)
        return str(refused.value)

    planned = {tmp_path / "cafe" / f"seed-{k}": config(rng=k) for k in (1, 2)}
    for run, meta in (("a-list/seed-1", "[]"), ("a-none/seed-1", {"steps_done": 1}), ("a-torn/seed-1", "{")):
        wrote(run, meta)
    wrote("cafe/seed-1", recorded(done=2, rng=1, max_cost=0.5))
    wrote("cafe/seed-2", recorded(rng=2))
    wrote(f"{rp.NULL_DIR}/cafe/seed-1", {"config": {"arch": "generic", "model": "rules", "rng": 7}})
    assert rp._refuse_another_protocols_runs(tmp_path, "generic", planned) is None
    wrote("z-arm/seed-1", {"config": {"arch": "asvo"}})
    assert refusal() == (f"--out {tmp_path} holds another protocol's runs ({tmp_path / 'z-arm' / 'seed-1'}: arch "
                         "'asvo' (now 'generic')); running there would replace them: give another --out")
    (tmp_path / "z-arm" / "seed-1" / "config.json").unlink()
    wrote("cafe/seed-2", recorded(rng=5, model="openai/gpt-4o-mini"))
    assert f"({tmp_path / 'cafe' / 'seed-2'}: model 'openai/gpt-4o-mini' (now 'rules'), rng 5 (now 2)); " in refusal()
    wrote("cafe/seed-2", recorded(rng=2))
    wrote("cafe/seed-1", recorded(done=3, rng=1))
    assert f"({tmp_path / 'cafe' / 'seed-1'}: 3 steps done (now 2)); running there" in refusal()


def test_a_quick_look_gets_a_folder_of_its_own(toy, tmp_path, monkeypatch):
    """``--steps`` by default used the paper-length runs' folder, writing 1-step runs over them."""
    monkeypatch.chdir(tmp_path)
    rp.reproduce("generic", "rules", seeds=1, echo=lambda s: None)
    rp.reproduce("generic", "rules", seeds=1, steps=1, echo=lambda s: None)
    assert sorted(p.name for p in (tmp_path / "reproduce").iterdir()) == ["generic-rules", "generic-rules-steps-1"]
    done = json.loads((tmp_path / "reproduce" / "generic-rules" / "cafe" / "seed-1" / "config.json").read_text())
    assert done["steps_done"] == 2


def _asks_a_model(monkeypatch, scripted):
    from socialsim.model import runner

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    monkeypatch.setattr(runner, "check_models", lambda models, **settings: None)  # no provider to reach
    scripted(default="1")


def test_the_null_model_asks_no_model_a_set_names(scripted, monkeypatch, tmp_path):
    """`--set crsec.judge=MODEL` used to reach the 'free' null model's runs too: 213 paid judge calls
    with no budget."""
    _asks_a_model(monkeypatch, scripted)
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: rp.Protocol(
        arch="crsec", runs=[rp.ProtocolRun("cafe", "hobbs-cafe", steps=1)], measure=lambda run_dir: {"one": 1.0},
        paper=pd.DataFrame(columns=["label", "metric", "paper"]),
        findings=[rp.compare("one is above zero", ("cafe", "one"), ">", 0.0)]))
    said = []
    rp.reproduce("crsec", "openai/scripted", seeds=1, yes=True, out=tmp_path / "r", echo=said.append,
                 settings={"judge": "openai/scripted-judge", "temptation": 0.5})
    ran = json.loads((tmp_path / "r" / "cafe" / "seed-1" / "config.json").read_text())["config"]["arch_params"]
    assert ran["judge"] == "openai/scripted-judge"  # the model's own runs keep it
    null = tmp_path / "r" / rp.NULL_DIR / "cafe" / "seed-1"
    kept = json.loads((null / "config.json").read_text())
    assert "judge" not in kept["config"]["arch_params"] and kept["config"]["arch_params"]["temptation"] == 0.5
    assert kept["live_calls"] == 0 and set(pd.read_parquet(null / "llm_calls.parquet")["model"]) == {"rules"}
    assert "(the null model leaves out --set crsec.judge: it asks no model)" in said
    assert "null_verdict" in pd.read_csv(tmp_path / "r" / "findings.csv")


def test_a_null_model_that_would_ask_a_model_is_refused(monkeypatch, tmp_path):
    protocol = _toy_with_findings()
    protocol.routes = {"action": "openai/gpt-4o-mini"}  # a route the protocol itself sets
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: protocol)
    with pytest.raises(ValueError, match="the rules null model would ask openai/gpt-4o-mini: it must ask no model"):
        rp.reproduce("generic", "rules", seeds=1, yes=True, out=tmp_path / "n", echo=lambda line: None,
                     null_model=False, free_only=True)
    assert not (tmp_path / "n").exists()


def test_a_stopped_protocol_or_null_model_gives_no_null_verdicts(scripted, monkeypatch, tmp_path):
    """Ctrl-C in the null model's runs used to end with exit 0 and its verdicts on the seeds it had
    done; Ctrl-C in the model's runs still started the whole null protocol."""
    from socialsim.model.society import SocietyModel

    _asks_a_model(monkeypatch, scripted)
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: _toy_with_findings())
    step = SocietyModel.step
    stop = {"engine": "rules", "seed": 2}

    def interrupted(self):
        if self.llm.routes.default == stop["engine"] and self._seed == stop["seed"]:
            raise KeyboardInterrupt
        step(self)

    monkeypatch.setattr(SocietyModel, "step", interrupted)
    said = []
    summary = rp.reproduce("generic", "openai/scripted", seeds=2, yes=True, out=tmp_path / "r", echo=said.append)
    assert not summary.attrs["complete"]  # exit 3, not 0
    assert "null_verdict" not in pd.read_csv(tmp_path / "r" / "findings.csv")
    report = (tmp_path / "r" / "report.md").read_text()
    assert "the rules null model did not complete the protocol, so its verdicts are left out" in report
    assert "| every run completes its steps | holds | 2 of 2 |" in report  # the model's own findings stand

    stop["engine"] = "openai/scripted"
    summary = rp.reproduce("generic", "openai/scripted", seeds=2, yes=True, out=tmp_path / "m", echo=said.append)
    assert not summary.attrs["complete"] and not (tmp_path / "m" / rp.NULL_DIR).exists()
    assert not any(line.startswith("The same protocol on the rules null model") for line in said[-8:])


def test_a_resumed_reproduction_says_what_it_paid_and_shares_its_budget_by_what_is_paid(scripted, monkeypatch,
                                                                                      tmp_path):
    from socialsim.model import runner

    _asks_a_model(monkeypatch, scripted)
    monkeypatch.setattr(runner, "check_priced", lambda config, models: None)
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: _toy_with_findings())
    said = []
    rp.reproduce("generic", "openai/gpt-4o-mini", seeds=1, yes=True, out=tmp_path / "r", echo=said.append,
                 null_model=False)
    first = (tmp_path / "r" / "report.md").read_text()
    cost = float(re.search(r"the runs' calls cost \$([\d.]+)\.", first)[1])
    assert cost > 0 and "paid by this command" not in first
    rp.reproduce("generic", "openai/gpt-4o-mini", seeds=1, yes=True, out=tmp_path / "r", echo=said.append,
                 null_model=False, steps=2)
    again = (tmp_path / "r" / "report.md").read_text()
    assert f"the runs' calls cost ${cost:.4f} ($0.0000 of it paid by this command; the rest was recorded before)" in again
    assert said[-1].startswith("reproduction directory") and any(f"${cost:.4f}, $0.0000 of it paid now" in s for s in said)

    # the runs share --max-cost by what this command pays: seed 1, recorded, leaves it all to seed 2
    summary = rp.reproduce("generic", "openai/gpt-4o-mini", seeds=2, yes=True, out=tmp_path / "r", echo=said.append,
                           null_model=False, steps=2, max_cost=cost * 1.5)
    assert summary.attrs["complete"], said[-6:]


def test_the_reproduction_report_says_how_many_answers_fell_back(scripted, monkeypatch, tmp_path):
    """Every answer of a model fell back to its default and the top report still listed findings as
    holding with no word of it (only each run's own report said so)."""
    _asks_a_model(monkeypatch, scripted)
    scripted(default="I would rather not say.")  # no option of any question
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: _toy_with_findings())
    said = []
    rp.reproduce("generic", "openai/scripted", seeds=1, yes=True, out=tmp_path / "r", echo=said.append, null_model=False)
    calls = pd.read_parquet(tmp_path / "r" / "cafe" / "seed-1" / "llm_calls.parquet")
    asked = calls[calls["engine"] == "llm"]
    assert len(asked) > 0 and (asked["status"] == "fallback").all()
    report = (tmp_path / "r" / "report.md").read_text()
    assert (f"**Most of the model's answers were unusable.** Of the {len(asked)} decisions asked of a model, "
            f"{len(asked)} (100%) were answered by the operation's fallback") in report
    scripted(default="1")
    rp.reproduce("generic", "openai/scripted", seeds=1, yes=True, out=tmp_path / "ok", echo=said.append,
                 null_model=False)
    assert "fallback" not in (tmp_path / "ok" / "report.md").read_text()


@pytest.mark.parametrize(("low", "high", "said"), [
    (10.4, 28.6, "10-29 seconds"),  # "about 0-0 minutes" for a one-step probe's 26 calls
    (60, 119.9, "60-120 seconds"), (60, 120, "60 seconds-2 minutes"), (600, 3599, "10-60 minutes"),
    (1800, 3600, "30 minutes-1.0 hours"), (36000, 90000, "10.0-25.0 hours"),
    (20, 150, "20 seconds-2 minutes"), (50, 4000, "50 seconds-1.1 hours"),  # each end in its own unit
    (100, 3781, "100 seconds-1.1 hours")])  # 1.0503 hours: an hour is 3600 s
def test_a_projected_time_is_said_in_a_unit_that_shows_it(low, high, said):
    assert rp.duration_span(low, high) == said


def test_a_projection_on_the_embedded_model_says_how_long_it_takes(toy, tmp_path):
    """52,125 calls were projected at $0 with no word that they take many hours on 2 cores."""
    said = []
    assert rp.reproduce("generic", "local/smollm2", seeds=2, out=tmp_path / "r", echo=said.append) is None
    calls = int(re.search(r"(\d+) of them LLM calls", next(s for s in said if s.startswith("Projected")))[1])
    span = rp.duration_span(*(calls * s for s in rp.EMBEDDED_SECONDS_PER_CALL))
    assert f"so about {span}" in next(s for s in said if s.startswith("Time: the embedded model"))
    rp.reproduce("generic", "rules", seeds=1, out=tmp_path / "q", echo=said.append)
    assert sum(s.startswith("Time:") for s in said) == 1  # the rules: no model, no wait


def test_a_run_that_refuses_its_model_leaves_no_reproduction_folder(toy, tmp_path, monkeypatch):
    """A run refusing its model (no key, no price) left an empty --out folder behind."""
    from socialsim.llm.engines import ModelUnavailable
    from socialsim.model import runner

    def refused(models, **settings):
        raise ModelUnavailable("model 'openai/gpt-4o-mini' needs OPENAI_API_KEY in the environment")

    monkeypatch.setattr(runner, "check_models", refused)
    with pytest.raises(ModelUnavailable):
        rp.reproduce("generic", "openai/gpt-4o-mini", seeds=1, yes=True, out=tmp_path / "r", echo=lambda line: None)
    assert not (tmp_path / "r").exists()


class _StandIns:
    """The driver with its projection and its runs stood in: ``projected[model]`` is what the
    projection says (calls, cost, models), ``runs[(model, seed)]`` what each run returns (status,
    total and live cost, the statuses of a model's answers); every run's config is kept."""

    def __init__(self, monkeypatch, tmp_path, projected, runs=None):
        from types import SimpleNamespace

        from socialsim.model import runner

        self.ran, self.loaded, self.projected, self.built = [], [], [], []

        def load(arch, judge=None):
            self.loaded.append((arch, judge))
            return self.protocol()  # a new one each time, as the architectures' own

        monkeypatch.setattr(rp, "load_protocol", load)

        def project(protocol, model, seeds, unit_price=None):
            self.projected.append((model, seeds, unit_price))
            calls, cost, models, not_projected, after_run = projected[model]
            per_run = pd.DataFrame([{"run": "cafe", "steps": 2, "decisions": 10 * seeds, "calls": calls}])
            per_model = pd.DataFrame({"model": models, "decisions": [10 * seeds] * len(models)})
            return rp.Projection(10 * seeds, calls, 100 * calls, 5 * calls, cost, per_run, per_model,
                                 not_projected, after_run)

        def run(config, run_dir, progress=False):
            where = run_dir.relative_to(tmp_path) if run_dir.is_absolute() else run_dir
            self.ran.append((str(where), config.model, config.rng, config.steps,
                             config.max_cost, config.arch_params, config.price, config.api_base, progress))
            self.built.append((config.arch, config.scenario, config.preset, config.deployments, config.routes))
            status, cost, live, answers = (runs or {}).get((config.model, config.rng), ("completed", 0.0, 0.0, ()))
            rows = [SimpleNamespace(engine="llm", status=s) for s in answers] + [
                SimpleNamespace(engine="rules", status="fallback")]  # the rules' own fallbacks are not a model's
            ledger = SimpleNamespace(rows=rows, live_cost=live, totals=lambda: {"cost_usd": cost})
            return SimpleNamespace(status=status, steps_done=1 if status != "completed" else config.steps or 2,
                                   model=SimpleNamespace(llm=SimpleNamespace(ledger=ledger)))

        monkeypatch.setattr(rp, "project", project)
        monkeypatch.setattr(runner, "run", run)

    @staticmethod
    def protocol():
        """x is the seed's number in a model's runs and 0 in the null model's."""
        return rp.Protocol(
            arch="generic", runs=[rp.ProtocolRun("cafe", "makerspace", steps=2, preset="paper")],
            routes={"judge": "rules"},
            measure=lambda run_dir: {"x": 0.0 if rp.NULL_DIR in run_dir.parts else float(run_dir.name[-1])},
            paper=pd.DataFrame([{"label": "*", "metric": "x", "paper": 1.5}]), description="a stand-in protocol",
            findings=[rp.compare("x is above 1.4", ("cafe", "x"), ">", 1.4)],
            interpret=lambda checked: [f"{len(checked)} finding read", "and understood"])


MINI, JUDGE = "openai/gpt-4o-mini", "openai/gpt-4o"


def test_a_reproduction_under_a_budget_shares_it_by_what_each_run_pays_and_reports_it_all(monkeypatch, tmp_path,
                                                                                         capsys):
    """Seed 1 pays $0.30 of $1; seed 2 may pay the $0.70 left and pays $0.10 of its $0.30 (the rest
    recorded before); 2 of a model's 4 answers fell back (half: not most); the null model runs the
    same seeds free, without the --set that names a model; the projection says it counts no repair."""
    stand = _StandIns(monkeypatch, tmp_path, {
        MINI: (16, 0.5, [JUDGE, MINI, "rules"], {}, {"the judge": 4}),
        "rules": (0, 0.0, ["rules"], {}, {})},
        runs={(MINI, 1): ("completed", 0.3, 0.3, ("ok", "repaired", "fallback")),
              (MINI, 2): ("completed", 0.3, 0.1, ("fallback",))})
    said = []
    summary = rp.reproduce("generic", MINI, seeds=2, max_cost=1.0, out=tmp_path / "r", echo=said.append,
                           settings={"judge": JUDGE, "temptation": 0.5, "embedder": MINI, "panel": [JUDGE, "rules"]},
                           steps=3,
                           api_base="http://127.0.0.1:9/v1", unit_price=(1.0, 2.0), progress=True,
                           judge="nobody/judge", deployments="pool.yaml")
    assert stand.projected == [(MINI, 2, (1.0, 2.0)), ("rules", 2, None)]
    assert stand.built == 2 * [("generic", "makerspace", "paper", "pool.yaml", {"judge": "rules"})] + 2 * [
        ("generic", "makerspace", "paper", None, {"judge": "rules"})]
    assert stand.loaded == [("generic", "nobody/judge"), ("generic", None)]  # the null model's protocol: no judge
    params = {"judge": JUDGE, "temptation": 0.5, "embedder": MINI, "panel": [JUDGE, "rules"]}
    assert stand.ran == [
        ("r/cafe/seed-1", MINI, 1, 3, 1.0, params, (1.0, 2.0), "http://127.0.0.1:9/v1", True),
        ("r/cafe/seed-2", MINI, 2, 3, pytest.approx(0.7), params, (1.0, 2.0), "http://127.0.0.1:9/v1", True),
        (f"r/{rp.NULL_DIR}/cafe/seed-1", "rules", 1, 3, None, {"temptation": 0.5}, None, None, True),
        (f"r/{rp.NULL_DIR}/cafe/seed-2", "rules", 2, 3, None, {"temptation": 0.5}, None, None, True)]
    assert said[:10] == [
        f"Protocol: a stand-in protocol — 1 run(s) x 2 seed(s) on {MINI}",
        "Each run's figures are for its 2 seeds together:",
        " run  steps  decisions  calls\ncafe      2         20     16",
        f"             model  decisions\n     {JUDGE}         20\n{MINI}         20\n             rules         20",
        "Projected: 20 decisions, 16 of them LLM calls with 1600 prompt + 80 completion tokens, cost $0.5000 "
        "(estimated from a dry run of each arm answered by the rules, no model asked; completions at each "
        "operation's max_tokens)",
        "Not in the projection: a model's unusable answer is asked once more (a repair), so a model that often "
        "answers unusably makes up to twice these calls and prompt tokens; --max-cost stops the runs there",
        "Included: the judge, up to 4 calls in all after each run's last step (their prompts measured on the dry "
        "run, extended to the run's length)",
        "Afterwards: the same protocol and seeds on the rules null model, free, to show which findings come out "
        "without any model (--no-null-model skips it)",
        "[1/2] cafe seed 1: completed (3 steps, $0.3000)",
        "[2/2] cafe seed 2: completed (3 steps, $0.3000, $0.1000 of it paid now)"]
    assert said[10:12] == [f"The same protocol on the rules null model (no model asked; in {tmp_path / 'r' / rp.NULL_DIR}) ...",
                          "(the null model leaves out --set generic.embedder, generic.judge, generic.panel: it asks no model)"]
    notes = ["Every run was cut to 3 steps (--steps): a quick look, not the paper's protocol; the findings below are "
             "this shortened run's.",
             "Every run with generic.embedder=openai/gpt-4o-mini, generic.judge=openai/gpt-4o, generic.panel=["
             "'openai/gpt-4o', 'rules'], generic.temptation=0.5 (--set): the protocol under another setting than the "
             "paper's.",
             "Of the 4 decisions asked of a model, 2 (50%) were answered by the operation's fallback (its documented "
             "default) after the reply stayed unusable, and 1 repaired by asking once more: the figures rest on "
             "those defaults as much; each run's report.md and run.log list them."]
    assert said[12:15] == notes and said[-1] == f"reproduction directory: {tmp_path / 'r'} (report.md: every " \
                                                "figure beside the paper's)"
    checked = pd.read_csv(tmp_path / "r" / "findings.csv")
    assert checked.columns.tolist() == ["finding", "verdict", "seeds_holding", "seeds_measured", "sign_p",
                                        "null_verdict", "null_seeds_holding", "null_seeds_measured"]
    findings = rp.findings_section(checked, MINI) + "\n\n1 finding read\n\nand understood"
    assert said[15] == findings and "| x is above 1.4 | holds | 1 of 2 | 0.75 | does not hold (0 of 2) |" in findings
    assert summary.attrs["complete"] and summary.values.tolist() == [["cafe", "x", 1.5, 1.5, pytest.approx(0.5 ** 0.5), 2]]
    assert pd.read_csv(tmp_path / "r" / "summary.csv").columns.tolist() == ["label", "metric", "paper", "mean", "std", "n"]
    assert (tmp_path / "r" / "report.md").read_text() == (
        f"# Reproduction of generic\n\nEngine: {MINI}; seeds 1..2; the runs' calls cost $0.6000 ($0.4000 of it paid "
        "by this command; the rest was recorded before).\n\n" + "".join(f"{n}\n\n" for n in notes)
        + f"a stand-in protocol\n\n{findings}\n\n## The paper's figures beside the runs'\n\n"
        + rp.markdown_table(summary) + "\n")
    assert capsys.readouterr().out == ""  # the null model's lines are not said


def test_a_stopped_run_ends_the_protocol_and_a_run_of_the_rules_needs_no_yes(monkeypatch, tmp_path):
    """Seed 2 of 3 interrupted: seed 3 never starts, nothing after it is measured, no null model."""
    stand = _StandIns(monkeypatch, tmp_path, {"rules": (0, 0.0, ["rules"], {}, {})},
                      runs={("rules", 2): ("interrupted", 0.0, 0.0, ())})
    said = []
    summary = rp.reproduce("generic", "rules", steps=1, out=tmp_path / "r", echo=said.append)  # 3 seeds
    assert [(where, seed, steps, budget, progress) for where, _, seed, steps, budget, *_, progress in stand.ran] == [
        ("r/cafe/seed-1", 1, 1, None, False), ("r/cafe/seed-2", 2, 1, None, False)]
    assert said[4:7] == ["No model is asked (the rules answer every decision): running without --yes.",
                         "[1/3] cafe seed 1: completed (1 steps, $0.0000)",
                         "[2/3] cafe seed 2: interrupted (1 steps, $0.0000)"]
    notes = ["Every run was cut to 1 steps (--steps): a quick look, not the paper's protocol; the findings below are "
             "this shortened run's.",
             "Not in the figures: cafe seed 2: interrupted after 1 steps (not measured: a partial run is not the "
             "protocol's).",
             "Not started (1): cafe seed 3. The same command with the same --out resumes: recorded calls are free."]
    assert said[7:10] == notes and not summary.attrs["complete"]
    assert summary.values.tolist() == [["cafe", "x", 1.5, 1.0, pytest.approx(math.nan, nan_ok=True), 1]]
    report = (tmp_path / "r" / "report.md").read_text()
    assert report.startswith("# Reproduction of generic\n\nEngine: the rules baseline (a null model, not an LLM); "
                             "seeds 1..3 planned (2 of the 3 runs started; the others are named below); the runs' "
                             "calls cost $0.0000.\n\n" + "".join(f"{n}\n\n" for n in notes))
    assert not (tmp_path / "r" / rp.NULL_DIR).exists()
    stand = _StandIns(monkeypatch, tmp_path, {"rules": (0, 0.0, ["rules"], {}, {})})
    again = rp.reproduce("generic", "rules", steps=1, out=tmp_path / "r", echo=said.append)  # the same command
    assert again.attrs["complete"] and [seed for _, _, seed, *_ in stand.ran] == [1, 2, 3]
    stand = _StandIns(monkeypatch, tmp_path, {MINI: (16, 0.5, [MINI], {}, {}), "rules": (0, 0.0, ["rules"], {}, {})},
                      runs={(MINI, 1): ("interrupted", 0.0, 0.0, ())})
    summary = rp.reproduce("generic", MINI, seeds=2, yes=True, out=tmp_path / "m", echo=said.append)
    assert stand.loaded == [("generic", None)] and not summary.attrs["complete"]  # no null model after a stop
    assert said[-2] == rp.markdown_table(summary)  # nothing measured: no findings, the empty table
    assert (tmp_path / "m" / "report.md").read_text().endswith(
        "a stand-in protocol\n\n" + rp.markdown_table(summary) + "\n")


def test_each_run_left_out_and_each_not_started_is_named_in_one_list(monkeypatch, tmp_path):
    """Seed 1 unmeasurable, seed 2 interrupted: both left out, in one note; seeds 3 and 4 never start."""
    _StandIns(monkeypatch, tmp_path, {"rules": (0, 0.0, ["rules"], {}, {})},
              runs={("rules", 2): ("interrupted", 0.0, 0.0, ())})
    protocol = _StandIns.protocol()

    def unmeasurable_seed_1(run_dir):
        if run_dir.name == "seed-1":
            raise FileNotFoundError("tables/missing.parquet")
        return {"x": 1.0}

    protocol.measure = unmeasurable_seed_1
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: protocol)
    said = []
    summary = rp.reproduce("generic", "rules", seeds=4, out=tmp_path / "r", echo=said.append)
    notes = ["Not in the figures: cafe seed 1: could not be measured (FileNotFoundError: tables/missing.parquet); "
             "cafe seed 2: interrupted after 1 steps (not measured: a partial run is not the protocol's).",
             "Not started (2): cafe seed 3, cafe seed 4. The same command with the same --out resumes: recorded "
             "calls are free."]
    assert said[-4:-2] == notes and not summary.attrs["complete"]
    assert "".join(f"{n}\n\n" for n in notes) in (tmp_path / "r" / "report.md").read_text()


def test_a_model_unreachable_when_a_later_run_starts_stops_the_protocol_with_what_finished_reported(monkeypatch,
                                                                                                       tmp_path):
    """An outage from seed 1's end to seed 2's check of its model (one token, before the run): the
    command failed (exit 2) with no report.md, seed 1 paid for and reported nowhere."""
    from socialsim.llm.engines import ModelUnavailable
    from socialsim.model import runner

    stand = _StandIns(monkeypatch, tmp_path, {MINI: (16, 0.5, [MINI], {}, {})})
    stood_in = runner.run
    down = "model 'openai/gpt-4o-mini' is unreachable: InternalServerError: fake fault"

    def run(config, run_dir, progress=False):
        if config.rng == 2:
            raise ModelUnavailable(down)
        return stood_in(config, run_dir, progress)

    monkeypatch.setattr(runner, "run", run)
    said = []
    summary = rp.reproduce("generic", MINI, seeds=3, yes=True, out=tmp_path / "r", echo=said.append)
    assert [seed for _, _, seed, *_ in stand.ran] == [1] and not summary.attrs["complete"]
    assert f"[2/3] cafe seed 2: not started ({down})" in said
    note = (f"Not started (2): cafe seed 2, cafe seed 3 (the first could not start: {down}). The same command "
            "with the same --out resumes: recorded calls are free.")
    report = (tmp_path / "r" / "report.md").read_text()
    assert note in said and note in report
    # the header said "seeds 1..3" as if all had run
    assert f"Engine: {MINI}; seeds 1..3 planned (1 of the 3 runs started; the others are named below);" in report
    assert summary["n"].tolist() == [1] and not (tmp_path / "r" / rp.NULL_DIR).exists()  # seed 1 measured; no null


def test_a_null_model_stopped_short_gives_no_verdicts_and_says_where_it_stopped(monkeypatch, tmp_path):
    _StandIns(monkeypatch, tmp_path, {MINI: (16, 0.5, [MINI], {}, {}), "rules": (0, 0.0, ["rules"], {}, {})},
              runs={("rules", 2): ("interrupted", 0.0, 0.0, ())})
    summary = rp.reproduce("generic", MINI, seeds=2, yes=True, out=tmp_path / "r", echo=lambda line: None)
    assert not summary.attrs["complete"] and "null_verdict" not in pd.read_csv(tmp_path / "r" / "findings.csv")
    assert (f"Not in the figures: the rules null model did not complete the protocol, so its verdicts are left out "
            f"(see {tmp_path / 'r' / rp.NULL_DIR / 'report.md'}).") in (tmp_path / "r" / "report.md").read_text()


def test_a_measure_naming_the_rows_label_and_seed_is_not_measured(monkeypatch, tmp_path):
    _StandIns(monkeypatch, tmp_path, {"rules": (0, 0.0, ["rules"], {}, {})})
    protocol = _StandIns.protocol()
    protocol.measure = lambda run_dir: {"seed": 9.0, "label": "other", "x": 1.0}
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: protocol)
    summary = rp.reproduce("generic", "rules", seeds=1, out=tmp_path / "r", echo=lambda line: None)
    assert not summary.attrs["complete"] and summary.empty
    assert ("Not in the figures: cafe seed 1: could not be measured (ValueError: the protocol's measure returned "
            "['label', 'seed'], names that say which arm and seed a row is).") in (tmp_path / "r" / "report.md").read_text()


def test_the_null_model_of_a_reproduction_must_ask_no_model(monkeypatch, tmp_path):
    _StandIns(monkeypatch, tmp_path, {MINI: (16, 0.5, [MINI], {}, {}), "rules": (4, 0.1, ["rules", MINI], {}, {})})
    with pytest.raises(ValueError, match=rf"^the rules null model would ask {MINI}: it must ask no model$"):
        rp.reproduce("generic", MINI, seeds=1, yes=True, out=tmp_path / "r", echo=lambda line: None)


@pytest.mark.parametrize(("model", "projected", "given", "last"), [
    (MINI, (16, 0.5, [MINI], {}, {}), {}, "Not run: add --yes to run it, or --max-cost USD to run it under a budget."),
    (MINI, (16, 0.5, [MINI], {}, {}), {"max_cost": 0.49}, "Not run: the projection exceeds --max-cost 0.49; raise it "
                                                          "or add --yes."),
    ("rules", (0, 0.0, ["rules"], {"the judge": 3}, {}), {},
     "Not run: add --yes to run it, or --max-cost USD to run it under a budget.")])
def test_a_reproduction_that_may_not_pay_runs_nothing_and_says_why(monkeypatch, tmp_path, model, projected, given,
                                                                    last):
    stand = _StandIns(monkeypatch, tmp_path, {model: projected})
    said = []
    assert rp.reproduce("generic", model, seeds=1, out=tmp_path / "r", echo=said.append, null_model=False,
                        **given) is None
    assert said[-1] == last and stand.ran == [] and not (tmp_path / "r").exists()
    assert any("cost unknown (no price in litellm's cost map) (estimated" in s for s in said) == (projected[1] is None)
    assert ("Not in the projection: the judge, up to 3 more calls in all (asked after each run's last step, on the "
            "same budget)" in said) == (model == "rules")


def test_a_budget_exactly_the_projection_runs_and_the_embedded_model_is_timed(monkeypatch, tmp_path):
    """Without --out, the runs go to a folder named by the architecture, model, --set and --steps."""
    stand = _StandIns(monkeypatch, tmp_path, {"local/smollm2": (100, 0.0, ["local/smollm2"], {}, {}),
                                              MINI: (16, 0.5, [MINI, "rules"], {}, {})},
                      runs={(MINI, 1): ("completed", 0.0, 0.0, ("fallback", "ok", "fallback"))})
    monkeypatch.chdir(tmp_path)
    said = []
    rp.reproduce("generic", MINI, seeds=1, echo=said.append, null_model=False, max_cost=0.5, steps=1,
                 settings={"temptation": 0.5, "mood": "calm"})
    assert [where for where, *_ in stand.ran] == ["reproduce/generic-openai_gpt-4o-mini-mood-calm-temptation-0_5-steps-1/"
                                                  "cafe/seed-1"] and not any(s.startswith("Time:") for s in said)
    assert said[1] == " run  steps  decisions  calls\ncafe      2         10     16"  # one seed: no seeds line
    assert said[2].split() == ["model", "decisions", MINI, "10", "rules", "10"]  # two models: each one's share
    assert "**Most of the model's answers were unusable.** Of the 3 decisions asked of a model, 2 (67%) were " \
           "answered by the operation's fallback" in (tmp_path / "reproduce" / "generic-openai_gpt-4o-mini-mood-calm-" \
                                                       "temptation-0_5-steps-1" / "report.md").read_text()
    said.clear()
    rp.reproduce("generic", "local/smollm2", seeds=1, out=tmp_path / "e", echo=said.append, yes=True,
                 null_model=False)
    assert "Time: the embedded model answers a call in about 0.4-1.1 s on 2 free cores (measured), so about " \
           "40-110 seconds" in said
    rp.reproduce("generic", MINI, seeds=1, echo=said.append, null_model=False, yes=True)
    assert stand.ran[-1][0] == "reproduce/generic-openai_gpt-4o-mini/cafe/seed-1"


def test_set_is_refused_for_what_the_arms_vary_naming_each_before_anything_runs(monkeypatch, tmp_path):
    protocol = rp.Protocol(arch="asvo", runs=[
        rp.ProtocolRun("with", "school-micro", arch_params={"use_svo": True, "tom": "x", "decay": 0.1}),
        rp.ProtocolRun("without", "school-micro", arch_params={"use_svo": False, "tom": "y", "decay": 0.1})],
        measure=dict, paper=pd.DataFrame())
    monkeypatch.setattr(rp, "load_protocol", lambda arch, judge=None: protocol)
    with pytest.raises(ValueError) as refused:
        rp.reproduce("asvo", "rules", out=tmp_path / "r", echo=print,
                     settings={"use_svo": True, "tom": "z", "decay": 0.2, "judge": "rules"})
    assert str(refused.value) == ("--set asvo.tom, asvo.use_svo: the protocol's arms set it themselves (that is "
                                  "what they compare), so it cannot be set for all of them")
    assert not (tmp_path / "r").exists()


def test_the_null_model_refuses_a_protocol_that_would_ask_a_model(monkeypatch, tmp_path):
    _StandIns(monkeypatch, tmp_path, {"rules": (4, 0.1, ["rules", MINI, JUDGE], {}, {})})
    with pytest.raises(ValueError, match=rf"^the rules null model would ask {JUDGE}, {MINI}: it must ask no model$"):
        rp.reproduce("generic", "rules", seeds=1, yes=True, out=tmp_path / "n", echo=lambda line: None, free_only=True)
