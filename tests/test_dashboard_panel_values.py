"""The values the dashboard's panels compute, on small hand-made frames: the colour ramp's ends and
midpoint, ITCMA-S's matrix ranks, ASVO's theory-of-mind rows, an agent's own series and CRSEC's norm
provenance. A panel that shows the wrong agent's row, rank or step fails here (the browser tests
only see that something is drawn)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from socialsim.dashboards import panels


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
                           "P": [0.1, 0.9, 0.2, 0.8, 0.3, 0.7], "driver": [None] * 6,
                           "memory_count": [1, 5, 2, 6, 3, 7], "action_ok": [True] * 6, "x": [0] * 6})
    series = panels.agent_series(frames(agents), 2, "Bob")
    assert list(series) == ["Desires of Bob", "Emotion and resources of Bob", "Recorded values of Bob"]
    desires = series["Desires of Bob"]
    assert desires.index.tolist() == [1, 2] and desires.iloc[:, 0].tolist() == [9, 8]  # Bob's, to step 2
    assert desires.shape[1] == 1 and desires.columns[0] == panels.desire_label("desire_social_need")
    assert series["Emotion and resources of Bob"].to_dict("list") == {"P": [0.9, 0.8]}  # no empty driver
    assert series["Recorded values of Bob"].to_dict("list") == {"memory_count": [5, 6]}  # no flag, no position
    assert panels.agent_series(frames(), 2, "Bob") == {}


def test_norm_provenance_shows_each_norm_s_latest_state_the_step_it_entered_and_its_source():
    changes = pd.DataFrame({
        "step": [1, 2, 3, 3], "agent": ["Bob", "Bob", "Ann", "Bob"], "norm_id": [1, 1, 1, 2],
        "content": ["No smoking", "No smoking", "Tip", "Be quiet"], "state": ["candidate", "qualified", "qualified",
                                                                                "candidate"],
        "type": ["injunctive"] * 4, "utility": [60, 70, 50, 40], "origin": ["conversation", "conversation", "created",
                                                                          "thought"],
        "source": ["Ann: \"please don't\"", None, "", "I saw him shout; key sk-test1234567890abcdef1234"]})
    rows = panels.norm_provenance(frames(norm_changes=changes), 3)
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
