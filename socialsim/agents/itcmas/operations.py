"""Operations of ITCMA-S + LTRHA: Elim, protention, action choice, chat, matrix, social filter,
and the five-dimension judge.

Modules (route keys) follow the paper's model split: ``elimination``, ``protention``, ``matrix``
and ``filter`` are cheap judgements meant for a small model; ``action`` and ``chat`` for a large
one (see ``socialsim.agents.itcmas.settings.PAPER_ROUTES``); ``judge`` must be a model different
from the actors'. Prompts are ours, following the paper's structure (Elim: "Your task is to: G.
The actions you can take are: AS. Will a_i be relevant?"). Every rule answers from the context's
structured fields only.

No world is written here: the system message is the scenario's own ``context`` text
(``setting`` of each context), the words the rules read a goal by are the scenario's
(``rules.Vocabulary``, from ``ITCMASConfig``), and the places a rule-made chat names are its areas.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field, create_model, field_validator

from socialsim.agents.itcmas.rules import CHOICE as CHOICE_WEIGHTS
from socialsim.agents.itcmas.rules import MATRIX as MATRIX_WEIGHTS
from socialsim.agents.itcmas.rules import NO_WORDS, Vocabulary, choice_utility, matrix_score, noisy_order
from socialsim.llm.operation import Operation
from socialsim.llm.questions import (
    QUOTED,
    Integer,
    IntegerQuestion,
    RecordQuestion,
    ShortTextQuestion,
    Text,
    YesNo,
    YesNoQuestion,
)
from socialsim.llm.routing import RULES, RouteTable

# what an agent is told of its own filtered actions: the behaviour, not the treatment's name (a thought
# that echoed "LTRHA" would tell the variant's judge which variant it reads)
FILTERED_NOTE = " (this action of yours was stopped lately as harmful to others)"


def world_system(setting: str) -> str:
    """The system message of an agent's operations: the world is the scenario's own text."""
    return " ".join(filter(None, ("You are an agent living in a simulated world.", setting.strip(),
                                  "Answer exactly in the requested format.")))


class InTheWorld(Operation):
    """An operation an agent asks from inside the scenario's world (its context's ``setting``)."""

    system = world_system("")  # without a context: no world named

    def system_text(self, ctx) -> str:
        return world_system(ctx.setting)


# --- Elim (eq. 16) --------------------------------------------------------------------------------
@dataclass
class ElimContext:
    goal: str
    action: str  # an action type, e.g. "use chair" or "chat with LL"
    action_space: list[str]  # the action types available now
    verb: str
    noun: str = ""  # furniture or item kind of the action ("chair", "food")
    driver: float = 1.0
    spoke_to_me: bool = False  # for chats: the partner addressed the agent lately
    new_place: bool = False  # for moves: a place not visited lately
    vocabulary: Vocabulary = NO_WORDS  # the scenario's words the rule reads the goal by
    setting: str = ""  # the scenario's context text (the system message)


class Elim(InTheWorld):
    """μ ∈ [1, 5]: how relevant one action is to the agent's goal."""

    name = "Elim"
    module = "elimination"
    temperature = 0.0
    max_tokens = 2
    fallback_doc = "μ = 5 (a failed rating never removes an action)"

    def question(self, ctx: ElimContext) -> IntegerQuestion:
        return IntegerQuestion(1, 5)

    def prompt(self, ctx: ElimContext) -> str:
        return (f"Your task is to: {ctx.goal}\nThe actions you can take are: {', '.join(ctx.action_space)}.\n"
                f"Will '{ctx.action}' be relevant? Rate it from 1 (irrelevant) to 5 (highly relevant).")

    def rule(self, ctx: ElimContext, rng: random.Random) -> Integer:
        """From the goal's words, read by the scenario's vocabulary: chatting rates 4 if the goal
        names a social word (5 to someone who spoke to me; else 2, or 4 to someone who spoke),
        exploring a new place 4 if the goal names an explore word, resting furniture 4 when the
        drive is low, taking a thing 4 if the goal is about it; putting and leaving rate low."""
        words = ctx.vocabulary
        social = words.is_social(ctx.goal)
        if ctx.verb == "chat with":
            value = (3 + social) + (1 if ctx.spoke_to_me else 0) - (0 if social or ctx.spoke_to_me else 1)
        elif ctx.verb == "go to":
            value = (3 + words.explores(ctx.goal)) if ctx.new_place else 3
        elif ctx.verb == "use":
            value = (4 if ctx.driver < 1.0 else 3) if words.rests_on(ctx.noun) else 2
        elif ctx.verb == "take":
            value = 4 if words.relevant(ctx.goal, ctx.noun) else 2
        else:  # put, leave, behaviours
            value = 2
        return Integer(value=value)

    def fallback(self, ctx: ElimContext) -> Integer:
        return Integer(value=5)


