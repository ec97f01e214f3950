"""Benchmark: `make run`'s Hobbs Cafe steps on the embedded model, with and without saved prompt states.

Each configuration runs in its own process (the model and its states are per process): the default
CRSEC run with compliance decided by the rules, as `make run` does. Prints each step's wall time, its
LLM calls, prompt tokens and how many of them llama.cpp evaluated, and whether both runs got the same
answers (they must: a restored state holds the same bits as the prefix evaluated anew).

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
    for label, megabytes in (("no saved states", "0"), ("saved states (default)", None)):
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
        env.pop("SOCIALSIM_EMBEDDED_CACHE_MB", None)
        if megabytes is not None:
            env["SOCIALSIM_EMBEDDED_CACHE_MB"] = megabytes
        out = subprocess.run([sys.executable, __file__, "--child", "--steps", str(args.steps)], env=env,
                             check=True, capture_output=True, text=True).stdout
        results[label] = json.loads(out.strip().splitlines()[-1])
        steps = results[label]["steps"]
        print(f"{label}: {sum(s['wall'] for s in steps):.1f} s in all")
        for i, s in enumerate(steps):
            print(f"  step {i + 1}: {s['wall']:5.1f} s, {s['calls']} calls; prompt {s['prompt']} tokens, "
                  f"{s['evaluated']} evaluated in {s['prompt_s']:.1f} s; {s['generated']} generated in {s['gen_s']:.1f} s")
    same = len({r["answers"] for r in results.values()}) == 1
    print(f"same answers in both runs: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
