"""The gateway: the one place where operations become LLM calls (through litellm) or rules.

``ask`` answers one typed operation for one agent: route -> (rules | tape | litellm) -> parse ->
validate -> one repair round-trip -> documented fallback, with every decision written to the
ledger and every live call to the tape. ``run_phase`` runs one phase's coroutines for all agents
concurrently and returns their results in the agents' fixed order, so a step's outcome never
depends on which call finished first.

litellm is imported (through ``litellm_setup``, which configures it) on the first call that needs it:
a live call, a price or a capability lookup. A run on the rules or a replay from a tape never
imports it, and starts some 4 s of CPU sooner.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import logging
import random
import time
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from socialsim.llm.deployments import Deployments, load_deployments
from socialsim.llm.ledger import Ledger, LedgerRow
from socialsim.llm.limiter import DEFAULT_CONCURRENCY, RateLimiter, shared_limiter
from socialsim.llm.loop import run_sync
from socialsim.llm.operation import Answer, Operation
from socialsim.llm.questions import AnswerError, QuestionKind, RecordQuestion
from socialsim.llm.redact import cut, no_credential_in_url, redact
from socialsim.llm.routing import RULES, RouteTable
from socialsim.llm.tape import Tape, TapeMiss, TapeRecord, answered, call_key

log = logging.getLogger("socialsim.llm")


_UNPRICED: set[str] = set()  # models a call found missing from litellm's cost map (said once)

# An endpoint for provider models (vLLM, Ollama, a proxy): never with a key in it (runs record it).
ApiBase = Annotated[str, AfterValidator(no_credential_in_url)]
# A user's price for a model litellm cannot price: USD per 1M (prompt, completion) tokens, each a
# finite number >= 0 (--price on the command line, ``price:`` in a sweep file).
UnitPrice = tuple[Annotated[float, Field(ge=0, allow_inf_nan=False)], Annotated[float, Field(ge=0, allow_inf_nan=False)]]

# A hung provider costs at most DEFAULT_TIMEOUT_S x (1 + DEFAULT_RETRIES) per call; both can be set
# per run (--timeout, --retries) and a slow local model may need a longer timeout.
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 1
# The circuit breaker: this many live calls failing in a row (after their retries) is an outage,
# not bad luck; the run stops, saves and tells how to resume instead of falling back for hours.
DEFAULT_BREAKER = 5
ORDER_PROBE_S = 0.003  # the longest pause --check-order puts before an answer
CHARS_PER_TOKEN_CAP = 8  # a reply longer than 8 characters per allowed token is cut to that size


class ProviderOutage(RuntimeError):
    """The circuit breaker tripped: ``breaker`` live calls in a row failed. The run stops cleanly
    (everything recorded is saved) and can be resumed when the provider is back."""


class ProviderError(RuntimeError):
    """The model could not be reached or refused the call (after its retries)."""


class EmptyReply(RuntimeError):
    """The reply (kept on the tape) that tripped the breaker by answering nothing: the cause of that
    ProviderOutage, so the call's row is kept as its replay keeps it."""

    def __init__(self, completion: Completion) -> None:
        super().__init__("an empty reply")
        self.completion = completion


def _provider_exceptions() -> tuple[type[BaseException], ...]:
    """What a provider failure looks like: litellm maps every provider error onto openai's
    exception classes; transport failures surface as httpx, OS or timeout errors. Anything
    else (a TypeError, a KeyError) is a programming error and raises."""
    import httpx
    import openai

    import socialsim.llm.litellm_setup  # noqa: F401  (configured first; a failure comes from a call: loaded)

    router = importlib.import_module("litellm.types.router")
    # a pool whose every deployment is cooling down after failures (--deployments): an outage too
    return (openai.OpenAIError, httpx.HTTPError, OSError, TimeoutError, router.RouterRateLimitError,
            router.RouterRateLimitErrorBasic)


