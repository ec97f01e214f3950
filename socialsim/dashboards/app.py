"""The socialsim dashboard: watch a society step, inspect its agents, replay a finished run.

Run it with ``socialsim dashboard [SCENARIO | RUN_DIR]`` (which starts Solara on 127.0.0.1), or
``solara run socialsim.dashboards.app``. The parameter controls are Mesa's ``UserInputs`` (the
controls SolaraViz draws, in its place: Reset / Step / Play / Pause above the model parameters)
built from the architecture's declared settings (``agents.params``). Mesa's own ``ModelController``
is not used because it steps the model on the page's thread, and one LLM step may take minutes:
here the model is stepped on a worker thread (``session.LiveSession``) and the page polls it.
"""

from __future__ import annotations

import base64
import html
import itertools
import os
import time
from typing import Any

import pandas as pd
import solara
import solara.lab

from socialsim.agents import architectures
from socialsim.dashboards import charts, figures, panels
from socialsim.dashboards.session import (
    PLAY_INTERVAL_MS,
    LiveConfig,
    LiveSession,
    ReplaySession,
    check_parameter,
    check_parameters,
    missing_note,
    parameter_controls,
    reset_problem,
    scenario_default_arch,
)
from socialsim.llm.redact import redact
from socialsim.model.run_dir import is_run_dir
from socialsim.scenarios.loader import available_scenarios

DEFAULT_ARCH = "(scenario default)"
POLL_SECONDS = 0.05  # the page notices a finished step or a Pause within this


def initial_session() -> LiveSession | ReplaySession:
    """The session the command line asked for (through the environment of the Solara server)."""
    target = os.environ.get("SOCIALSIM_DASHBOARD_TARGET", "hobbs-cafe")
    if is_run_dir(target):
        try:
            return ReplaySession(target)
        except Exception as exc:  # damaged since the command line checked it: said on the page, not a traceback
            session = LiveSession(LiveConfig())  # not built: Reset builds it, "Replay a run" opens another
            session.error_title = "Cannot open the run directory"
            session.error = redact(f"{target}: {exc}")
            return session
    session = LiveSession(LiveConfig(
        scenario=target,
        arch=os.environ.get("SOCIALSIM_DASHBOARD_ARCH") or None,
        model=os.environ.get("SOCIALSIM_DASHBOARD_MODEL") or None,
        seed=int(os.environ.get("SOCIALSIM_DASHBOARD_SEED", "42")),
        max_calls=int(os.environ.get("SOCIALSIM_DASHBOARD_MAX_CALLS") or 0) or None,
        steps=int(os.environ.get("SOCIALSIM_DASHBOARD_STEPS") or 0) or None,
        max_cost=float(cost) if (cost := os.environ.get("SOCIALSIM_DASHBOARD_MAX_COST")) else None,  # 0 is a budget
        api_base=os.environ.get("SOCIALSIM_DASHBOARD_API_BASE") or None,
        call_options=_call_options_given(),
    ))
    session.start()
    return session


def _call_options_given() -> dict:
    """The command line's --deployments and --price for a live society (see server.LIVE_SETTINGS)."""
    options: dict = {}
    if path := os.environ.get("SOCIALSIM_DASHBOARD_DEPLOYMENTS"):
        options["deployments"] = path
    if price := os.environ.get("SOCIALSIM_DASHBOARD_PRICE"):
        options["price"] = tuple(float(v) for v in price.split(","))
    return options


def worker_state(session: LiveSession | ReplaySession) -> tuple:
    """What the page's poll watches for a change (a replay's never changes, but is read the same way)."""
    return session.version, session.busy, session.playing, session.progress(), session.stop_reason


def frames_to_draw(drawn: Any, frames: Any, playing: bool, every: int) -> Any:
    """The snapshot the panels draw: while Play runs, a new one only every ``every`` steps (Mesa's
    SolaraViz ``render_interval``: fewer redraws keep a fast Play's page answering); otherwise,
    and after a Reset (another society's frames, or fewer steps), the latest."""
    if drawn is None or frames is None or not playing or frames.steps_done < drawn.steps_done:
        return frames
    return frames if frames.steps_done - drawn.steps_done >= max(1, every) else drawn


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


