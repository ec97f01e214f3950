"""Interactive Altair charts of the panels' data (hover for values, click a legend entry to pick a
series, drag to zoom along the steps).

The page renders them with Vega-Lite, whose scripts come from the ``solara-assets`` package and
are served by the dashboard itself (``server.offline_assets``): no request leaves the machine.
Each builder takes a pandas frame from ``panels`` and returns an ``alt.Chart``; none reads a
model, so they work the same on a live society and on a replayed run.
"""

from __future__ import annotations

import json
from functools import lru_cache

import altair as alt
import pandas as pd

WIDTH, HEIGHT = 430, 210
alt.data_transformers.disable_max_rows()  # a run's frames are small; never drop rows silently
# drawn as SVG (its marks and titles are in the page: readable, testable) and without vega-embed's
# action menu, whose links lead off the machine (the online Vega editor)
EMBED = {"embedOptions": {"renderer": "svg", "actions": False}}


def _long(frame: pd.DataFrame, name: str = "series") -> pd.DataFrame:
    """A wide frame (index: step, one column per series) as rows of (step, series, value)."""
    wide = frame.copy()
    wide.index = wide.index.rename("step")
    wide.columns = [str(c) for c in wide.columns]
    return wide.reset_index().melt(id_vars="step", var_name=name, value_name="value").dropna(subset=["value"])


def series_chart(title: str, frame: pd.DataFrame, step: int) -> dict:
    """Lines with points, one per column; the legend picks series (shift-click for several).

    A Vega-Lite spec: the chart is built and validated by Altair once per title
    (``_series_template``); each step fills in its rows and the steps' range."""
    template = _series_template(title)
    x = template["encoding"]["x"]
    return {**template, "datasets": {**template["datasets"], SERIES: _long(frame).to_dict("records")},
            "encoding": {**template["encoding"],
                         "x": {**x, "scale": {**x["scale"], "domain": [0.5, max(step, 1) + 0.5]}}}}


SERIES = "series"  # the name of a time-series chart's per-step data set
SHARE = "(share of"  # in a chart's title: its values are shares, drawn from 0 to 1


@lru_cache(maxsize=64)
def _series_template(title: str) -> dict:
    pick = alt.selection_point(fields=["series"], bind="legend", name="pick")
    zoom = alt.selection_interval(encodings=["x"], bind="scales", name="zoom")
    spec = (
        alt.Chart(alt.Data(name=SERIES), title=title, width=WIDTH, height=HEIGHT)
        .mark_line(point=alt.OverlayMarkDef(size=30))
        .encode(
            x=alt.X("step:Q", scale=alt.Scale(domain=[0.5, 1.5]), axis=alt.Axis(tickMinStep=1)),
            # a share is drawn on its whole range, so 0.3 of the agents does not look like all of them
            y=alt.Y("value:Q", title=None, scale=alt.Scale(domain=[0, 1]) if SHARE in title else alt.Undefined),
            color=alt.Color("series:N", legend=alt.Legend(title=None, orient="right", labelLimit=160,
                                                          symbolLimit=0, columns=1)),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.12)),
            tooltip=[alt.Tooltip("series:N"), alt.Tooltip("step:Q"), alt.Tooltip("value:Q", format=".3f")],
        )
        .add_params(pick, zoom)
        .properties(usermeta=EMBED)
        .to_dict()
    )
    spec.setdefault("datasets", {})[SERIES] = []
    return spec


def heatmap_chart(matrix: pd.DataFrame, step: int) -> alt.Chart:
    """Initiator x receiver counts; hover a cell for the pair and its count."""
    data = matrix.rename_axis(index="initiator", columns="receiver").stack().rename("interactions").reset_index()
    order = list(matrix.index)
    side = max(220, min(520, 26 * len(order)))
    return (
        alt.Chart(data, title=f"interactions up to step {step} ({int(data['interactions'].sum())} in all)",
                  width=side, height=side)
        .mark_rect()
        .encode(
            x=alt.X("receiver:N", sort=order, axis=alt.Axis(labelAngle=-50, labelLimit=120)),
            y=alt.Y("initiator:N", sort=order, axis=alt.Axis(labelLimit=120)),
            # from 0 to at least 1: with no interaction yet every cell is drawn as none, not mid-blue
            color=alt.Color("interactions:Q", scale=alt.Scale(
                scheme="blues", domain=[0, max(1, int(data["interactions"].max()) if len(data) else 1)]),
                legend=alt.Legend(format="d", tickMinStep=1)),  # counts: whole numbers
            tooltip=["initiator:N", "receiver:N", "interactions:Q"],
        )
        .properties(usermeta=EMBED)
    )


