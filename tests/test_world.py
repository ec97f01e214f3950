"""The room world: observation text, action space, validation with reasons, effects, facts."""

import random

import pytest
from mesa import Model
from mesa.discrete_space import CellAgent

from socialsim.scenarios.loader import load_scenario
from socialsim.spaces.actions import Action, parse_action
from socialsim.spaces.world import World


class Person(CellAgent):
    def __init__(self, model, name):
        super().__init__(model)
        self.name = name


@pytest.fixture
def world():
    model = Model(rng=0)
    w = World(load_scenario("hobbs-cafe").map, random.Random(0))
    for name, area in [("Ann", "Hobbs Cafe kitchen"), ("Bob", "Hobbs Cafe kitchen"), ("Cid", "the street outside")]:
        w.place(Person(model, name), area)
    return w


def test_cells_belong_to_areas_and_agents_stand_in_theirs(world):
    ann = world.agents["Ann"]
    assert world.area_of(ann) == "Hobbs Cafe kitchen"
    assert all(world.area_at[c.coordinate] == "Hobbs Cafe kitchen" for c in world.cells_of("Hobbs Cafe kitchen"))


def test_observation_follows_the_irollan_valley_form(world):
    text = world.observe(world.agents["Ann"])
    assert text.startswith("You are in Hobbs Cafe kitchen. Looking around you, you see a person named Bob (who is standing)")
    assert "a door to Hobbs Cafe counter" in text
    assert "the plate 1 placed on the sinkbasin 1" in text
    assert text.endswith("You are standing.")


def test_action_space_enumerates_primitives_from_the_world_state(world):
    texts = [a.text for a in world.action_space(world.agents["Ann"])]
    assert "go to Hobbs Cafe counter" in texts
    assert "take plate 1 from sinkbasin 1" in texts
    assert "chat with Bob" in texts and "chat with Cid" not in texts
    assert "eat a meal" not in texts  # only in the dining room
    assert "smoke a cigarette" in texts


def test_impossible_actions_are_refused_with_the_reason(world):
    ann = world.agents["Ann"]
    cases = {
        Action("go to", "the street outside"): "no door from Hobbs Cafe kitchen to the street outside",
        Action("go to", "Hobbs Cafe kitchen"): "you are already in Hobbs Cafe kitchen",  # not "no door from X to X"
        Action("chat with", "Cid"): "Cid is not in Hobbs Cafe kitchen",
        Action("take", "foodshelf 1", "plate 1"): "no plate 1 on the foodshelf 1",
        Action("put", "sinkbasin 1", "sandwich 1"): "not holding sandwich 1",
        Action("do", "eat a meal"): "cannot eat a meal in Hobbs Cafe kitchen",
        Action("use", "stage 1"): "no stage 1 in Hobbs Cafe kitchen",
    }
    for action, reason in cases.items():
        outcome = world.execute(ann, action, step=1)
        assert not outcome.ok and reason in outcome.reason
    assert world.area_of(ann) == "Hobbs Cafe kitchen"
    assert all(not e.ok for e in world.events)


def test_items_move_and_change_state_when_used(world):
    ann = world.agents["Ann"]
    assert world.execute(ann, Action("take", "sinkbasin 1", "plate 1"), 1).ok
    assert [i.name for i in world.held_by("Ann")] == ["plate 1"]
    assert world.execute(ann, Action("use", "sinkbasin 1", "plate 1"), 2).ok
    assert world.items["plate 1"].states == {"clean", "damp"}
    assert world.execute(ann, Action("use", "stoveburner 1", "plate 1"), 3).ok
    assert world.items["plate 1"].states == {"clean", "hot"}
    assert "You are holding the plate 1 in the clean hot status." in world.observe(ann)
    assert world.execute(ann, Action("put", "foodshelf 1", "plate 1"), 4).ok
    assert world.items["plate 1"].holder == "foodshelf 1"


def test_moving_through_doors(world):
    cid = world.agents["Cid"]
    assert world.execute(cid, Action("go to", "Hobbs Cafe dining room"), 1).ok
    assert world.area_of(cid) == "Hobbs Cafe dining room"
    assert world.execute(cid, Action("leave", "Hobbs Cafe dining room"), 2).ok
    assert world.area_of(cid) == "the street outside"


def test_behaviour_tags_become_world_facts(world):
    bob = world.agents["Bob"]
    world.execute(bob, Action("do", "smoke a cigarette"), 5)
    facts = world.facts("smoke")
    assert [(f.agent, f.area, f.step) for f in facts] == [("Bob", "Hobbs Cafe kitchen", 5)]
    assert world.is_inside(facts[0].area)
    assert "a person named Bob (who is smoking a cigarette)" in world.observe(world.agents["Ann"])


def test_parse_action_round_trips_every_form(world):
    behaviours = {t: tuple(b.tags) for t, b in world.behaviours.items()}
    for action in world.action_space(world.agents["Ann"]):
        parsed = parse_action(action.text, behaviours)
        assert parsed is not None and parsed.text == action.text
    chat = parse_action("chat with Bob: hello, friend", behaviours)
    assert (chat.target, chat.content) == ("Bob", "hello, friend")
    assert parse_action("fly to the moon", behaviours) is None


