"""The rate limiter keeps every 60 s, wherever they start, within --rpm and --tpm, and waits no longer
than that needs (simulated clock)."""

import asyncio
import logging
import random

import pytest

from socialsim.llm.limiter import RateLimiter


def simulated(**limits):
    now = [0.0]
    slept = []

    async def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(**limits, clock=lambda: now[0], sleep=sleep)
    limiter.slept = slept
    return limiter, now


def busiest_minute(sent):
    """The most that any 60 s hold, [t, t + 60) for every t: (time, amount) pairs. A window holding
    anything can start at its first send, so the sends' own times are every window there is."""
    return max(sum(amount for at, amount in sent if start <= at < start + 60) for start, _ in sent)


def test_a_minutes_requests_go_at_once_and_the_next_waits_until_the_first_is_a_minute_old():
    """A bucket that started full sent 60 at once and refilled one a second: 61 in the first minute."""
    limiter, now = simulated(rpm=60)

    async def go():
        sent = []
        for _ in range(62):
            await limiter.acquire()
            sent.append(now[0])
        return sent

    sent = asyncio.run(go())
    assert sent == [0.0] * 60 + [60.0, 60.0]  # the 61st once the first 60 leave the window, the 62nd with it
    assert limiter.slept == [60.0] and limiter.waited_s == 60.0  # every wait counted


def test_a_request_waits_only_until_enough_of_the_oldest_have_left():
    limiter, now = simulated(rpm=3)

    async def go():
        sent = []
        for at in (0.0, 10.0, 20.0, 25.0, 25.0, 80.0):
            now[0] = max(now[0], at)  # each asks at its time, or once the one before it went
            await limiter.acquire()
            sent.append(now[0])
        return sent

    # the 4th when the 1st leaves, the 5th when the 2nd does; the 6th asks at 80 s, as the 3rd leaves
    assert asyncio.run(go()) == [0.0, 10.0, 20.0, 60.0, 70.0, 80.0]


def concurrent_demand(limiter, now, tokens, seconds):
    """Callers asking all the time (one request after another, each of ``tokens``) for ``seconds``
    of the simulated clock: every send, (time, tokens). ``limiter.most_remembered``: the most sends
    its windows held at once."""
    sent = []
    limiter.most_remembered = 0

    async def caller(size):
        while now[0] < seconds:
            await limiter.acquire(tokens=size)
            sent.append((now[0], size))
            windows = [w for w in (limiter.requests, limiter.tokens) if w is not None]
            limiter.most_remembered = max(limiter.most_remembered, *(len(w.sent) for w in windows))
            await asyncio.sleep(0)  # the others' turn

    async def go():
        await asyncio.gather(*(caller(size) for size in tokens))

    asyncio.run(go())
    return sent


def test_over_three_minutes_of_constant_demand_no_60_seconds_hold_more_than_rpm_or_tpm():
    """The old buckets let 2x through in the first minute (a full bucket, then its refill)."""
    limiter, now = simulated(rpm=15, tpm=3600)  # (numbers the old buckets' waits added up exactly on)
    sent = concurrent_demand(limiter, now, tokens=[300, 120, 0, 480], seconds=180)
    assert busiest_minute([(at, 1) for at, _ in sent]) == 15
    assert 3600 - 480 < busiest_minute(sent) <= 3600  # kept, and used: no room left for the largest
    assert limiter.most_remembered <= 15  # a minute's sends remembered, no more


def test_over_three_minutes_the_rpm_alone_is_kept_and_filled():
    limiter, now = simulated(rpm=15)
    sent = concurrent_demand(limiter, now, tokens=[0] * 5, seconds=180)
    assert busiest_minute([(at, 1) for at, _ in sent]) == 15
    times = [at for at, _ in sent]
    # a minute's quota at the start of each minute
    assert times[:45] == [0.0] * 15 + [60.0] * 15 + [120.0] * 15 and set(times[45:]) == {180.0}
    assert limiter.most_remembered == 15


@pytest.mark.parametrize("seed", range(5))
def test_requests_arriving_at_random_keep_every_60_seconds_within_both_limits_and_wait_no_longer(seed):
    """Over three minutes, requests of 0-600 tokens arriving every 0-6 s (more than either limit): every window within both
    limits, and a request held back goes the moment an old one leaves the window, not later."""
    rng = random.Random(seed)
    limiter, now = simulated(rpm=15, tpm=3600)  # (numbers the old buckets' waits added up exactly on)
    arrivals, at = [], 0
    while at < 180:
        arrivals.append((at, rng.randrange(0, 601, 60)))
        at += rng.randrange(7)

    async def go():
        sent = []
        for arrival, size in arrivals:
            now[0] = max(now[0], arrival)
            await limiter.acquire(tokens=size)
            sent.append((now[0], size))
        return sent

    sent = asyncio.run(go())
    assert busiest_minute([(at, 1) for at, _ in sent]) <= 15 and busiest_minute(sent) <= 3600
    for (arrival, _), (at, _), before in zip(arrivals, sent, [None, *sent], strict=False):
        if at > arrival and (before is None or at > before[0]):  # held back by the limiter, not the queue
            assert at - 60 in {t for t, _ in sent}  # an old one left just then
    assert sum(at > arrival for (arrival, _), (at, _) in zip(arrivals, sent, strict=True)) > 10  # limits met


