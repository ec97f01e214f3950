"""Benchmark: one decision phase of N agents against a slow local OpenAI-compatible server.

The server (127.0.0.1, no network) answers every request after a fixed delay, like a provider
with 500 ms latency. One phase = every agent asks ChooseAction once, so the critical path is one
delay. We time the phase run concurrently (semaphore = N) and sequentially (semaphore = 1).

    .venv/bin/python bench/bench_phase.py [--delay 0.5] [--agents 10 100] [--skip-sequential]
"""

from __future__ import annotations

import argparse
import os
import random
import time

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("OPENAI_API_KEY", "placeholder-key")

from socialsim.llm.fake_server import FakeOpenAIServer  # noqa: E402
from socialsim.llm.gateway import Gateway  # noqa: E402
from socialsim.llm.operations.generic import CHOOSE_ACTION, ActionContext  # noqa: E402
from socialsim.llm.routing import RouteTable  # noqa: E402


class Agent:
    def __init__(self, uid: int) -> None:
        self.unique_id = uid


def phase(server: FakeOpenAIServer, n: int, concurrency: int) -> float:
    gateway = Gateway(RouteTable("openai/bench-model"), max_concurrency=concurrency, api_base=server.api_base,
                      num_retries=0)
    agents = [Agent(i) for i in range(n)]

    async def decide(agent: Agent):
        ctx = ActionContext(f"agent {agent.unique_id}", "A person.", "A town.", "You are in the square.",
                            ["go home", "chat with Ann", "read a book"])
        return await gateway.ask(CHOOSE_ACTION, ctx, agent_id=agent.unique_id, rng=agent.phase_rng)

    start = time.perf_counter()
    answers = gateway.run_phase(agents, decide, random.Random(0))
    elapsed = time.perf_counter() - start
    assert all(a.status == "ok" for a in answers), "the server's answers should all parse"
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--agents", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--skip-sequential", action="store_true")
    args = parser.parse_args()
    with FakeOpenAIServer(delay_s=args.delay) as server:
        phase(server, 2, 2)  # warm up litellm's client
        print(f"server delay {args.delay * 1000:.0f} ms; critical path of one phase = {args.delay:.2f} s")
        print(f"{'agents':>7} {'concurrent s':>13} {'sequential s':>13} {'speed-up':>9} {'vs critical path':>17}")
        for n in args.agents:
            concurrent = phase(server, n, concurrency=n)
            sequential = float("nan") if args.skip_sequential else phase(server, n, concurrency=1)
            print(f"{n:>7} {concurrent:>13.2f} {sequential:>13.2f} {sequential / concurrent:>8.1f}x "
                  f"{concurrent / args.delay:>16.2f}x")


if __name__ == "__main__":
    main()
