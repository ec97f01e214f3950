"""Each architecture against an adversarial model on the real HTTP path (FakeOpenAIServer through
litellm): answers in the requested format but at its edges (bounds, empty and longest texts, the
first and last option, instructions and control characters in strings), answers out of format,
and provider faults. The run completes, the answers reach the architecture's own code (most are
used, not replaced), every unusable one is a counted fallback, and the run replays exactly. The
same run with every answer's delay reversed (the calls of a phase finish in another order)
records the same frames: results never depend on which concurrent call finishes first."""

import contextlib
import json
import time
import zlib

import pandas as pd
import pytest
from adversary import answer

from socialsim.llm.fake_server import FAULTS, FakeOpenAIServer
from socialsim.metrics.report import without_figures
from socialsim.model.runner import RunConfig, first_difference, replay, run

# litellm's response model warns on the "wrong_type" fault's number as content
pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")

RUNS = {  # steps enough for each architecture to ask all its questions (CRSEC: its 13 kinds by step 5)
    "crsec": ("hobbs-cafe", 8),
    "asvo": ("workplace-meso", 3),
    "itcmas": ("irollan-valley", 3),
}
QUICK_FAULTS = tuple(f for f in FAULTS if f != "hang")
LATENCY = {"model.parquet": ["llm_latency_s"], "llm_calls.parquet": ["latency_s"]}  # no two live runs share it


def delayed(reverse: bool):
    """The adversary, answering each prompt after 0-20 ms (or 20-0 ms: the reverse finishing order)."""
    def policy(messages):
        wait = zlib.crc32(messages[-1]["content"].encode()) % 21
        time.sleep((20 - wait if reverse else wait) / 1000)
        return answer(messages)

    return policy


def frames(run_dir):
    names = ["model.parquet", "agents.parquet", "llm_calls.parquet",
             *(f"tables/{p.name}" for p in sorted((run_dir / "tables").glob("*.parquet")))]
    out = {n: pd.read_parquet(run_dir / n).drop(columns=LATENCY.get(n, [])) for n in names}
    # a provider's error may quote its response (cut to a length), whose id the fake server numbers
    # as requests arrive: compare up to the id
    out["llm_calls.parquet"]["error"] = out["llm_calls.parquet"]["error"].str.replace(r"fake-\d+.*", "fake-N",
                                                                                      regex=True)
    return out


def some_faults(count, messages):
    """One request in eight gets a provider fault, chosen by the prompt so a rerun sees the same."""
    digest = zlib.crc32(json.dumps(messages).encode())
    return QUICK_FAULTS[(digest // 8) % len(QUICK_FAULTS)] if digest % 8 == 0 else None


@pytest.mark.figures
@pytest.mark.parametrize("arch", RUNS)
def test_an_adversarial_model_crashes_nothing_its_answers_are_used_or_counted_and_the_run_replays(
        arch, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    scenario, steps = RUNS[arch]
    results = {}
    for reverse in (False, True):
        # the reversed run's report draws no figures: its frames must equal the first run's, whose
        # report drew them from the same answers
        with (FakeOpenAIServer(policy=delayed(reverse), faults=some_faults) as server,
              without_figures() if reverse else contextlib.nullcontext()):
            config = RunConfig(scenario=scenario, arch=arch, model="openai/fake-model", steps=steps, rng=2,
                               api_base=server.api_base, num_retries=0, breaker=0)
            results[reverse] = run(config, tmp_path / ("reversed" if reverse else "run"), progress=False,
                                   preflight=False)
            injected = sum(server.injected.values())
    result = results[False]
    assert result.status == "completed" and result.steps_done == steps
    assert any((tmp_path / "run" / "figures").glob("*.png"))  # drawn from the adversary's answers
    assert injected > 0

    calls = pd.read_parquet(tmp_path / "run" / "llm_calls.parquet")
    on_model = calls[calls["engine"] == "llm"]
    assert on_model["op"].nunique() >= 4, sorted(set(on_model["op"]))  # ITCMA-S asks four kinds
    used = on_model["status"].isin(["ok", "repaired"])
    assert used.mean() > 0.8  # the edge answers are valid: they reach the architecture, not its fallbacks
    fallbacks = on_model[on_model["status"] == "fallback"]
    assert len(fallbacks) > 0 and fallbacks["error"].fillna("").str.len().gt(0).all()  # each with its reason
    assert result.model.llm.ledger.totals()["fallbacks"] == len(calls[calls["status"] == "fallback"])

    first, reversed_ = frames(tmp_path / "run"), frames(tmp_path / "reversed")
    assert first.keys() == reversed_.keys()
    for name, frame in first.items():
        pd.testing.assert_frame_equal(frame, reversed_[name], obj=name)

    with without_figures():  # nor does the replay's (its frames are compared, not its figures)
        replayed, same = replay(tmp_path / "run", progress=False)
    assert same, first_difference(tmp_path / "run", replayed.run_dir)
    assert replayed.model.llm.ledger.live_calls == 0
