"""Edge cases of the CRSEC rules and measurements that a mutation run (mutmut on
``agents/crsec/operations.py`` rules and ``agents/crsec/metrics.py``) showed no other test pinned."""

import math
import random
from types import SimpleNamespace

import pandas as pd

from socialsim.agents.crsec import operations as ops
from socialsim.agents.crsec.metrics import judge_agreement


def rule(op, ctx, seed=1):
    return op.rule(ctx, random.Random(seed))


def norm(content, kind="injunctive", utility=50, **kw):
    return ops.NormView(content, kind, utility, **kw)


# --- synthesis: the abstract norm composed by the rule ----------------------------------------------------


def abstract(theme, *members):
    return rule(ops.GENERATE_ABSTRACT_NORM, ops.AbstractContext(theme, list(members)))


def test_the_abstract_norm_keeps_each_members_own_last_letter():
    a = abstract("signs", norm("Mind the sign marked X."), norm("Read the notice board."))
    assert a.content == "On signs: mind the sign marked X; read the notice board."


def test_the_abstract_norm_type_is_the_members_majority_a_tie_is_injunctive():
    inj, desc = norm("Do not shout.", "injunctive"), norm("People queue.", "descriptive")
    assert abstract("t", inj, desc, desc).type == "descriptive"
    assert abstract("t", inj, desc).type == "injunctive"  # a tie
    assert abstract("t", inj, inj, desc).type == "injunctive"
    assert abstract("t", desc).type == "descriptive"


def test_an_abstract_norm_of_exactly_200_characters_is_kept_whole():
    a = abstract("t", norm("K" + "e" * 192))  # "On t: " + 193 characters + "." = 200
    assert len(a.content) == 200 and a.content.endswith("e.")


def test_a_long_abstract_norm_is_cut_at_197_characters_without_trailing_space_and_marked():
    # the 197th character of the composition is a space: the cut drops it before the ellipsis
    prefix = "On t: "
    body = "a" * (196 - len(prefix)) + " " + "b" * 50
    a = abstract("t", norm(body))
    assert a.content == (prefix + body)[:196] + "..."
    assert len(a.content) == 199
    just_over = "c" * (201 - len(prefix) - 1)  # 201 characters with the final full stop
    cut = abstract("t", norm(just_over))
    assert len(cut.content) == 200 and cut.content.endswith("...")


# --- the measurement's agreement figures ------------------------------------------------------------------


def test_agreement_of_no_matches_is_zero_norms_and_no_figures():
    n, agree, kappa = judge_agreement(pd.DataFrame({"judged": [], "lexical": []}))
    assert n == 0 and math.isnan(agree) and math.isnan(kappa)


def test_kappa_is_computed_when_the_two_disagree_on_every_norm_and_undefined_for_one_label():
    n, agree, kappa = judge_agreement(pd.DataFrame({"judged": ["a", "a"], "lexical": ["b", "b"]}))
    assert (n, agree, kappa) == (2, 0.0, 0.0)
    n, agree, kappa = judge_agreement(pd.DataFrame({"judged": ["none"] * 3, "lexical": ["none"] * 3}))
    assert (n, agree) == (3, 1.0) and math.isnan(kappa)


def test_weighted_utility_keeps_zero_weights_and_replaces_unusable_ones_by_equal_weights():
    low, high = norm("Low.", utility=20), norm("High.", utility=80)
    assert ops.weighted_utility([low, high], [0.0, 1.0]) == 80  # a zero weight is a usable weight
    assert ops.weighted_utility([low, high], [-1.0, 3.0]) == 50  # any negative weight: equal weights
    assert ops.weighted_utility([low, high], [0.0, 0.0]) == 50  # weights summing to zero: equal weights
    assert ops.weighted_utility([low, high], [0.25, 0.75]) == 65
    assert ops.weighted_utility([norm("Trivial.", utility=1)], [1.0]) == 1
    assert ops.weighted_utility([norm("Overrated.", utility=130)], [1.0]) == 100  # kept on the 1-100 scale


# --- emergence by provenance and first reaching a share -----------------------------------------------------


def fake_norm(content, origin, covers=()):
    """The emergent table's covers are the judge's labels (``judged_covers``), never the agent's own."""
    return SimpleNamespace(content=content, origin=origin, covers=(), judged_covers=tuple(covers))


def fake_model(agents, catalogue=(), tracked=()):
    people = [SimpleNamespace(name=name, norms=SimpleNamespace(norms=norms, qualified=lambda norms=norms: norms))
              for name, norms in agents]
    settings = SimpleNamespace(norm_catalogue=[SimpleNamespace(content=c) for c in catalogue],
                               tracked_norms=[SimpleNamespace(name=t) for t in tracked])
    return SimpleNamespace(agents=people, society=SimpleNamespace(settings=settings))


def test_emergent_norms_are_synthesised_texts_that_match_no_seed_counted_by_holders():
    from socialsim.agents.crsec.metrics import emergent_norms

    model = fake_model([
        ("Cid", [fake_norm("On calm: whisper.", "synthesis"), fake_norm("Be nice.", "conversation")]),
        ("Ann", [fake_norm("No smoking indoors.", "created"), fake_norm("On health: keep the air clean.", "synthesis",
                                                                        ["no smoking indoors"]),
                 fake_norm("Tip after meals", "synthesis"), fake_norm("Be nice.", "conversation")]),
        ("Bob", [fake_norm("Be nice.", "conversation"), fake_norm("On health: keep the air clean", "synthesis",
                                                                  ["be quiet"]),
                 fake_norm("On calm: hush.", "synthesis"), fake_norm("no smoking indoors", "synthesis"),
                 fake_norm("Quiet, please!", "synthesis")]),
    ], catalogue=["Quiet please."], tracked=["tip after meals"])
    table = emergent_norms(model)
    assert table.to_dict("records") == [
        {"norm": "On health: keep the air clean.", "holders": 2, "share": 2 / 3, "origin": "synthesis",
         "covers": "be quiet, no smoking indoors"},
        {"norm": "On calm: hush.", "holders": 1, "share": 1 / 3, "origin": "synthesis", "covers": ""},
        {"norm": "On calm: whisper.", "holders": 1, "share": 1 / 3, "origin": "synthesis", "covers": ""}]
    assert list(table.index) == [0, 1, 2]
    alone = emergent_norms(fake_model([("Ann", [fake_norm("On calm: hush.", "synthesis")])]))
    assert alone["share"].tolist() == [1.0]


def test_nothing_synthesised_means_no_emergent_norm():
    from socialsim.agents.crsec.metrics import emergent_norms

    table = emergent_norms(fake_model([("Ann", [fake_norm("Be nice.", "conversation")])]))
    assert table.empty and list(table.columns) == ["norm", "holders", "share", "origin", "covers"]


def test_first_reaching_gives_the_first_day_at_or_above_the_target():
    from socialsim.agents.crsec.metrics import first_reaching

    frame = pd.DataFrame({"day": [0.0, 0.25, 0.5, 0.75], "adoption": [0.2, 0.5, 0.7, 0.9]})
    assert first_reaching(frame, "adoption") == 0.5  # exactly the 70% target counts
    assert first_reaching(frame, "adoption", target=0.8) == 0.75
    assert first_reaching(frame, "adoption", target=0.95) is None
    assert first_reaching(frame, "adoption", target=0.1) == 0.0
