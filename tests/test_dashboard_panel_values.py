"""The values the dashboard's panels compute, on small hand-made frames: the colour ramp's ends and
midpoint, ITCMA-S's matrix ranks, ASVO's theory-of-mind rows, an agent's own series and CRSEC's norm
provenance, and the charts' data and encodings. A panel that shows the wrong agent's row, rank or
step, or a chart that plots the wrong field or scale, fails here (the browser tests only see that
something is drawn)."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

from socialsim.dashboards import charts, panels

FAKE_KEY = "sk-" + "test1234567890" + "abcdef1234"  # a key's shape, for the redaction checks (no real key)


def frames(agents: pd.DataFrame | None = None, **tables: pd.DataFrame) -> panels.Frames:
    return panels.Frames(scenario="s", arch="a", engines=[], model=pd.DataFrame({"step": [1, 2, 3]}),
                         agents=agents if agents is not None else pd.DataFrame(columns=["step", "AgentID", "name"]),
                         tables=tables, calls=pd.DataFrame(), failures={}, names=["Ann", "Bob"], descriptions={})


@pytest.mark.parametrize(("value", "colour"), [
    (-1.0, "#d62728"), (-5.0, "#d62728"),  # the low end, and below it clipped to it: red
    (0.0, "#bdbdbd"),  # the middle: grey
    (1.0, "#2ca02c"), (9.0, "#2ca02c"),  # the high end, and above it: green
    (-0.5, "#d67272"), (0.5, "#74ae74"),  # a quarter and three quarters of the way
])
def test_the_ramp_runs_from_red_through_grey_to_green(value, colour):
    assert panels._ramp(value, -1.0, 1.0) == colour


def test_a_ramp_over_no_range_is_its_middle():
    assert panels._ramp(3.0, 2.0, 2.0) == panels._ramp(0.0, -1.0, 1.0) == "#bdbdbd"


def test_pleasure_colours_each_agent_by_its_own_latest_row():
    agents = pd.DataFrame({"step": [1, 1, 2, 2], "AgentID": [1, 2, 1, 2], "name": ["Ann", "Bob", "Ann", "Bob"],
                           "P": [1.0, -1.0, -1.0, None]})
    colours, legend = panels.agent_colours(frames(agents), 2, "emotion (pleasure)")
    assert colours == {"Ann": "#d62728", "Bob": "#bdbdbd"}  # step 2's values; none recorded: neutral
    assert panels.agent_colours(frames(agents), 1, "emotion (pleasure)")[0] == {"Ann": "#2ca02c", "Bob": "#d62728"}
    assert legend == {"unpleasant (P=-1)": "#d62728", "neutral": "#bdbdbd", "pleasant (P=+1)": "#2ca02c"}


def test_matrix_ranks_list_each_run_s_agents_in_rank_order_with_what_moved():
    matrix = pd.DataFrame({"step": [5, 10], "ranking": ["Bob,Ann", "Ann,Bob"],
                           "deltas": [json.dumps({"Ann": -0.2, "Bob": 0.2}), {"Ann": 0.2, "Bob": -0.2}],
                           "resources": [json.dumps({"Ann": 0.8, "Bob": 1.2}), json.dumps({"Ann": 1.0, "Bob": 1.0})]})
    ranks = panels.matrix_ranks(frames(matrix=matrix), 10)
    assert ranks.to_dict("records") == [
        {"step": 5, "agent": "Bob", "rank": 1, "change": 0.2, "resources": 1.2},
        {"step": 5, "agent": "Ann", "rank": 2, "change": -0.2, "resources": 0.8},
        {"step": 10, "agent": "Ann", "rank": 1, "change": 0.2, "resources": 1.0},
        {"step": 10, "agent": "Bob", "rank": 2, "change": -0.2, "resources": 1.0}]
    assert panels.matrix_ranks(frames(matrix=matrix), 9)["step"].tolist() == [5, 5]  # not yet the second run
    assert list(panels.matrix_ranks(frames(), 10).columns) == ["step", "agent", "rank", "change", "resources"]


def test_theory_of_mind_rows_leave_out_fallbacks_and_keep_the_belief_replaced():
    table = pd.DataFrame({"step": [1, 1, 2], "observer": ["Ann", "Ann", "Bob"], "target": ["Bob", "Bob", "Ann"],
                          "desire": ["social", "rest", "social"], "predicted": ["7", 3, 5], "true": [6, 3, 9],
                          "error": [1, 0, 4], "prior": [5, 5, 5], "prior_error": [1, 2, 4],
                          "status": ["ok", "fallback", "ok"]})
    rows = panels.tom_predictions(frames(asvo_predictions=table), 2)
    assert rows[["step", "observer", "desire", "predicted", "prior"]].to_dict("records") == [
        {"step": 1, "observer": "Ann", "desire": "social", "predicted": 7, "prior": 5},
        {"step": 2, "observer": "Bob", "desire": "social", "predicted": 5, "prior": 5}]
    assert panels.tom_predictions(frames(asvo_predictions=table), 1)["step"].tolist() == [1]
    old = table.drop(columns=["prior", "prior_error", "status"])  # recorded before the prior was kept
    rows = panels.tom_predictions(frames(asvo_predictions=old), 2)
    assert len(rows) == 3 and rows["prior"].isna().all() and list(rows.columns) == [
        "step", "observer", "target", "desire", "predicted", "true", "error", "prior", "prior_error"]


def test_an_agent_s_series_are_its_own_rows_up_to_the_step():
    agents = pd.DataFrame({"step": [1, 1, 2, 2, 3, 3], "AgentID": [1, 2] * 3, "name": ["Ann", "Bob"] * 3,
                           "desire_social_need": [1, 9, 2, 8, 3, 7], "desire_rest": [None] * 6,
                           "P": [0.1, 0.9, 0.2, 0.8, 0.3, 0.7], "D": [0.0] * 6, "driver": [None] * 6,
                           "memory_count": [1, 5, 2, 6, 3, 7], "action_ok": [True] * 6, "x": [0] * 6})
    series = panels.agent_series(frames(agents), 2, "Bob")
    assert list(series) == ["Desires of Bob", "Emotion and resources of Bob", "Recorded values of Bob"]
    desires = series["Desires of Bob"]
    assert desires.index.tolist() == [1, 2] and desires.iloc[:, 0].tolist() == [9, 8]  # Bob's, to step 2
    assert desires.shape[1] == 1 and desires.columns[0] == panels.desire_label("desire_social_need")
    assert series["Emotion and resources of Bob"].to_dict("list") == {"P": [0.9, 0.8], "D": [0.0, 0.0]}  # no empty driver
    assert series["Recorded values of Bob"].to_dict("list") == {"memory_count": [5, 6]}  # no flag, no position
    assert panels.agent_series(frames(), 2, "Bob") == {}


def test_norm_provenance_shows_each_norm_s_latest_state_the_step_it_entered_and_its_source():
    changes = pd.DataFrame({
        "step": [1, 2, 3, 3], "agent": ["Bob", "Bob", "Ann", "Bob"], "norm_id": [1, 1, 1, 2],
        "content": ["No smoking", "No smoking", "Tip", "Be quiet"], "state": ["candidate", "qualified", "qualified",
                                                                                "candidate"],
        "type": ["injunctive"] * 4, "utility": [60, 70, 50, 40], "origin": ["conversation", "conversation", "created",
                                                                          "thought"],
        "source": ["Ann: \"please don't\"", None, "", f"I saw him shout; key {FAKE_KEY}"]})
    rows = panels.norm_provenance(frames(norm_changes=changes), 3)
    assert list(rows.columns) == panels.NORM_PROVENANCE_COLUMNS and rows.index.tolist() == [0, 1, 2]
    assert rows[["agent", "id", "state", "utility", "since"]].to_dict("records") == [
        {"agent": "Ann", "id": 1, "state": "qualified", "utility": 50, "since": 3},
        {"agent": "Bob", "id": 1, "state": "qualified", "utility": 70, "since": 1},
        {"agent": "Bob", "id": 2, "state": "candidate", "utility": 40, "since": 3}]
    assert rows["source"].tolist()[:2] == ["", ""]  # the latest row's source (none), never a float NaN
    assert rows["source"].iloc[2].startswith("I saw him shout") and "sk-test" not in rows["source"].iloc[2]
    early = panels.norm_provenance(frames(norm_changes=changes), 2, agent="Bob")
    assert early[["id", "state"]].to_dict("records") == [{"id": 1, "state": "qualified"}]
    assert list(panels.norm_provenance(frames(), 3).columns) == panels.NORM_PROVENANCE_COLUMNS


def test_a_value_recorded_as_json_text_or_a_dict_is_read_as_a_dict():
    assert panels._as_dict('{"a": 1}') == {"a": 1} == panels._as_dict({"a": 1})
    assert panels._as_dict("not json") == {} and panels._as_dict(None) == {}
    assert panels._as_dict(float("nan")) == {} and not math.isnan(len(panels._as_dict("[1, 2]")))


def calls() -> pd.DataFrame:
    """A ledger of five decisions over two steps and one end-of-run call (step 3 of a 2-step run)."""
    return pd.DataFrame({
        "step": [1, 1, 2, 2, 2, 3], "module": ["plan", "plan", "plan", "talk", "talk", "judge"],
        "op": ["Choose", "Choose", "Choose", "Say", "Say", "Judge"],
        "model": ["m", "m", "m", "rules", "m", "j"], "engine": ["llm", "llm", "llm", "rules", "llm", "llm"],
        "calls": [1, 2, 1, 0, 1, 1], "prompt_tokens": [10, 20, 10, 0, 5, 7], "completion_tokens": [1, 2, 1, 0, 3, 4],
        "cost_usd": [0.001, 0.002, 0.0010004, 0.0, 0.0005, 0.01],
        "status": ["ok", "repaired", "fallback", "rules", "ok", "ok"], "truncated": [0, 1, 0, 0, 1, 0],
        "error": [None, "bad json", "", None, "timeout", None]})


def test_the_usage_table_sums_each_operation_s_decisions_calls_tokens_and_failures_up_to_the_step():
    f = frames()
    f.calls = calls()
    f.model = pd.DataFrame({"step": [1, 2]})
    first = panels.usage_table(f, 1)
    assert first.to_dict("records") == [
        {"module": "plan", "op": "Choose", "model": "m", "decisions": 2, "llm_calls": 3, "prompt_tokens": 30,
         "completion_tokens": 3, "cost_usd": 0.003, "repaired": 1, "fallbacks": 0, "truncated": 1, "failures": 1}]
    last = panels.usage_table(f, 2).set_index(["op", "model"])  # the last step: every call, the judge's too
    assert last.loc[("Choose", "m"), ["decisions", "llm_calls", "fallbacks", "failures"]].tolist() == [3, 4, 1, 1]
    assert last.loc[("Choose", "m"), "cost_usd"] == 0.004  # rounded to 6 places
    assert last.loc[("Say", "rules"), ["decisions", "llm_calls", "failures"]].tolist() == [1, 0, 0]
    assert last.loc[("Say", "m"), ["failures", "truncated"]].tolist() == [1, 1]
    assert last.loc[("Judge", "j"), "llm_calls"] == 1
    f.failures = {"Choose": 5}  # the ledger's own count (repairs' failed first answers too) wins when higher
    assert panels.usage_table(f, 2).set_index("op").loc["Say", "failures"].tolist() == [1, 0]  # m, rules
    assert panels.usage_table(f, 2).set_index("op").loc["Choose", "failures"] == 5
    assert panels.usage_table(f, 1).set_index("op").loc["Choose", "failures"] == 1  # not at an earlier step
    totals = panels.usage_totals(f, 2)
    assert totals == {"decisions": 6, "llm_calls": 6, "prompt_tokens": 52, "completion_tokens": 11,
                      "cost_usd": 0.0145, "repaired": 1, "fallbacks": 1, "truncated": 2, "failures": 6}
    assert list(panels.usage_table(frames(), 2).columns) == panels.USAGE_COLUMNS


def test_svo_area_and_norm_colourings_follow_each_agent_s_latest_row():
    agents = pd.DataFrame({"step": [1, 1, 2, 2], "AgentID": [1, 2, 1, 2], "name": ["Ann", "Bob", "Ann", "Bob"],
                           "svo": ["competitive", "altruistic", "competitive", "nihilist"],
                           "area": ["cafe", "park", "park", "park"], "qualified_norms": [0, 1, 2, None]})
    f = frames(agents)
    f.areas = [{"name": "cafe"}, {"name": "park"}, {"name": "shop"}]
    assert panels.colour_modes(f) == ["area", "SVO", panels.QUALIFIED_NORMS]
    colours, legend = panels.agent_colours(f, 2, "SVO")
    assert colours == {"Ann": "#e53935", "Bob": "#9e9e9e"}  # an unknown type: grey
    assert legend == {"competitive": "#e53935", "nihilist": "#9e9e9e"}
    colours, legend = panels.agent_colours(f, 1, "area")
    assert colours == {"Ann": panels.PALETTE[0], "Bob": panels.PALETTE[1]} and list(legend) == ["cafe", "park"]
    assert panels.agent_colours(f, 2, "area")[1] == {"park": panels.PALETTE[1]}  # only the areas someone is in
    colours, legend = panels.agent_colours(f, 2, panels.QUALIFIED_NORMS)
    assert colours == {"Ann": "#2ca02c", "Bob": "#d62728"}  # the most held (2) green, none red
    assert legend == {"no qualified norm": "#d62728", "2 qualified norms": "#2ca02c"}
    colours, legend = panels.agent_colours(frames(), 0, "agent")  # nothing recorded: one colour each
    assert colours == {"Ann": panels.PALETTE[0], "Bob": panels.PALETTE[1]} and legend == {}
    assert panels.colour_modes(frames()) == ["agent"]


@pytest.mark.parametrize(("arch", "tables", "view"), [
    ("itcmas", {}, "itcmas"), ("x", {"matrix": pd.DataFrame()}, "itcmas"),
    ("asvo", {}, "asvo"), ("x", {"asvo_predictions": pd.DataFrame()}, "asvo"),
    ("crsec", {}, "crsec"), ("x", {"norm_changes": pd.DataFrame()}, "crsec"),
    ("generic", {}, "generic"), ("tidy", {"events": pd.DataFrame()}, "generic")])
def test_each_architecture_gets_its_own_view(arch, tables, view):
    f = frames(**tables)
    f.arch = arch
    assert panels.architecture_view(f) == view


def test_agents_are_spread_over_their_area_s_cells_in_name_order():
    agents = pd.DataFrame({"step": [1] * 4, "AgentID": [1, 2, 3, 4], "name": ["Dee", "Ann", "Cy", "Bob"],
                           "area": ["hall", "hall", "hall", "nowhere"]})
    f = frames(agents)
    f.areas = [{"name": "hall", "x": 10, "y": 0, "width": 4, "height": 5}]
    assert panels.map_positions(f, 1) == {"Ann": (10.5, 4.5), "Cy": (12.5, 4.5), "Dee": (10.5, 2.5)}
    f.areas = [{"name": "hall", "x": 0, "y": 0, "width": 2, "height": 2}]  # no room for gaps: every cell
    assert panels.map_positions(f, 1) == {"Ann": (0.5, 1.5), "Cy": (1.5, 1.5), "Dee": (0.5, 0.5)}
    f.areas = []
    assert panels.map_positions(f, 1) == {}


def test_time_series_draw_per_step_usage_groups_means_and_every_other_number_up_to_the_step():
    f = frames(pd.DataFrame({"step": [1, 1, 2, 2], "AgentID": [1, 2, 1, 2], "name": ["Ann", "Bob", "Ann", "Bob"],
                             "desire_rest": [2, 4, 6, None], "P": [0.5, -0.5, 1.0, 0.0], "driver": [1, 2, 3, 4]}))
    f.model = pd.DataFrame({"step": [1, 2, 3], "llm_calls": [4, 10, 10], "rule_decisions": [0, 1, 3],
                            "adoption[tip]": [0.0, 0.5, 1.0], "conflicts": [2, 0, 1], "conflicts_total": [2, 2, 3],
                            "tidy_steps": [1, 2, 3], "flag": [True, False, True],
                            "topics": [{"cafe": 0.5}, '{"cafe": 0.25, "park": -1}', {}]})
    series = panels.time_series(f, 2)
    assert series["LLM decisions per step"].to_dict("list") == {"llm_calls": [4, 6], "rule_decisions": [0, 1]}
    assert series["Norm adoption (share of agents)"].to_dict("list") == {"adoption[tip]": [0.0, 0.5]}
    assert series["Conflicts and norm events"].to_dict("list") == {"conflicts": [2, 0]}
    assert series["Conflicts and norm events so far (running totals)"].to_dict("list") == {"conflicts_total": [2, 2]}
    assert series[panels.OTHER_TITLE].to_dict("list") == {"tidy_steps": [1, 2]}  # not the flag, not a grouped one
    topics = series[panels.TOPIC_TITLE]
    assert topics["cafe"].tolist() == [0.5, 0.25] and pd.isna(topics["park"].iloc[0]) and topics["park"].iloc[1] == -1
    assert series["Desires (mean over agents)"].iloc[:, 0].tolist() == [3.0, 6.0]  # Bob's missing value left out
    assert series["Emotion P/A/D (mean over agents)"].to_dict("list") == {"P": [0.0, 0.5]}
    assert series["Driver (per agent)"].to_dict("list") == {"Ann": [1, 3], "Bob": [2, 4]}
    assert panels.time_series(f)["LLM decisions per step"]["llm_calls"].tolist() == [4, 6, 0]  # to the last step


def test_the_report_tab_inlines_only_the_run_s_own_figures_and_redacts(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    run = tmp_path / "run"
    (run / "figures").mkdir(parents=True)
    (run / "figures" / "a.png").write_bytes(b"\x89PNG fake")
    (tmp_path / "secret.png").write_bytes(b"not the run's")
    (run / "report.md").write_text(f"key {FAKE_KEY}\n![a](figures/a.png)\n"
                                   "![b](figures/../../secret.png)\n![c](figures/none.png)\n", encoding="utf-8")
    shown = panels.run_report(run).splitlines()
    assert "sk-test" not in shown[0]
    assert shown[1] == "![a](data:image/png;base64,iVBORyBmYWtl)"
    assert shown[2:] == ["*(b: figure not found)*", "*(c: figure not found)*"]  # nothing outside figures/ read


def test_a_norm_s_judged_reading_is_the_judge_s_else_the_matcher_s_and_none_for_no_match_or_its_opposite():
    matches = pd.DataFrame({"step": [1, 1, 1, 1, 2], "agent": ["Ann", "Ann", "Ann", "Bob", "Ann"],
                            "norm_id": [1, 2, 3, 1, 4],
                            "judged": ["no smoking", None, "none of these", "tipping", "the opposite of: tipping"],
                            "lexical": ["tipping", "tipping", "no smoking", "x", "tipping"]})
    f = frames(norm_matches=matches)
    assert panels._judged_readings(f, "Ann", 1) == {1: "no smoking", 2: "tipping", 3: ""}
    assert panels._judged_readings(f, "Ann", 2)[4] == ""


def test_a_link_in_an_agent_s_or_a_model_s_words_is_shown_as_text_never_followed(tmp_path):
    """Markdown renders [x](javascript:...) as a live link: an action or a norm an LLM wrote, quoted in
    the report's tables, would run on the dashboard's page with a click."""
    import markdown

    run = tmp_path / "run"
    (run / "figures").mkdir(parents=True)
    (run / "figures" / "a.png").write_bytes(b"png")
    (run / "report.md").write_text(
        "| Sam | [win](javascript:alert(1)) |\n![x](javascript:alert(2))\n[ref]: javascript:alert(3)\n[ref]\n"
        "<javascript:alert(4)>\n![a](figures/a.png)\n", encoding="utf-8")
    html = markdown.markdown(panels.run_report(run))
    assert "javascript" in html and 'href="javascript' not in html and 'src="javascript' not in html
    assert "<a " not in html and html.count("<img ") == 1 and 'src="data:image/png;base64,' in html


def test_each_engine_note_names_its_model_a_provider_s_too():
    """The usage panel shows one note per model the run used: a provider's read only "a provider
    model reached through litellm", so a run routed to two providers showed two notes naming neither."""
    f = frames()
    f.engines = ["openai/gpt-4o-mini", "rules", "vllm/qwen"]
    notes = panels.engine_notes(f)
    assert [engine for engine, _ in notes] == f.engines
    assert all(note.startswith(engine + " ") for engine, note in notes)
    assert notes[0][1] == "openai/gpt-4o-mini is a provider model reached through litellm"


