"""The desire pool's arithmetic: anchors, expected values, letter answers, decay, the paper preset."""

import math

import pytest

from socialsim.agents.asvo.operations import CHECK_UPDATE, UPDATE_DESIRE, UpdateContext
from socialsim.agents.asvo.settings import PAPER_PRESET, ASVOSettings
from socialsim.agents.desires import ANCHORS, DEGREE_STEP, DESIRES, LinearDecay, expected_value, gap_closure
from socialsim.llm.questions import AnswerError, LetterScaleQuestion
from socialsim.scenarios.loader import load_scenario

ASVO_SCENARIOS = ["school-micro", "school-meso", "school-macro", "workplace-micro", "workplace-meso",
                  "workplace-macro", "family-micro", "family-meso"]


def test_anchors_cover_all_eight_desires_at_all_eleven_levels():
    assert tuple(ANCHORS) == DESIRES and len(DESIRES) == 8
    for desire, anchors in ANCHORS.items():
        assert len(anchors) == 11, desire
        assert all(a.strip() for a in anchors), desire
        assert len(set(anchors)) == 11, f"{desire}: two levels share an anchor"
    # the paper's own anchors are kept verbatim (Figure 7)
    assert ANCHORS["comfort"][0] == "Extreme discomfort, experiencing pain or severe physical unease."
    assert ANCHORS["recognition"][5] == "Moderately recognized, with some acknowledgment for your efforts and contributions."


@pytest.mark.parametrize("degree, step", [("extremely", 2.0), ("quite", 1.5), ("moderately", 1.0), ("slightly", 0.5)])
def test_expected_value_follows_the_degree_mapping_and_reverse_coding(degree, step):
    assert DEGREE_STEP[degree] == step
    assert expected_value(degree) == 10 - (3 - step)
    assert expected_value(degree, reverse=True) == 3 - step


def test_expected_value_examples_and_overrides():
    assert expected_value("extremely") == 9.0
    assert expected_value("slightly") == 7.5
    assert expected_value("extremely", reverse=True) == 1.0
    assert expected_value("quite", reverse=True, default=3) == 3.0  # e.g. the paper's sleepiness=3
    with pytest.raises(ValueError, match="unknown decrease degree 'very'"):
        expected_value("very")


def test_update_desire_is_an_eleven_letter_scale_and_parses_letters():
    question = UPDATE_DESIRE.question(UpdateContext("A", "", None, "comfort", 5, "x", "y", {}))
    assert isinstance(question, LetterScaleQuestion) and question.letters == "abcdefghijk"
    assert question.anchors == ANCHORS["comfort"]
    assert question.parse("(a)").level == 0
    assert question.parse(" (f) Neutral").level == 5
    assert question.parse("(k)").level == 10
    for bad in ("(l)", "seven", ""):
        with pytest.raises(AnswerError):
            question.parse(bad)
    check = CHECK_UPDATE.question(UpdateContext("A", "", None, "comfort", 5, "x", "y", {}, proposed=7))
    assert check.parse("(a)").letter == "a" and check.parse("(b) No.").letter == "b"
    assert "(a) Yes." in check.instruction() and "(b) No." in check.instruction()


def test_linear_decay_is_a_rate_per_hour_scaled_by_the_step_and_stays_within_floor_and_cap():
    rule = LinearDecay(per_hour=1.0, step_minutes=20, floor=0.0, cap=8.0)
    assert rule.per_step == pytest.approx(1 / 3)
    assert rule.apply(6.0) == pytest.approx(6 - 1 / 3)
    assert rule.apply(0.2) == 0.0  # floor
    assert rule.apply(10.0) == 8.0  # cap
    assert rule.apply(7.9, reverse=True) == 8.0  # a reverse-coded desire worsens upward, capped
    assert LinearDecay(per_hour=1.0, step_minutes=60).per_step == 1.0
    value = 8.0
    for _ in range(30):
        value = rule.apply(value)
        assert 0.0 <= value <= 8.0
    assert value == 0.0
    with pytest.raises(ValueError):
        LinearDecay(floor=5, cap=4)


def test_gap_closure_counts_movement_toward_the_expected_value_only():
    expected = {"comfort": 8.0, "joyfulness": 8.0}
    before = {"comfort": 5.0, "joyfulness": 8.0}
    assert gap_closure(before, {"comfort": 7.0, "joyfulness": 8.0}, expected) == 2.0
    assert gap_closure(before, {"comfort": 10.0, "joyfulness": 9.0}, expected) == 3.0  # overshoot earns nothing
    assert gap_closure(before, {"comfort": 4.0, "joyfulness": 6.0}, expected) == -3.0
    assert gap_closure({"s": 5.0}, {"s": 2.0}, {"s": 2.5}, reverse=frozenset({"s"})) == 2.5


@pytest.mark.parametrize("name", ASVO_SCENARIOS)
def test_every_scenario_ships_the_papers_table_1_as_its_paper_preset(name):
    scenario = load_scenario(name)
    preset = scenario.presets["paper"]
    assert preset == PAPER_PRESET
    assert scenario.step_minutes == 20 and scenario.default_steps == 6 and scenario.default_arch == "asvo"
    settings = ASVOSettings.from_params({k: v for k, v in preset.items() if k != "steps"})
    decay = LinearDecay(settings.decay_per_hour, settings.step_minutes, settings.satisfaction_floor,
                        settings.satisfaction_cap)
    assert (settings.desire_pool, settings.memory_steps) == (8, 5)
    assert (decay.floor, decay.cap) == (0.0, 8.0) and math.isclose(decay.per_step, 1 / 3)
    assert scenario.presets["wo-asvo"] == {"use_svo": False}
