"""`socialsim run | replay | models | sweep | reproduce | dashboard` — the command line.

Bad arguments get a one-line message naming what was wrong (exit code 2; a --max-cost on a model
with no price is one, for a run, a sweep or a reproduction alike); a run that stops on
its budget exits 3 with everything recorded so far saved, and so does a reproduction one of whose
runs stopped short; a reproduction only projected (no --yes, or over --max-cost) exits 4.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from socialsim.llm.redact import RedactingFilter, redact

if TYPE_CHECKING:  # the command line imports the simulation only when a command needs it
    import pandas as pd

    from socialsim.model.runner import RunConfig, RunFailed

# litellm, llama.cpp and Solara are imported where they are needed (litellm through llm/litellm_setup.py,
# on a run's first provider call or model check), so `socialsim --help`, `socialsim models`, scenario
# checks, runs on the rules and replays stay fast.


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="socialsim", description="LLM-driven agent-based social simulation on Mesa")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a scenario and write a run directory")
    run.add_argument("scenario", nargs="?", help="scenario name or file (default: hobbs-cafe)")
    run.add_argument("--arch", help="architecture: crsec, asvo, itcmas, generic or an installed one (socialsim "
                                    "models lists them; default: the scenario's)")
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
    run.add_argument("--rng", type=int, help="random seed (default 42)")
    run.add_argument("--out", type=Path, help="run directory (default runs/SCENARIO-ARCH-TIME)")
    run.add_argument("--resume", type=Path, metavar="RUN_DIR",
                     help="continue a stopped or killed run: its config and tape are reused, recorded calls are "
                          "free; only the length, limits and call settings may change (--steps, --max-cost, "
                          "--max-calls, --price, --concurrency, --rpm, --tpm, --api-base, --deployments, --timeout, "
                          "--retries, --json-schema, --breaker)")
    run.add_argument("--max-cost", type=_finite, help="stop cleanly once this many USD are spent")
    _price_argument(run, "needed with --max-cost")
    run.add_argument("--max-calls", type=int, help="stop cleanly after this many live LLM calls answered (a call "
                     "counts once, however many attempts its retries took; a call that failed is not counted)")
    run.add_argument("--concurrency", type=int, help="max LLM calls in flight at once (default 128: a 100-agent phase in one round)")
    run.add_argument("--rpm", type=_finite, help="at most this many requests in any 60 s, shared by the run "
                     "(each attempt, a retry too)")
    run.add_argument("--tpm", type=_finite, help="at most this many tokens in any 60 s, shared by the run "
                     "(each attempt, a retry too)")
    run.add_argument("--api-base", help="endpoint of provider models, e.g. http://127.0.0.1:8000/v1 (vLLM)")
    run.add_argument("--deployments", type=Path, metavar="FILE",
                     help="several deployments behind a model name (a pool of vLLM servers, several keys), in "
                          "litellm's model_list format; litellm's Router balances the calls over them, "
                          "with its retries and cooldowns (keys as os.environ/NAME only)")
    run.add_argument("--timeout", type=_finite, metavar="SECONDS",
                     help="per-attempt timeout of a provider's LLM call (default 30; a slow local server, e.g. "
                          "Ollama, may need more); the embedded model's calls are never cut short")
    run.add_argument("--retries", type=int, help="retries of a failed LLM call (default 1)")
    run.add_argument("--json-schema", choices=["auto", "on", "off"],
                     help="JSON-schema answers: auto (where litellm knows the model supports it, default), "
                          "on (declare the models capable, e.g. an openai/NAME behind vLLM), off")
    run.add_argument("--breaker", type=int, metavar="N",
                     help="stop (saved, resumable) after N live calls in a row fail: a provider outage "
                          "(default 5; 0: never, every failure falls back)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")

    rep = sub.add_parser("replay", help="re-run a run from its tape with zero LLM calls")
    rep.add_argument("run_dir", type=Path, help="the run directory to replay (holding config.json and tape.jsonl)")
    rep.add_argument("--out", type=Path, help="where to write the replay (default RUN_DIR/replay)")
    rep.add_argument("--check-order", action="store_true",
                     help="also replay twice with the concurrent calls finishing in other orders; fails "
                          "loudly if any frame changes (a phase that touches shared state)")
    rep.add_argument("--no-progress", action="store_true", help="no progress bar")

    models = sub.add_parser("models", help="list engines, routes and operations")
    models.add_argument("--params", metavar="ARCH", help="list an architecture's parameters (for --set)")
    models.add_argument("--probe", metavar="MODEL", help=(
        "ask MODEL one question with a JSON-schema response format and say whether to run it with "
        "--json-schema on"))
    models.add_argument("--api-base", help="the provider endpoint for --probe (vLLM, Ollama, ...)")

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

    rep2 = sub.add_parser("report", help="tidy frames of a run, a sweep or a reproduction (runs, model, agents, "
                                         "per-type, LLM calls, tables) for pandas, R or a spreadsheet")
    rep2.add_argument("path", type=Path, metavar="RUN_DIR | SWEEP_DIR | REPRODUCTION_DIR",
                      help="a run directory, a sweep directory or a reproduction's directory")
    rep2.add_argument("--out", type=Path, help="where to write the frames (default PATH/export)")
    rep2.add_argument("--format", dest="formats", choices=["parquet", "csv", "both"], default="both",
                      help="file format of the frames (default both)")

    rp = sub.add_parser("reproduce", help="run a paper's protocol: cost projected first, then the paper beside the run and its findings checked")
    rp.add_argument("arch", choices=["crsec", "asvo", "itcmas"], help="the paper's architecture")
    rp.add_argument("--model", help="litellm model string, 'local/smollm2' or 'rules' "
                                    "(default: $SOCIALSIM_MODEL, else local/smollm2)")
    rp.add_argument("--judge", help="judge model for the paper's evaluation (must differ from --model)")
    rp.add_argument("--seeds", type=int, default=3, help="seeds 1..K per arm (default 3)")
    rp.add_argument("--steps", type=int, help="override every run's length (a quick look; not the paper's protocol)")
    rp.add_argument("--yes", action="store_true", help="run whatever the projected cost (not needed when no model is asked, e.g. --model rules)")
    rp.add_argument("--max-cost", type=_finite, help="run only if the projection is under this many USD; the runs share it")
    _price_argument(rp, "projection and budget")
    rp.add_argument("--api-base", metavar="URL", help="endpoint for provider models (a vLLM or Ollama server, a proxy)")
    rp.add_argument("--deployments", type=Path, metavar="FILE",
                    help="several deployments behind a model name, balanced by litellm's Router (as in `run`)")
    rp.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                    help="a parameter for every run, e.g. --set crsec.prompt_examples=neutral (not one the "
                         "protocol's arms vary; repeatable)")
    rp.add_argument("--out", type=Path, help="output directory (default reproduce/ARCH-MODEL, plus KEY-VALUE for each --set and "
                                                 "steps-N for --steps)")
    rp.add_argument("--no-null-model", dest="null_model", action="store_false",
                    help="with a model, do not also run the protocol on the rules null model (free; it shows which "
                         "findings come out without any model's reasoning)")

    dash = sub.add_parser("dashboard", help="watch, inspect and replay a society in the browser (Solara)")
    dash.add_argument("target", nargs="?", default="hobbs-cafe", metavar="SCENARIO | RUN_DIR",
                      help="a scenario to run live, or a run directory to replay (default: hobbs-cafe)")
    dash.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1: this machine only)")
    dash.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free port, the address "
                                                             "printed names it)")
    dash.add_argument("--arch", help="architecture of a live society (default: the scenario's)")
    dash.add_argument("--model", help="model of a live society (default: $SOCIALSIM_MODEL, else local/smollm2)")
    dash.add_argument("--rng", type=int, help="seed of a live society (default 42)")
    dash.add_argument("--steps", type=int, help="where Play stops in a live society (default: the scenario's length)")
    dash.add_argument("--max-calls", type=int, help="a live society's budget of live LLM calls: Play stops when spent")
    dash.add_argument("--max-cost", type=_finite, help="a live society's budget in USD: Play stops when spent")
    _price_argument(dash, "needed with --max-cost")
    dash.add_argument("--api-base", metavar="URL", help="endpoint of a live society's provider models (vLLM, Ollama)")
    dash.add_argument("--deployments", type=Path, metavar="FILE",
                      help="a live society's deployments behind a model name (litellm's model_list format, as run's)")
    return parser


def _price_argument(parser: argparse.ArgumentParser, what_for: str) -> None:
    parser.add_argument("--price", type=_price, metavar="IN,OUT",
                        help=f"USD per 1M prompt and completion tokens, for a model litellm has no price for ({what_for})")


def _finite(text: str) -> float:
    """A number argument: ``nan`` and ``inf`` are refused (``--max-cost nan`` compared false with every
    cost, so it kept no budget at all)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expects a finite number, got {text!r}")
    return value


