"""The socialsim dashboard: watch a society step, inspect its agents, replay a finished run.

Run it with ``socialsim dashboard [SCENARIO | RUN_DIR]`` (which starts Solara on 127.0.0.1), or
``solara run socialsim.dashboards.app``. The parameter controls are Mesa's ``UserInputs`` (the
sliders SolaraViz draws) built from the architecture's settings; Mesa's own ``ModelController``
is not used because it steps the model on the page's thread, and one LLM step may take minutes:
here the model is stepped on a worker thread (``session.LiveSession``) and the page polls it.
"""

from __future__ import annotations

import base64
import html
import os
import time
from typing import Any

import solara
from mesa.visualization.solara_viz import UserInputs

from socialsim.agents import ARCHITECTURES
from socialsim.dashboards import figures, panels
from socialsim.dashboards.session import LiveConfig, LiveSession, ReplaySession, arch_parameters, is_run_dir
from socialsim.llm.redact import redact
from socialsim.scenarios.loader import available_scenarios

DEFAULT_ARCH = "(scenario default)"
POLL_SECONDS = 0.4


def initial_session() -> LiveSession | ReplaySession:
    """The session the command line asked for (through the environment of the Solara server)."""
    target = os.environ.get("SOCIALSIM_DASHBOARD_TARGET", "hobbs-cafe")
    if is_run_dir(target):
        return ReplaySession(target)
    session = LiveSession(LiveConfig(
        scenario=target,
        arch=os.environ.get("SOCIALSIM_DASHBOARD_ARCH") or None,
        model=os.environ.get("SOCIALSIM_DASHBOARD_MODEL") or None,
        seed=int(os.environ.get("SOCIALSIM_DASHBOARD_SEED", "42")),
    ))
    session.start()
    return session


# --- small building blocks -----------------------------------------------------------------------------


def Png(data: bytes, alt: str, classes: list[str]) -> Any:
    """An <img> with the PNG inline (a data: URL is no network request)."""
    src = "data:image/png;base64," + base64.b64encode(data).decode()
    return solara.HTML(tag="img", attributes={"src": src, "alt": alt, "style": "max-width:100%"}, classes=classes)


def Table(rows: list[dict], columns: list[str], classes: list[str], limit: int = 200) -> Any:
    """A plain HTML table with every cell escaped (texts come from agents and LLMs)."""
    head = "".join(f"<th style='text-align:left;padding:2px 6px'>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td style='padding:2px 6px;vertical-align:top'>{html.escape(redact(str(r.get(c, ''))))}</td>"
                         for c in columns) + "</tr>"
        for r in rows[:limit]
    )
    more = f"<div style='font-size:11px;color:#777'>… {len(rows) - limit} more</div>" if len(rows) > limit else ""
    return solara.HTML(tag="div", classes=classes, style="max-height:360px;overflow:auto;font-size:12px",
                       unsafe_innerHTML=f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}")


# --- panels ---------------------------------------------------------------------------------------------


@solara.component
def MapPanel(frames: panels.Frames, step: int) -> None:
    modes = panels.colour_modes(frames)
    mode, set_mode = solara.use_state(modes[0])
    mode = mode if mode in modes else modes[0]
    with solara.Card("Map", classes=["panel-map"]):
        solara.Select("colour agents by", values=modes, value=mode, on_value=set_mode, dense=True)
        drawn = solara.use_memo(lambda: figures.map_png(frames, step, mode), [frames, step, mode])
        Png(drawn, f"map at step {step}", ["plot", "plot-map"])
        with solara.Card("Social network", classes=["panel-network"], elevation=0):
            graph = solara.use_memo(lambda: figures.network_png(frames, step, mode), [frames, step, mode])
            Png(graph, f"interaction graph at step {step}", ["plot", "plot-network"])


@solara.component
def SeriesPanel(frames: panels.Frames, step: int) -> None:
    drawn = solara.use_memo(
        lambda: [(title, figures.series_png(title, frame, step)) for title, frame in panels.time_series(frames, step).items()],
        [frames, step])
    with solara.Card("Time series", classes=["panel-series"]):
        if not drawn:
            solara.Text("Nothing recorded yet: run a step.")
        with solara.GridFixed(columns=2):
            for title, png in drawn:
                Png(png, f"{title} up to step {step}", ["plot", "plot-series"])


@solara.component
def HeatmapPanel(frames: panels.Frames, step: int) -> None:
    drawn = solara.use_memo(lambda: figures.heatmap_png(frames, step), [frames, step])
    with solara.Card("Interaction heat map", classes=["panel-heatmap"]):
        Png(drawn, f"interaction heat map at step {step}", ["plot", "plot-heatmap"])


