"""Separability by SVO where each SVO type is one agent measures the agents, not SVO: the
silhouette beat the shuffled-label chance in 5-6 of 8 seeds of the micro scenarios' w/o-ASVO arm,
with no SVO anywhere. The report and ``reproduce`` mark such scenarios confounded; where there
are enough agents, the SVO types are also shuffled between agents (a p-value that holds who
wrote what fixed). And relative findings that hold where the silhouette is not even positive are
said to be what they are."""

import itertools
import json
import math

import pandas as pd
import pytest

from socialsim.agents.asvo import reproduce as asvo_reproduce
from socialsim.agents.asvo.metrics import action_separability, agents_line, save_separability
from socialsim.agents.asvo.svo import SVO_TYPES
from socialsim.metrics.separability import group_partitions, separability

VERBS = ["help", "ask", "thank", "join", "quiz", "tease", "wait for", "call", "follow", "watch", "greet", "phone",
         "visit", "text", "meet", "warn", "praise", "copy", "race", "beat"]


def by_agent(n_agents, steps, label_of, verb_of):
    """One action per agent and step; each agent's verb is its own (agents act differently)."""
    rows = [{"agent": f"p{a}", "svo": label_of(a), "action": f"{verb_of(a)} Bob about item {s}"}
            for a in range(n_agents) for s in range(steps)]
    return pd.DataFrame(rows)


def test_the_ways_to_deal_labels_to_agents_are_counted_as_distinct_partitions():
    for sizes in [(1, 1), (1, 1, 1, 1), (2, 2, 1, 1), (3, 1), (2, 2, 2)]:
        agents = [label for label, size in enumerate(sizes) for _ in range(size)]
        brute = {frozenset(frozenset(i for i, lab in enumerate(p) if lab == k) for k in set(p))
                 for p in itertools.permutations(agents)}
        assert group_partitions(dict(enumerate(agents))) == len(brute), sizes
    assert group_partitions({f"p{i}": SVO_TYPES[i % 4] for i in range(10)}) == 6300


def test_one_agent_per_svo_is_flagged_confounded_and_the_agent_shuffle_not_measurable():
    actions = by_agent(4, 6, lambda a: SVO_TYPES[a], lambda a: VERBS[a])
    sep = action_separability(actions)
    assert sep.silhouette > sep.shuffled_silhouette  # agents that act differently beat the action shuffle ...
    assert sep.label_is_group and sep.groups_per_label == 1 and math.isnan(sep.group_shuffle_p)  # ... but that is all
    line = agents_line(sep)
    assert "single agent" in line and "cannot tell SVO from agent identity" in line and "not a test of SVO" in line


