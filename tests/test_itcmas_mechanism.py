"""ITCMA-S + LTRHA mechanisms on the rules engine (and a scripted LLM for the LLM paths): a full
paper-length run, resources by eq. 19, the social filter, the ablation switches, determinism,
parameter validation and the IrollanValley world."""

import json
import math
import re

import pandas as pd
import pytest

from socialsim.agents.itcmas.agent import FILTERED_PREFIX, ITCMASAgent, action_type
from socialsim.agents.itcmas.ltrha import rank_deltas
from socialsim.agents.itcmas.operations import ELIM, ranking_model
from socialsim.agents.itcmas.settings import PAPER_ROUTES
from socialsim.llm import operations as ops_registry
from socialsim.llm.questions import AnswerError, IntegerQuestion, RecordQuestion
from socialsim.model.society import SocietyModel
from socialsim.spaces.actions import Action

NAMES = ["AY", "LL", "MD", "SG", "WL", "WM"]


def run(steps, **params):
    model = SocietyModel("irollan-valley", model="rules", rng=params.pop("rng", 5), **params)
    for _ in range(steps):
        model.step()
    return model


@pytest.fixture(scope="module")
def paper_run():
    return run(75)


def actions_of(model):
    return model.datacollector.get_table_dataframe("itcmas_actions")


# --- the paper-length run -----------------------------------------------------------------------------
def test_full_paper_run_completes(paper_run):
    frame = paper_run.datacollector.get_model_vars_dataframe()
    assert list(frame["step"]) == list(range(1, 76))
    actions = actions_of(paper_run)
    assert len(actions) == 75 * 6
    assert set(actions["status"]) <= {"done", "failed", "refused", "filtered"}
    assert paper_run.society.matrix_runs == 15  # every 5 steps
    agents = paper_run.datacollector.get_agent_vars_dataframe()
    assert agents["driver"].map(math.isfinite).all()
    assert agents[["P", "A", "D"]].abs().max().max() < 1.0
    assert (agents["D"] >= 0).all()  # diff ≥ 0, so D = tanh(diff) ≥ 0 as in the paper's logs
    assert len(paper_run.datacollector.get_table_dataframe("interactions")) > 0


def test_resources_move_exactly_as_eq19_says(paper_run):
    from socialsim.agents.itcmas.ltrha import gini

    matrix = paper_run.datacollector.get_table_dataframe("matrix")
    expected = rank_deltas(6, 0.0, 1.0)  # the scenario's s_min, s_max
    agents = paper_run.datacollector.get_agent_vars_dataframe().reset_index()
    resources = agents.pivot_table(index="Step", columns="name", values="resources")
    for row in matrix.itertuples():
        ranking = row.ranking.split(",")
        assert sorted(ranking) == NAMES
        deltas = json.loads(row.deltas)
        assert [deltas[n] for n in ranking] == pytest.approx(list(expected))
        before = resources.loc[row.step - 1] if row.step > 1 else pd.Series(1.0, index=NAMES)
        assert (resources.loc[row.step] - before).to_dict() == pytest.approx(deltas)
    # between reallocations nothing changes, and an even n conserves the total (6 × 1)
    changed = resources.diff().abs().sum(axis=1)
    assert set(changed[changed > 0].index) <= set(matrix["step"])
    assert paper_run.datacollector.get_model_vars_dataframe()["resources_total"].tolist() == pytest.approx([6.0] * 75)
    # how they are shared, each step, as the sweep's runs table and the export carry it (its final value)
    ginis = paper_run.datacollector.get_model_vars_dataframe()["resources_gini"]
    assert ginis.tolist() == pytest.approx([gini(resources.loc[step]) for step in resources.index])
    assert ginis.iloc[0] == 0 and ginis.iloc[-1] > 0.1  # equal shares at first; unequal once the matrix ran


def test_filtered_actions_are_never_executed(paper_run):
    filtered = paper_run.datacollector.get_table_dataframe("filtered_actions")
    assert len(filtered) > 0
    executed = {(e.agent, e.step) for e in paper_run.world.events}
    for row in filtered.itertuples():
        assert (row.agent, row.step) not in executed
    logged = actions_of(paper_run).query("status == 'filtered'")
    assert logged["action"].str.startswith(FILTERED_PREFIX).all()
    assert len(logged) == len(filtered) == paper_run.society.filtered_total


def test_a_detrimental_action_is_filtered_and_not_executed():
    model = SocietyModel("irollan-valley", model="rules", rng=1)
    ay = model.agent_named("AY")
    model.world.place(ay, "LL's Home")
    ay.intent = Action("take", "bookshelf 1", "book 1")
    model.llm.run_phase([ay], lambda a: a.judge_intent(), model.random)
    assert ay.filter_verdict
    ay.act()
    assert model.world.items["book 1"].holder == "bookshelf 1"
    assert not model.world.events
    assert ay.last_action == "(This action has been filtered by LTRHA) take book 1 from bookshelf 1"
    assert not ay.last_outcome.ok
    assert len(model.datacollector.get_table_dataframe("filtered_actions")) == 1


