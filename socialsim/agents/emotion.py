"""PAD emotions and the driver of ITCMA-S (spec eq. 10-15), and base ITCMA's driver.

Pleasure comes from desire and pain (eq. 10), arousal from how much the present differs from
the retained past (eq. 11), dominance from how wrong the last protention was (eq. 12). The driver
(intrinsic motivation, eq. 13-15) grows by the need Ne — the change of d_bias — so an agent that
settles into a local optimum stops being pushed. Pure functions plus one small state object.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class EmotionWeights:
    """ω_P, ω_A, ω_D of eq. 13 (they sum to 1)."""

    P: float = 0.4
    A: float = 0.3
    D: float = 0.3


def pleasure(desire: float, pain: float) -> float:
    """Eq. 10: P = tanh(desire) − tanh(pain), desire and pain ≥ 0."""
    return math.tanh(max(0.0, desire)) - math.tanh(max(0.0, pain))


def arousal(diffs: Sequence[float]) -> float:
    """Eq. 11: A^t = tanh(Σ_{n=1}^{t−1} 2n/(t(t−1)) · diff(PI^t, re_n)).

    ``diffs`` are diff(PI^t, re_n) for the retained frames, oldest first (n = 1 … t−1, so
    t − 1 = len(diffs)); the weights sum to 1 and favour the most recent frames.
    """
    m = len(diffs)
    if m == 0:
        return 0.0
    t = m + 1
    return math.tanh(sum(2 * n / (t * (t - 1)) * d for n, d in enumerate(diffs, start=1)))


def dominance(diff_from_protention: float) -> float:
    """Eq. 12: D^t = tanh(diff(PI^t, Pro^{t−1}))."""
    return math.tanh(diff_from_protention)


def d_bias(P: float, A: float, A_prev: float, D: float, w: EmotionWeights = EmotionWeights()) -> float:
    """Eq. 13: ω_P·P + ω_D·D + ω_A·(1 − |A^t − A^{t−1}|) — stable arousal is rewarded."""
    return w.P * P + w.D * D + w.A * (1.0 - abs(A - A_prev))


def need(bias: float, bias_prev: float) -> float:
    """Eq. 14: Ne = |d_bias^t − d_bias^{t−1}| / 2."""
    return abs(bias - bias_prev) / 2.0


def next_driver(d_prev: float, bias: float, bias_prev: float) -> float:
    """Eq. 15: d^t = d^{t−1} + Ne·d_bias^t."""
    return d_prev + need(bias, bias_prev) * bias


def base_driver(d_prev: float, P: float, A: float, D: float, w: EmotionWeights = EmotionWeights()) -> float:
    """Base ITCMA: the weighted sum of this moment's PAD is added to the previous driver."""
    return d_prev + w.P * P + w.A * A + w.D * D


@dataclass
class EmotionState:
    """An agent's PAD, d_bias and driver, updated once per step.

    desire and pain are decaying accumulators of what the environment gave the agent [ours]:
    desire = successes + resources gained + chats received; pain = failures, filtered actions,
    resources lost, being ignored.
    """

    driver: float = 1.0
    P: float = 0.0
    A: float = 0.0
    D: float = 0.0
    bias: float = 0.0
    desire: float = 0.0
    pain: float = 0.0
    decay: float = 0.9
    use_driver_module: bool = True  # False: base ITCMA's driver
    weights: EmotionWeights = EmotionWeights()
    scale: float = 1.0  # desire/pain per unit event: keeps tanh (eq. 10) between flat and pinned

    def gain(self, amount: float) -> None:
        self.desire += self.scale * max(0.0, amount)

    def hurt(self, amount: float) -> None:
        self.pain += self.scale * max(0.0, amount)

    def decay_step(self) -> None:
        self.desire *= self.decay
        self.pain *= self.decay

    def update(self, arousal_diffs: Sequence[float], protention_diff: float | None) -> None:
        """Compute this step's P, A, D and driver (eq. 10-15, or base ITCMA's driver)."""
        A_prev = self.A
        self.P = pleasure(self.desire, self.pain)
        self.A = arousal(arousal_diffs)
        self.D = dominance(protention_diff) if protention_diff is not None else 0.0
        if self.use_driver_module:
            new_bias = d_bias(self.P, self.A, A_prev, self.D, self.weights)
            self.driver = next_driver(self.driver, new_bias, self.bias)
            self.bias = new_bias
        else:
            self.driver = base_driver(self.driver, self.P, self.A, self.D, self.weights)

    @property
    def pad(self) -> tuple[float, float, float]:
        return (self.P, self.A, self.D)

    def describe(self) -> str:
        """The driver and emotions as natural language for the action prompt."""
        def word(value, low, mid, high):
            return high if value > 0.33 else low if value < -0.33 else mid

        return (
            f"Your drive to act is {self.driver:.2f}. You feel {word(self.P, 'displeased', 'neutral', 'pleased')} "
            f"(pleasure {self.P:+.2f}), {word(self.A, 'calm', 'somewhat alert', 'aroused')} (arousal {self.A:+.2f}) "
            f"and {word(self.D, 'dominated', 'in moderate control', 'in control')} (dominance {self.D:+.2f})."
        )
