"""Agent architectures by name: generic (and crsec, asvo, itcmas as they land)."""

from __future__ import annotations

from importlib import import_module

ARCHITECTURES = {
    "generic": "socialsim.agents.generic:GenerativeAgent",
    "crsec": "socialsim.agents.crsec.agent:CRSECAgent",
    "asvo": "socialsim.agents.asvo.agent:ASVOAgent",
    "itcmas": "socialsim.agents.itcmas.agent:ITCMASAgent",
}


def agent_class(name: str) -> type:
    """The Mesa agent class of an architecture, imported on first use."""
    try:
        module, _, cls = ARCHITECTURES[name].partition(":")
    except KeyError:
        raise ValueError(f"unknown architecture {name!r}; known: {', '.join(sorted(ARCHITECTURES))}") from None
    return getattr(import_module(module), cls)
