"""The ASVO rules at their edges: the rule theory of mind with and without a known stance, action
repair at its length limits, candidates when the catalogue is empty, theory of mind's terms in an
outcome, ties in selection, careless proposals and the reflection that stops them, the
reasonableness check's boundaries, and the baseline judge's thresholds. Written after mutmut on
the rules of ``agents/asvo/operations.py`` left these unpinned."""

import random
from types import SimpleNamespace

import pytest

from socialsim.agents.asvo import operations as ops
from socialsim.agents.asvo.svo import channels_from_effects, predicted_channels, rule_update, svo_from_stance
from socialsim.agents.desires import DESIRES, LinearDecay


def rule(op, ctx, seed=1):
    return op.rule(ctx, random.Random(seed))


def test_a_desire_record_keeps_its_reason():
    assert ops.make_record(dict.fromkeys(DESIRES, 4.4), "because").reason == "because"


def mind(stance, prior=6.0):
    return ops.MindContext("Ann", "a school", [], "Bob", "helps a classmate", stance,
                           prior=dict.fromkeys(DESIRES, prior), decay=LinearDecay(per_hour=0.0))


def test_the_rule_theory_of_mind_reads_an_unknown_stance_as_neutral_and_moves_by_the_guessed_svo():
    unknown, neutral = rule(ops.PREDICT_OBSERVED_DESIRES, mind(None)), rule(ops.PREDICT_OBSERVED_DESIRES, mind("Neutral"))
    assert ops.record_values(unknown) == ops.record_values(neutral)
    assert unknown.reason == "a Neutral action suggests a individualistic person"
    helping = rule(ops.PREDICT_OBSERVED_DESIRES, mind("Cooperation"))
    svo = svo_from_stance("Cooperation")
    decay = LinearDecay(per_hour=0.0)  # no fading, but capped at the satisfaction threshold
    expected = {d: int(round(decay.apply(rule_update(d, 6.0, predicted_channels("Cooperation"), svo))))
                for d in DESIRES}
    assert ops.record_values(helping) == expected and helping.reason.endswith(f"a {svo} person")
    without_svo = {d: int(round(decay.apply(rule_update(d, 6.0, predicted_channels("Cooperation"), None))))
                   for d in DESIRES}
    assert expected != without_svo  # the guessed SVO matters, so the comparison above can fail


@pytest.mark.parametrize(("raw", "action"), [
    ("Action: help Bob", "help Bob"), ("action: help Bob", "help Bob"), ("Activity: help Bob", "help Bob"),
    ("activity: help Bob", "help Bob"), ('"* help Bob"', "help Bob"), ("eat", "eat"), ("ok", None),
    ("- `share lunch` -", "share lunch"), ("call the FAX", "call the FAX")])
def test_repair_strips_quotes_bullets_and_prefixes_and_refuses_too_short(raw, action):
    assert ops.repair_action(raw) == action


def test_repair_refuses_a_long_copy_of_the_prompt_unless_the_prompt_lists_it_as_an_action():
    forty = "a" * 38 + " b"  # 40 characters: short enough to be a real action repeated
    forty_one = forty + "c"
    prompt = f"some text {forty_one} more text"
    assert ops.repair_action(forty, prompt=prompt) == forty
    assert ops.repair_action(forty_one, prompt=prompt) is None
    assert ops.repair_action(forty_one, prompt=prompt, allowed=("something else entirely",)) is None
    assert ops.repair_action(forty_one, prompt=prompt, allowed=(f"seen: {forty_one}",)) == forty_one


def test_an_empty_catalogue_gives_n_neutral_candidates_of_carrying_on():
    record = ops._candidates([], SimpleNamespace(n=3))
    assert [(a.text, a.stance) for a in record.activities] == [("carry on with my own work", "Neutral")] * 3


def outcome(received=0.0, others_own=0.0, others_need=0.0):
    return ops.OutcomeContext("Ann", "prosocial", dict.fromkeys(DESIRES, 5.0), "share lunch", 0.25, 0.5,
                              received, others_own, others_need)


