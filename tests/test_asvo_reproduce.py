"""`socialsim reproduce asvo`: the protocol's runs, Table 2 beside the measurements."""

import math

from socialsim.agents.asvo import reproduce as asvo_reproduce
from socialsim.model.reproduce import reproduce


def test_the_protocol_covers_eight_scenarios_in_both_arms_with_table_2_beside_them():
    protocol = asvo_reproduce.protocol(judge="openai/gpt-4o-mini")
    assert len(protocol.runs) == 16
    assert {r.arch_params["use_svo"] for r in protocol.runs} == {True, False}
    assert all(r.arch_params["judges"] == ["openai/gpt-4o-mini"] for r in protocol.runs)
    paper = protocol.paper.set_index(["label", "metric"])["paper"]
    assert paper[("workplace-meso / ASVO", "silhouette")] == 0.21
    assert paper[("family-micro / w/o ASVO", "separation_ratio")] == 1.01


def test_a_short_rules_reproduction_measures_every_metric(tmp_path, monkeypatch):
    monkeypatch.setattr(asvo_reproduce, "SCENARIOS", ("school-meso",))
    summary = reproduce("asvo", "rules", seeds=1, yes=True, steps=2, out=tmp_path, echo=lambda _: None)
    metrics = set(summary["metric"])
    assert {"silhouette", "separation_ratio", "silhouette_shuffled", "cooperation_rate_altruistic"} <= metrics
    row = summary[(summary["label"] == "school-meso / ASVO") & (summary["metric"] == "silhouette")].iloc[0]
    assert row["paper"] == 0.12 and not math.isnan(row["mean"])
    report = (tmp_path / "report.md").read_text()
    assert "marked confounded" in report  # the protocol's reading of its findings, under them (school-meso: 1 agent/type)


def verdict_of(verdicts, start: str) -> str:
    """The verdict of the one finding whose text starts so (texts end with marks: relative, confounded)."""
    (found,) = [v for f, v in verdicts.items() if f.startswith(start)]
    return found


def test_table_2_itself_satisfies_the_findings_and_swapped_arms_fail_them():
    from socialsim.model.reproduce import check_findings

    protocol = asvo_reproduce.protocol(judge=None)
    wide = protocol.paper.pivot(index="label", columns="metric", values="paper").reset_index()
    wide["silhouette_shuffled"], wide["seed"] = 0.0, 1  # chance: a silhouette of zero
    as_paper = check_findings(protocol, wide).set_index("finding")["verdict"]
    assert len(as_paper) == 40
    agent_shuffle = as_paper.index.str.contains("shuffled between agents")
    assert set(as_paper[~agent_shuffle]) == {"holds"}
    assert set(as_paper[agent_shuffle]) == {"not measured"}  # the paper gives no such figure
    swapped = wide.assign(label=wide["label"].map(
        lambda s: s.replace("w/o ASVO", "@").replace("ASVO", "w/o ASVO").replace("@", "ASVO")))
    verdicts = check_findings(protocol, swapped).set_index("finding")["verdict"]
    assert verdict_of(verdicts, "school-micro: actions separate by SVO type more with ASVO than without (silhouette)") \
        == "does not hold"
    assert verdict_of(verdicts, "family-meso: ... and by the separation ratio") == "does not hold"
    assert verdict_of(verdicts, "workplace-micro: with ASVO, above the shuffled-label chance level (silhouette)") \
        == "holds"
    assert verdict_of(verdicts, "school-micro: with ASVO, above the shuffled-label chance level (silhouette)") \
        == "does not hold"


def test_a_positive_silhouette_below_its_shuffled_chance_level_is_not_above_chance():
    from socialsim.model.reproduce import check_findings

    protocol = asvo_reproduce.protocol(judge=None)
    wide = protocol.paper.pivot(index="label", columns="metric", values="paper").reset_index()
    wide["silhouette_shuffled"], wide["seed"] = 0.15, 1  # chance above the paper's 0.12 in school
    verdicts = check_findings(protocol, wide).set_index("finding")["verdict"]
    assert verdict_of(verdicts, "school-micro: with ASVO, above the shuffled-label chance level (silhouette)") \
        == "does not hold"
    assert verdict_of(verdicts, "workplace-micro: with ASVO, above the shuffled-label chance level (silhouette)") \
        == "holds"  # 0.21


def actions_of_two_types():
    import pandas as pd

    rows = []
    for i in range(12):  # altruists help, competitors undercut: two clusters of texts
        rows.append({"step": i // 4 + 1, "agent": f"a{i % 4}", "svo": "altruistic", "label": "Cooperation",
                     "action": f"help a colleague with their report number {i}"})
        rows.append({"step": i // 4 + 1, "agent": f"c{i % 4}", "svo": "competitive",
                     "label": "Competition" if i % 3 else "Neutral", "action": f"take credit for the team's win {i}"})
    return pd.DataFrame(rows)


def test_measure_reads_the_runs_own_separability_figures_and_the_cooperation_rate_per_type(tmp_path):
    """A run that wrote its figures (with its own embedding) is read, not recomputed; an SVO type
    with no labelled action has no rate (NaN), not a rate of zero."""
    import json

    from socialsim.agents.asvo.metrics import SEPARABILITY_FILE

    (tmp_path / "tables").mkdir()
    actions_of_two_types().to_parquet(tmp_path / "tables" / "asvo_actions.parquet")
    (tmp_path / SEPARABILITY_FILE).write_text(json.dumps(
        {"silhouette": 0.4, "separation_ratio": 1.7, "silhouette_shuffled": -0.02, "svo_words_masked": 1,
         "agent_shuffle_p": 0.03}))
    got = asvo_reproduce.measure(tmp_path)
    assert (got["silhouette"], got["separation_ratio"], got["silhouette_shuffled"]) == (0.4, 1.7, -0.02)
    assert (got["svo_words_masked"], got["agent_shuffle_p"]) == (1.0, 0.03)  # the findings read these too
    assert got["cooperation_rate_altruistic"] == 1.0
    assert got["cooperation_rate_competitive"] == 0.0  # labelled, never cooperating
    assert math.isnan(got["cooperation_rate_prosocial"]) and math.isnan(got["cooperation_rate_individualistic"])


