"""The embedded engine's saved prompt states: the longest shared prefix wins, a state that extends
another replaces it, and the byte budget drops the least recently used."""

import numpy as np

from socialsim.llm.engines.prompt_states import PromptStates, shared_prefix


def toks(*values):
    return np.array(values, dtype=np.intc)


def test_shared_prefix_counts_leading_equal_tokens():
    assert shared_prefix(toks(1, 2, 3, 4), toks(1, 2, 9, 4)) == 2
    assert shared_prefix(toks(1, 2), toks(1, 2, 3)) == 2
    assert shared_prefix(toks(5), toks(1, 2)) == 0
    assert shared_prefix(toks(), toks(1)) == 0


def test_the_state_sharing_most_leading_tokens_is_found():
    states = PromptStates(capacity_bytes=1000)
    states.add(toks(1, 2, 3, 4, 5), b"persona A")
    states.add(toks(1, 2, 7, 8), b"persona B")
    states.add(toks(9, 9, 9), b"other")
    shared, held, data = states.longest(toks(1, 2, 3, 4, 6, 6))
    assert (shared, data) == (4, b"persona A") and list(held) == [1, 2, 3, 4, 5]
    assert states.longest(toks(1, 2, 7, 0))[::2] == (3, b"persona B")
    assert states.longest(toks(4, 4)) == (0, None, None)


def test_a_state_extending_another_replaces_it_and_a_covered_one_is_not_kept():
    states = PromptStates(capacity_bytes=1000)
    states.add(toks(1, 2, 3), b"short")
    states.add(toks(1, 2, 3, 4, 5), b"long")
    assert len(states) == 1 and states.size_bytes == 4
    states.add(toks(1, 2), b"covered")
    assert len(states) == 1 and states.longest(toks(1, 2))[2] == b"long"


def test_the_budget_drops_the_least_recently_used_state():
    states = PromptStates(capacity_bytes=10)
    states.add(toks(1, 1), b"aaaa")
    states.add(toks(2, 2), b"bbbb")
    states.longest(toks(1, 1, 5))  # used: now the most recent
    states.add(toks(3, 3), b"cccc")  # 12 bytes > 10: the least recently used (2, 2) goes
    assert states.size_bytes == 8
    assert states.longest(toks(2, 2))[0] == 0
    assert states.longest(toks(1, 1))[2] == b"aaaa" and states.longest(toks(3, 3))[2] == b"cccc"
    states.add(toks(4, 4), b"x" * 11)  # larger than the whole budget: not kept, nothing dropped
    assert states.size_bytes == 8 and states.longest(toks(4, 4))[0] == 0


def test_a_state_filling_the_budget_exactly_is_kept_and_one_shared_token_counts():
    states = PromptStates(capacity_bytes=8)
    states.add(toks(1, 2), b"12345678")
    assert states.size_bytes == 8 and states.longest(toks(1, 9))[::2] == (1, b"12345678")


def test_the_engine_s_threads_can_share_one_store():
    """Two engine threads save and look up states at once; the store must stay consistent (without
    its lock, one thread's add mutated the dict another was iterating)."""
    import sys
    import threading

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    states = PromptStates(40 * 100)
    errors = []

    def work(offset):
        rng = np.random.default_rng(offset)
        try:
            for _ in range(1500):
                tokens = rng.integers(0, 6, size=int(rng.integers(2, 12)), dtype=np.intc)
                states.add(tokens, bytes(100))
                states.longest(tokens)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion
            errors.append(exc)

    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(before)
    assert errors == []
    assert states.size_bytes == 100 * len(states) <= 40 * 100