@solara.component
def Chart(chart: Any) -> Any:
    """A Vega-Lite chart (an Altair chart, or a spec already as a dict), turned into its spec once
    per chart: ``solara.FigureAltair`` converts (and validates) it on every render of the page,
    35 ms for the map, which a click during Play had to wait for. The builders' specs are checked
    against the Vega-Lite schema by the tests."""
    spec = solara.use_memo(lambda: chart if isinstance(chart, dict) else chart.to_dict(validate=False), [chart])
    return solara.widgets.VegaLite.element(spec=spec, listen_to_click=False, listen_to_hover=False)


# --- panels ---------------------------------------------------------------------------------------------


@solara.component
def MapPanel(frames: panels.Frames, step: int) -> None:
    modes = panels.colour_modes(frames)
    mode, set_mode = solara.use_state(modes[0])
    mode = mode if mode in modes else modes[0]
    with solara.Card("Map", classes=["panel-map"]):
        solara.Select("colour agents by", values=modes, value=mode, on_value=set_mode, dense=True)
        # a world is drawn interactive (hover an agent, an area or a piece of furniture); a social
        # network as its graph of ties (both memos always run: hooks keep their order)
        colours, legend = solara.use_memo(lambda: panels.agent_colours(frames, step, mode), [frames, step, mode])
        chart = solara.use_memo(lambda: charts.map_chart(frames, step, colours, mode) if frames.areas else None,
                                [frames, step, mode])
        drawn = solara.use_memo(lambda: None if frames.areas else figures.map_png(frames, step, mode),
                                [frames, step, mode])
        if chart is not None:
            with solara.Div(classes=["chart", "chart-map"]):
                Chart(chart)
            solara.HTML(tag="div", classes=["map-legend"], style="font-size:12px", unsafe_innerHTML=" ".join(
                f"<span style='display:inline-block;margin-right:12px'><span style='display:inline-block;"
                f"width:10px;height:10px;border-radius:5px;background:{c};margin-right:4px'></span>"
                f"{html.escape(label)}</span>" for label, c in legend.items()))
        else:
            Png(drawn, f"map at step {step}", ["plot", "plot-map"])
        with solara.Card("Social network", classes=["panel-network"], elevation=0):
            graph = solara.use_memo(lambda: figures.network_png(frames, step, mode), [frames, step, mode])
            Png(graph, f"interaction graph at step {step}", ["plot", "plot-network"])


ALL_AGENTS = "all agents"


@solara.component
def SeriesPanel(frames: panels.Frames, step: int) -> None:
    """Interactive time series: hover for values, click a legend entry to pick a series, drag to
    zoom along the steps; one agent's own desires and emotions on request."""
    who, set_who = solara.use_state(ALL_AGENTS)
    who = who if who in frames.names else ALL_AGENTS
    drawn = solara.use_memo(
        lambda: [charts.series_chart(title, frame, step) for title, frame in (
            panels.time_series(frames, step) if who == ALL_AGENTS else panels.agent_series(frames, step, who)
        ).items()],
        [frames, step, who])
    with solara.Card("Time series", classes=["panel-series"]):
        solara.Select("agent", values=[ALL_AGENTS, *frames.names], value=who, on_value=set_who, dense=True,
                      classes=["series-agent"])
        if not drawn:
            solara.Text("Nothing recorded yet: run a step.")
        with solara.Div(classes=["chart-grid"]):
            for chart in drawn:
                with solara.Div(classes=["chart", "chart-series"]):
                    Chart(chart)


@solara.component
def HeatmapPanel(frames: panels.Frames, step: int) -> None:
    chart = solara.use_memo(lambda: charts.heatmap_chart(panels.interaction_counts(frames, step), step),
                            [frames, step])
    with solara.Card("Interaction heat map (rows initiate)", classes=["panel-heatmap"]):
        with solara.Div(classes=["chart", "chart-heatmap"]):
            Chart(chart)


