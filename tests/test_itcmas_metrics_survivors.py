"""The ITCMA-S measurements on hand-built inputs: cliques, leader and isolated agents of an
interaction graph; the measured shares behind the rule judge (verb entropy, reversals, chats,
executed actions, places); the judge's table. Written after mutmut on ``agents/itcmas/metrics.py``
and the judge rule showed them pinned only through whole runs."""

import math

import networkx as nx
import pandas as pd
import pytest

from socialsim.agents.itcmas import metrics
from socialsim.agents.itcmas.operations import JUDGE, JudgeContext


def graph(*edges):
    g = nx.DiGraph()
    g.add_nodes_from("ABCDE")
    for a, b, w in edges:
        g.add_edge(a, b, weight=w)
    return g


def test_a_clique_needs_three_agents_tied_both_ways_counted_and_at_least_min_weight():
    g = graph(("A", "B", 1), ("B", "A", 1), ("B", "C", 2), ("C", "A", 1), ("D", "A", 1))
    s = metrics.social_structure(g)
    assert s["cliques"] == [["A", "B", "C"]] and s["isolated"] == ["E"]
    assert s["strength"] == {"A": 4, "B": 4, "C": 3, "D": 1, "E": 0}  # A-B counts both directions
    assert s["leader"] == "A"  # three partners
    assert s["centrality"]["A"] == 0.75 and s["centrality"]["E"] == 0.0
    strong = metrics.social_structure(g, min_weight=2)
    assert strong["cliques"] == []  # C-A has weight 1
    assert metrics.social_structure(graph(("A", "B", 2), ("B", "C", 2), ("C", "A", 2)), min_weight=2)["cliques"] == [
        ["A", "B", "C"]]


def test_a_tie_at_the_top_means_no_leader_and_more_interactions_break_equal_partners():
    assert metrics.social_structure(graph(("A", "B", 1), ("C", "D", 1)))["leader"] is None
    uneven = metrics.social_structure(graph(("A", "B", 1), ("A", "C", 1), ("D", "B", 3), ("D", "C", 2)))
    assert uneven["leader"] == "D"  # A and D both have two partners; D has more interactions
    assert metrics.social_structure(graph())["leader"] is None  # nobody interacted
    lonely = nx.DiGraph()
    lonely.add_edge("A", "B", weight=2)
    assert metrics.social_structure(lonely)["leader"] is None  # two agents, equally central


def test_cliques_are_listed_largest_first_then_by_name():
    edges = [(a, b, 1) for a, b in [("A", "B"), ("B", "C"), ("A", "C"), ("C", "D"), ("D", "E"), ("C", "E")]]
    assert metrics.social_structure(graph(*edges))["cliques"] == [["A", "B", "C"], ["C", "D", "E"]]
    four = [(a, b, 1) for a in "ABCD" for b in "ABCD" if a < b] + [("C", "E", 1), ("D", "E", 1)]
    assert metrics.social_structure(graph(*four))["cliques"] == [["A", "B", "C", "D"], ["C", "D", "E"]]


@pytest.mark.parametrize(("action", "verb"), [
    ("go to the canteen", "go to"), ("use chair", "use"), ("leave the hall", "leave"), ("take food", "take"),
    ("put book on table", "put"), ("chat with LL", "chat with"), ("sing loudly", "other"),
    ("(This action has been filtered by LTRHA) chat with LL", "chat with")])
def test_verbs_are_read_from_the_action_text_even_when_filtered(action, verb):
    assert metrics._verb(action) == verb


def rows(*actions, agent="AY"):
    return pd.DataFrame([{"step": i + 1, "agent": agent, "area": area, "thought": "", "action": a, "status": s}
                         for i, (a, area, s) in enumerate(actions)])


def test_judge_contexts_measure_chats_execution_places_reversals_and_verb_variety():
    frame = pd.concat([
        rows(("go to hall", "hall", "done"), ("go to room", "room", "done"), ("take book", "room", "done"),
             ("put book on table", "room", "done"), ("chat with LL", "room", "done"),
             ("chat with LL", "room", "refused"), ("use chair", "room", "failed")),
        rows(("use chair", "hall", "done"), agent="LL")])
    ay, ll = metrics.judge_contexts(frame, areas_total=4)
    assert (ay.agent, ay.steps, ay.executed, ay.chats_started, ay.areas_visited) == ("AY", 7, 5, 1, 2)
    assert ay.reversals == 1  # put down what it had just taken (the first step has no place before it)
    counts = [2, 1, 1, 2, 1]  # go to, take, put, chat with, use
    expected = -sum(c / 7 * math.log(c / 7) for c in counts) / math.log(6)
    assert ay.verb_entropy == pytest.approx(expected)
    assert ay.trajectory[0] == "step 1 in hall: thought: - -> go to hall [done]"
    assert (ll.steps, ll.verb_entropy, ll.reversals, ll.areas_total) == (1, 0.0, 0, 4)


