"""`make bench`: every benchmark side by side in one invocation, each in its own process.

(1) gateway vs bare OpenAI SDK per phase at N = 10, 40, 100 against the 0.5 s test server, and
(1b) the same with the server on a CPU of its own; (1c) the gateway's own CPU per call with the
provider stubbed (what is ours, not litellm's or the HTTP client's); (1d) one server against a pool of two through
litellm's Router (--deployments);
(2) the embedded engine's per-call time and tokens/s, batched decoding against one call at a
time, and `make run`'s steps by weight layout and with and without saved prompt states, and (2f) the
full-model first step (plans by the model); (3) `socialsim --help` and `socialsim models`
start-up, each a whole process timed after a warm-up (wall and CPU, min / median / max of five);
(4) the test suite's wall time (only with --suite: it takes minutes).

    .venv/bin/python bench/run_all.py [--suite] [--skip-embedded]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def section(title: str, argv: list[str]) -> float:
    print(f"\n== {title}\n$ {' '.join(argv)}", flush=True)
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=False)
    return time.perf_counter() - start


def startup(title: str, argv: list[str], runs: int = 5) -> None:
    """Time ``argv`` as a whole process ``runs`` times after one warm-up: wall seconds and the
    CPU seconds (user + system) the operating system accounts to it; min / median / max."""
    print(f"\n== {title}\n$ {' '.join(argv)}", flush=True)
    walls, cpus = [], []
    for attempt in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if attempt:  # the first run warms the file cache
            walls.append(wall)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    for name, values in (("wall s", walls), ("cpu s", cpus)):
        print(f"{name:7} min {min(values):.3f}  median {statistics.median(values):.3f}  max {max(values):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", action="store_true", help="also time the whole test suite (minutes)")
    parser.add_argument("--skip-embedded", action="store_true")
    args = parser.parse_args()
    py = sys.executable
    section("(1) one phase: gateway vs bare OpenAI SDK, 0.5 s server", [py, "bench/bench_sdk.py"])
    if len(os.sched_getaffinity(0)) >= 2:
        section("(1b) the same, the server on a CPU of its own", [py, "bench/bench_sdk.py", "--pin"])
    section("(1c) the gateway's own CPU per call, the provider stubbed", [py, "bench/bench_gateway_own.py"])
    section("(1d) one server against a pool of two behind litellm's Router (--deployments)",
            [py, "bench/bench_deployments.py"])
    if not args.skip_embedded:
        section("(2) embedded engine", [py, "bench/bench_embedded.py"])
        section("(2c) embedded engine: batched decoding vs one call at a time", [py, "bench/bench_batched_decoding.py"])
        section("(2d) embedded engine: answer format last vs first (prompt prefix reuse)",
                [py, "bench/bench_prompt_layout.py"])
        section("(2e) embedded engine: make run's Hobbs Cafe steps by weight layout, with and without saved states",
                [py, "bench/bench_embedded_step.py"])
        section("(2f) embedded engine: a day's first Hobbs Cafe step with the plans made by the model",
                [py, "bench/bench_embedded_step.py", "--full", "--steps", "1"])
    section("(2b) recording a run: per-step append vs whole rewrite", [py, "bench/bench_records.py"])
    for command in (["--help"], ["models"]):
        startup(f"(3) socialsim {' '.join(command)} start-up", [py, "-m", "socialsim.cli", *command])
    if args.suite:
        wall = section("(4) test suite", ["make", "-s", "test"])  # the README's command, as a user runs it
        print(f"test suite wall time: {wall:.0f} s")


if __name__ == "__main__":
    main()
