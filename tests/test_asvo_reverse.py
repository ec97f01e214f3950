"""Reverse-coded desires (larger = worse) are honoured by every rule, not only by the expected
value and decay: a good outcome lowers them, the check expects the fall, outcome simulation and
theory of mind predict it, and selection counts a fall toward E as closing the gap. A scenario
naming an unknown desire in ``reverse`` or ``initial`` is refused, naming the field."""

import random

import pytest
import yaml

from socialsim.agents.asvo import operations as ops
from socialsim.agents.asvo.svo import channels_from_effects, predicted_channels, rule_update
from socialsim.agents.desires import DESIRES, LinearDecay, expected_value, gap_closure
from socialsim.model.society import SocietyModel
from socialsim.scenarios.loader import scenario_path

GOOD = channels_from_effects(0.25, 0.25)  # a good, fair step for a prosocial agent
E = expected_value("moderately", reverse=True)  # 2.0
RNG = random.Random(0)


def test_a_good_outcome_lowers_a_reverse_coded_desire_by_as_much_as_it_raises_a_plain_one():
    plain, reverse = rule_update("comfort", 5, GOOD, "prosocial"), rule_update("comfort", 5, GOOD, "prosocial", True)
    assert plain > 5 > reverse and plain - 5 == 5 - reverse
    assert rule_update("sense of superiority", 5, GOOD, "prosocial", True) == 5  # untouched either way


def update(**kw):
    return ops.UpdateContext("Ann", "d", "prosocial", "comfort", 5.0, "share lunch", "it went well", GOOD, **kw)


def test_the_update_rule_and_its_check_expect_the_fall():
    level = ops.UPDATE_DESIRE.rule(update(reverse=True), RNG).level
    assert level < 5 and level == rule_update("comfort", 5, GOOD, "prosocial", True)
    assert ops.rule_reasonable(update(reverse=True, proposed=level))[0]
    assert not ops.rule_reasonable(update(reverse=True, proposed=rule_update("comfort", 5, GOOD, "prosocial")))[0]
    assert "comfort fall" in ops.REFLECT_UPDATE.rule(update(reverse=True, proposed=8), RNG).text


def test_outcome_simulation_predicts_the_fall():
    desires = dict.fromkeys(DESIRES, 5.0)
    ctx = ops.OutcomeContext("Ann", "prosocial", desires, "share lunch", 0.25, 0.25, reverse=frozenset({"comfort"}))
    got = ops.record_values(ops.SIMULATE_OUTCOME.rule(ctx, RNG))
    assert got["comfort"] < 5 < got["joyfulness"]


def test_theory_of_mind_lets_a_reverse_coded_desire_fall_with_good_news_and_grow_with_time():
    decay = LinearDecay(per_hour=3.0, step_minutes=60)
    prior = dict.fromkeys(DESIRES, 5.0)

    def predicted(reverse):
        ctx = ops.MindContext("Ann", "a school", [], "Bob", "helps a classmate", "Cooperation", dict(prior), decay,
                              reverse)
        return ops.record_values(ops.PREDICT_OBSERVED_DESIRES.rule(ctx, RNG))["comfort"]

    moved = rule_update("comfort", 5.0, predicted_channels("Cooperation"), "altruistic")
    assert predicted(frozenset()) == round(decay.apply(moved))
    assert predicted(frozenset({"comfort"})) == round(decay.apply(10 - moved, reverse=True))


def test_selection_counts_a_fall_toward_e_as_closing_the_gap():
    assert gap_closure({"comfort": 5.0}, {"comfort": 2.0}, {"comfort": E}, frozenset({"comfort"})) == 3.0
    now = {"comfort": 5.0}
    ctx = ops.SelectContext("Ann", None, now, {"comfort": E}, ["worse", "better"], [{"comfort": 8.0}, {"comfort": 2.0}],
                            frozenset({"comfort"}))
    assert all(ops.SELECT_ACTION.rule(ctx, random.Random(s)).index == 1 for s in range(10))
    plain = ops.SelectContext("Ann", None, now, {"comfort": 8.0}, ["worse", "better"],
                              [{"comfort": 8.0}, {"comfort": 2.0}])
    assert ops.SELECT_ACTION.rule(plain, RNG).index == 0


