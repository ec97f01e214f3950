"""The sweep file (YAML or TOML): which runs a sweep is made of, validated with clear errors.

A sweep is a parameter grid, as in ``mesa.batch_run``: under ``parameters`` every list is swept
(the runs are the cartesian product of all lists) and every single value is held fixed; the
replicates are the seeds, passed to ``batch_run`` as ``rng=[...]``. A parameter is any keyword
argument of ``SocietyModel``: ``scenario``, ``arch``, ``model``, ``routes``, ``preset``, ``steps``
or any architecture parameter / ablation (``enable_chat``, ``svo_mix``, ..., or as ``--set`` writes it,
``crsec.enable_chat``). To hold a
list-valued parameter fixed, wrap it in one more list (``tracked: [[a, b]]``).

```yaml
name: hobbs-ablation
replicates: 3          # seeds 0, 1, 2 (or: seeds: [7, 11, 13])
steps: 12              # optional: default each scenario's default_steps
parameters:
  scenario: hobbs-cafe
  arch: [generic, crsec]
  model: rules
  enable_chat: [true, false]
figures:
  - {outcome: adoption, x: enable_chat, hue: arch}
```
Every problem is a SweepFileError naming the file, the field and what was expected.
"""

from __future__ import annotations

import itertools
import json
import tomllib
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from socialsim.agents import architectures
from socialsim.llm.gateway import ApiBase, UnitPrice
from socialsim.llm.limiter import DEFAULT_CONCURRENCY
from socialsim.llm.redact import SECRET_VALUE, holds_secret, redact
from socialsim.scenarios.loader import SUFFIXES, ScenarioError, scenario_path
from socialsim.scenarios.schema import field_problems
from socialsim.yaml_files import NotUtf8Error, load_yaml, read_utf8

# Per-run settings the sweep owns; they are not grid parameters.
RESERVED = {"rng", "seed", "seeds", "gateway", "sweep_dir"}
# Per-run limits and endpoint: one value for the whole sweep, given at the top level.
LIMITS = ("max_cost", "max_calls", "api_base", "max_concurrency", "rpm", "tpm", "price", "deployments")
# Grid parameters that are RunConfig fields (everything else is an architecture parameter).
CONFIG_PARAMS = ("scenario", "arch", "model", "routes", "preset", "steps")


class SweepFileError(ValueError):
    """A sweep file that cannot be read or is not valid."""


class FigureSpec(BaseModel):
    """One sweep figure: a final-step outcome against a swept parameter, replicates as spread."""

    model_config = ConfigDict(extra="forbid")
    outcome: str = Field(min_length=1)
    x: str = Field(min_length=1)
    hue: str | None = None


