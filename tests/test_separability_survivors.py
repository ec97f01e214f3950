"""The separability pipeline's pieces on hand-made inputs: the offline embedding's shape, its
robustness to inflections and its determinism; where the silhouette and the separation ratio are
defined; the chance level's seeding; embeddings from a provider without a run's gateway. Written
after a mutation run (mutmut on metrics/separability.py) showed them unpinned."""

import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from socialsim.llm.gateway import Gateway
from socialsim.metrics import separability as sep

TEXTS = ["help the new colleague", "helping a colleague move", "take the last seat first",
         "grab the best seat", "share lunch with a friend", "ignore the meeting", "finish my own report"]


def test_offline_embedding_is_unit_length_with_at_most_points_minus_one_dimensions():
    vectors = sep.offline_embeddings(TEXTS, dims=16)
    assert vectors.shape == (7, 6)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert sep.offline_embeddings(TEXTS, dims=3).shape == (7, 3)
    assert sep.offline_embeddings(TEXTS[:3], dims=16).shape == (3, 2)  # two components: still reduced


def test_offline_embedding_of_two_texts_is_their_tfidf_rows_unreduced():
    vectors = sep.offline_embeddings(["help a colleague", "grab a seat"])
    assert vectors.shape[0] == 2 and vectors.shape[1] > 10  # character n-grams, not a 1-D projection
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)


def test_offline_embedding_sees_inflections_of_a_word_as_close():
    vectors = sep.offline_embeddings(["help", "helping", "grab"], dims=16)
    assert vectors.shape == (3, 2)
    raw = sep.offline_embeddings(["help", "helping"])  # unreduced: cosine of the n-gram profiles
    assert float(raw[0] @ raw[1]) > 0.3  # words would share nothing; within-word 3-5-grams do


def test_offline_embedding_and_tsne_are_deterministic_for_a_seed():
    a, b = sep.offline_embeddings(TEXTS, seed=3), sep.offline_embeddings(TEXTS, seed=3)
    assert np.allclose(np.abs(a), np.abs(b))
    points = sep.tsne_2d(a, seed=5)
    assert points.shape == (7, 2) and np.array_equal(points, sep.tsne_2d(a, seed=5))


def test_silhouette_is_defined_from_two_labels_up_to_one_fewer_label_than_points():
    points = np.array([[0.0, 0.0], [0.0, 0.1], [5.0, 5.0]])
    assert sep.silhouette(points, ["a", "a", "b"]) == pytest.approx(sep.silhouette_score(points, ["a", "a", "b"]))
    assert math.isnan(sep.silhouette(points[:2], ["a", "b"]))  # one point per label
    assert math.isnan(sep.silhouette(points, ["a", "a", "a"]))  # one label


def test_separation_ratio_is_undefined_without_pairs_on_both_sides_or_spread_within():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no empty means, no division by zero
        points = np.array([[0.0, 0.0], [1.0, 0.0], [4.0, 0.0]])
        assert math.isnan(sep.separation_ratio(points, ["a", "b", "c"]))  # no same-label pair
        assert math.isnan(sep.separation_ratio(points, ["a", "a", "a"]))  # no different-label pair
        twins = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 0.0], [3.0, 0.0]])
        assert math.isnan(sep.separation_ratio(twins, ["a", "a", "b", "b"]))  # no spread within a label
        assert sep.separation_ratio(points, ["a", "a", "b"]) == pytest.approx(3.5 / 1.0)


def test_the_chance_level_is_seeded_and_undefined_for_one_label():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(12, 2))
    labels = ["a", "b", "c"] * 4
    first = sep.permutation_silhouette(points, labels, seed=4, n=5)
    assert first == sep.permutation_silhouette(points, labels, seed=4, n=5)
    assert first != sep.permutation_silhouette(points, labels, seed=5, n=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(sep.permutation_silhouette(points, ["a"] * 12, n=3))


def test_provider_embeddings_without_a_gateway_use_one_on_the_model_and_give_floats(monkeypatch):
    calls = []

    async def fake(self, model, texts):
        calls.append((model, self.routes.models()))
        return SimpleNamespace(data=[{"embedding": [1, 0]}, {"embedding": [0, 2]}],
                               usage=SimpleNamespace(prompt_tokens=4))

    monkeypatch.setattr(Gateway, "_aembedding", fake)
    vectors = sep.provider_embeddings(["a", "b"], "openai/emb-model")
    assert vectors.dtype == np.float64 and vectors.tolist() == [[1.0, 0.0], [0.0, 2.0]]
    assert calls[0][0] == "openai/emb-model" and "openai/emb-model" in calls[0][1]


def test_degenerate_inputs_are_not_measurable_with_the_reason_and_five_points_are_enough():
    five = ["help Bob", "grab a seat", "share lunch", "ignore Ann", "finish work"]
    labels = ["a", "b", "a", "b", "a"]
    few = sep.separability(five[:4], labels[:4])
    assert few.points is None and few.labels == labels[:4] and math.isnan(few.ratio)
    assert few.note == "too few actions (4 < 5)"
    one = sep.separability(five, ["a"] * 5)
    assert math.isnan(one.ratio) and one.note == "not measurable: only one SVO type"
    same = sep.separability(["help Bob"] * 5, labels)
    assert math.isnan(same.ratio) and same.note == "not measurable: every action text is the same"
    two_texts = sep.separability(["help Bob", "grab a seat"] * 2 + ["help Bob"], labels)
    assert two_texts.points is not None and two_texts.note == ""  # two distinct texts can be measured
    measured = sep.separability(five, labels)
    assert measured.points.shape == (5, 2) and measured.note == "" and measured.embedding == sep.OFFLINE_EMBEDDING
    assert measured.measurable


def test_separability_is_seeded_with_zero_by_default():
    texts = [f"{verb} {noun}" for verb in ("help", "grab", "share") for noun in ("Bob", "a seat", "lunch")]
    labels = ["a", "b", "c"] * 3
    assert np.array_equal(sep.separability(texts, labels).points, sep.separability(texts, labels, seed=0).points)


def test_the_chance_level_of_a_run_is_seeded_too():
    texts = [f"{verb} {noun}" for verb in ("help", "grab", "share") for noun in ("Bob", "a seat", "lunch")]
    labels = ["a", "b", "c"] * 3
    first, again = sep.separability(texts, labels, seed=3), sep.separability(texts, labels, seed=3)
    assert first.shuffled_silhouette == again.shuffled_silhouette
    assert first.shuffled_silhouette == sep.permutation_silhouette(first.points, labels, seed=3)


def test_a_failing_embedding_provider_is_logged_with_the_model_and_the_error(caplog):
    from socialsim.llm.gateway import ProviderError

    class Down:
        def embed(self, model, texts, purpose):
            raise ProviderError("503 from the provider")

    texts = ["help Bob", "grab a seat", "share lunch", "ignore Ann", "finish work"]
    with caplog.at_level("WARNING"):
        result = sep.separability(texts, ["a", "b", "a", "b", "a"], "openai/emb-model", gateway=Down())
    assert result.embedding == sep.OFFLINE_EMBEDDING and "openai/emb-model failed" in result.note
    assert [r.getMessage() for r in caplog.records if r.name == sep.log.name] == [
        "embeddings from openai/emb-model failed (503 from the provider); the offline embedding is used"]