def scenario(tmp_path, **asvo):
    data = yaml.safe_load(scenario_path("workplace-meso").read_text())
    data["asvo"].update(asvo)
    path = tmp_path / "reverse.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_an_agent_hands_its_reverse_coded_desires_to_every_rule(tmp_path, monkeypatch, watch_asks):
    seen = {}

    def asked(op, ctx, agent_id, answer):
        if hasattr(ctx, "reverse"):
            seen.setdefault(op.name, set()).add(ctx.reverse if isinstance(ctx.reverse, frozenset)
                                                else (ctx.reverse, ctx.desire == "comfort"))

    watch_asks(monkeypatch, asked)
    model = SocietyModel(scenario(tmp_path, reverse=["comfort"]), model="rules", rng=1, update_noise=0.0)
    for _ in range(2):
        model.step()
    comfort = {frozenset({"comfort"})}
    assert {op: s for op, s in seen.items() if op not in ("UpdateDesire", "CheckUpdate")} == {
        "SimulateOutcome": comfort, "SelectAction": comfort, "PredictObservedDesires": comfort,
        "PredictGuessedDesires": comfort}
    for op in ("UpdateDesire", "CheckUpdate"):  # only comfort's update is told it is reverse-coded
        assert seen[op] == {(True, True), (False, False)}, op
    updates = model.datacollector.get_table_dataframe("asvo_updates")
    assert (updates["before"] != updates["after"]).any()


def test_unknown_desires_in_reverse_or_initial_are_refused_naming_the_field(tmp_path):
    with pytest.raises(ValueError, match=r"asvo\.reverse: unknown desire 'comfrot' \(desires: comfort, "):
        SocietyModel(scenario(tmp_path, reverse=["comfrot"]), model="rules")
    with pytest.raises(ValueError, match=r"asvo\.initial: unknown desire 'joyfulnes' \(desires: comfort, "):
        SocietyModel(scenario(tmp_path, initial={"joyfulnes": 9, "comfort": 3}), model="rules")
    with pytest.raises(ValueError, match=r"asvo\.expected_defaults: unknown desire 'pride'"):
        SocietyModel(scenario(tmp_path, expected_defaults={"pride": 3}), model="rules")
    assert SocietyModel(scenario(tmp_path, reverse=["comfort"], initial={"comfort": 3}), model="rules")


def test_an_agents_own_degrees_and_start_values_are_checked_like_the_sections(tmp_path):
    """traits.degrees and traits.initial of one agent were read unchecked: a misspelt desire was ignored."""
    data = yaml.safe_load(scenario_path("workplace-meso").read_text())
    first = data["agents"][0]
    for traits, message in (({"initial": {"joyfulnes": 9}}, r"agent '.*': invalid traits: traits\.initial: unknown desire 'joyfulnes'"),
                            ({"degrees": {"comfort": "hugely"}}, r"invalid traits: traits\.degrees\.comfort: unknown degree 'hugely'")):
        first["traits"] = {**first.get("traits", {}), **traits}
        path = tmp_path / "traits.yaml"
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(ValueError, match=message):
            SocietyModel(str(path), model="rules")
        first["traits"] = {k: v for k, v in first["traits"].items() if k not in traits}
    first["traits"] = {**first.get("traits", {}), "initial": {"comfort": 2}, "degrees": {"comfort": "slightly"}}
    path.write_text(yaml.safe_dump(data))
    model = SocietyModel(str(path), model="rules")
    assert next(a for a in model.agents if a.name == first["name"]).state.values["comfort"] == 2
