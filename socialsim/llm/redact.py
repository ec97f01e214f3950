"""Keep secrets out of logs, tapes, run directories and the dashboard.

Only actual secret values are replaced by ``[REDACTED]``: the value of every environment
variable whose name says it holds a key, token, secret or password (and any piece of 12 characters
or more of such a value written as a key, as a cut or a line break leaves it), and strings with the shape
of a known provider key (``sk-…``, ``AIza…``, ``gsk_…``, ``hf_…``, ``Bearer …`` headers).
Ordinary words ("a secret conversation", "a token contribution") are left alone, so what is
stored is what the model said. Redaction applies to what is stored, never to a tape key.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from typing import Any
from urllib.parse import unquote

REDACTED = "[REDACTED]"

# Shapes of real provider keys; each needs a long run of key characters, which prose lacks. Each comes
# with the words one of its matches must hold (looked for in the text, lower-cased for a pattern that
# ignores case): a text holding none is not searched. A pattern opening with ``\b`` is searched
# character by character (about 16 us a kilobyte each); a word is found at C speed.
_KEY_SHAPES = [
    (("sk-",), re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}")),  # OpenAI / Anthropic
    (("AIza",), re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}")),  # Google
    (("gsk_",), re.compile(r"\bgsk_[A-Za-z0-9]{20,}")),  # Groq
    (("hf_",), re.compile(r"\bhf_[A-Za-z0-9]{20,}")),  # Hugging Face
    (("xox", "ghp_", "gho_", "github_pat_"),
     re.compile(r"\b(?:xox[abp]|ghp|gho|github_pat)_[A-Za-z0-9_]{20,}")),  # Slack / GitHub tokens
]
_BEARER = ("bearer ", re.compile(r"(?i)(?<=\bbearer )[A-Za-z0-9_\-\.=]{20,}"))  # an Authorization header's value
# A credential inside an address: the password of ``user:password@host``, a user name alone
# (``token@host``, a token given as one), and (``_URL_PARAMETER``) the value of a parameter named for a credential
# in a query, a fragment or a path (``?api_key=...``, ``#api_key=...``, ``;api_key=...``); the rest of the address
# is kept.
_URL_CREDENTIALS = [
    re.compile(r"(?<=://)([^/\s:@]+:)[^/\s@]+(?=@)"),
    re.compile(r"(?<=://)()[^/\s:@]+(?=@)"),
]
# a parameter's name and (looked ahead at, so that a parameter inside another's value is found too) its value
_URL_PARAMETER = re.compile(r"[?&;#]([\w.%-]*)=(?=([^&;#\s'\"]+))")
# An environment variable holding a secret, by its name: one of these words anywhere in it, or PASS or AUTH
# as a whole part (DB_PASS, X_AUTH; not the shell's PWD, a path, nor GIT_AUTHOR_NAME)
_SECRET_ENV_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|JWT|CREDENTIAL)|(?:^|_)(PASS|AUTH)(?:_|$)")
MIN_SECRET_LENGTH = 8  # shorter environment values ("1", "true") would redact ordinary text


# A key's pieces: a provider or a model may cut the key or wrap it over lines. Only values written
# in key characters and long enough to be keys have pieces (a path's or a placeholder's are ordinary
# text); a piece is 12 characters or more, found by its windows of 12 every 3 characters, and holds
# a digit or a capital (a random key's do; "-value-of-the-token" of a value made of words is prose).
_KEY_VALUE = re.compile(r"[A-Za-z0-9_\-\.=+]{20,}")
_WORDS = re.compile(r"[a-z_\-\.]+")
PIECE = 12
_PIECE_STEP = 3

# a local server's placeholder key ("anything", "lm-studio"): redacted like any key, it changes what the
# model said wherever it writes that word ("Is there [REDACTED] I can get you?"); said the first time it
# does, naming the variable
_PLAIN_WORDS = re.compile(r"[a-z]+(?:[-_][a-z]+)*")
_plain: dict[str, str] = {}  # the environment's secret values that are ordinary words -> their variable
_told_plain: set[str] = set()
_telling = threading.local()
log = logging.getLogger("socialsim.llm")

_known: tuple[dict | frozenset | None, list[str]] = (None, [])  # (environment seen, its secret values)
_NAMED: set[str] = set()  # variables a configuration names as holding a secret (see name_secret)


def name_secret(variable: str) -> None:
    """Treat ``variable``'s value as a secret whatever its name says: a deployments file's
    ``api_key: os.environ/VLLM_ACCESS`` names one."""
    global _known
    if variable not in _NAMED:
        _NAMED.add(variable)
        _known = (None, [])  # worked out again at the next look


def _environment_now() -> dict | frozenset:
    """The environment, to compare with the one last seen: CPython's own dict of its variables,
    compared in C (about 1 us); elsewhere a frozen copy, which decodes every name and value (about
    40 us for 35 variables, twice a call on a tape write)."""
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) else frozenset(os.environ.items())


def secret_values() -> list[str]:
    """The secret values of the environment as it is now: worked out again only when the
    environment changed (a key set mid-run is caught; a tape write or a table cell does not pay
    for a scan of every variable). Take them once to redact several texts (a tape record's reply
    and messages) with one look at the environment."""
    global _known
    now = _environment_now()
    if now != _known[0]:
        seen = dict(now) if isinstance(now, dict) else now  # a copy, taken first: CPython's dict changes in place
        named = {k: v for k, v in os.environ.items()
                 if (_SECRET_ENV_NAME.search(k) or k in _NAMED) and v and len(v) >= MIN_SECRET_LENGTH}
        values = set(named.values())
        _plain.clear()
        _plain.update({value: name for name, value in sorted(named.items()) if _PLAIN_WORDS.fullmatch(value)})
        _known = (seen, sorted(values, key=len, reverse=True))  # longest first: a key containing another
    return _known[1]


def redact(text: str, secrets: list[str] | None = None) -> str:
    """Return ``text`` with every secret value and provider-key shape replaced by [REDACTED].
    ``secrets``: values from ``secret_values()`` (default: the environment's, looked up now)."""
    if not text:
        return text
    for value in secret_values() if secrets is None else secrets:
        if value in _plain and value in text:
            _tell_plain(value)
        text = text.replace(value, REDACTED)
        if _KEY_VALUE.fullmatch(value):
            text = _without_pieces(text, value)
    for words, pattern in _KEY_SHAPES:
        if any(word in text for word in words):
            text = pattern.sub(REDACTED, text)
    if _BEARER[0] in text.lower():
        text = _BEARER[1].sub(REDACTED, text)
    if "@" in text:  # a credential in an address comes before its host's ``@``
        for pattern in _URL_CREDENTIALS:
            text = pattern.sub(lambda m: m[1] + REDACTED, text)
    return _without_credential_parameters(text) if "=" in text else text


def _without_credential_parameters(text: str) -> str:
    """``text`` with the value of every address parameter named for a credential replaced by [REDACTED]."""
    spans = [m.span(2) for m in _URL_PARAMETER.finditer(text) if names_a_credential(unquote(m[1]))]
    kept, end = [], 0
    for start, stop in spans:  # in order; one inside another's value (``?a=x?key=y``) is in its span
        if start >= end:
            kept += [text[end:start], REDACTED]
        end = max(end, stop)
    return "".join(kept) + text[end:]


def cut(text: str, limit: int) -> str:
    """A redacted ``text``'s first ``limit`` characters, or fewer when the limit falls inside a
    [REDACTED] marker: the marker is left out whole rather than shown broken ("[REDAC"). Cut a text
    after redacting it, never before: a cut key's first part may be too short to be found."""
    if len(text) <= limit:
        return text
    at = text.find(REDACTED, max(0, limit - len(REDACTED) + 1))  # the first marker that may reach past it
    return text[:at] if 0 <= at < limit else text[:limit]


def _as_recorded(data: Any) -> Any:
    """``data`` as JSON records it: objects as their text."""
    return json.loads(json.dumps(data, default=str))


def _redacted_data(plain: Any, secrets: list[str]) -> Any:
    """JSON data (``_as_recorded``) with every string in it redacted, keys included; any other value is
    the same object."""
    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value, secrets)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {redact(k, secrets): clean(v) for k, v in value.items()}
        return value

    return clean(plain)


