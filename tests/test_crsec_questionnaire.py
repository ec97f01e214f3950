"""The paper's Appendix-E questionnaire, asked of an LLM judge over pairs sampled from the run's
records: what each task shows comes from the recorded tables, the scores are the judge's, a bad
answer is a counted fallback, and the rules judge never pretends to rate."""

import json
import random

import pandas as pd
import pytest

from socialsim.agents.crsec import questionnaire as q
from socialsim.agents.crsec.metrics import QUESTIONNAIRE_FILE, report_sections, series
from socialsim.model.society import SocietyModel

RATE = "rate one of their decisions"  # a phrase of the rating prompt (the scripted judge keys on it)


def run(steps=6, **params):
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=2, **params)
    for _ in range(steps):
        model.step()
    return model


@pytest.fixture(scope="module")
def rules_run():
    return run()


def tables(model):
    dc = model.datacollector
    return {name: dc.get_table_dataframe(name) for name in dc.tables}


def test_every_task_rates_pairs_the_run_recorded(rules_run):
    t = tables(rules_run)
    pools = {name: build(t) for name, build in q.BUILDERS.items()}
    for task in ("Creation", "Sender", "Observation", "Immediate evaluation", "Plan", "Action"):
        assert pools[task], task
    thoughts = set(t["thoughts"]["thought"])
    assert all(any(th in item.material for th in thoughts) for item in pools["Observation"])
    created = t["norm_changes"][t["norm_changes"]["event"] == "created"]
    assert len(pools["Creation"]) == len(created)
    assert {i.agent for i in pools["Creation"]} == set(created["agent"])
    # a plan pair shows the norms the agent held then, rebuilt from the change log
    for item in pools["Plan"]:
        for norm in q.held_norms(t["norm_changes"], item.agent, item.step):
            assert norm in item.material
    # a sender pair is one recorded decision, with its conflict verdict
    decisions = t["sender_decisions"]
    assert len(pools["Sender"]) == len(decisions)
    assert sum("DETECTED A CONFLICT: yes" in i.material for i in pools["Sender"]) == int(decisions["conflict"].sum())


def test_sender_decisions_agree_with_the_conflict_counter(rules_run):
    decisions = tables(rules_run)["sender_decisions"]
    assert int(decisions["conflict"].sum()) == int(series(rules_run)["conflicts"].sum()) > 0
    # talk is asked once per step for the first conflict only; never without a conflict
    assert decisions.loc[~decisions["conflict"], "talk"].isna().all()
    asked = decisions.dropna(subset=["talk"])
    assert len(asked) == len(asked.groupby(["step", "agent"]))


def test_sampling_is_bounded_and_reproducible(rules_run):
    t = tables(rules_run)
    a = q.sample_items(t, random.Random(5), 3)
    b = q.sample_items(t, random.Random(5), 3)
    assert a == b and a
    per_task = pd.Series([i.task for i in a]).value_counts()
    assert per_task.max() <= 3
    assert q.sample_items(t, random.Random(6), 3) != a  # another draw, other pairs


def test_held_norms_follow_the_change_log():
    log = pd.DataFrame([
        {"step": 1, "agent": "A", "norm_id": 0, "content": "no sawing late", "state": "qualified"},
        {"step": 2, "agent": "A", "norm_id": 1, "content": "sweep up", "state": "pending"},
        {"step": 3, "agent": "A", "norm_id": 1, "content": "sweep up", "state": "qualified"},
        {"step": 4, "agent": "A", "norm_id": 0, "content": "no sawing late", "state": "deactivated"},
        {"step": 1, "agent": "B", "norm_id": 0, "content": "be kind", "state": "qualified"},
    ])
    assert q.held_norms(log, "A", 2) == ["no sawing late"]
    assert q.held_norms(log, "A", 3) == ["no sawing late", "sweep up"]
    assert q.held_norms(log, "A", 4) == ["sweep up"]


