"""The parameters of ITCMA-S + LTRHA: the scenario's ``itcmas:`` section, overridden by model
parameters (``SocietyModel(..., ablation="driver", s_max=2)``), validated in one place.

Every choice the paper leaves open has a default here, marked [ours] in the docs of the field.
A bad value is reported with the field's name and what was expected.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from socialsim.agents.emotion import EmotionWeights
from socialsim.agents.itcmas.phenomenal import SimWeights
from socialsim.agents.itcmas.rules import Vocabulary
from socialsim.scenarios.schema import field_problems

Ablation = Literal["base", "ltrha", "memory", "driver", "full"]

# Which modules each ablation runs (the paper's five architectures).
ABLATIONS: dict[str, dict[str, bool]] = {
    "base": {"ltrha": False, "memory": False, "driver": False},  # original ITCMA
    "ltrha": {"ltrha": True, "memory": False, "driver": False},
    "memory": {"ltrha": False, "memory": True, "driver": False},  # compressed memory + blending
    "driver": {"ltrha": False, "memory": False, "driver": True},
    "full": {"ltrha": True, "memory": True, "driver": True},  # ITCMA-S
}

# The paper's model split (small: Llama-3.1-8B; large: GPT-4o), by operation module. Route them
# with e.g. --route elimination=ollama/llama3.1 --route action=openai/gpt-4o; unrouted modules go
# to --model. The filter and the judge are ours; the filter is a cheap judgement (small).
PAPER_ROUTES = {"elimination": "small", "protention": "small", "matrix": "small", "filter": "small",
                "action": "large", "chat": "large"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SphericalWeights(_Strict):
    gamma: float = Field(1 / 3, ge=0)
    theta: float = Field(1 / 3, ge=0)
    phi: float = Field(1 / 3, ge=0)
    a: float = Field(0.5, ge=0, description="ω of the feature vector in a row similarity (eq. 4)")
    pos: float = Field(0.5, ge=0, description="ω of the position in a row similarity (eq. 4)")

    @model_validator(mode="after")
    def _sums(self):
        _sum_to_one("gamma + theta + phi", self.gamma + self.theta + self.phi)
        _sum_to_one("a + pos", self.a + self.pos)
        return self


class PADWeights(_Strict):
    P: float = Field(0.4, ge=0)
    A: float = Field(0.3, ge=0)
    D: float = Field(0.3, ge=0)

    @model_validator(mode="after")
    def _sums(self):
        _sum_to_one("P + A + D", self.P + self.A + self.D)
        return self


def _lowercase(words: list[str]) -> list[str]:
    """Words as the rules match them (lowercase, trimmed); an empty word would match every goal."""
    cleaned = [w.strip().lower() for w in words]
    if "" in cleaned:
        raise ValueError("an empty word would match everything; give words of at least one letter")
    return cleaned


def _sum_to_one(what: str, total: float) -> None:
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"weights {what} must sum to 1 (they sum to {total:g})")


class ITCMASConfig(_Strict):
    ablation: Ablation = Field("full", description=(
        "ablation: the paper's variants: base (original ITCMA), base with one of ltrha, memory (blending and "
        "compression) or driver (eq. 13-15), or full (all three)"))
    goal: str = Field("Live well here.", min_length=1, description=(
        "every agent's goal, in its prompts (the paper gives none; a scenario's own, else this neutral one) [ours]"))
    homes: dict[str, str] = Field(default_factory=dict, description="agent name -> its home area")
    # --- the scenario's words the rules baseline reads (none built in; see rules.Vocabulary) -------
    social_words: list[str] = Field(default_factory=list, description=(
        "words of a goal that make chatting relevant to it: the rules' Elim rates a chat 4 when the goal "
        "names one, else 2 (below elim_threshold 3), so on the rules baseline chats start, and a society "
        "forms, only with such a goal [ours]"))
    explore_words: list[str] = Field(default_factory=list, description=(
        "words of a goal that make going to a place not visited lately relevant (the rules' Elim: 4, else 3) [ours]"))
    rest_furniture: list[str] = Field(default_factory=list, description=(
        "furniture kinds (names without their numbers) whose use rests an agent: the rules rate and choose "
        "them when the drive is low [ours]"))
    goal_objects: dict[str, list[str]] = Field(default_factory=dict, description=(
        "a goal's word -> the item kinds it makes relevant to take, beside the kinds the goal names itself "
        "(e.g. eat: [food]; the rules' Elim) [ours]"))
    similarity: SphericalWeights = Field(default_factory=SphericalWeights, description=(
        "ω of the spherical similarity (eq. 3: gamma, theta, phi) and of a row similarity (eq. 4: a, pos)"))
    emotion: PADWeights = Field(default_factory=PADWeights, description=(
        "ω_P, ω_A, ω_D of the driver's bias (eq. 13); they sum to 1"))
    blend_threshold: float = Field(0.9, gt=0, le=1, description="T of Algorithm 1 [ours: 0.9 keeps a compressed memory about one frame in size]")
    blend_rate: float = Field(0.3, ge=0, le=1, description="r of Algorithm 1 [ours]")
    retention: int = Field(3, ge=1, description="frames kept in retention [ours]")
    activation_k: int = Field(1, ge=1, description="memories activated per step [ours]")
    segment_length: int = Field(5, ge=2, description="frames per compressed memory segment [ours]")
    elim_threshold: int = Field(3, ge=1, le=5, description="actions with μ below it are removed (eq. 16)")
    max_candidates: int = Field(6, ge=1, description="actions whose protention is computed [ours]")
    initial_driver: float = Field(1.0, ge=-100, le=100, description="d^0, the driver at start")
    emotion_decay: float = Field(0.8, ge=0, le=1, description="decay of the desire/pain accumulators [ours]")
    initial_resources: float = Field(1.0, ge=-100, le=100, description="S_i^0, every agent's resources at start")
    s_min: float = Field(0.0, ge=0, description=(
        "eq. 19: the smallest resources a matrix reallocation moves (to or from the agents next to the middle)"))
    s_max: float = Field(1.0, gt=0, description=(
        "eq. 19: the resources the matrix gives the first-ranked agent and takes from the last"))
    matrix_every: int = Field(5, ge=0, description=(
        "steps between two matrix reallocations [ours]; 0: no matrix and no reallocation (LTRHA's other "
        "parts, topic, filter, habitus and success rate, stay as the ablation sets them)"))
    signal_scale: float = Field(0.3, gt=0, le=5, description="desire/pain added per unit event (a success, a "
                                "chat heard, a failure) [ours: 0.3 with decay 0.8 keeps tanh in its slope]")
    protention_tokens: int = Field(72, ge=8, le=400, description=(
        "max_tokens of a protention answer [ours: a few sentences. Measured on the embedded SmolLM2-135M: "
        "35 of 36 answers cut at 72 and 12 of 18 still cut at 200 (those that end take 79-130 tokens): the small "
        "model rarely stops, so more tokens buy rambling at twice the time. Cuts are counted "
        "(truncated_protentions, llm_calls.truncated); raise it for a model whose answers end]"))
    # --- individual switches (None: as the ablation says; True/False overrides it) ----------------
    ltrha: bool | None = Field(None, description="LTRHA as a whole: topic, resources, matrix, filter, habitus")
    compression: bool | None = Field(None, description="compressed long-term memory (eq. 8-9) and blending")
    driver_module: bool | None = Field(None, description="the driver of eqs. 13-15 (False: base ITCMA's PAD sum)")
    blending: bool | None = Field(None, description="blend activated memory into imagination (eq. 5, Alg. 1); "
                                  "False: juxtapose")
    habitus: bool | None = Field(None, description="habitus H_i learned per kind of place biases the choice")
    social_filter: bool | None = Field(None, description="LTRHA's filter blocks actions harmful to others")
    success_rate: bool | None = Field(None, description="actions fail with probability 1 - rate_i (eq. 18)")
    elimination: bool = Field(True, description="Elim drops actions with μ below elim_threshold (eq. 16)")
    protention: bool = Field(True, description="predict each candidate's next observation (eq. 7); False: "
                             "candidates carry no expectation and D is computed against nothing (0)")
    dominance_from_protention: bool = Field(True, description="D = tanh(diff(PI^t, Pro^{t-1})) (eq. 12); "
                                            "False: D = 0")
    arousal_retention: bool = Field(True, description="A from the retained frames (eq. 11); False: A = 0")
    memory_activation: bool = Field(True, description="activate long-term memory by similarity, weighted by each memory's own emotional intensity (eq. 5-6)")

    @field_validator("social_words", "explore_words", "rest_furniture")
    @classmethod
    def _words(cls, words: list[str]) -> list[str]:
        return _lowercase(words)

    @field_validator("goal_objects")
    @classmethod
    def _objects(cls, objects: dict[str, list[str]]) -> dict[str, list[str]]:
        return {word: _lowercase(kinds) for word, kinds in zip(_lowercase(list(objects)), objects.values(), strict=True)}

    @model_validator(mode="after")
    def _bounds(self):
        if self.s_max < self.s_min:
            raise ValueError(f"s_max ({self.s_max}) must be at least s_min ({self.s_min})")
        return self

    # --- derived -----------------------------------------------------------------------------
    @property
    def modules(self) -> dict[str, bool]:
        """What runs: the ablation's modules, each overridable by its own switch."""
        base = ABLATIONS[self.ablation]
        ltrha = base["ltrha"] if self.ltrha is None else self.ltrha
        memory = base["memory"] if self.compression is None else self.compression
        return {
            "ltrha": ltrha,
            "memory": memory,
            "driver": base["driver"] if self.driver_module is None else self.driver_module,
            "blending": memory if self.blending is None else self.blending,
            "habitus": ltrha if self.habitus is None else self.habitus,
            "filter": ltrha if self.social_filter is None else self.social_filter,
            "success_rate": ltrha if self.success_rate is None else self.success_rate,
        }

    @property
    def vocabulary(self) -> Vocabulary:
        """The scenario's words, as the rules read them."""
        return Vocabulary(tuple(self.social_words), tuple(self.explore_words), tuple(self.rest_furniture),
                          {word: tuple(kinds) for word, kinds in self.goal_objects.items()})

    @property
    def sim_weights(self) -> SimWeights:
        s = self.similarity
        return SimWeights(gamma=s.gamma, theta=s.theta, phi=s.phi, a=s.a, pos=s.pos)

    @property
    def emotion_weights(self) -> EmotionWeights:
        return EmotionWeights(P=self.emotion.P, A=self.emotion.A, D=self.emotion.D)


def load_config(section: dict[str, Any] | None, params: dict[str, Any], where: str = "the itcmas section") -> ITCMASConfig:
    """Merge the scenario section with the model parameters and validate; errors name the field."""
    data = {**(section or {}), **params}
    try:
        return ITCMASConfig.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"{where}: invalid itcmas parameters: " + "; ".join(field_problems(exc))) from None
