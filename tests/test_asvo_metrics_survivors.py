"""The ASVO measurement tables on hand-built frames, with figures computed by hand: the cooperation
table (per agent and per SVO, in the paper's SVO order) and the judges' table. Written after a
mutation run (mutmut on asvo/metrics.py) showed these tables were only seen through whole runs."""

import pandas as pd
import pytest

from socialsim.agents.asvo.metrics import cooperation_table, judge_table, judges_averaged

COLUMNS = ["actions", "Cooperation", "QuasiCooperation", "Neutral", "QuasiCompetition", "Competition",
           "cooperation_rate", "competition_index"]


def actions(rows):
    return pd.DataFrame(rows, columns=["agent", "svo", "label"])


def test_cooperation_table_counts_labels_and_weighs_quasi_labels_by_half():
    frame = actions([
        ("Ann", "prosocial", "Cooperation"), ("Ann", "prosocial", "QuasiCooperation"),
        ("Ann", "prosocial", "Competition"), ("Ann", "prosocial", "unlabelled"),
        ("Bob", "competitive", "QuasiCompetition"), ("Bob", "competitive", "Neutral"),
    ])
    table = cooperation_table(frame).set_index("agent")
    assert list(table.columns) == COLUMNS
    ann, bob = table.loc["Ann"], table.loc["Bob"]
    assert ann["actions"] == 3  # the unlabelled action is not counted
    assert (ann["Cooperation"], ann["QuasiCooperation"], ann["Neutral"], ann["Competition"]) == (1, 1, 0, 1)
    assert ann["cooperation_rate"] == pytest.approx((1 + 0.5) / 3)
    assert ann["competition_index"] == pytest.approx(1 / 3)
    assert bob["actions"] == 2 and bob["Cooperation"] == 0  # a label nobody used is a zero count
    assert bob["cooperation_rate"] == 0 and bob["competition_index"] == pytest.approx(0.25)


def test_cooperation_table_by_svo_follows_the_papers_svo_order():
    frame = actions([
        ("Cid", "competitive", "Competition"), ("Ann", "altruistic", "Cooperation"),
        ("Dee", "individualistic", "Neutral"), ("Bob", "prosocial", "QuasiCooperation"),
    ])
    table = cooperation_table(frame, by="svo")
    assert list(table["svo"]) == ["altruistic", "prosocial", "individualistic", "competitive"]
    assert list(table["actions"]) == [1, 1, 1, 1]
    assert list(table["cooperation_rate"]) == [1.0, 0.5, 0.0, 0.0]
    by_agent = cooperation_table(frame)  # per agent: in the crosstab's (name) order
    assert list(by_agent["agent"]) == ["Ann", "Bob", "Cid", "Dee"]


def test_a_label_nobody_used_counts_zero_and_rates_stay_defined():
    table = cooperation_table(actions([("Ann", "individualistic", "Neutral"), ("Bob", "prosocial", "Neutral")]))
    assert (table["Cooperation"] == 0).all() and (table["Competition"] == 0).all()
    assert list(table["cooperation_rate"]) == [0.0, 0.0] and list(table["competition_index"]) == [0.0, 0.0]


@pytest.mark.parametrize("by", ["agent", "svo"])
def test_no_labelled_action_gives_an_empty_table_with_the_same_columns(by):
    table = cooperation_table(actions([("Ann", "prosocial", "")]), by=by)
    assert table.empty and list(table.columns) == [by, *COLUMNS]


def judgements(rows):
    return pd.DataFrame(rows, columns=["step", "agent", "svo", "judge", "status", "naturalness", "human_likeness"])


def test_judge_table_leaves_fallbacks_out_and_gives_mean_and_spread_per_svo_and_judge():
    frame = judgements([
        (1, "Ann", "prosocial", "j1", "ok", 6, 5), (2, "Ann", "prosocial", "j1", "ok", 4, 3),
        (3, "Ann", "prosocial", "j1", "fallback", 1, 1), (1, "Bob", "competitive", "j1", "ok", 2, 2),
    ])
    table = judge_table(frame)
    assert list(table.columns) == ["svo", "judge", "n", "naturalness", "naturalness_sd", "human_likeness",
                                   "human_likeness_sd"]
    table = table.set_index("svo")
    assert table.loc["prosocial", "human_likeness_sd"] == pytest.approx(2 ** 0.5)
    assert table.loc["prosocial", "n"] == 2 and table.loc["prosocial", "naturalness"] == 5.0
    assert table.loc["prosocial", "naturalness_sd"] == pytest.approx(2 ** 0.5)
    assert table.loc["competitive", "human_likeness"] == 2.0


def test_judge_table_of_only_fallbacks_is_empty_with_its_columns():
    table = judge_table(judgements([(1, "Ann", "prosocial", "j1", "fallback", 1, 1)]))
    assert table.empty and list(table.columns) == ["svo", "judge", "n", "naturalness", "naturalness_sd",
                                                   "human_likeness", "human_likeness_sd"]


