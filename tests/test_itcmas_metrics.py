"""Analysis of ITCMA-S runs: cliques, leader and isolated agents; the judge and its rules
baseline; the run report with the paper's figures and table."""

import math

import networkx as nx
import pandas as pd
import pytest

from socialsim.agents.itcmas.metrics import (
    PAPER_TABLE,
    judge_contexts,
    judge_run,
    judge_table,
    judged,
    social_structure,
)
from socialsim.agents.itcmas.operations import JUDGE
from socialsim.model.runner import RunConfig, run
from socialsim.model.society import SocietyModel


def test_social_structure_finds_clique_leader_and_isolates():
    g = nx.DiGraph()
    g.add_nodes_from(["AY", "SG", "MD", "WL", "LL", "WM"])
    for a, b, w in [("LL", "SG", 3), ("SG", "LL", 2), ("LL", "WM", 2), ("WM", "SG", 4), ("LL", "AY", 1)]:
        g.add_edge(a, b, weight=w)
    s = social_structure(g)
    assert s["cliques"] == [["LL", "SG", "WM"]]
    assert s["strength"] == {"AY": 1, "SG": 9, "MD": 0, "WL": 0, "LL": 8, "WM": 6}
    assert s["leader"] == "LL"  # ties with three agents; SG has more interactions but fewer partners
    assert s["centrality"]["LL"] == pytest.approx(3 / 5)
    assert s["isolated"] == ["MD", "WL"]


def test_the_leader_is_the_one_most_central_then_most_interacting_and_none_at_a_tie():
    def graph(*edges):
        return nx.DiGraph([(a, b, {"weight": w}) for a, b, w in edges])

    # a and b have as many interactions; a has more partners
    assert social_structure(graph(("a", "x", 1), ("a", "y", 1), ("b", "z", 2)))["leader"] == "a"
    assert social_structure(graph(("a", "b", 1)))["leader"] is None  # two alike: no leader, not the first by name
    # a and b alike at the top (three partners, three interactions), x and y below them: no leader
    square = graph(("a", "x", 1), ("a", "y", 1), ("b", "x", 1), ("b", "y", 1), ("a", "b", 1))
    assert social_structure(square)["leader"] is None


def test_a_clique_needs_ties_of_min_weight_interactions():
    triangle = nx.DiGraph([("a", "b", {"weight": 2}), ("b", "c", {"weight": 2}), ("c", "a", {"weight": 1})])
    assert social_structure(triangle)["cliques"] == [["a", "b", "c"]]
    weak = social_structure(triangle, min_weight=2)  # c-a is one interaction: no clique, so no one outside one
    assert weak["cliques"] == [] and weak["largest_clique"] == 0 and math.isnan(weak["outside_ties"])


def actions_table():
    rows = []
    for step, (area, action, status) in enumerate([
        ("AY's Home", "go to Outside", "done"), ("Outside", "go to Public Canteen", "done"),
        ("Public Canteen", "chat with LL: hi", "done"), ("Public Canteen", "take food 6 from foodshelf 5", "done"),
        ("Public Canteen", "put food 6 in/on table 9", "failed")], start=1):
        rows.append({"step": step, "agent": "AY", "area": area, "action": action, "status": status, "thought": ""})
    return pd.DataFrame(rows)


def test_rules_judge_is_a_transparent_baseline():
    (ctx,) = judge_contexts(actions_table(), areas_total=9)
    assert (ctx.areas_visited, ctx.chats_started, ctx.executed, ctx.reversals) == (3, 1, 4, 1)
    scores = JUDGE.rule(ctx, None)
    assert scores.exploration == round(1 + 6 * 3 / 9)  # 3 of 9 areas
    assert scores.logicality == round(1 + 6 * 4 / 5)  # 4 of 5 actions carried out
    assert scores.proactiveness == round(1 + 6 * 3 / 5)  # 1 chat in 5 steps, ×3
    assert scores.consistency == round(1 + 6 * (1 - 1 / 5))  # one take-then-put
    frame = judge_run(actions_table(), 9)
    assert frame.attrs["judge"].startswith("rules baseline")
    table = judge_table(frame, "full")
    assert "6.29" in table and "rules baseline" in table