def test_the_event_log_lists_every_kind_of_event_exactly_newest_first():
    events = pd.DataFrame({"step": [1, 1, 2], "agent": ["Ann", "Bob", "Ann"], "verb": ["chat with", "use", "use"],
                           "action": ["chat with Bob", "use stove", "use bed"], "ok": [True, False, True],
                           "reason": ["", "it is broken", ""]})
    f = frames(events=events,
               thoughts=pd.DataFrame({"step": [2], "agent": ["Bob"], "thought": ["I should tip"]}),
               conversations=pd.DataFrame({"step": [1, 2], "sender": ["Ann", "Bob"], "receiver": ["Bob", "Ann"],
                                           "speaker": ["Ann", "Ann"], "text": ["hi", "not heard"],
                                           "heard": [True, False]}),
               filtered_actions=pd.DataFrame({"step": [2], "agent": ["Bob"], "action": ["shout"]}),
               norm_changes=pd.DataFrame({"step": [3], "agent": ["Ann"], "norm_id": [4], "event": ["adopted"],
                                          "state": ["qualified"], "content": ["Tip after meals"]}),
               breaches=pd.DataFrame({"step": [3], "agent": ["Bob"], "behaviour": ["smoke"], "area": ["cafe"],
                                      "norm": ["no smoking"]}),
               asvo_reflections=pd.DataFrame({"step": [3], "agent": ["Cy"], "desire": ["rest"],
                                              "reflection": ["I rested"]}))
    log = panels.event_log(f, 3)
    assert log.to_dict("records") == [
        {"step": 3, "kind": "norm change", "agent": "Ann", "text": "norm 4 adopted [qualified]: Tip after meals"},
        {"step": 3, "kind": "norm breach", "agent": "Bob", "text": "smoke in cafe breaks 'no smoking'"},
        {"step": 3, "kind": "thought", "agent": "Cy", "text": "on rest: I rested"},
        {"step": 2, "kind": "action", "agent": "Ann", "text": "use bed"},
        {"step": 2, "kind": "thought", "agent": "Bob", "text": "I should tip"},
        {"step": 2, "kind": "unheard chat", "agent": "Ann", "text": "to Bob: not heard"},  # the other party
        {"step": 2, "kind": "filtered action", "agent": "Bob", "text": "shout"},
        {"step": 1, "kind": "chat", "agent": "Ann", "text": "chat with Bob"},  # the heard line, once (an event)
        {"step": 1, "kind": "refused", "agent": "Bob", "text": "use stove (refused: it is broken)"}]
    assert panels.event_log(f, 1)["step"].tolist() == [1, 1]
    assert panels.event_log(f, 3, kinds=["thought"])["agent"].tolist() == ["Cy", "Bob"]
    assert panels.event_log(f, 3, agent="Bob")["kind"].tolist() == ["norm breach", "thought", "filtered action",
                                                                    "refused"]
    assert panels.event_log(f, 3, text="TIP")["kind"].tolist() == ["norm change", "thought"]  # any case
    assert panels.event_log(f, 3, text="cy")["agent"].tolist() == ["Cy"]  # or the agent's name
    assert panels.event_kinds(f) == ["action", "chat", "filtered action", "norm breach", "norm change", "refused",
                                     "thought", "unheard chat"]


