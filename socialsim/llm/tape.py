"""The tape: every LLM call of a run, recorded so the run can be replayed with zero calls.

A record's key is a hash of what determines the reply (model, messages, decoding parameters,
seed); its value is the raw reply with its tokens, latency and cost, or the provider error the
call met (so a run that saw errors replays with the same fallbacks). The tape is an append-only
JSON-lines file, so a crash or a budget stop never loses the calls already made. A tape shared by
several runs (sweep replicates) answers any call whose key matches from the file, for free.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

try:  # POSIX: shared tapes are locked while appending
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

from socialsim.llm.redact import redact, secret_values

log = logging.getLogger("socialsim.llm")

def append_line(path: Path, line: str) -> None:
    """Append one line so that several processes can share a tape (sweep replicates): one
    write under an exclusive lock. A torn last line (a writer killed mid-write; under the lock
    no live writer is mid-write) is cut off first: left in place, it would end up mid-file once
    the resumed run appends, where a torn line is an error and the tape would not load again."""
    with path.open("a+b") as fh:  # created if missing, never emptied on opening; writes go to the end
        if fcntl is not None:
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            whole, end = _last_line_ends(fh)
            if whole < end:
                fh.seek(whole)
                fh.truncate()
            fh.write(line.encode("utf-8") + b"\n")
            fh.flush()
        finally:
            if fcntl is not None:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _last_line_ends(fh, chunk: int = 1 << 16) -> tuple[int, int]:
    """The offset just after the file's last newline (0 if it has none), where a torn tail starts,
    and the file's end; equal when the last line is whole."""
    end = fh.seek(0, 2)
    if end:
        fh.seek(end - 1)
        if fh.read(1) == b"\n":
            return end, end  # the usual case: the last line is whole
    position = end
    while position > 0:
        start = max(0, position - chunk)
        fh.seek(start)
        block = fh.read(position - start)
        newline = block.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1, end
        position = start
    return 0, end


class TapeMiss(LookupError):
    """A replayed run asked for a call the tape does not hold."""


def call_key(model: str, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    canonical = json.dumps(
        {"model": model, "messages": messages, "params": params}, sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


@dataclass
class TapeRecord:
    key: str
    model: str
    op: str
    agent: int | None
    step: int
    messages: list[dict[str, str]]
    params: dict[str, Any]
    raw: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost_usd: float
    error: str | None = None  # the provider error this call met (then ``raw`` is empty)
    finish_reason: str | None = None  # the provider's ("length": cut at max_tokens); None on old tapes


_RECORD_FIELDS = tuple(f.name for f in fields(TapeRecord))
_NUMBER, _NONE = (int, float), type(None)
_FIELD_TYPES = {"key": str, "model": str, "op": str, "agent": (int, _NONE), "step": int, "messages": list,
                "params": dict, "raw": str, "prompt_tokens": int, "completion_tokens": int, "latency_s": _NUMBER,
                "cost_usd": _NUMBER, "error": (str, _NONE), "finish_reason": (str, _NONE)}


def record_of(line: str) -> TapeRecord:
    """One tape line's record: ValueError if it is no JSON, TypeError if a field is missing, unknown
    or of another type (a hand edit: a null ``raw`` or a text ``step`` loaded, then stopped a replay
    or a resume with a traceback)."""
    record = TapeRecord(**json.loads(line))
    wrong = [name for name, kind in _FIELD_TYPES.items() if not isinstance(getattr(record, name), kind)]
    if wrong:
        raise TypeError(", ".join(f"{name} is {type(getattr(record, name)).__name__}" for name in wrong))
    return record


def _as_line(record: TapeRecord) -> str:
    """A record as its tape line, fields in their declared order. Not ``dataclasses.asdict``: its
    deep copy of the messages is a tenth of a live call's own CPU, and json reads them as they are."""
    return json.dumps({name: getattr(record, name) for name in _RECORD_FIELDS}, ensure_ascii=False)


def _rank(record: TapeRecord) -> int:
    """How far a call got: 0 failed, 1 answered nothing (an empty reply), 2 answered."""
    if record.error is not None:
        return 0
    return 2 if record.raw.strip() else 1


def answered(record: TapeRecord | None) -> bool:
    """A recorded call a run going on (a resume, a sweep's other run) takes as it is: one that failed
    or answered nothing (what an outage leaves) is asked again. A replay takes every reply."""
    return record is not None and _rank(record) == 2


class Tape:
    """An append-only JSON-lines store of LLM calls, indexed by key."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else None
        self._records: dict[str, TapeRecord] = {}
        self._lock = threading.Lock()
        self._folder_made = False  # the tape's folder, made at its first line
        if self.path and self.path.exists():
            self._load(self.path)

    def _load(self, path: Path) -> None:
        # records end at "\n" only: a reply may hold U+2028, U+0085 ..., which splitlines() also splits at;
        # split as bytes, so a last line torn inside a character (é is two bytes) is one torn line
        data = path.read_bytes()
        lines = data.rstrip(b"\n").split(b"\n")
        # a killed writer's line lacks its newline (written last); a whole bad last line is no torn one:
        # skipped, the resumed run's records went after it and the tape never loaded again
        torn_tail = not data.endswith(b"\n")
        for line_no, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                record = record_of(raw.decode("utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
                # A torn last line (a run killed mid-write) is skipped with a warning, not fatal.
                if line_no == len(lines) and torn_tail:
                    log.warning("%s: line %d is torn (a run killed while writing it); skipped", path, line_no)
                    continue
                raise ValueError(f"{path}: line {line_no} is not a tape record ({exc}); "
                                 f"only the last line may be torn") from None
            self._keep(record)

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, key: str) -> bool:
        return key in self._records

    def get(self, key: str) -> TapeRecord | None:
        return self._records.get(key)

    def records(self) -> list[TapeRecord]:
        return list(self._records.values())

    def last_step(self) -> int | None:
        """The last step the tape holds a call of (None when it holds none): where a run that
        recorded it stopped making calls."""
        return max((record.step for record in self._records.values()), default=None)

    def _keep(self, record: TapeRecord) -> bool:
        """Index ``record`` unless its key is already answered: a reply replaces an error, and an
        answer an empty reply (a resumed run that asked again what an outage left unanswered)."""
        held = self._records.get(record.key)
        if held is not None and _rank(record) <= _rank(held):
            return False
        self._records[record.key] = record
        return True

    @contextlib.asynccontextmanager
    async def claim(self, key: str, stale_after_s: float = 600.0) -> AsyncIterator[TapeRecord | None]:
        """Held around a live call: yields None when this tape's owner is to make the call, or
        the answer another run sharing the tape recorded meanwhile. A run's own tape has no
        other writer: nothing to wait for (see ``SharedTape.claim``)."""
        yield None

    def add(self, record: TapeRecord) -> None:
        secrets = secret_values()  # one look at the environment for the whole record
        record.raw = redact(record.raw, secrets)
        record.error = redact(record.error, secrets) if record.error else record.error
        record.messages = [{**m, "content": redact(m.get("content", ""), secrets)} for m in record.messages]
        with self._lock:
            if not self._keep(record):
                return
            if self.path:
                if not self._folder_made:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._folder_made = True
                append_line(self.path, _as_line(record))
