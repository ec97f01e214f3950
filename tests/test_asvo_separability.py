"""Separability metrics (ASVO appendix D.3) on synthetic clusters whose answers are known."""

import math

import numpy as np
import pytest

from socialsim.metrics.separability import (
    PAPER_TABLE_2,
    offline_embeddings,
    separability,
    separation_ratio,
    silhouette,
)


def test_two_tight_far_apart_clusters_give_the_hand_computed_silhouette_and_ratio():
    points = np.array([[0, 0], [0, 1], [10, 0], [10, 1]], dtype=float)
    labels = ["A", "A", "B", "B"]
    b = (10 + math.sqrt(101)) / 2  # mean distance to the other cluster; within-cluster distance is 1
    assert separation_ratio(points, labels) == pytest.approx(b / 1)
    assert silhouette(points, labels) == pytest.approx(1 - 1 / b)


def test_interleaved_labels_give_a_negative_silhouette_and_a_ratio_below_one():
    points = np.array([[0, 0], [1, 0], [2, 0], [3, 0]], dtype=float)
    labels = ["A", "B", "A", "B"]
    assert separation_ratio(points, labels) == pytest.approx(1.5 / 2)
    assert silhouette(points, labels) == pytest.approx((0 - 0.5 - 0.5 + 0) / 4)


def test_undefined_cases_are_nan_not_errors():
    points = np.array([[0, 0], [1, 1], [2, 2]], dtype=float)
    assert math.isnan(silhouette(points, ["A", "A", "A"]))
    assert math.isnan(separation_ratio(points, ["A", "A", "A"]))
    assert math.isnan(separation_ratio(points, ["A", "B", "C"]))  # no within-label pair
    result = separability(["a b", "c d"], ["A", "B"])
    assert result.points is None and math.isnan(result.silhouette) and "too few" in result.note
    with pytest.raises(ValueError, match="labels"):
        separability(["a", "b"], ["A"])


def test_offline_embedding_needs_no_model_and_keeps_similar_texts_close():
    texts = ["help Bob finish the homework together", "help Amy finish the slides together",
             "challenge Bob to beat me at the race", "challenge Amy to beat me at chess"]
    vectors = offline_embeddings(texts)
    assert vectors.shape[0] == 4
    sims = vectors @ vectors.T
    assert sims[0, 1] > sims[0, 2] and sims[2, 3] > sims[2, 1]


def test_text_clusters_separate_after_tsne_and_shuffled_labels_do_not():
    cooperative = [f"help {n} with the {t} together so everyone benefits" for n, t in
                   zip(["Bob", "Amy", "Eve", "Dan", "Kim", "Lee", "Max", "Sue"],
                       ["report", "slides", "kite", "homework", "poster", "budget", "speech", "review"], strict=True)]
    competitive = [f"challenge {n} to beat them at the {t} and win" for n, t in
                   zip(["Bob", "Amy", "Eve", "Dan", "Kim", "Lee", "Max", "Sue"],
                       ["race", "exam", "vote", "game", "quiz", "chess", "pitch", "match"], strict=True)]
    texts = cooperative + competitive
    labels = ["altruistic"] * 8 + ["competitive"] * 8
    clear = separability(texts, labels)
    assert clear.points.shape == (16, 2)
    assert clear.silhouette > 0.5 and clear.ratio > 1.5
    mixed = separability(texts, ["altruistic", "competitive"] * 8)
    assert mixed.silhouette < 0.05 and mixed.ratio < 1.1


def test_paper_table_2_is_as_published():
    assert PAPER_TABLE_2[("School", True)] == (0.12, 1.64)
    assert PAPER_TABLE_2[("Workplace", True)] == (0.21, 1.67)
    assert PAPER_TABLE_2[("Family", True)] == (0.07, 1.49)
    assert PAPER_TABLE_2[("Family", False)] == (-0.074, 1.01)


def _two_clusters():
    helpers = [f"help {n} with the {t} together" for n, t in
               zip("Bob Amy Eve Dan Kim Lee Max Sue Ann Tom".split(),
                   "report slides kite homework poster budget speech review map quiz".split(), strict=True)]
    rivals = [f"challenge {n} to beat them at the {t}" for n, t in
              zip("Bob Amy Eve Dan Kim Lee Max Sue Ann Tom".split(),
                  "race exam vote game quiz chess pitch match duel test".split(), strict=True)]
    return helpers + rivals, ["altruistic"] * 10 + ["competitive"] * 10


def test_shuffled_labels_give_about_zero_and_the_chance_row_shows_it():
    texts, labels = _two_clusters()
    result = separability(texts, labels)
    assert result.silhouette > 0.3
    assert abs(result.shuffled_silhouette) < 0.1  # the permutation baseline: chance
    shuffled = list(np.random.default_rng(5).permutation(labels))
    assert abs(separability(texts, shuffled).silhouette) < 0.15


def test_the_pipeline_never_sees_the_labels_before_the_points_exist():
    texts, labels = _two_clusters()
    a = separability(texts, labels)
    b = separability(texts, ["x", "y"] * 10)  # other labels: the very same embedding and t-SNE points
    assert np.allclose(a.points, b.points)


def test_one_shared_svo_or_identical_actions_are_not_measurable_instead_of_crashing():
    texts, labels = _two_clusters()
    one = separability(texts, ["prosocial"] * len(texts))
    assert not one.measurable and "one SVO" in one.note
    same = separability(["help Bob"] * 12, ["altruistic", "competitive"] * 6)
    assert not same.measurable and "same" in same.note


def test_the_report_survives_degenerate_runs(tmp_path, monkeypatch):
    from socialsim.agents.asvo import operations as ops
    from socialsim.agents.asvo.metrics import report_sections
    from socialsim.model.society import SocietyModel

    def always_the_same(ctx, rng):
        return ops.candidates_model(ctx.n)(activities=[ops.Activity(text="read quietly", stance="Neutral")] * ctx.n)

    monkeypatch.setattr(ops.PROPOSE_ACTIONS, "rule", always_the_same)
    for params in ({}, {"svo_assignment": "mix", "svo_mix": {"prosocial": 1.0}}):
        model = SocietyModel("school-meso", model="rules", rng=1, **params)
        for _ in range(2):
            model.step()
        text = "\n".join(report_sections(model, tmp_path))
        assert "not measurable" in text