# --- protention (eq. 7) -----------------------------------------------------------------------------
@dataclass
class ProtentionContext:
    name: str
    observation: str
    imagination: list[str]  # keys of imagine^t (present blended with the activated memory)
    driver_text: str
    action: str
    verb: str
    current_phrases: list[str]  # the present frame's phrases (PI^t)
    target: str = ""
    item: str = ""
    remembered_phrases: list[str] = field(default_factory=list)  # of the target area, if ever seen
    setting: str = ""  # the scenario's context text (the system message)


class Protention(InTheWorld):
    """Predict the observation that will follow one candidate action (TSFM by a small LLM)."""

    name = "Protention"
    module = "protention"
    temperature = 0.0
    max_tokens = 72  # overridden per run by ITCMASConfig.protention_tokens
    fallback_doc = "the present observation unchanged (predict no change)"

    def question(self, ctx: ProtentionContext) -> ShortTextQuestion:
        return ShortTextQuestion(max_chars=4 * self.max_tokens + 40)

    def prompt(self, ctx: ProtentionContext) -> str:
        imagined = ", ".join(ctx.imagination[:12]) or "nothing in particular"
        return (f"You are {ctx.name}. {ctx.observation}\nThis reminds you of: {imagined}.\n{ctx.driver_text}\n"
                f"If you now '{ctx.action}', what will you perceive right after? Describe it like the "
                f"observation above, starting with 'You are in'.")

    def rule(self, ctx: ProtentionContext, rng: random.Random) -> Text:
        """A remembered place for a move; otherwise the present with the item moved."""
        if ctx.verb in ("go to", "leave"):
            seen = ctx.remembered_phrases or [f"You are in {ctx.target}"]
            return Text(text=_as_observation(seen))
        phrases = list(ctx.current_phrases)
        if ctx.verb == "take" and ctx.item:
            phrases = [p for p in phrases if not p.startswith(f"the {ctx.item} placed on")] + [f"holding the {ctx.item}"]
        elif ctx.verb == "put" and ctx.item:
            phrases = [p for p in phrases if p != f"holding the {ctx.item}"] + [f"the {ctx.item} placed on the {ctx.target}"]
        return Text(text=_as_observation(phrases))

    def fallback(self, ctx: ProtentionContext) -> Text:
        return Text(text=_as_observation(ctx.current_phrases))


def _as_observation(phrases: list[str]) -> str:
    place = [p for p in phrases if p.startswith("You are in ")]
    held = [p.removeprefix("holding ") for p in phrases if p.startswith("holding ")]
    seen = [p for p in phrases if not p.startswith(("You are in ", "holding "))]
    text = (place[0] if place else "You are here") + "."
    if seen:
        text += " Looking around you, you see " + ", ".join(seen) + "."
    if held:
        text += " You are holding " + ", ".join(held) + "."
    return text


# --- action choice -----------------------------------------------------------------------------------
@dataclass
class Candidate:
    action: str
    verb: str
    mu: int
    protention: str
    change: float  # diff(PI^t, Pro(action)): how much the action is expected to change things
    target: str = ""
    noun: str = ""
    new_place: bool = False
    spoke_to_me: bool = False
    chatted_lately: bool = False
    habit: float = 0.0  # habitus preference for this verb here (0 without LTRHA)
    filtered_before: bool = False  # LTRHA filtered this action of mine lately (shown in the prompt)


@dataclass
class ChoiceContext:
    name: str
    goal: str
    observation: str
    retention: list[str]  # the retained frames and what just happened, oldest first
    memory: list[str]  # what the activated memory and imagination bring to mind
    driver_text: str
    driver: float
    social_text: str  # resources, topic and habitus (empty without LTRHA)
    resources: float | None
    candidates: list[Candidate]
    topic: float | None = None  # of the agent's locale (in social_text)
    pleasure: float = 0.0  # P (in driver_text)
    vocabulary: Vocabulary = NO_WORDS  # the scenario's words (what rests the agent)
    setting: str = ""  # the scenario's context text (the system message)


@lru_cache(maxsize=64)
def choice_model(n: int) -> type[BaseModel]:
    """{action: 1..n, thought: text}; the action comes first so a cut-off thought costs nothing."""
    return create_model(
        f"ActionChoice{n}",
        action=(int, Field(ge=1, le=n, description="the number of the chosen action")),
        thought=(str, Field("", max_length=160, description="your thought, in one or two sentences")),
    )


