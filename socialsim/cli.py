"""`socialsim run | replay | models | sweep | dashboard` — the command line.

Bad arguments get a one-line message naming what was wrong (exit code 2); a run that stops on
its budget exits 3 with everything recorded so far saved.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

# litellm, llama.cpp and Solara are imported inside the commands that need them (gateway.py configures
# litellm on its first import), so `socialsim --help`, `socialsim models` and scenario checks stay fast.


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="socialsim", description="LLM-driven agent-based social simulation on Mesa")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a scenario and write a run directory")
    run.add_argument("scenario", nargs="?", default="hobbs-cafe", help="scenario name or file (default: hobbs-cafe)")
    run.add_argument("--arch", help="architecture: generic (default: the scenario's)")
    run.add_argument("--model", help="litellm model string, 'local/smollm2' or 'rules' "
                                     "(default: $SOCIALSIM_MODEL, else local/smollm2)")
    run.add_argument("--route", action="append", default=[], metavar="OP=MODEL",
                     help="send one operation or module to another model (repeatable)")
    run.add_argument("--routes", type=Path, metavar="FILE", help="YAML route table {default:, routes: {}}")
    run.add_argument("--steps", type=int, help="number of steps (default: the scenario's)")
    run.add_argument("--preset", help="a scenario preset, e.g. 'paper'")
    run.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                     help="an architecture parameter or ablation switch, e.g. --set crsec.enable_chat=false "
                          "(repeatable; `socialsim models --params ARCH` lists them)")
    run.add_argument("--rng", type=int, default=42, help="random seed (default 42)")
    run.add_argument("--out", type=Path, help="run directory (default runs/SCENARIO-ARCH-TIME)")
    run.add_argument("--resume", type=Path, metavar="RUN_DIR",
                     help="continue a stopped run: its config and tape are reused, recorded calls are free")
    run.add_argument("--max-cost", type=float, help="stop cleanly once this many USD are spent")
    run.add_argument("--max-calls", type=int, help="stop cleanly after this many live LLM calls")
    run.add_argument("--concurrency", type=int, default=16, help="max concurrent LLM calls (default 16)")
    run.add_argument("--rpm", type=float, help="requests-per-minute limit shared by the run")
    run.add_argument("--tpm", type=float, help="tokens-per-minute limit shared by the run")
    run.add_argument("--api-base", help="endpoint of provider models, e.g. http://127.0.0.1:8000/v1 (vLLM)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")

    rep = sub.add_parser("replay", help="re-run a run from its tape with zero LLM calls")
    rep.add_argument("run_dir", type=Path)
    rep.add_argument("--out", type=Path, help="where to write the replay (default RUN_DIR/replay)")
    rep.add_argument("--no-progress", action="store_true")

    models = sub.add_parser("models", help="list engines, routes and operations")
    models.add_argument("--params", metavar="ARCH", help="list an architecture's parameters (for --set)")

    sw = sub.add_parser("sweep", help="run a parameter sweep (mesa.batch_run; resumable; optionally on Dask)")
    sw.add_argument("sweep_file", type=Path, help="sweep file (YAML or TOML), e.g. examples/sweep-hobbs.yaml")
    where = sw.add_mutually_exclusive_group()
    where.add_argument("--cluster", choices=["local"], help="run on a Dask LocalCluster on this machine")
    where.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on an existing Dask cluster "
                                                                       "(its workers must see --out at the same path)")
    sw.add_argument("--out", type=Path, help="sweep directory (default sweeps/NAME); re-running resumes it")
    sw.add_argument("--processes", type=int, help="local processes or LocalCluster workers (default: the file's, else 1)")
    sw.add_argument("--no-progress", action="store_true", help="no progress bar")
    sw.add_argument("--export", action="store_true", help="also write tidy Parquet/CSV frames to SWEEP_DIR/export")

    rp = sub.add_parser("reproduce", help="run a paper's protocol: cost projected first, then the paper beside the run")
    rp.add_argument("arch", choices=["crsec", "asvo", "itcmas"], help="the paper's architecture")
    rp.add_argument("--model", help="litellm model string, 'local/smollm2' or 'rules' (default: $SOCIALSIM_MODEL)")
    rp.add_argument("--judge", help="judge model for the paper's evaluation (must differ from --model)")
    rp.add_argument("--seeds", type=int, default=3, help="seeds 1..K per arm (default 3)")
    rp.add_argument("--steps", type=int, help="override every run's length (a quick look; not the paper's protocol)")
    rp.add_argument("--yes", action="store_true", help="run whatever the projected cost")
    rp.add_argument("--max-cost", type=float, help="run only if the projection is under this many USD; the runs share it")
    rp.add_argument("--out", type=Path, help="output directory (default reproduce/ARCH-MODEL)")

    dash = sub.add_parser("dashboard", help="watch, inspect and replay a society in the browser (Solara)")
    dash.add_argument("target", nargs="?", default="hobbs-cafe", metavar="SCENARIO | RUN_DIR",
                      help="a scenario to run live, or a run directory to replay (default: hobbs-cafe)")
    dash.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1: this machine only)")
    dash.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    dash.add_argument("--arch", help="architecture of a live society (default: the scenario's)")
    dash.add_argument("--model", help="model of a live society (default: $SOCIALSIM_MODEL, else local/smollm2)")
    dash.add_argument("--rng", type=int, default=42, help="seed of a live society (default 42)")
    return parser


def _fail(message: str, code: int = 2) -> int:
    print(f"socialsim: error: {message}", file=sys.stderr)
    return code


def cmd_run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from socialsim.llm.engines import ModelUnavailable
    from socialsim.llm.routing import RouteTable, parse_route
    from socialsim.agents.params import parse_assignments
    from socialsim.model.runner import RunConfig, run
    from socialsim.scenarios.loader import ScenarioError, load_scenario

    try:
        if args.resume:
            saved = json.loads((args.resume / "config.json").read_text())
            config = RunConfig.model_validate(saved["config"])
            updates = {k: v for k, v in {"max_cost": args.max_cost, "max_calls": args.max_calls,
                                         "steps": args.steps}.items() if v is not None}
            config = config.model_copy(update=updates)
            out = args.resume
        else:
            routes: dict[str, str] = {}
            default = args.model
            if args.routes:
                table = RouteTable.from_file(args.routes, default=args.model)
                routes, default = table.routes, table.default
            routes.update(dict(parse_route(r) for r in args.route))
            arch_params = parse_assignments(args.arch or load_scenario(args.scenario).default_arch, args.settings)
            config = RunConfig(scenario=args.scenario, arch=args.arch, model=default, routes=routes,
                               steps=args.steps, preset=args.preset, rng=args.rng, max_cost=args.max_cost,
                               max_calls=args.max_calls, max_concurrency=args.concurrency, rpm=args.rpm,
                               tpm=args.tpm, api_base=args.api_base, arch_params=arch_params)
            out = args.out
        result = run(config, out, progress=not args.no_progress)
    except (ScenarioError, ModelUnavailable, ValueError, FileNotFoundError) as exc:
        return _fail(str(exc))
    except ValidationError as exc:
        return _fail("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    print(f"run directory: {result.run_dir}")
    print(f"status: {result.status} ({result.steps_done} steps)")
    return 0 if result.status == "completed" else 3


def cmd_replay(args: argparse.Namespace) -> int:
    from socialsim.llm.tape import TapeMiss
    from socialsim.model.runner import replay

    if not (args.run_dir / "config.json").is_file():
        return _fail(f"{args.run_dir} is not a run directory (no config.json)")
    try:
        result, same = replay(args.run_dir, args.out, progress=not args.no_progress)
    except TapeMiss as exc:
        return _fail(f"replay failed: {exc}")
    print(f"replay directory: {result.run_dir}")
    print(f"live LLM calls: {result.model.llm.ledger.live_calls}")
    print(f"frames identical to the recording: {'yes' if same else 'NO'}")
    return 0 if same else 1


def cmd_models(args: argparse.Namespace) -> int:
    from socialsim.llm.engines import describe_engines, engine_note
    from socialsim.llm.operations import all_operations
    from socialsim.llm.routing import default_model

    if args.params:
        from socialsim.agents.params import parameters

        try:
            params = parameters(args.params)
        except ValueError as exc:
            return _fail(str(exc))
        print(f"Parameters of {args.params} (socialsim run --arch {args.params} --set {args.params}.KEY=VALUE):")
        for p in params:
            limits = f" [{p.low}, {p.high}]" if p.low is not None or p.high is not None else ""
            choices = f" one of {', '.join(map(str, p.choices))}" if p.choices else ""
            print(f"  {p.name:24} {p.kind}{limits}{choices} = {p.default!r}  {p.help}")
        return 0
    print("Engines:")
    for name, what in describe_engines():
        print(f"  {name:18} {what}")
    current = default_model(None)
    print(f"\nDefault model now: {current}")
    if note := engine_note(current):
        print(f"  note: {note}")
    print("\nOperations (route any of them, or their module, with --route NAME=MODEL):")
    for op in all_operations():
        print(f"  {op.module:12} {op.name}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from socialsim.batch.sweepfile import SweepFileError, load_sweep
    from socialsim.llm.engines import ModelUnavailable
    from socialsim.scenarios.loader import ScenarioError

    if args.processes is not None and args.processes < 1:
        return _fail(f"--processes expects a whole number >= 1, got {args.processes}")
    logging.getLogger("distributed").setLevel(logging.WARNING)  # Dask's INFO chatter would bury the progress bar
    try:
        spec = load_sweep(args.sweep_file)
        from socialsim.batch.sweeps import sweep

        result = sweep(spec, args.out, processes=args.processes, cluster=args.cluster, scheduler=args.scheduler,
                       progress=not args.no_progress)
    except (SweepFileError, ScenarioError, ModelUnavailable, ValueError) as exc:
        return _fail(str(exc))
    except OSError as exc:  # a file, or a Dask scheduler that cannot be reached
        return _fail(f"{type(exc).__name__}: {exc}")
    runs = result.runs
    print(f"sweep directory: {result.sweep_dir}")
    print(f"runs: {len(runs)} ({len(result.executed)} run now, {len(result.skipped)} already done, "
          f"{len(result.failed)} not completed)")
    print(f"live LLM calls: {int(runs['live_calls'].sum())}, live cost: ${runs['live_cost_usd'].sum():.4f}")
    if args.export:
        from socialsim.batch.exports import export

        export(result.sweep_dir)
        print(f"export: {result.sweep_dir / 'export'}")
    return 0 if result.failed.empty else 3


def cmd_reproduce(args: argparse.Namespace) -> int:
    from socialsim.llm.engines import ModelUnavailable
    from socialsim.model.reproduce import reproduce
    from socialsim.scenarios.loader import ScenarioError

    if args.seeds < 1:
        return _fail(f"--seeds expects a whole number >= 1, got {args.seeds}")
    if args.steps is not None and args.steps < 1:
        return _fail(f"--steps expects a whole number >= 1, got {args.steps}")
    try:
        summary = reproduce(args.arch, args.model, seeds=args.seeds, judge=args.judge, yes=args.yes,
                            max_cost=args.max_cost, out=args.out, steps=args.steps)
    except (ScenarioError, ModelUnavailable, ValueError) as exc:
        return _fail(str(exc))
    return 0 if summary is not None else 4


def cmd_dashboard(args: argparse.Namespace) -> int:
    from socialsim.dashboards.server import check_target, host_warning, serve
    from socialsim.scenarios.loader import ScenarioError

    try:
        target = check_target(args.target)
    except (ScenarioError, ValueError, FileNotFoundError) as exc:
        return _fail(str(exc))
    if warning := host_warning(args.host):
        logging.getLogger("socialsim").warning(warning)
    return serve(target, args.host, args.port, arch=args.arch, model=args.model, seed=args.rng)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = _parser().parse_args(argv)
    handler = {"run": cmd_run, "replay": cmd_replay, "models": cmd_models, "sweep": cmd_sweep, "reproduce": cmd_reproduce,
               "dashboard": cmd_dashboard}[args.command]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
