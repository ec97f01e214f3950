"""The generic generative agent: perceive -> choose one action through the gateway -> act.

It is the base the architectures extend. Its step is split into three phases so the model can
run every agent's LLM calls concurrently: ``perceive`` (read the world), ``decide`` (async: ask
the gateway; writes only to the agent itself) and ``act`` (execute on the world, in a fixed
agent order).
"""

from __future__ import annotations

import random
from collections import deque
from typing import TYPE_CHECKING

from mesa.discrete_space import CellAgent

from socialsim.agents.phases import Phase
from socialsim.llm.operations.generic import CHOOSE_ACTION, COMPOSE_CHAT, ActionContext, ChatContext
from socialsim.scenarios.schema import AgentSpec
from socialsim.spaces.actions import Action, Outcome

if TYPE_CHECKING:
    from socialsim.model.society import SocietyModel

MEMORY_SIZE = 10


class GenerativeAgent(CellAgent):
    """A named agent with a description, a short memory and one action per step."""

    phases = (Phase("perceive"), Phase("decide", is_async=True), Phase("act"))
    # What all agents of one model share (settings, society-level state): a class taking the
    # model, built once by the model before its agents, as ``model.society``. None: nothing shared.
    society_class: type | None = None
    settings_model: type | None = None  # a pydantic model of the architecture's parameters (agents/params.py)
    # The space the agents live in, which the scenario must give: "map" (areas, objects, doors:
    # ``model.world``) or "network" (who observes whom: ``model.social``).
    space = "map"

    # --- what the DataCollector records (architectures extend these) --------------------------
    @classmethod
    def model_reporters(cls) -> dict:
        return {}

    @classmethod
    def agent_reporters(cls) -> dict:
        return {"area": "area", "action": "last_action", "action_ok": lambda a: a.last_outcome.ok}

    @classmethod
    def tables(cls) -> dict[str, list[str]]:
        return {}

    @classmethod
    def run_measures(cls, run_dir) -> dict:
        """Figures measured once, at a run's end, and kept in its directory (ASVO's separability):
        a sweep's runs table and an export put them beside the final step's values, one column each.
        A run directory holding none gives the same names, each None: a sweep reads them so, before
        its first run, to check that a figure's outcome is a column its runs will have."""
        return {}

    def __init__(self, model: SocietyModel, spec: AgentSpec) -> None:
        super().__init__(model)
        self.name = spec.name
        self.description = spec.description
        self.traits = dict(spec.traits)
        self.memory: deque[str] = deque(maxlen=MEMORY_SIZE)
        self.observation = ""
        self.action_space: list[Action] = []
        self.intent: Action | None = None
        self.last_action = ""
        self.last_outcome = Outcome(ok=True)
        self.last_thought = ""
        self.phase_rng = random.Random(0)  # replaced by the gateway before every phase

    # --- helpers ----------------------------------------------------------------------------
    @property
    def world(self):
        return self.model.world

    @property
    def area(self) -> str:
        return self.world.area_of(self)

    def remember(self, text: str) -> None:
        self.memory.append(f"[step {self.model.steps}] {text}")

    def recent_partners(self, steps: int = 3) -> list[str]:
        since = self.model.steps - steps
        return sorted({e.target for e in self.world.events
                       if e.agent == self.name and e.verb == "chat with" and e.ok and e.step >= since})

    def heard_from(self, partner: str, steps: int = 3) -> list[str]:
        since = self.model.steps - steps
        return [e.content for e in self.world.heard_by(self.name, since) if e.agent == partner]

    async def ask(self, op, ctx):
        """Ask the gateway one operation on behalf of this agent."""
        return await self.model.llm.ask(op, ctx, agent_id=self.unique_id, rng=self.phase_rng)

    # --- the three phases -------------------------------------------------------------------
    def perceive(self) -> None:
        self.observation = self.world.observe(self)
        self.action_space = self.world.action_space(self)
        for event in self.world.heard_by(self.name, self.model.steps - 1):
            if event.step == self.model.steps - 1:
                self.remember(f'{event.agent} said to me: "{event.content}"')

    async def decide(self) -> None:
        ctx = ActionContext(
            name=self.name,
            description=self.description,
            setting=self.model.scenario_spec.context,
            observation=self.observation,
            actions=[a.text for a in self.action_space],
            memory=list(self.memory),
            people_here=[p.name for p in self.world.people_in(self.area, besides=self)],
            recent_partners=self.recent_partners(),
        )
        choice = (await self.ask(CHOOSE_ACTION, ctx)).value
        action = self.action_space[choice.index]
        if action.verb == "chat with":
            chat = ChatContext(self.name, self.description, self.model.scenario_spec.context, self.observation,
                               action.target, self.heard_from(action.target), list(self.memory))
            action = action.with_content((await self.ask(COMPOSE_CHAT, chat)).value.text)
        self.intent = action

    def act(self) -> None:
        if self.intent is None:
            return
        outcome = self.world.execute(self, self.intent, self.model.steps)
        self.last_action, self.last_outcome = self.intent.text, outcome
        if outcome.ok:
            self.remember(f"I did: {self.intent.text}")
            if self.intent.verb == "chat with":
                self.model.record_interaction(self.name, self.intent.target, "chat", self.intent.content)
        else:
            self.remember(f"I tried to {self.intent.text}, but {outcome.reason}")
        self.intent = None
