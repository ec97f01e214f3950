"""`socialsim reproduce ARCH --model M`: a paper's protocol, its cost projected first.

Each architecture describes its paper's protocol in ``socialsim/agents/<arch>/reproduce.py`` as a
function ``protocol(judge: str | None) -> Protocol``: the runs (scenario, steps, parameters, one arm
per ablation or variant), how to measure one finished run, and the paper's figures. This module is
the same for all of them:

1. **Project** the cost: every distinct run is dry-run for a few steps with its real routes (the
   actors' model, the protocol's, a judge's) but every decision answered by its rule, so no model is
   asked; this counts the decisions each operation makes and the prompt tokens its prompt would
   have; completions are counted at each operation's ``max_tokens``. The figures per step are scaled
   to the protocol's length and priced per model by litellm's local cost map; what a run asks after
   its last step (a judge's questionnaire) is asked on the dry run too, at the run's length
   (``Protocol.after_run_probe``). A projection is an estimate from a baseline's decisions, and says so.
2. **Run** only with ``--yes``, or with ``--max-cost`` at least the projection, or when no model is
   asked at all (``--model rules``); the budget is shared by all runs (each run gets what is left).
3. **Report** the paper's figures beside the runs' mean, standard deviation and count over seeds,
   with the engine that produced them, as ``summary.csv`` and ``report.md``; and the paper's
   findings (an ablation beats another, everyone adopts a norm, ...) each checked on the mean over
   seeds and in each seed, as ``findings.csv``: a finding this engine does not reproduce is
   reported as such.

A run that stops short (budget, outage, Ctrl-C) stops the protocol: what finished is reported, the
rest is listed, and the same command with the same ``--out`` resumes (recorded calls are free).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any

import pandas as pd

from socialsim.metrics.markdown import markdown_table, printable
from socialsim.model.run_dir import folder_name, not_for_a_batch, runs_below

log = logging.getLogger("socialsim")


class NotMeasured(Exception):
    """A figure a finding needs is missing or NaN: the finding cannot be checked."""


# (label, metric) -> the measured figure; raises NotMeasured when there is none
Figures = Callable[[str, str], float]


@dataclass
class Finding:
    """A finding the paper states, as a check of measured figures (True: it holds here)."""

    text: str
    holds: Callable[[Figures], bool]


OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}


def compare(text: str, left: tuple[str, str], op: str, right: tuple[str, str] | float) -> Finding:
    """A finding that one figure is above (or below) another figure or a number."""
    test = OPERATORS[op]

    def holds(figure: Figures) -> bool:
        other = right if isinstance(right, (int, float)) else figure(*right)
        return test(figure(*left), other)

    return Finding(text, holds)


@dataclass
class ProtocolRun:
    """One arm of a protocol in one scenario; it is run once per seed."""

    label: str  # e.g. "school-micro / w/o ASVO"
    scenario: str
    steps: int | None = None  # None: the preset's, else the scenario's
    preset: str | None = None
    arch_params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Protocol:
    arch: str
    runs: list[ProtocolRun]
    # one finished run directory -> {metric: value}; NaN for "not measurable"
    measure: Callable[[Path], dict[str, float]]
    # the paper's figures: columns label, metric, paper (label may be "*" for every label)
    paper: pd.DataFrame
    description: str = ""
    routes: dict[str, str] = field(default_factory=dict)  # e.g. {"judge": JUDGE_MODEL}
    findings: list[Finding] = field(default_factory=list)  # what the paper reports, checked per run
    # calls a run makes after its last step (a judge's questionnaire), which a probe of a few steps
    # cannot count: one arm -> (what, most calls per run), or None when that arm makes none
    after_run: Callable[[ProtocolRun], tuple[str, int] | None] = lambda spec: None
    # asks those calls on a (dry) society's gateway as if its run had lasted the given steps, so the
    # projection can measure their prompts; None: they are counted but not priced
    after_run_probe: Callable[[Any, int], None] | None = None
    # what the checked findings (with the null model's verdicts when run) mean together, as lines
    # printed under them: e.g. relative findings that hold where no absolute one does
    interpret: Callable[[pd.DataFrame], list[str]] = lambda checked: []


@dataclass
class Projection:
    decisions: int  # every operation answered, by a model or by the rules
    calls: int  # of those, the ones a model answers; tokens and cost are theirs
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None: a model has no price in litellm's cost map
    per_run: pd.DataFrame
    per_model: pd.DataFrame  # decisions, tokens and cost_usd per model (the actors', a judge's, rules)
    not_projected: dict[str, int] = field(default_factory=dict)  # after-run measurement -> most calls, all runs
    after_run: dict[str, int] = field(default_factory=dict)  # the same, priced in the figures above


# the embedded model's seconds a call on 2 free cores, measured (README: a Hobbs Café step with the cache,
# 12.8 s for about 32 calls; a day's first step with the model's own plans, 17.4 s for 16 calls)
EMBEDDED_SECONDS_PER_CALL = (0.4, 1.1)


def load_protocol(arch: str, judge: str | None = None) -> Protocol:
    try:
        module = import_module(f"socialsim.agents.{arch}.reproduce")
    except ModuleNotFoundError:
        raise ValueError(f"architecture {arch!r} has no paper protocol (known: crsec, asvo, itcmas)") from None
    return module.protocol(judge=judge)


def price(model: str, prompt_tokens: int, completion_tokens: int,
          unit_price: tuple[float, float] | None = None) -> float | None:
    """USD for these tokens as the gateway would charge them (0 for our offline engines, None if unknown;
    ``unit_price``: ``--price`` for a model litellm has no price for)."""
    if model == "rules":
        return 0.0
    from socialsim.llm.gateway import token_cost

    return token_cost(model, prompt_tokens, completion_tokens, unit_price)


def duration_span(low: float, high: float) -> str:
    """A span of seconds in the units a reader takes in: "10-30 seconds", "2-6 minutes", "1.2-3.5
    hours", each end in its own unit when they differ ("20 seconds-3 minutes", never "0-3 minutes")."""
    def unit(seconds: float) -> tuple[str, str]:
        if seconds < 120:
            return f"{seconds:.0f}", "seconds"
        if seconds < 3600:
            return f"{seconds / 60:.0f}", "minutes"
        return f"{seconds / 3600:.1f}", "hours"

    (a, a_unit), (b, b_unit) = unit(low), unit(high)
    return f"{a}-{b} {b_unit}" if a_unit == b_unit else f"{a} {a_unit}-{b} {b_unit}"


