"""ITCMA-S + LTRHA equations with hand-computed values (spec eq. 3, 4, 10-19), Algorithm 1 and
memory compression (eq. 8-9)."""

import math
import random

import numpy as np
import pytest

from socialsim.agents import emotion as em
from socialsim.agents.itcmas import ltrha
from socialsim.agents.itcmas.phenomenal import (
    Consciousness,
    PhenomenalField,
    SimWeights,
    blend,
    compress_segment,
    field_from_text,
    field_sim,
    observation_phrases,
    row_sim,
    spherical_sim,
)


def field(rows, pad=(0.0, 0.0, 0.0), step=0):
    """A field from explicit (key, vector, (θ, φ, γ)) rows."""
    keys = [k for k, _, _ in rows]
    vectors = np.array([v for _, v, _ in rows], dtype=float)
    positions = np.array([p for _, _, p in rows], dtype=float)
    return PhenomenalField(keys, vectors, positions, step=step, pad=pad)


# --- eq. 3 -------------------------------------------------------------------------------------------
def test_spherical_sim_equal_weights():
    # 1 − (1/3)·((1/3)·tanh(1) + (1/3)·(π/2)/π + 0) = 1 − (0.761594 + 0.5)/9
    sim = spherical_sim(np.array([0.0, 0.0, 0.0]), np.array([math.pi / 2, 0.0, 1.0]))
    assert sim[0, 0] == pytest.approx(0.8598228716)


def test_spherical_sim_wraps_bearing_and_uses_phi():
    w = SimWeights(gamma=0.5, theta=0.25, phi=0.25)
    # |Δθ| = 3π/2 is π/2 the short way (0.5 after /π); |Δφ| = π gives 0.5 after /2π; tanh(2) = 0.964028
    # 1 − (0.5·0.964028 + 0.25·0.5 + 0.25·0.5)/3 = 0.755995
    sim = spherical_sim(np.array([0.0, 0.0, 2.0]), np.array([3 * math.pi / 2, math.pi, 0.0]), w)
    assert sim[0, 0] == pytest.approx(0.7559954033)


def test_spherical_sim_identical_positions_is_one():
    assert spherical_sim(np.array([1.0, 0.0, 3.0]), np.array([1.0, 0.0, 3.0]))[0, 0] == pytest.approx(1.0)


# --- eq. 4 -------------------------------------------------------------------------------------------
def test_field_sim_best_match_over_larger_field():
    o = (0.0, 0.0, 0.0)
    fx = field([("x1", [1, 0], o), ("x2", [0, 1], o)])
    fy = field([("y1", [1, 0], o)])
    # s(x1,y1) = 0.5·1 + 0.5·1 = 1; s(x2,y1) = 0.5·0 + 0.5·1 = 0.5
    assert row_sim(fx, fy) == pytest.approx(np.array([[1.0], [0.5]]))
    assert field_sim(fx, fy) == pytest.approx((1.0 + 0.5) / 2)
    assert field_sim(fy, fx) == pytest.approx(1.0 / 2)  # its one row's best match, over max(1, 2)


def test_field_sim_of_empty_fields():
    o = (0.0, 0.0, 0.0)
    empty = field([])
    assert field_sim(empty, empty) == 1.0
    assert field_sim(field([("x", [1, 0], o)]), PhenomenalField([], np.zeros((0, 2)), np.zeros((0, 3)))) == 0.0


# --- Algorithm 1 ---------------------------------------------------------------------------------------
HERE = (0.0, 0.0, 0.0)
FX = [("x1", [1, 0], HERE), ("x2", [0, 1], HERE), ("x3", [-1, 0], HERE)]
FY = [("y1", [3, 0], HERE), ("y2", [0.28, 0.96], HERE), ("y3", [0, -1], HERE)]
# s(x1,y1) = 1 (same direction, same place: identical); s(x2,y2) = 0.5·0.96 + 0.5 = 0.98 ≥ T = 0.8;
# x3 and y3 match nothing (best s = 0.5).


def test_blend_averages_identical_rows_and_keeps_both_matched_rows():
    z = blend(field(FX), field(FY), threshold=0.8, rate=0.0, rng=random.Random(0))
    assert z.keys == ["x1", "x2", "y2"]
    assert z.vectors[0] == pytest.approx([2.0, 0.0])  # the average of (1, 0) and (3, 0): one row
    assert z.vectors[1] == pytest.approx([0.0, 1.0])
    assert z.vectors[2] == pytest.approx([0.28, 0.96])


def test_blend_keeps_unmatched_rows_with_probability_r():
    # Random(1) draws 0.134 (< 0.5: x3 kept) then 0.847 (≥ 0.5: y3 dropped)
    z = blend(field(FX), field(FY), threshold=0.8, rate=0.5, rng=random.Random(1))
    assert z.keys == ["x1", "x2", "y2", "x3"]
    assert blend(field(FX), field(FY), threshold=0.8, rate=1.0, rng=random.Random(1)).keys == \
        ["x1", "x2", "y2", "x3", "y3"]


