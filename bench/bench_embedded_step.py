"""Benchmark: `make run`'s Hobbs Cafe steps on the embedded model, in three configurations.

Each configuration runs in its own process (the model and its states are per process): the default
CRSEC run with compliance decided by the rules, as `make run` does. Prints each step's wall time, its
LLM calls, prompt tokens and how many of them llama.cpp evaluated, with llama.cpp's own timers.

- the weights as the package ships them (Q4_1), with saved prompt states;
- the default: the weights stored as Q8_0 (``weights.py``), with saved prompt states;
- Q8_0 without saved prompt states.

The last two must get the same answers (a restored state holds the same bits as the prefix
evaluated anew). Q4_1 gets other answers - other weights, other rounding - so its run takes
another course: compare its tokens per second, not its steps.

    .venv/bin/python bench/bench_embedded_step.py [--steps 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time


def child(steps: int) -> None:
    import llama_cpp

    from socialsim.llm.engines import embedded
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.routing import RouteTable
    from socialsim.llm.tape import Tape
    from socialsim.model.society import SocietyModel

    tape = Tape()
    gateway = Gateway(RouteTable("local/smollm2", {"compliance": "rules"}), tape)
    model = SocietyModel("hobbs-cafe", arch="crsec", gateway=gateway, rng=42)
    rows = []
    for _ in range(steps):
        calls, prompt = gateway.ledger.live_calls, gateway.ledger.totals()["prompt_tokens"]
        start = time.perf_counter()
        model.step()
        wall = time.perf_counter() - start
        llama = embedded._llama
        evaluated, prompt_s, generated, gen_s = 0, 0.0, 0, 0.0
        if llama is not None:  # llama.cpp's own counters and timers
            perf = llama_cpp.llama_perf_context(llama._ctx.ctx)
            evaluated, prompt_s, generated, gen_s = perf.n_p_eval, perf.t_p_eval_ms / 1000, perf.n_eval, perf.t_eval_ms / 1000
            llama_cpp.llama_perf_context_reset(llama._ctx.ctx)
        rows.append({"wall": wall, "calls": gateway.ledger.live_calls - calls,
                     "prompt": gateway.ledger.totals()["prompt_tokens"] - prompt, "evaluated": evaluated,
                     "prompt_s": prompt_s, "generated": generated, "gen_s": gen_s})
    answers = hashlib.sha256("\n".join(sorted(r.raw for r in tape.records())).encode()).hexdigest()[:12]
    print(json.dumps({"steps": rows, "answers": answers}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.steps)
        return
    results = {}
    configurations = (("weights as shipped (Q4_1), saved states", {"SOCIALSIM_EMBEDDED_WEIGHTS": "q4_1"}),
                      ("default (Q8_0, saved states)", {}),
                      ("Q8_0, no saved states", {"SOCIALSIM_EMBEDDED_CACHE_MB": "0"}))
    for label, settings in configurations:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
        env.pop("SOCIALSIM_EMBEDDED_CACHE_MB", None)
        env.pop("SOCIALSIM_EMBEDDED_WEIGHTS", None)
        env.update(settings)
        out = subprocess.run([sys.executable, __file__, "--child", "--steps", str(args.steps)], env=env,
                             check=True, capture_output=True, text=True).stdout
        results[label] = json.loads(out.strip().splitlines()[-1])
        steps = results[label]["steps"]
        evaluated, prompt_s = sum(s["evaluated"] for s in steps), sum(s["prompt_s"] for s in steps)
        generated, gen_s = sum(s["generated"] for s in steps), sum(s["gen_s"] for s in steps)
        print(f"{label}: {sum(s['wall'] for s in steps):.1f} s in all; prompt {evaluated / max(prompt_s, 1e-9):.0f} "
              f"tokens/s, {1000 * gen_s / max(generated, 1):.1f} ms a generated token")
        for i, s in enumerate(steps):
            print(f"  step {i + 1}: {s['wall']:5.1f} s, {s['calls']} calls; prompt {s['prompt']} tokens, "
                  f"{s['evaluated']} evaluated in {s['prompt_s']:.1f} s; {s['generated']} generated in {s['gen_s']:.1f} s")
    q8_with, q8_without = (results[label]["answers"] for label, _ in configurations[1:])
    print(f"Q8_0 with and without saved states, same answers: {'yes' if q8_with == q8_without else 'NO'}")


if __name__ == "__main__":
    main()
