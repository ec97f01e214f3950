"""The data each dashboard panel draws: the same from a live model as from its run directory,
and drawn only from what an architecture records."""

from __future__ import annotations

import threading
from dataclasses import replace

import altair as alt
import pandas as pd
import pytest

from socialsim.dashboards import charts, figures, panels
from socialsim.dashboards.panels import frames_from_run
from socialsim.dashboards.session import LiveConfig, LiveSession, ReplaySession, parameter_controls
from socialsim.llm.fake_server import FakeOpenAIServer
from socialsim.metrics.report import interaction_matrix
from socialsim.model.runner import RunConfig, run

PNG = b"\x89PNG"


def _run(tmp_path_factory, name, **kw):
    out = tmp_path_factory.mktemp(name)
    return run(RunConfig(model="rules", **kw), out, progress=False, preflight=False)


@pytest.fixture(scope="module")
def generic(tmp_path_factory):
    return _run(tmp_path_factory, "generic", scenario="hobbs-cafe", arch="generic", steps=4, rng=3)


@pytest.fixture(scope="module")
def crsec(tmp_path_factory):
    return _run(tmp_path_factory, "crsec", scenario="hobbs-cafe", arch="crsec", steps=3, rng=42)


def test_live_and_replayed_frames_draw_the_same_panels(generic):
    live = panels.frames_from_model(generic.model)
    replayed = panels.frames_from_run(generic.run_dir)
    assert live.steps_done == replayed.steps_done == 4
    for step in (2, 4):
        assert panels.interaction_counts(live, step).equals(panels.interaction_counts(replayed, step))
        assert panels.map_positions(live, step) == panels.map_positions(replayed, step)
        assert panels.agent_colours(live, step, "area") == panels.agent_colours(replayed, step, "area")
        left, right = panels.event_log(live, step), panels.event_log(replayed, step)
        assert list(left["text"]) == list(right["text"])
        pd.testing.assert_frame_equal(panels.usage_table(live, step), panels.usage_table(replayed, step),
                                      check_dtype=False)
        assert panels.time_series(live, step).keys() == panels.time_series(replayed, step).keys()


def test_heat_map_counts_match_the_models_interaction_graph(generic):
    frames = panels.frames_from_model(generic.model)
    counts = panels.interaction_counts(frames, frames.steps_done)
    assert counts.equals(interaction_matrix(generic.model).loc[counts.index, counts.columns])
    graph = panels.interaction_graph(frames, frames.steps_done)
    assert sum(w for _, _, w in graph.edges(data="weight")) == counts.values.sum() > 0
    # scrubbing back shows fewer interactions, never more
    assert panels.interaction_counts(frames, 1).values.sum() <= counts.values.sum()


def test_map_places_every_agent_inside_its_recorded_area(generic):
    frames = panels.frames_from_model(generic.model)
    rows = panels.agents_at(frames, 2)
    rects = {a["name"]: a for a in frames.areas}
    positions = panels.map_positions(frames, 2)
    assert set(positions) == set(frames.names)
    for name, (x, y) in positions.items():
        r = rects[rows.loc[name, "area"]]
        assert r["x"] <= x <= r["x"] + r["width"] and r["y"] <= y <= r["y"] + r["height"]
    assert len(set(positions.values())) == len(positions)  # nobody drawn on top of another
    assert figures.map_png(frames, 2, "area").startswith(PNG)


def test_event_log_filters_by_kind_agent_and_text(generic):
    frames = panels.frames_from_model(generic.model)
    log = panels.event_log(frames, 4)
    assert list(log["step"]) == sorted(log["step"], reverse=True)
    chats = panels.event_log(frames, 4, kinds=["chat"])
    assert len(chats) > 0 and set(chats["kind"]) == {"chat"}
    name = chats["agent"].iloc[0]
    mine = panels.event_log(frames, 4, agent=name)
    assert set(mine["agent"]) == {name}
    word = chats["text"].iloc[0].split()[-1].lower()
    found = panels.event_log(frames, 4, text=word.upper())
    assert len(found) > 0 and all(word in t.lower() or word in a.lower() for t, a in zip(found["text"], found["agent"], strict=False))
    assert panels.event_log(frames, 1)["step"].max() == 1


def test_usage_counts_every_decision_and_names_the_engine(generic):
    frames = panels.frames_from_model(generic.model)
    table = panels.usage_table(frames, 4)
    assert table["decisions"].sum() == len(generic.model.llm.ledger.rows)
    assert set(table["op"]) == {r.op for r in generic.model.llm.ledger.rows}
    totals = panels.usage_totals(frames, 4)
    assert totals["llm_calls"] == 0 and totals["cost_usd"] == 0  # the rules engine calls no LLM
    assert panels.usage_totals(frames, 1)["decisions"] < totals["decisions"]
    (engine, note), = panels.engine_notes(frames)
    assert engine == "rules" and note.endswith("with no language model.")


def test_inspector_rebuilds_the_norm_database_from_the_recorded_changes(crsec):
    live = panels.frames_from_model(crsec.model)
    replayed = panels.frames_from_run(crsec.run_dir)
    holders = [a for a in crsec.model.agents if a.norms.norms]
    assert holders, "some agent holds a norm after three CRSEC steps"
    for agent in holders:
        expected = [(n["id"], n["content"], n["state"]) for n in agent.norms.as_rows()]
        rebuilt = panels.norm_database(replayed, agent.name, replayed.steps_done)
        assert [(n["id"], n["content"], n["state"]) for n in rebuilt] == expected
        shown = panels.inspect_agent(live, agent.name, live.steps_done)
        assert [(n["id"], n["state"]) for n in shown["norms"]] == [(e[0], e[2]) for e in expected]
        assert shown["description"] == agent.description and shown["last_action"] == agent.last_action
    # the colouring counts every qualified norm held, a contrary one too: it is not called adoption
    assert panels.QUALIFIED_NORMS in panels.colour_modes(live) and "norm adoption" not in panels.colour_modes(live)
    colours, legend = panels.agent_colours(live, live.steps_done, panels.QUALIFIED_NORMS)
    most = max(crsec.model.agents, key=lambda a: len(a.norms.qualified()))
    assert colours[most.name] == panels._ramp(1, 0, 1) and all("qualified norm" in label for label in legend)
    series = panels.time_series(replayed)
    assert any(c.startswith("adoption[") for c in series["Norm adoption (share of agents)"].columns)
    assert {"conflicts", "norm_chats", "unheard_chats", "breaches"} <= set(series["Conflicts and norm events"].columns)
    assert "norm change" in panels.event_kinds(replayed)


