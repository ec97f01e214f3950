"""One background asyncio loop per process for all LLM calls.

Mesa calls ``model.step()`` synchronously, and the dashboard and notebooks may already run an
event loop in the calling thread. Running every phase on one long-lived loop in its own thread
works from any of them, and keeps litellm's async HTTP clients bound to a loop that never closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
from collections.abc import Coroutine
from typing import Any

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="socialsim-llm", daemon=True).start()
        return _loop


def _forget_loop_in_child() -> None:
    """A forked process (e.g. a batch_run worker) inherits the loop but not its thread, nor the
    calls in flight that raised the collector's threshold."""
    global _loop, _in_flight
    _loop = None
    if _in_flight:
        _in_flight = 0
        _restore_threshold()


# While calls are in flight, Python's collector runs every 700 objects made and not freed: a phase of
# 100 concurrent calls ran 24 young collections, 2 middle ones and, one phase in five, a full one of
# ~20 ms (12 ms a phase in all, in the loop's thread, which every call's reply waits for). Raised to
# this, 1 young collection a phase (3 ms): at 100 agents a phase's client CPU went from 2.5-3.8 to
# 2.2-2.7 ms a call and its wall time from 1.30-1.48x to 1.26-1.30x the floor (bench/bench_sdk.py
# --pin, 2026-11-28, 4 and 7 runs). Nothing is kept longer than a phase's garbage: what reference
# counting frees is freed at once.
PHASE_GC_THRESHOLD = 50_000
_in_flight = 0  # run_sync calls under way, in every thread
_threshold_lock = threading.Lock()
_saved_threshold: tuple[int, ...] = ()


@contextlib.contextmanager
def fewer_collections():
    """Raise the collector's first threshold to PHASE_GC_THRESHOLD while calls are in flight, and put
    it back when the last of them (from any thread) ends; a threshold set higher, or to 0 (no
    automatic collection), is left alone, and so is one the program changed in between."""
    global _in_flight, _saved_threshold
    with _threshold_lock:
        if _in_flight == 0:
            _saved_threshold = gc.get_threshold()
            if 0 < _saved_threshold[0] < PHASE_GC_THRESHOLD:
                gc.set_threshold(PHASE_GC_THRESHOLD, *_saved_threshold[1:])
        _in_flight += 1
    try:
        yield
    finally:
        with _threshold_lock:
            _in_flight -= 1
            if _in_flight == 0:
                _restore_threshold()


def _restore_threshold() -> None:
    if _saved_threshold and gc.get_threshold() == (PHASE_GC_THRESHOLD, *_saved_threshold[1:]):
        gc.set_threshold(*_saved_threshold)


os.register_at_fork(after_in_child=_forget_loop_in_child)


CANCEL_WAIT_S = 10.0  # how long an interrupted caller waits for the cancelled calls to unwind
WAKE_S = 0.2  # the waiting thread runs Python (and so its signal handlers) at least this often


def run_sync[T](coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on the background loop and wait for its result.

    If the waiting thread is interrupted (Ctrl-C, SIGTERM turned into KeyboardInterrupt), the
    coroutine is cancelled: calls in flight are abandoned, and none of them completes later to
    write to the tape or the ledger behind the caller's back. That holds from the moment the
    coroutine is handed to the loop, even for an interrupt that arrives during the hand-off."""
    loop = _background_loop()
    if threading.current_thread().name == "socialsim-llm":
        coro.close()
        raise RuntimeError("run_sync called from inside the LLM loop; await the coroutine instead")
    finished = threading.Event()

    async def tracked() -> T:
        try:
            return await coro
        finally:
            finished.set()

    tracker = tracked()
    future = None
    with fewer_collections():
        try:
            future = asyncio.run_coroutine_threadsafe(tracker, loop)
            while True:  # wake up now and then: a signal caught by another thread is handled here promptly
                try:
                    return future.result(timeout=WAKE_S)
                except TimeoutError:
                    if future.done():  # the coroutine's own TimeoutError, not the wait's
                        raise
                    continue
        except BaseException:
            if future is None or not future.done():  # interrupted: cancel on the loop, wait for it to unwind
                loop.call_soon_threadsafe(_cancel, tracker, coro, finished)
                finished.wait(CANCEL_WAIT_S)
            raise


def _cancel(tracker: Coroutine[Any, Any, Any], coro: Coroutine[Any, Any, Any], finished: threading.Event) -> None:
    """Cancel ``tracker``'s task on the loop. Queued after the hand-off (if the hand-off got as
    far as queueing it), so the task exists here unless it has finished or was never made."""
    for task in asyncio.all_tasks():
        if task.get_coro() is tracker:
            task.add_done_callback(lambda _: (coro.close(), finished.set()))  # also if it never started
            task.cancel()
            return
    tracker.close()
    coro.close()
    finished.set()
