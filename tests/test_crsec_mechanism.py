"""CRSEC's mechanism on the rule-based engine, through the real pipeline (world facts, conversations,
thoughts, the four checks, synthesis, plans and actions): the paper's qualitative dynamics."""

import pandas as pd
import pytest

from socialsim.agents.crsec.metrics import emergent_norms, first_reaching, series
from socialsim.model.society import SocietyModel
from socialsim.scenarios.loader import load_scenario

SMOKING = "no smoking indoors"
ENTREPRENEURS = {"Bob Johnson", "Abigail Chen", "Francisco Lopez"}
SMOKERS = {"Wolfgang Schulz", "Sam Moore", "Carlos Gomez"}


def society(steps, rng=3, **params):
    model = SocietyModel("hobbs-cafe", arch="crsec", model="rules", rng=rng, **params)
    for _ in range(steps):
        model.step()
    return model


@pytest.fixture(scope="module")
def paper_run():
    """The paper's horizon (two simulated days), once for all tests of this module."""
    return society(load_scenario("hobbs-cafe").presets["paper"]["steps"])


@pytest.fixture(scope="module")
def frames(paper_run):
    agents = paper_run.datacollector.get_agent_vars_dataframe().reset_index()
    return series(paper_run), agents


def holders(agents, step, norm):
    at = agents[agents["Step"] == step]
    return set(at.loc[at["holds"].str.contains(norm, regex=False), "name"])


def test_no_smoking_spreads_from_the_entrepreneurs_to_everyone(paper_run, frames):
    frame, agents = frames
    first = int(frame["step"].iloc[0])
    assert holders(agents, first, SMOKING) == ENTREPRENEURS  # seeded by the entrepreneurs only
    assert frame[f"adoption[{SMOKING}]"].iloc[0] < 1.0
    assert frame[f"adoption[{SMOKING}]"].iloc[-1] == 1.0
    assert frame[f"compliance[{SMOKING}]"].iloc[-1] == 1.0
    # ordinary agents got it by spreading (chats or thoughts), not by creating it
    changes = paper_run.datacollector.get_table_dataframe("norm_changes")
    ordinary = changes[~changes["agent"].isin(ENTREPRENEURS) & (changes["event"] == "qualified")
                       & (changes["canonical"] == SMOKING)]
    assert set(ordinary["origin"]) <= {"conversation", "thought"}
    assert {"conversation"} <= set(ordinary["origin"]) and set(ordinary["agent"]) >= SMOKERS


def test_injunctive_norms_reach_full_adoption_and_compliance_within_two_days(frames):
    frame, _ = frames
    for norm in (SMOKING, "be quiet in public"):
        assert frame[f"adoption[{norm}]"].iloc[-1] == 1.0 and frame[f"compliance[{norm}]"].iloc[-1] == 1.0


def test_smokers_stop_smoking_indoors_once_they_comply(paper_run, frames):
    frame, agents = frames
    breaches = paper_run.datacollector.get_table_dataframe("breaches")
    smoking = breaches[breaches["norm"] == SMOKING]
    assert set(smoking["agent"]) <= SMOKERS and not smoking.empty  # the habit shows at first
    events = paper_run.datacollector.get_table_dataframe("events")
    for smoker in SMOKERS:
        adopted = agents[(agents["name"] == smoker) & agents["holds"].str.contains(SMOKING)]["Step"].min()
        assert smoking[smoking["agent"] == smoker]["step"].max() <= adopted + 1
        later = events[(events["agent"] == smoker) & (events["step"] > adopted + 1) & events["tags"].str.contains("smoke")]
        assert not later.empty and set(later["area"]) == {"the street outside"}  # still smokes, outside


def test_conflicts_rise_then_fall(frames):
    frame, _ = frames
    conflicts = frame["conflicts"].tolist()
    quarter = len(conflicts) // 4
    assert conflicts[0] == 0 and max(conflicts[:quarter]) > 0
    assert sum(conflicts[-2 * quarter:]) < sum(conflicts[:quarter])
    peak = conflicts.index(max(conflicts))
    assert peak < quarter