def redacted_json(data: Any, **dumps: Any) -> str:
    """``data`` as JSON (``json.dumps`` with ``dumps``), every string in it redacted before it is
    escaped: redacted after, a secret holding a quote, a backslash or a non-ASCII character was
    written escaped (``\\"``, ``\\\\``, ``\\u00e9``), no longer matched and was kept."""
    return json.dumps(_redacted_data(_as_recorded(data), secret_values()), **dumps)


# Why a value that holds a secret is refused where it is given (a parameter, a sweep's value) rather than
# redacted: it would be used as written (in prompts to the provider) and recorded as [REDACTED].
SECRET_VALUE = ("holds a secret value (a key, or the value of an environment variable named as a secret): it would "
                "reach the provider in prompts while the run records [REDACTED], so a replay could not make the "
                "same prompts; a parameter never needs a key")


def holds_secret(value: Any) -> bool:
    """Whether any string in ``value`` (a text, or a list or mapping of them, names included) holds
    something :func:`redact` replaces."""
    plain = _as_recorded(value)
    return _redacted_data(plain, secret_values()) != plain  # the same objects where nothing changed (a NaN too)


def _tell_plain(value: str) -> None:
    """Say once that a key of ordinary words changed a text (the log line, redacted in turn, holds no
    such word: a flag keeps it from being said from inside its own redaction all the same)."""
    if value in _told_plain or getattr(_telling, "now", False):
        return
    _told_plain.add(value)
    _telling.now = True
    try:
        log.warning("%s holds ordinary words, not a key: like any key they are replaced by [REDACTED] in everything "
                    "recorded, so a reply or prompt that uses them is changed; a local server that takes any key is "
                    "better given one with digits (e.g. sk-local-1)", _plain[value])
    finally:
        _telling.now = False


