"""ITCMA-S agents with the LTRHA social framework (architecture ``itcmas``).

One step, as phases (``socialsim.agents.phases``):

1. ``perceive`` (sync): the observation becomes the primal impression PI^t (a phenomenal field);
   P, A, D and the driver are updated (eq. 10-15); long-term memory is activated (similar and emotionally intense memories first)
   and blended with the present into imagination (eq. 5; Algorithm 1 draws from the model's RNG);
   the frame is stored and old memory compressed around its highest-arousal frame (eq. 8-9).
2. ``deliberate`` (async, writes only to the agent): Elim rates each action type μ ∈ [1, 5] and
   drops those under the threshold (eq. 16); the protention of each remaining candidate is
   predicted (eq. 7); the action model returns a thought and one action (and chat words); the
   LTRHA social filter judges the chosen action.
3. ``act`` (sync, agents take turns in the step's shuffled order): a filtered action is logged
   "(This action has been filtered by LTRHA) ..." and not executed; otherwise it succeeds with
   probability rate_i (eq. 18) and is executed on the world.
4. ``locale`` (sync, model scope): topic per area (eq. 17); ``matrix`` (async, model scope):
   every ``matrix_every`` steps the matrix ranks all agents; ``allocate`` (sync) applies eq. 19.

The ablation is one model parameter, ``ablation`` = base | ltrha | memory | driver | full: base
ITCMA juxtaposes memories, never compresses them, adds this moment's PAD to the driver and has
no LTRHA (no topic, resources, matrix, filter or habitus).
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
from collections import deque
from typing import TYPE_CHECKING, Any

from socialsim.agents.emotion import EmotionState
from socialsim.agents.generic import GenerativeAgent
from socialsim.agents.itcmas.ltrha import (
    FILTERED_PREFIX,
    Habitus,
    gini,
    home_owner,
    place_kind,
    reallocate,
    success_rate,
    topic,
)
from socialsim.agents.itcmas.operations import (
    CHAT,
    CHOOSE,
    ELIM,
    RANK_AGENTS,
    SOCIAL_FILTER,
    Candidate,
    ChoiceContext,
    ElimContext,
    FilterContext,
    ITCMAChatContext,
    MatrixContext,
    MatrixEntry,
    Protention,
    ProtentionContext,
    check_judge,
)
from socialsim.agents.itcmas.phenomenal import (
    Consciousness,
    PhenomenalField,
    blend,
    diff,
    field_from_text,
    juxtapose,
    observation_phrases,
)
from socialsim.agents.itcmas.settings import ITCMASConfig, load_config
from socialsim.agents.phases import Phase
from socialsim.scenarios.schema import misspelt_traits
from socialsim.spaces.actions import Action, Outcome

if TYPE_CHECKING:
    from socialsim.model.society import SocietyModel

log = logging.getLogger("socialsim")
ACTION_COLUMNS = ["step", "agent", "area", "action", "status", "reason", "thought", "driver", "P", "A", "D",
                  "resources", "actions_available", "candidates"]
_NUMBER = re.compile(r"\s\d+\b")


def action_type(action: Action) -> str:
    """What Elim rates: moves and chats as they are, other actions without object numbers
    ('take book 12 from bookshelf 12' -> 'take book from bookshelf') [ours: one rating per type]."""
    if action.verb in ("go to", "leave", "chat with"):
        return action.text
    return _NUMBER.sub("", action.text)


def kind_of(name: str) -> str:
    """'bookshelf 12' -> 'bookshelf'; "LL's clothes 2" -> 'clothes'."""
    return _NUMBER.sub("", name.split("'s ")[-1]).strip()


def check_kinds(config: ITCMASConfig, world_map, where: str) -> None:
    """The furniture and item kinds the rules' words name must be the scenario's (a typo would
    silently never match)."""
    furniture = {kind_of(f.name) for f in world_map.furniture} if world_map else set()
    items = {kind_of(i.name) for i in world_map.items} if world_map else set()
    named = [("rest_furniture", kind, furniture, "furniture") for kind in config.rest_furniture]
    named += [(f"goal_objects.{word}", kind, items, "item") for word, kinds in config.goal_objects.items()
              for kind in kinds]
    for field, kind, known, what in named:
        if kind not in known:
            raise ValueError(f"{where}: invalid itcmas parameters: {field}: {kind!r} is no {what} kind of the map "
                             f"(kinds: {', '.join(sorted(known)) or 'none'})")


class ITCMASociety:
    """Society-level state of one model: the validated parameters, topics and the matrix log."""

    def __init__(self, model: SocietyModel) -> None:
        where = model.scenario_spec.where
        self.config: ITCMASConfig = load_config(model.scenario_spec.itcmas, model.arch_params, where)
        check_judge(model.llm.routes)  # the end-of-run judge must not be an actors' model
        spec = model.scenario_spec
        names = {a.name for a in spec.agents}
        areas = {a.name for a in spec.map.areas} if spec.map else set()
        for agent, home in self.config.homes.items():
            if agent not in names:
                raise ValueError(f"{where}: invalid itcmas parameters: homes: unknown agent {agent!r}")
            if home not in areas:
                raise ValueError(f"{where}: invalid itcmas parameters: homes.{agent}: unknown area {home!r}")
        check_kinds(self.config, spec.map, where)
        if misspelt := misspelt_traits(spec, ["goal"], "itcmas"):
            raise ValueError(f"{where}: invalid itcmas traits: " + "; ".join(misspelt))
        self.setting = spec.context  # every operation's system message: the scenario's own world
        self.vocabulary = self.config.vocabulary
        homes = set(self.config.homes.values())  # the public rooms a rule-made chat may name
        self.public_rooms = [a.name for a in spec.map.areas if a.kind != "outside" and a.name not in homes] \
            if spec.map else []
        self.topics: dict[str, float] = {}
        self.pending_ranking: list[str] | None = None
        self.matrix_runs = 0
        self.filtered_total = 0
        self.truncated_protentions = 0
        self.protention_op = Protention()  # its max_tokens is a parameter (protention_tokens)
        self.protention_op.max_tokens = self.config.protention_tokens


class ITCMASAgent(GenerativeAgent):
    """An identity-less ITCMA-S agent; its LTRHA state lives on it (resources, habitus)."""

    society_class = ITCMASociety
    settings_model = ITCMASConfig  # the declared parameters (--set itcmas.KEY=VALUE, sweeps, dashboard)
    phases = (
        Phase("perceive"),
        Phase("deliberate", is_async=True),
        Phase("act"),
        Phase("locale", scope="model"),
        Phase("matrix", is_async=True, scope="model"),
        Phase("allocate", scope="model"),
    )

    # --- recording -------------------------------------------------------------------------
    @classmethod
    def model_reporters(cls) -> dict:
        return {
            "topics": lambda m: {k: round(v, 6) for k, v in m.society.topics.items()},
            "filtered_actions": lambda m: m.society.filtered_total,
            "truncated_protentions": lambda m: m.society.truncated_protentions,
            "matrix_runs": lambda m: m.society.matrix_runs,
            "memory_total": lambda m: sum(len(a.consciousness.long_term) for a in m.agents),
            "resources_total": lambda m: (sum(a.resources for a in m.agents)
                                          if m.society.config.modules["ltrha"] else None),
            # the total says how much there is; the Gini, how the matrix's reallocations share it out
            "resources_gini": lambda m: (gini([a.resources for a in m.agents])
                                         if m.society.config.modules["ltrha"] else None),
        }

    @classmethod
    def agent_reporters(cls) -> dict:
        return {
            **super().agent_reporters(),
            "driver": lambda a: a.emotion.driver,
            "P": lambda a: a.emotion.P,
            "A": lambda a: a.emotion.A,
            "D": lambda a: a.emotion.D,
            "resources": lambda a: a.resources if a.cfg.modules["ltrha"] else None,
            "memory_count": lambda a: len(a.consciousness.long_term),
            "status": "last_status",
            "thought": "last_thought",
        }

    @classmethod
    def tables(cls) -> dict[str, list[str]]:
        return {
            "itcmas_actions": ACTION_COLUMNS,
            "filtered_actions": ["step", "agent", "area", "action"],
            "topics": ["step", "area", "agents", "topic"],
            "matrix": ["step", "ranking", "deltas", "resources"],
        }

    @classmethod
    def report_sections(cls, model: SocietyModel, run_dir) -> list[str]:
        from socialsim.agents.itcmas.metrics import report_sections

        return report_sections(model, run_dir)

    # --- state -----------------------------------------------------------------------------
    def __init__(self, model: SocietyModel, spec) -> None:
        super().__init__(model, spec)
        self.society = model.society
        cfg = self.cfg = self.society.config
        self.goal = str(spec.traits.get("goal", cfg.goal))
        self.consciousness = Consciousness(retention_size=cfg.retention)
        self.emotion = EmotionState(driver=cfg.initial_driver, decay=cfg.emotion_decay,
                                    use_driver_module=cfg.modules["driver"], weights=cfg.emotion_weights,
                                    scale=cfg.signal_scale)
        self.habitus = Habitus()
        self.resources = cfg.initial_resources
        self.pi: PhenomenalField | None = None
        self.imagine: PhenomenalField | None = None
        self.activated: list[tuple[float, PhenomenalField]] = []
        self.protention_field: PhenomenalField | None = None  # Pro^{t-1} of the chosen action
        self.next_protention: PhenomenalField | None = None
        self.addressed_by: list[str] = []
        self.visited: deque[str] = deque(maxlen=10)
        self.filter_verdict = False
        self.candidates_n = 0
        self.elim_ratings: dict[str, int] = {}
        self.last_status = ""
        self.filtered_lately: deque[str] = deque(maxlen=5)  # my actions LTRHA filtered lately

    # --- 1. perceive -----------------------------------------------------------------------
    def perceive(self) -> None:
        step = self.model.steps
        self.observation = self.world.observe(self)
        self.action_space = self.world.action_space(self)
        self.visited.append(self.area)
        self.emotion.decay_step()
        heard = [e for e in self.world.heard_by(self.name, step - 1) if e.step == step - 1]
        for event in heard:
            self.remember(f'{event.agent} said to me: "{event.content}"')
            self.emotion.gain(0.5)
        self.addressed_by = sorted({e.agent for e in heard})
        for event in self.world.events:  # being ignored: my chat two steps ago got no answer [ours]
            if event.step == step - 2 and event.agent == self.name and event.verb == "chat with" and event.ok:
                if not [e for e in self.world.heard_by(self.name, step - 2) if e.agent == event.target]:
                    self.emotion.hurt(0.5)
        pi = self.perceive_field()
        cfg = self.cfg
        diffs = ([diff(pi, frame, cfg.sim_weights) for frame in self.consciousness.retention]
                 if cfg.arousal_retention else [])
        pro_diff = (diff(pi, self.protention_field, cfg.sim_weights)
                    if self.protention_field is not None and cfg.dominance_from_protention else None)
        self.emotion.update(diffs, pro_diff)
        pi.pad = self.emotion.pad
        self.activated = (self.consciousness.activate(pi, cfg.activation_k, cfg.sim_weights)
                          if cfg.memory_activation else [])
        imagine = pi
        for _, memory in self.activated:
            if cfg.modules["blending"]:
                imagine = blend(imagine, memory, self.cfg.blend_threshold, self.cfg.blend_rate, self.random,
                                self.cfg.sim_weights)
            else:
                imagine = juxtapose(imagine, memory)
        self.pi, self.imagine = pi, imagine
        self.consciousness.store(pi)
        self.consciousness.retain(pi)
        if self.cfg.modules["memory"]:
            self.consciousness.compress(self.cfg.segment_length, self.cfg.blend_threshold, self.cfg.blend_rate,
                                        self.random, self.cfg.sim_weights)

    def perceive_field(self) -> PhenomenalField:
        """PI^t: one row per phrase of the observation, placed where its object is on the grid."""
        me = self.cell.coordinate
        rows = []
        for phrase in observation_phrases(self.observation):
            ox, oy = self._locate(phrase, me)
            dx, dy = ox - me[0], oy - me[1]
            rows.append((phrase, (math.atan2(dy, dx), 0.0, math.hypot(dx, dy))))
        return PhenomenalField.from_rows(rows, step=self.model.steps, area=self.area)

    def _locate(self, phrase: str, me: tuple[int, int]) -> tuple[int, int]:
        world = self.world
        if phrase.startswith("a person named "):
            name = re.split(r"\s*\(|\s+who\s", phrase[len("a person named "):])[0].strip()
            other = world.agents.get(name)
            return other.cell.coordinate if other is not None else me
        if phrase.startswith("a door to "):
            return self._door(phrase[len("a door to "):])
        furniture = phrase.split(" placed on the ")[-1] if " placed on the " in phrase else phrase.removeprefix("the ")
        furniture = furniture.split(" in the ")[0].strip()
        if furniture in world.furniture:
            return world.furniture[furniture].coordinate
        return me  # the place itself, what the agent holds

    def _door(self, target: str) -> tuple[int, int]:
        """A door lies on the agent's area at the point nearest the other area's centre [ours]."""
        here, there = self.world.areas[self.area], self.world.areas.get(target)
        if there is None:
            return self.cell.coordinate
        cx, cy = there.x + there.width / 2, there.y + there.height / 2
        return (int(min(max(cx, here.x), here.x + here.width - 1)), int(min(max(cy, here.y), here.y + here.height - 1)))

    # --- 2. deliberate (async: writes only to this agent) -----------------------------------
    def _rngs(self, n: int) -> list[random.Random]:
        """One RNG per concurrent call, drawn in a fixed order before any call starts."""
        return [random.Random(self.phase_rng.getrandbits(64)) for _ in range(n)]

    async def _ask_all(self, op, ctxs: list) -> list:
        rngs = self._rngs(len(ctxs))
        return await self.model.llm.gather(*(self.model.llm.ask(op, c, agent_id=self.unique_id, rng=r)
                                      for c, r in zip(ctxs, rngs, strict=True)))

    def _spoke_to_me(self, name: str) -> bool:
        return bool([e for e in self.world.heard_by(self.name, self.model.steps - 2) if e.agent == name])

    async def deliberate(self) -> None:
        cfg = self.cfg
        types: dict[str, list[Action]] = {}
        for action in self.action_space:
            types.setdefault(action_type(action), []).append(action)
        names = list(types)
        society = self.society
        elim_ctxs = [ElimContext(goal=self.goal, action=t, action_space=names, verb=acts[0].verb,
                                 noun=kind_of(acts[0].item or acts[0].target) if acts[0].verb in ("use", "take", "put") else "",
                                 driver=self.emotion.driver,
                                 spoke_to_me=acts[0].verb == "chat with" and self._spoke_to_me(acts[0].target),
                                 new_place=acts[0].verb == "go to" and acts[0].target not in self.visited,
                                 vocabulary=society.vocabulary, setting=society.setting)
                     for t, acts in types.items()]
        mus = {t: a.value.value for t, a in zip(names, await self._ask_all(ELIM, elim_ctxs), strict=True)}
        self.elim_ratings = mus
        kept = names if not cfg.elimination else (
            [t for t in names if mus[t] >= cfg.elim_threshold] or [t for t in names if mus[t] == max(mus.values())])
        pool = [(mus[t], a) for t in kept for a in types[t]]
        self.phase_rng.shuffle(pool)
        pool.sort(key=lambda pair: -pair[0])
        pool = pool[: cfg.max_candidates]
        self.candidates_n = len(pool)

        known = {**self.imagine.position_of(), **self.pi.position_of()}
        current = list(self.pi.keys)
        pro_ctxs = [ProtentionContext(
            name=self.name, observation=self.observation, imagination=list(self.imagine.keys),
            driver_text=self.emotion.describe(), action=a.text, verb=a.verb, current_phrases=current,
            target=a.target, item=a.item, remembered_phrases=self._remembered(a.target) if a.verb == "go to" else [],
            setting=society.setting)
            for _, a in pool]
        if cfg.protention:
            pro_answers = await self._ask_all(self.society.protention_op, pro_ctxs)
            pro_texts = [ans.value.text for ans in pro_answers]
            for ctx, answer in zip(pro_ctxs, pro_answers, strict=True):
                self._check_truncated(ctx.action, answer)
            pro_fields = [field_from_text(t, known, step=self.model.steps + 1) for t in pro_texts]
        else:
            pro_texts, pro_fields = [""] * len(pool), [None] * len(pool)
        kind = self._place_kind()
        recent = set(self.recent_partners(2))
        candidates = [Candidate(
            action=a.text, verb=a.verb, mu=mu, protention=text,
            change=diff(self.pi, pro, cfg.sim_weights) if pro is not None else 0.0,
            target=a.target, noun=kind_of(a.item or a.target) if a.verb in ("use", "take", "put") else "",
            new_place=a.verb == "go to" and a.target not in self.visited,
            spoke_to_me=a.verb == "chat with" and self._spoke_to_me(a.target),
            chatted_lately=a.verb == "chat with" and a.target in recent,
            habit=self.habitus.preference(kind, a.verb) if cfg.modules["habitus"] else 0.0,
            filtered_before=a.text in self.filtered_lately)
            for (mu, a), text, pro in zip(pool, pro_texts, pro_fields, strict=True)]
        ctx = ChoiceContext(
            name=self.name, goal=self.goal, observation=self.observation, retention=self._retention_text(),
            memory=self._memory_text(), driver_text=self.emotion.describe(), driver=self.emotion.driver,
            social_text=self._social_text(kind) if cfg.modules["ltrha"] else "",
            resources=self.resources if cfg.modules["ltrha"] else None, candidates=candidates,
            topic=self.society.topics.get(self.area) if cfg.modules["ltrha"] else None, pleasure=self.emotion.P,
            vocabulary=society.vocabulary, setting=society.setting)
        choice = (await self.ask(CHOOSE, ctx)).value
        index = choice.action - 1
        action = pool[index][1]
        self.last_thought = choice.thought
        self.next_protention = pro_fields[index]
        if action.verb == "chat with":
            chat = ITCMAChatContext(self.name, action.target, self.observation, choice.thought,
                                    self.heard_from(action.target), self.society.topics.get(self.area), self.area,
                                    [p for p in society.public_rooms if p != self.area], society.setting)
            action = action.with_content((await self.ask(CHAT, chat)).value.text)
        self.intent = action
        await self.judge_intent()

    async def judge_intent(self) -> None:
        """LTRHA's social filter on the chosen action (only the verdict is stored here)."""
        self.filter_verdict = False
        action = self.intent
        if action is None or not self.cfg.modules["filter"]:
            return
        item = self._item(action.item) if action.item else None
        ctx = FilterContext(self.name, self.area, action.text, action.verb, home_owner(self.area, self.cfg.homes),
                            item.owner if item else None, list(self.addressed_by),
                            [p.name for p in self.world.people_in(self.area, besides=self)], self.society.setting)
        self.filter_verdict = (await self.ask(SOCIAL_FILTER, ctx)).value.yes

    def _check_truncated(self, action: str, answer) -> None:
        """A protention the model stopped at max_tokens (finish_reason "length") is counted and noted
        in run.log (the run's closing line counts them): ``protention_tokens`` is then too small for
        this model's answers."""
        if answer.truncated:
            self.society.truncated_protentions += 1
            log.info("itcmas: %s's protention for %r was cut at protention_tokens=%d (%d chars kept)",
                     self.name, action, self.cfg.protention_tokens, len(answer.value.text))

    def _item(self, label: str):
        """The world item an action names (the world's own lookup by name or label)."""
        return self.world._item(label)

    def _remembered(self, area: str) -> list[str]:
        """The phrases of the latest memory of a place (what a move there is expected to show)."""
        for memory in reversed(self.consciousness.long_term):
            if memory.area == area:
                return list(memory.keys)
        return []

    def _retention_text(self) -> list[str]:
        """Re^t in words: the retained frames before this one, then what just happened."""
        frames = list(self.consciousness.retention)[:-1]  # the last retained frame is PI^t itself
        seen = [f"step {f.step} in {f.area}: you saw {', '.join(k for k in f.keys[:6] if not k.startswith('You are in'))}"
                for f in frames]
        return seen + list(self.memory)[-3:]

    def _memory_text(self) -> list[str]:
        lines = [f"at step {m.step} in {m.area} (emotional intensity {m.intensity:.2f}): {', '.join(m.keys[:8])}"
                 for _, m in self.activated]
        extra = [k for k in self.imagine.keys if k not in self.pi.keys]
        if extra:
            lines.append("imagined here: " + ", ".join(extra[:8]))
        return lines

    def _place_kind(self) -> str:
        return place_kind(self.area, self.name, self.cfg.homes, not self.world.is_inside(self.area))

    def _social_text(self, kind: str) -> str:
        tpc = self.society.topics.get(self.area)
        mood = "unknown" if tpc is None or math.isnan(tpc) else f"{tpc:+.2f}"
        return (f"Your resources: {self.resources:+.2f} (an action succeeds with probability "
                f"{success_rate(self.resources):.2f}). The topic (atmosphere) here: {mood}. {self.habitus.describe(kind)}")

    # --- 3. act (sync, in turn) -------------------------------------------------------------
    def act(self) -> None:
        if self.intent is None:
            return
        action, area, step = self.intent, self.area, self.model.steps
        self.protention_field = self.next_protention
        reason = ""
        if self.filter_verdict:
            status = "filtered"
            self.last_action = FILTERED_PREFIX + action.text
            self.last_outcome = Outcome(ok=False, reason="filtered by LTRHA")
            self.society.filtered_total += 1
            self.filtered_lately.append(action.text)
            self.emotion.hurt(1.0)
            self.remember(f"I wanted to {action.text}, but it was filtered as harmful to others")
            self.model.datacollector.add_table_row("filtered_actions", {"step": step, "agent": self.name,
                                                                        "area": area, "action": action.text})
        elif self.cfg.modules["success_rate"] and self.random.random() >= success_rate(self.resources):
            status, reason = "failed", "not enough resources: the attempt failed"
            self.last_action = action.text
            self.last_outcome = Outcome(ok=False, reason=reason)
            self.emotion.hurt(1.0)
            self.remember(f"I tried to {action.text}, but I failed")
        else:
            outcome = self.world.execute(self, action, step)
            self.last_action, self.last_outcome = action.text, outcome
            if outcome.ok:
                status = "done"
                self.emotion.gain(1.0)
                self.remember(f"I did: {action.text}")
                if self.cfg.modules["habitus"]:
                    self.habitus.record(self._place_kind_of(area), action.verb)
                if action.verb == "chat with":
                    self.model.record_interaction(self.name, action.target, "chat", action.content)
            else:
                status, reason = "refused", outcome.reason
                self.emotion.hurt(1.0)
                self.remember(f"I tried to {action.text}, but {outcome.reason}")
        self.last_status = status
        e = self.emotion
        self.model.datacollector.add_table_row("itcmas_actions", {
            "step": step, "agent": self.name, "area": area, "action": self.last_action, "status": status,
            "reason": reason, "thought": self.last_thought, "driver": e.driver, "P": e.P, "A": e.A, "D": e.D,
            "resources": self.resources if self.cfg.modules["ltrha"] else None,
            "actions_available": len(self.action_space), "candidates": self.candidates_n})
        self.intent = None

    def _place_kind_of(self, area: str) -> str:
        return place_kind(area, self.name, self.cfg.homes, not self.world.is_inside(area))

    # --- 4. locale, matrix, allocate (model scope) --------------------------------------------
    @classmethod
    def locale(cls, model: SocietyModel) -> None:
        """Topic per area (eq. 17) from the emotions of the agents now in it (NaN if empty)."""
        state = model.society
        if not state.config.modules["ltrha"]:
            return
        by_area: dict[str, list[Any]] = {name: [] for name in model.world.areas}
        for agent in sorted(model.agents, key=lambda a: a.name):
            by_area[agent.area].append(agent)
        state.topics = {area: topic([a.emotion.P for a in group], [a.emotion.A for a in group])
                        for area, group in by_area.items()}
        for area, group in by_area.items():
            if group:
                model.datacollector.add_table_row("topics", {"step": model.steps, "area": area,
                                                             "agents": ",".join(a.name for a in group),
                                                             "topic": state.topics[area]})

    @classmethod
    async def matrix(cls, model: SocietyModel) -> None:
        """Every matrix_every steps (n > 2 agents), the matrix ranks all agents from their actions,
        resources, goals and the topic where they are; only the ranking is stored here."""
        state = model.society
        state.pending_ranking = None
        agents = sorted(model.agents, key=lambda a: a.name)
        every = state.config.matrix_every  # 0: the matrix switched off
        if not state.config.modules["ltrha"] or len(agents) <= 2 or not every or model.steps % every != 0:
            return
        model.phase_rng.shuffle(agents)  # listed in a drawn order: no name is favoured by position or ties
        ctx = MatrixContext([MatrixEntry(a.name, a.last_action, a.last_status, a.resources, a.goal, a.area,
                                         state.topics[a.area]) for a in agents])
        answer = await model.llm.ask(RANK_AGENTS, ctx, agent_id=None, rng=model.phase_rng)
        state.pending_ranking = list(answer.value.ranking)

    @classmethod
    def allocate(cls, model: SocietyModel) -> None:
        """Eq. 19 on the matrix's ranking; the change is felt as desire or pain."""
        state = model.society
        if state.pending_ranking is None:
            return
        agents = {a.name: a for a in model.agents}
        before = {name: a.resources for name, a in agents.items()}
        after = reallocate(before, state.pending_ranking, state.config.s_min, state.config.s_max)
        for name, agent in agents.items():
            delta = after[name] - before[name]
            agent.resources = after[name]
            agent.emotion.gain(delta) if delta > 0 else agent.emotion.hurt(-delta)
        state.matrix_runs += 1
        model.datacollector.add_table_row("matrix", {
            "step": model.steps, "ranking": ",".join(state.pending_ranking),
            "deltas": json.dumps({n: round(after[n] - before[n], 6) for n in state.pending_ranking}),
            "resources": json.dumps({n: round(after[n], 6) for n in sorted(after)})})
        state.pending_ranking = None