def project(protocol: Protocol, model: str, seeds: int, probe_steps: int = 2,
            unit_price: tuple[float, float] | None = None) -> Projection:
    """Estimate calls, tokens and cost of the whole protocol from short dry runs.

    A dry run routes every operation as the real run will (the actors' model, the protocol's routes,
    a judge set in the architecture's parameters) but answers each decision by its rule: nothing is
    asked of any model, and each decision's tokens are priced at the model its route names."""
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.ledger import Ledger
    from socialsim.llm.routing import RULES, RouteTable
    from socialsim.model.runner import RunConfig
    from socialsim.model.society import SocietyModel

    rows, usage, after, priced_after = [], [], {}, {}
    for spec in protocol.runs:
        config = RunConfig(scenario=spec.scenario, arch=protocol.arch, model=model, routes=dict(protocol.routes),
                           steps=spec.steps, preset=spec.preset, rng=1, arch_params=spec.arch_params).resolved()
        gateway = Gateway(RouteTable(config.model, dict(config.routes)), ledger=Ledger(), dry_run=True)
        society = SocietyModel(config.scenario, arch=protocol.arch, gateway=gateway, rng=1, **config.arch_params)
        probe = min(probe_steps, config.steps)
        for _ in range(probe):
            society.step()
        frame = gateway.ledger.frame()
        by_model = frame.groupby("model", sort=True).agg(
            decisions=("op", "size"), prompt_tokens=("prompt_tokens", "sum"),
            completion_tokens=("completion_tokens", "sum"))
        by_model = (by_model * (config.steps / probe)).apply(lambda column: column.map(math.ceil)) * seeds
        if extra := protocol.after_run(spec):
            what, most = extra
            measured = after_run_usage(protocol, society, config.steps, most)
            if measured is None:
                after[what] = after.get(what, 0) + most * seeds
            else:
                priced_after[what] = priced_after.get(what, 0) + most * seeds
                by_model = pd.concat([by_model, measured * seeds]).groupby(level=0, sort=True).sum()
        usage.append(by_model)
        asked = by_model.drop(index=RULES, errors="ignore")
        rows.append({"run": spec.label, "steps": config.steps, "decisions": int(by_model["decisions"].sum()),
                     "calls": int(asked["decisions"].sum()), "prompt_tokens": int(asked["prompt_tokens"].sum()),
                     "completion_tokens": int(asked["completion_tokens"].sum())})
    per_run = pd.DataFrame(rows, columns=["run", "steps", "decisions", "calls", "prompt_tokens", "completion_tokens"])
    per_model = pd.concat(usage).groupby(level=0, sort=True).sum().astype(int).reset_index()
    costs = [price(m, pt, ct, unit_price)
             for m, pt, ct in per_model[["model", "prompt_tokens", "completion_tokens"]].itertuples(index=False)]
    per_model["cost_usd"] = costs
    cost = None if any(c is None for c in costs) else float(sum(costs))
    decisions, calls, pt, ct = (int(per_run[c].sum()) for c in ("decisions", "calls", "prompt_tokens",
                                                                  "completion_tokens"))
    return Projection(decisions, calls, pt, ct, cost, per_run, per_model, after, priced_after)


