"""One tiny end-to-end ASVO step on the embedded SmolLM2 engine (grammar-constrained answers)."""

import pytest

from socialsim.model.society import SocietyModel
from socialsim.scenarios.loader import load_scenario


@pytest.mark.embedded
def test_one_asvo_step_on_the_embedded_engine():
    # one agent (Alice, of the two siblings), one desire (of 8) and one candidate action keep the step
    # short; every LLM operation is still asked (the second sibling only doubled the calls)
    scenario = load_scenario("family-micro")
    scenario = scenario.model_copy(update={"agents": scenario.agents[:1]})
    model = SocietyModel(scenario, model="local/smollm2", rng=5, n_candidates=1, tom_scope="none",
                         max_retries=0, desire_pool=1)
    model.step()
    ledger = model.llm.ledger.frame()
    llm = ledger[ledger["engine"] == "llm"]
    assert set(llm["op"]) >= {"ProposeActions", "SimulateOutcome", "SelectAction", "UpdateDesire", "CheckUpdate",
                              "ReflectUpdate"}
    assert llm["prompt_tokens"].sum() > 0 and llm["calls"].sum() >= len(llm)
    judged = ledger[ledger["op"] == "JudgeAction"]
    assert len(judged) and (judged["engine"] == "rules").all()  # the default judge is the rule baseline, never the actor
    for agent in model.agents:
        assert agent.action and agent.stance
        assert set(agent.state.values) == {"comfort"}
        assert all(0.0 <= v <= 8.0 for v in agent.state.values.values())
