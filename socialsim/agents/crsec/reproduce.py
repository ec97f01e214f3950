"""``socialsim reproduce crsec``: the paper's protocol (Hobbs Cafe, 2 days, 10 agents, seeds 1..k).

Measured per run from its files (``model.parquet``, ``agents.parquet``, ``tables/breaches.parquet``,
``tables/events.parquet``, ``scenario.yaml``):
adoption and compliance of each tracked norm at the end, compliance over the whole of day 2 (not
measured when no act on day 2 bore on the norm: nobody had the chance to breach it), the same among
only the agents who did what the norm speaks about on day 2 (``acting compliance``), the conflict
peak and the conflicts of day 2 against day 1 - the same clock hours, 08:00-22:00 each day, so the
daily schedule (a busy lunch, a quiet evening) cancels out (per agent, whether its first adoption
preceded its first visibly compliant act is in the run report); with an LLM judge, the Appendix-E
questionnaire's mean rating per task (``tables/crsec_questionnaire.parquet``).
The paper's figures are the ones its text states (Sec. 3.2); qualitative findings are NaN here.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pandas as pd

from socialsim.agents.crsec.metrics import (
    QUESTIONNAIRE_FILE,
    acts_bearing_on,
    ask_questionnaire_of_judge,
    unbroken_share,
)
from socialsim.agents.crsec.questionnaire import TASKS, summary
from socialsim.agents.crsec.settings import CRSECSettings
from socialsim.model.reproduce import Finding, Protocol, ProtocolRun, compare
from socialsim.model.society import SocietyModel

TRACKED = ("no smoking indoors", "be quiet in public", "tip after meals")

# Ren et al. (CRSEC), Sec. 3.2: 100% adopt and comply with both injunctive norms by the end of day 2;
# tipping (descriptive) emerges by the end of day 2 (most agents; no share stated); conflicts fall (no count stated).
PAPER = pd.DataFrame([
    {"label": "*", "metric": "adoption[no smoking indoors] at end", "paper": 1.0},
    {"label": "*", "metric": "compliance[no smoking indoors] at end", "paper": 1.0},
    {"label": "*", "metric": "adoption[be quiet in public] at end", "paper": 1.0},
    {"label": "*", "metric": "compliance[be quiet in public] at end", "paper": 1.0},
    {"label": "*", "metric": "adoption[tip after meals] at end", "paper": float("nan")},
    {"label": "*", "metric": "compliance[tip after meals] at end", "paper": float("nan")},
    # "at end" is the last hour of day 2 (`compliance_window_steps`), when hardly anyone eats or smokes
    # in the cafe; over the whole of day 2 (the run's second half): agents who never breached the norm
    *({"label": "*", "metric": f"compliance[{n}] over day 2", "paper": p}
      for n, p in (("no smoking indoors", 1.0), ("be quiet in public", 1.0), ("tip after meals", float("nan")))),
    # the same among the agents who had the chance to breach it on day 2 (smoked, indoors or out; ate; spoke):
    # an agent who never did what the norm speaks about is not counted as complying
    *({"label": "*", "metric": f"acting compliance[{n}] over day 2", "paper": p}
      for n, p in (("no smoking indoors", 1.0), ("be quiet in public", 1.0), ("tip after meals", float("nan")))),
    {"label": "*", "metric": "conflicts peak", "paper": float("nan")},
    # the same clock hours of both days: the run's first and last quarters were 08:00-15:00 of day 1 against
    # 15:00-22:00 of day 2, and the afternoon is quieter, so conflicts "fell" with no agent ever persuaded
    {"label": "*", "metric": "conflicts day 2 / day 1", "paper": float("nan")},
    # Sec. 3.3, Figure 4: human raters' mean 7-point Likert score per module; here an LLM judge's
    *({"label": "*", "metric": f"rating[{t.name}]", "paper": t.paper} for t in TASKS),
])


RUN = "hobbs-cafe / paper"
TIPPING_EMERGES = "'tip after meals' emerges: most agents (over half) have adopted it by the end of day 2"
INJUNCTIVE = ("no smoking indoors", "be quiet in public")
CONFLICTS_FALL = "conflicts fall: fewer on day 2 than on day 1 (the same hours, 08:00-22:00, each day)"


def findings() -> list[Finding]:
    """Sec. 3.2's findings: the injunctive norms adopted and complied with by everyone by the end of
    day 2, tipping emerging, conflicts falling."""
    out = []
    for norm in INJUNCTIVE:
        out += [compare(f"every agent has adopted '{norm}' by the end of day 2",
                        (RUN, f"adoption[{norm}] at end"), ">=", 1.0),
                compare(f"every agent complies with '{norm}' all through day 2",
                        (RUN, f"compliance[{norm}] over day 2"), ">=", 1.0),
                compare(f"every agent who did what '{norm}' speaks about on day 2 kept it all day",
                        (RUN, f"acting compliance[{norm}] over day 2"), ">=", 1.0)]
    return out + [
        # "emerged" is the paper's word for most agents adopting (and keeping) a norm (Sec. 3.2); two
        # entrepreneurs favour tipping and may hold it from step 1, so "some agents" would hold by seeding
        compare(TIPPING_EMERGES, (RUN, "adoption[tip after meals] at end"), ">", 0.5),
        compare(CONFLICTS_FALL, (RUN, "conflicts day 2 / day 1"), "<", 1.0),
    ]


def measure(run_dir: Path) -> dict[str, float]:
    frame = pd.read_parquet(Path(run_dir) / "model.parquet")
    out: dict[str, float] = {}
    for norm in TRACKED:
        for kind in ("adoption", "compliance"):
            column = f"{kind}[{norm}]"
            out[f"{column} at end"] = float(frame[column].iloc[-1]) if column in frame else float("nan")
    out.update(compliance_over_second_half(Path(run_dir), frame))
    conflicts = frame["conflicts"] if "conflicts" in frame else pd.Series(dtype=float)
    out["conflicts peak"] = float(conflicts.max()) if len(conflicts) else float("nan")
    out["conflicts day 2 / day 1"] = day_ratio(conflicts)
    per_day = _steps_per_day(Path(run_dir))
    if per_day is not None and len(frame) < 2 * per_day:  # a run cut short (--steps): its halves are not days
        out.update({k: float("nan") for k in out if k.endswith("over day 2") or k == "conflicts day 2 / day 1"})
    ratings = Path(run_dir) / "tables" / QUESTIONNAIRE_FILE  # only with an LLM judge (--judge)
    means = summary(pd.read_parquet(ratings)).set_index("task")["mean"] if ratings.is_file() else {}
    for t in TASKS:
        out[f"rating[{t.name}]"] = float(means.get(t.name, float("nan")))
    return out


def day_ratio(counts: pd.Series) -> float:
    """Day 2's events over day 1's, the paper's preset being two days of equal length (the run's two
    halves; reproduce measures only whole runs): the same clock hours each day. A rise from none on
    day 1 has not fallen (inf); none on either day, nothing to fall (NaN)."""
    if len(counts) < 2:
        return float("nan")
    day = len(counts) // 2
    first, second = float(counts.iloc[:day].sum()), float(counts.iloc[day:2 * day].sum())
    return second / first if first else (math.inf if second else float("nan"))


def compliance_over_second_half(run_dir: Path, frame: pd.DataFrame) -> dict[str, float]:
    """Per tracked norm, over the run's second half (day 2 of the paper's protocol), from the world
    facts' breaches and events tables and the agents' names:

    - ``compliance[NORM] over day 2``: the share of all agents with no breach of it; NaN (not
      measured) when no executed act of day 2 bore on the norm (nobody smoked, indoors or out; nobody
      ate): "nobody breached it" would then say only that nothing happened;
    - ``acting compliance[NORM] over day 2``: the same share among the agents who did what it speaks
      about that day or breached it (``metrics.acting_unbroken_share``): an agent who never smoked is
      not counted as keeping "no smoking indoors".

    Which acts bear on a norm is read from the run's own scenario copy and its events table
    (``metrics.bears_on``); without them the acting share is NaN."""
    from socialsim.agents.crsec.metrics import acting_unbroken_share

    agents_file, breaches_file = run_dir / "agents.parquet", run_dir / "tables" / "breaches.parquet"
    events_file = run_dir / "tables" / "events.parquet"
    agents = pd.read_parquet(agents_file, columns=["name"])["name"].nunique() if agents_file.is_file() else 0
    breaches = pd.read_parquet(breaches_file) if breaches_file.is_file() else pd.DataFrame(
        columns=["step", "agent", "norm"])
    half = len(frame) // 2
    found = _run_settings(run_dir)
    events = pd.read_parquet(events_file) if found is not None and events_file.is_file() else None
    out = {}
    for n in TRACKED:
        if f"compliance[{n}]" not in frame:
            out[f"compliance[{n}] over day 2"] = out[f"acting compliance[{n}] over day 2"] = float("nan")
            continue
        chances = None if events is None else acts_bearing_on(events, found[1], found[0].step_minutes, n, half)
        out[f"compliance[{n}] over day 2"] = unbroken_share(breaches, agents, n, half, chances)
        out[f"acting compliance[{n}] over day 2"] = (
            float("nan") if events is None
            else acting_unbroken_share(events, breaches, found[1], found[0].step_minutes, n, half))
    return out


def _run_settings(run_dir: Path):
    """The run's scenario (its own copy) and CRSEC settings (with its parameters); None without a copy."""
    scenario_file = run_dir / "scenario.yaml"
    if not scenario_file.is_file():
        return None
    import json

    from socialsim.agents.crsec.settings import load_settings, with_params
    from socialsim.scenarios.loader import load_scenario

    scenario = load_scenario(scenario_file)
    config_file = run_dir / "config.json"
    params = json.loads(config_file.read_text())["config"].get("arch_params", {}) if config_file.is_file() else {}
    return scenario, with_params(load_settings(scenario),
                                 {k: v for k, v in params.items() if k in CRSECSettings.model_fields})