def test_the_agent_shuffle_tells_labels_that_follow_the_agents_style_from_labels_that_do_not():
    unrelated = action_separability(by_agent(20, 3, lambda a: SVO_TYPES[(a * 7) % 20 // 5], lambda a: VERBS[a]))
    related = action_separability(by_agent(20, 3, lambda a: SVO_TYPES[a % 4], lambda a: VERBS[a % 4]))
    assert unrelated.groups_per_label == related.groups_per_label == 5 and not related.label_is_group
    assert unrelated.group_shuffle_p > 0.05 > related.group_shuffle_p
    assert f"p = {related.group_shuffle_p:.2f}" in agents_line(related)


def test_too_few_agents_per_type_make_the_agent_shuffle_not_measurable():
    sep = action_separability(by_agent(5, 4, lambda a: SVO_TYPES[min(a, 3)], lambda a: VERBS[a]))  # 2,1,1,1: 10 ways
    assert sep.groups_per_label == 1 and not math.isnan(sep.silhouette) and math.isnan(sep.group_shuffle_p)
    sep = separability(["help Bob", "ask Amy", "thank Bob", "join Amy", "call Bob", "race Amy"] * 2,
                       ["a", "b"] * 6, groups=[f"p{i % 4}" for i in range(12)])  # p0 and p2 hold a, p1 and p3 b
    assert sep.groups_per_label == 2 and math.isnan(sep.group_shuffle_p) and "not measurable" in agents_line(sep)


def test_a_group_with_several_labels_has_no_agent_shuffle():
    sep = separability([f"{v} Bob" for v in VERBS], ["a", "b"] * 10, groups=["p0"] * 10 + ["p1"] * 10)
    assert math.isnan(sep.group_shuffle_p)


def test_the_figures_file_says_whether_svo_is_the_agent(tmp_path):
    save_separability(action_separability(by_agent(4, 6, lambda a: SVO_TYPES[a], lambda a: VERBS[a])), tmp_path)
    figures = json.loads((tmp_path / "asvo_separability.json").read_text(),
                         parse_constant=lambda c: pytest.fail(f"{c} is not JSON: other tools refuse the file"))
    assert figures["svo_is_agent"] is True and figures["agents_per_svo"] == 1
    assert figures["agent_shuffle_p"] is None  # not measurable (one agent per type): null


def test_reproduce_marks_the_scenarios_where_each_svo_is_one_agent():
    confounded = {s for s in asvo_reproduce.SCENARIOS if asvo_reproduce.one_agent_per_svo(s)}
    assert confounded == {"school-micro", "school-meso", "workplace-micro", "workplace-meso", "family-micro",
                          "family-meso"}
    texts = [f.text for f in asvo_reproduce.findings()]
    for s in asvo_reproduce.SCENARIOS:
        chance = [t for t in texts if t.startswith(f"{s}: with ASVO, above the shuffled-label chance")]
        assert len(chance) == 1 and (asvo_reproduce.CONFOUNDED in chance[0]) == (s in confounded)
        assert f"{s}: with ASVO, better than the SVO types shuffled between agents (p < 0.05)" in texts
        positive = [t for t in texts if t.startswith(f"{s}: with ASVO, a positive silhouette")]
        # above 0 is as much a difference between agents as above the shuffled labels, where one holds each type
        assert len(positive) == 1 and (asvo_reproduce.CONFOUNDED in positive[0]) == (s in confounded)


@pytest.mark.parametrize("null", [False, True])
def test_relative_findings_holding_beside_negative_silhouettes_are_read_plainly(null):
    from socialsim.model.reproduce import check_findings

    protocol = asvo_reproduce.protocol(judge=None)
    wide = protocol.paper.pivot(index="label", columns="metric", values="paper").reset_index()
    wide["silhouette"] = wide["label"].map(lambda s: -0.05 if s.endswith("/ ASVO") else -0.12)
    wide["silhouette_shuffled"], wide["separation_ratio"], wide["seed"] = -0.1, 1.0, 1
    wide.loc[wide["label"].str.endswith("/ ASVO"), "separation_ratio"] = 1.1
    checked = check_findings(protocol, wide)
    if null:
        checked = checked.assign(null_verdict=checked["verdict"], null_seeds_holding=1, null_seeds_measured=1)
    reading = "\n".join(protocol.interpret(checked))
    assert "24 relative findings hold where the silhouette with ASVO is not positive" in reading
    assert reading.count(asvo_reproduce.RELATIVE_READING) == 1  # said once, not again on the next line
    assert ("The rules null model holds 24 of the 24 relative findings that hold here." in reading) == null
    assert "marked confounded" in reading and "no finding there tests SVO" in reading


@pytest.mark.parametrize("null", [False, True])
def test_relative_findings_holding_beside_positive_silhouettes_are_read_once_as_relative(null):
    from socialsim.model.reproduce import check_findings

    protocol = asvo_reproduce.protocol(judge=None)
    wide = protocol.paper.pivot(index="label", columns="metric", values="paper").reset_index()
    wide["silhouette"] = wide["label"].map(lambda s: 0.2 if s.endswith("/ ASVO") else 0.1)
    wide["silhouette_shuffled"], wide["separation_ratio"], wide["seed"] = 0.0, 1.0, 1
    wide.loc[wide["label"].str.endswith("/ ASVO"), "separation_ratio"] = 1.1
    checked = check_findings(protocol, wide)
    if null:
        checked = checked.assign(null_verdict="does not hold", null_seeds_holding=0, null_seeds_measured=1)
    reading = "\n".join(protocol.interpret(checked))
    assert "not positive" not in reading and reading.count(asvo_reproduce.RELATIVE_READING) == 1
    assert ("The rules null model holds 0 of the 24 relative findings that hold here." in reading) == null
    assert ("The absolute ones (a positive silhouette" in reading) == (not null)
