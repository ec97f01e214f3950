"""A step phase: which method runs, on whom, and whether it is a coroutine run concurrently.

- ``scope="agents"``: ``agent.<name>()`` for every agent, in the step's shuffled order; an async
  phase runs all agents' coroutines at once through the gateway, and each coroutine may write
  only to its own agent (results are applied in a later sync phase, in a fixed order).
- ``scope="model"``: ``AgentClass.<name>(model)``, a classmethod for society-level work (e.g. a
  ranking of all agents); async ones run on the gateway's loop with ``model.phase_rng``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Phase:
    name: str
    is_async: bool = False
    scope: Literal["agents", "model"] = "agents"
