"""The CRSEC reproduction protocol: the paper's preset, and measures read from a run's files."""

import math

import pandas as pd
import pytest

from socialsim.agents.crsec.reproduce import CONFLICTS_FALL, TIPPING_EMERGES, measure, protocol


def test_protocol_is_the_papers_preset_and_sets_the_judge_only_when_given():
    p = protocol(judge=None)
    assert [(r.scenario, r.preset, r.arch_params) for r in p.runs] == [("hobbs-cafe", "paper", {})]
    assert protocol(judge="openai/gpt-4o").runs[0].arch_params == {"judge": "openai/gpt-4o"}


def test_measure_reads_end_values_and_the_conflict_trend(tmp_path):
    frame = pd.DataFrame({"conflicts": [4, 4, 1, 1, 0, 2, 0, 0],
                          "adoption[no smoking indoors]": [0.3, 0.5, 0.7, 0.7, 0.8, 0.8, 0.8, 0.9],
                          "compliance[no smoking indoors]": [0.7] * 7 + [0.6]})
    frame.to_parquet(tmp_path / "model.parquet")
    got = measure(tmp_path)
    assert got["adoption[no smoking indoors] at end"] == 0.9 and got["compliance[no smoking indoors] at end"] == 0.6
    assert got["conflicts peak"] == 4 and got["conflicts day 2 / day 1"] == 2 / 10
    assert math.isnan(got["adoption[tip after meals] at end"])  # a norm the run does not track


def test_compliance_over_day_2_counts_the_agents_who_breached_in_the_second_half(tmp_path):
    """"At end" is the last hour of the run, when the cafe is quiet; day 2 as a whole is not."""
    steps = 8
    pd.DataFrame({"conflicts": [0] * steps, "adoption[no smoking indoors]": [0.5] * steps,
                  "compliance[no smoking indoors]": [1.0] * steps,
                  "compliance[be quiet in public]": [1.0] * steps}).to_parquet(tmp_path / "model.parquet")
    pd.DataFrame({"name": ["Ann", "Bob", "Cy", "Di"] * 2}).to_parquet(tmp_path / "agents.parquet")
    (tmp_path / "tables").mkdir()
    pd.DataFrame([{"step": 2, "agent": "Ann", "norm": "no smoking indoors"},  # day 1: not counted
                  {"step": 4, "agent": "Di", "norm": "no smoking indoors"},  # day 1's last step: not counted
                  {"step": 5, "agent": "Bob", "norm": "no smoking indoors"},
                  {"step": 7, "agent": "Bob", "norm": "no smoking indoors"},
                  {"step": 6, "agent": "Cy", "norm": "no smoking indoors"}]).to_parquet(
        tmp_path / "tables" / "breaches.parquet")
    got = measure(tmp_path)
    assert got["compliance[no smoking indoors] at end"] == 1.0
    assert got["compliance[no smoking indoors] over day 2"] == 0.5  # Bob and Cy breached on day 2
    assert got["compliance[be quiet in public] over day 2"] == 1.0
    assert math.isnan(got["compliance[tip after meals] over day 2"])  # not tracked by this run
    (tmp_path / "tables" / "breaches.parquet").unlink()  # a run without a breach: everyone complied
    assert measure(tmp_path)["compliance[no smoking indoors] over day 2"] == 1.0
    (tmp_path / "agents.parquet").unlink()  # no agents recorded: nothing to measure
    assert math.isnan(measure(tmp_path)["compliance[no smoking indoors] over day 2"])


def _figures(adoption, compliance, tipping, conflict_trend, acting=None):
    row = {"label": "hobbs-cafe / paper", "seed": 1, "adoption[tip after meals] at end": tipping,
           "conflicts day 2 / day 1": conflict_trend}
    for norm in ("no smoking indoors", "be quiet in public"):
        row[f"adoption[{norm}] at end"], row[f"compliance[{norm}] over day 2"] = adoption, compliance
        row[f"acting compliance[{norm}] over day 2"] = compliance if acting is None else acting
    return pd.DataFrame([row])


