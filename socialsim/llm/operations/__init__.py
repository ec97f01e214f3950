"""Typed operations, one module per architecture."""

from __future__ import annotations

import logging
from importlib import import_module

from socialsim.llm.operation import Operation

MODULES = ["socialsim.llm.operations.generic", "socialsim.agents.crsec.operations", "socialsim.agents.asvo.operations", "socialsim.agents.itcmas.operations"]


def installed_modules() -> list[str]:
    """The modules of architectures other packages declare (``socialsim.agents``): each agent's
    own module and, beside it, an ``operations`` module if there is one."""
    from socialsim.agents import installed_architectures

    modules = []
    for path in installed_architectures().values():
        module = path.partition(":")[0]
        package = module.rpartition(".")[0]  # a top-level module has no package to look beside it in
        modules += [module, *([f"{package}.operations"] if package else [])]
    return modules


def all_operations() -> list[Operation]:
    """Every operation instance defined by the operation modules (the package's, then installed
    architectures'), in a stable order."""
    found: dict[str, Operation] = {}
    for name in MODULES + installed_modules():
        try:
            module = import_module(name)
        except Exception as exc:  # another package's code: it must not stop socialsim's own runs
            if name in MODULES:
                raise
            if not (isinstance(exc, ImportError) and exc.name == name):  # no `operations` beside it: no error
                logging.getLogger("socialsim").warning(
                    "operations of an installed architecture's module %s cannot be listed: %s: %s",
                    name, type(exc).__name__, exc)
            continue
        for value in vars(module).values():
            if isinstance(value, Operation):
                found[value.name] = value
    return sorted(found.values(), key=lambda op: (op.module, op.name))
