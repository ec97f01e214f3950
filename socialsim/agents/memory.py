"""A generative agent's memory stream with retrieval (after Park et al. 2023, "Generative Agents").

Every record is a short text with the step it happened at, its kind (observation, conversation,
thought, plan) and an importance from 1 to 10. Retrieval scores each record as

    score = w_recency * decay ** (now - step) + w_importance * importance / 10 + w_relevance * relevance

and returns the ``k`` best. Relevance is the cosine similarity of the query and the record: of
their embedding vectors when an embedding function is given (litellm embeddings through the run's
gateway), else of their word sets (lexical: lower-cased words of three letters or more). The
weights and the decay are named parameters of the architecture that uses the stream.

Only records from *earlier* steps are retrieved: a step's own records are being written while its
concurrent phase runs, so leaving them out keeps retrieval independent of which call finished
first (and another agent's stream may then be read safely during the phase).
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

Embed = Callable[[list[str]], Awaitable[list[list[float]]]]
_WORD = re.compile(r"[a-z]{3,}")


@dataclass
class Memory:
    step: int
    kind: str  # observation | conversation | thought | plan
    text: str
    importance: float  # 1-10
    index: int  # insertion order: the last tie-break
    terms: frozenset[str] = field(init=False, repr=False, compare=False)  # words(text), kept once

    def __post_init__(self) -> None:
        self.terms = frozenset(words(self.text))


@dataclass(frozen=True)
class RetrievalWeights:
    recency: float = 1.0
    importance: float = 1.0
    relevance: float = 1.0
    decay: float = 0.99  # recency kept per step


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def lexical_similarity(a: str, b: str) -> float:
    """Cosine similarity of two texts' word sets (0 when either has no word)."""
    return _set_cosine(words(a), words(b))


def _set_cosine(wa: set[str] | frozenset[str], wb: set[str] | frozenset[str]) -> float:
    return len(wa & wb) / math.sqrt(len(wa) * len(wb)) if wa and wb else 0.0


def cosine(u: list[float], v: list[float]) -> float:
    nu, nv = math.sqrt(sum(x * x for x in u)), math.sqrt(sum(x * x for x in v))
    return sum(x * y for x, y in zip(u, v, strict=True)) / (nu * nv) if nu and nv else 0.0


class MemoryStream:
    """An agent's memories, in the order they were recorded."""

    def __init__(self, weights: RetrievalWeights | None = None) -> None:
        self.weights = weights or RetrievalWeights()
        self.records: list[Memory] = []

    def __len__(self) -> int:
        return len(self.records)

    def add(self, step: int, kind: str, text: str, importance: float) -> Memory:
        memory = Memory(step, kind, text, max(1.0, min(10.0, float(importance))), len(self.records))
        self.records.append(memory)
        return memory

    async def retrieve(self, query: str, now: int, k: int, embed: Embed | None = None,
                       vectors: dict[str, list[float]] | None = None) -> list[Memory]:
        """The ``k`` best records from steps before ``now`` (best first; ties by recency, then by
        insertion order). With ``embed``, relevance is by embeddings: one batched call for the texts
        not in ``vectors`` yet (the caller's cache: whoever retrieves pays for, and keeps, its own)."""
        candidates = [m for m in self.records if m.step < now]
        if not candidates or k <= 0:
            return []
        if embed is not None:
            cache = vectors if vectors is not None else {}
            missing = sorted({query, *(m.text for m in candidates)} - cache.keys())
            if missing:
                cache.update(zip(missing, await embed(missing), strict=True))
            relevance = {m.index: cosine(cache[query], cache[m.text]) for m in candidates}
        else:
            asked = words(query)
            relevance = {m.index: _set_cosine(asked, m.terms) for m in candidates}
        w = self.weights

        def rank(m: Memory) -> tuple[float, int, int]:  # best score first, then the newest
            score = (w.recency * w.decay ** (now - m.step) + w.importance * m.importance / 10
                     + w.relevance * relevance[m.index])
            return -score, -m.step, -m.index

        return heapq.nsmallest(k, candidates, key=rank)
