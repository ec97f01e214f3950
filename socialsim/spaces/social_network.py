"""A social-ties world: agents on the nodes of a Mesa ``Network`` built from a networkx graph.

For settings defined by who can observe whom (a classroom, an office, a family) rather than by
rooms. An agent observes the agents its node links to.
"""

from __future__ import annotations

import random
from typing import Any

import networkx as nx
from mesa.discrete_space import Network

from socialsim.scenarios.schema import NetworkSpec


def build_graph(spec: NetworkSpec, names: list[str]) -> nx.Graph:
    graph: nx.Graph = nx.DiGraph() if spec.directed else nx.Graph()
    graph.add_nodes_from(range(len(names)))
    index = {n: i for i, n in enumerate(names)}
    if spec.complete:
        graph.add_edges_from((i, j) for i in range(len(names)) for j in range(len(names)) if i != j)
    graph.add_edges_from((index[a], index[b]) for a, b in spec.edges)
    nx.set_node_attributes(graph, dict(enumerate(names)), "name")
    return graph


class SocialNetworkWorld:
    """Agents on a Mesa Network; observation follows the graph's edges."""

    def __init__(self, spec: NetworkSpec, names: list[str], rng: random.Random) -> None:
        self.graph = build_graph(spec, names)
        self.names = names
        self.space = Network(self.graph, random=rng)
        self.agents: dict[str, Any] = {}

    def place(self, agent: Any) -> None:
        self.agents[agent.name] = agent
        agent.cell = self.space[self.names.index(agent.name)]

    def observed_by(self, agent: Any) -> list[Any]:
        """The agents this agent can observe, in a stable order."""
        node = self.names.index(agent.name)
        # a directed graph's neighbours are its successors: the agents this one's ties point to
        return [self.agents[self.names[n]] for n in sorted(self.graph.neighbors(node)) if self.names[n] in self.agents]

    def observing_no_one(self) -> list[str]:
        """The agents whose node has no tie to observe anyone through (on a directed graph: no tie
        from it), in the scenario's order."""
        return [name for i, name in enumerate(self.names) if not any(True for _ in self.graph.neighbors(i))]
