"""Benchmark: would batched decoding speed up the embedded engine on this machine, and at what price?

Issue #15 asks for batched decoding of a phase's concurrent calls "if llama.cpp's batch API gives a
gain on 2 cores". This measures it with llama.cpp's own batch API (through llama-cpp-python's
low-level bindings) on the embedded model: B plan-sized prompts (about 530 tokens each, the size of
a CRSEC day plan) are evaluated and then decoded greedily for ``--tokens`` tokens,

- one sequence at a time (what the engine does today: one call after another), and
- all B sequences in one shared batch (prompts packed together, then one token per sequence per
  decode step).

It prints prompt and generation tokens per second for both, and how many of the B greedy answers
came out identical. Greedy decoding is deterministic, so any difference comes from batching itself:
llama.cpp's batched matrix products sum in another order, and an answer then depends on which
other calls shared its batch, i.e. on the timing of concurrent calls (the project's determinism
rule forbids that).

    .venv/bin/python bench/bench_batched_decoding.py [--sequences 10] [--tokens 120]
"""

from __future__ import annotations

import argparse
import time

import llama_cpp
import numpy as np

from socialsim.llm.engines.embedded import gguf_path

MAX_BATCH = 2048
THREADS = 2


@llama_cpp.llama_log_callback
def _quiet(level, text, user_data) -> None:
    """llama.cpp's loading and context messages, dropped (the table is the output)."""


class Engine:
    """The embedded model loaded through llama.cpp's C API, with a context for ``sequences``."""

    def __init__(self) -> None:
        llama_cpp.llama_log_set(_quiet, None)
        llama_cpp.llama_backend_init()
        self.model = llama_cpp.llama_model_load_from_file(str(gguf_path()).encode(),
                                                          llama_cpp.llama_model_default_params())
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)

    def context(self, sequences: int):
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_seq_max = 1024 * sequences, MAX_BATCH, sequences
        params.n_threads = params.n_threads_batch = THREADS
        return llama_cpp.llama_init_from_model(self.model, params)

    def tokens(self, text: str) -> list[int]:
        data = text.encode()
        buffer = (llama_cpp.llama_token * 4096)()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buffer, 4096, True, True)
        return list(buffer[:n])

    def best_next(self, ctx, row: int) -> int:
        """The greedy next token from the logits of batch row ``row``."""
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, row), shape=(self.n_vocab,))
        return int(np.argmax(logits))


def fill(batch, rows: list[tuple[int, int, int, bool]]) -> None:
    """Put (sequence, position, token, wants logits) rows into a llama_batch."""
    batch.n_tokens = len(rows)
    for i, (seq, pos, token, logits) in enumerate(rows):
        batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = token, pos, 1, logits
        batch.seq_id[i][0] = seq


def decode(ctx, batch) -> None:
    if llama_cpp.llama_decode(ctx, batch) != 0:
        raise RuntimeError("llama_decode failed")


def one_at_a_time(engine: Engine, prompts: list[list[int]], n_gen: int) -> tuple[list[list[int]], float, float]:
    ctx, batch = engine.context(1), llama_cpp.llama_batch_init(MAX_BATCH, 0, 1)
    answers, prompt_s, gen_s = [], 0.0, 0.0
    for prompt in prompts:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        start = time.perf_counter()
        fill(batch, [(0, pos, token, pos == len(prompt) - 1) for pos, token in enumerate(prompt)])
        decode(ctx, batch)
        token, pos, answer = engine.best_next(ctx, len(prompt) - 1), len(prompt), []
        prompt_s += time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(n_gen):
            answer.append(token)
            fill(batch, [(0, pos, token, True)])
            decode(ctx, batch)
            token, pos = engine.best_next(ctx, 0), pos + 1
        gen_s += time.perf_counter() - start
        answers.append(answer)
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    return answers, prompt_s, gen_s


def all_together(engine: Engine, prompts: list[list[int]], n_gen: int) -> tuple[list[list[int]], float, float]:
    n = len(prompts)
    ctx, batch = engine.context(n), llama_cpp.llama_batch_init(MAX_BATCH, 0, n)
    rows = [(seq, pos, token, pos == len(p) - 1) for seq, p in enumerate(prompts) for pos, token in enumerate(p)]
    start, token = time.perf_counter(), {}
    for first in range(0, len(rows), MAX_BATCH):  # the prompts, packed into as few batches as fit
        chunk = rows[first:first + MAX_BATCH]
        fill(batch, chunk)
        decode(ctx, batch)
        token.update({seq: engine.best_next(ctx, i) for i, (seq, _, _, last) in enumerate(chunk) if last})
    prompt_s = time.perf_counter() - start
    start, pos, answers = time.perf_counter(), [len(p) for p in prompts], [[] for _ in prompts]
    for _ in range(n_gen):  # one token per sequence per decode
        for seq in range(n):
            answers[seq].append(token[seq])
        fill(batch, [(seq, pos[seq], token[seq], True) for seq in range(n)])
        decode(ctx, batch)
        token = {seq: engine.best_next(ctx, seq) for seq in range(n)}
        pos = [p + 1 for p in pos]
    gen_s = time.perf_counter() - start
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    return answers, prompt_s, gen_s


def plan_prompt(i: int) -> str:
    """A CRSEC-plan-sized prompt (persona first, then norms, memories and the task)."""
    return (f"You are Agent {i}. Agent {i} is a regular at Hobbs Cafe who likes coffee and long talks. " * 3
            + "QUALIFIED PERSONAL NORMS:\n1. No smoking indoors.\n2. Be quiet in public.\n3. Tip after meals.\n" * 6
            + "RELEVANT MEMORIES:\n- (step 3, observation) Isabella is smoking a cigarette in the dining room\n" * 8
            + f"Write Agent {i}'s plan for today from 08:00 to 22:00, as JSON items with time, activity and place.")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sequences", type=int, default=10, help="concurrent calls (a Hobbs phase: 10 plans)")
    parser.add_argument("--tokens", type=int, default=120, help="tokens generated per call")
    args = parser.parse_args()
    engine = Engine()
    prompts = [engine.tokens(plan_prompt(i)) for i in range(args.sequences)]
    n_prompt, n_gen = sum(map(len, prompts)), args.sequences * args.tokens
    alone = one_at_a_time(engine, prompts, args.tokens)
    together = all_together(engine, prompts, args.tokens)
    print(f"{args.sequences} calls, {n_prompt} prompt tokens, {n_gen} generated tokens, {THREADS} threads")
    print(f"{'':>14} {'prompt s':>9} {'prompt tok/s':>13} {'gen s':>7} {'gen tok/s':>10} {'total s':>8}")
    for label, (_, prompt_s, gen_s) in (("one at a time", alone), ("batched", together)):
        print(f"{label:>14} {prompt_s:>9.2f} {n_prompt / prompt_s:>13.0f} {gen_s:>7.2f} {n_gen / gen_s:>10.0f} "
              f"{prompt_s + gen_s:>8.2f}")
    same = sum(a == b for a, b in zip(alone[0], together[0], strict=True))
    print(f"greedy answers identical in both modes: {same} of {args.sequences}")


if __name__ == "__main__":
    main()
