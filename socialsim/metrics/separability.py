"""Cluster separability of action texts by label (ASVO appendix D.3).

Embed every action text, project to 2-D with t-SNE, then measure how well the points cluster by
their labels (SVO types): the silhouette score and the separation ratio (mean inter-label pairwise
distance / mean intra-label pairwise distance), both on the t-SNE points as in the paper.

Embeddings: the offline default needs no download (TF-IDF of character n-grams, then a truncated
SVD: a latent-semantic embedding fitted on the texts themselves); any litellm embedding
model (``openai/text-embedding-3-small``, ``ollama/nomic-embed-text``...) can be named instead.

Labels never reach the embedding: words that name a label (``mask``, e.g. an SVO type an LLM
echoes from its prompt: "As an altruistic person, I ...") are removed from the texts first, so a
text that repeats its own label cannot separate by it; how many texts had them is reported.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.manifold import TSNE
from sklearn.metrics import pairwise_distances, silhouette_score
from sklearn.preprocessing import normalize

log = logging.getLogger("socialsim")
OFFLINE_EMBEDDING = "offline character n-gram TF-IDF + SVD (no download)"
MIN_POINTS = 5  # t-SNE and a silhouette need a handful of points

# The paper's Table 2 (appendix D.3): (silhouette, separation ratio).
PAPER_TABLE_2: dict[tuple[str, bool], tuple[float, float]] = {
    ("School", False): (-0.02, 1.08),
    ("Workplace", False): (0.01, 1.12),
    ("Family", False): (-0.074, 1.01),
    ("School", True): (0.12, 1.64),
    ("Workplace", True): (0.21, 1.67),
    ("Family", True): (0.07, 1.49),
}


def offline_embeddings(texts: list[str], dims: int = 16, seed: int = 0) -> np.ndarray:
    """Latent-semantic embeddings fitted on the texts themselves: TF-IDF of character 3-5-grams
    within words (robust to inflections: "help"/"helping"), reduced by a truncated SVD. No model,
    no download."""
    from sklearn.decomposition import TruncatedSVD

    tfidf = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True).fit_transform(texts)
    n_components = min(dims, tfidf.shape[0] - 1, tfidf.shape[1] - 1)
    if n_components < 2:
        return normalize(tfidf).toarray()
    reduced = TruncatedSVD(n_components=n_components, random_state=seed).fit_transform(tfidf)
    return normalize(reduced)


def provider_embeddings(texts: list[str], model: str, gateway: Any = None) -> np.ndarray:
    """Embeddings from any litellm embedding model, through the run's gateway (taped, priced,
    counted, the run's endpoint; keys from the environment only). Raises ProviderError."""
    if gateway is None:
        from socialsim.llm.gateway import Gateway
        from socialsim.llm.routing import RouteTable

        gateway = Gateway(RouteTable(model))
    return np.array(gateway.embed(model, texts, purpose="EmbedActions"), dtype=float)


def embed(texts: list[str], model: str | None = None, gateway: Any = None) -> np.ndarray:
    return offline_embeddings(texts) if model is None else provider_embeddings(texts, model, gateway)


