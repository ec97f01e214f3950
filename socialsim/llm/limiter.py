"""A shared requests-per-minute and tokens-per-minute limiter (token buckets), and the default
number of calls in flight at once.

All gateways in a process that talk to the same model share one limiter, so a sweep's parallel
models never exceed a provider's quota together; a sweep on several processes gives each its share
of the quota (``batch.sweeps.process_limits``). The clock and sleep are injectable for tests.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable

# Calls in flight at once (--concurrency): enough for a phase of 100 agents to be asked in one round,
# so a step waits about one provider latency, not several. A provider's quota is stated with
# --rpm/--tpm (shared by all gateways in a process); a local server with few slots queues the rest.
DEFAULT_CONCURRENCY = 128


class _Bucket:
    def __init__(self, per_minute: float, now: float) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self.stamp = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` is available (0 if it is now)."""
        amount = min(amount, self.capacity)
        return 0.0 if self.level >= amount else (amount - self.level) / self.rate


class RateLimiter:
    """Token buckets for requests/min and tokens/min; ``None`` means unlimited."""

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.clock, self.sleep = clock, sleep
        now = clock()
        self.requests = _Bucket(rpm, now) if rpm else None
        self.tokens = _Bucket(tpm, now) if tpm else None
        self.waited_s = 0.0
        self._lock: asyncio.Lock | None = None

    async def acquire(self, tokens: int = 0) -> None:
        if self.requests is None and self.tokens is None:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # first come, first served
            while True:
                now = self.clock()
                waits = []
                for bucket, amount in ((self.requests, 1), (self.tokens, tokens)):
                    if bucket is not None:
                        bucket.refill(now)
                        waits.append(bucket.wait_for(amount))
                delay = max(waits)
                if delay <= 0:
                    break
                self.waited_s += delay
                await self.sleep(delay)
            if self.requests is not None:
                self.requests.level -= 1
            if self.tokens is not None:
                self.tokens.level -= min(tokens, self.tokens.capacity)


_SHARED: dict[str, RateLimiter] = {}
# A forked worker starts with fresh limiters: the parent's belong to the parent's event loop.
os.register_at_fork(after_in_child=_SHARED.clear)


def shared_limiter(model: str, rpm: float | None, tpm: float | None) -> RateLimiter:
    """The process-wide limiter of one model (created on first use with these limits)."""
    key = f"{model}|{rpm}|{tpm}"
    if key not in _SHARED:
        _SHARED[key] = RateLimiter(rpm, tpm)
    return _SHARED[key]
