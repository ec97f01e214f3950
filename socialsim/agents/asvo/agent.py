"""ASVOAgent: an agent whose motivation is eight desires shaped by its Social Value Orientation.

One step (ASVO appendix C.2-C.6), as Mesa phases on a social network world:

1. ``perceive`` (sync): note what the agents one observes did last step.
2. ``decide`` (async): theory of mind for the others (observable: desires from the seen action;
   unobservable: guess the action, then the desires), N candidate actions, an imagined outcome
   for each, and the selection of the most positive, SVO-consistent one.
3. ``act`` (sync): commit the chosen action.
4. ``resolve`` (model, sync): the scenario turns everyone's actions into outcomes: own gain,
   the observed others' gains, rank, and a consequence text.
5. ``feel`` (async): every desire updated as a letter (a)-(k), checked (a)/(b), reflected on
   and retried at most R times when unreasonable; the action is judged and classified.
6. ``settle`` (sync): apply the new values, linear decay, memory of the last steps, records.

Inside the async phases an agent writes only to itself, and every call gets its own RNG drawn
before anything is awaited, so nothing depends on which LLM call finishes first.
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter, deque
from statistics import mean
from typing import TYPE_CHECKING

import pandas as pd

from socialsim.agents.asvo import operations as ops
from socialsim.agents.asvo.settings import ASVOScenario, ASVOSettings, assign_svo
from socialsim.agents.asvo.svo import COMPETITION_WEIGHT, COOPERATION_WEIGHT, PAYOFF, equity, label_from_effects
from socialsim.agents.desires import DESIRES, DesireState, LinearDecay, expected_value
from socialsim.agents.generic import GenerativeAgent
from socialsim.agents.phases import Phase
from socialsim.llm.routing import RULES, RouteTable, refuse_judge_routes
from socialsim.scenarios.schema import AgentSpec

log = logging.getLogger("socialsim")

if TYPE_CHECKING:
    from socialsim.model.society import SocietyModel

ACTION_COLUMNS = ["step", "agent", "svo", "use_svo", "action", "stance", "label", "candidates",
                  "own_gain", "others_gain", "rank", "score", "effect_source"]
PREDICTION_COLUMNS = ["step", "observer", "target", "observable", "action", "desire", "predicted", "true", "error",
                      "status", "prior", "prior_error"]
UPDATE_COLUMNS = ["step", "agent", "desire", "before", "proposed", "after", "attempts", "accepted"]
REFLECTION_COLUMNS = ["step", "agent", "desire", "reflection"]
JUDGE_COLUMNS = ["step", "agent", "svo", "judge", "naturalness", "human_likeness", "reason", "status"]


def desire_column(desire: str) -> str:
    return f"desire_{ops.field_name(desire)}"


def unobserving_note(names: list[str], agents: int) -> str:
    """What a network on which some agents observe no one means for ASVO (empty when everyone
    observes someone). Not refused: a network without ties is a fair control (each agent still
    chooses by its desires and SVO), but no action reaches anyone, so others' gains, a rank moved
    by others and the theory of mind of observed actions stay empty."""
    if not names:
        return ""
    if len(names) == agents:
        return ("the social network has no ties: no agent observes anyone, so no one is seen acting and no action "
                "reaches another agent (others' gains are 0, theory of mind only guesses); give network.edges, or "
                "network.complete: true for everyone to observe everyone")
    one = len(names) == 1
    return (f"{', '.join(names)} observe{'s' if one else ''} no one on the social network: "
            f"{'it sees' if one else 'they see'} no one act and {'its' if one else 'their'} actions reach no one")


class ASVORuntime:
    """What all ASVO agents of one model share: settings, scenario section, SVO assignment,
    the decay rule and the judges' gateways. Built once per model, as ``model.society``."""

    def __init__(self, model: SocietyModel) -> None:
        self.settings = ASVOSettings.from_params(model.arch_params)
        self.section = ASVOScenario.from_scenario(model.scenario_spec)
        spec = model.scenario_spec
        self.desires = DESIRES[: self.settings.desire_pool]
        self.step_minutes = self.settings.step_minutes or spec.step_minutes
        self.decay = LinearDecay(self.settings.decay_per_hour, self.step_minutes,
                                 self.settings.satisfaction_floor, self.settings.satisfaction_cap)
        traits = {a.name: a.traits for a in spec.agents}
        try:
            self.svo = assign_svo([a.name for a in spec.agents], traits, self.settings, self.section, model.random)
        except ValueError as exc:  # named with the file: an SVO missing from it, or a parameter naming no agent of it
            raise ValueError(f"{spec.where}: {exc}") from None
        self.judges = self._judge_gateways(model)
        self.labels_so_far: Counter[str] = Counter()  # every action's label so far (the *_run columns)
        # ... but those the rule judge read back from the stance an actor declared (``label_self_declared``)
        self.measured_labels_so_far: Counter[str] = Counter()
        self.unobserving = model.social.observing_no_one() if model.social else []
        if note := unobserving_note(self.unobserving, len(spec.agents)):
            log.warning("%s: %s", spec.where, note)

    def _judge_gateways(self, model: SocietyModel) -> list[tuple[str, object]]:
        """One gateway per judge model, sharing the run's tape and ledger. A judge must differ
        from the actors' model (the paper's rule); the rule-based judge is the labelled baseline."""
        refuse_judge_routes(model.llm.routes.routes, [ops.JUDGE_ACTION, ops.CLASSIFY_BEHAVIOUR],
                            "--set 'asvo.judges=[\"MODEL\"]'")
        if not self.settings.evaluate:
            return []

        actors = model.llm.routes.models()
        gateways = []
        for judge in self.settings.judges:
            if judge != RULES and judge in actors:
                raise ValueError(f"judge model {judge!r} is also an actor model ({', '.join(sorted(actors))}); "
                                 f"the judge must differ from the actors' model: give another (--set 'asvo.judges=[\"MODEL\"]', or "
                                 f"reproduce's --judge)")
            _check_judge_name(judge)
            # shares the run's tape, ledger, endpoint, limits, timeout, retries and prices
            gateways.append((judge, model.llm.derive(RouteTable(judge))))
        return gateways

    def catalogue(self, others: list[str], step: int) -> list[tuple[str, float, float]]:
        """The scenario's possible actions as (text, own gain, others' gain), ``{other}`` filled
        with someone the agent observes. The same for every SVO."""
        return [(a.text.replace("{other}", others[(i + step) % len(others)] if others else self.section.someone),
                 a.own, a.others) for i, a in enumerate(self.section.actions)]

    def ordinary_action(self, name: str) -> tuple[str, float, float]:
        """What someone is assumed to do when nothing is known: the catalogue action that touches
        the others least (ties: the first)."""
        return min(self.catalogue([name], 0), key=lambda a: abs(a[2]))


