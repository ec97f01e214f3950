"""The rate limiter waits exactly as long as its buckets require (simulated clock)."""

import asyncio

from socialsim.llm.limiter import RateLimiter


def test_requests_per_minute_are_spaced_once_the_burst_is_spent():
    now = [0.0]
    slept = []

    async def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(rpm=60, clock=lambda: now[0], sleep=sleep)

    async def go():
        for _ in range(62):
            await limiter.acquire()

    asyncio.run(go())
    assert slept == [1.0, 1.0]  # 60 at once (a full bucket), then one per second


def test_tokens_per_minute_limit_large_requests():
    now = [0.0]

    async def sleep(seconds):
        now[0] += seconds

    limiter = RateLimiter(tpm=600, clock=lambda: now[0], sleep=sleep)

    async def go():
        await limiter.acquire(tokens=600)
        await limiter.acquire(tokens=300)

    asyncio.run(go())
    assert now[0] == 30.0  # 300 tokens at 10 tokens/s


def test_unlimited_never_waits():
    limiter = RateLimiter()
    asyncio.run(limiter.acquire(tokens=10**9))
    assert limiter.waited_s == 0