def test_an_itcmas_attempt_that_failed_for_want_of_resources_is_in_the_event_log():
    """A failed attempt never reaches the world, so only ITCMA-S's own table holds it: the log showed
    the thought announcing it and then nothing."""
    actions = pd.DataFrame({"step": [1, 1, 2, 2], "agent": ["SG", "WL", "SG", "AY"],
                            "action": ["use bed 3", "use chair 8", "use bed 3",
                                       "(This action has been filtered by LTRHA) take food"],
                            "status": ["failed", "done", "refused", "filtered"],
                            "reason": ["not enough resources: the attempt failed", "", "WL is not here", ""]})
    f = frames(itcmas_actions=actions)
    assert panels.event_log(f, 2).to_dict("records") == [
        {"step": 1, "kind": "failed action", "agent": "SG",
         "text": "use bed 3 (failed: not enough resources: the attempt failed)"}]
    assert panels.event_kinds(f) == ["failed action"]


def test_without_world_events_the_log_reads_actions_and_thoughts_from_the_agents_frame():
    agents = pd.DataFrame({"step": [1, 1, 2], "AgentID": [1, 2, 1], "name": ["Ann", "Bob", "Ann"],
                           "action": ["help Bob", "", "share lunch"], "thought": ["", "hm", None]})
    f = frames(agents, conversations=pd.DataFrame({"step": [1], "sender": ["Ann"], "receiver": ["Bob"],
                                                   "text": ["hello"]}))
    assert panels.event_log(f, 2).to_dict("records") == [
        {"step": 2, "kind": "action", "agent": "Ann", "text": "share lunch"},
        {"step": 1, "kind": "chat", "agent": "Ann", "text": "to Bob: hello"},  # no events: the conversation itself
        {"step": 1, "kind": "action", "agent": "Ann", "text": "help Bob"},
        {"step": 1, "kind": "thought", "agent": "Bob", "text": "hm"}]


