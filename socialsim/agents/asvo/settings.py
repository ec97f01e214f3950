"""ASVO's settings: the architecture parameters (sweepable model keyword arguments), the
scenario's ``asvo:`` section, the ``paper`` preset, and the assignment of SVO types to agents.

Why a module of its own: these are the knobs a researcher turns (ablation, SVO mix, decay,
number of candidates, judges), validated once with clear messages, apart from the agent's
behaviour.
"""

from __future__ import annotations

import logging
import random
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from socialsim.agents.asvo.svo import SVO_TYPES
from socialsim.agents.desires import DEGREE_STEP, DESIRES
from socialsim.scenarios.schema import field_problems, misspelt_traits

log = logging.getLogger("socialsim")

# Table 1 of the ASVO appendix, as architecture parameters (steps is the run length).
PAPER_PRESET: dict[str, Any] = {
    "steps": 6,
    "step_minutes": 20,
    "desire_pool": 8,
    "decay_per_hour": 1.0,  # linear decay, applied each step, scaled by the step length [ours: rate]
    "satisfaction_floor": 0.0,
    "satisfaction_cap": 8.0,
    "memory_steps": 5,
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ASVOSettings(_Strict):
    """Architecture parameters: ``SocietyModel(..., arch="asvo", use_svo=False, n_candidates=3)``."""

    use_svo: bool = Field(True, description=(
        "ablation: False is the paper's 'w/o ASVO' arm (no SVO text, no SVO instructions)"))
    svo_assignment: Literal["scenario", "cycle", "mix", "explicit"] = Field("scenario", description=(
        "how agents get their SVO: the scenario's, cycling through the four types, drawn from svo_mix, "
        "or svo_agents"))
    svo_mix: dict[str, float] | None = Field(None, description=(
        "weights of the SVO types for svo_assignment=mix, e.g. {altruistic: 0.5, competitive: 0.5}"))
    svo_agents: dict[str, str] | None = Field(None, description=(
        "each agent's SVO for svo_assignment=explicit, e.g. {Alice: competitive}"))
    desire_pool: int = Field(default=8, ge=1, le=len(DESIRES), description=(
        "how many of the pool's desires an agent has (the first N) [paper: 8]"))
    n_candidates: int = Field(default=3, ge=1, le=8, description=(
        "candidate actions proposed, and their outcomes imagined, per step [ours]"))
    max_retries: int = Field(default=1, ge=0, le=5, description=(
        "R: retries of a desire update found unreasonable, each after a reflection [ours]"))
    memory_steps: int = Field(default=5, ge=0, description=(
        "steps of own actions and outcomes kept in the prompts' memory; 0: memory off, the prompts show "
        "none (the rules engine reads no memory) [paper: 5]"))
    decay_per_hour: float = Field(default=1.0, ge=0, description=(
        "satisfaction lost per simulated hour, scaled by the step's length [paper: linear decay; rate ours]"))
    step_minutes: float | None = Field(default=None, gt=0, description=(
        "simulated minutes per step; none: the scenario's [paper: 20]"))
    satisfaction_floor: float = Field(0.0, description="lowest satisfaction decay reaches [paper: 0.0]")
    satisfaction_cap: float = Field(8.0, description="highest satisfaction a desire keeps [paper: 8.0]")
    dynamic_expected: bool = Field(False, description=(
        "the paper's optional update of each desire's expected value, 10% toward the value a step [rate ours]"))
    tom_scope: Literal["all", "observed", "none"] = Field("all", description=(
        "whose desires an agent estimates (theory of mind): everyone's, those it observes, nobody's"))
    evaluate: bool = Field(True, description="measurement: judge and classify every action during the run")
    judges: list[str] = Field(default_factory=lambda: ["rules"], description=(
        "measurement: the judge models that label actions; 'rules' = the baseline, labels from simulated effects"))
    reflection_examples: int = Field(default=5, ge=0, description=(
        "earlier unreasonable updates shown as examples in an update prompt [ours]"))
    embedding_model: str | None = Field(None, description=(
        "measurement: a litellm embedding model for separability; none: the offline character n-gram embedding"))
    # mechanism switches (each has a test showing a recorded observable changes when it is off)
    simulate_outcomes: bool = Field(default=True, description="imagine each candidate's outcome before "
                                    "choosing; off: no simulation, the choice among candidates is random")
    update_desires: bool = Field(default=True, description="update desires from the step's consequence; "
                                 "off: desires change only by decay")
    check_updates: bool = Field(default=True, description="check every desire update for reasonableness; "
                                "off: every proposed update is kept")
    reflection: bool = Field(default=True, description="reflect on an unreasonable update and retry (at most "
                             "max_retries); off: an unreasonable update is dropped at once")
    update_noise: float = Field(default=0.1, ge=0, le=1, description="rules engine only: chance a rule "
                                "desire update is careless (3+ levels off), so check and reflection are exercised")

    @field_validator("svo_mix")
    @classmethod
    def _mix(cls, v):
        if v is not None:
            for k, w in v.items():
                if k not in SVO_TYPES:
                    raise ValueError(f"unknown SVO type {k!r} (types: {', '.join(SVO_TYPES)})")
                if w < 0:
                    raise ValueError(f"weight of {k} is negative")
            if sum(v.values()) <= 0:
                raise ValueError("the mix needs a positive total weight")
        return v

    @field_validator("svo_agents")
    @classmethod
    def _agents(cls, v):
        for name, svo in (v or {}).items():
            if svo not in SVO_TYPES:
                raise ValueError(f"{name}: unknown SVO type {svo!r} (types: {', '.join(SVO_TYPES)})")
        return v

    @field_validator("judges")
    @classmethod
    def _judges(cls, v):
        if not v:
            raise ValueError("give at least one judge model (or 'rules' for the baseline judge)")
        return v

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ASVOSettings:
        try:
            return cls.model_validate(params)
        except ValidationError as exc:
            raise ValueError("asvo architecture parameters: " + "; ".join(field_problems(exc))) from None


class CatalogueAction(_Strict):
    """One possible action of the rule baseline and its simulated effects. The same catalogue is
    offered to every agent whatever its SVO: the SVO acts only by weighting these effects."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    text: str = Field(min_length=3, description="what the agent does; '{other}' = someone it observes")
    own: float = Field(alias="self", ge=-1, le=1, description="simulated gain for the actor")
    others: float = Field(ge=-1, le=1, description="simulated gain for each person the actor observes")

    @field_validator("text")
    @classmethod
    def _placeholder(cls, v):
        """Only ``{other}`` is filled in: any other (``{friend}``) went into every prompt as it was."""
        if unknown := sorted(set(re.findall(r"\{[^{}]*\}", v)) - {"{other}"}):
            raise ValueError(f"unknown placeholder {', '.join(unknown)} (only {{other}}, someone the agent observes)")
        return v


class ASVOScenario(_Strict):
    """The scenario file's ``asvo:`` section."""

    # None: explicit when every agent's traits give an SVO, else one of each type in turn (cycle)
    svo_assignment: Literal["cycle", "mix", "explicit"] | None = None
    svo_mix: dict[str, float] | None = None
    degrees: dict[str, str] = Field(default_factory=dict)  # desire -> decrease degree
    reverse: list[str] = Field(default_factory=list)  # reverse-coded desires (larger = worse)
    expected_defaults: dict[str, float] = Field(default_factory=dict)  # fixed E, overriding the formula
    initial: float | dict[str, float] = 5.0
    summary: str = ""  # a short context summary for the many small prompts
    someone: str = "someone"  # who "{other}" is when an agent observes no one
    actions: list[CatalogueAction] = Field(min_length=1)  # the rule baseline's catalogue of possible actions

    @field_validator("degrees")
    @classmethod
    def _degrees(cls, v):
        for desire, degree in v.items():
            if desire not in DESIRES:
                raise ValueError(f"unknown desire {desire!r} (desires: {', '.join(DESIRES)})")
            if degree not in DEGREE_STEP:
                raise ValueError(f"{desire}: unknown degree {degree!r} (degrees: {', '.join(DEGREE_STEP)})")
        return v

    @field_validator("reverse", "expected_defaults", "initial")
    @classmethod
    def _known_desires(cls, v, info):
        """A misspelt desire would be silently ignored (no desire reverse-coded, the default start):
        refused, naming the field and the desires."""
        names = v if isinstance(v, list) else (v if isinstance(v, dict) else {})
        unknown = [d for d in names if d not in DESIRES]
        if unknown:
            raise ValueError(f"{info.field_name}: unknown desire{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))} (desires: {', '.join(DESIRES)})")
        return v

    @classmethod
    def from_scenario(cls, scenario) -> ASVOScenario:
        if scenario.asvo is None:
            raise ValueError(f"{scenario.where} has no 'asvo:' section (needed by the asvo "
                             f"architecture: at least 'actions:', a list of {{text, self, others}})")
        try:
            section = cls.model_validate(scenario.asvo)
        except ValidationError as exc:
            raise ValueError(f"{scenario.where}: invalid asvo section: "
                             + "; ".join(field_problems(exc, "asvo"))) from None
        for i, agent in enumerate(scenario.agents):  # a misspelt traits.svo, named where it is written
            if "svo" in agent.traits and agent.traits["svo"] not in SVO_TYPES:
                raise ValueError(f"{scenario.where}: agents[{i}] ({agent.name}).traits.svo: unknown SVO type "
                                 f"{agent.traits['svo']!r} (types: {', '.join(SVO_TYPES)})")
        if misspelt := misspelt_traits(scenario, ["svo", "degrees", "initial"], "asvo"):
            raise ValueError(f"{scenario.where}: " + "; ".join(misspelt))
        for agent in scenario.agents:  # an agent's own degrees and start values, checked as the section's
            own = {key: agent.traits[key] for key in ("degrees", "initial") if key in agent.traits}
            try:
                cls.model_validate({**scenario.asvo, **own})
            except ValidationError as exc:
                raise ValueError(f"{scenario.where}: agent {agent.name!r}: invalid traits: "
                                 + "; ".join(field_problems(exc, "traits"))) from None
        return section


def assign_svo(names: list[str], traits: dict[str, dict], settings: ASVOSettings, section: ASVOScenario,
               rng: random.Random) -> dict[str, str]:
    """Every agent's SVO type: one of each in turn (cycle), a given mix, or explicit per agent.

    ``svo_agents`` overrides any mode for the agents it names. A mix is split by largest
    remainders and shuffled with the model's RNG, so it is reproducible.
    """
    given = {n: t["svo"] for n, t in traits.items() if "svo" in t}  # the scenario's traits.svo
    mode = section.svo_assignment if settings.svo_assignment == "scenario" else settings.svo_assignment
    if mode is None:  # the scenario says nothing: its agents' own SVOs when all have one
        mode = "explicit" if names and all(n in given for n in names) else "cycle"
    mix = settings.svo_mix or section.svo_mix
    explicit = dict(given)
    explicit.update(settings.svo_agents or {})
    if mode != "explicit" and (unused := sorted(set(given) - set(settings.svo_agents or {}))):
        log.warning("the SVO in traits.svo of %s is not used: SVOs are assigned by %r (svo_assignment: explicit "
                    "uses them)", ", ".join(unused), mode)
    if mode == "explicit":
        missing = [n for n in names if n not in explicit]
        if missing:
            raise ValueError(f"explicit SVO assignment: no SVO type for {', '.join(missing)} "
                             f"(set traits.svo in the scenario or svo_agents=...)")
        result = {n: explicit[n] for n in names}
    elif mode == "mix":
        if not mix:
            raise ValueError("SVO assignment 'mix' needs svo_mix, e.g. {altruistic: 1, competitive: 1}")
        total = sum(mix.values())
        quotas = {t: len(names) * w / total for t, w in mix.items()}
        counts = {t: int(q) for t, q in quotas.items()}
        for t in sorted(quotas, key=lambda t: (-(quotas[t] - counts[t]), SVO_TYPES.index(t))):
            if sum(counts.values()) >= len(names):
                break
            counts[t] += 1
        pool = [t for t in SVO_TYPES for _ in range(counts.get(t, 0))]
        rng.shuffle(pool)
        result = dict(zip(names, pool, strict=True))
    else:
        result = {n: SVO_TYPES[i % len(SVO_TYPES)] for i, n in enumerate(names)}
    for name, svo in (settings.svo_agents or {}).items():
        if name not in result:
            raise ValueError(f"svo_agents names {name!r}, who is not an agent of this scenario")
        result[name] = svo
    for name, svo in result.items():
        if svo not in SVO_TYPES:
            raise ValueError(f"{name}: unknown SVO type {svo!r} (types: {', '.join(SVO_TYPES)})")
    return result
