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


def run_sync[T](coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on the background loop and wait for its result."""
    loop = _background_loop()
    if threading.current_thread().name == "socialsim-llm":
        coro.close()
        raise RuntimeError("run_sync called from inside the LLM loop; await the coroutine instead")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()