def test_the_inspector_shows_each_norm_as_the_actor_and_as_the_judge_read_it(crsec):
    """Its one 'canonical' column was the actor's own reading, though adoption is measured by the judge's."""
    frames = frames_from_run(crsec.run_dir)
    for agent in crsec.model.agents:
        live = {n["id"]: n for n in agent.norms.as_rows()}
        shown = panels.inspect_agent(frames, agent.name, frames.steps_done)["norms"]
        assert [n["id"] for n in shown] == list(live)
        for norm in shown:
            assert norm[panels.ACTOR_READING] == ", ".join(live[norm["id"]]["covers"])
            assert norm[panels.JUDGE_READING] == ", ".join(live[norm["id"]]["judged"])
    assert "canonical" not in panels.NORM_COLUMNS


def test_generic_agents_have_no_architecture_panels(generic):
    frames = panels.frames_from_model(generic.model)
    info = panels.inspect_agent(frames, frames.names[0], 4)
    assert not {"desires", "emotions", "norms", "svo"} & set(info)
    assert info["memory"] and info["last_action"]
    assert set(panels.time_series(frames)) == {title for title, _ in panels.USAGE_GROUPS}
    assert parameter_controls("generic") == []


def test_live_session_steps_off_the_calling_thread_and_snapshots_each_step():
    session = LiveSession(LiveConfig("hobbs-cafe", "crsec", "rules", seed=5, params={"synthesis_threshold": 120}))
    seen_threads = []
    session.start()
    assert session.wait(120) and session.error == ""
    step = session.model.step
    session.model.step = lambda: (seen_threads.append(threading.current_thread().name), step())[1]
    before = session.version
    session.step(3)
    assert session.wait(120) and session.error == ""
    assert seen_threads == ["socialsim-dashboard-step"] * 3
    assert session.frames.steps_done == 3 and session.version == before + 3
    assert session.settings["synthesis_threshold"] == 120
    assert not session.busy and session.progress() == ""


def test_live_session_reports_a_bad_model_instead_of_crashing():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "nosuchprovider/x", seed=1))
    session.start()
    assert session.wait(60)
    assert "nosuchprovider/x" in session.error and session.frames is None


def test_live_session_checks_its_model_with_its_own_timeout_and_retries(monkeypatch):
    """A live society's check of its model had a fixed 30 s and no retry, whatever its call settings."""
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(faults=lambda n, messages: "hang" if n == 1 else None, hang_s=1.0) as slow:
        session = LiveSession(LiveConfig("hobbs-cafe", "generic", "openai/fake-model", seed=1, steps=1,
                                         api_base=slow.api_base, call_options={"timeout_s": 0.3, "num_retries": 0}))
        session.start()
        assert session.wait(60)
    assert "is unreachable: Timeout" in session.error and session.frames is None
    with FakeOpenAIServer(fail_first=1) as flaky:
        session = LiveSession(LiveConfig("hobbs-cafe", "generic", "openai/fake-model", seed=1, steps=1,
                                         api_base=flaky.api_base, call_options={"num_retries": 1}))
        session.start()
        assert session.wait(60)
    assert session.error == "" and session.frames is not None and flaky.injected["500"] == 1


def test_live_session_checks_its_model_within_its_own_rate_limits(monkeypatch):
    """The check's attempts take from the limiter the society's calls take from (its --rpm, --tpm)."""
    from socialsim.llm import engines

    asked = []
    monkeypatch.setattr(engines, "check_models", lambda models, **settings: asked.append(settings) or frozenset())
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=1, steps=1,
                                     call_options={"rpm": 30.0, "tpm": 900.0}))
    session.start()
    assert session.wait(60)
    assert session.error == "" and [(a["rpm"], a["tpm"]) for a in asked] == [(30.0, 900.0)]


def test_live_session_says_a_negative_seed_is_refused_by_name():
    """The seed box takes any whole number: -1 showed numpy's "expected non-negative integer"."""
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=-1))
    session.start()
    assert session.wait(60)
    assert session.error == "ValueError: seed expects a whole number >= 0, got -1" and session.frames is None
    session.step()  # the same settings would fail the same way: Step says so, never a step it did not start
    assert session.stop_reason == ("stopped by an error; this society could not be built and cannot go on: "
                                   "Reset builds it again")


def test_live_session_says_a_negative_budget_is_refused_by_name():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", max_calls=-1))
    session.start()
    assert session.wait(60) and session.frames is None
    assert session.error == "ValueError: max LLM calls expects a whole number >= 0 (0: no limit), got -1"


def test_replay_session_reads_the_run_without_any_llm_call(crsec, monkeypatch):
    from socialsim.llm.gateway import Gateway

    def forbidden(*args, **kwargs):
        raise AssertionError("a replay must not ask the gateway")

    monkeypatch.setattr(Gateway, "ask", forbidden)
    session = ReplaySession(crsec.run_dir)
    assert session.frames.steps_done == 3 and session.frames.status == "completed"
    assert session.config.scenario == "hobbs-cafe" and session.config.arch == "crsec"
    assert figures.network_png(session.frames, 3, panels.QUALIFIED_NORMS).startswith(PNG)
    assert figures.heatmap_png(session.frames, 1).startswith(PNG)


def test_the_pages_poll_reads_a_replay_as_it_reads_a_live_society(crsec):
    """Every replay logged an AttributeError (no ``stop_reason``) from the page's poll thread."""
    from socialsim.dashboards import app

    assert app.worker_state(ReplaySession(crsec.run_dir)) == (1, False, False, "", "")


