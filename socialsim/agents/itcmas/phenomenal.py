"""Phenomenal fields and the consciousness channel of ITCMA-S (spec eq. 3-9, Algorithm 1).

A phenomenal field is one frame of perception: one row per perceived object, each row a feature
vector of the object's description and state plus its spherical position relative to the agent
(θ = bearing on the grid, φ = 0, γ = distance). Everything here is plain numpy so the equations
can be checked by hand; random draws (Algorithm 1's probability r) come from the caller's RNG,
which is always the Mesa model's.

Feature vectors are an offline embedding: a hashed bag of character 3-grams (crc32, so stable
across processes), L2-normalised. No model download, no network.
"""

from __future__ import annotations

import math
import random
import re
import zlib
from collections import deque
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

EMBED_DIM = 128
IDENTICAL = 1.0 - 1e-9  # cos = 1 (the same object), up to float rounding
UNKNOWN_POSITION = (0.0, 0.0, 1.0)  # where a predicted object we never saw is assumed to be [ours]


def embed(text: str, dim: int = EMBED_DIM) -> np.ndarray:
    """A stable, download-free feature vector: hashed character 3-grams, unit length."""
    return _embed(text, dim).copy()


@lru_cache(maxsize=16384)
def _embed(text: str, dim: int) -> np.ndarray:
    padded = f" {text.lower().strip()} "
    vector = np.zeros(dim)
    for i in range(len(padded) - 2):
        vector[zlib.crc32(padded[i : i + 3].encode()) % dim] += 1.0
    norm = np.linalg.norm(vector)
    return vector / norm if norm else vector


@dataclass(frozen=True)
class SimWeights:
    """ω of eq. 3 (gamma, theta, phi) and eq. 4 (a, pos); each group sums to 1."""

    gamma: float = 1 / 3
    theta: float = 1 / 3
    phi: float = 1 / 3
    a: float = 0.5
    pos: float = 0.5


@dataclass
class PhenomenalField:
    """One frame: ``keys[i]`` names row i; ``vectors[i]`` is its feature vector and
    ``positions[i]`` its (θ, φ, γ). ``pad`` is the emotion felt when the frame was lived
    (its emotional intensity weights memory activation); ``frames`` counts how many original
    frames a compressed memory stands for."""

    keys: list[str]
    vectors: np.ndarray
    positions: np.ndarray
    step: int = 0
    area: str = ""
    pad: tuple[float, float, float] = (0.0, 0.0, 0.0)
    frames: int = 1

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def from_rows(cls, rows: list[tuple[str, tuple[float, float, float]]], **meta) -> PhenomenalField:
        keys = [k for k, _ in rows]
        vectors = np.array([_embed(k, EMBED_DIM) for k in keys]).reshape(len(keys), EMBED_DIM)
        positions = np.array([p for _, p in rows], dtype=float).reshape(len(keys), 3)
        return cls(keys, vectors, positions, **meta)

    @property
    def intensity(self) -> float:
        """Emotional intensity in [0, 1]: |(P, A, D)| / sqrt(3) [ours]."""
        return float(np.linalg.norm(self.pad) / math.sqrt(3))

    def position_of(self) -> dict[str, tuple[float, float, float]]:
        return {k: tuple(p) for k, p in zip(self.keys, self.positions, strict=True)}


def empty_field(**meta) -> PhenomenalField:
    return PhenomenalField([], np.zeros((0, EMBED_DIM)), np.zeros((0, 3)), **meta)


# --- eq. 3 and 4 ----------------------------------------------------------------------------------
def spherical_sim(pa: np.ndarray, pb: np.ndarray, w: SimWeights = SimWeights()) -> np.ndarray:
    """Eq. 3 for every pair of positions (rows (θ, φ, γ)); bearings are compared the short way
    round, so |Δθ| ≤ π [ours]."""
    pa, pb = np.atleast_2d(pa), np.atleast_2d(pb)
    d_theta = np.abs(pa[:, None, 0] - pb[None, :, 0]) % (2 * math.pi)
    d_theta = np.minimum(d_theta, 2 * math.pi - d_theta)
    d_phi = np.abs(pa[:, None, 1] - pb[None, :, 1])
    d_gamma = np.abs(pa[:, None, 2] - pb[None, :, 2])
    return 1.0 - (w.gamma * np.tanh(d_gamma) + w.theta * d_theta / math.pi + w.phi * d_phi / (2 * math.pi)) / 3.0


