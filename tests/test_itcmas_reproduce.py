"""The figures ``socialsim reproduce itcmas`` reads from each run (``agents/itcmas/reproduce.py``),
from a hand-written run directory whose answers are known: the society's structure with its
leader by interaction weight, the share of chats, the filtered count, the Gini of the resources
the run ended with, the mood ranges, who still moves in the last twenty steps, the judge's means without
its fallbacks; and the findings' thresholds."""

import math

import pandas as pd
import pytest

from socialsim.agents.itcmas import reproduce as rp
from socialsim.agents.itcmas.metrics import DIMENSIONS, JUDGE_FILE
from socialsim.model.reproduce import check_findings

STEPS = 30


def actions():
    rows = []
    for step in range(1, STEPS + 1):
        for agent in ("AY", "SG", "MD", "WL"):
            action, status = "rest", "done"
            if agent == "AY" and step % 2:
                action = "chat with SG"
            if agent == "SG" and step == 3:
                action = "wave to start a chat"  # has "chat" in it, but is no chat
            if agent == "WL" and step <= 3:
                status = "filtered"
                if step == 1:  # a chat LTRHA's filter stopped: chosen all the same
                    action = rp.FILTERED_PREFIX + "chat with AY"
            if agent == "WL" and step in (4, 5):
                status = "refused"
            # AY's pleasure swings by 0.1 throughout; MD's only before the last twenty steps; SG's by a hair
            p = {"AY": 0.1 * (step % 2), "SG": 0.3 + 0.001 * (step % 2),
                 "MD": 0.1 * (step % 2) if STEPS - 20 < step <= STEPS - 10 else 0.5, "WL": -0.2}[agent]
            resources = {"AY": 5.0, "SG": 10.0, "MD": 10.0, "WL": 20.0}[agent] if step == STEPS else 1.0
            rows.append({"step": step, "agent": agent, "action": action, "status": status, "P": p,
                         "A": 0.2 if agent == "AY" else -0.1 * step / STEPS, "D": 0.0, "resources": resources})
    return pd.DataFrame(rows)


def interactions():
    ties = [("AY", "SG")] * 3 + [("SG", "MD")] + [("AY", "MD")] * 2  # a triangle; AY the busiest
    return pd.DataFrame([{"step": i, "initiator": a, "receiver": b} for i, (a, b) in enumerate(ties, 1)])


def judge():
    rows = [{"agent": a, **dict.fromkeys(DIMENSIONS, score), "status": "ok"} for a, score in (("AY", 6), ("SG", 4))]
    rows.append({"agent": "MD", **dict.fromkeys(DIMENSIONS, 4), "status": "fallback"})  # the midpoint: no judgement
    return pd.DataFrame(rows)


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / "tables").mkdir()
    actions().to_parquet(tmp_path / "tables" / "itcmas_actions.parquet")
    interactions().to_parquet(tmp_path / "tables" / "interactions.parquet")
    judge().to_parquet(tmp_path / "tables" / JUDGE_FILE)
    return tmp_path


def test_the_society_the_run_formed(run_dir):
    got = rp.measure_run(run_dir)
    assert (got["cliques"], got["largest_clique"], got["outside_cliques"], got["isolated"]) == (1, 3, 1, 1)
    # AY, SG and MD each tie with the two others: AY leads by the weight of its ties (5 interactions)
    assert {name: got[f"leader_{name}"] for name in rp.AGENTS} == {"AY": 1, "SG": 0, "MD": 0, "WL": 0, "LL": 0, "WM": 0}


def test_with_no_clique_no_one_is_counted_outside_one(run_dir):
    """"Some agents stay outside every clique" held, trivially, in runs that formed no clique at all."""
    pd.DataFrame([{"step": 1, "initiator": "AY", "receiver": "SG"}]).to_parquet(run_dir / "tables" / "interactions.parquet")
    got = rp.measure_run(run_dir)
    assert got["cliques"] == 0 and math.isnan(got["outside_cliques"])
    found = next(f for f in rp.findings() if f.text == rp.OUTSIDERS)
    checked = check_findings(rp.Protocol("itcmas", [], rp.measure_run, pd.DataFrame(), findings=[found]),
                             pd.DataFrame([{"label": "full", "seed": 1, **got}]))
    assert checked["verdict"].tolist() == ["not measured"]