def test_the_judge_reads_what_was_done_not_the_mark_of_the_variant_that_stopped_it():
    """Only LTRHA's variants filter an action (logged "(This action has been filtered by LTRHA) ...")
    or fail one on their resources (eq. 18): the judge is shown the action and whether it was done."""
    frame = rows(("(This action has been filtered by LTRHA) take toy 1 from table 6", "hall", "filtered"),
                 ("use chair", "hall", "failed"), ("go to room", "room", "refused"), ("chat with LL: hi", "room", "done"))
    (ctx,) = metrics.judge_contexts(frame, 3)
    assert ctx.trajectory == ["step 1 in hall: thought: - -> take toy 1 from table 6 [not done]",
                              "step 2 in hall: thought: - -> use chair [not done]",
                              "step 3 in room: thought: - -> go to room [not done]",
                              "step 4 in room: thought: - -> chat with LL: hi [done]"]
    # the numbers the rules judge scales are measured as before (a filtered action is not executed)
    assert (ctx.executed, ctx.chats_started, ctx.steps) == (1, 1, 4)


def test_going_straight_back_is_a_reversal_and_going_on_to_a_third_place_is_not():
    # each row's area is where the agent is after its action
    back = rows(("use chair", "room", "done"), ("go to hall", "hall", "done"), ("go to room", "room", "done"))
    assert metrics.judge_contexts(back, 3)[0].reversals == 1
    on = rows(("use chair", "room", "done"), ("go to hall", "hall", "done"), ("go to yard", "yard", "done"))
    assert metrics.judge_contexts(on, 3)[0].reversals == 0
    stayed = rows(("use chair", "room", "done"), ("use chair", "room", "done"), ("go to room", "room", "done"))
    assert metrics.judge_contexts(stayed, 3)[0].reversals == 0  # never left: nothing undone


def test_a_reversal_is_measured_the_same_whichever_mark_stopped_the_action():
    """Only LTRHA's variants mark a filtered action; read with its mark, a filtered take then a put was no
    reversal while a failed one was, so the rules judge's consistency leaned on the treatment's mark."""
    filtered = "(This action has been filtered by LTRHA) "
    for mark, status in (("", "failed"), (filtered, "filtered")):
        took = rows((f"{mark}take toy 1 from table 6", "hall", status), ("put toy 1 on table 6", "hall", "done"))
        back = rows(("use chair", "room", "done"), ("go to hall", "hall", "done"), (f"{mark}go to room", "hall", status))
        assert [metrics.judge_contexts(f, 3)[0].reversals for f in (took, back)] == [1, 1], status


def test_the_rule_judge_scales_each_measured_share_to_1_to_7():
    ctx = JudgeContext("AY", [], areas_visited=2, areas_total=4, chats_started=1, steps=6, executed=3,
                       reversals=3, verb_entropy=0.5)
    assert JUDGE.rule(ctx, None).model_dump() == {"personification": 4, "consistency": 4, "logicality": 4,
                                                  "exploration": 4, "proactiveness": 4}
    busy = JudgeContext("LL", [], 4, 4, 6, 6, 6, 0, 1.0)
    assert set(JUDGE.rule(busy, None).model_dump().values()) == {7}
    idle = JudgeContext("WM", [], 0, 4, 0, 0, 0, 0, 0.0)
    assert JUDGE.rule(idle, None).model_dump()["consistency"] == 7 and JUDGE.rule(idle, None).exploration == 1


