"""ASVO mechanisms that mutation testing (mutmut on asvo/svo.py and desires.py: 204 mutants) showed
could change unseen: the rule theory of mind's guess of another's SVO from its stance, the channels
a stance is expected to give, a missing channel counting as nothing, the update threshold, the
decay of reverse-coded desires, the gaps and gap closure that rank actions, and the decay rule's
checks."""

import pytest

from socialsim.agents.asvo.svo import favourite_stance, felt, predicted_channels, rule_update, svo_from_stance
from socialsim.agents.desires import DesireState, LinearDecay, gap_closure


@pytest.mark.parametrize(("svo", "stance"), [
    # by hand from PAYOFF and WEIGHTS: altruistic 0.25*own + others; prosocial 0.5*own + 0.5*others +
    # equity; individualistic own; competitive 0.25*own + rank; no SVO 0.5*own + 0.25*(others + rank)
    ("altruistic", "Cooperation"), ("prosocial", "QuasiCooperation"), ("individualistic", "Neutral"),
    ("competitive", "Competition"), (None, "Neutral"),
])
def test_each_svo_favours_the_stance_its_weights_give(svo, stance):
    assert favourite_stance(svo) == stance


@pytest.mark.parametrize(("stance", "svo"), [
    ("Cooperation", "altruistic"), ("QuasiCooperation", "prosocial"), ("Neutral", "individualistic"),
    ("Competition", "competitive"), ("QuasiCompetition", "competitive"), (None, None),
])
def test_the_rule_theory_of_mind_reads_an_svo_from_a_stance(stance, svo):
    assert svo_from_stance(stance) == svo


def test_a_stance_is_expected_to_give_these_channels():
    assert predicted_channels("Competition") == {"own": 0.0, "others": -1.0, "rank": 1.0, "equity": -0.5}
    assert predicted_channels("Cooperation") == {"own": -0.5, "others": 1.0, "rank": -1.0, "equity": -1.0}
    assert predicted_channels("QuasiCooperation")["rank"] == 0.0


def test_a_channel_not_given_counts_as_nothing():
    # prosocial weighs own 0.5; comfort's relevance to own is 0.5: 0.25, and nothing from others or equity
    assert felt("comfort", {"own": 1.0}, "prosocial") == pytest.approx(0.25)
    assert felt("comfort", {}, "prosocial") == 0.0


def test_an_outcome_under_half_a_point_leaves_a_desire_alone():
    # competitive: rank weight 1; superiority's relevance to rank 1: delta = 3 * rank
    assert rule_update("sense of superiority", 5, {"rank": 0.15}, "competitive") == 5  # 0.45
    assert rule_update("sense of superiority", 5, {"rank": 0.2}, "competitive") == 6  # 0.6 -> 5.6 -> 6
    assert rule_update("sense of superiority", 5, {"rank": -0.4}, "competitive") == 4  # -1.2 -> 3.8 -> 4


def test_reverse_coded_desires_grow_worse_as_the_others_fade():
    state = DesireState(values={"comfort": 5.0, "sense of superiority": 5.0}, expected={"comfort": 9.0,
                        "sense of superiority": 1.0}, reverse=frozenset({"sense of superiority"}))
    state.decay(LinearDecay(per_hour=3.0, step_minutes=20.0))
    assert state.values == {"comfort": 4.0, "sense of superiority": 6.0}
    assert state.gaps() == {"comfort": 5.0, "sense of superiority": -5.0}


def test_gap_closure_adds_up_over_desires_and_skips_unknown_ones():
    expected = {"a": 8.0, "b": 8.0, "c": 2.0}
    before = {"a": 4.0, "b": 4.0, "c": 5.0}
    after = {"a": 6.0, "c": 3.0}  # b unknown after: skipped, the others still count
    assert gap_closure(before, after, expected, frozenset({"c"})) == pytest.approx(2.0 + 2.0)
    assert gap_closure(before, {"a": 9.0, "b": 3.0, "c": 5.0}, expected) == pytest.approx(4.0 - 1.0 + 0.0)


def test_the_decay_rule_checks_its_numbers():
    assert LinearDecay(floor=5.0, cap=5.0).clamp(7) == 5.0  # a floor equal to the cap is allowed
    assert LinearDecay(step_minutes=1.0).per_step == pytest.approx(1 / 60)
    with pytest.raises(ValueError, match="floor 6.0 is above the cap 5.0"):
        LinearDecay(floor=6.0, cap=5.0)
    with pytest.raises(ValueError, match="step minutes > 0"):
        LinearDecay(step_minutes=0.0)
    with pytest.raises(ValueError, match="decay per hour must be >= 0"):
        LinearDecay(per_hour=-1.0)
