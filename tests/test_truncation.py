"""Replies cut at max_tokens are seen, counted and kept on the tape: the provider's finish_reason
"length" reaches the answer, the ledger and a replay; ITCMA-S counts its cut protentions."""

import random

import pytest

from socialsim.llm.fake_server import FakeOpenAIServer, always
from socialsim.llm.gateway import Gateway
from socialsim.llm.loop import run_sync
from socialsim.llm.operation import Operation
from socialsim.llm.questions import ShortTextQuestion
from socialsim.llm.routing import RouteTable
from socialsim.llm.tape import Tape
from socialsim.model.society import SocietyModel


@pytest.fixture(autouse=True)
def _placeholder_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder")  # the local server checks nothing


LONG = "I expect to walk to the square and meet the baker who will tell me about the harvest festival tonight."


class Foresee(Operation):
    name = "Foresee"

    def __init__(self, max_tokens):
        self.max_tokens = max_tokens

    def question(self, ctx):
        return ShortTextQuestion(max_chars=400)

    def prompt(self, ctx):
        return "What do you expect to happen next?"

    def fallback(self, ctx):
        raise AssertionError("a cut reply is still text")


def ask(gateway, max_tokens):
    return run_sync(gateway.ask(Foresee(max_tokens), None, agent_id=1, rng=random.Random(2)))


def test_a_reply_cut_at_max_tokens_is_flagged_counted_and_replayed(tmp_path):
    tape = tmp_path / "tape.jsonl"
    with FakeOpenAIServer(policy=always(LONG), honour_max_tokens=True) as server:
        gateway = Gateway(RouteTable("openai/fake-model"), Tape(tape), api_base=server.api_base, num_retries=0)
        cut, whole = ask(gateway, max_tokens=6), ask(gateway, max_tokens=60)
    assert cut.truncated and cut.value.text == " ".join(LONG.split()[:6])
    assert not whole.truncated and whole.value.text == LONG
    assert [r.truncated for r in gateway.ledger.rows] == [1, 0]
    assert gateway.ledger.by_operation()["truncated"].sum() == 1
    assert sorted(str(r.finish_reason) for r in Tape(tape).records()) == ["length", "stop"]

    replayed = Gateway(RouteTable("openai/fake-model"), Tape(tape), replay=True)
    assert ask(replayed, max_tokens=6).truncated and not ask(replayed, max_tokens=60).truncated
    assert replayed.ledger.live_calls == 0


def protentions_cut(tokens):
    with FakeOpenAIServer(policy=always(LONG), honour_max_tokens=True) as server:
        gateway = Gateway(RouteTable("rules", {"protention": "openai/fake-model"}), api_base=server.api_base,
                          num_retries=0)
        model = SocietyModel("irollan-valley", gateway=gateway, rng=3, protention_tokens=tokens, max_candidates=2)
        model.step()
    calls = model.llm.ledger.frame()
    assert (calls.loc[calls["op"] == "Protention", "engine"] == "llm").all()
    return model.society.truncated_protentions, int(calls.loc[calls["op"] == "Protention"].shape[0])


def test_itcmas_counts_the_protentions_cut_by_protention_tokens():
    cut, asked = protentions_cut(8)
    assert asked > 0 and cut == asked  # every answer was longer than 8 tokens
    assert protentions_cut(64) == (0, asked)