class SweepSpec(BaseModel):
    """A validated sweep: grid, seeds and per-run limits."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="sweep", min_length=1, pattern=r"^[\w.-]+$")
    parameters: dict[str, Any] = Field(default_factory=dict)
    seeds: list[Annotated[int, Field(ge=0)]] | None = Field(default=None, min_length=1)  # numpy's seeds are >= 0
    replicates: int | None = Field(default=None, ge=1)
    seed: int = Field(default=0, ge=0)  # first seed when `replicates` is given
    steps: int | None = Field(default=None, ge=1)  # same as parameters.steps (a single value)
    processes: int = Field(default=1, ge=1)
    max_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # per run, USD of live calls
    max_calls: int | None = Field(default=None, ge=0)  # per run, live calls
    max_concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1)
    # a provider's quota per model, as --rpm/--tpm: the whole sweep's, shared out among its processes
    # (``sweeps.process_limits``)
    rpm: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    tpm: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    api_base: ApiBase | None = None  # endpoint of provider models; never a key
    # USD per 1M prompt and completion tokens, for a model litellm has no price for (as --price)
    price: UnitPrice | None = None
    # a file of several deployments behind model names (as `socialsim run --deployments`); a relative
    # path is taken from the sweep file's folder
    deployments: str | None = None
    figures: list[FigureSpec] = Field(default_factory=list)
    _source: str = PrivateAttr(default="sweep")  # the file it came from, for error messages

    @property
    def source(self) -> str:
        return self._source

    @field_validator("seeds", "replicates", "seed", "steps", "processes", "max_cost", "max_calls", "max_concurrency",
                     "rpm", "tpm", mode="before")
    @classmethod
    def _no_boolean_number(cls, value: Any) -> Any:
        """YAML reads ``yes`` and ``true`` as booleans, which pydantic takes for 1 (``rpm: yes`` was one
        request a minute); a number here is written as one. (numpy's numbers still pass.)"""
        said = "expected a number, and YAML reads yes/no and true/false as booleans"
        if isinstance(value, bool):
            raise ValueError(said)  # the value is shown beside the message
        if isinstance(value, list) and any(isinstance(v, bool) for v in value):
            raise ValueError(f"{said} (got {value!r})")
        return value

    @field_validator("name")
    @classmethod
    def _no_secret_in_name(cls, name: str) -> str:
        """The name is the sweep's folder, shown and kept as it is: a key there is refused, never redacted."""
        from socialsim.llm.redact import redact

        if redact(name) != name:
            raise ValueError("holds a secret value (a key?); the sweep's folder is named after it")
        return name

    @model_validator(mode="before")
    @classmethod
    def _architecture_prefixes(cls, data: Any) -> Any:
        """A parameter written as ``--set`` writes it, ``crsec.temptation``, is CRSEC's ``temptation``
        (the README sets a parameter "the same way everywhere"); a figure may name it either way.
        The prefix must be the architecture of every run the grid names."""
        if not isinstance(data, dict) or not isinstance(data.get("parameters"), dict):
            return data
        params, renamed = data["parameters"], {}
        archs = {a for a in _values(params.get("arch")) if isinstance(a, str)}
        for key in params:
            prefix, dot, name = str(key).rpartition(".")
            if not (dot and prefix in architectures()):
                continue
            if archs and archs != {prefix}:
                raise ValueError(f"parameters.{key}: {prefix!r} is not the architecture of every run "
                                 f"(arch: {', '.join(sorted(archs))})")
            if name in params or name in renamed.values():
                raise ValueError(f"parameters.{key}: given twice, also as {name!r}")
            renamed[key] = name
        if not renamed:
            return data
        data = {**data, "parameters": {renamed.get(k, k): v for k, v in params.items()}}
        if isinstance(data.get("figures"), list):  # anything else is refused as written, prefixed or not
            data["figures"] = [{**fig, **{f: renamed[fig[f]] for f in ("x", "hue") if fig.get(f) in renamed}}
                               if isinstance(fig, dict) else fig for fig in data["figures"]]
        return data

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, params: dict[str, Any]) -> dict[str, Any]:
        for name, values in params.items():
            if name in LIMITS:
                raise ValueError(f"{name}: set it at the top level of the sweep file (one value for every run)")
            if name in RESERVED:
                raise ValueError(f"{name}: not a grid parameter (replicates are set by `seeds` or `replicates`)")
            if isinstance(values, list) and not values:
                raise ValueError(f"{name}: expected a value or a non-empty list of values, got []")
            if holds_secret(values) or holds_secret(name):  # said without the value, which is the secret
                raise ValueError(f"{redact(name)}: {SECRET_VALUE}")
        for value in _values(params.get("arch")):
            if value is not None and value not in architectures():
                raise ValueError(f"arch: expected one of {', '.join(sorted(architectures()))}, got {value!r}")
        for value in _values(params.get("model")):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"model: expected a litellm model string, 'rules' or 'local/smollm2', got {value!r}")
        for value in _values(params.get("routes")):
            if value is not None and not (isinstance(value, dict)
                                          and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
                raise ValueError(f"routes: expected a mapping OPERATION: MODEL (or a list of them), got {value!r}")
        for value in _values(params.get("steps")):
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ValueError(f"steps: expected a whole number >= 1, got {value!r}")
        return params

    @model_validator(mode="after")
    def _seeds(self) -> SweepSpec:
        if self.seeds is not None and self.replicates is not None:
            raise ValueError("replicates: give either `seeds` (a list) or `replicates` (a number), not both")
        if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds: expected distinct seeds, got {self.seeds}")
        if self.steps is not None and "steps" in self.parameters:
            raise ValueError("steps: given both at the top level and under `parameters`")
        names = set(self.parameters) | {"replicate", "rng"}
        for i, fig in enumerate(self.figures):
            for field in ("x", "hue"):
                value = getattr(fig, field)
                if value is not None and value not in names:
                    raise ValueError(f"figures.{i}.{field}: expected one of the parameters "
                                     f"({', '.join(sorted(names))}), got {value!r}")
            if fig.hue is not None and fig.hue == fig.x:
                raise ValueError(f"figures.{i}.hue: expected another parameter than x ({fig.x!r}), or no hue")
        return self

    # --- the grid ---------------------------------------------------------------------------
    def seed_list(self) -> list[int]:
        if self.seeds is not None:
            return list(self.seeds)
        return [self.seed + i for i in range(self.replicates or 1)]

    def grid(self) -> dict[str, list[Any]]:
        """Every parameter as a list of values (the form ``mesa.batch_run`` takes)."""
        grid = {name: values if isinstance(values, list) else [values] for name, values in self.parameters.items()}
        if self.steps is not None:
            grid["steps"] = [self.steps]
        return grid

    def swept(self) -> list[str]:
        """The parameters that take more than one value."""
        return [name for name, values in self.grid().items() if len(values) > 1]

    def combinations(self) -> list[dict[str, Any]]:
        grid = self.grid()
        return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]

    def n_runs(self) -> int:
        return len(self.combinations()) * len(self.seed_list())