def test_the_network_is_drawn_again_only_when_its_ties_or_colours_change(generic):
    frames = panels.frames_from_model(generic.model)
    mode = panels.colour_modes(frames)[0]

    def ties_and_colours(step):
        graph = panels.interaction_graph(frames, step)
        return sorted(graph.edges(data="weight")), panels.agent_colours(frames, step, mode)[0]

    drawn = {step: figures.network_png(frames, step, mode) for step in range(1, 5)}
    assert all(png.startswith(PNG) for png in drawn.values())
    assert ties_and_colours(1) != ties_and_colours(4) and drawn[1] != drawn[4]
    for a, b in ((1, 2), (2, 3), (3, 4), (1, 4)):  # the same picture exactly when nothing it shows changed
        assert (drawn[a] is drawn[b]) == (ties_and_colours(a) == ties_and_colours(b))
    names = tuple(frames.names)
    nodes = tuple((n, "#9e9e9e") for n in names)
    once = figures._network_png(nodes, ((names[0], names[1], 1),))
    assert figures._network_png(nodes, ((names[0], names[1], 1),)) is once  # not drawn again
    assert figures._network_png(nodes, ((names[0], names[1], 2),)) != once  # a new tie weight is


@pytest.fixture(scope="module")
def asvo(tmp_path_factory):
    return _run(tmp_path_factory, "asvo", scenario="school-micro", arch="asvo", steps=2, rng=7)


@pytest.fixture(scope="module")
def itcmas(tmp_path_factory):
    return _run(tmp_path_factory, "itcmas", scenario="irollan-valley", arch="itcmas", steps=3, rng=7)


def test_asvo_panels_show_svo_and_desires_on_the_social_network(asvo):
    for frames in (panels.frames_from_model(asvo.model), panels.frames_from_run(asvo.run_dir)):
        assert not frames.areas and frames.ties  # a classroom is a network, not a map
        assert "SVO" in panels.colour_modes(frames)
        colours, legend = panels.agent_colours(frames, 2, "SVO")
        assert set(colours) == set(frames.names) and set(legend) <= set(panels.SVO_COLOURS)
        info = panels.inspect_agent(frames, frames.names[0], 2)
        agent = asvo.model.agent_named(frames.names[0])
        assert info["svo"] == agent.svo
        assert set(info["desires"]) == set(agent.state.values)
        series = panels.time_series(frames)
        assert "Desires (mean over agents)" in series
        # rates in [0, 1] are not drawn on the 0-10 scale of the theory-of-mind error
        rates = next(t for t in series if "cooperation_rate" in series[t])
        assert charts.SHARE in rates and set(series[rates].columns) == {
            "cooperation_rate", "competition_index", "cooperation_rate_run", "competition_index_run",
            "cooperation_rate_simulated", "competition_index_simulated", "cooperation_rate_run_simulated",
            "competition_index_run_simulated", "self_declared_run"}
        assert [list(f.columns) for f in series.values() if "tom_error" in f] == [["tom_error"]]
        assert figures.map_png(frames, 2, "SVO").startswith(PNG)
        assert len(panels.event_log(frames, 2, kinds=["action"])) > 0


def test_an_asvo_agents_last_thought_is_its_last_reflection(asvo):
    reflections = asvo.model.datacollector.get_table_dataframe("asvo_reflections")
    assert not reflections.empty
    last = reflections.iloc[-1]
    frames = panels.frames_from_model(asvo.model)
    info = panels.inspect_agent(frames, last["agent"], frames.steps_done)
    assert info["last_thought"] == f"on {last['desire']}: {last['reflection']}"  # as the event log has it


SHOWN_BOTH_WAYS = ("area", "svo", "desires", "emotions", "resources", "norms", "last_thought", "last_action",
                   "outcome")


@pytest.mark.parametrize("arch", ["generic", "crsec", "asvo", "itcmas"])
def test_the_inspector_shows_the_same_agent_live_and_replayed(arch, request):
    """CRSEC's last thought was "—" both ways though its thoughts table had one; ASVO's last thought
    and outcome were shown live only; ITCMA-S's filtered or failed actions were "refused" replayed."""
    done = request.getfixturevalue(arch)
    live, replayed = panels.frames_from_model(done.model), frames_from_run(done.run_dir)
    step = live.steps_done
    for name in live.names:
        shown_live, shown_replayed = panels.inspect_agent(live, name, step), panels.inspect_agent(replayed, name, step)
        for key in SHOWN_BOTH_WAYS:
            assert shown_live.get(key) == shown_replayed.get(key), (name, key)
    thoughts = [panels.inspect_agent(replayed, name, step).get("last_thought") for name in replayed.names]
    if arch in ("crsec", "asvo", "itcmas"):  # each records its agents' thoughts (or reflections)
        assert any(thoughts)
    if arch == "crsec":
        table = replayed.tables["thoughts"]
        last = table[table["step"] <= step].groupby("agent")["thought"].last()
        assert {name: panels.inspect_agent(replayed, name, step).get("last_thought") for name in last.index} == \
            last.to_dict()


def test_an_itcmas_inspector_says_filtered_and_failed_as_the_run_recorded(itcmas_matrix):
    """The replay called every action that did not happen "refused", whatever its recorded status."""
    frames = frames_from_run(itcmas_matrix.run_dir)
    actions = frames.tables["itcmas_actions"]
    statuses = set()
    for r in actions.drop_duplicates(["step", "agent"], keep="last").itertuples():
        if panels.agents_at(frames, r.step).loc[r.agent, "action"] != r.action:
            continue  # the agent acted again at that step: its last action is another
        outcome = panels.inspect_agent(frames, r.agent, r.step)["outcome"]
        statuses.add(r.status)
        expected = {"done": "ok", "filtered": "filtered by LTRHA"}.get(r.status, f"{r.status}: {r.reason}")
        assert outcome == expected, (r.step, r.agent)
    assert {"done", "failed"} <= statuses


