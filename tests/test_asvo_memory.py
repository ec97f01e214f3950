"""Memory's window, as a model sees it: every prompt that shows the agent's recent memory holds
exactly its last ``memory_steps`` steps (the oldest dropped first), and none when memory is off
(``memory_steps=0``). Written because ``deque(maxlen=5)`` in place of the setting passed every
test, and the rules engine reads no memory, so only the prompts a model is sent can tell."""

import json
import re

import pytest

from socialsim.agents.desires import DESIRES
from socialsim.llm.questions import QUOTED
from socialsim.model.society import SocietyModel

SCENARIO = "workplace-meso"
STEPS = 7
DESIRE_RECORD = json.dumps({**{d.replace(" ", "_"): 5 for d in DESIRES}, "reason": "as before"})
PROPOSALS = json.dumps({"activities": [{"text": "review the pitch slides", "stance": "Neutral"},
                                       {"text": "offer to rehearse with a colleague", "stance": "Cooperation"},
                                       {"text": "rewrite my own section", "stance": "Neutral"}]})
# the operations whose prompts show the memory, answered by a scripted model
MEMORY_OPS = ("ProposeActions", "GuessHiddenAction", "PredictObservedDesires", "PredictGuessedDesires")
MEMORY_HEADER = f"Your recent memory ({QUOTED}):\n"


def shown_memory(prompt: str) -> list[str]:
    """The lines under the memory's header ("- " items), without the bullet."""
    lines = prompt.split(MEMORY_HEADER, 1)[1].splitlines()
    block = []
    for line in lines:
        if not line.startswith("- "):
            break
        block.append(line[2:])
    return block


def run(scripted, memory_steps: int):
    """Each step's prompts per agent (name -> [memory shown, ...]) and each agent's memory line per step."""
    fake = scripted(replies={"possible activity sequences": [PROPOSALS], "most likely been doing": ["works quietly"]},
                    default=DESIRE_RECORD)
    model = SocietyModel(SCENARIO, model="rules", rng=1, memory_steps=memory_steps,
                         routes=dict.fromkeys(MEMORY_OPS, "openai/scripted"))
    shown, lines = [], []
    for _ in range(STEPS):
        before = len(fake.calls)
        model.step()
        step: dict[str, list[list[str]]] = {}
        for call in fake.calls[before:]:
            prompt = "\n".join(m["content"] for m in call["messages"])
            if MEMORY_HEADER in prompt:
                step.setdefault(re.search(r"You are (\w+)", prompt).group(1), []).append(shown_memory(prompt))
        shown.append(step)
        lines.append({a.name: f"I did: {a.action} | {a.consequence}" for a in model.agents})
    return model, shown, lines


@pytest.mark.parametrize("memory_steps", [0, 2, 5])
def test_the_prompts_show_exactly_the_last_memory_steps_steps(scripted, memory_steps):
    model, shown, lines = run(scripted, memory_steps)
    names = [a.name for a in model.agents]
    for t, step in enumerate(shown):  # t steps done before this one
        assert set(step) == set(names), t  # every agent was asked something that shows its memory
        for name, prompts in step.items():
            expected = [lines[s][name] for s in range(max(0, t - memory_steps), t)] if memory_steps else []
            for memory in prompts:
                assert memory == (expected or ["(nothing yet)"]), (t, name)
    for agent in model.agents:
        assert len(agent.memory) == min(memory_steps, STEPS)
    if memory_steps:  # the window slid: the first steps are gone from the last prompts
        assert memory_steps < STEPS and not any(lines[0][n] in m for n in names for m in shown[-1][n])


def test_memory_off_is_a_setting_and_a_negative_window_is_refused():
    from socialsim.agents.asvo.settings import ASVOSettings

    assert ASVOSettings.from_params({"memory_steps": 0}).memory_steps == 0
    with pytest.raises(ValueError, match="memory_steps"):
        ASVOSettings.from_params({"memory_steps": -1})
