"""The command line: runs, replays, lists models, and rejects bad input with clear messages."""

import contextlib
import os
import re
import signal
import sys

import pandas as pd
import pytest

from socialsim.cli import main


def test_run_and_replay_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "hobbs-cafe", "--arch", "generic", "--model", "rules", "--steps", "2", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert f"run directory: {out}" in printed and "status: completed (2 steps)" in printed
    assert "replies cut at max_tokens" not in printed  # said only when some were
    assert main(["replay", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "live LLM calls: 0" in printed and "frames identical to the recording: yes" in printed
    assert "check-order" not in printed and not (out / "check-order-1").exists()  # asked for only by --check-order
    assert main(["replay", str(out), "--out", str(tmp_path / "again"), "--no-progress"]) == 0  # where it is told
    assert f"replay directory: {tmp_path / 'again'}\n" in capsys.readouterr().out
    assert (tmp_path / "again" / "config.json").is_file()


def test_models_lists_engines_and_operations(capsys, monkeypatch):
    from socialsim.llm.engines import NOTES

    monkeypatch.setenv("SOCIALSIM_MODEL", "rules")
    assert main(["models"]) == 0
    printed = capsys.readouterr().out
    assert "local/smollm2" in printed and "rules" in printed and "ChooseAction" in printed
    assert "  rules              rule-based baseline, no language model\n" in printed
    assert ("  PROVIDER/MODEL     any litellm model string, e.g. openai/gpt-4o-mini, ollama/llama3.1, hosted_vllm/MODEL "
            "with --api-base; keys from the environment only\n") in printed
    assert f"Default model now: rules\n  note: {NOTES['rules']}\n" in printed


@pytest.mark.parametrize("also", [[], ["--params", "crsec"]])
def test_models_refuses_an_endpoint_without_a_model_to_probe_there(also, capsys):
    """``models --api-base URL`` printed the usual list and asked nothing there: the endpoint was ignored."""
    assert main(["models", *also, "--api-base", "http://127.0.0.1:9/v1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == ("socialsim: error: --api-base is the endpoint --probe MODEL asks; give the model "
                                 "to probe there (socialsim models --probe hosted_vllm/NAME --api-base URL)\n")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["run", "atlantis", "--model", "rules"], "unknown scenario 'atlantis'"),
        (["run", "--model", "nosuchprovider/x"], "unknown model 'nosuchprovider/x'"),
        (["run", "--model", "local/gpt5"], "unknown embedded model 'local/gpt5'"),
        (["run", "--model", "rules", "--route", "ChooseAction"], "--route expects OPERATION=MODEL"),
        (["run", "--model", "rules", "--arch", "wizard"], "unknown architecture 'wizard'"),
        (["run", "--model", "rules", "--preset", "marathon"], "has no preset 'marathon'"),
        (["run", "--model", "rules", "--steps", "0"], "steps"),
    ],
)
def test_bad_arguments_get_a_message_naming_them(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path / "r"), "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_replay_of_a_directory_that_is_not_a_run(tmp_path, capsys):
    assert main(["replay", str(tmp_path)]) == 2
    assert "is not a run directory" in capsys.readouterr().err


HEAVY = ("litellm", "llama_cpp", "solara")
_IMPORTS_AFTER = """
import contextlib, io, sys
from socialsim import cli
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    {action}
print(",".join(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize(
    "action",
    [
        "cli.main(['--help'])",
        "cli.main(['models'])",
        "cli.main(['models', '--params', 'crsec'])",
        "__import__('socialsim.scenarios.loader', fromlist=['x']).load_scenario('hobbs-cafe')",
    ],
)
def test_light_commands_never_import_litellm_llama_cpp_or_solara(action):
    """`--help`, `models` and scenario checks stay fast: the heavy libraries load only for a run."""
    assert _heavy_imports_after(action) == [], f"{action} imported them"


def test_python_dash_m_socialsim_is_the_same_command_line():
    import subprocess

    done = subprocess.run([sys.executable, "-m", "socialsim", "run", "--arch", "nosuch"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert (done.returncode, done.stderr.strip()) == (2, "socialsim: error: unknown architecture 'nosuch'; "
                                                         "known: asvo, crsec, generic, itcmas")


def test_a_broken_scenario_file_is_reported_before_the_simulation_s_imports(tmp_path, capsys):
    """A typo in a scenario file costs 0.2 s, not the second mesa, pandas and scipy take to import."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\nagents:\n  - name: A\n    start_area: nowhere\n")
    assert main(["run", str(broken), "--steps", "1"]) == 2
    assert "agents.0.description: Field required" in capsys.readouterr().err
    action = f"assert cli.main(['run', {str(broken)!r}]) == 2"
    assert _heavy_imports_after(action, ("mesa", "pandas", "litellm", "socialsim.model.runner")) == []