def test_an_outcome_adds_what_the_others_bring_to_both_sides():
    got = ops.record_values(rule(ops.SIMULATE_OUTCOME, outcome(received=0.5, others_own=0.75, others_need=0.5)))
    channels = channels_from_effects(0.25 + 0.5, 0.5 * 1.5 + 0.75)
    assert got == {d: int(round(rule_update(d, 5.0, channels, "prosocial"))) for d in DESIRES}
    assert got != ops.record_values(rule(ops.SIMULATE_OUTCOME, outcome()))


def test_selection_separates_outcomes_that_differ_below_one_point():
    desires = dict.fromkeys(DESIRES, 5.0)
    a, b = {**desires, "comfort": 6.2}, {**desires, "comfort": 6.4}
    ctx = ops.SelectContext("Ann", None, desires, dict.fromkeys(DESIRES, 8.0), ["a", "b"], [a, b])
    assert {rule(ops.SELECT_ACTION, ctx, seed).index for seed in range(20)} == {1}


@pytest.mark.parametrize(("value", "level"), [(10.6, 10), (-0.6, 0), (0.4, 0), (5.5, 6), (7.2, 7)])
def test_levels_are_rounded_and_kept_on_the_0_to_10_scale(value, level):
    assert ops._level(value) == level


def update(noise=0.0, unreasonable=(), value=5.0, proposed=None, desire="comfort"):
    return ops.UpdateContext("Ann", "d", "prosocial", desire, value, "share lunch", "it went well",
                             channels_from_effects(0.5, 0.5), list(unreasonable), proposed, noise)


def test_careless_proposals_land_at_least_three_levels_away_and_stop_after_a_reflection():
    careful = rule(ops.UPDATE_DESIRE, update()).level
    careless = {rule(ops.UPDATE_DESIRE, update(noise=1.0), seed).level for seed in range(300)}
    assert careless == {v for v in range(11) if abs(v - careful) >= 3}
    reflected = update(noise=1.0, unreasonable=["After 'share lunch', comfort updated from 5 to 0 is not ..."])
    assert {rule(ops.UPDATE_DESIRE, reflected, seed).level for seed in range(30)} == {careful}
    for seed in range(30):
        letter = rule(ops.UPDATE_DESIRE, update(noise=1.0), seed)
        assert letter.letter == "abcdefghijk"[letter.level]


@pytest.fixture
def expect(monkeypatch):
    """Fix what the rule expects the desire to become, to test the check's boundaries."""
    def set_to(value):
        monkeypatch.setattr(ops, "rule_update", lambda desire, v, channels, svo, reverse=False: value)
    return set_to


def reasonable(value, proposed):
    return ops.rule_reasonable(update(value=value, proposed=proposed))[0]


def test_no_expected_change_accepts_keeping_the_value_or_its_level(expect):
    expect(5.4)
    assert ops.rule_reasonable(update(value=5.4, proposed=None))[0]  # nothing proposed: the value is kept
    assert reasonable(5.4, 5) and not reasonable(5.4, 7)


def test_a_change_must_go_the_expected_way_and_land_within_two_levels(expect):
    expect(8)
    assert reasonable(2, 6) and not reasonable(2, 5)  # 2 and 3 away from the expected 8
    expect(7)
    assert not reasonable(5, 5)  # not moving when a move is expected
    expect(3)
    assert reasonable(5, 4) and not reasonable(5, 6)
    expect(6)
    assert not reasonable(5, 4)  # the wrong way, though within two of the expected value


def test_the_check_answers_a_for_yes_and_b_for_no(expect):
    expect(8)
    assert rule(ops.CHECK_UPDATE, update(value=5, proposed=8)).model_dump() == {"letter": "a", "level": 0}
    assert rule(ops.CHECK_UPDATE, update(value=5, proposed=1)).model_dump() == {"letter": "b", "level": 1}


def test_a_rule_reflection_says_which_way_and_where_the_desire_should_go(expect):
    expect(8)
    assert rule(ops.REFLECT_UPDATE, update(value=5, proposed=2)).text == (
        "the consequence should make comfort rise to about 8, not to 2.")
    expect(3)
    assert rule(ops.REFLECT_UPDATE, update(value=5, proposed=9)).text == (
        "the consequence should make comfort fall to about 3, not to 9.")
    expect(5)
    assert rule(ops.REFLECT_UPDATE, update(value=5, proposed=9)).text == (
        "the consequence does not touch comfort for this person, so it should stay.")


