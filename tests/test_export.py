"""Exports: tidy frames of a run or a sweep, unchanged through Parquet, plus CSV; sweep figures."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.colors import to_hex as _hex
from matplotlib.colors import to_rgba

import socialsim
from socialsim.batch.exports import export, read_export
from socialsim.batch.figures import outcome_summary, plot_outcome
from socialsim.batch.sweeps import sweep
from socialsim.model.runner import RunConfig, run

SWEEP = {"name": "exp", "seeds": [1, 2],
         "parameters": {"arch": "generic", "model": "rules", "steps": [2, 3]}}


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "s"
    sweep(SWEEP, out, progress=False)
    return out


def test_sweep_export_round_trips_through_parquet_unchanged(sweep_dir, tmp_path):
    exp = socialsim.export(sweep_dir, tmp_path / "out")  # the lazy top-level name
    back = read_export(tmp_path / "out")
    assert set(back) == {"runs", "model", "agents", "types", "llm_calls", "tables/events", "tables/interactions"}
    for name, frame in exp.frames().items():
        assert len(frame) > 0, name
        pd.testing.assert_frame_equal(frame, back[name], obj=name)
        csv = pd.read_csv(tmp_path / "out" / f"{name}.csv")
        assert list(csv.columns) == list(frame.columns) and len(csv) == len(frame)


def test_export_frames_are_tidy_and_tagged(sweep_dir):
    exp = export(sweep_dir, write=False)
    assert exp.parameters == ["arch", "model", "steps"]
    for name, frame in exp.frames().items():
        assert list(frame.columns[:6]) == ["run_id", "replicate", "rng", "arch", "model", "steps"], name
    # one row per run x step, run x step x agent
    assert not exp.model.duplicated(["run_id", "step"]).any()
    assert not exp.agents.duplicated(["run_id", "step", "agent_id"]).any()
    assert exp.agents["step"].dtype == "int64" and exp.agents["step"].min() == 1
    assert len(exp.model) == 2 * (2 + 3) and len(exp.agents) == 10 * len(exp.model)
    # the ledger's model column is the model that answered, kept apart from the run's parameter
    assert set(exp.llm_calls["call_model"]) == {"rules"}
    # per-type: the share of agents whose action succeeded, from the agent rows
    share = exp.agents.groupby(["run_id", "step"])["action_ok"].mean().reset_index(drop=True)
    assert exp.types["action_ok"].tolist() == share.tolist()
    # runs: parameters, status and the last model row
    last = exp.model.sort_values("step").groupby("run_id").tail(1).set_index("run_id")["rule_decisions"]
    assert exp.runs.set_index("run_id")["rule_decisions"].to_dict() == last.to_dict()
    # the replicate is the seed's place in the sweep's seeds (1, 2), in every frame
    assert sorted(zip(exp.runs["rng"], exp.runs["replicate"], strict=True)) == [(1, 0), (1, 0), (2, 1), (2, 1)]
    assert (exp.agents["replicate"] == exp.agents["rng"] - 1).all()
    # the runs in the sweep's own runs table's order (the grid's, seeds innermost), not by run id
    assert exp.runs["run_id"].tolist() == pd.read_parquet(sweep_dir / "runs.parquet")["run_id"].tolist()
    assert exp.model["run_id"].drop_duplicates().tolist() == exp.runs["run_id"].tolist()


def test_run_directory_exports_like_a_one_run_sweep(tmp_path):
    result = run(RunConfig(arch="generic", model="rules", steps=2, rng=9), tmp_path / "run", progress=False)
    exp = export(result.run_dir)
    assert (result.run_dir / "export" / "agents.parquet").is_file()
    assert exp.runs["run_id"].tolist() == ["run"] and exp.runs["status"].tolist() == ["completed"]
    assert exp.parameters == ["scenario", "arch", "model"]
    dc = result.model.datacollector
    assert exp.model["rule_decisions"].tolist() == dc.get_model_vars_dataframe()["rule_decisions"].tolist()
    assert exp.agents["action"].tolist() == dc.get_agent_vars_dataframe()["action"].tolist()
    with pytest.raises(FileNotFoundError, match="neither a run directory"):
        export(tmp_path)


def test_the_runs_table_has_each_run_s_preset_and_steps_though_no_parameter_sets_them(tmp_path):
    """config.json has a run's preset and (resolved) steps; the runs table had neither, unless a
    sweep's parameter set them: a run of a preset could not be told from a run of the scenario."""
    paper = run(RunConfig(arch="generic", model="rules", preset="paper", steps=1, rng=9), tmp_path / "paper",
                progress=False)
    runs = export(paper.run_dir, write=False).runs
    assert runs[["preset", "steps"]].values.tolist() == [["paper", 1]]
    assert list(runs.columns).index("steps") < list(runs.columns).index("status")  # beside the parameters
    spec = {"name": "plain", "seeds": [1], "parameters": {"arch": "generic", "model": "rules"}}
    swept = sweep(spec, tmp_path / "s", progress=False).runs  # the scenario's 2 steps, no preset
    exported = export(tmp_path / "s", write=False).runs
    for table in (swept, exported, pd.read_parquet(tmp_path / "s" / "runs.parquet")):
        assert table["preset"].isna().all() and table["steps"].tolist() == [2]
    assert list(swept.columns) == list(exported.columns)
    fixed = sweep({**spec, "name": "fixed", "steps": 1, "parameters": {**spec["parameters"], "preset": "paper"}},
                  tmp_path / "f", progress=False).runs  # set by the sweep: its parameter columns, once each
    assert fixed[["preset", "steps"]].values.tolist() == [["paper", 1]]
    assert list(fixed.columns).count("steps") == list(fixed.columns).count("preset") == 1


