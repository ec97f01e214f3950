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
    assert limiter.waited_s == 2.0  # every wait counted


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


def simulated(**limits):
    now = [0.0]

    async def sleep(seconds):
        now[0] += seconds

    return RateLimiter(**limits, clock=lambda: now[0], sleep=sleep), now


def test_a_request_larger_than_the_token_bucket_waits_for_a_full_bucket_not_forever():
    limiter, now = simulated(tpm=600)

    async def go():
        await limiter.acquire(tokens=600)  # the burst: the bucket is empty now
        await limiter.acquire(tokens=6000)  # ten buckets' worth: it is sent once the bucket is full

    asyncio.run(go())
    assert now[0] == 60.0 and limiter.waited_s == 60.0 and limiter.tokens.level == 0


def test_with_both_limits_a_request_waits_for_the_slower_bucket():
    limiter, now = simulated(rpm=60, tpm=60)  # 1 request/s, 1 token/s

    async def go():
        await limiter.acquire(tokens=60)  # both bursts spent on tokens; 59 requests left
        await limiter.acquire(tokens=5)  # requests allow it now, tokens in 5 s

    asyncio.run(go())
    assert now[0] == 5.0 and limiter.requests.level == 59.0  # refilled to its cap in the wait, then one spent


def test_the_shared_limiter_is_one_per_model_and_limits():
    from socialsim.llm.limiter import shared_limiter

    a = shared_limiter("openai/x", 60, None)
    assert shared_limiter("openai/x", 60, None) is a
    assert shared_limiter("openai/y", 60, None) is not a
    assert shared_limiter("openai/x", 30, None) is not a and shared_limiter("openai/x", 60, 1000) is not a
    assert (a.requests.capacity, a.tokens) == (60.0, None)
    assert shared_limiter("openai/z", None, 1000).tokens.capacity == 1000.0


def test_a_partly_full_bucket_waits_only_for_the_missing_tokens_and_a_call_without_a_count_uses_none():
    limiter, now = simulated(tpm=600)  # 10 tokens/s

    async def go():
        await limiter.acquire(tokens=400)  # 200 left
        await limiter.acquire()  # no token count: nothing taken from the bucket
        assert limiter.tokens.level == 200.0 and now[0] == 0.0
        await limiter.acquire(tokens=300)  # 100 missing: 10 s

    asyncio.run(go())
    assert now[0] == 10.0 and limiter.tokens.level == 0.0
