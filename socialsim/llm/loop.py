"""One background asyncio loop per process for all LLM calls.

Mesa calls ``model.step()`` synchronously, and the dashboard and notebooks may already run an
event loop in the calling thread. Running every phase on one long-lived loop in its own thread
works from any of them, and keeps litellm's async HTTP clients bound to a loop that never closes.
"""

from __future__ import annotations

import asyncio
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
    """A forked process (e.g. a batch_run worker) inherits the loop but not its thread."""
    global _loop
    _loop = None


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
