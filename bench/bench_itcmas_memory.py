"""ITCMA-S memory: count and activation time with and without compression (rules engine).

Runs IrollanValley for 75 steps with compressed memory (ablation "full") and without it
("ltrha": the same agent without blending/compression) and prints memories per agent, the frames
they stand for, and the mean time of one memory activation at the end of the run.

    .venv/bin/python bench/bench_itcmas_memory.py [--steps 75]
"""

from __future__ import annotations

import argparse
import time

from socialsim.model.society import SocietyModel


def measure(ablation: str, steps: int, rng: int = 42) -> dict:
    model = SocietyModel("irollan-valley", model="rules", rng=rng, ablation=ablation)
    for _ in range(steps):
        model.step()
    agents = sorted(model.agents, key=lambda a: a.name)
    start = time.perf_counter()
    for agent in agents:
        agent.consciousness.activate(agent.pi, agent.cfg.activation_k, agent.cfg.sim_weights)
    per_activation = (time.perf_counter() - start) / len(agents)
    return {"ablation": ablation,
            "memories_per_agent": sum(len(a.consciousness.long_term) for a in agents) / len(agents),
            "frames_per_agent": sum(sum(m.frames for m in a.consciousness.long_term) for a in agents) / len(agents),
            "rows_per_memory": sum(len(m) for a in agents for m in a.consciousness.long_term)
                               / sum(len(a.consciousness.long_term) for a in agents),
            "activation_ms": round(per_activation * 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=75)
    args = parser.parse_args()
    for ablation in ("full", "ltrha"):
        print(measure(ablation, args.steps))


if __name__ == "__main__":
    main()
