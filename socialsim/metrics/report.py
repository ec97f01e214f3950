"""The short report and generic figures every run writes into its run directory.

Architectures add their own sections and figures through ``report_sections`` on their agent
class; this module writes what every run has: engine notes, status, LLM usage per operation, an
interaction heat map and LLM calls per step.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from socialsim.metrics.markdown import markdown_table, printable  # noqa: E402

if TYPE_CHECKING:
    from socialsim.model.society import SocietyModel

log = logging.getLogger("socialsim")
_FIGURE_LINK = re.compile(r"^!\[[^\]]*\]\(figures/[^)]*\)$")


_MISSING_GLYPH = re.compile(r"^Glyph (\d+) .*missing from font")

# Whether reports draw their figures (PNG): a sweep's runs measure and report everything but leave the
# drawing out (it was four fifths of a short rules run's time); ``without_figures`` switches it off.
_FIGURES: ContextVar[bool] = ContextVar("socialsim_figures", default=True)


def figures_drawn() -> bool:
    return _FIGURES.get()


@contextmanager
def without_figures() -> Iterator[None]:
    token = _FIGURES.set(False)
    try:
        yield
    finally:
        _FIGURES.reset(token)


@contextmanager
def missing_glyphs_noted(where: str) -> Iterator[None]:
    """Figures whose names or texts hold characters the font lacks (CJK names with matplotlib's
    DejaVu Sans) draw them as boxes and warn once per character and figure; say it once, with the
    characters and the remedy, and let every other warning through."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    missing: dict[str, None] = {}
    for w in caught:
        if issubclass(w.category, UserWarning) and (m := _MISSING_GLYPH.match(str(w.message))):
            missing[chr(int(m[1]))] = None
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    if missing:
        log.warning("%s: the figures' font has no %s, drawn as boxes; install a font that has them "
                    "(e.g. Debian's fonts-noto-cjk) and add it to font.sans-serif in a matplotlibrc",
                    where, " ".join(missing))


def end_of_run_measurement[T](model: SocietyModel, what: str, measure: Callable[[], T]) -> T | None:
    """Run a measurement that asks a model after the last step (a judge, an embedding model).

    A budget or an outage stopping it must not lose the run or its report: the stop is noted on
    the model (the run's status then says so and ``--resume`` finishes it, its recorded calls free)
    and None is returned, so the report is written without this measurement."""
    from socialsim.llm.gateway import ProviderOutage
    from socialsim.llm.ledger import BudgetExhausted

    if model.run_cut_short:  # nothing asked (or paid) for a run that has not reached its end
        model.measurement_stopped = (f"the run stopped before its last step ({model.run_cut_short}); the --resume "
                                     f"that completes it measures {what}")
        return None
    from socialsim.llm.tape import TapeMiss

    try:
        return measure()
    except TapeMiss:
        if not model.measurement_cut:
            raise
        cut = model.measurement_cut  # where the recording stopped, as it said then
        model.measurement_stopped = cut if cut.startswith("stopped") else (
            f"stopped where the recording did, in its end-of-run measurement (recorded status: {cut})")
        return None
    except (BudgetExhausted, ProviderOutage) as exc:
        kind = "budget" if isinstance(exc, BudgetExhausted) else "provider outage"
        model.measurement_stopped = f"stopped by {kind} in the end-of-run measurement ({what}): {exc}"
        log.warning("%s; everything recorded so far is saved; resume with --resume", model.measurement_stopped)
        return None


def run_status(model: SocietyModel, status: str) -> str:
    """A run whose steps completed but whose end-of-run measurement was stopped is not done."""
    if model.run_cut_short:  # measured nothing on purpose: the steps' own status stands (a replay's "completed")
        return status
    return model.measurement_stopped if model.measurement_stopped and status == "completed" else status


def interaction_matrix(model: SocietyModel) -> pd.DataFrame:
    """Initiator x receiver counts of interactions (rows initiate)."""
    names = [a.name for a in sorted(model.agents, key=lambda a: a.unique_id)]
    matrix = nx.to_pandas_adjacency(model.interactions, nodelist=names, weight="weight", dtype=int)
    return matrix


