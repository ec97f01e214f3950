"""A sweep's shared tape: a call another run is making right now is waited for, not paid twice;
a claim left by a run that cannot answer it (failed, killed, too old) is taken over."""

import asyncio
import os
import random
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from socialsim.batch.sweeps import CLAIMS, SharedTape, sweep
from socialsim.llm.fake_server import FakeOpenAIServer
from socialsim.llm.gateway import OUTSIDE_PHASES, Gateway
from socialsim.llm.loop import run_sync
from socialsim.llm.operations.generic import CHOOSE_ACTION, ActionContext
from socialsim.llm.routing import RouteTable
from socialsim.llm.tape import TapeRecord

LONG_AGO = (1_000_000_000, 1_000_000_000)  # a file time of 2001: older than any stale limit
CONTEXT = ActionContext("Carlos Gomez", "A poet.", "A cafe.", "You are in Hobbs Cafe.",
                        ["go outside", "chat with Tom", "smoke a cigarette"], people_here=["Tom"])


def record(key, raw="2", error=None):
    return TapeRecord(key, "openai/fake-model", "ChooseAction", 1, 0, [], {}, raw, 10, 1, 0.1, 0.0, error=error)


def test_two_runs_asking_the_same_call_at_once_make_it_once(tmp_path, monkeypatch):
    """Two gateways on one sweep tape (two runs side by side) ask the same question together:
    the provider answers once; the second run gets that answer from the tape, free."""
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(delay_s=0.3, policy=lambda m: "2") as server:
        gateways = [Gateway(RouteTable("openai/fake-model"), SharedTape(tmp_path / "tape.jsonl"),
                            api_base=server.api_base, num_retries=0) for _ in range(2)]

        async def both():
            return await asyncio.gather(*(g.ask(CHOOSE_ACTION, CONTEXT, agent_id=1, rng=random.Random(7))
                                          for g in gateways))

        answers = run_sync(both())  # litellm's own tasks live on the process's LLM loop, not a throwaway one
    assert len(server.requests) == 1
    assert [a.value.text for a in answers] == ["chat with Tom"] * 2
    assert sorted(g.ledger.totals()["llm_calls"] for g in gateways) == [1, 1]
    assert sorted(sum(r.live_calls for r in g.ledger.rows) for g in gateways) == [0, 1]
    assert not list((tmp_path / CLAIMS).iterdir())  # released


def test_a_claim_released_without_an_answer_lets_the_waiter_make_the_call(tmp_path):
    """The claimer failed (a provider error on the tape, or stopped by its budget): the waiter
    is not handed the failure; it claims the call and makes it itself."""
    first, second = SharedTape(tmp_path / "tape.jsonl"), SharedTape(tmp_path / "tape.jsonl")
    outcome = []

    async def claimer():
        async with first.claim("k") as answered:
            assert answered is None
            await asyncio.sleep(0.2)
            first.add(record("k", raw="", error="APIError: 500"))

    async def waiter():
        await asyncio.sleep(0.05)
        async with second.claim("k") as answered:
            outcome.append((answered, (tmp_path / CLAIMS / "k").exists()))

    async def both():
        await asyncio.gather(claimer(), waiter())

    asyncio.run(both())
    assert outcome == [(None, True)]  # not the error; and the waiter holds the claim now


def test_a_waiter_is_handed_the_answer_the_claimer_recorded(tmp_path):
    first, second = SharedTape(tmp_path / "tape.jsonl"), SharedTape(tmp_path / "tape.jsonl")
    events = []

    async def claimer():
        async with first.claim("k"):
            await asyncio.sleep(0.2)
            events.append("answered")
            first.add(record("k", raw="3"))

    async def waiter():
        await asyncio.sleep(0.05)
        events.append("waiting")
        async with second.claim("k") as answered:
            events.append(answered.raw)

    async def both():
        await asyncio.gather(claimer(), waiter())

    asyncio.run(both())
    assert events == ["waiting", "answered", "3"]  # it waited for the claimer, then read its answer



