"""The phenomenal field's edges: memory activation's exact score (present, retention, emotional
intensity, ties to the older memory), compression's timing and bookkeeping, the key frame of a
segment, custom similarity weights reaching every step, and blending's one-to-one matching of
identical rows. Written after mutmut on ``agents/itcmas/phenomenal.py`` left them unpinned."""

import math
import random

import numpy as np
import pytest

from socialsim.agents.itcmas import phenomenal as ph

W = ph.SimWeights(gamma=0.0, theta=1.0, phi=0.0, a=0.1, pos=0.9)  # bearings count, descriptions little


def frame(*keys, theta=0.0, step=0, area="", pad=(0.0, 0.0, 0.0)):
    return ph.PhenomenalField.from_rows([(k, (theta, 0.0, 1.0)) for k in keys], step=step, area=area, pad=pad)


def test_embed_is_a_copy_of_the_cached_unit_vector():
    v = ph.embed("a chair")
    assert v.shape == (ph.EMBED_DIM,) and math.isclose(float(np.linalg.norm(v)), 1.0)
    v[:] = 0
    assert math.isclose(float(np.linalg.norm(ph.embed("a chair"))), 1.0)  # the cache was not touched
    assert np.array_equal(ph.embed("a chair", 16), ph._embed("a chair", 16))


def test_an_empty_field_has_no_rows_and_keeps_its_meta():
    empty = ph.empty_field(step=4, area="hall")
    assert len(empty) == 0 and empty.vectors.shape == (0, ph.EMBED_DIM) and empty.positions.shape == (0, 3)
    assert (empty.step, empty.area) == (4, "hall")


def test_a_predicted_field_keeps_its_meta_and_juxtaposition_stacks_rows():
    predicted = ph.field_from_text("You are in the hall. Looking around you, you see a chair.", {}, step=3, area="x")
    assert (predicted.step, predicted.area, predicted.keys) == (3, "x", ["You are in the hall", "a chair"])
    both = ph.juxtapose(frame("a chair"), frame("a bed", theta=1.0))
    assert both.keys == ["a chair", "a bed"] and both.vectors.shape == (2, ph.EMBED_DIM)
    assert np.array_equal(both.vectors[1], frame("a bed").vectors[0]) and both.positions[1][0] == 1.0


def test_activation_scores_the_present_and_the_retention_weighted_by_intensity():
    c = ph.Consciousness()
    memories = [frame("a chair", "a bed", pad=(0.6, 0.0, 0.0)), frame("a table", theta=2.0, pad=(0.2, 0.4, 0.0))]
    c.long_term += memories
    present = frame("a chair")
    got = c.activate(present, k=2, w=W)
    expected = sorted(((ph.field_sim(present, m, W) * (0.5 + 0.5 * m.intensity), m) for m in memories),
                      key=lambda t: -t[0])
    assert [(pytest.approx(s), m) for s, m in expected] == got
    c.retain(frame("a table", theta=2.0))
    got = c.activate(present, k=2, w=W)
    scores = {id(m): (0.5 * ph.field_sim(present, m, W) + 0.5 * ph.field_sim(c.retention[0], m, W))
              * (0.5 + 0.5 * m.intensity) for m in memories}
    assert [id(m) for _, m in got] == sorted(scores, key=lambda i: -scores[i])
    assert [s for s, _ in got] == pytest.approx(sorted(scores.values(), reverse=True))


def test_equal_memories_activate_the_older_first():
    c = ph.Consciousness()
    first, second = frame("a chair"), frame("a chair")
    c.long_term += [first, second]
    assert [m for _, m in c.activate(frame("a chair"), k=2)] == [first, second]


def test_compression_waits_for_two_segments_and_replaces_the_oldest_by_one_memory():
    c = ph.Consciousness()
    rng = random.Random(0)
    c.long_term += [frame(f"thing {i}", step=i) for i in range(3)]
    assert not c.compress(2, 0.5, 0.0, rng)  # 3 raw memories: not yet 2 segments of 2
    c.long_term.append(frame("thing 3", step=3))
    assert c.compress(2, 0.5, 0.0, rng)
    assert len(c.long_term) == 3 and c.raw_since == 1 and c.long_term[0].frames == 2
    assert not c.compress(2, 0.5, 0.0, rng)  # two raw memories left
    assert not ph.Consciousness(long_term=[frame("x")] * 4).compress(1, 0.5, 0.0, rng)  # a segment needs 2
    three = ph.Consciousness(long_term=[frame(f"t{i}") for i in range(6)])
    assert three.compress(3, 0.5, 0.0, rng) and len(three.long_term) == 4


