"""CRSEC end to end from the command line: the rules engine (report, tables, figure) and one tiny
run on the embedded model."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from socialsim.cli import main
from socialsim.scenarios.loader import scenario_path


def test_rules_run_writes_norm_tables_figure_and_paper_comparison(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "hobbs-cafe", "--model", "rules", "--steps", "8", "--out", str(out), "--no-progress"]) == 0
    assert "status: completed (8 steps)" in capsys.readouterr().out
    model = pd.read_parquet(out / "model.parquet")
    assert {"conflicts", "norm_thoughts", "norm_chats", "adoption[no smoking indoors]",
            "compliance[tip after meals]", "plan_compliance[be quiet in public]"} <= set(model.columns)
    changes = pd.read_parquet(out / "tables" / "norm_changes.parquet")
    assert {"created", "qualified"} <= set(changes["event"]) and set(changes["origin"]) >= {"created"}
    for table in ("conversations", "thoughts", "plans", "breaches"):
        assert (out / "tables" / f"{table}.parquet").is_file()
    report = (out / "report.md").read_text()
    assert "## CRSEC: norm emergence" in report and "| finding | paper | this run |" in report
    assert "100% of agents adopt" in report and (out / "figures" / "crsec_figure2.png").stat().st_size > 0


def test_broken_crsec_section_is_a_clear_cli_error(tmp_path, capsys):
    data = yaml.safe_load(scenario_path("hobbs-cafe").read_text())
    data["crsec"]["synthesis_threshold"] = "high"
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["run", str(path), "--model", "rules", "--steps", "1", "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 2
    assert "crsec.synthesis_threshold" in capsys.readouterr().err


def tiny_scenario(tmp_path: Path) -> Path:
    """Hobbs Cafe with one entrepreneur and one smoker (and 2 initial norms), for a fast embedded run."""
    data = yaml.safe_load(scenario_path("hobbs-cafe").read_text())
    data["agents"] = [a for a in data["agents"] if a["name"] in ("Abigail Chen", "Carlos Gomez")]
    data["crsec"]["initial_norms"] = 2
    path = tmp_path / "tiny-cafe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.embedded
def test_embedded_run_of_a_tiny_cafe(tmp_path):
    out = tmp_path / "emb"
    assert main(["run", str(tiny_scenario(tmp_path)), "--model", "local/smollm2", "--steps", "1", "--out", str(out),
                 "--no-progress"]) == 0
    calls = pd.read_parquet(out / "llm_calls.parquet")
    assert {"CreateNorm", "GenerateNormativePlans", "GenerateNormativeActions"} <= set(calls["op"])
    assert (calls["engine"] == "llm").all() and calls["calls"].sum() >= len(calls)
    assert "SmolLM2" in (out / "report.md").read_text()
