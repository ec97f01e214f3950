"""CRSEC end to end from the command line: the rules engine (report, tables, figure) and one tiny
run on the embedded model."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from socialsim.cli import main
from socialsim.scenarios.loader import scenario_path


@pytest.mark.figures
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
    assert "Engine: `rules`" in report and (out / "figures" / "crsec_figure2.png").stat().st_size > 0
    # compliance over the run (shorter than a day: its 80 minutes, so said) from the world facts, beside
    # the last hour's
    breaches = pd.read_parquet(out / "tables" / "breaches.parquet")
    smokers = breaches.loc[breaches["norm"] == "no smoking indoors", "agent"].nunique()
    assert smokers > 0 and f"{1 - smokers / 10:.0%} never breached it over the run's 1.33 hours" in report
    assert "in the last hour (" in report and "over the last day" not in report
    main(["run", "hobbs-cafe", "--model", "rules", "--steps", "3", "--out", str(tmp_path / "short"), "--no-progress"])
    short = (tmp_path / "short" / "report.md").read_text()
    assert "in the run's 30 minutes (" in short and "in the last hour" not in short


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
    data["agents"] = [a for a in data["agents"] if a["name"] in ("Francisco Lopez", "Carlos Gomez")]
    data["crsec"]["initial_norms"] = 2
    path = tmp_path / "tiny-cafe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.embedded
def test_embedded_run_of_a_tiny_cafe(tmp_path):
    """Creation and evaluation on the embedded model; the long plan records stay on rules to keep it short."""
    out = tmp_path / "emb"
    assert main(["run", str(tiny_scenario(tmp_path)), "--model", "local/smollm2", "--route", "compliance=rules",
                 "--steps", "1", "--out", str(out), "--no-progress"]) == 0
    calls = pd.read_parquet(out / "llm_calls.parquet")
    on_llm = set(calls.loc[calls["engine"] == "llm", "op"])
    assert "CreateNorm" in on_llm and "GenerateNormativePlans" not in on_llm
    matched = calls[calls["op"] == "MatchNorm"]  # measurement: the judge route (default: lexical), not the actor
    assert len(matched) > 0 and set(matched["model"]) == {"rules"}
    assert calls.loc[calls["engine"] == "llm", "calls"].sum() >= len(on_llm)
    changes = pd.read_parquet(out / "tables" / "norm_changes.parquet")
    created = changes[changes["event"] == "created"]
    assert set(created["agent"]) <= {"Francisco Lopez"} and len(created) <= 2  # at most initial_norms, valid JSON
    assert "SmolLM2" in (out / "report.md").read_text()


def crude_model(messages):
    """A provider that creates one smoking norm, plans to smoke indoors, answers every yes/no 'Yes',
    every pick-one '1' and any other record '{}' (which mostly fails validation)."""
    text = messages[-1]["content"]
    if "Yes or No" in text:
        return "Yes"
    if "number of one option" in text:
        return "1"
    if "personal norms for life in a cafe" in text:
        return '{"norms": [{"content": "Nobody may smoke indoors.", "type": "injunctive", "utility": 90}]}'
    if "today's plan" in text:
        return '{"items": [{"time": "08:00", "activity": "smoke a cigarette", "place": "Hobbs Cafe dining room"}]}'
    if "5-minute steps" in text:
        return '{"actions": ["go to Hobbs Cafe dining room", "smoke a cigarette", "smoke a cigarette"]}'
    return "{}" if "JSON object" in text else "Hello."


def test_provider_run_survives_crude_answers_and_replays_identically(tmp_path, monkeypatch):
    from socialsim.llm.fake_server import FakeOpenAIServer
    from socialsim.model.runner import RunConfig, replay, run

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=crude_model) as server:
        config = RunConfig(scenario=str(tiny_scenario(tmp_path)), arch="crsec", model="openai/fake-model", steps=2,
                           rng=4, api_base=server.api_base)
        original = run(config, tmp_path / "run", progress=False)
        assert original.status == "completed"
        ledger = original.model.llm.ledger.frame()
        ok = set(ledger.loc[ledger["status"] == "ok", "op"])
        assert {"CreateNorm", "GenerateNormativePlans", "DetectConflict", "DecideToTalk", "ConverseTurn"} <= ok
        assert "IdentifyNormFromChat" in set(ledger.loc[ledger["status"] == "fallback", "op"])
        chats = pd.read_parquet(tmp_path / "run" / "tables" / "conversations.parquet")
        assert not chats.empty and set(chats["text"]) == {"Hello."}
        result, same = replay(tmp_path / "run", progress=False)
    assert same and result.model.llm.ledger.live_calls == 0
    for table in ("norm_changes", "plans"):
        assert pd.read_parquet(result.run_dir / "tables" / f"{table}.parquet").equals(
            pd.read_parquet(tmp_path / "run" / "tables" / f"{table}.parquet"))


@pytest.mark.figures
def test_a_short_runs_figure_2_shows_its_points(tmp_path, monkeypatch):
    """One step is one point a line: without markers the figure was empty."""
    import matplotlib.pyplot as plt

    from socialsim.agents.crsec.metrics import plot_figure2
    from socialsim.model.society import SocietyModel

    kept = []
    monkeypatch.setattr(plt, "close", kept.append)
    model = SocietyModel("hobbs-cafe", arch="crsec", model="rules", rng=1)
    model.step()
    plot_figure2(model, tmp_path / "f.png")
    lines = [line for ax in kept[-1].axes for line in ax.get_lines()]
    assert lines and all(line.get_marker() in ("o", "x") and len(line.get_xdata()) == 1 for line in lines)
    acting = [line for line in lines if line.get_label().endswith("of those who acted")]
    assert len(acting) == 3 and all(line.get_linestyle() == ":" for line in acting)  # beside the other two


def test_the_last_day_is_the_scenarios_day(tmp_path):
    """84 steps (14 hours of 10 minutes) last Hobbs Cafe's 14-hour day: the window counted is the last
    day's 84 steps, and the report says "the last day", not "the run's 14 hours" (a run of a whole day
    is the shortest that says it)."""
    main(["run", "hobbs-cafe", "--model", "rules", "--steps", "84", "--out", str(tmp_path / "r"), "--no-progress"])
    report = (tmp_path / "r" / "report.md").read_text()
    assert "never breached it over the last day" in report and "over the run's" not in report


def test_the_report_gives_compliance_among_the_agents_who_acted_on_each_norm():
    """Read back by hand from the run's events and breaches tables (world facts): who did what the norm
    speaks about in the last compliance window, and who of them breached it there. Seed 3, 8 steps:
    three smoke in the window and one of them only outside; every loud one breached."""
    from socialsim.agents.crsec.metrics import findings, series
    from socialsim.model.society import SocietyModel

    model = SocietyModel("hobbs-cafe", arch="crsec", model="rules", rng=3)
    for _ in range(8):
        model.step()
    settings = model.society.settings
    first = 8 - settings.compliance_window_steps + 1
    events = model.datacollector.get_table_dataframe("events")
    events = events[(events["step"] >= first) & events["ok"]]
    breaches = model.datacollector.get_table_dataframe("breaches")
    row = next(r for r in findings(model) if r[0] == "injunctive norms at the end")[2]
    last = series(model).iloc[-1]
    for norm, tag in (("no smoking indoors", "smoke"), ("be quiet in public", "loud")):
        kind = events["tags"].str.split(",").apply(lambda tags, t=tag: t in tags)
        acted = set(events.loc[kind | events["action"].isin(settings.tracked(norm).alternatives.values()), "agent"])
        broke = set(breaches.loc[(breaches["norm"] == norm) & (breaches["step"] >= first), "agent"])
        kept = len(acted - broke) / len(acted | broke)
        assert last[f"acting_compliance[{norm}]"] == pytest.approx(kept)
        assert f"{norm}: adopted {last[f'adoption[{norm}]']:.0%}, complying {last[f'compliance[{norm}]']:.0%} " \
               f"in the last hour ({kept:.0%} of the {len(acted | broke)} agents who acted on it then)" in row
        assert last[f"compliance[{norm}]"] == pytest.approx(1 - len(broke) / len(model.agents))
    assert "no smoking indoors: adopted" in row and "(33% of the 3 agents who acted on it then)" in row
    lag = next(r for r in findings(model) if r[0] == "adoption precedes compliance")[2]
    assert "70% compliance among the agents who acted on it not within this run" in lag  # 0% to 33%
