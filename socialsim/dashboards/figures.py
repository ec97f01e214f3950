"""Matplotlib drawings of the panels' data, returned as PNG bytes.

PNG images need no JavaScript plotting library in the page (nothing to fetch from a CDN), and
``matplotlib.figure.Figure`` with the Agg canvas is safe to draw from the server's threads.
"""

from __future__ import annotations

import io
from functools import lru_cache

import networkx as nx
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from socialsim.dashboards import panels
from socialsim.dashboards.panels import Frames


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return buf.getvalue()


def _legend(ax, legend: dict[str, str]) -> None:
    if legend:
        ax.legend(handles=[Patch(color=c, label=label) for label, c in legend.items()], fontsize=7,
                  loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def map_png(frames: Frames, step: int, mode: str) -> bytes:
    """Areas, furniture and agents (coloured by ``mode``); a social-network scenario is drawn as
    its graph of ties instead."""
    colours, legend = panels.agent_colours(frames, step, mode)
    fig = Figure(figsize=(7.2, 4.2))
    ax = fig.add_subplot()
    if not frames.areas:
        graph = nx.Graph()
        graph.add_nodes_from(frames.names)
        graph.add_edges_from(frames.ties)
        pos = nx.circular_layout(sorted(graph.nodes))
        nx.draw_networkx(graph, pos, ax=ax, node_color=[colours.get(n, "#9e9e9e") for n in graph.nodes],
                         font_size=7, node_size=420, edge_color="#bbbbbb")
        ax.set_title(f"social ties (step {step})", fontsize=9)
        ax.axis("off")
        _legend(ax, legend)
        fig.tight_layout()
        return _png(fig)
    for _i, area in enumerate(frames.areas):
        ax.add_patch(Rectangle((area["x"], area["y"]), area["width"], area["height"], fill=True,
                               facecolor="#f4f1ea" if area["kind"] == "outside" else "#e8eef6",
                               edgecolor="#555555", linewidth=1.2))
        ax.text(area["x"] + 0.15, area["y"] + 0.15, area["name"], fontsize=7, va="top", ha="left", color="#333333")
    for f in frames.furniture:
        ax.add_patch(Rectangle((f["x"] + 0.1, f["y"] + 0.35), 0.8, 0.5, facecolor="#c8b89a", edgecolor="#8d7b5a"))
        ax.text(f["x"] + 0.5, f["y"] + 0.95, f["name"], fontsize=4.5, ha="center", va="top", color="#5d4e37")
    positions = panels.map_positions(frames, step)
    for name, (x, y) in positions.items():
        ax.scatter([x], [y], s=160, color=colours.get(name, "#9e9e9e"), edgecolors="black", zorder=3)
        ax.text(x, y - 0.45, name.split()[0], fontsize=6, ha="center", va="bottom", zorder=4)
    width = max(a["x"] + a["width"] for a in frames.areas)
    height = max(a["y"] + a["height"] for a in frames.areas)
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)  # row 0 at the top, like the scenario's grid
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"map (step {step}, coloured by {mode})", fontsize=9)
    _legend(ax, legend)
    fig.tight_layout()
    return _png(fig)


def network_png(frames: Frames, step: int, mode: str) -> bytes:
    """The interaction graph: edge width grows with the number of interactions. Drawn again only
    when its ties or its agents' colours changed (most steps change neither, and a matplotlib
    drawing is most of the map tab's redraw while Play runs)."""
    graph = panels.interaction_graph(frames, step)
    colours, _ = panels.agent_colours(frames, step, mode)
    nodes = tuple((n, colours.get(n, "#9e9e9e")) for n in graph.nodes)
    edges = tuple((u, v, graph[u][v]["weight"]) for u, v in graph.edges)
    return _network_png(nodes, edges)


@lru_cache(maxsize=32)
def _network_png(nodes: tuple[tuple[str, str], ...], edges: tuple[tuple[str, str, int], ...]) -> bytes:
    """``nodes``: every agent in the frames' order with its colour; ``edges``: (from, to, count)."""
    graph = nx.DiGraph()
    graph.add_nodes_from(n for n, _ in nodes)
    graph.add_weighted_edges_from(edges)
    fig = Figure(figsize=(5.2, 4.2))
    ax = fig.add_subplot()
    pos = nx.circular_layout([n for n, _ in nodes])  # fixed positions: only the edges change between steps
    weights = [w for _, _, w in edges]
    top = max(weights, default=1)
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_color=[c for _, c in nodes], node_size=380, edgecolors="black")
    nx.draw_networkx_labels(graph, pos, ax=ax, labels={n: n.split()[0] for n, _ in nodes}, font_size=7)
    nx.draw_networkx_edges(graph, pos, ax=ax, edgelist=[(u, v) for u, v, _ in edges],
                           width=[0.8 + 3.5 * w / top for w in weights], arrows=True, edge_color="#4a6fa5",
                           alpha=0.7, connectionstyle="arc3,rad=0.1", node_size=380)
    ax.set_title(f"interactions so far ({sum(weights)} in all)", fontsize=9)
    ax.axis("off")
    fig.tight_layout()
    return _png(fig)


def heatmap_png(frames: Frames, step: int) -> bytes:
    matrix = panels.interaction_counts(frames, step)
    fig = Figure(figsize=(5.2, 4.4))
    ax = fig.add_subplot()
    image = ax.imshow(matrix.values, cmap="Blues", vmin=0, vmax=max(1, int(matrix.values.max(initial=0))))
    short = [n.split()[0] for n in matrix.columns]
    ax.set_xticks(range(len(matrix)), short, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(matrix)), short, fontsize=7)
    ax.set_xlabel("receiver", fontsize=8)
    ax.set_ylabel("initiator", fontsize=8)
    ax.set_title(f"interaction heat map (up to step {step})", fontsize=9)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return _png(fig)


def series_png(title: str, frame: pd.DataFrame, step: int) -> bytes:
    fig = Figure(figsize=(4.6, 2.7))
    ax = fig.add_subplot()
    for col in frame.columns:
        ax.plot(frame.index, frame[col], marker="o", markersize=3, label=str(col))
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_xlim(0.5, max(step, 1) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    if len(frame.columns) <= 12:
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return _png(fig)