def test_a_run_on_the_rules_and_a_replay_of_a_live_run_never_import_litellm(tmp_path, monkeypatch):
    """Neither asks a provider, so neither pays litellm's import (some 4 s of CPU)."""
    from socialsim.llm.fake_server import FakeOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    live = tmp_path / "live"
    with FakeOpenAIServer() as server:
        assert main(["run", "--arch", "generic", "--model", "openai/fake-model", "--api-base", server.api_base,
                     "--steps", "1", "--out", str(live), "--no-progress"]) == 0
    rules, replayed = tmp_path / "rules", tmp_path / "replayed"
    action = (f"assert cli.main(['run', '--arch', 'generic', '--model', 'rules', '--steps', '1', '--out', {str(rules)!r}, "
              f"'--no-progress']) == 0; assert cli.main(['replay', {str(live)!r}, '--out', {str(replayed)!r}, "
              f"'--no-progress']) == 0; from socialsim.llm.gateway import Gateway; "
              f"from socialsim.llm.routing import RouteTable; Gateway(RouteTable('local/smollm2'), replay=True)")
    assert _heavy_imports_after(action) == []  # a replay of an embedded run loads no engine either
    assert (rules / "model.parquet").is_file() and (replayed / "model.parquet").is_file()


def _heavy_imports_after(action: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """Which of ``heavy`` a fresh interpreter has imported after ``action`` (Python run after ``from
    socialsim import cli``)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    code = _IMPORTS_AFTER.format(action=action, heavy=heavy)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, timeout=120)
    assert done.returncode == 0, done.stderr
    return [m for m in done.stdout.strip().splitlines()[-1:] if m]


def test_an_engine_note_is_shown_once_per_command_however_many_runs_it_starts():
    import io
    import logging

    from socialsim.cli import EngineNotesOnce
    from socialsim.llm.engines import NOTES

    shown = io.StringIO()
    console = logging.StreamHandler(shown)
    console.addFilter(EngineNotesOnce())
    log = logging.getLogger("socialsim.test-notes")
    log.addHandler(console)
    log.propagate = False
    try:
        for _ in range(3):  # three runs of a reproduction, each saying what its engine is
            log.warning(NOTES["rules"])
            log.warning("school-meso seed 1: 2 answers fell back to the rule")
    finally:
        log.removeHandler(console)
    lines = shown.getvalue().splitlines()
    assert lines.count(NOTES["rules"]) == 1
    assert lines.count("school-meso seed 1: 2 answers fell back to the rule") == 3  # other warnings all shown


@pytest.mark.parametrize(("outcome", "code"), [("complete", 0), ("stopped short", 3), ("only projected", 4)])
def test_reproduce_exit_codes_say_how_far_the_protocol_got(outcome, code, monkeypatch):
    import pandas as pd

    from socialsim.model import reproduce as rp

    def fake(*args, **kwargs):
        if outcome == "only projected":
            return None
        summary = pd.DataFrame()
        summary.attrs["complete"] = outcome == "complete"
        return summary

    monkeypatch.setattr(rp, "reproduce", fake)
    assert main(["reproduce", "crsec", "--model", "rules"]) == code


def test_a_weak_model_s_failures_show_in_brief_on_the_console_and_in_full_in_run_log(tmp_path, capsys, monkeypatch):
    """A model that answers "1" to everything fails every record; the console shows the first three
    failures of each operation and a line saying the rest are in run.log, which keeps them all, and
    the run's closing line counts the decisions repaired and fallen back."""
    import io
    import logging

    from socialsim.cli import FailuresInBrief
    from socialsim.llm.fake_server import FakeOpenAIServer

    shown = io.StringIO()
    console = logging.StreamHandler(shown)
    console.addFilter(FailuresInBrief())
    logging.getLogger().addHandler(console)
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    try:
        with FakeOpenAIServer() as server:
            assert main(["run", "hobbs-cafe", "--model", "hosted_vllm/weak", "--api-base", server.api_base,
                         "--steps", "1", "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    finally:
        logging.getLogger().removeHandler(console)
    out = capsys.readouterr().out
    closing = next(line for line in out.splitlines() if line.startswith("unusable answers:"))
    assert closing.startswith("unusable answers: 0 repaired by asking once more, 23 answered by the operation's "
                              "fallback (both, by operation: GenerateNormativePlans 10, ")
    lines = [line for line in shown.getvalue().splitlines() if "unusable answer" in line or "more failures" in line]
    plans = [line for line in lines if "GenerateNormativePlans" in line]
    assert len(plans) == 4 and plans[-1] == "GenerateNormativePlans: more failures, in run.log only"
    logged = (tmp_path / "run" / "run.log").read_text()
    assert logged.count("GenerateNormativePlans: unusable answer") == 20 and "more failures" not in logged
    first = next(line for line in logged.splitlines() if "GenerateNormativePlans: unusable answer" in line)
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING socialsim.llm: step 1 agent ", first)  # when, how grave, from where


@pytest.mark.parametrize(("argv", "message"), [
    (["--max-cost", "-1"], "--max-cost expects a number of USD >= 0, got -1.0"),  # the runs then stopped at once
    (["--max-cost", "nan"], "--max-cost: expects a finite number, got 'nan'"),  # it ran, with no budget at all
    (["--out", "{file}"], "is a file, not a folder"),  # a FileExistsError traceback
])
def test_reproduce_refuses_a_budget_or_folder_it_cannot_keep(argv, message, tmp_path, capsys, monkeypatch):
    from socialsim.model import reproduce as rp

    monkeypatch.setattr(rp, "reproduce", lambda *a, **k: pytest.fail("the protocol must not start"))
    (tmp_path / "afile").write_text("")
    with contextlib.suppress(SystemExit):  # argparse's own refusals exit 2 as well
        assert main(["reproduce", "crsec", "--model", "rules", *(a.format(file=tmp_path / "afile") for a in argv)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_reproduce_interrupted_between_runs_says_how_to_go_on(monkeypatch, capsys):
    from socialsim.model import reproduce as rp

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(rp, "reproduce", interrupted)
    assert main(["reproduce", "crsec", "--model", "rules"]) == 130
    assert "reproduction interrupted; the same command with the same --out goes on" in capsys.readouterr().err


def test_replies_cut_to_their_cap_are_shown_in_brief_apart_from_failures():
    """A verbose model's cut replies (5,803 console lines in a short ITCMA-S reproduction) went
    around the brief: they now count apart from the operation's failures."""
    import logging

    from socialsim.cli import FailuresInBrief

    brief = FailuresInBrief()

    def shown(msg, **extra):
        kept = brief.filter(logging.makeLogRecord({"msg": msg, "levelno": logging.WARNING, **extra}))
        return kept.getMessage() if isinstance(kept, logging.LogRecord) else kept

    cut = [shown(f"Elim: reply {i} cut", operation="Elim", kind="cut replies") for i in range(6)]
    assert cut == [True, True, True, "Elim: more cut replies, in run.log only", False, False]
    failed = [shown(f"Elim: unusable answer {i}", operation="Elim") for i in range(5)]
    assert failed == [True, True, True, "Elim: more failures, in run.log only", False]
    assert shown("an ordinary warning") is True


def test_an_interrupted_run_says_how_to_resume_it(tmp_path, monkeypatch, capsys):
    """A run stopped by its budget said "resume with: ..."; one stopped by Ctrl-C or SIGTERM did not."""
    from socialsim.model.society import SocietyModel

    step = SocietyModel.step

    def interrupted_in_step_2(self):
        if self.steps == 2:
            raise KeyboardInterrupt
        step(self)

    monkeypatch.setattr(SocietyModel, "step", interrupted_in_step_2)
    assert main(["run", "hobbs-cafe", "--arch", "generic", "--model", "rules", "--steps", "3",
                 "--out", str(tmp_path / "r"), "--no-progress"]) == 3
    out = capsys.readouterr().out
    assert "status: interrupted (1 step)" in out and f"resume with: socialsim run --resume {tmp_path / 'r'}" in out


@pytest.mark.parametrize("where", ["step", "end-of-run measurement"])
def test_an_interrupted_replay_says_so_and_compares_nothing(where, tmp_path, monkeypatch, capsys):
    """Ctrl-C or SIGTERM in a replay printed "frames identical to the recording: NO" with "first
    difference: None" (exit 1), or, in its report, "yes" (exit 0): a cut replay was compared whole."""
    from socialsim.model import runner
    from socialsim.model.society import SocietyModel

    assert main(["run", "hobbs-cafe", "--arch", "generic", "--model", "rules", "--steps", "2",
                 "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    capsys.readouterr()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    def terminated(*args, **kwargs):  # SIGTERM, as the replay's handler of it takes it (a replay left "running")
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)

    if where == "step":
        step = SocietyModel.step
        monkeypatch.setattr(SocietyModel, "step", lambda self: terminated() if self.steps == 1 else step(self))
    else:
        monkeypatch.setattr(runner, "write_report", interrupted)
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as a fresh process has it (the run set its own)
    try:
        assert main(["replay", str(tmp_path / "r"), "--check-order", "--no-progress"]) == 130
    finally:
        signal.signal(signal.SIGTERM, before)
    out, err = capsys.readouterr()
    assert "identical" not in out and "check-order" not in out
    assert err.endswith("socialsim: replay interrupted; the recording is as it was: run the replay again\n")
    logged = (tmp_path / "r" / "replay" / "run.log").read_text()
    assert "--resume" not in logged  # a replay has nothing to resume: it logged "resume with --resume"
    if where != "step":
        assert "interrupted in the end-of-run measurement; the replay is cut short" in logged


def test_a_run_interrupted_while_its_model_is_checked_says_so_without_a_traceback(tmp_path, monkeypatch, capsys):
    """Ctrl-C or SIGTERM before step 1 (a paid model's one-token check takes seconds) gave a
    KeyboardInterrupt traceback."""
    from socialsim.model import runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "check_models", interrupted)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnop123456")
    try:
        code = main(["run", "hobbs-cafe", "--arch", "generic", "--model", "openai/gpt-4o-mini", "--steps", "1",
                     "--no-progress"])
    except KeyboardInterrupt:  # caught here, or it would stop the whole test session
        pytest.fail("the interrupt reached the command's caller (a traceback)")
    assert code == 130
    assert capsys.readouterr().err.endswith("interrupted before the run's first step; nothing was recorded\n")
    assert not (tmp_path / "runs").exists()  # the directory claimed for it is removed


def test_a_run_interrupted_before_its_first_step_leaves_the_out_folder_given_as_it_was(tmp_path, monkeypatch, capsys):
    """Only a folder the run claimed for itself (runs/NAME) is removed: an --out folder is the user's."""
    from socialsim.model import runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "build_model", interrupted)
    (tmp_path / "mine").mkdir()
    assert main(["run", "hobbs-cafe", "--arch", "generic", "--model", "rules", "--steps", "1",
                 "--out", str(tmp_path / "mine"), "--no-progress"]) == 130
    assert capsys.readouterr().err.endswith("interrupted before the run's first step; nothing was recorded\n")
    assert (tmp_path / "mine").is_dir() and not any((tmp_path / "mine").iterdir())
    assert main(["run", "hobbs-cafe", "--arch", "generic", "--model", "rules", "--steps", "1",
                 "--out", str(tmp_path / "new"), "--no-progress"]) == 130
    assert not (tmp_path / "new").exists()  # nothing written


@pytest.mark.parametrize("argv", [["report", "{path}"], ["models", "--probe", "openai/gpt-4o-mini"]])
def test_ctrl_c_in_a_command_without_its_own_stop_ends_in_a_line_not_a_traceback(argv, tmp_path, monkeypatch, capsys):
    """Ctrl-C in `report` of a large sweep, a `models --probe` waiting on a slow server, or any command
    still importing pandas, gave a KeyboardInterrupt traceback."""
    from socialsim.batch import exports
    from socialsim.llm import engines

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(exports, "export", interrupted)
    monkeypatch.setattr(engines, "probe_json_schema", interrupted)
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    try:
        code = main([a.format(path=tmp_path) for a in argv])
    except KeyboardInterrupt:  # caught here, or it would stop the whole test session
        pytest.fail("the interrupt reached the command's caller (a traceback)")
    assert code == 130
    assert capsys.readouterr().err == "socialsim: interrupted\n"


def test_report_of_a_sweep_with_no_run_yet_says_so(tmp_path, capsys):
    """A sweep stopped before its first run: the count line ended in a bare colon."""
    (tmp_path / "s" / "runs").mkdir(parents=True)
    (tmp_path / "s" / "sweep.json").write_text('{"name": "s", "run_ids": []}')
    assert main(["report", str(tmp_path / "s")]) == 0
    assert capsys.readouterr().out.startswith("0 run(s): nothing recorded yet\n")


def test_report_of_a_sweep_names_the_reports_of_the_runs_it_exported_not_an_earlier_grid_s(tmp_path, capsys):
    """A grid edited and run into the same folder: "2 run(s)" was followed by the reports of the
    earlier grid's runs (every runs/*/report.md on disk, sorted), which the export leaves out."""
    from socialsim.batch.sweeps import sweep

    first = {"name": "g", "seeds": [1], "steps": 1,
             "parameters": {"arch": "crsec", "model": "rules", "enable_chat": [True, False]}}
    earlier = sweep(first, tmp_path / "s", progress=False)
    latest = sweep({**first, "parameters": {"arch": "crsec", "model": "rules", "enable_synthesis": [True, False]}},
                   tmp_path / "s", progress=False)
    capsys.readouterr()
    assert main(["report", str(tmp_path / "s")]) == 0
    listed = re.findall(r"^report: .*/runs/(run-\w+)/report\.md$", capsys.readouterr().out, re.M)
    assert sorted(listed) == sorted(latest.runs["run_id"])
    assert not set(listed) & set(earlier.runs["run_id"])


def test_report_writes_a_run_s_tidy_frames_and_names_its_report(tmp_path, capsys):
    """`socialsim report`, the command SPEC lists: the export of a run (per-type frame included)."""
    run_dir = tmp_path / "run"
    assert main(["run", "school-micro", "--arch", "asvo", "--model", "rules", "--steps", "2", "--out", str(run_dir),
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["replay", str(run_dir), "--no-progress"]) == 0  # its replay's report is not the run's
    capsys.readouterr()
    assert main(["report", str(run_dir), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert "replay" not in out
    assert out.startswith("1 run(s): 1 completed\n") and f"report: {run_dir / 'report.md'}" in out
    written = {p.relative_to(run_dir / "export").as_posix() for p in (run_dir / "export").rglob("*.*")}
    assert {"runs.csv", "model.csv", "agents.csv", "types.csv", "llm_calls.csv", "tables/asvo_actions.csv"} <= written
    assert not any(name.endswith(".parquet") for name in written)  # the format asked for only
    types = pd.read_csv(run_dir / "export" / "types.csv")
    assert types["n_agents"].tolist() == [2, 2] and types["step"].tolist() == [1, 2]
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "neither a run directory" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["run", "hobbs-cafe", "--arch", "crsec", "--steps", "1", "--no-progress"],
    ["reproduce", "crsec", "--seeds", "1", "--steps", "1", "--no-null-model"],
    ["reproduce", "crsec", "--seeds", "1", "--steps", "1", "--no-null-model", "--yes"]])
def test_a_budget_on_a_model_without_a_price_is_refused_alike_by_run_and_reproduce(argv, tmp_path, monkeypatch, capsys):
    """The module's exit codes: a budget that cannot be kept is a bad argument (2). A reproduction without
    --yes took it for a projection left to the user (4, "Not run ... or add --yes"), and --yes then refused it (2)."""
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    assert main([*argv, "--model", "openai/fake-model", "--api-base", "http://127.0.0.1:9/v1", "--max-cost", "5",
                 "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == ("socialsim: error: --max-cost 5 cannot be kept: openai/fake-model has no price "
                                       "in litellm's cost map; give --price IN,OUT (USD per 1M prompt and completion "
                                       "tokens)\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("when", ["cli.cmd_report = lambda args: terminate() or 0",  # in a command without a stop
                                  "real = cli._parser\ncli._parser = lambda: terminate() or real()",  # reading argv
                                  "real = cli.logging.basicConfig\n"  # setting up the console
                                  "cli.logging.basicConfig = lambda **kw: terminate() or real(**kw)"])
def test_sigterm_before_a_commands_own_stop_ends_in_a_line_and_130(tmp_path, when):
    """SIGTERM while a command was still importing (before a run, replay, sweep or reproduction set its
    own stop; any time in `report` or `models`) killed it by the default action: exit 143, no line. While
    main() set up its console or read its arguments, it raised out of main(): a traceback."""
    import subprocess
    import sys

    terminated_at_start = ("import os, signal, sys\n"
                           "from socialsim import cli\n"
                           "def terminate():\n    os.kill(os.getpid(), signal.SIGTERM)\n"
                           f"{when}\n"
                           "sys.exit(cli.main(['report', sys.argv[1]]))\n")
    done = subprocess.run([sys.executable, "-c", terminated_at_start, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr == "socialsim: interrupted\n"