def test_outsiders_are_set_against_those_random_ties_as_many_leave_out(run_dir):
    """Session 40's audit: with few ties "some agents stay outside every clique" held (3.0 outside, 4.0 in
    random graphs with as many ties). A triangle, a pair and an agent alone: the outsiders hold 2/3 of a
    tie each, more than random graphs' outsiders (0.46): the finding does not hold."""
    ties = [("AY", "SG"), ("SG", "MD"), ("MD", "AY"), ("WL", "LL")]
    pd.DataFrame([{"step": 1, "initiator": a, "receiver": b} for a, b in ties]).to_parquet(
        run_dir / "tables" / "interactions.parquet")
    acted = actions()  # LL and WM act as WL does: six agents, WM alone
    pd.concat([acted, *(acted[acted["agent"] == "WL"].assign(agent=name) for name in ("LL", "WM"))]).to_parquet(
        run_dir / "tables" / "itcmas_actions.parquet")
    got = rp.measure_run(run_dir)
    assert got["outside_cliques"] == 3.0 and got["outside_ties"] == pytest.approx(2 / 3)
    assert got["outside_ties_chance"] < 2 / 3 and got["outside_ties_p"] == 1.0
    found = next(f for f in rp.findings() if f.text == rp.OUTSIDERS)
    checked = check_findings(rp.Protocol("itcmas", [], rp.measure_run, pd.DataFrame(), findings=[found]),
                             pd.DataFrame([{"label": "full", "seed": 1, **got}]))
    assert checked["verdict"].tolist() == ["does not hold"]


def test_the_shares_counts_and_ranges_of_the_actions(run_dir):
    got = rp.measure_run(run_dir)
    # "wave to start a chat" is no chat; WL's filtered chat is one, as a failed one would be
    assert got["chat_share"] == pytest.approx(16 / (4 * STEPS))
    assert got["filtered"] == 3  # refused actions are not filtered ones
    assert (got["P_min"], got["P_max"]) == (-0.2, 0.5)
    assert (got["A_min"], got["A_max"]) == (pytest.approx(-0.1), 0.2)
    assert got["P_moving_share"] == 0.5  # AY and MD moved in the last twenty steps; SG's hair is not moving


def test_the_gini_is_of_the_last_steps_resources(run_dir):
    assert rp.measure_run(run_dir)["gini"] == pytest.approx(rp.gini([5, 10, 10, 20]))
    assert rp.gini([5, 10, 10, 20]) == pytest.approx(0.25)  # sum over pairs |xi - xj| = 90, / (2 n^2 mean = 360)
    assert rp.gini([1, 1, 1]) == 0 and rp.gini([0, 0]) == 0  # equal shares, even of nothing
    assert rp.gini([-10, 0, 10]) == pytest.approx(rp.gini([0, 10, 20]))  # debts shift everyone up
    assert math.isnan(rp.gini([]))
    without = actions().assign(resources=None)
    without.to_parquet(run_dir / "tables" / "itcmas_actions.parquet")
    assert math.isnan(rp.measure_run(run_dir)["gini"])  # without LTRHA there are no resources


def test_the_gini_is_of_the_agents_frame_at_the_end_when_the_run_has_one(run_dir):
    """The agents frame is recorded after the last step's matrix reallocation; the actions table's
    last rows (the fixture's 5, 10, 10, 20) before it."""
    final = {"AY": 0.0, "SG": 10.0, "MD": 10.0, "WL": 30.0}
    frame = pd.DataFrame([{"Step": step, "AgentID": i, "name": name, "resources": final[name] if step == STEPS else 1.0}
                          for step in (STEPS - 1, STEPS) for i, name in enumerate(final, 1)])
    frame.to_parquet(run_dir / "agents.parquet")
    assert rp.measure_run(run_dir)["gini"] == pytest.approx(rp.gini(list(final.values())))
    frame.assign(resources=None).to_parquet(run_dir / "agents.parquet")
    assert math.isnan(rp.measure_run(run_dir)["gini"])  # without LTRHA there are no resources


