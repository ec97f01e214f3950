"""Benchmark: the gateway's own CPU per call, with litellm's provider call replaced by a stub.

What is left when the provider answers at once with a prebuilt response: routing, messages, the
tape key, the budget reservation, parsing, the ledger row and the tape record (redacted; in
memory, or appended to a file as a run does). Subtract it from bench_sdk's CPU per call to see
what litellm and the HTTP client take.

    .venv/bin/python bench/bench_gateway_own.py [--agents 100] [--phases 30]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


class Agent:
    def __init__(self, uid: int) -> None:
        self.unique_id = uid


def cpu_per_call(n: int, phases: int, tape_path: Path | None) -> float:
    """Median client CPU (ms) per call over ``phases`` phases of ``n`` agents, each phase with new
    seeds so every call is live (a tape hit would skip the stubbed provider)."""
    import litellm
    from litellm import ModelResponse

    from socialsim.llm.gateway import Gateway
    from socialsim.llm.operations.generic import CHOOSE_ACTION, ActionContext
    from socialsim.llm.routing import RouteTable
    from socialsim.llm.tape import Tape

    async def instant(**_kwargs):
        return ModelResponse(choices=[{"message": {"role": "assistant", "content": "2"}, "finish_reason": "stop"}],
                             usage={"prompt_tokens": 90, "completion_tokens": 1, "total_tokens": 91}, model="bench")

    real, litellm.acompletion = litellm.acompletion, instant
    try:
        gateway = Gateway(RouteTable("openai/bench-model"), Tape(tape_path), max_concurrency=n, api_base="http://stub")
        agents = [Agent(i) for i in range(n)]

        async def decide(agent: Agent):
            ctx = ActionContext(f"agent {agent.unique_id}", "A person.", "A town.", "You are in the square.",
                                ["go home", "chat with Ann", "read a book"])
            return await gateway.ask(CHOOSE_ACTION, ctx, agent_id=agent.unique_id, rng=agent.phase_rng)

        gateway.run_phase(agents, decide, random.Random("warm-up"))
        times = []
        for phase in range(phases):
            cpu = time.process_time()
            gateway.run_phase(agents, decide, random.Random(phase))
            times.append(time.process_time() - cpu)
        assert gateway.ledger.live_calls == n * (phases + 1), "a call was answered from the tape"
        return statistics.median(times) / n * 1000
    finally:
        litellm.acompletion = real


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--phases", type=int, default=30)
    args = parser.parse_args()
    in_memory = cpu_per_call(args.agents, args.phases, None)
    with tempfile.TemporaryDirectory() as tmp:
        on_file = cpu_per_call(args.agents, args.phases, Path(tmp) / "tape.jsonl")
    print(f"gateway's own CPU per call, provider stubbed, N={args.agents}, median of {args.phases} phases: "
          f"{in_memory:.3f} ms with the tape in memory, {on_file:.3f} ms appending to a tape file")


if __name__ == "__main__":
    main()
