"""Benchmark: the embedded engine's prompt and generation speed on agent-like calls.

Eight agents with their own persona (stable prefix) each ask twice with a changing tail, in the
order a phase issues them. Prints wall time per call and prompt/generation tokens per second as
llama.cpp counts them (a prompt prefix reused from the KV cache is not re-evaluated).

    .venv/bin/python bench/bench_embedded.py [--agents 8] [--rounds 2]
    SOCIALSIM_EMBEDDED_CACHE_MB=0 .venv/bin/python bench/bench_embedded.py   # without saved prompt states
"""

from __future__ import annotations

import argparse
import time

from socialsim.llm.engines import embedded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    calls, wall, prompt_tokens, evaluated, gen_tokens, prompt_s, gen_s = 0, 0.0, 0, 0, 0, 0.0, 0.0
    for round_ in range(args.rounds):
        for agent in range(args.agents):
            persona = (f"You are agent {agent}, a regular at Hobbs Cafe who works nearby, likes quiet mornings "
                       "and talks with the staff. Answer as this person, briefly.")
            messages = [{"role": "system", "content": persona},
                        {"role": "user", "content": f"Hour {9 + round_}: the cafe is busy. What do you do next? "
                                                    "Answer with one short sentence."}]
            start = time.perf_counter()
            result = embedded.complete(messages, {"max_tokens": 24, "seed": agent, "temperature": 0.7})
            wall += time.perf_counter() - start
            calls += 1
            usage = result["usage"]
            prompt_tokens += usage["prompt_tokens"]
            gen_tokens += usage["completion_tokens"]
            perf = embedded.perf_counters()  # llama.cpp's own eval timers
            evaluated += perf["evaluated"]
            prompt_s += perf["prompt_s"]
            gen_s += perf["gen_s"]
    states = f"saved prompt states up to {embedded.PROMPT_STATES_BYTES >> 20} MB"
    print(f"embedded local/smollm2 ({states}): {calls} calls, {wall / calls:.2f} s per call, "
          f"{prompt_tokens / calls:.0f} prompt tokens ({evaluated / calls:.0f} evaluated) + "
          f"{gen_tokens / calls:.0f} generated per call")
    print(f"  llama.cpp: prompt eval {prompt_s:.2f} s, generation {gen_s:.2f} s; "
          f"{evaluated / max(prompt_s, 1e-9):.0f} prompt tok/s, {gen_tokens / max(gen_s, 1e-9):.1f} generated tok/s")


if __name__ == "__main__":
    main()
