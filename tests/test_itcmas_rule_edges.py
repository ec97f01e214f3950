"""The ITCMA-S rules at their edges: Elim's relevance ratings per verb (a social goal, a partner
who spoke to me, a new place, tiredness, a thing the goal is about) and which goals make a thing
relevant. Written after mutmut on the rules of ``agents/itcmas/operations.py`` left them unpinned.
The words the rules read a goal by are the scenario's: here IrollanValley's (``WORDS``); with none,
no word triggers anything."""

import dataclasses
import random

import pytest

from socialsim.agents.itcmas import operations as ops
from socialsim.agents.itcmas.rules import NO_WORDS
from socialsim.agents.itcmas.settings import load_config
from socialsim.scenarios.loader import load_scenario

WORDS = load_config(load_scenario("irollan-valley").itcmas, {}).vocabulary


def mu(verb, goal="Write my thesis", noun="", driver=1.0, spoke_to_me=False, new_place=False, words=WORDS):
    ctx = ops.ElimContext(goal, f"{verb} {noun}".strip(), [], verb, noun, driver, spoke_to_me, new_place, words)
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
    assert WORDS.relevant(goal, noun) is relevant


def test_without_the_scenarios_words_no_goal_word_makes_anything_relevant():
    """No vocabulary is built into the architecture: a scenario that gives none gets none."""
    assert mu("chat with", goal="Meet a friend and talk with the others", noun="LL", words=NO_WORDS) == 2
    assert mu("go to", goal="Explore the valley", new_place=True, words=NO_WORDS) == 3
    assert mu("use", noun="bed", driver=0.1, words=NO_WORDS) == 2
    assert mu("take", goal="Eat lunch", noun="beverage", words=NO_WORDS) == 2
    assert mu("take", goal="Eat some food", noun="food", words=NO_WORDS) == 4  # the goal names the thing itself


# --- protention ---------------------------------------------------------------------------------------------


def protention(verb, current=(), target="", item="", remembered=()):
    ctx = ops.ProtentionContext("AY", "obs", [], "driver", f"{verb} {item or target}", verb, list(current),
                                target, item, list(remembered))
    return ops.PROTENTION.rule(ctx, random.Random(0)).text


HERE = ["You are in the canteen", "the food placed on the table", "LL", "holding the book"]


def test_a_move_predicts_the_remembered_place_or_just_being_there():
    remembered = ["You are in the reading room", "the book placed on the shelf"]
    assert protention("go to", HERE, target="the reading room", remembered=remembered) == (
        "You are in the reading room. Looking around you, you see the book placed on the shelf.")
    assert protention("go to", HERE, target="the yard") == "You are in the yard."
    assert protention("leave", HERE, target="the yard") == "You are in the yard."


def test_taking_and_putting_move_the_item_between_the_hand_and_the_furniture():
    assert protention("take", HERE, item="food") == (
        "You are in the canteen. Looking around you, you see LL. You are holding the book, the food.")
    assert protention("put", HERE, target="table", item="book") == (
        "You are in the canteen. Looking around you, you see the food placed on the table, LL, "
        "the book placed on the table.")
    assert protention("take", HERE) == protention("chat with", HERE) == (
        "You are in the canteen. Looking around you, you see the food placed on the table, LL. "
        "You are holding the book.")  # no item, or another verb: nothing changes


def test_an_observation_without_a_place_or_anything_seen_is_short():
    assert ops._as_observation([]) == "You are here."
    assert ops._as_observation(["holding the cup"]) == "You are here. You are holding the cup."
    assert ops._as_observation(["LL", "WM"]) == "You are here. Looking around you, you see LL, WM."


# --- chat, the social filter --------------------------------------------------------------------------------


def chat(heard=(), topic=None, seed=0, places=("the reading room", "the canteen")):
    ctx = ops.ITCMAChatContext("AY", "LL", "obs", "I feel fine", list(heard), topic, "the canteen", list(places))
    return ops.CHAT.rule(ctx, random.Random(seed)).text


def test_a_rule_chat_answers_what_was_heard_opens_otherwise_and_takes_the_atmosphere():
    openers = {chat(seed=s) for s in range(40)}
    assert openers == {"Hi LL! What are you up to in the canteen?", "Hello LL, shall we do something together?",
                       "LL, have you been to the reading room or the canteen today?"}
    assert {chat(seed=s, places=["the hall"]) for s in range(40)} >= {"LL, have you been to the hall today?"}
    # a scenario with no public room: no place but the one here is named
    assert {chat(seed=s, places=[]) for s in range(40)} == {"Hi LL! What are you up to in the canteen?",
                                                            "Hello LL, shall we do something together?"}
    replies = {chat(heard=["shall we eat?"], seed=s) for s in range(40)}
    assert replies == {"Yes LL, let's do that together here in the canteen.", "I hear you, LL. What should we do next?",
                       "Good idea, LL. I'll join you."}
    assert chat(topic=0.5).endswith(" It feels good here.")
    assert chat(topic=-0.5).endswith(" It is a bit tense here.")
    assert chat(topic=0.2) == chat(topic=-0.2) == chat(topic=float("nan")) == chat()  # flat or unknown: no remark


