"""Mechanisms that mutation testing (mutmut on emotion.py, ltrha.py, rules.py) showed could be
changed unseen: the accumulation and decay of desire and pain, the weights of d_bias and of base
ITCMA's driver, arousal over one retained frame, the kinds of place habitus is learned for, the
social filter's reasons, the Gumbel draw's sign and RNG tie-breaking, and the texts prompts read."""

import math
import random
from statistics import mean

import pytest

from socialsim.agents.emotion import EmotionState, EmotionWeights, arousal
from socialsim.agents.itcmas.ltrha import PLACE_KINDS, Habitus, detrimental_reason, place_kind
from socialsim.agents.itcmas.rules import gumbel, noisy_order


def test_desire_and_pain_accumulate_in_proportion_and_ignore_negative_amounts():
    state = EmotionState(scale=0.5)
    state.gain(1.0)
    state.gain(0.4)
    state.gain(-3.0)
    assert state.desire == pytest.approx(0.5 * 1.4)
    state.hurt(2.0)
    state.hurt(0.2)
    state.hurt(-1.0)
    assert state.pain == pytest.approx(0.5 * 2.2)


def test_desire_and_pain_both_decay_each_step():
    state = EmotionState(desire=2.0, pain=1.0, decay=0.5)
    state.decay_step()
    assert (state.desire, state.pain) == pytest.approx((1.0, 0.5))


@pytest.mark.parametrize("driver_module", [True, False])
def test_the_agents_own_weights_drive_the_driver(driver_module):
    weights = EmotionWeights(P=1.0, A=0.0, D=0.0)
    state = EmotionState(desire=1.0, weights=weights, use_driver_module=driver_module, driver=0.0)
    default = EmotionState(desire=1.0, use_driver_module=driver_module, driver=0.0)
    state.update([0.5], None)
    default.update([0.5], None)
    P = math.tanh(1.0)
    if driver_module:  # eq. 13 with w = (1, 0, 0): d_bias = P; eq. 15: driver = Ne·d_bias = (P/2)·P
        assert state.bias == pytest.approx(P) and state.driver == pytest.approx(P * P / 2)
    else:  # base ITCMA: driver += w·PAD
        assert state.driver == pytest.approx(P)
    assert state.driver != pytest.approx(default.driver)


def test_arousal_over_one_retained_frame_is_that_difference():
    assert arousal([0.8]) == pytest.approx(math.tanh(0.8))
    assert arousal([]) == 0.0


def test_emotions_are_described_in_words_at_the_documented_thresholds():
    def words(P, A, D):
        return EmotionState(P=P, A=A, D=D, driver=1.25).describe()

    text = words(0.5, 0.5, 0.5)
    assert "drive to act is 1.25" in text and "pleased (pleasure +0.50)" in text
    assert "aroused (arousal +0.50)" in text and "in control (dominance +0.50)" in text
    low = words(-0.5, -0.5, -0.5)
    assert "displeased" in low and "calm" in low and "dominated" in low
    mid = words(0.33, -0.33, 0.0)
    assert "neutral" in mid and "somewhat alert" in mid and "in moderate control" in mid


def test_place_kinds_separate_own_home_someone_elses_public_and_outside():
    homes = {"AY": "AY's Home", "LL": "LL's Home"}
    assert place_kind("the Square", "AY", homes, outside=True) == "outside"
    assert place_kind("AY's Home", "AY", homes, outside=False) == "own home"
    assert place_kind("LL's Home", "AY", homes, outside=False) == "someone's home"
    assert place_kind("Public Canteen", "AY", homes, outside=False) == "public room"
    assert set(PLACE_KINDS) == {"own home", "someone's home", "public room", "outside"}


def test_the_social_filter_says_whose_thing_or_whom_an_action_harms():
    assert detrimental_reason("take", "AY", None, "LL", []) == "the item belongs to LL"
    assert detrimental_reason("take", "AY", "LL", None, []) == "it is taken from LL's home"
    assert detrimental_reason("leave", "AY", None, None, ["LL", "SG"]) == "it walks away from LL, SG who just spoke to you"
    assert detrimental_reason("go to", "AY", None, None, ["LL"]).startswith("it walks away from LL")
    assert detrimental_reason("take", "AY", "AY", "AY", ["LL"]) == ""  # one's own things


def test_habitus_describes_the_three_most_frequent_habits_of_a_kind_of_place():
    habitus = Habitus()
    for verb, times in (("chat with", 3), ("sleep", 2), ("take", 1), ("use", 1)):
        for _ in range(times):
            habitus.record("own home", verb)
    text = habitus.describe("own home")
    assert text == "In a place like this (own home) you usually: chat with (3 times), sleep (2 times), take (1 times)."
    assert "no habits yet" in habitus.describe("outside")


def test_gumbel_draws_have_the_gumbel_mean_and_skew():
    rng = random.Random(3)
    draws = [gumbel(rng, 2.0) for _ in range(20000)]
    assert mean(draws) == pytest.approx(2.0 * 0.5772, abs=0.06)  # Euler-Mascheroni x scale
    assert max(draws) > -min(draws)  # right-skewed: a long upper tail


def test_exact_ties_fall_to_the_rng_not_to_list_order():
    items = ["a", "b", "c", "d"]
    firsts = [noisy_order(items, lambda _: 1.0, random.Random(seed), 0.0)[0] for seed in range(200)]
    shares = {item: firsts.count(item) / len(firsts) for item in items}
    assert all(0.15 < share < 0.35 for share in shares.values()), shares


@pytest.mark.parametrize("noun", ["bed", "chair", "nightstand"])
def test_every_piece_of_resting_furniture_rests(noun):
    from types import SimpleNamespace

    from socialsim.agents.itcmas.rules import CHOICE, Vocabulary, choice_utility

    c = SimpleNamespace(verb="use", mu=2, target="", noun=noun, new_place=False, spoke_to_me=False,
                        chatted_lately=False, habit=0.0, change=0.0, filtered_before=False)
    words = Vocabulary(rest_furniture=("bed", "chair", "nightstand"))  # IrollanValley's
    score, why = choice_utility(c, driver=0.0, resources=None, topic=None, pleasure=0.0, vocabulary=words)
    assert score == pytest.approx(CHOICE.mu * 2 + CHOICE.rest) and why == "I need some rest"
    # no resting furniture is built in: without the scenario's words, using it is just using it
    assert choice_utility(c, driver=0.0, resources=None, topic=None, pleasure=0.0)[0] == pytest.approx(CHOICE.mu * 2)