def _section(title: str, text: str) -> None:
    solara.HTML(tag="div", unsafe_innerHTML=f"<b>{html.escape(title)}</b>: {html.escape(redact(text))}",
                style="font-size:13px;margin:2px 0")


@solara.component
def InspectorPanel(frames: panels.Frames, step: int) -> None:
    agent, set_agent = solara.use_state(frames.names[0] if frames.names else "")
    with solara.Card("Agent inspector", classes=["panel-inspector"]):
        if not frames.names:
            return
        solara.Select("agent", values=frames.names, value=agent, on_value=set_agent, dense=True)
        info = panels.inspect_agent(frames, agent, step)
        _section("Description", info.get("description", ""))
        if "svo" in info:
            _section("SVO", info["svo"])
        if info.get("desires"):
            solara.Text("Desires", style="font-weight:bold")
            Table([{"desire": k, "value": v} for k, v in info["desires"].items()], ["desire", "value"],
                  ["inspector-desires"])
        if info.get("emotions"):
            _section("Emotions", ", ".join(f"{k}={v}" for k, v in info["emotions"].items()))
        if "resources" in info:
            _section("Resources", str(info["resources"]))
        if "norms" in info:
            solara.Text(f"Norm database ({len(info['norms'])} norms)", style="font-weight:bold")
            Table(info["norms"], ["id", "content", "state", "type", "utility", "origin", "canonical"],
                  ["inspector-norms"])
        _section("Last thought", info.get("last_thought", "") or "—")
        _section("Last action", info.get("last_action", "") or "—")
        _section("Outcome", info.get("outcome", "") or "—")
        solara.Text("Memory", style="font-weight:bold")
        Table([{"memory": m} for m in info.get("memory", [])], ["memory"], ["inspector-memory"], limit=20)
        if info.get("llm_exchanges"):
            solara.Text("LLM answers recorded at this step (tape)", style="font-weight:bold")
            Table(info["llm_exchanges"], ["op", "answer"], ["inspector-tape"])


@solara.component
def EventLogPanel(frames: panels.Frames, step: int) -> None:
    kinds = panels.event_kinds(frames)
    # the kinds switched off (not those on), so that a kind appearing later is shown
    hidden, set_hidden = solara.use_state(frozenset())
    text, set_text = solara.use_state("")
    shown = [k for k in kinds if k not in hidden]
    with solara.Card("Event log", classes=["panel-events"]):
        solara.SelectMultiple("kinds", values=shown, all_values=kinds, dense=True,
                              on_value=lambda on: set_hidden(frozenset(kinds) - set(on)))
        solara.InputText("filter (text or agent)", value=text, on_value=set_text, continuous_update=True,
                         classes=["event-filter"])
        log = panels.event_log(frames, step, kinds=shown, text=text)
        solara.Text(f"{len(log)} events")
        Table(log.to_dict("records"), panels.EVENT_COLUMNS, ["event-table"])


@solara.component
def UsagePanel(frames: panels.Frames, step: int) -> None:
    totals = panels.usage_totals(frames, step)
    with solara.Card("LLM usage", classes=["panel-usage"]):
        for engine, note in panels.engine_notes(frames):
            solara.Warning(f"Engine {engine}: {note}", dense=True)
        solara.Text(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in totals.items()), classes=["usage-totals"])
        Table(panels.usage_table(frames, step).to_dict("records"), panels.USAGE_COLUMNS, ["usage-table"])


# --- controls --------------------------------------------------------------------------------------------


