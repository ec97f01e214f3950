"""Several deployments behind one model name: a pool of vLLM servers, several keys of a provider.

Scale-out is litellm's job: a file in litellm's own ``model_list`` format (as its proxy reads)
names the deployments, and a ``litellm.Router`` balances the calls over them, with its cooldowns and
fallbacks (the retries are the gateway's, each through the run's limiter)::

    model_list:
      - model_name: openai/llama-3.1-8b          # the name routes, the tape and the ledger use
        litellm_params: {model: openai/meta-llama/Llama-3.1-8B-Instruct, api_base: http://gpu1:8000/v1,
                         api_key: os.environ/VLLM_KEY}
      - model_name: openai/llama-3.1-8b
        litellm_params: {model: openai/meta-llama/Llama-3.1-8B-Instruct, api_base: http://gpu2:8000/v1,
                         api_key: os.environ/VLLM_KEY}
    router_settings: {routing_strategy: least-busy}

The tape's key holds the model name, never the deployment, so a run recorded on a pool replays
anywhere. A secret may only be named (``os.environ/NAME``): the file's path goes into the run's
config.json, and a key written in it would be one copy away from a run directory.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from socialsim.llm.redact import name_secret, names_a_credential, no_credential_in_url

ENV_REFERENCE = "os.environ/"
POINTER_SUFFIX = "_ref"  # litellm's workload-identity fields: a pointer it resolves itself, never read here
# a parameter whose name names a credential (api_key, aws_secret_access_key, vertex_credentials, azure_ad_token,
# redis_password, an extra_headers' X-Auth ...: redact's names_a_credential, as an address's parameters are judged)
# holds a secret: named by an environment variable only
# what a server that checks no key is given (vLLM's documented "EMPTY"): no secret to write out
NOT_SECRETS = (None, "", "EMPTY")


# litellm's Router settings we choose where the file does not: a call a deployment fails is asked
# again of another deployment of its group (litellm's default asks at random, the failed one too, so
# with one server of two down about one call in eight of a phase's first ones still fell back)
ROUTER_DEFAULTS = {"enable_weighted_failover": True}


class DeploymentsError(ValueError):
    """A deployments file that cannot be used; the message names the file and the field."""


class Deployment(BaseModel):
    model_config = ConfigDict(extra="allow")  # litellm's model_info and the like pass through

    model_name: str = Field(min_length=1)
    litellm_params: dict[str, Any]


class DeploymentsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_list: list[Deployment] = Field(min_length=1)
    router_settings: dict[str, Any] = Field(default_factory=dict)


class Deployments:
    """A loaded deployments file: the model names it serves, and the Router a run builds from it."""

    def __init__(self, path: Path, spec: DeploymentsFile) -> None:
        self.path, self.spec = path, spec
        self.names = frozenset(d.model_name for d in spec.model_list)
        # which model_list this is: a check's answer (the places found down) holds for this one only
        self.fingerprint = hashlib.sha256(json.dumps([d.model_dump(mode="json") for d in spec.model_list],
                                                     sort_keys=True, default=str).encode()).hexdigest()[:16]

    def serves(self, model: str) -> bool:
        return model in self.names

    def of(self, model: str) -> list[Deployment]:
        return [d for _, d in self.placed(model)]

    def placed(self, model: str) -> list[tuple[int, Deployment]]:
        """``model``'s deployments with their places in the whole model_list (as a Router's leave_out names them)."""
        return [(place, d) for place, d in enumerate(self.spec.model_list) if d.model_name == model]

    def new_router(self, models: Iterable[str] | None = None, leave_out: Iterable[int] = ()):
        """litellm's Router over every deployment (a run's own: see ``Gateway._router``); ``models``:
        the run's, whose references must all be set (another model's, never asked unless a fallback
        names it, are read where set and otherwise left as written); ``leave_out``: the places in
        model_list of deployments the run's check found down. Given to the Router, one refusing
        connections fails at once, so a least-busy Router kept choosing it and its calls fell back."""
        from socialsim.llm.litellm_setup import litellm

        asked = None if models is None else set(models)
        left_out = set(leave_out)
        settings = {**ROUTER_DEFAULTS, **self.read_references(self.spec.router_settings, "router_settings")}
        return litellm.Router(model_list=[self._with_nested_references_read(d, asked is None or d.model_name in asked)
                                          for i, d in enumerate(self.spec.model_list) if i not in left_out],
                              **settings)

    def _with_nested_references_read(self, deployment: Deployment, strict: bool = True) -> dict[str, Any]:
        """A deployment as the Router is given it: litellm reads the ``os.environ/`` references of its
        top-level parameters itself (leaving the pointers it must), but sends a nested one as written:
        an ``extra_headers`` Authorization would reach the server as the text ``os.environ/NAME``."""
        entry = deployment.model_dump()
        entry["litellm_params"] = {
            name: self.read_references(value, f"{deployment.model_name}'s {name}", strict)
            if isinstance(value, dict | list) else value for name, value in deployment.litellm_params.items()}
        return entry

    def resolved_params(self, deployment: Deployment) -> dict[str, Any]:
        """A deployment's parameters with its environment references read, however deeply nested (for
        the pre-flight check, which asks each deployment itself); a variable not set is named. A
        top-level ``*_ref`` field is a pointer litellm hands on as written (workload identity)."""
        return {name: value if name.endswith(POINTER_SUFFIX)
                else self.read_references(value, f"{deployment.model_name}'s {name}")
                for name, value in deployment.litellm_params.items()}

    def check_environment(self, models: Iterable[str]) -> None:
        """Raise DeploymentsError naming the first ``os.environ/`` reference of the deployments of
        ``models`` (the run's), or of the router settings, whose variable is not set (before step 1:
        the Router is built at the run's first pooled call). A shared file's other deployments are
        not the run's concern."""
        asked = set(models)
        for deployment in self.spec.model_list:
            if deployment.model_name in asked:
                self.resolved_params(deployment)
        self.read_references(self.spec.router_settings, "router_settings")

    def read_references(self, node: Any, where: str, strict: bool = True) -> Any:
        """``node`` with every ``os.environ/NAME`` in it replaced by NAME's value; one not set raises
        DeploymentsError naming it (``strict``) or is left as written."""
        if isinstance(node, dict):
            return {key: self.read_references(value, f"{where}.{key}", strict) for key, value in node.items()}
        if isinstance(node, list | tuple):
            return [self.read_references(value, f"{where}[{i}]", strict) for i, value in enumerate(node)]
        if isinstance(node, str) and node.startswith(ENV_REFERENCE):
            variable = node[len(ENV_REFERENCE):]
            if variable in os.environ:
                return os.environ[variable]
            if strict:
                raise DeploymentsError(f"{self.path}: {where} names the environment variable {variable}, "
                                       f"which is not set")
        return node


def load_deployments(path: str | Path | None) -> Deployments | None:
    """The deployments file at ``path`` (None: none), checked: its YAML, its fields, no secret
    written in it, router settings litellm's Router takes."""
    if path is None:
        return None
    from socialsim.yaml_files import NotUtf8Error, read_utf8

    path = Path(path).expanduser().resolve()
    try:
        text = read_utf8(path)
    except NotUtf8Error as exc:
        raise DeploymentsError(f"deployments file {exc}") from None
    except OSError as exc:
        raise DeploymentsError(f"deployments file {path}: {exc.strerror or exc}") from None
    return _load(path, text)


@functools.cache
def _load(path: Path, text: str) -> Deployments:
    """Checked once per file and text: an edited file is checked again, however soon after it was
    read (a file's modification time may not change within one tick of its file system's clock)."""
    import yaml

    from socialsim.yaml_files import load_yaml

    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:  # its problem and place, not its quote of the line (a key may be on it)
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        problem = re.sub(r"'[^']{4,}'", "'...'", problem)  # an undefined alias or tag quotes the text: a key?
        raise DeploymentsError(f"deployments file {path} is not valid YAML: {problem}{where}") from None
    try:
        spec = DeploymentsFile.model_validate(data if data is not None else {})
    except ValidationError as exc:  # where and what, never the value given (scenarios' field_problems shows it)
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {e['msg']}" for e in exc.errors())
        raise DeploymentsError(f"deployments file {path}: {problems}") from None
    problems = [f"model_list[{i}].litellm_params: no 'model' (the litellm model string this deployment calls)"
                for i, d in enumerate(spec.model_list) if not d.litellm_params.get("model")]
    for where, name, value in _values(spec.model_dump()):
        if isinstance(value, str) and value.startswith(ENV_REFERENCE):
            if names_a_credential(name):
                name_secret(value[len(ENV_REFERENCE):])  # redacted wherever it shows, whatever it is called
        elif names_a_credential(name) and isinstance(value, str) and value not in NOT_SECRETS:  # not a count or a price
            problems.append(f"{where} holds a secret written out: write {ENV_REFERENCE}NAME and set NAME in the "
                            f"environment (the file's path is kept in the run's config.json)")
        elif isinstance(value, str) and "://" in value:
            try:
                no_credential_in_url(value)
            except ValueError as exc:
                problems.append(f"{where}: {exc}")
    unknown = sorted(set(spec.router_settings) - _router_parameters())
    if unknown:
        problems.append(f"router_settings: litellm's Router takes no {', '.join(unknown)}")
    if problems:
        raise DeploymentsError(f"deployments file {path}: " + "; ".join(problems))
    return Deployments(path, spec)


def _values(node: Any, where: str = "", name: str = ""):
    """(where, name, value) of every value in the file, however deeply nested (extra_headers'
    Authorization, router_settings.cache_kwargs' password): ``model_list[0].litellm_params.api_key``."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _values(value, f"{where}.{key}" if where else str(key), str(key))
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            yield from _values(value, f"{where}[{i}]", name)
    else:
        yield where, name, node


@functools.cache
def _router_parameters() -> frozenset[str]:
    from socialsim.llm.litellm_setup import litellm

    return frozenset(inspect.signature(litellm.Router.__init__).parameters) - {"self", "model_list"}
