"""The run's report (report.md) and the guard around an end-of-run measurement, from a short rules
run with hand-made ledger rows: the title, status and usage lines, the usage table, engine notes,
the architecture's sections, the figures (drawn, or left out for a sweep's run), the interaction
counts and the calls per step; a measurement not started, stopped or replayed to where it stopped.
Written for the survivors of mutmut's run on ``metrics/report.py`` (docs/testing.md)."""

import logging

import matplotlib.pyplot as plt
import pytest

from socialsim.agents.generic import GenerativeAgent
from socialsim.llm.ledger import BudgetExhausted, LedgerRow
from socialsim.llm.tape import TapeMiss
from socialsim.metrics import report
from socialsim.model.society import SocietyModel


def cafe(steps=2):
    model = SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=1)
    for _ in range(steps):
        model.step()
    return model


def llm_row(step, calls, op="ChooseAction", cost=0.0, tokens=(10, 2), status="ok"):
    return LedgerRow(step=step, agent=1, op=op, module="action", model="openai/fake", engine="llm", status=status,
                     calls=calls, live_calls=calls, prompt_tokens=tokens[0], completion_tokens=tokens[1],
                     latency_s=0.0, cost_usd=cost)


def lines_of(path):
    return path.read_text(encoding="utf-8").splitlines()


# --- report.md ------------------------------------------------------------------------------------------


@pytest.mark.figures
def test_the_report_says_the_runs_title_status_steps_agents_notes_and_usage(tmp_path):
    model = cafe()
    n = len(model.agents)
    model.llm.ledger.record(llm_row(1, 3, cost=0.0123456789, tokens=(100, 7)))
    model.llm.ledger.record(llm_row(2, 2, status="fallback"))
    model.llm.ledger.record(llm_row(3, 4, op="Reflect"))  # the step cut short: not a completed one
    path = report.write_report(model, tmp_path, "completed", ["One note.", "Another."])
    assert path == tmp_path / "report.md"
    text = lines_of(path)
    rules = model.llm.ledger.totals()["rule_decisions"]
    assert text[:12] == [
        "# Hobbs Cafe (Smallville) — generic",
        "",
        f"Status: completed. Steps completed: 2. Agents: {n}.",
        "",
        "> **Engine note.** One note.",
        "",
        "> **Engine note.** Another.",
        "",
        "## LLM usage",
        "",
        f"LLM calls: 9 ({5 / (n * 2):.2f} per agent-step; 4 in the step cut short), rule decisions: {rules}, "
        "prompt tokens: 120, completion tokens: 11, cost: $0.0123, failures: 0, fallbacks: 1.",
        "",
    ]
    table = text[12:text.index("## Figures") - 1]
    assert table[0] == ("| module | op | model | decisions | calls | prompt_tokens | completion_tokens | cost_usd "
                        "| repaired | fallbacks | truncated |")
    choose = next(line for line in table if "| ChooseAction | openai/fake |" in line)
    assert choose == "| action | ChooseAction | openai/fake | 2 | 5 | 110 | 9 | 0.012346 | 0 | 1 | 0 |"
    assert text[-2:] == ["![interactions](figures/interactions.png)", "![LLM usage](figures/llm_usage.png)"]
    for name in ("interactions.png", "llm_usage.png"):
        assert (tmp_path / "figures" / name).read_bytes().startswith(b"\x89PNG")


def test_a_run_without_a_title_is_named_by_its_scenario_and_without_calls_in_a_cut_step_says_none(tmp_path):
    model = cafe(steps=1)
    model.scenario_spec.title = ""
    model.llm.ledger.record(llm_row(1, 2))
    text = lines_of(report.write_report(model, tmp_path, "interrupted", []))
    assert text[0] == "# hobbs-cafe — generic"
    assert text[2] == f"Status: interrupted. Steps completed: 1. Agents: {len(model.agents)}."
    assert text[4] == "## LLM usage"  # no engine note
    assert text[6].startswith(f"LLM calls: 2 ({2 / len(model.agents):.2f} per agent-step), rule decisions: ")


def test_the_calls_per_agent_step_are_over_the_completed_agent_steps_and_never_over_zero(tmp_path):
    model = cafe(steps=0)
    model.llm.ledger.record(llm_row(1, 3))
    (tmp_path / "none").mkdir()
    (tmp_path / "one").mkdir()
    text = lines_of(report.write_report(model, tmp_path / "none", "stopped by budget", []))
    assert "Steps completed: 0." in text[2]
    assert text[6].startswith("LLM calls: 3 (0.00 per agent-step; 3 in the step cut short), ")
    model = cafe(steps=1)
    for agent in list(model.agents)[1:]:
        agent.remove()  # one agent, one step: one agent-step
    model.llm.ledger.record(llm_row(1, 3))
    text = lines_of(report.write_report(model, tmp_path / "one", "completed", []))
    assert text[2] == "Status: completed. Steps completed: 1. Agents: 1."
    assert text[6].startswith("LLM calls: 3 (3.00 per agent-step), ")