def _structure_line(frames: panels.Frames, step: int) -> str:
    s = panels.society_structure(frames, step)
    cliques = "; ".join(", ".join(c) for c in s["cliques"]) or "none"
    return (f"Leader (most interaction partners, then interactions): "
            f"{s['leader'] or 'none (a tie at the top, or no interaction)'} · cliques (3+ agents who all "
            f"interacted): {cliques} · isolated: {', '.join(s['isolated']) or 'none'}")


def _society_data(frames: panels.Frames, step: int, view: str) -> tuple[pd.DataFrame, Any]:
    """The architecture view's table and chart (None when there is nothing to draw yet)."""
    if view == "itcmas":
        data = panels.matrix_ranks(frames, step)
        return data, None if data.empty else charts.rank_chart(data, step)
    if view == "asvo":
        data = panels.tom_predictions(frames, step)
        return data, None if data.empty else charts.tom_chart(data)
    return pd.DataFrame(), None


@solara.component
def SocietyPanel(frames: panels.Frames, step: int) -> None:
    """The architecture's own view: ITCMA-S's matrix and resources, ASVO's theory of mind beside
    the truth, CRSEC's norm databases with provenance; the society's structure for all."""
    view = panels.architecture_view(frames)
    agent, set_agent = solara.use_state("")
    data, chart = solara.use_memo(lambda: _society_data(frames, step, view), [frames, step])
    structure = solara.use_memo(lambda: _structure_line(frames, step), [frames, step])
    chosen = agent if agent in frames.names else ALL_AGENTS
    norms = solara.use_memo(  # (a hook is never called conditionally: the view may change on Reset)
        lambda: panels.norm_provenance(frames, step, None if chosen == ALL_AGENTS else chosen)
        if view == "crsec" else None, [frames, step, chosen, view])
    title = {"itcmas": "Matrix, resources and cliques", "asvo": "Theory of mind beside the truth",
             "crsec": "Norm databases and where each norm came from"}.get(view, "Society")
    with solara.Card(title, classes=["panel-society", f"view-{view}"]):
        solara.Text(structure, classes=["society-structure"],
                    style="font-size:13px;display:block;margin-bottom:16px")  # clear of the select's label
        if chart is not None:
            with solara.Div(classes=["chart", f"chart-{view}"]):
                Chart(chart)
        if view == "itcmas":
            if data.empty:
                solara.Text(panels.matrix_note(frames, step), classes=["matrix-note"])
            else:
                last = data[data["step"] == data["step"].max()].sort_values("rank")
                solara.Text(f"Matrix at step {int(last['step'].max())}", style="font-weight:bold")
                Table(last.to_dict("records"), ["rank", "agent", "change", "resources"], ["matrix-table"])
        elif view == "asvo":
            if data.empty:
                solara.Text("No theory-of-mind prediction recorded yet.")
            else:
                errors = (data.groupby(["observer", "target"], as_index=False)["error"].mean()
                          .round(3).sort_values("error"))
                solara.Text("Mean absolute error of each observer's predictions of each target",
                            style="font-weight:bold")
                Table(errors.to_dict("records"), ["observer", "target", "error"], ["tom-table"])
        elif view == "crsec":
            solara.Select("agent", values=[ALL_AGENTS, *frames.names], value=chosen, on_value=set_agent,
                          dense=True, classes=["norms-agent"])
            solara.Text(f"{len(norms)} norms ({int((norms['state'] == 'qualified').sum())} qualified)",
                        classes=["norms-count"])
            Table(norms.to_dict("records"), panels.NORM_PROVENANCE_COLUMNS, ["norm-provenance"])


def _section(title: str, text: str) -> None:
    solara.HTML(tag="div", unsafe_innerHTML=f"<b>{html.escape(title)}</b>: {html.escape(redact(text))}",
                style="font-size:13px;margin:2px 0")