def test_llm_filter_blocks_everything_and_a_bad_ranking_falls_back(scripted):
    scripted(replies={"harm social interaction": ["Yes"], "Rate it from 1": ["4"],
                      "choose one action by its number": ['{"action": 1, "thought": "ok"}'],
                      "Rank all agents": ['{"ranking": ["AY"]}']}, default="You are in Outside.")
    model = SocietyModel("irollan-valley", model="openai/test-model", rng=2, matrix_every=1)
    model.step()
    assert model.world.events == []  # every chosen action was filtered
    assert model.society.filtered_total == 6
    # the ranking stayed invalid after one repair: the status quo order (all 1.0, so the order the
    # RNG listed them in): every rank's delta is given out once, whoever gets it
    resources = sorted(a.resources for a in model.agents)
    assert resources == pytest.approx(sorted(1.0 + rank_deltas(6, 0.0, 1.0)))
    assert model.llm.ledger.failures["RankAgents"] == 2


# --- ablations ---------------------------------------------------------------------------------------
STEPS = 12


def driver_trace_ok(actions, base):
    """Check each agent's driver against eq. 13-15 (or base ITCMA's) from the recorded P, A, D."""
    for _, rows in actions.sort_values("step").groupby("agent"):
        driver, bias, a_prev = 1.0, 0.0, 0.0
        for r in rows.itertuples():
            if base:
                driver += 0.4 * r.P + 0.3 * r.A + 0.3 * r.D
            else:
                new_bias = 0.4 * r.P + 0.3 * r.D + 0.3 * (1 - abs(r.A - a_prev))
                driver += abs(new_bias - bias) / 2 * new_bias
                bias = new_bias
            a_prev = r.A
            assert r.driver == pytest.approx(driver)
    return True


