"""The breaches and visible compliance that CRSEC reads from world facts, checked against their
definition on every fact of a makerspace run (not on a few hand-picked cases)."""

import pytest

from socialsim.agents.crsec.metrics import judge_act
from socialsim.model.society import SocietyModel


@pytest.fixture(scope="module")
def model():
    m = SocietyModel("makerspace", arch="crsec", model="rules", rng=2)
    for _ in range(60):
        m.step()
    return m


def facts(m):
    return [e for e in m.world.events if e.ok]


def test_every_missing_sweep_is_a_breach_and_every_breach_a_missing_sweep(model):
    """'sweep after sawing' (within 1 step): an agent who sawed at step s-1, no longer saws at s,
    and has not swept since its last sawing breaches it at s; nobody else does."""
    events = facts(model)
    by_agent_step = {}
    for e in events:
        by_agent_step.setdefault((e.agent, e.step), []).append(e)
    expected = set()
    for (agent, step), acts in by_agent_step.items():
        if not any("saw" in e.tags for e in acts) or any("saw" in e.tags for e in by_agent_step.get((agent, step + 1), [])):
            continue
        window = acts + by_agent_step.get((agent, step + 1), [])
        last_saw = max(i for i, e in enumerate(window) if "saw" in e.tags)
        if not any("sweep" in e.tags for e in window[last_saw + 1:]):
            expected.add((agent, step + 1))
    breaches = model.datacollector.get_table_dataframe("breaches")
    found = set(breaches.loc[breaches["norm"] == "sweep after sawing", ["agent", "step"]].itertuples(index=False, name=None))
    assert found == {(a, s) for a, s in expected if s <= model.steps} and found


def test_each_fact_is_judged_by_its_tags_place_and_hour(model):
    settings = model.society.settings
    clock = {s: settings.clock_of_step(s, model.scenario_spec.step_minutes)[1] for s in range(1, model.steps + 1)}
    seen = {"call inside": 0, "text": 0, "sweep": 0, "early saw": 0}
    for e in facts(model):
        inside = model.world.is_inside(e.area)
        violates, complies = judge_act(e.tags, e.action, inside, settings, clock[e.step])
        if "call" in e.tags:
            assert ("no phone calls indoors" in violates) == inside
            assert ("no phone calls indoors" in complies) == (not inside)  # the same call, taken outside
            seen["call inside"] += inside
        if e.action == "send a text message":  # the named alternative to a call
            assert "no phone calls indoors" in complies
            seen["text"] += 1
        if "sweep" in e.tags:
            assert "sweep after sawing" in complies and not violates
            seen["sweep"] += 1
        if "saw" in e.tags:
            late = clock[e.step] >= 17 * 60
            assert ("no sawing after 17:00" in violates) == late
            seen["early saw"] += not late
    assert all(seen.values()), seen  # every kind of fact occurred in the run