@solara.component
def InspectorPanel(frames: panels.Frames, step: int) -> None:
    agent, set_agent = solara.use_state(frames.names[0] if frames.names else "")
    with solara.Card("Agent inspector", classes=["panel-inspector"]):
        info = solara.use_memo(lambda: panels.inspect_agent(frames, agent, step) if frames.names else {},
                               [frames, agent, step])
        if not frames.names:
            return
        solara.Select("agent", values=frames.names, value=agent, on_value=set_agent, dense=True)
        _section("Description", info.get("description", ""))
        if "area" in info:
            _section("Area", info["area"])
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
            Table(info["norms"], panels.NORM_COLUMNS, ["inspector-norms"])
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
    kinds = solara.use_memo(lambda: panels.event_kinds(frames), [frames])
    # the kinds switched off (not those on), so that a kind appearing later is shown
    hidden, set_hidden = solara.use_state(frozenset())
    text, set_text = solara.use_state("")
    shown = [k for k in kinds if k not in hidden]
    with solara.Card("Event log", classes=["panel-events"]):
        solara.SelectMultiple("kinds", values=shown, all_values=kinds, dense=True,
                              on_value=lambda on: set_hidden(frozenset(kinds) - set(on)))
        solara.InputText("filter (text or agent)", value=text, on_value=set_text, continuous_update=True,
                         classes=["event-filter"])
        log = solara.use_memo(lambda: panels.event_log(frames, step, kinds=shown, text=text),
                              [frames, step, tuple(shown), text])
        solara.Text(f"{len(log)} events")
        Table(log.to_dict("records"), panels.EVENT_COLUMNS, ["event-table"])


@solara.component
def ReportPanel(session: LiveSession | ReplaySession) -> None:
    """A replayed run's report.md: the findings the run's own report gives beside the paper's."""
    with solara.Card("Report", classes=["panel-report"]):
        if not session.replay:
            solara.Text("A live society has no report: `socialsim run` writes report.md when a run ends; open "
                        "its run directory under \"Replay a run\" to read it here.", classes=["report-none"])
        elif not session.report:
            solara.Text(f"{session.run_dir} has no report.md yet: a run writes it when it ends (a run still "
                        "running, or killed, has none).", classes=["report-none"])
        else:
            with solara.Div(classes=["report-text"], style="max-height:640px;overflow:auto;font-size:13px"):
                solara.HTML(unsafe_innerHTML=panels.report_html(session.report))  # no template: see report_html


@solara.component
def UsagePanel(frames: panels.Frames, step: int, totals: dict[str, float]) -> None:
    table = solara.use_memo(lambda: panels.usage_table(frames, step), [frames, step])
    with solara.Card("LLM usage", classes=["panel-usage"]):
        for _, note in panels.engine_notes(frames):
            solara.Warning(note, dense=True, classes=["engine-note"])  # each note begins with its engine's name
        solara.Text(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in totals.items()), classes=["usage-totals"])
        for note in frames.earlier:
            solara.Info(note, dense=True, classes=["usage-earlier"])
        Table(table.to_dict("records"), panels.USAGE_COLUMNS, ["usage-table"])


# --- controls --------------------------------------------------------------------------------------------


@solara.component
def ParameterControls(arch: str, values: dict[str, Any], on_change: Any) -> None:
    """One control per parameter of ``arch`` (``session.parameter_controls``), valued at the
    user's change or the declared default. A number typed out of range is refused with the
    message ``--set`` would give, and the last valid value is kept."""
    problem, set_problem = solara.use_state("")
    specs = solara.use_memo(lambda: parameter_controls(arch), [arch])
    if not specs:
        solara.Text(f"{arch} has no parameters", style="font-size:12px;color:#777")
        return

    def change(name: str, value: Any) -> None:
        typed, why = check_parameter(arch, name, value)
        set_problem(why)
        if not why:
            on_change(name, typed)

    solara.Text(f"{arch} parameters", style="font-weight:bold;font-size:13px")
    with solara.Column(style="max-height:320px;overflow-y:auto;padding-right:6px", classes=["param-list"]):
        for spec in specs:
            name = spec["name"]
            value = values.get(name, spec["default"])
            classes = ["param", f"param-{name}"]

            def on_value(v: Any, name: str = name) -> None:
                change(name, v)

            with solara.Tooltip(spec["help"] or name), solara.Div(classes=classes):
                if spec["widget"] == "checkbox":
                    solara.Checkbox(label=name, value=bool(value), on_value=on_value)
                elif spec["widget"] == "select":
                    solara.Select(name, values=spec["choices"], value=value, on_value=on_value, dense=True)
                elif spec["widget"] == "slider" and spec["kind"] == "int":  # the label shows the value
                    solara.SliderInt(f"{name}: {int(value)}", value=int(value), min=int(spec["low"]),
                                     max=int(spec["high"]), step=1, on_value=on_value, thumb_label=True)
                elif spec["widget"] == "slider":
                    solara.SliderFloat(f"{name}: {float(value):g}", value=float(value), min=float(spec["low"]),
                                       max=float(spec["high"]), step=spec["step"], on_value=on_value,
                                       thumb_label=True)
                elif spec["kind"] == "int":
                    solara.InputInt(name, value=int(value), on_value=on_value)
                elif spec["kind"] == "float":
                    solara.InputFloat(name, value=float(value), on_value=on_value)
                else:
                    solara.InputText(name, value=str(value), on_value=on_value)
    if problem:
        solara.Error(problem, dense=True, classes=["param-error"])


