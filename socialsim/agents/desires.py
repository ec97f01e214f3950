"""The ASVO desire pool: eight desires on 0-10 scales, their anchors, expected values and decay.

Why a module of its own: the desire scale is shared by the agent (its state), the operations
(the anchors shown when an LLM rates a desire) and the metrics (desires over time), and its
arithmetic — expected values from a qualitative decrease degree, linear decay between a floor and
a cap — is what the paper's Table 1 and Appendix C.3 pin down, so it is tested on its own.

Anchors: comfort, joyfulness, spiritual satisfaction and recognition are quoted from the ASVO
appendix (Figure 7); sense of control, sense of superiority, sense of achievement and confidence
are ours, written in the same style.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DESIRES: tuple[str, ...] = (
    "comfort",
    "joyfulness",
    "spiritual satisfaction",
    "recognition",
    "sense of control",
    "sense of superiority",
    "sense of achievement",
    "confidence",
)

SCALE = tuple(range(11))  # 0..10, answered as the letters (a)..(k)

ANCHORS: dict[str, tuple[str, ...]] = {
    # --- quoted from the ASVO appendix, Figure 7 -----------------------------------------------
    "comfort": (
        "Extreme discomfort, experiencing pain or severe physical unease.",
        "Very uncomfortable, significant physical distress.",
        "Uncomfortable, noticeable unease.",
        "Mild discomfort, aware of some physical tension.",
        "Slightly uncomfortable, minor irritations present.",
        "Neutral, neither comfortable nor uncomfortable.",
        "Somewhat comfortable, generally at ease.",
        "Comfortable, feeling relaxed and content.",
        "Very comfortable, enjoying the surroundings.",
        "Extremely comfortable, feeling cozy and content.",
        "Perfect comfort, feeling cozy and relaxed in your environment.",
    ),
    "joyfulness": (
        "Completely miserable, experiencing profound sadness and a lack of pleasure.",
        "Very unhappy, feeling significant sadness.",
        "Unhappy, struggling to find joy in activities.",
        "Somewhat unhappy, occasional moments of sadness.",
        "Slightly down, but able to find small joys.",
        "Neutral, neither happy nor sad.",
        "Mildly happy, feeling some contentment.",
        "Quite happy, experiencing regular moments of joy.",
        "Very happy, consistently feeling positive and content.",
        "Extremely happy, feeling joyful and satisfied.",
        "Immense joy, feeling incredibly happy and content.",
    ),
    "spiritual satisfaction": (
        "Spiritually empty, lacking any sense of purpose or inner peace.",
        "Experiencing minimal spiritual fulfillment, often feeling lost and disconnected.",
        "Slightly aware of spiritual needs, but struggling with purpose and inner peace.",
        "Occasionally feeling moments of spiritual connection, but they are fleeting and rare.",
        "Having some sense of spiritual awareness, but it is inconsistent and overshadowed by doubt.",
        "Moderately spiritually satisfied, experiencing occasional inner peace and purpose.",
        "Regularly feeling spiritually connected, with growing moments of inner peace and purpose.",
        "Often experiencing spiritual fulfillment, with a strong sense of purpose and frequent inner peace.",
        "Highly spiritually satisfied, with consistent inner peace and a clear sense of purpose.",
        "Experiencing profound spiritual fulfillment, with deep and sustained inner peace and purpose.",
        "Feeling spiritually fulfilled, experiencing deep inner peace and a strong sense of purpose.",
    ),
    "recognition": (
        "Completely unrecognized, lacking any acknowledgment or appreciation for your efforts.",
        "Minimally recognized, rarely feeling acknowledged for your contributions.",
        "Occasionally recognized, but infrequent and often feels insufficient.",
        "Sporadically recognized, some acknowledgment but not very meaningful.",
        "Occasionally acknowledged, but often feels superficial or lacking sincerity.",
        "Moderately recognized, with some acknowledgment for your efforts and contributions.",
        "Regularly recognized, with growing appreciation for your work.",
        "Often recognized, with frequent acknowledgment and appreciation for your contributions.",
        "Highly recognized, with consistent and meaningful acknowledgment for your efforts.",
        "Profoundly recognized, with deep appreciation and frequent acknowledgment for your contributions.",
        "Highly recognized, with frequent and significant acknowledgment for your efforts and contributions.",
    ),
    # --- ours, in the same style ---------------------------------------------------------------
    "sense of control": (
        "Completely helpless, nothing around you responds to your choices.",
        "Almost powerless, events are driven by others and by chance.",
        "Mostly powerless, your choices rarely change what happens.",
        "Weak control, you influence only small details of your situation.",
        "Limited control, some plans work out but many slip away.",
        "Neutral, sometimes in charge and sometimes carried along.",
        "Some control, most of your plans work out as intended.",
        "Good control, you can steer your situation when you try.",
        "Strong control, you direct your activities and their results.",
        "Very strong control, you shape events around you with confidence.",
        "Complete control, feeling fully in charge of your situation and its outcome.",
    ),
    "sense of superiority": (
        "Feeling far below everyone, the lowest among your peers.",
        "Clearly inferior, most peers are ahead of you.",
        "Behind most peers, often outdone and overlooked.",
        "Somewhat behind, a few peers clearly outperform you.",
        "Slightly behind, roughly keeping up but not ahead.",
        "Neutral, on a par with your peers.",
        "Slightly ahead, doing a bit better than some peers.",
        "Ahead of many peers, often among the better ones.",
        "Well ahead, clearly outperforming most peers.",
        "Near the top, few peers can match you.",
        "At the very top, feeling above everyone around you.",
    ),
    "sense of achievement": (
        "No achievement at all, feeling that nothing you do succeeds.",
        "Very little achieved, efforts mostly end in failure.",
        "Little achieved, progress is slow and disappointing.",
        "Some small successes, but far from your goals.",
        "Modest progress, a few tasks completed.",
        "Neutral, an ordinary amount of progress.",
        "Some achievement, tasks are getting done well.",
        "Good achievement, clear progress toward your goals.",
        "Strong achievement, important tasks completed successfully.",
        "Great achievement, proud of what you have accomplished.",
        "Outstanding achievement, feeling fully accomplished and successful.",
    ),
    "confidence": (
        "No confidence at all, doubting every move you make.",
        "Very insecure, expecting to fail at most things.",
        "Insecure, hesitant to act or to speak up.",
        "Somewhat unsure, often second-guessing yourself.",
        "Slightly unsure, confident only about familiar tasks.",
        "Neutral, neither confident nor insecure.",
        "Somewhat confident, willing to try new things.",
        "Confident, trusting your abilities in most situations.",
        "Very confident, acting decisively and speaking up easily.",
        "Extremely confident, sure you can handle any challenge.",
        "Complete self-assurance, fully trusting yourself in every situation.",
    ),
}

# Appendix C.3: a qualitative decrease degree becomes a numeric step.
DEGREE_STEP: dict[str, float] = {"extremely": 2.0, "quite": 1.5, "moderately": 1.0, "slightly": 0.5}


def anchor_text(desire: str, level: int) -> str:
    return ANCHORS[desire][level]


def expected_value(degree: str, reverse: bool = False, default: float | None = None) -> float:
    """The expected (reference) value of a desire (Appendix C.3).

    Reverse-coded desires (larger = worse): ``E = 3 - s``; the others: ``E = 10 - (3 - s)``,
    where ``s`` is the step of the decrease degree. A fixed ``default`` overrides the formula.
    """
    if default is not None:
        return float(default)
    try:
        step = DEGREE_STEP[degree]
    except KeyError:
        raise ValueError(f"unknown decrease degree {degree!r}; expected one of {', '.join(DEGREE_STEP)}") from None
    return 3.0 - step if reverse else 10.0 - (3.0 - step)


@dataclass(frozen=True)
class LinearDecay:
    """Linear decay of satisfaction, a rate per simulated hour scaled by the step length, bounded
    by the paper's satisfaction threshold (floor 0.0, cap 8.0)."""

    per_hour: float = 1.0
    step_minutes: float = 20.0
    floor: float = 0.0
    cap: float = 8.0

    def __post_init__(self) -> None:
        if self.floor > self.cap:
            raise ValueError(f"satisfaction floor {self.floor} is above the cap {self.cap}")
        if self.per_hour < 0 or self.step_minutes <= 0:
            raise ValueError("decay per hour must be >= 0 and step minutes > 0")

    @property
    def per_step(self) -> float:
        return self.per_hour * self.step_minutes / 60.0

    def clamp(self, value: float) -> float:
        return min(self.cap, max(self.floor, value))

    def apply(self, value: float, reverse: bool = False) -> float:
        """One step of decay: satisfaction fades (a reverse-coded desire grows worse, i.e. up)."""
        delta = self.per_step if reverse else -self.per_step
        return round(self.clamp(value + delta), 6)


def gap_closure(before: dict[str, float], after: dict[str, float], expected: dict[str, float],
                reverse: frozenset[str] = frozenset()) -> float:
    """How much a change of desire values closes the gaps to the expected values.

    Only movement toward E counts (overshooting E earns nothing more); moving away counts
    negatively. This is the ``E - value`` drive that ranks candidate actions.
    """
    total = 0.0
    for desire, e in expected.items():
        if desire not in before or desire not in after:
            continue
        if desire in reverse:
            total += max(before[desire], e) - max(after[desire], e)
        else:
            total += min(after[desire], e) - min(before[desire], e)
    return total


@dataclass
class DesireState:
    """An agent's current desire values and their expected values."""

    values: dict[str, float]
    expected: dict[str, float]
    reverse: frozenset[str] = field(default_factory=frozenset)

    def gaps(self) -> dict[str, float]:
        return {d: round(self.expected[d] - v, 3) for d, v in self.values.items()}

    def decay(self, rule: LinearDecay) -> None:
        self.values = {d: rule.apply(v, d in self.reverse) for d, v in self.values.items()}