def test_adoption_precedes_compliance(frames):
    frame, agents = frames
    for norm in (SMOKING, "be quiet in public"):
        adopted, complied = first_reaching(frame, f"adoption[{norm}]"), first_reaching(frame, f"compliance[{norm}]")
        assert adopted is not None and complied is not None and adopted < complied
    for name, rows in agents.groupby("name"):
        holds = rows[rows["holds"].str.contains(SMOKING)]["Step"]
        complies = rows[rows["complies"].str.contains(SMOKING)]["Step"]
        assert not complies.empty and holds.min() <= complies.min(), name


def test_descriptive_norm_emerges_later_than_the_injunctive_ones(frames):
    frame, _ = frames
    tip = first_reaching(frame, "adoption[tip after meals]")
    assert tip is not None and tip > first_reaching(frame, f"adoption[{SMOKING}]")


def test_conversations_are_bounded_multi_turn_and_recorded(paper_run):
    chats = paper_run.datacollector.get_table_dataframe("conversations")
    turns = chats.groupby(["step", "sender", "receiver"]).size()
    assert not turns.empty and set(turns) == {paper_run.society.settings.conversation_turns}
    assert set(chats["speaker"]) >= ENTREPRENEURS
    interactions = paper_run.datacollector.get_table_dataframe("interactions")
    assert (interactions["kind"] == "norm chat").sum() == len(turns)


def test_an_unseeded_norm_emerges(paper_run):
    emergent = emergent_norms(paper_run)
    assert not emergent.empty
    seeded = {n.content for a in paper_run.agents for n in a.norms.norms if n.origin == "created"}
    assert not set(emergent["norm"]) & seeded
    assert emergent["holders"].iloc[0] >= 2


def test_same_seed_same_society():
    a, b = society(12, rng=9), society(12, rng=9)
    def frame(m):
        return m.datacollector.get_model_vars_dataframe().drop(columns=["llm_latency_s"])
    assert frame(a).equals(frame(b))
    def norms(m):
        return pd.DataFrame(m.datacollector.get_table_dataframe("norm_changes"))
    assert norms(a).equals(norms(b))


# --- long-term synthesis ------------------------------------------------------------------------------------


def test_synthesis_fires_above_the_threshold_and_deactivates_members():
    model = society(1)
    bob = model.agent_named("Bob Johnson")
    created = [n for n in bob.norms.norms if n.origin == "created"]
    assert sum(n.utility for n in created) > 350  # above the paper's threshold from the start
    abstract = [n for n in bob.norms.norms if n.origin == "synthesis"]
    assert len(abstract) == 1 and abstract[0].qualified and len(abstract[0].members) >= 2
    members = [bob.norms.get(i) for i in abstract[0].members]
    assert all(m.valid and not m.activated for m in members)
    weights = [m.utility for m in members]
    assert abstract[0].utility == round(sum(w * u for w, u in zip(weights, weights, strict=False)) / sum(weights))
    assert bob.norms.utility_sum() < sum(n.utility for n in created)


def test_no_synthesis_below_the_threshold():
    model = society(1, synthesis_threshold=400)
    bob = model.agent_named("Bob Johnson")
    assert bob.norms.utility_sum() <= 400
    assert not [n for n in bob.norms.norms if n.origin == "synthesis"]
    assert all(n.qualified for n in bob.norms.norms)


# --- the four checks of the immediate evaluation ---------------------------------------------------------------


@pytest.mark.parametrize("check, reply", [
    ("CheckConsistency", "No"), ("CheckDuplication", "Yes"), ("CheckType", "2"), ("CheckConflict", "Yes")])
def test_a_norm_failing_a_check_stays_unqualified(scripted, check, reply):
    """Route one check to a (scripted) model that always fails it; everything else stays on rules."""
    scripted(default=reply)
    model = society(16, routes={check: "openai/scripted-judge"})
    changes = model.datacollector.get_table_dataframe("norm_changes")
    label = check.removeprefix("Check").lower()
    failed = changes[changes["event"] == f"failed {label}"]
    assert not failed.empty
    for agent in model.agents:
        for norm in agent.norms.norms:
            if norm.failed_check == label:
                assert not norm.activated and not norm.valid
    ordinary = [a for a in model.agents if not a.entrepreneur]
    if check == "CheckType":  # every injunctive norm was "corrected" to descriptive and rejected
        assert all(n.type != "injunctive" for a in ordinary for n in a.norms.qualified())
        assert all(n.type == "descriptive" for a in model.agents for n in a.norms.norms if n.failed_check == "type")
    else:
        assert all(not a.norms.qualified() for a in ordinary)