def test_a_free_text_action_is_read_without_its_full_stop_and_extra_spaces_but_a_chat_keeps_its_words_as_said():
    assert parse_action("  Go to   the Hobbs Cafe kitchen. ") == Action("go to", "the Hobbs Cafe kitchen")
    assert parse_action("smoke  a cigarette.", {"smoke a cigarette": ("smoking",)}) == \
        Action("do", "smoke a cigarette", tags=("smoking",))
    chat = parse_action("Chat with Bob:  well.  I  see...")
    assert (chat.verb, chat.target, chat.content) == ("chat with", "Bob", "well.  I  see...")
    assert parse_action("") is None and parse_action(None) is None


def test_an_action_given_its_words_keeps_everything_else():
    chat = Action("chat with", "Bob", "a note", tags=("norm",))
    assert chat.with_content("hello") == Action("chat with", "Bob", "a note", "hello", ("norm",))


@pytest.mark.parametrize("text, expected", [
    ("smoke a cigarette", "smoking a cigarette"), ("leave a tip", "leaving a tip"), ("be quiet", "being quiet"),
    ("see a friend", "seeing a friend"), ("dye hair", "dyeing hair"), ("tie shoes", "tying shoes"),
    ("lie down", "lying down"), ("run a lap", "running a lap"), ("chat", "chatting"), ("sit down", "sitting down"),
    ("visit a friend", "visiting a friend"), ("listen to music", "listening to music"), ("read", "reading"),
    ("saw a plank", "sawing a plank"), ("fix a chair", "fixing a chair"), ("play music", "playing music"),
])
def test_a_behaviour_is_told_in_the_ing_form_by_the_spelling_rules(text, expected):
    """What others see someone doing ('who is running a lap'): a user's own behaviours too."""
    from socialsim.spaces.world import gerund

    assert gerund(text) == expected


def test_what_one_sees_includes_furniture_states_and_ones_own_doing(world):
    ann = world.agents["Ann"]
    world.furniture["foodshelf 1"].states = {"open", "stocked"}
    world.execute(ann, Action("do", "speak softly"), 1)
    text = world.observe(ann)
    assert "the foodshelf 1 in the open stocked status" in text and "the stoveburner 1," in text
    assert text.endswith("You are speaking softly.")


def test_the_actions_offered_follow_the_hands_the_furniture_and_the_place(world):
    ann, cid = world.agents["Ann"], world.agents["Cid"]
    offered = {a.text for a in world.action_space(cid)}
    assert not any(t.startswith("leave") for t in offered)  # outside: nowhere to leave to
    assert "leave Hobbs Cafe kitchen" in {a.text for a in world.action_space(ann)}
    assert world.execute(ann, Action("take", "sinkbasin 1", "plate 1"), 1).ok
    offered = {a.text for a in world.action_space(ann)}
    assert {"put plate 1 in/on foodshelf 1", "use sinkbasin 1 to handle plate 1"} <= offered
    assert "use foodshelf 1 to handle plate 1" not in offered  # a shelf does nothing to what it handles
    assert world.execute(ann, Action("take", "foodshelf 1", "sandwich 1"), 2).ok
    world.items["coffee cup 1"].holder = "foodshelf 1"  # something left to take
    assert not any(a.verb == "take" for a in world.action_space(ann))  # both hands full


def test_more_impossible_actions_are_refused_with_the_reason(world):
    ann = world.agents["Ann"]
    assert world.execute(ann, Action("take", "sinkbasin 1", "plate 1"), 1).ok
    assert world.execute(ann, Action("take", "foodshelf 1", "sandwich 1"), 1).ok
    world.items["coffee cup 1"].holder = "foodshelf 1"
    cases = {
        Action("leave", "Hobbs Cafe counter"): "you are not in Hobbs Cafe counter",
        Action("use", "sinkbasin 1", "coffee cup 1"): "you are not holding coffee cup 1",
        Action("take", "foodshelf 1", "coffee cup 1"): "your hands are full",
        Action("chat with", "Ann"): "there is nobody called Ann",
    }
    for action, reason in cases.items():
        outcome = world.execute(ann, action, step=2)
        assert not outcome.ok and outcome.reason == reason, action.text


def test_a_put_down_item_leaves_the_hands_and_lies_on_the_furniture(world):
    ann = world.agents["Ann"]
    world.execute(ann, Action("take", "sinkbasin 1", "plate 1"), 1)
    assert world.execute(ann, Action("put", "foodshelf 1", "plate 1"), 2).ok
    assert world.held_by("Ann") == [] and {i.name for i in world.items_on("foodshelf 1")} == {"sandwich 1", "plate 1"}


def test_only_what_was_done_is_a_fact_or_heard(world):
    """A refused act is recorded (with what it would have been) but is no world fact; a refused chat
    reaches nobody."""
    ann, bob = world.agents["Ann"], world.agents["Bob"]
    refused = world.execute(ann, Action("do", "eat a meal", tags=("meal",)), 3)  # not in the kitchen
    assert not refused.ok and refused.tags == ("meal",) and world.events[-1].tags == ("meal",)
    assert world.facts("meal") == []
    world.execute(bob, Action("do", "smoke a cigarette"), 3)
    world.execute(bob, Action("do", "smoke a cigarette"), 4)
    assert [e.step for e in world.facts("smoke")] == [3, 4] and [e.step for e in world.facts("smoke", 4)] == [4]
    world.execute(ann, Action("chat with", "Cid", content="hello"), 5)  # Cid is outside
    assert world.heard_by("Cid", 0) == []
    world.execute(ann, Action("chat with", "Bob", content="hello"), 5)
    assert [e.agent for e in world.heard_by("Bob", 5)] == ["Ann"]
