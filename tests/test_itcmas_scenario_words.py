"""No world is built into ITCMA-S: the system message of every operation an agent asks is the
scenario's own ``context``, the words the rules read a goal by are the scenario's ``itcmas:``
fields (none by default), and a rule-made chat names only the scenario's places. On the rules
baseline chats start only when the goal names one of the scenario's ``social_words``."""

from __future__ import annotations

import pytest
import yaml

from socialsim.agents.itcmas.operations import InTheWorld, world_system
from socialsim.agents.itcmas.settings import ITCMASConfig
from socialsim.model.society import SocietyModel
from socialsim.scenarios.loader import DATA_DIR, load_scenario

WORD_FIELDS = ("social_words", "explore_words", "rest_furniture", "goal_objects")


def asked(monkeypatch, watch_asks, scenario, steps=3, **params):
    """(op, ctx, answer) of every question the agents asked in a short rules run."""
    seen = []
    watch_asks(monkeypatch, lambda op, ctx, agent_id, answer: seen.append((op, ctx, answer)))
    model = SocietyModel(scenario, arch="itcmas", model="rules", rng=2, **params)
    for _ in range(steps):
        model.step()
    return model, seen


def irollan_copy(tmp_path, **itcmas):
    """IrollanValley with its ``itcmas:`` section changed (a value None removes the field)."""
    spec = yaml.safe_load((DATA_DIR / "irollan-valley.yaml").read_text())
    for key, value in itcmas.items():
        spec["itcmas"].pop(key, None) if value is None else spec["itcmas"].__setitem__(key, value)
    path = tmp_path / "valley.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def test_the_word_lists_are_declared_documented_and_empty_by_default():
    config = ITCMASConfig()
    for name in WORD_FIELDS:
        assert ITCMASConfig.model_fields[name].description, name
        assert not getattr(config, name), name
    assert "IrollanValley" not in config.goal


@pytest.mark.parametrize("scenario", ["irollan-valley", "makerspace"])
def test_every_agent_operation_is_told_the_scenarios_own_world(monkeypatch, watch_asks, scenario):
    """A user's scenario run with --arch itcmas is told its own context, never IrollanValley."""
    context = load_scenario(scenario).context
    _, seen = asked(monkeypatch, watch_asks, scenario)
    agents_ops = [(op, ctx) for op, ctx, _ in seen if isinstance(op, InTheWorld)]
    assert {op.name for op, _ in agents_ops} >= {"Elim", "Protention", "ITCMAChooseAction", "SocialFilter"}
    for op, ctx in agents_ops:
        system = op.messages(ctx)[0]
        assert system == {"role": "system", "content": world_system(context)}, op.name
        assert context.strip() in system["content"]
    if scenario != "irollan-valley":
        texts = [m["content"] for op, ctx, _ in seen for m in op.messages(ctx)]
        assert not [t for t in texts if "IrollanValley" in t or "canteen" in t.lower()]


def test_without_the_scenarios_words_no_goal_word_rates_an_action_up(monkeypatch, watch_asks, tmp_path):
    """IrollanValley with its words removed: its goal still says "explore, meet the others, eat,
    read and rest", but no built-in vocabulary reads it: a chat rates 2 (4 only to someone who
    spoke first), a new place 3, resting furniture and things the goal does not name 2."""
    bare = irollan_copy(tmp_path, **dict.fromkeys(WORD_FIELDS))
    _, seen = asked(monkeypatch, watch_asks, bare, steps=4)
    elim = [(ctx, answer.value.value) for op, ctx, answer in seen if op.name == "Elim"]
    assert elim
    for ctx, mu in elim:
        expected = {"chat with": 4 if ctx.spoke_to_me else 2, "go to": 3, "use": 2, "take": 2}.get(ctx.verb, 2)
        assert mu == expected, (ctx.action, mu)
    _, seen = asked(monkeypatch, watch_asks, "irollan-valley", steps=4)  # with IrollanValley's words
    rated = {(ctx.verb, answer.value.value) for op, ctx, answer in seen if op.name == "Elim"}
    assert {("chat with", 4), ("go to", 4), ("take", 4)} <= rated


def test_a_rule_made_chat_names_only_the_scenarios_public_rooms(monkeypatch, watch_asks):
    model, seen = asked(monkeypatch, watch_asks, "irollan-valley", steps=12)
    chats = [ctx for op, ctx, _ in seen if op.name == "ITCMAChat"]
    assert chats
    public = {"Public Canteen", "Public Reading Room"}  # the areas that are nobody's home and not outside
    assert set(model.society.public_rooms) == public
    for ctx in chats:
        assert set(ctx.places) == public - {ctx.place}