@pytest.mark.figures
def test_a_run_cut_short_in_its_first_step_links_no_usage_figure_it_has_not_drawn(tmp_path):
    """Ctrl-C in an embedded run's first step left a link to a missing figures/llm_usage.png."""
    model = cafe(steps=0)
    model.llm.ledger.record(llm_row(1, 3))
    text = lines_of(report.write_report(model, tmp_path, "interrupted", []))
    assert not (tmp_path / "figures" / "llm_usage.png").exists()
    assert text[-2:] == ["![interactions](figures/interactions.png)",
                         "(No figure of LLM usage per step: no step completed.)"]
    assert (tmp_path / "figures" / "interactions.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.figures
def test_the_architectures_sections_come_after_the_figures_and_before_them_their_measurements_status(
        tmp_path, monkeypatch):
    """The sections are written first: a measurement the budget stops there turns the status."""
    model = cafe()

    def sections(cls, m, run_dir):
        assert run_dir == tmp_path
        m.measurement_stopped = "stopped by budget in the end-of-run measurement (x): spent"
        return ["## Mine", "", "One line.\n![mine](figures/mine.png)"]

    monkeypatch.setattr(GenerativeAgent, "report_sections", classmethod(sections), raising=False)
    text = lines_of(report.write_report(model, tmp_path, "completed", []))
    assert text[2].startswith("Status: stopped by budget in the end-of-run measurement (x): spent. Steps completed: 2.")
    at = text.index("![LLM usage](figures/llm_usage.png)")
    assert text[at + 1:] == ["", "## Mine", "", "One line.", "![mine](figures/mine.png)"]


@pytest.mark.figures
def test_a_sweeps_run_links_no_figure_and_says_where_their_data_are(tmp_path, monkeypatch):
    model = cafe()
    monkeypatch.setattr(GenerativeAgent, "report_sections",
                        classmethod(lambda cls, m, d: ["## Mine", "Kept.\n![mine](figures/mine.png)\n"
                                                       "not a link: ![x](figures/x.png) here"]), raising=False)
    with report.without_figures():
        assert not report.figures_drawn()
        text = lines_of(report.write_report(model, tmp_path, "completed", []))
    assert report.figures_drawn()
    at = text.index("## Figures")
    assert text[at:] == ["## Figures", "",
                         "Not drawn for a sweep's runs (the data they show are in the frames and tables).",
                         "", "## Mine", "Kept.", "not a link: ![x](figures/x.png) here"]
    assert not (tmp_path / "figures").exists()  # nor an empty folder


def test_the_report_keeps_a_models_words_but_not_their_control_characters(tmp_path):
    model = cafe(steps=1)
    text = lines_of(report.write_report(model, tmp_path, "completed", ["a \x1b[31mred\x1b[0m note"]))
    assert text[4] == "> **Engine note.** a [31mred[0m note"


def test_usage_without_any_operation_says_so():
    model = SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=1)
    assert report.usage_markdown(model) == "(no operations were asked)"


# --- figures ---------------------------------------------------------------------------------------------


@pytest.fixture
def closed(monkeypatch):
    """The figures the report closes (drawn, not shown)."""
    kept = []
    monkeypatch.setattr(plt, "close", kept.append)
    return kept