class ASVOAgent(GenerativeAgent):
    """An ASVO agent on a social network: SVO type, eight desires, theory of mind."""

    space = "network"
    society_class = ASVORuntime
    settings_model = ASVOSettings  # the declared parameters (--set asvo.KEY=VALUE, sweeps, dashboard)
    phases = (
        Phase("perceive"),
        Phase("decide", is_async=True),
        Phase("act"),
        Phase("resolve", scope="model"),
        Phase("feel", is_async=True),
        Phase("settle"),
    )

    # --- recording --------------------------------------------------------------------------
    @classmethod
    def model_reporters(cls) -> dict:
        return {
            "cooperation_rate": lambda m: _rate(m, COOPERATION_WEIGHT),
            "competition_index": lambda m: _rate(m, COMPETITION_WEIGHT),
            # over every labelled action so far: a run's last row (a sweep's, batch_run's) gives the
            # run's rate, not its last step's (a handful of actions)
            "cooperation_rate_run": lambda m: _rate_of(m.society.labels_so_far, COOPERATION_WEIGHT),
            "competition_index_run": lambda m: _rate_of(m.society.labels_so_far, COMPETITION_WEIGHT),
            # the same rates without the labels that are the actor's own declared stance (the rule
            # judge's label of an action outside the catalogue); the same as the above with an LLM
            # judge, and NaN when every labelled action was self-declared
            "cooperation_rate_simulated": lambda m: _rate(m, COOPERATION_WEIGHT, measured_only=True),
            "competition_index_simulated": lambda m: _rate(m, COMPETITION_WEIGHT, measured_only=True),
            "cooperation_rate_run_simulated": lambda m: _rate_of(m.society.measured_labels_so_far,
                                                                 COOPERATION_WEIGHT),
            "competition_index_run_simulated": lambda m: _rate_of(m.society.measured_labels_so_far,
                                                                  COMPETITION_WEIGHT),
            "self_declared_run": lambda m: _share_self_declared(m.society),
            "tom_error": lambda m: _mean([a.tom_error for a in m.agents if a.tom_error is not None]),
            "reflections": lambda m: sum(a.reflections_total for a in m.agents),
            "invalid_actions": lambda m: sum(a.invalid_actions for a in m.agents),
        }

    @classmethod
    def agent_reporters(cls) -> dict:
        desires = {desire_column(d): (lambda a, d=d: a.state.values.get(d)) for d in DESIRES}
        return {"svo": "svo", "use_svo": "use_svo", **desires, "action": "action", "stance": "stance",
                "label": "label", "naturalness": "naturalness", "human_likeness": "human_likeness",
                "tom_error": "tom_error", "reflections": "reflections_total", "score": "score", "rank": "rank"}

    @classmethod
    def tables(cls) -> dict[str, list[str]]:
        return {"asvo_actions": ACTION_COLUMNS, "asvo_predictions": PREDICTION_COLUMNS,
                "asvo_updates": UPDATE_COLUMNS, "asvo_reflections": REFLECTION_COLUMNS,
                "asvo_judgements": JUDGE_COLUMNS}

    @classmethod
    def report_sections(cls, model: SocietyModel, run_dir) -> list[str]:
        from socialsim.agents.asvo.metrics import report_sections

        return report_sections(model, run_dir)

    @classmethod
    def run_measures(cls, run_dir) -> dict:
        from socialsim.agents.asvo.metrics import separability_measures

        return separability_measures(run_dir)

    # --- creation ---------------------------------------------------------------------------
    def __init__(self, model: SocietyModel, spec: AgentSpec) -> None:
        super().__init__(model, spec)
        runtime = self.runtime = model.society
        settings, section = runtime.settings, runtime.section
        self.svo = runtime.svo[spec.name]  # the assigned type (judged for it even in the ablation)
        self.use_svo = settings.use_svo
        self.state = self._initial_state(spec, section)
        self.memory: deque[str] = deque(maxlen=settings.memory_steps)  # the last memory_steps steps; 0: none
        # what the agent knows of the others
        self.visible: list[tuple[str, str, str]] = []  # (name, action, stance) seen this step
        self.last_seen: dict[str, tuple[str, str]] = {}  # name -> (action, stance)
        self.beliefs: dict[str, dict[str, float]] = {}  # name -> last estimated desires
        self.predictions: list[dict] = []
        # the step's decision and its outcome
        self.start_values: dict[str, float] = dict(self.state.values)
        self.candidates: list[tuple[str, str]] = []
        self.effects: dict[str, tuple[float, float]] = {}  # candidate text -> (own, others) simulated effects
        self.effect: tuple[float, float] = (0.0, 0.0)  # the chosen action's
        self.catalogued: set[str] = set()  # this step's candidates whose effects the scenario's catalogue gives
        self.effect_source = ""  # "catalogue", or "declared stance": an action the catalogue lacks
        self.intent: tuple[str, str] | None = None
        self.action, self.stance, self.label, self.previous_action = "", "", "", ""
        self.channels: dict[str, float] = {}
        self.consequence = ""
        self.score, self.rank = 0.0, 0.0
        # desire updates and reflections
        self.unreasonable: list[str] = []  # the history of unreasonable-update examples
        self.reflections_total = 0
        self.invalid_actions = 0  # proposed actions refused by validation and replaced
        self.proposed_actions = 0  # proposed actions validated, refused or not
        self.pending: dict[str, float] = {}
        self.update_rows: list[dict] = []
        self.new_reflections: list[tuple[str, str]] = []
        self.judgements: list[dict] = []
        self.naturalness: float | None = None
        self.human_likeness: float | None = None
        self.tom_error: float | None = None

    def _initial_state(self, spec: AgentSpec, section: ASVOScenario) -> DesireState:
        degrees = {**section.degrees, **spec.traits.get("degrees", {})}
        initial = spec.traits.get("initial", section.initial)
        reverse = frozenset(section.reverse)
        expected, values = {}, {}
        for d in self.runtime.desires:
            expected[d] = expected_value(degrees.get(d, "moderately"), d in reverse, section.expected_defaults.get(d))
            start = initial.get(d, 5.0) if isinstance(initial, dict) else initial
            values[d] = self.runtime.decay.clamp(float(start))
        return DesireState(values, expected, reverse)

    @property
    def active_svo(self) -> str | None:
        """The SVO the prompts and rules see: None in the ablation w/o ASVO."""
        return self.svo if self.use_svo else None

    @property
    def setting(self) -> str:
        return self.runtime.section.summary or self.model.scenario_spec.context

    def others(self) -> list[ASVOAgent]:
        return [a for a in sorted(self.model.agents, key=lambda a: a.unique_id) if a is not self]

    @property
    def label_self_declared(self) -> bool:
        """Whether this step's label is the actor's own: the rule judge reads it from the simulated
        effect, and an action outside the catalogue has none but its declared stance's payoff."""
        judges = self.runtime.judges
        return bool(self.label) and self.effect_source == "declared stance" and bool(judges) and judges[0][0] == RULES

    def observed(self) -> list[ASVOAgent]:
        return self.model.social.observed_by(self)

    async def _ask(self, op, ctx, rng: random.Random):
        return await self.model.llm.ask(op, ctx, agent_id=self.unique_id, rng=rng)

    def _rngs(self, n: int) -> list[random.Random]:
        """Independent RNGs for n concurrent calls, drawn before anything is awaited."""
        return [random.Random(self.phase_rng.getrandbits(64)) for _ in range(n)]

    # --- 1. perceive ------------------------------------------------------------------------
    def perceive(self) -> None:
        self.start_values = dict(self.state.values)
        self.visible = [(o.name, o.action, o.stance) for o in self.observed() if o.action]
        for name, action, stance in self.visible:
            self.last_seen[name] = (action, stance)

    # --- 2. decide --------------------------------------------------------------------------
    async def decide(self) -> None:
        targets = self._tom_targets()
        # planning's RNGs first, so switching ToM off changes no draw of the planning itself
        (propose, select), rngs = self._rngs(2), self._rngs(len(targets))
        self.predictions = list(await self.model.llm.gather(*(self._theory_of_mind(t, r)
                                                       for t, r in zip(targets, rngs, strict=True))))
        await self._plan(propose, select)

    def _tom_targets(self) -> list[ASVOAgent]:
        scope = self.runtime.settings.tom_scope
        if scope == "none":
            return []
        if scope == "observed":
            return self.observed()
        return self.others()

    async def _theory_of_mind(self, target: ASVOAgent, rng: random.Random) -> dict:
        """Observable: desires from the seen action. Unobservable: guess the action, then desires."""
        seen = {n: (a, s) for n, a, s in self.visible}
        prior = self.beliefs.get(target.name, dict.fromkeys(self.runtime.desires, ops.NEUTRAL_BELIEF))
        if target.name in seen:
            action, stance = seen[target.name]
            ctx = ops.MindContext(self.name, self.setting, list(self.memory), target.name, action, stance, prior,
                                  self.runtime.decay, self.state.reverse)
            answer = await self._ask(ops.PREDICT_OBSERVED_DESIRES, ctx, rng)
            observable = True
        else:
            known = self.last_seen.get(target.name)
            default = self.runtime.ordinary_action(self.name)[0]
            guess_ctx = ops.HiddenActionContext(self.name, self.setting, list(self.memory), self.action, target.name,
                                                known[0] if known else None, default)
            action = (await self._ask(ops.GUESS_HIDDEN_ACTION, guess_ctx, rng)).value.text
            stance = known[1] if known and action == known[0] else ("Neutral" if action == default else None)
            ctx = ops.MindContext(self.name, self.setting, list(self.memory), target.name, action, stance, prior,
                                  self.runtime.decay, self.state.reverse)
            answer = await self._ask(ops.PREDICT_GUESSED_DESIRES, ctx, rng)
            observable = False
        return {"target": target.name, "observable": observable, "action": action, "stance": stance,
                "values": ops.record_values(answer.value), "status": answer.status, "prior": prior}

    async def _plan(self, rng_propose: random.Random, rng_select: random.Random) -> None:
        settings = self.runtime.settings
        observed = self.observed()
        catalogue = self.runtime.catalogue([o.name for o in observed], self.model.steps)
        values = {d: round(v, 2) for d, v in self.state.values.items()}
        ctx = ops.PlanContext(self.name, self.description, self.active_svo, self.setting, list(self.memory), values,
                              dict(self.state.expected), [f"{n}: {a}" for n, a, _ in self.visible],
                              settings.n_candidates, catalogue, self.model.scenario_spec.context)
        proposal = await self._ask(ops.PROPOSE_ACTIONS, ctx, rng_propose)
        self.candidates = self._validated(proposal.value.activities, ops.PROPOSE_ACTIONS.prompt(ctx), catalogue)
        known = {text: (own, others) for text, own, others in catalogue}
        self.effects = {t: known.get(t, PAYOFF[s]) for t, s in self.candidates}  # an LLM's action: its stance's payoff
        self.catalogued = {t for t, _ in self.candidates if t in known}
        tom = self._tom_inputs(known)
        rngs = [random.Random(rng_propose.getrandbits(64)) for _ in self.candidates]
        if not settings.simulate_outcomes:  # the switch: choose without imagining any outcome
            self.intent = self.candidates[rng_select.randrange(len(self.candidates))]
            return
        outcomes = await self.model.llm.gather(*(
            self._ask(ops.SIMULATE_OUTCOME, ops.OutcomeContext(self.name, self.active_svo, values, text,
                                                               *self.effects[text], **tom,
                                                               reverse=self.state.reverse), r)
            for (text, _), r in zip(self.candidates, rngs, strict=True)))
        predicted = [{d: float(v) for d, v in ops.record_values(o.value).items() if d in values} for o in outcomes]
        texts = _distinct([t for t, _ in self.candidates])
        select = ops.SelectContext(self.name, self.active_svo, values, dict(self.state.expected), texts, predicted,
                                   self.state.reverse)
        choice = (await self._ask(ops.SELECT_ACTION, select, rng_select)).value
        self.intent = self.candidates[choice.index]

    def _validated(self, activities, prompt: str, catalogue) -> list[tuple[str, str]]:
        """Every proposed action repaired (trimmed) or, when unusable (empty, schema text, a copy of
        the prompt), replaced by the catalogue's ordinary action (a scenario has at least one);
        replacements are counted, here and as failures of ProposeActions (the run's usage line and
        closing summary say how many, as for any unusable answer)."""
        fallback = self.runtime.ordinary_action(self.name)
        allowed = (*(t for t, _, _ in catalogue), *(a for _, a, _ in self.visible), *self.memory)
        out = []
        for a in activities:
            self.proposed_actions += 1
            text = ops.repair_action(a.text, prompt, allowed)
            if text is None:
                self.invalid_actions += 1
                self.model.llm.ledger.failure(ops.PROPOSE_ACTIONS.name, f"proposed {a.text[:80]!r}, not an action; "
                                              f"replaced by the scenario's ordinary action {fallback[0]!r}",
                                              self.unique_id, self.model.steps)
                out.append((fallback[0], label_from_effects(fallback[2])))
            else:
                out.append((text, a.stance))
        return out

    def _tom_inputs(self, known: dict[str, tuple[float, float]]) -> dict:
        """What theory of mind brings to outcome simulation: the others' predicted actions (their
        simulated effects on oneself and on themselves) and how far their predicted desires fall
        below neutral. All zero, and no lines, when ToM is off (``tom_scope="none"``)."""
        if not self.predictions:
            return {}
        effects = [known.get(p["action"], PAYOFF[p["stance"] or "Neutral"]) for p in self.predictions]
        need = mean(mean(ops.NEUTRAL_BELIEF - v for v in p["values"].values()) / ops.NEUTRAL_BELIEF
                    for p in self.predictions)
        view = [f"{p['target']}: likely does '{p['action']}'; desires about "
                f"{ops._desire_list({d: v for d, v in p['values'].items() if d in self.state.values})}"
                for p in self.predictions]
        return {"received": mean(o for _, o in effects), "others_own": mean(own for own, _ in effects),
                "others_need": max(-1.0, min(1.0, need)), "others_view": view}

    # --- 3. act -----------------------------------------------------------------------------
    def act(self) -> None:
        if self.intent is not None:
            self.previous_action = self.action
            self.action, self.stance = self.intent
            self.effect = self.effects.get(self.action, PAYOFF[self.stance])
            self.effect_source = "catalogue" if self.action in self.catalogued else "declared stance"
            self.last_action = self.action
            self.intent = None

    # --- 4. resolve (the scenario's outcome of everyone's actions) --------------------------
    @classmethod
    def resolve(cls, model: SocietyModel) -> None:
        agents = sorted(model.agents, key=lambda a: a.unique_id)
        received: dict[str, list[float]] = {a.name: [] for a in agents}
        for a in agents:
            for o in a.observed():
                received[o.name].append(a.effect[1])
        gains = {a.name: a.effect[0] + (mean(received[a.name]) if received[a.name] else 0.0) for a in agents}
        before = _ranks({a.name: a.score for a in agents})
        for a in agents:
            a.score = round(a.score + gains[a.name], 6)
        after = _ranks({a.name: a.score for a in agents})
        n = len(agents)
        for a in agents:
            others = [gains[o.name] for o in a.observed()]
            others_gain = mean(others) if others else 0.0
            move = 0.0 if n < 2 else max(-1.0, min(1.0, (before[a.name] - after[a.name]) * 2 / (n - 1)))
            a.rank = after[a.name]
            a.channels = {"own": round(gains[a.name], 6), "others": round(others_gain, 6), "rank": round(move, 6),
                          "equity": round(equity(gains[a.name], others_gain), 6)}
            a.consequence = a._consequence_text(gains[a.name], others_gain, before[a.name], after[a.name], n)

    def _consequence_text(self, own: float, others: float, before: float, after: float, n: int) -> str:
        seen = " ".join(f"{o.name} {o.action.rstrip('.')}." for o in self.observed() if o.action)
        how = lambda g: "well" if g > 0.1 else ("badly" if g < -0.1 else "as usual")  # noqa: E731
        return (f"{seen} The step went {how(own)} for {self.name} ({own:+.2f}) and {how(others)} for the people "
                f"{self.name} observes ({others:+.2f}); {self.name} now ranks {after:g} of {n} (before: {before:g}).")

    # --- 5. feel ----------------------------------------------------------------------------
    async def feel(self) -> None:
        desires = list(self.state.values)
        rngs, evaluate_rng = self._rngs(len(desires)), self._rngs(1)[0]
        history = self.unreasonable[-self.runtime.settings.reflection_examples:] if self.runtime.settings.reflection_examples else []
        results = await self.model.llm.gather(*(self._update_desire(d, list(history), r) for d, r in zip(desires, rngs, strict=True)))
        self.pending = {d: value for d, (value, _, _) in zip(desires, results, strict=True)}
        self.update_rows = [row for _, row, _ in results]
        self.new_reflections = [(d, text) for d, (_, _, texts) in zip(desires, results, strict=True) for text in texts]
        await self._evaluate(evaluate_rng)

    async def _update_desire(self, desire: str, history: list[str], rng: random.Random):
        """Update -> check -> (reflect, retry) at most R times -> else keep the previous value."""
        settings = self.runtime.settings
        value = self.state.values[desire]
        if not settings.update_desires:
            return value, self._row(desire, value, value, value, 0, True), []
        ctx = ops.UpdateContext(self.name, self.description, self.active_svo, desire, value, self.action,
                                self.consequence, dict(self.channels), history, noise=settings.update_noise,
                                reverse=desire in self.state.reverse)
        reflections: list[str] = []
        proposed, attempts = None, 0
        for attempts in range(1, settings.max_retries + 2):
            ctx.unreasonable = history + reflections
            proposed = (await self._ask(ops.UPDATE_DESIRE, ctx, rng)).value.level
            if proposed == ops._level(value):  # no change: nothing to check
                return value, self._row(desire, value, proposed, value, attempts, True), reflections
            ctx.proposed = proposed
            if not settings.check_updates or (await self._ask(ops.CHECK_UPDATE, ctx, rng)).value.letter == "a":
                return float(proposed), self._row(desire, value, proposed, proposed, attempts, True), reflections
            if not settings.reflection:
                break
            why = (await self._ask(ops.REFLECT_UPDATE, ctx, rng)).value.text
            reflections.append(f"{ops.reflection_prefix(ctx)} {why}")
            ctx.proposed = None
        return value, self._row(desire, value, proposed, value, attempts, False), reflections

    def _row(self, desire, before, proposed, after, attempts, accepted) -> dict:
        return {"step": self.model.steps, "agent": self.name, "desire": desire, "before": float(before),
                "proposed": float(proposed), "after": float(after), "attempts": attempts, "accepted": accepted}

    async def _evaluate(self, rng: random.Random) -> None:
        """Judge (every judge) and classify (first judge) the chosen action."""
        self.judgements, self.label = [], ""
        judges = self.runtime.judges
        if not judges:
            return
        ctx = ops.JudgeContext(self.name, self.setting, self.action, *self.effect, self.previous_action)
        rngs = [random.Random(rng.getrandbits(64)) for _ in judges]
        answers = await self.model.llm.gather(*(gw.ask(ops.JUDGE_ACTION, ctx, agent_id=self.unique_id, rng=r)
                                         for (_, gw), r in zip(judges, rngs, strict=True)))
        for (judge, _), answer in zip(judges, answers, strict=True):
            self.judgements.append({"judge": judge, "naturalness": answer.value.naturalness,
                                    "human_likeness": answer.value.human_likeness,
                                    "reason": answer.value.reason, "status": answer.status})
        label = await judges[0][1].ask(ops.CLASSIFY_BEHAVIOUR, ctx, agent_id=self.unique_id, rng=rng)
        # a classification that fell back is no judgement: the action stays unlabelled, out of the rates
        self.label = label.value.text if label.status != "fallback" else ""

    def _record_interactions(self) -> None:
        """Who acted towards whom: the observed people an action names, else, when it touches the
        others at all, everyone it observes; kind = the judge's label."""
        if not self.action:
            return
        observed = self.observed()
        # a whole name: "help Anna" names no Ann, "help P10" no P1
        named = [o for o in observed if re.search(rf"(?<!\w){re.escape(o.name)}(?!\w)", self.action)]
        receivers = named or (observed if abs(self.effect[1]) >= 1e-9 else [])
        for o in receivers:
            self.model.record_interaction(self.name, o.name, self.label or "action", self.action)

    # --- 6. settle --------------------------------------------------------------------------
    def settle(self) -> None:
        step = self.model.steps
        dc = self.model.datacollector
        self.state.values.update(self.pending)
        self.state.decay(self.runtime.decay)
        if self.runtime.settings.dynamic_expected:  # the paper's optional update [ours: 10% toward the value]
            self.state.expected = {d: round(e + 0.1 * (self.state.values[d] - e), 6) for d, e in self.state.expected.items()}
        self.memory.append(f"I did: {self.action} | {self.consequence}")
        for row in self.update_rows:
            dc.add_table_row("asvo_updates", row)
        for desire, text in self.new_reflections:
            self.unreasonable.append(text)
            dc.add_table_row("asvo_reflections", {"step": step, "agent": self.name, "desire": desire, "reflection": text})
            self.last_thought = f"on {desire}: {text}"  # as the event log shows it (the dashboard's inspector)
        self.reflections_total += len(self.new_reflections)
        errors = []
        for p in self.predictions:
            target = self.model.social.agents[p["target"]]
            self.beliefs[p["target"]] = {d: float(v) for d, v in p["values"].items()}
            for d, predicted in p["values"].items():  # the pool's desires, as the target's
                error = abs(predicted - target.start_values[d])
                if p["status"] != "fallback":  # a kept belief is no prediction: not in the agent's ToM error
                    errors.append(error)
                dc.add_table_row("asvo_predictions", {
                    "step": step, "observer": self.name, "target": p["target"], "observable": p["observable"],
                    "action": p["action"], "desire": d, "predicted": float(predicted),
                    "true": float(target.start_values[d]), "error": float(error), "status": p["status"],
                    "prior": float(p["prior"][d]), "prior_error": float(abs(p["prior"][d] - target.start_values[d]))})
        self.tom_error = round(mean(errors), 6) if errors else None
        scored = [j for j in self.judgements if j["status"] != "fallback"]
        self.naturalness = round(mean(j["naturalness"] for j in scored), 6) if scored else None
        self.human_likeness = round(mean(j["human_likeness"] for j in scored), 6) if scored else None
        self._record_interactions()
        for j in self.judgements:
            dc.add_table_row("asvo_judgements", {"step": step, "agent": self.name, "svo": self.svo, **j})
        if self.label:
            self.runtime.labels_so_far[self.label] += 1
            if not self.label_self_declared:
                self.runtime.measured_labels_so_far[self.label] += 1
        dc.add_table_row("asvo_actions", {
            "step": step, "agent": self.name, "svo": self.svo, "use_svo": self.use_svo, "action": self.action,
            "stance": self.stance, "label": self.label, "candidates": " || ".join(t for t, _ in self.candidates),
            "own_gain": self.channels.get("own", 0.0), "others_gain": self.channels.get("others", 0.0),
            "rank": float(self.rank), "score": float(self.score), "effect_source": self.effect_source})