def test_the_inspector_shows_the_agent_s_own_row_thought_outcome_memory_and_answers_at_the_step():
    agents = pd.DataFrame({"step": [1, 1, 2, 2], "AgentID": [1, 2, 1, 2], "name": ["Ann", "Bob", "Ann", "Bob"],
                           "svo": ["prosocial", "competitive", "prosocial", "competitive"],
                           "desire_rest": [3.0, 9.0, 4.5, 8.0], "P": [0.1, 0.2, 0.25, 0.3], "A": [None] * 4,
                           "resources": [1.0, 2.0, 1.5, 2.0], "area": ["cafe", "park", "park", "park"],
                           "action": ["use stove", "use bed", "use bed", None], "action_ok": [False, True, True, None]})
    events = pd.DataFrame({"step": [1, 2], "agent": ["Ann", "Ann"], "verb": ["use", "use"],
                           "action": ["use stove", "use bed"], "ok": [False, True], "reason": ["it is broken", ""]})
    f = frames(agents, events=events,
               thoughts=pd.DataFrame({"step": [1, 2], "agent": ["Ann", "Bob"], "thought": ["tired", "smug"]}))
    f.descriptions = {"Ann": "a cook"}
    f.tape = [{"agent": 1, "step": 1, "op": "Choose", "raw": "use stove"}, {"agent": 1, "step": 2, "op": "X", "raw": "-"},
              {"agent": 2, "step": 1, "op": "Choose", "raw": "use bed"}]
    f.model = pd.DataFrame({"step": [1, 2]})
    first = panels.inspect_agent(f, "Ann", 1)
    assert first == {"name": "Ann", "description": "a cook", "svo": "prosocial", "desires": {
        panels.desire_label("desire_rest"): 3.0}, "emotions": {"P": 0.1}, "resources": 1.0, "area": "cafe",
        "last_thought": "tired", "last_action": "use stove", "outcome": "refused: it is broken",
        "memory": ["[step 1] refused: use stove (refused: it is broken)", "[step 1] thought: tired"],
        "llm_exchanges": [{"op": "Choose", "answer": "use stove"}]}
    later = panels.inspect_agent(f, "Ann", 2)
    assert (later["area"], later["outcome"], later["last_thought"], later["desires"]) == (
        "park", "ok", "tired", {panels.desire_label("desire_rest"): 4.5})
    assert later["memory"][0] == "[step 2] action: use bed" and later["llm_exchanges"] == [{"op": "X", "answer": "-"}]
    f.live = {"Ann": {"memory": ["a live memory"], "area": ""}}  # at the last step, what the live agent holds
    assert panels.inspect_agent(f, "Ann", 2)["memory"] == ["a live memory"]
    assert panels.inspect_agent(f, "Ann", 2)["area"] == "park"  # an empty live value never replaces a recorded one
    assert panels.inspect_agent(f, "Ann", 1)["memory"] != ["a live memory"]  # not at an earlier step
    bob = panels.inspect_agent(f, "Bob", 2)
    assert "last_action" not in bob and "outcome" not in bob and bob["last_thought"] == "smug"
    assert panels.inspect_agent(f, "Nobody", 2)["memory"] == []