@solara.component
def Controls(session: Any, set_session: Any, cursor: int, set_cursor: Any, busy: bool, playing: bool) -> None:
    """Scenario, architecture, engine, seed, parameters, step/run/pause/reset, replay.

    ``busy`` and ``playing`` are passed (not read from ``session``) so that a change of the
    worker's state re-renders the buttons: a component re-renders when its arguments change."""
    config = session.config
    scenario, set_scenario = solara.use_state(config.scenario)
    arch, set_arch = solara.use_state(config.arch or DEFAULT_ARCH)
    engine, set_engine = solara.use_state(config.model or "")
    seed, set_seed = solara.use_state(config.seed)
    changed, set_changed = solara.use_state(dict(config.params))
    run_dir, set_run_dir = solara.use_state(str(getattr(session, "run_dir", "")))
    open_error, set_open_error = solara.use_state("")
    scenarios = available_scenarios()

    def reset() -> None:
        new = LiveSession(LiveConfig(scenario=scenario, arch=None if arch == DEFAULT_ARCH else arch,
                                     model=engine or None, seed=int(seed or 0), params=dict(changed)))
        new.start()
        set_session(new)

    def open_run() -> None:
        try:
            replay = ReplaySession(run_dir.strip())
        except Exception as exc:  # a wrong path or a damaged directory: say which
            set_open_error(redact(f"cannot open {run_dir!r}: {exc}"))
            return
        set_open_error("")
        set_cursor(replay.frames.steps_done)  # before the session, so the new slider starts at the end
        set_session(replay)

    with solara.Card("Society", classes=["panel-controls"]):
        solara.Select("scenario", values=scenarios if scenario in scenarios else [scenario, *scenarios],
                      value=scenario, on_value=set_scenario, dense=True)
        solara.Select("architecture", values=[DEFAULT_ARCH, *ARCHITECTURES], value=arch, on_value=set_arch, dense=True)
        solara.InputText("model / engine (litellm string, rules, local/smollm2)", value=engine, on_value=set_engine)
        solara.InputInt("seed", value=seed, on_value=set_seed)
        chosen_arch = config.arch if arch == DEFAULT_ARCH else arch
        params = arch_parameters(chosen_arch or "", session.settings if chosen_arch == session.config.arch else None)
        if params:
            solara.Text("parameters", style="font-weight:bold;font-size:13px")
            for name, value in changed.items():
                if name in params:
                    params[name]["value"] = value
            UserInputs(params, on_change=lambda name, value: set_changed({**changed, name: value}))
        with solara.Row():
            solara.Button("Reset", on_click=reset, color="primary", classes=["btn-reset"],
                          disabled=busy)
            if not session.replay:
                solara.Button("Step", on_click=lambda: session.step(1), classes=["btn-step"], disabled=busy)
                if playing:
                    solara.Button("Pause", on_click=session.pause, classes=["btn-pause"])
                else:
                    solara.Button("Run", on_click=session.play, classes=["btn-run"], disabled=busy)
    with solara.Card("Replay a run", classes=["panel-replay"]):
        solara.InputText("run directory", value=run_dir, on_value=set_run_dir, classes=["run-dir"])
        solara.Button("Open", on_click=open_run, classes=["btn-open"])
        if open_error:
            solara.Error(open_error)
        if session.replay and session.frames.steps_done > 0:
            solara.SliderInt("replay step", value=cursor, min=1, max=session.frames.steps_done, on_value=set_cursor)


# --- the page --------------------------------------------------------------------------------------------


@solara.component
def Page() -> None:
    first = solara.use_memo(initial_session, [])
    session, set_session = solara.use_state(first)
    cursor, set_cursor = solara.use_state(session.frames.steps_done if session.replay else 0)
    _, set_tick = solara.use_state(0)

    def poll(cancel) -> None:
        """Re-render while the worker runs and when a new snapshot arrives (off the page's thread)."""
        seen = (-1, None)
        while not cancel.is_set():
            now = (session.version, session.busy, session.progress())
            if now != seen:
                seen = now
                set_tick(time.monotonic())
            time.sleep(POLL_SECONDS)

    solara.use_thread(poll, dependencies=[session], intrusive_cancel=False)

    frames = session.frames
    done = frames.steps_done if frames is not None else 0
    step = min(max(cursor, 1), done) if session.replay else done

    solara.Title("socialsim dashboard")
    with solara.AppBar():
        solara.AppBarTitle(children=["socialsim"])
    with solara.Sidebar():
        # keyed by the session: opening a run or resetting shows that session's own settings
        Controls(session, set_session, cursor, set_cursor, busy=session.busy,
                 playing=session.playing).key(f"controls-{id(session)}")
    with solara.Column(style="padding:8px"):
        mode = f"replay of {session.run_dir}" if session.replay else "live"
        label = f"Step {step} of {done}" if session.replay else f"Step {step}"
        arch = frames.arch if frames is not None else (session.config.arch or "")
        solara.Text(f"{label} · {session.config.scenario} · {arch} · {mode}", classes=["step-counter"],
                    style="font-size:18px;font-weight:bold")
        if session.busy:
            solara.ProgressLinear(True)
            solara.Text(session.progress(), classes=["progress-text"])
        if session.error:
            solara.Error(f"The society stopped: {session.error}")
        if frames is None:
            solara.Text("Building the society…")
            return
        if frames.status and not session.replay:
            solara.Text(f"status: {frames.status}", style="font-size:12px;color:#666")
        with solara.Columns([3, 2]):
            MapPanel(frames, step)
            with solara.Column():
                HeatmapPanel(frames, step)
                UsagePanel(frames, step)
        SeriesPanel(frames, step)
        with solara.Columns([1, 1]):
            InspectorPanel(frames, step)
            EventLogPanel(frames, step)