def test_blend_below_threshold_matches_nothing():
    z = blend(field(FX), field(FY), threshold=0.99, rate=0.0, rng=random.Random(0))
    assert z.keys == ["x1"]  # only the identical pair (s = 1) passes T = 0.99


# --- eq. 8-9: compression ---------------------------------------------------------------------------------
def room_a(k, arousal):
    """A frame in one room: the same table, bed and book seen from a shifting place; the most
    arousing moment is when LL is there too."""
    rows = [("the table 1", (0.1 * k, 0.0, 2.0)), ("the bed 1", (1.0, 0.0, 3.0 + 0.1 * k)),
            ("the book 3 placed on the table 1", (0.5, 0.0, 2.0))]
    if arousal > 0.5:
        rows.append(("a person named LL (who is reading)", (-1.0, 0.0, 1.0)))
    return PhenomenalField.from_rows(rows, step=k, pad=(0.5, arousal, 0.0))


def room_b(k):
    rows = [("a door to Outside", (2.0, 0.0, 4.0)), (f"the chair {k}", (-1.0, 0.0, 1.0)),
            ("the foodshelf 5", (3.0, 0.0, 5.0))]
    return PhenomenalField.from_rows(rows, step=k, pad=(0.5, 0.1, 0.0))


def test_blend_averages_the_position_of_the_same_object():
    fx = field([("the table 1", [1, 0], (0.0, 0.0, 2.0))])
    fy = field([("the table 1", [1, 0], (0.2, 0.0, 4.0))])
    z = blend(fx, fy, threshold=0.8, rate=0.0, rng=random.Random(0))
    assert z.keys == ["the table 1"]
    assert z.positions[0] == pytest.approx([0.1, 0.0, 3.0])


def test_compression_starts_from_the_highest_arousal_frame():
    segment = [room_a(1, 0.2), room_a(2, 0.9), room_a(3, 0.1)]
    blended = compress_segment(segment, threshold=0.8, rate=0.0, rng=random.Random(0))
    assert blended.pad == (0.5, 0.9, 0.0)  # MBlend_0 = f_key
    # the key frame's rows in its order; LL, seen only then, matches nothing and with r = 0 is dropped
    assert blended.keys == segment[1].keys[:3]
    assert blended.positions[0] == pytest.approx([0.225, 0.0, 2.0])  # table θ: ((0.2 + 0.1)/2 + 0.3)/2
    assert len(blended) == 3  # the same objects were averaged, not piled up
    assert blended.frames == 3


def test_compression_lowers_memory_count_and_activation_finds_the_key_frame():
    memory = Consciousness(retention_size=1)
    frames = [room_a(k, 0.9 if k == 3 else 0.1) for k in range(5)] + [room_b(k) for k in range(5, 10)]
    for f in frames:
        memory.store(f)
    assert memory.compress(5, threshold=0.8, rate=0.3, rng=random.Random(4))
    assert len(memory.long_term) == 6  # 5 raw frames became 1 memory; the newest 5 stay raw
    assert memory.long_term[0].frames == 5
    assert memory.long_term[0].pad == frames[3].pad
    assert not memory.compress(5, threshold=0.8, rate=0.3, rng=random.Random(4))  # only 5 raw left
    (score, found), = memory.activate(frames[3], k=1)
    assert found is memory.long_term[0]
    assert set(frames[0].keys) <= set(found.keys)  # the room's objects, blended


def test_activation_is_weighted_by_emotional_intensity():
    memory = Consciousness()
    calm, intense = room_a(1, 0.0), room_a(1, 0.4)
    memory.store(calm)
    memory.store(intense)
    assert memory.activate(room_a(1, 0.0), k=1)[0][1] is intense
    assert memory.activate(room_a(1, 0.0), k=2)[1][1] is calm  # same content: mood congruence decides


# --- observation text -> field -----------------------------------------------------------------------------
def test_observation_phrases_follow_the_irollan_form():
    text = ("You are in LL's Home. Looking around you, you see a person named WM (who is moving), a door to "
            "Outside, the table 2, and the book 3 placed on the table 2. You are holding the food 5 in the "
            "clean damp status. You are moving.")
    assert observation_phrases(text) == ["You are in LL's Home", "a person named WM (who is moving)",
                                         "a door to Outside", "the table 2", "the book 3 placed on the table 2",
                                         "holding the food 5 in the clean damp status"]
    f = field_from_text(text, {"the table 2": (0.5, 0.0, 3.0)})
    assert tuple(f.positions[3]) == (0.5, 0.0, 3.0)
    assert len(f) == 6


# --- eq. 10-15 ------------------------------------------------------------------------------------------------
def test_pleasure_eq10():
    assert em.pleasure(1.0, 0.5) == pytest.approx(math.tanh(1) - math.tanh(0.5))
    assert em.pleasure(1.0, 0.5) == pytest.approx(0.2994769987)