def _price(text: str) -> tuple[float, float]:
    """``--price IN,OUT``: two non-negative numbers of USD per 1M tokens."""
    try:
        prices = tuple(float(part) for part in text.split(","))
    except ValueError:
        prices = ()
    if len(prices) != 2 or not all(math.isfinite(p) and p >= 0 for p in prices):
        raise argparse.ArgumentTypeError(f"expects IN,OUT: two numbers >= 0 of USD per 1M tokens, e.g. 0.15,0.6; got {text!r}")
    return prices


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _sigterm_stops_like_ctrl_c() -> None:
    """A terminated run, sweep or reproduction (``kill``, a closed session) saves and reports what it
    has, as Ctrl-C does."""
    import signal

    signal.signal(signal.SIGTERM, _interrupt)


def _fail(message: str, code: int = 2) -> int:
    print(f"socialsim: error: {redact(message)}", file=sys.stderr)  # a message may quote what was given
    return code


def _run_failed(exc: RunFailed, going_on: str) -> int:
    """A run stopped by an error in the simulation: a bug, not a bad argument; said so, with where
    the run and its traceback are and how to go on once it is fixed."""
    print(f"socialsim: the run failed: {redact(exc.status)}\n  its traceback is in {exc.run_dir / 'run.log'}; "
          f"everything recorded so far is saved\n{going_on}", file=sys.stderr)
    return 1


