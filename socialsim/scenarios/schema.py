"""The scenario file format, as pydantic models.

A scenario is data: its agents, a map of areas (rooms/zones on a grid) or a social network, the
context text, step length and run length, and per-architecture sections. Unknown fields are
errors, so a typo is reported rather than silently ignored. Architecture sections (``crsec``,
``asvo``, ``itcmas``) are free-form mappings here and are validated by their architecture.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterable
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from socialsim.llm.redact import redact

# a validator's message that names where: "steps: ...", "doors[0]: ...", "agents[0] (Ann): ..."
_FIELD_PREFIX = re.compile(r"^([\w.\[\]]+(?: \([^()]*\))?): (.*)$", re.S)


def field_problems(exc: ValidationError, prefix: str = "", lines: dict[tuple, int] | None = None) -> list[str]:
    """pydantic's errors as lines a user can act on, one per problem: ``prefix.field: what was
    expected (got value)``, and ``, at line N`` given the ``lines`` of the file's fields. Shared by
    the scenario loader, the architectures' sections and their run parameters, so every bad file or
    ``--set`` value reads the same way."""
    problems = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "value_error" and (named := _FIELD_PREFIX.match(message)):  # our "where: problem"
            where, message = named[1], named[2]  # relative to the field, or (repeating it) its whole path
            field = where if where == field or where.startswith(f"{field}.") else ".".join(filter(None, [field, where]))
        field = ".".join(filter(None, [prefix, field])) or "(top level)"
        got = err.get("input")
        # a whole section or list is not worth repeating, nor a text the message already quotes
        # (a number is always shown: "greater than 0" does not say that 0 was given)
        quoted = isinstance(got, (dict, list)) or got is None or (isinstance(got, str) and repr(got) in message)
        at = f", at line {line}" if lines and (line := line_of(field, lines)) else ""
        problems.append(redact(f"{field}: {message}" + ("" if quoted else f" (got {got!r})") + at))  # no key echoed
    return problems


def yaml_lines(text: str) -> dict[tuple, int]:
    """The line (from 1) where each field of a YAML document is written, by its path of keys and list
    indices: ``("agents", 1, "start_aera")``. Empty for a document PyYAML cannot compose."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    lines: dict[tuple, int] = {}

    def walk(node: yaml.Node, path: tuple) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                lines.setdefault((*path, key.value), key.start_mark.line + 1)
                walk(value, (*path, key.value))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines.setdefault((*path, i), item.start_mark.line + 1)
                walk(item, (*path, i))

    if root is not None:
        walk(root, ())
    return lines


_TOML_HEADER = re.compile(r"^\s*\[\[?([^\]]+)\]")  # [table] or [[array of tables]]
_TOML_KEY = re.compile(r"^\s*([^=#\[][^=#]*?)\s*=")  # the key part of `key = value` (dotted too)


def toml_lines(text: str) -> dict[tuple, int]:
    """The line where each field of a TOML document is written, as ``yaml_lines`` gives YAML's.
    tomllib keeps no positions, so the document is read again line by line: a field's line is the
    first whose document so far holds it, kept only where that line writes it (its key before ``=``,
    or the table or ``[[array]]`` header that opens it). Anything else (an item of an inline or
    multi-line array, a key whose multi-line value ends lines later) gets no line of its own, and a
    problem there names the line of the nearest field holding it: never a wrong one."""
    lines: dict[tuple, int] = {}
    seen: set[tuple] = set()
    rows = text.splitlines(keepends=True)

    def walk(data: Any, path: tuple, row: str, number: int) -> None:
        items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
        for key, value in items:
            where = (*path, key)
            if where not in seen:  # only the line it first appears on can be where it is written
                seen.add(where)
                if _written_on(row, key, path):
                    lines[where] = number
            walk(value, where, row, number)

    for number in range(1, len(rows) + 1):
        try:
            so_far = tomllib.loads("".join(rows[:number]))
        except tomllib.TOMLDecodeError:  # a multi-line string or array not closed yet
            continue
        walk(so_far, (), rows[number - 1], number)
    return lines


