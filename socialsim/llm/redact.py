"""Keep secrets out of logs, tapes, run directories and the dashboard.

Anything that looks like an API key, and the value of any environment variable whose name says
it holds a key, token or secret, is replaced by ``[REDACTED]`` before it is written anywhere.
"""

from __future__ import annotations

import logging
import os
import re

_PATTERNS = [
    re.compile(r"sk-[A-Za-z0-9_\-]{16,}"),  # OpenAI / Anthropic style
    re.compile(r"(?i)(api[_-]?key|authorization|bearer|token|secret)(\s*[:=]\s*|\s+)['\"]?[A-Za-z0-9_\-\.]{12,}"),
    re.compile(r"AIza[0-9A-Za-z_\-]{30,}"),  # Google
    re.compile(r"gsk_[A-Za-z0-9]{20,}"),  # Groq
    re.compile(r"hf_[A-Za-z0-9]{20,}"),  # Hugging Face
]
_SECRET_ENV = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD)")


def _secret_env_values() -> list[str]:
    return [v for k, v in os.environ.items() if _SECRET_ENV.search(k) and v and len(v) >= 8]


def redact(text: str) -> str:
    """Return ``text`` with anything secret-looking replaced by [REDACTED]."""
    if not text:
        return text
    for value in _secret_env_values():
        text = text.replace(value, "[REDACTED]")
    for pattern in _PATTERNS:
        text = pattern.sub("[REDACTED]", text)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from every record's final message."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        return True
