"""The rules chooser's utility, term by term, on known inputs: resources, driver, topic and
pleasure each move it as documented (mutation survivors: each input could be dropped unseen)."""

import math
from types import SimpleNamespace

import pytest

from socialsim.agents.itcmas.rules import CHOICE, Vocabulary, choice_utility, matrix_score

WORDS = Vocabulary(rest_furniture=("bed",))  # a scenario's resting furniture (none is built in)


def candidate(verb, **kw):
    base = dict(verb=verb, mu=2, target="SG", noun="", new_place=False, spoke_to_me=False, chatted_lately=False,
                habit=0.0, change=0.0, filtered_before=False)
    return SimpleNamespace(**{**base, **kw})


def utility(c, driver=0.0, resources=None, topic=None, pleasure=0.0):
    return choice_utility(c, driver=driver, resources=resources, topic=topic, pleasure=pleasure, vocabulary=WORDS)[0]


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_chatting_is_worth_more_to_the_rich_in_a_good_mood_and_atmosphere():
    chat = candidate("chat with")
    assert utility(chat) == pytest.approx(CHOICE.mu * 2 + CHOICE.social * 0.5)  # unknown resources: wealth 0.5
    assert utility(chat, resources=2.0, topic=0.4, pleasure=0.6) == pytest.approx(
        CHOICE.mu * 2 + CHOICE.social * sigmoid(2.0) * (1 + 0.4 + 0.5 * 0.6))
    assert utility(chat, resources=-2.0) < utility(chat) < utility(chat, resources=2.0)
    assert utility(chat, topic=float("nan")) == utility(chat)  # no topic yet: a neutral atmosphere


def test_replies_and_repeats():
    assert utility(candidate("chat with", spoke_to_me=True)) - utility(candidate("chat with")) == pytest.approx(CHOICE.reply)
    assert utility(candidate("chat with")) - utility(candidate("chat with", chatted_lately=True)) == pytest.approx(CHOICE.repeat)


def test_a_strong_driver_explores_and_a_weak_one_rests():
    go, rest = candidate("go to", new_place=True), candidate("use", noun="bed")
    for driver in (0.0, 0.5, 2.0):
        tired = 1 - math.tanh(max(driver, 0.0))
        assert utility(go, driver=driver) == pytest.approx(CHOICE.mu * 2 + CHOICE.explore * (1 - tired))
        assert utility(rest, driver=driver) == pytest.approx(CHOICE.mu * 2 + CHOICE.rest * tired)
    assert utility(rest, driver=-1.0) == utility(rest, driver=0.0)  # a negative drive is no more tiring


def test_useful_things_habits_change_and_filtering():
    assert utility(candidate("take", mu=3)) == pytest.approx(CHOICE.mu * 3 + CHOICE.useful)
    assert utility(candidate("take", mu=2)) == pytest.approx(CHOICE.mu * 2)
    assert utility(candidate("use", noun="lamp", habit=2.0)) == pytest.approx(CHOICE.mu * 2 + CHOICE.habit * 2)
    assert utility(candidate("use", noun="lamp", change=1.0), driver=1.0) == pytest.approx(
        CHOICE.mu * 2 + CHOICE.change * math.tanh(1.0))
    assert utility(candidate("use", noun="lamp", filtered_before=True)) == pytest.approx(CHOICE.mu * 2 - CHOICE.filtered)


@pytest.mark.parametrize("status, action, topic, expected", [
    ("done", "chat with SG", 0.5, 1 + 1 + 0.5), ("done", "use bed", float("nan"), 1.0),
    ("failed", "use bed", 0.0, -0.5), ("refused", "go to Outside", 0.0, -0.5), ("filtered", "take food", -0.2, -1.7),
])
def test_matrix_contribution(status, action, topic, expected):
    assert matrix_score(SimpleNamespace(status=status, action=action, topic=topic)) == pytest.approx(expected)