def token_cost(model: str, prompt_tokens: int, completion_tokens: int,
               price: UnitPrice | None = None) -> float | None:
    """USD for these tokens: 0 for the embedded engine, else litellm's local cost map, else
    ``price`` (USD per 1M prompt, completion tokens); None when neither knows the model. The one
    pricing rule for charging a call, reserving budget before it and projecting a protocol."""
    if is_embedded(model):
        return 0.0
    units = unit_prices(model)
    usd = (prompt_tokens * units[0] + completion_tokens * units[1]) / 1e6 if units else None
    if not usd and price:  # unknown to litellm (or listed at $0): the user's --price
        usd = (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6
    return usd


_MAPPED_UNPRICED: set[str] = set()  # models this process added to litellm's map, without a price


def map_unknown_model(model: str) -> None:
    """Add a model litellm's cost map lacks (a name served by vLLM or Ollama, say) to that map,
    once per process, without a price. litellm looks a call's model up about a dozen times (cost,
    logging, capabilities), and each miss tries some sixty name generalisations: 0.25-0.5 ms of
    client CPU a call (bench/bench_sdk.py). The entry claims no capability (litellm answers no
    for an unknown model too), and our own pricing still treats the model as unpriced, so the
    run's --price and the "no price" warning apply as before."""
    if is_embedded(model) or model in _MAPPED_UNPRICED or unit_prices(model) is not None:
        return  # unit_prices is None only where litellm's map has no entry at all
    from socialsim.llm.litellm_setup import litellm

    try:
        _, provider, _, _ = litellm.get_llm_provider(model)
    except Exception:
        return  # litellm cannot route it either: the call itself will say so
    litellm.register_model({model: {"litellm_provider": provider, "mode": "chat",
                                    "input_cost_per_token": 0.0, "output_cost_per_token": 0.0}})
    _MAPPED_UNPRICED.add(model)


@functools.cache
def unit_prices(model: str) -> tuple[float, float] | None:
    """USD per 1M (prompt, completion) tokens from litellm's local cost map, looked up once per
    model (a lookup costs milliseconds, a miss more: per call it was most of our client CPU).
    Priced at an ordinary prompt size: a provider's surcharge above 128k tokens is not applied.
    None for a model the map lacks, including one ``map_unknown_model`` added without a price or a
    Router entered with none."""
    from socialsim.llm.litellm_setup import litellm

    if model in _MAPPED_UNPRICED:
        return None
    entry = litellm.model_cost.get(model)
    if isinstance(entry, dict) and not any("cost" in field for field in entry):
        return None  # a Router's entry for its deployments' model: no price, which litellm answers as $0
    try:
        prompt_usd, _ = litellm.cost_per_token(model=model, prompt_tokens=1000, completion_tokens=0)
        _, completion_usd = litellm.cost_per_token(model=model, prompt_tokens=0, completion_tokens=1000)
    except Exception:
        return None
    return float(prompt_usd) * 1000, float(completion_usd) * 1000


def json_schema_format(question: RecordQuestion) -> dict[str, Any]:
    """The ``response_format`` that asks a provider for a record of this question's schema."""
    return {"response_format": {"type": "json_schema",
                                "json_schema": {"name": question.model.__name__, "schema": question.json_schema()}}}


@dataclass
class Completion:
    raw: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost_usd: float
    live: bool
    truncated: bool = False  # cut at max_tokens: finish_reason "length", or our reply cap

    @classmethod
    def taped(cls, record: TapeRecord) -> Completion:
        """A recorded answer, free: this run's tape, or another run's answer on a sweep's tape."""
        return cls(record.raw, record.prompt_tokens, record.completion_tokens, record.latency_s, record.cost_usd,
                   False, record.finish_reason == "length")


@dataclass
class Branch:
    """Where calls are being asked: a path prefix and how many calls it has asked so far. Each
    agent's coroutine in a phase, and each coroutine of ``Gateway.gather``, gets its own, so a
    call's path depends on the code's structure, never on which concurrent call finished first."""

    prefix: tuple[int, ...]
    calls: int = 0

    def next(self) -> tuple[int, ...]:
        self.calls += 1
        return (*self.prefix, self.calls - 1)


_BRANCH: ContextVar[Branch | None] = ContextVar("socialsim_branch", default=None)
# what a pool's Router awaits before each request it sends within one of the gateway's attempts (see _router)
_BEFORE_POOL_REQUEST: ContextVar[Callable[[], Awaitable[None]] | None] = ContextVar("socialsim_pool_request",
                                                                                   default=None)
OUTSIDE_PHASES = 2**31  # the path prefix of calls made outside any phase (e.g. a report's embeddings)


@dataclass
class _EmbedOp:
    """What the ledger needs to know of an embedding request (it is not a typed question)."""

    name: str
    module: str = "embedding"


def is_embedded(model: str) -> bool:
    return model.startswith("local/")


RETRY_AFTER_MAX_S = 60.0  # a provider's Retry-After is kept up to this (the OpenAI SDK's bound); longer: our own wait


def _retry_wait(exc: BaseException, retry: int) -> float:
    """Seconds before retry ``retry + 1``: what a rate-limit refusal's Retry-After asks (up to a minute),
    else as litellm's own retries waited: the first at once, and after a rate-limit refusal 1, 2, 4, 8
    then 10 s (its ``exponential_backoff_retry``); other errors none. A pool whose every deployment is
    cooling down after failures (--deployments) is asked again once its cooldown is over (up to a minute):
    asked at once, it refuses at once again."""
    import openai

    cooling = getattr(exc, "cooldown_time", None)
    if (isinstance(exc, importlib.import_module("litellm.types.router").RouterRateLimitError)
            and isinstance(cooling, int | float) and 0 <= cooling <= RETRY_AFTER_MAX_S):
        return float(cooling)
    if not isinstance(exc, openai.RateLimitError):
        return 0.0
    asked = _retry_after(exc)
    if asked is not None:
        return asked
    return min(10.0, 2.0 ** (retry - 1)) if retry else 0.0


def _retry_after(exc: BaseException) -> float | None:
    """The seconds a provider's refusal asks to wait (``retry-after-ms``, or ``retry-after`` in seconds
    or as a date), when it asks for 0 to RETRY_AFTER_MAX_S; None otherwise. litellm keeps the reply's
    headers on its exception (``litellm_response_headers``); the OpenAI SDK's on its ``response``."""
    import email.utils

    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
    seconds = None
    try:
        if "retry-after-ms" in lowered:
            seconds = float(lowered["retry-after-ms"]) / 1000
        elif "retry-after" in lowered:
            text = lowered["retry-after"]
            try:
                seconds = float(text)
            except ValueError:
                when = email.utils.parsedate_to_datetime(text)
                seconds = when.timestamp() - time.time()
    except (ValueError, TypeError, OverflowError):
        return None
    return seconds if seconds is not None and 0 <= seconds <= RETRY_AFTER_MAX_S else None


FINAL_REFUSALS = {400, 401, 403, 404, 422}  # HTTP statuses the same request gets again


def _worth_retrying(exc: BaseException) -> bool:
    """A refusal that the same request gets again (a bad request, a bad key, no such model, no access:
    400, 401, 403, 404, 422) is not retried, as the OpenAI SDK does not; a rate limit, a timeout, a
    conflict, a server's or the connection's failure is."""
    # by the status, not the class: litellm gives e.g. a 403 as its APIError, not PermissionDeniedError
    return getattr(exc, "status_code", None) not in FINAL_REFUSALS


def request_tokens(texts: Sequence[str], reply_tokens: int = 0) -> int:
    """What a request takes from --tpm: its texts at about 4 characters a token, and its longest reply."""
    return sum(len(t) for t in texts) // 4 + reply_tokens


async def with_retries[T](attempt: Callable[[], Awaitable[T]], retries: int, limiter: RateLimiter,
                          tokens: int, slot: Callable[[], AbstractAsyncContextManager[Any]] = nullcontext,
                          ) -> tuple[T, float]:
    """``attempt()`` made up to ``retries + 1`` times (a provider error after the last raises), each
    attempt a request the provider counts: it takes its request and ``tokens`` from ``limiter`` first,
    a retry too, after ``_retry_wait``. Each attempt holds a ``slot()`` (a --concurrency place) while
    it waits for the limiter and is made; the wait between attempts (up to a minute's Retry-After)
    holds none, so other calls go meanwhile. The answer, and the seconds since the first attempt began."""
    start = None
    for retry in range(retries + 1):
        async with slot():
            await limiter.acquire(tokens=tokens)
            start = time.perf_counter() if start is None else start
            try:
                return await attempt(), time.perf_counter() - start
            except _provider_exceptions() as exc:
                if retry == retries or not _worth_retrying(exc):
                    raise
                wait = _retry_wait(exc, retry)
        await asyncio.sleep(wait)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _each_request_limited[T](attempt: Callable[[], Awaitable[T]], limiter: RateLimiter,
                              tokens: int) -> Callable[[], Awaitable[T]]:
    """A pool's attempt, which its Router may send to several deployments: once one fails, its failover
    (``enable_weighted_failover``, a file's ``fallbacks``) asks another within the attempt, with no retry
    of ours. ``with_retries`` took the first request from ``limiter``; each further one takes its own
    request and ``tokens`` there, in the attempt's --concurrency place (see ``_limit_each_request``)."""
    async def limited() -> T:
        sent = 0

        async def before_request() -> None:
            nonlocal sent
            sent += 1
            if sent > 1:
                await limiter.acquire(tokens=tokens)

        token = _BEFORE_POOL_REQUEST.set(before_request)
        try:
            return await attempt()
        finally:
            _BEFORE_POOL_REQUEST.reset(token)

    return limited


def _limit_each_request(router: Any) -> None:
    """``router`` awaits the attempt's ``_BEFORE_POOL_REQUEST`` before each request it sends: litellm's Router
    runs its pre-call checks before every deployment's chat or embedding request, its failover's too. (A
    test's stand-in without them is left alone; the Router is held weakly: no cycle keeps it.)"""
    checks = getattr(type(router), "async_routing_strategy_pre_call_checks", None)
    if checks is None:
        return
    held = weakref.ref(router)

    async def before_each_request(*args: Any, **kwargs: Any) -> Any:
        before = _BEFORE_POOL_REQUEST.get()
        if before is not None:
            await before()
        return await checks(held(), *args, **kwargs)

    router.async_routing_strategy_pre_call_checks = before_each_request


def _attempts_said(exc: BaseException, retries: int) -> str:
    """What a failed call's error adds about its attempts (nothing for a single one: no retries, or
    an error not worth retrying)."""
    return f"; after {retries + 1} attempts" if retries and _worth_retrying(exc) else ""


async def _start(coroutine: Awaitable[Any], started: list[asyncio.Task]) -> None:
    """Start one agent's coroutine of a phase, add it to ``started`` and give it one turn of the
    loop before the next (listed before the turn: a phase cancelled during it cancels this one too).

    The task runs at once up to its first wait (a decision by the rules finishes there, with no
    scheduling at all). litellm prepares each request in a worker thread; the extra turn lets this
    one go out while the next is being prepared. Started all at once, every request waited for
    all the phase's preparations (the first byte of 100 left after about 80 ms) and the replies
    came back in one burst, so their processing added up at the end (bench/bench_sdk.py)."""
    task = asyncio.eager_task_factory(asyncio.get_running_loop(), coroutine)
    started.append(task)
    if not task.done():
        await asyncio.sleep(0)


class Gateway:
    """Answers typed operations for a model's agents; owns routes, tape, ledger and limits."""

    def __init__(
        self,
        routes: RouteTable | None = None,
        tape: Tape | None = None,
        ledger: Ledger | None = None,
        *,
        replay: bool = False,
        max_concurrency: int = DEFAULT_CONCURRENCY,
        rpm: float | None = None,
        tpm: float | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        num_retries: int = DEFAULT_RETRIES,
        api_base: str | None = None,
        dry_run: bool = False,
        price: tuple[float, float] | None = None,
        json_schema: bool | None = None,
        breaker: int | None = DEFAULT_BREAKER,
        deployments: str | Path | Deployments | None = None,
    ) -> None:
        self.routes = routes or RouteTable()
        self.tape = tape if tape is not None else Tape()
        self.ledger = ledger or Ledger()
        self.replay = replay
        self.max_concurrency = max_concurrency
        self.rpm, self.tpm = rpm, tpm
        self.timeout_s, self.num_retries = timeout_s, num_retries
        self.api_base = api_base  # e.g. a vLLM or Ollama endpoint for provider models
        self.price = price  # USD per 1M (prompt, completion) tokens for models litellm cannot price
        # several deployments behind a model name, balanced by litellm's Router (llm/deployments.py);
        # a replay or a dry run makes no call, so it needs no file (nor the servers it names)
        self.deployments = (deployments if isinstance(deployments, Deployments) or deployments is None
                            else None if replay or dry_run else load_deployments(deployments))
        self._pool = None  # its Router, built at the first pooled call (see _router)
        self._unhook: weakref.finalize | None = None  # takes the Router out of litellm's callback lists
        self.deployments_left_out: frozenset[int] = frozenset()  # found down before step 1 (check_models)
        # JSON-schema mode: None = where litellm knows the model supports it; True = the user
        # declares the models capable (e.g. an openai/<name> behind a vLLM endpoint); False = never
        self.json_schema = json_schema
        self.breaker = breaker or None  # 0/None: off
        # --check-order: a random pause (own RNG, never the model's) before every answer, so a
        # phase's coroutines finish in another order; results that change reveal shared writes
        self.order_probe: random.Random | None = None
        self._phases = 0  # phases run so far: the first element of a call's path
        self._outside = Branch((OUTSIDE_PHASES,))
        self.failures_in_a_row = 0
        self.capped_replies = 0  # replies longer than max_tokens allows, cut to size
        self.capped_chars = 0  # characters cut from them
        # calls made live, per step, whose request the tape held no record of: a resumed run that
        # makes them in the steps it recorded no longer follows its recording (see runner.run)
        self.off_tape: Counter[int] = Counter()
        self.reasked: Counter[int] = Counter()  # per step: recorded calls that failed or answered nothing, asked again
        self._step = 0
        self._parent: Gateway | None = None  # a derived gateway's (see derive): its steps are the run's
        self._formats: dict[tuple[str, QuestionKind], dict[str, Any]] = {}  # per (model, question)
        # a cost projection's dry run: every decision is answered by its operation's rule, never by
        # a model, and recorded under its route's model with the tokens its prompt would take
        self.dry_run = dry_run
        self._semaphore: asyncio.Semaphore | None = None  # --concurrency's places, the root's (see _attempts)
        self._derived: list[Gateway] = []  # see derive() and models()
        if not dry_run and not replay and any(m != RULES for m in self.routes.models()):
            # litellm's import freezes every object alive (litellm_setup): imported here, before the
            # run's society is built, and not at its first call or pre-flight check, it leaves the
            # society out, which a freeze keeps for the life of the process (agents <-> model cycles)
            import socialsim.llm.litellm_setup  # noqa: F401
        if not dry_run and not replay and any(is_embedded(m) for m in self.routes.models()):
            from socialsim.llm.engines.embedded import register

            register()

    def derive(self, routes: RouteTable) -> Gateway:
        """A gateway for other routes (e.g. an architecture's judges) that shares this run's
        tape, ledger and budget, replay mode, endpoint, limits, timeout, retries and prices."""
        derived = Gateway(routes, self.tape, self.ledger, replay=self.replay, max_concurrency=self.max_concurrency,
                          rpm=self.rpm, tpm=self.tpm, timeout_s=self.timeout_s, num_retries=self.num_retries,
                          api_base=self.api_base, dry_run=self.dry_run, price=self.price,
                          json_schema=self.json_schema, breaker=self.breaker, deployments=self.deployments)
        derived._parent = self
        self._derived.append(derived)
        return derived

    def _root(self) -> Gateway:
        """The run's own gateway (a derived one's parent): what it counts is the run's."""
        return self._parent._root() if self._parent is not None else self

    @property
    def step(self) -> int:
        """The run's step, which the model sets on its gateway: a judge's calls on a derived
        gateway are recorded at the step they were asked in (they were all at step 0)."""
        return self._parent.step if self._parent is not None else self._step

    @step.setter
    def step(self, value: int) -> None:
        self._step = value

    def models(self) -> set[str]:
        """Every model this gateway may ask: its routes' and those of the gateways derived from it
        (a judge an architecture's settings name), so a run checks and prices them all before step 1."""
        return self.routes.models().union(*(g.models() for g in self._derived))

    # --- phases -----------------------------------------------------------------------------
    def run_phase(
        self,
        agents: Sequence[Any],
        coroutine: Callable[[Any], Awaitable[Any]],
        rng: random.Random,
    ) -> list[Any]:
        """Run ``coroutine(agent)`` for all agents at once; results come back in agent order.

        Before anything starts, each agent gets its own ``phase_rng`` seeded from ``rng`` in the
        given order, so random draws inside the phase do not depend on scheduling either.
        """
        for agent in agents:
            agent.phase_rng = random.Random(rng.getrandbits(64))
        self._phases += 1
        phase = self._phases

        async def branch(agent: Any) -> Any:
            _BRANCH.set(Branch((phase,)))  # this agent's task only: its calls are numbered in its own order
            return await coroutine(agent)

        async def gather() -> list[Any]:
            tasks: list[asyncio.Task] = []
            try:
                for agent in agents:  # started one loop turn apart: see _start
                    await _start(branch(agent), tasks)
                results = await asyncio.gather(*tasks, return_exceptions=True)
            except BaseException:  # interrupted (starting or waiting): no call completes behind the caller's back
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
            for result in results:  # re-raise the first failure in agent order
                if isinstance(result, BaseException):
                    raise result
            return list(results)

        return run_sync(gather())

    async def gather(self, *coroutines: Awaitable[Any]) -> list[Any]:
        """``asyncio.gather`` for concurrent calls within one agent's step: each coroutine gets its
        own branch of the caller's path, so the ledger's order stays fixed whatever finishes first."""
        prefix = self._path()

        async def branch(index: int, coroutine: Awaitable[Any]) -> Any:
            _BRANCH.set(Branch((*prefix, index)))
            return await coroutine

        return list(await asyncio.gather(*(branch(i, c) for i, c in enumerate(coroutines))))

    def _path(self) -> tuple[int, ...]:
        return (_BRANCH.get() or self._outside).next()

    # --- one operation ----------------------------------------------------------------------
    async def ask(self, op: Operation, ctx: Any, *, agent_id: int | None, rng: random.Random) -> Answer:
        """Answer ``op`` for one agent: rules, or LLM with repair and fallback. Never raises for
        a bad reply or a provider error; raises only BudgetExhausted, ProviderOutage and TapeMiss."""
        path = self._path()  # taken before any await: fixed by where the call is asked
        if self.order_probe is not None:
            await asyncio.sleep(self.order_probe.random() * ORDER_PROBE_S)
        model = self.routes.model_for(op.name, op.module)
        if model == RULES or self.dry_run:
            value = op.rule(ctx, rng)
            estimate = []
            if self.dry_run:  # what this decision would cost as an LLM call (about 4 chars a token)
                chars = sum(len(m["content"]) for m in op.messages(ctx))
                estimate = [Completion("", chars // 4 + 1, op.max_tokens, 0.0, 0.0, False)]
            self._record(op, agent_id, model, "rules", "rules", estimate, path=path)
            return Answer(value=value, status="rules", model=RULES)

        question = op.question(ctx)
        messages = op.messages(ctx)
        params = {"temperature": op.temperature, "max_tokens": op.max_tokens, "seed": rng.getrandbits(31)}
        completions: list[Completion] = []
        try:
            first = await self._complete(op, agent_id, model, messages, params, question)
            completions.append(first)
            try:
                value = question.parse(first.raw)
                return self._done(op, agent_id, model, "ok", completions, value, first.raw, path=path)
            except AnswerError as exc:
                self.ledger.failure(op.name, redact(f"unusable answer ({exc}); asking once more"), agent_id, self.step)
                repair = messages + [
                    {"role": "assistant", "content": first.raw},
                    {"role": "user", "content": f"That answer could not be used: {exc}. {question.instruction()}"},
                ]
                second = await self._complete(op, agent_id, model, repair, params, question)
                completions.append(second)
                try:
                    value = question.parse(second.raw)
                    return self._done(op, agent_id, model, "repaired", completions, value, second.raw, path=path)
                except AnswerError as exc2:
                    reason = redact(f"unusable answer after repair ({exc2})")
        except ProviderError as exc:
            reason = f"provider error: {exc}"
        except ProviderOutage as exc:
            # the call that tripped the breaker is kept in the ledger as its replay keeps it (a replay
            # falls back on the taped failure where the recording stopped): a provider's error, or an
            # empty reply to the repair; an empty first reply has no row (its replay has no repair taped)
            cause, reason = exc.__cause__, None
            if isinstance(cause, ProviderError):
                reason = f"provider error: {cause}"
            elif isinstance(cause, EmptyReply) and completions:
                completions.append(cause.completion)
                try:
                    question.parse(cause.completion.raw)
                except AnswerError as empty:
                    reason = redact(f"unusable answer after repair ({empty})")
            if reason is not None:
                self.ledger.failure(op.name, f"{reason}; the run stops", agent_id, self.step)
                self._record(op, agent_id, model, "llm", "fallback", completions, reason, path)
            raise
        self.ledger.failure(op.name, f"{reason}; using fallback: {op.fallback_doc}", agent_id, self.step)
        value = op.fallback(ctx)
        raw = completions[-1].raw if completions else None
        return self._done(op, agent_id, model, "fallback", completions, value, raw, error=reason, path=path)

    def _done(self, op, agent_id, model, status, completions, value, raw, error=None, path=()) -> Answer:
        self._record(op, agent_id, model, "llm", status, completions, error, path)
        truncated = bool(completions) and completions[-1].truncated
        return Answer(value=value, status=status, raw=raw, error=error, model=model, truncated=truncated)

    def _record(self, op, agent_id, model, engine, status, completions, error=None, path=()) -> None:
        self.ledger.record(
            LedgerRow(
                step=self.step,
                agent=agent_id,
                op=op.name,
                module=op.module,
                model=model,
                engine=engine,
                status=status,
                calls=len(completions),
                live_calls=sum(c.live for c in completions),
                prompt_tokens=sum(c.prompt_tokens for c in completions),
                completion_tokens=sum(c.completion_tokens for c in completions),
                # 0.0 with no round-trip (a rules decision): the column is float64 in every run's ledger
                latency_s=round(sum((c.latency_s for c in completions), 0.0), 6),
                cost_usd=sum((c.cost_usd for c in completions), 0.0),
                error=error,
                truncated=sum(c.truncated for c in completions),
                path=path,
            )
        )

    # --- one round-trip ---------------------------------------------------------------------
    def _format_params(self, model: str, question: QuestionKind) -> dict[str, Any]:
        """Constrained decoding: a grammar for the embedded engine, a JSON schema where a
        provider supports one; plain kinds rely on the instruction and the strict parser."""
        cache: dict | None = self._formats  # built once per (model, operation's question)
        try:
            found = cache.get((model, question))
        except TypeError:  # a question with unhashable fields: built every time
            found, cache = None, None
        if found is not None:
            return found
        fmt: dict[str, Any] = {}
        if is_embedded(model):
            fmt = {"grammar": question.gbnf()}
        elif isinstance(question, RecordQuestion):
            from socialsim.llm.litellm_setup import litellm

            try:
                supported = litellm.supports_response_schema(model=model)
            except Exception:
                supported = False
            if supported:
                fmt = json_schema_format(question)
        if cache is not None:
            cache[(model, question)] = fmt
        return fmt

    def _output_format(self, model: str, question: QuestionKind) -> dict[str, Any]:
        """``_format_params`` with the run's JSON-schema choice applied (--json-schema on|off)."""
        if self.json_schema is False and not is_embedded(model):
            return {}
        fmt = self._format_params(model, question)
        if self.json_schema and not fmt and isinstance(question, RecordQuestion):
            fmt = json_schema_format(question)
        return fmt

    def _provider_failed(self, key, op, agent_id, model, messages, params, error: str) -> ProviderError:
        """A call the provider failed (an error after retries, or a response without a message):
        recorded like any failure, and counted towards the breaker, which stops the run when
        ``breaker`` calls in a row failed."""
        failure = self._failed(key, op, agent_id, model, messages, params, error)
        self.failures_in_a_row += 1
        if self.breaker and self.failures_in_a_row >= self.breaker:
            raise ProviderOutage(f"{self.failures_in_a_row} calls in a row to {model} failed (last: {failure})") \
                from failure
        return failure

    def _failed(self, key, op, agent_id, model, messages, params, error: str) -> ProviderError:
        """Record a failed call on the tape (so the run replays with the same fallback) and
        return the ProviderError to raise."""
        error = redact(error)
        self.tape.add(TapeRecord(key, model, op.name, agent_id, self.step, messages, params, "", 0, 0, 0.0, 0.0,
                                 error=error))
        return ProviderError(error)

    def _cap(self, raw: str, max_tokens: int, op: Operation, agent_id: int | None) -> str:
        """Cut a reply longer than ``max_tokens`` could be; the excess is counted and logged."""
        limit = CHARS_PER_TOKEN_CAP * max_tokens
        if len(raw) <= limit:
            return raw
        kept = cut(raw, limit)  # the reply is redacted: a [REDACTED] across the limit is left out whole
        self.capped_replies += 1
        self.capped_chars += len(raw) - len(kept)
        log.warning("step %s agent %s %s: reply of %d characters cut to %d (max_tokens=%d)",
                    self.step, agent_id, op.name, len(raw), len(kept), max_tokens,
                    extra={"operation": op.name, "kind": "cut replies"})  # the console shows the first few
        return kept

    async def _complete(self, op, agent_id, model, messages, params, question) -> Completion:
        fmt = self._output_format(model, question)
        key = call_key(model, messages, {**params, **fmt})
        record = self.tape.get(key)
        if record is not None and record.error is not None and self.replay:
            raise ProviderError(record.error)  # the recorded run met this error: same fallback
        # a reply the recording got, free; an empty one only to a replay: a run going on (a resume) asks
        # it again, as a failed call (an outage of empty replies left them; each would be repaired)
        if answered(record) or (self.replay and record is not None and record.error is None):
            return Completion.taped(record)
        if self.replay:
            raise TapeMiss(
                f"the tape has no record of {op.name} for agent {agent_id} at step {self.step} "
                f"on {model} (key {key}); the run's configuration or code differs from the recording"
            )
        # a sweep's runs side by side: the call another run is making now is waited for, not repaid
        async with self.tape.claim(key, self._claim_stale_s()) as elsewhere:
            if elsewhere is not None:
                return Completion.taped(elsewhere)
            self._count_live(record)
            return await self._call(op, agent_id, model, messages, params, fmt, key)

    def _count_live(self, record: TapeRecord | None) -> None:
        """A live call about to be made, counted for the resume check (runner.off_tape_told): one the
        tape held nothing for, or one it held a failure or an empty reply for, asked again."""
        root = self._root()
        (root.off_tape if record is None else root.reasked)[self.step] += 1

    def _claim_stale_s(self) -> float:
        """How long a claimed call may take before others stop waiting for it: every attempt
        timing out, twice over, and never under ten minutes (a limiter's wait counts too)."""
        return max(600.0, 2 * self.timeout_s * (self.num_retries + 1))

    async def _call(self, op, agent_id, model, messages, params, fmt, key) -> Completion:
        """One live round-trip: budget reserved, limits kept, the reply capped, charged and taped."""
        reserve = self.worst_case_cost(model, messages, params["max_tokens"])
        self.ledger.check_budget(reserve)
        try:
            response, latency = await self._attempts(model, lambda: self._acompletion(model, messages, params, fmt),
                                                     request_tokens([m["content"] for m in messages], params["max_tokens"]))
        except BaseException as exc:
            self.ledger.release(reserve)
            if not isinstance(exc, _provider_exceptions()):
                raise
            said = f"{type(exc).__name__}: {exc}" + _attempts_said(exc, self.num_retries)
            error = cut(redact(said), 300)  # cut after redacting: no piece of a key
            raise self._provider_failed(key, op, agent_id, model, messages, {**params, **fmt}, error) from None
        try:
            content = response.choices[0].message.content
            finish_reason = getattr(response.choices[0], "finish_reason", None)
        except (AttributeError, IndexError, TypeError):  # a reply without a message: the provider's fault
            self.ledger.release(reserve)
            error = cut(redact(f"malformed response: no message in {response!r}"), 300)
            raise self._provider_failed(key, op, agent_id, model, messages, {**params, **fmt}, error) from None
        text = content if isinstance(content, str) else ("" if content is None else str(content))
        # what the run reads is what its tape keeps: a key the model echoes reaches no frame, and a replay
        # (which reads the redacted tape) builds the same prompts from it
        text = redact(text)
        raw = self._cap(text, params["max_tokens"], op, agent_id)
        if raw != text:
            finish_reason = "length"
        elif finish_reason == "length":  # counted in the ledger; the run's closing summary says how many
            log.info("step %s agent %s %s: the reply was cut at max_tokens=%d (finish_reason 'length')",
                     self.step, agent_id, op.name, params["max_tokens"])
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = self._cost(model, prompt_tokens, completion_tokens)
        self.ledger.add_live(cost, reserve)
        self.tape.add(
            TapeRecord(key, model, op.name, agent_id, self.step, messages, {**params, **fmt}, raw,
                       prompt_tokens, completion_tokens, round(latency, 6), cost,
                       finish_reason=finish_reason if isinstance(finish_reason, str) else None)
        )
        log.debug("step %s agent %s %s on %s: %r", self.step, agent_id, op.name, model, raw[:120])
        # an empty reply is kept (and parsed as an unusable answer), but a provider that answers
        # nothing call after call is down, as one that fails is: the breaker counts both
        completion = Completion(raw, prompt_tokens, completion_tokens, round(latency, 6), cost, True,
                                finish_reason == "length")
        self.failures_in_a_row = 0 if raw.strip() else self.failures_in_a_row + 1
        if self.breaker and self.failures_in_a_row >= self.breaker:
            raise ProviderOutage(f"{self.failures_in_a_row} calls in a row to {model} failed or answered "
                                 f"nothing (the last: an empty reply)") from EmptyReply(completion)
        return completion

    # --- embeddings -------------------------------------------------------------------------
    def embed(self, model: str, texts: list[str], purpose: str = "Embed",
              agent_id: int | None = None) -> list[list[float]]:
        """Embedding vectors of ``texts`` from a litellm embedding model, on the same terms as a
        chat call: taped (a replay makes no call), priced and counted in the ledger under
        ``purpose``, budgeted, with the run's endpoint, timeout and retries. Raises ProviderError
        (the caller decides its fallback) or TapeMiss."""
        return run_sync(self.aembed(model, texts, purpose, agent_id))

    async def aembed(self, model: str, texts: list[str], purpose: str = "Embed",
                     agent_id: int | None = None) -> list[list[float]]:
        path = self._path()
        messages = [{"role": "input", "content": t} for t in texts]
        key = call_key(model, messages, {"embedding": True})
        op = _EmbedOp(purpose)
        record = self.tape.get(key)
        if record is not None and record.error is None:
            return self._taped_vectors(op, agent_id, model, record, path)
        if self.replay:
            if record is not None:  # the recorded failure, with the row the recording kept for it
                self._record(op, agent_id, model, "llm", "fallback", [], record.error, path)
                raise ProviderError(record.error or "")
            raise TapeMiss(f"the tape has no embeddings of {len(texts)} texts on {model} (key {key})")
        async with self.tape.claim(key, self._claim_stale_s()) as elsewhere:
            if elsewhere is not None:
                return self._taped_vectors(op, agent_id, model, elsewhere, path)
            self._count_live(record)
            return await self._embed_live(op, agent_id, model, texts, messages, key, path)

    def _taped_vectors(self, op, agent_id, model, record: TapeRecord, path) -> list[list[float]]:
        self._record(op, agent_id, model, "llm", "ok", [Completion(record.raw, record.prompt_tokens, 0,
                                                                    record.latency_s, record.cost_usd, False)],
                     path=path)
        return json.loads(record.raw)

    async def _embed_live(self, op, agent_id, model, texts, messages, key, path) -> list[list[float]]:
        reserve = token_cost(model, sum(len(t) for t in texts) // 3 + len(texts), 0, self.price) or 0.0
        self.ledger.check_budget(reserve)
        try:
            response, latency = await self._attempts(model, lambda: self._aembedding(model, texts), request_tokens(texts))
            vectors = [list(map(float, item["embedding"])) for item in response.data]
            if len(vectors) != len(texts):
                raise ValueError(f"{len(vectors)} vectors for {len(texts)} texts")
        except BaseException as exc:
            self.ledger.release(reserve)
            if not isinstance(exc, (*_provider_exceptions(), ValueError, KeyError, TypeError)):
                raise
            # a reply of the wrong shape was asked once: no retry to tell of
            retried = _attempts_said(exc, self.num_retries) if isinstance(exc, _provider_exceptions()) else ""
            error = cut(redact(f"{type(exc).__name__}: {exc}{retried}"), 300)  # cut after redacting: no piece of a key
            self._record(op, agent_id, model, "llm", "fallback", [], error, path)
            raise self._failed(key, op, agent_id, model, messages, {"embedding": True}, error) from None
        latency = round(latency, 6)
        tokens = int(getattr(getattr(response, "usage", None), "prompt_tokens", 0) or 0)
        cost = self._cost(model, tokens, 0)
        self.ledger.add_live(cost, reserve)
        raw = json.dumps(vectors)
        self.tape.add(TapeRecord(key, model, op.name, agent_id, self.step, messages, {"embedding": True}, raw,
                                 tokens, 0, latency, cost))
        self._record(op, agent_id, model, "llm", "ok", [Completion(raw, tokens, 0, latency, cost, True)], path=path)
        return vectors

    async def _aembedding(self, model: str, texts: list[str]):
        """The one place that calls litellm's embeddings: one attempt (``_attempts`` retries it, each
        attempt through the rate limiter), through its Router where the model has deployments (which
        picks the deployment again for each attempt)."""
        from socialsim.llm.litellm_setup import litellm

        pooled = self._pooled(model)
        embed = self._router().aembedding if pooled else litellm.aembedding
        return await embed(
            model=model, input=texts, timeout=self.timeout_s, num_retries=0,
            **({"api_base": self.api_base} if self.api_base and not pooled else {}),
        )

    async def _attempts[T](self, model: str, attempt: Callable[[], Awaitable[T]], tokens: int) -> tuple[T, float]:
        """A live call's attempts (a chat's or an embedding's) on the run's terms: each attempt in one of
        --concurrency's places (the run's, which its judges' gateways share; the wait before a retry in
        none) and through the model's rate limiter, as many as --retries allows (``with_retries``)."""
        root = self._root()
        if root._semaphore is None:
            root._semaphore = asyncio.Semaphore(root.max_concurrency)
        limiter = shared_limiter(model, self.rpm, self.tpm)
        if self._pooled(model):
            attempt = _each_request_limited(attempt, limiter, tokens)
        return await with_retries(attempt, self.num_retries, limiter, tokens, slot=lambda: root._semaphore)

    def _pooled(self, model: str) -> bool:
        return self.deployments is not None and self.deployments.serves(model)

    def _router(self):
        """litellm's Router over the deployments, one per run (its derived gateways share it): what it
        learnt of a deployment that failed (its cooldowns) is this run's, not a later run's, which a
        Router kept for the process carried into a resume or a dashboard Reset."""
        root = self._root()
        if root._pool is None:
            root._pool = self.deployments.new_router(root.models(), root.deployments_left_out)
            _limit_each_request(root._pool)
            # A Router hooks its methods into litellm's process-wide callback lists and leaves them there:
            # every later call of the process ran every earlier run's Router's callbacks (a failed one
            # formatting a traceback for each), and no Router was freed. Unhooked when the run closes its
            # gateway (``close``), or else once the gateway is gone (a notebook's or dashboard's model).
            discard = getattr(root._pool, "discard", None)
            if discard is not None:
                root._unhook = weakref.finalize(root, discard)
        return root._pool

    def close(self) -> None:
        """The run is done with its calls: its Router (if it had one) leaves litellm's callback lists
        (see ``_router``); a later pooled call builds a new one."""
        root = self._root()
        root._pool = None
        if root._unhook is not None:
            root._unhook()  # once: a finalizer called is dead
            root._unhook = None

    def worst_case_cost(self, model: str, messages: list[dict[str, str]], max_tokens: int) -> float:
        """What a call can cost at most: its prompt (3 characters a token, more tokens than the
        ~4 of English text, so generously rounded up) and a full ``max_tokens`` reply; reserved before
        the call is made."""
        prompt_tokens = sum(len(m["content"]) for m in messages) // 3 + 8 * len(messages) + 16
        return token_cost(model, prompt_tokens, max_tokens, self.price) or 0.0

    async def _acompletion(self, model, messages, params, fmt):
        """The one place that calls litellm: one attempt (``_attempts`` retries it, each attempt through the
        rate limiter), through its Router where the model has deployments (which picks the deployment again
        for each attempt, a cooling-down one left out)."""
        from socialsim.llm.litellm_setup import litellm

        pooled = self._pooled(model)
        if not pooled:
            map_unknown_model(model)
        complete = self._router().acompletion if pooled else litellm.acompletion
        response = await complete(
            model=model,
            messages=messages,
            timeout=self.timeout_s,
            # 0: litellm's retries (a Router's too) went past the rate limiter (and, through the OpenAI SDK, were
            # made twice over); the gateway retries the whole call, a pool's Router picking the deployment again
            num_retries=0,
            drop_params=True,  # per call, not a global switch: a provider without e.g. `seed` still answers
            **({"api_base": self.api_base} if self.api_base and not is_embedded(model) and not pooled else {}),
            **params,
            **fmt,
        )
        return response

    def _cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        """A live call's cost, from the reply's own token counts (read once in ``_complete``)."""
        usd = token_cost(model, prompt_tokens, completion_tokens, self.price)
        if usd is None:
            if model not in _UNPRICED:  # missing from litellm's cost map: recorded as free, said once
                _UNPRICED.add(model)
                log.warning("%s has no price in litellm's cost map; its calls are recorded at $0", model)
            return 0.0
        return usd
