"""The data each dashboard panel draws, as pure functions of recorded frames.

A live model and a finished run directory are turned into the same ``Frames`` (DataCollector
frames, tables, the LLM ledger, the map layout), so every panel works the same way while a
society runs and while a run is replayed, and can be tested without a browser. Panels read only
columns and tables that exist: an architecture that records no desires simply has no desire
plot, and one without a world is drawn as its social network.
"""

from __future__ import annotations

import base64
import json
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import pandas as pd

from socialsim.llm.engines import engine_note
from socialsim.llm.redact import cut, redact
from socialsim.model.run_dir import NotARunDir, recorded_scenario

# --- frames ---------------------------------------------------------------------------------------


@dataclass(eq=False)  # compared by identity: the page redraws a panel only for new frames
class Frames:
    """Everything the panels draw, up to the last completed step."""

    scenario: str
    arch: str
    engines: list[str]
    model: pd.DataFrame  # one row per completed step, column "step"
    agents: pd.DataFrame  # one row per agent and step: step, AgentID, name, ...
    tables: dict[str, pd.DataFrame]
    calls: pd.DataFrame  # the ledger: one row per decision (LLM, tape or rule)
    failures: dict[str, int]
    names: list[str]
    descriptions: dict[str, str]
    areas: list[dict] = field(default_factory=list)  # name, x, y, width, height, kind
    furniture: list[dict] = field(default_factory=list)  # name, area, x, y
    ties: list[tuple[str, str]] = field(default_factory=list)  # social-network scenarios
    live: dict[str, dict] = field(default_factory=dict)  # per agent, captured at the last step
    tape: list[dict] = field(default_factory=list)  # recorded LLM calls (replay)
    status: str = ""
    settings: dict[str, Any] = field(default_factory=dict)  # the architecture's, where known (ITCMA-S's matrix)
    missing: list[str] = field(default_factory=list)  # a replayed run's files that config.json says it recorded
    earlier: list[str] = field(default_factory=list)  # calls a live society's rebuilt ledger no longer holds

    @property
    def steps_done(self) -> int:
        return int(self.model["step"].max()) if not self.model.empty else 0


def _agent_frame(df: pd.DataFrame) -> pd.DataFrame:
    """DataCollector agent frames use Step/AgentID; panels use a plain 'step' column."""
    if df.empty:
        return pd.DataFrame(columns=["step", "AgentID", "name"])
    df = df.reset_index() if not isinstance(df.index, pd.RangeIndex) else df.copy()
    return df.rename(columns={"Step": "step"})


def _layout(world: Any, social: Any, names: list[str]) -> tuple[list[dict], list[dict], list[tuple[str, str]]]:
    areas, furniture, ties = [], [], []
    if world is not None:
        areas = [{"name": a.name, "x": a.x, "y": a.y, "width": a.width, "height": a.height, "kind": a.kind}
                 for a in world.areas.values()]
        furniture = [{"name": f.name, "area": f.area, "x": f.coordinate[0], "y": f.coordinate[1]}
                     for f in world.furniture.values()]
    if social is not None:
        graph = social.graph
        label = nx.get_node_attributes(graph, "name")
        ties = [(label.get(u, str(u)), label.get(v, str(v))) for u, v in graph.edges()]
    return areas, furniture, ties


def effective_settings(model: Any) -> dict[str, Any]:
    """The settings a built model runs with (its architecture's shared state), if it has any."""
    shared = model.society
    for attr in ("settings", "config"):
        value = getattr(shared, attr, None)
        if hasattr(value, "model_dump"):
            return value.model_dump()
    return {}