@pytest.mark.figures
def test_the_interaction_matrix_counts_initiator_by_receiver_in_agent_order(tmp_path, closed):
    model = SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=1)
    agents = sorted(model.agents, key=lambda a: a.unique_id)
    a, b, c = (x.name for x in agents[:3])
    for initiator, receiver in [(a, b), (a, b), (a, b), (c, a)]:
        model.record_interaction(initiator, receiver, "chat", "hi")
    matrix = report.interaction_matrix(model)
    assert list(matrix.index) == list(matrix.columns) == [x.name for x in agents]
    assert (matrix.loc[a, b], matrix.loc[b, a], matrix.loc[c, a], int(matrix.values.sum())) == (3, 0, 1, 4)
    assert all(str(t) == "int64" for t in matrix.dtypes)
    report.plot_interactions(model, tmp_path / "i.png")
    ax = closed[-1].axes[0]
    image = ax.get_images()[0]
    assert image.get_clim() == (0, 3) and image.get_cmap().name == "Blues"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("receiver", "initiator")
    assert [t.get_text() for t in ax.get_xticklabels()] == [x.name for x in agents]
    assert [t.get_text() for t in ax.get_yticklabels()] == [x.name for x in agents]
    assert (tmp_path / "i.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.figures
def test_the_usage_figure_shows_calls_and_rule_decisions_per_step_not_their_running_totals(tmp_path, closed):
    model = cafe(steps=3)
    frame = model.datacollector.get_model_vars_dataframe()
    report.plot_usage(model, tmp_path / "u.png")
    ax = closed[-1].axes[0]
    lines = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    totals = list(frame["rule_decisions"])
    assert lines["rule_decisions"] == [totals[0], totals[1] - totals[0], totals[2] - totals[1]]
    assert lines["llm_calls"] == [0, 0, 0]
    assert list(ax.get_lines()[0].get_xdata()) == [1, 2, 3] and {line.get_marker() for line in ax.get_lines()} == {"o"}
    assert (ax.get_ylabel(), ax.get_title()) == ("per step", "LLM calls and rule decisions")
    assert (tmp_path / "u.png").is_file()


@pytest.mark.figures
def test_no_figure_is_drawn_for_a_sweeps_run_or_a_run_with_no_step(tmp_path, closed):
    model = cafe(steps=1)
    with report.without_figures():
        report.plot_usage(model, tmp_path / "u.png")
        report.plot_interactions(model, tmp_path / "i.png")
    report.plot_usage(cafe(steps=0), tmp_path / "none.png")
    assert not closed and not list(tmp_path.iterdir())
    report.plot_usage(model, tmp_path / "drawn.png")  # the same run's, outside the switch: drawn here
    assert (tmp_path / "drawn.png").exists()


# --- the end-of-run measurement --------------------------------------------------------------------------


def test_a_run_cut_short_asks_no_measurement_and_keeps_its_own_status():
    model = cafe(steps=1)
    model.run_cut_short = "stopped by budget: max_calls=3 reached"
    asked = []
    assert report.end_of_run_measurement(model, "the judge", lambda: asked.append(1)) is None
    assert not asked
    assert model.measurement_stopped == ("the run stopped before its last step (stopped by budget: max_calls=3 "
                                         "reached); the --resume that completes it measures the judge")
    assert report.run_status(model, "completed") == "completed"  # a replay of its steps
    assert report.run_status(model, "stopped by budget") == "stopped by budget"


def test_a_measurement_stopped_turns_a_completed_run_only():
    model = cafe(steps=1)
    assert report.run_status(model, "completed") == "completed"
    model.measurement_stopped = "stopped by budget in the end-of-run measurement (x): spent"
    assert report.run_status(model, "completed") == model.measurement_stopped
    assert report.run_status(model, "interrupted") == "interrupted"


def test_a_replay_stops_its_measurement_where_the_recording_did_and_a_miss_elsewhere_raises():
    model = cafe(steps=1)

    def miss():
        raise TapeMiss("no such call")

    with pytest.raises(TapeMiss):
        report.end_of_run_measurement(model, "the judge", miss)
    model.measurement_cut = "stopped by provider outage in the end-of-run measurement (the judge): down"
    assert report.end_of_run_measurement(model, "the judge", miss) is None
    assert model.measurement_stopped == model.measurement_cut
    model.measurement_cut = "interrupted (Ctrl-C)"
    assert report.end_of_run_measurement(model, "the judge", miss) is None
    assert model.measurement_stopped == ("stopped where the recording did, in its end-of-run measurement "
                                         "(recorded status: interrupted (Ctrl-C))")


def test_a_budget_stop_in_the_measurement_is_logged_with_the_way_to_resume(caplog):
    model = cafe(steps=1)

    def spent():
        raise BudgetExhausted("max_calls=3 reached")

    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert report.end_of_run_measurement(model, "the judge", spent) is None
    assert [r.getMessage() for r in caplog.records] == [
        "stopped by budget in the end-of-run measurement (the judge): max_calls=3 reached; everything recorded "
        "so far is saved; resume with --resume"]


def test_only_the_tests_marked_figures_draw_a_runs_figures():
    """tests/conftest.py runs every test without report figures unless it is marked ``figures`` (the
    tests that look at a figure, or at the report's link to one, are)."""
    assert not report.figures_drawn()


@pytest.mark.figures
def test_a_test_marked_figures_draws_them():
    assert report.figures_drawn()