def test_the_inspector_cuts_an_answer_after_its_key_is_redacted():
    """Cut first, a key across the 300th character kept its first part ("sk-te"), too short to be found as a key."""
    f = frames(pd.DataFrame({"step": [1], "AgentID": [1], "name": ["Ann"]}))
    f.tape = [{"agent": 1, "step": 1, "op": "Choose", "raw": "x" * 294 + " " + FAKE_KEY},
              {"agent": 1, "step": 1, "op": "Talk", "raw": f"said {FAKE_KEY} once"}]
    assert panels.inspect_agent(f, "Ann", 1)["llm_exchanges"] == [
        {"op": "Choose", "answer": "x" * 294 + " "},  # the marker across the cut left out whole
        {"op": "Talk", "answer": "said [REDACTED] once"}]


# --- the charts: which rows they plot, on which fields and scales ---------------------------------------


def _rows(spec: dict, field: str) -> list[dict]:
    """The rows of the one data set whose rows have ``field``."""
    [rows] = [data for data in spec["datasets"].values() if data and field in data[0]]
    return rows


def _fields(encoding: dict) -> dict:
    """Each channel's field and type, and the tooltip's fields in order."""
    shown = {k: (v["field"], v["type"]) for k, v in encoding.items() if isinstance(v, dict) and "field" in v}
    return {**shown, "tooltip": [t["field"] for t in encoding.get("tooltip", [])]}


def _drawn_offline_with_keys(spec: dict, encoding: dict, axes: tuple[str, ...] = ("x", "y")) -> None:
    """Drawn without vega-embed's menu (its links leave the machine), with a colour legend (the
    legend is what one clicks to pick a series), named axes, and the series not picked faded."""
    assert spec["usermeta"] == charts.EMBED
    assert encoding["color"].get("legend", {}) is not None
    assert all(encoding[axis].get("axis", {}) is not None for axis in axes)
    if "opacity" in encoding:
        assert encoding["opacity"]["condition"]["value"] > encoding["opacity"]["value"]


def test_a_series_chart_plots_each_recorded_value_as_step_series_value_over_the_steps_so_far():
    wide = pd.DataFrame({"calls": [2.0, None, 5.0], 7: [0.5, 0.25, None]}, index=pd.Index([1, 2, 3], name="x"))
    spec = charts.series_chart("Calls per step", wide, 3)
    assert spec["datasets"][charts.SERIES] == [  # no row where nothing was recorded; every name a string
        {"step": 1, "series": "calls", "value": 2.0}, {"step": 3, "series": "calls", "value": 5.0},
        {"step": 1, "series": "7", "value": 0.5}, {"step": 2, "series": "7", "value": 0.25}]
    assert spec["encoding"]["x"]["scale"]["domain"] == [0.5, 3.5]
    assert _fields(spec["encoding"]) == {"x": ("step", "quantitative"), "y": ("value", "quantitative"),
                                         "color": ("series", "nominal"), "tooltip": ["series", "step", "value"]}
    assert spec["params"][0]["select"]["fields"] == ["series"] and spec["params"][0]["bind"] == "legend"
    _drawn_offline_with_keys(spec, spec["encoding"])
    assert charts.series_chart("Calls per step", wide.iloc[:0], 0)["encoding"]["x"]["scale"]["domain"] == [0.5, 1.5]
    assert charts.series_chart("Calls per step", wide, 3)["datasets"][charts.SERIES] == spec["datasets"][charts.SERIES]


def test_the_heat_map_puts_initiators_on_rows_receivers_on_columns_in_the_matrix_s_order():
    matrix = pd.DataFrame([[0, 3, 0], [1, 0, 0], [0, 2, 0]], index=["Cy", "Ann", "Bob"], columns=["Cy", "Ann", "Bob"])
    spec = charts.heatmap_chart(matrix, 4).to_dict()
    cells = {(c["initiator"], c["receiver"]): c["interactions"] for c in _rows(spec, "interactions")}
    assert cells == {(a, b): int(matrix.loc[a, b]) for a in matrix.index for b in matrix.columns}
    assert cells["Cy", "Ann"] == 3 and cells["Ann", "Cy"] == 1  # who started it, not who was spoken to
    assert _fields(spec["encoding"]) == {"x": ("receiver", "nominal"), "y": ("initiator", "nominal"),
                                         "color": ("interactions", "quantitative"),
                                         "tooltip": ["initiator", "receiver", "interactions"]}
    assert spec["encoding"]["x"]["sort"] == spec["encoding"]["y"]["sort"] == ["Cy", "Ann", "Bob"]
    assert spec["encoding"]["color"]["scale"]["domain"] == [0, 3]
    assert spec["title"] == "interactions up to step 4 (6 in all)"
    _drawn_offline_with_keys(spec, spec["encoding"])
    empty = charts.heatmap_chart(pd.DataFrame(dtype=int), 0).to_dict()  # before anyone is known
    assert empty["encoding"]["color"]["scale"]["domain"] == [0, 1] and empty["title"].endswith("(0 in all)")


def test_the_rank_chart_draws_each_agent_s_rank_with_first_at_the_top_over_the_steps_so_far():
    ranks = pd.DataFrame({"step": [5, 5], "agent": ["Bob", "Ann"], "rank": [1, 2], "change": [0.2, -0.2],
                          "resources": [1.2, 0.8]})
    spec = charts.rank_chart(ranks, 7).to_dict()
    assert _rows(spec, "rank") == ranks.to_dict("records")
    assert spec["mark"] == {"type": "line", "point": True}  # one run so far: only its points show
    assert _fields(spec["encoding"]) == {"x": ("step", "quantitative"), "y": ("rank", "quantitative"),
                                         "color": ("agent", "nominal"),
                                         "tooltip": ["agent", "step", "rank", "change", "resources"]}
    assert spec["encoding"]["x"]["scale"]["domain"] == [0.5, 7.5]
    assert charts.rank_chart(ranks, 0).to_dict()["encoding"]["x"]["scale"]["domain"] == [0.5, 1.5]
    y = spec["encoding"]["y"]["scale"]
    assert y["reverse"] is True and y["zero"] is False and y["domainMin"] == 1  # rank 1 at the top, no rank 0
    assert spec["params"][0]["select"]["fields"] == ["agent"] and spec["params"][0]["bind"] == "legend"
    assert spec["encoding"]["opacity"]["condition"]["param"] == spec["params"][0]["name"]
    _drawn_offline_with_keys(spec, spec["encoding"])