def _written_on(row: str, key: str | int, path: tuple) -> bool:
    """Whether ``row`` writes the field ``key`` (of ``path``): its key, or the header opening it (an
    index: the ``[[...]]`` header of a new item of the array ``path`` ends with)."""
    def parts(keys: str) -> list[str]:  # a dotted key's parts, a quoted one's dots kept
        return [k.strip("\"'") for k in re.findall(r"\"[^\"]*\"|'[^']*'|[^.\s]+", keys)]

    if header := _TOML_HEADER.match(row):
        if isinstance(key, int):
            return row.lstrip().startswith("[[") and bool(path) and parts(header[1])[-1] == path[-1]
        return key in parts(header[1])
    written = _TOML_KEY.match(row)
    return isinstance(key, str) and written is not None and key in parts(written[1])


def line_of(field: str, lines: dict[tuple, int]) -> int | None:
    """The line of a field as a problem names it (``map.doors[2]``, ``agents[4] (Ann).traits.x``),
    else of the nearest field holding it (a missing field: the entry that lacks it)."""
    parts = [p for p in re.split(r"[.\[\]]", re.sub(r" \([^()]*\)", "", field)) if p]
    path = tuple(int(p) if p.isdigit() else p for p in parts)
    return next((lines[path[:n]] for n in range(len(path), 0, -1) if path[:n] in lines), None)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentSpec(Strict):
    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    start_area: str | None = None
    traits: dict[str, Any] = Field(default_factory=dict)  # e.g. svo, entrepreneur, initial norms


class AreaSpec(Strict):
    name: str = Field(min_length=1)
    x: int = Field(ge=0)
    y: int = Field(ge=0)
    width: int = Field(ge=1)
    height: int = Field(ge=1)
    kind: Literal["room", "outside"] = "room"


class UseEffect(Strict):
    add: list[str] = Field(default_factory=list)
    remove: list[str] = Field(default_factory=list)


class FurnitureSpec(Strict):
    name: str = Field(min_length=1)
    area: str
    states: list[str] = Field(default_factory=list)
    use: UseEffect = Field(default_factory=UseEffect)  # what using it does to an item one holds


class ItemSpec(Strict):
    name: str = Field(min_length=1)
    placed_on: str  # the furniture it is placed on/in (not `on`: YAML reads that key as True)
    owner: str | None = None
    states: list[str] = Field(default_factory=list)


class BehaviourSpec(Strict):
    """An action beyond the six primitives, tagged so other code can read it as a world fact."""

    name: str = Field(min_length=1)
    text: str = Field(min_length=1)  # how it appears in the action space: "smoke a cigarette"
    tags: list[str] = Field(default_factory=list)  # smoke, loud, tip, ...
    areas: list[str] | None = None  # where it is possible (None: everywhere)