def test_a_waiter_holding_a_recorded_failure_is_handed_the_answer_made_since(tmp_path):
    """A sweep started again after an outage: both runs side by side load the failure the outage left
    on the tape; the one that waited reads the other's new answer instead of paying the call again
    (measured: 6 calls of a 2x2 CRSEC sweep paid twice on 2 processes)."""
    SharedTape(tmp_path / "tape.jsonl").add(record("k", raw="", error="InternalServerError: fake fault"))
    first, second = SharedTape(tmp_path / "tape.jsonl"), SharedTape(tmp_path / "tape.jsonl")
    events = []

    async def claimer():
        async with first.claim("k") as answered:
            assert answered is None  # the failure is asked again
            await asyncio.sleep(0.2)
            first.add(record("k", raw="3"))

    async def waiter():
        await asyncio.sleep(0.05)
        async with second.claim("k") as answered:
            events.append(answered and answered.raw)

    async def both():
        await asyncio.gather(claimer(), waiter())

    asyncio.run(both())
    assert events == ["3"]
    assert second.get("k").raw == "3"
def test_a_run_keeps_its_own_answer_and_hands_its_run_directory_what_it_took(tmp_path):
    """Two runs answered one call at once: the tape keeps the first, each run its own; a run that
    took another's answer writes that one to its run directory's tape."""
    from socialsim.llm.tape import Tape

    path = tmp_path / "tape.jsonl"
    first, second = SharedTape(path), SharedTape(path)
    first.add(record("k", raw="1"))
    assert second.get("another") is None  # its miss reads the first's answer while its own call is in flight
    second.add(record("k", raw="2"))
    assert second.get("k").raw == "2" and SharedTape(path).get("k").raw == "1"
    later = SharedTape(path)
    later.get("k")
    later.write_used(tmp_path / "run" / "tape.jsonl")
    assert Tape(tmp_path / "run" / "tape.jsonl").get("k").raw == "1"


def test_a_claim_whose_process_is_gone_or_too_old_is_taken_over(tmp_path):
    tape = SharedTape(tmp_path / "tape.jsonl")
    (tmp_path / CLAIMS).mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    (tmp_path / CLAIMS / "killed").write_text(f"{socket.gethostname()} {dead}\n")
    elsewhere = tmp_path / CLAIMS / "old"
    elsewhere.write_text("another-host 1\n")
    os.utime(elsewhere, LONG_AGO)
    (tmp_path / CLAIMS / "alive").write_text(f"another-host {os.getpid()}\n")

    async def claim(key, stale_after_s=600.0):
        async with tape.claim(key, stale_after_s) as answered:
            return answered

    assert asyncio.run(asyncio.wait_for(claim("killed"), 5)) is None
    assert asyncio.run(asyncio.wait_for(claim("old"), 5)) is None
    with pytest.raises(TimeoutError):  # a live claim on another host is waited for
        asyncio.run(asyncio.wait_for(claim("alive"), 0.5))
    assert asyncio.run(asyncio.wait_for(claim("alive", stale_after_s=0.0), 5)) is None  # until it is too old


def test_of_two_processes_taking_over_one_stale_claim_the_slower_leaves_the_other_s_fresh_claim(tmp_path):
    """Both judged the claim stale; the first removed it and claimed the call; the second, unlinking by
    name, removed that fresh claim, and a third run made the call again."""
    from socialsim.batch.sweeps import _identity, _take, _take_over

    (tmp_path / CLAIMS).mkdir()
    claim = tmp_path / CLAIMS / "key"
    claim.write_text("another-host 1\n")
    os.utime(claim, LONG_AGO)
    judged = _identity(claim)  # the slower process judges it stale ...
    _take_over(claim, _identity(claim))  # ... the faster takes it over and claims the call itself
    _take(claim)
    fresh = claim.read_text()
    _take_over(claim, judged)  # the slower one's takeover, late
    assert claim.read_text() == fresh == f"{socket.gethostname()} {os.getpid()}\n"
    _take_over(claim, _identity(claim))  # the claim judged is the one there: removed
    assert not claim.exists() and list((tmp_path / CLAIMS).iterdir()) == []  # nothing set aside is left


