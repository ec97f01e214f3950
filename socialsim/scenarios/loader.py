"""Find, read and validate scenario files (YAML or TOML).

``load_scenario("hobbs-cafe")`` finds a shipped scenario by name; any path to a ``.yaml``,
``.yml`` or ``.toml`` file works too. Every problem is reported as a ScenarioError that names the
file, the field and what was expected.
"""

from __future__ import annotations

import functools
import logging
import pickle
import tomllib
from pathlib import Path

import yaml
from pydantic import ValidationError

from socialsim.scenarios.schema import Scenario, field_problems, toml_lines, yaml_lines
from socialsim.yaml_files import NotUtf8Error, load_yaml, read_utf8

log = logging.getLogger("socialsim")

DATA_DIR = Path(__file__).parent / "data"
SUFFIXES = (".yaml", ".yml", ".toml")


class ScenarioError(ValueError):
    """A scenario that cannot be found or is not valid."""


def available_scenarios() -> list[str]:
    return sorted(p.stem for p in DATA_DIR.iterdir() if p.suffix in SUFFIXES)


def scenario_path(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if path.suffix in SUFFIXES:
        if path.is_dir():
            raise ScenarioError(f"{path}: a folder, not a scenario file")
        if not path.is_file():
            raise ScenarioError(f"{path}: no such scenario file")
        return path
    for suffix in SUFFIXES:
        candidate = DATA_DIR / f"{name_or_path}{suffix}"
        if candidate.is_file():
            return candidate
    if path.is_file():  # it was "not a file"
        raise ScenarioError(f"{path}: a scenario file's name ends in {', '.join(SUFFIXES)}, which says how it is read")
    raise ScenarioError(
        f"unknown scenario {str(name_or_path)!r}: not a file and not one of {', '.join(available_scenarios())}"
    )


def _other_format(text: str, path: Path) -> str:
    """A hint when the file reads as the other format: a TOML file named .yaml, a YAML one named .toml."""
    try:
        data = load_yaml(text) if path.suffix == ".toml" else tomllib.loads(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError):
        return ""
    other = ".yaml" if path.suffix == ".toml" else ".toml"
    return f" (it reads as {other.lstrip('.').upper()}: name it {path.stem}{other})" if isinstance(data, dict) and data else ""


def _parsed(text: str, toml: bool) -> object:
    """A scenario text's data, parsed once per text in a process (a sweep, a dashboard's Reset and a
    replay each read the same file again; parsing hobbs-cafe takes ~4 ms): a fresh copy each time,
    so a run that changes what it was given changes no other run's."""
    return pickle.loads(_parsed_pickled(text, toml))


@functools.lru_cache(maxsize=64)
def _parsed_pickled(text: str, toml: bool) -> bytes:
    return pickle.dumps(tomllib.loads(text) if toml else load_yaml(text))


def load_scenario(name_or_path: str | Path) -> Scenario:
    """The validated scenario of a file, with any secret value in it (a key pasted into a
    description) replaced by [REDACTED]: it never reaches a prompt, and a run builds exactly what
    its kept copy (redacted too) holds, so replay and ``--resume`` ask the same calls."""
    from socialsim.llm.redact import redact

    path = scenario_path(name_or_path)
    try:
        raw = read_utf8(path)
    except NotUtf8Error as exc:
        raise ScenarioError(str(exc)) from None
    text = redact(raw)
    if text != raw:
        log.warning("%s holds a secret value (a key or an environment secret); it is read as [REDACTED]", path)
    try:
        # libyaml's safe loader when present (sweeps load many runs); a key given twice is refused
        data = _parsed(text, path.suffix == ".toml")
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"{path}: not valid {path.suffix.lstrip('.').upper()}{_other_format(text, path)}: {exc}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: expected a mapping of scenario fields at the top level{_other_format(text, path)}")
    toml = path.suffix == ".toml"
    try:
        scenario = Scenario.model_validate(data)
        scenario._file = str(path)
        if toml:
            scenario._toml = text
        else:
            scenario._yaml = text
        return scenario
    except ValidationError as exc:
        lines = toml_lines(text) if toml else yaml_lines(text)
        problems = "".join(f"\n  {line}" for line in field_problems(exc, lines=lines))
        raise ScenarioError(f"{path}: invalid scenario{problems}") from None