def test_the_theory_of_mind_chart_puts_each_prediction_against_its_truth_beside_the_diagonal():
    tom = pd.DataFrame({"step": [1, 2], "observer": ["Ann", "Bob"], "target": ["Bob", "Ann"],
                        "desire": ["comfort", "joy"], "predicted": [3.0, 9.0], "true": [5.0, 8.0],
                        "error": [2.0, 1.0], "prior": [4.0, 7.0], "prior_error": [1.0, 1.0]})
    spec = charts.tom_chart(tom).to_dict()
    diagonal, points = spec["layer"]
    assert _rows(spec, "observer") == tom.to_dict("records")
    assert sorted((r["true"], r["predicted"]) for r in spec["datasets"][diagonal["data"]["name"]]) == [(0, 0), (10, 10)]
    assert _fields(diagonal["encoding"]) == {"x": ("true", "quantitative"), "y": ("predicted", "quantitative"),
                                             "tooltip": []}
    assert _fields(points["encoding"]) == {
        "x": ("true", "quantitative"), "y": ("predicted", "quantitative"), "color": ("desire", "nominal"),
        "tooltip": ["step", "observer", "target", "desire", "predicted", "true", "error", "prior", "prior_error"]}
    assert points["encoding"]["x"]["scale"]["domain"] == points["encoding"]["y"]["scale"]["domain"] == [0, 10]
    assert spec["params"][0]["select"]["fields"] == ["desire"] and spec["params"][0]["bind"] == "legend"
    assert points["encoding"]["opacity"]["condition"]["param"] == spec["params"][0]["name"]
    _drawn_offline_with_keys(spec, points["encoding"], axes=())
    assert points["encoding"]["x"].get("title") and points["encoding"]["y"].get("title")  # which axis is the truth


def _map_frames() -> panels.Frames:
    agents = pd.DataFrame({"step": [1] * 3, "AgentID": [1, 2, 3], "name": ["Cy Lee", "Ann Ray", "Bob Sun"],
                           "area": ["hall", "hall", "yard"]})
    f = frames(agents)
    f.names = ["Ann Ray", "Bob Sun", "Cy Lee"]
    f.areas = [{"name": "hall", "kind": "inside", "x": 0, "y": 0, "width": 4, "height": 1},
               {"name": "yard", "kind": "outside", "x": 0, "y": 1, "width": 4, "height": 1}]
    f.furniture = []
    return f


def test_the_map_shows_each_agent_at_its_position_with_its_first_name_area_and_colour():
    f = _map_frames()
    spec = charts.map_chart(f, 1, {"Ann Ray": "#111111", "Cy Lee": "#222222"}, "area")
    rows = spec["datasets"][charts.AGENTS]
    assert [(r["agent"], r["label"], r["area"], r["colour"]) for r in rows] == [
        ("Ann Ray", "Ann", "hall", "#111111"), ("Bob Sun", "Bob", "yard", "#9e9e9e"),  # no colour: grey
        ("Cy Lee", "Cy", "hall", "#222222")]
    positions = panels.map_positions(f, 1)
    assert {r["agent"]: (r["x"], r["y"]) for r in rows} == positions
    assert spec["title"] == "map (step 1, coloured by area)" and spec["usermeta"] == charts.EMBED
    dots, labels = [layer for layer in spec["layer"] if layer.get("data") == {"name": charts.AGENTS}]
    assert dots["mark"]["type"] == "circle" and "transform" not in dots
    assert _fields(dots["encoding"]) == {"x": ("x", "quantitative"), "y": ("y", "quantitative"),
                                         "color": ("colour", "nominal"), "tooltip": ["agent", "area"]}
    assert dots["encoding"]["color"]["scale"] is None  # the colours as given, not a palette of their own
    assert _fields(labels["encoding"]) == {"x": ("x", "quantitative"), "y": ("ty", "quantitative"),
                                           "text": ("label", "nominal"), "tooltip": []}
    assert charts.map_chart(f, 0, {}, "area")["datasets"][charts.AGENTS] == []  # nobody placed yet: no dots
    f.live = {"Ann Ray": {"area": "yard"}}  # before the first step, where the live agents stand
    f.agents = f.agents.iloc[:0]
    [ann] = charts.map_chart(f, 0, {}, "area")["datasets"][charts.AGENTS]
    assert (ann["agent"], ann["area"]) == ("Ann Ray", "yard")


def test_a_name_goes_below_its_dot_only_when_it_would_touch_its_neighbour_s_on_the_same_row():
    def placed(*xs, px=20.0, y=2.0, label="Ann"):
        rows = [{"label": label, "x": x, "y": y} for x in xs]
        charts._place_labels(rows, px)
        return [(r["baseline"], r["ty"]) for r in rows]

    above, below = ("bottom", pytest.approx(1.58)), ("top", pytest.approx(2.42))
    assert placed(1.0, 5.0) == [above, above]  # 80 px apart: room for both names above
    assert placed(1.0, 2.0) == [above, below]  # 20 px apart: the second below
    assert placed(1.0, 2.0, 3.0) == [above, below, above]  # the third clears the first: above again
    assert placed(1.0, 1.5, 2.0) == [above, below, above]  # touching both: above, the side it clears last
    # the gap needed: the two names' half widths (3 characters, 6 px each) and 4 px
    assert placed(1.0, 2.1, px=20.0)[1] == above and placed(1.0, 1.95, px=20.0)[1] == below
    rows = [{"label": "Ann", "x": 1.0, "y": 2.0}, {"label": "Bob", "x": 1.0, "y": 3.0}]  # other rows never clash
    charts._place_labels(rows, 20.0)
    assert [r["baseline"] for r in rows] == ["bottom", "bottom"]
    assert [(r["x"], r["y"]) for r in rows] == [(1.0, 2.0), (1.0, 3.0)]


# --- the page's own building blocks (app.py), outside a render -----------------------------------------


def test_a_table_escapes_and_redacts_every_cell_and_shows_only_its_limit_of_rows():
    from socialsim.dashboards import app

    rows = [{"agent": f"<b>A{i}</b>", "said": f"key {FAKE_KEY}"} for i in range(5)]
    table = app.Table(rows, ["agent", "said", "missing"], ["my-table"], limit=3).kwargs
    assert (table["tag"], table["classes"]) == ("div", ["my-table"])
    assert {"max-height:360px", "overflow:auto"} <= set(table["style"].split(";"))  # a long table scrolls in its box
    html = table["unsafe_innerHTML"]
    heads = re.findall(r"<th style=[^>]*>(.*?)</th>", html)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(<td.*?)</tr>", html)]
    assert heads == ["agent", "said", "missing"]
    assert [c[0] for c in cells] == ["&lt;b&gt;A0&lt;/b&gt;", "&lt;b&gt;A1&lt;/b&gt;", "&lt;b&gt;A2&lt;/b&gt;"]
    assert all(FAKE_KEY not in c[1] and c[1].startswith("key ") and c[2] == "" for c in cells)
    assert html.endswith("… 2 more</div>")
    whole = app.Table(rows, ["agent"], ["t"]).kwargs["unsafe_innerHTML"]
    assert whole.count("<tr><td") == 5 and "more" not in whole
    assert app.Table([{"n": i} for i in range(201)], ["n"], ["t"]).kwargs["unsafe_innerHTML"].endswith(
        "<tr><td style='padding:2px 6px;vertical-align:top'>199</td></tr></tbody></table>"
        "<div style='font-size:11px;color:#777'>… 1 more</div>")  # 200 rows by default
    th, td = "<th style='text-align:left;padding:2px 6px'>", "<td style='padding:2px 6px;vertical-align:top'>"
    assert app.Table([{"a": 1, "b": 2}, {"a": 3}], ["a", "b"], ["t"]).kwargs["unsafe_innerHTML"] == (
        f"<table><thead><tr>{th}a</th>{th}b</th></tr></thead><tbody><tr>{td}1</td>{td}2</td></tr>"
        f"<tr>{td}3</td>{td}</td></tr></tbody></table>")
    assert "more" not in app.Table(rows, ["agent"], ["t"], limit=5).kwargs["unsafe_innerHTML"]


