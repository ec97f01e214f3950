"""Analysis of ITCMA-S runs: the society that formed, figures like the paper's 6-8, and a judge.

- ``social_structure``: cliques of the (undirected) interaction graph, the leader (highest
  degree centrality, ties broken by interaction count) and the isolated agents (no ties at all);
  ``chance_structure``: the cliques random graphs with as many ties hold (the chance level);
- figures: driver, P/A/D, resources per agent and topic per area over time (paper Fig. 6-7);
  the heat map (Fig. 8) is the run report's ``interactions.png``;
- ``judge_run``: the paper's five dimensions on a 7-point scale per agent, by an LLM judge that must
  differ from the actors' models, or by the ``rules`` baseline (labelled so everywhere); the judge
  reads behaviour only (``judge_contexts``), never a mark that names the variant it judges;
  ``judge_table`` prints the paper's Table 1 beside ours.

A run judges itself at its end with the model routed to the judge (``--route itcmas_judge=MODEL``,
a model no actor uses), else the rules baseline, on the run's tape, ledger and budget, and writes
the scores to ``tables/itcmas_judge.parquet``. Judge a finished run again with another model:
``python -m socialsim.agents.itcmas.metrics RUN_DIR --judge MODEL``, its calls on a tape of their own
and its scores in ``RUN_DIR/rejudged/`` (``main``).
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import pandas as pd  # noqa: E402

from socialsim.agents.itcmas.ltrha import FILTERED_PREFIX  # noqa: E402
from socialsim.agents.itcmas.operations import (  # noqa: E402
    DIMENSIONS,
    JUDGE,
    SOCIAL_FILTER,
    JudgeContext,
    actor_models,
    run_judge,
)
from socialsim.llm.routing import RULES, RouteTable  # noqa: E402
from socialsim.metrics.report import figures_drawn  # noqa: E402
from socialsim.model.reproduce import SIGNIFICANT  # noqa: E402

if TYPE_CHECKING:
    from socialsim.model.society import SocietyModel

# Table 1 of the paper (48 human raters, mean on a 7-point scale), by our ablation names.
PAPER_TABLE = {
    "base": (2.88, 2.46, 2.50, 2.85, 2.65),
    "ltrha": (4.88, 5.02, 4.75, 5.25, 4.60),
    "memory": (3.55, 4.21, 4.00, 3.75, 4.02),
    "driver": (4.29, 4.31, 4.63, 4.29, 4.06),
    "full": (6.29, 6.00, 5.98, 6.02, 6.17),
}
RULES_LABEL = "rules baseline (measured shares, not an LLM judgement)"


# --- the society that formed ------------------------------------------------------------------------
def _ties(graph: nx.DiGraph, min_weight: int = 1) -> tuple[nx.Graph, nx.Graph]:
    """The undirected interaction graph (weights summed both ways) and its ties of at least
    ``min_weight`` interactions."""
    undirected = nx.Graph()
    undirected.add_nodes_from(graph.nodes)
    for a, b, data in graph.edges(data=True):
        w = data.get("weight", 1)
        if undirected.has_edge(a, b):
            undirected[a][b]["weight"] += w
        else:
            undirected.add_edge(a, b, weight=w)
    strong = nx.Graph()
    strong.add_nodes_from(undirected.nodes)
    strong.add_edges_from((a, b, d) for a, b, d in undirected.edges(data=True) if d["weight"] >= min_weight)
    return undirected, strong


def _cliques(ties: nx.Graph) -> list[list[str]]:
    return sorted((sorted(c) for c in nx.find_cliques(ties) if len(c) >= 3), key=lambda c: (-len(c), c))


def outside(agents, cliques: list[list]) -> int:
    """How many of ``agents`` belong to no clique."""
    return len(set(agents) - {a for c in cliques for a in c})


def outsiders_ties(ties: nx.Graph, cliques: list[list]) -> float:
    """The mean number of ties of the agents outside every clique (the paper's "mostly isolated");
    NaN without a clique (no one is left out of one) or without an agent outside them."""
    members = {a for c in cliques for a in c}
    left_out = [a for a in ties.nodes if a not in members]
    if not cliques or not left_out:
        return math.nan
    return sum(ties.degree(a) for a in left_out) / len(left_out)


CHANCE_DRAWS = 200  # random graphs for the chance level of the society's structure


def chance_structure(graph: nx.DiGraph, observed_outside_ties: float | None = None, min_weight: int = 1,
                     draws: int = CHANCE_DRAWS, seed: int = 0) -> dict:
    """What random ties give: the mean number of cliques (≥ 3 agents), the largest one's size (0
    without a clique) and the number of agents outside every clique, over ``draws`` random graphs
    with the same agents and as many ties (G(n, m), seeded). Among a few agents who meet often
    nearly any pattern of ties holds a clique; this says how much of the society's structure the
    number of ties alone explains. ``observed_outside_ties``: the graph's own outsiders' mean ties,
    ``social_structure``'s (its cliques are not searched for again); None: measured here."""
    _, ties = _ties(graph, min_weight)
    n, m = ties.number_of_nodes(), ties.number_of_edges()
    if observed_outside_ties is None:
        observed_outside_ties = outsiders_ties(ties, _cliques(ties))
    if n == 0:
        return {"ties": 0, "cliques": math.nan, "largest_clique": math.nan, "outside_cliques": math.nan,
                "outside_ties": math.nan, "outside_ties_p": math.nan}
    graphs = [nx.gnm_random_graph(n, m, seed=seed + i) for i in range(draws)]
    found = [_cliques(g) for g in graphs]
    isolation = [v for g, cs in zip(graphs, found, strict=True) if not math.isnan(v := outsiders_ties(g, cs))]
    return {"ties": m, "cliques": sum(map(len, found)) / draws,
            "largest_clique": sum(len(cs[0]) if cs else 0 for cs in found) / draws,
            "outside_cliques": sum(outside(range(n), cs) for cs in found) / draws,
            **outsiders_against_chance(observed_outside_ties, isolation)}