def test_the_judges_prompt_does_not_say_which_variant_it_judges():
    """A full ITCMA-S run filters and fails actions (its table says so); the judge's prompts do not."""
    model = SocietyModel("irollan-valley", model="rules", rng=3)
    for _ in range(10):
        model.step()
    actions = model.datacollector.get_table_dataframe("itcmas_actions")
    assert {"filtered", "failed"} <= set(actions["status"]) and actions["action"].str.contains("LTRHA").any()
    prompts = "\n".join(m["content"] for ctx in judge_contexts(actions, 9) for m in JUDGE.messages(ctx))
    for mark in ("LTRHA", "filtered", "failed", "refused", "resources"):
        assert mark not in prompts, mark


def test_llm_judge_must_differ_from_the_actors():
    with pytest.raises(ValueError, match="also played the agents"):
        judge_run(actions_table(), 9, judge_model="openai/gpt-4o-mini", actors={"openai/gpt-4o-mini"})


def test_llm_judge_scores_from_a_record(scripted):
    scripted(default='{"personification": 5, "consistency": 4, "logicality": 6, "exploration": 3, "proactiveness": 2}')
    frame = judge_run(actions_table(), 9, judge_model="openai/judge-model", actors={"rules"})
    assert frame.iloc[0][["personification", "logicality", "proactiveness"]].tolist() == [5, 6, 2]
    assert frame.attrs["judge"] == "openai/judge-model"


def test_paper_table_has_the_five_architectures():
    assert set(PAPER_TABLE) == {"base", "ltrha", "memory", "driver", "full"}
    assert PAPER_TABLE["full"][0] == 6.29 and PAPER_TABLE["base"][1] == 2.46


@pytest.mark.figures
def test_cli_run_writes_itcmas_report(tmp_path):
    result = run(RunConfig(scenario="irollan-valley", model="rules", steps=5), tmp_path / "run", progress=False)
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## ITCMA-S + LTRHA" in report and "Leader (most central)" in report
    assert "| chance: random graphs with the same agents and as many ties (" in report
    from socialsim.agents.itcmas.metrics import outsiders_line
    from socialsim.agents.itcmas.reproduce import AGENTS, measure_run

    got = measure_run(tmp_path / "run")  # the outsiders' ties beside chance's, as reproduce measures them
    said = outsiders_line(got["outside_ties"], {"outside_ties": got["outside_ties_chance"],
                                                "outside_ties_p": got["outside_ties_p"]})
    assert said and said[0] in report
    # the society table: this run's figures beside chance's, as reproduce measures them
    pairs = pd.read_parquet(tmp_path / "run" / "tables" / "interactions.parquet")[["initiator", "receiver"]]
    ties = len({frozenset(p) for p in pairs.itertuples(index=False) if p[0] != p[1]})
    outside = int(got["outside_cliques"]) if got["cliques"] else len(AGENTS)
    assert (f"| this run | {int(got['cliques'])} | {int(got['largest_clique'])} | {outside} |\n"
            f"| chance: random graphs with the same agents and as many ties ({ties}), 200 draws | "
            f"{got['cliques_chance']:.2f} | {got['largest_clique_chance']:.2f} | {got['outside_cliques_chance']:.2f} |"
            ) in report
    # counts, names and cliques written for a reader, not as Python's or JSON's repr
    society = next(line for line in report.splitlines() if line.startswith("Cliques"))
    actions = next(line for line in report.splitlines() if line.startswith("Ablation"))
    assert not set("[]{}'\"") & set(society + actions), (society, actions)
    counts = pd.read_parquet(tmp_path / "run" / "tables" / "itcmas_actions.parquet")["status"].value_counts()
    assert "Actions: " + ", ".join(f"{k} {n}" for k, n in counts.items()) + "." in actions
    for name in ("itcmas_driver.png", "itcmas_pad.png", "itcmas_resources.png", "itcmas_topic.png", "interactions.png"):
        assert (tmp_path / "run" / "figures" / name).is_file()
    tables = tmp_path / "run" / "tables"
    interactions = pd.read_parquet(tables / "interactions.parquet")
    assert list(interactions.columns) == ["step", "initiator", "receiver", "kind", "content"]
    assert len(pd.read_parquet(tables / "itcmas_actions.parquet")) == 30
    assert result.status == "completed"