def test_itcmas_panels_show_emotions_driver_resources_and_topics(itcmas):
    for frames in (panels.frames_from_model(itcmas.model), panels.frames_from_run(itcmas.run_dir)):
        series = panels.time_series(frames)
        assert list(series["Emotion P/A/D (mean over agents)"].columns) == ["P", "A", "D"]
        assert set(series["Driver (per agent)"].columns) == set(frames.names)
        assert panels.TOPIC_TITLE in series
        info = panels.inspect_agent(frames, frames.names[0], 3)
        agent = itcmas.model.agent_named(frames.names[0])
        assert info["emotions"]["P"] == pytest.approx(agent.emotion.P, abs=1e-3)
        assert "emotion (pleasure)" in panels.colour_modes(frames)


def test_progress_is_reported_while_a_step_waits_on_its_calls():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=2))
    session.start()
    assert session.wait(120)
    release, entered = threading.Event(), threading.Event()
    step = session.model.step

    def slow_step():  # stands in for a step waiting on a slow LLM
        entered.set()
        assert release.wait(60)
        step()

    session.model.step = slow_step
    session.step(1)
    assert entered.wait(60)
    assert session.busy and session.progress().startswith("step 1 running: ")
    assert session.frames.steps_done == 0  # the page still shows the last completed step
    release.set()
    assert session.wait(60) and session.frames.steps_done == 1 and session.progress() == ""


def test_run_keeps_stepping_until_paused():
    session = LiveSession(LiveConfig("hobbs-cafe", "generic", "rules", seed=2, steps=50))
    session.start()
    assert session.wait(120)
    session.play()
    for _ in range(600):  # bounded wait for two steps
        if session.frames.steps_done >= 2:
            break
        threading.Event().wait(0.1)
    session.pause()
    assert session.wait(60)
    assert session.frames.steps_done >= 2 and not session.playing and not session.busy


# --- the architectures' own views and the interactive charts ---------------------------------------------


@pytest.fixture(scope="module")
def itcmas_matrix(tmp_path_factory):
    return _run(tmp_path_factory, "itcmas11", scenario="irollan-valley", arch="itcmas", steps=11, rng=4)


def test_matrix_view_reads_every_ranking_and_the_resources_it_left(itcmas_matrix):
    for frames in (panels.frames_from_model(itcmas_matrix.model), panels.frames_from_run(itcmas_matrix.run_dir)):
        assert panels.architecture_view(frames) == "itcmas"
        ranks = panels.matrix_ranks(frames, frames.steps_done)
        runs = sorted(set(ranks["step"]))
        assert runs == [5, 10]  # matrix_every = 5
        for step in runs:
            at = ranks[ranks["step"] == step]
            assert sorted(at["rank"]) == list(range(1, len(frames.names) + 1))
            assert set(at["agent"]) == set(frames.names)
            recorded = panels.agents_at(frames, step)["resources"]  # the agents' own column, after the matrix
            for row in at.itertuples():
                assert row.resources == pytest.approx(float(recorded[row.agent]), abs=1e-6)
        assert set(panels.matrix_ranks(frames, 7)["step"]) == {5}  # scrubbing back hides later runs
        chart = charts.rank_chart(ranks, frames.steps_done).to_dict()
        assert len(chart["datasets"][next(iter(chart["datasets"]))]) == len(ranks)


def test_the_matrix_view_says_when_the_matrix_is_switched_off(itcmas, tmp_path_factory):
    """With matrix_every=0 the tab said "The matrix has not run yet." as if it would."""
    off = _run(tmp_path_factory, "itcmas-no-matrix", scenario="irollan-valley", arch="itcmas", steps=2, rng=7,
               arch_params={"matrix_every": 0})
    for frames in (panels.frames_from_model(off.model), frames_from_run(off.run_dir)):
        assert "switched off" in panels.matrix_note(frames, 2)
    for frames in (panels.frames_from_model(itcmas.model), frames_from_run(itcmas.run_dir)):  # matrix_every = 5
        assert panels.matrix_note(frames, 3) == "The matrix has not run yet (it runs every 5 steps)."


def test_society_structure_agrees_with_the_heat_map(itcmas_matrix):
    frames = panels.frames_from_run(itcmas_matrix.run_dir)
    counts = panels.interaction_counts(frames, frames.steps_done)
    structure = panels.society_structure(frames, frames.steps_done)
    for name in structure["isolated"]:
        assert counts.loc[name].sum() == 0 and counts[name].sum() == 0
    for clique in structure["cliques"]:
        for a in clique:
            for b in clique:
                if a != b:
                    assert counts.loc[a, b] + counts.loc[b, a] > 0
    assert structure["leader"] is None or structure["leader"] in frames.names


def test_theory_of_mind_view_puts_each_prediction_beside_the_truth(asvo):
    frames = panels.frames_from_run(asvo.run_dir)
    assert panels.architecture_view(frames) == "asvo"
    tom = panels.tom_predictions(frames, 2)
    recorded = asvo.model.datacollector.get_table_dataframe("asvo_predictions")
    assert len(tom) == len(recorded) > 0
    assert (tom["error"] - (tom["predicted"] - tom["true"]).abs()).abs().max() < 1e-6
    assert len(panels.tom_predictions(frames, 1)) < len(tom)
    assert (tom["prior_error"] - (tom["prior"] - tom["true"]).abs()).abs().max() < 1e-6  # the belief it replaced
    spec = charts.tom_chart(tom).to_dict()
    assert any(len(rows) == len(tom) for rows in spec["datasets"].values())
    older = frames.tables["asvo_predictions"].drop(columns=["prior", "prior_error"])  # a run from before them
    frames.tables["asvo_predictions"] = older
    assert panels.tom_predictions(frames, 2)["prior"].isna().all()
    charts.tom_chart(panels.tom_predictions(frames, 2)).to_dict()


def test_norm_view_gives_each_norm_its_provenance(crsec):
    frames = panels.frames_from_run(crsec.run_dir)
    assert panels.architecture_view(frames) == "crsec"
    norms = panels.norm_provenance(frames, frames.steps_done)
    assert len(norms) > 0 and (norms["since"] <= frames.steps_done).all()
    held = norms[norms["state"] == "qualified"].groupby("agent").size()
    qualified = panels.agents_at(frames, frames.steps_done)["qualified_norms"]
    for name in frames.names:
        assert int(held.get(name, 0)) == int(qualified[name])
    heard = norms[norms["origin"].isin(["conversation", "thought"])]
    assert (heard["source"].str.len() > 0).all()
    assert set(panels.norm_provenance(frames, frames.steps_done, frames.names[0])["agent"]) <= {frames.names[0]}


