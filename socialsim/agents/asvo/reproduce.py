"""The ASVO paper's protocol for ``socialsim reproduce asvo``: the eight scenarios of the three
contexts (school, workplace, family at the micro/meso/macro levels the paper uses), each in both
arms (ASVO, and the ablation w/o ASVO), on the paper preset (Table 1).

Measured per run: silhouette and separation ratio of the action texts by SVO type (offline
embedding unless ``embedding_model`` is set; t-SNE; appendix D.3), the silhouette with the SVO
labels shuffled (chance level), and the cooperation rate per SVO type from the first judge's
five-way labels (appendix D.2); with the rules judge, an action outside the scenario's catalogue
(an LLM's own) is labelled by the stance its actor declared, so it is left out of the rates and
counted (``cooperation_self_declared``). Table 2 of the paper (from the digest) stands beside the
silhouette and separation rows of each context; the paper gives no per-scenario split, so each
scenario of a context is set beside that context's figure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from socialsim.agents.asvo.metrics import (
    SEPARABILITY_FILE,
    action_separability,
    cooperation_table,
    declared_stances,
    setting_of,
)
from socialsim.agents.asvo.svo import SVO_TYPES
from socialsim.llm.routing import RULES
from socialsim.metrics.separability import PAPER_TABLE_2
from socialsim.model.reproduce import Finding, Protocol, ProtocolRun, compare

SCENARIOS = ("school-micro", "school-meso", "school-macro", "workplace-micro", "workplace-meso",
             "workplace-macro", "family-micro", "family-meso")
ARMS = {"ASVO": True, "w/o ASVO": False}


def label(scenario: str, arm: str) -> str:
    return f"{scenario} / {arm}"


def measure(run_dir: Path) -> dict[str, float]:
    """Separability, its chance level and the cooperation rate per SVO type; NaN = not measurable."""
    actions = pd.read_parquet(Path(run_dir) / "tables" / "asvo_actions.parquet")
    written = Path(run_dir) / SEPARABILITY_FILE  # the run's own figures, with the run's embedding
    if written.is_file():
        figures = json.loads(written.read_text())  # null (or an older file's NaN): not measured

        def number(key: str) -> float:
            value = figures.get(key)
            return float("nan") if value is None else float(value)

        out = {k: number(k) for k in ("silhouette", "separation_ratio", "silhouette_shuffled", "svo_words_masked",
                                      "agent_shuffle_p")}
    else:
        sep = action_separability(actions)
        out = {"silhouette": sep.silhouette, "separation_ratio": sep.ratio,
               "silhouette_shuffled": sep.shuffled_silhouette, "svo_words_masked": float(sep.masked),
               "agent_shuffle_p": sep.group_shuffle_p}
    declared = self_declared(Path(run_dir), actions)
    out["cooperation_self_declared"] = float(declared.mean()) if len(declared) else float("nan")
    counted = actions[~declared] if len(declared) else actions
    rates = cooperation_table(counted, "svo").set_index("svo")["cooperation_rate"] if not counted.empty else {}
    for svo in SVO_TYPES:
        out[f"cooperation_rate_{svo}"] = float(rates[svo]) if svo in rates else float("nan")
    return out


def self_declared(run_dir: Path, actions: pd.DataFrame) -> pd.Series:
    """Per action, whether its label is the actor's own: the rule judge (the first judge classifies)
    reads the label from the simulated effect, and an action outside the catalogue has none but the
    payoff of the stance its actor declared (``effect_source``), so its label is that stance. Those
    are left out of the cooperation rates: a self-report is not a measurement. All False with an LLM
    judge, or where the run recorded neither its judges nor the effects' source."""
    judgements = Path(run_dir) / "tables" / "asvo_judgements.parquet"
    judges = pd.read_parquet(judgements, columns=["judge"])["judge"] if judgements.is_file() else pd.Series(dtype=str)
    if "effect_source" not in actions or judges.empty or judges.iloc[0] != RULES:
        return pd.Series(False, index=actions.index)
    return declared_stances(actions)


def paper_table() -> pd.DataFrame:
    rows = []
    for scenario in SCENARIOS:
        for arm, use_svo in ARMS.items():
            silhouette, ratio = PAPER_TABLE_2[(setting_of(scenario), use_svo)]
            rows += [{"label": label(scenario, arm), "metric": "silhouette", "paper": silhouette},
                     {"label": label(scenario, arm), "metric": "separation_ratio", "paper": ratio}]
    return pd.DataFrame(rows)


RELATIVE = "(relative)"  # marks the findings that compare two figures of the run
CONFOUNDED = ("(confounded: each SVO type is one agent here, so this compares agents, not SVO types; "
              "not a test of SVO)")
POSITIVE = "with ASVO, a positive silhouette"
RELATIVE_READING = ("Relative findings pass for any rule in which SVO changes choices, i.e. they cannot discriminate "
                    "the null model from an LLM.")


def one_agent_per_svo(scenario: str) -> bool:
    """Whether the scenario (its SVO assignment under the paper preset) gives each SVO type to a
    single agent, so that SVO labels and agent identities are the same partition."""
    import random
    from collections import Counter

    from socialsim.agents.asvo.settings import ASVOScenario, ASVOSettings, assign_svo
    from socialsim.scenarios.loader import load_scenario

    spec = load_scenario(scenario)
    svo = assign_svo([a.name for a in spec.agents], {a.name: a.traits for a in spec.agents}, ASVOSettings(),
                     ASVOScenario.from_scenario(spec), random.Random(0))
    return set(Counter(svo.values()).values()) == {1}