def test_the_papers_findings_hold_for_its_own_outcome_and_fail_for_the_baselines():
    from socialsim.model.reproduce import check_findings

    p = protocol(judge=None)
    paper_like = check_findings(p, _figures(1.0, 1.0, 0.8, 0.0))
    assert set(paper_like["verdict"]) == {"holds"} and len(paper_like) == 8
    # the rules baseline's 2-day figures (docs/crsec.md): adoption and compliance plateau, conflicts recur
    baseline = check_findings(p, _figures(0.79, 0.72, 0.56, 1.2)).set_index("finding")["verdict"]
    assert baseline["every agent has adopted 'no smoking indoors' by the end of day 2"] == "does not hold"
    assert baseline["every agent complies with 'be quiet in public' all through day 2"] == "does not hold"
    assert baseline[CONFLICTS_FALL] == "does not hold"
    assert baseline[TIPPING_EMERGES] == "holds"
    # the two entrepreneurs who favour tipping hold it from the start: 2 of 10 is seeding, not emergence
    seeded_only = check_findings(p, _figures(1.0, 1.0, 0.2, 0.5)).set_index("finding")["verdict"]
    assert seeded_only[TIPPING_EMERGES] == "does not hold"
    assert check_findings(p, _figures(1.0, 1.0, 0.5, 0.5)).set_index("finding")["verdict"][TIPPING_EMERGES] \
        == "does not hold"  # half is not most
    no_conflict_at_first = check_findings(p, _figures(1.0, 1.0, 0.0, float("nan"))).set_index("finding")["verdict"]
    assert no_conflict_at_first[CONFLICTS_FALL] == "not measured"
    assert no_conflict_at_first[TIPPING_EMERGES] == "does not hold"


def test_conflicts_that_stay_level_have_not_fallen():
    from socialsim.model.reproduce import check_findings

    verdicts = check_findings(protocol(judge=None), _figures(1.0, 1.0, 0.4, 1.0)).set_index("finding")["verdict"]
    assert verdicts[CONFLICTS_FALL] == "does not hold"


def test_set_runs_the_protocol_under_another_setting_in_a_directory_of_its_own(monkeypatch, tmp_path):
    """`reproduce crsec --set crsec.prompt_examples=neutral`: the priming's control arm."""
    import json

    from socialsim.model import reproduce as rp

    monkeypatch.chdir(tmp_path)
    said: list[str] = []
    rp.reproduce("crsec", "rules", seeds=1, steps=2, settings={"prompt_examples": "neutral"}, echo=said.append)
    out = tmp_path / "reproduce" / "crsec-rules-prompt_examples-neutral-steps-2"
    config = json.loads(next(out.glob("*/seed-1/config.json")).read_text())["config"]
    assert config["arch_params"]["prompt_examples"] == "neutral"
    assert "crsec.prompt_examples=neutral (--set)" in (out / "report.md").read_text()
    with pytest.raises(ValueError, match="asvo.use_svo: the protocol's arms set it"):  # what ASVO's arms compare
        rp.reproduce("asvo", "rules", seeds=1, settings={"use_svo": False}, echo=said.append)
    assert sorted(p.name for p in (tmp_path / "reproduce").iterdir()) == [out.name]  # nothing run for it


def test_the_command_line_checks_each_set_before_anything_runs(capsys, monkeypatch, tmp_path):
    from socialsim import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["reproduce", "crsec", "--model", "rules", "--set", "crsec.prompt_examples=some"]) == 2
    assert "prompt_examples expects one of paper, neutral" in capsys.readouterr().err
    assert cli.main(["reproduce", "itcmas", "--model", "rules", "--set", "itcmas.ablation=base"]) == 2
    assert "itcmas.ablation: the protocol's arms set it" in capsys.readouterr().err
    assert not (tmp_path / "reproduce").exists()