def test_tokens_are_counted_by_size_and_wait_for_as_many_of_the_oldest_as_make_room():
    limiter, now = simulated(tpm=600)

    async def go():
        await limiter.acquire(tokens=400)
        await limiter.acquire()  # no token count: nothing taken from the window
        assert now[0] == 0.0 and limiter.tokens.total == 400
        now[0] = 30.0
        await limiter.acquire(tokens=200)  # fits beside the 400: at once
        assert now[0] == 30.0
        await limiter.acquire(tokens=300)  # the 400 must leave (at 60 s); the 200 may stay
        assert now[0] == 60.0 and limiter.tokens.total == 500
        await limiter.acquire(tokens=200)  # the 200 sent at 30 s leaves at 90 s
        assert now[0] == 90.0
        waits = len(limiter.slept)
        await limiter.acquire(tokens=600)  # both the 300 (leaving at 120 s) and the 200 (150 s) must leave
        assert now[0] == 150.0 and limiter.slept[waits:] == [60.0]  # one wait, until the later of them

    asyncio.run(go())


def test_with_both_limits_a_request_waits_for_the_later_of_the_two():
    limiter, now = simulated(rpm=60, tpm=60)

    async def go():
        await limiter.acquire(tokens=60)  # the tokens' minute is full; 59 requests are left
        await limiter.acquire()  # no tokens: the requests allow it now
        assert now[0] == 0.0
        await limiter.acquire(tokens=5)  # tokens in 60 s

    asyncio.run(go())
    assert now[0] == 60.0 and len(limiter.requests.sent) == 1  # the two at 0 s left the window, one sent now


def test_a_request_larger_than_tpm_waits_for_an_empty_minute_goes_alone_and_holds_its_minutes(caplog):
    """It never fits a minute: it took a full bucket's worth, silently, and left room for more at once."""
    limiter, now = simulated(tpm=600)
    limiter.model = "openai/x"

    sizes = (600, 100, 1800, 0, 50, 1800)

    async def go():
        sent = []
        for size in sizes:
            await limiter.acquire(tokens=size)
            sent.append(now[0])
        return sent

    with caplog.at_level(logging.WARNING, logger="socialsim.llm"):
        sent = asyncio.run(go())
    # a whole --tpm fits, alone; the 1800 waits for the 100 to leave (120 s), then holds three minutes (a
    # tpm's rate kept, not just a window) except from a request with no token count
    assert sent == [0.0, 60.0, 120.0, 120.0, 300.0, 360.0]
    assert busiest_minute(list(zip(sent, sizes, strict=True))) == 1800  # alone in its minute
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1  # once for the model, however many; none for one of exactly --tpm
    assert warned[0].startswith("openai/x: a request of 1800 tokens is more than --tpm 600 allows in a minute")
    assert "the next waits 180 s" in warned[0]


def test_a_request_that_would_fit_waits_behind_an_earlier_one_still_waiting():
    """First come, first served: a small request never overtakes a larger one held back, which would
    otherwise wait for as long as smaller ones keep arriving."""
    now, wakes = [0.0], []

    async def sleep(seconds):  # a wait that lets other callers run until the test moves the clock on
        woken = asyncio.get_running_loop().create_future()
        wakes.append((now[0] + seconds, woken))
        await woken

    limiter = RateLimiter(tpm=600, clock=lambda: now[0], sleep=sleep)
    sent = []

    async def ask(name, tokens):
        await limiter.acquire(tokens=tokens)
        sent.append((name, now[0]))

    async def go():
        await ask("first", 500)
        held = asyncio.create_task(ask("held", 400))  # waits for the 500 to leave at 60 s
        await asyncio.sleep(0)
        small = asyncio.create_task(ask("small", 50))  # would fit beside the 500 now
        for _ in range(3):
            await asyncio.sleep(0)
        assert sent == [("first", 0.0)]
        while not (held.done() and small.done()):  # the clock moved on to each wait's end, in turn
            await asyncio.sleep(0)
            if wakes:
                until, woken = wakes.pop(0)
                now[0] = until
                woken.set_result(None)

    asyncio.run(go())
    assert sent == [("first", 0.0), ("held", 60.0), ("small", 60.0)]


def test_an_rpm_under_one_sends_one_request_every_60_over_rpm_seconds():
    """A sweep's rpm shared out over more processes than it has requests a minute (rpm 1 on 4: 0.25 each)."""
    limiter, now = simulated(rpm=0.25)

    async def go():
        sent = []
        for _ in range(3):
            await limiter.acquire()
            sent.append(now[0])
        return sent

    assert asyncio.run(go()) == [0.0, 240.0, 480.0]


def test_unlimited_never_waits():
    limiter = RateLimiter()
    asyncio.run(limiter.acquire(tokens=10**9))
    assert limiter.waited_s == 0


def test_the_shared_limiter_is_one_per_model_and_limits():
    from socialsim.llm.limiter import shared_limiter

    a = shared_limiter("openai/x", 60, None)
    assert shared_limiter("openai/x", 60, None) is a
    assert shared_limiter("openai/y", 60, None) is not a
    assert shared_limiter("openai/x", 30, None) is not a and shared_limiter("openai/x", 60, 1000) is not a
    assert (a.requests.quota, a.tokens, a.model) == (60.0, None, "openai/x")
    assert shared_limiter("openai/z", None, 1000).tokens.quota == 1000.0


@pytest.mark.parametrize("start", [0.0, 1e6 + 0.1])
def test_a_window_edge_on_a_clock_far_from_zero_is_kept_exactly(start):
    """time.monotonic is seconds since boot: the minute's edge is still exact there."""
    limiter, now = simulated(rpm=2)
    now[0] = start

    async def go():
        sent = []
        for _ in range(5):
            await limiter.acquire()
            sent.append(now[0] - start)
        return sent

    sent = asyncio.run(go())
    assert busiest_minute([(at, 1) for at in sent]) == 2
    assert sent == pytest.approx([0.0, 0.0, 60.0, 60.0, 120.0])
