"""A step phase: the name of an agent method, and whether it is a coroutine run concurrently."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Phase:
    name: str
    is_async: bool = False  # async phases run for all agents at once through the gateway
