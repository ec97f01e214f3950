"""Fault injection against the real local HTTP server (FakeOpenAIServer) through litellm: 429s,
500s, hangs, empty, wrong-type, choice-less, non-JSON, oversized and instruction-laden answers,
and an outage mid-run. Nothing crashes, every call reaches the tape and the ledger, the faulty
run replays exactly, and a run resumed after an outage equals an uninterrupted one."""

import json
import re
import time
import zlib

import pandas as pd
import pytest

from socialsim.llm.fake_server import FAULTS, FakeOpenAIServer, by_prompt
from socialsim.llm.gateway import CHARS_PER_TOKEN_CAP
from socialsim.metrics.report import without_figures
from socialsim.model.runner import RunConfig, first_difference, replay, run


def replay_unfigured(*args, **kwargs):
    """A replay whose report draws no figures: it is compared by its frames, and its recording drew
    the same figures."""
    with without_figures():
        return replay(*args, **kwargs)

# litellm's own response model warns when a hostile provider sends a number as the content (the
# "wrong_type" fault); the gateway's handling of that answer is what these tests check
pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")



def faulty(count, messages):
    """Three requests in four get a fault, chosen from the prompt so that every run sees the same."""
    digest = zlib.crc32(json.dumps(messages).encode())
    return None if digest % 4 == 0 else FAULTS[(digest // 4) % len(FAULTS)]


def config(server, steps, timeout_s=0.3, breaker=0, **kw):
    """Short timeouts where hangs are injected; a test without hangs passes a generous one, so a
    loaded machine's slow answers are not mistaken for faults. The circuit breaker is off unless a
    test is about it: these runs are meant to fall back through every fault."""
    return RunConfig(arch="generic", model="openai/fake-model", steps=steps, rng=4, api_base=server.api_base,
                     timeout_s=timeout_s, num_retries=0, breaker=breaker, **kw)


def frames(run_dir):
    names = ["model.parquet", "agents.parquet", *(f"tables/{p.name}" for p in sorted((run_dir / "tables").glob("*")))]
    return {n: pd.read_parquet(run_dir / n).drop(columns=["llm_latency_s"], errors="ignore") for n in names}


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")


def test_a_hundred_bad_answers_crash_nothing_lose_nothing_and_replay(tmp_path):
    with FakeOpenAIServer(policy=by_prompt, faults=faulty, hang_s=0.6) as server:
        result = run(config(server, steps=16), tmp_path / "run", progress=False, preflight=False)
        injected = dict(server.injected)
    assert result.status == "completed" and result.steps_done == 16
    assert sum(injected.values()) >= 100 and all(injected[f] > 0 for f in FAULTS), injected

    ledger = result.model.llm.ledger
    calls = pd.read_parquet(tmp_path / "run" / "llm_calls.parquet")
    tape = [json.loads(line) for line in (tmp_path / "run" / "tape.jsonl").read_text().splitlines()]
    errors = [r for r in tape if r["error"] is not None]
    # every call that reached the server is on the tape: answered ones in the ledger's live
    # count, failed ones as the provider-error fallbacks of the ledger
    assert len(tape) - len(errors) == ledger.live_calls == calls["live_calls"].sum()
    assert len(errors) == calls["error"].fillna("").str.startswith("provider error").sum() > 0
    assert len(calls) == len(ledger.rows)
    # replies are capped to what max_tokens allows; the excess is counted
    assert result.model.llm.capped_replies > 0
    assert all(len(r["raw"]) <= CHARS_PER_TOKEN_CAP * r["params"]["max_tokens"] for r in tape)
    # the instruction-laden answer was never used as an answer
    assert not calls["status"].isin(["ok", "repaired"]).sum() == len(calls)
    # config.json and usage.csv say the same as the ledger (keys and columns as docs/outputs.md names them)
    meta = json.loads((tmp_path / "run" / "config.json").read_text())
    assert meta["usage"] == ledger.totals() and meta["failures_by_operation"] == dict(ledger.failures)
    assert meta["capped_replies"] == {"replies": result.model.llm.capped_replies,
                                      "characters_cut": result.model.llm.capped_chars}
    usage = pd.read_csv(tmp_path / "run" / "usage.csv")
    assert list(usage.columns) == list(ledger.by_operation().columns) and len(usage) == len(ledger.by_operation())

    replayed, same = replay_unfigured(tmp_path / "run", progress=False)
    assert same, first_difference(tmp_path / "run", replayed.run_dir)
    assert replayed.model.llm.ledger.live_calls == 0


def test_an_outage_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path):
    with FakeOpenAIServer(policy=by_prompt) as server:
        clean = run(config(server, steps=3, timeout_s=10.0), tmp_path / "clean", progress=False, preflight=False)
        clean_fallbacks = clean.model.llm.ledger.totals()["fallbacks"]  # answers the policy cannot give

    def outage_after(n):
        def plan(count, messages):
            if count >= n:
                server2.down = True
            return None
        return plan

    with FakeOpenAIServer(policy=by_prompt) as server2:
        server2.faults = outage_after(15)
        hit = run(config(server2, steps=3, timeout_s=10.0), tmp_path / "run", progress=False, preflight=False)
        assert hit.status == "completed" and hit.model.llm.ledger.totals()["fallbacks"] > clean_fallbacks
        server2.down, server2.faults = False, None
        resumed = run(config(server2, steps=3, timeout_s=10.0), tmp_path / "run", progress=False, preflight=False)
    assert resumed.model.llm.ledger.totals()["fallbacks"] == clean_fallbacks
    assert resumed.model.llm.ledger.live_calls > 0  # the failed calls were made again ...
    assert resumed.model.llm.ledger.live_calls < clean.model.llm.ledger.live_calls  # ... the answered ones were not
    got, want = frames(tmp_path / "run"), frames(tmp_path / "clean")
    assert list(got) == list(want)
    for name in want:
        pd.testing.assert_frame_equal(got[name], want[name], obj=name)


def test_an_outage_trips_the_breaker_the_run_stops_saved_and_resumes_to_the_uninterrupted_frames(tmp_path):
    with FakeOpenAIServer(policy=by_prompt) as server:
        clean = run(config(server, steps=3, timeout_s=10.0), tmp_path / "clean", progress=False, preflight=False)

    with FakeOpenAIServer(policy=by_prompt) as server2:
        def outage_after(count, messages):
            if count >= 15:
                server2.down = True
            return None

        server2.faults = outage_after
        hit = run(config(server2, steps=3, timeout_s=10.0, breaker=5), tmp_path / "run", progress=False,
                  preflight=False)
        asked_in_outage = len(server2.requests) - 14
        assert re.match(r"stopped by provider outage: (\d+) calls in a row", hit.status) and hit.steps_done < 3
        assert int(re.findall(r"\d+", hit.status)[0]) >= 5
        assert asked_in_outage < 5 + 16  # the breaker, plus at most the calls already in flight
        saved = json.loads((tmp_path / "run" / "config.json").read_text())
        assert saved["status"] == hit.status and saved["config"]["breaker"] == 5
        server2.down, server2.faults = False, None
        resumed = run(config(server2, steps=3, timeout_s=10.0, breaker=5), tmp_path / "run", progress=False,
                      preflight=False)
    assert resumed.status == "completed"
    got, want = frames(tmp_path / "run"), frames(tmp_path / "clean")
    assert list(got) == list(want)
    for name in want:
        pd.testing.assert_frame_equal(got[name], want[name], obj=name)
    assert clean.status == "completed"


def test_an_outage_of_empty_replies_resumes_to_the_uninterrupted_frames(tmp_path):
    """A provider that answers nothing, call after call, trips the breaker as one that fails does.
    Its empty replies are on the tape; a resumed run used them again, each then repaired, so its
    frames were not an uninterrupted run's. It now asks them again, as it asks a failed call."""
    with FakeOpenAIServer(policy=by_prompt) as server:
        clean = run(config(server, steps=3, timeout_s=10.0), tmp_path / "clean", progress=False, preflight=False)

    with FakeOpenAIServer(policy=by_prompt) as server2:
        server2.faults = lambda count, messages: "empty" if count >= 15 else None
        hit = run(config(server2, steps=3, timeout_s=10.0, breaker=5), tmp_path / "run", progress=False,
                  preflight=False)
        assert hit.status.startswith("stopped by provider outage") and "answered nothing" in hit.status
        taped = [json.loads(line) for line in (tmp_path / "run" / "tape.jsonl").read_text().splitlines()]
        assert any(r["raw"] == "" and r["error"] is None for r in taped)
        server2.faults = None
        resumed = run(config(server2, steps=3, timeout_s=10.0, breaker=5), tmp_path / "run", progress=False,
                      preflight=False)
    assert resumed.status == "completed"
    assert resumed.model.llm.ledger.totals()["fallbacks"] == clean.model.llm.ledger.totals()["fallbacks"]
    got, want = frames(tmp_path / "run"), frames(tmp_path / "clean")
    assert list(got) == list(want)
    for name in want:
        pd.testing.assert_frame_equal(got[name], want[name], obj=name)
    replayed, same = replay_unfigured(tmp_path / "run", progress=False)  # the tape's answers, not its empty replies
    assert same, first_difference(tmp_path / "run", replayed.run_dir)


# --- the fake server itself: what the tests above rely on it to send ---------------------------------

def post(server, body=None, connection=None, timeout=10):
    """One chat request to ``server`` (on ``connection`` when given): its status, headers and body."""
    import http.client

    conn = connection or http.client.HTTPConnection("127.0.0.1", int(server.api_base.split(":")[2].split("/")[0]),
                                                    timeout=timeout)
    data = b"" if body is None else json.dumps(body).encode()
    conn.request("POST", "/v1/chat/completions", body=data, headers={"X-Test": "yes"} if body is None else
                 {"Content-Type": "application/json", "X-Test": "yes"})
    reply = conn.getresponse()
    return reply.status, dict(reply.getheaders()), reply.read()


def asking(content, **kw):
    return {"model": "m", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": content}],
            **kw}


def test_the_fake_server_answers_its_policy_counts_words_as_tokens_and_keeps_each_request():
    import http.client

    from socialsim.llm.fake_server import always

    with FakeOpenAIServer() as server, FakeOpenAIServer() as other:  # each on a free port of its own
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", server.api_base) and other.api_base != server.api_base
        assert server.max_in_flight == 0
        conn = http.client.HTTPConnection("127.0.0.1", int(server.api_base.split(":")[2].split("/")[0]), timeout=10)
        status, headers, data = post(server, asking("pick one of two"), connection=conn)
        assert status == 200 and headers["Content-Type"] == "application/json"
        assert int(headers["Content-Length"]) == len(data)
        assert json.loads(data) == {
            "id": "fake-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "1"}}],
            "usage": {"prompt_tokens": 6, "completion_tokens": 1, "total_tokens": 7}}
        status, _, data = post(server, connection=conn)  # no body: no messages, no model
        assert status == 200 and json.loads(data)["id"] == "fake-2" and json.loads(data)["model"] == "fake"
        assert json.loads(data)["usage"] == {"prompt_tokens": 0, "completion_tokens": 1, "total_tokens": 1}
        assert server.requests == [asking("pick one of two"), {}]
        assert server.headers[0]["x-test"] == "yes" and server.headers[0]["content-type"] == "application/json"
        assert server.connections == 1 and server.in_flight == 0 and server.max_in_flight == 1  # kept alive
        post(server, asking("x"))  # on a connection of its own
        assert server.connections == 2
    with FakeOpenAIServer(policy=always("two words")) as server:
        reply = json.loads(post(server, asking("x"))[2])
        assert reply["choices"][0]["message"]["content"] == "two words" and reply["usage"]["completion_tokens"] == 2
    with FakeOpenAIServer(policy=lambda messages: messages[-1]["content"]) as server:  # given the messages
        assert json.loads(post(server, asking("an echo"))[2])["choices"][0]["message"]["content"] == "an echo"


def test_the_fake_server_sends_each_fault_its_plan_names_and_counts_it():
    from socialsim.llm.fake_server import INSTRUCTIONS

    plan = ["429", "500", "empty", "wrong_type", "no_choices", "not_json", "oversized", "instructions", None]
    seen = []
    with FakeOpenAIServer(faults=lambda n, messages: seen.append(messages) or plan[n - 1]) as server:
        replies = [post(server, asking("say 1")) for _ in plan]
        assert seen == [asking("say 1")["messages"]] * len(plan)
        assert [status for status, _, _ in replies] == [429, 500] + [200] * 7
        for _, _, data in replies[:2]:
            assert json.loads(data) == {"error": {"message": "fake fault", "type": "server_error"}}
        contents = [json.loads(data)["choices"][0]["message"]["content"] for _, _, data in replies[2:4]]
        assert contents == ["", 12345]
        assert json.loads(replies[4][2]) == {"id": "fake-5", "object": "chat.completion", "created": 0,
                                             "model": "m", "choices": []}
        assert replies[5][2] == b"<html>502 bad gateway</html>"
        oversized = json.loads(replies[6][2])
        assert oversized["choices"][0]["message"]["content"] == "1 " + "word " * 40000
        assert oversized["usage"]["completion_tokens"] == 40001
        assert json.loads(replies[7][2])["choices"][0]["message"]["content"] == INSTRUCTIONS
        assert json.loads(replies[8][2])["choices"][0]["message"]["content"] == "1"
        assert server.injected == {**dict.fromkeys(FAULTS, 1), "hang": 0}


def test_the_fake_servers_hang_or_delay_outlasts_a_clients_timeout():
    with FakeOpenAIServer(delay_s=60) as server:  # every reply, without a hold
        with pytest.raises(TimeoutError):
            post(server, asking("x"), timeout=2)
    with FakeOpenAIServer(faults=lambda n, messages: "hang" if n == 1 else None, hang_s=60) as server:
        with pytest.raises(TimeoutError):
            post(server, asking("x"), timeout=2)
        assert server.in_flight == 1 and server.injected["hang"] == 1  # still asleep on the first request
        assert post(server, asking("x"))[0] == 200


def test_the_fake_server_fails_its_first_requests_and_every_one_while_down():
    with FakeOpenAIServer(fail_first=2) as server:
        assert [post(server, asking("x"))[0] for _ in range(3)] == [500, 500, 200]
        server.down = True
        assert post(server, asking("x"))[0] == 500
        server.down = False
        assert post(server, asking("x"))[0] == 200
        assert server.injected["500"] == 3


def test_the_fake_server_may_refuse_a_response_format_and_cut_a_reply_at_max_tokens():
    from socialsim.llm.fake_server import always

    with FakeOpenAIServer() as server:
        assert post(server, asking("x", response_format={"type": "json_object"}))[0] == 200  # by default
        server.refuse_response_format = True
        status, _, data = post(server, asking("x", response_format={"type": "json_object"}))
        assert status == 400 and json.loads(data)["error"] == {
            "message": "response_format is not supported by this model", "type": "invalid_request_error"}
        assert post(server, asking("x"))[0] == 200
    with FakeOpenAIServer(policy=always("a b c d e"), honour_max_tokens=True,
                          faults=lambda n, messages: "instructions" if n == 4 else None) as server:
        cut = json.loads(post(server, asking("x", max_tokens=3))[2])
        assert cut["choices"][0] == {"index": 0, "finish_reason": "length",
                                     "message": {"role": "assistant", "content": "a b c"}}
        assert cut["usage"]["completion_tokens"] == 3
        for body in (asking("x", max_tokens=5), asking("x")):  # within the limit, or none
            whole = json.loads(post(server, body)[2])["choices"][0]
            assert (whole["finish_reason"], whole["message"]["content"]) == ("stop", "a b c d e")
        injected = json.loads(post(server, asking("x", max_tokens=3))[2])["choices"][0]  # a fault is sent whole
        assert injected["finish_reason"] == "stop" and len(injected["message"]["content"].split()) > 3
    with FakeOpenAIServer(policy=always("a b c d e")) as server:
        assert json.loads(post(server, asking("x", max_tokens=3))[2])["choices"][0]["message"]["content"] == "a b c d e"


def test_the_fake_server_holds_replies_until_enough_requests_are_in_flight():
    from concurrent.futures import ThreadPoolExecutor

    with FakeOpenAIServer(delay_s=60, hold_until=2) as server:  # held past the clients' timeout unless gathered
        with ThreadPoolExecutor(2) as pool:
            statuses = list(pool.map(lambda _: post(server, asking("x"), timeout=30)[0], range(2)))
        assert statuses == [200, 200] and server.max_in_flight == 2
        # a handler counts its request out just after sending the reply: the client may read it first
        deadline = time.monotonic() + 30
        while server.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.in_flight == 0
    with FakeOpenAIServer(delay_s=0.1, hold_until=2) as server:  # never gathered: held ``delay_s`` at most
        assert post(server, asking("x"))[0] == 200 and server.max_in_flight == 1


def test_by_prompt_answers_one_of_the_prompts_numbered_options_or_a_line_from_its_hash():
    listed = "Choose:\n1. sit\n2. stand\n3. leave\n"
    assert by_prompt([{"content": "ignored"}, {"content": listed}]) == str(zlib.crc32(listed.encode()) % 3 + 1)
    assert by_prompt([{"content": "hello 1. there"}]) == f"Nice to see you ({zlib.crc32(b'hello 1. there') % 97})."