def test_outcome_figure_shows_replicate_spread(sweep_dir, tmp_path):
    runs = export(sweep_dir, write=False).runs
    stats = outcome_summary(runs, "rule_decisions", "steps")
    assert stats["count"].tolist() == [2, 2]
    by_steps = runs.groupby("steps")["rule_decisions"]
    assert stats["mean"].tolist() == by_steps.mean().tolist()
    assert stats["min"].tolist() == by_steps.min().tolist()
    fig = plot_outcome(runs, "rule_decisions", "steps", hue="arch")
    fig.savefig(tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0
    with pytest.raises(KeyError, match="no column 'adoption'"):
        outcome_summary(runs, "adoption", "steps")


# hand-made runs: x "n" of 1 and 2, hue "chat" on and off; a failed run's outcome is not counted
HAND_RUNS = pd.DataFrame({"n": [2, 1, 2, 1, 2, 1, 1], "chat": ["on", "on", "on", "off", "off", "off", "on"],
                          "calls": [4.0, 1.0, 6.0, 0.0, 3.0, 2.0, 99.0],
                          "status": ["completed"] * 6 + ["failed"]})


def test_the_outcome_summary_is_per_x_and_hue_over_completed_runs_only():
    stats = outcome_summary(HAND_RUNS, "calls", "n", hue="chat")
    assert stats.to_dict("records") == [
        {"n": 1, "chat": "off", "mean": 1.0, "std": pytest.approx(2 ** 0.5), "min": 0.0, "max": 2.0, "count": 2},
        {"n": 1, "chat": "on", "mean": 1.0, "std": pytest.approx(float("nan"), nan_ok=True), "min": 1.0, "max": 1.0,
         "count": 1},
        {"n": 2, "chat": "off", "mean": 3.0, "std": pytest.approx(float("nan"), nan_ok=True), "min": 3.0, "max": 3.0,
         "count": 1},
        {"n": 2, "chat": "on", "mean": 5.0, "std": pytest.approx(2 ** 0.5), "min": 4.0, "max": 6.0, "count": 2}]
    by_x = outcome_summary(HAND_RUNS.drop(columns="status"), "calls", "n")  # no status: every run counts
    assert by_x[["n", "max", "count"]].to_dict("records") == [{"n": 1, "max": 99.0, "count": 4},
                                                               {"n": 2, "max": 6.0, "count": 3}]
    unknown = HAND_RUNS.assign(n=[2, None, 2, 1, 2, 1, 1])  # a run without the parameter is its own point
    assert outcome_summary(unknown, "calls", "n")["count"].tolist() == [2, 3, 1]
    for args in (("calls", "m"), ("calls", "n", "voice")):
        with pytest.raises(KeyError) as raised:
            outcome_summary(HAND_RUNS, *args)
        assert raised.value.args[0] == f"no column {args[-1]!r} in the sweep's runs; columns: n, chat, calls, status"


def test_a_batch_run_frame_is_taken_at_each_runs_last_step_whatever_its_row_order():
    """Mesa's batch_run rows are per run (``RunId``) and step (``Step``), whatever model made them; a
    frame without both is a row per run already."""
    rows = pd.DataFrame({"RunId": [1, 0, 1, 0, 0, 1], "Step": [2, 2, 1, 1, 0, 0], "n": [1] * 6,
                         "calls": [5.0, 3.0, 4.0, 2.0, 0.0, 0.0]})
    assert outcome_summary(rows, "calls", "n")[["mean", "count"]].to_dict("records") == [{"mean": 4.0, "count": 2}]
    for column in ("RunId", "Step"):
        assert outcome_summary(rows.drop(columns=column), "calls", "n")["count"].tolist() == [6]


def test_the_outcome_figure_draws_each_hues_means_spread_and_runs_side_by_side():
    fig = plot_outcome(HAND_RUNS, "calls", "n", hue="chat")
    ax, = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2"] and list(ax.get_xticks()) == [0, 1]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("n", "calls (final step)")
    assert ax.get_title() == "calls by n\nmean ± sd of 2 replicates; dots are runs"
    (off, on) = ax.containers
    assert list(off.lines[0].get_xdata()) == [-0.075, 0.925] and list(off.lines[0].get_ydata()) == [1.0, 3.0]
    assert list(on.lines[0].get_xdata()) == [0.075, 1.075] and list(on.lines[0].get_ydata()) == [1.0, 5.0]
    spread = [[tuple(map(float, point)) for point in segment] for segment in off.lines[2][0].get_segments()]
    assert spread == [[(-0.075, 1 - 2 ** 0.5), (-0.075, 1 + 2 ** 0.5)], [(0.925, 3.0), (0.925, 3.0)]]  # one run: none
    assert off.lines[0].get_marker() == "o" and len(off.lines[1]) == 2  # the means marked, the bars capped
    assert tuple(fig.get_size_inches()) == (6, 4)
    dots = [(c.get_offsets().tolist(), c.get_facecolor()[0].tolist()) for c in ax.collections if len(c.get_offsets())
            and not hasattr(c, "get_segments")]
    assert dots == [([[-0.075, 0.0], [0.925, 3.0], [-0.075, 2.0]], list(to_rgba(off.lines[0].get_color(), 0.4))),
                    ([[1.075, 4.0], [0.075, 1.0], [1.075, 6.0]], list(to_rgba(on.lines[0].get_color(), 0.4)))]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["chat=off", "chat=on"]
    plt.close(fig)


def test_the_runs_of_a_null_parameter_value_are_drawn_as_none():
    """A sweep over ``memory_embedding_model: [null, M]`` by hue drew no point for the null runs (NaN
    equals nothing: a legend entry "nan" over nothing); as x beside numbers it was not drawn at all."""
    runs = pd.DataFrame({"n": [1, 1, 2, 2], "embedding": [None, "m", None, "m"], "calls": [1.0, 2.0, 3.0, 4.0]})
    fig = plot_outcome(runs, "calls", "n", hue="embedding")
    ax, = fig.axes
    assert [list(c.lines[0].get_ydata()) for c in ax.containers] == [[2.0, 4.0], [1.0, 3.0]]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["embedding=m", "embedding=None"]
    assert sum(len(c.get_offsets()) for c in ax.collections if not hasattr(c, "get_segments")) == 4
    plt.close(fig)
    fig = plot_outcome(runs.assign(rate=[0.5, None, 0.5, None]), "calls", "rate")
    ax, = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.5", "None"]
    assert list(ax.containers[0].lines[0].get_ydata()) == [2.0, 3.0]
    plt.close(fig)


def test_an_outcome_figure_without_hue_is_one_series_and_can_be_drawn_on_given_axes():
    given = plt.figure()
    ax = given.add_subplot()
    ax.plot([0, 1], [0, 0])  # something drawn there before: the runs' dots still take their means' colour
    assert plot_outcome(HAND_RUNS, "calls", "chat", ax=ax, pooled=("n", "voice")) is given
    (series,) = ax.containers
    assert _hex(ax.collections[-1].get_facecolor()[0]) == _hex(series.lines[0].get_color()) != _hex(ax.lines[0].get_color())
    assert list(series.lines[0].get_xdata()) == [0, 1] and list(series.lines[0].get_ydata()) == [5 / 3, 11 / 3]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["mean ± sd"]
    assert ax.get_title() == "calls by chat\nmean ± sd of 3 runs pooled over n, voice; dots are runs"
    plt.close(given)
    unmarked = plot_outcome(HAND_RUNS.drop(columns="status"), "calls", "n")  # no status: every run is drawn
    assert len(unmarked.axes[0].collections[-1].get_offsets()) == 7
    plt.close(unmarked)
    none = plot_outcome(HAND_RUNS.assign(status="failed"), "calls", "n")
    assert none.axes[0].get_title() == "calls by n\nmean ± sd of 0 replicates; dots are runs"
    plt.close(none)


def test_sweep_figures_are_named_by_their_axes_and_a_bad_one_is_reported_not_raised(tmp_path, caplog, monkeypatch):
    import struct
    from types import SimpleNamespace

    from socialsim.batch import figures as batch_figures
    from socialsim.batch.figures import sweep_figures
    from socialsim.batch.sweeps import SweepResult

    drawn = []

    def plot(runs, outcome, x, hue=None, ax=None, pooled=()):
        drawn.append((outcome, x, hue, pooled))
        return plot_outcome(runs, outcome, x, hue, ax, pooled)

    monkeypatch.setattr(batch_figures, "plot_outcome", plot)
    figure = SimpleNamespace
    spec = SimpleNamespace(source="s.yaml", swept=lambda: ["n", "chat", "rate"], figures=[
        figure(outcome="calls", x="n", hue="chat"), figure(outcome="calls", x="chat", hue=None),
        figure(outcome="voice", x="n", hue="chat"), figure(outcome="chat", x="n", hue="chat"),
        figure(outcome="calls/s", x="n", hue="chat")])
    runs = HAND_RUNS.assign(**{"calls/s": HAND_RUNS["calls"] / 2})
    (tmp_path / "figures").mkdir()  # written again: the folder may be there
    open_before = plt.get_fignums()
    with caplog.at_level("WARNING", logger="socialsim.batch"):
        problems = sweep_figures(SweepResult(tmp_path, runs), spec)
    pools = "pools the runs of every rate (neither its x nor its hue): its spread mixes them"
    assert problems == [
        f"figures.0 (calls by n) {pools}", f"figures.1 (calls by chat) {pools.replace('rate', 'n, rate')}",
        f"figures.2 (voice by n) {pools}",
        "figures.2 (voice by n) not drawn: no column 'voice' in the sweep's runs; columns: n, chat, calls, status, "
        "calls/s", f"figures.3 (chat by n) {pools}", problems[5], f"figures.4 (calls/s by n) {pools}"]
    assert problems[5].startswith("figures.3 (chat by n) not drawn: ") and "mean" in problems[5]  # not a number
    assert drawn[:2] == [("calls", "n", "chat", ("rate",)), ("calls", "chat", None, ("n", "rate"))]
    assert [r.getMessage() for r in caplog.records] == [f"s.yaml: {p}" for p in problems]
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == [
        "calls-by-chat.png", "calls-by-n-and-chat.png", "calls_s-by-n-and-chat.png"]
    assert plt.get_fignums() == open_before  # each closed once written
    png = (tmp_path / "figures" / "calls-by-chat.png").read_bytes()
    assert struct.unpack(">II", png[16:24]) == (720, 480)  # 6 x 4 inches at 120 dpi


def test_sweep_file_figures_are_written(tmp_path):
    spec = {**SWEEP, "seeds": [1], "figures": [{"outcome": "rule_decisions", "x": "steps"}]}
    result = sweep(spec, tmp_path / "s", progress=False)
    assert [p.name for p in (result.sweep_dir / "figures").iterdir()] == ["rule_decisions-by-steps.png"]


def test_a_reproduction_exports_its_runs_by_arm_with_its_summary_and_findings(monkeypatch, tmp_path):
    from socialsim.model import reproduce as rp

    def toy(arch, judge=None):  # two arms of one scenario, one with a parameter the other leaves alone (a generic
        # agent has none: it refuses any)
        return rp.Protocol(
            arch="crsec", measure=lambda d: {"score": 0.0}, description="toy",
            paper=pd.DataFrame([{"label": "*", "metric": "score", "paper": 1.0}]),
            runs=[rp.ProtocolRun("plain / A", "hobbs-cafe", steps=1),
                  rp.ProtocolRun("moved: B", "hobbs-cafe", steps=2, arch_params={"enable_chat": False})],
            findings=[rp.compare("B scores above 0", ("moved: B", "score"), ">", 0.0)])

    monkeypatch.setattr(rp, "load_protocol", toy)
    rp.reproduce("crsec", "rules", seeds=2, yes=True, out=tmp_path / "r", echo=lambda line: None)
    exp = export(tmp_path / "r")
    runs = exp.runs.set_index("run_id")
    assert sorted(runs.index) == ["moved__B/seed-1", "moved__B/seed-2", "plain___A/seed-1", "plain___A/seed-2"]
    assert runs.loc["moved__B/seed-2", "arm"] == "moved: B" and runs.loc["plain___A/seed-1", "arm"] == "plain / A"
    assert runs.loc["moved__B/seed-2", ["rng", "replicate", "steps_done"]].tolist() == [2, 1, 2]
    assert "enable_chat" in exp.parameters and runs.loc["moved__B/seed-1", "enable_chat"] is False
    assert exp.model.groupby("run_id")["step"].max().to_dict() == {"moved__B/seed-1": 2, "moved__B/seed-2": 2,
                                                                  "plain___A/seed-1": 1, "plain___A/seed-2": 1}
    assert set(exp.types["arm"]) == {"plain / A", "moved: B"}
    back = read_export(tmp_path / "r" / "export")
    pd.testing.assert_frame_equal(back["findings"], pd.read_csv(tmp_path / "r" / "findings.csv"))
    assert back["findings"]["verdict"].tolist() == ["does not hold"]  # the measure gives 0: as written
    assert set(back["summary"]["label"]) == {"plain / A", "moved: B"}
    # every arm's scenario, architecture, model and preset are parameter columns, with its own parameters
    assert exp.parameters == ["scenario", "arch", "model", "preset", "enable_chat"]
    assert runs.loc["plain___A/seed-1", ["scenario", "arch", "model"]].tolist() == ["hobbs-cafe", "crsec", "rules"]
    # exported again into a folder of its own: its summary.csv is the export's, not a reproduction's
    for again in (tmp_path / "r" / "export", tmp_path / "mine", tmp_path / "mine"):
        export(tmp_path / "r", again)
    assert set(read_export(tmp_path / "mine")) == set(back)


def test_a_sweeps_export_holds_the_runs_of_its_latest_grid_not_an_earlier_one_in_the_same_folder(tmp_path, caplog):
    """A user who edits the grid and runs it into the same folder exports the runs the sweep's
    table lists; the earlier grid's runs stay on disk but are not mixed in."""
    first = {"name": "g", "seeds": [1], "steps": 1,
             "parameters": {"arch": "crsec", "model": "rules", "enable_chat": [True, False]}}
    second = {**first, "parameters": {"arch": "crsec", "model": "rules", "enable_synthesis": [True, False]}}
    earlier = sweep(first, tmp_path / "s", progress=False)
    latest = sweep(second, tmp_path / "s", progress=False)
    assert len(list((tmp_path / "s" / "runs").iterdir())) == 4
    with caplog.at_level("INFO", logger="socialsim.batch"):
        exp = export(tmp_path / "s", write=False)
    assert sorted(exp.runs["run_id"]) == sorted(latest.runs["run_id"])
    assert not set(exp.runs["run_id"]) & set(earlier.runs["run_id"])
    assert set(exp.model["run_id"]) == set(exp.agents["run_id"]) == set(latest.runs["run_id"])
    assert "2 run(s) of an earlier grid left out of the export" in caplog.text
    # the sweep-wide `steps` is a parameter column like the grid's
    assert exp.parameters == ["arch", "model", "enable_synthesis", "steps"]
    assert exp.runs["steps"].tolist() == [1, 1]
    assert sorted(exp.runs["enable_synthesis"]) == [False, True]


def test_a_sweep_folder_without_its_list_of_runs_exports_every_run_in_it(sweep_dir, tmp_path):
    """Sweep folders written before sweep.json listed its runs still export."""
    import json
    import shutil

    old = tmp_path / "old"
    shutil.copytree(sweep_dir, old)
    meta = json.loads((old / "sweep.json").read_text())
    del meta["run_ids"]
    (old / "sweep.json").write_text(json.dumps(meta))
    assert sorted(export(old, write=False).runs["run_id"]) == sorted(export(sweep_dir, write=False).runs["run_id"])


def test_a_run_directory_exports_its_scenario_and_architecture_parameters(tmp_path):
    result = run(RunConfig(scenario="makerspace", arch="crsec", model="rules", steps=1, rng=4,
                           arch_params={"enable_chat": False, "temptation": 0.25}), tmp_path / "r", progress=False)
    exp = export(result.run_dir, write=False)
    assert exp.parameters == ["scenario", "arch", "model", "enable_chat", "temptation"]
    row = exp.runs.iloc[0]
    assert (row["scenario"], row["arch"], row["model"], row["enable_chat"], row["temptation"]) == (
        "makerspace", "crsec", "rules", False, 0.25)
    assert (row["replicate"], row["rng"]) == (0, 4)  # one run: replicate 0 whatever its seed
    assert set(exp.agents["temptation"]) == {0.25}


def test_a_run_missing_one_of_its_frames_still_exports_the_others(tmp_path):
    """A run directory copied without a file (or written by an older version) is not an error."""
    result = run(RunConfig(arch="generic", model="rules", steps=1, rng=1), tmp_path / "r", progress=False)
    (result.run_dir / "llm_calls.parquet").unlink()
    exp = export(result.run_dir, write=False)
    assert exp.llm_calls.empty and len(exp.agents) == 10 and exp.runs["status"].tolist() == ["completed"]
    # a run stopped before its first step has a model frame without rows: its run row has no outcomes
    model = pd.read_parquet(result.run_dir / "model.parquet")
    model.iloc[:0].to_parquet(result.run_dir / "model.parquet")
    row = export(result.run_dir, write=False).runs.iloc[0]
    assert row["status"] == "completed" and "rule_decisions" not in row.index


def test_an_export_goes_to_a_new_nested_folder_in_the_formats_asked(sweep_dir, tmp_path):
    out = tmp_path / "a" / "b" / "export"
    export(sweep_dir, out, formats=("parquet",))
    assert (out / "runs.parquet").is_file() and (out / "tables" / "events.parquet").is_file()
    assert not list(out.rglob("*.csv"))
    with pytest.raises(ValueError, match="unknown export format"):
        export(sweep_dir, tmp_path / "x", formats=("xlsx",))


def test_the_per_type_frame_averages_every_numeric_column_and_keeps_a_run_whose_parameter_is_null(tmp_path):
    result = run(RunConfig(scenario="makerspace", arch="crsec", model="rules", steps=2, rng=4,
                           arch_params={"memory_embedding_model": None}), tmp_path / "r", progress=False)
    exp = export(result.run_dir, write=False)
    assert set(exp.agents["agent_type"]) == {"crsec"}
    # a null parameter is a group of its own, not a dropped one
    assert exp.types["memory_embedding_model"].isna().all() and len(exp.types) == 2
    by_step = exp.agents.groupby("step")
    for column in ("memories", "qualified_norms", "utility_sum", "action_ok"):
        assert exp.types[column].tolist() == by_step[column].mean().tolist(), column
    assert exp.types["n_agents"].tolist() == by_step.size().tolist() and "agent_id" not in exp.types
    assert exp.runs[["live_calls", "live_cost_usd"]].values.tolist() == [[0, 0.0]]


def test_a_killed_runs_export_holds_its_complete_steps(tmp_path):
    """A run killed with kill -9 keeps its complete steps in per-step records; the export read only
    the empty frames written before step 1."""
    from socialsim.model.steplog import StepLog, has_parts

    run_dir = run(RunConfig(scenario="hobbs-cafe", arch="generic", model="rules", steps=3), tmp_path / "r",
                  progress=False).run_dir
    model = pd.read_parquet(run_dir / "model.parquet")
    log = StepLog(run_dir, lambda frame: frame)  # as kill -9 leaves them after the second step
    for step in (1, 2):
        log.append({"model.parquet": model[model["step"] <= step]}, steps_done=step)
    model.iloc[:0].to_parquet(run_dir / "model.parquet")  # the frame written before step 1
    meta = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**meta, "status": "running", "steps_done": 2}))  # as kill -9 left it
    exported = export(run_dir, write=False)
    assert exported.model["step"].tolist() == [1, 2] and not has_parts(run_dir)
    assert exported.runs["status"].tolist() == ["killed"]  # its process is gone: not "running"