def outsiders_against_chance(observed: float, by_chance: list[float]) -> dict[str, float]:
    """The outsiders' mean ties in the random graphs that leave someone outside a clique
    (``outside_ties``), and ``outside_ties_p``: the share of them whose outsiders hold as few ties as
    ``observed`` or fewer, counting the observed graph as one of them (a permutation test's p: never
    0). A p at or above ``SIGNIFICANT`` says the outsiders' isolation is within what the number of
    ties alone gives: agents with few ties end outside cliques in random graphs too. NaN where it
    cannot be measured."""
    if not by_chance:
        return {"outside_ties": math.nan, "outside_ties_p": math.nan}
    p = math.nan if math.isnan(observed) else (sum(v <= observed for v in by_chance) + 1) / (len(by_chance) + 1)
    return {"outside_ties": sum(by_chance) / len(by_chance), "outside_ties_p": p}


def social_structure(graph: nx.DiGraph, min_weight: int = 1) -> dict:
    """Cliques (≥ 3 agents, ties of at least ``min_weight`` interactions either way), the
    leader (the most central: most partners, then most interactions; None if tied — never by
    name) and the isolated agents; also the largest clique's size and how many agents are in none."""
    undirected, strong = _ties(graph, min_weight)
    cliques = _cliques(strong)
    strength = dict(undirected.degree(weight="weight"))
    centrality = nx.degree_centrality(undirected)
    leader = None
    if any(strength.values()):  # most partners, then most interactions; a tie at the top: no leader
        ranked = sorted(undirected.nodes, key=lambda n: (-centrality[n], -strength[n]))
        top = (centrality[ranked[0]], strength[ranked[0]])
        if len(ranked) == 1 or (centrality[ranked[1]], strength[ranked[1]]) != top:
            leader = ranked[0]
    isolated = sorted(n for n in undirected.nodes if undirected.degree(n) == 0)
    return {"cliques": cliques, "largest_clique": len(cliques[0]) if cliques else 0,
            "outside_cliques": outside(undirected.nodes, cliques), "outside_ties": outsiders_ties(strong, cliques),
            "leader": leader, "isolated": isolated,
            "centrality": {n: round(v, 4) for n, v in sorted(centrality.items())},
            "strength": strength}


# --- figures ------------------------------------------------------------------------------------------
def _agent_frame(model: SocietyModel) -> pd.DataFrame:
    df = model.datacollector.get_agent_vars_dataframe().reset_index()
    return df.rename(columns={"Step": "step"}) if "Step" in df.columns else df


