"""Configure litellm before anything imports it: no network on import, no debug banners."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("LITELLM_LOG", "ERROR")

import litellm  # noqa: E402

litellm.suppress_debug_info = True
litellm.telemetry = False