@pytest.mark.parametrize("arch", ["generic", "crsec", "asvo", "itcmas", "plug-in"])
def test_every_number_the_model_recorded_is_in_some_time_series(arch, request):
    """Only a fixed list of columns was charted: CRSEC's plan and action compliance and running totals,
    ASVO's reflections, ITCMA-S's truncated protentions and a plug-in's own reporter were drawn nowhere."""
    frames = frames_from_run(request.getfixturevalue("generic" if arch == "plug-in" else arch).run_dir)
    if arch == "plug-in":  # an installed architecture's own model reporter
        frames = replace(frames, model=frames.model.assign(tidy_steps=frames.model["step"] * 10))
    numbers = [c for c in frames.model.columns if c != "step" and pd.api.types.is_numeric_dtype(frames.model[c])]
    series = panels.time_series(frames)
    charted = {column for frame in series.values() for column in frame.columns}
    assert set(numbers) - charted == set()
    if arch == "plug-in":
        assert series[panels.OTHER_TITLE]["tidy_steps"].tolist() == (frames.model["step"] * 10).tolist()
    if arch == "crsec":  # compliance in plans and in actions beside compliance, each norm its own line
        titles = list(series)
        at = titles.index("Norm compliance (share of agents)")
        acting = "Norm compliance among the agents who acted on the norm (share of them; no point where nobody did)"
        assert titles[at + 1:at + 4] == ["Norm compliance in plans (share of agents)",
                                         "Norm compliance in actions (share of agents)", acting]
        assert sorted(series[acting].columns) == sorted(c for c in frames.model.columns
                                                        if c.startswith("acting_compliance["))
        assert len(series[acting].columns) == 3
        assert "unheard_chats_total" in series["Conflicts and norm events so far (running totals)"]


def test_one_agents_series_are_its_own_recorded_values(itcmas):
    frames = panels.frames_from_run(itcmas.run_dir)
    name = frames.names[1]
    series = panels.agent_series(frames, 3, name)
    own = series[f"Emotion and resources of {name}"]
    rows = frames.agents[frames.agents["name"] == name].set_index("step")
    assert list(own.index) == [1, 2, 3]
    assert own["P"].tolist() == pytest.approx(rows["P"].astype(float).tolist())


def test_series_and_heat_map_charts_carry_the_data_and_the_interactions(generic):
    frames = panels.frames_from_run(generic.run_dir)
    title, frame = next(iter(panels.time_series(frames, 4).items()))
    spec = charts.series_chart(title, frame, 4)
    alt.Chart.from_dict(spec)  # a valid Vega-Lite spec (the page does not validate it again)
    assert spec["encoding"]["x"]["scale"]["domain"] == [0.5, 4.5]  # the steps so far
    rows = spec["datasets"][charts.SERIES]
    assert len(rows) == frame.notna().sum().sum()
    assert {p["name"] for p in spec["params"]} == {"pick", "zoom"}  # legend pick and zoom along the steps
    assert spec["params"][0]["bind"] == "legend" and spec["encoding"]["tooltip"]
    assert "scale" not in spec["encoding"]["y"]  # counts: Vega-Lite's own range
    share = charts.series_chart("Norm adoption (share of agents)", frame, 4)
    assert share["encoding"]["y"]["scale"]["domain"] == [0, 1]
    counts = panels.interaction_counts(frames, 4)
    heat = charts.heatmap_chart(counts, 4).to_dict()
    cells = next(iter(heat["datasets"].values()))
    assert len(cells) == counts.size and sum(c["interactions"] for c in cells) == counts.values.sum() > 0
    assert heat["encoding"]["color"]["scale"]["domain"] == [0, counts.values.max()]
    none = charts.heatmap_chart(counts * 0, 0).to_dict()  # before any interaction: the scale's low end
    assert none["encoding"]["color"]["scale"]["domain"] == [0, 1]


def test_offline_assets_answer_the_versions_the_charts_ask_for(tmp_path):
    from socialsim.dashboards.server import VEGA_ALIASES, offline_assets

    cache = offline_assets(tmp_path / "cdn")
    for alias in VEGA_ALIASES:
        script = cache / alias / "build" / f"{alias.split('@')[0]}.min.js"
        assert script.is_file(), alias
    assert (cache / "requirejs@2.3.6").exists()
    assert offline_assets(tmp_path / "cdn") == cache  # idempotent


def test_the_map_chart_puts_every_agent_where_the_map_positions_say(generic):
    frames = panels.frames_from_run(generic.run_dir)
    colours, _ = panels.agent_colours(frames, 3, "area")
    spec = charts.map_chart(frames, 3, colours, "area")
    alt.LayerChart.from_dict(spec)  # a valid Vega-Lite spec (the page does not validate it again)
    assert spec["title"] == "map (step 3, coloured by area)"
    rows = {r["agent"]: r for data in spec["datasets"].values() for r in data if "agent" in r}
    assert set(rows) == set(frames.names)
    for name, (x, y) in panels.map_positions(frames, 3).items():
        assert (rows[name]["x"], rows[name]["y"]) == (x, y) and rows[name]["colour"] == colours[name]
    furniture = {r["name"] for data in spec["datasets"].values() for r in data if "area" in r and "x2" in r
                 and r.get("name") in {f["name"] for f in frames.furniture}}
    assert furniture == {f["name"] for f in frames.furniture}  # named on hover, not in overlapping labels


