"""SocietyModel: a Mesa model that builds a world and its agents from a scenario.

``step()`` is a short list of phases: perceive, decide (every agent's LLM calls concurrently),
act (in one shuffled order drawn from the model's RNG), collect. Architectures add phases by
overriding ``phases`` in their agent class; the model stays the same.
"""

from __future__ import annotations

import os
from typing import Any

import networkx as nx
from mesa import DataCollector, Model

from socialsim.agents import agent_class
from socialsim.agents.params import check_params
from socialsim.agents.phases import phase_problem
from socialsim.llm.engines import check_model_names
from socialsim.llm.gateway import Gateway
from socialsim.llm.ledger import TOTALS, Budget, Ledger
from socialsim.llm.routing import RULES, RouteTable, check_route_names, default_model
from socialsim.scenarios.loader import ScenarioError, load_scenario
from socialsim.scenarios.schema import Scenario, space_problem
from socialsim.spaces.social_network import SocialNetworkWorld
from socialsim.spaces.world import World

EVENT_COLUMNS = ["step", "agent", "area", "action", "verb", "target", "ok", "reason", "tags", "content"]
INTERACTION_COLUMNS = ["step", "initiator", "receiver", "kind", "content"]


class SocietyModel(Model):
    """A society of generative agents in a scenario's world."""

    def __new__(cls, *args: Any, **kwargs: Any) -> SocietyModel:
        """A society that will build its own gateway to a model (not the rules alone) imports litellm
        here, before it exists: litellm's import freezes every object then alive (llm/litellm_setup.py),
        and made in ``__init__`` it froze a notebook's first society, never freed once dropped."""
        if _asks_a_model(cls, args, kwargs):
            import socialsim.llm.litellm_setup  # noqa: F401
        return super().__new__(cls)

    def __init__(
        self,
        scenario: str | Scenario = "hobbs-cafe",
        arch: str | None = None,
        model: str | None = None,
        routes: dict[str, str] | None = None,
        gateway: Gateway | None = None,
        max_cost: float | None = None,
        max_calls: int | None = None,
        price: tuple[float, float] | None = None,
        rng: Any = None,
        **arch_params: Any,
    ) -> None:
        super().__init__(rng=rng)
        # Mesa runs step() as a scheduled event: a step that raised (a budget, an outage, Ctrl-C in a
        # notebook) schedules no next one, and every later step(), run_for() or run_until() did nothing,
        # silently. Such a model refuses to go on instead, saying why (``stopped_by``).
        self.stopped_by: str | None = None
        self._mesa_step = self.step
        self.step = self._step_unless_stopped
        if not isinstance(scenario, str | os.PathLike | Scenario):
            raise TypeError(f"scenario is a built-in scenario's name, a scenario file's path or a Scenario, "
                            f"not {type(scenario).__name__} {scenario!r:.60}")
        # Mesa's Model owns `self.scenario` (its experiment record); ours is the scenario file.
        self.scenario_spec = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        self.arch = arch or self.scenario_spec.default_arch
        given = [name for name, value in (("model", model), ("routes", routes), ("max_cost", max_cost),
                                          ("max_calls", max_calls), ("price", price)) if value is not None]
        if gateway is not None and given:  # the gateway's own would be used, and these dropped silently
            raise ValueError(f"{', '.join(given)} and gateway= were both given: a Gateway carries its own routes "
                             f"and budget (its RouteTable and Ledger) and price; give them to it, or leave gateway= out")
        own_gateway = gateway is None
        if gateway is None:
            routes_table = _own_routes(model, routes)
            check_model_names(routes_table.models())  # a misspelt model is named now, not after step 1's calls
            # ``price``: USD per 1M (prompt, completion) tokens for a model litellm cannot price (as --price)
            gateway = Gateway(routes_table, ledger=Ledger(Budget(max_cost=max_cost, max_calls=max_calls)),
                              price=_checked_price(price))
        self.llm = gateway
        if self.llm.routes.routes:
            check_route_names(self.llm.routes.routes)  # a misspelt route sends nothing to its model
        # set when an end-of-run measurement that asks a model (a judge, an embedding) was stopped
        # by the budget or an outage: the run's status says so and --resume finishes it
        self.measurement_stopped: str | None = None
        # set when the run stopped before its last step (a budget, an outage, Ctrl-C): the end-of-run
        # measurements then wait for the --resume that completes it (a judge of half a run is no result)
        self.run_cut_short: str | None = None
        # a replay's: the recording's end-of-run measurement was stopped (its status), so the replay
        # makes it as far as the tape goes and stops where the recording did
        self.measurement_cut: str | None = None
        self.interactions = nx.DiGraph()
        self.world = World(self.scenario_spec.map, self.random) if self.scenario_spec.map else None
        names = [a.name for a in self.scenario_spec.agents]
        self.social = SocialNetworkWorld(self.scenario_spec.network, names, self.random) if self.scenario_spec.network else None
        self.interactions.add_nodes_from(names)

        cls = agent_class(self.arch)
        if problem := phase_problem(cls):  # a plug-in's mistake, named before any agent is built
            raise ValueError(problem)
        # every architecture's parameters are checked against its settings_model here, a plug-in's too:
        # a misspelt or out-of-range one is refused by name, never read by nothing
        self.arch_params = check_params(self.arch, arch_params)
        self._check_space(cls.space)
        self.society = cls.society_class(self) if cls.society_class else None
        for spec in self.scenario_spec.agents:
            agent = cls(self, spec)
            if self.social is not None:
                self.social.place(agent)
            # a scenario may have both a map and a network: the map's cell is placed last and kept
            # (an agent's area is read from its cell; whom it observes on the network, from its name)
            if self.world is not None:
                self.world.place(agent, spec.start_area or self.scenario_spec.map.areas[0].name)
        self._events_written = 0
        self.datacollector = DataCollector(
            model_reporters={"step": "steps", **{k: _usage(k) for k in TOTALS},
                             **cls.model_reporters(),
                             # reporters that depend on the scenario (e.g. one per tracked norm)
                             **(cls.scenario_reporters(self) if hasattr(cls, "scenario_reporters") else {})},
            agent_reporters={"name": "name", **cls.agent_reporters()},
            tables={"events": EVENT_COLUMNS, "interactions": INTERACTION_COLUMNS, **cls.tables()},
        )
        if own_gateway:  # and a judge's the architecture's settings name (a gateway derived as agents are built)
            check_model_names(self.llm.models())
            if max_cost is not None:  # a budget on a model with no price counted every call at $0: refused as --max-cost is
                from socialsim.model.runner import RunConfig, check_priced

                check_priced(RunConfig(max_cost=max_cost, price=price), self.llm.models(),
                             budget="max_cost=", price="price=(IN, OUT)")

    def _check_space(self, space: str) -> None:
        """An architecture on a scenario without its space fails here, not as a crash in step 1."""
        if problem := space_problem(self.arch, space, self.scenario_spec):
            raise ScenarioError(problem)

    # --- the step ---------------------------------------------------------------------------
    def _refuse_if_stopped(self) -> None:
        if self.stopped_by is not None:
            raise RuntimeError(f"this model stopped in {self.stopped_by}: it is cut mid-step and steps no "
                               "more; build a new SocietyModel (a run directory goes on with "
                               "`socialsim run --resume`)")

    def _step_unless_stopped(self) -> None:
        self._refuse_if_stopped()
        self._mesa_step()

    def run_for(self, duration: float | int) -> None:
        self._refuse_if_stopped()
        super().run_for(duration)

    def run_until(self, end_time: float | int) -> None:
        self._refuse_if_stopped()
        super().run_until(end_time)

    def step(self) -> None:
        try:
            self._run_phases()
        except BaseException as exc:
            self.stopped_by = f"step {self.steps} ({type(exc).__name__}{f': {exc}' if str(exc) else ''})"
            self.running = False
            raise

    def _run_phases(self) -> None:
        self.llm.step = self.steps
        order = self.agents.shuffle()  # one order for the whole step, from the model's RNG
        cls = agent_class(self.arch)
        for phase in cls.phases:
            if phase.scope == "model":
                method = getattr(cls, phase.name)
                if phase.is_async:
                    self.llm.run_phase([self], method, self.random)
                else:
                    method(self)
            elif phase.is_async:
                self.llm.run_phase(list(order), lambda a, name=phase.name: getattr(a, name)(), self.random)
            else:
                order.do(phase.name)
        self._collect()

    def _collect(self) -> None:
        if self.world is not None:
            for event in self.world.events[self._events_written:]:
                row = {c: getattr(event, c) for c in EVENT_COLUMNS}
                row["tags"] = ",".join(event.tags)
                self.datacollector.add_table_row("events", row)
            self._events_written = len(self.world.events)
        self.usage = self.llm.ledger.totals()
        self.datacollector.collect(self)

    # --- shared services for agents ---------------------------------------------------------
    def record_interaction(self, initiator: str, receiver: str, kind: str, content: str = "") -> None:
        """Count an interaction on the interaction graph and log it as a table row."""
        if self.interactions.has_edge(initiator, receiver):
            self.interactions[initiator][receiver]["weight"] += 1
        else:
            self.interactions.add_edge(initiator, receiver, weight=1)
        self.datacollector.add_table_row(
            "interactions",
            {"step": self.steps, "initiator": initiator, "receiver": receiver, "kind": kind, "content": content},
        )

    def agent_named(self, name: str):
        return next(a for a in self.agents if a.name == name)


def _own_routes(model: str | None, routes: dict[str, str] | None) -> RouteTable:
    """The route table of a society that builds its own gateway: ``model`` (or the default) for every
    operation, ``routes`` for the ones sent elsewhere."""
    return RouteTable(default_model(model), dict(routes or {}))


def _asks_a_model(cls: type, args: tuple, kwargs: dict) -> bool:
    """Whether ``cls(*args, **kwargs)`` builds a gateway of its own that routes a call to a model."""
    import inspect

    try:
        given = inspect.signature(cls.__init__).bind_partial(None, *args, **kwargs).arguments
    except TypeError:  # ``__init__`` names the mistake
        return False
    if given.get("gateway") is not None:
        return False
    try:
        return any(m != RULES for m in _own_routes(given.get("model"), given.get("routes")).models())
    except (TypeError, ValueError):
        return False


def _checked_price(price: Any) -> tuple[float, float] | None:
    """``price`` checked as --price is: two finite numbers >= 0 (a NaN priced every call at NaN)."""
    from pydantic import TypeAdapter

    from socialsim.llm.gateway import UnitPrice

    return None if price is None else TypeAdapter(UnitPrice).validate_python(price)


def _usage(key: str):
    return lambda m: m.usage[key]
