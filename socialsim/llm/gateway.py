"""The gateway: the one place where operations become LLM calls (through litellm) or rules.

``ask`` answers one typed operation for one agent: route -> (rules | tape | litellm) -> parse ->
validate -> one repair round-trip -> documented fallback, with every decision written to the
ledger and every live call to the tape. ``run_phase`` runs one phase's coroutines for all agents
concurrently and returns their results in the agents' fixed order, so a step's outcome never
depends on which call finished first.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from socialsim.llm import litellm_setup  # noqa: F401  (configures litellm before first import)
from socialsim.llm.ledger import Ledger, LedgerRow
from socialsim.llm.limiter import shared_limiter
from socialsim.llm.loop import run_sync
from socialsim.llm.operation import Answer, Operation
from socialsim.llm.questions import AnswerError, QuestionKind, RecordQuestion
from socialsim.llm.redact import redact
from socialsim.llm.routing import RULES, RouteTable
from socialsim.llm.tape import Tape, TapeMiss, TapeRecord, call_key

log = logging.getLogger("socialsim.llm")


_UNPRICED: set[str] = set()


class ProviderError(RuntimeError):
    """The model could not be reached or refused the call (after litellm's retries)."""


@dataclass
class Completion:
    raw: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost_usd: float
    live: bool


def is_embedded(model: str) -> bool:
    return model.startswith("local/")


class Gateway:
    """Answers typed operations for a model's agents; owns routes, tape, ledger and limits."""

    def __init__(
        self,
        routes: RouteTable | None = None,
        tape: Tape | None = None,
        ledger: Ledger | None = None,
        *,
        replay: bool = False,
        max_concurrency: int = 16,
        rpm: float | None = None,
        tpm: float | None = None,
        timeout_s: float = 120.0,
        num_retries: int = 2,
        api_base: str | None = None,
        estimate_prompts: bool = False,
    ) -> None:
        self.routes = routes or RouteTable()
        self.tape = tape if tape is not None else Tape()
        self.ledger = ledger or Ledger()
        self.replay = replay
        self.max_concurrency = max_concurrency
        self.rpm, self.tpm = rpm, tpm
        self.timeout_s, self.num_retries = timeout_s, num_retries
        self.api_base = api_base  # e.g. a vLLM or Ollama endpoint for provider models
        self.step = 0
        # rules engine only: also render each prompt and count its tokens (cost projections)
        self.estimate_prompts = estimate_prompts
        self._semaphore: asyncio.Semaphore | None = None
        if any(is_embedded(m) for m in self.routes.models()):
            from socialsim.llm.engines.embedded import register

            register()

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

        async def gather() -> list[Any]:
            results = await asyncio.gather(*(coroutine(a) for a in agents), return_exceptions=True)
            for result in results:  # re-raise the first failure in agent order
                if isinstance(result, BaseException):
                    raise result
            return list(results)

        return run_sync(gather())

    # --- one operation ----------------------------------------------------------------------
    async def ask(self, op: Operation, ctx: Any, *, agent_id: int | None, rng: random.Random) -> Answer:
        """Answer ``op`` for one agent: rules, or LLM with repair and fallback. Never raises for
        a bad reply or a provider error; raises only BudgetExhausted and TapeMiss."""
        model = self.routes.model_for(op.name, op.module)
        if model == RULES:
            value = op.rule(ctx, rng)
            estimate = []
            if self.estimate_prompts:  # what this decision would cost as an LLM call (about 4 chars a token)
                chars = sum(len(m["content"]) for m in op.messages(ctx))
                estimate = [Completion("", chars // 4 + 1, op.max_tokens, 0.0, 0.0, False)]
            self._record(op, agent_id, model, "rules", "rules", estimate)
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
                return self._done(op, agent_id, model, "ok", completions, value, first.raw)
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
                    return self._done(op, agent_id, model, "repaired", completions, value, second.raw)
                except AnswerError as exc2:
                    reason = redact(f"unusable answer after repair ({exc2})")
        except ProviderError as exc:
            reason = f"provider error: {exc}"
        self.ledger.failure(op.name, f"{reason}; using fallback: {op.fallback_doc}", agent_id, self.step)
        value = op.fallback(ctx)
        raw = completions[-1].raw if completions else None
        return self._done(op, agent_id, model, "fallback", completions, value, raw, error=reason)

    def _done(self, op, agent_id, model, status, completions, value, raw, error=None) -> Answer:
        self._record(op, agent_id, model, "llm", status, completions, error)
        return Answer(value=value, status=status, raw=raw, error=error, model=model)

    def _record(self, op, agent_id, model, engine, status, completions, error=None) -> None:
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
                latency_s=round(sum(c.latency_s for c in completions), 6),
                cost_usd=sum(c.cost_usd for c in completions),
                error=error,
            )
        )

    # --- one round-trip ---------------------------------------------------------------------
    def _format_params(self, model: str, question: QuestionKind) -> dict[str, Any]:
        """Constrained decoding: a grammar for the embedded engine, a JSON schema where a
        provider supports one; plain kinds rely on the instruction and the strict parser."""
        cache = self.__dict__.setdefault("_formats", {})  # built once per (model, operation's question)
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
            import litellm

            try:
                supported = litellm.supports_response_schema(model=model)
            except Exception:
                supported = False
            if supported:
                fmt = {
                    "response_format": {
                        "type": "json_schema",
                        "json_schema": {"name": question.model.__name__, "schema": question.json_schema()},
                    }
                }
        if cache is not None:
            cache[(model, question)] = fmt
        return fmt

    async def _complete(self, op, agent_id, model, messages, params, question) -> Completion:
        fmt = self._format_params(model, question)
        key = call_key(model, messages, {**params, **fmt})
        record = self.tape.get(key)
        if record is not None:
            return Completion(
                record.raw, record.prompt_tokens, record.completion_tokens, record.latency_s, record.cost_usd, False
            )
        if self.replay:
            raise TapeMiss(
                f"the tape has no record of {op.name} for agent {agent_id} at step {self.step} "
                f"on {model} (key {key}); the run's configuration or code differs from the recording"
            )
        self.ledger.check_budget()
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
        limiter = shared_limiter(model, self.rpm, self.tpm)
        async with self._semaphore:
            await limiter.acquire(tokens=sum(len(m["content"]) for m in messages) // 4 + params["max_tokens"])
            start = time.perf_counter()
            try:
                response = await self._acompletion(model, messages, params, fmt)
            except BaseException as exc:  # litellm maps every provider failure to its own exceptions
                self.ledger.release()
                if not isinstance(exc, Exception):
                    raise
                raise ProviderError(redact(f"{type(exc).__name__}: {str(exc)[:300]}")) from None
            latency = time.perf_counter() - start
        raw = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = self._cost(response, model)
        self.ledger.add_live(cost)
        self.tape.add(
            TapeRecord(key, model, op.name, agent_id, self.step, messages, {**params, **fmt}, raw,
                       prompt_tokens, completion_tokens, round(latency, 6), cost)
        )
        log.debug("step %s agent %s %s on %s: %r", self.step, agent_id, op.name, model, raw[:120])
        return Completion(raw, prompt_tokens, completion_tokens, round(latency, 6), cost, True)

    async def _acompletion(self, model, messages, params, fmt):
        """The one place that calls litellm (retries and timeouts are litellm's)."""
        import litellm

        return await litellm.acompletion(
            model=model,
            messages=messages,
            timeout=self.timeout_s,
            num_retries=self.num_retries,
            **({"api_base": self.api_base} if self.api_base and not is_embedded(model) else {}),
            **params,
            **fmt,
        )

    @staticmethod
    def _cost(response: Any, model: str) -> float:
        if is_embedded(model):
            return 0.0
        import litellm

        usage = getattr(response, "usage", None)  # priced from the reply's own token counts, once
        try:
            prompt_usd, completion_usd = litellm.cost_per_token(
                model=model,
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            )
            return float(prompt_usd + completion_usd)
        except Exception:
            if model not in _UNPRICED:  # missing from litellm's cost map: recorded as free, said once
                _UNPRICED.add(model)
                log.warning("%s has no price in litellm's cost map; its calls are recorded at $0", model)
            return 0.0