def test_a_parameter_named_like_a_recorded_column_never_replaces_it(tmp_path):
    """An ASVO sweep over ``reflection`` exported the parameter's True in place of every reflection's text."""
    result = sweep({"name": "clash", "seeds": [1], "steps": 2,
                    "parameters": {"scenario": "school-micro", "arch": "asvo", "model": "rules",
                                   "reflection": [True]}}, tmp_path / "s", progress=False)
    run_dir = tmp_path / "s" / "runs" / result.runs["run_id"].iloc[0]
    recorded = pd.read_parquet(run_dir / "tables" / "asvo_reflections.parquet")
    assert len(recorded) > 0 and recorded["reflection"].map(lambda text: isinstance(text, str) and len(text) > 5).all()
    exported = export(tmp_path / "s").tables["asvo_reflections"]
    assert exported["reflection"].tolist() == recorded["reflection"].tolist()
    assert (exported["param_reflection"] == True).all()  # noqa: E712 - the parameter, beside it
    assert "reflection" in export(tmp_path / "s").runs  # the runs table keeps the parameter's own name


def test_an_export_never_writes_into_a_run_a_sweep_or_a_reproduction(sweep_dir, tmp_path):
    """``export(RUN, SWEEP)`` (read as two paths) replaced the sweep's runs.parquet with the run's."""
    run(RunConfig(scenario="hobbs-cafe", arch="generic", model="rules", steps=1), tmp_path / "r", progress=False)
    before = (sweep_dir / "runs.parquet").read_bytes()
    for out, mark in ((sweep_dir, "sweep.json"), (tmp_path / "r", "config.json"), (tmp_path, "runs below it")):
        with pytest.raises(ValueError, match=f"export out={out} holds a run, a sweep or a reproduction \\({mark}"):
            export(tmp_path / "r", out)
    assert (sweep_dir / "runs.parquet").read_bytes() == before
    export(tmp_path / "r", tmp_path / "r" / "export")  # its own export folder, again and again
    export(tmp_path / "r", tmp_path / "r" / "export")
    for inside in (tmp_path / "r" / "tables", tmp_path / "r" / "figures" / "x", sweep_dir / "runs" / "elsewhere"):
        with pytest.raises(ValueError, match=f"export out={inside} is inside "):
            export(tmp_path / "r", inside)  # among its frames: its replay would never match again
    from socialsim.model.runner import replay

    assert replay(tmp_path / "r", progress=False)[1]
    # the nearest run around it decides, and only a run's own config.json makes one
    export(tmp_path / "r" / "replay")  # a replay's own export/, inside the run
    one = next((sweep_dir / "runs").iterdir())
    export(one)  # a sweep's run: its own export/, inside the sweep
    export(sweep_dir, one / "export")
    (tmp_path / "tool").mkdir()
    (tmp_path / "tool" / "config.json").write_text('{"editor": "vim"}')  # someone else's config.json
    export(tmp_path / "r", tmp_path / "tool" / "out")


