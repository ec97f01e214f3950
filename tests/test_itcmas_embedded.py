"""ITCMA-S end to end on the embedded SmolLM2 engine: every LLM module answers through its grammar
(the 135M model is far too small for sensible choices; only the plumbing is tested)."""

import random

import pytest

from socialsim.agents.itcmas.operations import ELIM, ElimContext
from socialsim.llm.gateway import Gateway
from socialsim.llm.loop import run_sync
from socialsim.llm.routing import RouteTable
from socialsim.model.society import SocietyModel
from socialsim.scenarios.loader import load_scenario

pytestmark = pytest.mark.embedded


def test_elim_rates_within_1_to_5_on_the_embedded_model():
    gateway = Gateway(RouteTable("local/smollm2"))
    ctx = ElimContext(goal="Live well.", action="use bed", action_space=["go to Outside", "use bed"], verb="use",
                      noun="bed")
    answer = run_sync(gateway.ask(ELIM, ctx, agent_id=1, rng=random.Random(0)))
    assert answer.status in ("ok", "repaired", "fallback")
    assert 1 <= answer.value.value <= 5


def test_one_embedded_step_runs_every_other_module():
    # Only to keep this test short: Elim goes to the rules engine (it is ~14 calls an agent), and the
    # valley has its first three agents (half the calls of six)
    scenario = load_scenario("irollan-valley")
    agents = scenario.agents[:3]
    homes = {a.name: scenario.itcmas["homes"][a.name] for a in agents}
    scenario = scenario.model_copy(update={"agents": agents, "itcmas": {**scenario.itcmas, "homes": homes}})
    model = SocietyModel(scenario, model="local/smollm2", routes={"elimination": "rules"}, rng=3,
                         max_candidates=1, matrix_every=1)
    model.step()
    ledger = model.llm.ledger.frame()
    llm_ops = set(ledger.loc[ledger["engine"] == "llm", "op"])
    assert {"Protention", "ITCMAChooseAction", "SocialFilter", "RankAgents"} <= llm_ops
    assert set(ledger["status"]) <= {"ok", "repaired", "fallback", "rules"}
    assert len(model.datacollector.get_table_dataframe("itcmas_actions")) == 3
    assert model.society.matrix_runs == 1
    assert sum(a.resources for a in model.agents) == pytest.approx(3.0)
