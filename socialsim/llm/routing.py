"""Which model answers which operation.

A route table maps an operation name (``DetectConflict``) or a module name (``elimination``) to
a litellm model string; anything unrouted goes to the default model. The default is resolved
from ``--model``, then the ``SOCIALSIM_MODEL`` environment variable, then the embedded engine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from socialsim.yaml_files import load_yaml

EMBEDDED = "local/smollm2"
RULES = "rules"


def default_model(cli_model: str | None = None) -> str:
    return cli_model or os.environ.get("SOCIALSIM_MODEL") or EMBEDDED


def parse_route(text: str) -> tuple[str, str]:
    """Parse ``op=model`` from the command line."""
    name, sep, model = text.partition("=")
    if not sep or not name.strip() or not model.strip():
        raise ValueError(f"--route expects OPERATION=MODEL (e.g. Elim=rules), got {text!r}")
    return name.strip(), model.strip()


def check_route_names(routes: dict[str, str]) -> None:
    """Refuse a route whose name is no operation or module: a typo (``CreatNorm=openai/gpt-4o``)
    would send nothing to its model while the run looked routed. Any architecture's names are
    accepted, so one route file can serve all three."""
    from difflib import get_close_matches

    from socialsim.llm.operations import all_operations

    operations = all_operations()
    known = sorted({op.name for op in operations} | {op.module for op in operations})
    unknown = [name for name in routes if name not in known]
    if unknown:
        named = "; ".join(f"{name!r}" + (f" (did you mean {', '.join(map(repr, near))}?)"
                                          if (near := get_close_matches(name, known, n=2)) else "")
                          for name in unknown)
        raise ValueError(f"route to no operation or module: {named}; `socialsim models` lists them")


def refuse_judge_routes(routes: dict[str, str], judged: list, setting: str) -> None:
    """Refuse a route to an operation an architecture asks only on its judge's own route (ASVO's
    JudgeAction, CRSEC's MatchNorm), or to a module of nothing else: it would never be taken, while the
    run looked routed. ``setting`` says how the judge is chosen."""
    from socialsim.llm.operations import all_operations

    names = {op.name for op in judged}
    modules = {op.module for op in judged} - {op.module for op in all_operations() if op.name not in names}
    if never := [name for name in routes if name in names | modules]:
        raise ValueError(f"route to {', '.join(map(repr, never))} is never taken: "
                         f"{'it is' if len(never) == 1 else 'they are'} asked only of the judge, chosen by {setting}")


@dataclass
class RouteTable:
    default: str = EMBEDDED
    routes: dict[str, str] = field(default_factory=dict)

    def model_for(self, op_name: str, module: str) -> str:
        return self.routes.get(op_name) or self.routes.get(module) or self.default

    def models(self) -> set[str]:
        return {self.default, *self.routes.values()}

    @classmethod
    def from_file(cls, path: str | Path, default: str | None = None) -> RouteTable:
        """Load ``{default: MODEL, routes: {OP_OR_MODULE: MODEL}}`` from YAML. ``default`` (``--model``)
        wins over the file's; with neither, the default model (``$SOCIALSIM_MODEL``, else the embedded
        one). Any other key is refused: a misspelt ``route:`` would route nothing."""
        try:
            with open(path, encoding="utf-8") as text:  # a YAML error then names the file, not "<unicode string>"
                data = load_yaml(text) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML: {exc}") from None
        except OSError as exc:
            raise ValueError(f"--routes {path}: cannot read it ({exc.strerror or exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping with 'default' and 'routes'")
        problems = [f"{key!r}: not a route file's field (expected 'default' and 'routes')"
                    for key in data if key not in ("default", "routes")]
        if "default" in data and not _a_model(data["default"]):
            problems.append(f"default: expected a model string, got {data['default']!r}")
        routes = data.get("routes") or {}
        if not isinstance(routes, dict):
            problems.append(f"routes: expected a mapping OPERATION_OR_MODULE: MODEL, got {routes!r}")
            routes = {}
        problems += [f"routes.{name}: expected a model string, got {model!r}" for name, model in routes.items()
                     if not _a_model(model)]
        if problems:
            raise ValueError(f"{path}: " + "; ".join(problems))
        return cls(default=default_model(default or data.get("default")), routes={str(k): v for k, v in routes.items()})


def _a_model(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())