def after_run_usage(protocol: Protocol, society: Any, steps: int, calls: int) -> pd.DataFrame | None:
    """Decisions and tokens per model of what a run asks after its last step (at most ``calls``),
    each call's tokens measured by asking it on the probe's dry gateway as if the run had lasted
    ``steps`` steps (the architecture's probe extends what its judge reads to that length);
    completions at ``max_tokens``. None: nothing to measure (no probe, or nothing to ask yet)."""
    if protocol.after_run_probe is None:
        return None
    ledger = society.llm.ledger
    start = len(ledger.rows)
    protocol.after_run_probe(society, steps)
    asked = pd.DataFrame([{"model": r.model, "prompt_tokens": r.prompt_tokens,
                           "completion_tokens": r.completion_tokens} for r in ledger.rows[start:]])
    if asked.empty:
        return None
    share = asked["model"].value_counts(normalize=True).sort_index()  # of the calls, each model's
    usage = asked.groupby("model", sort=True).mean().mul(share * calls, axis=0).map(math.ceil)
    usage.insert(0, "decisions", (share * calls).map(math.ceil))
    return usage.astype(int)


def summarize(protocol: Protocol, measured: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and n over seeds per (label, metric), with the paper's figure beside it."""
    if measured.empty:
        return pd.DataFrame(columns=["label", "metric", "paper", "mean", "std", "n"])
    long = measured.melt(id_vars=["label", "seed"], var_name="metric", value_name="value")
    long["value"] = pd.to_numeric(long["value"], errors="coerce")
    stats = long.groupby(["label", "metric"], sort=False)["value"].agg(["mean", "std", "count"]).reset_index()
    stats = stats.rename(columns={"count": "n"})
    paper = protocol.paper.copy()
    exact = paper[paper["label"] != "*"]
    anywhere = paper[paper["label"] == "*"].drop(columns="label")
    out = stats.merge(exact, on=["label", "metric"], how="left")
    if not anywhere.empty:
        out = out.merge(anywhere.rename(columns={"paper": "_paper_any"}), on="metric", how="left")
        out["paper"] = out["paper"].fillna(out.pop("_paper_any"))
    return out[["label", "metric", "paper", "mean", "std", "n"]]


VERDICTS = ("holds", "does not hold", "not measured")


def _verdict(finding: Finding, figures: dict[tuple[str, str], float]) -> str:
    def figure(label: str, metric: str) -> float:
        value = figures.get((label, metric), math.nan)
        if value is None or math.isnan(value):
            raise NotMeasured(f"{label}: {metric}")
        return float(value)

    try:
        return VERDICTS[0] if finding.holds(figure) else VERDICTS[1]
    except NotMeasured:
        return VERDICTS[2]


SIGNIFICANT = 0.05  # the sign test's level in the report's summary line


def sign_test(holding: int, measured: int) -> float:
    """One-sided exact sign test: the chance that at least ``holding`` of ``measured`` seeds would
    hold if each seed were a fair coin flip (NaN with no seed). A finding's seeds are independent
    replicates, so this says whether they agree more than chance would; fewer than five seeds can
    never reach 0.05."""
    if measured == 0:
        return math.nan
    from scipy.stats import binomtest

    return float(binomtest(holding, measured, 0.5, alternative="greater").pvalue)


def check_findings(protocol: Protocol, measured: pd.DataFrame) -> pd.DataFrame:
    """Each of the paper's findings checked on the mean over seeds (the figures the report shows)
    and in each seed on its own: columns finding, verdict, seeds_holding, seeds_measured, and
    sign_p, the sign test of the seeds that hold (:func:`sign_test`)."""
    columns = ["finding", "verdict", "seeds_holding", "seeds_measured", "sign_p"]
    if measured.empty or not protocol.findings:
        return pd.DataFrame(columns=columns)
    metrics = [c for c in measured.columns if c not in ("label", "seed")]
    numbers = measured.assign(**{c: pd.to_numeric(measured[c], errors="coerce") for c in metrics})

    def figures(frame: pd.DataFrame) -> dict[tuple[str, str], float]:
        means = frame.groupby("label", sort=False)[metrics].mean()
        return {(label, metric): value for (label, metric), value in means.stack(future_stack=True).items()}

    on_mean = figures(numbers)
    per_seed = [figures(frame) for _, frame in numbers.groupby("seed", sort=True)]
    rows = []
    for finding in protocol.findings:
        seeds = [_verdict(finding, f) for f in per_seed]
        holding, measured_in = seeds.count(VERDICTS[0]), len(seeds) - seeds.count(VERDICTS[2])
        rows.append({"finding": finding.text, "verdict": _verdict(finding, on_mean),
                     "seeds_holding": holding, "seeds_measured": measured_in,
                     "sign_p": sign_test(holding, measured_in)})
    return pd.DataFrame(rows, columns=columns)


NULL_DIR = "rules-null-model"  # where a reproduction with a model runs the same protocol on the rules


def with_null_model(checked: pd.DataFrame, null: pd.DataFrame) -> pd.DataFrame:
    """``checked`` with each finding's verdict and seeds under the rules null model beside it
    (columns ``null_verdict``, ``null_seeds_holding``, ``null_seeds_measured``). A finding the null
    model reproduces too comes out without any language model's reasoning, so the engine's
    reproducing it is no evidence for that reasoning."""
    null = null.set_index("finding")
    return checked.assign(null_verdict=checked["finding"].map(null["verdict"]),
                          null_seeds_holding=checked["finding"].map(null["seeds_holding"]),
                          null_seeds_measured=checked["finding"].map(null["seeds_measured"]))


def findings_section(checked: pd.DataFrame, engine: str) -> str:
    """The findings table and a one-line verdict, for the report."""
    if checked.empty:
        return ""
    counts = checked["verdict"].value_counts()
    held, failed, unmeasured = (int(counts.get(v, 0)) for v in VERDICTS)
    table = checked.assign(seeds=checked["seeds_holding"].astype(str) + " of " + checked["seeds_measured"].astype(str),
                           p=checked["sign_p"].map(lambda p: "" if math.isnan(p) else f"{p:.3g}"))
    columns = ["finding", "verdict", "seeds", "p"]
    beyond_chance = int(((checked["verdict"] == VERDICTS[0]) & (checked["sign_p"] < SIGNIFICANT)).sum())
    most_seeds = int(checked["seeds_measured"].max())
    null_line = ""
    if "null_verdict" in checked and checked["null_verdict"].notna().any():
        table["rules null model"] = [f"{v} ({h:.0f} of {m:.0f})" if isinstance(v, str) else "" for v, h, m in
                                     zip(checked["null_verdict"], checked["null_seeds_holding"],
                                         checked["null_seeds_measured"], strict=True)]
        columns.append("rules null model")
        both = int(((checked["verdict"] == VERDICTS[0]) & (checked["null_verdict"] == VERDICTS[0])).sum())
        null_line = (" Under the rules null model (the same protocol and seeds; the rules act and judge, no language "
                     f"model) {both} of the {held} hold as well" + (": they come out without any model's reasoning, so this engine's "
                                               "reproducing them is no evidence for its own." if both else "."))
    lines = [f"## The paper's findings on {engine}", "",
             "Each finding checked on the mean over seeds; `seeds`: in how many of the seeds that measured it "
             "it holds on its own; `p`: the chance that at least that many seeds would hold if each were a coin "
             "flip (one-sided sign test).", "", markdown_table(table[columns]), "",
             f"**{held} of {len(checked)} findings hold on the mean; {failed} do not"
             + (" (not reproduced by this engine: a result, not a bug)" if failed else "")
             + (f"; {unmeasured} could not be measured" if unmeasured else "") + ".**",
             "", f"Held in more seeds than chance would give (sign test, p < {SIGNIFICANT}): "
                 f"{beyond_chance} of the {held}"
             + (f"; with {most_seeds} seed{'s' if most_seeds != 1 else ''} none can: the sign test needs at least 5"
                if sign_test(most_seeds, most_seeds) >= SIGNIFICANT else "") + "." + null_line]
    return "\n".join(lines)


def reproduce(
    arch: str,
    model: str,
    *,
    seeds: int = 3,
    judge: str | None = None,
    yes: bool = False,
    max_cost: float | None = None,
    out: Path | None = None,
    steps: int | None = None,
    settings: dict[str, Any] | None = None,
    progress: bool = False,
    echo: Callable[[str], None] = print,
    null_model: bool = True,
    free_only: bool = False,
    api_base: str | None = None,
    unit_price: tuple[float, float] | None = None,
    deployments: str | None = None,
) -> pd.DataFrame | None:
    """Project, then (if allowed) run the protocol and return the summary table; None if not run.
    ``summary.attrs["complete"]`` is False when a run stopped short or could not be measured.
    ``settings`` (``--set``) go to every run, e.g. CRSEC's neutral prompt examples against the paper's;
    a parameter the protocol's arms vary cannot be one of them. With a model other than the rules,
    ``null_model`` also runs the protocol on the rules (free, in ``OUT/rules-null-model``) and
    sets each finding's verdict there beside this engine's (:func:`with_null_model`); ``free_only``
    refuses a protocol that would ask any model (the null model's)."""
    from socialsim.llm.engines import ModelUnavailable
    from socialsim.llm.gateway import is_embedded
    from socialsim.llm.routing import RULES, default_model
    from socialsim.model.runner import RunConfig, run

    protocol = load_protocol(arch, judge)
    if steps is not None:
        for spec in protocol.runs:
            spec.steps = steps
    settings = dict(settings or {})
    varied = sorted(_varied_between_arms(protocol) & set(settings))
    if varied:
        raise ValueError(f"--set {', '.join(f'{arch}.{k}' for k in varied)}: the protocol's arms set it themselves (that is what they "
                         f"compare), so it cannot be set for all of them")
    for spec in protocol.runs:
        spec.arch_params = {**spec.arch_params, **settings}
    model = default_model(model)
    # another setting is another protocol: by default its runs go to a directory of their own
    tail = "".join(f"-{folder_name(f'{key}-{value}')}" for key, value in sorted(settings.items()))
    tail += f"-steps-{steps}" if steps is not None else ""  # a quick look never lands on the paper-length runs
    out = Path(out or Path("reproduce") / f"{arch}-{model.replace('/', '_')}{tail}")
    planned = [(spec, seed) for spec in protocol.runs for seed in range(1, seeds + 1)]
    configs = {out / folder_name(spec.label) / f"seed-{seed}":
               RunConfig(scenario=spec.scenario, arch=arch, model=model, routes=dict(protocol.routes),
                         steps=spec.steps, preset=spec.preset, rng=seed, arch_params=dict(spec.arch_params),
                         api_base=api_base, price=unit_price, deployments=deployments)
               for spec, seed in planned}
    _refuse_another_protocols_runs(out, arch, configs)
    proj = project(protocol, model, seeds, unit_price=unit_price)
    echo(f"Protocol: {protocol.description or arch} — {len(protocol.runs)} run(s) x {seeds} seed(s) on {model}")
    if seeds > 1:
        echo(f"Each run's figures are for its {seeds} seeds together:")
    echo(proj.per_run.to_string(index=False))
    if len(proj.per_model) > 1:
        echo(proj.per_model.to_string(index=False))
    cost = "unknown (no price in litellm's cost map)" if proj.cost_usd is None else f"${proj.cost_usd:.4f}"
    echo(f"Projected: {proj.decisions} decisions, {proj.calls} of them LLM calls with {proj.prompt_tokens} prompt + "
         f"{proj.completion_tokens} completion tokens, cost {cost} (estimated from a dry run of each arm answered by "
         f"the rules, no model asked; completions at each operation's max_tokens)")
    if proj.calls:  # the rules never answer unusably, so the dry run has no repair to count
        echo("Not in the projection: a model's unusable answer is asked once more (a repair), so a model that often "
             "answers unusably makes up to twice these calls and prompt tokens; --max-cost stops the runs there")
    if is_embedded(model) and proj.calls:  # free, but not quick: say how long before it is started
        span = duration_span(*(proj.calls * s for s in EMBEDDED_SECONDS_PER_CALL))
        echo(f"Time: the embedded model answers a call in about {EMBEDDED_SECONDS_PER_CALL[0]}-"
             f"{EMBEDDED_SECONDS_PER_CALL[1]} s on 2 free cores (measured), so about {span}")
    for what, calls in proj.after_run.items():
        echo(f"Included: {what}, up to {calls} calls in all after each run's last step (their prompts measured "
             f"on the dry run, extended to the run's length)")
    if null_model and model != "rules" and protocol.findings:
        echo("Afterwards: the same protocol and seeds on the rules null model, free, to show which findings come "
             "out without any model (--no-null-model skips it)")
    for what, calls in proj.not_projected.items():
        echo(f"Not in the projection: {what}, up to {calls} more calls in all (asked after each run's last "
             f"step, on the same budget)")
    free = proj.calls == 0 and not proj.not_projected  # the rules answer everything: nothing to pay or wait for
    if max_cost is not None and proj.cost_usd is None:  # refused as `run --max-cost` refuses it (exit 2), --yes or not:
        costs = proj.per_model.get("cost_usd", pd.Series(dtype=float))  # a projection, not a decision left to the user
        unpriced = ", ".join(sorted(proj.per_model["model"][costs.isna()])) if len(costs) else ""
        raise ValueError(f"--max-cost {max_cost:g} cannot be kept: {unpriced or 'a model of the protocol'} has no price "
                         "in litellm's cost map; give --price IN,OUT (USD per 1M prompt and completion tokens)")
    if free_only and not free:
        raise ValueError(f"the rules null model would ask {', '.join(sorted(set(proj.per_model['model']) - {RULES}))}: "
                         "it must ask no model")
    if free and not yes:
        echo("No model is asked (the rules answer every decision): running without --yes.")
    elif not yes:
        if max_cost is None:
            echo("Not run: add --yes to run it, or --max-cost USD to run it under a budget.")
            return None
        if proj.cost_usd > max_cost:
            echo(f"Not run: the projection exceeds --max-cost {max_cost}; raise it or add --yes.")
            return None
    # no folder made before a run is: a run refusing its model (a price, a key) leaves none behind
    spent, paid, rows, problems, not_started, stopped, unreachable = 0.0, 0.0, [], [], [], False, ""
    answers: Counter[str] = Counter()
    for i, (spec, seed) in enumerate(planned, 1):
        # the runs share --max-cost: each may pay what the earlier ones of this command left (a run's own
        # budget counts only its live calls; its recorded ones are free)
        left = None if max_cost is None else max(max_cost - paid, 0.0)
        run_dir = out / folder_name(spec.label) / f"seed-{seed}"
        try:
            result = run(configs[run_dir].model_copy(update={"max_cost": left}), run_dir, progress=progress)
        except ModelUnavailable as exc:
            if i == 1:  # nothing run: a refusal, before any folder is made
                raise
            # an outage from one run's end to the next's check of its model: a stop, not a refusal that
            # leaves the runs this command paid for reported nowhere
            echo(f"[{i}/{len(planned)}] {spec.label} seed {seed}: not started ({exc})")
            unreachable = f" (the first could not start: {exc})"
            not_started = [f"{s.label} seed {k}" for s, k in planned[i - 1:]]
            stopped = True
            break
        ledger = result.model.llm.ledger
        # both to the totals' 8 decimals: an unrounded live sum differs from a whole live run's total in
        # its last bits, and the report then said part of it "was recorded before"
        cost, live = ledger.totals()["cost_usd"], round(ledger.live_cost, 8)
        answers.update(row.status for row in ledger.rows if row.engine == "llm")  # a model's: ok, repaired, fallback
        spent, paid = spent + cost, paid + live
        echo(f"[{i}/{len(planned)}] {spec.label} seed {seed}: {result.status} ({result.steps_done} steps, "
             f"${cost:.4f}" + (f", ${live:.4f} of it paid now" if live != cost else "") + ")")
        if result.status != "completed":  # a budget, an outage or Ctrl-C stops the protocol here
            problems.append(f"{spec.label} seed {seed}: {result.status} after {result.steps_done} steps "
                            f"(not measured: a partial run is not the protocol's)")
            not_started = [f"{s.label} seed {k}" for s, k in planned[i:]]
            stopped = True
            break
        try:
            figures = protocol.measure(run_dir)
            if clash := sorted({"label", "seed"} & set(figures)):
                raise ValueError(f"the protocol's measure returned {clash}, names that say which arm and seed a "
                                 "row is")
            rows.append({"label": spec.label, "seed": seed, **figures})
        except Exception as exc:  # noqa: BLE001 - one unmeasurable run must not lose the others' figures
            log.warning("%s seed %s could not be measured: %s: %s", spec.label, seed, type(exc).__name__, exc)
            problems.append(f"{spec.label} seed {seed}: could not be measured ({type(exc).__name__}: {exc})")
    measured = pd.DataFrame(rows)
    summary = summarize(protocol, measured)
    out.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out / "summary.csv", index=False)
    checked = check_findings(protocol, measured)
    if null_model and model != "rules" and protocol.findings and not stopped:
        echo(f"The same protocol on the rules null model (no model asked; in {out / NULL_DIR}) ...")
        asked = set(proj.per_model["model"]) - {RULES}  # a judge or an embedding model --set names: not the null's
        null_settings = {k: v for k, v in settings.items()
                         if not {str(x) for x in (v if isinstance(v, list) else [v])} & asked}
        if dropped := sorted(set(settings) - set(null_settings)):
            echo(f"(the null model leaves out --set {', '.join(f'{arch}.{k}' for k in dropped)}: it asks no model)")
        null = reproduce(arch, RULES, seeds=seeds, yes=True, out=out / NULL_DIR, steps=steps, settings=null_settings,
                         progress=progress, echo=lambda line: None, null_model=False, free_only=True)
        if null is not None and null.attrs["complete"]:
            checked = with_null_model(checked, pd.read_csv(out / NULL_DIR / "findings.csv"))
        else:  # stopped (Ctrl-C) or unmeasured: a verdict on some seeds is not the null model's on the protocol
            problems.append(f"the rules null model did not complete the protocol, so its verdicts are left out "
                            f"(see {out / NULL_DIR / 'report.md'})")
    checked.to_csv(out / "findings.csv", index=False)
    engine = "the rules baseline (a null model, not an LLM)" if model == "rules" else model
    notes = []
    if steps is not None:
        notes.append(f"Every run was cut to {steps} steps (--steps): a quick look, not the paper's protocol; "
                     f"the findings below are this shortened run's.")
    if settings:
        notes.append("Every run with " + ", ".join(f"{arch}.{k}={v}" for k, v in sorted(settings.items()))
                     + " (--set): the protocol under another setting than the paper's.")
    if answers["fallback"]:
        asked = sum(answers.values())
        share = answers["fallback"] / asked
        notes.append(("**Most of the model's answers were unusable.** " if share > 0.5 else "")
                     + f"Of the {asked} decisions asked of a model, {answers['fallback']} ({share:.0%}) were answered "
                     f"by the operation's fallback (its documented default) after the reply stayed unusable, and "
                     f"{answers['repaired']} repaired by asking once more: the figures rest on those defaults as "
                     "much; each run's report.md and run.log list them.")
    if problems:
        notes.append("Not in the figures: " + "; ".join(problems) + ".")
    if not_started:
        notes.append(f"Not started ({len(not_started)}): " + ", ".join(not_started) + unreachable
                     + ". The same command with the same --out resumes: recorded calls are free.")
    findings = findings_section(checked, engine)
    if findings and (reading := protocol.interpret(checked)):
        findings += "\n\n" + "\n\n".join(reading)
    planned_seeds = f"seeds 1..{seeds}" + (f" planned ({len(planned) - len(not_started)} of the {len(planned)} runs "
                                           "started; the others are named below)" if not_started else "")
    text = (f"# Reproduction of {arch}\n\nEngine: {engine}; {planned_seeds}; the runs' calls cost ${spent:.4f}"
            + (f" (${paid:.4f} of it paid by this command; the rest was recorded before)" if paid != spent else "")
            + ".\n\n"
            + "".join(f"{n}\n\n" for n in notes) + f"{protocol.description}\n\n"
            + (f"{findings}\n\n## The paper's figures beside the runs'\n\n" if findings else "")
            + markdown_table(summary) + "\n")
    (out / "report.md").write_text(printable(text), encoding="utf-8")
    for note in notes:
        echo(note)
    echo(findings or markdown_table(summary))
    echo(f"reproduction directory: {out} (report.md: every figure beside the paper's)")
    summary.attrs["complete"] = not problems and not not_started
    return summary


