"""The world of rooms: areas on a Mesa grid, doors, furniture, items with owners and states.

Agents are Mesa ``CellAgent``s on an ``OrthogonalMooreGrid`` whose cells each belong to one area.
The world answers what an agent perceives (text in the IrollanValley form), which actions it can
take now (the six primitives plus the scenario's behaviours), and executes an action after
validating it; a refused action comes back with the reason, and every executed action is kept as
a world fact (with behaviour tags such as smoke, loud, tip) that other code can read.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from mesa.discrete_space import OrthogonalMooreGrid

from socialsim.scenarios.schema import BehaviourSpec, MapSpec, UseEffect
from socialsim.spaces.actions import Action, Outcome, parse_action

HANDS = 2  # how many items an agent can hold


@dataclass
class Furniture:
    name: str
    area: str
    coordinate: tuple[int, int]
    states: set[str] = field(default_factory=set)
    use: UseEffect = field(default_factory=UseEffect)


@dataclass
class Item:
    name: str
    holder: str  # furniture name, or the name of the agent holding it
    held: bool = False
    owner: str | None = None
    states: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        return f"{self.owner}'s {self.name}" if self.owner else self.name


@dataclass
class WorldEvent:
    """One executed (or refused) action: a world fact."""

    step: int
    agent: str
    area: str
    action: str
    verb: str
    target: str
    ok: bool
    reason: str = ""
    tags: tuple[str, ...] = ()
    content: str = ""


# a one-syllable verb ending in consonant-vowel-consonant ('sit', 'chat'; not 'saw', 'fix', 'play')
DOUBLES_LAST = re.compile("[^aeiou]+[aeiou][^aeiouwxy]")


def gerund(text: str) -> str:
    """'smoke a cigarette' -> 'smoking a cigarette' (for 'who is ...' in observations), by the
    regular spelling rules: 'tie' -> 'tying', 'see' and 'be' keep their e, a short verb ending in
    consonant-vowel-consonant doubles its last letter ('sit' -> 'sitting', 'chat' -> 'chatting')."""
    verb, _, rest = text.partition(" ")
    low = verb.lower()
    if low.endswith("ie"):
        verb = verb[:-2] + "y"
    elif low.endswith("e") and low != "be" and not low.endswith(("ee", "ye", "oe")):
        verb = verb[:-1]
    elif DOUBLES_LAST.fullmatch(low):
        verb += verb[-1]
    return f"{verb}ing {rest}".strip()


def _join(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + ", and " + parts[-1]


class World:
    """Areas, doors, furniture and items on an OrthogonalMooreGrid."""

    def __init__(self, spec: MapSpec, rng: random.Random) -> None:
        self.random = rng
        width = max(a.x + a.width for a in spec.areas)
        height = max(a.y + a.height for a in spec.areas)
        self.grid = OrthogonalMooreGrid((width, height), torus=False, random=rng)
        self.areas = {a.name: a for a in spec.areas}
        self.area_at: dict[tuple[int, int], str] = {}
        for a in spec.areas:
            for x in range(a.x, a.x + a.width):
                for y in range(a.y, a.y + a.height):
                    self.area_at[(x, y)] = a.name
        self._cells = {a.name: [self.grid[(x, y)] for x in range(a.x, a.x + a.width) for y in range(a.y, a.y + a.height)]
                       for a in spec.areas}
        self.doors: dict[str, list[str]] = {name: [] for name in self.areas}
        for a, b in spec.doors:
            self.doors[a].append(b)
            self.doors[b].append(a)
        self.furniture: dict[str, Furniture] = {}
        for f in spec.furniture:
            self.furniture[f.name] = Furniture(f.name, f.area, self._free_spot(f.area), set(f.states), f.use)
        self.items = {
            it.name: Item(it.name, it.placed_on, owner=it.owner, states=set(it.states)) for it in spec.items
        }
        self.behaviours: dict[str, BehaviourSpec] = {b.text: b for b in spec.behaviours}
        self.agents: dict[str, Any] = {}
        self.status: dict[str, str] = {}
        self.events: list[WorldEvent] = []
        self._chats_to: dict[str, list[WorldEvent]] = {}  # chats by receiver, in step order

    # --- placement --------------------------------------------------------------------------
    def _free_spot(self, area: str) -> tuple[int, int]:
        """The first cell of an area (row by row) not yet taken by furniture."""
        a = self.areas[area]
        taken = {f.coordinate for f in self.furniture.values()}
        for y in range(a.y, a.y + a.height):
            for x in range(a.x, a.x + a.width):
                if (x, y) not in taken:
                    return (x, y)
        return (a.x, a.y)

    def cells_of(self, area: str) -> list[Any]:
        return self._cells[area]

    def place(self, agent: Any, area: str) -> None:
        """Put an agent on a random cell of an area (the draw comes from the model's RNG)."""
        self.agents[agent.name] = agent
        self.status.setdefault(agent.name, "standing")
        agent.cell = self.random.choice(self.cells_of(area))

    def area_of(self, agent: Any) -> str:
        return self.area_at[agent.cell.coordinate]

    def people_in(self, area: str, besides: Any = None) -> list[Any]:
        # Read the area's cells rather than scanning every agent: O(area), not O(society).
        people = [a for cell in self._cells[area] for a in cell.agents if a is not besides]
        return sorted(people, key=lambda a: a.name)

    def held_by(self, name: str) -> list[Item]:
        return [it for it in self.items.values() if it.held and it.holder == name]

    def items_on(self, furniture: str) -> list[Item]:
        return [it for it in self.items.values() if not it.held and it.holder == furniture]

    def furniture_in(self, area: str) -> list[Furniture]:
        return [f for f in self.furniture.values() if f.area == area]

    def behaviours_in(self, area: str) -> list[BehaviourSpec]:
        return [b for b in self.behaviours.values() if b.areas is None or area in b.areas]

    # --- perception -------------------------------------------------------------------------
    def observe(self, agent: Any) -> str:
        """What the agent perceives, in the IrollanValley form."""
        area = self.area_of(agent)
        seen = [f"a person named {p.name} (who is {self.status.get(p.name, 'standing')})"
                for p in self.people_in(area, besides=agent)]
        seen += [f"a door to {d}" for d in self.doors[area]]
        seen += [f"the {f.name}" + (f" in the {' '.join(sorted(f.states))} status" if f.states else "")
                 for f in self.furniture_in(area)]
        for f in self.furniture_in(area):
            seen += [f"the {it.label} placed on the {f.name}" for it in self.items_on(f.name)]
        text = f"You are in {area}."
        if seen:
            text += f" Looking around you, you see {_join(seen)}."
        held = self.held_by(agent.name)
        if held:
            text += " You are holding " + _join(
                [f"the {it.label}" + (f" in the {' '.join(sorted(it.states))} status" if it.states else "")
                 for it in held]
            ) + "."
        text += f" You are {self.status.get(agent.name, 'standing')}."
        return text

    def describe(self, agent: Any) -> dict[str, Any]:
        """One step's answer as JSON-ready data, like IrollanValley's server: the description of
        what the agent perceives and its action space."""
        return {"agent": agent.name, "place": self.area_of(agent), "description": self.observe(agent),
                "action_space": [a.text for a in self.action_space(agent)]}

    def heard_by(self, name: str, since_step: int) -> list[WorldEvent]:
        """Chats addressed to ``name`` from ``since_step`` on (from an index, not the whole log)."""
        chats = self._chats_to.get(name, [])
        first = len(chats)
        while first > 0 and chats[first - 1].step >= since_step:
            first -= 1
        return chats[first:]

    def action_space(self, agent: Any) -> list[Action]:
        """Every action the agent can take now, in a stable order."""
        area = self.area_of(agent)
        held = self.held_by(agent.name)
        actions = [Action("go to", d) for d in self.doors[area]]
        if self.areas[area].kind != "outside" and self.doors[area]:
            actions.append(Action("leave", area))
        for f in self.furniture_in(area):
            actions.append(Action("use", f.name))
            if f.use.add or f.use.remove:
                actions += [Action("use", f.name, it.label) for it in held]
        if len(held) < HANDS:
            for f in self.furniture_in(area):
                actions += [Action("take", f.name, it.label) for it in self.items_on(f.name)]
        for it in held:
            actions += [Action("put", f.name, it.label) for f in self.furniture_in(area)]
        actions += [Action("chat with", p.name) for p in self.people_in(area, besides=agent)]
        actions += [Action("do", b.text, tags=tuple(b.tags)) for b in self.behaviours_in(area)]
        return actions

    # --- acting -----------------------------------------------------------------------------
    def parse(self, text: str) -> Action | None:
        return parse_action(text, {t: tuple(b.tags) for t, b in self.behaviours.items()})

    def _item(self, label: str) -> Item | None:
        for it in self.items.values():
            if label in (it.name, it.label, f"the {it.label}", f"the {it.name}"):
                return it
        return None

    def check(self, agent: Any, action: Action) -> str:
        """Why ``action`` is impossible for ``agent`` now ('' if it is possible)."""
        area = self.area_of(agent)
        if action.verb == "go to":
            if action.target not in self.areas:
                return f"there is no place called {action.target}"
            if action.target == area:
                return f"you are already in {area}"
            if action.target not in self.doors[area]:
                return f"there is no door from {area} to {action.target}"
        elif action.verb == "leave":
            if action.target != area:
                return f"you are not in {action.target}"
            if not self.doors[area]:
                return f"{area} has no door"
        elif action.verb == "use":
            f = self.furniture.get(action.target)
            if f is None or f.area != area:
                return f"there is no {action.target} in {area}"
            if action.item:
                it = self._item(action.item)
                if it is None or not (it.held and it.holder == agent.name):
                    return f"you are not holding {action.item}"
        elif action.verb == "take":
            f = self.furniture.get(action.target)
            if f is None or f.area != area:
                return f"there is no {action.target} in {area}"
            it = self._item(action.item)
            if it is None or it.held or it.holder != f.name:
                return f"there is no {action.item} on the {action.target}"
            if len(self.held_by(agent.name)) >= HANDS:
                return "your hands are full"
        elif action.verb == "put":
            f = self.furniture.get(action.target)
            if f is None or f.area != area:
                return f"there is no {action.target} in {area}"
            it = self._item(action.item)
            if it is None or not (it.held and it.holder == agent.name):
                return f"you are not holding {action.item}"
        elif action.verb == "chat with":
            other = self.agents.get(action.target)
            if other is None or other is agent:
                return f"there is nobody called {action.target}"
            if self.area_of(other) != area:
                return f"{action.target} is not in {area}"
        elif action.verb == "do":
            b = self.behaviours.get(action.target)
            if b is None:
                return f"'{action.target}' is not something one can do here"
            if b.areas is not None and area not in b.areas:
                return f"you cannot {action.target} in {area}"
        else:
            return f"unknown action '{action.text}'"
        return ""

    def execute(self, agent: Any, action: Action, step: int) -> Outcome:
        """Validate and perform an action; record it as a world fact either way."""
        area = self.area_of(agent)
        reason = self.check(agent, action)
        tags = tuple(self.behaviours[action.target].tags) if action.verb == "do" and not reason else action.tags
        if not reason:
            self._perform(agent, action, area)
        event = WorldEvent(step, agent.name, area, action.text, action.verb, action.target, not reason, reason,
                           tags, action.content)
        self.events.append(event)
        if event.ok and event.verb == "chat with":
            self._chats_to.setdefault(event.target, []).append(event)
        return Outcome(ok=not reason, reason=reason, tags=tags)

    def _perform(self, agent: Any, action: Action, area: str) -> None:
        if action.verb in ("go to", "leave"):
            destination = action.target if action.verb == "go to" else self.doors[area][0]
            agent.cell = self.random.choice(self.cells_of(destination))
            self.status[agent.name] = "moving"
        elif action.verb == "use":
            f = self.furniture[action.target]
            if action.item:
                it = self._item(action.item)
                it.states = (it.states - set(f.use.remove)) | set(f.use.add)
                self.status[agent.name] = f"using the {f.name} to handle the {it.label}"
            else:
                self.status[agent.name] = f"using the {f.name}"
        elif action.verb == "take":
            it = self._item(action.item)
            it.holder, it.held = agent.name, True
            self.status[agent.name] = f"taking the {it.label}"
        elif action.verb == "put":
            it = self._item(action.item)
            it.holder, it.held = action.target, False
            self.status[agent.name] = f"putting the {it.label} on the {action.target}"
        elif action.verb == "chat with":
            self.status[agent.name] = f"chatting with {action.target}"
        elif action.verb == "do":
            self.status[agent.name] = gerund(action.target)

    # --- facts ------------------------------------------------------------------------------
    def facts(self, tag: str, step: int | None = None) -> list[WorldEvent]:
        """Executed actions carrying a behaviour tag (e.g. 'smoke'), optionally at one step."""
        return [e for e in self.events if e.ok and tag in e.tags and (step is None or e.step == step)]

    def is_inside(self, area: str) -> bool:
        return self.areas[area].kind != "outside"
