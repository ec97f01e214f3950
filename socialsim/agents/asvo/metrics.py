"""ASVO's evaluation: cooperation/competition, judge scores, cluster separability, figures.

Reads only what the DataCollector recorded (the ``asvo_*`` tables and the agent frame), so the
same functions work on a live model and on a run directory's Parquet files.

- Cooperation rate = (Cooperation + 0.5 QuasiCooperation) / actions; competition index =
  (Competition + 0.5 QuasiCompetition) / actions (appendix D.2), per agent and per SVO type.
- Naturalness and Human-likeness (1-5), averaged over judges and actions, per SVO type; judge
  fallbacks are left out. A ``rules`` judge is the rule-based baseline and is labelled so.
- Separability of action texts by SVO type (appendix D.3), beside the paper's Table 2.
- Theory of mind: the predictions' error beside the belief held before and a shuffled-target chance.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from socialsim.agents.asvo.agent import unobserving_note  # noqa: E402
from socialsim.agents.asvo.svo import (  # noqa: E402
    COMPETITION_WEIGHT,
    COOPERATION_WEIGHT,
    STANCES,
    SVO_TYPES,
    SVO_WORDS,
)
from socialsim.metrics.markdown import markdown_table  # noqa: E402
from socialsim.metrics.report import end_of_run_measurement, figures_drawn  # noqa: E402
from socialsim.metrics.separability import (  # noqa: E402
    GROUP_PERMUTATIONS,
    PAPER_TABLE_2,
    PERMUTATIONS,
    plot_tsne,
    separability,
)

if TYPE_CHECKING:
    from socialsim.model.society import SocietyModel


def setting_of(scenario_name: str) -> str | None:
    """School / Workplace / Family from a scenario name like ``workplace-meso``."""
    head = scenario_name.split("-")[0].lower()
    return {"school": "School", "workplace": "Workplace", "family": "Family"}.get(head)


def declared_stances(actions: pd.DataFrame) -> pd.Series:
    """Per action, whether the rule judge's label of it is its actor's own stance: an action outside
    the catalogue has no simulated effect but the payoff of the stance declared for it."""
    return (actions["effect_source"] == "declared stance") & actions["label"].isin(STANCES)


def cooperation_table(actions: pd.DataFrame, by: str = "agent") -> pd.DataFrame:
    """Label counts, cooperation rate and competition index per ``agent`` or per ``svo``."""
    df = actions[actions["label"].isin(STANCES)]
    if df.empty:
        return pd.DataFrame(columns=[by, "actions", *STANCES, "cooperation_rate", "competition_index"])
    counts = pd.crosstab(df[by], df["label"]).reindex(columns=list(STANCES), fill_value=0)
    n = counts.sum(axis=1)
    table = counts.assign(
        actions=n,
        cooperation_rate=sum(counts[label] * w for label, w in COOPERATION_WEIGHT.items()) / n,
        competition_index=sum(counts[label] * w for label, w in COMPETITION_WEIGHT.items()) / n,
    ).reset_index()
    if by == "svo":
        order = {s: i for i, s in enumerate(SVO_TYPES)}
        table = table.sort_values(by, key=lambda s: s.map(order))
    return table[[by, "actions", *STANCES, "cooperation_rate", "competition_index"]]


def judge_table(judgements: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation of both scores per SVO type and judge (fallbacks left out)."""
    df = judgements[judgements["status"] != "fallback"]
    if df.empty:
        return pd.DataFrame(columns=["svo", "judge", "n", "naturalness", "naturalness_sd", "human_likeness",
                                     "human_likeness_sd"])
    return df.groupby(["svo", "judge"], as_index=False).agg(
        n=("naturalness", "size"), naturalness=("naturalness", "mean"), naturalness_sd=("naturalness", "std"),
        human_likeness=("human_likeness", "mean"), human_likeness_sd=("human_likeness", "std"))


