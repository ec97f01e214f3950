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

    found = {}
    for point in entry_points(group=ENTRY_POINTS):
        if point.name in ARCHITECTURES:
            log.warning("the architecture %r that %s declares is ignored: socialsim has its own of that name",
                        point.name, point.value)
            continue
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
    try:
        return getattr(import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        if name in ARCHITECTURES:
            raise
        raise ValueError(f"architecture {name!r} ({path}, declared by an installed package under "
                         f"{ENTRY_POINTS!r}) cannot be loaded: {exc}") from None
