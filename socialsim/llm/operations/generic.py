"""Operations of the generic generative agent: choose an action, say something.

Prompts are written in our own words, in the IrollanValley style (observation, then the
action space, then a constrained choice).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from socialsim.llm.operation import Operation
from socialsim.llm.questions import QUOTED, Choice, PickOneQuestion, ShortTextQuestion, Text


@dataclass
class ActionContext:
    name: str
    description: str
    setting: str
    observation: str
    actions: list[str]  # the action space as text, in the world's order
    memory: list[str] = field(default_factory=list)
    people_here: list[str] = field(default_factory=list)
    recent_partners: list[str] = field(default_factory=list)  # chatted with in the last steps


def _persona(ctx) -> str:
    memory = "\n".join(f"- {m}" for m in ctx.memory[-5:]) or "- (nothing yet)"
    return (
        f"You are {ctx.name}. {ctx.description}\n\nSetting: {ctx.setting}\n\n"
        f"What you remember of the last moments ({QUOTED}):\n{memory}"
    )


class ChooseAction(Operation):
    """Pick one action from the agent's current action space."""

    name = "ChooseAction"
    module = "action"
    max_tokens = 4
    fallback_doc = "the first action of the action space (usually: go through the first door)"

    def question(self, ctx: ActionContext) -> PickOneQuestion:
        return PickOneQuestion(tuple(ctx.actions))

    def prompt(self, ctx: ActionContext) -> str:
        return f"{_persona(ctx)}\n\nObservation: {ctx.observation}\n\nWhat do you do next?"

    def rule(self, ctx: ActionContext, rng: random.Random) -> Choice:
        """Chat with someone present you have not talked to lately; otherwise act at random."""
        for person in ctx.people_here:
            if person not in ctx.recent_partners:
                text = f"chat with {person}"
                if text in ctx.actions:
                    return Choice(index=ctx.actions.index(text), text=text)
        others = [i for i, a in enumerate(ctx.actions) if not a.startswith("chat with")] or list(range(len(ctx.actions)))
        index = rng.choice(others)
        return Choice(index=index, text=ctx.actions[index])

    def fallback(self, ctx: ActionContext) -> Choice:
        return Choice(index=0, text=ctx.actions[0])


@dataclass
class ChatContext:
    name: str
    description: str
    setting: str
    observation: str
    partner: str
    heard: list[str] = field(default_factory=list)  # what the partner said to us lately
    memory: list[str] = field(default_factory=list)


class ComposeChat(Operation):
    """Say one line to the person one has chosen to chat with."""

    name = "ComposeChat"
    module = "chat"
    max_tokens = 60
    fallback_doc = "a plain greeting to the partner"

    def question(self, ctx: ChatContext) -> ShortTextQuestion:
        return ShortTextQuestion(max_chars=240)

    def prompt(self, ctx: ChatContext) -> str:
        heard = "\n".join(f'- {ctx.partner} said: "{h}"' for h in ctx.heard[-3:]) or "- (nothing yet)"
        return (
            f"{_persona(ctx)}\n\nObservation: {ctx.observation}\n\nRecently between you ({QUOTED}):\n{heard}\n\n"
            f"You start talking to {ctx.partner}. What do you say? Reply with your words only."
        )

    def rule(self, ctx: ChatContext, rng: random.Random) -> Text:
        if ctx.heard:
            return Text(text=f"I hear you, {ctx.partner}. Tell me more.")
        return Text(text=f"Hello {ctx.partner}, how are you today?")

    def fallback(self, ctx: ChatContext) -> Text:
        return Text(text=f"Hello {ctx.partner}.")


CHOOSE_ACTION = ChooseAction()
COMPOSE_CHAT = ComposeChat()