def test_the_conflict_trend_compares_the_same_hours_of_both_days_and_has_none_without_early_conflicts(tmp_path):
    """Day 2 against day 1 (the run's halves in the paper's preset), not the run's first quarter (day 1's
    morning and lunch) against its last (day 2's quiet evening): a society whose days are alike has not
    changed, whatever its daily schedule. The quarters said 'fell' for it (5 then 1)."""
    frame = pd.DataFrame({"conflicts": [5, 0, 0, 1, 5, 0, 0, 1]})  # two days, busy mornings, quiet evenings
    frame.to_parquet(tmp_path / "model.parquet")
    assert measure(tmp_path)["conflicts day 2 / day 1"] == 1.0
    pd.DataFrame({"conflicts": [2, 1, 1, 9, 0, 0, 1, 0]}).to_parquet(tmp_path / "model.parquet")
    assert measure(tmp_path)["conflicts day 2 / day 1"] == 1 / 13
    pd.DataFrame({"conflicts": [0, 0, 3, 5]}).to_parquet(tmp_path / "model.parquet")
    assert measure(tmp_path)["conflicts day 2 / day 1"] == math.inf  # risen from none: not fallen
    pd.DataFrame({"conflicts": [0, 0, 0, 0]}).to_parquet(tmp_path / "model.parquet")
    assert math.isnan(measure(tmp_path)["conflicts day 2 / day 1"])  # none on either day: nothing to fall
    from socialsim.model.reproduce import check_findings

    risen = check_findings(protocol(judge=None), _figures(1.0, 1.0, 0.4, math.inf)).set_index("finding")["verdict"]
    assert risen[CONFLICTS_FALL] == "does not hold"


def test_measure_reads_the_judges_mean_rating_per_task(tmp_path):
    from socialsim.agents.crsec.metrics import QUESTIONNAIRE_FILE

    pd.DataFrame({"conflicts": [1, 0]}).to_parquet(tmp_path / "model.parquet")
    (tmp_path / "tables").mkdir()
    pd.DataFrame([{"item": i, "task": "Plan", "question": 1, "agent": "A", "step": 1, "score": s, "reason": "",
                   "status": "ok"} for i, s in enumerate((5, 7))]).to_parquet(tmp_path / "tables" / QUESTIONNAIRE_FILE)
    got = measure(tmp_path)
    assert got["rating[Plan]"] == 6.0 and math.isnan(got["rating[Creation]"])


def test_no_questionnaire_is_projected_without_items_or_an_llm_judge():
    from socialsim.agents.crsec.reproduce import questionnaire_calls
    from socialsim.model.reproduce import ProtocolRun

    def calls(**params):
        return questionnaire_calls(ProtocolRun("r", "hobbs-cafe", arch_params=params))

    assert calls(judge="openai/j", questionnaire_items=0) is None and calls() is None
    assert calls(judge="openai/j", questionnaire_items=2) == ("the Appendix-E questionnaire asked of openai/j", 2 * 11)


def _day_2_run(tmp_path, events, breaches=(), agents=("Ann", "Bob")):
    """A 2-step 'run' of Hobbs Cafe whose days last one step (day 1 = step 1, day 2 = step 2) with
    these events and breaches (step, agent, norm), and these agents."""
    from socialsim.scenarios.loader import scenario_path

    (tmp_path / "scenario.yaml").write_text(scenario_path("hobbs-cafe").read_text().replace(
        'day_end: "22:00"', 'day_end: "08:10"').replace("  schedule:", "  schedule: []  #").replace(
        "    - {time:", "    # {time:"))  # a day of one 10-minute step, with no meal (they are after it)
    pd.DataFrame({"conflicts": [0, 0], **{f"compliance[{n}]": [1.0, 1.0] for n in
                  ("no smoking indoors", "be quiet in public", "tip after meals")}}).to_parquet(tmp_path / "model.parquet")
    pd.DataFrame({"name": list(agents)}).to_parquet(tmp_path / "agents.parquet")
    (tmp_path / "tables").mkdir(exist_ok=True)
    pd.DataFrame([{"step": s, "agent": a, "norm": n} for s, a, n in breaches],
                 columns=["step", "agent", "norm"]).to_parquet(tmp_path / "tables" / "breaches.parquet")
    pd.DataFrame([{"step": s, "agent": a, "area": area, "action": act, "ok": True, "tags": tags}
                  for s, a, area, act, tags in events],
                 columns=["step", "agent", "area", "action", "ok", "tags"]).to_parquet(tmp_path / "tables" / "events.parquet")
    return measure(tmp_path)


