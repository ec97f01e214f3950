"""A measurement that asks a model after the last step (CRSEC's questionnaire, ITCMA-S's judge,
ASVO's embeddings) runs on the run's tape, ledger and budget; a budget or an outage stopping it
keeps the run and its report, says so in the status, and --resume finishes it."""

import json

import pandas as pd
import pytest

from socialsim.llm.fake_server import FakeOpenAIServer
from socialsim.llm.gateway import ProviderOutage
from socialsim.llm.ledger import BudgetExhausted
from socialsim.metrics.report import end_of_run_measurement, without_figures
from socialsim.model.runner import RunConfig, replay, run
from socialsim.model.society import SocietyModel

JUDGE = "openai/fake-judge"


def judge_policy(messages):
    """A 1-7 rating for a questionnaire item, five for a trajectory, else the first option."""
    text = messages[-1]["content"]
    if "personification" in text:
        return json.dumps(dict.fromkeys(("personification", "consistency", "logicality", "exploration",
                                         "proactiveness"), 6))
    if "score" in text:
        return json.dumps({"score": 5, "reason": "plausible"})
    return "1"



def replay_unfigured(*args, **kwargs):
    """A replay whose report draws no figures: the replays here are compared by their frames and
    status, and their recordings drew the same figures."""
    with without_figures():
        return replay(*args, **kwargs)

@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=judge_policy) as s:
        yield s


def test_a_stop_inside_the_measurement_is_noted_and_anything_else_raises():
    model = SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=1)

    def budget():
        raise BudgetExhausted("max_calls=3 reached")

    assert end_of_run_measurement(model, "the judge", budget) is None
    assert model.measurement_stopped == "stopped by budget in the end-of-run measurement (the judge): max_calls=3 reached"

    def outage():
        raise ProviderOutage("5 calls in a row failed")

    assert end_of_run_measurement(model, "the embeddings", outage) is None
    assert model.measurement_stopped.startswith("stopped by provider outage in the end-of-run measurement (the embeddings)")
    assert end_of_run_measurement(model, "x", lambda: 7) == 7

    def bug():
        raise KeyError("a defect is not a stop")

    with pytest.raises(KeyError):
        end_of_run_measurement(model, "x", bug)


CRSEC_STEPS = 3  # the questionnaire asks the same 22 ratings after 3 steps as after 8


def _crsec(server, out, max_calls=None):
    config = RunConfig(scenario="hobbs-cafe", arch="crsec", model="rules", steps=CRSEC_STEPS, rng=1, api_base=server.api_base,
                       max_calls=max_calls, arch_params={"judge": JUDGE, "questionnaire_items": 2})
    return run(config, out, progress=False, preflight=False)


