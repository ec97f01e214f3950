"""CRSEC's measurement runs on a judge route, not on the actors: by default the lexical matcher;
with an LLM judge its answers decide adoption, and its agreement with the matcher is reported."""

import pandas as pd
import pytest

from socialsim.agents.crsec.metrics import judge_agreement, measurement_lines, series
from socialsim.model.society import SocietyModel


def run(steps=8, **params):
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=1, **params)
    for _ in range(steps):
        model.step()
    return model


def adoption(model):
    frame = series(model)
    return frame[[c for c in frame.columns if c.startswith("adoption[")]].iloc[-1]


def test_by_default_the_lexical_matcher_measures_and_the_report_says_so():
    model = run()
    matches = model.datacollector.get_table_dataframe("norm_matches")
    assert len(matches) > 0 and (matches["judged"] == matches["lexical"]).all() and set(matches["judge"]) == {"rules"}
    assert adoption(model).max() > 0
    line = measurement_lines(model)[0]
    assert "lexical matcher" in line and "not an independent measurement" in line  # the actors match by it too


def test_a_route_to_what_only_the_judge_asks_is_refused_naming_the_judges_setting():
    """The actors match norms by the lexical matcher whatever the routes: ``MatchNorm=openai/actor``
    sent nothing to that model, and the report then said adoption was not the actors' own reading."""
    for routes, named in (({"MatchNorm": "openai/actor"}, "'MatchNorm' is never taken: it is"),
                          ({"JudgePlanCompliance": "openai/a", "MatchNorm": "openai/a"},
                           "'JudgePlanCompliance', 'MatchNorm' is never taken: they are")):
        with pytest.raises(ValueError) as refused:
            SocietyModel("makerspace", arch="crsec", model="rules", rng=1, routes=routes)
        assert str(refused.value) == f"route to {named} asked only of the judge, chosen by --set crsec.judge=MODEL"



def test_under_the_rules_judge_adoption_is_the_actors_own_reading_whatever_their_module_routes(scripted):
    scripted(default="1")
    # the module holds operations the actors ask too: routed for those, while they match by the matcher
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=1, routes={"evaluation": "openai/actor"})
    model.step()
    assert "not an independent measurement" in measurement_lines(model)[0]


def test_an_llm_judge_decides_the_measurement_on_its_own_route(scripted):
    fake = scripted(default="1")  # the judge answers "none of these" to every match
    model = run(judge="openai/judge-model")
    calls = model.llm.ledger.frame()
    judged = calls[calls["op"] == "MatchNorm"]
    assert len(judged) > 0 and set(judged["model"]) == {"openai/judge-model"}
    assert {c["model"] for c in fake.calls} == {"openai/judge-model"}  # the actors stayed on rules
    # recorded at the steps they were asked in (the judge's gateway is derived from the run's)
    assert judged["step"].min() >= 1 and judged["step"].nunique() > 1
    assert set(judged["step"]) == set(model.datacollector.get_table_dataframe("norm_matches")["step"])
    assert adoption(model).max() == 0  # the judge's "none" is what counts, not the matcher's keywords
    line = measurement_lines(model)[0]
    assert "`openai/judge-model`" in line and "Agreement with the lexical matcher" in line
    n, agree, _ = judge_agreement(model.datacollector.get_table_dataframe("norm_matches"))
    assert n > 0 and agree < 1


def test_the_judge_must_not_be_an_actors_model():
    with pytest.raises(ValueError, match="also an actors' model"):
        SocietyModel("makerspace", arch="crsec", model="openai/actor", judge="openai/actor")


def test_agreement_figures():
    frame = pd.DataFrame({"judged": ["a", "a", "b", "none"], "lexical": ["a", "b", "b", "none"]})
    n, agree, kappa = judge_agreement(frame)
    assert (n, agree) == (4, 0.75) and 0 < kappa < 1


def test_the_agreement_has_a_shuffled_label_baseline_beside_it(scripted):
    """SPEC: a shuffled-label baseline beside every agreement figure. A judge that agrees with the matcher
    on every norm is far above its shuffled labels; labels paired by chance sit near kappa 0."""
    from socialsim.agents.crsec.metrics import shuffled_agreement

    same = pd.DataFrame({"judged": ["a", "b", "c", "none"] * 10, "lexical": ["a", "b", "c", "none"] * 10})
    share, kappa = shuffled_agreement(same)
    assert judge_agreement(same)[1:] == (1.0, 1.0) and share < 0.5 and abs(kappa) < 0.2
    assert shuffled_agreement(same) == (share, kappa)  # a fixed seed: the same report every time
    mostly_none = pd.DataFrame({"judged": ["none"] * 9 + ["a"], "lexical": ["none"] * 9 + ["a"]})
    assert shuffled_agreement(mostly_none)[0] > 0.8  # frequent labels agree by chance: why it is shown
    assert all(v != v for v in shuffled_agreement(pd.DataFrame({"judged": [None], "lexical": ["a"]})))
    scripted(default="1")
    line = measurement_lines(run(judge="openai/judge-model"))[0]
    assert "with the judge's labels shuffled (200 permutations, the chance baseline)" in line


