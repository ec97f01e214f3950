"""Benchmark: one decision phase through our gateway beside a bare OpenAI SDK loop, same server.

The test server (``socialsim.llm.fake_server``, 0.5 s per answer) runs in a child process, so the
CPU we count is the client's alone. For N agents a phase is N concurrent calls; its floor is one
server delay. Gateway and SDK phases alternate (A B A B ...) so a drifting machine hits both.

    .venv/bin/python bench/bench_sdk.py [--delay 0.5] [--agents 10 40 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import time

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("OPENAI_API_KEY", "placeholder-key")

SERVE = """
import http.server, sys
http.server.ThreadingHTTPServer.request_queue_size = 1024  # 100 connections at once: no resets
from socialsim.llm.fake_server import FakeOpenAIServer
with FakeOpenAIServer(delay_s=float(sys.argv[1])) as server:
    print(server.api_base, flush=True)
    sys.stdin.read()
"""


MODEL = "openai/bench-model"  # --model: a name litellm's cost map knows prices its calls (a miss costs more)


class Agent:
    def __init__(self, uid: int) -> None:
        self.unique_id = uid


def gateway_phase(api_base: str, n: int) -> tuple[float, float]:
    """(wall s, client CPU s) of one phase of n agents through Gateway.run_phase."""
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.operations.generic import CHOOSE_ACTION, ActionContext
    from socialsim.llm.routing import RouteTable

    gateway = Gateway(RouteTable(MODEL), max_concurrency=n, api_base=api_base, num_retries=0)
    agents = [Agent(i) for i in range(n)]

    async def decide(agent: Agent):
        ctx = ActionContext(f"agent {agent.unique_id}", "A person.", "A town.", "You are in the square.",
                            ["go home", "chat with Ann", "read a book"])
        return await gateway.ask(CHOOSE_ACTION, ctx, agent_id=agent.unique_id, rng=agent.phase_rng)

    cpu, wall = time.process_time(), time.perf_counter()
    gateway.run_phase(agents, decide, random.Random(0))
    return time.perf_counter() - wall, time.process_time() - cpu


_sdk_client = None


def sdk_phase(api_base: str, n: int) -> tuple[float, float]:
    """(wall s, client CPU s) of n concurrent chat completions with a bare AsyncOpenAI client."""
    from openai import AsyncOpenAI

    from socialsim.llm.loop import run_sync

    global _sdk_client
    if _sdk_client is None:
        _sdk_client = AsyncOpenAI(base_url=api_base, api_key="fake", max_retries=0)  # the local test server checks no key

    async def one(i: int):
        return await _sdk_client.chat.completions.create(
            model=MODEL.removeprefix("openai/"), max_tokens=64, temperature=0.7, seed=i,
            messages=[{"role": "system", "content": f"You are agent {i}. A person in a town."},
                      {"role": "user", "content": "You are in the square. Options: (a) go home (b) chat with "
                                                  "Ann (c) read a book. Answer with one letter."}])

    async def phase():
        return await asyncio.gather(*(one(i) for i in range(n)))

    cpu, wall = time.process_time(), time.perf_counter()
    run_sync(phase())
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--agents", type=int, nargs="+", default=[10, 40, 100])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default=MODEL, help="the model name sent (the test server answers any)")
    args = parser.parse_args()
    globals()["MODEL"] = args.model
    server = subprocess.Popen([sys.executable, "-c", SERVE, str(args.delay)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        api_base = server.stdout.readline().strip()
        gateway_phase(api_base, 2), sdk_phase(api_base, 2)  # warm up both clients
        print(f"server delay {args.delay * 1000:.0f} ms (floor of one phase); medians of {args.repeats} phases, "
              "gateway and SDK alternating")
        print(f"{'N':>4} {'gateway s':>10} {'/floor':>7} {'ms CPU/call':>12} {'SDK s':>7} {'/floor':>7} "
              f"{'ms CPU/call':>12} {'gw/SDK':>7}")
        for n in args.agents:
            gw, sdk = [], []
            for _ in range(args.repeats):
                gw.append(gateway_phase(api_base, n))
                sdk.append(sdk_phase(api_base, n))
            gw_wall, gw_cpu = (statistics.median(x) for x in zip(*gw, strict=True))
            sdk_wall, sdk_cpu = (statistics.median(x) for x in zip(*sdk, strict=True))
            print(f"{n:>4} {gw_wall:>10.2f} {gw_wall / args.delay:>6.2f}x {gw_cpu / n * 1000:>12.2f} "
                  f"{sdk_wall:>7.2f} {sdk_wall / args.delay:>6.2f}x {sdk_cpu / n * 1000:>12.2f} "
                  f"{gw_wall / sdk_wall:>6.2f}x")
    finally:
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
