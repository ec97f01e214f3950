"""Architecture parameters from one declared source: each architecture's pydantic settings model.

An architecture class names its settings model as ``settings_model`` (``CRSECSettings``,
``ASVOSettings``, ``ITCMASConfig``). Everything that sets a parameter reads it from there:
``socialsim run --set crsec.enable_chat=false``, sweep files, the dashboard's controls and
``SocietyModel(..., **params)``. Types, ranges (``Field(ge=, le=)``), choices (``Literal``) and help
texts (``Field(description=)``) are declared once, so a control built from a :class:`Param` is valid
by construction and a bad ``--set`` gets a message naming the key, the value and what was expected.
"""

from __future__ import annotations

import difflib
import json
import logging
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter, ValidationError

from socialsim.llm.redact import SECRET_VALUE, holds_secret, redact
from socialsim.scenarios.schema import field_problems

log = logging.getLogger("socialsim")


@dataclass(frozen=True)
class Param:
    """One architecture parameter, as a control or a ``--set`` key sees it."""

    name: str
    kind: Literal["bool", "int", "float", "choice", "text", "json"]
    default: Any
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] = ()
    help: str = ""
    required: bool = False
    low_open: bool = False  # the bound itself is refused (``gt``, ``lt``)
    high_open: bool = False

    def limits(self) -> str:
        """The allowed range as a reader writes it: ``(0, 1]``, ``>= 1``, ``< 10``; "" when unbounded."""
        if self.low is not None and self.high is not None:
            return f"{'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {self.high}"
        return ""


def settings_model(arch: str) -> type[BaseModel] | None:
    """The pydantic model holding an architecture's parameters (None: it has none)."""
    from socialsim.agents import agent_class

    return getattr(agent_class(arch), "settings_model", None)


