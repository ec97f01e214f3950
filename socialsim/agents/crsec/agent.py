"""CRSECAgent: a generative agent with a personal norm database and the paper's four modules.

One step (10 simulated minutes by default) runs these phases:

- ``perceive`` (sync): the observation, and the other agents' behaviours of the last step in this
  area as structured facts (with the tracked norms they breach or visibly follow);
- ``deliberate`` (async, writes only to itself): entrepreneurs create their norms on the first
  step; the day plan and the 5-minute actions are (re)made; as a *sender*, DetectConflict on
  what was seen, DecideToTalk, and the whole bounded conversation with the violator is composed
  here (the receiver's lines asked on the receiver's behalf, kept on the sender's pending
  conversation); as an *observer*, GenerateThought then IdentifyNormativeInformation (routed as
  ``IdentifyNormFromThought``; on a conversation, ``IdentifyNormFromChat``) and the immediate evaluation;
- ``deliver`` (sync, fixed order): pending conversations reach their receivers and are recorded;
- ``reflect`` (async): as a *receiver*, IdentifyNormativeInformation on each conversation and the
  immediate evaluation; long-term synthesis when the qualified utilities exceed the threshold;
- ``act`` (sync): the step's 5-minute actions are executed in the world (as world facts);
- ``account`` (model scope, sync): breaches are read from the world facts; adoption and
  compliance are updated for the DataCollector.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import networkx as nx

from socialsim.agents.crsec import metrics
from socialsim.agents.crsec import operations as ops
from socialsim.agents.crsec.operations import NormView, ObservedFact
from socialsim.agents.crsec.settings import (
    CatalogueNorm,
    CRSECSettings,
    CRSECTraits,
    load_settings,
    minutes,
    with_params,
)
from socialsim.agents.generic import GenerativeAgent
from socialsim.agents.memory import MemoryStream, RetrievalWeights
from socialsim.agents.norms import Norm, NormDatabase, norm_key
from socialsim.agents.phases import Phase
from socialsim.llm.routing import RULES, RouteTable, refuse_judge_routes
from socialsim.scenarios.schema import AgentSpec
from socialsim.spaces.actions import Action

if TYPE_CHECKING:
    from socialsim.llm.gateway import Gateway
    from socialsim.model.society import SocietyModel

log = logging.getLogger("socialsim")

# rules: the utility (1-100) of the norm a conversation or thought suggests on a tracked norm for which
# the scenario's catalogue has no supporting text: the tracked norm's own name [ours; docs/crsec.md]
FALLBACK_CATALOGUE_UTILITY = 80
# model columns that count one step's events; each has a running total, NAME_total, so that a run's
# last row (a sweep's or batch_run's summary) says how many happened, not how many in the last step
STEP_COUNTS = ("conflicts", "norm_thoughts", "norm_chats", "unheard_chats", "syntheses", "breaches")


@dataclass
class Conversation:
    """A bounded norm conversation, composed by the sender and delivered in a sync phase."""

    step: int
    sender: str
    receiver: str
    conflict: str
    topic: str | None
    norm: str
    matter: str = ""  # the breach without its place ("smoking a cigarette"): what memories of it share
    lines: list[tuple[str, str]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(f'{s}: "{t}"' for s, t in self.lines)


class CRSECState:
    """What the society shares: settings, the door graph, this step's breaches and the events so far."""

    def __init__(self, model: SocietyModel) -> None:
        spec = model.scenario_spec
        self.settings = settings = with_params(load_settings(spec), model.arch_params, spec)
        if (planned := settings.actions_per_call * settings.action_minutes) < spec.step_minutes:
            # an agent plans its actions once a step: what one call plans must fill the step
            need = -(-int(spec.step_minutes) // settings.action_minutes)
            raise ValueError(
                f"crsec.actions_per_call x crsec.action_minutes ({settings.actions_per_call} x "
                f"{settings.action_minutes} = {planned} minutes) is shorter than a step of {spec.name} "
                f"({spec.step_minutes:g} minutes): one call plans a step's actions, so the rest of every step "
                f"would pass with no action; set crsec.actions_per_call to at least {need}")
        world = model.world
        self.doors = nx.Graph()
        self.doors.add_nodes_from(world.areas)
        self.doors.add_edges_from((a, b) for a, targets in world.doors.items() for b in targets)
        self.inside = {name: world.is_inside(name) for name in world.areas}
        self.outside = next((n for n, inside in self.inside.items() if not inside), next(iter(world.areas)))
        self.tags = {text: tuple(b.tags) for text, b in world.behaviours.items()}
        self.options = tuple(sorted(f"go to {a}" for a in world.areas)) + tuple(sorted(world.behaviours))
        self.breaches: list[metrics.Breach] = []
        self.totals: Counter[str] = Counter()  # STEP_COUNTS summed over the steps so far
        self.judge_fallbacks: Counter[str] = Counter()  # judge answers that were unusable, per operation
        self.judge = self._judge_gateway(model, settings.judge)

    @staticmethod
    def _judge_gateway(model: SocietyModel, judge: str) -> Gateway:
        """Measurement on its own route: the judge shares the run's tape, ledger and limits, and
        must not be one of the actors' models (they would grade themselves)."""
        # the actors match norms by the lexical matcher and never judge plans: these ask the judge only
        refuse_judge_routes(model.llm.routes.routes, [ops.MATCH_NORM, ops.JUDGE_PLAN_COMPLIANCE],
                            "--set crsec.judge=MODEL")
        actors = model.llm.routes.models() - {RULES}
        if judge != RULES and judge in actors:
            raise ValueError(f"crsec judge {judge!r} is also an actors' model ({', '.join(sorted(actors))}); "
                             f"give another model as the judge (--set crsec.judge=MODEL, or reproduce's --judge), "
                             f"or rules for the lexical matcher")
        return model.llm.derive(RouteTable(judge))

    def path(self, start: str, goal: str) -> list[str]:
        try:
            return nx.shortest_path(self.doors, start, goal)[1:]
        except (nx.NetworkXNoPath, nx.NodeNotFound):
            return []


class CRSECAgent(GenerativeAgent):
    """A person of a CRSEC scenario (Hobbs Café, the makerspace, yours) who creates, spreads,
    evaluates, synthesizes and complies with norms."""

    society_class = CRSECState
    settings_model = CRSECSettings  # the declared parameters (--set crsec.KEY=VALUE, sweeps, dashboard)
    phases = (
        Phase("perceive"),
        Phase("deliberate", is_async=True),
        Phase("deliver"),
        Phase("reflect", is_async=True),
        Phase("act"),
        Phase("account", scope="model"),
    )

    # --- recording ------------------------------------------------------------------------------
    @classmethod
    def model_reporters(cls) -> dict:
        return {
            "conflicts": lambda m: sum(a.counts["conflicts"] for a in m.agents),
            "norm_thoughts": lambda m: sum(a.counts["norm_thoughts"] for a in m.agents),
            "norm_chats": lambda m: sum(a.counts["norm_chats"] for a in m.agents),
            # composed but not heard: the receiver had heard conversations_heard already that step
            "unheard_chats": lambda m: sum(a.counts["unheard_chats"] for a in m.agents),
            "syntheses": lambda m: sum(a.counts["syntheses"] for a in m.agents),
            "breaches": lambda m: len(m.society.breaches),
            **{f"{name}_total": (lambda m, n=name: m.society.totals[n]) for name in STEP_COUNTS},
        }

    @classmethod
    def scenario_reporters(cls, model: SocietyModel) -> dict:
        """Per tracked norm: adoption, compliance in plans, in actions, and in both; and compliance
        among the agents who acted on the norm."""
        reporters = {}
        for t in model.society.settings.tracked_norms:
            reporters[f"adoption[{t.name}]"] = metrics.share(lambda a, n=t.name: a.norms.adopted(n))
            reporters[f"plan_compliance[{t.name}]"] = metrics.share(lambda a, n=t.name: a.plan_ok.get(n, False))
            reporters[f"action_compliance[{t.name}]"] = metrics.share(lambda a, n=t.name: a.actions_ok(n))
            reporters[f"compliance[{t.name}]"] = metrics.share(lambda a, n=t.name: a.complies(n))
            # the same, among the agents who did something the norm speaks about (NaN when none did)
            reporters[f"acting_compliance[{t.name}]"] = lambda m, n=t.name: metrics.acting_share(m, n)
        return reporters

    @classmethod
    def agent_reporters(cls) -> dict:
        return {
            **super().agent_reporters(),
            "qualified_norms": lambda a: len(a.norms.qualified()),
            "memories": lambda a: len(a.stream),
            "utility_sum": lambda a: a.norms.utility_sum(),
            "holds": lambda a: ";".join(sorted(a.norms.adopted_norms())),  # by the judge's labels
            "complies": lambda a: ";".join(t.name for t in a.settings.tracked_norms if a.complies(t.name)),
        }

    @classmethod
    def tables(cls) -> dict[str, list[str]]:
        return {
            "norm_changes": ["step", "agent", "norm_id", "content", "event", "state", "activated", "valid",
                             "utility", "type", "origin", "canonical", "opposes", "members", "source"],
            "conversations": ["step", "sender", "receiver", "topic", "turn", "speaker", "text", "heard"],
            "thoughts": ["step", "agent", "observation", "thought", "normative_info"],
            "plans": ["step", "agent", "day", "time", "activity", "place", "then"],
            "breaches": ["step", "agent", "norm", "area", "behaviour"],
            "norm_matches": ["step", "agent", "norm_id", "content", "judge", "judged", "lexical"],
            "sender_decisions": ["step", "agent", "observation", "conflict", "identity", "talk"],
        }

    @classmethod
    def report_sections(cls, model: SocietyModel, run_dir) -> list[str]:
        return metrics.report_sections(model, run_dir)

    # --- setup ----------------------------------------------------------------------------------
    def __init__(self, model: SocietyModel, spec: AgentSpec) -> None:
        super().__init__(model, spec)
        self.shared = model.society
        self.settings = self.shared.settings
        self.crsec_traits = CRSECTraits.model_validate(spec.traits)
        if self.crsec_traits.goal is None:  # a goal of the scenario's own place, not Hobbs Cafe's in every setting
            place = model.scenario_spec.title or model.scenario_spec.name
            self.crsec_traits.goal = f"spend the day at {place}"
        self.entrepreneur = self.crsec_traits.entrepreneur
        self.start_area = spec.start_area
        self.norms = NormDatabase(self.name)
        self.created = not self.entrepreneur
        self.repeated_creations = 0  # norms my creation answer repeated (kept once)
        self.counts: Counter[str] = Counter()
        self.facts: list[ObservedFact] = []
        self.plan: list[dict] = []
        self.plan_day = 0
        self.plan_ok: dict[str, bool] = {}
        self.actions: list[tuple[int, str]] = []  # (minute of day, action text)
        self.actions_item = -1
        self.actions_cover: frozenset[str] = frozenset()
        self.pending: Conversation | None = None
        self.inbox: list[Conversation] = []
        self.last_breach: dict[str, int] = {}
        self.first_adopted: dict[str, int] = {}  # tracked norm -> first step it was held (from the time series)
        self.first_compliant_act: dict[str, int] = {}  # tracked norm -> first step an act of mine visibly kept it
        self._rows: list[tuple[str, dict]] = []
        self._synthesis_tried: tuple[int, ...] = ()
        s = self.settings
        self.stream = MemoryStream(RetrievalWeights(s.memory_recency, s.memory_importance, s.memory_relevance,
                                                    s.memory_decay))
        self._vectors: dict[str, list[float]] = {}  # embeddings this agent asked for (memory relevance)
        self._judge_calls = 0  # numbers the judge's own random streams (see ``judged``)

    async def judged(self, op, ctx) -> tuple[Any, bool]:
        """Ask a measurement question on the judge's route (never the actors' model): (the answer,
        whether the judge gave it). An unusable answer is no measurement: the documented offline
        rule (the lexical matcher, the plan judge's rule) measures instead, and is counted.
        The judge is a passive instrument: its answer is read by the metrics only, and it draws
        (an LLM call's seed) from a stream of its own, made from the actors' RNG state without
        moving it, so asking it leaves every actor's later draw as it was."""
        self._judge_calls += 1
        rng = random.Random(f"judge:{self.phase_rng.getstate()[1][:8]}:{self._judge_calls}")
        answer = await self.shared.judge.ask(op, ctx, agent_id=self.unique_id, rng=rng)
        if answer.status != "fallback":
            return answer.value, True
        self.shared.judge_fallbacks[op.name] += 1
        return op.rule(ctx, rng), False

    # --- memory ---------------------------------------------------------------------------------
    def memorize(self, kind: str, text: str, importance: float) -> None:
        """Record a memory in CRSEC's retrievable memory stream (importance 1-10 by a documented rule of
        the caller). Not the generic agent's ``remember``: that short list takes the world's refusals of
        an action (shown in the dashboard's inspector); no CRSEC prompt reads it."""
        if self.settings.enable_memory:
            self.stream.add(self.model.steps, kind, text, importance)

    async def recall(self, query: str, whose: CRSECAgent | None = None) -> list[str]:
        """``whose`` memories (mine by default) most worth recalling for ``query``, in the order they
        happened; only earlier steps' records, so reading another agent's stream during a concurrent
        phase is safe. The order is the story's, not the ranking's: one agent's prompts in a step
        recall much the same memories for different queries, and listed alike they share a head
        the embedded engine evaluates once (ranked, each query put its own match first)."""
        if not self.settings.enable_memory:
            return []
        model = self.settings.memory_embedding_model
        embed = None
        if model:
            async def embed(texts: list[str]) -> list[list[float]]:
                return await self.model.llm.aembed(model, texts, "EmbedMemories", self.unique_id)
        found = await (whose or self).stream.retrieve(query, self.model.steps, self.settings.memory_k, embed,
                                                      self._vectors)
        return [f"(step {m.step}, {m.kind}) {m.text}" for m in sorted(found, key=lambda m: m.index)]

    # --- small helpers --------------------------------------------------------------------------
    def stance(self, topic: str | None) -> str:
        return self.crsec_traits.stance.get(topic or "", "neutral")

    def accept(self, topic: str | None) -> float:
        """The rules' chance that one exposure persuades me (named settings, by my stance)."""
        s = self.settings
        return {"for": s.accept_for, "against": s.accept_against}.get(self.stance(topic), s.accept_neutral)

    def _contrary_for(self, topic: str | None) -> CatalogueNorm | None:
        """The catalogue's contrary norm on a topic that I do not already hold (ties by the RNG)."""
        entries = [c for c in self.settings.norm_catalogue if c.about == topic and c.opposes
                   and not self.norms.holds_content(c.content)]
        if not entries:
            return None
        best = max(c.utility for c in entries)
        return self.phase_rng.choice([c for c in entries if c.utility == best])

    def clock(self) -> tuple[int, int]:
        """(day, minute of the day) at the start of this step."""
        return self.settings.clock_of_step(self.model.steps, self.model.scenario_spec.step_minutes)

    def views(self, norms: list[Norm]) -> list[NormView]:
        return [NormView(n.content, n.type, n.utility, n.canonical, n.opposes, tuple(sorted(n.covers)), n.theme)
                for n in norms]

    def actions_ok(self, topic: str) -> bool:
        """Compliance in actions, judged from world facts only: none of my executed 5-minute actions
        breached the norm within the compliance window (held or not: behaviour, not belief)."""
        window = self.settings.compliance_window_steps
        return self.model.steps - self.last_breach.get(topic, -10**9) >= window

    def complies(self, topic: str) -> bool:
        """Compliance: my actions keep the norm (world facts); plans are reported separately."""
        return self.actions_ok(topic)

    def _row(self, table: str, row: dict) -> None:
        """Buffer a table row: rows are only written in sync phases."""
        self._rows.append((table, row))

    def _catalogue_for(self, topic: str, exclude_held: bool) -> CatalogueNorm | None:
        entries = [c for c in self.settings.norm_catalogue if c.about == topic and not c.opposes]
        if exclude_held:
            entries = [c for c in entries if not self.norms.holds_content(c.content)]
        if entries:
            best = max(c.utility for c in entries)
            return self.phase_rng.choice([c for c in entries if c.utility == best])  # ties by the RNG
        if exclude_held and self.norms.holds(topic):
            return None
        t = self.settings.tracked(topic)
        return CatalogueNorm(content=t.name.capitalize() + ".", type=t.type, utility=FALLBACK_CATALOGUE_UTILITY,
                             theme=t.theme or t.name, about=topic)

    def _theme_of(self, content: str) -> str | None:
        key = norm_key(content)
        return next((c.theme for c in self.settings.norm_catalogue if norm_key(c.content) == key), None)

    # --- phase 1: perceive ------------------------------------------------------------------------
    def perceive(self) -> None:
        super().perceive()
        self.counts = Counter()
        self.facts = metrics.observed_facts(self.model, self, self.model.steps - 1)
        held = self.norms.covered()
        for fact in self.facts:  # importance: 2, +4 when it bears on a norm I hold, +2 for a breach [ours]
            self.memorize("observation", fact.text,
                          2 + 4 * bool(set(fact.concerns) & held) + 2 * bool(fact.violates))

    # --- phase 2: deliberate (async; writes only to self) -----------------------------------------
    async def deliberate(self) -> None:
        if not self.created:
            await self._create_norms()
        await self._plan()
        # attend to a few behaviours that bear on a tracked norm (breaching or visibly keeping it),
        # drawn at random so that no actor is always noticed first [ours]
        notable = [f for f in self.facts if f.concerns]
        facts = self.phase_rng.sample(notable, min(len(notable), self.settings.max_observed_facts))
        # conflicts are detected (and counted) whether or not the agent may then talk: the chat ablation
        # removes the conversations, not the measure of conflicts [ours]
        seen = await self._detect(facts)
        if seen is not None and self.settings.enable_chat:
            await self._send(*seen)
        if self.settings.enable_thoughts:
            await self._observe(facts)

    async def _create_norms(self) -> None:
        if not self.settings.enable_creation:
            self.created = True
            return
        ctx = ops.CreateContext(self.name, self.description, self.settings.initial_norms,
                                dict(self.crsec_traits.stance), list(self.settings.norm_catalogue),
                                examples=self.settings.prompt_examples)
        drafts = (await self.ask(ops.CREATE_NORM, ctx)).value.norms
        for d in drafts[: self.settings.initial_norms]:
            if self.norms.holds_content(d.content):
                # a database holds a norm once: a repeat would add its utility again and bring
                # synthesis (a threshold on the utilities' sum) early for no new norm [ours]
                self.repeated_creations += 1
                log.info("crsec: %s created %r again in one answer; it is kept once", self.name, d.content)
                continue
            norm = self.norms.add(d.content, d.utility, d.type, qualified=True, origin="created",
                                  step=self.model.steps, theme=self._theme_of(d.content))
            await self._match(norm)
        self.created = True

    async def _plan(self) -> None:
        day, now = self.clock()
        ctx = self._plan_context(day)
        if self.plan_day != day:
            ctx.memories = await self.recall(self.crsec_traits.goal)
            self.plan = sorted(ops.plan_items((await self.ask(ops.GENERATE_NORMATIVE_PLANS, ctx)).value),
                               key=ops.time_of)
            self.memorize("plan", ops.plan_memory(day, self.plan), 4)
            self.plan_day = day
            self.actions_item = -1
            for t in self.settings.tracked_norms:
                # compliance in plans: the plan was made with the norm held, and the judge finds it kept
                self.plan_ok[t.name] = False
                if self.norms.adopted(t.name):  # measurement: held by the judge's labels
                    judge = ops.JudgePlanContext(self.name, t, self.plan, self.shared.tags, self.shared.inside,
                                                 minutes(self.settings.day_end))
                    self.plan_ok[t.name] = (await self.judged(ops.JUDGE_PLAN_COMPLIANCE, judge))[0].index == 0
            for item in self.plan:
                self._row("plans", {"step": self.model.steps, "agent": self.name, "day": day, **item,
                                    "then": item.get("then") or ""})
        index = self._item_index(now)
        covered = self.norms.covered()
        step_end = now + self.model.scenario_spec.step_minutes
        planned_ahead = bool(self.actions) and self.actions[-1][0] >= step_end - self.settings.action_minutes
        if index is None or (index == self.actions_item and covered == self.actions_cover and planned_ahead):
            return
        item = self.plan[index]
        end = self._item_end(index)
        count = max(1, min(self.settings.actions_per_call, (end - now) // self.settings.action_minutes))
        paths = {a: self.shared.path(self.area, a) for a in self.shared.inside}
        actx = ops.ActionsContext(self.name, self.description, item, ops.plan_text([item]), ctx.norms, self.area,
                                  paths, count, self.shared.options, ctx, now,
                                  now + count * self.settings.action_minutes)
        texts = ops.action_list((await self.ask(ops.GENERATE_NORMATIVE_ACTIONS, actx)).value)
        self.actions = [(now + k * self.settings.action_minutes, t) for k, t in enumerate(texts)]
        self.actions_item, self.actions_cover = index, covered

    def _plan_context(self, day: int) -> ops.PlanContext:
        s = self.settings
        home = self.crsec_traits.home_area or self.start_area or next(iter(self.shared.inside))
        return ops.PlanContext(
            self.name, self.description, self.crsec_traits.goal, day, minutes(s.day_start), minutes(s.day_end),
            s.plan_item_minutes, self.views(self.norms.qualified()) if s.enable_compliance else [],
            tuple(sorted(self.shared.tags)),
            tuple(self.shared.inside), home, self.shared.outside, list(self.crsec_traits.habits),
            s.filler_behaviour, list(s.tracked_norms), self.shared.tags, self.shared.inside,
            dict(self.crsec_traits.stance), temptation=s.temptation,
            schedule={minutes(i.time): (i.behaviour, i.place) for i in s.schedule}, examples=s.prompt_examples)

    def _item_index(self, now: int) -> int | None:
        if not self.plan:
            return None
        starts = [ops.time_of(i) for i in self.plan]
        index = None
        for k, start in enumerate(starts):
            if start <= now:
                index = k
        return index

    def _item_end(self, index: int) -> int:
        """When the current item ends, as the plan judge reads it: the next item's start, or day_end."""
        starts = [ops.time_of(i) for i in self.plan]
        return ops.item_end(starts[index], starts, minutes(self.settings.day_end))

    async def _detect(self, facts: list[ObservedFact]) -> tuple[ObservedFact, dict] | None:
        """Sender, first half: DetectConflict on each attended fact against my qualified norms (each
        "yes" a conflict, counted); the first conflicting fact and its recorded decision, or None."""
        qualified = self.views(self.norms.qualified())
        if not qualified or not facts:
            return None
        target, decided = None, None
        identity = "norm entrepreneur" if self.entrepreneur else "ordinary citizen"
        for fact in facts:
            conflict = (await self.ask(ops.DETECT_CONFLICT, ops.ConflictContext(self.name, fact, qualified))).value.yes
            # what the sender saw and decided (the questionnaire's Sender task rates it); talk: None = not asked
            row = {"step": self.model.steps, "agent": self.name, "observation": fact.text, "conflict": conflict,
                   "identity": identity, "talk": None}
            self._row("sender_decisions", row)
            if conflict:
                self.counts["conflicts"] += 1
                if target is None:
                    target, decided = fact, row
        return None if target is None else (target, decided)

    async def _send(self, target: ObservedFact, decided: dict) -> None:
        """Sender, second half (the chat ablation removes it): decide to talk about the conflict,
        then compose the whole conversation."""
        talk = ops.TalkContext(self.name, self.description, self.entrepreneur, self.crsec_traits.talk_propensity,
                               target.text, target.doing, await self.recall(target.text),
                               self.settings.recall_overlap)
        decided["talk"] = (await self.ask(ops.DECIDE_TO_TALK, talk)).value.yes
        if not decided["talk"]:
            return
        receiver = self.model.agent_named(target.actor)
        topic = next((v for v in target.violates if self.norms.holds(v)), None)
        norm = next((n for n in self.norms.qualified() if topic in n.covers), None) or self.norms.qualified()[0]
        if norm.members and topic:  # an abstract norm: name the specific member it covers, too
            member = next((self.norms.get(m) for m in norm.members if topic in self.norms.get(m).covers), None)
            said = f"{norm.content} ({member.content})" if member else norm.content
        else:
            said = norm.content
        conversation = Conversation(self.model.steps, self.name, receiver.name, target.act, topic, said,
                                    target.doing)
        for turn in range(self.settings.conversation_turns):
            speaker, partner = (self, receiver) if turn % 2 == 0 else (receiver, self)
            ctx = ops.TurnContext(speaker.name, speaker.description, partner.name,
                                  "sender" if speaker is self else "receiver", target.act,
                                  said if speaker is self else None, speaker.stance(topic),
                                  list(conversation.lines), turn // 2,
                                  await self.recall(target.act, whose=speaker), target.doing,
                                  self.settings.recall_overlap)
            # the receiver's lines are asked on its behalf, from the sender's coroutine: recorded under the
            # sender (whose calls are sequential) and drawing from the sender's phase RNG, so the ledger's
            # order never depends on which agent's calls finished first (replay --check-order caught it)
            answer = await self.ask(ops.CONVERSE_TURN, ctx)
            line = ops.spoken_line(answer.value.text, speaker.name, partner.name)
            conversation.lines.append((speaker.name, line or ops.CONVERSE_TURN.fallback(ctx).text))
        self.pending = conversation

    async def _observe(self, facts: list[ObservedFact]) -> None:
        """Observation: a thought about the most telling fact, then normative info from the thought."""
        fact = next((f for f in facts if f.concerns), None)
        if fact is None:
            return
        topic = fact.concerns[0]
        stance = self.stance(topic)
        memories = await self.recall(fact.text)
        thought = (await self.ask(ops.GENERATE_THOUGHT,
                                  ops.ThoughtContext(self.name, self.description, fact, stance, memories,
                                                     self.settings.recall_overlap))).value.text
        ctx = ops.IdentifyContext(self.name, f'"{thought}"', topic, self._catalogue_for(topic, exclude_held=True),
                                  stance, fact.doing, memories,
                                  accept=self.accept(topic), contrary=self._contrary_for(topic),
                                  contrary_rate=self.settings.contrary_rate,
                                  recall_overlap=self.settings.recall_overlap,
                                  examples=self.settings.prompt_examples)
        info = (await self.ask(ops.IDENTIFY_FROM_THOUGHT, ctx)).value
        self._row("thoughts", {"step": self.model.steps, "agent": self.name, "observation": fact.text,
                               "thought": thought, "normative_info": info.content if info.found else ""})
        self.memorize("thought", thought, 7 if info.found else 4)  # a thought that names a norm matters more
        if info.found:
            self.counts["norm_thoughts"] += 1
            await self._take_in(info, "thought", f'"{thought}"', topic)

    # --- the immediate evaluation (shared by chats, thoughts and synthesis) ---------------------------
    async def _take_in(self, info: ops.NormativeInfo, origin: str, source: str, topic: str | None) -> Norm:
        norm = self.norms.add(info.content, info.utility, info.type, qualified=False, origin=origin,
                              step=self.model.steps, source=source, theme=self._theme_of(info.content))
        await self._match(norm)
        await self._sanity_check(norm, source, topic)
        return norm

    async def _match(self, norm: Norm) -> None:
        """Which tracked norm a held norm is about, read twice and kept apart: by the agent itself
        (the offline lexical matcher, the same whatever the judge: what its rules act on) and by the
        judge (what adoption is measured by; read by the metrics only)."""
        ctx = ops.MatchContext(norm.content, list(self.settings.tracked_norms))
        own = ops.MATCH_NORM.rule(ctx, self.phase_rng)  # the matcher draws nothing
        canonical, opposes = ops.match_result(ctx, own)
        self.norms.set_match(norm, canonical, opposes, self.model.steps)
        if norm.theme is None and canonical:
            norm.theme = self.settings.tracked(canonical).theme
        choice, by_judge = await self.judged(ops.MATCH_NORM, ctx)
        self.norms.set_judged(norm, *ops.match_result(ctx, choice))
        self._row("norm_matches", {"step": self.model.steps, "agent": self.name, "norm_id": norm.id,
                                   "content": norm.content, "judge": self.settings.judge,
                                   "judged": ctx.options[choice.index] if by_judge else None,
                                   "lexical": own.text})

    async def _sanity_check(self, norm: Norm, source: str, topic: str | None, members: tuple[int, ...] = ()) -> bool:
        """The four checks in the paper's order; the first failure leaves the norm unqualified."""
        step = self.model.steps
        qualified = self.views([n for n in self.norms.qualified() if n.id not in members and n.id != norm.id])
        expected = self.settings.tracked(norm.canonical).type if norm.canonical else None
        theme = self.settings.tracked(topic).theme if topic else None
        ctx = ops.CheckContext(self.views([norm])[0], source, topic, theme, qualified, expected,
                               examples=self.settings.prompt_examples)
        checks = set(self.settings.checks)  # an ablation may leave some out
        if "consistency" in checks and not (await self.ask(ops.CHECK_CONSISTENCY, ctx)).value.yes:
            self.norms.reject(norm, "consistency", step)
            return False
        if "duplication" in checks and (await self.ask(ops.CHECK_DUPLICATION, ctx)).value.yes:
            self.norms.reject(norm, "duplication", step)
            return False
        verdict = (await self.ask(ops.CHECK_TYPE, ctx)).value.index if "type" in checks else 0
        corrected = {1: "descriptive", 2: "injunctive"}.get(verdict)
        if corrected and corrected != norm.type:
            self.norms.retype(norm, corrected, step)
            self.norms.reject(norm, "type", step)
            return False
        if "conflict" in checks and (await self.ask(ops.CHECK_CONFLICT, ctx)).value.yes:
            self.norms.reject(norm, "conflict", step)
            return False
        self.norms.qualify(norm, step)
        return True

    # --- phase 3: deliver (sync, fixed order) -----------------------------------------------------
    def deliver(self) -> None:
        """The conversation reaches its receiver, unless the receiver has already heard
        ``conversations_heard`` this step (in the step's fixed order): then it is recorded with
        heard=False and nothing else happens - no chat in the world, no memory, no interaction, not
        counted as a norm-related chat, not reflected on (nor rated by the questionnaire)."""
        conversation, self.pending = self.pending, None
        if conversation is None:
            return
        receiver = self.model.agent_named(conversation.receiver)
        heard = len(receiver.inbox) < self.settings.conversations_heard
        for turn, (speaker, text) in enumerate(conversation.lines):
            self.model.datacollector.add_table_row("conversations", {
                "step": conversation.step, "sender": conversation.sender, "receiver": conversation.receiver,
                "topic": conversation.topic or "", "turn": turn, "speaker": speaker, "text": text, "heard": heard})
        if not heard:
            self.counts["unheard_chats"] += 1
            return
        for speaker, text in conversation.lines:
            partner = conversation.receiver if speaker == conversation.sender else conversation.sender
            self.world.execute(self.model.agent_named(speaker), Action("chat with", partner, content=text),
                               self.model.steps)
        self.model.record_interaction(self.name, receiver.name, "norm chat", conversation.lines[0][1])
        said = " / ".join(f"{s}: {t}" for s, t in conversation.lines[:2])
        self.memorize("conversation", f"I talked to {receiver.name} about {conversation.conflict}: {said}", 5)
        receiver.memorize("conversation", f"{self.name} talked to me about {conversation.conflict}: {said}", 6)
        receiver.inbox.append(conversation)
        self.counts["norm_chats"] += 1

    # --- phase 4: reflect (async; writes only to self) --------------------------------------------
    async def reflect(self) -> None:
        heard, self.inbox = self.inbox, []  # at most conversations_heard (deliver keeps the rest out)
        for conversation in heard:
            topic = conversation.topic
            suggestion = self._catalogue_for(topic, exclude_held=False) if topic else None
            ctx = ops.IdentifyContext(self.name, conversation.text, topic, suggestion, self.stance(topic),
                                      conversation.matter, await self.recall(conversation.conflict),
                                      accept=self.accept(topic), contrary=self._contrary_for(topic),
                                      contrary_rate=self.settings.contrary_rate,
                                      recall_overlap=self.settings.recall_overlap,
                                      examples=self.settings.prompt_examples)
            info = (await self.ask(ops.IDENTIFY_FROM_CHAT, ctx)).value
            if info.found:
                await self._take_in(info, "conversation", conversation.text, topic)
        qualified = tuple(n.id for n in self.norms.qualified())
        if (self.settings.enable_synthesis and self.norms.utility_sum() > self.settings.synthesis_threshold
                and qualified != self._synthesis_tried):
            self._synthesis_tried = qualified  # the same set is not classified again
            await self._synthesize()

    async def _synthesize(self) -> None:
        """Long-term synthesis: classify, abstract each category of >1 norm, sanity-check, deactivate."""
        qualified = self.norms.qualified()
        themes = {t.name: t.theme for t in self.settings.tracked_norms if t.theme}
        ctx = ops.ClassifyContext(self.name, self.views(qualified), themes)
        categories = (await self.ask(ops.CLASSIFY_SPECIFIC_NORMS, ctx)).value.categories
        used: set[int] = set()
        for category in categories:
            members = []
            for number in category.members:
                if 1 <= number <= len(qualified) and number not in used:
                    used.add(number)
                    members.append(qualified[number - 1])
            if len(members) < 2:
                continue
            views = self.views(members)
            asked = ops.AbstractContext(category.theme, views, self.settings.prompt_examples)
            abstract = (await self.ask(ops.GENERATE_ABSTRACT_NORM, asked)).value
            if not abstract.content.strip():
                continue
            ids = tuple(m.id for m in members)
            source = "\n".join(f"- {m.content}" for m in members)
            norm = self.norms.add(abstract.content, ops.weighted_utility(views, abstract.weights), abstract.type,
                                  qualified=False, origin="synthesis", step=self.model.steps, source=source,
                                  theme=category.theme, members=ids)
            await self._match(norm)
            if await self._sanity_check(norm, source, None, members=ids):
                self.norms.deactivate(ids, self.model.steps, norm.id)
                self.counts["syntheses"] += 1

    # --- phase 5: act (sync) ------------------------------------------------------------------------
    def act(self) -> None:
        for table, row in self._rows:
            self.model.datacollector.add_table_row(table, row)
        self._rows = []
        for row in self.norms.drain_changes():
            self.model.datacollector.add_table_row("norm_changes", row)
        _, now = self.clock()
        end = now + self.model.scenario_spec.step_minutes
        for start, text in self.actions:
            if now <= start < end:
                action = self.world.parse(text) or Action("do", text)
                outcome = self.world.execute(self, action, self.model.steps)
                self.last_action, self.last_outcome = text, outcome
                if not outcome.ok:
                    self.remember(f"I tried to {text}, but {outcome.reason}")

    # --- phase 6: account (model scope, sync) -------------------------------------------------------
    @classmethod
    def account(cls, model: SocietyModel) -> None:
        """Read this step's breaches from the world facts (they drive compliance in actions); add the
        step's events to the running totals."""
        state = model.society
        state.breaches = metrics.breaches(model.world, state.settings, model.steps, model.scenario_spec.step_minutes)
        state.totals["breaches"] += len(state.breaches)
        for agent in model.agents:
            state.totals.update({name: agent.counts[name] for name in STEP_COUNTS if name != "breaches"})
        for name, norm in metrics.compliant_acts(model.world, state.settings, model.steps,
                                                     model.scenario_spec.step_minutes):
            model.agent_named(name).first_compliant_act.setdefault(norm, model.steps)
        for agent in model.agents:
            for norm in agent.norms.adopted_norms():  # adoption: by the judge's labels
                agent.first_adopted.setdefault(norm, model.steps)
        for b in state.breaches:
            agent = model.agent_named(b.agent)
            agent.last_breach[b.norm] = b.step
            model.datacollector.add_table_row("breaches", {"step": b.step, "agent": b.agent, "norm": b.norm,
                                                           "area": b.area, "behaviour": b.behaviour})