def judges_averaged(judgements: pd.DataFrame) -> pd.DataFrame:
    """Several judges averaged: each action's scores are first averaged over its judges."""
    df = judgements[judgements["status"] != "fallback"]
    per_action = df.groupby(["step", "agent", "svo"], as_index=False)[["naturalness", "human_likeness"]].mean()
    return per_action.groupby("svo", as_index=False)[["naturalness", "human_likeness"]].mean()


AGREEMENT_COLUMNS = ["judge_a", "judge_b", "score", "n", "exact", "kappa"]


def judge_agreement(judgements: pd.DataFrame) -> pd.DataFrame:
    """How far several judges agree, per pair and score, over the actions both scored (fallbacks
    left out): the share of equal scores and Cohen's kappa with quadratic weights, which counts a
    1-point difference less than a 4-point one and is 0 at chance (NaN when either judge gave one
    score only)."""
    from itertools import combinations

    from sklearn.metrics import cohen_kappa_score

    df = judgements[judgements["status"] != "fallback"]
    rows = []
    for a, b in combinations(sorted(df["judge"].unique()), 2):
        both = df[df["judge"] == a].merge(df[df["judge"] == b], on=["step", "agent"], suffixes=("_a", "_b"))
        for score in ("naturalness", "human_likeness"):
            x, y = both[f"{score}_a"].astype(int), both[f"{score}_b"].astype(int)
            varied = x.nunique() > 1 and y.nunique() > 1
            rows.append({"judge_a": a, "judge_b": b, "score": score, "n": len(both),
                         "exact": float((x == y).mean()) if len(both) else math.nan,
                         "kappa": float(cohen_kappa_score(x, y, weights="quadratic")) if varied else math.nan})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def action_separability(actions: pd.DataFrame, embedding_model: str | None = None, seed: int = 0,
                        gateway=None):
    """Separability of the recorded action texts by SVO type, with the SVO words (``svo.SVO_WORDS``)
    masked: an action that names its actor's type would otherwise be read back as separation. The
    actors are the groups: the SVO types are also shuffled between agents, not only between actions."""
    df = actions[actions["action"].astype(str).str.len() > 0]
    groups = df["agent"].astype(str).tolist() if "agent" in df else None
    return separability(df["action"].astype(str).tolist(), df["svo"].astype(str).tolist(), embedding_model, seed,
                        gateway, mask=SVO_WORDS, groups=groups)


SEPARABILITY_FILE = "asvo_separability.json"


def save_separability(sep, run_dir: Path) -> None:
    """The run's separability figures (computed once, with the run's embedding) for `reproduce`."""
    figures = {"silhouette": sep.silhouette, "separation_ratio": sep.ratio,
               "silhouette_shuffled": sep.shuffled_silhouette, "embedding": sep.embedding, "note": sep.note,
               "actions": len(sep.labels), "svo_words_masked": sep.masked,
               "agents_per_svo": sep.groups_per_label, "svo_is_agent": sep.label_is_group,
               "agent_shuffle_p": sep.group_shuffle_p}
    # NaN (not measured) as null: a bare NaN is not JSON, and other tools refuse the file
    figures = {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in figures.items()}
    (run_dir / SEPARABILITY_FILE).write_text(json.dumps(figures, indent=1, allow_nan=False))


def separability_measures(run_dir: Path) -> dict[str, float | bool | str | None]:
    """The run's separability figures as ``separability_*`` columns of a sweep's runs table or an
    export, so ASVO and w/o-ASVO runs compare there (none before the run's end measured them)."""
    keep = ("silhouette", "silhouette_shuffled", "separation_ratio", "svo_words_masked", "svo_is_agent",
            "agent_shuffle_p", "actions", "embedding")
    path = Path(run_dir) / SEPARABILITY_FILE
    try:
        figures = json.loads(path.read_text())
    except (OSError, ValueError):
        figures = {}  # not measured: the columns are named, empty (a sweep checks its figures against them)
    return {f"separability_{k}": figures.get(k) for k in keep}


TOM_COLUMNS = ["estimated from", "estimates", "mean_abs_error", "belief_before_error", "shuffled_targets_error"]


