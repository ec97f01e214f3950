"""Replies cut at max_tokens are seen, counted and kept on the tape: the provider's finish_reason
"length" reaches the answer, the ledger and a replay; ITCMA-S counts its cut protentions."""

import logging
import random
import re

import pytest

from socialsim.llm.fake_server import FakeOpenAIServer, always
from socialsim.llm.gateway import CHARS_PER_TOKEN_CAP, Gateway
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


def test_a_reply_cut_at_max_tokens_is_flagged_counted_and_replayed(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="socialsim")
    tape = tmp_path / "tape.jsonl"
    with FakeOpenAIServer(policy=always(LONG), honour_max_tokens=True) as server:
        gateway = Gateway(RouteTable("openai/fake-model"), Tape(tape), api_base=server.api_base, num_retries=0)
        cut, whole = ask(gateway, max_tokens=6), ask(gateway, max_tokens=60)
    assert cut.truncated and cut.value.text == " ".join(LONG.split()[:6])
    assert not whole.truncated and whole.value.text == LONG
    assert [r.truncated for r in gateway.ledger.rows] == [1, 0]
    assert gateway.ledger.by_operation()["truncated"].sum() == 1
    assert sorted(str(r.finish_reason) for r in Tape(tape).records()) == ["length", "stop"]
    said = [r.getMessage() for r in caplog.records if "the reply was cut" in r.getMessage()]
    assert said == ["step 0 agent 1 Foresee: the reply was cut at max_tokens=6 (finish_reason 'length')"]

    replayed = Gateway(RouteTable("openai/fake-model"), Tape(tape), replay=True)
    assert ask(replayed, max_tokens=6).truncated and not ask(replayed, max_tokens=60).truncated
    assert replayed.ledger.live_calls == 0


def test_a_reply_longer_than_max_tokens_allows_is_cut_to_size_counted_and_said(scripted, caplog):
    """A provider that ignores max_tokens: a reply of exactly 8 characters a token is kept whole; each
    longer one is cut to that size, flagged, and counted with the characters cut."""
    limit = CHARS_PER_TOKEN_CAP * 2
    scripted(replies={"What do you expect": ["a" * limit, "b" * (limit + 5), "c" * (limit + 1)]})
    gateway = Gateway(RouteTable("openai/fake-model"))
    answers = [run_sync(gateway.ask(Foresee(2), None, agent_id=1, rng=random.Random(seed))) for seed in range(3)]
    assert [a.value.text for a in answers] == ["a" * limit, "b" * limit, "c" * limit]
    assert [a.truncated for a in answers] == [False, True, True]
    assert (gateway.capped_replies, gateway.capped_chars) == (2, 6)
    assert [r.truncated for r in gateway.ledger.rows] == [0, 1, 1]
    said = [r for r in caplog.records if "characters cut to" in r.getMessage()]
    assert [r.getMessage() for r in said] == [f"step 0 agent 1 Foresee: reply of {n} characters cut to 16 (max_tokens=2)"
                                              for n in (21, 17)]
    # the console shows the first few cut replies of each operation, counted apart from its failures
    assert {(r.operation, r.kind) for r in said} == {("Foresee", "cut replies")}


def protentions_cut(tokens):
    with FakeOpenAIServer(policy=always(LONG), honour_max_tokens=True) as server:
        gateway = Gateway(RouteTable("rules", {"protention": "openai/fake-model"}), api_base=server.api_base,
                          num_retries=0)
        model = SocietyModel("irollan-valley", gateway=gateway, rng=3, protention_tokens=tokens, max_candidates=2)
        model.step()
    calls = model.llm.ledger.frame()
    assert (calls.loc[calls["op"] == "Protention", "engine"] == "llm").all()
    return model.society.truncated_protentions, int(calls.loc[calls["op"] == "Protention"].shape[0])


def test_itcmas_counts_the_protentions_cut_by_protention_tokens(caplog):
    import logging

    caplog.set_level(logging.INFO, logger="socialsim")
    cut, asked = protentions_cut(8)
    assert asked > 0 and cut == asked  # every answer was longer than 8 tokens
    noted = [r for r in caplog.records if "protention for" in r.getMessage()]
    assert len(noted) == cut and {r.levelno for r in noted} == {logging.INFO}  # run.log, not the console
    for r in noted:  # which agent's protention of which action, and how much of it was kept
        assert re.fullmatch(r"itcmas: \w+'s protention for '[^']+' was cut at protention_tokens=8 \(\d+ chars kept\)",
                            r.getMessage()), r.getMessage()
    assert protentions_cut(64) == (0, asked)


def test_a_run_names_its_cut_replies_once_and_keeps_each_in_run_log(tmp_path, capsys, monkeypatch):
    """Cut replies are counted, not shouted: each is an INFO line in run.log (not on the console,
    which shows warnings), and the run ends with one line counting them per operation."""
    import logging

    import pandas as pd

    from socialsim.cli import main

    monkeypatch.setattr(logging.root, "handlers", [])  # let main() set up the console as a user's shell has it
    out = tmp_path / "run"
    with FakeOpenAIServer(policy=always("2 " + LONG), honour_max_tokens=True) as server:
        code = main(["run", "hobbs-cafe", "--arch", "generic", "--model", "openai/fake-model", "--api-base",
                     server.api_base, "--steps", "2", "--out", str(out), "--no-progress"])
    assert code == 0
    calls = pd.read_parquet(out / "llm_calls.parquet")
    per_op = calls.groupby("op")["truncated"].sum()
    per_op = per_op[per_op > 0]
    assert per_op.sum() > 0  # every ChooseAction reply (4 words allowed) was cut
    printed = capsys.readouterr()
    summary = [line for line in printed.out.splitlines() if line.startswith("replies cut at max_tokens")]
    assert summary == [f"replies cut at max_tokens: {per_op.sum()} ("
                       + ", ".join(f"{op} {n}" for op, n in per_op.sort_values(ascending=False).items())
                       + "); each is marked in llm_calls.parquet (truncated) and run.log"]
    assert "cut at max_tokens" not in printed.err  # the console keeps to warnings
    report = (out / "report.md").read_text().splitlines()
    header = next(line for line in report if line.startswith("| module | op |"))
    cells = [line.split(" | ") for line in report if line.startswith("| ") and " | ChooseAction | " in line]
    assert header.endswith("| truncated |") and len(cells) == 1
    assert int(cells[0][-1].rstrip(" |")) == per_op["ChooseAction"]  # the report's usage table counts them too
    from socialsim.dashboards import panels

    frames = panels.frames_from_run(out)
    shown = panels.usage_table(frames, frames.steps_done).set_index("op")["truncated"]
    assert shown.to_dict() == calls.groupby("op")["truncated"].sum().to_dict()  # the dashboard's panel too
    assert panels.usage_totals(frames, frames.steps_done)["truncated"] == per_op.sum()
    frames.calls = frames.calls.drop(columns="truncated")  # a run recorded before they were counted
    assert panels.usage_totals(frames, frames.steps_done)["truncated"] == 0
    logged = (out / "run.log").read_text()
    assert logged.count("INFO socialsim.llm") == logged.count("cut at max_tokens=4") == per_op.sum()