def test_an_unusable_judge_answer_is_measured_by_the_lexical_matcher_and_counted(scripted):
    """A judge's fallback ('none of the tracked norms', 'breaks it') would be a judgement nobody
    made, and would bias adoption and plan compliance down: the documented offline rule measures."""
    scripted(default="9")  # no such option, again on the repair
    unusable = run(judge="openai/judge-model")
    by_rules = run()
    for column in [c for c in series(by_rules).columns if "adoption[" in c or "plan_compliance[" in c]:
        assert series(unusable)[column].tolist() == series(by_rules)[column].tolist(), column
    assert adoption(unusable).max() > 0
    matches = unusable.datacollector.get_table_dataframe("norm_matches")
    assert len(matches) > 0 and matches["judged"].isna().all()  # recorded as no answer of the judge's
    assert judge_agreement(matches)[0] == 0  # and left out of the agreement
    fell_back = unusable.society.judge_fallbacks
    assert fell_back["MatchNorm"] == len(matches) and fell_back["JudgePlanCompliance"] > 0
    lines = measurement_lines(unusable)
    assert "none of its answers matching a held norm was usable" in lines[0]
    assert lines[1].startswith(f"The judge's answer was unusable for {len(matches)} norm matches and "
                               f"{fell_back['JudgePlanCompliance']} plan judgements")


ACTOR_TABLES = ("events", "conversations", "breaches", "sender_decisions", "thoughts", "plans", "norm_changes",
                "interactions")
ACTOR_COLUMNS = ("conflicts", "norm_thoughts", "norm_chats", "syntheses", "breaches",
                 *(f"action_compliance[{n}]" for n in ("no smoking indoors", "be quiet in public", "tip after meals")))


def test_the_judge_is_a_passive_instrument_it_changes_no_actor_side_frame_or_table(scripted):
    """The judge's labels feed the metrics only: with rules actors, a judge answering 'none of these'
    (and 'complies') to everything leaves every behaviour, conversation, thought, plan, norm database
    change and breach as the rules judge does, and changes only what is measured from its labels
    (adoption, plan compliance, the norm_matches table's judged column). Before, the actors read the
    judge's labels: seed 1, one day, 313 conflicts and 174 conversations with the rules judge, 0 and 0
    with this one."""
    scripted(default="1")
    steps = 30
    by_rules = SocietyModel("hobbs-cafe", model="rules", rng=1, questionnaire_items=0)
    by_llm = SocietyModel("hobbs-cafe", model="rules", rng=1, questionnaire_items=0, judge="openai/judge-model")
    for _ in range(steps):
        by_rules.step()
        by_llm.step()
    for name in ACTOR_TABLES:
        a, b = (m.datacollector.get_table_dataframe(name) for m in (by_rules, by_llm))
        assert len(a) > 0, name
        pd.testing.assert_frame_equal(a, b, obj=name)
    frames = [m.datacollector.get_model_vars_dataframe() for m in (by_rules, by_llm)]
    for column in ACTOR_COLUMNS:
        assert frames[0][column].tolist() == frames[1][column].tolist(), column
    assert frames[0]["conflicts"].sum() > 0 and frames[0]["norm_chats"].sum() > 0
    agents = [m.datacollector.get_agent_vars_dataframe() for m in (by_rules, by_llm)]
    for column in ("qualified_norms", "memories", "utility_sum", "complies"):
        assert agents[0][column].tolist() == agents[1][column].tolist(), column
    # what the judge measures does change: its "none of these" means no adoption
    assert adoption(by_rules).max() > 0 and adoption(by_llm).max() == 0
    assert (agents[0]["holds"] != "").any() and (agents[1]["holds"] == "").all()
    matches = by_llm.datacollector.get_table_dataframe("norm_matches")
    assert set(matches["judged"]) == {"none of these"} and (matches["lexical"] != "none of these").any()


def test_asking_the_judge_leaves_the_actors_random_stream_where_it_was(scripted):
    """The judge's call seed comes from a stream of its own: drawn from the agent's phase RNG, it
    shifted every later draw of that agent (its talk, its persuasion), so the judge's route changed
    the society after a day (84 steps: 356 norm changes against 353)."""
    import random

    from socialsim.agents.crsec import operations as ops
    from socialsim.llm.loop import run_sync

    fake = scripted(default="1")
    model = SocietyModel("hobbs-cafe", model="rules", rng=1, questionnaire_items=0, judge="openai/judge-model")
    agent = sorted(model.agents, key=lambda a: a.name)[0]
    agent.phase_rng = random.Random(5)
    before = agent.phase_rng.getstate()
    ctx = ops.MatchContext("No smoking indoors.", list(agent.settings.tracked_norms))
    for _ in range(2):
        _, by_judge = run_sync(agent.judged(ops.MATCH_NORM, ctx))
        assert by_judge and agent.phase_rng.getstate() == before
    seeds = [call["params"]["seed"] for call in fake.calls]
    assert len(seeds) == 2 and seeds[0] != seeds[1]  # each ask its own stream, not one seed repeated
    agent.phase_rng = random.Random(5)
    agent._judge_calls = 0
    run_sync(agent.judged(ops.MATCH_NORM, ctx))
    assert len(fake.calls) == 2  # the same seed as the first ask: its call was on the tape (reproducible)