def test_names_on_the_map_never_cover_each_other_and_go_below_their_dots_only_when_they_must(crsec):
    frames = panels.frames_from_run(crsec.run_dir)
    colours, _ = panels.agent_colours(frames, 1, "area")
    placed = charts.map_chart(frames, 1, colours, "area")["datasets"][charts.AGENTS]
    px = charts._map_px(frames.areas)

    def touch(a, b):  # names centred on their dots, about 6 px a character
        return abs(a["x"] - b["x"]) * px < (len(a["label"]) + len(b["label"])) * 3 + 4

    pairs = [(a, b) for a in placed for b in placed if a is not b and a["y"] == b["y"] and touch(a, b)]
    assert len(pairs) >= 4  # the cafe's morning: most agents in the dining room, side by side
    for a, b in pairs:
        assert a["baseline"] != b["baseline"] and abs(a["ty"] - b["ty"]) > 0.8
    below = [a for a in placed if a["baseline"] == "top"]
    assert below and all(any(touch(a, b) for b in placed if b is not a and b["y"] == a["y"]) for a in below)
    assert len(below) < len(placed) / 2  # most names above: fewer cross into the room beneath


def test_the_usage_panel_shows_each_engine_s_note_once_as_written(generic, monkeypatch):
    """The note begins with the engine's name; the panel said "Engine rules: rules is ..."."""
    import solara

    from socialsim.dashboards import app
    from socialsim.llm.engines import NOTES

    frames = panels.frames_from_model(generic.model)
    shown: list[str] = []
    warning = solara.Warning
    monkeypatch.setattr(solara, "Warning", lambda label, **kw: (shown.append(label), warning(label, **kw))[1])
    solara.render(app.UsagePanel(frames, 4, panels.usage_totals(frames, 4)), handle_error=False)
    assert shown == [NOTES["rules"]]


def test_the_usage_panel_says_what_a_rebuilt_society_no_longer_counts(generic, monkeypatch):
    import solara

    from socialsim.dashboards import app

    frames = panels.frames_from_model(generic.model)
    frames.earlier = ["Step 2, cut by the provider outage, had 5 failed calls before ..."]
    shown: list[str] = []
    info = solara.Info
    monkeypatch.setattr(solara, "Info", lambda label, **kw: (shown.append(label), info(label, **kw))[1])
    solara.render(app.UsagePanel(frames, 4, panels.usage_totals(frames, 4)), handle_error=False)
    assert shown == frames.earlier


def test_a_reproductions_findings_are_read_for_its_folder_and_nothing_for_others(tmp_path):
    pd.DataFrame({"finding": ["A beats B", "C is high"], "verdict": ["holds", "does not hold"],
                  "seeds_holding": [5, 1], "seeds_measured": [5, 3], "sign_p": [0.03125, 0.875]}
                 ).to_csv(tmp_path / "findings.csv", index=False)
    table = panels.reproduction_findings(tmp_path)
    assert table.values.tolist() == [["A beats B", "holds", "5 of 5", "0.0312"],
                                     ["C is high", "does not hold", "1 of 3", "0.875"]]
    (tmp_path / "old").mkdir()  # written before the sign test: no p
    pd.read_csv(tmp_path / "findings.csv").drop(columns="sign_p").to_csv(tmp_path / "old" / "findings.csv", index=False)
    assert panels.reproduction_findings(tmp_path / "old")["p"].tolist() == ["", ""]
    (tmp_path / "sweep").mkdir()
    assert panels.reproduction_findings(tmp_path / "sweep").empty  # no findings file
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "findings.csv").write_text("just,some\ncolumns,here\n")
    assert panels.reproduction_findings(tmp_path / "broken").empty


def test_the_desire_charts_show_the_desires_the_agents_have():
    """With ``desire_pool=3`` the other five desires are never recorded: no empty lines for them."""
    from socialsim.model.society import SocietyModel

    model = SocietyModel("workplace-meso", model="rules", rng=1, desire_pool=3)
    for _ in range(2):
        model.step()
    frames = panels.frames_from_model(model, "ok")
    pool = ["comfort", "joyfulness", "spiritual satisfaction"]
    assert list(panels.time_series(frames, 2)["Desires (mean over agents)"].columns) == pool
    name = sorted(a.name for a in model.agents)[0]
    assert list(panels.agent_series(frames, 2, name)[f"Desires of {name}"].columns) == pool
    assert list(panels.inspect_agent(frames, name, 2)["desires"]) == pool


def test_a_run_of_ones_own_scenario_file_opens_from_any_folder(tmp_path, monkeypatch):
    """The dashboard rebuilt the map from the scenario file the run names: a relative path failed
    from another folder, and an edited file drew another map."""
    from socialsim.scenarios.loader import load_scenario, scenario_path

    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    (tmp_path / "a" / "cafe.yaml").write_text(scenario_path("hobbs-cafe").read_text())
    monkeypatch.chdir(tmp_path / "a")
    run(RunConfig(scenario="cafe.yaml", model="rules", steps=1), "r", progress=False)
    session = ReplaySession("r")
    assert session.config.scenario == "cafe.yaml"  # the file still holds what the run kept: its name
    monkeypatch.chdir(tmp_path / "b")
    session = ReplaySession(tmp_path / "a" / "r")
    assert session.config.scenario == str(tmp_path / "a" / "r" / "scenario.yaml")  # Reset runs the same society
    assert {a["name"] for a in session.frames.areas} == {a.name for a in load_scenario("hobbs-cafe").map.areas}


def test_each_chat_line_is_in_the_event_log_once_addressed_to_the_other_party(crsec):
    """Every CRSEC chat line was listed twice, half of the copies addressed to the speaker himself."""
    frames = frames_from_run(crsec.run_dir)
    lines = pd.read_parquet(crsec.run_dir / "tables" / "conversations.parquet")
    assert len(lines) > 0
    chats = panels.event_log(frames, 3, kinds=["chat"])
    assert len(chats) == len(lines)
    assert not any(text.startswith(f"chat with {agent}:") for agent, text in zip(chats["agent"], chats["text"], strict=True))
    no_events = replace(frames, tables={k: v for k, v in frames.tables.items() if k != "events"})
    from_lines = panels.event_log(no_events, 3, kinds=["chat"])  # an architecture that logs only its conversations
    assert len(from_lines) == len(lines)
    replies = lines[lines["speaker"] == lines["receiver"]]
    assert len(replies) > 0
    for r in replies.itertuples():
        assert f"to {r.sender}: {r.text}" in set(from_lines[from_lines["agent"] == r.receiver]["text"])


