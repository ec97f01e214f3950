"""Agent architectures by name: the package's own, and any another installed package declares.

Your own architecture lives in your own package and is declared in its ``pyproject.toml``::

    [project.entry-points."socialsim.architectures"]
    mine = "mypackage.agent:MyAgent"

After ``pip install -e .`` of that package, ``socialsim run --arch mine``, sweeps, replays,
``--resume`` and the dashboard know it as they know ``crsec``.
"""

from __future__ import annotations

import functools
import logging
from importlib import import_module

log = logging.getLogger("socialsim")

ARCHITECTURES = {
    "generic": "socialsim.agents.generic:GenerativeAgent",
    "crsec": "socialsim.agents.crsec.agent:CRSECAgent",
    "asvo": "socialsim.agents.asvo.agent:ASVOAgent",
    "itcmas": "socialsim.agents.itcmas.agent:ITCMASAgent",
}
ENTRY_POINTS = "socialsim.architectures"  # the entry-point group other packages declare theirs in


@functools.cache
def installed_architectures() -> dict[str, str]:
    """Architectures other installed packages declare (name -> "module:Class"), read once; a
    name the package already uses stays the package's, with a warning."""
    from importlib.metadata import entry_points

    found: dict[str, str] = {}
    for point in entry_points(group=ENTRY_POINTS):  # in sys.path order, as imports find packages
        if point.name in ARCHITECTURES:
            log.warning("the architecture %r that %s declares is ignored: socialsim has its own of that name",
                        point.name, point.value)
        elif point.name in found and found[point.name] != point.value:
            log.warning("two installed packages declare the architecture %r: %s is used, %s ignored (the "
                        "first on sys.path, as an import would find it)", point.name, found[point.name],
                        point.value)
        else:
            found[point.name] = point.value
    return found


def architectures() -> dict[str, str]:
    """Every architecture a run may name: the package's, then installed packages' (sorted)."""
    return {**ARCHITECTURES, **dict(sorted(installed_architectures().items()))}


def agent_class(name: str) -> type:
    """The Mesa agent class of an architecture, imported on first use."""
    path = ARCHITECTURES.get(name) or installed_architectures().get(name)
    if path is None:
        raise ValueError(f"unknown architecture {name!r}; known: {', '.join(sorted(architectures()))}")
    module, _, cls = path.partition(":")
    if name in ARCHITECTURES:
        return getattr(import_module(module), cls)
    declared = f"architecture {name!r} ({path}, declared by an installed package under {ENTRY_POINTS!r})"
    try:  # another package's code: whatever it raises is named, not a traceback
        found = getattr(import_module(module), cls)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"{declared} cannot be loaded: {type(exc).__name__}: {exc}") from None
    from socialsim.agents.generic import GenerativeAgent

    if not (isinstance(found, type) and issubclass(found, GenerativeAgent)):
        raise ValueError(f"{declared} is not an agent class: an architecture subclasses "
                         f"socialsim.agents.generic.GenerativeAgent (docs/extending.md)")
    return found
