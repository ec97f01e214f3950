"""Every declared architecture parameter at the edges of its range, each other choice, each switch
flipped: two steps on the rules engine, or a clear refusal naming it. A run at a setting the
declaration allows must not crash (``desire_pool=4`` once raised KeyError in ASVO's first step)."""

from __future__ import annotations

import pytest

from socialsim.agents.params import Param, parameters
from socialsim.model.society import SocietyModel

SCENARIOS = {"crsec": "hobbs-cafe", "asvo": "workplace-meso", "itcmas": "irollan-valley"}


def edge_values(p: Param) -> list:
    """The values at the edges of what ``p`` declares: its bounds (just inside an open one), a value
    well above a lower bound with no upper one, the choices it does not default to, a flipped switch."""
    if p.kind == "bool":
        return [not p.default]
    if p.kind == "choice":
        return [c for c in p.choices if c != p.default]
    if p.kind not in ("int", "float") or p.low is None:
        return []
    inside = 1 if p.kind == "int" else 0.01
    values = [p.low + inside if p.low_open else p.low]
    if p.high is not None:
        values.append(p.high - inside if p.high_open else p.high)
    else:
        values.append(p.low + (10 if p.kind == "int" else 5.0))
    return values


CASES = [pytest.param(arch, p.name, v, id=f"{arch}.{p.name}={v}")
         for arch in SCENARIOS for p in parameters(arch) for v in edge_values(p)]


@pytest.mark.parametrize("arch, name, value", CASES)
def test_a_run_at_each_declared_edge_steps_or_says_why_not(arch, name, value):
    try:
        model = SocietyModel(SCENARIOS[arch], arch=arch, model="rules", rng=1, **{name: value})
    except ValueError as exc:  # a combination the declaration cannot express (svo_mix for 'mix', s_min <= s_max)
        assert name in str(exc) or str(value) in str(exc), str(exc)
        return
    for _ in range(2):
        model.step()
    assert model.steps == 2
    assert len(model.datacollector.get_model_vars_dataframe()) == 2
    totals = model.llm.ledger.totals()
    assert totals["rule_decisions"] > 0 and totals["fallbacks"] == totals["llm_failures"] == 0


def test_every_architecture_has_edges_to_try():
    for arch in SCENARIOS:
        assert sum(1 for case in CASES if case.values[0] == arch) >= 10, arch
