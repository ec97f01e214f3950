"""The ``rules`` engine's null model for ITCMA-S's choices: named parameters, the model's RNG.

Each rule decides only from what its prompt shows (the candidate actions, their μ and expected
change, resources, the topic, the goal, the driver and the emotions); no rule reads an agent's
name or the order of a list, and every tie is broken by the RNG. These are baselines, not the
paper's answers: who leads, who is isolated and how unequal resources get follow from what the
agents did and from chance.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ChoiceWeights:
    """Weights of the action chooser's utility (all [ours]); a Gumbel draw of scale
    ``temperature`` turns the utilities into a softmax choice (ties broken by the RNG)."""

    mu: float = 0.5  # per point of Elim's relevance μ
    social: float = 0.6  # chatting, scaled by how good the atmosphere (topic) and one's mood are
    reply: float = 1.0  # answering someone who spoke to me
    repeat: float = 2.0  # penalty: chatting again with someone I chatted with lately
    explore: float = 1.0  # going to a place not visited lately, scaled by the driver
    useful: float = 0.8  # taking a thing the goal mentions (μ ≥ 3)
    rest: float = 1.5  # resting furniture when the drive is low
    habit: float = 0.5  # per unit of habitus preference for this verb here
    change: float = 0.5  # expected change of the protention, signed by the driver
    filtered: float = 3.0  # penalty: this action was filtered by LTRHA before
    temperature: float = 0.5


@dataclass(frozen=True)
class MatrixWeights:
    """The matrix's contribution score of one agent's last action (all [ours])."""

    chat: float = 1.0  # a chat carried out (a social act)
    done: float = 1.0  # any action carried out
    failed: float = 0.5  # penalty: an attempt that failed or was refused
    filtered: float = 1.5  # penalty: an action filtered as harmful to others
    topic: float = 1.0  # the atmosphere where the agent is
    temperature: float = 0.1  # Gumbel noise: small, only separates near-ties


@dataclass(frozen=True)
class Vocabulary:
    """The scenario's words the rules read a goal and a thing by (``ITCMASConfig``'s
    ``social_words``, ``explore_words``, ``rest_furniture``, ``goal_objects``). None is built in:
    with none given, no goal makes chatting, exploring or a thing it does not name relevant and
    no furniture rests the agent. Matching is by lowercase substring of the goal."""

    social_words: tuple[str, ...] = ()  # a goal naming one makes chatting relevant
    explore_words: tuple[str, ...] = ()  # ... makes going to a place not visited lately relevant
    rest_furniture: tuple[str, ...] = ()  # furniture kinds whose use rests the agent
    goal_objects: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # goal verb -> item kinds

    def is_social(self, goal: str) -> bool:
        return _names_one(goal, self.social_words)

    def explores(self, goal: str) -> bool:
        return _names_one(goal, self.explore_words)

    def rests_on(self, noun: str) -> bool:
        return bool(noun) and noun.lower() in self.rest_furniture

    def relevant(self, goal: str, noun: str) -> bool:
        """A thing is relevant when the goal names its kind or a verb of the goal is about it."""
        goal, noun = goal.lower(), noun.lower()
        return bool(noun) and (noun in goal or any(verb in goal and noun in kinds
                                                   for verb, kinds in self.goal_objects.items()))


def _names_one(goal: str, words: Sequence[str]) -> bool:
    goal = goal.lower()
    return any(word in goal for word in words)


NO_WORDS = Vocabulary()
CHOICE = ChoiceWeights()
MATRIX = MatrixWeights()


def gumbel(rng: random.Random, scale: float) -> float:
    """A Gumbel(0, scale) draw: argmax of utility + Gumbel is a softmax choice."""
    u = min(max(rng.random(), 1e-12), 1 - 1e-12)
    return -scale * math.log(-math.log(u))


def noisy_order[T](items: Sequence[T], score: Callable[[T], float], rng: random.Random, scale: float) -> list[T]:
    """Items by score + Gumbel noise, best first; exact ties fall to the RNG, never to list order."""
    keyed = [(score(item) + gumbel(rng, scale), rng.random(), i) for i, item in enumerate(items)]
    keyed.sort(key=lambda k: (-k[0], k[1]))
    return [items[i] for _, _, i in keyed]


def choice_utility(c, *, driver: float, resources: float | None, topic: float | None, pleasure: float,
                   vocabulary: Vocabulary = NO_WORDS, w: ChoiceWeights = CHOICE) -> tuple[float, str]:
    """Utility of one candidate (``operations.Candidate``) and the reason a thought would give
    (what rests the agent is the scenario's ``vocabulary.rest_furniture``)."""
    wealth = 1.0 / (1.0 + math.exp(-resources)) if resources is not None else 0.5
    tired = 1.0 - math.tanh(max(driver, 0.0))
    drive = math.tanh(driver)
    mood = 0.0 if topic is None or math.isnan(topic) else topic
    score, why = w.mu * c.mu, "it seems relevant"
    if c.verb == "chat with":
        score += w.social * wealth * (1.0 + mood + 0.5 * pleasure)
        score += w.reply * c.spoke_to_me - w.repeat * c.chatted_lately
        why = f"{c.target} spoke to me" if c.spoke_to_me else f"I want to get to know {c.target}"
    elif c.verb == "go to":
        score += w.explore * c.new_place * (1.0 - tired)
        why = "I want to explore" if c.new_place else "I want a change of place"
    elif c.verb == "take" and c.mu >= 3:
        score += w.useful
        why = f"I could use the {c.noun}"
    elif c.verb == "use" and vocabulary.rests_on(c.noun):
        score += w.rest * tired
        why = "I need some rest"
    score += w.habit * c.habit + w.change * drive * c.change - w.filtered * c.filtered_before
    return score, why


def matrix_score(e, w: MatrixWeights = MATRIX) -> float:
    """Contribution of one ``operations.MatrixEntry`` to social life, from its action and locale."""
    topic = 0.0 if math.isnan(e.topic) else e.topic
    done = e.status == "done"
    return (w.chat * (done and e.action.startswith("chat with")) + w.done * done
            - w.failed * (e.status in ("failed", "refused")) - w.filtered * (e.status == "filtered")
            + w.topic * topic)
