"""Agent-steps per second of the rules engine (the generic architecture) at 100 / 1,000 / 10,000 agents.

A benchmark, not a test. The scenario is synthetic, built in code: a square grid of 8x8-tile
rooms joined by doors to their neighbours (one room per ten agents), a table and a chair in each,
three behaviours, and the agents spread over the rooms. Building the model is timed apart from
stepping it; ``--profile`` prints where a step's time goes at the largest size.

    .venv/bin/python bench/bench_scale.py                 # 100, 1000 (3 steps), 10000 (probe)
    .venv/bin/python bench/bench_scale.py --sizes 1000 --steps 1 --profile
    .venv/bin/python bench/bench_scale.py --sizes 10000 --full-max 10000 --steps 1   # a whole step: long

Where the time goes (profiled at 1,000 agents): ``World.people_in`` scans every agent of the
world for each call (3 calls per agent per step, from ``observe`` and ``action_space``), so a
step is O(N^2); ``World.heard_by`` scans every event of the run, so a step also grows with the
number of steps done.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import os
import pstats
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from socialsim.model.society import SocietyModel  # noqa: E402
from socialsim.scenarios.schema import Scenario  # noqa: E402

ROOM = 8  # tiles per side
PER_ROOM = 10  # agents per room


def synthetic_scenario(n_agents: int) -> Scenario:
    """``n_agents`` agents in ceil(n/10) rooms on a square grid."""
    rooms = max(1, math.ceil(n_agents / PER_ROOM))
    side = math.ceil(math.sqrt(rooms))
    areas, doors, furniture = [], [], []
    for r in range(rooms):
        row, col = divmod(r, side)
        name = f"room {row}-{col}"
        areas.append({"name": name, "x": col * ROOM, "y": row * ROOM, "width": ROOM, "height": ROOM,
                      "kind": "outside" if r == 0 else "room"})
        furniture += [{"name": f"table {r}", "area": name}, {"name": f"chair {r}", "area": name}]
        if col > 0:
            doors.append([f"room {row}-{col - 1}", name])
        if row > 0:
            doors.append([f"room {row - 1}-{col}", name])
    agents = [{"name": f"agent {i}", "description": f"a resident ({i % 7} years in town)",
               "start_area": areas[i % rooms]["name"]} for i in range(n_agents)]
    return Scenario.model_validate({
        "name": f"synthetic-{n_agents}", "context": "A synthetic town for scale measurements.",
        "default_arch": "generic", "agents": agents,
        "map": {"areas": areas, "doors": doors, "furniture": furniture, "behaviours": [
            {"name": "read", "text": "read a book", "tags": ["quiet"]},
            {"name": "sing", "text": "sing loudly", "tags": ["loud"]},
            {"name": "eat", "text": "eat a meal", "tags": ["meal"]}]},
    })


def measure(n_agents: int, steps: int, profile: bool = False) -> dict[str, float]:
    t0 = time.perf_counter()
    scenario = synthetic_scenario(n_agents)
    model = SocietyModel(scenario, arch="generic", model="rules", rng=1)
    build_s = time.perf_counter() - t0
    profiler = cProfile.Profile() if profile else None
    t1, c1 = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    for _ in range(steps):
        model.step()
    if profiler:
        profiler.disable()
    step_s = time.perf_counter() - t1
    cpu_s = time.process_time() - c1
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
        print(out.getvalue())
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
        print(out.getvalue())
    return {"agents": n_agents, "steps": steps, "build_s": build_s, "step_s": step_s / steps,
            "cpu_step_s": cpu_s / steps, "agent_steps_per_s": n_agents * steps / step_s,
            "agent_steps_per_cpu_s": n_agents * steps / cpu_s}


def probe(n_agents: int, sample: int) -> dict[str, float]:
    """When a whole step is too slow to wait for: the cost of the per-agent perception (where a
    step's time goes, see --profile) for ``sample`` agents, and the step it implies."""
    t0 = time.perf_counter()
    model = SocietyModel(synthetic_scenario(n_agents), arch="generic", model="rules", rng=1)
    build_s = time.perf_counter() - t0
    agents = list(model.agents)[:sample]
    c1 = time.process_time()
    for agent in agents:
        agent.perceive()
    per_agent = (time.process_time() - c1) / len(agents)
    c2 = time.process_time()
    model.world.people_in(model.world.area_of(agents[0]))
    people_in = time.process_time() - c2
    return {"agents": n_agents, "build_s": build_s, "perceive_cpu_s": per_agent, "people_in_cpu_s": people_in,
            "projected_cpu_step_s": per_agent * n_agents}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="profile the steps of the largest size")
    parser.add_argument("--full-max", type=int, default=3000,
                        help="above this many agents, probe a sample of agents instead of whole steps")
    parser.add_argument("--sample", type=int, default=50, help="agents timed by a probe")
    args = parser.parse_args()
    # CPU seconds as well as wall-clock: on a shared machine the wall clock measures the neighbours
    print(f"{'agents':>8} {'build s':>8} {'s/step':>9} {'cpu s/step':>10} {'agent-steps/s':>14} {'per cpu s':>10}")
    for n in args.sizes:
        if n > args.full_max:
            r = probe(n, args.sample)
            print(f"{n:>8} {r['build_s']:>8.2f}  probe of {args.sample} agents: perceive {r['perceive_cpu_s']:.3f} "
                  f"cpu s/agent, people_in {r['people_in_cpu_s']:.4f} cpu s/call -> a step needs about "
                  f"{r['projected_cpu_step_s']:.0f} cpu s ({n / r['projected_cpu_step_s']:.1f} agent-steps/cpu s)",
                  flush=True)
            continue
        r = measure(n, args.steps, profile=args.profile and n == max(args.sizes))
        print(f"{n:>8} {r['build_s']:>8.2f} {r['step_s']:>9.3f} {r['cpu_step_s']:>10.3f} "
              f"{r['agent_steps_per_s']:>14.0f} {r['agent_steps_per_cpu_s']:>10.0f}", flush=True)


if __name__ == "__main__":
    main()
