"""Shared fixtures: a scripted LLM for gateway tests, offline litellm, no stray secrets."""

from __future__ import annotations

import asyncio
import os
import random
from types import SimpleNamespace

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


class ScriptedLLM:
    """Stands in for litellm.acompletion: replies from a script, keyed by prompt text.

    ``replies`` maps a prompt substring to a list of raw replies returned in turn (the last one
    repeats). ``delays`` lets a test make some calls finish later than others.
    """

    def __init__(self, replies: dict[str, list[str]] | None = None, default: str = "1", delay=None, error=None):
        self.replies = {k: list(v) for k, v in (replies or {}).items()}
        self.default = default
        self.delay = delay  # callable(messages) -> seconds
        self.error = error  # exception to raise instead of answering
        self.calls: list[dict] = []

    async def __call__(self, gateway, model, messages, params, fmt):
        self.calls.append({"model": model, "messages": messages, "params": params, "fmt": fmt})
        if self.delay:
            await asyncio.sleep(self.delay(messages))
        if self.error:
            raise self.error
        op = next((key for key in self.replies if any(key in m["content"] for m in messages)), None)
        queue = self.replies.get(op) if op else None
        text = (queue.pop(0) if len(queue) > 1 else queue[0]) if queue else self.default
        usage = SimpleNamespace(prompt_tokens=sum(len(m["content"].split()) for m in messages), completion_tokens=1)
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=text))], usage=usage)


@pytest.fixture
def scripted(monkeypatch):
    """Patch the gateway's litellm call with a ScriptedLLM; returns a factory."""
    from socialsim.llm.gateway import Gateway

    def install(**kwargs) -> ScriptedLLM:
        fake = ScriptedLLM(**kwargs)

        async def acompletion(self, model, messages, params, fmt):
            return await fake(self, model, messages, params, fmt)

        monkeypatch.setattr(Gateway, "_acompletion", acompletion)
        return fake

    return install


@pytest.fixture
def rng():
    return random.Random(7)