def typed_values(arch: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as their parameters' types make them (a sweep file's "false" is False, 1 is 1.0 for
    a number), so one setting written two ways is one run; a value its type refuses, or a name the
    architecture does not have, is left as given for the build to refuse by name."""
    model = settings_model(arch)
    if model is None:
        return dict(values)
    typed = {}
    for name, value in values.items():
        field = model.model_fields.get(name)
        try:
            typed[name] = value if field is None else TypeAdapter(field.annotation).validate_python(value)
        except ValidationError:
            typed[name] = value
    return typed


def parameters(arch: str) -> list[Param]:
    """Every declared parameter of an architecture, in declaration order."""
    model = settings_model(arch)
    return [] if model is None else [_param(name, field) for name, field in model.model_fields.items()]


KINDS = {bool: "bool", int: "int", float: "float", str: "text"}


def _param(name: str, field) -> Param:
    annotation = field.annotation
    optional = False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        annotation = args[0] if len(args) == 1 else annotation
    low = high = None
    low_open = high_open = False
    for meta in field.metadata:
        for attr, is_open in (("ge", False), ("gt", True)):
            if getattr(meta, attr, None) is not None:
                low, low_open = getattr(meta, attr), is_open
        for attr, is_open in (("le", False), ("lt", True)):
            if getattr(meta, attr, None) is not None:
                high, high_open = getattr(meta, attr), is_open
    default = None if field.is_required() else field.get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        default = default.model_dump()
    help_text = field.description or ""
    if typing.get_origin(annotation) is Literal:
        kind, choices = "choice", typing.get_args(annotation)
        return Param(name, kind, default, choices=choices, help=help_text, required=field.is_required())
    kind = KINDS.get(annotation, "json")
    if optional and kind != "json":
        kind = kind if default is not None else "json"
    return Param(name, kind, default, low, high, help=help_text, required=field.is_required(),
                 low_open=low_open, high_open=high_open)


class ParamError(ValueError):
    """A ``--set`` assignment that names an unknown parameter or gives a value of the wrong kind."""


def parse_assignments(arch: str, items: list[str]) -> dict[str, Any]:
    """``["crsec.enable_chat=false", "n_candidates=4"]`` -> typed values, checked against the model.

    A key may carry the architecture as a prefix (``itcmas.blend_rate``); a prefix of another
    architecture is an error. Values are parsed as JSON when they parse (numbers, booleans, lists,
    objects), else taken as text; pydantic then checks the type and range of each one.
    """
    if not items:  # nothing to check: an unknown architecture is said where it was written
        return {}
    model = settings_model(arch)
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if holds_secret(item):  # said without the value, which is the secret
            raise ParamError(f"--set {redact(key)}=...: {SECRET_VALUE}")
        if not sep or not key:
            raise ParamError(f"--set {item!r}: expected KEY=VALUE, e.g. --set {arch}.PARAM=VALUE")
        prefix, dot, name = key.rpartition(".")
        if dot and prefix != arch:
            raise ParamError(f"--set {item!r}: {prefix!r} is not the architecture of this run ({arch!r})")
        name = name if dot else key
        if model is None:
            raise ParamError(f"--set {item!r}: architecture {arch!r} has no parameters")
        if name not in model.model_fields:
            known = ", ".join(model.model_fields)
            near = difflib.get_close_matches(name, list(model.model_fields), n=1)
            hint = f"; did you mean {near[0]}?" if near else ""
            raise ParamError(f"--set {item!r}: unknown {arch} parameter {name!r}{hint} (known: {known})")
        field = model.model_fields[name]
        # a choice's own word is that word (ASVO's tom_scope "none"), before "none" is read as null
        value = raw.strip() if raw.strip() in _choices(field) else _literal(raw.strip())
        out[name], problem = _checked(arch, model, name, value)
        if problem:
            raise ParamError(f"--set {item!r}: {problem}")
    return out


def check_params(arch: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` (``SocietyModel(**params)``, a sweep's grid point, a preset) checked against the
    architecture's declared parameters as ``--set`` checks them, every problem at once: unknown names
    (with the nearest known ones) and values their type, range or validator refuses raise
    :class:`ParamError`. Returns the typed values. A check of the whole (a field against another, or
    against the scenario's own section) is the architecture's, when it builds its settings."""
    if secret := sorted(redact(str(given)) for given, value in params.items()
                        if holds_secret(given) or holds_secret(value)):
        raise ParamError(f"{arch} parameter(s) {', '.join(secret)}: {SECRET_VALUE}")
    model = settings_model(arch)
    if model is None:
        if params:  # nothing would read them: a typo would pass unseen
            raise ParamError(f"architecture {arch!r} has no parameters; given: {', '.join(sorted(params))}")
        return {}
    known = list(model.model_fields)
    # a field may also be given by its alias, and a model with extra="allow" takes any other name
    names = {name: name for name in known}
    for name, field in model.model_fields.items():
        for alias in (field.alias, field.validation_alias):
            if isinstance(alias, str):
                names[alias] = name
    unknown = sorted(set(params) - set(names))
    if unknown and model.model_config.get("extra") != "allow":
        near = sorted({m for name in unknown for m in difflib.get_close_matches(name, known, n=1)})
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise ParamError(f"unknown {arch} parameter(s) {unknown}{hint} (known: {', '.join(known)})")
    for name in unknown:  # an extra the model allows, but so like a field that it is a typo of it
        if near := difflib.get_close_matches(name, known, n=1, cutoff=0.8):
            log.warning("%s parameter %r is taken as an extra; did you mean %r?", arch, name, near[0])
    by_field: dict[str, list[str]] = {}
    for given in params:
        if given in names:
            by_field.setdefault(names[given], []).append(given)
    for name, given in by_field.items():
        field = model.model_fields[name]
        alias = field.validation_alias if isinstance(field.validation_alias, str) else field.alias
        if len(given) > 1:
            raise ParamError(f"{arch} parameter {name!r} is given twice, as {' and '.join(map(repr, given))}")
        if alias and given == [name] and not model.model_config.get("populate_by_name"):
            raise ParamError(f"{arch} parameter {name!r} is read by its alias: give it as {alias!r}")
    out, problems = {}, []
    for given, value in params.items():
        name = names.get(given)
        if name is None:  # an extra the model allows: its own validators see it when it is built
            out[given] = value
            continue
        try:  # the field's type, range and own validators, as pydantic words them for a scenario's section
            model.__pydantic_validator__.validate_assignment(model.model_construct(), name, value)
        except ValidationError as exc:
            mine = [e for e in exc.errors() if tuple(e["loc"]) == (name,)]
            if mine:
                problems += field_problems(ValidationError.from_exception_data(exc.title, mine), arch)
                continue
        except Exception:  # noqa: BLE001 - a whole-settings check on the half-built probe: the build's
            pass
        try:
            out[given] = TypeAdapter(model.model_fields[name].annotation).validate_python(value)
        except ValidationError:  # refused only with the other fields (a validator's coercion): as given
            out[given] = value
    if problems:
        raise ParamError("\n".join([f"invalid {arch} parameters", *(f"  {p}" for p in problems)]))
    return out