def test_with_the_rules_judge_an_actors_declared_stance_is_not_counted_as_its_cooperation(tmp_path):
    """An LLM's action outside the catalogue has no simulated effect but its declared stance's
    payoff, so the rules judge's label of it is the actor's own: left out of the rates and counted.
    With an LLM judge the label is the judge's, and every action counts."""
    import pandas as pd

    (tmp_path / "tables").mkdir()
    actions = actions_of_two_types().assign(effect_source="catalogue")
    declared = actions["svo"] == "altruistic"  # the altruists declared Cooperation for actions of their own
    actions.loc[declared & (actions["step"] > 1), "effect_source"] = "declared stance"
    actions.loc[declared & (actions["step"] == 1), "label"] = "Neutral"  # their catalogue actions
    actions.to_parquet(tmp_path / "tables" / "asvo_actions.parquet")
    judgements = tmp_path / "tables" / "asvo_judgements.parquet"

    pd.DataFrame({"step": [1], "agent": ["a0"], "judge": ["rules"]}).to_parquet(judgements)
    got = asvo_reproduce.measure(tmp_path)
    assert got["cooperation_rate_altruistic"] == 0.0  # only the 4 catalogue actions, all Neutral
    assert got["cooperation_self_declared"] == 8 / 24
    assert got["cooperation_rate_competitive"] == 0.0

    pd.DataFrame({"step": [1], "agent": ["a0"], "judge": ["openai/gpt-4o-mini"]}).to_parquet(judgements)
    got = asvo_reproduce.measure(tmp_path)
    assert got["cooperation_rate_altruistic"] == 8 / 12 and got["cooperation_self_declared"] == 0.0


def test_a_run_that_recorded_no_judges_or_no_effects_source_counts_every_action(tmp_path):
    """An older run (no asvo_judgements.parquet, or no effect_source column) cannot tell a declared
    stance from a judged one: every action counts, as before, and none is called self-declared."""
    import pandas as pd

    (tmp_path / "tables").mkdir()
    actions = actions_of_two_types().assign(effect_source="declared stance")
    actions.to_parquet(tmp_path / "tables" / "asvo_actions.parquet")
    got = asvo_reproduce.measure(tmp_path)  # no judgements recorded
    assert got["cooperation_rate_altruistic"] == 1.0 and got["cooperation_self_declared"] == 0.0

    actions.drop(columns="effect_source").to_parquet(tmp_path / "tables" / "asvo_actions.parquet")
    pd.DataFrame({"step": [1], "agent": ["a0"], "judge": ["rules"]}).to_parquet(
        tmp_path / "tables" / "asvo_judgements.parquet")
    got = asvo_reproduce.measure(tmp_path)  # the rules judge, but no effects' source
    assert got["cooperation_rate_altruistic"] == 1.0 and got["cooperation_self_declared"] == 0.0


def test_a_run_with_no_action_has_no_cooperation_figure_rather_than_failing(tmp_path):
    """A run stopped before any agent acted: its cooperation figures are not measurable (NaN)."""
    import json

    from socialsim.agents.asvo.metrics import SEPARABILITY_FILE

    (tmp_path / "tables").mkdir()
    actions_of_two_types().assign(effect_source="catalogue").iloc[:0].to_parquet(
        tmp_path / "tables" / "asvo_actions.parquet")
    (tmp_path / SEPARABILITY_FILE).write_text(json.dumps({"silhouette": None}))
    got = asvo_reproduce.measure(tmp_path)
    assert math.isnan(got["cooperation_self_declared"]) and math.isnan(got["silhouette"])
    assert all(math.isnan(got[f"cooperation_rate_{svo}"]) for svo in ("altruistic", "prosocial", "competitive"))


def test_without_the_runs_figures_measure_computes_them_and_their_chance_level(tmp_path):
    from socialsim.agents.asvo.metrics import action_separability

    (tmp_path / "tables").mkdir()
    actions_of_two_types().to_parquet(tmp_path / "tables" / "asvo_actions.parquet")
    got = asvo_reproduce.measure(tmp_path)
    sep = action_separability(actions_of_two_types())
    assert (got["silhouette"], got["separation_ratio"], got["silhouette_shuffled"]) == (
        sep.silhouette, sep.ratio, sep.shuffled_silhouette)
    assert (got["svo_words_masked"], got["agent_shuffle_p"]) == (float(sep.masked), sep.group_shuffle_p)
    assert got["silhouette"] > got["silhouette_shuffled"]  # two clear clusters: above chance


def test_an_arm_as_separable_as_the_other_or_as_chance_is_not_more_separable():
    from socialsim.model.reproduce import check_findings

    protocol = asvo_reproduce.protocol(judge=None)
    wide = protocol.paper.pivot(index="label", columns="metric", values="paper").reset_index()
    wide["silhouette"], wide["separation_ratio"], wide["seed"] = 0.2, 1.5, 1  # both arms alike
    wide["silhouette_shuffled"] = wide["label"].map(lambda s: 0.2 if s.endswith("/ ASVO") else -0.5)
    checked = check_findings(protocol, wide)
    relative = checked[checked["finding"].str.contains(asvo_reproduce.RELATIVE, regex=False)]
    assert set(relative["verdict"]) == {"does not hold"}  # a tie is no difference; the ASVO arm's own chance is 0.2