def _table_1(table, cliques=2.0, outside=2.0, largest=4.0, largest_by_chance=3.0, outside_ties=0.0,
             outside_ties_by_chance=1.0, outside_ties_p=0.035):  # the p of the paper's Fig. 8 shape
    from socialsim.agents.itcmas.reproduce import DIMENSIONS

    return pd.DataFrame([{"label": v, "seed": 1, "cliques": cliques, "outside_cliques": outside,
                          "largest_clique": largest, "largest_clique_chance": largest_by_chance,
                          "outside_ties": outside_ties, "outside_ties_chance": outside_ties_by_chance,
                          "outside_ties_p": outside_ties_p,
                          **dict(zip(DIMENSIONS, scores, strict=True))} for v, scores in table.items()])


def test_table_1_itself_satisfies_the_findings_and_a_swap_breaks_each_one():
    from socialsim.agents.itcmas.reproduce import CONTROL, protocol
    from socialsim.model.reproduce import check_findings

    p = protocol()
    checked = check_findings(p, _table_1(PAPER_TABLE))  # every variant's clique as large: our control fails
    paper = ~checked["finding"].str.contains(CONTROL, regex=False)
    assert set(checked[paper]["verdict"]) == {"holds"} and list(checked[~paper]["verdict"]) == ["does not hold"]
    full_first = "full ITCMA-S is rated above every ablation on every dimension"
    ltrha_second = "LTRHA alone is rated above compressed memory alone, driver alone and base on every dimension"
    base_last = "base ITCMA is rated below every other architecture on every dimension"
    clique = "full ITCMA-S's agents form at least one clique (3 or more agents)"
    one_tie = {**PAPER_TABLE, "ltrha": (*PAPER_TABLE["ltrha"][:4], PAPER_TABLE["full"][4])}  # a tie on one dimension
    verdicts = check_findings(p, _table_1(one_tie, cliques=0.0)).set_index("finding")["verdict"]
    assert verdicts[full_first] == "does not hold" and verdicts[clique] == "does not hold"
    assert verdicts[ltrha_second] == verdicts[base_last] == "holds"
    swapped = {**PAPER_TABLE, "memory": PAPER_TABLE["ltrha"], "ltrha": PAPER_TABLE["memory"],
               "base": PAPER_TABLE["driver"], "driver": PAPER_TABLE["base"]}
    verdicts = check_findings(p, _table_1(swapped)).set_index("finding")["verdict"]
    assert verdicts[full_first] == "holds" and verdicts[ltrha_second] == verdicts[base_last] == "does not hold"


def test_ltrha_second_needs_it_above_base_as_well():
    from socialsim.agents.itcmas.reproduce import protocol
    from socialsim.model.reproduce import check_findings

    base_high = {**PAPER_TABLE, "base": (5.0, 2.46, 2.50, 2.85, 2.65)}  # base above LTRHA on personification only
    verdicts = check_findings(protocol(), _table_1(base_high)).set_index("finding")["verdict"]
    assert verdicts["LTRHA alone is rated above compressed memory alone, driver alone and base on every dimension"] \
        == "does not hold"
    assert verdicts["full ITCMA-S is rated above every ablation on every dimension"] == "holds"