def test_a_segment_compresses_around_its_first_most_aroused_frame():
    calm, excited = (0.0, 0.2, 0.0), (0.0, 0.9, 0.0)
    segment = [frame("a chair", step=1, area="A", pad=calm), frame("a chair", step=2, area="B", pad=excited),
               frame("a chair", step=3, area="C", pad=excited)]
    merged = ph.compress_segment(segment, 0.5, 0.0, random.Random(0))
    assert (merged.area, merged.step, merged.frames, merged.pad) == ("B", 3, 3, excited)
    tie = ph.compress_segment([frame("a chair", area="A"), frame("a chair", area="B")], 0.5, 0.0, random.Random(0))
    assert tie.area == "A"


def test_custom_similarity_weights_reach_blending_and_compression():
    # one object seen at opposite bearings: alike under the default weights, not under W
    here, there = frame("a chair", theta=0.0), frame("a chair", theta=math.pi)
    assert len(ph.blend(here, there, 0.8, 0.0, random.Random(0))) == 1
    assert len(ph.blend(here, there, 0.8, 0.0, random.Random(0), W)) == 0
    assert len(ph.compress_segment([here, there], 0.8, 0.0, random.Random(0), W)) == 0
    c = ph.Consciousness(long_term=[here, there, frame("x"), frame("y")])
    c.compress(2, 0.8, 0.0, random.Random(0), W)
    assert len(c.long_term[0]) == 0


def test_an_identical_row_is_averaged_with_only_one_partner():
    twice = frame("a chair", "a chair")
    once = frame("a chair", theta=0.2)
    blended = ph.blend(twice, once, 0.5, 0.0, random.Random(0))
    assert blended.keys == ["a chair"] and blended.positions[0][0] == pytest.approx(0.1)


def test_bearings_wrap_round_and_elevations_compare_by_difference():
    quarter = ph.spherical_sim(np.array([[0.0, 0.0, 1.0]]), np.array([[0.5 * math.pi, 0.0, 1.0]]))
    assert ph.spherical_sim(np.array([[0.0, 0.0, 1.0]]), np.array([[2.5 * math.pi, 0.0, 1.0]])) == pytest.approx(quarter)
    assert ph.spherical_sim(np.array([[0.0, 0.5, 1.0]]), np.array([[0.0, 0.5, 1.0]]))[0, 0] == pytest.approx(1.0)


def test_row_similarity_is_the_weighted_sum_of_description_and_place_with_the_given_weights():
    fx, fy = frame("a chair", theta=0.0), frame("a chair by the bed", theta=1.0)
    expected = W.a * ph.cosine(fx, fy) + W.pos * ph.spherical_sim(fx.positions, fy.positions, W)
    assert ph.row_sim(fx, fy, W) == pytest.approx(expected)
    assert ph.field_sim(fx, fy, W) == pytest.approx(float(expected.max()))
    assert ph.diff(fx, fy, W) == pytest.approx(1 - float(expected.max()))
    assert ph.diff(fx, fx) == 0.0
    empty = ph.empty_field()
    assert ph.row_sim(empty, fx).shape == (0, 1) and ph.cosine(fx, empty).shape == (1, 0)


def test_cosine_ignores_the_length_of_averaged_vectors():
    v = np.zeros((1, ph.EMBED_DIM))
    v[0, 0] = 1.0
    long = ph.PhenomenalField(["x"], 2 * v, np.zeros((1, 3)))
    short = ph.PhenomenalField(["x"], 0.5 * v, np.zeros((1, 3)))
    assert ph.cosine(long, short)[0, 0] == pytest.approx(1.0)


@pytest.mark.parametrize(("text", "phrases"), [
    ("", []), (None, []),
    ("You are in the hall. . Looking around you, you see a chair.", ["You are in the hall", "a chair"]),
    ("You are tired. Looking around you, you see a chair.", ["a chair"]),
    ("You are in the hall. A dog barks.", ["You are in the hall", "A dog barks"]),
    ("Looking around you, you see a TV and an XBOX.", ["a TV", "an XBOX"]),
])
def test_observation_phrases_skip_empty_sentences_and_ones_own_status(text, phrases):
    assert ph.observation_phrases(text) == phrases


def test_retention_keeps_its_size_and_activation_one_memory_by_default():
    c = ph.Consciousness(retention_size=3)
    for i in range(4):
        c.retain(frame(f"thing {i}"))
    assert [f.keys[0] for f in c.retention] == ["thing 1", "thing 2", "thing 3"]
    c.long_term += [frame("a chair"), frame("a bed")]
    assert len(c.activate(frame("a chair"))) == 1


def test_compression_replaces_exactly_the_oldest_segment_when_more_than_two_have_piled_up():
    c = ph.Consciousness(long_term=[frame(f"t{i}", step=i) for i in range(5)])
    assert c.compress(2, 0.5, 0.0, random.Random(0))
    assert len(c.long_term) == 4 and [m.step for m in c.long_term[1:]] == [2, 3, 4]