def test_runs_side_by_side_pay_once_for_the_calls_they_share(tmp_path, monkeypatch):
    """One seed, two grid points on two workers: both start at once and ask the same first calls
    (temptation does not change them); each is made once, and the results equal one worker's."""
    pytest.importorskip("distributed")
    import distributed

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    cluster = distributed.LocalCluster  # --cluster local, its workers threads of this process (a test's speed)
    monkeypatch.setattr(distributed, "LocalCluster", lambda **kw: cluster(
        **{k: v for k, v in kw.items() if k not in ("host", "processes")}, processes=False))
    with FakeOpenAIServer(delay_s=0.05, policy=lambda m: "1") as server:
        spec = {"name": "shared", "seeds": [1], "steps": 1, "api_base": server.api_base,
                "parameters": {"scenario": "hobbs-cafe", "arch": "crsec", "model": "openai/fake-model",
                               "temptation": [0.1, 0.9]}}
        apart = sweep(spec, tmp_path / "one", progress=False, preflight=False, figures=False)
        alone = len(server.requests)
        together = sweep({**spec, "processes": 2}, tmp_path / "two", cluster="local", progress=False,
                         preflight=False, figures=False)
        assert len(server.requests) - alone == alone  # not twice as many
    assert together.runs["live_calls"].sum() == apart.runs["live_calls"].sum() == alone
    assert together.runs["llm_calls"].tolist() == apart.runs["llm_calls"].tolist()
    assert not (tmp_path / "two" / CLAIMS).exists()


def test_two_runs_embedding_the_same_texts_at_once_pay_once(tmp_path, monkeypatch):
    """ASVO's end-of-run embeddings on a sweep's tape: the same texts asked by two runs together
    are embedded once; both get the same vectors."""
    from types import SimpleNamespace

    calls = []

    async def slow(self, model, texts):
        calls.append(list(texts))
        await asyncio.sleep(0.2)
        return SimpleNamespace(data=[{"embedding": [float(len(t)), 1.0]} for t in texts],
                               usage=SimpleNamespace(prompt_tokens=len(texts)))

    monkeypatch.setattr(Gateway, "_aembedding", slow)
    gateways = [Gateway(RouteTable("rules"), SharedTape(tmp_path / "tape.jsonl")) for _ in range(2)]

    async def both():
        return await asyncio.gather(*(g.aembed("openai/text-embedding-3-small", ["a", "bb"], "EmbedMemories", 4)
                                      for g in gateways))

    vectors = asyncio.run(both())
    assert len(calls) == 1 and vectors[0] == vectors[1] == [[1.0, 1.0], [2.0, 1.0]]
    assert sorted(g.ledger.live_calls for g in gateways) == [0, 1]
    for g in gateways:  # the waiter's row is the payer's, free
        (row,) = g.ledger.rows
        assert (row.op, row.agent, row.model, row.status, row.path) == (
            "EmbedMemories", 4, "openai/text-embedding-3-small", "ok", (OUTSIDE_PHASES, 0))


def test_an_answer_recorded_just_before_the_claim_is_taken_is_used(tmp_path, monkeypatch):
    """The other run answered and let go between this run's look at the tape and its claim:
    the claim looks once more, and the call is not made again."""
    first = SharedTape(tmp_path / "tape.jsonl")
    first.add(record("k", raw="3"))
    second = SharedTape(tmp_path / "tape.jsonl")
    looks = []
    real_get = SharedTape.get

    def late(self, key):  # the first look misses: the answer lands just after it
        looks.append(key)
        return None if len(looks) == 1 else real_get(self, key)

    monkeypatch.setattr(SharedTape, "get", late)

    async def claim():
        async with second.claim("k") as answered:
            return answered

    assert asyncio.run(claim()).raw == "3" and len(looks) == 2
    assert not (tmp_path / CLAIMS / "k").exists()