def test_a_clique_of_everyone_is_not_the_papers_society(tmp_path):
    """Sec. 5.3: a clique formed around a leader and the agents outside it stayed mostly isolated."""
    from socialsim.agents.itcmas.reproduce import AGENTS, OUTSIDERS, measure_run, protocol
    from socialsim.model.reproduce import check_findings

    outside = OUTSIDERS
    verdicts = check_findings(protocol(), _table_1(PAPER_TABLE, outside=0.0)).set_index("finding")["verdict"]
    assert verdicts[outside] == "does not hold"
    assert verdicts["full ITCMA-S's agents form at least one clique (3 or more agents)"] == "holds"
    # measured from the run's interactions: a clique of four, the other agents apart
    tables = tmp_path / "tables"
    tables.mkdir()
    rows = [{"step": 1, "agent": a, "area": "Outside", "thought": "", "action": "rest", "status": "done",
             "resources": 1.0, "P": 0.0, "A": 0.0, "D": 0.0} for a in AGENTS]
    pd.DataFrame(rows).to_parquet(tables / "itcmas_actions.parquet")
    four = AGENTS[:4]
    pairs = [(a, b) for a in four for b in four if a != b]
    pd.DataFrame([{"step": 1, "initiator": a, "receiver": b, "kind": "chat", "content": ""} for a, b in pairs]
                 ).to_parquet(tables / "interactions.parquet")
    got = measure_run(tmp_path)
    assert got["cliques"] == 1.0 and got["outside_cliques"] == len(AGENTS) - 4 and got["largest_clique"] == 4.0
    # six random ties among six agents rarely close a clique of four (and spread, leave more agents out)
    assert got["largest_clique_chance"] < 4.0 and got["outside_cliques_chance"] > len(AGENTS) - 4
    # the two outsiders hold no tie; random graphs' outsiders hold some, and rarely none (p: 0.035)
    assert got["outside_ties"] == 0.0 and got["outside_ties_chance"] > 0.5 and got["outside_ties_p"] < 0.05
    assert check_findings(protocol(), _table_1(PAPER_TABLE, outside=got["outside_cliques"],
                                               outside_ties=got["outside_ties"],
                                               outside_ties_by_chance=got["outside_ties_chance"],
                                               outside_ties_p=got["outside_ties_p"])) \
        .set_index("finding")["verdict"][outside] == "holds"
    # fewer ties than chance's outsiders on the mean, but as few in many random graphs: what the run
    # report calls within chance is no finding (one tie to an outsider: p 0.14; session 42's 75-step
    # rules seed held on the means alone at p 0.45)
    for p_within in (0.05, 0.14, 0.45):
        assert check_findings(protocol(), _table_1(PAPER_TABLE, outside=2.0, outside_ties=1.0,
                                                   outside_ties_by_chance=1.68, outside_ties_p=p_within)) \
            .set_index("finding")["verdict"][outside] == "does not hold"
    beyond = "full ITCMA-S: its largest clique is larger than random ties as many would form"
    assert check_findings(protocol(), _table_1(PAPER_TABLE, largest=3.0, largest_by_chance=3.0)) \
        .set_index("finding")["verdict"][beyond] == "does not hold"  # as large as chance's: not beyond it
    assert check_findings(protocol(), _table_1(PAPER_TABLE, largest=got["largest_clique"],
                                               largest_by_chance=got["largest_clique_chance"])) \
        .set_index("finding")["verdict"][beyond] == "holds"


def test_the_chance_level_of_the_society_is_what_random_ties_as_many_give():
    import networkx as nx

    from socialsim.agents.itcmas.metrics import chance_structure

    unmeasured = dict.fromkeys(["cliques", "largest_clique", "outside_cliques", "outside_ties", "outside_ties_p"],
                               math.nan)
    assert chance_structure(nx.DiGraph()) == pytest.approx({"ties": 0, **unmeasured}, nan_ok=True)  # no agent
    alone = nx.DiGraph()
    alone.add_node("a")  # one agent: no tie and no clique, and the one agent outside every clique
    assert chance_structure(alone) == pytest.approx(
        {"ties": 0, "cliques": 0.0, "largest_clique": 0.0, "outside_cliques": 1.0, "outside_ties": math.nan,
         "outside_ties_p": math.nan}, nan_ok=True)
    everyone = nx.complete_graph(["a", "b", "c", "d"], create_using=nx.DiGraph)  # every tie: no other graph
    nothing_left_out = {"outside_ties": math.nan, "outside_ties_p": math.nan}  # no random graph leaves anyone out
    assert chance_structure(everyone) == pytest.approx(
        {"ties": 6, "cliques": 1.0, "largest_clique": 4.0, "outside_cliques": 0.0, **nothing_left_out}, nan_ok=True)
    apart = nx.DiGraph()
    apart.add_nodes_from("abcde")
    assert chance_structure(apart) == pytest.approx(
        {"ties": 0, "cliques": 0.0, "largest_clique": 0.0, "outside_cliques": 5.0, **nothing_left_out}, nan_ok=True)
    triangle_and_two = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a")])
    triangle_and_two.add_nodes_from("de")
    chance = chance_structure(triangle_and_two)  # 3 of 10 ties: a triangle in 10 of C(10, 3) = 120 ways
    assert chance["ties"] == 3 and 0.0 < chance["cliques"] < 0.25 and 4.0 < chance["outside_cliques"] < 5.0
    assert chance == pytest.approx(chance_structure(triangle_and_two), nan_ok=True)  # seeded
    spread = nx.gnm_random_graph(7, 12, seed=99, directed=False)  # cliques of several sizes in its draws
    largest = [max((len(c) for c in nx.find_cliques(nx.gnm_random_graph(7, 12, seed=i))), default=0)
               for i in range(200)]
    assert chance_structure(nx.DiGraph(spread))["largest_clique"] == pytest.approx(
        sum(size if size >= 3 else 0 for size in largest) / 200)
    weak = nx.DiGraph([("a", "b", {"weight": 1}), ("b", "c", {"weight": 5})])
    assert chance_structure(weak, min_weight=2)["ties"] == 1  # only ties as strong as the structure's count