def test_reading_back_a_folder_that_is_no_export_is_refused_and_names_the_export(sweep_dir, tmp_path):
    """A misspelt folder read as no frames at all, and a sweep as its own runs.parquet and every
    run's frames mixed with its export's."""
    for folder in (tmp_path / "nowhere", tmp_path):
        with pytest.raises(FileNotFoundError, match=f"{folder} holds no export: give the folder socialsim.export"):
            read_export(folder)
    with pytest.raises(FileNotFoundError, match=f"it is a run, a sweep or a reproduction, whose export is {sweep_dir}"):
        read_export(sweep_dir)
    export(sweep_dir, tmp_path / "out")
    assert "runs" in read_export(tmp_path / "out")


def test_a_final_model_value_named_like_a_parameter_is_kept_beside_it(tmp_path):
    run(RunConfig(scenario="hobbs-cafe", arch="generic", model="rules", steps=1), tmp_path / "r", progress=False)
    frame = pd.read_parquet(tmp_path / "r" / "model.parquet").assign(model="a reporter's value")
    frame.to_parquet(tmp_path / "r" / "model.parquet")
    runs = export(tmp_path / "r", write=False).runs
    assert runs["model"].tolist() == ["rules"] and runs["final_model"].tolist() == ["a reporter's value"]