def test_a_second_sweep_command_on_a_folder_in_use_is_refused(tmp_path):
    """Two commands in one folder removed each other's partial runs and renamed over finished ones."""
    from socialsim.model.run_dir import writing

    spec = {"name": "busy", "seeds": [1], "steps": 1, "parameters": {"arch": "generic", "model": "rules"}}
    (tmp_path / "s").mkdir()
    with writing(tmp_path / "s"), pytest.raises(ValueError, match="is being written by another process"):
        sweep(spec, tmp_path / "s", progress=False)
    assert sweep(spec, tmp_path / "s", progress=False).runs["status"].tolist() == ["completed"]  # once it is free


def test_a_long_wait_is_said_and_a_missing_claims_folder_is_made(tmp_path, monkeypatch, caplog):
    import logging

    from socialsim.batch import sweeps

    monkeypatch.setattr(sweeps, "WAIT_NOTE_S", 0.1)
    tape = SharedTape(tmp_path / "tape.jsonl")

    async def claim(key):
        async with tape.claim(key) as answered:
            return answered

    assert asyncio.run(claim("fresh")) is None and (tmp_path / CLAIMS).is_dir()  # made when missing
    (tmp_path / CLAIMS / "held").write_text(f"another-host {os.getpid()}\n")
    with caplog.at_level(logging.WARNING, logger="socialsim"), pytest.raises(TimeoutError):
        asyncio.run(asyncio.wait_for(claim("held"), 0.5))
    assert "for a call another run of this sweep is making (process" in caplog.text and "on another-host" in caplog.text


def test_ctrl_c_lets_go_of_this_processs_claims_and_dead_ones_only(tmp_path):
    from socialsim.batch.sweeps import release_claims

    claims = tmp_path / CLAIMS
    claims.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    (claims / "mine").write_text(f"{socket.gethostname()} {os.getpid()}\n")
    (claims / "dead").write_text(f"{socket.gethostname()} {dead}\n")
    (claims / "elsewhere").write_text(f"another-host {os.getpid()}\n")
    (claims / "alive").write_text(f"{socket.gethostname()} 1\n")  # init: alive, not ours
    release_claims(tmp_path)
    assert sorted(p.name for p in claims.iterdir()) == ["alive", "elsewhere"]


def test_an_empty_claim_left_by_a_killed_process_is_taken_over_and_the_sweep_completes(tmp_path, monkeypatch):
    """A process killed between creating its claim and writing its pid into it (or a full disk)
    left an empty claim: every later sweep of the folder waited for it forever."""
    import json
    import threading

    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    spec = {"name": "empty-claim", "seeds": [1], "steps": 1,
            "parameters": {"scenario": "hobbs-cafe", "arch": "generic", "model": "openai/fake-model"}}
    with FakeOpenAIServer() as server:
        spec["api_base"] = server.api_base
        reference = sweep(spec, tmp_path / "reference", progress=False, preflight=False, figures=False)
        first_key = json.loads((tmp_path / "reference" / "tape.jsonl").read_text().splitlines()[0])["key"]
        empty = tmp_path / "again" / CLAIMS / first_key
        empty.parent.mkdir(parents=True)
        empty.touch()
        os.utime(empty, LONG_AGO)
        result = []  # a thread, so that a sweep waiting forever fails the test instead of hanging it
        worker = threading.Thread(target=lambda: result.append(
            sweep(spec, tmp_path / "again", progress=False, preflight=False, figures=False)), daemon=True)
        worker.start()
        worker.join(timeout=30)
    assert result, "the sweep is still waiting for the empty claim"
    assert result[0].runs["status"].tolist() == reference.runs["status"].tolist() == ["completed"]
    assert not empty.exists()


