"""Properties of the rules baseline over random seeds and personas (hypothesis)."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from socialsim.agents.crsec import operations as ops
from socialsim.agents.crsec.settings import load_settings
from socialsim.scenarios.loader import load_scenario

SETTINGS = load_settings(load_scenario("hobbs-cafe"))
SUPPORT = {c.about: c for c in SETTINGS.norm_catalogue if c.about and not c.opposes}
CONTRARY = {c.about: c for c in SETTINGS.norm_catalogue if c.about and c.opposes}

persona = st.fixed_dictionaries({
    "topic": st.sampled_from(sorted(CONTRARY)),
    "stance": st.sampled_from(["for", "against", "neutral"]),
    "accept": st.floats(0, 1),
    "contrary_rate": st.floats(0.05, 1),
    "recalled": st.integers(0, 6),
})


def identify(p, seed):
    ctx = ops.IdentifyContext("x", "a chat", p["topic"], SUPPORT[p["topic"]], p["stance"], "smoking a cigarette",
                              ["(step 1, observation) Ann is smoking a cigarette here"] * p["recalled"],
                              accept=p["accept"], contrary=CONTRARY[p["topic"]], contrary_rate=p["contrary_rate"])
    return ops.IDENTIFY_FROM_CHAT.rule(ctx, random.Random(seed))


@settings(max_examples=60, deadline=None)
@given(st.lists(persona, min_size=30, max_size=30), st.integers(0, 10**6))
def test_contrary_norms_appear_at_a_nonzero_rate_among_opponents(personas, seed):
    opponents = [dict(p, stance="against", accept=min(p["accept"], 0.3), recalled=0,
                      contrary_rate=max(p["contrary_rate"], 0.5)) for p in personas]
    answers = [identify(p, seed + i) for i, p in enumerate(opponents)]
    contrary = [a for a in answers if a.found and a.content in {c.content for c in CONTRARY.values()}]
    assert contrary  # each opponent: contrary with chance >= 0.7 * 0.5 (none of 30: p ~ 2e-6)


@settings(max_examples=100, deadline=None)
@given(persona, st.integers(0, 10**6))
def test_only_opponents_form_contrary_norms_and_found_norms_are_about_the_topic(p, seed):
    answer = identify(p, seed)
    if answer.found:
        assert answer.content in (SUPPORT[p["topic"]].content, CONTRARY[p["topic"]].content)
        if answer.content == CONTRARY[p["topic"]].content:
            assert p["stance"] == "against"