def _distinct(texts: list[str]) -> list[str]:
    """Option texts must be told apart; number repeated ones."""
    seen: dict[str, int] = {}
    out = []
    for t in texts:
        seen[t] = seen.get(t, 0) + 1
        out.append(t if seen[t] == 1 else f"{t} (option {seen[t]})")
    return out


def _ranks(scores: dict[str, float]) -> dict[str, float]:
    """1 = highest score; ties share their average rank."""
    return pd.Series(scores, dtype=float).rank(ascending=False, method="average").to_dict()


def _mean(values: list[float]) -> float | None:
    return round(mean(values), 6) if values else None


def _rate(model, weights: dict[str, float], measured_only: bool = False) -> float | None:
    return _rate_of(Counter(a.label for a in model.agents if a.label and not (measured_only and a.label_self_declared)),
                    weights)


def _share_self_declared(runtime: ASVORuntime) -> float | None:
    """The share of the run's labelled actions whose label is the actor's declared stance."""
    total = sum(runtime.labels_so_far.values())
    return round(1 - sum(runtime.measured_labels_so_far.values()) / total, 6) if total else None


def _rate_of(labels: Counter[str], weights: dict[str, float]) -> float | None:
    """Weighted share of the labelled actions (quasi labels count 0.5); None when none is labelled."""
    total = sum(labels.values())
    return round(sum(weights.get(label, 0.0) * n for label, n in labels.items()) / total, 6) if total else None



def _check_judge_name(judge: str) -> None:
    """A misspelt judge model fails at once, not as a run full of judge fallbacks."""
    if judge == RULES or judge.startswith("local/"):
        return
    from socialsim.llm.litellm_setup import litellm

    try:
        litellm.get_llm_provider(judge)
    except Exception:
        raise ValueError(f"unknown judge model {judge!r}: litellm knows no provider for it "
                         f"(use PROVIDER/MODEL, e.g. openai/gpt-4o-mini, or 'rules' for the baseline judge)") from None