@pytest.fixture(scope="module")
def crsec_capped(tmp_path_factory):
    """CRSEC agents who hear one conversation a step: the others are recorded with heard=false."""
    return _run(tmp_path_factory, "crsec-capped", scenario="hobbs-cafe", arch="crsec", steps=3, rng=42,
                arch_params={"conversations_heard": 1})


def test_every_unheard_conversation_is_in_the_event_log(crsec_capped):
    """Conversations over the receiver's cap never showed: the log skipped the conversations table
    whenever the world's events had a chat."""
    frames = frames_from_run(crsec_capped.run_dir)
    lines = frames.tables["conversations"]
    unheard = lines[~lines["heard"].astype(bool)]
    assert len(unheard) > 0
    shown = panels.event_log(frames, 3, kinds=["unheard chat"])
    assert len(shown) == len(unheard)
    for r in unheard.itertuples():
        other = r.receiver if r.speaker == r.sender else r.sender
        assert f"to {other}: {r.text}" in set(shown[shown["agent"] == r.speaker]["text"])
    heard = panels.event_log(frames, 3, kinds=["chat"])
    assert len(heard) == len(lines) - len(unheard)  # each heard line once, from the world's events


def test_the_usage_at_the_latest_step_counts_every_call_the_run_made(generic):
    """After a budget stop the page showed fewer calls than were paid (those of the step it cut short
    dropped), and more failures than calls."""
    frames = frames_from_run(generic.run_dir)
    cut = frames.calls[frames.calls["step"] == 4].assign(step=5, error="budget")  # a step 5 cut short
    stopped = replace(frames, calls=pd.concat([frames.calls, cut], ignore_index=True))
    latest = panels.usage_totals(stopped, stopped.steps_done)
    assert latest["decisions"] == len(stopped.calls) and latest["failures"] == len(cut)
    assert panels.usage_totals(stopped, 3)["decisions"] == int((frames.calls["step"] <= 3).sum())


def test_a_replays_reset_runs_as_the_recording_did_and_the_page_says_how_it_ended(tmp_path):
    """Reset from a replay dropped the run's budget, endpoint, routes and length (with a real key it
    would have run with no budget, against another endpoint); a stopped, killed or replayed run
    looked completed."""
    import json

    from socialsim.dashboards.session import how_it_ended

    config = RunConfig(scenario="hobbs-cafe", arch="generic", model="rules", steps=2, max_calls=30, max_cost=0.5,
                       api_base="http://127.0.0.1:9/v1", routes={"action": "rules"}, price=(1.0, 2.0), timeout_s=7.0,
                       breaker=2)
    done = run(config, tmp_path / "r", progress=False, preflight=False)
    live = ReplaySession(done.run_dir).config
    assert (live.max_calls, live.max_cost, live.api_base, live.steps, live.routes) == \
        (30, 0.5, "http://127.0.0.1:9/v1", 2, {"action": "rules"})
    assert live.call_options["price"] == [1.0, 2.0] and live.call_options["timeout_s"] == 7.0
    assert live.call_options["breaker"] == 2
    session = LiveSession(live)  # what Reset builds from it
    session.step(1)
    assert session.wait(60) and session.error == ""
    gateway = session.model.llm
    assert (gateway.ledger.budget.max_calls, gateway.api_base, gateway.routes.routes) == (30, "http://127.0.0.1:9/v1",
                                                                                         {"action": "rules"})
    assert ReplaySession(done.run_dir).ending == ""
    meta = json.loads((done.run_dir / "config.json").read_text())
    assert how_it_ended(done.run_dir, {**meta, "status": "stopped by budget: max_calls=30 reached"}).startswith(
        "This run did not complete (stopped by budget: max_calls=30 reached) after 2 steps; `socialsim run --resume")
    assert how_it_ended(done.run_dir, {**meta, "status": "running"}).startswith("Killed while running (its process is gone)")
    assert how_it_ended(done.run_dir, {**meta, "replay_of": "r0"}).startswith("A replay of r0")
    stopped = {**meta, "status": "stopped by budget: max_calls=30 reached"}
    (done.run_dir / "config.json").write_text(json.dumps(stopped))
    replay = ReplaySession(done.run_dir)  # the page's line on how it ended names the run to resume
    assert replay.ending == how_it_ended(done.run_dir, stopped) and f"--resume {done.run_dir}`" in replay.ending
    # a replay has no engine notes or effective settings to show, never runs, and is idle at once
    assert (replay.notes, replay.settings, replay.progress(), replay.wait(), replay.version) == ([], {}, "", True, 1)


def test_a_replays_reset_builds_the_recorded_society_its_model_seed_and_parameters(tmp_path):
    done = run(RunConfig(scenario="hobbs-cafe", arch="crsec", model="rules", steps=1, rng=7,
                         arch_params={"synthesis_threshold": 120}), tmp_path / "r", progress=False, preflight=False)
    live = ReplaySession(done.run_dir).config
    assert (live.scenario, live.arch, live.model, live.seed, live.params) == (
        "hobbs-cafe", "crsec", "rules", 7, {"synthesis_threshold": 120})


def test_the_page_says_how_a_run_without_a_status_ended_and_who_writes_one_being_written(tmp_path, monkeypatch):
    from socialsim.dashboards.session import how_it_ended
    from socialsim.model import run_dir

    assert how_it_ended(tmp_path, {}) == (f"This run did not complete (no status recorded) after 0 steps; "
                                          f"`socialsim run --resume {tmp_path}` continues it.")
    monkeypatch.setattr(run_dir, "being_written", lambda path: "4242")
    assert how_it_ended(tmp_path, {"status": "running", "steps_done": 3}) == (
        "Being written by another process (pid 4242): its 3 complete steps so far; open it again for more.")