def test_several_judges_are_averaged_per_action_first():
    frame = judgements([
        (1, "Ann", "prosocial", "j1", "ok", 6, 6), (1, "Ann", "prosocial", "j2", "ok", 2, 4),
        (2, "Ann", "prosocial", "j1", "ok", 7, 7), (2, "Ann", "prosocial", "j2", "fallback", 1, 1),
    ])
    table = judges_averaged(frame)
    assert list(table.columns) == ["svo", "naturalness", "human_likeness"]
    table = table.set_index("svo")
    assert table.loc["prosocial", "naturalness"] == pytest.approx((4 + 7) / 2)  # not (6 + 2 + 7) / 3


def test_judges_agreement_is_per_pair_over_actions_both_scored_and_zero_at_chance():
    from socialsim.agents.asvo.metrics import judge_agreement

    scores = [(1, 5), (2, 4), (3, 3), (4, 2), (5, 1)]  # (naturalness, human_likeness) per step, judge j1
    rows = [(k, "Ann", "prosocial", "j1", "ok", n, h) for k, (n, h) in enumerate(scores, 1)]
    rows += [(k, "Ann", "prosocial", "j2", "ok", n, 6 - h) for k, (n, h) in enumerate(scores, 1)]  # agrees, reverses
    rows += [(6, "Ann", "prosocial", "j1", "ok", 1, 1), (6, "Ann", "prosocial", "j2", "fallback", 5, 5)]  # one scored
    table = judge_agreement(judgements(rows)).set_index("score")
    assert table["n"].tolist() == [5, 5] and set(table["judge_a"]) == {"j1"} and set(table["judge_b"]) == {"j2"}
    assert table.loc["naturalness", "exact"] == 1.0 and table.loc["naturalness", "kappa"] == pytest.approx(1.0)
    assert table.loc["human_likeness", "exact"] == pytest.approx(0.2)  # only the middle score is equal
    assert table.loc["human_likeness", "kappa"] == pytest.approx(-1.0)
    alone = judgements([r for r in rows if r[3] == "j1"])
    assert judge_agreement(alone).empty  # one judge: nothing to agree on
    same_step = judgements([(1, name, "prosocial", j, "ok", v, v) for name, v in (("Ann", 2), ("Bob", 4))
                            for j in ("j1", "j2")])  # two agents' actions in one step: paired by agent
    assert judge_agreement(same_step)[["n", "exact"]].values.tolist() == [[2, 1.0], [2, 1.0]]
    constant = judgements([(k, "Ann", "prosocial", j, "ok", 3, 3) for k in (1, 2) for j in ("j1", "j2")])
    assert judge_agreement(constant)["kappa"].isna().all() and (judge_agreement(constant)["exact"] == 1.0).all()


@pytest.mark.parametrize(("name", "setting"), [("school-meso", "School"), ("Workplace-macro", "Workplace"),
                                               ("family-micro", "Family"), ("hobbs-cafe", None), ("meso", None)])
def test_the_papers_setting_is_read_from_the_scenario_name(name, setting):
    from socialsim.agents.asvo.metrics import setting_of

    assert setting_of(name) == setting


def test_table_2_puts_this_runs_row_and_its_chance_level_under_the_papers_rows():
    from socialsim.agents.asvo.metrics import table_2
    from socialsim.metrics.separability import Separability

    measured = Separability(None, [], 0.31, 1.72, shuffled_silhouette=-0.01)
    lines = table_2("School", True, measured).splitlines()
    assert lines[:3] == ["| setting | silhouette | separation ratio |", "|---|---|---|",
                         "| w/o ASVO@School (paper) | -0.02 | 1.08 |"]
    assert "| ASVO@School (paper) | 0.12 | 1.64 |" in lines
    assert lines[-2:] == ["| **ASVO@School (this run)** | 0.31 | 1.72 |",
                          "| ASVO@School (this run), SVO labels shuffled (chance) | -0.01 | |"]
    unmeasured = Separability(None, [], float("nan"), float("nan"))
    assert table_2(None, False, unmeasured).splitlines()[-1] == (
        "| **w/o ASVO@this scenario (this run)** | not measurable | not measurable |")


def test_action_separability_drops_empty_and_missing_actions_and_passes_model_seed_and_gateway_on(monkeypatch):
    from socialsim.agents.asvo import metrics
    from socialsim.agents.asvo.svo import SVO_WORDS

    seen = {}

    def fake(texts, labels, embedding_model, seed, gateway, mask, groups):
        seen.update(texts=texts, labels=labels, model=embedding_model, seed=seed, gateway=gateway, mask=mask)
        return "result"

    monkeypatch.setattr(metrics, "separability", fake)
    frame = pd.DataFrame({"action": ["help Bob", "", "x", None], "svo": ["prosocial", "altruistic", "competitive",
                                                                          "individualistic"]})
    assert metrics.action_separability(frame, "openai/emb", seed=7, gateway="gw") == "result"
    assert seen == {"texts": ["help Bob", "x"], "labels": ["prosocial", "competitive"],
                    "model": "openai/emb", "seed": 7, "gateway": "gw", "mask": SVO_WORDS}