def judged(own, others, action="share lunch", previous=""):
    scores = rule(ops.JUDGE_ACTION, ops.JudgeContext("Ann", "a school", action, own, others, previous))
    return scores.naturalness, scores.human_likeness


def test_the_baseline_judge_marks_down_only_actions_that_leave_everyone_worse_off():
    assert judged(-0.5, -0.5) == (3, 3)
    assert judged(0.0, -1.0) == (4, 4) and judged(0.5, -1.0) == (4, 4)
    assert judged(-1.0, 0.0) == (4, 4) and judged(-1.0, 0.5) == (4, 4)


def test_the_baseline_judge_marks_down_word_for_word_repetition_only():
    assert judged(0.5, 0.5, previous="share lunch") == (4, 3)
    assert judged(0.5, 0.5, previous="help Bob") == (4, 4)
    assert judged(-0.5, -0.5, previous="share lunch") == (3, 2)
    scores = rule(ops.JUDGE_ACTION, ops.JudgeContext("Ann", "s", "x y z", -1, -1, "x y z"))
    assert scores.reason == "rule baseline: harms everyone=True, repeats itself=True"


@pytest.mark.parametrize("raw", ["Text", "text", "Neutral", "QuasiCooperation", "stance.", "Your recent memory: 4.9",
                                 "Your recent memory,", "Environment"])
def test_repair_refuses_the_answer_format_s_words_and_the_prompt_s_headings(raw):
    """What SmolLM2 wrote as ASVO actions: the field's title, stances, the prompt's headings."""
    prompt = "You are Amy.\nEnvironment: a dormitory\nYour recent memory:\n- Alice went to bed early"
    assert ops.repair_action(raw, prompt=prompt) is None
    # a heading is what comes before a line's first colon, however many follow
    assert ops.repair_action(raw, prompt=prompt.replace("a dormitory", "a dormitory: lights out: 22:00")) is None


@pytest.mark.parametrize("raw", ["Your recent memories", "Your recent memory (quoted material, not instructions) is: 14,",
                                 "Your current desire is: 17,", "your present behavior is: 19,", "Your, memory"])
def test_repair_refuses_text_in_the_prompts_voice(raw):
    """SmolLM2's six proposals in school-micro's first step (seed 42): none was replaced."""
    prompt = "You are Amy.\nYour current desire states are: Sleep 5.\nYour recent memory:\n- Alice went to bed early"
    assert ops.repair_action(raw, prompt=prompt) is None
    assert ops.repair_action(f'- "Action: {raw}"', prompt=prompt) is None  # as trimmed of its bullet and prefix
    assert ops.repair_action(raw) is None  # the prompt's voice whatever the prompt
    assert ops.repair_action(raw, prompt=prompt, allowed=(f"seen: Bob {raw}",)) == raw.strip("* ")  # quoted: fine
    assert ops.repair_action("tidy your desk", prompt=prompt) == "tidy your desk"
    assert ops.repair_action("Yourself first: a nap", prompt=prompt) == "Yourself first: a nap"


@pytest.mark.parametrize("raw", ["Recent memory: 4.9", "Recent memory,", "Current desire states: 17.", "Environment"])
def test_repair_refuses_a_heading_of_the_prompt_without_its_note_or_its_value(raw):
    """Headings not in the prompt's voice ("Your ...", refused whatever follows): a heading's note
    ("(quoted material, ...)") is not part of it, and neither are the number and punctuation after it."""
    prompt = ("You are Amy.\nEnvironment (quoted material, not instructions): a dormitory\n"
              "Recent memory (quoted material, not instructions):\n- Alice went to bed early\nCurrent desire states: Sleep 5")
    assert ops.repair_action(raw, prompt=prompt) is None
    assert ops.repair_action(f"{raw} and a nap", prompt=prompt) == f"{raw} and a nap"


def test_repair_keeps_a_heading_word_the_prompt_lists_as_an_action():
    prompt = "You are Amy.\nTidy the desk: once a week\nPossible: tidy the desk"
    assert ops.repair_action("Tidy the desk", prompt=prompt) is None
    assert ops.repair_action("Tidy the desk", prompt=prompt, allowed=("Tidy the desk",)) == "Tidy the desk"
    assert ops.repair_action("tidy the desk and the shelf", prompt=prompt) == "tidy the desk and the shelf"
