"""Typed operations, one module per architecture."""

from __future__ import annotations

from importlib import import_module

from socialsim.llm.operation import Operation

MODULES = ["socialsim.llm.operations.generic", "socialsim.agents.crsec.operations", "socialsim.agents.asvo.operations", "socialsim.agents.itcmas.operations"]


def all_operations() -> list[Operation]:
    """Every operation instance defined by the operation modules, in a stable order."""
    found: dict[str, Operation] = {}
    for name in MODULES:
        for value in vars(import_module(name)).values():
            if isinstance(value, Operation):
                found[value.name] = value
    return sorted(found.values(), key=lambda op: (op.module, op.name))
