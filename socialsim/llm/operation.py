"""What a typed operation is: a prompt, a question kind, a rule and a fallback.

An operation (ChooseAction, DetectConflict, UpdateDesire, ...) is a small class. It builds its
messages from a structured context, declares the question kind of its answer, and carries two
non-LLM answers: ``rule`` — the transparent baseline used by the ``rules`` engine, computed from
the same structured context (never by parsing the prompt) — and ``fallback`` — the documented
answer used when an LLM's reply stays invalid after one repair round-trip.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from socialsim.llm.questions import QuestionKind

Status = Literal["ok", "repaired", "fallback", "rules"]


@dataclass
class Answer[T: BaseModel]:
    """A typed answer and how it was obtained."""

    value: T
    status: Status
    raw: str | None = None
    error: str | None = None
    model: str = ""
    truncated: bool = False  # the reply was cut at max_tokens (the provider said so, or the cap cut it)


class Operation:
    """Base class of every typed LLM operation.

    Subclasses set ``name``, ``module`` and ``fallback_doc`` and implement ``question``,
    ``prompt`` (and ``input_text`` where it pays), ``rule`` and ``fallback``. ``ctx`` is the
    operation's own structured context (usually a pydantic model or a dataclass) built by the agent.
    """

    name: str = "Operation"
    module: str = "generic"
    system: str = "You are a person living in a simulated society. Stay in character."
    temperature: float = 0.7
    max_tokens: int = 64
    fallback_doc: str = ""

    def question(self, ctx: Any) -> QuestionKind:
        raise NotImplementedError

    def prompt(self, ctx: Any) -> str:
        """The user-message text (without the answer-format instruction)."""
        raise NotImplementedError

    def system_text(self, ctx: Any) -> str:
        """The system message. An architecture whose agents live in the scenario's world says so here
        from the context (the scenario's own text), so no world is written into the operation."""
        return self.system

    def input_text(self, ctx: Any) -> str:
        """What changes from call to call, placed after the answer format ("": the prompt holds it).
        An operation with a long answer format (a JSON schema) puts its input here, so all the fixed
        text before it is a head the embedded engine's saved prompt states spare evaluating."""
        return ""

    def messages(self, ctx: Any) -> list[dict[str, str]]:
        text = f"{self.prompt(ctx)}\n\n{self.question(ctx).instruction()}"
        if changing := self.input_text(ctx):
            text = f"{text}\n\n{changing}"
        return [{"role": "system", "content": self.system_text(ctx)}, {"role": "user", "content": text}]

    def rule(self, ctx: Any, rng: random.Random) -> BaseModel:
        raise NotImplementedError

    def fallback(self, ctx: Any) -> BaseModel:
        raise NotImplementedError
