"""Benchmark: the embedded engine on a phase's real calls, answer format last against first.

The contexts are those of a rules-engine Hobbs Cafe run (the day plans of step 1, then the norm
identifications and conversation lines of the first steps that have them), asked of the embedded
model in the order a phase issues them, in two layouts:

- format last (``Operation.messages``): system = the role; user = the prompt, then the answer format;
- format first (tried): system = the role and the answer format; user = the prompt.

llama.cpp re-evaluates only what follows the prefix shared with the previous prompt, so with the
fixed format first, calls of one operation skip it (a plan's JSON schema is 323 tokens). Prints
wall time, llama.cpp's prompt-eval and generation time, tokens per call and whether answers parse.
Measured 2026-11-23 (30 calls): prompt evaluation 48.2 -> 35.6 s, but the answers grew from 64 to
86 tokens a call, so the whole took 76.2 -> 73.9 s (3%), with other answers (only records' formats
first: 76.0 -> 73.5 s, 82 tokens): not adopted. Again with the engine's saved prompt states and the
record's input after its format (``Operation.input_text``), 2026-11-23: prompt evaluation 27.0 ->
19.5 s, answers 70 -> 88 tokens, 55.8 s both ways.

    .venv/bin/python bench/bench_prompt_layout.py [--steps 6]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


from socialsim.agents.crsec import operations as ops  # noqa: E402
from socialsim.llm.engines import embedded  # noqa: E402
from socialsim.model.society import SocietyModel  # noqa: E402

OPERATIONS = (ops.GenerateNormativePlans, ops.IdentifyNormativeInformation, ops.ConverseTurn)


def phase_calls(steps: int) -> list[tuple[object, object]]:
    """(operation, context) of the calls a rules run makes, in its order."""
    seen: list[tuple[object, object]] = []
    originals = {cls: cls.rule for cls in OPERATIONS}
    for cls in OPERATIONS:
        def rule(self, ctx, rng, original=originals[cls]):
            seen.append((self, ctx))
            return original(self, ctx, rng)
        cls.rule = rule
    try:
        model = SocietyModel("hobbs-cafe", arch="crsec", model="rules", rng=1)
        for _ in range(steps):
            model.step()
    finally:
        for cls, original in originals.items():
            cls.rule = original
    return seen


def format_first(op, ctx) -> list[dict[str, str]]:
    user = "\n\n".join(part for part in (op.prompt(ctx), op.input_text(ctx)) if part)
    return [{"role": "system", "content": f"{op.system}\n\nANSWER FORMAT: {op.question(ctx).instruction()}"},
            {"role": "user", "content": user}]


def run(calls, layout) -> dict[str, float]:
    embedded.perf_counters()  # reset
    by_op: dict[str, list[float]] = defaultdict(list)
    evaluated, generated, prompt_s, gen_s, parsed, start = 0, 0, 0.0, 0.0, 0, time.perf_counter()
    for i, (op, ctx) in enumerate(calls):
        question = op.question(ctx)
        t0 = time.perf_counter()
        result = embedded.complete(layout(op, ctx), {"grammar": question.gbnf(), "max_tokens": op.max_tokens,
                                                     "seed": i, "temperature": op.temperature})
        by_op[op.name].append(time.perf_counter() - t0)
        perf = embedded.perf_counters()
        evaluated += perf["evaluated"]
        generated += perf["generated"]
        prompt_s += perf["prompt_s"]
        gen_s += perf["gen_s"]
        try:
            question.parse(result["choices"][0]["message"]["content"])
            parsed += 1
        except Exception:  # noqa: BLE001 - counted, as the gateway would
            pass
    return {"wall": time.perf_counter() - start, "evaluated": evaluated / len(calls), "parsed": parsed,
            "generated": generated / len(calls), "prompt_s": prompt_s, "gen_s": gen_s,
            **{name: sum(t) / len(t) for name, t in by_op.items()}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    calls = phase_calls(args.steps)
    calls = [c for c in calls if c[0].name == "GenerateNormativePlans"][:10] + \
        [c for c in calls if c[0].name != "GenerateNormativePlans"][:20]
    names = sorted({op.name for op, _ in calls})
    print(f"{len(calls)} calls from a rules Hobbs Cafe run: "
          + ", ".join(f"{sum(op.name == n for op, _ in calls)} {n}" for n in names))
    for label, layout in (("format last", lambda op, ctx: op.messages(ctx)), ("format first", format_first)):
        embedded.complete([{"role": "user", "content": "warm up"}], {"max_tokens": 2, "seed": 0})
        r = run(calls, layout)
        per_op = ", ".join(f"{n} {r[n]:.2f} s" for n in names if n in r)
        print(f"{label:>13}: {r['wall']:.1f} s in all (prompt eval {r['prompt_s']:.1f} s, generation "
              f"{r['gen_s']:.1f} s); per call {r['evaluated']:.0f} prompt tokens evaluated, {r['generated']:.0f} "
              f"generated; {r['parsed']}/{len(calls)} parsed; per call: {per_op}")


if __name__ == "__main__":
    main()