def rank_chart(ranks: pd.DataFrame, step: int) -> alt.Chart:
    """ITCMA-S: each agent's place in the matrix's ranking over steps (1 at the top)."""
    pick = alt.selection_point(fields=["agent"], bind="legend", name="pick_agent")
    return (
        alt.Chart(ranks, title="matrix ranking (1 = ranked first)", width=WIDTH, height=HEIGHT)
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", scale=alt.Scale(domain=[0.5, max(step, 1) + 0.5]), axis=alt.Axis(tickMinStep=1)),
            y=alt.Y("rank:Q", scale=alt.Scale(reverse=True, zero=False, domainMin=1), axis=alt.Axis(tickMinStep=1)),
            color=alt.Color("agent:N", legend=alt.Legend(orient="right", labelLimit=160)),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.12)),
            tooltip=["agent:N", "step:Q", "rank:Q", alt.Tooltip("change:Q", format=".3f"),
                     alt.Tooltip("resources:Q", format=".3f")],
        )
        .add_params(pick)
        .properties(usermeta=EMBED)
    )


def tom_chart(predictions: pd.DataFrame) -> alt.LayerChart:
    """ASVO: predicted against true desire values (on the diagonal = a perfect prediction)."""
    pick = alt.selection_point(fields=["desire"], bind="legend", name="pick_desire")
    points = (
        alt.Chart(predictions, width=WIDTH, height=HEIGHT + 40)
        .mark_circle(size=45)
        .encode(
            x=alt.X("true:Q", title="true value", scale=alt.Scale(domain=[0, 10])),
            y=alt.Y("predicted:Q", title="predicted", scale=alt.Scale(domain=[0, 10])),
            color=alt.Color("desire:N", legend=alt.Legend(orient="right", labelLimit=160)),
            opacity=alt.condition(pick, alt.value(0.85), alt.value(0.08)),
            tooltip=["step:Q", "observer:N", "target:N", "desire:N", "predicted:Q", "true:Q",
                     alt.Tooltip("error:Q", format=".2f"), alt.Tooltip("prior:Q", title="belief before"),
                     alt.Tooltip("prior_error:Q", title="its error", format=".2f")],
        )
        .add_params(pick)
    )
    diagonal = alt.Chart(pd.DataFrame({"true": [0, 10], "predicted": [0, 10]})).mark_line(
        color="#999999", strokeDash=[4, 4]).encode(x="true:Q", y="predicted:Q")
    return alt.layer(diagonal, points).properties(title="theory of mind: predicted vs true desires", usermeta=EMBED)


def map_chart(frames, step: int, colours: dict[str, str], mode: str) -> dict:
    """The world as a Vega-Lite spec: areas, furniture (named on hover, so long names never
    overlap) and agents labelled by first name; hover an agent for its full name, area and colouring.

    Only the agents move, so the layers are built and validated by Altair once per world
    (``_map_template``) and each step fills in the agents' rows: building the whole chart anew
    took about 75 ms a step, during which the page could not answer a click."""
    from socialsim.dashboards import panels

    template = _map_template(json.dumps([frames.areas, frames.furniture], sort_keys=True))
    rows = []
    positions = panels.map_positions(frames, step)
    if positions:
        at = panels.agents_at(frames, step)
        rows = [{"agent": name, "label": name.split()[0], "x": x, "y": y, "colour": colours.get(name, "#9e9e9e"),
                 "area": str(at["area"].get(name, "")) if "area" in at else ""}
                for name, (x, y) in sorted(positions.items())]
        _place_labels(rows, _map_px(frames.areas))
    return {**template, "title": f"map (step {step}, coloured by {mode})",
            "datasets": {**template["datasets"], AGENTS: rows}}


LABEL_PX_PER_CHAR = 6.0  # a 10 px first name is about 6 px a character wide


def _map_px(areas: list[dict]) -> float:
    """Pixels per cell, as the map's template draws it (fits a 1280x800 tab)."""
    width = max((a["x"] + a["width"] for a in areas), default=1.0)
    height = max((a["y"] + a["height"] for a in areas), default=1.0)
    return max(12.0, min(40.0, 860.0 / max(width, 1.0), 440.0 / max(height, 1.0)))