def plot_over_time(model: SocietyModel, figures: Path) -> list[str]:
    """Driver, P/A/D, resources per agent and topic per area over time; returns file names."""
    if not figures_drawn():
        return []
    df = _agent_frame(model)
    written = []
    if df.empty or not model.datacollector.model_vars.get("step"):  # no step collected: rows of NaN only
        return written
    step_col = "step" if "step" in df.columns else df.columns[0]

    def lines(column: str, ax, title: str) -> None:
        data = df.pivot_table(index=step_col, columns="name", values=column, aggfunc="first")
        data.plot(ax=ax, legend=False)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step")

    fig, ax = plt.subplots(figsize=(6, 3))
    lines("driver", ax, "Driver per agent (cf. paper Fig. 6a)")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(figures / "itcmas_driver.png", dpi=110)
    plt.close(fig)
    written.append("itcmas_driver.png")

    fig, axes = plt.subplots(1, 3, figsize=(10, 3), sharey=True)
    for ax, dim, label in zip(axes, "PAD", ("pleasure", "arousal", "dominance"), strict=True):
        lines(dim, ax, f"{label} ({dim})")
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle("Emotions per agent (cf. paper Fig. 6b)", fontsize=10)
    fig.tight_layout()
    fig.savefig(figures / "itcmas_pad.png", dpi=110)
    plt.close(fig)
    written.append("itcmas_pad.png")

    if df["resources"].notna().any():
        fig, ax = plt.subplots(figsize=(6, 3))
        df["resources"] = df["resources"].astype(float)
        lines("resources", ax, "Resources per agent (cf. paper Fig. 7a)")
        ax.legend(fontsize=7, ncol=3)
        fig.tight_layout()
        fig.savefig(figures / "itcmas_resources.png", dpi=110)
        plt.close(fig)
        written.append("itcmas_resources.png")

    topics = model.datacollector.get_table_dataframe("topics")
    if not topics.empty:
        fig, ax = plt.subplots(figsize=(6, 3))
        topics.pivot_table(index="step", columns="area", values="topic").plot(ax=ax, marker=".")
        ax.set_title("Topic per area (cf. paper Fig. 7b)", fontsize=9)
        ax.legend(fontsize=6, ncol=2)
        fig.tight_layout()
        fig.savefig(figures / "itcmas_topic.png", dpi=110)
        plt.close(fig)
        written.append("itcmas_topic.png")
    return written


# --- the judge ----------------------------------------------------------------------------------------
def judge_contexts(actions: pd.DataFrame, areas_total: int) -> list[JudgeContext]:
    """One context per agent from its rows of the ``itcmas_actions`` table. The trajectory shows what
    the agent did, not the table's marks of why an action was not carried out: "(This action has been
    filtered by LTRHA)" and the statuses filtered and failed (eq. 18) exist only in LTRHA's variants,
    so a judge reading them would read the treatment's name. Each step is "done" or "not done"."""
    contexts = []
    for agent, rows in actions.sort_values("step").groupby("agent", sort=True):
        trajectory = [f"step {r.step} in {r.area}: thought: {r.thought or '-'} -> {r.action.removeprefix(FILTERED_PREFIX)} "
                      f"[{'done' if r.status == 'done' else 'not done'}]" for r in rows.itertuples()]
        verbs = Counter(_verb(a) for a in rows["action"])
        total = sum(verbs.values())
        entropy = -sum(c / total * math.log(c / total) for c in verbs.values()) / math.log(6) if total else 0.0
        reversals = 0
        # the filter's mark removed: a reversal is counted the same whichever variant's mark stopped the action
        previous = [a.removeprefix(FILTERED_PREFIX) for a in rows["action"]]
        areas = list(rows["area"])
        for k in range(1, len(previous)):
            # undoing the previous step: going straight back where one came from, putting down
            # what one has just taken
            back = k >= 2 and previous[k] == f"go to {areas[k - 2]}" and areas[k - 1] != areas[k - 2]
            reversals += back or (previous[k].startswith("put") and previous[k - 1].startswith("take"))
        contexts.append(JudgeContext(
            agent=agent, trajectory=trajectory, areas_visited=rows["area"].nunique(), areas_total=areas_total,
            chats_started=int(sum(a.startswith("chat with") and s == "done" for a, s in zip(rows["action"], rows["status"], strict=True))),
            steps=len(rows), executed=int((rows["status"] == "done").sum()), reversals=reversals,
            verb_entropy=min(1.0, entropy)))
    return contexts


