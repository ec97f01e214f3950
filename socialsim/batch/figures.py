"""Sweep figures: a final-step outcome against a swept parameter, with the replicates' spread.

Each x value shows the replicates as dots and their mean with a +/- one standard deviation bar;
``hue`` draws one line per value of a second parameter (e.g. cooperation rate by SVO mix, with
and without ASVO; final adoption by number of entrepreneurs; Gini of resources by ablation).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # figures are files; never open a window
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from socialsim.metrics.report import drop_if_empty, missing_glyphs_noted  # noqa: E402

log = logging.getLogger("socialsim.batch")

if TYPE_CHECKING:
    from socialsim.batch.sweepfile import SweepSpec
    from socialsim.batch.sweeps import SweepResult


def outcome_summary(runs: pd.DataFrame, outcome: str, x: str, hue: str | None = None) -> pd.DataFrame:
    """Mean, standard deviation, min, max and count of ``outcome`` per x (and hue) over completed runs."""
    missing = [c for c in (outcome, x, hue) if c and c not in runs.columns]
    if missing:
        raise KeyError(f"no column {missing[0]!r} in the sweep's runs; columns: {', '.join(map(str, runs.columns))}")
    done = _completed(runs)
    keys = [x, hue] if hue else [x]
    stats = done.groupby(keys, sort=True, dropna=False)[outcome].agg(["mean", "std", "min", "max", "count"])
    return stats.reset_index()


def plot_outcome(runs: pd.DataFrame, outcome: str, x: str, hue: str | None = None, ax=None,
                 pooled: tuple[str, ...] = ()):
    """Draw ``outcome`` against ``x``; returns the matplotlib Figure. ``pooled``: swept parameters that
    are neither ``x`` nor ``hue``, whose runs each point mixes (the title says so)."""
    stats = outcome_summary(runs, outcome, x, hue)
    done = _completed(runs)
    axes = [x, hue] if hue else [x]
    stats = stats.assign(**{c: _null_as_none(stats[c]) for c in axes})
    done = done.assign(**{c: _null_as_none(done[c]) for c in axes})
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4))
    else:
        fig = ax.figure
    xs = list(pd.unique(stats[x]))
    pos = {value: i for i, value in enumerate(xs)}
    groups = [(None, stats, done)] if not hue else [
        (h, stats[stats[hue] == h], done[done[hue] == h]) for h in pd.unique(stats[hue])]
    width = 0.3 / max(len(groups), 1)
    for g, (label, st, raw) in enumerate(groups):
        shift = (g - (len(groups) - 1) / 2) * width
        bars = ax.errorbar([pos[v] + shift for v in st[x]], st["mean"], yerr=st["std"].fillna(0), marker="o",
                           capsize=3, label=f"{hue}={label}" if hue else "mean ± sd")
        ax.scatter([pos[v] + shift for v in raw[x]], raw[outcome], s=12, alpha=0.4, color=bars[0].get_color())
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_xlabel(x)
    ax.set_ylabel(f"{outcome} (final step)")
    n = int(stats["count"].max()) if len(stats) else 0
    of = f"{n} runs pooled over {', '.join(pooled)}" if pooled else f"{n} replicates"
    ax.set_title(f"{outcome} by {x}\nmean ± sd of {of}; dots are runs", fontsize="medium")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def _completed(runs: pd.DataFrame) -> pd.DataFrame:
    """The completed runs, one row each. A ``batch_run`` frame has a row per run, step and agent
    (Mesa's ``RunId``, ``Step``): each run's last row is its final step, else every agent and step
    counted as a replicate of its run."""
    if "RunId" in runs.columns and "Step" in runs.columns:
        runs = runs.sort_values(["RunId", "Step"], kind="stable").drop_duplicates("RunId", keep="last")
    return runs[runs["status"] == "completed"] if "status" in runs.columns else runs


def _null_as_none(values: pd.Series) -> pd.Series:
    """A parameter's null (a sweep's ``null``) as "None": NaN equals nothing, so its runs were drawn nowhere."""
    return values.astype(object).where(values.notna(), "None")


def sweep_figures(result: SweepResult, spec: SweepSpec) -> list[str]:
    """Write the figures a sweep file asks for to SWEEP_DIR/figures/; return why any was not drawn
    (the runs are saved by then: one bad figure must not hide the others or the results)."""
    out = result.sweep_dir / "figures"
    for drawn in out.glob("*.png"):  # an earlier version of the sweep file's figures, of its grid's runs
        drawn.unlink()
    problems = []
    if not spec.figures:
        drop_if_empty(out)  # those of an earlier version of the sweep file, no longer asked for
        return problems
    out.mkdir(exist_ok=True)
    with missing_glyphs_noted(str(out)):
        for i, fig_spec in enumerate(spec.figures):
            pooled = tuple(p for p in spec.swept() if p not in (fig_spec.x, fig_spec.hue))
            if pooled:  # drawn, but each point mixes these parameters' runs: say so
                problems.append(f"figures.{i} ({fig_spec.outcome} by {fig_spec.x}) pools the runs of every "
                                f"{', '.join(pooled)} (neither its x nor its hue): its spread mixes them")
                log.warning("%s: %s", spec.source, problems[-1])
            try:
                if not outcome_summary(result.runs, fig_spec.outcome, fig_spec.x, fig_spec.hue)["count"].any():
                    # an empty chart titled "0 replicates" was written beside the others, as if a result
                    raise ValueError(f"no completed run has a value of {fig_spec.outcome!r} "
                                     "(e.g. a measurement none of them made)")
                fig = plot_outcome(result.runs, fig_spec.outcome, fig_spec.x, fig_spec.hue, pooled=pooled)
            except (KeyError, TypeError, ValueError) as exc:  # a missing column, an outcome that is not a number
                why = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc  # not KeyError's quoted repr
                problems.append(f"figures.{i} ({fig_spec.outcome} by {fig_spec.x}) not drawn: {why}")
                log.warning("%s: %s", spec.source, problems[-1])
                continue
            name = "-".join(filter(None, [fig_spec.outcome, "by", fig_spec.x, fig_spec.hue and f"and-{fig_spec.hue}"]))
            fig.savefig(out / f"{re.sub(r'[^\w.-]+', '_', name)}.png", dpi=120)
            plt.close(fig)
    drop_if_empty(out)  # none could be drawn
    return problems