def _values(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and validate a sweep file; relative scenario paths are taken from the file's folder."""
    path = Path(path)
    if path.is_dir():  # a sweep's output folder, or a typo: it exists, so not "no such file"
        raise SweepFileError(f"{path}: a directory, not a sweep file (give its .yaml, .yml or .toml file)")
    if not path.is_file():
        raise SweepFileError(f"{path}: no such sweep file")
    if path.suffix not in SUFFIXES:
        raise SweepFileError(f"{path}: expected a .yaml, .yml or .toml sweep file")
    try:
        text = read_utf8(path)
    except NotUtf8Error as exc:
        raise SweepFileError(str(exc)) from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else load_yaml(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        raise SweepFileError(f"{path}: not valid {path.suffix.lstrip('.').upper()}: {exc}") from None
    if not isinstance(data, dict):
        raise SweepFileError(f"{path}: expected a mapping of sweep fields at the top level")
    data.setdefault("name", path.stem)
    return validate_sweep(data, source=str(path), base=path.parent)


def validate_sweep(data: dict[str, Any] | SweepSpec, source: str = "sweep", base: Path | None = None) -> SweepSpec:
    """Validate a sweep given as a mapping (what ``socialsim.batch.sweep`` accepts in code)."""
    if isinstance(data, SweepSpec):
        return data
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        problems = [f"  {line}" for line in field_problems(exc)]
        raise SweepFileError(f"{source}: invalid sweep file\n" + "\n".join(problems)) from None
    scenarios = []
    for value in _values(spec.parameters.get("scenario", "hobbs-cafe")):
        name = str(value)
        if base is not None and Path(name).suffix in SUFFIXES and (base / name).is_file() and not Path(name).is_file():
            name = str(base / name)
        try:
            scenario_path(name)
        except ScenarioError as exc:
            raise SweepFileError(f"{source}: parameters.scenario: {exc}") from None
        scenarios.append(name)
    if "scenario" in spec.parameters:
        spec.parameters["scenario"] = scenarios if isinstance(spec.parameters["scenario"], list) else scenarios[0]
    if spec.deployments is not None:
        from socialsim.llm.deployments import load_deployments

        path = Path(spec.deployments).expanduser()
        if base is not None and not path.is_absolute() and (base / path).is_file():
            path = base / path
        try:
            spec.deployments = str(load_deployments(path).path)  # checked now, and absolute for every worker
        except ValueError as exc:
            raise SweepFileError(f"{source}: deployments: {exc}") from None
    spec._source = source
    return spec


def encode(value: Any) -> Any:
    """A parameter value as a table cell: scalars as they are, mappings and lists as JSON."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, sort_keys=True, default=str)