def test_a_png_is_an_inline_image_with_its_alt_text():
    from socialsim.dashboards import app

    image = app.Png(b"\x89PNG", "map at step 2", ["plot"]).kwargs
    assert image == {"tag": "img", "classes": ["plot"], "attributes": {
        "src": "data:image/png;base64,iVBORw==", "alt": "map at step 2", "style": "max-width:100%"}}


def test_an_inspector_section_is_its_title_in_bold_and_its_text_escaped_and_redacted(monkeypatch):
    import solara

    from socialsim.dashboards import app

    drawn = []
    monkeypatch.setattr(solara, "HTML", lambda **kw: drawn.append(kw))
    app._section("Last <thought>", f"use {FAKE_KEY} & <go>")
    (section,) = drawn
    assert section["tag"] == "div" and FAKE_KEY not in section["unsafe_innerHTML"]
    assert re.fullmatch(r"<b>Last &lt;thought&gt;</b>: use \S+ &amp; &lt;go&gt;", section["unsafe_innerHTML"])


def test_the_structure_line_names_the_leader_each_clique_and_the_isolated_or_says_none(monkeypatch):
    from socialsim.dashboards import app

    structure = {"leader": "Ann", "cliques": [["Ann", "Bob", "Cy"], ["Dee", "Eve", "Fay"]], "isolated": ["Gus", "Hal"]}
    given = frames()
    monkeypatch.setattr(panels, "society_structure", lambda f, step: structure if f is given and step == 3 else {
        "leader": None, "cliques": [], "isolated": []})
    assert app._structure_line(given, 3) == (
        "Leader (most interaction partners, then interactions): Ann · cliques (3+ agents who all interacted): "
        "Ann, Bob, Cy; Dee, Eve, Fay · isolated: Gus, Hal")
    assert app._structure_line(given, 1) == (
        "Leader (most interaction partners, then interactions): none (a tie at the top, or no interaction) · "
        "cliques (3+ agents who all interacted): none · isolated: none")


def test_the_society_view_draws_its_architectures_table_and_chart_and_none_when_empty(monkeypatch):
    from socialsim.dashboards import app

    ranks, predictions = pd.DataFrame({"rank": [1]}), pd.DataFrame({"error": [0.5]})
    made = []
    given = frames()
    monkeypatch.setattr(panels, "matrix_ranks", lambda f, step: ranks if f is given and step == 2 else ranks.iloc[:0])
    monkeypatch.setattr(panels, "tom_predictions", lambda f, step: predictions if f is given and step == 2
                        else predictions.iloc[:0])
    monkeypatch.setattr(charts, "rank_chart", lambda data, step: made.append(("rank", data, step)) or "rank chart")
    monkeypatch.setattr(charts, "tom_chart", lambda data: made.append(("tom", data)) or "tom chart")
    data, chart = app._society_data(given, 2, "itcmas")
    assert data is ranks and chart == "rank chart" and made == [("rank", ranks, 2)]
    data, chart = app._society_data(given, 2, "asvo")
    assert data is predictions and chart == "tom chart" and made[-1] == ("tom", predictions)
    made.clear()
    for view in ("itcmas", "asvo"):
        data, chart = app._society_data(given, 1, view)
        assert data.empty and chart is None and not made
    data, chart = app._society_data(given, 2, "crsec")  # its norms are drawn by the panel itself
    assert data.empty and chart is None and not made


# --- the PNG drawings (dashboards/figures.py): what each draws, read from its matplotlib figure ---------


def drawn_frames(areas: bool = True) -> panels.Frames:
    """Two agents in two areas at step 2 (Ann moved from the yard to the hall), a bench in the yard and
    Ann -> Bob twice and Bob -> Ann once; without areas, the same agents as a network with a third one."""
    agents = pd.DataFrame({"step": [1, 1, 2, 2], "AgentID": [1, 2, 1, 2], "name": ["Ann Lee", "Bob Ray"] * 2,
                           "area": ["Yard", "Yard", "Hall", "Yard"]})
    interactions = pd.DataFrame({"step": [1, 2, 2, 3], "initiator": ["Ann Lee", "Ann Lee", "Bob Ray", "Bob Ray"],
                                 "receiver": ["Bob Ray", "Bob Ray", "Ann Lee", "Ann Lee"]})
    shown = panels.Frames(scenario="s", arch="a", engines=[], model=pd.DataFrame({"step": [1, 2, 3]}), agents=agents,
                          tables={"interactions": interactions}, calls=pd.DataFrame(), failures={},
                          names=["Ann Lee", "Bob Ray"], descriptions={})
    if areas:
        shown.areas = [{"name": "Yard", "x": 6, "y": 0, "width": 4, "height": 5, "kind": "outside"},
                       {"name": "Hall", "x": 0, "y": 0, "width": 6, "height": 4, "kind": "inside"}]
        shown.furniture = [{"name": "bench", "area": "Yard", "x": 7, "y": 1}]
    else:
        shown.names = ["Bob Ray", "Ann Lee", "Cy Dee"]
        shown.ties = [("Ann Lee", "Bob Ray")]
    return shown


@pytest.fixture
def figure_of(monkeypatch):
    """The figures' functions return their matplotlib Figure instead of its PNG bytes."""
    from socialsim.dashboards import figures

    monkeypatch.setattr(figures, "_png", lambda fig: fig)
    figures._network_png.cache_clear()
    yield figures
    figures._network_png.cache_clear()


def _hex(colour) -> str:
    from matplotlib.colors import to_hex

    return to_hex(colour)


def _legend_of(ax) -> dict[str, str]:
    legend = ax.get_legend()
    return {} if legend is None else {t.get_text(): _hex(h.get_facecolor()) for t, h in
                                      zip(legend.get_texts(), legend.legend_handles, strict=True)}


