"""Actions: the six IrollanValley primitives plus scenario behaviours, as text and as data.

An action is shown to agents as text ("take food 10 from storagebin 6") and executed as an
``Action`` record. ``parse_action`` turns text back into a record, so a free-text choice from an
LLM is validated exactly like a picked one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PRIMITIVES = ("go to", "use", "leave", "take", "put", "chat with")


@dataclass(frozen=True)
class Action:
    verb: str  # go to | use | leave | take | put | chat with | do
    target: str = ""  # area, furniture, person, or behaviour name
    item: str = ""  # for take/put/use ... to handle ITEM
    content: str = ""  # chat content
    tags: tuple[str, ...] = field(default=())

    @property
    def text(self) -> str:
        if self.verb == "go to":
            return f"go to {self.target}"
        if self.verb == "use":
            return f"use {self.target} to handle {self.item}" if self.item else f"use {self.target}"
        if self.verb == "leave":
            return f"leave {self.target}"
        if self.verb == "take":
            return f"take {self.item} from {self.target}"
        if self.verb == "put":
            return f"put {self.item} in/on {self.target}"
        if self.verb == "chat with":
            return f"chat with {self.target}: {self.content}" if self.content else f"chat with {self.target}"
        return self.target  # a behaviour is shown by its own text

    def with_content(self, content: str) -> Action:
        return Action(self.verb, self.target, self.item, content, self.tags)


@dataclass(frozen=True)
class Outcome:
    ok: bool
    reason: str = ""  # why it was refused, perceived by the agent
    tags: tuple[str, ...] = ()


_PATTERNS = [
    ("go to", re.compile(r"^go to (?P<target>.+)$", re.I)),
    ("use", re.compile(r"^use (?P<target>.+?)(?: to handle (?P<item>.+))?$", re.I)),
    ("leave", re.compile(r"^leave (?P<target>.+)$", re.I)),
    ("take", re.compile(r"^take (?P<item>.+?) from (?P<target>.+)$", re.I)),
    ("put", re.compile(r"^put (?P<item>.+?) (?:in/on|in|on) (?P<target>.+)$", re.I)),
    ("chat with", re.compile(r"^chat with (?P<target>[^:]+?)(?:\s*:\s*(?P<content>.*))?$", re.I | re.S)),
]


def parse_action(text: str, behaviours: dict[str, tuple[str, ...]] | None = None) -> Action | None:
    """Parse action text; ``behaviours`` maps behaviour text to its tags. None if no form fits."""
    text = (text or "").strip()
    if not text.lower().startswith("chat with"):  # chat content keeps its own spacing
        text = " ".join(text.rstrip(".").split())
    for behaviour_text, tags in (behaviours or {}).items():
        if text.lower() == behaviour_text.lower():
            return Action("do", behaviour_text, tags=tuple(tags))
    for verb, pattern in _PATTERNS:
        match = pattern.match(text)
        if match:
            groups = {k: (v or "").strip() for k, v in match.groupdict().items()}
            return Action(verb, groups.get("target", ""), groups.get("item", ""), groups.get("content", ""))
    return None
