"""The paper's human evaluation (Ren et al., CRSEC, Sec. 3.3 and Appendix E), asked of an LLM judge.

The paper's raters read an agent's description, watched its two days, and rated on a 7-point
Likert scale randomly chosen (input, output) pairs of eight LLM-based operations. Here the judge
route (``crsec.judge``, never the actors' model) answers the same eight tasks, in our words, for
pairs sampled from the run's recorded tables with the model's RNG. Every item is built from what
the run recorded (the norm database's change log, thoughts, conversations, the senders'
decisions, plans and executed actions), never from a label our code wrote about its quality.

The rules engine cannot rate: with ``crsec.judge=rules`` the questionnaire is not asked, and the
report says so instead of printing a number.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial

import pandas as pd
from pydantic import BaseModel, Field

from socialsim.agents.crsec.operations import plan_text
from socialsim.agents.crsec.settings import clock_text
from socialsim.llm.operation import Operation
from socialsim.llm.questions import QUOTED, RecordQuestion

SCALE = ("7 strongly agree, 6 agree, 5 somewhat agree, 4 neutral, 3 somewhat disagree, 2 disagree, "
         "1 strongly disagree")


@dataclass(frozen=True)
class Task:
    """One of the eight tasks: the module it rates, the questions and the material's table."""

    name: str  # as the paper's Figure 4 names it
    questions: tuple[str, ...]  # one score per question; the task's score is their mean
    paper: float  # the paper's mean human rating


TASKS = (
    Task("Creation", ("Considering the agent's description, do you agree with the norm it created: the utility "
                      "it gave (1-100, how important the norm is to it), that the norm fits its description, and "
                      "its type (descriptive: what people usually do; injunctive: what people ought to do)?",),
         6.44),
    Task("Sender", ("Do you agree with the agent's assessment that the OBSERVATION conflicts, or does not "
                    "conflict, with its PERSONAL NORMS?",
                    "If there is a conflict, do you agree with its decision to speak up or stay silent, given "
                    "its identity (norm entrepreneurs speak up readily, ordinary citizens depending on their "
                    "nature)?"),
         5.86),
    Task("Receiver", ("Do you agree that this CONVERSATION carries normative information (a rule about what "
                      "people do or ought to do)?",
                      "Do you agree that the conversation is fairly summarized by the RELATED NORM the listener "
                      "took from it (or, if none, that there was nothing to take)?"),
         5.77),
    Task("Observation", ("Do you agree that this THOUGHT carries normative information?",
                         "Do you agree that the thought is fairly summarized by the RELATED NORM drawn from it "
                         "(or, if none, that there was nothing to draw)?"),
         5.13),
    Task("Immediate evaluation", ("Do you agree with the agent's evaluation of the NORM against its source and "
                                  "its PERSONAL NORMS: consistent with the source, correctly typed, not already "
                                  "held, not conflicting, and given an appropriate utility? A norm that fails a "
                                  "check should be rejected, one that passes kept.",),
         5.14),
    Task("Long-term synthesis", ("Judged on accuracy, conciseness and completeness, do you agree that the "
                                 "ABSTRACT NORM summarizes the SPECIFIC NORMS, with an appropriate type?",),
         5.97),
    Task("Plan", ("Do you agree that the agent's PLAN complies with its PERSONAL NORMS?",), 6.43),
    Task("Action", ("Do you agree that the agent's ACTIONS comply with its PERSONAL NORMS?",), 6.40),
)
TASK_NAMES = tuple(t.name for t in TASKS)


@dataclass(frozen=True)
class Item:
    """One (input, output) pair to rate, and where it came from."""

    task: str
    agent: str
    step: int
    material: str


# A reason of at most REASON_CHARS characters: under the embedded model's grammar the whole answer
# then fits RateOperation.max_tokens even at one character a token (a 300-character reason let the
# 135M judge loop "1.1.1.1..." until the reply was cut and had to be asked again)
REASON_CHARS = 120


class Rating(BaseModel):
    score: int = Field(ge=1, le=7)
    reason: str = Field(default="", max_length=REASON_CHARS)


