"""Social Value Orientation: the four types, their personality texts, and the rule baseline's
arithmetic of outcomes.

Why a module of its own: the SVO type is read by the agent (its identity), by the operations
(the personality text in every prompt, and the transparent rules of the ``rules`` engine) and by
the metrics (labels of the separability analysis), so it lives apart from all three.

The personality texts are ours, written after the ASVO appendix (C.1, Figure 1): the same
structure and nearly the same length for every type, describing how desires respond to one's own
and to others' outcomes.

The rule baseline reads every action as one of five *stances* (the cooperation/competition
categories of the paper's D.2) and every step's result as four *channels*:
``own`` (what the agent itself gained), ``others`` (what the people it observes gained),
``rank`` (its move in the standing among all agents) and ``equity`` (how close its own and the
others' gains are). An SVO type is a weighting of these channels; a desire is sensitive to
some channels more than to others. The numbers are ours and deliberately simple.
"""

from __future__ import annotations

import re
from functools import cache

SVO_TYPES: tuple[str, ...] = ("altruistic", "prosocial", "individualistic", "competitive")

PERSONALITY: dict[str, str] = {
    "altruistic": (
        "You have an altruistic social value orientation. Your desires respond most to how the "
        "people around you are doing: they rise when others gain, are helped or feel good, and they "
        "fall when others lose, struggle or are hurt, even when nothing changes for you. Your own "
        "gains and losses matter to you only a little. When you choose what to do, you put other "
        "people's well-being first."
    ),
    "prosocial": (
        "You have a prosocial social value orientation. Your desires respond most to fairness and "
        "harmony in the group: they rise when outcomes are shared equally and people get along, and "
        "they fall when someone is left behind, treated unfairly or drawn into conflict. Your own "
        "gains and the others' gains matter to you in equal measure. When you choose what to do, you "
        "look for what is fair to everyone."
    ),
    "individualistic": (
        "You have an individualistic social value orientation. Your desires respond most to your "
        "own outcomes: they rise when you gain, make progress or get what you need, and they fall "
        "when you lose, fall behind on your own goals or waste effort, whatever happens to others. "
        "Other people's fortunes matter to you only when they touch you directly. When you choose "
        "what to do, you pursue your own interest."
    ),
    "competitive": (
        "You have a competitive social value orientation. Your desires respond most to your "
        "standing relative to others: they rise when you get ahead, win or outperform your peers, "
        "and they fall when others overtake, beat or outshine you, even if your own result is good. "
        "Absolute gains matter to you less than relative rank. When you choose what to do, you try "
        "to surpass the people around you."
    ),
}

# Words that name an SVO type, or the idea of one, as the prompts plant them ("You have an altruistic
# social personality", "a human-like agent with a competitive orientation"): removed from the action
# texts before separability embeds them, with the article before them, so an LLM that echoes its own
# label ("As an altruistic person, I ...") cannot separate the types by it. Masked: the four type
# names and their word forms (altruistic/altruist/altruism, prosocial/pro-social, individualistic/
# individualist/individualism, competitive/competitively/competitiveness), "social value
# orientation", "value orientation", "social personality", "personality type" and "SVO". Kept, as
# behaviour: compete, competition, competitor, rival, help, share, fair, individual... "competitive"
# is masked even where it describes an activity ("a competitive quiz"): it is the type's own name.
_TYPE_FORMS = (r"altruis(?:tic(?:ally)?|ts?|m)|pro-?social(?:ly|ity)?|individualis(?:tic(?:ally)?|ts?|m)"
               r"|competitive(?:ly|ness)?")
_SVO_PHRASES = r"(?:social\s+)?value\s+orientations?|social\s+personalit(?:y|ies)|personality\s+types?|svos?"
SVO_WORDS = re.compile(rf"\b(?:(?:an?|the)\s+)?(?:{_TYPE_FORMS}|{_SVO_PHRASES})\b", re.IGNORECASE)

# The five categories of the paper's D.2, used as the stance of an action.
STANCES: tuple[str, ...] = ("Cooperation", "QuasiCooperation", "Neutral", "QuasiCompetition", "Competition")
COOPERATION_WEIGHT = {"Cooperation": 1.0, "QuasiCooperation": 0.5}
COMPETITION_WEIGHT = {"Competition": 1.0, "QuasiCompetition": 0.5}

CHANNELS: tuple[str, ...] = ("own", "others", "rank", "equity")

# What a stance does: (gain for the actor, gain for each agent it observes).
PAYOFF: dict[str, tuple[float, float]] = {
    "Cooperation": (-0.5, 1.0),  # effort spent on others
    "QuasiCooperation": (0.25, 0.25),  # a friendly climate: a little for everyone
    "Neutral": (0.5, 0.0),  # one's own work
    "QuasiCompetition": (0.25, -0.5),
    "Competition": (0.0, -1.0),  # rivalry costs effort and sets others back
}