def test_the_map_draws_areas_furniture_and_each_agent_where_the_panels_place_it(figure_of):
    shown = drawn_frames()
    fig = figure_of.map_png(shown, 2, "area")
    ax, = fig.axes
    assert [(p.get_xy(), p.get_width(), p.get_height(), _hex(p.get_facecolor()), _hex(p.get_edgecolor()))
            for p in ax.patches] == [((6, 0), 4, 5, "#f4f1ea", "#555555"), ((0, 0), 6, 4, "#e8eef6", "#555555"),
                                     ((7.1, 1.35), 0.8, 0.5, "#c8b89a", "#8d7b5a")]  # outside, inside, the bench
    assert [(p.get_fill(), p.get_linewidth()) for p in ax.patches[:2]] == [(True, 1.2)] * 2  # areas filled, outlined
    positions = panels.map_positions(shown, 2)
    colours, legend = panels.agent_colours(shown, 2, "area")
    assert colours == {"Ann Lee": panels.PALETTE[1], "Bob Ray": panels.PALETTE[0]}  # by the areas' order
    dots = [(tuple(c.get_offsets()[0]), _hex(c.get_facecolor()[0])) for c in ax.collections]
    assert dots == [(positions[n], colours[n]) for n in shown.names]
    assert [(t.get_position(), t.get_text()) for t in ax.texts] == [
        ((6.15, 0.15), "Yard"), ((0.15, 0.15), "Hall"), ((7.5, 1.95), "bench"),
        *(((x, y - 0.45), n.split()[0]) for n, (x, y) in positions.items())]  # first names under the dots
    assert ax.get_xlim() == (0, 10) and ax.get_ylim() == (5, 0)  # the whole map, row 0 at the top
    assert ax.get_aspect() == 1.0 and not ax.axison
    assert ax.get_title() == "map (step 2, coloured by area)"
    assert _legend_of(ax) == legend == {"Yard": panels.PALETTE[0], "Hall": panels.PALETTE[1]}


def test_a_network_scenario_is_drawn_as_its_graph_of_ties_with_every_agent(figure_of):
    import networkx as nx

    shown = drawn_frames(areas=False)
    shown.agents["svo"] = ["prosocial", "competitive"] * 2
    fig = figure_of.map_png(shown, 2, "SVO")
    ax, = fig.axes
    nodes, = [c for c in ax.collections if len(c.get_offsets()) == 3]
    layout = nx.circular_layout(["Ann Lee", "Bob Ray", "Cy Dee"])  # by name: the same places at every step
    colours, legend = panels.agent_colours(shown, 2, "SVO")
    graph_order = ["Bob Ray", "Ann Lee", "Cy Dee"]
    assert [tuple(xy) for xy in nodes.get_offsets()] == [tuple(layout[n]) for n in graph_order]
    assert [_hex(c) for c in nodes.get_facecolor()] == [colours[n] for n in graph_order]
    edges = [c for c in ax.collections if c is not nodes]
    assert [len(c.get_segments()) for c in edges] == [1]  # the one tie
    assert sorted(t.get_text() for t in ax.texts) == ["Ann Lee", "Bob Ray", "Cy Dee"]
    assert ax.get_title() == "social ties (step 2)" and not ax.axison
    assert _legend_of(ax) == legend == {"prosocial": panels.SVO_COLOURS["prosocial"],
                                        "competitive": panels.SVO_COLOURS["competitive"]}


def test_the_network_panel_widens_edges_by_interactions_and_counts_them_all(figure_of):
    shown = drawn_frames()
    fig = figure_of.network_png(shown, 2, "area")
    ax, = fig.axes
    colours, _ = panels.agent_colours(shown, 2, "area")
    nodes, = [c for c in ax.collections if len(c.get_offsets()) == 2]
    assert [_hex(c) for c in nodes.get_facecolor()] == [colours[n] for n in shown.names]
    assert sorted(t.get_text() for t in ax.texts) == ["Ann", "Bob"]
    arrows = sorted(round(p.get_linewidth(), 6) for p in ax.patches)  # in points
    assert arrows == [round(0.8 + 3.5 * 1 / 2, 6), round(0.8 + 3.5 * 2 / 2, 6)]  # Bob -> Ann once, Ann -> Bob twice
    assert ax.get_title() == "interactions so far (3 in all)"
    grey = figure_of.network_png(shown, 2, "SVO")  # no agent has an SVO: all grey, another picture
    assert grey is not fig and {_hex(c) for c in grey.axes[0].collections[0].get_facecolor()} == {"#9e9e9e"}


def test_the_heat_map_shows_the_counts_initiators_by_row_on_a_scale_from_zero(figure_of):
    shown = drawn_frames()
    fig = figure_of.heatmap_png(shown, 2)
    ax, bar = fig.axes
    image, = ax.images
    assert image.get_array().tolist() == [[0, 2], [1, 0]] and image.get_clim() == (0, 2)
    assert [t.get_text() for t in ax.get_xticklabels()] == [t.get_text() for t in ax.get_yticklabels()] == ["Ann", "Bob"]
    assert list(ax.get_xticks()) == list(ax.get_yticks()) == [0, 1]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("receiver", "initiator")
    assert ax.get_title() == "interaction heat map (up to step 2)"
    assert figure_of.heatmap_png(shown, 0).axes[0].images[0].get_clim() == (0, 1)  # no interaction yet
    pairs = [("Ann Lee", "Ann Lee"), ("Ann Lee", "Bob Ray"), ("Ann Lee", "Bob Ray"), ("Bob Ray", "Ann Lee"),
             ("Bob Ray", "Bob Ray")]
    shown.tables["interactions"] = pd.DataFrame(pairs, columns=["initiator", "receiver"]).assign(step=1)
    everyone = figure_of.heatmap_png(shown, 1).axes[0].images[0]  # every count above zero: the scale still from it
    assert everyone.get_array().tolist() == [[1, 2], [1, 1]] and everyone.get_clim() == (0, 2)
    assert image.get_cmap().name == "Blues"


def test_a_series_is_one_line_per_column_over_whole_steps_and_a_legend_up_to_twelve(figure_of):
    from matplotlib.ticker import MaxNLocator

    frame = pd.DataFrame({"adoption": [0.1, 0.5], "compliance": [0.2, 0.4]}, index=[1, 2])
    fig = figure_of.series_png("Norms", frame, 3)
    ax, = fig.axes
    assert [(line.get_label(), list(line.get_xdata()), list(line.get_ydata())) for line in ax.lines] == [
        ("adoption", [1, 2], [0.1, 0.5]), ("compliance", [1, 2], [0.2, 0.4])]
    assert {line.get_marker() for line in ax.lines} == {"o"}  # a value of one step is a point, not nothing
    assert ax.get_title() == "Norms" and ax.get_xlabel() == "step"
    assert ax.get_xlim() == (0.5, 3.5)  # every step so far, the latest one too
    locator = ax.xaxis.get_major_locator()
    assert isinstance(locator, MaxNLocator) and locator._integer
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["adoption", "compliance"]
    assert figure_of.series_png("none yet", frame, 0).axes[0].get_xlim() == (0.5, 1.5)
    many = pd.DataFrame({f"c{i}": [i] for i in range(13)}, index=[1])
    assert figure_of.series_png("many", many, 1).axes[0].get_legend() is None
    assert figure_of.series_png("twelve", many.iloc[:, :12], 1).axes[0].get_legend() is not None


@pytest.mark.parametrize(("draw", "size"), [
    (lambda f: f.map_png(drawn_frames(), 2, "area"), (648, 378)),
    (lambda f: f.map_png(drawn_frames(areas=False), 2, "agent"), (648, 378)),
    (lambda f: f.heatmap_png(drawn_frames(), 2), (468, 396)),
    (lambda f: f.series_png("t", pd.DataFrame({"a": [1.0]}, index=[1]), 1), (414, 243)),
])
def test_each_drawing_is_a_png_of_its_size_at_90_dpi(draw, size):
    import struct

    from socialsim.dashboards import figures

    png = draw(figures)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and struct.unpack(">II", png[16:24]) == size
