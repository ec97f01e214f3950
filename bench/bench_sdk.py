"""Benchmark: one decision phase through our gateway beside a bare OpenAI SDK loop, same server.

The test server (``socialsim.llm.fake_server``, 0.5 s per answer, keep-alive like a real provider)
runs in a child process, so the CPU we count is the client's alone. The SDK runs twice: on its
default httpx transport and on its aiohttp one (``openai[aiohttp]``); the ratio is against the
faster. For N agents a phase is N concurrent calls; its floor is one server delay. The three
clients take turns (A B C A B C ...) so a drifting machine hits all of them.

    .venv/bin/python bench/bench_sdk.py [--delay 0.5] [--agents 10 40 100] [--repeats 3] [--pin]

With --pin the server runs on the last CPU and the clients on the others, so the server has its
own core (the floor ratio's condition); on 2 cores the clients then have one.
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
import sys
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


_sdk_clients: dict[str, object] = {}


def sdk_phase(api_base: str, n: int, transport: str = "httpx") -> tuple[float, float]:
    """(wall s, client CPU s) of n concurrent chat completions with a bare AsyncOpenAI client, on
    its default httpx transport or on the SDK's own aiohttp one (``DefaultAioHttpClient``, which
    the SDK recommends for high concurrency; litellm uses aiohttp too)."""
    from openai import AsyncOpenAI, DefaultAioHttpClient

    from socialsim.llm.loop import run_sync

    if transport not in _sdk_clients:
        async def make():  # an aiohttp session belongs to the loop it is made on: the background loop
            http = DefaultAioHttpClient() if transport == "aiohttp" else None
            return AsyncOpenAI(base_url=api_base, api_key="fake", max_retries=0,  # the test server checks no key
                               **({"http_client": http} if http else {}))
        _sdk_clients[transport] = run_sync(make())
    client = _sdk_clients[transport]

    async def one(i: int):
        return await client.chat.completions.create(
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
    parser.add_argument("--pin", action="store_true", help="the server on its own CPU, the clients on the rest")
    args = parser.parse_args()
    globals()["MODEL"] = args.model
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin and len(cpus) < 2:
        parser.error("--pin needs at least 2 CPUs")
    server = subprocess.Popen([sys.executable, "-c", SERVE, str(args.delay)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True,
                              preexec_fn=(lambda: os.sched_setaffinity(0, cpus[-1:])) if args.pin else None)
    if args.pin:  # before any client thread starts: they inherit it
        os.sched_setaffinity(0, cpus[:-1])
    try:
        api_base = server.stdout.readline().strip()
        clients = {"gateway": lambda n: gateway_phase(api_base, n),
                   "SDK httpx": lambda n: sdk_phase(api_base, n, "httpx"),
                   "SDK aiohttp": lambda n: sdk_phase(api_base, n, "aiohttp")}
        for phase in clients.values():
            phase(2)  # warm up every client
        pinned = f"; server on CPU {cpus[-1]}, clients on {cpus[:-1]}" if args.pin else ""
        print(f"server delay {args.delay * 1000:.0f} ms (floor of one phase), keep-alive{pinned}; medians of "
              f"{args.repeats} phases, the clients taking turns; wall s (x floor) / ms client CPU per call")
        print(f"{'N':>4} " + " ".join(f"{name:>22}" for name in clients) + f" {'gw/best SDK':>12}")
        for n in args.agents:
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
            for _ in range(args.repeats):
                for name, phase in clients.items():
                    runs[name].append(phase(n))
            walls, cpus = {}, {}
            for name, values in runs.items():
                walls[name], cpus[name] = (statistics.median(x) for x in zip(*values, strict=True))
            best = min(walls[name] for name in clients if name != "gateway")
            print(f"{n:>4} " + " ".join(f"{walls[c]:>6.2f}s ({walls[c] / args.delay:>4.2f}x) {cpus[c] / n * 1000:>5.2f}ms"
                                      for c in clients) + f" {walls['gateway'] / best:>11.2f}x")
    finally:
        from socialsim.llm.loop import run_sync

        for client in _sdk_clients.values():
            run_sync(client.close())
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
