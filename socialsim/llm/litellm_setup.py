"""Configure litellm before anything imports it: no network on import, no debug banners."""

from __future__ import annotations

import gc
import logging
import os
import warnings

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("LITELLM_LOG", "ERROR")
# OpenAI-compatible chat calls (openai/, and a self-hosted server behind --api-base) go through
# litellm's own HTTP client instead of the OpenAI SDK, which litellm otherwise wraps: the same
# request, reply, error classes and retries (litellm's, with tenacity), about 1 ms less client CPU
# a call (bench/bench_sdk.py). The switch is litellm's; setting it to false keeps the SDK path.
os.environ.setdefault("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER", "true")

import litellm  # noqa: E402

litellm.suppress_debug_info = True
litellm.telemetry = False
# An OpenAI-compatible embedding request went through the OpenAI SDK with this many retries (2), unseen
# by our rate limiter and whatever num_retries said (litellm reads none for embeddings, and takes a
# max_retries of 0 for "not set"): 3 attempts at --retries 0 or 5. The gateway retries each call itself,
# through the limiter. litellm reads this default for embeddings only (OpenAI-compatible and Azure);
# a --deployments entry's own max_retries still reaches its SDK.
litellm.DEFAULT_MAX_RETRIES = 0
# litellm's own warnings (a model missing from its cost map, said at each registration) are ours to say
logging.getLogger("LiteLLM").setLevel(logging.ERROR)
# litellm builds a request's coroutine in a worker thread and awaits it back on the loop; a call
# cancelled in between (Ctrl-C, a budget or an outage stopping the phase) leaves that coroutine
# unawaited, its request never sent, and Python warns about it on the way out: noise, not a problem
warnings.filterwarnings("ignore", message="coroutine 'BaseLLMHTTPHandler.async_completion' was never awaited",
                        category=RuntimeWarning)

# litellm's import leaves some 300k long-lived objects; a full collection walks them all, a pause of
# 0.25-0.5 s inside a phase of concurrent calls (bench/bench_sdk.py). Frozen, they are left out of
# every later collection. Everything else alive is frozen too, for good: a live Gateway imports this
# module when it is built, before its run's society. A provider's first call imports some 20k objects
# more, left unfrozen: a full collection walks them in ~5 ms (freezing them froze that run's society).
gc.freeze()