def _verb(action: str) -> str:
    action = action.removeprefix(FILTERED_PREFIX)
    for verb in ("go to", "use", "leave", "take", "put", "chat with"):
        if action.startswith(verb):
            return verb
    return "other"


JUDGE_FILE = "itcmas_judge.parquet"


def judge_run(actions: pd.DataFrame, areas_total: int, judge_model: str = "rules",
              actors: set[str] | None = None, rng_seed: int = 0, run_gateway=None) -> pd.DataFrame:
    """Scores per agent on the five dimensions (1-7). An LLM judge must not be an actor's model.
    With ``run_gateway`` (a run's gateway), the judge shares its tape, ledger, endpoint and limits."""
    import random

    from socialsim.llm.gateway import Gateway
    from socialsim.llm.loop import run_sync

    if judge_model != RULES and judge_model in (actors or set()):
        raise ValueError(f"the judge model {judge_model!r} also played the agents; use a different model "
                         f"(or 'rules' for the baseline)")
    routes = RouteTable(judge_model)
    gateway = run_gateway.derive(routes) if run_gateway is not None else Gateway(routes)
    rng = random.Random(rng_seed)

    async def score_all():
        return [await gateway.ask(JUDGE, ctx, agent_id=None, rng=rng) for ctx in judge_contexts(actions, areas_total)]

    answers = run_sync(score_all())
    # the rules' shares of an agent that carried out no action are vacuous (no reversal: "consistent")
    rows = [{"agent": ctx.agent, **a.value.model_dump(),
             "status": NOTHING_DONE if judge_model == RULES and not ctx.executed else a.status}
            for ctx, a in zip(judge_contexts(actions, areas_total), answers, strict=True)]
    frame = pd.DataFrame(rows, columns=["agent", *DIMENSIONS, "status"])
    frame.attrs["judge"] = RULES_LABEL if judge_model == RULES else judge_model
    return frame


NOTHING_DONE = "nothing done"  # the rules judge's status for an agent that carried out no action


def judged(scores: pd.DataFrame) -> pd.DataFrame:
    """The scores a judge gave: an answer that fell back holds the scale's midpoint on every
    dimension, which no one judged, and the rules' shares of an agent that did nothing measure
    nothing (a perfect "consistency" of no action): both are left out of every mean (and counted)."""
    return scores[~scores["status"].isin(["fallback", NOTHING_DONE])] if "status" in scores else scores


def judge_table(scores: pd.DataFrame, ablation: str) -> str:
    """Our mean scores beside the paper's Table 1 row for the same architecture (Markdown)."""
    usable = judged(scores)
    ours = [usable[d].mean() if not usable.empty else float("nan") for d in DIMENSIONS]
    header = "| | " + " | ".join(d.capitalize() for d in DIMENSIONS) + " |"
    lines = [header, "|" + "---|" * (len(DIMENSIONS) + 1)]
    lines.append(f"| paper, {ablation} (48 human raters) | " + " | ".join(f"{v:.2f}" for v in PAPER_TABLE[ablation]) + " |")
    lines.append(f"| ours, {scores.attrs.get('judge', '?')} | " + " | ".join(f"{v:.2f}" for v in ours) + " |")
    fell_back = int((scores["status"] == "fallback").sum()) if "status" in scores else 0
    idle = int((scores["status"] == NOTHING_DONE).sum()) if "status" in scores else 0
    if fell_back:
        lines += ["", f"Not counted: {fell_back} of {len(scores)} agents' scores, whose judge's answer was "
                      "unusable (the fallback's midpoint is no judgement; each failure is in run.log)."]
    if idle:
        lines += ["", f"Not counted: {idle} of {len(scores)} agents, who carried out no action (every one "
                      "filtered, failed or refused): the rules' shares of nothing measure nothing."]
    return "\n".join(lines)