def test_compliance_over_day_2_is_not_measured_when_nobody_did_the_behaviour_that_day(tmp_path):
    """"Every agent complies all through day 2" is 1 - the share who breached: 1.0 when every plan fell
    back to the filler and nobody smoked or spoke at all. With no act of day 2 bearing on a norm there was
    no chance to breach it: not measured. A society that keeps the norm (smoking outside, speaking softly,
    a meal and its tip) is measured, and passes."""
    idle = _day_2_run(tmp_path, [(1, "Ann", "Hobbs Cafe dining room", "smoke a cigarette", "smoke"),
                                 (2, "Ann", "Hobbs Cafe dining room", "drink a coffee", "")])
    assert all(math.isnan(idle[f"compliance[{n}] over day 2"]) for n in
               ("no smoking indoors", "be quiet in public", "tip after meals"))
    kept = _day_2_run(tmp_path, [(2, "Ann", "the street outside", "smoke a cigarette", "smoke"),
                                 (2, "Bob", "Hobbs Cafe dining room", "speak softly", ""),
                                 (2, "Bob", "Hobbs Cafe dining room", "eat a meal", "meal,food")])
    assert kept["compliance[no smoking indoors] over day 2"] == 1.0
    assert kept["compliance[be quiet in public] over day 2"] == 1.0
    assert kept["compliance[tip after meals] over day 2"] == 1.0
    from socialsim.model.reproduce import check_findings

    verdicts = check_findings(protocol(judge=None), _figures(1.0, float("nan"), 0.8, 0.5)).set_index("finding")["verdict"]
    assert verdicts["every agent complies with 'no smoking indoors' all through day 2"] == "not measured"


def test_day_2_findings_are_not_measured_on_a_run_shorter_than_two_days(tmp_path):
    """reproduce --steps cuts the runs: their halves are two parts of one day (the afternoon is
    quieter), so "conflicts fall" and compliance "all through day 2" held with no agent persuaded."""
    from socialsim.model.runner import RunConfig, run

    run(RunConfig(scenario="hobbs-cafe", arch="crsec", model="rules", steps=12, rng=1), tmp_path / "short",
        progress=False)
    figures = measure(tmp_path / "short")
    assert math.isnan(figures["conflicts day 2 / day 1"])
    assert all(math.isnan(figures[f"{kind}[{n}] over day 2"]) for n in
               ("no smoking indoors", "be quiet in public", "tip after meals") for kind in ("compliance", "acting compliance"))
    assert not math.isnan(figures["adoption[no smoking indoors] at end"])  # the rest is measured


def test_acting_compliance_over_day_2_counts_only_the_agents_who_had_the_chance(tmp_path):
    """Of three agents, Ann smoked outside and Bob indoors (a breach) on day 2; Cy never smoked. Of all
    agents two in three "complied"; of those who did what the norm speaks about, one in two did. An
    agent who breached with no recorded act (a breach is a world fact too) had the chance."""
    got = _day_2_run(tmp_path, [(2, "Ann", "the street outside", "smoke a cigarette", "smoke"),
                                (2, "Bob", "Hobbs Cafe dining room", "smoke a cigarette", "smoke"),
                                (2, "Cy", "Hobbs Cafe dining room", "drink a coffee", ""),
                                (1, "Cy", "the street outside", "smoke a cigarette", "smoke")],  # day 1: not counted
                     breaches=[(2, "Bob", "no smoking indoors"), (1, "Cy", "no smoking indoors"),
                               (2, "Cy", "be quiet in public")], agents=("Ann", "Bob", "Cy"))
    assert got["compliance[no smoking indoors] over day 2"] == pytest.approx(2 / 3)
    assert got["acting compliance[no smoking indoors] over day 2"] == 0.5
    assert got["acting compliance[be quiet in public] over day 2"] == 0.0  # only Cy had the chance: it breached
    assert math.isnan(got["acting compliance[tip after meals] over day 2"])  # nobody ate on day 2
    verdicts = check_findings_of(_figures(1.0, 1.0, 0.8, 0.5, acting=0.5))
    assert verdicts["every agent complies with 'no smoking indoors' all through day 2"] == "holds"
    assert verdicts["every agent who did what 'no smoking indoors' speaks about on day 2 kept it all day"] \
        == "does not hold"
    (tmp_path / "scenario.yaml").unlink()  # no scenario copy: which acts bear on a norm is unknown
    assert math.isnan(measure(tmp_path)["acting compliance[no smoking indoors] over day 2"])


def check_findings_of(figures):
    from socialsim.model.reproduce import check_findings

    return check_findings(protocol(judge=None), figures).set_index("finding")["verdict"]