def row_sim(fx: PhenomenalField, fy: PhenomenalField, w: SimWeights = SimWeights()) -> np.ndarray:
    """s(i, j) = ω_a·cos(a_i, a_j) + ω_pos·SphericalSim(pos_i, pos_j), as a |f^x| × |f^y| matrix."""
    if len(fx) == 0 or len(fy) == 0:
        return np.zeros((len(fx), len(fy)))
    return w.a * cosine(fx, fy) + w.pos * spherical_sim(fx.positions, fy.positions, w)


def cosine(fx: PhenomenalField, fy: PhenomenalField) -> np.ndarray:
    """cos(a_i, a_j) for every pair of rows (0 for a zero vector)."""
    if len(fx) == 0 or len(fy) == 0:
        return np.zeros((len(fx), len(fy)))
    nx = np.linalg.norm(fx.vectors, axis=1, keepdims=True)
    ny = np.linalg.norm(fy.vectors, axis=1, keepdims=True)
    return np.clip((fx.vectors @ fy.vectors.T) / np.maximum(nx * ny.T, 1e-12), -1.0, 1.0)


def field_sim(fx: PhenomenalField, fy: PhenomenalField, w: SimWeights = SimWeights()) -> float:
    """Eq. 4: Σ_i s(i, best j) / max(|f^x|, |f^y|); two empty fields are identical."""
    if len(fx) == 0 and len(fy) == 0:
        return 1.0
    if len(fx) == 0 or len(fy) == 0:
        return 0.0
    return float(row_sim(fx, fy, w).max(axis=1).sum() / max(len(fx), len(fy)))


def diff(fx: PhenomenalField, fy: PhenomenalField, w: SimWeights = SimWeights()) -> float:
    """diff = 1 − FieldSim, clipped at 0 [ours]."""
    return max(0.0, 1.0 - field_sim(fx, fy, w))


# --- Algorithm 1 ----------------------------------------------------------------------------------
def blend(fx: PhenomenalField, fy: PhenomenalField, threshold: float, rate: float, rng: random.Random,
          w: SimWeights = SimWeights()) -> PhenomenalField:
    """Conceptual blending Blend(f^x, f^y) (Algorithm 1).

    For each row i of f^x, scan f^y in order: below the threshold T, continue; identical: the
    average of the two rows enters f^z; otherwise both rows enter f^z (if absent); either way
    stop scanning. Then every row of f^x, then of f^y, that is not in f^z enters it with
    probability r — one draw per row, in that order, from ``rng``.

    "Identical" [ours]: the paper averages "completely identical objects"; read as s = 1 the
    average would change nothing, so we read it as the same object — identical feature vectors
    (same description and state, cos = 1) — whose positions are then averaged. This is also what
    keeps a compressed memory about the size of one frame, so activation can still find it.
    """
    s = row_sim(fx, fy, w)
    same = cosine(fx, fy) >= IDENTICAL
    keys: list[str] = []
    vectors: list[np.ndarray] = []
    positions: list[np.ndarray] = []
    in_x: set[int] = set()
    in_y: set[int] = set()

    def add(key, vector, position):
        keys.append(key)
        vectors.append(vector)
        positions.append(position)

    for i in range(len(fx)):
        for j in range(len(fy)):
            if s[i, j] < threshold:
                continue
            if same[i, j]:
                if i not in in_x and j not in in_y:
                    add(fx.keys[i], (fx.vectors[i] + fy.vectors[j]) / 2, (fx.positions[i] + fy.positions[j]) / 2)
                in_x.add(i)
                in_y.add(j)
            else:
                if i not in in_x:
                    add(fx.keys[i], fx.vectors[i], fx.positions[i])
                    in_x.add(i)
                if j not in in_y:
                    add(fy.keys[j], fy.vectors[j], fy.positions[j])
                    in_y.add(j)
            break
    for i in range(len(fx)):
        if i not in in_x and rng.random() < rate:
            add(fx.keys[i], fx.vectors[i], fx.positions[i])
    for j in range(len(fy)):
        if j not in in_y and rng.random() < rate:
            add(fy.keys[j], fy.vectors[j], fy.positions[j])
    return PhenomenalField(
        keys,
        np.array(vectors).reshape(len(keys), fx.vectors.shape[1] if len(fx) else EMBED_DIM),
        np.array(positions, dtype=float).reshape(len(keys), 3),
        step=max(fx.step, fy.step),
        area=fx.area,
        pad=fx.pad,
        frames=fx.frames + fy.frames,
    )


def juxtapose(fx: PhenomenalField, fy: PhenomenalField) -> PhenomenalField:
    """Base ITCMA: a memory is set beside the present, not blended with it."""
    return replace(fx, keys=fx.keys + fy.keys, vectors=np.vstack([fx.vectors, fy.vectors]),
                   positions=np.vstack([fx.positions, fy.positions]))


