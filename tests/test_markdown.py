"""The reports' Markdown tables: one writer, so a model's text in a cell (a norm, an action, a
name) cannot break the table it is in, and numbers look the same in every table."""

import re

import pandas as pd

from socialsim.metrics.markdown import cell, markdown_table, one_line

HOSTILE = "Be quiet | no phones\nsecond | line\r\n\tend"


def columns_of(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_a_cell_with_pipes_and_line_breaks_stays_one_cell_on_one_line():
    table = markdown_table(pd.DataFrame({"norm": [HOSTILE, "plain"], "agents": [3, 1]}))
    lines = table.split("\n")
    assert len(lines) == 4 and {columns_of(line) for line in lines} == {2}
    assert lines[2] == "| Be quiet \\| no phones second \\| line end | 3 |"
    assert lines[:2] == ["| norm | agents |", "|---|---|"]
    assert one_line(HOSTILE) == "Be quiet | no phones second | line end"


def test_numbers_missing_values_and_empty_tables():
    assert [cell(v) for v in (0.12345, 2, None, float("nan"), "x")] == ["0.123", "2", "", "", "x"]
    assert cell(0.12345, digits=2) == "0.12" and cell(0.5, digits=None) == "0.5"
    table = pd.DataFrame({"rate": [0.12345, float("nan")], "n": [3, 4]})
    assert markdown_table(table, digits=2).split("\n")[2:] == ["| 0.12 | 3 |", "|  | 4 |"]
    assert markdown_table(table).split("\n")[2] == "| 0.123 | 3 |"
    empty = pd.DataFrame(columns=["a", "b"])
    assert markdown_table(empty, empty="(nothing recorded)") == "(nothing recorded)"
    assert markdown_table(empty) == "| a | b |\n|---|---|"  # no text for an empty table: the header alone


def test_a_norm_written_with_pipes_and_line_breaks_keeps_the_crsec_report_whole(tmp_path):
    """A synthesised norm (a model's text) lands in the emergent-norms table and the norm
    databases' list; before, its ``|`` added columns and its line break ended the table."""
    from socialsim.agents.crsec.metrics import report_sections
    from socialsim.model.runner import RunConfig, run

    model = run(RunConfig(scenario="hobbs-cafe", model="rules", steps=1), tmp_path / "r", progress=False).model
    agent = sorted(model.agents, key=lambda a: a.name)[0]
    agent.norms.add(HOSTILE, 60, "injunctive", qualified=True, origin="synthesis", step=1)
    lines = report_sections(model, tmp_path / "r")
    start = lines.index("### Emergent norms (never created by an entrepreneur)")
    table = next(line for line in lines[start + 1:] if line.startswith("|")).split("\n")  # after any note
    assert {columns_of(line) for line in table} == {4}
    assert table[2].startswith("| Be quiet \\| no phones second \\| line end | 1 | synthesis |")
    listed = next(line for line in lines if line.startswith(f"- **{agent.name}**"))
    assert "Be quiet | no phones second | line end (u=60, inj)" in listed and "\n" not in listed