def tom_table(predicted: pd.DataFrame, seed: int = 0, n: int = PERMUTATIONS) -> pd.DataFrame:
    """Per kind of estimate (from a seen action or a guessed one): the predictions' mean absolute
    error beside two baselines. ``belief_before_error``: the belief the observer held before (its
    last estimate, or the neutral midpoint at first), so whether the prediction moved it closer.
    ``shuffled_targets_error``: chance, the same predictions scored against the true values of other
    estimates of the same desire, shuffled ``n`` times (seeded). A theory of mind that reads
    behaviour beats both; ``predicted`` holds usable predictions only."""
    if predicted.empty:
        return pd.DataFrame(columns=TOM_COLUMNS)
    df = predicted.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    shuffled = np.zeros(len(df))
    for _ in range(n):
        true = df["true"].to_numpy(float).copy()
        for rows in df.groupby("desire", sort=True).indices.values():
            true[rows] = rng.permutation(true[rows])
        shuffled += np.abs(df["predicted"].to_numpy(float) - true)
    df = df.assign(shuffled=shuffled / n,
                   prior_error=pd.to_numeric(df.get("prior_error", pd.Series(math.nan, index=df.index))))
    table = df.groupby("observable", as_index=False).agg(
        estimates=("error", "size"), mean_abs_error=("error", "mean"), belief_before_error=("prior_error", "mean"),
        shuffled_targets_error=("shuffled", "mean"))
    seen = table.pop("observable").map(lambda o: str(o).lower() == "true")
    table.insert(0, "estimated from", seen.map({True: "a seen action", False: "a guessed action"}))
    return table[TOM_COLUMNS]


# --- figures --------------------------------------------------------------------------------------

def plot_desires(agent_frame: pd.DataFrame, path: Path, max_agents: int = 12) -> None:
    """Every desire the agents have over time (a ``desire_pool`` below eight records the others
    as empty), one small panel per agent."""
    if not figures_drawn():
        return
    columns = [c for c in agent_frame.columns if c.startswith("desire_") and agent_frame[c].notna().any()]
    frame = agent_frame.reset_index() if "Step" not in agent_frame.columns else agent_frame
    names = list(dict.fromkeys(frame["name"]))[:max_agents]
    cols = min(4, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False, sharey=True)
    for ax, name in zip(axes.flat, names, strict=False):
        sub = frame[frame["name"] == name]
        for c in columns:
            ax.plot(sub["Step"], sub[c], marker=".", label=c.removeprefix("desire_").replace("_", " "))
        ax.set_title(f"{name} ({sub['svo'].iloc[0]})", fontsize=9)
        ax.set_ylim(0, 10)
        ax.set_xlabel("step", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6, loc="lower left")
    fig.suptitle("Desires over time")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_cooperation(by_svo: pd.DataFrame, path: Path) -> None:
    """Cooperation rate and competition index per SVO type."""
    if not figures_drawn():
        return
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    x = range(len(by_svo))
    ax.bar([i - 0.2 for i in x], by_svo["cooperation_rate"], width=0.4, label="cooperation rate")
    ax.bar([i + 0.2 for i in x], by_svo["competition_index"], width=0.4, label="competition index")
    ax.set_xticks(list(x), by_svo["svo"])
    ax.set_ylim(0, 1)
    ax.set_title("Cooperation and competition by SVO type")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- the run report -----------------------------------------------------------------------------

def _markdown(df: pd.DataFrame) -> str:
    return markdown_table(df, digits=2, empty="(nothing recorded)")


def table_2(setting: str | None, use_svo: bool, sep) -> str:
    """The paper's Table 2 with this run's row beside it."""
    rows = [f"| {'ASVO' if a else 'w/o ASVO'}@{s} (paper) | {v[0]:.2f} | {v[1]:.2f} |"
            for (s, a), v in PAPER_TABLE_2.items()]
    label = f"{'ASVO' if use_svo else 'w/o ASVO'}@{setting or 'this scenario'} (this run)"
    if sep.measurable:
        rows.append(f"| **{label}** | {sep.silhouette:.2f} | {sep.ratio:.2f} |")
        rows.append(f"| {label}, SVO labels shuffled (chance) | {sep.shuffled_silhouette:.2f} | |")
    else:
        rows.append(f"| **{label}** | not measurable | not measurable |")
    return "\n".join(["| setting | silhouette | separation ratio |", "|---|---|---|", *rows])


