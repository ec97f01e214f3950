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