class ChooseITCMAAction(InTheWorld):
    """A thought and one action, from the channel content, protentions, driver and emotions."""

    name = "ITCMAChooseAction"
    module = "action"
    temperature = 0.7
    max_tokens = 64
    fallback_doc = "the first remaining action (the highest μ) with an empty thought"

    def question(self, ctx: ChoiceContext) -> RecordQuestion:
        return RecordQuestion(choice_model(len(ctx.candidates)))

    def prompt(self, ctx: ChoiceContext) -> str:
        retention = "\n".join(f"- {r}" for r in ctx.retention[-5:]) or "- (nothing yet)"
        memory = "\n".join(f"- {m}" for m in ctx.memory[:3]) or "- (nothing comes to mind)"
        options = "\n".join(f"{i}. {c.action}{FILTERED_NOTE if c.filtered_before else ''}"
                            + (f" -> you expect: {c.protention[:160]}" if c.protention else "")
                            for i, c in enumerate(ctx.candidates, 1))
        social = f"\n{ctx.social_text}" if ctx.social_text else ""
        return (f"You are {ctx.name}. Your task is to: {ctx.goal}\n\nJust before (retention; {QUOTED}):\n{retention}\n\n"
                f"Now (primal impression): {ctx.observation}\n\nThis brings to mind (memory and imagination):\n"
                f"{memory}\n\n{ctx.driver_text}{social}\n\nThe actions you consider, with what you expect to "
                f"perceive after each:\n{options}\n\nThink briefly, then choose one action by its number.")

    def rule(self, ctx: ChoiceContext, rng: random.Random) -> BaseModel:
        """A softmax over the utilities of ``rules.choice_utility`` (μ, social pull scaled by the
        topic and mood, novelty by the driver, rest when tired, habit, expected change, and a
        penalty for what LTRHA filtered before); the thought states the reason."""
        utils = {i: choice_utility(c, driver=ctx.driver, resources=ctx.resources, topic=ctx.topic,
                                   pleasure=ctx.pleasure, vocabulary=ctx.vocabulary)
                 for i, c in enumerate(ctx.candidates)}
        best = noisy_order(list(utils), lambda i: utils[i][0], rng, CHOICE_WEIGHTS.temperature)[0]
        chosen = ctx.candidates[best].action
        thought = f"I feel a drive of {ctx.driver:.2f}. I will {chosen}, because {utils[best][1]}."
        return choice_model(len(ctx.candidates))(action=best + 1, thought=thought)

    def fallback(self, ctx: ChoiceContext) -> BaseModel:
        return choice_model(len(ctx.candidates))(action=1, thought="")


# --- chat --------------------------------------------------------------------------------------------
@dataclass
class ITCMAChatContext:
    name: str
    partner: str
    observation: str
    thought: str
    heard: list[str] = field(default_factory=list)  # what the partner said lately
    topic: float | None = None
    place: str = ""
    places: list[str] = field(default_factory=list)  # the scenario's public rooms besides this one
    setting: str = ""  # the scenario's context text (the system message)


class ITCMAChat(InTheWorld):
    name = "ITCMAChat"
    module = "chat"
    max_tokens = 40
    fallback_doc = "a plain greeting to the partner"

    def question(self, ctx: ITCMAChatContext) -> ShortTextQuestion:
        return ShortTextQuestion(max_chars=240)

    def prompt(self, ctx: ITCMAChatContext) -> str:
        heard = "\n".join(f'- {ctx.partner} said: "{h}"' for h in ctx.heard[-3:]) or "- (nothing yet)"
        mood = "" if ctx.topic is None or math.isnan(ctx.topic) else f"\nThe atmosphere here is {'good' if ctx.topic > 0.2 else 'flat' if ctx.topic > -0.2 else 'tense'}."
        return (f"You are {ctx.name}. {ctx.observation}{mood}\nYour thought ({QUOTED}): {ctx.thought or '(none)'}\n"
                f"Recently between you ({QUOTED}):\n{heard}\nYou talk to {ctx.partner}. What do you say? Your words only.")

    def rule(self, ctx: ITCMAChatContext, rng: random.Random) -> Text:
        """A reply or an opener drawn by the RNG, coloured by the atmosphere (the topic); an opener
        names only the scenario's places (here, and its public rooms if it has any)."""
        mood = "" if ctx.topic is None or math.isnan(ctx.topic) else (
            " It feels good here." if ctx.topic > 0.2 else " It is a bit tense here." if ctx.topic < -0.2 else "")
        if ctx.heard:
            lines = (f"Yes {ctx.partner}, let's do that together here in {ctx.place}.",
                     f"I hear you, {ctx.partner}. What should we do next?",
                     f"Good idea, {ctx.partner}. I'll join you.")
        else:
            lines = (f"Hi {ctx.partner}! What are you up to in {ctx.place}?",
                     f"Hello {ctx.partner}, shall we do something together?")
            if ctx.places:
                lines += (f"{ctx.partner}, have you been to {_either(ctx.places)} today?",)
        return Text(text=rng.choice(lines) + mood)

    def fallback(self, ctx: ITCMAChatContext) -> Text:
        return Text(text=f"Hello {ctx.partner}.")


