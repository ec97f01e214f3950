"""What recording a run costs per step: appending each step's new rows (``model.steplog``)
against rewriting every frame whole (what each step did before), at the start and the end of a
rules Hobbs Café run.

    .venv/bin/python bench/bench_records.py [--steps 144]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from socialsim.model.runner import RunConfig, _tidy, frames, save  # noqa: E402
from socialsim.model.society import SocietyModel  # noqa: E402
from socialsim.model.steplog import StepLog  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=144)
    args = parser.parse_args()
    config = RunConfig(scenario="hobbs-cafe", arch="crsec", model="rules", steps=args.steps, rng=1).resolved()
    model = SocietyModel(config.scenario, arch=config.arch, model=config.model, rng=config.rng)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        (run_dir / "tables").mkdir()
        log = StepLog(run_dir, _tidy)
        append_ms, whole_ms, stepping = [], [], 0.0
        for step in range(1, args.steps + 1):
            started = time.perf_counter()
            model.step()
            stepping += time.perf_counter() - started
            started = time.perf_counter()
            log.append(frames(model), step)
            append_ms.append(1000 * (time.perf_counter() - started))
            if step in (1, 10, args.steps // 2, args.steps):
                started = time.perf_counter()
                save(model, run_dir, config, "running", [])
                whole_ms.append((step, 1000 * (time.perf_counter() - started)))
        print(f"rules hobbs-cafe, {args.steps} steps: stepping {stepping:.1f} s, appending {sum(append_ms) / 1000:.1f} s "
              f"in all")
        for step, ms in whole_ms:
            print(f"  at step {step:4d}: append {append_ms[step - 1]:6.1f} ms, a whole rewrite {ms:7.1f} ms")


if __name__ == "__main__":
    main()
