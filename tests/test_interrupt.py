"""Ctrl-C during a step: the calls in flight are cancelled (none of them answers later behind the
run's back), the run is saved as interrupted, and --resume gives the uninterrupted run's frames."""

import os
import signal
import threading
import time

import pandas as pd
import pytest

from socialsim.llm.fake_server import FakeOpenAIServer
from socialsim.model.runner import RunConfig, run


def answer(messages):
    return "1"


def config(server):
    return RunConfig(arch="generic", model="openai/fake-model", steps=2, rng=4, api_base=server.api_base,
                     timeout_s=30.0, num_retries=0)


def tape_lines(run_dir):
    return len((run_dir / "tape.jsonl").read_text().splitlines()) if (run_dir / "tape.jsonl").exists() else 0


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")


@pytest.fixture(autouse=True)
def ctrl_c_raises():
    """Ctrl-C as a user's terminal delivers it (a pytest-xdist worker ignores SIGINT otherwise)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_cancels_the_calls_in_flight_and_the_run_resumes_to_the_uninterrupted_frames(tmp_path):
    with FakeOpenAIServer(policy=answer) as fast:
        run(config(fast), tmp_path / "clean", progress=False, preflight=False)

    with FakeOpenAIServer(policy=answer, delay_s=1.5) as slow:
        def ctrl_c_once_calls_are_in_flight():
            while slow.in_flight == 0:
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=ctrl_c_once_calls_are_in_flight, daemon=True).start()
        result = run(config(slow), tmp_path / "run", progress=False, preflight=False)
        assert result.status == "interrupted" and result.steps_done == 0
        recorded = tape_lines(tmp_path / "run")
        time.sleep(2.5)  # longer than the server takes: a call left running would have answered by now
        assert tape_lines(tmp_path / "run") == recorded
        assert result.model.llm.ledger.live_calls == 0  # the step's calls were abandoned, not completed

        slow.delay_s = 0.0
        resumed = run(config(slow), tmp_path / "run", progress=False, preflight=False)
    assert resumed.status == "completed"
    for name in ("model.parquet", "agents.parquet"):
        got = pd.read_parquet(tmp_path / "run" / name).drop(columns=["llm_latency_s"], errors="ignore")
        want = pd.read_parquet(tmp_path / "clean" / name).drop(columns=["llm_latency_s"], errors="ignore")
        pd.testing.assert_frame_equal(got, want, obj=name)


def test_a_timeout_raised_by_the_coroutine_itself_is_not_mistaken_for_waiting():
    from socialsim.llm.loop import run_sync

    async def times_out():
        raise TimeoutError("the provider took too long")

    with pytest.raises(TimeoutError, match="the provider took too long"):
        run_sync(times_out())


@pytest.mark.parametrize("hand_off", ["started", "queued", "never"])
def test_ctrl_c_during_the_hand_off_to_the_loop_still_cancels_the_coroutine(monkeypatch, hand_off):
    """A Ctrl-C can land while run_sync is still handing the coroutine to the loop (before it has
    the future to cancel): the loop may have started it, have it queued, or never have got it. It
    is cancelled if it started and closed otherwise, and run_sync does not wait for it in vain."""
    import asyncio
    import inspect

    from socialsim.llm import loop

    events: list[str] = []

    async def phase():
        events.append("started")
        try:
            await asyncio.sleep(0.5)  # the calls in flight
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        events.append("completed")

    real = asyncio.run_coroutine_threadsafe
    monkeypatch.setattr(loop, "CANCEL_WAIT_S", 3.0)

    def interrupted_hand_off(coroutine, event_loop):
        if hand_off == "queued":  # the loop busy: the coroutine's task is made but has not run yet
            event_loop.call_soon_threadsafe(time.sleep, 0.3)
        if hand_off != "never":
            real(coroutine, event_loop)
        if hand_off == "started":
            time.sleep(0.1)  # the loop starts the coroutine before the caller gets its future
        raise KeyboardInterrupt

    monkeypatch.setattr(loop.asyncio, "run_coroutine_threadsafe", interrupted_hand_off)
    coroutine = phase()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        loop.run_sync(coroutine)
    assert time.monotonic() - began < loop.CANCEL_WAIT_S  # it knew when the coroutine was done with
    time.sleep(0.7)  # longer than the coroutine takes: left running, it would have completed
    assert events == (["started", "cancelled"] if hand_off == "started" else [])
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED


def test_run_sync_refuses_to_block_the_llm_loop_it_would_wait_for():
    """Called on the LLM loop's thread, run_sync would wait for the loop it blocks: it refuses, and
    closes the coroutine so that nothing warns later that it was never awaited."""
    import inspect

    from socialsim.llm.loop import run_sync

    async def inner():
        return 1

    coroutine = inner()
    outcome: list[BaseException | int] = []

    def on_the_loops_thread():  # a stand-in thread of that name: the real one would deadlock if let through
        try:
            outcome.append(run_sync(coroutine))
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=on_the_loops_thread, name="socialsim-llm")
    thread.start()
    thread.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError)
    assert "from inside the LLM loop" in str(outcome[0])
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED


def test_ctrl_c_caught_by_another_thread_still_reaches_the_waiting_caller_promptly():
    """The OS may hand a process's SIGINT to any thread; Python runs the handler in the main thread
    the next time it runs Python code, so the waiting caller wakes up now and then to let it."""
    import asyncio

    from socialsim.llm import loop

    events: list[str] = []

    async def phase():
        events.append("started")
        try:
            await asyncio.sleep(3.0)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        events.append("completed")

    loop.run_sync(asyncio.sleep(0))  # the loop's thread is running
    loop_thread = next(t for t in threading.enumerate() if t.name == "socialsim-llm")

    def ctrl_c_to_the_loop_thread():
        while not events:
            time.sleep(0.01)
        signal.pthread_kill(loop_thread.ident, signal.SIGINT)

    threading.Thread(target=ctrl_c_to_the_loop_thread, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        loop.run_sync(phase())
    assert events == ["started", "cancelled"]