def test_a_claim_is_never_seen_empty_and_takes_no_hard_links_for_granted(tmp_path, monkeypatch):
    """Written under a name of its own, then linked to its name; where the file system has no hard
    links it is created, then written, as before."""
    from socialsim.batch import sweeps

    tape = SharedTape(tmp_path / "tape.jsonl")
    claims = tmp_path / CLAIMS
    seen = []

    async def claim(key):
        async with tape.claim(key):
            seen.append(sorted(p.name for p in claims.iterdir()))
            seen.append((claims / key).read_text())

    linked, link = [], os.link
    monkeypatch.setattr(sweeps.os, "link", lambda src, dst: (linked.append(Path(src).read_text()), link(src, dst)))
    asyncio.run(claim("linked"))
    assert linked == seen[1:2] == [f"{socket.gethostname()} {os.getpid()}\n"]  # full before it had its name
    assert seen[0] == ["linked"]  # no temporary file left beside it

    def no_hard_links(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(sweeps.os, "link", no_hard_links)
    asyncio.run(claim("created"))
    assert seen[2:] == [["created"], f"{socket.gethostname()} {os.getpid()}\n"]
    assert list(claims.iterdir()) == []


def test_ctrl_c_lets_go_of_an_empty_claim_only_when_it_is_old(tmp_path):
    """An empty claim names no process: it is let go once it is older than any write of a pid takes."""
    from socialsim.batch.sweeps import release_claims

    claims = tmp_path / CLAIMS
    claims.mkdir()
    (claims / "fresh").touch()
    (claims / "old").touch()
    os.utime(claims / "old", LONG_AGO)
    (claims / "unreadable").write_text("garbage\n")
    os.utime(claims / "unreadable", LONG_AGO)
    release_claims(tmp_path)
    assert [p.name for p in claims.iterdir()] == ["fresh"]


def test_ctrl_c_leaves_a_claim_made_afresh_where_a_dead_ones_was(tmp_path, monkeypatch):
    """Between judging a dead process's claim stale and removing it, another run may take the call
    over and claim it afresh: Ctrl-C used to unlink that fresh claim by name, and the call was made twice."""
    from socialsim.batch import sweeps

    claims = tmp_path / CLAIMS
    claims.mkdir()
    (claims / "call").write_text(f"{socket.gethostname()} 999999999\n")
    judge = sweeps._stale

    def judged_then_claimed_afresh(claim, stale_after_s):
        stale = judge(claim, stale_after_s)
        claim.unlink()  # another run takes it over ...
        claim.write_text("another-host 7\n")  # ... and claims the call itself
        return stale

    monkeypatch.setattr(sweeps, "_stale", judged_then_claimed_afresh)
    sweeps.release_claims(tmp_path)
    assert [(p.name, p.read_text()) for p in claims.iterdir()] == [("call", "another-host 7\n")]


def test_others_wait_for_a_claimed_call_as_long_as_all_its_attempts_can_take_twice_and_ten_minutes_at_least(
        tmp_path, scripted, monkeypatch):
    """A claim is stale once every attempt of its call (timeout x (1 + retries)) could have timed out
    twice over, and never before ten minutes: a run waiting on a live call does not repay it."""
    from socialsim.llm.tape import Tape

    waits = []

    class Watched(Tape):
        def claim(self, key, stale_after_s=0.0):
            waits.append(stale_after_s)
            return super().claim(key, stale_after_s)

    scripted(default="2")
    for timeout_s, retries in ((30.0, 1), (120.0, 2)):
        gateway = Gateway(RouteTable("openai/fake-model"), Watched(), timeout_s=timeout_s, num_retries=retries)
        asyncio.run(gateway.ask(CHOOSE_ACTION, CONTEXT, agent_id=1, rng=random.Random(7)))
    assert waits == [600.0, 2 * 120.0 * 3]

    async def vectors(self, model, texts):
        return SimpleNamespace(data=[{"embedding": [1.0]} for _ in texts], usage=None)

    monkeypatch.setattr(Gateway, "_aembedding", vectors)  # an embedding's claim waits as long
    Gateway(RouteTable("rules"), Watched(), timeout_s=120.0, num_retries=2).embed("openai/text-embedding-3-small", ["a"])
    assert waits == [600.0, 720.0, 720.0]