@solara.component
def Controls(session: Any, set_session: Any, cursor: int, set_cursor: Any, busy: bool, playing: bool,
             on_command: Any, current: Any, render_every: int = 1, set_render_every: Any = None) -> None:
    """Scenario, architecture, engine, seed, budget, parameters; Reset / Step / Play / Pause; replay.

    Laid out as Mesa's SolaraViz lays out its ``ModelController`` and ``UserInputs``. The
    parameters the user changed are kept per architecture, so switching architecture neither
    carries them over nor loses them; Reset builds only the chosen architecture's. Step, Play and
    Pause act on ``current.current``, the session of the latest Reset even before the page has
    re-rendered, so a click right after Reset is not sent to the society it replaced."""
    config = session.config
    scenario, set_scenario = solara.use_state(config.scenario)
    arch, set_arch = solara.use_state(config.arch or DEFAULT_ARCH)
    engine, set_engine = solara.use_state(config.model or "")
    seed, set_seed = solara.use_state(config.seed)
    max_calls, set_max_calls = solara.use_state(config.max_calls or 0)
    steps, set_steps = solara.use_state(config.steps or 0)
    interval, set_interval = solara.use_state(int(getattr(session, "play_interval_ms", PLAY_INTERVAL_MS)))
    default_arch = solara.use_memo(lambda: scenario_default_arch(scenario), [scenario])
    chosen = default_arch if arch == DEFAULT_ARCH else arch
    built_arch = config.arch or scenario_default_arch(config.scenario)
    changed, set_changed = solara.use_state({built_arch: dict(config.params)})
    run_dir, set_run_dir = solara.use_state(str(getattr(session, "run_dir", "")))
    # why the last Open failed, the runs inside the folder it was given (a sweep's, a reproduction's)
    # and, for a reproduction, the paper's findings as it checked them
    open_error, set_open_error = solara.use_state(("", (), None))
    reset_error, set_reset_error = solara.use_state("")
    scenarios = available_scenarios()
    mine = changed.get(chosen, {})

    def reset() -> None:
        why = check_parameters(chosen, mine)
        if why:  # never reached through the controls, which only keep valid values
            set_reset_error(why)
            return
        chosen_config = LiveConfig(scenario=scenario, arch=None if arch == DEFAULT_ARCH else arch,
                                   model=engine.strip() or None, seed=int(seed or 0), params=dict(mine),
                                   max_calls=int(max_calls) if max_calls else None, max_cost=config.max_cost,
                                   api_base=config.api_base, steps=int(steps) if steps and steps > 0 else None,
                                   play_interval_ms=int(interval), routes=dict(config.routes),
                                   call_options=dict(config.call_options))
        why = reset_problem(chosen_config)
        set_reset_error(why)
        if why:  # a typo in the model box: the society shown stays
            return
        new = LiveSession(chosen_config)
        new.start()
        set_session(new)

    def open_run(path: str | None = None) -> None:
        path = os.path.expanduser((run_dir if path is None else path).strip())  # ~/runs/x, as a shell reads it
        try:
            replay = ReplaySession(path)
        except Exception as exc:  # a wrong path or a damaged directory: say which
            # a folder of runs (NotARunDir): each listed by what tells it from the others
            inside = tuple(panels.run_choices(path, getattr(exc, "runs", ())).items())
            findings = panels.reproduction_findings(path) if inside else None
            set_open_error((redact(f"cannot open {path!r}: {exc}"), inside,
                            None if findings is None or findings.empty else findings))
            return
        set_open_error(("", (), None))
        set_cursor(replay.frames.steps_done)  # before the session, so the new slider starts at the end
        set_session(replay)

    # where Play stops and the budget take effect at once, as the play interval does (no Reset)
    def change_steps(value: int) -> None:
        set_steps(value)
        if not session.replay:
            current.current.set_length(int(value) if value and value > 0 else None)

    def change_max_calls(value: int) -> None:
        if value is not None and value < 0:
            set_reset_error(f"max LLM calls expects a whole number >= 0 (0: no limit), got {value}")
            return
        set_reset_error("")
        set_max_calls(value)
        if not session.replay:
            current.current.set_max_calls(int(value) if value else None)

    def command(action: Any) -> Any:
        def run() -> None:
            action()
            on_command()  # re-render now, not at the next poll
        return run

    with solara.Card("Society", classes=["panel-controls"]):
        with solara.Row(style="margin-bottom:12px"):
            solara.Button("Reset", on_click=reset, color="primary", classes=["btn-reset"])
            if not session.replay:
                # never disabled: a Step given while the society is built or stepping is queued
                solara.Button("Step", on_click=command(lambda: current.current.step(1)), classes=["btn-step"])
                # both always present and enabled (a button swapped or disabled between renders can lose
                # a click); Play while playing and Pause while idle do nothing, the state line says which
                solara.Button("Play", on_click=command(lambda: current.current.play()), classes=["btn-play"])
                solara.Button("Pause", on_click=command(lambda: current.current.pause()), classes=["btn-pause"],
                              color="warning")
        solara.Div(style="height:14px")  # the buttons' row would otherwise touch the first field's label
        if not session.replay:
            def change_interval(ms: int) -> None:  # takes effect from the next played step, no Reset
                set_interval(ms)
                current.current.play_interval_ms = ms

            with solara.Div(classes=["ctl-play-interval"]):
                solara.SliderInt(f"play interval: {interval} ms", value=interval, min=0, max=2000, step=50,
                                 on_value=change_interval, thumb_label=True)
            if set_render_every is not None:
                with solara.Div(classes=["ctl-render-interval"]):
                    solara.SliderInt(f"render interval: {render_every} steps", value=render_every, min=1, max=50,
                                     step=1, on_value=set_render_every, thumb_label=True)
        if reset_error:
            solara.Error(reset_error, dense=True, classes=["reset-error"])
        solara.Select("scenario", values=scenarios if scenario in scenarios else [scenario, *scenarios],
                      value=scenario, on_value=set_scenario, dense=True, classes=["ctl-scenario"])
        solara.Select("architecture", values=[DEFAULT_ARCH, *architectures()], value=arch, on_value=set_arch,
                      dense=True, classes=["ctl-arch"])
        if arch == DEFAULT_ARCH:
            solara.Text(f"scenario default: {default_arch}", style="font-size:12px;color:#777")
        solara.InputText("model / engine (litellm string, rules, local/smollm2)", value=engine, on_value=set_engine,
                         classes=["ctl-engine"])
        with solara.Row():
            solara.InputInt("seed", value=seed, on_value=set_seed, classes=["ctl-seed"])
            solara.InputInt("Play stops at step (0: scenario's)", value=steps, on_value=change_steps,
                            classes=["ctl-steps"])
        solara.InputInt("max LLM calls (0: no limit)", value=max_calls, on_value=change_max_calls,
                        classes=["ctl-max-calls"])
        ParameterControls(chosen, mine, lambda name, value: set_changed({**changed, chosen: {**mine, name: value}}))
    with solara.Card("Replay a run", classes=["panel-replay"]):
        # every keystroke reaches the state: a re-render (a poll, the society built) keeps what was typed
        solara.InputText("run directory", value=run_dir, on_value=set_run_dir, continuous_update=True,
                         classes=["run-dir"])
        solara.Button("Open", on_click=lambda: open_run(), classes=["btn-open"])
        message, inside, findings = open_error
        if message:
            solara.Error(message)
        if inside:  # above a reproduction's findings, which run to dozens of lines
            paths = dict(inside)

            def pick(label: str | None) -> None:  # the card is rebuilt for the replay, showing its path
                if label:
                    open_run(paths[label])

            solara.Select(f"open one of its {len(inside)} runs" if len(inside) > 1 else "open its run",
                          values=list(paths), value=None, on_value=pick,
                          dense=True, classes=["run-picker"])
        if findings is not None:  # the findings file is written by our code, but its texts are escaped all the same
            solara.Markdown("**The paper's findings, as this reproduction checked them** (`findings.csv`; `seeds`: "
                            "in how many seeds each holds on its own, `p`: the sign test)")
            Table(findings.to_dict("records"), list(findings.columns), classes=["reproduction-findings"])