class MapSpec(Strict):
    areas: list[AreaSpec] = Field(min_length=1)
    doors: list[tuple[str, str]] = Field(default_factory=list)
    furniture: list[FurnitureSpec] = Field(default_factory=list)
    items: list[ItemSpec] = Field(default_factory=list)
    behaviours: list[BehaviourSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> MapSpec:
        areas = _unique([a.name for a in self.areas], "areas")
        for i, (a, b) in enumerate(self.doors):
            for end in (a, b):
                if end not in areas:
                    raise ValueError(f"doors[{i}]: unknown area {end!r} (areas: {sorted(areas)})")
        furniture = _unique([f.name for f in self.furniture], "furniture")
        for i, f in enumerate(self.furniture):
            if f.area not in areas:
                raise ValueError(f"furniture[{i}] ({f.name}): unknown area {f.area!r}")
        _unique([it.name for it in self.items], "items")
        for i, it in enumerate(self.items):
            if it.placed_on not in furniture:
                raise ValueError(f"items[{i}] ({it.name}): unknown furniture {it.placed_on!r}")
        for i, b in enumerate(self.behaviours):
            for area in b.areas or []:
                if area not in areas:
                    raise ValueError(f"behaviours[{i}] ({b.name}): unknown area {area!r}")
        for a in self.areas:
            for b in self.areas:
                if a.name < b.name and _overlap(a, b):
                    raise ValueError(f"areas {a.name!r} and {b.name!r} overlap on the grid")
        return self


class NetworkSpec(Strict):
    """Who can observe whom, for settings defined by social ties rather than rooms."""

    edges: list[tuple[str, str]] = Field(default_factory=list)
    directed: bool = False
    complete: bool = False  # everyone observes everyone


class Scenario(Strict):
    name: str = Field(min_length=1)
    title: str = ""
    source: str = ""  # citation of the paper the data come from
    context: str = ""
    step_minutes: float = Field(default=10.0, gt=0)
    default_steps: int = Field(default=10, ge=1)
    default_arch: str = "generic"
    presets: dict[str, dict[str, Any]] = Field(default_factory=dict)  # e.g. paper: {steps: 288}
    agents: list[AgentSpec] = Field(min_length=1)
    map: MapSpec | None = None
    network: NetworkSpec | None = None
    crsec: dict[str, Any] | None = None
    asvo: dict[str, Any] | None = None
    itcmas: dict[str, Any] | None = None
    _file: str = PrivateAttr(default="")  # the file it was loaded from (``load_scenario``)
    _yaml: str = PrivateAttr(default="")  # its file's YAML text, read again only to name a problem's line
    _toml: str = PrivateAttr(default="")  # or its TOML text
    _lines: dict[tuple, int] | None = PrivateAttr(default=None)

    @property
    def lines(self) -> dict[tuple, int]:
        """Where its fields are written in its YAML or TOML file (empty for no file), found when a
        problem first needs a line: composing the file again costs more than loading it (65 ms for
        Hobbs Cafe), which every run, sweep run and test would otherwise pay."""
        if self._lines is None:
            self._lines = yaml_lines(self._yaml) if self._yaml else toml_lines(self._toml) if self._toml else {}
        return self._lines

    @property
    def where(self) -> str:
        """How an error in this scenario names it: its file when it came from one (a copy of a shipped
        scenario keeps its ``name:``, so the name alone sent people to the shipped file)."""
        return self._file or f"scenario {self.name!r}"

    @field_validator("presets")
    @classmethod
    def _preset_steps(cls, presets: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, preset in presets.items():
            steps = preset.get("steps")
            if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
                raise ValueError(f"presets.{name}.steps: expected a whole number >= 1, got {steps!r}")
        return presets

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        names = _unique([a.name for a in self.agents], "agents")
        if self.map is None and self.network is None:
            raise ValueError("a scenario needs a 'map' (areas on a grid) or a 'network'")
        if self.map is not None:
            areas = {a.name for a in self.map.areas}
            for i, a in enumerate(self.agents):
                if a.start_area is not None and a.start_area not in areas:
                    raise ValueError(f"agents[{i}] ({a.name}): unknown start_area {a.start_area!r}")
            for i, it in enumerate(self.map.items):
                if it.owner is not None and it.owner not in names:
                    raise ValueError(f"map.items[{i}] ({it.name}): unknown owner {it.owner!r}")
        if self.network is not None:
            for i, (a, b) in enumerate(self.network.edges):
                for end in (a, b):
                    if end not in names:
                        raise ValueError(f"network.edges[{i}]: unknown agent {end!r}")
                if a == b:  # a self-tie made the agent observe, predict and "help" itself
                    raise ValueError(f"network.edges[{i}]: {a!r} tied to itself (an agent does not observe itself)")
        return self


def misspelt_traits(scenario: Scenario, known: Iterable[str], arch: str) -> list[str]:
    """Agents' trait keys that look like a misspelling of one the architecture reads ("stnace"): it
    ran on the default without a word. Other keys are left alone, for another architecture (``svo``)
    or your own."""
    known = sorted(known)
    problems = []
    for i, agent in enumerate(scenario.agents):
        for key in agent.traits:
            if key not in known and (near := difflib.get_close_matches(str(key), known, n=1)):
                problems.append(f"agents[{i}] ({agent.name}).traits.{key}: not a trait {arch} reads "
                                f"(did you mean {near[0]!r}?)")
    return problems


def _unique(names: list[str], what: str) -> set[str]:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValueError(f"{what}: the name {n!r} is used twice")
        seen.add(n)
    return seen


def _overlap(a: AreaSpec, b: AreaSpec) -> bool:
    return a.x < b.x + b.width and b.x < a.x + a.width and a.y < b.y + b.height and b.y < a.y + a.height


def space_problem(arch: str, space: str, spec: Scenario) -> str:
    """"" when the scenario has the space (``map`` or ``network``) the architecture's agents need, else
    why not: said before a society is built (the dashboard says it before its server starts)."""
    given = {"map": spec.map, "network": spec.network}
    if given[space]:
        return ""
    what = {"map": "areas to move in", "network": "who observes whom"}[space]
    has = next(s for s, v in given.items() if v)
    # its file when it has one: a copy of a shipped scenario keeps the shipped one's name
    named = spec._file or repr(spec.name)
    return f"the {arch} architecture needs a scenario with a '{space}:' ({what}); {named} has a {has} instead"
