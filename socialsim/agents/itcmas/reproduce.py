"""The paper's protocol for ``socialsim reproduce itcmas``: the five architectures (base ITCMA,
LTRHA only, compressed memory only, driver only, full ITCMA-S) on IrollanValley for 75 steps, the
judge's five-dimension scores beside the paper's Table 1, and the society each run formed.

Per run: the leader (most central in the interaction graph; NaN when the top is tied), the
number of cliques (≥ 3 agents), the largest one's size, the agents outside every clique (NaN
when no clique formed: then no one is left out of one) and their mean ties (``outside_ties``), each
beside its chance level in random graphs with as many ties (``NAME_chance``; ``outside_ties_p``, the
share of random graphs whose outsiders hold as few ties or fewer), isolated agents, the
Gini of the resources the run ended with (after its last matrix reallocation; NaN without LTRHA), the range of P, A and D over all agents and
steps, the share of chats the agents chose (carried out, failed or filtered), filtered actions, and the mean judge score per dimension. The judge (route ``itcmas_judge``) scores each run at its
end, on the run's tape and budget (``tables/itcmas_judge.parquet``); it must be a different model
from the actors'; without ``--judge`` it is the rules baseline, which measures shares and is not a
judgement.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import pandas as pd

from socialsim.agents.itcmas.ltrha import FILTERED_PREFIX, gini
from socialsim.agents.itcmas.metrics import (
    DIMENSIONS,
    JUDGE_FILE,
    PAPER_TABLE,
    chance_structure,
    judge_run,
    judged,
    social_structure,
)
from socialsim.model.reproduce import SIGNIFICANT, Figures, Finding, Protocol, ProtocolRun, compare
from socialsim.model.society import SocietyModel

VARIANTS = ("base", "ltrha", "memory", "driver", "full")
AGENTS = ("AY", "SG", "MD", "WL", "LL", "WM")  # IrollanValley's inhabitants, for the leader column
AREAS_TOTAL = 9


def final_resources(run_dir: Path, actions: pd.DataFrame) -> pd.Series:
    """Every agent's resources at the end of the run: the agents frame's last step, recorded after
    that step's matrix reallocation (eq. 19). The last step's rows of ``itcmas_actions`` are written
    before it (75 steps with ``matrix_every`` 5 reallocate at the last step), so they stand in only
    for a run directory without an agents frame."""
    agents_file = Path(run_dir) / "agents.parquet"
    if agents_file.is_file():
        frame = pd.read_parquet(agents_file)
        step = "Step" if "Step" in frame else "step"
        if "resources" in frame and len(frame):
            return pd.to_numeric(frame.loc[frame[step] == frame[step].max(), "resources"], errors="coerce")
    last = actions[actions["step"] == actions["step"].max()]
    return pd.to_numeric(last["resources"], errors="coerce")


def measure_run(run_dir: Path) -> dict[str, float]:
    run_dir = Path(run_dir)
    actions = pd.read_parquet(run_dir / "tables" / "itcmas_actions.parquet")
    interactions = pd.read_parquet(run_dir / "tables" / "interactions.parquet")
    graph = nx.DiGraph()
    graph.add_nodes_from(actions["agent"].unique())
    for (a, b), n in interactions.groupby(["initiator", "receiver"]).size().items():
        graph.add_edge(a, b, weight=int(n))
    structure = social_structure(graph)
    chance = chance_structure(graph, structure["outside_ties"])
    out: dict[str, float] = {
        "cliques": float(len(structure["cliques"])),
        "cliques_chance": chance["cliques"],
        "largest_clique": float(structure["largest_clique"]),
        "largest_clique_chance": chance["largest_clique"],
        "isolated": float(len(structure["isolated"])),
        # with no clique, every agent is "outside" it: the paper's "left out of the clique" is then not measured
        "outside_cliques": float(structure["outside_cliques"]) if structure["cliques"] else float("nan"),
        "outside_cliques_chance": chance["outside_cliques"],
        # the paper's outsiders were "mostly isolated": their ties beside those of random graphs' outsiders
        "outside_ties": structure["outside_ties"],
        "outside_ties_chance": chance["outside_ties"],
        "outside_ties_p": chance["outside_ties_p"],
        # the chats the agents chose, carried out or not: the filter's mark on a filtered one (LTRHA's variants
        # only) does not make it less of a chat than a failed one
        "chat_share": float(actions["action"].str.removeprefix(FILTERED_PREFIX).str.startswith("chat with").mean()),
        "filtered": float((actions["status"] == "filtered").sum()),
    }
    for name in AGENTS:
        out[f"leader_{name}"] = float(structure["leader"] == name)
    final = final_resources(run_dir, actions)
    out["gini"] = gini(final) if len(final) and final.notna().all() else float("nan")
    for dim in ("P", "A", "D"):
        out[f"{dim}_min"], out[f"{dim}_max"] = float(actions[dim].min()), float(actions[dim].max())
    late = actions[actions["step"] > actions["step"].max() - 20]
    out["P_moving_share"] = float((late.groupby("agent")["P"].std() > 0.02).mean())
    judge_file = run_dir / "tables" / JUDGE_FILE  # the run's own judge, on its tape and budget
    scores = pd.read_parquet(judge_file) if judge_file.is_file() else judge_run(actions, AREAS_TOTAL)  # older: rules
    usable = judged(scores)  # a fallback's midpoint is no judgement
    for dim in DIMENSIONS:
        out[dim] = float(usable[dim].mean())  # NaN when nothing was judged
    return out


def rated_above(variant: str, others: tuple[str, ...]) -> Callable[[Figures], bool]:
    """``variant``'s mean score is above each of ``others``' on every dimension."""
    return lambda figure: all(figure(variant, d) > figure(o, d) for d in DIMENSIONS for o in others)


OUTSIDERS = ("full ITCMA-S: some agents stay outside every clique, with fewer ties than random ties as many leave "
             f"such agents (p < {SIGNIFICANT}, as the run report says)")
CONTROL = "(a control, not the paper's: if it does not hold, the clique findings do not single out ITCMA-S)"


def findings() -> list[Finding]:
    """Sec. 5.2-5.3's findings: full ITCMA-S rated best and base ITCMA worst on every dimension, LTRHA
    alone second only to the full architecture, and the full architecture's agents forming a clique
    that leaves some of them out with fewer ties than random ties leave their outsiders, a larger
    one than random ties would form; and a control of ours, a
    larger clique than base ITCMA's."""
    return [
        Finding("full ITCMA-S is rated above every ablation on every dimension",
                rated_above("full", ("base", "ltrha", "memory", "driver"))),
        Finding("LTRHA alone is rated above compressed memory alone, driver alone and base on every dimension",
                rated_above("ltrha", ("memory", "driver", "base"))),
        Finding("base ITCMA is rated below every other architecture on every dimension",
                lambda figure: all(figure(o, d) > figure("base", d)
                                   for d in DIMENSIONS for o in ("ltrha", "memory", "driver", "full"))),
        compare("full ITCMA-S's agents form at least one clique (3 or more agents)", ("full", "cliques"), ">=", 1.0),
        # Sec. 5.3: "agents not included in this clique were mostly isolated" (WL and MD, almost no ties).
        # Where ties are few, random ties leave agents outside cliques too: the outsiders' ties are set
        # against those random graphs leave theirs, and fewer only where few of those graphs' outsiders
        # hold as few (the run report's "within chance" otherwise; a seed's verdict is its own p's)
        Finding(OUTSIDERS, lambda figure: figure("full", "outside_cliques") >= 1.0
                and figure("full", "outside_ties") < figure("full", "outside_ties_chance")
                and figure("full", "outside_ties_p") < SIGNIFICANT),
        # ... and more than the number of ties alone explains: among six agents who meet often, random
        # ties hold cliques too, but smaller ones (chance_structure)
        compare("full ITCMA-S: its largest clique is larger than random ties as many would form",
                ("full", "largest_clique"), ">", ("full", "largest_clique_chance")),
        # not the paper's: a control. Base ITCMA forms cliques too; where its largest is as large, the
        # clique findings above do not single out ITCMA-S's modules
        compare(f"full ITCMA-S's largest clique is larger than base ITCMA's {CONTROL}",
                ("full", "largest_clique"), ">", ("base", "largest_clique")),
    ]