@pytest.mark.parametrize(("field", "value", "message"), [
    ("rest_furniture", ["bed", "sofa"], "rest_furniture: 'sofa' is no furniture kind of the map"),
    ("goal_objects", {"eat": ["food", "cake"]}, "goal_objects.eat: 'cake' is no item kind of the map"),
    ("social_words", ["meet", " "], "social_words: an empty word would match everything"),
])
def test_a_word_the_map_does_not_have_is_refused_by_name(field, value, message):
    with pytest.raises(ValueError, match=message):
        SocietyModel("irollan-valley", model="rules", rng=1, **{field: value})


# --- the rules null model's society hinges on the goal naming a social word -------------------------------
NEIGHBOURLY = "Live well in IrollanValley: explore, get acquainted with the neighbours, eat, read and rest."


def chats_started(**params) -> int:
    model = SocietyModel("irollan-valley", model="rules", rng=1, **params)
    for _ in range(20):
        model.step()
    actions = model.datacollector.get_table_dataframe("itcmas_actions")
    return int(actions["action"].str.startswith("chat with").sum())


def test_on_the_rules_baseline_chats_start_only_when_the_goal_names_a_social_word():
    """A result of the null model, not a defect to tune away (docs/itcmas.md): the same wish in other
    words starts no chat at all, so no society can form; naming the goal's word a social word
    brings the chats back."""
    assert chats_started() > 0
    assert chats_started(goal=NEIGHBOURLY) == 0
    assert chats_started(goal=NEIGHBOURLY, social_words=["acquainted"]) > 0


# --- the settings as the rules and the equations read them ----------------------------------------------------
def test_the_vocabulary_is_the_scenarios_words_lower_cased_and_trimmed():
    from socialsim.agents.itcmas.rules import Vocabulary
    from socialsim.agents.itcmas.settings import load_config
    config = load_config({"social_words": [" Meet ", "CHAT"], "explore_words": ["Explore"]},
                         {"rest_furniture": ["Bed"], "goal_objects": {" Eat": ["Food ", "BREAD"]}})
    assert config.vocabulary == Vocabulary(("meet", "chat"), ("explore",), ("bed",), {"eat": ("food", "bread")})
    with pytest.raises(ValueError, match="goal_objects: an empty word would match everything"):
        load_config(None, {"goal_objects": {"eat": ["food", "  "]}})


def test_the_similarity_and_pad_weights_reach_the_equations_and_must_sum_to_one():
    from socialsim.agents.itcmas.phenomenal import SimWeights
    from socialsim.agents.itcmas.settings import load_config
    config = load_config({"similarity": {"gamma": 0.5, "theta": 0.3, "phi": 0.2, "a": 0.1, "pos": 0.9}},
                         {"emotion": {"P": 0.2, "A": 0.5, "D": 0.3}})
    assert config.sim_weights == SimWeights(gamma=0.5, theta=0.3, phi=0.2, a=0.1, pos=0.9)
    assert (config.emotion_weights.P, config.emotion_weights.A, config.emotion_weights.D) == (0.2, 0.5, 0.3)
    with pytest.raises(ValueError, match=r"similarity: .*weights a \+ pos must sum to 1 \(they sum to 1.1\)"):
        load_config(None, {"similarity": {"a": 0.5, "pos": 0.6}})
    with pytest.raises(ValueError, match=r"similarity: .*weights gamma \+ theta \+ phi must sum to 1 \(they sum to 0.9\)"):
        load_config(None, {"similarity": {"gamma": 0.3, "theta": 0.3, "phi": 0.3}})
    assert load_config(None, {"s_min": 1.0, "s_max": 1.0}).s_max == 1.0  # equal bounds are allowed


def test_a_misspelt_goal_trait_is_named_not_replaced_by_the_section_s_goal():
    """traits.gaol ran with the section's goal for that agent, without a word."""
    from socialsim.model.society import SocietyModel
    from socialsim.scenarios.loader import load_scenario
    spec = load_scenario("irollan-valley")
    spec.agents[1].traits = {"gaol": "read every book"}
    with pytest.raises(ValueError) as caught:
        SocietyModel(spec, model="rules")
    assert str(caught.value).endswith("irollan-valley.yaml: invalid itcmas traits: agents[1] (SG).traits.gaol: "
                                      "not a trait itcmas reads (did you mean 'goal'?)")


def test_invalid_itcmas_parameters_are_named_together_with_where_they_come_from():
    from socialsim.agents.itcmas.settings import load_config
    with pytest.raises(ValueError) as caught:
        load_config({"goal": ""}, {"elim_threshold": 9})
    assert str(caught.value) == ("the itcmas section: invalid itcmas parameters: goal: String should have at least "
                                 "1 character (got ''); elim_threshold: Input should be less than or equal to 5 (got 9)")
    with pytest.raises(ValueError, match=r"^valley.yaml: invalid itcmas parameters: \(top level\): s_max \(0.5\) must be at least "
                                         r"s_min \(0.6\)"):
        load_config({"s_min": 0.6}, {"s_max": 0.5}, "valley.yaml")
