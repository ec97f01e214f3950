"""Configure litellm before anything imports it: no network on import, no debug banners."""

from __future__ import annotations

import gc
import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("LITELLM_LOG", "ERROR")

import litellm  # noqa: E402

litellm.suppress_debug_info = True
litellm.telemetry = False

# litellm's import leaves some 300k long-lived objects; a full collection walks them all, a pause of
# 0.25-0.5 s inside a phase of concurrent calls (bench/bench_sdk.py). Frozen, they are left out of
# every later collection (the gateway freezes again after a provider's first call).
gc.freeze()
