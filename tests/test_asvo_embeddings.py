"""Separability on a litellm embedding model goes through the run's gateway: the call is taped,
counted and priced, a replay makes no call, and a failing provider falls back to the offline
embedding with a note instead of losing the report."""

import hashlib
import json
from types import SimpleNamespace

import httpx
import pandas as pd
import pytest

from socialsim.llm.gateway import Gateway
from socialsim.model.runner import RunConfig, replay, run

MODEL = "openai/text-embedding-3-small"


def vector(text):
    digest = hashlib.sha256(text.encode()).digest()
    return [b / 255 for b in digest[:12]]


@pytest.fixture
def embedder(monkeypatch):
    calls = []

    async def fake(self, model, texts):
        calls.append((model, list(texts)))
        return SimpleNamespace(data=[{"embedding": vector(t)} for t in texts],
                               usage=SimpleNamespace(prompt_tokens=3 * len(texts)))

    monkeypatch.setattr(Gateway, "_aembedding", fake)
    return calls


def config(**params):
    return RunConfig(scenario="school-meso", arch="asvo", model="rules", steps=3, rng=2,
                     arch_params={"embedding_model": MODEL, **params})


def test_embeddings_are_taped_counted_and_replayed_without_a_call(tmp_path, embedder):
    result = run(config(), tmp_path / "run", progress=False)
    assert result.status == "completed"
    actions = pd.read_parquet(tmp_path / "run" / "tables" / "asvo_actions.parquet")
    assert len(embedder) == 1 and embedder[0][0] == MODEL
    assert embedder[0][1] == [a for a in actions["action"].astype(str) if a]  # the action texts, nothing else
    calls = pd.read_parquet(tmp_path / "run" / "llm_calls.parquet")
    embed = calls[calls["op"] == "EmbedActions"]
    assert len(embed) == 1 and embed["live_calls"].iloc[0] == 1 and embed["prompt_tokens"].iloc[0] == 3 * len(actions)
    figures = json.loads((tmp_path / "run" / "asvo_separability.json").read_text())
    assert figures["embedding"] == MODEL and figures["note"] == ""
    assert f"embeddings: {MODEL}" in (tmp_path / "run" / "report.md").read_text()

    replayed, same = replay(tmp_path / "run", progress=False)
    assert same and len(embedder) == 1 and replayed.model.llm.ledger.live_calls == 0


def test_a_failing_embedding_provider_falls_back_to_the_offline_embedding(tmp_path, monkeypatch):
    async def down(self, model, texts):
        raise httpx.ConnectError("connection refused")

    monkeypatch.setattr(Gateway, "_aembedding", down)
    result = run(config(), tmp_path / "run", progress=False)
    assert result.status == "completed"
    figures = json.loads((tmp_path / "run" / "asvo_separability.json").read_text())
    assert figures["embedding"].startswith("offline") and "failed" in figures["note"]
    calls = pd.read_parquet(tmp_path / "run" / "llm_calls.parquet")
    assert calls.loc[calls["op"] == "EmbedActions", "status"].tolist() == ["fallback"]
    assert "offline TF-IDF + SVD embedding used instead" in (tmp_path / "run" / "report.md").read_text()
