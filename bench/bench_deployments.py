"""Benchmark: one decision phase through the gateway to one server, and to a pool of servers
behind one model name through litellm's Router (``--deployments``).

Each test server (0.5 s per answer, keep-alive) runs in a child process, so the CPU counted is the
client's. What a pool costs the client (the Router's selection and bookkeeping per call), and
that a phase still takes one server delay when its calls are spread over the servers.

    .venv/bin/python bench/bench_deployments.py [--delay 0.5] [--agents 10 100] [--servers 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("OPENAI_API_KEY", "placeholder-key")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sdk import MODEL, SERVE, Agent  # noqa: E402  (the same server and agents as bench_sdk)


def phase(gateway, n: int) -> tuple[float, float]:
    """(wall s, client CPU s) of one phase of n agents through ``gateway``."""
    import random

    from socialsim.llm.operations.generic import CHOOSE_ACTION, ActionContext

    agents = [Agent(i) for i in range(n)]

    async def decide(agent: Agent):
        ctx = ActionContext(f"agent {agent.unique_id}", "A person.", "A town.", "You are in the square.",
                            ["go home", "chat with Ann", "read a book"])
        return await gateway.ask(CHOOSE_ACTION, ctx, agent_id=agent.unique_id, rng=agent.phase_rng)

    gateway.tape._records.clear()  # every call live: a repeated phase would otherwise be answered by the tape
    cpu, wall = time.process_time(), time.perf_counter()
    answers = gateway.run_phase(agents, decide, random.Random(n))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert all(a.status == "ok" for a in answers), [a.error for a in answers if a.status != "ok"]
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--agents", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    servers = [subprocess.Popen([sys.executable, "-c", SERVE, str(args.delay)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for _ in range(args.servers)]
    try:
        bases = [s.stdout.readline().strip() for s in servers]
        pool = Path(tempfile.mkdtemp()) / "pool.yaml"
        pool.write_text("model_list:\n" + "".join(
            f"  - model_name: {MODEL}\n    litellm_params: {{model: {MODEL}, api_base: '{base}'}}\n" for base in bases))
        from socialsim.llm.gateway import Gateway
        from socialsim.llm.routing import RouteTable

        gateways = {"one server": lambda n: Gateway(RouteTable(MODEL), max_concurrency=n, api_base=bases[0],
                                                    num_retries=0),
                    f"pool of {args.servers}": lambda n: Gateway(RouteTable(MODEL), max_concurrency=n,
                                                                 num_retries=0, deployments=pool)}
        for make in gateways.values():
            phase(make(2), 2)  # warm up
        print(f"server delay {args.delay * 1000:.0f} ms (floor of one phase); medians of {args.repeats} phases, "
              f"taking turns; wall s (x floor) / ms client CPU per call")
        print(f"{'N':>4} " + " ".join(f"{name:>22}" for name in gateways) + f" {'pool/one':>9}")
        for n in args.agents:
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in gateways}
            for _ in range(args.repeats):
                for name, make in gateways.items():
                    runs[name].append(phase(make(n), n))
            med = {name: tuple(statistics.median(x) for x in zip(*values, strict=True)) for name, values in runs.items()}
            one, pooled = med.values()
            print(f"{n:>4} " + " ".join(f"{w:>6.2f}s ({w / args.delay:>4.2f}x) {c / n * 1000:>5.2f}ms"
                                      for w, c in med.values()) + f" {pooled[1] / one[1]:>8.2f}x CPU")
    finally:
        for s in servers:
            s.stdin.close()
            s.wait(timeout=10)


if __name__ == "__main__":
    main()