def test_a_killed_run_lacking_its_frames_is_not_said_to_show_steps_it_cannot(tmp_path):
    """A killed run whose per-step records were lost read "its 2 complete steps are shown" above a
    page showing none (the missing-files warning below it said so)."""
    import json

    done = run(RunConfig(scenario="makerspace", arch="generic", model="rules", steps=2), tmp_path / "r",
               progress=False, preflight=False)
    meta = json.loads((done.run_dir / "config.json").read_text())
    (done.run_dir / "config.json").write_text(json.dumps({**meta, "status": "running"}))
    assert "its 2 complete steps are shown" in ReplaySession(done.run_dir).ending
    (done.run_dir / "model.parquet").unlink()
    replay = ReplaySession(done.run_dir)
    assert replay.frames.steps_done == 0
    assert replay.ending.startswith("Killed while running (its process is gone): 0 of its 2 complete steps are shown;")


def test_the_report_tab_shows_the_runs_own_findings(crsec, tmp_path, monkeypatch):
    """None of a run's report findings (CRSEC's findings table, 'emergent by construction', ASVO's
    separability, ITCMA-S's judge scores) were anywhere on the dashboard."""
    import shutil

    import solara

    from socialsim.dashboards import app

    written = (crsec.run_dir / "report.md").read_text(encoding="utf-8")
    findings = next(line for line in written.splitlines() if line.startswith("| injunctive norms at the end |"))
    session = ReplaySession(crsec.run_dir)
    assert "## CRSEC: norm emergence" in session.report and findings in session.report
    assert "](figures/" not in session.report and "](data:image/png;base64," in session.report  # no request
    shown: list[str] = []
    html = solara.HTML
    monkeypatch.setattr(solara, "HTML", lambda **kw: (shown.append(kw.get("unsafe_innerHTML")), html(**kw))[1])
    solara.render(app.ReportPanel(session), handle_error=False)
    assert shown == [panels.report_html(session.report)] and "<table>" in shown[0]  # never compiled as a template
    # a run that has written no report yet says so; the report's quotes of agents are shown as text
    copy = tmp_path / "run"
    shutil.copytree(crsec.run_dir, copy)
    (copy / "report.md").unlink()
    assert ReplaySession(copy).report == ""
    (copy / "report.md").write_text("Sam said <script>alert(1)</script>\n")
    assert panels.run_report(copy) == "Sam said &lt;script>alert(1)&lt;/script>\n"


def _recorded(run_dir, status="completed", steps_done=3, **config):
    """A run directory with only its config.json: what the Replay card's list reads."""
    import json

    run_dir.mkdir(parents=True)
    meta = {"config": {"scenario": "hobbs-cafe", "arch": "crsec", "model": "rules", "rng": 0, **config},
            "steps_done": steps_done}
    if status is not None:
        meta["status"] = status
    (run_dir / "config.json").write_text(json.dumps(meta))
    return run_dir


def test_the_replay_cards_list_names_each_run_by_its_place_its_differing_settings_and_how_it_ended(tmp_path):
    """Settings every run shares, another architecture's parameters, lists and mappings tell no run
    apart; a run of another folder is named by its whole path; a damaged one is listed, saying so."""
    folder = tmp_path / "sweep"
    a = _recorded(folder / "runs" / "a", rng=1, steps=4, routes={"x": "y"}, tags=["t"],
                  arch_params={"temptation": 0.5, "norms": ["n"], "only_mine": 1})
    b = _recorded(folder / "runs" / "b", status="interrupted", steps_done=2, rng=2, steps=4,
                  arch_params={"temptation": 0.9, "norms": ["m"]})
    c = _recorded(tmp_path / "elsewhere", status=None, steps_done=0, rng=2, steps=6, arch_params=None)
    (folder / "runs" / "d").mkdir()
    (folder / "runs" / "d" / "config.json").write_text("{cut short")
    choices = panels.run_choices(folder, [a, b, str(c), folder / "runs" / "d"])
    assert choices == {
        "runs/a · seed 1, steps=4": str(a),
        "runs/b · seed 2, steps=4 · interrupted, 2 steps": str(b),
        f"{c} · seed 2, steps=6 · no status, 0 steps": str(c),
        "runs/d · config.json unreadable": str(folder / "runs" / "d"),
    }
    # among runs of one architecture, its parameters are settings too; at most five are shown
    many = {f"p{i}": i for i in range(6)}
    e = _recorded(folder / "runs" / "e", arch_params={**many, "temptation": 0.1})
    f = _recorded(folder / "runs" / "f", arch_params={**{k: v + 1 for k, v in many.items()}, "temptation": 0.2})
    assert list(panels.run_choices(folder, [e, f])) == ["runs/e · p0=0, p1=1, p2=2, p3=3, p4=4, ...",
                                                        "runs/f · p0=1, p1=2, p2=3, p3=4, p4=5, ..."]
    assert list(panels.run_choices(folder, [e])) == ["runs/e"]  # one run differs from none
    five = [_recorded(folder / "runs" / f"five{i}", rng=i, arch_params={f"p{k}": i for k in range(4)}) for i in range(2)]
    assert list(panels.run_choices(folder, five)) == ["runs/five0 · p0=0, p1=0, p2=0, p3=0, seed 0",  # five: no "..."
                                                      "runs/five1 · p0=1, p1=1, p2=1, p3=1, seed 1"]
    # a damaged run listed first; a config.json without a seed or the steps it made
    (folder / "old").mkdir()
    (folder / "old" / "config.json").write_text('{"status": "interrupted", "config": {"scenario": "hobbs-cafe"}}')
    assert list(panels.run_choices(folder, [folder / "runs" / "d", a, b, folder / "old"])) == [
        "runs/d · config.json unreadable", "runs/a · seed 1", "runs/b · seed 2 · interrupted, 2 steps",
        "old · seed None · interrupted, 0 steps"]
    assert panels.run_choices(folder, []) == {}


def test_the_replay_cards_list_hides_a_key_in_a_runs_label(tmp_path):
    folder = tmp_path / "sweep"
    runs = [_recorded(folder / "runs" / f"r{i}", api_base=f"https://u:sk-secret{i}abcdefghijklmnop@host/v1")
            for i in range(2)]
    labels = list(panels.run_choices(folder, runs))
    assert len(labels) == 2 and all("api_base=" in label and "sk-secret" not in label for label in labels)