def _problem(exc: BaseException) -> str:
    """What went wrong, in a line: a pydantic error as the fields it names (its own report would
    print every input whole), anything else as its message."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        from socialsim.scenarios.schema import field_problems

        return "; ".join(field_problems(exc))
    return str(exc)


# Arguments a resumed run takes from its config.json; giving a different value is refused. How calls
# are paced and where they are sent (--concurrency, --rpm, --tpm, --api-base) may change: the
# results depend on neither (the tape's keys hold no endpoint), and a rate-limited provider or a
# restarted server on another port is what a resume is often for.
_RESUME_FIXED = {"scenario": "scenario", "arch": "arch", "model": "model", "preset": "preset", "rng": "rng"}


def _check_run_arguments(args: argparse.Namespace) -> str | None:
    """The first out-of-range number among run's arguments, as a message; None if all are fine."""
    checks = [("--steps", args.steps, 1, "a whole number >= 1"), ("--concurrency", args.concurrency, 1, "a whole number >= 1"),
              ("--max-calls", args.max_calls, 0, "a whole number >= 0"), ("--rng", args.rng, 0, "a whole number >= 0"),
              ("--max-cost", args.max_cost, 0, "a number of USD >= 0")]
    for flag, value, low, expected in checks:
        if value is not None and value < low:
            return f"{flag} expects {expected}, got {value}"
    for flag, value in (("--retries", args.retries), ("--breaker", args.breaker)):
        if value is not None and value < 0:
            return f"{flag} expects a whole number >= 0, got {value}"
    for flag, value in (("--rpm", args.rpm), ("--tpm", args.tpm), ("--timeout", args.timeout)):
        if value is not None and value <= 0:
            return f"{flag} expects a number > 0, got {value}"
    return None


def _call_options(args: argparse.Namespace) -> dict:
    """--timeout, --retries and --json-schema as RunConfig fields (only those given)."""
    options: dict = {}
    if args.timeout is not None:
        options["timeout_s"] = args.timeout
    if args.retries is not None:
        options["num_retries"] = args.retries
    if args.json_schema:
        options["json_schema"] = {"on": True, "off": False, "auto": None}[args.json_schema]
    if args.breaker is not None:
        options["breaker"] = args.breaker
    if args.deployments is not None:
        options["deployments"] = _deployments_path(args.deployments)
    return options


def _deployments_path(given: Path | None) -> str | None:
    """--deployments FILE, checked (a bad file is refused before anything runs), as an absolute path."""
    if given is None:
        return None
    from socialsim.llm.deployments import load_deployments

    return str(load_deployments(given).path)


def _resumed_config(args: argparse.Namespace) -> tuple[RunConfig, dict]:
    """The saved config of ``--resume RUN_DIR`` with the allowed changes (refusing any other), and
    the run's whole ``config.json``."""
    from socialsim.model.run_dir import not_a_run_dir
    from socialsim.model.runner import recorded_config

    path = args.resume / "config.json"
    if not path.is_file():
        raise ValueError(f"--resume {not_a_run_dir(args.resume)}")
    try:
        meta = json.loads(path.read_text())
        saved = recorded_config(meta["config"], path)
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"--resume {args.resume}: config.json is not a run's config ({exc})") from None
    if recording := meta.get("replay_of"):
        raise ValueError(f"--resume {args.resume} is a replay of {recording}: it keeps no tape, so going on from it "
                         f"would make every call again, live; resume the recording (socialsim run --resume {recording})")
    done = meta.get("steps_done", 0)
    if args.steps is not None and args.steps < done:  # it would write the shorter run over the longer
        raise ValueError(f"--steps {args.steps} is fewer than the {done} steps {args.resume} has completed: a "
                         "resumed run only goes on (start a new run, without --resume, for a shorter one)")
    changed = [f"--{flag.replace('_', '-')} {given!r} (recorded: {getattr(saved, field)!r})"
               for flag, field in _RESUME_FIXED.items()
               if (given := getattr(args, flag)) is not None and given != getattr(saved, field)]
    changed += [f"{flag} (a resumed run keeps its recorded {what})" for flag, value, what in
                (("--route", args.route, "routes"), ("--routes", args.routes, "routes"),
                 ("--set", args.settings, "parameters"), ("--out", args.out, "directory")) if value]
    if changed:
        raise ValueError(f"--resume {args.resume} refuses changed arguments: {'; '.join(changed)}. "
                         f"Start a new run (without --resume) to change them")
    updates = {k: v for k, v in {"max_cost": args.max_cost, "max_calls": args.max_calls, "steps": args.steps,
                                 "price": args.price, "max_concurrency": args.concurrency, "rpm": args.rpm,
                                 "tpm": args.tpm, "api_base": args.api_base}.items() if v is not None}
    resumed = saved.model_copy(update=updates | _call_options(args))
    if resumed.deployments and args.deployments is None:  # the recorded file: gone or broken since?
        from socialsim.llm.deployments import load_deployments

        try:
            load_deployments(resumed.deployments)
        except ValueError as exc:
            raise ValueError(f"{exc}; `--resume {args.resume} --deployments FILE` goes on with another file") from None
    return resumed, meta


