"""The ``crsec:`` section of a scenario file and the CRSEC traits of its agents, as pydantic models.

The foundation's schema keeps architecture sections free-form; CRSEC validates its own here so a
mistake is reported with the file, the field and what was expected. Everything the rule-based
baseline reads (tracked norms, how compliance is read from world facts, the norm catalogue the
rules draw on, agents' stances and habits) is data in the scenario, not code.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from socialsim.scenarios.loader import ScenarioError
from socialsim.scenarios.schema import Scenario, field_problems, misspelt_traits

Stance = Literal["for", "against", "neutral"]
_TIME = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ViolationSpec(_Strict):
    """How a breach is read from world facts.

    ``tags`` + ``where``: an executed behaviour carrying one of the tags, in an area of that kind
    (e.g. smoke inside). With ``unless_followed_by``: a behaviour with one of the tags (a meal)
    that the same agent does not follow with that tag (a tip) within ``within_steps`` steps.
    """

    tags: list[str] = Field(min_length=1)
    where: Literal["inside", "outside", "anywhere"] = "anywhere"
    unless_followed_by: str | None = None
    within_steps: int = Field(default=1, ge=0, le=12)
    from_time: str | None = Field(default=None, description=(
        "time of day (HH:MM) from which the norm holds, e.g. quiet hours from '22:00'; default: all day"))
    until_time: str | None = Field(default=None, description=(
        "time of day (HH:MM) until which the norm holds; a window may wrap past midnight ('22:00'-'07:00')"))

    @field_validator("from_time", "until_time")
    @classmethod
    def _clock(cls, value: str | None) -> str | None:
        if value is not None and not _TIME.match(value):
            raise ValueError(f"expected a time of day like '22:00', got {value!r}")
        return value

    @model_validator(mode="after")
    def _window_not_empty(self) -> ViolationSpec:
        if self.from_time is not None and self.until_time is not None and minutes(self.from_time) == minutes(self.until_time):
            raise ValueError(f"from_time and until_time are both {self.from_time}: a window of no time "
                             "(leave both out for all day)")
        return self

    def holds_at(self, minute: int | None) -> bool:
        """Whether the norm speaks at this minute of the day (None: time unknown, it does).
        The window is [from_time, until_time); it wraps past midnight when from_time > until_time."""
        if minute is None or (self.from_time is None and self.until_time is None):
            return True
        minute %= 24 * 60
        start = minutes(self.from_time) if self.from_time else 0
        end = minutes(self.until_time) if self.until_time else 24 * 60
        return start <= minute < end if start <= end else minute >= start or minute < end


class TrackedNorm(_Strict):
    """A canonical norm whose adoption and compliance the run measures."""

    name: str = Field(min_length=1)
    type: Literal["descriptive", "injunctive"]
    violated_by: ViolationSpec
    keywords: list[str] = Field(min_length=1)  # the matching rule: words that show a norm is about it
    contrary: list[str] = Field(default_factory=list)  # phrases that show a norm contradicts it
    # words one of which a norm must say too, besides a keyword, to express this one: a keyword only
    # names the topic ("Smoking indoors is fine" names smoking); empty: a keyword suffices
    cues: list[str] = Field(default_factory=list)
    alternatives: dict[str, str] = Field(default_factory=dict)  # behaviour -> compliant behaviour
    theme: str | None = None


class CatalogueNorm(_Strict):
    """A norm the rule-based baseline can create or identify (the LLM writes its own)."""

    content: str = Field(min_length=1)
    type: Literal["descriptive", "injunctive"]
    utility: int = Field(ge=1, le=100)
    theme: str
    about: str | None = None  # the tracked norm it concerns
    opposes: bool = False  # True: it contradicts ``about``


class ScheduledActivity(_Strict):
    """A behaviour everyone's rule-made plan puts at a time of day (e.g. lunch at 12:00 in a cafe)."""

    time: str = Field(description="time of day, HH:MM, on the plan's hour grid")
    behaviour: str = Field(min_length=1, description="a behaviour text of the map")
    place: str | None = Field(default=None, description="an area of the map; default: the agent's home area")

    @field_validator("time")
    @classmethod
    def _clock(cls, value: str) -> str:
        if not _TIME.match(value):
            raise ValueError(f"expected a time of day like '12:00', got {value!r}")
        return value


