"""Saved KV states of earlier prompts, for the embedded engine to start a prompt where one began.

llama.cpp by itself reuses only the prompt just before: in a phase, ten agents' calls of one
operation come in turn, so an agent's persona, asked again a step later, is evaluated anew each
time. Keeping the states of earlier prompts lets a prompt start from the longest prefix it shares
with any of them. A state holds prompt tokens only (evaluated in batches, never an answer's tokens
evaluated one by one), so it has the same bits as evaluating that prefix anew and answers do not
depend on which prompts came before (``tests/test_embedded.py``). The engine's threads share one
store (a state saved by one llama.cpp context restores into another of the same model), so its
methods hold a lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sized

import numpy as np


def shared_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading tokens two token arrays have in common."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


class PromptStates:
    """KV states keyed by the tokens they hold, least recently used dropped beyond a byte budget
    (a state's data is a byte buffer: its length is its size)."""

    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = capacity_bytes
        self.size_bytes = 0
        self._states: OrderedDict[bytes, tuple[np.ndarray, Sized]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._states)

    def longest(self, tokens: np.ndarray) -> tuple[int, np.ndarray | None, Sized | None]:
        """(shared length, the state's tokens, its data) of the state sharing the most leading
        tokens with ``tokens``; (0, None, None) when none shares any."""
        with self._lock:
            return self._longest(tokens)

    def _longest(self, tokens: np.ndarray) -> tuple[int, np.ndarray | None, Sized | None]:
        best, best_key = 0, None
        for key, (held, _) in self._states.items():
            n = shared_prefix(held, tokens)
            if n > best:
                best, best_key = n, key
        if best_key is None:
            return 0, None, None
        self._states.move_to_end(best_key)
        held, data = self._states[best_key]
        return best, held, data

    def add(self, tokens: np.ndarray, data: Sized) -> None:
        """Keep a state; states whose tokens it extends are dropped, as it serves all their prompts
        (and it is not kept when a state extends it)."""
        if len(data) > self.capacity_bytes or len(tokens) == 0:
            return
        with self._lock:
            self._add(np.array(tokens, dtype=np.intc), data)

    def _add(self, tokens: np.ndarray, data: Sized) -> None:
        for key, (held, old) in list(self._states.items()):
            if len(held) >= len(tokens) and shared_prefix(held, tokens) == len(tokens):
                self._states.move_to_end(key)  # an existing state already holds these tokens
                return
            if shared_prefix(held, tokens) == len(held):
                del self._states[key]
                self.size_bytes -= len(old)
        self._states[tokens.tobytes()] = (tokens, data)
        self.size_bytes += len(data)
        while self.size_bytes > self.capacity_bytes:
            _, (_, old) = self._states.popitem(last=False)
            self.size_bytes -= len(old)