def recorded_settings(arch: str, spec: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The settings a recorded run ran with, rebuilt as the model builds them: ITCMA-S's from the
    scenario's itcmas section and the recorded parameters (the panels need its ``matrix_every``);
    for the others, the recorded parameters."""
    if arch == "itcmas":
        from socialsim.agents.itcmas.settings import load_config

        return load_config(spec.itcmas, params).model_dump()
    return dict(params)


def frames_from_model(model: Any, status: str = "") -> Frames:
    """Frames of a live SocietyModel (call it between steps, never during one)."""
    dc = model.datacollector
    names = [a.name for a in sorted(model.agents, key=lambda a: a.unique_id)]
    areas, furniture, ties = _layout(model.world, model.social, names)
    routes = getattr(model.llm, "routes", None)
    engines = sorted(routes.models()) if routes is not None else []
    return Frames(
        scenario=model.scenario_spec.name,
        arch=model.arch,
        engines=engines,
        model=dc.get_model_vars_dataframe().copy(),
        agents=_agent_frame(dc.get_agent_vars_dataframe()),
        tables={name: dc.get_table_dataframe(name) for name in dc.tables},
        calls=model.llm.ledger.frame(),
        failures=dict(model.llm.ledger.failures),
        names=names,
        descriptions={a.name: a.description for a in model.agents},
        areas=areas,
        furniture=furniture,
        ties=ties,
        live={a.name: live_details(a) for a in model.agents},
        status=status,
        settings=effective_settings(model),
    )


def frames_from_run(run_dir: str | Path) -> Frames:
    """Frames of a finished run directory, read from its files: no model is stepped and no LLM
    is called. The map layout is rebuilt from the scenario (it does not depend on the seed)."""
    from socialsim.model.steplog import frame_reader
    from socialsim.scenarios.loader import load_scenario
    from socialsim.spaces.social_network import SocialNetworkWorld
    from socialsim.spaces.world import World

    run_dir = Path(run_dir)
    meta = run_meta(run_dir)
    config = meta["config"]
    reader = frame_reader(run_dir)  # a killed run's, or a running run's, complete steps too

    def read(path: Path) -> pd.DataFrame:
        try:
            return reader(path)
        except Exception as exc:  # a file cut short or overwritten: name it, not pyarrow's internals
            raise DamagedRun(f"{path} cannot be read ({type(exc).__name__}: {exc})") from exc

    spec = load_scenario(recorded_scenario(run_dir, config["scenario"]))  # else the run's own copy
    names = [a.name for a in spec.agents]
    world = World(spec.map, random.Random(0)) if spec.map else None
    social = SocialNetworkWorld(spec.network, names, random.Random(0)) if spec.network else None
    areas, furniture, ties = _layout(world, social, names)

    tables = {p.stem: read(p) for p in sorted((run_dir / "tables").glob("*.parquet"))}
    tape = []
    if (run_dir / "tape.jsonl").is_file():
        for line in (run_dir / "tape.jsonl").read_text(encoding="utf-8").splitlines():
            try:
                tape.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a torn last line of a killed run
    engines = sorted({config.get("model") or "", *config.get("routes", {}).values()} - {""})
    arch = config.get("arch") or spec.default_arch
    model = read(run_dir / "model.parquet")
    return Frames(
        scenario=spec.name,
        arch=arch,
        engines=engines,
        model=model,
        agents=_agent_frame(read(run_dir / "agents.parquet")),
        tables=tables,
        calls=read(run_dir / "llm_calls.parquet"),
        failures=dict(meta.get("failures_by_operation", {})),
        names=names,
        descriptions={a.name: a.description for a in spec.agents},
        areas=areas,
        furniture=furniture,
        ties=ties,
        tape=tape,
        status=meta.get("status", ""),
        settings=recorded_settings(arch, spec, dict(config.get("arch_params") or {})),
        missing=missing_files(run_dir, meta, arch, model),
    )


class DamagedRun(ValueError):
    """A run directory whose config.json or a recorded frame cannot be read; the message names the file."""


def run_meta(run_dir: Path) -> dict:
    """A run directory's config.json, read and checked: NotARunDir without one, DamagedRun naming it
    when it is cut short, not JSON, or lacks the run's configuration and scenario."""
    meta_path = run_dir / "config.json"
    if not meta_path.is_file():
        raise NotARunDir(run_dir)
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DamagedRun(f"{meta_path} is damaged (cut short, or not JSON: {exc})") from None
    config = meta.get("config") if isinstance(meta, dict) else None
    if not isinstance(config, dict) or not config.get("scenario"):
        raise DamagedRun(f"{meta_path} is damaged: it has no 'config' section naming the run's scenario")
    return meta


def missing_files(run_dir: Path, meta: dict, arch: str, model: pd.DataFrame) -> list[str]:
    """What config.json says the run recorded but its directory lacks: the frames of its complete
    steps (``steps_done``) and the architecture's tables. A run with no complete step lacks nothing."""
    from socialsim.agents import agent_class

    steps = int(meta.get("steps_done") or 0)
    if steps == 0:
        return []
    missing = [f"{name} (config.json records {steps} complete steps)"
               for name in ("model.parquet", "agents.parquet", "llm_calls.parquet") if not (run_dir / name).is_file()]
    if (run_dir / "model.parquet").is_file() and len(model) < steps:
        missing.append(f"steps {len(model) + 1}-{steps} of model.parquet (it holds {len(model)} of the "
                       f"{steps} complete steps config.json records)")
    try:
        tables = ["events", "interactions", *agent_class(arch).tables()]
    except Exception:  # an architecture no longer installed: its tables are not known
        tables = ["events", "interactions"]
    missing += [f"tables/{name}.parquet" for name in tables if not (run_dir / "tables" / f"{name}.parquet").is_file()]
    return missing


# --- live agent state -------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    return value


def live_details(agent: Any) -> dict:
    """What the inspector shows of a live agent, read from whichever attributes its architecture
    has (desires for ASVO, PAD/driver/resources for ITCMA-S). CRSEC's norm database is read from its
    recorded changes, live and replayed alike (``norm_database``)."""
    out: dict[str, Any] = {}
    if getattr(agent.model, "world", None) is not None and getattr(agent, "cell", None) is not None:
        out["area"] = agent.area
    if getattr(agent, "svo", None):
        out["svo"] = str(agent.svo)
    state = getattr(agent, "state", None)
    if state is not None and isinstance(getattr(state, "values", None), dict):
        out["desires"] = {k: _plain(v) for k, v in state.values.items()}
    emotion = getattr(agent, "emotion", None)
    if emotion is not None:
        out["emotions"] = {k: _plain(getattr(emotion, k)) for k in ("P", "A", "D", "driver") if hasattr(emotion, k)}
    if isinstance(getattr(agent, "resources", None), int | float):
        out["resources"] = _plain(agent.resources)
    memory = list(getattr(agent, "memory", []) or [])
    consciousness = getattr(agent, "consciousness", None)
    if not memory and consciousness is not None:
        memory = [str(m) for m in list(getattr(consciousness, "long_term", []))[-10:]]
    out["memory"] = [str(m) for m in memory]
    out["last_thought"] = str(getattr(agent, "last_thought", "") or "")
    out["last_action"] = str(getattr(agent, "last_action", "") or "")
    outcome = getattr(agent, "last_outcome", None)
    if outcome is not None and getattr(agent.model, "world", None) is not None:  # no world, nothing refuses
        out["outcome"] = outcome_text(outcome.ok, outcome.reason, getattr(agent, "last_status", ""))
    return out


def outcome_text(ok: bool, reason: str = "", status: str = "") -> str:
    """What became of an agent's last action, worded the same live and replayed. ITCMA-S records its
    own ``status``: done, filtered (LTRHA stopped it), failed (too few resources) or refused (by the world)."""
    if status == "done" or (not status and ok):
        return "ok"
    if status == "filtered":
        return "filtered by LTRHA"
    reason = "" if pd.isna(reason) else str(reason)
    return f"{status or 'refused'}: {reason}" if reason else (status or "refused")


# --- helpers ----------------------------------------------------------------------------------------


def upto(df: pd.DataFrame, step: int) -> pd.DataFrame:
    """Rows recorded at or before ``step`` (tables and frames all carry a 'step' column)."""
    if df is None or df.empty or "step" not in df.columns:
        return pd.DataFrame() if df is None else df
    return df[df["step"] <= step]


def agents_at(frames: Frames, step: int) -> pd.DataFrame:
    """One row per agent at the latest recorded step not after ``step``, indexed by name."""
    df = upto(frames.agents, step)
    if df.empty:  # before the first step: where the live agents stand
        rows = pd.DataFrame(index=pd.Index(frames.names, name="name"))
        areas = {n: d["area"] for n, d in frames.live.items() if d.get("area")}
        if areas:
            rows["area"] = pd.Series(areas)
        return rows
    last = df[df["step"] == df["step"].max()]
    return last.set_index("name")


def desire_label(column: str) -> str:
    """'desire_sense_of_control' -> 'sense of control' (the desire's own name)."""
    return column.removeprefix("desire_").replace("_", " ") if column.startswith("desire_") else column


def _numeric(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce")


def _as_dict(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return {}
    return {}


# --- map and colours ---------------------------------------------------------------------------------

SVO_COLOURS = {"altruistic": "#2e7d32", "prosocial": "#66bb6a", "individualistic": "#ffa726",
               "competitive": "#e53935"}
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf"]


QUALIFIED_NORMS = "qualified norms held"


def colour_modes(frames: Frames) -> list[str]:
    """The colourings the recorded columns allow."""
    cols = set(frames.agents.columns)
    modes = ["area"] if "area" in cols else []
    if "svo" in cols:
        modes.append("SVO")
    if "P" in cols:
        modes.append("emotion (pleasure)")
    if "qualified_norms" in cols:  # every qualified norm held, a contrary one too: not adoption of a tracked norm
        modes.append(QUALIFIED_NORMS)
    return modes or ["agent"]


def _ramp(value: float, low: float, high: float) -> str:
    """Red (low) -> grey -> green (high)."""
    t = 0.5 if high <= low else min(1.0, max(0.0, (value - low) / (high - low)))
    if t < 0.5:
        r, g, b = 214, int(39 + (189 - 39) * t * 2), int(40 + (189 - 40) * t * 2)
    else:
        r, g, b = int(189 - (189 - 44) * (t - 0.5) * 2), int(189 - (189 - 160) * (t - 0.5) * 2), int(189 - (189 - 44) * (t - 0.5) * 2)
    return f"#{r:02x}{g:02x}{b:02x}"


def agent_colours(frames: Frames, step: int, mode: str) -> tuple[dict[str, str], dict[str, str]]:
    """(agent -> colour, legend label -> colour) for a colouring mode."""
    rows = agents_at(frames, step)
    colours: dict[str, str] = {}
    legend: dict[str, str] = {}
    if mode == "SVO" and "svo" in rows:
        for name, svo in rows["svo"].items():
            colours[name] = SVO_COLOURS.get(str(svo), "#9e9e9e")
            legend[str(svo)] = colours[name]
    elif mode.startswith("emotion") and "P" in rows:
        for name, p in _numeric(rows["P"]).items():
            colours[name] = _ramp(0.0 if pd.isna(p) else float(p), -1.0, 1.0)
        legend = {"unpleasant (P=-1)": _ramp(-1, -1, 1), "neutral": _ramp(0, -1, 1), "pleasant (P=+1)": _ramp(1, -1, 1)}
    elif mode == QUALIFIED_NORMS and "qualified_norms" in rows:
        counts = _numeric(rows["qualified_norms"]).fillna(0)
        high = max(1.0, float(counts.max()))
        for name, n in counts.items():
            colours[name] = _ramp(float(n), 0.0, high)
        legend = {"no qualified norm": _ramp(0, 0, 1), f"{int(high)} qualified norms": _ramp(1, 0, 1)}
    elif mode == "area" and "area" in rows:
        areas = [a["name"] for a in frames.areas] or sorted(rows["area"].dropna().unique())
        by_area = {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(areas)}
        colours = {name: by_area.get(area, "#9e9e9e") for name, area in rows["area"].items()}
        legend = {a: c for a, c in by_area.items() if a in set(rows["area"])}
    for i, name in enumerate(frames.names):
        colours.setdefault(name, PALETTE[i % len(PALETTE)] if mode == "agent" else "#9e9e9e")
    return colours, legend


def map_positions(frames: Frames, step: int) -> dict[str, tuple[float, float]]:
    """Where each agent is drawn: in its recorded area, agents spread over the area's cells in
    name order (so the same step always looks the same, live or replayed)."""
    rows = agents_at(frames, step)
    if "area" not in rows or not frames.areas:
        return {}
    positions: dict[str, tuple[float, float]] = {}
    rects = {a["name"]: a for a in frames.areas}
    for area, group in rows.groupby("area"):
        rect = rects.get(area)
        if rect is None:
            continue
        members = sorted(group.index)
        # every other cell when the area has room (labels stay readable), else every cell
        gap = 2 if -(-len(members) // max(1, rect["width"] // 2)) * 2 <= rect["height"] - 1 else 1
        cols = max(1, rect["width"] // gap)
        for k, name in enumerate(members):
            # fill the area's lower rows first (furniture sits on its first row)
            col, row = k % cols, (k // cols) % max(1, rect["height"] // gap)
            positions[name] = (rect["x"] + col * gap + 0.5, rect["y"] + rect["height"] - 1 - row * gap + 0.5)
    return positions


# --- interactions --------------------------------------------------------------------------------------


def interaction_counts(frames: Frames, step: int) -> pd.DataFrame:
    """Initiator x receiver interaction counts up to ``step`` (rows initiate), every agent listed."""
    df = upto(frames.tables.get("interactions", pd.DataFrame()), step)
    matrix = pd.DataFrame(0, index=frames.names, columns=frames.names, dtype=int)
    if not df.empty:
        counts = df.groupby(["initiator", "receiver"]).size()
        for (a, b), n in counts.items():
            if a in matrix.index and b in matrix.columns:
                matrix.loc[a, b] = int(n)
    return matrix


def interaction_graph(frames: Frames, step: int) -> nx.DiGraph:
    """The interaction graph up to ``step``: edge weight = number of interactions."""
    graph = nx.DiGraph()
    graph.add_nodes_from(frames.names)
    matrix = interaction_counts(frames, step)
    for a in matrix.index:
        for b in matrix.columns:
            if matrix.loc[a, b] > 0:
                graph.add_edge(a, b, weight=int(matrix.loc[a, b]))
    return graph


# --- time series ---------------------------------------------------------------------------------------

NORM_EVENTS = ("conflicts", "norm_thoughts", "norm_chats", "unheard_chats", "syntheses", "breaches")
MODEL_GROUPS = [
    ("Norm adoption (share of agents)", lambda c: c.startswith("adoption[")),
    ("Norm compliance (share of agents)", lambda c: c.startswith("compliance[")),
    ("Norm compliance in plans (share of agents)", lambda c: c.startswith("plan_compliance[")),
    ("Norm compliance in actions (share of agents)", lambda c: c.startswith("action_compliance[")),
    ("Norm compliance among the agents who acted on the norm (share of them; no point where nobody did)",
     lambda c: c.startswith("acting_compliance[")),
    ("Conflicts and norm events", lambda c: c in NORM_EVENTS),
    ("Conflicts and norm events so far (running totals)", 
     lambda c: c.endswith("_total") and c.removesuffix("_total") in NORM_EVENTS),
    ("Cooperation and competition (share of actions, quasi- at half weight)",
     lambda c: c in ("cooperation_rate", "competition_index", "cooperation_rate_run", "competition_index_run",
                     "cooperation_rate_simulated", "competition_index_simulated", "cooperation_rate_run_simulated",
                     "competition_index_run_simulated", "self_declared_run")),
    ("Theory of mind: mean absolute error of predicted desires (0-10 scale)", lambda c: c == "tom_error"),
    ("Society (ITCMA-S)", lambda c: c in ("filtered_actions", "truncated_protentions", "resources_total",
                                          "memory_total", "matrix_runs")),
]
# the LLM ledger's running totals (every architecture records them), drawn per step
USAGE_GROUPS = [
    ("LLM decisions per step", ("llm_calls", "rule_decisions", "fallbacks", "llm_failures")),
    ("LLM tokens per step", ("prompt_tokens", "completion_tokens")),
    ("LLM cost (USD) and latency (seconds) per step", ("cost_usd", "llm_latency_s")),
]
# whatever else a run records (a plug-in's reporter, an architecture's counts): nothing recorded goes undrawn
OTHER_TITLE = "Other recorded values"
AGENT_GROUPS = [
    ("Desires (mean over agents)", lambda c: c.startswith("desire_")),
    ("Emotion P/A/D (mean over agents)", lambda c: c in ("P", "A", "D")),
]
PER_AGENT = [("Driver (per agent)", "driver"), ("Resources (per agent)", "resources")]
# ITCMA-S's locale topic (LTRHA eq. 17): the mood of the agents in an area, from -1 to 1
TOPIC_TITLE = "Topic per area (mean of pleasure x (arousal + 1) / 2 of the agents there)"


def time_series(frames: Frames, step: int | None = None) -> dict[str, pd.DataFrame]:
    """Plot groups (title -> frame indexed by step, one column per line) from whatever the run
    recorded: per-norm adoption and compliance, conflicts, cooperation, mean desires and P/A/D,
    per-agent driver and resources, topic per area, LLM usage per step, and any other number
    the model recorded (a plug-in's reporter included) under "Other recorded values"."""
    step = frames.steps_done if step is None else step
    out: dict[str, pd.DataFrame] = {}
    model = upto(frames.model, step)
    if not model.empty:
        model = model.set_index("step")
        drawn: set[str] = set()
        for title, pick in MODEL_GROUPS:
            cols = [c for c in model.columns if c not in drawn and pick(c)]
            if cols:
                out[title] = model[cols].apply(_numeric)
                drawn.update(cols)
        if "topics" in model:
            drawn.add("topics")
            topics = pd.DataFrame([_as_dict(v) for v in model["topics"]], index=model.index)
            if not topics.empty and len(topics.columns):
                out[TOPIC_TITLE] = topics.apply(_numeric)
        for title, columns in USAGE_GROUPS:
            usage = [c for c in columns if c in model]
            if usage:
                cumulative = model[usage].apply(_numeric)
                out[title] = cumulative.diff().fillna(cumulative)
                drawn.update(usage)
        other = [c for c in model.columns if c not in drawn and pd.api.types.is_numeric_dtype(model[c])
                 and not pd.api.types.is_bool_dtype(model[c])]
        if other:
            out[OTHER_TITLE] = model[other].apply(_numeric)
    agents = upto(frames.agents, step)
    if not agents.empty:
        for title, pick in AGENT_GROUPS:
            cols = [c for c in agents.columns if pick(c)]
            if cols:
                means = agents[["step", *cols]].copy()
                means[cols] = means[cols].apply(_numeric)
                frame = means.groupby("step")[cols].mean().dropna(axis=1, how="all")  # e.g. desires outside the pool
                if not frame.empty and len(frame.columns):
                    out[title] = frame.rename(columns=desire_label)
        for title, col in PER_AGENT:
            if col in agents and _numeric(agents[col]).notna().any():
                wide = agents.assign(**{col: _numeric(agents[col])}).pivot_table(index="step", columns="name", values=col)
                out[title] = wide
    return out


# --- event log -----------------------------------------------------------------------------------------


def _event_rows(frames: Frames) -> Iterable[dict]:
    t = frames.tables
    events = t.get("events", pd.DataFrame())
    for r in events.to_dict("records"):
        kind = "chat" if r.get("verb") == "chat with" and r.get("ok") else ("refused" if not r.get("ok") else "action")
        text = r.get("action", "")
        if not r.get("ok"):
            text += f" (refused: {r.get('reason', '')})"
        yield {"step": r["step"], "kind": kind, "agent": r.get("agent", ""), "text": text}
    for r in t.get("thoughts", pd.DataFrame()).to_dict("records"):
        yield {"step": r["step"], "kind": "thought", "agent": r.get("agent", ""), "text": r.get("thought", "")}
    spoken = "verb" in events and bool((events["verb"] == "chat with").any())  # each heard line already an event
    for r in t.get("conversations", pd.DataFrame()).to_dict("records"):
        # a conversation its receiver did not hear (CRSEC's conversations_heard cap) never reached the world
        heard = bool(r.get("heard", True))
        if spoken and heard:
            continue
        speaker = r.get("speaker", r.get("sender", ""))
        addressee = r.get("receiver", "") if speaker == r.get("sender") else r.get("sender", "")  # the other party
        yield {"step": r["step"], "kind": "chat" if heard else "unheard chat", "agent": speaker,
               "text": f"to {addressee}: {r.get('text', '')}"}
    for r in t.get("filtered_actions", pd.DataFrame()).to_dict("records"):
        yield {"step": r["step"], "kind": "filtered action", "agent": r.get("agent", ""), "text": r.get("action", "")}
    for r in t.get("itcmas_actions", pd.DataFrame()).to_dict("records"):
        if r.get("status") == "failed":  # never reached the world: only ITCMA-S's own table holds it
            yield {"step": r["step"], "kind": "failed action", "agent": r.get("agent", ""),
                   "text": f"{r.get('action', '')} (failed: {r.get('reason', '')})"}
    for r in t.get("norm_changes", pd.DataFrame()).to_dict("records"):
        yield {"step": r["step"], "kind": "norm change", "agent": r.get("agent", ""),
               "text": f"norm {r.get('norm_id')} {r.get('event', '')} [{r.get('state', '')}]: {r.get('content', '')}"}
    for r in t.get("breaches", pd.DataFrame()).to_dict("records"):
        yield {"step": r["step"], "kind": "norm breach", "agent": r.get("agent", ""),
               "text": f"{r.get('behaviour', '')} in {r.get('area', '')} breaks '{r.get('norm', '')}'"}
    for r in t.get("asvo_reflections", pd.DataFrame()).to_dict("records"):
        yield {"step": r["step"], "kind": "thought", "agent": r.get("agent", ""),
               "text": f"on {r.get('desire', '')}: {r.get('reflection', '')}"}
    if events.empty and "action" in frames.agents:  # social networks have no world events
        for r in frames.agents.to_dict("records"):
            if isinstance(r.get("action"), str) and r["action"]:
                yield {"step": r["step"], "kind": "action", "agent": r.get("name", ""), "text": str(r["action"])}
    if "thought" in frames.agents and "thoughts" not in t:
        for r in frames.agents[["step", "name", "thought"]].to_dict("records"):
            if isinstance(r["thought"], str) and r["thought"]:
                yield {"step": r["step"], "kind": "thought", "agent": r["name"], "text": str(r["thought"])}


EVENT_COLUMNS = ["step", "kind", "agent", "text"]


def event_log(frames: Frames, step: int, kinds: Iterable[str] | None = None, text: str = "",
              agent: str | None = None) -> pd.DataFrame:
    """Thoughts, chats, actions, refused, failed and filtered actions and norm changes up to ``step``,
    newest first, filtered by kind, agent and a case-insensitive text match."""
    df = pd.DataFrame(list(_event_rows(frames)), columns=EVENT_COLUMNS)
    df = df[df["step"] <= step]
    if kinds is not None:
        df = df[df["kind"].isin(list(kinds))]
    if agent:
        df = df[df["agent"] == agent]
    if text:
        needle = text.lower()
        df = df[df["text"].str.lower().str.contains(needle, regex=False) | df["agent"].str.lower().str.contains(needle, regex=False)]
    df = df.assign(text=df["text"].map(lambda s: redact(str(s))), step=df["step"].astype(int))
    return df.sort_values("step", ascending=False, kind="stable").reset_index(drop=True)


def event_kinds(frames: Frames) -> list[str]:
    return sorted({r["kind"] for r in _event_rows(frames)})


# --- LLM usage -----------------------------------------------------------------------------------------

USAGE_COLUMNS = ["module", "op", "model", "decisions", "llm_calls", "prompt_tokens", "completion_tokens",
                 "cost_usd", "repaired", "fallbacks", "truncated", "failures"]


def usage_table(frames: Frames, step: int) -> pd.DataFrame:
    """Calls, tokens, cost, repairs, fallbacks, replies cut at max_tokens and failures per
    operation up to ``step``."""
    # at the latest step, every call the run made: also those of a step a budget cut short and of an
    # end-of-run measurement, which no complete step holds
    df = frames.calls if step >= frames.steps_done else upto(frames.calls, step)
    if df.empty:
        return pd.DataFrame(columns=USAGE_COLUMNS)
    df = df.assign(llm=df["engine"] != "rules", failed=df["error"].notna() & (df["error"].astype(str) != ""))
    if "truncated" not in df:  # a run recorded before replies cut at max_tokens were counted
        df = df.assign(truncated=0)
    table = df.groupby(["module", "op", "model"], as_index=False).agg(
        decisions=("op", "size"),
        llm_calls=("calls", "sum"),
        prompt_tokens=("prompt_tokens", "sum"),
        completion_tokens=("completion_tokens", "sum"),
        cost_usd=("cost_usd", "sum"),
        repaired=("status", lambda s: int((s == "repaired").sum())),
        fallbacks=("status", lambda s: int((s == "fallback").sum())),
        truncated=("truncated", "sum"),
        failures=("failed", "sum"),
    )
    if step >= frames.steps_done and frames.failures:
        # the ledger's own failure count (parse, validation and provider errors, repairs included)
        table["failures"] = [max(int(f), int(frames.failures.get(op, 0))) for op, f in zip(table["op"], table["failures"], strict=False)]
    table["cost_usd"] = table["cost_usd"].round(6)
    return table[USAGE_COLUMNS]


def usage_totals(frames: Frames, step: int) -> dict[str, float]:
    table = usage_table(frames, step)
    return {c: (round(float(table[c].sum()), 6) if c == "cost_usd" else int(table[c].sum()))
            for c in ("decisions", "llm_calls", "prompt_tokens", "completion_tokens", "cost_usd", "repaired",
                      "fallbacks", "truncated", "failures")}


def engine_notes(frames: Frames) -> list[tuple[str, str]]:
    """(engine, honesty note) for every model the run used, each note beginning with its model's name
    (a provider model has no honesty note: its note only names it)."""
    return [(m, engine_note(m) or f"{m} is a provider model reached through litellm") for m in frames.engines]


# --- inspector -----------------------------------------------------------------------------------------


def latest_norms(frames: Frames, step: int, agent: str | None = None) -> pd.DataFrame:
    """Each norm's latest recorded row in the norm_changes table up to ``step`` (one agent's, or
    every agent's), with ``since``: the step it entered; sorted by agent and norm id."""
    df = upto(frames.tables.get("norm_changes", pd.DataFrame()), step)
    if df.empty:
        return pd.DataFrame()
    if agent:
        df = df[df["agent"] == agent]
    first = df.groupby(["agent", "norm_id"])["step"].min().rename("since")
    last = df.groupby(["agent", "norm_id"], sort=True).tail(1).set_index(["agent", "norm_id"]).join(first)
    return last.reset_index().sort_values(["agent", "norm_id"]).reset_index(drop=True)


ACTOR_READING = "actor's reading"
JUDGE_READING = "judge's reading (measured)"
NORM_COLUMNS = ["id", "content", "state", "type", "utility", "origin", ACTOR_READING, JUDGE_READING]
NO_MATCH = "none of these"  # CRSEC's MatchNorm options: this, a tracked norm's name, or
OPPOSITE = "the opposite of: "  # ... this prefix and a name (operations.MatchContext.options)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _judged_readings(frames: Frames, name: str, step: int) -> dict[int, str]:
    """Each norm's tracked norm by the judge's label (the norm_matches table; the lexical matcher's
    where the judge gave no usable answer), "" when it names none or its opposite."""
    readings = {}
    for r in _own_rows(frames, "norm_matches", name, step).to_dict("records"):
        option = _text(r.get("judged")) or _text(r.get("lexical"))
        readings[int(r["norm_id"])] = "" if option == NO_MATCH or option.startswith(OPPOSITE) else option
    return readings


def norm_database(frames: Frames, name: str, step: int) -> list[dict]:
    """An agent's norm database at ``step`` rebuilt from the norm_changes table: each norm's latest
    recorded state, and which tracked norms it covers twice over: by the actor's own matcher (what
    its rules act on) and by the judge (what adoption is measured by). A synthesised norm covers
    what its members cover too, as ``NormDatabase.set_match`` and ``set_judged`` count it."""
    last = latest_norms(frames, step, name)
    if last.empty:
        return []
    actor = {int(r["norm_id"]): _text(r.get("canonical")) for r in last.to_dict("records")}
    judge = _judged_readings(frames, name, step)
    members = {int(r["norm_id"]): [int(m) for m in _text(r.get("members")).split(",") if m.strip()]
               for r in last.to_dict("records")}

    def covers(norm_id: int, reading: dict[int, str]) -> str:
        found = {reading.get(norm_id, "")}
        for member in members.get(norm_id, []):
            found.update(covers(member, reading).split(", "))
        return ", ".join(sorted(found - {""}))

    return [{"id": int(r["norm_id"]), "content": r.get("content"), "state": r.get("state"), "type": r.get("type"),
             "utility": r.get("utility"), "origin": r.get("origin"),
             ACTOR_READING: covers(int(r["norm_id"]), actor), JUDGE_READING: covers(int(r["norm_id"]), judge)}
            for r in last.to_dict("records")]


def _own_rows(frames: Frames, table: str, name: str, step: int) -> pd.DataFrame:
    """One agent's rows of a recorded table up to ``step``, in the order they were written."""
    df = upto(frames.tables.get(table, pd.DataFrame()), step)
    return df[df["agent"] == name] if "agent" in df else pd.DataFrame()


def last_thought(frames: Frames, name: str, step: int, row: pd.Series) -> str:
    """An agent's latest thought up to ``step``: its recorded ``thought`` column (ITCMA-S), else its
    latest row of CRSEC's ``thoughts`` or ASVO's ``asvo_reflections`` table (worded as the event log)."""
    if "thought" in row and isinstance(row["thought"], str):
        return row["thought"]
    thoughts = _own_rows(frames, "thoughts", name, step)
    if not thoughts.empty:
        return str(thoughts["thought"].iloc[-1])
    reflections = _own_rows(frames, "asvo_reflections", name, step)
    if not reflections.empty:
        last = reflections.iloc[-1]
        return f"on {last['desire']}: {last['reflection']}"
    return ""


def last_outcome(frames: Frames, name: str, step: int, row: pd.Series) -> str:
    """What became of the agent's last action, with the reason the run recorded: ITCMA-S's status and
    reason (``itcmas_actions``), else the world's verdict on it (``events``)."""
    if "action_ok" not in row or pd.isna(row["action_ok"]):
        return ""
    actions = _own_rows(frames, "itcmas_actions", name, step)
    if not actions.empty:
        return outcome_text(bool(row["action_ok"]), actions["reason"].iloc[-1], str(actions["status"].iloc[-1]))
    events = _own_rows(frames, "events", name, step)
    if "action" in events:
        events = events[events["action"] == row.get("action")]
    reason = events["reason"].iloc[-1] if "reason" in events and not events.empty else ""
    return outcome_text(bool(row["action_ok"]), reason)


def inspect_agent(frames: Frames, name: str, step: int) -> dict:
    """The inspector's sections for one agent at ``step``: description, SVO, desires, emotions,
    resources, memory, norm database with states, last thought, last action and its outcome,
    and the LLM exchanges recorded for it at that step (replay). Live details are used at the
    last step, recorded frames otherwise."""
    rows = agents_at(frames, step)
    row = rows.loc[name] if name in rows.index else pd.Series(dtype=object)
    out: dict[str, Any] = {"name": name, "description": frames.descriptions.get(name, "")}
    if "svo" in row and pd.notna(row["svo"]):
        out["svo"] = str(row["svo"])
    desires = {desire_label(c): _plain(float(v)) for c, v in row.items()
               if c.startswith("desire_") and pd.notna(v)}
    if desires:
        out["desires"] = desires
    emotions = {c: _plain(float(row[c])) for c in ("P", "A", "D", "driver") if c in row and pd.notna(row[c])}
    if emotions:
        out["emotions"] = emotions
    if "resources" in row and pd.notna(row["resources"]):
        out["resources"] = _plain(float(row["resources"]))
    norms = norm_database(frames, name, step)
    if norms or "norm_changes" in frames.tables:
        out["norms"] = norms
    if "area" in row and pd.notna(row["area"]):
        out["area"] = str(row["area"])
    thought = last_thought(frames, name, step, row)
    if thought:
        out["last_thought"] = thought
    if "action" in row and pd.notna(row["action"]):
        out["last_action"] = str(row["action"])
    outcome = last_outcome(frames, name, step, row)
    if outcome:
        out["outcome"] = outcome
    # memory as the agent's own recent events (a live agent's memory replaces it below)
    recent = event_log(frames, step, agent=name).head(10)
    out["memory"] = [f"[step {s}] {k}: {t}" for s, k, t in zip(recent["step"], recent["kind"], recent["text"], strict=False)]
    if step >= frames.steps_done and name in frames.live:
        out.update({k: v for k, v in frames.live[name].items() if k != "norms" and v not in (None, "", [], {})})
    ids = rows["AgentID"].to_dict() if "AgentID" in rows else {}
    if frames.tape and name in ids:
        out["llm_exchanges"] = [
            {"op": r.get("op", ""), "answer": cut(redact(str(r.get("raw", ""))), 300)}
            for r in frames.tape if r.get("agent") == ids[name] and r.get("step") == step
        ]
    return out


# --- architecture views --------------------------------------------------------------------------------


def agent_series(frames: Frames, step: int, agent: str) -> dict[str, pd.DataFrame]:
    """One agent's own desires and P/A/D/driver/resources over steps (the 'per agent' choice of
    the time-series tab), indexed by step."""
    df = upto(frames.agents, step)
    if df.empty or "name" not in df:
        return {}
    mine = df[df["name"] == agent].set_index("step")
    out: dict[str, pd.DataFrame] = {}
    desires = [c for c in mine.columns if c.startswith("desire_")]
    if desires:
        out[f"Desires of {agent}"] = mine[desires].apply(_numeric).dropna(axis=1, how="all").rename(
            columns=desire_label)
    own = [c for c in ("P", "A", "D", "driver", "resources") if c in mine and _numeric(mine[c]).notna().any()]
    if own:
        out[f"Emotion and resources of {agent}"] = mine[own].apply(_numeric)
    # any other number the architecture records per agent (CRSEC: norms held, memories, utility)
    skip = {"AgentID", "x", "y", *desires, *own}
    other = [c for c in mine.columns if c not in skip and pd.api.types.is_numeric_dtype(mine[c])
             and not pd.api.types.is_bool_dtype(mine[c])]
    if other:
        out[f"Recorded values of {agent}"] = mine[other].apply(_numeric)
    return out


def matrix_ranks(frames: Frames, step: int) -> pd.DataFrame:
    """ITCMA-S: each matrix run's ranking, one row per (step, agent): rank (1 = first), the
    resources it moved and the resources after."""
    df = upto(frames.tables.get("matrix", pd.DataFrame()), step)
    rows = []
    for r in df.to_dict("records"):
        deltas, after = _as_dict(r.get("deltas")), _as_dict(r.get("resources"))
        for rank, name in enumerate(str(r.get("ranking") or "").split(","), start=1):
            if name:
                rows.append({"step": int(r["step"]), "agent": name, "rank": rank,
                             "change": deltas.get(name), "resources": after.get(name)})
    return pd.DataFrame(rows, columns=["step", "agent", "rank", "change", "resources"])


def matrix_note(frames: Frames, step: int) -> str:
    """Why ITCMA-S's matrix view has no ranking at ``step``: switched off (``matrix_every`` 0), or
    not run yet; "" when it has one."""
    if not matrix_ranks(frames, step).empty:
        return ""
    every = frames.settings.get("matrix_every")
    if every == 0:
        return "The matrix is switched off in this run (matrix_every = 0): it never ranks the agents."
    return f"The matrix has not run yet{f' (it runs every {every} steps)' if every else ''}."


def society_structure(frames: Frames, step: int) -> dict:
    """Cliques, the leader and isolated agents of the interaction graph up to ``step`` (the
    ITCMA-S report's own definition), for any architecture that records interactions."""
    from socialsim.agents.itcmas.metrics import social_structure

    return social_structure(interaction_graph(frames, step))


def tom_predictions(frames: Frames, step: int) -> pd.DataFrame:
    """ASVO: theory-of-mind predictions of others' desires beside their true values and the belief
    each replaced, up to ``step``."""
    df = upto(frames.tables.get("asvo_predictions", pd.DataFrame()), step)
    if "status" in df:  # a belief kept because the prediction's answer was unusable is no prediction
        df = df[df["status"] != "fallback"]
    cols = ["step", "observer", "target", "desire", "predicted", "true", "error", "prior", "prior_error"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.reindex(columns=cols)  # runs recorded before the belief it replaced was kept: NaN there
    df = df.assign(**{c: _numeric(df[c]) for c in ("predicted", "true", "error", "prior", "prior_error")})
    return df.reset_index(drop=True)


NORM_PROVENANCE_COLUMNS = ["agent", "id", "content", "state", "type", "utility", "origin", "since", "source"]


def norm_provenance(frames: Frames, step: int, agent: str | None = None) -> pd.DataFrame:
    """CRSEC: every agent's norm database at ``step`` with where each norm came from (created,
    a conversation, a thought or a synthesis), the step it entered, and its source text."""
    last = latest_norms(frames, step, agent)
    if last.empty:
        return pd.DataFrame(columns=NORM_PROVENANCE_COLUMNS)
    last = last.rename(columns={"norm_id": "id"})
    if "source" not in last:
        last["source"] = ""
    last["source"] = last["source"].fillna("").map(lambda s: redact(str(s)))
    return last[NORM_PROVENANCE_COLUMNS].sort_values(["agent", "id"]).reset_index(drop=True)


FINDINGS_COLUMNS = ["finding", "verdict", "seeds", "p"]


def reproduction_findings(folder: str | Path) -> pd.DataFrame:
    """A reproduction's findings as ``socialsim reproduce`` checked them (its ``findings.csv``):
    verdict on the mean, seeds holding of those measured, the sign test's p; empty for a folder
    that is not a reproduction (a sweep's), or whose findings file cannot be read."""
    path = Path(folder) / "findings.csv"
    try:
        found = pd.read_csv(path)
    except (OSError, ValueError):
        return pd.DataFrame(columns=FINDINGS_COLUMNS)
    if not {"finding", "verdict", "seeds_holding", "seeds_measured"} <= set(found.columns):
        return pd.DataFrame(columns=FINDINGS_COLUMNS)
    p = pd.to_numeric(found["sign_p"], errors="coerce") if "sign_p" in found else pd.Series(float("nan"), found.index)
    return pd.DataFrame({"finding": found["finding"].astype(str), "verdict": found["verdict"].astype(str),
                         "seeds": found["seeds_holding"].astype(str) + " of " + found["seeds_measured"].astype(str),
                         "p": p.map(lambda v: "" if pd.isna(v) else f"{v:.3g}")})[FINDINGS_COLUMNS]


_SHOWN_SETTINGS = 5  # a picker's line stays readable in the sidebar


def run_choices(folder: str | Path, runs: Iterable[str | Path]) -> dict[str, str]:
    """The runs of a folder (a sweep's, a reproduction's) as the Replay card lists them: label -> path.
    A label is the run's folder below ``folder`` and the settings in which it differs from the others
    (seed, swept parameters, model...), and how it ended when it did not complete: a sweep's runs are
    ``runs/run-<hash>``, which alone told a user none of them apart."""
    folder, runs = Path(folder), [Path(r) for r in runs]
    settings: dict[Path, dict[str, Any]] = {}
    ended: dict[Path, str] = {}
    for run in runs:
        try:
            meta = run_meta(run)  # NotARunDir is an OSError, DamagedRun a ValueError
        except (OSError, ValueError):  # a damaged one is listed, and says so when opened
            settings[run], ended[run] = {}, "config.json unreadable"
            continue
        config = dict(meta["config"])
        params = config.pop("arch_params", None) or {}
        config["seed"] = config.pop("rng", None)
        settings[run] = {**{k: v for k, v in config.items() if not isinstance(v, dict | list)},
                         **{k: v for k, v in params.items() if not isinstance(v, dict | list)}}
        if (status := meta.get("status")) != "completed":
            ended[run] = f"{status or 'no status'}, {meta.get('steps_done', 0)} steps"
    read = [s for s in settings.values() if s]
    keys = sorted(set.intersection(*(set(s) for s in read))) if read else []  # another architecture's are not a difference
    differing = [k for k in keys if len({repr(s[k]) for s in read}) > 1]
    choices: dict[str, str] = {}
    for run in runs:
        try:
            where = run.relative_to(folder).as_posix()
        except ValueError:
            where = str(run)
        said = [f"{k} {settings[run][k]}" if k == "seed" else f"{k}={settings[run][k]}"
                for k in differing if settings[run]]
        said = said[:_SHOWN_SETTINGS] + (["..."] if len(said) > _SHOWN_SETTINGS else [])
        label = " · ".join([where, *([", ".join(said)] if said else []), *([ended[run]] if run in ended else [])])
        choices[redact(label)] = str(run)
    return choices


FIGURE_LINK = re.compile(r"!\[([^\]]*)\]\((figures/[^)\s]+\.png)\)")  # how report.md links its figures
FOREIGN_LINK = re.compile(r"\]\((?!figures/)")  # any other inline link's target
LINK_DEFINITION = re.compile(r"(?m)^( {0,3}\[[^\]]+\]):")  # a reference link's definition


def run_report(run_dir: str | Path) -> str:
    """A run's report.md as the Report tab shows it (its findings: CRSEC's table and judge agreement,
    ASVO's separability and confounds, ITCMA-S's judge scores): redacted, with any HTML shown as text
    (the report quotes agents and LLMs), its figures inline as data: URLs (no request leaves the
    page); "" for a run that has written none yet (one still running, or killed)."""
    run_dir = Path(run_dir)
    try:
        text = (run_dir / "report.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    folder = (run_dir / "figures").resolve()

    def inline(link: re.Match) -> str:
        figure = (run_dir / link[2]).resolve()
        if figure.parent != folder or not figure.is_file():
            return f"*({link[1]}: figure not found)*"
        return f"![{link[1]}](data:image/png;base64,{base64.b64encode(figure.read_bytes()).decode()})"

    text = redact(text).replace("<", "&lt;")
    # a link the report did not make itself (an agent's or a model's words in a table) is shown as
    # text: Markdown renders "[x](javascript:...)" as a live link, and the page would run it on a click
    text = FOREIGN_LINK.sub(r"]\\(", LINK_DEFINITION.sub(r"\1\\:", text))
    return FIGURE_LINK.sub(inline, text)


def report_html(report: str) -> str:
    """The Report tab's HTML, made here from ``run_report``'s text and set as the element's content:
    solara.Markdown compiles its HTML as a Vue template, so "{{ ... }}" in a model's words quoted by
    the report was evaluated as JavaScript. Every tag is Markdown's own (the text's "<" are
    escaped) and every link or image but the run's inlined figures is text."""
    import markdown

    return markdown.markdown(report, extensions=["tables"]) if report else ""


def architecture_view(frames: Frames) -> str:
    """Which architecture-specific view the recorded tables allow."""
    if "matrix" in frames.tables or frames.arch == "itcmas":
        return "itcmas"
    if "asvo_predictions" in frames.tables or frames.arch == "asvo":
        return "asvo"
    if "norm_changes" in frames.tables or frames.arch == "crsec":
        return "crsec"
    return "generic"