# --- the report --------------------------------------------------------------------------------------
def report_sections(model: SocietyModel, run_dir) -> list[str]:
    run_dir = Path(run_dir)
    figures = run_dir / "figures"
    figures.mkdir(exist_ok=True)
    cfg = model.society.config
    written = plot_over_time(model, figures)
    structure = social_structure(model.interactions)
    chance = chance_structure(model.interactions, structure["outside_ties"])
    actions = model.datacollector.get_table_dataframe("itcmas_actions")
    status_counts = actions["status"].value_counts().to_dict() if not actions.empty else {}
    memory = {a.name: len(a.consciousness.long_term) for a in sorted(model.agents, key=lambda a: a.name)}
    frames = {a.name: sum(m.frames for m in a.consciousness.long_term) for a in sorted(model.agents, key=lambda a: a.name)}
    parts = [
        "## ITCMA-S + LTRHA",
        "",
        f"Ablation: **{cfg.ablation}** (modules: {', '.join(k for k, v in cfg.modules.items() if v) or 'none'}). "
        f"Actions: {_counted(status_counts) or 'none'}. Filtered by LTRHA: {model.society.filtered_total}. "
        f"Matrix runs: {model.society.matrix_runs}.",
        "",
        *_all_filtered(model, status_counts, len(actions)),
        "Memories per agent (stored / frames they stand for): "
        + ", ".join(f"{n} {memory[n]}/{frames[n]}" for n in memory) + ".",
        "",
        "### Society",
        "",
        f"Cliques (≥3 agents): {'; '.join(', '.join(c) for c in structure['cliques']) or 'none'}. "
        f"Leader (most central): {structure['leader'] or 'none'}. "
        f"Isolated agents: {', '.join(structure['isolated']) or 'none'}. "
        f"Interaction strength: {_counted(structure['strength']) or 'none'}.",
        "",
        "| | cliques | largest clique | agents outside every clique |",
        "|---|---|---|---|",
        f"| this run | {len(structure['cliques'])} | {structure['largest_clique']} | {structure['outside_cliques']} |",
        f"| chance: random graphs with the same agents and as many ties ({chance['ties']}), {CHANCE_DRAWS} draws | "
        f"{chance['cliques']:.2f} | {chance['largest_clique']:.2f} | {chance['outside_cliques']:.2f} |",
        "",
        *outsiders_line(structure["outside_ties"], chance),
        *(f"![{name}](figures/{name})" for name in written),
    ]
    if not actions.empty:
        parts += ["", "### Five dimensions (7-point)", "", *judge_section(model, actions, run_dir)]
    return parts


def outsiders_line(observed: float, chance: dict) -> list[str]:
    """Whether the agents outside every clique are more isolated than chance's outsiders (the
    paper's "mostly isolated"), or within what the number of ties alone gives."""
    if math.isnan(observed) or math.isnan(chance["outside_ties_p"]):
        return []
    p = chance["outside_ties_p"]
    verdict = (f"fewer than chance gives (p = {p:.3g} < {SIGNIFICANT})" if p < SIGNIFICANT else
               f"**within chance** (p = {p:.3g}): the number of ties alone leaves agents this isolated outside cliques")
    return [f"Agents outside every clique hold {observed:.2f} ties each on the mean; random graphs with as many ties "
            f"that leave someone outside a clique leave their outsiders {chance['outside_ties']:.2f}: {verdict}. "
            "`p`: the share of those random graphs whose outsiders hold as few ties or fewer.", ""]


def _counted(counts: dict) -> str:
    """``{"done": 32, "failed": 8}`` as the report's reader reads it: "done 32, failed 8"."""
    return ", ".join(f"{name} {n}" for name, n in counts.items())


def _all_filtered(model: SocietyModel, status_counts: dict[str, int], actions: int) -> list[str]:
    """A warning when LTRHA's social filter, asked of a model, blocked every action: nothing was done,
    so the society's structure and the judge's scores below describe agents that never acted."""
    filter_model = model.llm.routes.model_for(SOCIAL_FILTER.name, SOCIAL_FILTER.module)
    if not actions or status_counts.get("filtered", 0) < actions or filter_model == RULES:
        return []
    return [f"**Every action ({actions}) was filtered by LTRHA's social filter**: `{filter_model}` judged each one "
            "harmful to social interaction, so no agent did anything. A small model's yes-bias does this (SmolLM2 "
            "answers yes to nearly every action the filter asks about); route the filter to a stronger model, or to the rules "
            f"(`--route {SOCIAL_FILTER.module}=rules`).", ""]