def _steps_per_day(run_dir: Path) -> float | None:
    """Steps in one of the run's days (its hours over its step length); None when it kept no scenario."""
    found = _run_settings(run_dir)
    return None if found is None else found[1].day_minutes / found[0].step_minutes


def questionnaire_calls(spec: ProtocolRun) -> tuple[str, int] | None:
    """The Appendix-E questionnaire a judge is asked after the run: at most ``questionnaire_items``
    pairs per task, one call per question of the task."""
    judge = spec.arch_params.get("judge", "rules")
    items = spec.arch_params.get("questionnaire_items", CRSECSettings.model_fields["questionnaire_items"].default)
    if judge == "rules" or not items:
        return None
    return f"the Appendix-E questionnaire asked of {judge}", items * sum(len(t.questions) for t in TASKS)


def questionnaire_probe(society: SocietyModel, steps: int) -> None:
    """The questionnaire asked on a (dry) society's gateway over the pairs its few steps gave, for
    the projection to measure its prompts (a pair's prompt does not grow with the run's length)."""
    ask_questionnaire_of_judge(society, random.Random(0))


def protocol(judge: str | None) -> Protocol:
    return Protocol(
        arch="crsec",
        runs=[ProtocolRun(RUN, "hobbs-cafe", preset="paper", arch_params={"judge": judge} if judge else {})],
        measure=measure,
        paper=PAPER,
        description=("Hobbs Cafe, the paper's preset (2 days of 10-minute steps, 10 agents, 3 entrepreneurs). "
                     "Compliance 'at end' covers only the last hour of day 2, a quiet evening; 'over day 2' is "
                     "the share of agents who never breached the norm that day (not measured when no act that day bore "
                     "on the norm); 'acting compliance' the same among the agents who did what the norm speaks about "
                     "that day (an agent who never smoked does not count as keeping 'no smoking'). Conflicts compare day 2 with day 1, the same hours each day."),
        findings=findings(),
        after_run=questionnaire_calls,
        after_run_probe=questionnaire_probe,
    )