def agents_line(sep) -> str:
    """What the separability can say about SVO rather than about the agents who hold it."""
    if sep.label_is_group:
        return ("**Each SVO type is held by a single agent here**, so the SVO label is the agent's identity: a "
                "silhouette above the shuffled-label chance shows that agents act differently from each other, "
                "which they do with or without an SVO. Separability here cannot tell SVO from agent identity: "
                "it is not a test of SVO (shuffling the types between agents is not measurable).")
    if math.isnan(sep.group_shuffle_p):
        return (f"Shuffling the SVO types between agents: not measurable ({sep.groups_per_label or 'no'} agents "
                "for the rarest type: too few ways to deal the types out for p to reach 0.05).")
    return (f"Shuffling the SVO types between agents (each keeps one type for all its actions; "
            f"{GROUP_PERMUTATIONS} permutations): p = {sep.group_shuffle_p:.2f}, the chance that a random "
            f"assignment of the types to these agents separates their actions as well.")


def report_sections(model: SocietyModel, run_dir: Path) -> list[str]:
    dc = model.datacollector
    actions = dc.get_table_dataframe("asvo_actions")
    judgements = dc.get_table_dataframe("asvo_judgements")
    predictions = dc.get_table_dataframe("asvo_predictions")
    agents = dc.get_agent_vars_dataframe()
    runtime = model.society
    settings = runtime.settings
    figures = Path(run_dir) / "figures"
    figures.mkdir(exist_ok=True)
    parts = ["## ASVO", ""]
    assignment = ", ".join(f"{n}: {s}" for n, s in runtime.svo.items())
    parts += [f"SVO ({'used' if settings.use_svo else 'ablation w/o ASVO: assigned but not shown to the agents'}): "
              f"{assignment}.", ""]
    if note := unobserving_note(runtime.unobserving, len(runtime.svo)):
        parts += [f"**{note[0].upper()}{note[1:]}.**", ""]
    if actions.empty:
        return parts + ["(no actions recorded)"]

    proposed = sum(a.proposed_actions for a in model.agents)
    replaced = sum(a.invalid_actions for a in model.agents)
    if replaced:
        parts += [f"**Proposed actions that were not actions** (schema text, a word of the answer format, a "
                  f"heading or long copy of the prompt): {replaced} of {proposed}, each replaced by the "
                  f"scenario's ordinary action; the actions below include those replacements.", ""]
    parts += ["### Cooperation and competition", ""]
    rule_judge = bool(runtime.judges) and runtime.judges[0][0] == "rules"
    declared = int((actions["effect_source"] == "declared stance").sum()) if "effect_source" in actions else 0
    counted = actions
    if declared and rule_judge:
        # the rule judge's label of such an action is the actor's own stance: counted, the tables would
        # report what the agents said of themselves (the reproduction and the `_simulated` columns leave them out too)
        counted = actions[~declared_stances(actions)]
        parts += [f"**{declared} of {len(actions)} actions are not in the scenario's catalogue**: their simulated "
                  "effect is the payoff of the stance the actor declared for them, so the rule judge's label of "
                  "those is the actor's own stance, a self-report rather than a measurement. They are left out "
                  "of the tables below; judge them with an LLM that is not the actors' "
                  "(`--set 'asvo.judges=[\"MODEL\"]'`, `reproduce asvo --judge MODEL`).", ""]
    by_svo = cooperation_table(counted, "svo")
    unlabelled = int((actions["label"] == "").sum()) if runtime.judges else 0
    if unlabelled:
        parts += [f"**{unlabelled} of {len(actions)} actions are unlabelled**: the classifier's answer was unusable "
                  "(each failure is in run.log), and they are left out of the rates below.", ""]
    parts += ["Labels from the five-way classifier" + (" (rule baseline judge: read from the action's simulated "
                                                        "effect on the others, never from the SVO)"
                                                        if rule_judge else "")
              + "; quasi labels count 0.5.", "", "Per SVO type:", "", _markdown(by_svo), "",
              "Per agent:", "", _markdown(cooperation_table(counted, "agent")), ""]
    if by_svo.empty:  # no figure of nothing: every label was unusable or the actor's own
        parts += ["(No cooperation figure: no action has a measured label.)", ""]
    else:
        plot_cooperation(by_svo, figures / "asvo_cooperation.png")
        parts += ["![cooperation by SVO](figures/asvo_cooperation.png)", ""]

    if not judgements.empty:
        baseline = any(j == "rules" for j, _ in runtime.judges)
        parts += ["### Naturalness and Human-likeness", "",
                  f"Judges: {', '.join(j for j, _ in runtime.judges)}"
                  + (" — `rules` is the rule-based baseline judge, not an LLM." if baseline else "."), "",
                  _markdown(judge_table(judgements)), "", "All judges averaged per action, then per SVO type:", "",
                  _markdown(judges_averaged(judgements)), ""]
        agreement = judge_agreement(judgements)
        if not agreement.empty:
            parts += ["Agreement between judges over the actions both scored (`exact`: equal scores; `kappa`: "
                      "Cohen's, quadratic weights, 0 at chance):", "", _markdown(agreement), ""]

    sep = end_of_run_measurement(model, "the action embeddings",
                                 lambda: action_separability(actions, settings.embedding_model, gateway=model.llm))
    parts += ["### Cluster separability of actions by SVO", ""]
    if sep is None:  # the embedding model was stopped by the budget or an outage: the status says so
        parts += [f"Not measured: {model.measurement_stopped}.", ""]
    else:
        save_separability(sep, Path(run_dir))
        parts += [f"{len(sep.labels)} actions, embeddings: {sep.embedding or settings.embedding_model or 'none'}; "
                  f"t-SNE to 2-D; silhouette and separation ratio on the t-SNE points; the chance row shuffles the "
                  f"SVO labels over the same points. {sep.note}", "",
                  f"SVO words masked: {sep.masked} of {len(sep.labels)} action texts named an SVO type or the idea "
                  "of one (\"altruistic\", \"social value orientation\"...: `svo.SVO_WORDS`), as the prompts do; "
                  "those words were removed before embedding, so an action that echoes its actor's label is not read "
                  "back as separation.", "",
                  table_2(setting_of(model.scenario_spec.name), settings.use_svo, sep), ""]
        if sep.measurable:
            parts += [agents_line(sep), ""]
        if plot_tsne(sep, figures / "asvo_tsne.png"):
            parts += ["![t-SNE of actions](figures/asvo_tsne.png)", ""]

    if not predictions.empty:
        kept = predictions["status"] == "fallback"  # the observer kept its belief: no prediction
        predicted = predictions[~kept]
        parts += ["### Theory of mind", "", "Predicted desires of others vs their true values (0-10), beside the "
                  "error of the belief the observer held before (its last estimate, or the neutral 5 at first) and "
                  "the chance level (the same predictions scored against other estimates' true values of the same "
                  f"desire, {PERMUTATIONS} shuffles):", "",
                  _markdown(tom_table(predicted)) if not predicted.empty else "(no usable prediction)", ""]
        if kept.any():
            parts += [f"Not counted: {int(kept.sum())} of {len(predictions)} estimates, where the prediction's "
                      "answer was unusable and the observer kept its previous belief (each failure is in run.log).", ""]
    reflections = int(sum(a.reflections_total for a in model.agents))
    parts += [f"Unreasonable desire updates reflected on: {reflections}.", ""]
    plot_desires(agents, figures / "asvo_desires.png")
    parts += ["![desires over time](figures/asvo_desires.png)"]
    return parts
