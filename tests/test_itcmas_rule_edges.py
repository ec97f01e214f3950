"""The ITCMA-S rules at their edges: Elim's relevance ratings per verb (a social goal, a partner
who spoke to me, a new place, tiredness, a thing the goal is about) and which goals make a thing
relevant. Written after mutmut on the rules of ``agents/itcmas/operations.py`` left them unpinned."""

import random

import pytest

from socialsim.agents.itcmas import operations as ops


def mu(verb, goal="Write my thesis", noun="", driver=1.0, spoke_to_me=False, new_place=False):
    ctx = ops.ElimContext(goal, f"{verb} {noun}".strip(), [], verb, noun, driver, spoke_to_me, new_place)
    return ops.ELIM.rule(ctx, random.Random(0)).value


@pytest.mark.parametrize(("goal", "spoke", "value"), [
    ("Write my thesis", False, 2),  # a solitary goal, nobody spoke to me
    ("Write my thesis", True, 4),  # answering someone who spoke to me
    ("Meet a FRIEND for lunch", False, 4),  # a social goal (any case)
    ("Talk with others", True, 5),  # both
])
def test_chatting_rates_by_the_goals_sociability_and_who_spoke_to_me(goal, spoke, value):
    assert mu("chat with", goal=goal, noun="LL", spoke_to_me=spoke) == value


def test_moving_rates_four_only_to_a_new_place_when_the_goal_says_explore():
    assert mu("go to", goal="Explore the VALLEY", new_place=True) == 4
    assert mu("go to", goal="Explore the valley", new_place=False) == 3
    assert mu("go to", goal="Write my thesis", new_place=True) == 3


def test_resting_furniture_rates_four_when_tired_and_other_things_two():
    assert mu("use", noun="chair", driver=0.5) == 4
    assert mu("use", noun="bed", driver=1.0) == 3
    assert mu("use", noun="bed", driver=1.5) == 3
    assert mu("use", noun="oven", driver=0.5) == 2


def test_taking_a_thing_rates_by_the_goal_and_other_verbs_rate_two():
    assert mu("take", goal="Eat something", noun="food") == 4
    assert mu("take", goal="Write my thesis", noun="food") == 2
    assert mu("put", goal="Eat something", noun="food") == 2
    assert mu("leave", goal="Explore the valley", new_place=True) == 2


@pytest.mark.parametrize(("goal", "noun", "relevant"), [
    ("Find a BOOK to read", "book", True), ("Read quietly", "book", True), ("Eat lunch", "beverage", True),
    ("Eat lunch", "book", False), ("Write my thesis", "food", False), ("Eat lunch", "", False),
    ("Drink something", "food", False)])
def test_a_thing_is_relevant_when_the_goal_names_it_or_a_verb_of_the_goal_is_about_it(goal, noun, relevant):
    assert ops.relevant_to(goal, noun) is relevant
