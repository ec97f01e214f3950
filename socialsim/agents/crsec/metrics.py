"""CRSEC metrics: breaches read from world facts, adoption/compliance series, emergent norms,
Figure-2-like plots, and a report that puts the paper's findings beside the run's.

Breaches are read from the world's executed actions and their behaviour tags, following each
tracked norm's ``violated_by`` spec in the scenario (e.g. ``smoke`` inside; a ``meal`` not followed
by a ``tip``), so compliance in actions is measured, not asked.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from socialsim.agents.crsec import operations as ops
from socialsim.agents.crsec.operations import ObservedFact
from socialsim.agents.crsec.operations import breaches as act_breaches
from socialsim.agents.crsec.settings import CRSECSettings, TrackedNorm, minutes
from socialsim.agents.norms import norm_key
from socialsim.metrics.markdown import markdown_table, one_line
from socialsim.metrics.report import figures_drawn
from socialsim.spaces.world import World, WorldEvent, gerund

if TYPE_CHECKING:
    from socialsim.model.society import SocietyModel

ADOPTION_TARGET = 0.7  # the paper's Appendix D threshold ("over 70% of agents")

PAPER_FINDINGS = {
    "injunctive": "100% of agents adopt and comply with 'no smoking indoors' and 'be quiet in public' by the end "
                  "of day 2 (all 5 runs)",
    "conflicts": "conflicts surge early, then fall as norms emerge",
    "descriptive": "'tipping after meals' (descriptive) emerges later than the injunctive norms: by the end of day 2",
    "lag": "over 70% adopt each norm within a quarter of a day; over 70% comply only after about three quarters "
           "of a day",
    "emergent": "'maintain a healthy environment' emerges in all 5 runs without being seeded",
    "ratings": "human ratings (7-point Likert): Creation 6.44, Sender 5.86, Receiver 5.77, Observation 5.13, "
               "Immediate evaluation 5.14, Long-term synthesis 5.97, Plan 6.43, Action 6.40",
}


@dataclass(frozen=True)
class Breach:
    step: int
    agent: str
    norm: str
    area: str
    behaviour: str


def share(predicate) -> Any:
    """A model reporter: the share of agents for which ``predicate(agent)`` holds."""
    return lambda m: sum(1 for a in m.agents if predicate(a)) / max(1, len(m.agents))


# --- reading world facts ------------------------------------------------------------------------------


def _events(world: World, first: int, last: int) -> list[WorldEvent]:
    """Executed actions from step ``first`` to ``last`` (events are appended in step order)."""
    found = []
    for event in reversed(world.events):
        if event.step < first:
            break
        if event.step <= last and event.ok:
            found.append(event)
    return found[::-1]


def breaches(world: World, settings: CRSECSettings, step: int, step_minutes: float) -> list[Breach]:
    """The tracked-norm breaches that the world facts show at ``step`` (within each norm's hours)."""
    found: list[Breach] = []
    now = _events(world, step, step)
    minute = settings.clock_of_step(step, step_minutes)[1]
    for t in settings.tracked_norms:
        spec = t.violated_by
        if spec.unless_followed_by is None:
            for e in now:
                if act_breaches(e.tags, world.is_inside(e.area), t, minute):
                    found.append(Breach(step, e.agent, t.name, e.area, e.action))
            continue
        ended = step - spec.within_steps  # meals that ended then, not followed by the follow-up since
        if ended < 1 or not spec.holds_at(settings.clock_of_step(ended, step_minutes)[1]):
            continue
        window = _events(world, ended, step)
        for agent in sorted({e.agent for e in window if e.step == ended and set(e.tags) & set(spec.tags)}):
            mine = [e for e in window if e.agent == agent]
            if any(e.step == ended + 1 and set(e.tags) & set(spec.tags) for e in mine):
                continue  # still eating
            # the meal that ended then, not a later one (its own window is judged when it ends)
            last_meal = max(i for i, e in enumerate(mine) if e.step == ended and set(e.tags) & set(spec.tags))
            if not any(spec.unless_followed_by in e.tags for e in mine[last_meal + 1:]):
                meal = mine[last_meal]
                found.append(Breach(step, agent, t.name, meal.area,
                                    f"{meal.action} without {follow_up_text(world, spec.unless_followed_by)}"))
    return found


def follow_up_text(world: World, tag: str) -> str:
    """The follow-up a missed one was, as the words a breach, a chat or a thought say it:
    "leaving a tip for the server" (the first behaviour with its tag, as the rules plan it), not the
    tag; "a follow-up" when the world has no behaviour with it."""
    follow = next((text for text, b in sorted(world.behaviours.items()) if tag in b.tags), None)
    return gerund(follow) if follow else "a follow-up"


def judge_act(tags, action: str, inside: bool, settings: CRSECSettings,
              minute: int | None = None) -> tuple[list[str], list[str]]:
    """(tracked norms one executed act breaches, tracked norms it visibly follows), from its tags, place
    and time of day only: the same behaviour where it is fine (smoking outside), a compliant
    alternative, a tip. Outside a norm's hours an act neither breaches nor follows it."""
    violates, complies = [], []
    for t in settings.tracked_norms:
        spec = t.violated_by
        if not spec.holds_at(minute):
            continue
        if act_breaches(tags, inside, t, minute):
            violates.append(t.name)
        elif spec.unless_followed_by in tags or action in t.alternatives.values():
            complies.append(t.name)
        elif not spec.unless_followed_by and set(tags) & set(spec.tags):
            complies.append(t.name)
    return violates, complies


def compliant_acts(world: World, settings: CRSECSettings, step: int, step_minutes: float) -> list[tuple[str, str]]:
    """(agent, tracked norm) for every act at ``step`` that visibly follows a tracked norm."""
    found = []
    minute = settings.clock_of_step(step, step_minutes)[1]
    for e in _events(world, step, step):
        if e.tags:
            found += [(e.agent, n) for n in judge_act(e.tags, e.action, world.is_inside(e.area), settings, minute)[1]]
    return found


def adoption_vs_compliance(model: SocietyModel) -> pd.DataFrame:
    """Per tracked norm, from the time series: agents whose first adoption came before their first
    visibly compliant act, after it, at the same step, adopted but never acted on it, acted without adopting."""
    rows = []
    for t in model.society.settings.tracked_norms:
        counts = {"norm": t.name, "adopt_first": 0, "comply_first": 0, "same_step": 0, "adopt_only": 0,
                  "comply_only": 0}
        for a in model.agents:
            adopted, acted = a.first_adopted.get(t.name), a.first_compliant_act.get(t.name)
            if adopted is not None and acted is not None:
                key = "adopt_first" if adopted < acted else "comply_first" if acted < adopted else "same_step"
            elif adopted is not None:
                key = "adopt_only"
            elif acted is not None:
                key = "comply_only"
            else:
                continue
            counts[key] += 1
        rows.append(counts)
    return pd.DataFrame(rows)


def observed_facts(model: SocietyModel, agent: Any, step: int) -> list[ObservedFact]:
    """What ``agent`` saw others do in its area at ``step``, with the tracked norms each fact breaches
    or visibly follows (smoking outside, a compliant alternative, a tip)."""
    if step < 1:
        return []
    world, settings, area = model.world, model.society.settings, agent.area
    minute = settings.clock_of_step(step, model.scenario_spec.step_minutes)[1]
    facts: list[ObservedFact] = []
    seen: set[tuple[str, str]] = set()
    for e in _events(world, step, step):
        if e.agent == agent.name or e.area != area or not e.tags or (e.agent, e.action) in seen:
            continue
        seen.add((e.agent, e.action))
        inside = world.is_inside(e.area)
        violates, complies = judge_act(e.tags, e.action, inside, settings, minute)
        facts.append(ObservedFact(e.agent, e.action, tuple(e.tags), e.area, inside,
                                  f"{e.agent} is {gerund(e.action)} in {e.area}", f"{gerund(e.action)} in {e.area}",
                                  tuple(violates), tuple(complies)))
    for b in model.society.breaches:  # a missed follow-up, read after the act it should have followed
        spec = settings.tracked(b.norm).violated_by
        if b.step == step and b.agent != agent.name and b.area == area and spec.unless_followed_by:
            facts.append(ObservedFact(b.agent, b.behaviour, tuple(spec.tags), b.area, world.is_inside(b.area),
                                      f"{b.agent} finished {gerund(b.behaviour)} in {b.area}",
                                      f"{gerund(b.behaviour)} in {b.area}", (b.norm,), ()))
    return facts


# --- series, emergent norms ---------------------------------------------------------------------------


def unbroken_share(breaches: pd.DataFrame, agents: int, norm: str, after_step: float,
                   chances: int | None = None) -> float:
    """The share of ``agents`` with no breach of ``norm`` after ``after_step`` (world facts):
    compliance over a whole stretch, where the last step's window may fall in a quiet hour.
    ``chances``: the acts bearing on the norm in that stretch (:func:`acts_bearing_on`); with none,
    nobody had the chance to breach it - nobody smoked, indoors or out - and 1.0 would say only that
    nothing happened: NaN (not measured)."""
    if chances == 0:
        return float("nan")
    late = breaches[(breaches["step"] > after_step) & (breaches["norm"] == norm)]
    return 1 - late["agent"].nunique() / agents if agents else float("nan")


def bears_on(tags, action: str, norm: TrackedNorm, minute: int | None = None) -> bool:
    """Whether one executed act is the behaviour ``norm`` speaks about, whether it breaches it or
    keeps it: it carries one of the norm's ``violated_by`` tags (smoking, indoors or outside; a
    meal), its follow-up (a tip), or is one of its compliant alternatives (speaking softly), within
    the norm's hours. A society that keeps a norm still does these; one that never does them
    cannot breach it."""
    spec = norm.violated_by
    if not spec.holds_at(minute):
        return False
    tags = set(tags)
    return bool(tags & set(spec.tags)) or (spec.unless_followed_by in tags) or action in norm.alternatives.values()


def acts_bearing_on(events: pd.DataFrame, settings: CRSECSettings, step_minutes: float, norm: str,
                    after_step: float) -> int:
    """How many executed acts after ``after_step`` bear on the tracked norm ``norm`` (:func:`bears_on`),
    from an events frame (step, action, ok, tags as a comma-joined string or a tuple)."""
    return len(_acts_bearing_on(events, settings, step_minutes, norm, after_step))


def _acts_bearing_on(events: pd.DataFrame, settings: CRSECSettings, step_minutes: float, norm: str,
                     after_step: float) -> list[str]:
    """The agent of each executed act after ``after_step`` that bears on ``norm``."""
    if events.empty:
        return []
    t = settings.tracked(norm)
    late = events[(events["step"] > after_step) & events["ok"].astype(bool)]
    agents = []
    for step, agent, action, tags in zip(late["step"], late["agent"], late["action"], late["tags"], strict=True):
        tags = tuple(filter(None, tags.split(","))) if isinstance(tags, str) else tuple(tags or ())
        if bears_on(tags, action, t, settings.clock_of_step(int(step), step_minutes)[1]):
            agents.append(agent)
    return agents


def acting_unbroken_share(events: pd.DataFrame, breaches: pd.DataFrame, settings: CRSECSettings,
                          step_minutes: float, norm: str, after_step: float) -> float:
    """:func:`unbroken_share` among the agents who had the chance to breach ``norm`` after
    ``after_step``: one of their executed acts bore on it, or they breached it (world facts, as
    :func:`acting_counts` over a window). An agent who did nothing the norm speaks about - never
    smoked, never ate - is left out, where ``unbroken_share`` counts it as complying; NaN when
    nobody had the chance."""
    breached = set(breaches.loc[(breaches["step"] > after_step) & (breaches["norm"] == norm), "agent"])
    chance = set(_acts_bearing_on(events, settings, step_minutes, norm, after_step)) | breached
    return 1 - len(breached) / len(chance) if chance else float("nan")


def acting_counts(model: SocietyModel, norm: str) -> tuple[int, int]:
    """(agents who kept ``norm``, agents who had the chance to break it) within the compliance window
    ending at this step: an agent had the chance when one of its executed acts in the window bore on
    the norm (:func:`bears_on`, world facts: smoking indoors or out, a meal, a tip, speaking softly)
    or it breached the norm there; it kept it when it breached it nowhere in the window (``actions_ok``).
    An agent who did nothing the norm speaks about is in neither count."""
    settings, step_minutes = model.society.settings, model.scenario_spec.step_minutes
    t = settings.tracked(norm)
    first = model.steps - settings.compliance_window_steps + 1
    acted = {e.agent for e in _events(model.world, first, model.steps)
             if bears_on(e.tags, e.action, t, settings.clock_of_step(e.step, step_minutes)[1])}
    chance = [a for a in model.agents if a.name in acted or not a.actions_ok(norm)]
    return sum(a.actions_ok(norm) for a in chance), len(chance)


def acting_share(model: SocietyModel, norm: str) -> float:
    """The ``acting_compliance[NORM]`` reporter: the share of the agents who had the chance to break
    ``norm`` within the compliance window (:func:`acting_counts`) who kept it; NaN (not measured)
    when nobody did anything it speaks about, where ``compliance[NORM]`` says 1.0."""
    kept, chance = acting_counts(model, norm)
    return kept / chance if chance else float("nan")


def steps_per_day(model: SocietyModel) -> float:
    return model.society.settings.day_minutes / model.scenario_spec.step_minutes


def series(model: SocietyModel) -> pd.DataFrame:
    frame = model.datacollector.get_model_vars_dataframe()
    if frame.empty:
        return frame
    frame = frame.copy()
    frame["day"] = (frame["step"] - 1) / steps_per_day(model)
    return frame


def first_reaching(frame: pd.DataFrame, column: str, target: float = ADOPTION_TARGET) -> float | None:
    """The time (in days) at which ``column`` first reaches ``target``, or None."""
    hit = frame[frame[column] >= target - 1e-9]
    return None if hit.empty else float(hit["day"].iloc[0])


def emergent_norms(model: SocietyModel) -> pd.DataFrame:
    """Emergence by provenance: qualified norms written by a synthesis during the run whose text matches
    no seed (no entrepreneur's created norm, no scenario catalogue text), by holders."""
    seeded = {norm_key(n.content) for a in model.agents for n in a.norms.norms if n.origin == "created"}
    seeded |= {norm_key(c.content) for c in model.society.settings.norm_catalogue}
    seeded |= {norm_key(t.name) for t in model.society.settings.tracked_norms}
    rows: dict[str, dict] = {}
    for a in model.agents:
        for n in a.norms.qualified():
            key = norm_key(n.content)
            if n.origin != "synthesis" or key in seeded:
                continue
            row = rows.setdefault(key, {"norm": n.content, "holders": set(), "origins": set(), "covers": set()})
            row["holders"].add(a.name)
            row["origins"].add(n.origin)
            row["covers"] |= set(n.judged_covers)  # by the judge's labels
    table = [{"norm": r["norm"], "holders": len(r["holders"]), "share": len(r["holders"]) / max(1, len(model.agents)),
              "origin": ",".join(sorted(r["origins"])), "covers": ", ".join(sorted(r["covers"]))}
             for r in rows.values()]
    return pd.DataFrame(table, columns=["norm", "holders", "share", "origin", "covers"]).sort_values(
        ["holders", "norm"], ascending=[False, True], ignore_index=True)


# --- figures ---------------------------------------------------------------------------------------------


def plot_figure2(model: SocietyModel, path: Path) -> None:
    """Panel (a): conflicts, norm-related thoughts and chats per step; (b): adoption and compliance."""
    if not figures_drawn():
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = series(model)
    if frame.empty:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    marker = "o" if len(frame) <= 24 else None  # a short run's few points (one, for a step) show as dots
    for column, label in (("conflicts", "social conflicts"), ("norm_thoughts", "norm-related thoughts"),
                          ("norm_chats", "norm-related chats")):
        left.plot(frame["day"], frame[column], label=label, marker=marker)
    left.set_xlabel("day")
    left.set_ylabel("count per step")
    left.set_title("(a) conflicts, thoughts and chats")
    left.legend(fontsize=8)
    for i, t in enumerate(model.society.settings.tracked_norms):
        colour = f"C{i}"
        right.plot(frame["day"], frame[f"adoption[{t.name}]"], color=colour, label=f"{t.name}: adopted",
                   marker=marker)
        right.plot(frame["day"], frame[f"compliance[{t.name}]"], color=colour, linestyle="--",
                   label=f"{t.name}: complies", marker=marker, fillstyle="none")
        if f"acting_compliance[{t.name}]" in frame:  # gaps where nobody acted on the norm (not measured)
            right.plot(frame["day"], frame[f"acting_compliance[{t.name}]"], color=colour, linestyle=":",
                       label=f"{t.name}: complies, of those who acted", marker="x" if marker else None)
    right.set_ylim(-0.03, 1.03)
    right.set_xlabel("day")
    right.set_ylabel("share of agents")
    right.set_title("(b) adoption (solid), compliance (dashed; dotted: of those who acted)", fontsize=9)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- the report -----------------------------------------------------------------------------------------


def _days(value: float | None) -> str:
    return "not within this run" if value is None else f"at day {value:.2f}"


def _compliance_reached(frame: pd.DataFrame, norm: str) -> str:
    """When 70% compliance was reached, unless it held from the first step: an agent that never does
    the behaviour complies by construction, so such a date says nothing about adoption's lead."""
    column = f"compliance[{norm}]"
    if frame[column].iloc[0] >= ADOPTION_TARGET:
        return (f"already at the first step ({frame[column].iloc[0]:.0%}: agents who never do the behaviour "
                "count as complying; see the per-agent counts)")
    return _days(first_reaching(frame, column))


def _acting_reached(frame: pd.DataFrame, norm: str) -> str:
    """When 70% of the agents who acted on ``norm`` within the window kept it (steps where nobody
    acted on it are not measured and reach nothing)."""
    column = f"acting_compliance[{norm}]"
    if column not in frame or frame[column].isna().all():
        return "not measured (nobody acted on it)"
    return _days(first_reaching(frame, column))


def findings(model: SocietyModel, ratings: pd.DataFrame | None = None) -> list[tuple[str, str, str]]:
    """(finding, paper, this run) rows; ``ratings``: the questionnaire's summary, if it was asked."""
    frame = series(model)
    if frame.empty:
        return []
    settings = model.society.settings
    last = frame.iloc[-1]
    rows = []
    injunctive = [t for t in settings.tracked_norms if t.type == "injunctive"]
    descriptive = [t for t in settings.tracked_norms if t.type == "descriptive"]
    breaches = model.datacollector.get_table_dataframe("breaches")
    events = model.datacollector.get_table_dataframe("events")
    day_before = last["step"] - steps_per_day(model)
    # a run shorter than the window says how long it was, not "the last hour" or "the last day"
    minutes = round(int(last["step"]) * model.scenario_spec.step_minutes)
    hour = "in the last hour" if minutes >= 60 else f"in the run's {minutes} minutes"
    # (a day is the scenario's day, day_start to day_end: 14 hours in Hobbs Cafe)
    day = "over the last day" if minutes >= settings.day_minutes else f"over the run's {minutes / 60:.3g} hours"

    def last_day(norm: str) -> str:
        chances = acts_bearing_on(events, settings, model.scenario_spec.step_minutes, norm, day_before)
        if not chances:
            return f"nobody did what it speaks about {day} (not measured: no chance to breach it)"
        return (f"{unbroken_share(breaches, len(model.agents), norm, day_before, chances):.0%} never breached it "
                f"{day} ({chances} acts bore on it)")

    def acting(norm: str) -> str:
        kept, chance = acting_counts(model, norm)
        if not chance:
            return "nobody acted on it then: not measured among those who acted"
        return f"{kept / chance:.0%} of the {chance} agents who acted on it then"

    run = "; ".join(f"{t.name}: adopted {last[f'adoption[{t.name}]']:.0%}, complying {last[f'compliance[{t.name}]']:.0%} "
                    f"{hour} ({acting(t.name)}), {last_day(t.name)}" for t in injunctive)
    rows.append(("injunctive norms at the end", PAPER_FINDINGS["injunctive"], f"at day {last['day']:.2f}: {run}"))
    rows.append(("conflicts over time", PAPER_FINDINGS["conflicts"], conflicts_by_day(frame, steps_per_day(model))))
    timing = "; ".join(
        f"{t.name} ({t.type}): 70% adoption {_days(first_reaching(frame, f'adoption[{t.name}]'))}"
        for t in settings.tracked_norms)
    rows.append(("descriptive norm later", PAPER_FINDINGS["descriptive"], timing))
    lag = "; ".join(
        f"{t.name}: 70% adoption {_days(first_reaching(frame, f'adoption[{t.name}]'))}, 70% compliance "
        f"{_compliance_reached(frame, t.name)}, 70% compliance among the agents who acted on it "
        f"{_acting_reached(frame, t.name)}" for t in injunctive + descriptive)
    counts = adoption_vs_compliance(model)
    per_agent = "; ".join(
        f"{r.norm}: adopted before first compliant act {r.adopt_first}, after {r.comply_first}, same step "
        f"{r.same_step}, adopted only {r.adopt_only}, complied only {r.comply_only}" for r in counts.itertuples())
    rows.append(("adoption precedes compliance", PAPER_FINDINGS["lag"], f"{lag}. Per agent: {per_agent}"))
    emergent = emergent_norms(model)
    shown = "; ".join(f"'{r.norm}' ({r.holders} agents)" for r in emergent.head(3).itertuples()) or "none"
    if not emergent.empty and synthesis_by_rules(model):
        shown += f" ({RULES_EMERGENT})"
    rows.append(("emergent norms", PAPER_FINDINGS["emergent"], shown))
    rows.append(("human ratings", PAPER_FINDINGS["ratings"], ratings_text(model, ratings)))
    return rows


RULES_EMERGENT = ("emergent by construction, no evidence: the rules engine's abstract norm is its members' texts "
                  "joined ('On THEME: a; b.'), new text whenever a synthesis passes")


def synthesis_by_rules(model: SocietyModel) -> bool:
    """Whether the rules engine wrote this run's abstract norms (GenerateAbstractNorm on the rules route)."""
    from socialsim.llm.routing import RULES

    op = ops.GENERATE_ABSTRACT_NORM
    return model.llm.routes.model_for(op.name, op.module) == RULES


def conflicts_by_day(frame: pd.DataFrame, per_day: float) -> str:
    """Conflicts per simulated day (the same clock hours each day, so the daily schedule - a busy
    lunch, a quiet evening - cancels out of the comparison), and the peak step's time."""
    per_day = max(1, round(per_day))
    days = [int(frame["conflicts"].iloc[d:d + per_day].sum()) for d in range(0, len(frame), per_day)]
    whole = len(frame) // per_day
    peak = frame.loc[frame["conflicts"].idxmax(), "day"] if frame["conflicts"].max() > 0 else None
    shown = ", ".join(f"day {i} {n}" + ("" if i <= whole else " (part of a day)") for i, n in enumerate(days, 1))
    trend = ("" if whole < 2 else f"; day {whole} / day 1 = "
             + (f"{days[whole - 1] / days[0]:.2f}" if days[0] else "n/a (none on day 1)"))
    return (f"conflicts per day (same hours each day): {shown}{trend}; "
            + (f"the most at day {peak:.2f}" if peak is not None else "no conflict in this run"))


def engine_note(model: SocietyModel) -> str:
    """Which engine produced this run's numbers (per route, as the gateway resolved them)."""
    engines = sorted(model.llm.routes.models())
    if engines == ["rules"]:
        return ("Engine: `rules` - the society is the rule-based null model (named parameters, the model's "
                "RNG), not an LLM society.")
    return "Engine(s): " + ", ".join(f"`{e}`" for e in engines) + "."


def judge_agreement(matches: pd.DataFrame) -> tuple[int, float, float]:
    """(norms matched, share where the judge and the lexical matcher agree, Cohen's kappa)."""
    matches = matches[matches["judged"].notna()]  # the judge's unusable answers (the matcher measured those)
    if matches.empty:
        return 0, float("nan"), float("nan")
    from sklearn.metrics import cohen_kappa_score

    agree = float((matches["judged"] == matches["lexical"]).mean())
    labels = set(matches["judged"]) | set(matches["lexical"])
    kappa = float(cohen_kappa_score(matches["judged"], matches["lexical"])) if len(labels) > 1 else float("nan")
    return len(matches), agree, kappa


SHUFFLES = 200  # permutations of the judge's labels behind the shuffled-label baseline


def shuffled_agreement(matches: pd.DataFrame, rounds: int = SHUFFLES, seed: int = 0) -> tuple[float, float]:
    """The shuffled-label baseline beside the judge's agreement with the lexical matcher: the mean share
    and Cohen's kappa over ``rounds`` random permutations of the judge's labels (the same labels, paired
    with the matcher's by chance; a fixed seed, so a report is reproducible and the run's RNG untouched).
    An agreement no higher than this says the judge and the matcher agree only as their label
    frequencies would by chance."""
    matches = matches[matches["judged"].notna()]
    if matches.empty:
        return float("nan"), float("nan")
    from sklearn.metrics import cohen_kappa_score

    rng = random.Random(seed)
    judged, lexical = list(matches["judged"]), list(matches["lexical"])
    shares, kappas = [], []
    for _ in range(rounds):
        rng.shuffle(judged)
        shares.append(sum(j == x for j, x in zip(judged, lexical, strict=True)) / len(judged))
        if len(set(judged) | set(lexical)) > 1:
            kappas.append(float(cohen_kappa_score(judged, lexical)))
    return sum(shares) / rounds, (sum(kappas) / len(kappas) if kappas else float("nan"))


def measurement_lines(model: SocietyModel) -> list[str]:
    """Who measured: the judge route, and its agreement with the lexical matcher when it is an LLM;
    and how many created norms repeated another (dropped, so they do not count twice)."""
    repeats = sum(a.repeated_creations for a in model.agents)
    kept_once = [f"Norms an entrepreneur's creation answer repeated were kept once: {repeats} repeats dropped."
                 ] if repeats else []
    judge = model.society.settings.judge
    if judge == "rules":  # the actors match their norms by that matcher too, whatever the routes (``_match``)
        return ["Held norms were matched to the tracked norms, and plans judged, by the lexical matcher "
                "(each tracked norm's keywords and contrary phrases in the scenario file), not by the actors. "
                "But the actors' own matching is that same matcher: here adoption is their own reading of their "
                "norms, not an independent measurement.", *kept_once]
    matches = model.datacollector.get_table_dataframe("norm_matches")
    n, agree, kappa = judge_agreement(matches)
    chance_agree, chance_kappa = shuffled_agreement(matches)
    unusable = model.society.judge_fallbacks
    instead = [f"The judge's answer was unusable for {unusable['MatchNorm']} norm matches and "
               f"{unusable['JudgePlanCompliance']} plan judgements: the lexical matcher and the plan rule "
               "measured those instead (each failure is in run.log)."] if sum(unusable.values()) else []
    return [f"Held norms were matched to the tracked norms, and plans judged, by the judge `{judge}` (not an "
            f"actors' model). Agreement with the lexical matcher over {n} norms: {agree:.0%}, Cohen's kappa "
            f"{kappa:.2f}; with the judge's labels shuffled ({SHUFFLES} permutations, the chance baseline): "
            f"{chance_agree:.0%}, kappa {chance_kappa:.2f}." if n else f"Judge `{judge}`: no norm was matched in this run." if matches.empty
            else f"Judge `{judge}`: none of its answers matching a held norm was usable.", *instead, *kept_once]


def ratings_text(model: SocietyModel, ratings: pd.DataFrame | None) -> str:
    settings = model.society.settings
    if settings.judge == "rules":
        return "not measured: the Appendix-E questionnaire needs an LLM judge (--set crsec.judge=MODEL)"
    if ratings is None and model.measurement_stopped:
        return f"not measured: {model.measurement_stopped}"
    if ratings is not None and not ratings["pairs"].sum() and ratings["fallbacks"].sum():
        return (f"not measured: none of the judge's {int(ratings['fallbacks'].sum())} answers was a usable rating "
                f"(each is in run.log)")
    if ratings is None or not ratings["pairs"].sum():
        return f"not measured: no pair to rate (questionnaire_items={settings.questionnaire_items})"
    rated = ratings[ratings["pairs"] > 0]
    return (f"judge `{settings.judge}` (an LLM, not human raters): "
            + ", ".join(f"{r.task} {r.mean:.2f}" for r in rated.itertuples()))


QUESTIONNAIRE_FILE = "crsec_questionnaire.parquet"


def asks_questionnaire(model: SocietyModel) -> bool:
    """An LLM judge asks the questionnaire at the end of the run (the rules judge does not)."""
    settings = model.society.settings
    return settings.judge != "rules" and settings.questionnaire_items > 0


def ask_questionnaire_of_judge(model: SocietyModel, rng: random.Random) -> pd.DataFrame | None:
    """The Appendix-E questionnaire asked of the run's judge over pairs sampled with ``rng`` from
    its tables (a projection asks it on a dry run to price it); None when no LLM judge asks it."""
    from socialsim.agents.crsec import questionnaire as q

    if not asks_questionnaire(model):
        return None
    dc = model.datacollector
    settings = model.society.settings
    items = q.sample_items({name: dc.get_table_dataframe(name) for name in dc.tables}, rng,
                           settings.questionnaire_items, minutes(settings.day_end))
    return q.ask_questionnaire(model.society.judge, items, {a.name: a.description for a in model.agents}, rng)


def run_questionnaire(model: SocietyModel, run_dir: str | Path) -> pd.DataFrame | None:
    """Ask the Appendix-E questionnaire of the judge over pairs sampled from this run's tables; the
    ratings are saved beside the tables (``reproduce`` reads them). None when it is not asked."""
    from socialsim.agents.crsec import questionnaire as q
    from socialsim.metrics.report import end_of_run_measurement

    if not asks_questionnaire(model):
        return None
    rng = random.Random(model.random.getrandbits(64))  # drawn after the last step: the run is unchanged
    ratings = end_of_run_measurement(model, "the Appendix-E questionnaire",
                                     lambda: ask_questionnaire_of_judge(model, rng))
    if ratings is None:  # stopped by the budget or an outage: the run's status says so
        return None
    (Path(run_dir) / "tables").mkdir(parents=True, exist_ok=True)
    ratings.to_parquet(Path(run_dir) / "tables" / QUESTIONNAIRE_FILE, index=False)
    return q.summary(ratings)


def report_sections(model: SocietyModel, run_dir: str | Path) -> list[str]:
    figures = Path(run_dir) / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    plot_figure2(model, figures / "crsec_figure2.png")
    ratings = run_questionnaire(model, run_dir)
    lines = ["## CRSEC: norm emergence", "",
             "The paper's findings (Ren et al., CRSEC, Sec. 3.2 and Appendix D) beside this run's. "
             + engine_note(model), "",
             markdown_table(pd.DataFrame(findings(model, ratings), columns=["finding", "paper", "this run"]))]
    lines += ["", "![Figure 2](figures/crsec_figure2.png)", "", "### Measurement", "", *measurement_lines(model)]
    if ratings is not None:
        lines += ["", "Appendix-E questionnaire (7-point Likert; an item's score is the mean of its task's "
                  "questions; the judge is an LLM, not the paper's human raters):", "",
                  markdown_table(ratings[["task", "pairs", "mean", "sd", "fallbacks", "paper"]]
                                 .rename(columns={"paper": "paper (humans)"}), digits=None)]
    lines += [
              "", "### Emergent norms (never created by an entrepreneur)", ""]
    emergent = emergent_norms(model)
    if emergent.empty:
        lines.append("(none)")
    else:
        if synthesis_by_rules(model):
            lines += [f"These are {RULES_EMERGENT}.", ""]
        lines.append(markdown_table(emergent[["norm", "holders", "origin", "covers"]].rename(columns={"holders": "agents"})))
    lines += ["", "### Norm databases at the end", ""]
    for a in sorted(model.agents, key=lambda a: a.name):
        qualified = "; ".join(f"{one_line(n.content)} (u={n.utility}, {n.type[:3]})" for n in a.norms.qualified()) or "none"
        role = "entrepreneur" if a.entrepreneur else "ordinary"
        lines.append(f"- **{a.name}** ({role}): {qualified}")
    return lines