def test_the_questionnaire_stopped_by_the_budget_keeps_the_run_and_resume_finishes_it(server, tmp_path):
    whole = _crsec(server, tmp_path / "whole")
    assert whole.status == "completed"
    calls = pd.read_parquet(tmp_path / "whole" / "llm_calls.parquet")
    asked = calls[calls["engine"] == "llm"]
    rated = int((asked["op"] == "RateOperation").sum())
    assert rated >= 4  # the questionnaire asked something worth cutting short
    before_rating = len(asked) - rated

    requests = len(server.requests)
    stopped = _crsec(server, tmp_path / "cut", max_calls=before_rating + rated // 2)
    assert stopped.status.startswith("stopped by budget in the end-of-run measurement (the Appendix-E questionnaire)")
    saved = json.loads((tmp_path / "cut" / "config.json").read_text())
    assert saved["status"] == stopped.status and saved["steps_done"] == CRSEC_STEPS  # every step kept
    report = (tmp_path / "cut" / "report.md").read_text()
    assert f"Status: {stopped.status}" in report and "not measured: stopped by budget" in report
    assert not (tmp_path / "cut" / "tables" / "crsec_questionnaire.parquet").exists()
    live_when_cut = len(server.requests) - requests

    requests = len(server.requests)
    resumed = _crsec(server, tmp_path / "cut")  # --resume: the same directory, no budget
    assert resumed.status == "completed"
    ratings = pd.read_parquet(tmp_path / "cut" / "tables" / "crsec_questionnaire.parquet")
    assert ratings.equals(pd.read_parquet(tmp_path / "whole" / "tables" / "crsec_questionnaire.parquet"))
    assert len(server.requests) - requests == len(asked) - live_when_cut  # what was recorded was free


def _itcmas(server, out, judge=JUDGE, default="rules"):
    config = RunConfig(scenario="irollan-valley", arch="itcmas", model=default, steps=3, rng=1,
                       api_base=server.api_base, routes={"itcmas_judge": judge}, breaker=2)
    return run(config, out, progress=False, preflight=False)


def test_the_itcmas_judge_scores_the_run_on_its_route_tape_and_outage_rules(server, tmp_path):
    server.down = True  # the judge's provider is out when the run ends
    stopped = _itcmas(server, tmp_path / "r")
    assert stopped.status.startswith(f"stopped by provider outage in the end-of-run measurement (the judge {JUDGE})")
    assert stopped.steps_done == 3 and not (tmp_path / "r" / "tables" / "itcmas_judge.parquet").exists()
    assert "Not measured: stopped by provider outage" in (tmp_path / "r" / "report.md").read_text()
    # its replay judges as far as the tape goes and stops where the recording did (it raised TapeMiss)
    replayed, same = replay_unfigured(tmp_path / "r", tmp_path / "rr", progress=False)
    assert same and replayed.status == stopped.status

    server.down = False
    resumed = _itcmas(server, tmp_path / "r")
    assert resumed.status == "completed"
    scores = pd.read_parquet(tmp_path / "r" / "tables" / "itcmas_judge.parquet")
    assert set(scores["judge"]) == {JUDGE} and (scores["personification"] == 6).all() and len(scores) == 6
    assert f"Judged by `{JUDGE}`" in (tmp_path / "r" / "report.md").read_text()
    taped = [json.loads(line) for line in (tmp_path / "r" / "tape.jsonl").read_text().splitlines()]
    answered = [r for r in taped if r["op"] == "JudgeTrajectory" and not r.get("error")]
    assert len(answered) == 6 and len(taped) - len(answered) == 2  # one per agent; the outage's 2 failures kept

    requests = len(server.requests)
    replayed, same = replay_unfigured(tmp_path / "r", progress=False)
    assert same and replayed.status == "completed" and len(server.requests) == requests  # the judge from the tape

    from socialsim.agents.itcmas.reproduce import measure_run

    assert measure_run(tmp_path / "r")["personification"] == 6.0  # reproduce reads the run's own judge


def test_a_finished_run_judged_again_keeps_its_calls_on_a_tape_of_their_own(server, tmp_path, capsys):
    from socialsim.agents.itcmas.metrics import main as rejudge

    _itcmas(server, tmp_path / "r", judge="rules")
    recorded = {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()}
    assert rejudge([str(tmp_path / "r"), "--judge", JUDGE, "--api-base", server.api_base]) == 0
    scores = pd.read_parquet(tmp_path / "r" / "rejudged" / "openai_fake-judge.parquet")
    assert len(scores) == 6 and (scores["personification"] == 6).all() and set(scores["judge"]) == {JUDGE}
    assert "live calls 6" in capsys.readouterr().out and len(server.requests) == 6
    assert rejudge([str(tmp_path / "r"), "--judge", JUDGE, "--api-base", server.api_base]) == 0
    assert "live calls 0" in capsys.readouterr().out and len(server.requests) == 6  # answered by its tape
    assert all(p.read_bytes() == data for p, data in recorded.items())  # the run's own files untouched
    replayed, same = replay_unfigured(tmp_path / "r", progress=False)
    assert same


def test_without_a_judge_route_the_rules_baseline_judges_and_no_model_is_asked(server, tmp_path):
    result = run(RunConfig(scenario="irollan-valley", arch="itcmas", model="rules", steps=2, rng=1),
                 tmp_path / "r", progress=False, preflight=False)
    assert result.status == "completed" and server.requests == []
    assert set(pd.read_parquet(tmp_path / "r" / "tables" / "itcmas_judge.parquet")["judge"]) == {"rules"}
    calls = pd.read_parquet(tmp_path / "r" / "llm_calls.parquet")  # the judge's rows have no agent
    assert calls["agent"].dtype == "Int64" and calls["agent"].isna().any() and calls["agent"].notna().any()


def test_a_judge_that_also_plays_the_agents_is_refused_before_anything_is_written(server, tmp_path):
    with pytest.raises(ValueError, match="the itcmas judge 'openai/fake-judge' .* also plays the agents"):
        _itcmas(server, tmp_path / "r", default=JUDGE)
    assert not (tmp_path / "r").exists() and server.requests == []


def test_asvo_embeddings_stopped_by_the_budget_leave_separability_unmeasured(server, tmp_path):
    config = RunConfig(scenario="school-micro", arch="asvo", model="rules", steps=4, rng=1, max_calls=0,
                       api_base=server.api_base, arch_params={"embedding_model": "openai/fake-embed"})
    result = run(config, tmp_path / "r", progress=False, preflight=False)
    assert result.status.startswith("stopped by budget in the end-of-run measurement (the action embeddings)")
    assert result.steps_done == 4 and server.requests == []
    assert json.loads((tmp_path / "r" / "config.json").read_text())["status"] == result.status  # resumable
    assert "Not measured: stopped by budget" in (tmp_path / "r" / "report.md").read_text()
    assert not (tmp_path / "r" / "asvo_separability.json").exists()  # reproduce does not read a half figure


def test_a_rejudge_without_a_key_or_a_provider_says_so_and_writes_nothing(server, tmp_path, capsys, monkeypatch):
    """Without a key it tried api.openai.com, printed a ProviderOutage traceback and left a tape behind."""
    from socialsim.agents.itcmas.metrics import main as rejudge

    _itcmas(server, tmp_path / "r", judge="rules")
    monkeypatch.delenv("OPENAI_API_KEY")
    assert rejudge([str(tmp_path / "r"), "--judge", "openai/gpt-4o-mini"]) == 2
    assert "needs OPENAI_API_KEY in the environment" in capsys.readouterr().err
    assert not (tmp_path / "r" / "rejudged").exists()
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    server.down = True  # an outage: every call fails after its retries
    assert rejudge([str(tmp_path / "r"), "--judge", JUDGE, "--api-base", server.api_base]) == 3
    assert "the judge stopped" in capsys.readouterr().err


def test_a_run_stopped_before_its_last_step_asks_no_judge_and_replays_equal(server, tmp_path):
    """Judging half a run is no result, and was paid: a budget stop (or Ctrl-C) in step 2 of 3 made
    the judge's calls anyway, stamped with the cut step, so the replay (which judged at step 1) differed."""
    config = RunConfig(scenario="irollan-valley", arch="itcmas", model="openai/fake-actor", steps=3, rng=1,
                       api_base=server.api_base, routes={"itcmas_judge": JUDGE}, max_calls=150)
    stopped = run(config, tmp_path / "r", progress=False, preflight=False)
    assert stopped.status.startswith("stopped by budget") and stopped.steps_done == 1
    assert not [r for r in server.requests if r["model"] == "fake-judge"]  # the judge was never asked
    assert not (tmp_path / "r" / "tables" / "itcmas_judge.parquet").exists()
    assert "Not measured: the run stopped before its last step (stopped by budget" in (
        tmp_path / "r" / "report.md").read_text()
    requests = len(server.requests)
    replayed, same = replay_unfigured(tmp_path / "r", progress=False)
    assert same and len(server.requests) == requests
    assert replayed.status == "completed"  # the steps it was given, all done; nothing was to be measured

    resumed = run(config.model_copy(update={"max_calls": None}), tmp_path / "r", progress=False, preflight=False)
    assert resumed.status == "completed" and resumed.steps_done == 3  # measured once it reached its end
    assert len(pd.read_parquet(tmp_path / "r" / "tables" / "itcmas_judge.parquet")) == 6


def test_a_run_whose_judge_the_budget_stopped_replays_to_the_same_stop(server, tmp_path):
    config = RunConfig(scenario="irollan-valley", arch="itcmas", model="rules", steps=2, rng=1,
                       api_base=server.api_base, routes={"itcmas_judge": JUDGE}, max_calls=3)
    stopped = run(config, tmp_path / "r", progress=False, preflight=False)
    assert stopped.status.startswith("stopped by budget in the end-of-run measurement") and stopped.steps_done == 2
    requests = len(server.requests)
    replayed, same = replay_unfigured(tmp_path / "r", progress=False)
    assert same and replayed.status == stopped.status and len(server.requests) == requests


def test_ctrl_c_in_the_judge_stops_cleanly_unmeasured_and_its_replay_and_resume_follow(server, tmp_path):
    """Every step was saved as "completed" before the judge began: a Ctrl-C or a kill in it left a
    'completed' run without its measurement, whose replay then missed the judge's calls (TapeMiss)."""
    import os
    import signal

    asked = []

    def interrupting(messages):
        if "personification" in messages[-1]["content"]:
            asked.append(1)
            if len(asked) == 3:
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the judge is being asked
        return judge_policy(messages)

    server.policy = interrupting
    stopped = _itcmas(server, tmp_path / "r")
    meta = json.loads((tmp_path / "r" / "config.json").read_text())
    assert stopped.status == meta["status"] == "interrupted in the end-of-run measurement"
    assert meta["steps_done"] == 3 and not (tmp_path / "r" / "tables" / "itcmas_judge.parquet").exists()
    replayed, same = replay_unfigured(tmp_path / "r", tmp_path / "rr", progress=False)
    assert same and replayed.status.startswith("stopped where the recording did, in its end-of-run measurement")
    resumed = _itcmas(server, tmp_path / "r")  # --resume: the steps from the tape, the judge finished
    assert resumed.status == "completed" and len(pd.read_parquet(tmp_path / "r" / "tables" / "itcmas_judge.parquet")) == 6


def test_a_judge_that_answers_nothing_until_the_breaker_trips_replays_to_the_same_stop(server, tmp_path):
    """The empty reply to the repair that tripped the breaker had no row; its replay, falling back on the
    taped empty reply, had one: one row more, and one failure more."""
    server.faults = lambda n, messages: "empty" if "personification" in messages[-1]["content"] or \
        "could not be used" in messages[-1]["content"] else None
    config = RunConfig(scenario="irollan-valley", arch="itcmas", model="rules", steps=2, rng=1, num_retries=0,
                       api_base=server.api_base, routes={"itcmas_judge": JUDGE}, breaker=2, max_concurrency=1)
    stopped = run(config, tmp_path / "r", progress=False, preflight=False)
    assert stopped.status.startswith("stopped by provider outage in the end-of-run measurement")
    replayed, same = replay_unfigured(tmp_path / "r", progress=False)
    assert same and replayed.status == stopped.status
    failures = [json.loads((d / "config.json").read_text())["failures_by_operation"]
                for d in (tmp_path / "r", tmp_path / "r" / "replay")]
    assert failures[0] == failures[1] == {"JudgeTrajectory": 2}


def test_a_failed_embedding_replays_with_the_row_it_recorded(server, tmp_path):
    server.down = True
    config = RunConfig(scenario="school-micro", arch="asvo", model="rules", steps=4, rng=1, num_retries=0,
                       api_base=server.api_base, arch_params={"embedding_model": "openai/fake-embed"})
    recorded = run(config, tmp_path / "r", progress=False, preflight=False)
    calls = pd.read_parquet(tmp_path / "r" / "llm_calls.parquet")
    assert calls[calls["engine"] == "llm"]["status"].tolist() == ["fallback"]  # the embedding, failed
    replayed, same = replay_unfigured(tmp_path / "r", progress=False)
    assert same and replayed.status == recorded.status


def test_a_run_of_ones_own_scenario_is_judged_again_from_another_folder(tmp_path, monkeypatch):
    """As replay reads it: from the run's own copy of the file (it raised "no such scenario file")."""
    from socialsim.agents.itcmas.metrics import main as rejudge
    from socialsim.scenarios.loader import scenario_path

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "valley.yaml").write_bytes(scenario_path("irollan-valley").read_bytes())
    monkeypatch.chdir(tmp_path / "mine")
    run(RunConfig(scenario="valley.yaml", arch="itcmas", model="rules", steps=1, rng=1), tmp_path / "r",
        progress=False, preflight=False)
    monkeypatch.chdir(tmp_path)
    assert rejudge([str(tmp_path / "r")]) == 0
    assert len(pd.read_parquet(tmp_path / "r" / "rejudged" / "rules.parquet")) == 6


def test_a_rejudge_of_what_is_no_itcmas_run_says_so_in_a_sentence(tmp_path, capsys):
    from socialsim.agents.itcmas.metrics import main as rejudge

    assert rejudge([str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nowhere'} does not exist (no such run directory)\n"
    run(RunConfig(scenario="hobbs-cafe", arch="generic", model="rules", steps=1, rng=1), tmp_path / "g",
        progress=False, preflight=False)
    assert rejudge([str(tmp_path / "g")]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path / 'g'} has no ITCMA-S trajectories to judge "
                                       f"({tmp_path / 'g' / 'tables' / 'itcmas_actions.parquet'} is missing; the "
                                       "run's architecture: generic)\n")
    assert not (tmp_path / "g" / "rejudged").exists()