def tsne_2d(vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """t-SNE to 2-D with a perplexity that suits the number of points (exact gradients for the
    few hundred actions of a run: faster and steadier than Barnes-Hut at that size)."""
    n = len(vectors)
    perplexity = float(min(30.0, max(2.0, (n - 1) / 3)))
    method = "exact" if n <= 1000 else "barnes_hut"
    return TSNE(n_components=2, perplexity=perplexity, init="pca", method=method,
                random_state=seed).fit_transform(vectors)


def silhouette(points: np.ndarray, labels: list[str]) -> float:
    """sklearn's silhouette score; NaN when it is undefined (one label, or one point per label)."""
    k = len(set(labels))
    if not 2 <= k <= len(labels) - 1:
        return math.nan
    return float(silhouette_score(points, labels))


def separation_ratio(points: np.ndarray, labels: list[str]) -> float:
    """Mean pairwise distance between points of different labels / mean within the same label."""
    labels_arr = np.asarray(labels)
    dist = pairwise_distances(points)
    upper = np.triu(np.ones_like(dist, dtype=bool), k=1)
    same = (labels_arr[:, None] == labels_arr[None, :]) & upper
    diff = (labels_arr[:, None] != labels_arr[None, :]) & upper
    if not same.any() or not diff.any():
        return math.nan
    intra = dist[same].mean()
    return math.nan if intra == 0 else float(dist[diff].mean() / intra)


@dataclass
class Separability:
    points: np.ndarray | None
    labels: list[str]
    silhouette: float
    ratio: float
    note: str = ""
    shuffled_silhouette: float = math.nan  # chance level: mean silhouette over label permutations
    embedding: str = ""  # the embedding the points come from
    masked: int = 0  # texts that named a label (``mask``), embedded with those words removed
    # with ``groups`` (who wrote each text): the fewest groups a label has (1: label = group identity),
    # and the chance that labels shuffled between groups separate the points as well (NaN: too few groups)
    groups_per_label: int = 0
    group_shuffle_p: float = math.nan

    @property
    def label_is_group(self) -> bool:
        """Every label is one group's (one agent per SVO type): separation by label is separation by
        group, so it cannot tell the label from the group's identity."""
        return self.groups_per_label == 1

    @property
    def measurable(self) -> bool:
        return not math.isnan(self.silhouette)


PERMUTATIONS = 20  # label shuffles for the chance level


def permutation_silhouette(points: np.ndarray, labels: list[str], seed: int = 0, n: int = PERMUTATIONS) -> float:
    """The silhouette the same points give with the labels shuffled, averaged over ``n``
    permutations (seeded): what chance looks like for this many points and label sizes."""
    rng = np.random.default_rng(seed)
    values = [silhouette(points, list(rng.permutation(labels))) for _ in range(n)]
    values = [v for v in values if not math.isnan(v)]
    return float(np.mean(values)) if values else math.nan


GROUP_PERMUTATIONS = 99  # label shuffles between groups for the group-level p-value
MIN_PARTITIONS = 20  # fewer distinct ways to give the groups their labels: p can never reach 0.05


def group_partitions(group_labels: dict[str, str]) -> int:
    """How many distinct ways the labels can be dealt out to the groups (label names aside):
    n! / (prod of each label's group count! x prod, over labels of equal count, of how many)."""
    sizes = Counter(group_labels.values()).values()
    ways = math.factorial(len(group_labels))
    for size in sizes:
        ways //= math.factorial(size)
    for same in Counter(sizes).values():
        ways //= math.factorial(same)
    return ways


def group_shuffle_p(points: np.ndarray, labels: list[str], groups: list[str], seed: int = 0,
                    n: int = GROUP_PERMUTATIONS) -> float:
    """The chance that the labels, shuffled between groups (each group keeps one label for all its
    texts), give a silhouette at least as high: a permutation p-value that holds who wrote what
    fixed, so a label that only stands for its agents does not count. NaN when a group has several
    labels or the groups are too few for p to reach 0.05 (``MIN_PARTITIONS``)."""
    of_group: dict[str, str] = {}
    for g, label in zip(groups, labels, strict=True):
        if of_group.setdefault(g, label) != label:
            return math.nan
    if group_partitions(of_group) < MIN_PARTITIONS:
        return math.nan
    observed = silhouette(points, labels)
    names, dealt = list(of_group), list(of_group.values())
    rng = np.random.default_rng(seed)
    higher = 0
    for _ in range(n):
        shuffled = dict(zip(names, rng.permutation(dealt), strict=True))
        higher += silhouette(points, [shuffled[g] for g in groups]) >= observed - 1e-12
    return (1 + higher) / (1 + n)


def mask_words(texts: list[str], mask: re.Pattern | None) -> tuple[list[str], int]:
    """``texts`` with every match of ``mask`` removed (spaces tidied), and how many had one."""
    if mask is None:
        return list(texts), 0
    out = [re.sub(r"\s+([,.;:!?])", r"\1", re.sub(r"\s{2,}", " ", mask.sub("", t))).strip() for t in texts]
    return out, sum(bool(mask.search(t)) for t in texts)


def separability(texts: list[str], labels: list[str], embedding_model: str | None = None,
                 seed: int = 0, gateway: Any = None, mask: re.Pattern | None = None,
                 groups: list[str] | None = None) -> Separability:
    """Embed, project with t-SNE, then silhouette and separation ratio on the 2-D points. Words
    matching ``mask`` (names of the labels) are removed before embedding, and counted: otherwise a
    text that repeats its label would be read back as separation. With an embedding model that
    fails, the offline embedding is used and the note says why. With ``groups`` (each text's
    author), the labels are also shuffled between groups (:func:`group_shuffle_p`)."""
    if len(texts) != len(labels) or (groups is not None and len(groups) != len(labels)):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels" + (f" and {len(groups)} groups" if groups else ""))
    texts, masked = mask_words(texts, mask)
    result = _separability(texts, labels, embedding_model, seed, gateway)
    result.masked = masked
    if groups is not None:
        per_label: dict[str, set[str]] = {}
        for g, label in zip(groups, labels, strict=True):
            per_label.setdefault(label, set()).add(g)
        result.groups_per_label = min((len(g) for g in per_label.values()), default=0)
        if result.points is not None:
            result.group_shuffle_p = group_shuffle_p(result.points, labels, groups, seed)
    return result


def _separability(texts: list[str], labels: list[str], embedding_model: str | None, seed: int,
                  gateway: Any) -> Separability:
    if len(texts) < MIN_POINTS:
        return Separability(None, labels, math.nan, math.nan, f"too few actions ({len(texts)} < {MIN_POINTS})")
    if len(set(labels)) < 2:
        return Separability(None, labels, math.nan, math.nan, "not measurable: only one SVO type")
    if len(set(texts)) < 2:
        return Separability(None, labels, math.nan, math.nan, "not measurable: every action text is the same")
    # the labels are used only after the points exist: embedding and t-SNE see the texts alone
    note = ""
    try:
        vectors = embed(texts, embedding_model, gateway)
    except Exception as exc:
        from socialsim.llm.gateway import ProviderError

        if not isinstance(exc, ProviderError):
            raise
        log.warning("embeddings from %s failed (%s); the offline embedding is used", embedding_model, exc)
        note = f"{embedding_model} failed ({exc}); offline TF-IDF + SVD embedding used instead."
        embedding_model, vectors = None, offline_embeddings(texts)
    points = tsne_2d(vectors, seed)
    return Separability(points, labels, silhouette(points, labels), separation_ratio(points, labels), note,
                        permutation_silhouette(points, labels, seed), embedding_model or OFFLINE_EMBEDDING)


def plot_tsne(result: Separability, path: Path, title: str = "Actions by SVO (t-SNE)") -> bool:
    """Scatter of the t-SNE points coloured by label; False when there is nothing to draw (or no
    figure is drawn: a sweep's run)."""
    from socialsim.metrics.report import figures_drawn

    if result.points is None or not figures_drawn():
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for label in sorted(set(result.labels)):
        mask = np.asarray(result.labels) == label
        ax.scatter(result.points[mask, 0], result.points[mask, 1], s=18, label=label, alpha=0.8)
    ax.set_title(f"{title}\nsilhouette {result.silhouette:.2f}, separation ratio {result.ratio:.2f}")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