def _place_labels(rows: list[dict], px: float) -> None:
    """Each agent's name above its dot, unless it would cover the name of a neighbour on its row:
    then below (and above again when both sides are taken). Names go below only where they
    must, so fewer of them cross into the room beneath."""
    def clash(a: dict, b: dict | None) -> bool:  # their names, centred on their dots, would touch
        widths = (len(a["label"]) + len(b["label"])) * LABEL_PX_PER_CHAR / 2 if b is not None else 0
        return b is not None and abs(a["x"] - b["x"]) * px < widths + 4

    by_row: dict[float, list[dict]] = {}
    for row in rows:
        by_row.setdefault(row["y"], []).append(row)
    for same_row in by_row.values():
        last = {"above": None, "below": None}
        for row in sorted(same_row, key=lambda r: r["x"]):
            below = clash(row, last["above"]) and not clash(row, last["below"])
            last["below" if below else "above"] = row
            row.update(ty=row["y"] + (0.42 if below else -0.42), baseline="top" if below else "bottom")


AGENTS = "agents"  # the name of the map's per-step data set


@lru_cache(maxsize=8)
def _map_template(world: str) -> dict:
    """The map's layers for one world (its areas and furniture, as JSON); the agents' layers read
    the named data set ``AGENTS``, which ``map_chart`` fills in per step."""
    area_rows, furniture = json.loads(world)
    areas = pd.DataFrame(area_rows).assign(x2=lambda d: d["x"] + d["width"], y2=lambda d: d["y"] + d["height"])
    width = float(areas["x2"].max())
    height = float(areas["y2"].max())
    scale_x = alt.Scale(domain=[0, width], nice=False, zero=True)
    scale_y = alt.Scale(domain=[0, height], reverse=True, nice=False, zero=True)  # row 0 at the top, as in the file
    px = _map_px(area_rows)
    size = {"width": px * width, "height": px * height}
    x, y = alt.X("x:Q", scale=scale_x, axis=None), alt.Y("y:Q", scale=scale_y, axis=None)
    rooms = alt.Chart(areas).mark_rect(stroke="#555555", strokeWidth=1.2).encode(
        x=x, x2="x2:Q", y=y, y2="y2:Q",
        color=alt.condition(alt.datum.kind == "outside", alt.value("#f4f1ea"), alt.value("#e8eef6")),
        tooltip=[alt.Tooltip("name:N", title="area"), alt.Tooltip("kind:N")])
    names = alt.Chart(areas.assign(tx=areas["x"] + 0.15, ty=areas["y"] + 0.2)).encode(
        x=alt.X("tx:Q", scale=scale_x, axis=None), y=alt.Y("ty:Q", scale=scale_y, axis=None), text="name:N")
    layers = [rooms]
    if furniture:
        things = pd.DataFrame(furniture).assign(
            x=lambda d: d["x"] + 0.1, x2=lambda d: d["x"] + 0.8, y=lambda d: d["y"] + 0.35, y2=lambda d: d["y"] + 0.85)
        layers.append(alt.Chart(things).mark_rect(color="#c8b89a", stroke="#8d7b5a").encode(
            x=x, x2="x2:Q", y=y, y2="y2:Q", tooltip=[alt.Tooltip("name:N", title="furniture"), "area:N"]))
    # area names above the furniture, on a white halo, so a room full of furniture keeps its name readable
    text = {"align": "left", "baseline": "top", "fontSize": 11, "fontWeight": "bold"}
    layers += [names.mark_text(**text, stroke="white", strokeWidth=3, strokeOpacity=0.9),
               names.mark_text(**text, color="#333333")]
    agents = alt.Data(name=AGENTS)
    layers.append(alt.Chart(agents).mark_circle(size=260, stroke="black", strokeWidth=1, opacity=1).encode(
        x=x, y=y, color=alt.Color("colour:N", scale=None), tooltip=["agent:N", "area:N"]))
    layers.append(alt.Chart(agents).mark_text(fontSize=10, baseline=alt.ExprRef("datum.baseline")).encode(
        x=x, y=alt.Y("ty:Q", scale=scale_y, axis=None), text="label:N"))
    spec = alt.layer(*layers).properties(title="map", usermeta=EMBED, **size).configure_view(stroke=None).to_dict()
    spec.setdefault("datasets", {})[AGENTS] = []
    return spec