# --- the page --------------------------------------------------------------------------------------------


@solara.component
def Page() -> None:
    first = solara.use_memo(initial_session, [])
    session, set_state = solara.use_state(first)
    current = solara.use_ref(first)  # the latest session, readable before the next render

    def set_session(new: Any) -> None:
        replaced = current.current
        if replaced is not new and not replaced.replay:
            replaced.pause()  # a replaced society must not go on playing, and paying, unseen
        current.current = new
        set_state(new)

    # a page closed or reloaded leaves no society playing behind it
    solara.use_effect(lambda: (lambda: None if current.current.replay else current.current.pause()), [])
    cursor, set_cursor = solara.use_state(session.frames.steps_done if session.replay else 0)
    tab, set_tab = solara.use_state(0)
    set_tick = solara.use_state(0)[1]
    ticks = solara.use_memo(lambda: itertools.count(1), [])  # a new value for each request: each re-renders
    renders = solara.use_ref(0)  # the page's completed renders, counted by the effect below
    solara.use_effect(lambda: setattr(renders, "current", renders.current + 1))  # after every render

    def rerender() -> None:
        set_tick(next(ticks))

    def poll(cancel) -> None:
        """Re-render when the worker's state changes (read off the page's thread, never waiting).

        At most one re-render is asked at a time: while playing, a step may finish faster than the
        page draws, and a render that is asked again before it completes starts over, so an
        unthrottled poll kept the page (and every click's answer) from ever being sent. The poll
        waits for a render to complete, counted, not for its own request's value to be shown: a
        click asks too, and when a click's time was taken before the poll's and set after it, the
        page's last value stayed "older" than the poll's and the poll never asked again."""
        seen, asked_at = None, None
        while not cancel.is_set():
            now = worker_state(session)
            if now != seen and (asked_at is None or renders.current > asked_at):
                seen, asked_at = now, renders.current
                rerender()
            time.sleep(POLL_SECONDS)

    solara.use_thread(poll, dependencies=[session], intrusive_cancel=False)

    render_every, set_render_every = solara.use_state(1)
    drawn = solara.use_ref((None, None))  # (session, the snapshot the panels last drew): the render interval

    # the worker's state is read before its frames: the worker stores a step's frames before it stops
    # being busy, so a render that says "idle" shows the last step (read the other way round, a render
    # could say "idle" beside the step before, until the next poll redrew it)
    busy, playing = session.busy, session.playing
    latest = session.frames
    before = drawn.current[1] if drawn.current[0] is session else None  # never another society's frames
    frames = latest if session.replay else frames_to_draw(before, latest, playing, render_every)
    drawn.current = (session, frames)
    done = latest.steps_done if latest is not None else 0
    step = min(max(cursor, 1), done) if session.replay else (frames.steps_done if frames is not None else 0)
    totals = solara.use_memo(lambda: panels.usage_totals(frames, step) if frames is not None else {}, [frames, step])
    # named before the society is built too ("(scenario default)" left it blank); loaded once per society
    built_arch = solara.use_memo(lambda: session.config.arch or scenario_default_arch(session.config.scenario), [session])

    solara.Title("socialsim dashboard")
    solara.Style(CSS)
    with solara.AppBar():
        solara.AppBarTitle(children=["socialsim"])
    with solara.Sidebar():
        # a replay's controls are rebuilt from its recorded settings; a live Reset keeps the same
        # controls (and buttons), so the user's choices stay and a click during the swap is not lost
        key = f"controls-{id(session)}" if session.replay else "controls-live"
        Controls(session, set_session, cursor, set_cursor, busy=busy, playing=playing,
                 on_command=rerender, current=current, render_every=render_every,
                 set_render_every=set_render_every).key(key)
    with solara.Column(style="padding:4px 8px"):
        mode = f"replay of {session.run_dir}" if session.replay else "live"
        label = f"Step {step} of {done}" if session.replay else f"Step {done}"
        arch = frames.arch if frames is not None else built_arch
        solara.Text(f"{label} · {session.config.scenario} · {arch} · {mode}", classes=["step-counter"],
                    style="font-size:18px;font-weight:bold")
        if session.replay and done > 0:
            # at the top, so the scrubber is in view with any tab at 1280x800
            with solara.Div(classes=["replay-scrubber"]):
                solara.SliderInt("replay step", value=step, min=1, max=done, on_value=set_cursor, thumb_label=True)
        if not session.replay:
            state = "playing" if playing else ("stepping" if busy else "idle")
            drawing = f" · plots show step {step} (render interval {render_every})" if step != done else ""
            solara.Text(f"{state} · Play stops at step {session.length}{drawing}", classes=["run-state"],
                        style="font-size:12px;color:#555")
        if busy:
            solara.ProgressLinear(True)
            solara.Text(session.progress(), classes=["progress-text"])
        if getattr(session, "ending", ""):  # a replayed run stopped, killed, still written, or itself a replay
            solara.Warning(session.ending, dense=True, classes=["replay-ending"])
        if getattr(session, "stop_reason", ""):
            solara.Info(session.stop_reason, dense=True, classes=["stop-reason"])
        if session.replay and (missing := missing_note(session.frames)):
            solara.Warning(missing, dense=True, classes=["replay-missing"])
        if session.error:
            solara.Error(f"{session.error_title}: {session.error}", classes=["session-error"])
        if frames is None:
            if not session.error:  # a build that failed says so above, and builds nothing more
                solara.Text("Building the society…")
            return
        solara.Text(" · ".join(f"{k.replace('_', ' ')}: {v}" for k, v in totals.items()), classes=["usage-live"],
                    style="font-size:12px")
        with solara.lab.Tabs(value=tab, on_value=set_tab, lazy=True):
            with solara.lab.Tab("Map", classes=["tab-map"]):
                MapPanel(frames, step)
            with solara.lab.Tab("Time series", classes=["tab-series"]):
                SeriesPanel(frames, step)
            with solara.lab.Tab("Interactions", classes=["tab-interactions"]):
                HeatmapPanel(frames, step)
            with solara.lab.Tab(SOCIETY_TAB.get(panels.architecture_view(frames), "Society"), classes=["tab-society"]):
                SocietyPanel(frames, step)
            with solara.lab.Tab("Agents", classes=["tab-agents"]):
                InspectorPanel(frames, step)
            with solara.lab.Tab("Events", classes=["tab-events"]):
                EventLogPanel(frames, step)
            with solara.lab.Tab("LLM usage", classes=["tab-usage"]):
                UsagePanel(frames, step, totals)  # the page's totals for the same frames and step
            with solara.lab.Tab("Report", classes=["tab-report"]):
                ReportPanel(session)


SOCIETY_TAB = {"itcmas": "Matrix & cliques", "asvo": "Theory of mind", "crsec": "Norms"}

CSS = """
.chart-grid { display: flex; flex-wrap: wrap; gap: 8px; }
.chart { overflow-x: auto; max-width: 100%; }
.plot { max-width: 100%; height: auto; }
.usage-table, .event-table, .inspector-norms, .inspector-memory { overflow: auto; }
/* every tab in view at 1280x800: overflowing tabs get Vuetify's arrows, which cover the first tab */
.v-tab { min-width: 0 !important; padding: 0 10px !important; letter-spacing: normal !important; }
"""