@dataclass
class RatingContext:
    agent: str
    description: str
    task: str
    question: str
    material: str


class RateOperation(Operation):
    """One Likert answer (1-7) to one question of the questionnaire about one sampled pair."""

    name = "RateOperation"
    module = "evaluation"
    system = "You evaluate a simulated person's reasoning fairly, critically and consistently."
    temperature = 0.0
    max_tokens = REASON_CHARS + 40  # the JSON around the reason and the score
    fallback_doc = "no score (left out of the means, counted as a fallback)"

    def question(self, ctx: RatingContext) -> RecordQuestion:
        return RecordQuestion(Rating)

    def prompt(self, ctx: RatingContext) -> str:
        return (f"Take the role of {ctx.agent} and rate one of their decisions.\n\nAGENT DESCRIPTION: "
                f"{ctx.description}\n\nTASK ({ctx.task}): {ctx.question}\n\nTHE RECORD TO RATE ({QUOTED}):\n"
                f"{ctx.material}\n\nScale: {SCALE}. "
                f"Give the score and a one-sentence reason.")

    def rule(self, ctx: RatingContext, rng: random.Random) -> Rating:
        """Never asked under rules (``ask_questionnaire`` needs an LLM judge); neutral if routed here."""
        return Rating(score=4, reason="rules engine: no rater")

    def fallback(self, ctx: RatingContext) -> Rating:
        return Rating(score=4, reason="fallback: no usable rating")


RATE_OPERATION = RateOperation()


# --- the material, from the run's tables ------------------------------------------------------------


def _table(tables: dict[str, pd.DataFrame], name: str) -> pd.DataFrame:
    df = tables.get(name)
    return df if df is not None else pd.DataFrame()


def held_norms(changes: pd.DataFrame, agent: str, step: int) -> list[str]:
    """The agent's qualified personal norms after ``step``, rebuilt from the norm change log."""
    if changes.empty:
        return []
    mine = changes[(changes["agent"] == agent) & (changes["step"] <= step)]
    last = mine.groupby("norm_id", sort=True).tail(1)
    return list(last.loc[last["state"] == "qualified", "content"])


def _norm_list(norms: list[str]) -> str:
    return "\n".join(f"- {n}" for n in norms) if norms else "(none)"


def _norm(row: dict) -> str:
    return f"{row['content']} (type: {row['type']}, utility: {row['utility']})"


def _creation(t: dict[str, pd.DataFrame]) -> list[Item]:
    changes = _table(t, "norm_changes")
    if changes.empty:
        return []
    created = changes[changes["event"] == "created"]
    return [Item("Creation", r["agent"], int(r["step"]), f"NORM CREATED: {_norm(r)}") for r in created.to_dict("records")]


def _sender(t: dict[str, pd.DataFrame]) -> list[Item]:
    rows = _table(t, "sender_decisions")
    changes = _table(t, "norm_changes")
    items = []
    for r in rows.to_dict("records"):
        talk = {True: "yes", False: "no"}.get(r.get("talk"), "not asked (no conflict)")
        items.append(Item("Sender", r["agent"], int(r["step"]), (
            f"PERSONAL NORMS:\n{_norm_list(held_norms(changes, r['agent'], int(r['step']) - 1))}\n\n"
            f"OBSERVATION: {r['observation']}\nDETECTED A CONFLICT: {'yes' if r['conflict'] else 'no'}\n"
            f"IDENTITY: {r['identity']}\nDECIDED TO TALK: {talk}")))
    return items


def _identified_from(changes: pd.DataFrame, origin: str) -> pd.DataFrame:
    if changes.empty or "source" not in changes:
        return pd.DataFrame(columns=["agent", "step", "source", "content", "type", "utility"])
    return changes[(changes["origin"] == origin) & (changes["event"] == "identified")]