def _nothing_to_resume(run_dir: Path, meta: dict, steps: int) -> str | None:
    """What to say instead of re-running a run that has already completed ``steps`` steps."""
    if meta.get("status") == "completed" and steps <= meta.get("steps_done", 0):
        return (f"{run_dir} has already completed its {meta['steps_done']} steps: nothing to resume "
                f"(--steps N, more than {meta['steps_done']}, extends it)")
    return None


def _writable_dir(path: Path) -> None:
    """Say clearly why ``path`` cannot be a run directory; leaves nothing behind (the run creates it
    once its arguments and models are known to be good)."""
    created = next((p for p in reversed([path, *path.parents]) if not p.exists()), None)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".socialsim-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"--out {path}: cannot write there ({exc.strerror or exc})") from None
    finally:
        if created is not None and created.exists():
            shutil.rmtree(created, ignore_errors=True)


def cmd_run(args: argparse.Namespace) -> int:

    from socialsim.scenarios.loader import ScenarioError, load_scenario

    if message := _check_run_arguments(args):
        return _fail(message)
    spec = None
    if not args.resume:  # a broken scenario file is reported before the simulation's imports (0.2 s, not 1 s)
        try:
            spec = load_scenario(args.scenario or "hobbs-cafe")
        except (ScenarioError, FileNotFoundError) as exc:
            return _fail(_problem(exc))

    from socialsim.agents.params import parse_assignments
    from socialsim.llm.engines import ModelUnavailable
    from socialsim.llm.routing import RouteTable, parse_route
    from socialsim.model.run_dir import already_a_run
    from socialsim.model.runner import RunConfig, RunFailed, run

    _sigterm_stops_like_ctrl_c()  # a terminated run saves a resumable state
    try:
        if args.resume:
            config, meta = _resumed_config(args)
            out = args.resume
            if message := _nothing_to_resume(args.resume, meta, config.steps):
                print(message)
                return 0
        else:
            scenario = args.scenario or "hobbs-cafe"
            routes: dict[str, str] = {}
            default = args.model
            if args.routes:
                table = RouteTable.from_file(args.routes, default=args.model)
                routes, default = table.routes, table.default
            routes.update(dict(parse_route(r) for r in args.route))
            arch_params = parse_assignments(args.arch or spec.default_arch, args.settings)
            config = RunConfig(scenario=scenario, arch=args.arch, model=default, routes=routes,
                               steps=args.steps, preset=args.preset, rng=42 if args.rng is None else args.rng,
                               max_cost=args.max_cost, max_calls=args.max_calls,
                               rpm=args.rpm, tpm=args.tpm, api_base=args.api_base, price=args.price, arch_params=arch_params,
                               **({"max_concurrency": args.concurrency} if args.concurrency is not None else {}),
                               **_call_options(args))
            out = args.out
            if out is not None:
                if message := already_a_run(out):
                    return _fail(message)
                _writable_dir(out)
        result = run(config, out, progress=not args.no_progress)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM while the society is built or its models checked
        print("socialsim: interrupted before the run's first step; nothing was recorded", file=sys.stderr)
        return 130
    except RunFailed as exc:
        return _run_failed(exc, f"resume with: socialsim run --resume {exc.run_dir}")
    except (ScenarioError, ModelUnavailable, ValueError, FileNotFoundError) as exc:
        return _fail(_problem(exc))
    except OSError as exc:
        return _fail(f"{type(exc).__name__}: {exc}")
    print(f"run directory: {result.run_dir}")
    print(f"status: {result.status} ({result.steps_done} step{'' if result.steps_done == 1 else 's'})")
    repaired, fallback = (result.model.llm.ledger.with_status(s) for s in ("repaired", "fallback"))
    if repaired or fallback:
        # the count by operation is of both kinds: unnamed, it read as the fallbacks ("82 ... fallback (Elim 114")
        print(f"unusable answers: {repaired.total()} repaired by asking once more, {fallback.total()} answered by the "
              "operation's fallback (both, by operation: "
              + ", ".join(f"{op} {n}" for op, n in (repaired + fallback).most_common()) + "); each failure is in run.log")
    if cut := result.model.llm.ledger.truncated_by_operation():
        print(f"replies cut at max_tokens: {sum(cut.values())} ("
              + ", ".join(f"{op} {n}" for op, n in cut.most_common())
              + "); each is marked in llm_calls.parquet (truncated) and run.log")
    if result.status != "completed":  # stopped, interrupted (Ctrl-C, SIGTERM) or failed: it goes on from here
        print(f"resume with: socialsim run --resume {result.run_dir}")
    return 0 if result.status == "completed" else 3