def judge_section(model: SocietyModel, actions: pd.DataFrame, run_dir: Path) -> list[str]:
    """Judge the run on the paper's five dimensions (its judge route, on the run's tape and budget),
    save the scores for ``reproduce`` and say who judged."""
    from socialsim.metrics.report import end_of_run_measurement

    routes = model.llm.routes
    judge = run_judge(routes)
    scores = end_of_run_measurement(model, f"the judge {judge}", lambda: judge_run(
        actions, len(model.world.areas) if model.world else 1, judge, actor_models(routes) - {RULES},
        run_gateway=model.llm))
    if scores is None:  # stopped by the budget or an outage: the run's status says so
        return [f"Not measured: {model.measurement_stopped}."]
    (run_dir / "tables").mkdir(exist_ok=True)
    scores.assign(judge=judge).to_parquet(run_dir / "tables" / JUDGE_FILE, index=False)
    who = ("The `rules` judge below is a transparent baseline, not an LLM judgement; judge with an LLM no actor "
           f"uses via `--route {JUDGE.module}=MODEL`, or afterwards via "
           "`python -m socialsim.agents.itcmas.metrics RUN_DIR --judge MODEL`." if judge == RULES else
           f"Judged by `{judge}`, an LLM no actor uses (the paper had 48 human raters).")
    return [who, "", judge_table(scores, model.society.config.ablation)]


REJUDGED = "rejudged"  # a finished run's later judgements: beside its recorded files, never among them


def main(argv: list[str] | None = None) -> int:
    """Judge a finished run again, e.g. with an LLM: the calls go on their own tape in the run's
    ``rejudged/`` folder (the same command again answers from it, at no cost), and the scores are
    saved there as ``JUDGE.parquet``; the run's own files, which replay checks, are not touched."""
    import argparse

    from socialsim.llm.gateway import Gateway
    from socialsim.llm.tape import Tape

    parser = argparse.ArgumentParser(description="Judge an ITCMA-S run on the paper's five dimensions")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--judge", default="rules", help="judge model (must differ from the actors'); default: rules")
    parser.add_argument("--api-base", default=None, help="the judge's OpenAI-compatible endpoint, if not its provider's")
    args = parser.parse_args(argv)
    from socialsim.model.run_dir import is_run_dir, not_a_run_dir, recorded_scenario
    from socialsim.scenarios.loader import load_scenario

    if not is_run_dir(args.run_dir):
        print(f"error: {not_a_run_dir(args.run_dir)}", file=sys.stderr)
        return 2
    config = json.loads((args.run_dir / "config.json").read_text())["config"]
    table = args.run_dir / "tables" / "itcmas_actions.parquet"
    if not table.is_file():  # a traceback said only that the file was missing
        print(f"error: {args.run_dir} has no ITCMA-S trajectories to judge ({table} is missing; the run's "
              f"architecture: {config.get('arch')})", file=sys.stderr)
        return 2
    actors = actor_models(RouteTable(config.get("model"), dict(config.get("routes", {}))))
    actions = pd.read_parquet(table)
    # the run's own copy when its file was edited or moved, as replay reads it: judged from any folder
    scenario = load_scenario(recorded_scenario(args.run_dir, config["scenario"]))
    ablation = {**(scenario.itcmas or {}), **config.get("arch_params", {})}.get("ablation", "full")
    folder = args.run_dir / REJUDGED
    from socialsim.llm.engines import ModelUnavailable, check_models
    from socialsim.llm.gateway import ProviderOutage
    from socialsim.llm.ledger import BudgetExhausted

    try:  # a judge with no key or no server is named before any call (as `socialsim run` names it)
        check_models({args.judge}, ping=False, api_base=args.api_base)  # no request: a rerun may need none
    except ModelUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    gateway = Gateway(RouteTable(args.judge), tape=Tape(folder / "tape.jsonl"), api_base=args.api_base)
    try:
        scores = judge_run(actions, len(scenario.map.areas) if scenario.map else 1, args.judge, actors,
                           run_gateway=gateway)
    except (ProviderOutage, BudgetExhausted) as exc:  # the calls made so far are on the tape: run it again
        print(f"error: the judge stopped: {exc}; the same command again goes on from {folder / 'tape.jsonl'}",
              file=sys.stderr)
        return 3
    folder.mkdir(exist_ok=True)
    saved = folder / f"{args.judge.replace('/', '_')}.parquet"
    scores.assign(judge=args.judge).to_parquet(saved, index=False)
    print(scores.to_string(index=False))
    print()
    print(judge_table(scores, ablation))
    usage = gateway.ledger.totals()
    print(f"\nsaved: {saved}; live calls {gateway.ledger.live_calls}, cost ${usage['cost_usd']:.4f} "
          f"(the same command again answers from {folder / 'tape.jsonl'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