@pytest.mark.parametrize(("verb", "area_owner", "item_owner", "addressed_by", "filtered"), [
    ("take", None, "WM", [], True),  # taking someone else's thing
    ("take", None, "AY", [], False),
    ("take", "LL", None, [], True),  # taking anything in someone else's home
    ("take", "AY", None, [], False),
    ("use", "LL", None, [], False),  # using is fine
    ("leave", None, None, ["LL"], True),
    ("go to", None, None, ["LL"], True),  # walking away from someone who spoke to me
    ("chat with", None, None, ["LL"], False),
])
def test_the_rule_social_filter_follows_ltrha_s_detrimental_reasons(verb, area_owner, item_owner, addressed_by,
                                                                   filtered):
    from socialsim.agents.itcmas.ltrha import detrimental_reason

    ctx = ops.FilterContext("AY", "the house", f"{verb} x", verb, area_owner, item_owner, addressed_by, ["LL"])
    assert ops.SOCIAL_FILTER.rule(ctx, random.Random(0)).yes is filtered
    assert filtered is bool(detrimental_reason(verb, "AY", area_owner, item_owner, addressed_by))


# --- the chooser and the matrix as operations ---------------------------------------------------------------


def candidate(action, verb, mu, **kw):
    return ops.Candidate(action, verb, mu, "", 0.0, **kw)


def choose(candidates, seed, driver=0.5):
    ctx = ops.ChoiceContext("AY", "g", "obs", [], [], "driver", driver, "", 0.0, list(candidates))
    return ops.CHOOSE.rule(ctx, random.Random(seed))


def test_the_rule_chooser_answers_with_a_number_from_one_and_a_thought_giving_its_reason():
    cands = [candidate("put cup on table", "put", 1), candidate("take food", "take", 4, noun="food")]
    answers = [choose(cands, seed) for seed in range(30)]
    assert {a.action for a in answers} == {2}  # 0.5 + 2.0 + 0.8 against 0.5: the noise never overturns it
    assert answers[0].thought == "I feel a drive of 0.50. I will take food, because I could use the food."
    close = [candidate("use chair", "use", 3, noun="chair"), candidate("use bed", "use", 3, noun="bed")]
    assert {choose(close, seed).action for seed in range(30)} == {1, 2}  # equal utilities: the RNG decides


def entry(name, status="done", action="use chair", topic=0.0):
    return ops.MatrixEntry(name, action, status, 0.0, "g", "hall", topic)


def test_the_rule_matrix_ranks_by_contribution_and_only_noise_orders_equals():
    entries = [entry("AY", "filtered"), entry("LL", action="chat with WM"), entry("WM", "failed"), entry("SG")]
    rankings = [ops.RANK_AGENTS.rule(ops.MatrixContext(entries), random.Random(seed)).ranking for seed in range(20)]
    assert {tuple(r) for r in rankings} == {("LL", "SG", "WM", "AY")}
    twins = [entry("AY"), entry("LL")]
    firsts = {ops.RANK_AGENTS.rule(ops.MatrixContext(twins), random.Random(s)).ranking[0] for s in range(30)}
    assert firsts == {"AY", "LL"}
    fallback = ops.RANK_AGENTS.fallback(ops.MatrixContext([dataclasses.replace(entry("AY"), resources=1.0),
                                                           dataclasses.replace(entry("LL"), resources=3.0)]))
    assert fallback.ranking == ["LL", "AY"]



def test_another_verb_with_an_item_leaves_the_item_where_it_is():
    assert protention("use", HERE, target="table", item="book") == protention("chat with", HERE)


def test_the_rule_chooser_weighs_chatting_by_resources_and_the_atmosphere():
    cands = [candidate("chat with LL", "chat with", 1, target="LL"), candidate("use oven", "use", 3, noun="oven")]

    def chats(resources, topic):
        ctx = ops.ChoiceContext("AY", "g", "obs", [], [], "driver", 1.0, "", resources, cands, topic, 1.0)
        return sum(ops.CHOOSE.rule(ctx, random.Random(seed)).action == 1 for seed in range(200))

    rich_and_warm = chats(10.0, 1.0)
    assert rich_and_warm > chats(None, 1.0) + 30 and rich_and_warm > chats(10.0, None) + 30