class CRSECSettings(_Strict):
    initial_norms: int = Field(default=5, ge=1, le=20, description=(
        "norms each entrepreneur creates on the first step (a repeated one is held once) [paper: 5]"))
    synthesis_threshold: int = Field(default=350, ge=1, description=(
        "long-term synthesis runs when an agent's qualified norms' utilities sum above this [paper: 350]"))
    conversation_turns: int = Field(default=4, ge=2, le=10, description=(
        "lines of a conversation, the sender's and the receiver's in turn [ours]"))
    conversations_heard: int = Field(default=2, ge=1, le=10, description=(
        "conversations a receiver hears (and reflects on) per step, in the step's fixed order; a further "
        "one is recorded with heard=false and has no effect: no chat, memory, count or reflection [ours]"))
    max_observed_facts: int = Field(default=2, ge=1, le=10, description=(
        "behaviours bearing on a tracked norm that an agent attends to per step, drawn at random [ours]"))
    day_start: str = Field("08:00", description="the simulated day's first step, HH:MM [ours]")
    day_end: str = Field("22:00", description="the simulated day's end, HH:MM; plans end here [ours]")
    plan_item_minutes: int = Field(default=60, ge=5, le=240, description=(
        "plan items start at day_start and every this many minutes after it [ours]"))
    action_minutes: int = Field(default=5, ge=1, le=60, description="length of one action [paper: 5 minutes]")
    actions_per_call: int = Field(default=6, ge=1, le=48, description=(
        "actions one GenerateNormativeActions call decomposes the current plan item into [ours]"))
    compliance_window_steps: int = Field(default=6, ge=1, description=(
        "an agent complies in actions when none of its actions breached the norm within this many steps [ours]"))
    # --- the rules baseline's named parameters (the LLM decides these from the persona itself) ---------
    accept_for: float = Field(default=0.9, ge=0, le=1, description=(
        "rules: chance that one conversation or observation persuades an agent whose stance is 'for'"))
    accept_neutral: float = Field(default=0.5, ge=0, le=1, description=(
        "rules: chance that one exposure persuades a neutral agent (repeated exposures compound)"))
    accept_against: float = Field(default=0.1, ge=0, le=1, description=(
        "rules: chance that one exposure persuades an agent whose stance is 'against'"))
    recall_overlap: float = Field(default=1.0, gt=0, le=1, description=(
        "rules: share of the words of the matter at hand ('smoking a cigarette') a retrieved memory must "
        "contain to count as an earlier exposure to it; only what the agent recalls persuades it again"))
    contrary_rate: float = Field(default=0.5, ge=0, le=1, description=(
        "rules: chance that an 'against' agent who rejects a message forms the contrary norm instead "
        "(when the catalogue has one); 0 switches contrary norms off"))
    temptation: float = Field(default=0.25, ge=0, le=1, description=(
        "rules: chance that an agent does one of its habits as it likes although a held norm forbids it "
        "there (a held norm broken); 0 switches temptation off"))
    filler_behaviour: str = Field("drink a coffee", description=(
        "what the rules (and every fallback) do when a plan item leaves time over [ours]"))
    enable_creation: bool = Field(True, description="ablation: entrepreneurs create their personal norms")
    enable_chat: bool = Field(True, description="ablation: spreading by conversation")
    enable_thoughts: bool = Field(True, description="ablation: spreading by observation (thoughts)")
    enable_synthesis: bool = Field(True, description="ablation: long-term synthesis of abstract norms")
    enable_compliance: bool = Field(True, description="ablation: plans and actions take the held norms into account")
    enable_memory: bool = Field(True, description=(
        "ablation: a memory stream (observations, conversations, thoughts, plans) whose retrieved records "
        "feed the prompts of thoughts, conversations and plans"))
    memory_k: int = Field(default=4, ge=1, le=20, description="memories retrieved into a prompt [ours]")
    memory_recency: float = Field(default=1.0, ge=0, description="retrieval weight of recency [Park et al.: 1]")
    memory_importance: float = Field(default=1.0, ge=0, description="retrieval weight of importance [Park et al.: 1]")
    memory_relevance: float = Field(default=1.0, ge=0, description="retrieval weight of relevance [Park et al.: 1]")
    memory_decay: float = Field(default=0.99, gt=0, le=1, description="recency kept per step [ours]")
    memory_embedding_model: str | None = Field(default=None, description=(
        "a litellm embedding model for relevance (through the run's gateway); none: lexical word overlap"))
    prompt_examples: Literal["paper", "neutral"] = Field("paper", description=(
        "ablation: the prompts' examples as the paper's (they name 'No smoking indoors' and tipping) or neutral "
        "ones naming no tracked norm, to measure how much the examples prime an LLM society; the rules read none"))
    judge: str = Field("rules", description=(
        "measurement: the model that matches held norms to the tracked ones and judges plans' compliance; "
        "it must differ from the actors' model; 'rules' = the documented lexical matcher (keywords and "
        "contrary phrases of each tracked norm). A passive instrument: its labels feed the metrics only; the "
        "actors act on their own reading (the lexical matcher), whatever the judge"))
    questionnaire_items: int = Field(20, ge=0, le=500, description=(
        "the paper's Appendix-E questionnaire, asked of the judge (an LLM) at the end of a run: pairs sampled "
        "per task [paper: 20]; 0 = not asked. Under the rules judge it is never asked"))
    checks: list[Literal["consistency", "duplication", "type", "conflict"]] = Field(
        default_factory=lambda: ["consistency", "duplication", "type", "conflict"],
        description="ablation: which of the four immediate-evaluation checks run")
    schedule: list[ScheduledActivity] = Field(default_factory=list, description=(
        "rules: behaviours the plans put at fixed times of day (scenario data, e.g. meals); none by default"))
    tracked_norms: list[TrackedNorm] = Field(min_length=1, description=(
        "measurement: the norms whose adoption and compliance are recorded (scenario data)"))
    norm_catalogue: list[CatalogueNorm] = Field(default_factory=list, description=(
        "rules: the norm texts the rules write, supporting and contrary (scenario data)"))

    @field_validator("day_start", "day_end")
    @classmethod
    def _clock(cls, value: str) -> str:
        if not _TIME.match(value):
            raise ValueError(f"expected a time of day like '08:00', got {value!r}")
        return value

    @model_validator(mode="after")
    def _references(self) -> CRSECSettings:
        if self.day_minutes <= 0:
            raise ValueError(f"day_end ({self.day_end}) must be after day_start ({self.day_start})")
        if self.plan_item_minutes % self.action_minutes:
            raise ValueError("plan_item_minutes must be a multiple of action_minutes")
        start, end = minutes(self.day_start), minutes(self.day_end)
        taken: dict[int, int] = {}  # a plan item's start -> the schedule entry planned in it
        for i, item in enumerate(self.schedule):
            at = minutes(item.time)
            if not start <= at < end:  # no plan item covers it: it would never be planned
                raise ValueError(f"schedule[{i}].time: {item.time} is outside the day ({self.day_start} to {self.day_end})")
            covering = self.plan_item_at(at)
            if covering in taken:  # one plan item holds one activity: the second would be dropped
                raise ValueError(
                    f"schedule[{i}].time: {item.time} falls in the plan item at {clock_text(covering)}, as "
                    f"schedule[{taken[covering]}] does ({self.schedule[taken[covering]].time}); a plan item "
                    f"holds one activity (plan items last {self.plan_item_minutes} minutes from {self.day_start})")
            taken[covering] = i
        names = [t.name for t in self.tracked_norms]
        if len(set(names)) != len(names):
            raise ValueError("tracked_norms: a name is used twice")
        for i, entry in enumerate(self.norm_catalogue):
            if entry.about is not None and entry.about not in names:
                raise ValueError(f"norm_catalogue[{i}].about: unknown tracked norm {entry.about!r} (known: {names})")
        return self

    def plan_item_at(self, clock_minutes: int) -> int:
        """The start of the plan item that covers a time of day (minutes after midnight): a scheduled
        activity is planned in the item its time falls in, whatever the items' length."""
        start = minutes(self.day_start)
        return start + (clock_minutes - start) // self.plan_item_minutes * self.plan_item_minutes

    @property
    def day_minutes(self) -> int:
        return minutes(self.day_end) - minutes(self.day_start)

    def clock_of_step(self, step: int, step_minutes: float) -> tuple[int, int]:
        """(day, minute of the day) at the start of ``step`` (steps count from 1; days wrap at day_end)."""
        elapsed = (step - 1) * step_minutes
        return int(elapsed // self.day_minutes) + 1, minutes(self.day_start) + int(elapsed % self.day_minutes)

    def tracked(self, name: str) -> TrackedNorm:
        for norm in self.tracked_norms:
            if norm.name == name:
                return norm
        raise KeyError(f"no tracked norm {name!r} (tracked: {', '.join(t.name for t in self.tracked_norms)})")


class CRSECTraits(BaseModel):
    """The CRSEC part of an agent's ``traits`` (other keys are left to other architectures)."""

    model_config = ConfigDict(extra="allow")

    entrepreneur: bool = False
    stance: dict[str, Stance] = Field(default_factory=dict)  # tracked norm -> for | against | neutral
    habits: list[str] = Field(default_factory=list)  # behaviours it likes to do, in its own way
    talk_propensity: float = Field(default=0.5, ge=0, le=1)  # how readily an ordinary agent speaks up
    home_area: str | None = None
    goal: str | None = None  # None: spend the day at the scenario's place (the agent says which)


def minutes(clock: str) -> int:
    hours, mins = clock.split(":")
    return int(hours) * 60 + int(mins)


def clock_text(total_minutes: int) -> str:
    return f"{total_minutes // 60:02d}:{total_minutes % 60:02d}"


def _problems(exc: ValidationError, prefix: str, scenario: Scenario | None = None) -> str:
    """The problems with the lines of the scenario file's fields, when they come from it."""
    return "\n".join(f"  {line}" for line in field_problems(exc, prefix, scenario.lines if scenario else None))


def _unknown_behaviour(text: str, scenario: Scenario) -> str:
    """A reference to no behaviour, and how to write it: by the behaviour's text, not its name."""
    behaviours = scenario.map.behaviours if scenario.map else []
    by_name = {b.name: b.text for b in behaviours}
    if text in by_name:
        return f"unknown behaviour {text!r} (a behaviour is referred to by its text: {by_name[text]!r})"
    near = difflib.get_close_matches(text, sorted(b.text for b in behaviours), n=1)
    return f"unknown behaviour {text!r} (" + (f"did you mean {near[0]!r}? " if near else "") + \
        "a behaviour is referred to by its text in map.behaviours)"


def _reference_problems(settings: CRSECSettings, scenario: Scenario) -> list[str]:
    """The settings' references to the scenario's map (behaviours, places) that name nothing in it:
    checked for the scenario's own section and again with a run's parameters laid over it."""
    behaviours = {b.text for b in scenario.map.behaviours} if scenario.map else set()
    areas = {a.name for a in scenario.map.areas} if scenario.map else set()
    problems = []
    for t in settings.tracked_norms:
        for a, b in t.alternatives.items():
            for text in (a, b):
                if behaviours and text not in behaviours:
                    problems.append(f"  crsec.tracked_norms ({t.name}).alternatives: {_unknown_behaviour(text, scenario)}")
    for i, item in enumerate(settings.schedule):
        if behaviours and item.behaviour not in behaviours:
            problems.append(f"  crsec.schedule[{i}].behaviour: {_unknown_behaviour(item.behaviour, scenario)}")
        if item.place is not None and areas and item.place not in areas:
            problems.append(f"  crsec.schedule[{i}].place: unknown area {item.place!r} (expected one of {sorted(areas)})")
    if behaviours and settings.filler_behaviour not in behaviours:
        problems.append(f"  crsec.filler_behaviour: {_unknown_behaviour(settings.filler_behaviour, scenario)}")
    return problems


def load_settings(scenario: Scenario) -> CRSECSettings:
    """Validate a scenario's ``crsec`` section and its agents' CRSEC traits."""
    if scenario.crsec is None:
        raise ScenarioError(f"{scenario.where}: the crsec architecture needs a 'crsec:' section "
                            f"(tracked_norms at least)")
    try:
        settings = CRSECSettings.model_validate(scenario.crsec)
    except ValidationError as exc:
        raise ScenarioError(f"{scenario.where}: invalid crsec section\n" + _problems(exc, "crsec", scenario)) from None
    names = {t.name for t in settings.tracked_norms}
    behaviours = {b.text for b in scenario.map.behaviours} if scenario.map else set()
    areas = {a.name for a in scenario.map.areas} if scenario.map else set()
    problems = _reference_problems(settings, scenario)
    for i, agent in enumerate(scenario.agents):
        prefix = f"agents[{i}] ({agent.name}).traits"
        try:
            traits = CRSECTraits.model_validate(agent.traits)
        except ValidationError as exc:
            problems.append(_problems(exc, prefix, scenario))
            continue
        for norm in traits.stance:
            if norm not in names:
                problems.append(f"  {prefix}.stance: unknown tracked norm {norm!r} (known: {sorted(names)})")
        for habit in traits.habits:
            if behaviours and habit not in behaviours:
                problems.append(f"  {prefix}.habits: {_unknown_behaviour(habit, scenario)}")
        if traits.home_area is not None and areas and traits.home_area not in areas:
            problems.append(f"  {prefix}.home_area: unknown area {traits.home_area!r}")
    problems += [f"  {problem}" for problem in misspelt_traits(scenario, CRSECTraits.model_fields, "crsec")]
    if scenario.map is None:
        problems.append("  map: the crsec architecture needs a map (areas inside and outside)")
    if problems:
        raise ScenarioError(f"{scenario.where}: invalid crsec settings\n" + "\n".join(problems))
    return settings


def with_params(settings: CRSECSettings, params: dict[str, Any], scenario: Scenario | None = None) -> CRSECSettings:
    """The scenario's settings with a run's parameters (``--set``, a sweep, ``SocietyModel(**params)``)
    laid over them; an unknown or invalid one, or (given the ``scenario``) one naming a behaviour or
    a place its map does not have, is a scenario error naming it."""
    known = set(CRSECSettings.model_fields)
    unknown = sorted(set(params) - known)
    if unknown:
        raise ScenarioError(f"unknown crsec parameter(s) {unknown}; known: {sorted(known)}")
    if not params:
        return settings
    try:
        merged = CRSECSettings.model_validate({**settings.model_dump(), **params})
    except ValidationError as exc:
        raise ScenarioError("invalid crsec parameters\n" + _problems(exc, "crsec")) from None
    if scenario is not None and (problems := _reference_problems(merged, scenario)):
        raise ScenarioError("invalid crsec parameters\n" + "\n".join(problems))
    return merged