def test_the_rules_judge_scores_nobody_who_carried_out_no_action():
    """Every action filtered: no reversal, so the rules' consistency was a perfect 7 (beside the
    paper's 6.00) for agents who did nothing. Such an agent is left out, and the table says so."""
    idle = actions_table().assign(agent="SG", status="filtered")
    frame = judge_run(pd.concat([actions_table(), idle]), 9)
    assert frame.set_index("agent")["status"].to_dict() == {"AY": "rules", "SG": "nothing done"}
    assert judged(frame)["agent"].tolist() == ["AY"]  # the means are AY's alone
    assert "Not counted: 1 of 2 agents, who carried out no action" in judge_table(frame, "full")


def test_a_judges_fallback_is_no_score(tmp_path):
    """An unusable answer falls back to the scale's midpoint (4) on every dimension: that is no
    judgement, so it is counted apart and left out of the means the report and reproduce give."""
    from socialsim.agents.itcmas.metrics import DIMENSIONS, JUDGE_FILE, judge_table
    from socialsim.agents.itcmas.reproduce import AGENTS, measure_run

    scores = pd.DataFrame([{"agent": a, **dict.fromkeys(DIMENSIONS, 7 if k < 2 else 4),
                            "status": "ok" if k < 2 else "fallback"} for k, a in enumerate(AGENTS)])
    table = judge_table(scores, "full")
    assert "| 7.00 | 7.00 | 7.00 | 7.00 | 7.00 |" in table  # the two judged agents only
    assert "Not counted: 4 of 6 agents' scores" in table
    tables = tmp_path / "tables"
    tables.mkdir()
    rows = [{"step": 1, "agent": a, "area": "Outside", "thought": "", "action": "rest", "status": "done",
             "resources": 1.0, "P": 0.0, "A": 0.0, "D": 0.0} for a in AGENTS]
    pd.DataFrame(rows).to_parquet(tables / "itcmas_actions.parquet")
    pd.DataFrame(columns=["step", "initiator", "receiver", "kind", "content"]).to_parquet(tables / "interactions.parquet")
    scores.to_parquet(tables / JUDGE_FILE)
    assert measure_run(tmp_path)["personification"] == 7.0
    scores.assign(status="fallback").to_parquet(tables / JUDGE_FILE)
    assert math.isnan(measure_run(tmp_path)["personification"])  # nothing judged: not measured
    assert "Not counted" not in judge_table(scores.assign(status="ok"), "full")


def test_the_report_warns_when_the_social_filter_blocked_every_action(scripted, tmp_path):
    """SmolLM2 answers yes to nearly every yes/no: as LTRHA's filter it blocked all of a run's actions."""
    from socialsim.agents.itcmas.metrics import report_sections
    from socialsim.model.society import SocietyModel

    scripted(default="Yes")
    blocked = SocietyModel("irollan-valley", model="rules", rng=1, routes={"filter": "openai/scripted-filter"})
    for _ in range(2):
        blocked.step()
    actions = blocked.datacollector.get_table_dataframe("itcmas_actions")
    assert set(actions["status"]) == {"filtered"}
    warning = [p for p in report_sections(blocked, tmp_path) if p.startswith("**Every action")]
    assert warning == [f"**Every action ({len(actions)}) was filtered by LTRHA's social filter**: "
                       f"`openai/scripted-filter` judged each one harmful to social interaction, so no agent did "
                       "anything. A small model's yes-bias does this (SmolLM2 answers yes to nearly every action the "
                       "filter asks about); route the filter to a stronger model, or to the rules (`--route filter=rules`)."]
    scripted(default="No")  # the same model letting every action through: nothing to warn of
    passed = SocietyModel("irollan-valley", model="rules", rng=1, routes={"filter": "openai/scripted-filter"})
    for _ in range(2):
        passed.step()
    assert "filtered" not in set(passed.datacollector.get_table_dataframe("itcmas_actions")["status"])
    assert not [p for p in report_sections(passed, tmp_path) if p.startswith("**Every action")]