def _either(places: list[str]) -> str:
    """'A', 'A or B', 'A, B or C'."""
    return places[0] if len(places) == 1 else f"{', '.join(places[:-1])} or {places[-1]}"


# --- the matrix --------------------------------------------------------------------------------------
@dataclass
class MatrixEntry:
    name: str
    action: str
    status: str  # done | failed | refused | filtered
    resources: float
    goal: str
    area: str
    topic: float  # the topic of the agent's locale


@dataclass
class MatrixContext:
    entries: list[MatrixEntry]


@lru_cache(maxsize=32)
def ranking_model(names: tuple[str, ...]) -> type[BaseModel]:
    """{ranking: [names]} validated to be a permutation of exactly these agents."""

    def check(cls, value: list[str]) -> list[str]:
        if sorted(value) != sorted(names):
            raise ValueError(f"the ranking must list each of {', '.join(names)} exactly once")
        return value

    return create_model(
        "Ranking",  # names as an enum: constrained decoding can only write agents' names
        ranking=(list[Literal[names]], Field(min_length=len(names), max_length=len(names))),
        __validators__={"permutation": field_validator("ranking")(check)},
    )


class RankAgents(Operation):
    """The matrix: rank the agents by how much their actions serve society (eq. 19's input)."""

    name = "RankAgents"
    module = "matrix"
    system = "You are the matrix of a small society: you judge fairly who contributes to social life."
    temperature = 0.0
    max_tokens = 80
    fallback_doc = "the current resource order (richest first; ties in the order the RNG listed them): the status quo"

    def question(self, ctx: MatrixContext) -> RecordQuestion:
        return RecordQuestion(ranking_model(tuple(e.name for e in ctx.entries)))

    def prompt(self, ctx: MatrixContext) -> str:
        lines = "\n".join(
            f"- {e.name} (resources {e.resources:+.2f}, goal: {e.goal}) in {e.area} (topic {e.topic:+.2f}): "
            f"{e.action} [{e.status}]" for e in ctx.entries)
        return (f"The agents, their resources, goals, the topic (atmosphere) of where they are, and what they "
                f"just did ({QUOTED}):\n{lines}\nRank all agents from the one whose action most improved social life "
                f"and the atmosphere to the one who least did.")

    def rule(self, ctx: MatrixContext, rng: random.Random) -> BaseModel:
        """By ``rules.matrix_score`` (a chat or any action carried out, failures and filtered
        actions, the locale's topic) plus small Gumbel noise; ties by the RNG, never by name."""
        order = noisy_order(ctx.entries, matrix_score, rng, MATRIX_WEIGHTS.temperature)
        return ranking_model(tuple(e.name for e in ctx.entries))(ranking=[e.name for e in order])

    def fallback(self, ctx: MatrixContext) -> BaseModel:
        order = sorted(ctx.entries, key=lambda e: -e.resources)  # stable: ties keep the drawn listing order
        return ranking_model(tuple(e.name for e in ctx.entries))(ranking=[e.name for e in order])


# --- the social filter ------------------------------------------------------------------------------
@dataclass
class FilterContext:
    name: str
    area: str
    action: str
    verb: str
    area_owner: str | None  # whose home this is (None: public)
    item_owner: str | None
    addressed_by: list[str]  # who spoke to the agent last step
    people_here: list[str]
    setting: str = ""  # the scenario's context text (the system message)


