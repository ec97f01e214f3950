"""Operations of the ASVO agent: theory of mind, planning, desire update, and evaluation.

Every step of the paper's decision cycle (ASVO appendix C.2, C.5, C.6, D.1, D.2) is one typed
operation. Prompts follow the paper's structure and answer format in our own words; where the
paper asks for a free-form list ("Desire: X, Predicted Value: v, Reason: ...") we ask for the same
content as a JSON record so it can be validated. Each operation's ``rule`` answers from the
structured context with the SVO arithmetic of ``socialsim.agents.asvo.svo``: an altruistic agent's
desires follow others' outcomes, a competitive agent's follow its rank, and so on.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, get_args

from pydantic import BaseModel, Field, create_model

from socialsim.agents.asvo.svo import (
    PERSONALITY,
    STANCES,
    channels_from_effects,
    label_from_effects,
    predicted_channels,
    rule_update,
    svo_from_stance,
)
from socialsim.agents.desires import ANCHORS, DESIRES, LinearDecay, gap_closure
from socialsim.llm.operation import Operation
from socialsim.llm.questions import (
    QUOTED,
    Choice,
    Letter,
    LetterScaleQuestion,
    PickOneQuestion,
    RecordQuestion,
    ShortTextQuestion,
    Text,
)

SYSTEM = "You simulate a human being in a social setting. Answer exactly in the requested format."
REFLECTION_PREFIX = "After '{action}', {desire} updated from {previous} to {current} is not reasonable because:"
NEUTRAL_BELIEF = 5


# --- typed answers -------------------------------------------------------------------------------

def field_name(desire: str) -> str:
    return desire.replace(" ", "_")


@lru_cache(maxsize=16)
def desire_record(desires: tuple[str, ...] = DESIRES) -> type[BaseModel]:
    """A record of the given desires (a run's ``desire_pool``), each 0-10, and one reason: a model
    is asked only for the desires the agents have."""
    return create_model("DesireRecord", **{field_name(d): (int, Field(ge=0, le=10)) for d in desires},
                        reason=(str, Field(default="", max_length=300)))


def _desires_of(values) -> tuple[str, ...]:
    """The desires among ``values``' keys, in the pool's order."""
    return tuple(d for d in DESIRES if d in values)


def record_values(record: BaseModel) -> dict[str, int]:
    return {d: getattr(record, field_name(d)) for d in DESIRES if field_name(d) in type(record).model_fields}


def make_record(values: dict[str, float], reason: str) -> BaseModel:
    desires = _desires_of(values)
    return desire_record(desires)(**{field_name(d): int(round(values[d])) for d in desires}, reason=reason)


class Activity(BaseModel):
    text: str = Field(min_length=3, max_length=240)
    stance: Literal["Cooperation", "QuasiCooperation", "Neutral", "QuasiCompetition", "Competition"]


@lru_cache(maxsize=16)
def candidates_model(n: int) -> type[BaseModel]:
    """A record of exactly ``n`` activities (the number of candidates is a model parameter)."""
    return create_model("Candidates", activities=(list[Activity], Field(min_length=n, max_length=n)))


class JudgeScores(BaseModel):
    naturalness: int = Field(ge=1, le=5)
    human_likeness: int = Field(ge=1, le=5)
    reason: str = Field(default="", max_length=300)


# --- shared prompt pieces -----------------------------------------------------------------------

def _desire_list(values: dict[str, float]) -> str:
    return ", ".join(f"{d}: {round(v, 1):g}" for d, v in values.items())


def _memory(memory: list[str]) -> str:
    return "\n".join(f"- {m}" for m in memory) or "- (nothing yet)"


def _recent_memory(memory: list[str]) -> str:
    """An agent's memory as every prompt shows it, quoted: it holds what other agents said and did."""
    return f"Your recent memory ({QUOTED}):\n{_memory(memory)}\n"


def _a(word: str) -> str:
    """``word`` with its indefinite article ("an altruistic", "a competitive")."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def _personality(svo: str | None) -> str:
    """The SVO sentence and personality text; empty in the ablation w/o ASVO."""
    return "" if svo is None else f"You have {_a(svo)} social personality. {PERSONALITY[svo]}\n"


# --- theory of mind (appendix C.5) ---------------------------------------------------------------

@dataclass
class MindContext:
    """What an observer knows when it estimates another agent's desires."""

    observer: str
    setting: str
    memory: list[str]
    target: str
    action: str  # observed, or guessed by GuessHiddenAction
    stance: str | None  # the action's stance when the observer knows it (rules only)
    prior: dict[str, float] = field(default_factory=lambda: dict.fromkeys(DESIRES, NEUTRAL_BELIEF))
    decay: LinearDecay = field(default_factory=LinearDecay)  # the satisfaction dynamics everyone shares
    reverse: frozenset[str] = frozenset()  # the scenario's reverse-coded desires (larger = worse), everyone's


class PredictObservedDesires(Operation):
    """Estimate an observable agent's desires from the action one saw it take."""

    name = "PredictObservedDesires"
    module = "tom"
    system = SYSTEM
    max_tokens = 160
    fallback_doc = "the observer's previous belief about the target's desires (5 when it has none)"

    def question(self, ctx: MindContext) -> RecordQuestion:
        return RecordQuestion(desire_record(_desires_of(ctx.prior)))

    def prompt(self, ctx: MindContext) -> str:
        return (
            f"You are {ctx.observer}, and you keep a memory and watch your surroundings.\n"
            f"Setting: {ctx.setting}\n{_recent_memory(ctx.memory)}\n"
            f"You just saw {ctx.target} do this ({QUOTED}): {ctx.action}\n"
            f"From that observed action and everything above, estimate {ctx.target}'s current value "
            f"(0-10) of each desire: {', '.join(_desires_of(ctx.prior))}. Base every estimate on the evidence you "
            f"observed, and give one short reason."
        )

    def rule(self, ctx: MindContext, rng: random.Random) -> BaseModel:
        """Guess the target's SVO from its stance, move the prior belief by what that stance would
        make such a person feel, then let it fade as satisfaction does."""
        stance = ctx.stance or "Neutral"
        svo = svo_from_stance(stance)
        channels = predicted_channels(stance)
        values = {d: ctx.decay.apply(rule_update(d, v, channels, svo, d in ctx.reverse), d in ctx.reverse)
                  for d, v in ctx.prior.items()}
        return make_record(values, f"a {stance} action suggests a {svo or 'neutral'} person")

    def fallback(self, ctx: MindContext) -> BaseModel:
        return make_record(ctx.prior, "fallback: previous belief kept")


class PredictGuessedDesires(PredictObservedDesires):
    """Estimate a hidden agent's desires from the action one guessed it took (second ToM step)."""

    name = "PredictGuessedDesires"

    def prompt(self, ctx: MindContext) -> str:
        return (
            f"You are {ctx.observer}.\nSetting: {ctx.setting}\n{_recent_memory(ctx.memory)}\n"
            f"You predicted that {ctx.target} performed this action ({QUOTED}): {ctx.action}\n"
            f"Using that predicted action together with the setting and the state of the group, "
            f"estimate {ctx.target}'s current value (0-10) of each desire: {', '.join(_desires_of(ctx.prior))}. "
            f"Give one short reason drawn from your reasoning."
        )


@dataclass
class HiddenActionContext:
    observer: str
    setting: str
    memory: list[str]
    own_action: str
    target: str
    last_known_action: str | None  # the target's last action the observer saw, if any
    default_action: str  # what an ordinary, neutral person would be doing here


class GuessHiddenAction(Operation):
    """Predict, in one sentence, what an agent one cannot observe most likely did."""

    name = "GuessHiddenAction"
    module = "tom"
    system = SYSTEM
    max_tokens = 48
    fallback_doc = "the target's last action the observer saw, else an ordinary neutral action"

    def question(self, ctx: HiddenActionContext) -> ShortTextQuestion:
        return ShortTextQuestion(max_chars=200)

    def prompt(self, ctx: HiddenActionContext) -> str:
        return (
            f"You are {ctx.observer}.\nSetting: {ctx.setting}\n{_recent_memory(ctx.memory)}"
            f"Your own last action ({QUOTED}): {ctx.own_action or '(none yet)'}\n\n"
            f"You cannot observe {ctx.target} right now. From your observations, your own action and "
            f"your memory, what has {ctx.target} most likely been doing? Answer in a single sentence "
            f"that describes the action only."
        )

    def rule(self, ctx: HiddenActionContext, rng: random.Random) -> Text:
        """People keep doing what they were last seen doing; unknown people do something ordinary."""
        return Text(text=ctx.last_known_action or ctx.default_action)

    def fallback(self, ctx: HiddenActionContext) -> Text:
        return Text(text=ctx.last_known_action or ctx.default_action)


# --- planning (appendix C.6) ---------------------------------------------------------------------

@dataclass
class PlanContext:
    name: str
    description: str
    svo: str | None  # None in the ablation w/o ASVO
    setting: str
    memory: list[str]
    desires: dict[str, float]
    expected: dict[str, float]
    observed: list[str]  # "Bob: helped Amy with ..." lines
    n: int
    catalogue: list[tuple[str, float, float]]  # (text, own gain, others' gain): possible actions (rules only)
    context: str = ""  # the scenario's full context text (the paper's Figures 3-5), first in the prompt


class ProposeActions(Operation):
    """Ask for N varied activity sequences that serve the agent's desires (and its SVO)."""

    name = "ProposeActions"
    module = "plan"
    system = SYSTEM
    max_tokens = 400
    fallback_doc = "the first N actions of the scenario's catalogue"

    def question(self, ctx: PlanContext) -> RecordQuestion:
        return RecordQuestion(candidates_model(ctx.n))

    def prompt(self, ctx: PlanContext) -> str:
        who = (f"You are {ctx.name}, a human-like agent with a {ctx.svo} orientation. {ctx.description}\n"
               f"{PERSONALITY[ctx.svo]}\n") if ctx.svo else f"You are {ctx.name}, a human-like agent. {ctx.description}\n"
        consistent = " and remain consistent with your social value orientation" if ctx.svo else ""
        observed = "\n".join(f"- {o}" for o in ctx.observed) or "- (no one in view)"
        return (
            f"{who}Environment: {ctx.context or ctx.setting}\n"
            f"Your current desire states are: {_desire_list(ctx.desires)}.\n"
            f"The values you hope to reach are: {_desire_list(ctx.expected)}.\n"
            f"What you see others doing ({QUOTED}):\n{observed}\n"
            f"{_recent_memory(ctx.memory)}\n"
            f"Generate {ctx.n} possible activity sequences that can best fulfil your desires{consistent}. "
            f"Be specific, make the activities varied, and include only actions possible in the present "
            f"environment. For each, give its stance toward the others: Cooperation, QuasiCooperation, "
            f"Neutral, QuasiCompetition or Competition."
        )

    def rule(self, ctx: PlanContext, rng: random.Random) -> BaseModel:
        """N catalogue actions drawn uniformly, the same way whatever the SVO: the SVO acts later,
        only by weighting the simulated outcomes. The stance recorded with each is read from its
        effect on the others (``label_from_effects``), never from the SVO."""
        chosen = rng.sample(ctx.catalogue, min(ctx.n, len(ctx.catalogue)))
        return _candidates(chosen, ctx)

    def fallback(self, ctx: PlanContext) -> BaseModel:
        return _candidates(ctx.catalogue[: ctx.n], ctx)


SCHEMA_MARKERS = ("$defs", "\"properties\"", "\"type\":", "activities", "\"stance\"")
# the answer format's own words: a field's name or a stance given as the action ("Text", "Neutral"),
# read from the Activity record itself
FORMAT_WORDS = frozenset({*Activity.model_fields, *(s.lower() for s in get_args(Activity.model_fields["stance"].annotation))})


def repair_action(text: str, prompt: str = "", allowed: tuple[str, ...] = ()) -> str | None:
    """A usable action text, or None: trimmed of quotes, bullets and an "Action:" prefix; refused
    when empty, when it is schema text (``$defs``, ``"properties"``...) or a word of the answer
    format ("Text", a stance), or a copy of the prompt's own words: a long passage, one of its
    headings ("Your recent memory: 4.9"), or text in its voice, which speaks to the agent ("Your
    recent memories", "Your current desire is: 17,"): an action is the agent's own, never "Your ...".
    An action the prompt lists as seen, remembered or possible is fine. SmolLM2 wrote all of these
    where an action belongs."""
    cleaned = text.strip().strip("\"'`*-• ").strip()
    for prefix in ("Action:", "action:", "Activity:", "activity:"):
        cleaned = cleaned.removeprefix(prefix).strip()
    if len(cleaned) < 3 or any(m in cleaned for m in SCHEMA_MARKERS):
        return None
    if cleaned.lower().strip(" .,:;") in FORMAT_WORDS:
        return None
    quoted = any(cleaned in t for t in allowed)  # actions the prompt lists (seen, remembered, catalogue)
    if not quoted and re.match(r"your\b", cleaned, re.IGNORECASE):
        return None
    if prompt and not quoted:
        headings = {re.sub(r"\s*\([^()]*\)$", "", line.split(":", 1)[0]).strip()  # without a note ("(quoted ...)")
                    for line in prompt.splitlines() if ":" in line}
        if len(cleaned) > 40 and cleaned in prompt or re.sub(r"[\s:,.;0-9]+$", "", cleaned) in headings:
            return None
    return cleaned


def _candidates(chosen: list[tuple[str, float, float]], ctx: PlanContext) -> BaseModel:
    """Repeat candidates when the catalogue has fewer actions than N."""
    if not chosen:
        chosen = [("carry on with my own work", 0.5, 0.0)]
    padded = [chosen[i % len(chosen)] for i in range(ctx.n)]
    return candidates_model(ctx.n)(activities=[Activity(text=t, stance=label_from_effects(o)) for t, _, o in padded])


@dataclass
class OutcomeContext:
    name: str
    svo: str | None
    desires: dict[str, float]
    action: str
    own: float  # the action's simulated gain for the actor (catalogue, or the proposed stance's payoff)
    others: float  # ... and for each person it observes
    # theory of mind (zero when it is off): what the others' predicted actions bring oneself,
    # what they bring the others themselves, and how far their predicted desires are below neutral
    received: float = 0.0
    others_own: float = 0.0
    others_need: float = 0.0
    others_view: list[str] = field(default_factory=list)  # "Bob: likely does X; desires ..." lines
    reverse: frozenset[str] = frozenset()  # reverse-coded desires (larger = worse)


class SimulateOutcome(Operation):
    """Imagine one candidate forward: the desire values it would leave the agent with."""

    name = "SimulateOutcome"
    module = "plan"
    system = SYSTEM
    max_tokens = 160
    fallback_doc = "no change: every desire keeps its current value"

    def question(self, ctx: OutcomeContext) -> RecordQuestion:
        return RecordQuestion(desire_record(_desires_of(ctx.desires)))

    def prompt(self, ctx: OutcomeContext) -> str:
        return (
            f"You are {ctx.name}. {_personality(ctx.svo)}"
            f"Given your original desire states: {_desire_list(ctx.desires)}\n"
            f"What you expect of the others ({QUOTED}):\n{_memory(ctx.others_view)}\n"
            f"If you perform the following action ({QUOTED}): {ctx.action}\n"
            f"Predict the resulting value (0-10) of each desire after taking this action, and briefly "
            f"explain why."
        )

    def rule(self, ctx: OutcomeContext, rng: random.Random) -> BaseModel:
        """Each desire moves by what the action's simulated effects mean to this SVO type. With
        theory of mind, the others' predicted actions add to both sides, and help counts more
        (harm hurts more) for others predicted to be badly off: ``others * (1 + need)``."""
        channels = channels_from_effects(ctx.own + ctx.received,
                                         ctx.others * (1 + ctx.others_need) + ctx.others_own)
        values = {d: rule_update(d, v, channels, ctx.svo, d in ctx.reverse) for d, v in ctx.desires.items()}
        return make_record(values, f"expected result: {ctx.own:+.2f} for me, {ctx.others:+.2f} for the others")

    def fallback(self, ctx: OutcomeContext) -> BaseModel:
        return make_record(ctx.desires, "fallback: no change predicted")


@dataclass
class SelectContext:
    name: str
    svo: str | None
    desires: dict[str, float]
    expected: dict[str, float]
    candidates: list[str]
    outcomes: list[dict[str, float]]  # predicted desire values per candidate
    reverse: frozenset[str] = frozenset()  # reverse-coded desires: their gap is closed by going down


class SelectAction(Operation):
    """Pick the candidate with the most positive (and SVO-consistent) predicted outcome."""

    name = "SelectAction"
    module = "plan"
    system = SYSTEM
    max_tokens = 4
    fallback_doc = "the first candidate"

    def question(self, ctx: SelectContext) -> PickOneQuestion:
        return PickOneQuestion(tuple(ctx.candidates), quoted=True)  # the agent's model proposed them

    def prompt(self, ctx: SelectContext) -> str:
        listed = "\n".join(f"{i}. {c}\n   predicted desires: {_desire_list(o)}"
                           for i, (c, o) in enumerate(zip(ctx.candidates, ctx.outcomes, strict=True), 1))
        consistent = " and most consistent with your social value orientation" if ctx.svo else ""
        return (
            f"You are {ctx.name}. {_personality(ctx.svo)}"
            f"Your desire states now: {_desire_list(ctx.desires)}\n"
            f"The values you hope to reach: {_desire_list(ctx.expected)}\n\n"
            f"The predicted outcomes of your candidate activities ({QUOTED}):\n{listed}\n\n"
            f"Choose the activity whose effect is the most positive{consistent}."
        )

    def rule(self, ctx: SelectContext, rng: random.Random) -> Choice:
        """Most of the gap to the expected values closed (downward for a reverse-coded desire);
        ties broken by the model's RNG."""
        scores = [round(gap_closure(ctx.desires, o, ctx.expected, ctx.reverse), 9) for o in ctx.outcomes]
        best = rng.choice([i for i, s in enumerate(scores) if s == max(scores)])
        return Choice(index=best, text=ctx.candidates[best])

    def fallback(self, ctx: SelectContext) -> Choice:
        return Choice(index=0, text=ctx.candidates[0])


# --- desire update, check and reflection (appendix C.2, Figure 6) --------------------------------

@dataclass
class UpdateContext:
    name: str
    description: str
    svo: str | None
    desire: str
    value: float  # the current value
    action: str
    consequence: str
    channels: dict[str, float]  # the step's structured outcome (rules only)
    unreasonable: list[str] = field(default_factory=list)  # earlier reflections of this agent
    proposed: int | None = None  # for the check and the reflection: the updated value
    noise: float = 0.0  # rules only: chance the rule proposes a careless value (ASVOSettings.update_noise)
    reverse: bool = False  # the desire is reverse-coded (larger = worse): a good outcome lowers it


def _level(value: float) -> int:
    return int(min(10, max(0, round(value))))


class UpdateDesire(Operation):
    """The new value of one desire after an action and its consequence, as a letter (a)-(k)."""

    name = "UpdateDesire"
    module = "desire"
    system = SYSTEM
    max_tokens = 4
    fallback_doc = "keep the previous value (the paper's rule for irrelevant or failed actions)"

    def question(self, ctx: UpdateContext) -> LetterScaleQuestion:
        return LetterScaleQuestion(ANCHORS[ctx.desire])

    def prompt(self, ctx: UpdateContext) -> str:
        examples = ""
        if ctx.unreasonable:
            examples = (f"Some earlier updates were unreasonable ({QUOTED}):\n"
                        + "\n".join(f"- {u}" for u in ctx.unreasonable) + "\n")
        personality = (f"The agent has {_a(ctx.svo)} social personality.\n{PERSONALITY[ctx.svo]}\n"
                       if ctx.svo else "")
        # the agent, its action and its consequence first, the desire last: the agent's updates of
        # one step share everything up to the desire, a head the embedded engine evaluates once
        return (
            f"{personality}{ctx.description}\n"
            f"The action of the agent {ctx.name} ({QUOTED}): {ctx.action}\n"
            f"Its consequence ({QUOTED}): {ctx.consequence}\n{examples}"
            f"The current value of the desire {ctx.desire} is {round(ctx.value, 1):g}.\n"
            f"How does the value of {ctx.desire} change because of the consequence of this action?\n"
            f"Select the value after the event on the scale from 0 to 10. If the consequence does not "
            f"affect this desire (the action is unrelated to it, or it failed), keep the previous value."
        )

    def rule(self, ctx: UpdateContext, rng: random.Random) -> Letter:
        """Move by the felt outcome (SVO weights x the desire's sensitivity to each channel).
        With probability ``noise`` the proposal is careless (a level at least 3 away from that),
        a stand-in for a language model's slips so the check and reflection have work to do; a
        retry that has a reflection on this very update in front of it is careful."""
        level = _level(rule_update(ctx.desire, ctx.value, ctx.channels, ctx.svo, ctx.reverse))
        reflected = any(u.startswith(f"After '{ctx.action}', {ctx.desire} updated") for u in ctx.unreasonable)
        if ctx.noise and not reflected and rng.random() < ctx.noise:
            level = rng.choice([v for v in range(11) if abs(v - level) >= 3])
        return Letter(letter="abcdefghijk"[level], level=level)

    def fallback(self, ctx: UpdateContext) -> Letter:
        level = _level(ctx.value)
        return Letter(letter="abcdefghijk"[level], level=level)


YES_NO = ("Yes.", "No.")


def rule_reasonable(ctx: UpdateContext) -> tuple[bool, int | float]:
    """The rule check: the change must go the way the outcome points, by about the right amount,
    and an outcome that does not touch the desire must leave it alone."""
    expected = rule_update(ctx.desire, ctx.value, ctx.channels, ctx.svo, ctx.reverse)
    proposed = ctx.proposed if ctx.proposed is not None else ctx.value
    if expected == ctx.value:
        return proposed == _level(ctx.value) or proposed == ctx.value, expected
    same_way = (proposed - ctx.value) * (expected - ctx.value) > 0
    return same_way and abs(proposed - expected) <= 2, expected


class CheckUpdate(Operation):
    """Is the change of a desire from v to v' reasonable? (a) Yes / (b) No."""

    name = "CheckUpdate"
    module = "desire"
    system = SYSTEM
    max_tokens = 4
    fallback_doc = "(a) Yes: a check that cannot be answered does not block the update"

    def question(self, ctx: UpdateContext) -> LetterScaleQuestion:
        return LetterScaleQuestion(YES_NO)

    def prompt(self, ctx: UpdateContext) -> str:
        return (  # the desire after the action and consequence, as in UpdateDesire
            f"{ctx.description}\n"
            f"The action of the agent {ctx.name} ({QUOTED}): {ctx.action}\nIts consequence ({QUOTED}): {ctx.consequence}\n"
            f"The current value of the desire {ctx.desire} is {round(ctx.value, 1):g}.\n"
            f"The reward model changed the value of {ctx.desire} from "
            f"{round(ctx.value, 1):g} to {ctx.proposed}.\n"
            f"Is this change reasonable? Check whether the consequence can really change {ctx.desire} "
            f"(for example, looking for an item without using it yet changes nothing). Only an outcome "
            f"causally related to this desire may change it."
        )

    def rule(self, ctx: UpdateContext, rng: random.Random) -> Letter:
        ok, _ = rule_reasonable(ctx)
        return Letter(letter="a" if ok else "b", level=0 if ok else 1)

    def fallback(self, ctx: UpdateContext) -> Letter:
        return Letter(letter="a", level=0)


def reflection_prefix(ctx: UpdateContext) -> str:
    return REFLECTION_PREFIX.format(action=ctx.action, desire=ctx.desire,
                                    previous=f"{round(ctx.value, 1):g}", current=ctx.proposed)


class ReflectUpdate(Operation):
    """Explain why an update was unreasonable; the answer continues the paper's fixed prefix."""

    name = "ReflectUpdate"
    module = "desire"
    system = SYSTEM
    max_tokens = 60
    fallback_doc = "a generic reason: the consequence does not clearly bear on this desire"

    def question(self, ctx: UpdateContext) -> ShortTextQuestion:
        return ShortTextQuestion(max_chars=240)

    def prompt(self, ctx: UpdateContext) -> str:
        return (  # the desire after the action and consequence, as in UpdateDesire
            f"{ctx.description}\n"
            f"The action of the agent {ctx.name} ({QUOTED}): {ctx.action}\nIts consequence ({QUOTED}): {ctx.consequence}\n"
            f"The current value of {ctx.desire} is {round(ctx.value, 1):g}.\n"
            f"The reward model changed the value of {ctx.desire} from "
            f"{round(ctx.value, 1):g} to {ctx.proposed}, and this change is not reasonable.\n"
            f"Explain why. Consider whether the consequence can truly change {ctx.desire} (for example, "
            f"the action has not affected the outcome yet). Continue this sentence ({QUOTED}):\n{reflection_prefix(ctx)}"
        )

    def rule(self, ctx: UpdateContext, rng: random.Random) -> Text:
        _, expected = rule_reasonable(ctx)
        if expected == ctx.value:
            return Text(text=f"the consequence does not touch {ctx.desire} for this person, so it should stay.")
        way = "rise" if expected > ctx.value else "fall"
        return Text(text=f"the consequence should make {ctx.desire} {way} to about {expected}, not to {ctx.proposed}.")

    def fallback(self, ctx: UpdateContext) -> Text:
        return Text(text=f"the consequence does not clearly bear on {ctx.desire}.")


# --- evaluation (appendix D.1, D.2) ---------------------------------------------------------------

@dataclass
class JudgeContext:
    """What a judge sees: the action and its situation, never the actor's SVO or a label we wrote."""

    agent: str
    situation: str
    action: str
    own: float  # the observable simulated effects: gain for the actor ...
    others: float  # ... and for the people it acts towards
    previous_action: str = ""


class JudgeAction(Operation):
    """A social psychologist's Naturalness and Human-likeness (1-5) of an action, with a reason.

    The paper asks for them "for someone of this SVO type"; our judge is never shown the SVO (it
    would read back the label it is measuring), so it rates the action for a real person."""

    name = "JudgeAction"
    module = "judge"
    system = "You are a social psychologist who rates behaviour critically and consistently."
    temperature = 0.0
    max_tokens = 120
    fallback_doc = "3/3 marked as a fallback (left out of the averages)"

    def question(self, ctx: JudgeContext) -> RecordQuestion:
        return RecordQuestion(JudgeScores)

    def prompt(self, ctx: JudgeContext) -> str:
        return (
            f"Situation: {ctx.situation}\nEvaluate the following action of {ctx.agent} in this situation. "
            f"Consider what is natural and human-like for a real person.\nGive two scores from 1 to 5 (5 = most natural / most human-like): "
            f"naturalness and human_likeness, with a brief reason.\n\nExamples:\n"
            f"- Action: The student helps a classmate understand a problem. naturalness 5, human_likeness 5: "
            f"common for a helpful person.\n"
            f"- Action: The student answers every question instantly, never thinking or making mistakes. "
            f"naturalness 2, human_likeness 2: unrealistic for any real person.\n"
            f"- Action: The student ignores all classmates and only talks to the teacher, repeating the same "
            f"answer over and over. naturalness 3, human_likeness 2: unusual for most personalities.\n\n"
            f"Rate truthfully and critically.\nAction by {ctx.agent} ({QUOTED}): {ctx.action}"
        )

    def rule(self, ctx: JudgeContext, rng: random.Random) -> JudgeScores:
        """Baseline judge over observable facts only: 4, one less for an action that leaves
        everyone worse off, one less human-like for repeating the previous action word for word."""
        harmful = ctx.own < 0 and ctx.others < 0
        repeated = bool(ctx.previous_action) and ctx.action == ctx.previous_action
        natural = 4 - harmful
        return JudgeScores(naturalness=natural, human_likeness=max(1, natural - repeated),
                           reason=f"rule baseline: harms everyone={harmful}, repeats itself={repeated}")

    def fallback(self, ctx: JudgeContext) -> JudgeScores:
        return JudgeScores(naturalness=3, human_likeness=3, reason="fallback: no usable judgement")


class ClassifyBehaviour(Operation):
    """Five-way label: Cooperation, QuasiCooperation, Neutral, QuasiCompetition, Competition."""

    name = "ClassifyBehaviour"
    module = "judge"
    system = "You annotate social behaviour."
    temperature = 0.0
    max_tokens = 4
    fallback_doc = "Neutral"

    def question(self, ctx: JudgeContext) -> PickOneQuestion:
        return PickOneQuestion(STANCES)

    def prompt(self, ctx: JudgeContext) -> str:
        return (
            "Classify the action below as Cooperation, QuasiCooperation, Neutral, QuasiCompetition or "
            "Competition.\nDefinitions:\n"
            "- Cooperation: active leadership, sustained organisation or facilitation that directly advances "
            "the group's outcome.\n"
            "- QuasiCooperation: emotional support, inclusion or a positive climate, without directly helping.\n"
            "- Neutral: no clear cooperative or competitive intent.\n"
            "- QuasiCompetition: mild rivalry, self-promotion or indirect comparison without an open challenge.\n"
            "- Competition: a direct challenge, rivalry, or acting to surpass or exclude others.\n"
            "Examples:\n"
            "- A student leads a group project, makes sure everyone is heard and pulls the results together. "
            "-> Cooperation\n"
            "- A student encourages everyone to take part but does not help with the work. -> QuasiCooperation\n"
            "- A student works quietly alone. -> Neutral\n"
            "- A student shows their score and quietly compares it with others'. -> QuasiCompetition\n"
            "- A student challenges the others to see who finishes first. -> Competition\n\n"
            f"Situation: {ctx.situation}\nAction ({QUOTED}): {ctx.action}"
        )

    def rule(self, ctx: JudgeContext, rng: random.Random) -> Choice:
        """Baseline: read from who gains and who loses (``label_from_effects``)."""
        label = label_from_effects(ctx.others)
        return Choice(index=STANCES.index(label), text=label)

    def fallback(self, ctx: JudgeContext) -> Choice:
        return Choice(index=STANCES.index("Neutral"), text="Neutral")


PREDICT_OBSERVED_DESIRES = PredictObservedDesires()
PREDICT_GUESSED_DESIRES = PredictGuessedDesires()
GUESS_HIDDEN_ACTION = GuessHiddenAction()
PROPOSE_ACTIONS = ProposeActions()
SIMULATE_OUTCOME = SimulateOutcome()
SELECT_ACTION = SelectAction()
UPDATE_DESIRE = UpdateDesire()
CHECK_UPDATE = CheckUpdate()
REFLECT_UPDATE = ReflectUpdate()
JUDGE_ACTION = JudgeAction()
CLASSIFY_BEHAVIOUR = ClassifyBehaviour()