def _receiver(t: dict[str, pd.DataFrame]) -> list[Item]:
    """One pair per conversation its receiver heard (a conversation over the receiver's
    ``conversations_heard`` of that step is recorded with heard=False: it was never reflected on, so
    there is nothing to rate), with the norm the receiver took from that very conversation."""
    talks = _table(t, "conversations")
    if talks.empty:
        return []
    if "heard" in talks:
        talks = talks[talks["heard"].astype(bool)]
    taken = _identified_from(_table(t, "norm_changes"), "conversation")
    items = []
    for (step, _sender, receiver), lines in talks.groupby(["step", "sender", "receiver"], sort=True):
        said = list(zip(lines["speaker"], lines["text"], strict=True))
        text = "\n".join(f"{s}: {x}" for s, x in said)
        # the listener takes it in while reflecting, in the step after the conversation was delivered
        related = taken[(taken["agent"] == receiver) & taken["step"].between(step, step + 1)
                        & taken["source"].map(lambda s, said=said: _same_talk(s, said))]
        norm = _norm(related.iloc[0].to_dict()) if len(related) else "none identified"
        items.append(Item("Receiver", receiver, int(step), f"CONVERSATION:\n{text}\n\nRELATED NORM: {norm}"))
    return items


def _same_talk(source: str, said: list[tuple[str, str]]) -> bool:
    """Whether a recorded source is this conversation: the same lines, each by the same speaker, in
    either rendering (``Name: "line"`` as the agent keeps it, or unquoted). The rules' lines are the
    same words from every sender, so the speakers tell two conversations apart."""
    lines = []
    for line in str(source).splitlines():
        speaker, _, text = line.partition(": ")
        if len(text) > 1 and text[0] == text[-1] == '"':
            text = text[1:-1]
        lines.append((speaker, text))
    return bool(said) and lines == [(str(s), str(x)) for s, x in said]


def _observation(t: dict[str, pd.DataFrame]) -> list[Item]:
    thoughts = _table(t, "thoughts")
    items = []
    for r in thoughts.to_dict("records"):
        norm = r["normative_info"] or "none identified"
        items.append(Item("Observation", r["agent"], int(r["step"]),
                          f"OBSERVATION: {r['observation']}\nTHOUGHT: {r['thought']}\n\nRELATED NORM: {norm}"))
    return items


def _evaluation(t: dict[str, pd.DataFrame]) -> list[Item]:
    changes = _table(t, "norm_changes")
    if changes.empty or "source" not in changes:
        return []
    verdicts = changes[(changes["origin"] != "created")
                       & (changes["event"].eq("qualified") | changes["event"].str.startswith("failed"))]
    items = []
    for r in verdicts.to_dict("records"):
        before = [n for n in held_norms(changes, r["agent"], int(r["step"]) - 1) if n != r["content"]]
        verdict = "kept (passed every check)" if r["event"] == "qualified" else f"rejected ({r['event']} check)"
        items.append(Item("Immediate evaluation", r["agent"], int(r["step"]), (
            f"SOURCE ({r['origin']}): {r['source']}\n\nPERSONAL NORMS:\n{_norm_list(before)}\n\n"
            f"NORM: {_norm(r)}\nTHE AGENT'S EVALUATION: {verdict}")))
    return items


def _synthesis(t: dict[str, pd.DataFrame]) -> list[Item]:
    changes = _table(t, "norm_changes")
    if changes.empty or "source" not in changes:
        return []
    made = changes[(changes["origin"] == "synthesis") & (changes["event"] == "identified")]
    return [Item("Long-term synthesis", r["agent"], int(r["step"]),
                 f"SPECIFIC NORMS:\n{r['source']}\n\nABSTRACT NORM: {_norm(r)}") for r in made.to_dict("records")]


def _plan(t: dict[str, pd.DataFrame], day_end: int | None = None) -> list[Item]:
    """The plan as the plan judge reads it: with the day's end known, each item's span (it goes on
    until the next item starts), so a rater judges what the item does over all its time."""
    plans = _table(t, "plans")
    changes = _table(t, "norm_changes")
    spans = "" if day_end is None else f" (each item goes on until the next starts, the last until {clock_text(day_end)})"
    items = []
    for (agent, step), rows in plans.groupby(["agent", "step"], sort=True):
        lines = plan_text(rows.to_dict("records"), day_end)
        items.append(Item("Plan", agent, int(step), (
            f"PERSONAL NORMS:\n{_norm_list(held_norms(changes, agent, int(step)))}\n\nPLAN{spans}:\n{lines}")))
    return items


