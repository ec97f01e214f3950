"""A shared requests-per-minute and tokens-per-minute limiter (a sliding-window log), and the default
number of calls in flight at once.

``--rpm N`` means never more than N requests in any 60 seconds (and ``--tpm`` likewise for tokens),
which is how a provider counts its per-minute quota. The limiter remembers when each request and its
tokens went out in the last minute and holds the next until the oldest have left the window. (Token
buckets that start full, as before, sent a whole minute's quota at once and refilled as much again
within that minute: up to twice the quota, which a provider refuses with 429s.) A request of more
tokens than ``--tpm`` never fits a minute: it waits until nothing else was sent in the last minute,
goes alone, and holds the window for as many minutes as it is quotas (logged once per model); an
``--rpm`` under 1 likewise sends one request every 60/rpm seconds.

All gateways in a process that talk to the same model share one limiter, so a sweep's parallel
models never exceed a provider's quota together; a sweep on several processes gives each its share
of the quota (``batch.sweeps.process_limits``). The clock and sleep are injectable for tests.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable

log = logging.getLogger("socialsim.llm")

# Calls in flight at once (--concurrency): enough for a phase of 100 agents to be asked in one round,
# so a step waits about one provider latency, not several. A provider's quota is stated with
# --rpm/--tpm (shared by all gateways in a process); a local server with few slots queues the rest.
DEFAULT_CONCURRENCY = 128

WINDOW_S = 60.0  # a quota is per minute: no 60 s, wherever they start, hold more than it


class _Window:
    """What went out in the last minute against one quota: (when it leaves the window, amount), oldest
    first, and their sum. Holds at most ``quota`` (or one entry larger than it)."""

    def __init__(self, quota: float) -> None:
        self.quota = float(quota)
        self.sent: deque[tuple[float, float]] = deque()
        self.total = 0.0

    def forget(self, now: float) -> None:
        while self.sent and self.sent[0][0] <= now:
            self.total -= self.sent.popleft()[1]

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` fits in the window (0 if it does now). More than the quota fits
        only in an empty window."""
        self.forget(now)
        excess = self.total + amount - self.quota
        if amount <= 0 or excess <= 0:
            return 0.0
        freed = 0.0
        for leaves, size in self.sent:  # the oldest leave first
            freed += size
            if freed >= excess:
                return leaves - now
        return self.sent[-1][0] - now if self.sent else 0.0

    def take(self, amount: float, now: float) -> None:
        """Records ``amount`` sent now: it stays a minute, or as many minutes as it is quotas."""
        if amount > 0:
            self.sent.append((now + WINDOW_S * max(1.0, amount / self.quota), amount))
            self.total += amount


class RateLimiter:
    """Sliding windows of a minute for requests and tokens; ``None`` means unlimited. ``waited_s``:
    the seconds requests were held back in all."""

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        model: str = "the model",
    ) -> None:
        self.clock, self.sleep, self.model = clock, sleep, model
        self.requests = _Window(rpm) if rpm else None
        self.tokens = _Window(tpm) if tpm else None
        self.waited_s = 0.0
        self._warned = False
        self._lock: asyncio.Lock | None = None

    async def acquire(self, tokens: int = 0) -> None:
        if self.requests is None and self.tokens is None:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        if self.tokens is not None and tokens > self.tokens.quota and not self._warned:
            self._warned = True
            log.warning("%s: a request of %d tokens is more than --tpm %g allows in a minute (a sweep's tpm: "
                        "each process's share): it is sent alone, once nothing else was in the last minute, and "
                        "the next waits %.0f s (a provider may refuse it; a higher --tpm or a shorter prompt or "
                        "max_tokens avoids this)", self.model, tokens, self.tokens.quota,
                        WINDOW_S * tokens / self.tokens.quota)
        async with self._lock:  # first come, first served
            while True:
                now = self.clock()
                delay = max(window.wait_for(amount, now)
                            for window, amount in ((self.requests, 1), (self.tokens, tokens)) if window is not None)
                if delay <= 0:
                    break
                self.waited_s += delay
                await self.sleep(delay)
            for window, amount in ((self.requests, 1), (self.tokens, tokens)):
                if window is not None:
                    window.take(amount, now)


_SHARED: dict[str, RateLimiter] = {}
# A forked worker starts with fresh limiters: the parent's belong to the parent's event loop.
os.register_at_fork(after_in_child=_SHARED.clear)


def shared_limiter(model: str, rpm: float | None, tpm: float | None) -> RateLimiter:
    """The process-wide limiter of one model (created on first use with these limits)."""
    key = f"{model}|{rpm}|{tpm}"
    if key not in _SHARED:
        _SHARED[key] = RateLimiter(rpm, tpm, model=model)
    return _SHARED[key]