def test_the_judge_table_puts_the_papers_row_beside_ours():
    scores = pd.DataFrame({d: [3, 5] for d in metrics.DIMENSIONS})
    scores.attrs["judge"] = "rules baseline"
    lines = metrics.judge_table(scores, "full").splitlines()
    assert lines[0] == "| | Personification | Consistency | Logicality | Exploration | Proactiveness |"
    assert lines[1] == "|---|---|---|---|---|---|"
    assert lines[2] == "| paper, full (48 human raters) | 6.29 | 6.00 | 5.98 | 6.02 | 6.17 |"
    assert lines[3] == "| ours, rules baseline | 4.00 | 4.00 | 4.00 | 4.00 | 4.00 |"
    empty = pd.DataFrame(columns=list(metrics.DIMENSIONS))
    assert metrics.judge_table(empty, "full").splitlines()[3] == "| ours, ? | nan | nan | nan | nan | nan |"


def test_an_interaction_without_a_recorded_weight_counts_once_and_a_larger_clique_comes_first():
    g = nx.DiGraph()
    g.add_edges_from([("A", "B"), ("B", "A"), ("A", "C")])
    assert metrics.social_structure(g)["strength"] == {"A": 3, "B": 2, "C": 1}
    edges = [(a, b, 1) for a, b in [("A", "B"), ("B", "C"), ("A", "C")]]
    edges += [(a, b, 1) for a in "CDEF" for b in "CDEF" if a < b]
    assert metrics.social_structure(graph(*edges))["cliques"] == [["C", "D", "E", "F"], ["A", "B", "C"]]


def test_judge_contexts_come_in_name_order_whoever_acted_first():
    frame = pd.concat([rows(("use chair", "hall", "done"), agent="ZZ"),
                       rows(("use chair", "hall", "done"), ("use bed", "hall", "done"), agent="AA")])
    frame.loc[frame["agent"] == "AA", "step"] += 1
    assert [c.agent for c in metrics.judge_contexts(frame, 2)] == ["AA", "ZZ"]


@pytest.mark.parametrize(("actions", "reversals"), [
    ([("take book", "room"), ("put book on table", "room")], 1),  # from the second step on
    ([("put book on table", "room"), ("use chair", "room"), ("take book", "room")], 0),  # no wrap-around
    ([("take book", "room"), ("use chair", "room")], 0),
    ([("go to hall", "hall"), ("go to room", "room"), ("go to hall", "hall"), ("go to room", "room")], 2),
])
def test_reversals_are_counted_between_neighbouring_steps_only(actions, reversals):
    frame = rows(*[(a, area, "done") for a, area in actions])
    assert metrics.judge_contexts(frame, 2)[0].reversals == reversals


def test_judge_run_rates_every_agent_on_a_gateway_of_its_own_or_the_runs(scripted):
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.routing import RouteTable

    frame = pd.concat([rows(("use chair", "hall", "done"), agent="LL"), rows(("chat with LL", "hall", "done"))])
    scores = metrics.judge_run(frame, 2)
    assert list(scores.columns) == ["agent", *metrics.DIMENSIONS, "status"]
    assert list(scores["agent"]) == ["AY", "LL"] and set(scores["status"]) == {"rules"}
    assert scores.attrs["judge"] == metrics.RULES_LABEL
    fake = scripted(default='{"personification": 5, "consistency": 5, "logicality": 5, "exploration": 5, '
                            '"proactiveness": 5}')
    run_gateway = Gateway(RouteTable("openai/actor"))
    judged = metrics.judge_run(frame, 2, "openai/judge", {"openai/actor"}, rng_seed=0, run_gateway=run_gateway)
    assert set(judged["status"]) == {"ok"} and judged.attrs["judge"] == "openai/judge"
    assert run_gateway.ledger.live_calls == 2  # counted on the run's ledger
    seeds = [c["params"]["seed"] for c in fake.calls]
    metrics.judge_run(frame, 2, "openai/judge", rng_seed=0)
    assert [c["params"]["seed"] for c in fake.calls[2:]] == seeds  # the judge's draws follow its seed
    metrics.judge_run(frame, 2, "openai/judge")
    assert [c["params"]["seed"] for c in fake.calls[4:]] == seeds  # seed 0 by default
    with pytest.raises(ValueError, match="also played the agents"):
        metrics.judge_run(frame, 2, "openai/actor", {"openai/actor"})


def test_the_rule_judge_of_a_one_step_agent_in_a_one_place_world():
    one = JudgeContext("AY", [], areas_visited=1, areas_total=1, chats_started=0, steps=1, executed=1,
                       reversals=0, verb_entropy=0.0)
    scores = JUDGE.rule(one, None)
    assert scores.logicality == 7 and scores.exploration == 7