# what makes a run another protocol's: running it again with other values would replace it
_SAME_PROTOCOL = {"scenario", "arch", "model", "routes", "preset", "rng", "arch_params"}


def _refuse_another_protocols_runs(out: Path, arch: str, configs: dict[Path, Any]) -> None:
    """The same command with the same ``--out`` resumes; another architecture, model, route or
    ``--set`` there would replace runs already paid for, and mix two protocols' summaries, so it
    is refused, naming the first run and what differs. More steps (``--steps``) are allowed: the
    runs go on from their tapes; fewer would write shorter runs over them and are refused."""
    import json

    if why := not_for_a_batch(out, "reproduction"):
        raise ValueError(why)
    for run_dir in runs_below(out):
        try:
            meta = json.loads((run_dir / "config.json").read_text())
            recorded = meta["config"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a run's config: nothing of it would be replaced that could be read
        planned = configs.get(run_dir)
        if planned is None:  # an arm or seed not planned now, or the null model's: same architecture only
            differs = [] if recorded.get("arch") == arch else [f"arch {recorded.get('arch')!r} (now {arch!r})"]
        else:
            resolved = planned.resolved()
            want = json.loads(json.dumps(resolved.model_dump(include=_SAME_PROTOCOL), default=str))
            differs = [f"{key} {recorded.get(key)!r} (now {value!r})" for key, value in sorted(want.items())
                       if recorded.get(key) != value]
            if resolved.steps < (done := meta.get("steps_done", 0)):
                differs.append(f"{done} steps done (now {resolved.steps})")
        if differs:
            raise ValueError(f"--out {out} holds another protocol's runs ({run_dir}: {', '.join(differs)}); "
                             "running there would replace them: give another --out")


def _varied_between_arms(protocol: Protocol) -> set[str]:
    """The parameters the protocol's arms set to different values (by their presets or their own
    parameters): ASVO's ``use_svo``, ITCMA-S's ``ablation``; none for a protocol of one arm."""
    from socialsim.scenarios.loader import load_scenario

    arms = []
    for spec in protocol.runs:
        preset = load_scenario(spec.scenario).presets.get(spec.preset, {}) if spec.preset else {}
        arms.append({**{k: v for k, v in preset.items() if k != "steps"}, **spec.arch_params})
    keys = set().union(*arms) if arms else set()
    return {k for k in keys if len({repr(arm.get(k)) for arm in arms}) > 1}
