"""Shared fixtures: a scripted LLM for gateway tests, offline litellm, no stray secrets."""

from __future__ import annotations

import asyncio
import gc
import os
import random
from types import SimpleNamespace

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

# The suite's processes collect garbage less often (every 50,000 objects made and not freed, not 700), as
# the LLM loop does while calls are in flight (socialsim.llm.loop.PHASE_GC_THRESHOLD): thousands of short
# runs keep a worker's young objects many, and collecting them took about a ninth of the suite's CPU
# (52 s of 460, measured with gc.callbacks, 2026-11-28): 8% less CPU on four files of short runs (runner,
# parameters at bounds, CRSEC mechanism, ITCMA-S switches; medians of 4). Tests of freeing call
# gc.collect() themselves; a command run in a process of its own collects as a user's does.
from socialsim.llm.loop import PHASE_GC_THRESHOLD  # noqa: E402 (the loop module imports only the standard library)

gc.set_threshold(PHASE_GC_THRESHOLD, *gc.get_threshold()[1:])

# Under pytest-xdist each worker's embedded engine (and the runs it starts) gets its share of the
# CPUs: llama.cpp's threads wait for each other, so two of them on a CPU another worker is using hold
# each other up (tests/test_embedded.py took 120 s instead of 70 s beside a busy process on 2 CPUs).
_suite_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _suite_workers > 1 and hasattr(os, "sched_getaffinity"):
    os.environ.setdefault("SOCIALSIM_EMBEDDED_CPUS", str(max(1, len(os.sched_getaffinity(0)) // _suite_workers)))

# The modules that take longest (seconds on one of 3 workers on 2 AMD EPYC cores, 2026-11-28) go to the
# workers first, so that they end together: the last minute is short modules on every worker, not one
# long module on one (test_sweep.py, left to its place in the file order, ran last and alone for 40 s).
# `make test` keeps this order (--no-loadscope-reorder: xdist would otherwise send the modules with
# the most tests first).
LONGEST_FIRST = (
    "test_dashboard_browser.py",  # 107 (much of it waiting on the browser and a slow test server)
    "test_embedded.py",  # 91
    "test_crash_resume.py",  # 67
    "test_end_of_run_measurement.py",  # 60
    "test_sweep.py",  # 48
    "test_adversarial_answers.py",  # 45
    "test_deployments.py",  # 40
    "test_gateway.py",  # 36
    "test_asvo_embedded.py",  # 35
    "test_faults.py",  # 31
    "test_dashboard_panels.py",  # 29
    "test_itcmas_embedded.py",  # 28
    "test_reproduce.py",  # 28
    "test_runner.py",  # 27
    "test_crsec_mechanism.py",  # 27
    "test_check_order.py",  # 26
)


@pytest.fixture
def waits_written_down(monkeypatch):
    """``waits_written_down(happened)``: the gateway's asyncio with its waits (a retry's backoff, a
    Retry-After, a pool's cooldown) appended to ``happened`` instead of slept."""
    import socialsim.llm.gateway as gateway_module

    def into(happened: list) -> None:
        class GatewaysAsyncio:
            def __getattr__(self, name):
                return getattr(asyncio, name)

            async def sleep(self, seconds):
                if seconds:
                    happened.append(seconds)

        monkeypatch.setattr(gateway_module, "asyncio", GatewaysAsyncio())

    return into


@pytest.fixture(autouse=True)
def _report_figures(request):
    """A run's report figures are drawn only by the tests marked ``figures``, which look at them (or at
    the report's links to them). Drawing was four fifths of a short rules run's CPU, and the suite's
    runs that never look at a figure spent about 90 s of its ~640 s of CPU on them (measured
    2026-11-28). A run in a process of its own (the command-line tests) still draws them."""
    if request.node.get_closest_marker("figures"):
        yield
        return
    from socialsim.metrics.report import without_figures

    with without_figures():
        yield


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


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


def _watch_asks(patch, seen) -> None:
    """Patch ``Gateway.ask`` so that ``seen(op, ctx, agent_id, answer)`` hears every question an
    agent asks, once answered: for tests of what the agents tell the model."""
    from socialsim.llm.gateway import Gateway

    ask = Gateway.ask

    async def watched(self, op, ctx, *, agent_id, rng):
        answer = await ask(self, op, ctx, agent_id=agent_id, rng=rng)
        seen(op, ctx, agent_id, answer)
        return answer

    patch.setattr(Gateway, "ask", watched)


@pytest.fixture(scope="session")
def watch_asks():
    """``watch_asks(patch, seen)``: ``patch`` is ``monkeypatch`` or a ``pytest.MonkeyPatch.context()``
    (a module-scoped fixture's run), ``seen(op, ctx, agent_id, answer)`` is called for every answer."""
    return _watch_asks


@pytest.fixture
def rng():
    return random.Random(7)