def _action(t: dict[str, pd.DataFrame]) -> list[Item]:
    events = _table(t, "events")
    changes = _table(t, "norm_changes")
    if events.empty:
        return []
    acts = events[events["ok"].astype(bool) & (events["verb"] != "chat with")]
    items = []
    for (agent, step), rows in acts.groupby(["agent", "step"], sort=True):
        lines = "\n".join(f"{r['action']} (in {r['area']})" for r in rows.to_dict("records"))
        items.append(Item("Action", agent, int(step), (
            f"PERSONAL NORMS:\n{_norm_list(held_norms(changes, agent, int(step)))}\n\nACTIONS:\n{lines}")))
    return items


BUILDERS = {"Creation": _creation, "Sender": _sender, "Receiver": _receiver, "Observation": _observation,
            "Immediate evaluation": _evaluation, "Long-term synthesis": _synthesis, "Plan": _plan, "Action": _action}


def sample_items(tables: dict[str, pd.DataFrame], rng: random.Random, per_task: int,
                 day_end: int | None = None) -> list[Item]:
    """Up to ``per_task`` pairs per task, drawn without replacement with ``rng`` (the paper: 20);
    ``day_end`` (a minute of the day) gives plan pairs their items' spans."""
    builders = {**BUILDERS, "Plan": partial(_plan, day_end=day_end)}
    items: list[Item] = []
    for task in TASKS:
        pool = builders[task.name](tables)
        items += rng.sample(pool, per_task) if len(pool) > per_task else pool
    return items


# --- asking and summarizing ---------------------------------------------------------------------------

RATING_COLUMNS = ["item", "task", "question", "agent", "step", "score", "reason", "status"]


def ask_questionnaire(judge, items: list[Item], descriptions: dict[str, str], rng: random.Random) -> pd.DataFrame:
    """Every question of every item, asked concurrently on the judge's gateway; one row each,
    numbered by its item (one agent may have several pairs of a task in one step: two norms
    created, two conversations heard). A fallback (no usable answer) keeps its row with no score."""
    from socialsim.llm.loop import run_sync

    asks = []
    for index, item in enumerate(items):
        task = next(t for t in TASKS if t.name == item.task)
        for number, question in enumerate(task.questions, start=1):
            ctx = RatingContext(item.agent, descriptions.get(item.agent, ""), item.task, question, item.material)
            asks.append((index, item, number, ctx))

    async def everything():
        return await judge.gather(*(judge.ask(RATE_OPERATION, ctx, agent_id=None, rng=rng) for *_, ctx in asks))

    answers = run_sync(everything()) if asks else []
    rows = []
    for (index, item, number, _), answer in zip(asks, answers, strict=True):
        usable = answer.status != "fallback"
        rows.append({"item": index, "task": item.task, "question": number, "agent": item.agent, "step": item.step,
                     "score": answer.value.score if usable else None, "reason": answer.value.reason,
                     "status": answer.status})
    return pd.DataFrame(rows, columns=RATING_COLUMNS)


def summary(ratings: pd.DataFrame) -> pd.DataFrame:
    """Per task: pairs rated, mean ± sd of the items' scores (an item's score is the mean of its
    questions), fallbacks, and the paper's human rating beside it. Ratings written before items
    were numbered are grouped by agent and step."""
    rows = []
    item = ["item"] if "item" in ratings else ["agent", "step"]
    for task in TASKS:
        mine = ratings[ratings["task"] == task.name] if not ratings.empty else ratings
        scored = mine.dropna(subset=["score"]) if not mine.empty else mine
        per_item = scored.groupby(item)["score"].mean() if not scored.empty else pd.Series(dtype=float)
        fallbacks = int((mine["status"] == "fallback").sum()) if not mine.empty else 0
        rows.append({"task": task.name, "pairs": len(per_item),
                     "mean": round(float(per_item.mean()), 2),  # NaN with no pair
                     "sd": round(float(per_item.std()), 2),  # NaN with fewer than two
                     "fallbacks": fallbacks, "paper": task.paper})
    return pd.DataFrame(rows)
