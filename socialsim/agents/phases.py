"""A step phase: which method runs, on whom, and whether it is a coroutine run concurrently.

- ``scope="agents"``: ``agent.<name>()`` for every agent, in the step's shuffled order; an async
  phase runs all agents' coroutines at once through the gateway, and each coroutine may write
  only to its own agent (results are applied in a later sync phase, in a fixed order).
- ``scope="model"``: ``AgentClass.<name>(model)``, a classmethod for society-level work (e.g. a
  ranking of all agents); async ones run on the gateway's loop with ``model.phase_rng``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Literal


@dataclass(frozen=True)
class Phase:
    name: str
    is_async: bool = False
    scope: Literal["agents", "model"] = "agents"


def phase_problem(cls: type) -> str:
    """"" when each of the agent class's phases names a method of the kind it declares, else what is
    wrong, said before step 1: an ``async def`` in a sync phase is called and never awaited (the run
    "completes" without it), a misspelt name or a scope the method does not take fail mid-run."""
    for phase in cls.phases:
        where = f"{cls.__name__}'s {phase!r}"
        found = inspect.getattr_static(cls, phase.name, None)
        if found is None or not callable(getattr(cls, phase.name)):
            near = get_close_matches(phase.name, [n for n in dir(cls) if not n.startswith("_")], n=1)
            return f"{where} names no method of {cls.__name__}" + (f" (did you mean {near[0]!r}?)" if near else "")
        on_class = isinstance(found, (classmethod, staticmethod))
        if on_class != (phase.scope == "model"):
            return (f"{where}: {cls.__name__}.{phase.name} is " + (
                "a classmethod, which a phase with scope='model' calls once per step with the model"
                if on_class else "a method of each agent, which a phase with scope='agents' (the default) calls"))
        if inspect.iscoroutinefunction(getattr(cls, phase.name)) != phase.is_async:
            return (f"{where}: {cls.__name__}.{phase.name} is " + (
                "a coroutine (async def), which only a phase with is_async=True awaits"
                if not phase.is_async else "no coroutine (async def), which a phase with is_async=True needs"))
    return ""