def test_an_llm_judge_rates_and_the_report_gives_its_scores(scripted, tmp_path):
    def rating(material_word, score):
        return json.dumps({"score": score, "reason": f"saw {material_word}"})

    # the judge gives 2 to pairs showing a detected conflict, 6 to everything else
    fake = scripted(replies={"DETECTED A CONFLICT: yes": [rating("conflict", 2)], RATE: [rating("other", 6)]},
                    default="1")
    model = run(judge="openai/judge-model", questionnaire_items=4)
    lines = "\n".join(report_sections(model, tmp_path))
    ratings = pd.read_parquet(tmp_path / "tables" / QUESTIONNAIRE_FILE)
    rated = [c for c in fake.calls if any(RATE in m["content"] for m in c["messages"])]
    assert len(rated) == len(ratings) > 0 and {c["model"] for c in rated} == {"openai/judge-model"}
    # a plan pair gives its items' spans up to the scenario's day end, as the plan judge reads them
    plans = [m["content"] for c in rated for m in c["messages"] if "PLAN (each item goes on" in m["content"]]
    assert plans and all(f"the last until {model.society.settings.day_end})" in p for p in plans)
    assert set(ratings["status"]) == {"ok"} and ratings.groupby("task").size().max() <= 4 * 2
    summary = q.summary(ratings).set_index("task")
    assert summary.loc["Creation", "mean"] == 6.0 and summary.loc["Plan", "mean"] == 6.0
    sender = ratings[ratings["task"] == "Sender"]
    assert set(sender["score"]) <= {2, 6} and summary.loc["Sender", "pairs"] > 0
    assert "Appendix-E questionnaire" in lines and "| Creation |" in lines and "Creation 6.00" in lines
    assert "judge `openai/judge-model`" in lines


def test_a_bad_rating_is_a_counted_fallback_without_a_score(scripted, tmp_path):
    scripted(replies={RATE: ['{"score": 11}']}, default="1")  # out of the 1-7 scale, repair fails too
    model = run(judge="openai/judge-model", questionnaire_items=2)
    lines = "\n".join(report_sections(model, tmp_path))
    ratings = pd.read_parquet(tmp_path / "tables" / QUESTIONNAIRE_FILE)
    assert len(ratings) > 0 and set(ratings["status"]) == {"fallback"} and ratings["score"].isna().all()
    # the report says the judge's answers were unusable, not that there was nothing to rate
    assert f"none of the judge's {len(ratings)} answers was a usable rating" in lines
    assert "no pair to rate" not in lines
    summary = q.summary(ratings)
    assert summary["pairs"].sum() == 0 and summary["fallbacks"].sum() == len(ratings)
    assert model.llm.ledger.failures.get("RateOperation", 0) >= len(ratings)


def test_the_rules_judge_never_rates(rules_run, tmp_path):
    calls = len(rules_run.llm.ledger.rows)
    lines = "\n".join(report_sections(rules_run, tmp_path))
    assert "needs an LLM judge" in lines
    assert not (tmp_path / "tables" / QUESTIONNAIRE_FILE).exists()
    assert len(rules_run.llm.ledger.rows) == calls


def test_zero_items_switches_it_off(scripted, tmp_path):
    fake = scripted(default="1")
    model = run(steps=2, judge="openai/judge-model", questionnaire_items=0)
    report_sections(model, tmp_path)
    assert not any(RATE in m["content"] for c in fake.calls for m in c["messages"])


def test_the_longest_answer_the_grammar_allows_fits_the_token_limit():
    from socialsim.llm.questions import RecordQuestion

    grammar = RecordQuestion(q.Rating).gbnf()
    assert grammar.count("(char") == q.REASON_CHARS  # the grammar stops the reason there
    longest = json.dumps({"score": 7, "reason": "x" * q.REASON_CHARS})
    assert len(longest) <= q.RateOperation.max_tokens  # fits even at one character a token


def test_each_sampled_pair_is_scored_apart_even_when_one_agent_has_several_in_a_step(scripted):
    """Two norms one agent created in one step are two pairs, as the paper's raters saw them: the
    task's mean is over pairs, not over (agent, step)."""
    fake_judge = scripted(replies={"NORM CREATED: first": ['{"score": 7}'], "NORM CREATED: second": ['{"score": 7}'],
                                   "NORM CREATED: third": ['{"score": 1}']}, default="1")
    model = run(steps=1, judge="openai/judge-model")
    items = [q.Item("Creation", "Ann", 1, "NORM CREATED: first"), q.Item("Creation", "Ann", 1, "NORM CREATED: second"),
             q.Item("Creation", "Bo", 1, "NORM CREATED: third")]
    ratings = q.ask_questionnaire(model.society.judge, items, {}, random.Random(0))
    assert list(ratings["item"]) == [0, 1, 2] and list(ratings["score"]) == [7, 7, 1]
    assert len([c for c in fake_judge.calls if RATE in c["messages"][-1]["content"]]) == 3
    creation = q.summary(ratings).set_index("task").loc["Creation"]
    assert creation["pairs"] == 3 and creation["mean"] == 5.0 and creation["sd"] == pytest.approx(3.46, abs=0.01)
    older = q.summary(ratings.drop(columns="item")).set_index("task").loc["Creation"]  # a file from before
    assert older["pairs"] == 2 and older["mean"] == 4.0