def judge_calls(judge: str | None) -> Callable[[ProtocolRun], tuple[str, int] | None]:
    """The five-dimension judge asked after each run: one call per agent."""
    return lambda spec: (f"the five-dimension judge {judge}", len(AGENTS)) if judge else None


def judge_probe(judge: str | None) -> Callable[[SocietyModel, int], None] | None:
    """The judge asked on a (dry) society's gateway as if its run had lasted ``steps`` steps, for the
    projection to measure its prompts: each holds the agent's trajectory, one line a step (the last
    40), so the probe's few steps are repeated to the run's length."""
    if not judge:
        return None

    def probe(society: SocietyModel, steps: int) -> None:
        actions = society.datacollector.get_table_dataframe("itcmas_actions")
        if actions.empty:
            return
        probed = int(actions["step"].max())
        extended = pd.concat([actions.assign(step=actions["step"] + k * probed)
                              for k in range(math.ceil(steps / probed))], ignore_index=True)
        judge_run(extended[extended["step"] <= steps], AREAS_TOTAL, judge, run_gateway=society.llm)

    return probe


def protocol(judge: str | None = None) -> Protocol:
    runs = [ProtocolRun(label=v, scenario="irollan-valley", steps=75, preset=v) for v in VARIANTS]
    paper = pd.DataFrame([{"label": v, "metric": d, "paper": PAPER_TABLE[v][i]}
                          for v in VARIANTS for i, d in enumerate(DIMENSIONS)])
    return Protocol(
        arch="itcmas", runs=runs, measure=measure_run, paper=paper,
        description="ITCMA-S + LTRHA (Table 1): five architectures on IrollanValley, 75 steps; 48 human "
                    "raters in the paper, here the judge " + (f"{judge} (route itcmas_judge), at the end of each run."
                    if judge else "rules: the baseline's measured shares, not a judgement (--judge MODEL for an LLM)."),
        routes={"itcmas_judge": judge} if judge else {}, findings=findings(), after_run=judge_calls(judge),
        after_run_probe=judge_probe(judge))