def _not_a_replay_folder(out: Path, run_dir: Path) -> str | None:
    """Why ``replay --out`` must not write into ``out``: it is the run, or holds another run (a rules
    run has no tape, but its frames are as much a record), which the replay would replace. An
    earlier replay of this same run may be replaced."""
    from socialsim.model.run_dir import already_a_run, is_run_dir

    if out.resolve() == run_dir.resolve():
        return f"--out {out} is the run being replayed: give another --out (default RUN_DIR/replay)"
    if is_run_dir(out):
        try:
            replay_of = json.loads((out / "config.json").read_text()).get("replay_of")
        except (OSError, ValueError, AttributeError):
            replay_of = None
        if replay_of is not None and Path(replay_of).resolve() == run_dir.resolve():
            return None  # this run's own earlier replay
    return already_a_run(out)


def cmd_replay(args: argparse.Namespace) -> int:
    from socialsim.llm.tape import TapeMiss
    from socialsim.model.run_dir import is_run_dir, not_a_run_dir
    from socialsim.model.runner import check_order, first_difference, replay

    if not is_run_dir(args.run_dir):
        return _fail(not_a_run_dir(args.run_dir))
    if args.out is not None and (why := _not_a_replay_folder(args.out, args.run_dir)):
        return _fail(why)
    _sigterm_stops_like_ctrl_c()  # a terminated replay is saved as interrupted, not left "running"
    try:
        result, same = replay(args.run_dir, args.out, progress=not args.no_progress)
        order = check_order(args.run_dir) if args.check_order and same else None
    except KeyboardInterrupt:
        print("socialsim: replay interrupted; the recording is as it was: run the replay again", file=sys.stderr)
        return 130
    except (TapeMiss, ValueError) as exc:
        return _fail(f"replay failed: {exc}")
    print(f"replay directory: {result.run_dir}")
    print(f"live LLM calls: {result.model.llm.ledger.live_calls}")
    print(f"frames identical to the recording: {'yes' if same else 'NO'} (every frame and table compared)")
    if not same:
        print(f"first difference: {first_difference(args.run_dir, result.run_dir, up_to=result.steps_done)}")
    if order:
        print(f"ORDER-DEPENDENT: the results change with the order in which concurrent calls finish; "
              f"a phase reads or writes state shared between agents while it runs. First difference: {order}",
              file=sys.stderr)
        return 1
    if args.check_order and same:
        print("check-order: the same frames with the concurrent calls finishing in two other orders")
    return 0 if same else 1


def cmd_models(args: argparse.Namespace) -> int:
    from socialsim.llm.engines import describe_engines, engine_note
    from socialsim.llm.operations import all_operations
    from socialsim.llm.routing import default_model

    if args.api_base and not args.probe:  # nothing else here asks an endpoint: taken silently, it was ignored
        return _fail("--api-base is the endpoint --probe MODEL asks; give the model to probe there "
                     "(socialsim models --probe hosted_vllm/NAME --api-base URL)")
    if args.probe:
        from socialsim.llm.engines import ModelUnavailable, check_models, probe_json_schema

        try:
            check_models({args.probe}, ping=False, api_base=args.api_base)
        except ModelUnavailable as exc:
            return _fail(_problem(exc))
        if args.probe == "rules" or args.probe.startswith("local/"):
            print(f"{args.probe}: answers are constrained by the engine itself (no JSON-schema mode needed)")
            return 0
        probe = probe_json_schema(args.probe, args.api_base)
        print(f"{args.probe}: {probe.advice()}\n  ({probe.detail})")
        return 0 if probe.reached else 1
    if args.params:
        from socialsim.agents.params import parameters

        try:
            params = parameters(args.params)
        except ValueError as exc:
            return _fail(_problem(exc))
        if not params:
            print(f"{args.params} has no parameters")
            return 0
        print(f"Parameters of {args.params} (socialsim run --arch {args.params} --set {args.params}.KEY=VALUE):")
        for p in params:
            limits = f" {p.limits()}" if p.limits() else ""
            choices = f" one of {', '.join(map(str, p.choices))}" if p.choices else ""
            default = "required" if p.required else f"= {p.default!r}"  # no default: "= None" read as one
            print(f"  {p.name:24} {p.kind}{limits}{choices} {default}  {p.help}")
        return 0
    print("Engines:")
    for name, what in describe_engines():
        print(f"  {name:18} {what}")
    current = default_model(None)
    print(f"\nDefault model now: {current}")
    if note := engine_note(current):
        print(f"  note: {note}")
    from socialsim.agents import ARCHITECTURES, architectures

    print("\nArchitectures (--arch NAME; `socialsim models --params NAME` lists its parameters):")
    for name, path in architectures().items():
        print(f"  {name:12} {'' if name in ARCHITECTURES else 'installed: '}{path.replace(':', '.')}")
    print("\nOperations (route any of them, or their module, with --route NAME=MODEL):")
    for op in all_operations():
        print(f"  {op.module:12} {op.name}")
    return 0