def test_a_sweep_s_runs_table_keeps_a_final_model_value_named_like_a_parameter_as_the_export_does(tmp_path):
    """The sweep's runs.parquet dropped such a value, where the export (said to hold the same columns)
    kept it as final_NAME."""
    spec = {"name": "named", "seeds": [1], "steps": 1, "parameters": {"arch": "generic", "model": "rules"}}
    run_id = sweep(spec, tmp_path / "s", progress=False).runs["run_id"].iloc[0]
    model_file = tmp_path / "s" / "runs" / run_id / "model.parquet"
    pd.read_parquet(model_file).assign(model="a reporter's value").to_parquet(model_file)
    again = sweep(spec, tmp_path / "s", progress=False)  # done: its table read again
    for runs in (again.runs, export(tmp_path / "s", write=False).runs):
        assert runs["model"].tolist() == ["rules"] and runs["final_model"].tolist() == ["a reporter's value"]
    assert list(again.runs.columns) == list(export(tmp_path / "s", write=False).runs.columns)


def test_an_asvo_sweep_s_runs_table_and_export_carry_each_run_s_separability(tmp_path):
    """Separability is measured once, at a run's end: the ASVO vs w/o-ASVO sweep compares it only if
    the runs table and the export carry it, and its file is JSON any tool reads (null, never NaN)."""
    out = tmp_path / "s"
    sweep({"name": "sep", "seeds": [1], "steps": 3,
           "parameters": {"scenario": "school-micro", "arch": "asvo", "model": "rules", "use_svo": [True, False]}},
          out, progress=False)
    runs = pd.read_parquet(out / "runs.parquet").set_index("use_svo")
    exported = export(out, write=False).runs.set_index("use_svo")
    for use_svo in (True, False):
        run_dir = out / "runs" / runs.loc[use_svo, "run_id"]
        figures = json.loads((run_dir / "asvo_separability.json").read_text(),
                             parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
        for table in (runs, exported):
            for key in ("silhouette", "silhouette_shuffled", "svo_words_masked", "svo_is_agent", "actions"):
                value = table.loc[use_svo, f"separability_{key}"]
                assert (pd.isna(value) and figures[key] is None) or value == figures[key], (key, use_svo)
    assert runs["separability_actions"].gt(0).all()
    assert list(runs.columns) == list(exported.columns)  # the model's last row, then what was measured at the end
    assert runs["separability_svo_is_agent"].all()  # school-micro: each SVO type is one agent
    # both in the order docs/outputs.md gives: the final model values, then what was measured at the end
    assert list(exported.columns) == list(runs.columns)
    assert list(runs.columns).index("cooperation_rate") < list(runs.columns).index("separability_actions")


def test_a_run_whose_table_has_no_rows_leaves_the_identifying_columns_whole_numbers(sweep_dir, tmp_path):
    """A CRSEC run without chat has an empty interactions table: tagging its no rows made the seed,
    replicate and steps floats in every run's rows of that table (and "3.0" in its CSV)."""
    import shutil

    copy = tmp_path / "s"
    shutil.copytree(sweep_dir, copy)
    table = sorted((copy / "runs").glob("run-*/tables/interactions.parquet"))[0]
    pd.read_parquet(table).iloc[:0].astype(float).to_parquet(table)  # as a run with none writes it: float columns
    exp = export(copy, tmp_path / "out")
    interactions = exp.tables["interactions"]
    assert interactions["run_id"].nunique() == 3 and len(interactions) > 0
    for column in ("replicate", "rng", "steps"):
        assert interactions[column].dtype == exp.model[column].dtype == "int64", column
    csv = pd.read_csv(tmp_path / "out" / "tables" / "interactions.csv")
    assert csv["rng"].dtype == "int64" and csv["step"].dtype == "int64"


def test_the_runs_table_keeps_the_model_frame_s_whole_numbers(tmp_path):
    """The last model row of a run whose frame mixes counts and shares was read as one float row: the
    runs table (and its CSV) gave step 1.0 and every count as a float."""
    result = sweep({"name": "ints", "seeds": [1], "steps": 1,
                    "parameters": {"arch": "crsec", "model": "rules"}}, tmp_path / "s", progress=False)
    exp = export(tmp_path / "s", tmp_path / "out")
    assert exp.model["adoption[no smoking indoors]"].dtype == "float64"  # the frame is not all whole numbers
    for runs in (result.runs, pd.read_parquet(tmp_path / "s" / "runs.parquet"), exp.runs):
        for column in ("step", "rule_decisions", "conflicts_total", "adoption[no smoking indoors]"):
            assert runs[column].dtype == exp.model[column].dtype, column
    assert pd.read_csv(tmp_path / "out" / "runs.csv")["rule_decisions"].dtype == "int64"


def test_a_rules_runs_ledger_holds_seconds_and_dollars_as_floats_like_a_models_run(sweep_dir):
    """A rules decision makes no round-trip: its latency and cost were the int 0, so a rules run's
    llm_calls.parquet had int64 columns where a model's run has float64 (one schema per file, not two)."""
    for ledger in sorted((sweep_dir / "runs").glob("run-*/llm_calls.parquet")):
        frame = pd.read_parquet(ledger)
        assert set(frame["engine"]) == {"rules"}
        assert frame["latency_s"].dtype == frame["cost_usd"].dtype == "float64", ledger