@pytest.mark.parametrize("ablation, ltrha, compressed, driver_module", [
    ("base", False, False, False),
    ("ltrha", True, False, False),
    ("memory", False, True, False),
    ("driver", False, False, True),
    ("full", True, True, True),
])
def test_ablation_switches_modules(ablation, ltrha, compressed, driver_module):
    model = run(STEPS, ablation=ablation)
    dc = model.datacollector
    ledger = model.llm.ledger.frame()
    ops = set(ledger["op"])
    assert (len(dc.get_table_dataframe("topics")) > 0) is ltrha
    assert (model.society.matrix_runs == STEPS // 5) is ltrha
    assert ("RankAgents" in ops) is ltrha and ("SocialFilter" in ops) is ltrha
    resources = dc.get_agent_vars_dataframe()["resources"]
    assert resources.notna().all() if ltrha else resources.isna().all()
    memory = dc.get_agent_vars_dataframe()["memory_count"].xs(STEPS, level="Step")
    assert (memory < STEPS).all() if compressed else (memory == STEPS).all()
    assert driver_trace_ok(actions_of(model), base=not driver_module)
    assert {"Elim", "Protention", "ITCMAChooseAction"} <= ops  # the individual agent always runs


def test_driver_only_records_no_topic_and_runs_no_matrix():
    model = run(10, ablation="driver")
    assert model.datacollector.get_table_dataframe("topics").empty
    assert model.datacollector.get_table_dataframe("matrix").empty
    assert all(t == {} for t in model.datacollector.get_model_vars_dataframe()["topics"])
    assert model.society.filtered_total == 0


# --- per-step mechanics --------------------------------------------------------------------------------
def test_elimination_threshold_is_respected():
    model = SocietyModel("irollan-valley", model="rules", rng=9)
    for _ in range(6):
        model.step()
        for agent in model.agents:
            ratings = agent.elim_ratings
            assert all(1 <= v <= 5 for v in ratings.values())
            action = agent.last_action.removeprefix(FILTERED_PREFIX)
            chosen = next(t for t in ratings if action == t or action.startswith(t + ":")
                          or action_type(model.world.parse(action) or Action("do", action)) == t)
            if max(ratings.values()) >= 3:
                assert ratings[chosen] >= 3
            assert agent.candidates_n <= agent.cfg.max_candidates


def test_topic_per_area_follows_eq17():
    model = run(3)
    topics = model.datacollector.get_table_dataframe("topics")
    last = topics[topics["step"] == 3]
    for row in last.itertuples():
        members = [model.agent_named(n) for n in row.agents.split(",")]
        expected = sum(a.emotion.P * (a.emotion.A + 1) / 2 for a in members) / len(members)
        assert row.topic == pytest.approx(expected)


def test_runs_are_reproducible():
    a, b = run(4, rng=11), run(4, rng=11)
    pd.testing.assert_frame_equal(a.datacollector.get_agent_vars_dataframe(), b.datacollector.get_agent_vars_dataframe())
    c = run(4, rng=12)
    assert not a.datacollector.get_agent_vars_dataframe()["action"].equals(c.datacollector.get_agent_vars_dataframe()["action"])


# --- parameters and operations ----------------------------------------------------------------------------
@pytest.mark.parametrize("params, message", [
    ({"ablation": "everything"}, "ablation"),
    ({"emotion": {"P": 0.5, "A": 0.5, "D": 0.5}}, "emotion: weights P + A + D must sum to 1"),
    ({"s_min": 2.0, "s_max": 1.0}, "s_max"),
    ({"elim_threshold": 7}, "elim_threshold"),
    ({"homes": {"AY": "Atlantis"}}, "homes.AY: unknown area"),
    ({"matrix_evry": 3}, "matrix_evry"),
])
def test_bad_parameters_name_the_field(params, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        SocietyModel("irollan-valley", model="rules", rng=1, **params)


def test_ranking_must_be_a_permutation_and_elim_a_rating():
    question = RecordQuestion(ranking_model(tuple(NAMES)))
    assert question.parse(json.dumps({"ranking": list(reversed(NAMES))})).ranking[0] == "WM"
    with pytest.raises(AnswerError, match="exactly once"):
        question.parse(json.dumps({"ranking": ["AY", "AY", "MD", "SG", "WL", "WM"]}))
    with pytest.raises(AnswerError):
        IntegerQuestion(1, 5).parse("6")
    assert isinstance(ELIM.question(None), IntegerQuestion)


def test_modules_follow_the_papers_split_and_route(scripted):
    modules = {op.name: op.module for op in ops_registry.all_operations() if op.module in PAPER_ROUTES}
    assert modules["Elim"] == "elimination" and modules["Protention"] == "protention"
    assert modules["RankAgents"] == "matrix" and modules["ITCMAChooseAction"] == "action"
    assert modules["ITCMAChat"] == "chat" and modules["SocialFilter"] == "filter"
    scripted(replies={"choose one action by its number": ['{"action": 1, "thought": "ok"}']}, default="No")
    model = SocietyModel("irollan-valley", model="openai/test-model", rng=2,
                         routes={"elimination": "rules", "protention": "rules"})
    model.step()
    engines = model.llm.ledger.frame().groupby("op")["engine"].agg(set).to_dict()
    assert engines["Elim"] == {"rules"} and engines["Protention"] == {"rules"}
    assert engines["ITCMAChooseAction"] == {"llm"} and engines["SocialFilter"] == {"llm"}


# --- the IrollanValley world ---------------------------------------------------------------------------------
def test_irollan_valley_world_and_json_answer():
    model = SocietyModel("irollan-valley", model="rules", rng=1)
    world = model.world
    assert len(world.areas) == 9 and sorted(world.doors["Outside"]) == sorted(a for a in world.areas if a != "Outside")
    assert {a.name: a.area for a in model.agents} == {n: f"{n}'s Home" for n in NAMES}
    ll = model.agent_named("LL")
    answer = json.loads(json.dumps(world.describe(ll)))
    assert answer["description"].startswith("You are in LL's Home. Looking around you, you see a door to Outside")
    assert "take book 1 from bookshelf 1" in answer["action_space"]
    assert world.execute(ll, Action("take", "storagebin 1", "food 12"), 1).ok
    assert "use sinkbasin 1 to handle food 12" in world.describe(ll)["action_space"]
    world.execute(ll, Action("use", "sinkbasin 1", "food 12"), 1)
    assert world.items["food 12"].states == {"clean", "damp"}
    world.execute(ll, Action("use", "stoveburner 1", "food 12"), 1)
    assert world.items["food 12"].states == {"clean", "hot"}
    assert "the LL's clothes 2 placed on the wardrobe 2" in world.observe(ll)


def test_itcmas_is_registered_with_its_report():
    from socialsim.agents import agent_class

    assert agent_class("itcmas") is ITCMASAgent


def test_pleasure_and_topic_keep_moving_over_the_whole_run(paper_run):
    """Desire and pain are scaled so tanh neither pins nor flattens P: over the last 20 of 75
    steps most agents' P still moves, and so does the topic of the places they share."""
    actions = actions_of(paper_run)
    late = actions[actions["step"] > 55]
    assert (late.groupby("agent")["P"].std() > 0.02).mean() >= 0.5
    assert late["P"].abs().max() < 0.999
    topics = paper_run.datacollector.get_table_dataframe("topics")
    assert topics[topics["step"] > 55]["topic"].std() > 0.02