# --- eq. 8-9: compression ---------------------------------------------------------------------------
def compress_segment(segment: list[PhenomenalField], threshold: float, rate: float, rng: random.Random,
                     w: SimWeights = SimWeights()) -> PhenomenalField:
    """MBlend: start from the key frame (highest arousal, the first such on ties) and blend the
    segment's other frames into it in time order; the result stands for the whole segment."""
    key_index = max(range(len(segment)), key=lambda k: (segment[k].pad[1], -k))
    result = segment[key_index]
    for k, frame in enumerate(segment):
        if k != key_index:
            result = blend(result, frame, threshold, rate, rng, w)
    return result


# --- observation text <-> field ------------------------------------------------------------------
_SPLIT = re.compile(r",\s*and\s+|,\s*|\s+and\s+(?=(?:the|a|an)\s)")


def observation_phrases(text: str) -> list[str]:
    """Object phrases of an IrollanValley observation (or a predicted one).

    'You are in X.' -> 'You are in X'; 'Looking around you, you see A, B, and C.' -> A, B, C;
    'You are holding A and B.' -> 'holding A', 'holding B'. The agent's own status is skipped.
    """
    phrases: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", (text or "").strip()):
        sentence = sentence.strip().rstrip(".").strip()
        if not sentence:
            continue
        lowered = sentence.lower()
        if lowered.startswith("you are in "):
            phrases.append(f"You are in {sentence[len('You are in '):]}")
        elif lowered.startswith("looking around you, you see "):
            phrases += [p.strip() for p in _SPLIT.split(sentence[len("Looking around you, you see "):]) if p.strip()]
        elif lowered.startswith("you are holding "):
            phrases += [f"holding {p.strip()}" for p in _SPLIT.split(sentence[len("You are holding "):]) if p.strip()]
        elif lowered.startswith("you are "):
            continue  # the agent's own status
        else:
            phrases += [p.strip() for p in _SPLIT.split(sentence) if p.strip()]
    return phrases


def field_from_text(text: str, known: dict[str, tuple[float, float, float]], **meta) -> PhenomenalField:
    """A predicted observation as a field; positions of objects the agent knows are reused."""
    rows = [(p, known.get(p, UNKNOWN_POSITION)) for p in observation_phrases(text)]
    return PhenomenalField.from_rows(rows, **meta)


# --- the consciousness channel -------------------------------------------------------------------
@dataclass
class Consciousness:
    """Retention Re^t (recent frames), the primal impression PI^t and long-term memory."""

    retention_size: int = 3
    retention: deque = field(default_factory=deque)
    long_term: list[PhenomenalField] = field(default_factory=list)
    raw_since: int = 0  # index in long_term of the first uncompressed memory

    def retain(self, frame: PhenomenalField) -> None:
        self.retention.append(frame)
        while len(self.retention) > self.retention_size:
            self.retention.popleft()

    def store(self, frame: PhenomenalField) -> None:
        self.long_term.append(frame)

    def activate(self, pi: PhenomenalField, k: int = 1, w: SimWeights = SimWeights()) -> list[tuple[float, PhenomenalField]]:
        """M(PI^t, Re^t): the k memories most like the present, by FieldSim with PI (and the mean
        FieldSim with the retained frames, averaged in [ours]) weighted by the memory's emotional
        intensity (weight 0.5 + 0.5·intensity [ours]), as the paper sets it "based on the mood congruence
        effect": vivid memories come to mind more, whatever the present mood (no comparison with it)."""
        scored = []
        for index, memory in enumerate(self.long_term):
            sim = field_sim(pi, memory, w)
            if self.retention:
                sim = 0.5 * sim + 0.5 * float(np.mean([field_sim(r, memory, w) for r in self.retention]))
            scored.append((sim * (0.5 + 0.5 * memory.intensity), -index, memory))
        scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
        return [(score, memory) for score, _, memory in scored[:k]]

    def compress(self, segment_length: int, threshold: float, rate: float, rng: random.Random,
                 w: SimWeights = SimWeights()) -> bool:
        """Compress the oldest segment of raw memories once 2·L have piled up (the newest L stay
        raw) [ours: when and which]; returns whether a segment was compressed."""
        if segment_length < 2 or len(self.long_term) - self.raw_since < 2 * segment_length:
            return False
        start = self.raw_since
        segment = self.long_term[start : start + segment_length]
        self.long_term[start : start + segment_length] = [compress_segment(segment, threshold, rate, rng, w)]
        self.raw_since = start + 1
        return True
