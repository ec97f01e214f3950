"""Runs per minute of a rules-engine sweep: local with 1 and 2 processes, and on a Dask LocalCluster.

A benchmark, not a test. The sweep is Hobbs Café, generic architecture, rules engine, a grid of
2 points x R replicates (default 32, so 64 runs of 10 steps). Every measurement starts from an
empty sweep directory. The 2-process figure includes starting the pool (Mesa's batch_run spawns
fresh interpreters, each importing socialsim); the LocalCluster figure is given with and without
starting the cluster.

    .venv/bin/python bench/bench_sweep.py [--replicates 32] [--steps 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from socialsim.batch.sweeps import sweep  # noqa: E402


def spec(replicates: int, steps: int) -> dict:
    return {"name": "bench", "replicates": replicates, "steps": steps,
            "parameters": {"scenario": "hobbs-cafe", "arch": "generic", "model": "rules",
                           "routes": [{}, {"action": "rules"}]}}


def timed(label: str, n_runs: int, fn, executed: int | None = None) -> float:
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    assert (result.runs["status"] == "completed").all() and len(result.executed) == (n_runs if executed is None
                                                                                      else executed)
    report(label, n_runs, seconds)
    return seconds


def report(label: str, n_runs: int, seconds: float) -> None:
    rate = f"{60 * n_runs / seconds:>8.1f} runs/min" if n_runs else ""
    print(f"{label:<48} {n_runs:>4} runs {seconds:>8.1f} s {rate}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    s = spec(args.replicates, args.steps)
    n = 2 * args.replicates
    root = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        # warm up this process (first imports, first scenario load), as the workers below are
        sweep({**s, "replicates": 1, "steps": 1}, root / "warm", progress=False, figures=False)
        timed("local, 1 process", n, lambda: sweep(s, root / "p1", processes=1, progress=False, figures=False))
        timed("local, 2 processes (incl. pool start)", n,
                      lambda: sweep(s, root / "p2", processes=2, progress=False, figures=False))
        # the same sweep again: every run is skipped, so this is the cost of starting the pool
        timed("local, 2 processes, re-run (all done: pool start)", 0,
              lambda: sweep(s, root / "p2", processes=2, progress=False, figures=False), executed=0)

        from distributed import Client, LocalCluster

        start = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.run(lambda: __import__("socialsim.batch.sweeps"))  # workers import socialsim once
            started = time.perf_counter() - start
            report("Dask LocalCluster start (2 worker processes)", 0, started)
            seconds = timed("Dask LocalCluster, 2 workers (running)", n,
                            lambda: sweep(s, root / "dask", client=client, progress=False, figures=False))
        report("Dask LocalCluster, 2 workers (incl. start)", n, started + seconds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