def test_no_yes_bias_warning_when_the_rules_filter_blocks_everything(monkeypatch, tmp_path):
    """The rule's verdicts are the mechanism's own, not a model's bias."""
    from socialsim.agents.itcmas import operations as ops
    from socialsim.agents.itcmas.metrics import report_sections
    from socialsim.model.society import SocietyModel

    monkeypatch.setattr(ops.SOCIAL_FILTER, "rule", lambda ctx, rng: ops.YesNo(yes=True))
    ruled = SocietyModel("irollan-valley", model="rules", rng=1)
    for _ in range(2):
        ruled.step()
    assert set(ruled.datacollector.get_table_dataframe("itcmas_actions")["status"]) == {"filtered"}
    assert not [p for p in report_sections(ruled, tmp_path) if p.startswith("**Every action")]


def test_no_actor_is_told_the_treatments_name(watch_asks, monkeypatch):
    """An actor's thought goes to the judge: the chooser's note on a filtered action said "LTRHA",
    which an LLM could echo into its thought. Actors are told the behaviour only."""
    prompts = []
    watch_asks(monkeypatch, lambda op, ctx, agent_id, answer: prompts.extend(
        m["content"] for m in op.messages(ctx)) if op.module in ("action", "chat", "filter") else None)
    model = SocietyModel("irollan-valley", model="rules", rng=3)
    for _ in range(10):
        model.step()
    text = "\n".join(prompts)
    assert "stopped lately as harmful to others" in text and "LTRHA" not in text


def test_outsiders_with_few_ties_are_within_chance_where_ties_are_few():
    """Random ties as many leave agents outside cliques too, with few ties of their own; the outsiders'
    ties are set against theirs, and the report says when they are within chance (session 40's audit:
    "some agents stay outside every clique" held wherever ties were few)."""
    from socialsim.agents.itcmas.metrics import chance_structure, outsiders_line

    def six(*edges):
        g = nx.DiGraph(list(edges))
        g.add_nodes_from("abcdef")
        return g

    sparse = six(("a", "b"), ("b", "c"), ("c", "a"), ("d", "e"))  # a triangle; d-e; f alone
    structure, chance = social_structure(sparse), chance_structure(sparse)
    assert structure["outside_cliques"] == 3 and structure["outside_ties"] == pytest.approx(2 / 3)
    # G(6, 4)'s outsiders: 0.46 ties each; 0.67 is no fewer
    assert chance["outside_ties"] < 2 / 3 and chance["outside_ties_p"] == 1.0
    assert "**within chance** (p = 1)" in "".join(outsiders_line(structure["outside_ties"], chance))
    isolated = six(*((x, y) for x in "abcd" for y in "abcd" if x < y))  # the paper's: e and f hold no tie
    structure, chance = social_structure(isolated), chance_structure(isolated)
    assert structure["outside_ties"] == 0.0 and chance["outside_ties_p"] < 0.05
    # the structure's own outsiders' ties passed in (the report and a reproduction do): the same figures,
    # with the observed graph's cliques not searched for again; p is measured against the value given
    assert chance_structure(isolated, structure["outside_ties"]) == chance
    assert chance_structure(isolated, observed_outside_ties=99.0)["outside_ties_p"] == 1.0
    line = "".join(outsiders_line(0.0, chance))
    assert "within chance" not in line and f"fewer than chance gives (p = {chance['outside_ties_p']:.3g} < 0.05)" in line
    # p counts the draws whose outsiders hold as few ties or fewer, and the run itself among them
    from socialsim.agents.itcmas.metrics import outsiders_against_chance

    assert outsiders_against_chance(1.0, [0.0, 1.0, 2.0, 3.0]) == {"outside_ties": 1.5, "outside_ties_p": 3 / 5}
    assert outsiders_against_chance(-1.0, [0.0])["outside_ties_p"] == 1 / 2
    assert math.isnan(outsiders_against_chance(math.nan, [0.0])["outside_ties_p"])
    assert outsiders_line(math.nan, chance) == []  # no clique or no outsider: nothing to compare
    # at p = 0.05 the outsiders are within chance (significant below it, as every finding's test)
    at_the_bound = "".join(outsiders_line(0.0, {"outside_ties": 1.0, "outside_ties_p": 0.05}))
    assert "**within chance** (p = 0.05)" in at_the_bound and "fewer than chance" not in at_the_bound
    assert at_the_bound.endswith("`p`: the share of those random graphs whose outsiders hold as few ties or fewer.")