def plot_interactions(model: SocietyModel, path: Path) -> None:
    if not figures_drawn():
        return
    matrix = interaction_matrix(model)
    fig, ax = plt.subplots(figsize=(6, 5))
    none = not matrix.values.any()  # an all-zero matrix would show as a uniform block, like data
    image = ax.imshow(matrix.values, cmap="Blues", vmin=0, vmax=max(1, int(matrix.values.max())))
    ax.set_xticks(range(len(matrix)), matrix.columns, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(matrix)), matrix.index, fontsize=7)
    ax.set_xlabel("receiver")
    ax.set_ylabel("initiator")
    ax.set_title("Interactions" + (" (none recorded)" if none else ""))
    if none:
        ax.text(0.5, 0.5, "no agent interacted with another", transform=ax.transAxes, ha="center", va="center",
                fontsize=11, color="#555", bbox={"facecolor": "white", "edgecolor": "#aaa"})
    else:
        fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_usage(model: SocietyModel, path: Path) -> bool:
    """Draw the calls and rule decisions per step; False (nothing drawn) before a step completed."""
    frame = model.datacollector.get_model_vars_dataframe()
    if frame.empty or not figures_drawn():
        return False
    fig, ax = plt.subplots(figsize=(6, 3))
    per_step = frame.set_index("step")[["llm_calls", "rule_decisions"]].diff().fillna(frame.set_index("step")[["llm_calls", "rule_decisions"]])
    per_step.plot(ax=ax, marker="o")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.set_ylabel("per step")
    ax.set_title("LLM calls and rule decisions")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def usage_markdown(model: SocietyModel) -> str:
    table = model.llm.ledger.by_operation()
    if table.empty:
        return "(no operations were asked)"
    cols = ["module", "op", "model", "decisions", "calls", "prompt_tokens", "completion_tokens", "cost_usd",
            "repaired", "fallbacks", "truncated"]
    return markdown_table(table[cols].map(lambda v: round(v, 6) if isinstance(v, float) else v), digits=None)


def write_report(model: SocietyModel, run_dir: Path, status: str, notes: list[str]) -> Path:
    with missing_glyphs_noted(str(run_dir)):
        report = _write_report(model, run_dir, status, notes)
    drop_if_empty(run_dir / "figures")  # a sweep's run draws none: no empty folder promising some
    return report


def drop_if_empty(folder: Path) -> None:
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def _write_report(model: SocietyModel, run_dir: Path, status: str, notes: list[str]) -> Path:
    figures = run_dir / "figures"
    figures.mkdir(exist_ok=True)
    # the architecture's sections first: their measurements may ask a model (their calls belong in
    # the usage below) or be stopped by the budget (the status below then says so)
    extra = getattr(type(next(iter(model.agents), None)), "report_sections", None)
    sections = extra(model, run_dir) if extra is not None else []
    status = run_status(model, status)
    plot_interactions(model, figures / "interactions.png")
    # a run cut short in its first step has no step to plot: no link to a figure never drawn
    usage_drawn = plot_usage(model, figures / "llm_usage.png")
    totals = model.llm.ledger.totals()
    steps_done = len(model.datacollector.model_vars.get("step", []))
    agent_steps = max(1, len(model.agents) * steps_done)
    # calls of a step cut short (a budget, an outage, Ctrl-C) are counted, but not per completed agent-step
    cut = sum(r.calls for r in model.llm.ledger.rows if r.engine == "llm" and r.step > steps_done)
    parts = [
        f"# {model.scenario_spec.title or model.scenario_spec.name} — {model.arch}",
        "",
        f"Status: {status}. Steps completed: {len(model.datacollector.model_vars.get('step', []))}. "
        f"Agents: {len(model.agents)}.",
        "",
        *(f"> **Engine note.** {n}\n" for n in notes),
        "## LLM usage",
        "",
        f"LLM calls: {totals['llm_calls']} ({(totals['llm_calls'] - cut) / agent_steps:.2f} per agent-step"
        + (f"; {cut} in the step cut short" if cut else "") + "), "
        f"rule decisions: {totals['rule_decisions']}, prompt tokens: {totals['prompt_tokens']}, "
        f"completion tokens: {totals['completion_tokens']}, cost: ${totals['cost_usd']:.4f}, "
        f"failures: {totals['llm_failures']}, fallbacks: {totals['fallbacks']}.",
        "",
        usage_markdown(model),
        "",
        "## Figures",
        "",
        "![interactions](figures/interactions.png)",
        "![LLM usage](figures/llm_usage.png)" if usage_drawn or not figures_drawn()
        else "(No figure of LLM usage per step: no step completed.)",
    ]
    if sections:
        parts += ["", *sections]
    if not figures_drawn():  # a sweep's run: no image to link to
        parts = [line for part in parts for line in part.split("\n") if not _FIGURE_LINK.match(line)]
        parts.insert(parts.index("## Figures") + 2, "Not drawn for a sweep's runs (the data they show are in the "
                                                     "frames and tables).")
    path = run_dir / "report.md"
    path.write_text(printable("\n".join(parts)) + "\n", encoding="utf-8")
    return path
