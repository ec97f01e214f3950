"""LTRHA, the social framework of ITCMA-S: locale & topic, resources, habitus, action.

- topic of a locale (eq. 17): the emotion synthesis of the agents in one area;
- resources and the success probability of an action (eq. 18);
- the matrix's reallocation of resources by rank (eq. 19): the upper half gains, the lower half
  loses, the middle of an odd group keeps its resources;
- the social filter's transparent rule (what counts as detrimental to social interaction);
- habitus: the agent's own habits per kind of place, learned from what it did there.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np


def topic(P: Sequence[float], A: Sequence[float]) -> float:
    """Eq. 17: tpc_env = (1/n)·Σ_i P_i·(A_i + 1)/2, in [−1, 1]; NaN for an empty locale."""
    P, A = np.asarray(P, dtype=float), np.asarray(A, dtype=float)
    if P.size == 0:
        return float("nan")
    return float(np.mean(P * (A + 1.0) / 2.0))


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def success_rate(resources: float) -> float:
    """Eq. 18: rate_i = 0.5 + Sigmoid(S_i)/2 — always in (0.5, 1)."""
    return 0.5 + sigmoid(resources) / 2.0


def rank_deltas(n: int, s_min: float, s_max: float) -> np.ndarray:
    """Eq. 19: the resources S'_j the j-th ranked of n agents receives (j = 1 … n).

    j < (n+1)/2: s_min + |j − n/2|·(s_max − s_min)/(n/2 − 1)       (rank 1 gets s_max)
    j = (n+1)/2: 0                                                 (the middle of an odd n)
    j > n/2:    −(s_min + |j − n/2 − 1|·(s_max − s_min)/(n/2 − 1))  (the last gets −s_max)
    """
    if n <= 2:
        raise ValueError(f"the matrix needs more than 2 agents (got {n})")
    half, span = n / 2, s_max - s_min
    deltas = []
    for j in range(1, n + 1):
        if 2 * j == n + 1:
            deltas.append(0.0)
        elif 2 * j < n + 1:
            deltas.append(s_min + abs(j - half) * span / (half - 1))
        else:
            deltas.append(-(s_min + abs(j - half - 1) * span / (half - 1)))
    return np.array(deltas)


def reallocate(resources: dict[str, float], ranking: Sequence[str], s_min: float, s_max: float) -> dict[str, float]:
    """S_j ← S_j + S'_j for the agents in ``ranking`` (best first); resources may go negative."""
    deltas = rank_deltas(len(ranking), s_min, s_max)
    new = dict(resources)
    for name, delta in zip(ranking, deltas, strict=True):
        new[name] = new[name] + float(delta)
    return new


# --- the social filter's rule --------------------------------------------------------------------
FILTERED_PREFIX = "(This action has been filtered by LTRHA) "  # a filtered action in the log, as in the paper's
def detrimental_reason(verb: str, actor: str, area_owner: str | None, item_owner: str | None,
                       addressed_by: Sequence[str]) -> str:
    """Why an action harms social interaction ('' if it does not) [ours, from the paper's logs]:
    taking what belongs to someone else (an owned item, or anything in another agent's home),
    and walking away from someone who has just spoken to you."""
    if verb == "take" and item_owner and item_owner != actor:
        return f"the item belongs to {item_owner}"
    if verb == "take" and area_owner and area_owner != actor:
        return f"it is taken from {area_owner}'s home"
    if verb in ("go to", "leave") and addressed_by:
        return f"it walks away from {', '.join(addressed_by)} who just spoke to you"
    return ""


# --- habitus --------------------------------------------------------------------------------------
PLACE_KINDS = ("own home", "someone's home", "public room", "outside")


def place_kind(area: str, me: str, homes: dict[str, str], outside: bool) -> str:
    if outside:
        return "outside"
    owner = home_owner(area, homes)
    if owner is None:
        return "public room"
    return "own home" if owner == me else "someone's home"


def home_owner(area: str, homes: dict[str, str]) -> str | None:
    return next((agent for agent, home in homes.items() if home == area), None)


class Habitus:
    """H_i: how often the agent did each kind of action in each kind of place."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = defaultdict(Counter)

    def record(self, kind: str, verb: str) -> None:
        self.counts[kind][verb] += 1

    def preference(self, kind: str, verb: str) -> float:
        """Share of this kind of action among what the agent did in this kind of place."""
        total = sum(self.counts[kind].values())
        return self.counts[kind][verb] / total if total else 0.0

    def describe(self, kind: str) -> str:
        habits = self.counts[kind].most_common(3)
        if not habits:
            return f"You have no habits yet in a place like this ({kind})."
        listed = ", ".join(f"{verb} ({count} times)" for verb, count in habits)
        return f"In a place like this ({kind}) you usually: {listed}."


def gini(values) -> float:
    """Gini coefficient of the agents' resources, shifted to be non-negative (resources may go
    negative): how unequal the matrix's reallocations left them (0 equal, towards 1 one holds all)."""
    x = np.sort(np.asarray(values, dtype=float))
    if x.size == 0:
        return float("nan")
    x = x - min(x.min(), 0.0)
    if x.sum() == 0:
        return 0.0
    n = x.size
    return float((2 * np.arange(1, n + 1) - n - 1) @ x / (n * x.sum()))
