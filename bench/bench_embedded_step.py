"""Benchmark: `make run`'s Hobbs Cafe steps on the embedded model, in four configurations.

Each configuration runs in its own process (the models and their states are per process): the
default CRSEC run with compliance decided by the rules, as `make run` does. Prints each step's wall
time, its LLM calls, prompt tokens and how many of them llama.cpp evaluated, with llama.cpp's own
timers summed over its contexts (two contexts working at once each count their own seconds).

- the weights as the package ships them (Q4_1), one context with two threads;
- the weights stored as Q8_0 (``weights.py``), one context with two threads;
- the default: Q8_0, two contexts with one thread each while both work (``embedded._on_engine``);
- the default without saved prompt states.

All use saved prompt states but the last. The last three must get the same answers: a restored
state holds the same bits as the prefix evaluated anew, and one or two threads, in one context or
another, compute the same bits. Q4_1 gets other answers - other weights, other rounding - so its run
takes another course: compare its tokens per second, not its steps.

    .venv/bin/python bench/bench_embedded_step.py [--steps 3] [--full]

``--full`` runs the scenario's first step with the plans and actions made by the model as well (no
rules route), the default configuration with and without saved prompt states: the day's heaviest step.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time


def child(steps: int, full: bool) -> None:
    from socialsim.llm.engines import embedded
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.routing import RouteTable
    from socialsim.llm.tape import Tape
    from socialsim.model.society import SocietyModel

    embedded.complete([{"role": "user", "content": "hi"}], {"max_tokens": 2})  # load the engine: not a step's time
    embedded.perf_counters()
    tape = Tape()
    gateway = Gateway(RouteTable("local/smollm2", {} if full else {"compliance": "rules"}), tape)
    model = SocietyModel("hobbs-cafe", arch="crsec", gateway=gateway, rng=42)
    rows = []
    for _ in range(steps):
        calls, prompt = gateway.ledger.live_calls, gateway.ledger.totals()["prompt_tokens"]
        start = time.perf_counter()
        model.step()
        wall = time.perf_counter() - start
        perf = embedded.perf_counters()  # llama.cpp's own counters and timers, summed over its contexts
        rows.append({"wall": wall, "calls": gateway.ledger.live_calls - calls,
                     "prompt": gateway.ledger.totals()["prompt_tokens"] - prompt, **perf})
    answers = hashlib.sha256("\n".join(sorted(r.raw for r in tape.records())).encode()).hexdigest()[:12]
    print(json.dumps({"steps": rows, "answers": answers}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--full", action="store_true",
                        help="plans and actions by the model too (no rules route): the day's first step")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.steps, args.full)
        return
    results = {}
    one = {"SOCIALSIM_EMBEDDED_WORKERS": "1"}
    configurations = (("weights as shipped (Q4_1), one context", {"SOCIALSIM_EMBEDDED_WEIGHTS": "q4_1", **one}),
                      ("Q8_0, one context", one),
                      ("default (Q8_0, two contexts)", {}),
                      ("default without saved states", {"SOCIALSIM_EMBEDDED_CACHE_MB": "0"}))
    if args.full:
        configurations = configurations[2:]
    for label, settings in configurations:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
        env.pop("SOCIALSIM_EMBEDDED_CACHE_MB", None)
        env.pop("SOCIALSIM_EMBEDDED_WEIGHTS", None)
        env.pop("SOCIALSIM_EMBEDDED_WORKERS", None)
        env.update(settings)
        out = subprocess.run([sys.executable, __file__, "--child", "--steps", str(args.steps),
                              *(["--full"] if args.full else [])], env=env,
                             check=True, capture_output=True, text=True).stdout
        results[label] = json.loads(out.strip().splitlines()[-1])
        steps = results[label]["steps"]
        evaluated, prompt_s = sum(s["evaluated"] for s in steps), sum(s["prompt_s"] for s in steps)
        generated, gen_s = sum(s["generated"] for s in steps), sum(s["gen_s"] for s in steps)
        print(f"{label}: {sum(s['wall'] for s in steps):.1f} s in all; prompt {evaluated / max(prompt_s, 1e-9):.0f} "
              f"tokens/s, {1000 * gen_s / max(generated, 1):.1f} ms a generated token (each context)")
        for i, s in enumerate(steps):
            print(f"  step {i + 1}: {s['wall']:5.1f} s, {s['calls']} calls; prompt {s['prompt']} tokens, "
                  f"{s['evaluated']} evaluated in {s['prompt_s']:.1f} s; {s['generated']} generated in {s['gen_s']:.1f} s")
    same = len({results[label]["answers"] for label, _ in configurations[-3:]}) == 1
    print(f"the Q8_0 configurations above (contexts, saved states) give the same answers: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