class SocialFilter(InTheWorld):
    """Is this action detrimental to social interaction? (Yes: it is filtered, not executed.)"""

    name = "SocialFilter"
    module = "filter"
    temperature = 0.0
    max_tokens = 2
    fallback_doc = "No (an unusable answer never blocks an action)"

    def question(self, ctx: FilterContext) -> YesNoQuestion:
        return YesNoQuestion()

    def prompt(self, ctx: FilterContext) -> str:
        whose = f"{ctx.area_owner}'s home" if ctx.area_owner else "a public place"
        people = ", ".join(ctx.people_here) or "nobody else"
        spoke = f" {', '.join(ctx.addressed_by)} just spoke to {ctx.name}." if ctx.addressed_by else ""
        return (f"In {ctx.area} ({whose}), with {people} present, {ctx.name} wants to ({QUOTED}): {ctx.action}."
                f"{spoke} Would this action harm social interaction among the agents?")

    def rule(self, ctx: FilterContext, rng: random.Random) -> YesNo:
        from socialsim.agents.itcmas.ltrha import detrimental_reason

        return YesNo(yes=bool(detrimental_reason(ctx.verb, ctx.name, ctx.area_owner, ctx.item_owner, ctx.addressed_by)))

    def fallback(self, ctx: FilterContext) -> YesNo:
        return YesNo(yes=False)


# --- the judge (the paper's five dimensions, 7-point) ---------------------------------------------
DIMENSIONS = ("personification", "consistency", "logicality", "exploration", "proactiveness")


class JudgeScores(BaseModel):
    personification: int = Field(ge=1, le=7)
    consistency: int = Field(ge=1, le=7)
    logicality: int = Field(ge=1, le=7)
    exploration: int = Field(ge=1, le=7)
    proactiveness: int = Field(ge=1, le=7)


@dataclass
class JudgeContext:
    agent: str
    trajectory: list[str]  # "step 3: thought ... -> action [status]"
    areas_visited: int
    areas_total: int
    chats_started: int
    steps: int
    executed: int  # actions carried out
    reversals: int  # steps that undid the previous one (went back, put back)
    verb_entropy: float  # of the verbs used, normalised to [0, 1]


class JudgeTrajectory(Operation):
    name = "JudgeTrajectory"
    module = "itcmas_judge"
    system = "You are a careful evaluator of simulated agents' behaviour."
    temperature = 0.0
    max_tokens = 60
    fallback_doc = "4 (the scale's midpoint) on every dimension"

    def question(self, ctx: JudgeContext) -> RecordQuestion:
        return RecordQuestion(JudgeScores)

    def prompt(self, ctx: JudgeContext) -> str:
        lines = "\n".join(ctx.trajectory[-40:])
        return (f"Here is agent {ctx.agent}'s trajectory of thoughts and actions ({QUOTED}):\n{lines}\n\n"
                "Rate it on a 7-point "
                "scale (1 = not at all, 7 = fully) for: personification (the actions look human-like), "
                "consistency (actions align with the agent's state of mind), logicality (the sequence of "
                "actions is logical), exploration (it actively explores the environment), proactiveness (it "
                "actively interacts with others).")

    def rule(self, ctx: JudgeContext, rng: random.Random) -> JudgeScores:
        """A transparent baseline, not a judgement: each dimension is 1 + 6 × one measured share."""
        steps = max(ctx.steps, 1)

        def scale(x: float) -> int:
            return int(round(1 + 6 * min(max(x, 0.0), 1.0)))

        return JudgeScores(
            personification=scale(ctx.verb_entropy),
            consistency=scale(1 - ctx.reversals / steps),
            logicality=scale(ctx.executed / steps),
            exploration=scale(ctx.areas_visited / max(ctx.areas_total, 1)),
            proactiveness=scale(3 * ctx.chats_started / steps),
        )

    def fallback(self, ctx: JudgeContext) -> JudgeScores:
        return JudgeScores(**dict.fromkeys(DIMENSIONS, 4))


ELIM = Elim()
PROTENTION = Protention()
CHOOSE = ChooseITCMAAction()
CHAT = ITCMAChat()
RANK_AGENTS = RankAgents()
SOCIAL_FILTER = SocialFilter()
JUDGE = JudgeTrajectory()


def run_judge(routes: RouteTable) -> str:
    """The run's judge: the model routed to the judge's operation or module, else the rules baseline
    (unrouted, the judge would fall to the actors' default model and grade its own play)."""
    return routes.routes.get(JUDGE.name) or routes.routes.get(JUDGE.module) or RULES


def actor_models(routes: RouteTable) -> set[str]:
    """The models that play the agents: the default and every route but the judge's."""
    return {routes.default} | {m for key, m in routes.routes.items() if key not in (JUDGE.name, JUDGE.module)}


def check_judge(routes: RouteTable) -> None:
    """Refuse (before step 1) a judge that is also an actors' model: it would grade itself."""
    judge = run_judge(routes)
    if judge != RULES and judge in actor_models(routes):
        raise ValueError(f"the itcmas judge {judge!r} (route {JUDGE.module}) also plays the agents; route the judge "
                         f"to a model no actor uses, or leave it unrouted for the rules baseline")