def _checked(arch: str, model: type[BaseModel], name: str, value: Any) -> tuple[Any, str]:
    """One parameter's value as its field makes it, and what is wrong with it ("" if nothing)."""
    field = model.model_fields[name]
    try:
        typed = TypeAdapter(field.annotation).validate_python(value)
    except ValidationError as exc:
        why = "; ".join(e["msg"] for e in exc.errors())
        return value, f"{arch}.{name} expects {_expected(name, field)} ({why})"
    if typed is None:  # an optional parameter's null has no range to be in
        return typed, ""
    bounds = [("ge", lambda v, b: v >= b), ("gt", lambda v, b: v > b),
              ("le", lambda v, b: v <= b), ("lt", lambda v, b: v < b)]
    for meta in field.metadata:  # ranges live in the field's metadata, not its annotation
        for attr, ok in bounds:
            bound = getattr(meta, attr, None)
            if bound is not None and not ok(typed, bound):
                return typed, f"{arch}.{name} expects {_expected(name, field)}"
    if why := _field_validator_refusal(model, name, typed):  # e.g. a time of day past 23:59
        return typed, f"{arch}.{name}: {why}"
    return typed, ""


def _field_validator_refusal(model: type[BaseModel], name: str, value: Any) -> str:
    """What the settings' own validators of this one field say against ``value`` ("" if nothing):
    checked when the value is given, not only once the run is built. A check of the whole settings
    (a field against another, fields the scenario supplies) is left to the build."""
    try:
        model.__pydantic_validator__.validate_assignment(model.model_construct(), name, value)
    except ValidationError as exc:
        return "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors() if tuple(e["loc"]) == (name,))
    except Exception:  # noqa: BLE001 - a whole-settings check on the half-built probe: not this field's
        return ""
    return ""


def _choices(field) -> set[str]:
    """The words a choice parameter takes (its Literal's, also inside an Optional)."""
    args = typing.get_args(field.annotation)
    literals = [field.annotation, *args]
    return {str(v) for a in literals if typing.get_origin(a) is typing.Literal for v in typing.get_args(a)}


def _literal(raw: str) -> Any:
    """A ``--set`` value as written: null, JSON, else text. Yes/no/on/off need no case here: pydantic
    reads them as booleans for a boolean parameter, and they stay words for a text one."""
    if raw.lower() in ("none", "null"):
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _expected(name: str, field) -> str:
    param = _param(name, field)
    if param.kind == "choice":
        return "one of " + ", ".join(map(str, param.choices))
    limits = param.limits()
    rng = f" in {limits}" if param.low is not None and param.high is not None else (f" {limits}" if limits else "")
    # an optional number or text (kind "json": its control takes null) is named by what it holds
    args = typing.get_args(field.annotation)
    held = [KINDS[a] for a in args if a in KINDS] if type(None) in args and len(args) == 2 else []
    words = {"bool": "true or false", "int": "an integer", "float": "a number", "text": "text"}
    return words.get(held[0] if held else param.kind, "a JSON value") + rng + (", or null" if held else "")