def _sweep_interrupted(sweep_dir: Path | None, earlier: int | None = None) -> int:
    """What a Ctrl-C'd (or terminated) sweep has done, and how to go on, instead of a traceback.
    ``earlier``: when the runs table there was written before this command (an earlier grid's, which
    is not what this one did)."""
    import pandas as pd

    table = sweep_dir / "runs.parquet" if sweep_dir else None
    if table is None or not table.is_file() or _written_at(table) == earlier:
        print("socialsim: sweep interrupted before its first run", file=sys.stderr)
        return 130
    runs = pd.read_parquet(table)
    done = int((runs["status"] == "completed").sum())
    print(f"socialsim: sweep interrupted: {done} of {len(runs)} runs completed (listed in {sweep_dir / 'runs.csv'}); "
          "the same command goes on from there (completed runs are skipped, recorded calls are not paid "
          "again)", file=sys.stderr)
    return 130


def _written_at(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def cmd_sweep(args: argparse.Namespace) -> int:
    from socialsim.batch.sweepfile import SweepFileError, load_sweep
    from socialsim.llm.engines import ModelUnavailable
    from socialsim.scenarios.loader import ScenarioError

    if args.processes is not None and args.processes < 1:
        return _fail(f"--processes expects a whole number >= 1, got {args.processes}")
    logging.getLogger("distributed").setLevel(logging.WARNING)  # Dask's INFO chatter would bury the progress bar
    _sigterm_stops_like_ctrl_c()
    spec = earlier = None
    try:
        spec = load_sweep(args.sweep_file)
        earlier = _written_at((args.out or Path("sweeps") / spec.name) / "runs.parquet")
        from socialsim.batch.sweeps import sweep

        result = sweep(spec, args.out, processes=args.processes, cluster=args.cluster, scheduler=args.scheduler,
                       progress=not args.no_progress)
    except KeyboardInterrupt:
        return _sweep_interrupted(args.out or (Path("sweeps") / spec.name if spec else None), earlier)
    except (SweepFileError, ScenarioError, ModelUnavailable, ValueError) as exc:
        return _fail(_problem(exc))
    except OSError as exc:  # a file, or a Dask scheduler that cannot be reached
        return _fail(f"{type(exc).__name__}: {exc}")
    runs = result.runs
    print(f"sweep directory: {result.sweep_dir}")
    print(f"runs: {len(runs)} ({len(result.executed)} run now, {len(result.skipped)} already done, "
          f"{len(result.failed)} not completed)")
    now = runs[runs["run_id"].isin(result.executed)]  # the runs this command ran; the others were paid before
    print(f"live LLM calls answered now: {int(now['live_calls'].sum())}, live cost now: ${now['live_cost_usd'].sum():.4f}")
    if fallbacks := int(now["fallbacks"].fillna(0).sum()) if "fallbacks" in now.columns else 0:
        # as a single run's closing line: an outage shorter than the breaker's count leaves runs "completed" on them
        print(f"unusable answers in the runs made now: {fallbacks} answered by the operation's fallback (a provider "
              "error or an answer that could not be read); per run: the runs table's fallbacks and llm_failures")
    if not result.failed.empty:
        print(_not_completed(result.failed, result.sweep_dir), file=sys.stderr)
    # result.figure_problems: each was logged as a warning when its figure was drawn (the console shows it)
    if args.export:
        from socialsim.batch.exports import export

        export(result.sweep_dir)
        print(f"export: {result.sweep_dir / 'export'}")
    return 0 if result.failed.empty else 3


def _not_completed(failed: pd.DataFrame, sweep_dir: Path) -> str:
    """Why a sweep's runs did not complete (how many of each status) and how they go on: the
    line "N not completed" alone left the user to open runs.csv."""
    # "stopped by budget: max_calls=15 reached (15 live LLM calls answered, 0 in flight)": counted without the
    # run's own figures in brackets
    counts = failed["status"].fillna("no status recorded").str.split(" (", n=1, regex=False).str[0].value_counts()
    why = "; ".join(f"{n} {status}" for status, n in counts.items())
    hint = ("; a budget stopped some: raise max_cost or max_calls in the sweep file" if
            counts.index.str.startswith("stopped by budget").any() else "")
    return (f"not completed: {why} (listed in {sweep_dir / 'runs.csv'}). The same sweep command goes on with "
            f"them, their recorded calls free from the shared tape{hint}")


def cmd_report(args: argparse.Namespace) -> int:
    """The frames of what was recorded, tidy: one row per run, step, agent, agent type, call or table
    row, tagged with the run and its parameters; the runs' statuses and reports are listed."""
    from socialsim.batch.exports import export

    formats = ("parquet", "csv") if args.formats == "both" else (args.formats,)
    out = args.out or args.path / "export"
    try:
        result = export(args.path, out, formats=formats)
    except (FileNotFoundError, ValueError) as exc:
        return _fail(_problem(exc))
    except OSError as exc:
        return _fail(f"{type(exc).__name__}: {exc}")
    runs = result.runs
    statuses = runs["status"].fillna("unknown").value_counts() if "status" in runs else {}
    counted = ", ".join(f"{n} {status}" for status, n in statuses.items()) or "nothing recorded yet"
    print(f"{len(runs)} run(s): {counted}")
    for name, frame in result.frames().items():
        print(f"  {name:28} {len(frame):>8} rows")
    # a run's, a sweep's runs' or a reproduction's seeds' (not a replay's, RUN/replay/report.md); a
    # sweep's only of the runs exported (its latest grid), not those an earlier grid left on disk
    exported = set(runs["run_id"]) if "run_id" in runs else set()
    reports = [p for pattern in ("report.md", "runs/*/report.md", "*/seed-*/report.md")
               for p in sorted(args.path.glob(pattern))
               if p.parent == args.path or p.parent.name in exported
               or p.parent.relative_to(args.path).as_posix() in exported]
    for report in reports[:5]:
        print(f"report: {report}")
    print(f"frames: {out} ({', '.join(formats)})")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from socialsim.agents.params import parse_assignments
    from socialsim.llm.engines import ModelUnavailable
    from socialsim.model.reproduce import reproduce
    from socialsim.model.runner import RunFailed
    from socialsim.scenarios.loader import ScenarioError

    if args.seeds < 1:
        return _fail(f"--seeds expects a whole number >= 1, got {args.seeds}")
    if args.steps is not None and args.steps < 1:
        return _fail(f"--steps expects a whole number >= 1, got {args.steps}")
    if args.max_cost is not None and args.max_cost < 0:
        return _fail(f"--max-cost expects a number of USD >= 0, got {args.max_cost}")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        return _fail(f"--out {args.out} is a file, not a folder: give a folder for the reproduction's runs")
    _sigterm_stops_like_ctrl_c()  # a terminated reproduction stops like Ctrl-C: its runs saved, reported
    try:
        settings = parse_assignments(args.arch, args.settings)
        summary = reproduce(args.arch, args.model, seeds=args.seeds, judge=args.judge, yes=args.yes,
                            max_cost=args.max_cost, out=args.out, steps=args.steps, settings=settings,
                            null_model=args.null_model, api_base=args.api_base, unit_price=args.price,
                            deployments=_deployments_path(args.deployments))
    except KeyboardInterrupt:  # between two runs (a run itself stops cleanly and the protocol reports it)
        print("socialsim: reproduction interrupted; the same command with the same --out goes on (completed "
              "runs are kept, recorded calls are free)", file=sys.stderr)
        return 130
    except RunFailed as exc:
        return _run_failed(exc, f"the same command with the same --out goes on from {exc.run_dir}")
    except (ScenarioError, ModelUnavailable, ValueError) as exc:
        return _fail(_problem(exc))
    except OSError as exc:
        return _fail(f"{type(exc).__name__}: {exc}")
    if summary is None:
        return 4
    return 0 if summary.attrs["complete"] else 3


def cmd_dashboard(args: argparse.Namespace) -> int:
    from socialsim.dashboards.server import PortUnavailable, check_target, host_warning, port_in_use, serve
    from socialsim.scenarios.loader import ScenarioError

    if not 0 <= args.port <= 65535:  # 0: the system picks a free one as the command binds it, and names it
        return _fail(f"--port expects a port number from 0 to 65535 (0: any free port), got {args.port}")
    from socialsim.llm.engines import ModelUnavailable, check_models
    from socialsim.model.run_dir import is_run_dir

    live = {"steps": args.steps, "max_calls": args.max_calls, "max_cost": args.max_cost, "price": args.price,
            "api_base": args.api_base, "deployments": args.deployments}
    # --max-calls 0 is refused, not taken as run's "no live call": the page's box reads 0 as no limit
    for flag, value, low, expected in (("--steps", args.steps, 1, "a whole number >= 1"),
                                       ("--max-calls", args.max_calls, 1, "a whole number >= 1 (without it, no limit)"),
                                       ("--max-cost", args.max_cost, 0, "a number of USD >= 0"),
                                       ("--rng", args.rng, 0, "a whole number >= 0")):  # as run's, numpy's seeds
        if value is not None and value < low:
            return _fail(f"{flag} expects {expected}, got {value}")
    try:
        target = check_target(args.target, args.arch)
        if is_run_dir(target):  # a replay: the recording's own settings
            given = [f"--{name.replace('_', '-')}" for name, value in
                     (("model", args.model), ("rng", args.rng), ("arch", args.arch), *live.items()) if value is not None]
            if given:
                logging.getLogger("socialsim").warning("%s: of a live society; a replay of %s uses the "
                                                       "recording's", ", ".join(given), target)
            live = {}
        else:
            from socialsim.llm.routing import default_model

            if args.api_base:  # it goes into the server's environment and the page's settings
                from socialsim.llm.redact import no_credential_in_url

                no_credential_in_url(args.api_base)
            live["deployments"] = _deployments_path(args.deployments)  # a bad file is refused here, not on the page
            if args.model or args.deployments:  # the page would find an unknown model or a missing key only when
                from socialsim.llm.deployments import load_deployments  # it builds the society

                check_models({default_model(args.model)}, ping=False, api_base=args.api_base,
                             deployments=load_deployments(live["deployments"]))
            if args.max_cost is not None:  # a budget needs prices (the page checks a judge's too, on Reset)
                from socialsim.model.runner import RunConfig, check_priced

                check_priced(RunConfig(max_cost=args.max_cost, price=args.price), {default_model(args.model)})
    except (ScenarioError, ValueError, FileNotFoundError, ModelUnavailable) as exc:
        return _fail(_problem(exc))
    if busy := port_in_use(args.host, args.port):
        return _fail(busy)
    if warning := host_warning(args.host):
        logging.getLogger("socialsim").warning(warning)
    try:
        return serve(target, args.host, args.port, arch=args.arch, model=args.model,
                     seed=42 if args.rng is None else args.rng,
                     **{name: value for name, value in live.items() if value is not None})
    except PortUnavailable as exc:  # taken since the check above (the server is handed the port it binds)
        return _fail(str(exc))


class EngineNotesOnce(logging.Filter):
    """An engine's note (what `rules` or the embedded model can show) once per command on the
    console: a reproduction or a sweep starts many runs, and each run's run.log keeps its own."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        from socialsim.llm.engines import NOTES

        message = record.getMessage()
        if message not in NOTES.values():
            return True
        seen = message in self.shown
        self.shown.add(message)
        return not seen


class FailuresInBrief(logging.Filter):
    """The first few failed answers of each operation on the console (and apart, its first few replies
    cut to their length cap), then one line saying the rest go to run.log only: a weak model fails
    thousands of times in a long run, and the console is for seeing that it does (every failure
    stays in run.log, and the run's closing line counts them)."""

    SHOWN = 3

    def __init__(self) -> None:
        super().__init__()
        self.seen: Counter[str] = Counter()

    def filter(self, record: logging.LogRecord) -> bool | logging.LogRecord:
        operation = getattr(record, "operation", None)
        if operation is None:
            return True
        kind = getattr(record, "kind", "failures")  # or "cut replies": counted apart
        self.seen[f"{operation} {kind}"] += 1
        seen = self.seen[f"{operation} {kind}"]
        if seen == self.SHOWN + 1:  # a copy for the console: run.log keeps the failure itself
            return logging.makeLogRecord({**record.__dict__, "msg": "%s: more %s, in run.log only",
                                          "args": (operation, kind)})
        return seen <= self.SHOWN


def main(argv: list[str] | None = None) -> int:
    _sigterm_stops_like_ctrl_c()  # from the start: a command terminated while it imports ends as Ctrl-C does (130)
    try:  # the setting up and the reading of the arguments too: interrupted there, a line, not a traceback
        console = logging.StreamHandler()
        console.setLevel(logging.WARNING)  # a run's INFO notes (e.g. each reply cut at max_tokens) go to run.log only
        console.addFilter(EngineNotesOnce())
        console.addFilter(FailuresInBrief())
        console.addFilter(RedactingFilter())  # what the console shows, as what run.log keeps, holds no key
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", handlers=[console])
        args = _parser().parse_args(argv)
        handler = {"run": cmd_run, "replay": cmd_replay, "models": cmd_models, "sweep": cmd_sweep,
                   "reproduce": cmd_reproduce, "report": cmd_report, "dashboard": cmd_dashboard}[args.command]
        return handler(args)
    except KeyboardInterrupt:  # a command without a stop of its own (report, models --probe), or one still importing
        print("socialsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `socialsim models --params asvo | head`: the reader has all it wanted
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 0


if __name__ == "__main__":
    sys.exit(main())