def test_a_run_ending_on_a_reallocation_is_measured_on_the_resources_it_left(tmp_path):
    from socialsim.model.runner import RunConfig, run

    result = run(RunConfig(scenario="irollan-valley", model="rules", steps=5, rng=1), tmp_path / "run", progress=False)
    final = [a.resources for a in result.model.agents]
    logged = result.model.datacollector.get_table_dataframe("itcmas_actions").query("step == 5")["resources"]
    assert sorted(logged) != sorted(final)  # step 5's reallocation came after its actions were logged
    assert rp.measure_run(result.run_dir)["gini"] == pytest.approx(rp.gini(final))


def test_the_judges_means_leave_its_fallbacks_out(run_dir):
    got = rp.measure_run(run_dir)
    assert all(got[d] == 5.0 for d in DIMENSIONS)


def figures(table):
    return lambda label, metric: table[label][metric]


def test_a_finding_that_one_architecture_is_rated_above_others_needs_every_dimension():
    above = rp.rated_above("full", ("base",))
    full, base = dict.fromkeys(DIMENSIONS, 6.0), dict.fromkeys(DIMENSIONS, 5.0)
    assert above(figures({"full": full, "base": base}))
    assert not above(figures({"full": full, "base": {**base, "logicality": 6.0}}))  # a tie is not above
    assert not above(figures({"full": full, "base": {**base, "logicality": 7.0}}))
    base_below = next(f for f in rp.findings() if f.text.startswith("base ITCMA is rated below"))
    others = {v: dict(full) for v in ("ltrha", "memory", "driver", "full")}
    assert base_below.holds(figures({**others, "base": base}))
    assert not base_below.holds(figures({**others, "base": {**base, "exploration": 6.0}}))


def test_the_society_findings_hold_at_their_thresholds():
    found = {f.text: f for f in rp.findings()}
    society = {"full": {"cliques": 1.0, "outside_cliques": 1.0, "largest_clique": 3.0, "largest_clique_chance": 3.0,
                        "outside_ties": 0.9, "outside_ties_chance": 1.0, "outside_ties_p": 0.049}}
    assert found["full ITCMA-S's agents form at least one clique (3 or more agents)"].holds(figures(society))
    assert found[rp.OUTSIDERS].holds(figures(society))
    # as many ties as random graphs' outsiders hold: left out no more than chance leaves them
    assert not found[rp.OUTSIDERS].holds(figures({"full": {**society["full"], "outside_ties": 1.0}}))
    # fewer, but as few in 5% of those random graphs or more: within chance, as the run report says
    assert not found[rp.OUTSIDERS].holds(figures({"full": {**society["full"], "outside_ties_p": 0.05}}))
    assert not found[rp.OUTSIDERS].holds(figures({"full": {**society["full"], "outside_cliques": 0.0}}))
    larger = "full ITCMA-S: its largest clique is larger than random ties as many would form"
    assert not found[larger].holds(figures(society))  # as large as chance is not larger
    society["full"]["largest_clique_chance"] = 2.9
    assert found[larger].holds(figures(society))
    control = found[f"full ITCMA-S's largest clique is larger than base ITCMA's {rp.CONTROL}"]
    assert not control.holds(figures({**society, "base": {"largest_clique": 3.0}}))  # base's as large: no control
    assert control.holds(figures({**society, "base": {"largest_clique": 2.0}}))


def test_the_protocol_runs_the_five_architectures_for_the_papers_75_steps_and_asks_the_judge_of_each_agent():
    protocol = rp.protocol("openai/judge")
    assert [(r.label, r.steps, r.preset) for r in protocol.runs] == [(v, 75, v) for v in rp.VARIANTS]
    assert protocol.after_run(protocol.runs[0]) == ("the five-dimension judge openai/judge", 6)
    assert rp.protocol(None).after_run(protocol.runs[0]) is None