def _without_pieces(text: str, value: str) -> str:
    """``text`` with every piece of ``value`` of PIECE characters or more replaced by [REDACTED]."""
    spans = []
    for start in range(0, len(value) - PIECE + 1, _PIECE_STEP):
        window = value[start:start + PIECE]
        at = text.find(window)
        while at >= 0:
            left, right = at, at + PIECE  # the piece held, grown to each side while it is the value's
            while left > 0 and start - (at - left) > 0 and text[left - 1] == value[start - (at - left) - 1]:
                left -= 1
            while right < len(text) and start + (right - at) < len(value) and text[right] == value[start + (right - at)]:
                right += 1
            spans.append((left, right))
            at = text.find(window, at + 1)
    merged: list[list[int]] = []
    for left, right in sorted(spans):
        if merged and left <= merged[-1][1]:  # overlapping pieces are one
            merged[-1][1] = max(merged[-1][1], right)
        else:
            merged.append([left, right])
    for left, right in reversed(merged):  # from the end: earlier places stay put
        if not _WORDS.fullmatch(text[left:right]):
            text = text[:left] + REDACTED + text[right:]
    return text


# A parameter's name is cut into parts at ``_ - .``, spaces, digits and changes of case (``apiKey``, ``XAuth``);
# it names a credential when a part is one of these words or ends with one (``apikey``, ``accesstoken``), so
# ``design``, ``signal``, ``author`` and ``keyword`` do not. ``tokens`` is a count (``max_tokens``); a name with
# the part ``cost`` is a price (``input_cost_per_token``, as litellm's own masker has it) and one ending with
# ``params`` names parameters (litellm's ``configurable_clientside_auth_params``: which ones a caller may set).
_CREDENTIAL_WORDS = re.compile(r"(?:key|keys|token|secret|secrets|password|passwords|passwd|pwd|auth|authorization"
                               r"|authentication|signature|signatures|sig|cred|creds|credential|credentials)$")
_PRICE, _PARAMETERS = "cost", "params"
_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


def names_a_credential(name: str) -> bool:
    """Whether a parameter named ``name`` (decoded: an address's, a deployments file's) holds a credential: see
    ``_CREDENTIAL_WORDS``."""
    parts = [part.lower() for part in _NAME_PARTS.findall(name)]
    if _PRICE in parts or parts[-1:] == [_PARAMETERS]:
        return False
    return any(_CREDENTIAL_WORDS.search(part) for part in parts)


def _parameters(parts) -> list[tuple[str, str]]:
    """An address's ``name=value`` pairs, wherever one may be written: its query, its fragment
    (``#api_key=...``) and its path (``/v1;api_key=...``), split at ``&`` and at ``;``."""
    found = []
    for part, text in (("query", parts.query), ("fragment", parts.fragment), ("path", parts.path)):
        pieces = re.split(r"[&;]", text)
        for piece in pieces[1:] if part == "path" else pieces:  # a path's first piece is the path itself
            name, _, value = piece.partition("=")
            found.append((part, unquote(name), unquote(value)))
    return found


def no_credential_in_url(url: str) -> str:
    """``url`` unchanged, or ValueError when it carries a credential (a password or a user name in
    it, which a token may be given as, a parameter named like a key in its query, its fragment or
    its path, or anywhere a secret value of the environment or a provider key's shape): an endpoint
    is recorded in config.json and sweep.json, a key never."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    named = [(part, name) for part, name, _ in _parameters(parts) if names_a_credential(name)]
    where = (f"its {named[0][0]} parameter {named[0][1]!r}" if named else "a password in it" if parts.password
             else "a user name in it" if parts.username else "a secret value in it" if redact(url) != url else None)
    if where:
        raise ValueError(f"the endpoint carries a credential ({where}); give keys in the environment "
                         f"(e.g. OPENAI_API_KEY), never in the address, which runs record")
    return url


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from every record's final message and traceback
    (whose last line repeats the error's message, a provider's quoting the key)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:  # formatted here, as a handler would, to be redacted
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_text = redact(record.exc_text) if record.exc_text else record.exc_text
        return True