def test_arousal_eq11_recency_weights():
    # t − 1 = 3 retained frames: weights 2n/(4·3) = 1/6, 2/6, 3/6 -> (0.2 + 0.8 + 1.8)/6 = 0.4667
    assert em.arousal([0.2, 0.4, 0.6]) == pytest.approx(0.4355021139)
    assert em.arousal([]) == 0.0
    assert em.arousal([0.6, 0.2]) < em.arousal([0.2, 0.6])  # the recent change weighs more


def test_dominance_eq12():
    assert em.dominance(0.5) == pytest.approx(0.4621171573)


def test_driver_eq13_to_15():
    w = em.EmotionWeights(P=0.4, A=0.3, D=0.3)
    # 0.4·0.8 + 0.3·0.1 + 0.3·(1 − |0.6 − 0.2|) = 0.32 + 0.03 + 0.18
    assert em.d_bias(0.8, 0.6, 0.2, 0.1, w) == pytest.approx(0.53)
    assert em.need(0.53, 0.13) == pytest.approx(0.2)
    assert em.next_driver(1.5, 0.53, 0.13) == pytest.approx(1.5 + 0.2 * 0.53)
    assert em.base_driver(1.0, 0.8, 0.6, 0.1, w) == pytest.approx(1.53)  # base ITCMA: d + ω·PAD


def test_emotion_state_settles_when_nothing_changes():
    state = em.EmotionState(driver=1.0)
    state.gain(2.0)
    state.update([0.1], 0.0)
    state.update([0.1], 0.0)
    first = state.driver
    state.update([0.1], 0.0)  # the same d_bias again: Ne = 0, the driver stops moving
    assert state.driver == pytest.approx(first)


# --- eq. 17-19 ------------------------------------------------------------------------------------------------
def test_topic_eq17():
    # (0.8·(0.6 + 1)/2 + (−0.4)·(0 + 1)/2) / 2 = (0.64 − 0.2)/2
    assert ltrha.topic([0.8, -0.4], [0.6, 0.0]) == pytest.approx(0.22)
    assert math.isnan(ltrha.topic([], []))


def test_success_rate_eq18_including_negative_resources():
    assert ltrha.success_rate(0.0) == pytest.approx(0.75)
    assert ltrha.success_rate(1.0) == pytest.approx(0.8655292893)
    assert ltrha.success_rate(-2.0) == pytest.approx(0.5 + 0.1192029220 / 2)
    assert 0.5 < ltrha.success_rate(-10.0) < ltrha.success_rate(-2.0)


def test_rank_deltas_eq19_even_n():
    assert ltrha.rank_deltas(6, 1.0, 3.0) == pytest.approx([3.0, 2.0, 1.0, -1.0, -2.0, -3.0])
    assert ltrha.rank_deltas(4, 0.5, 2.0) == pytest.approx([2.0, 0.5, -0.5, -2.0])


def test_rank_deltas_eq19_odd_n():
    # n = 5: n/2 − 1 = 1.5; j = 2: 1 + 0.5·2/1.5; the middle j = 3 keeps its resources
    assert ltrha.rank_deltas(5, 1.0, 3.0) == pytest.approx([3.0, 1 + 2 / 3, 0.0, -(1 + 2 / 3), -3.0])
    assert ltrha.rank_deltas(3, 0.0, 1.0) == pytest.approx([1.0, 0.0, -1.0])


def test_rank_deltas_needs_more_than_two_agents():
    with pytest.raises(ValueError, match="more than 2"):
        ltrha.rank_deltas(2, 0.0, 1.0)


def test_reallocate_lower_half_loses_and_may_go_negative():
    before = {"a": 1.0, "b": 1.0, "c": 1.0, "d": -2.0}
    after = ltrha.reallocate(before, ["d", "c", "b", "a"], 0.5, 2.0)
    assert after == pytest.approx({"d": 0.0, "c": 1.5, "b": 0.5, "a": -1.0})
    assert sum(after.values()) == pytest.approx(sum(before.values()))


def test_filter_rule_and_habitus():
    assert ltrha.detrimental_reason("take", "MD", "WL", None, []) == "it is taken from WL's home"
    assert ltrha.detrimental_reason("take", "MD", None, "AY", []) == "the item belongs to AY"
    assert ltrha.detrimental_reason("take", "WL", "WL", None, []) == ""
    assert "walks away" in ltrha.detrimental_reason("go to", "MD", None, None, ["LL"])
    assert ltrha.detrimental_reason("chat with", "MD", "WL", None, ["WL"]) == ""
    habitus = ltrha.Habitus()
    for verb in ("chat with", "chat with", "use"):
        habitus.record("public room", verb)
    assert habitus.preference("public room", "chat with") == pytest.approx(2 / 3)
    assert habitus.preference("own home", "use") == 0.0
    assert "chat with (2 times)" in habitus.describe("public room")