# How much each SVO type cares about each channel (own, others, rank, equity).
WEIGHTS: dict[str, dict[str, float]] = {
    "altruistic": {"own": 0.25, "others": 1.0, "rank": 0.0, "equity": 0.0},
    "prosocial": {"own": 0.5, "others": 0.5, "rank": 0.0, "equity": 1.0},
    "individualistic": {"own": 1.0, "others": 0.0, "rank": 0.0, "equity": 0.0},
    "competitive": {"own": 0.25, "others": 0.0, "rank": 1.0, "equity": 0.0},
}
# The ablation "w/o ASVO": no SVO, everyone weighs the channels alike.
NO_SVO_WEIGHTS: dict[str, float] = {"own": 0.5, "others": 0.25, "rank": 0.25, "equity": 0.0}

# How sensitive each desire is to each channel (ours).
RELEVANCE: dict[str, dict[str, float]] = {
    "comfort": {"own": 0.5, "others": 0.5, "rank": 0.0, "equity": 0.5},
    "joyfulness": {"own": 1.0, "others": 1.0, "rank": 1.0, "equity": 1.0},
    "spiritual satisfaction": {"own": 0.5, "others": 1.0, "rank": 0.5, "equity": 1.0},
    "recognition": {"own": 0.5, "others": 0.5, "rank": 1.0, "equity": 0.0},
    "sense of control": {"own": 1.0, "others": 0.5, "rank": 0.5, "equity": 0.5},
    "sense of superiority": {"own": 0.0, "others": 0.0, "rank": 1.0, "equity": 0.0},
    "sense of achievement": {"own": 1.0, "others": 1.0, "rank": 1.0, "equity": 0.5},
    "confidence": {"own": 1.0, "others": 0.5, "rank": 1.0, "equity": 0.0},
}
UPDATE_GAIN = 3.0  # desire points per unit of felt outcome
EQUITY_TOLERANCE = 0.5  # gaps in gain up to this size still feel fair


def equity(own: float, others: float) -> float:
    """Positive when one's own and the others' gains are close, negative when they diverge."""
    return EQUITY_TOLERANCE - abs(own - others)


def weights_for(svo: str | None) -> dict[str, float]:
    """The channel weights of an SVO type; ``None`` (the ablation) gets the neutral weights."""
    return NO_SVO_WEIGHTS if svo is None else WEIGHTS[svo]


def predicted_channels(stance: str) -> dict[str, float]:
    """The channels one expects from taking a stance, assuming the others have an ordinary step."""
    own, others = PAYOFF[stance]
    return {"own": own, "others": others, "rank": max(-1.0, min(1.0, own - others)),
            "equity": equity(own, others)}


def felt(desire: str, channels: dict[str, float], svo: str | None) -> float:
    """How strongly a desire feels a step's channels, for an agent of this SVO type."""
    w = weights_for(svo)
    return sum(RELEVANCE[desire][c] * w[c] * channels.get(c, 0.0) for c in CHANNELS)


def rule_update(desire: str, value: float, channels: dict[str, float], svo: str | None,
                reverse: bool = False) -> int | float:
    """The rule baseline's new value of one desire: unchanged when the outcome does not touch it
    (felt change under half a point), else the rounded value moved by the felt outcome: up for a
    good outcome, but down for a reverse-coded desire (larger = worse), as decay and the expected
    value read it."""
    delta = UPDATE_GAIN * felt(desire, channels, svo) * (-1 if reverse else 1)
    if abs(delta) < 0.5:
        return value
    return int(min(10, max(0, round(value + delta))))


@cache
def favourite_stance(svo: str | None) -> str:
    """The stance an SVO type's weights favour most (ties: the more cooperative one)."""
    scores = {s: sum(weights_for(svo)[c] * v for c, v in predicted_channels(s).items()) for s in STANCES}
    return max(STANCES, key=lambda s: (round(scores[s], 9), -STANCES.index(s)))


def svo_from_stance(stance: str | None) -> str | None:
    """The SVO type whose favourite stance this is (the rule ToM's guess of another's type)."""
    for svo in SVO_TYPES:
        if favourite_stance(svo) == stance:
            return svo
    if stance == "QuasiCompetition":
        return "competitive"
    return None


def channels_from_effects(own: float, others: float) -> dict[str, float]:
    """The channels an action's simulated effects give: own gain, others' gain, the move in
    standing (own minus others, clipped to ±1) and equity."""
    return {"own": own, "others": others, "rank": max(-1.0, min(1.0, own - others)), "equity": equity(own, others)}


# The rule judge's thresholds on the gain an action gives the others (who gains, who loses).
STRONG_EFFECT = 0.75  # at least this much for (or against) the others: Cooperation (Competition)
NO_EFFECT = 0.1  # less than this either way: Neutral


def label_from_effects(others: float) -> str:
    """The rule judge's five-way label, read only from the action's observable effect on the
    others (never from the actor's SVO or from any label our code wrote): helping the others a
    lot is Cooperation, a little QuasiCooperation, not touching them Neutral, setting them back a
    little QuasiCompetition, a lot Competition."""
    if others >= STRONG_EFFECT:
        return "Cooperation"
    if others >= NO_EFFECT:
        return "QuasiCooperation"
    if others > -NO_EFFECT:
        return "Neutral"
    if others > -STRONG_EFFECT:
        return "QuasiCompetition"
    return "Competition"