def findings() -> list[Finding]:
    """Table 2's findings per scenario: actions separate by SVO type better with ASVO than without
    (silhouette and separation ratio), with ASVO better than the same actions with shuffled SVO
    labels, and (absolute, as the paper's figures are) with a positive silhouette and better than
    the SVO types shuffled between agents. The relative ones are marked; where each SVO type is one
    agent the shuffled-label one is marked confounded (and the agent shuffle is not measurable)."""
    out = []
    for s in SCENARIOS:
        with_svo, without = label(s, "ASVO"), label(s, "w/o ASVO")
        confounded = f" {CONFOUNDED}" if one_agent_per_svo(s) else ""
        out += [compare(f"{s}: actions separate by SVO type more with ASVO than without (silhouette) {RELATIVE}",
                        (with_svo, "silhouette"), ">", (without, "silhouette")),
                compare(f"{s}: ... and by the separation ratio {RELATIVE}",
                        (with_svo, "separation_ratio"), ">", (without, "separation_ratio")),
                compare(f"{s}: with ASVO, above the shuffled-label chance level (silhouette) {RELATIVE}{confounded}",
                        (with_svo, "silhouette"), ">", (with_svo, "silhouette_shuffled")),
                compare(f"{s}: {POSITIVE} (the paper's Table 2: 0.07 to 0.21){confounded}", (with_svo, "silhouette"),
                        ">", 0.0),
                compare(f"{s}: with ASVO, better than the SVO types shuffled between agents (p < 0.05)",
                        (with_svo, "agent_shuffle_p"), "<", 0.05)]
    return out


def positive_finding(scenario: str) -> str:
    """The text of a scenario's absolute silhouette finding (marked confounded where it is)."""
    return (f"{scenario}: {POSITIVE} (the paper's Table 2: 0.07 to 0.21)"
            + (f" {CONFOUNDED}" if one_agent_per_svo(scenario) else ""))


def interpret(checked: pd.DataFrame) -> list[str]:
    """What the verdicts mean together: relative findings that hold where the silhouette with ASVO
    is not even positive, said plainly, beside the null model's verdicts."""
    if checked.empty:
        return []
    lines = []
    verdict = dict(zip(checked["finding"], checked["verdict"], strict=True))
    null = dict(zip(checked["finding"], checked["null_verdict"], strict=True)) if "null_verdict" in checked else {}
    relative = checked[checked["finding"].str.contains(RELATIVE, regex=False)]
    negative = [s for s in SCENARIOS if verdict.get(positive_finding(s)) == "does not hold"]
    holding = [f for f in relative["finding"] if verdict[f] == "holds" and f.split(":")[0] in negative]
    if holding:
        lines.append(f"**{len(holding)} relative findings hold where the silhouette with ASVO is not positive** "
                     f"({', '.join(negative)}): there the actions do not cluster by SVO type at all; the relative "
                     "findings only say that SVO changed the choices. " + RELATIVE_READING)
    reading = "" if holding else f"{RELATIVE_READING} "  # said once
    if null:
        both = [f for f in relative["finding"] if verdict[f] == "holds" and null.get(f) == "holds"]
        lines.append(f"The rules null model holds {len(both)} of the {int((relative['finding'].map(verdict) == 'holds').sum())} "
                     f"relative findings that hold here. {reading}".rstrip())
    elif not relative.empty and (relative["finding"].map(verdict) == "holds").any():
        lines.append(f"{reading}The absolute ones (a positive silhouette, the SVO types shuffled between "
                     "agents) are the test, where several agents hold each SVO type.")
    if any(CONFOUNDED in f for f in checked["finding"]):
        lines.append("Where each SVO type is one agent (marked confounded), a silhouette above the shuffled-label "
                     "chance, or above 0, shows only that agents act differently; the w/o-ASVO arm, with no SVO "
                     "anywhere, passes them as well, and the SVO types cannot be shuffled between enough agents "
                     "to test: no finding there tests SVO.")
    return lines


def protocol(judge: str | None) -> Protocol:
    params = {"judges": [judge]} if judge else {}
    runs = [ProtocolRun(label(s, arm), s, preset="paper", arch_params={**params, "use_svo": use_svo})
            for s in SCENARIOS for arm, use_svo in ARMS.items()]
    return Protocol(
        arch="asvo", runs=runs, measure=measure, paper=paper_table(),
        description=("ASVO (AAMAS 2026) Table 2: silhouette and separation ratio of actions by SVO type, "
                     "eight scenarios x {ASVO, w/o ASVO}, paper preset; plus the shuffled-label silhouette "
                     "(chance) and the cooperation rate per SVO type. Judge: "
                     f"{judge or 'rules (the baseline: labels read from simulated effects)'}"
                     + ("" if judge else "; an action outside the scenario's catalogue has no simulated effect "
                        "but the payoff of the stance its actor declared, so the rules judge's label of it is a "
                        "self-report: such actions are left out of the cooperation rates, and "
                        "cooperation_self_declared is their share") + "."),
        findings=findings(), interpret=interpret)
