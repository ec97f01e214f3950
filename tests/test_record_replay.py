"""Records that replay: redaction of real secrets only, provider errors on the tape, torn tape
lines, a fixed row order in every table, byte-identical files for identical runs, and a replay
check that names the first difference."""

import json
import logging
import random
import re
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socialsim.llm import redact as redact_module
from socialsim.llm.fake_server import FakeOpenAIServer
from socialsim.llm.gateway import Gateway
from socialsim.llm.ledger import Ledger
from socialsim.llm.operations.generic import CHOOSE_ACTION, ActionContext
from socialsim.llm.redact import redact
from socialsim.llm.routing import RouteTable
from socialsim.llm.tape import Tape, TapeRecord, record_of
from socialsim.metrics.report import without_figures
from socialsim.model.runner import RunConfig, first_difference, recorded_files, replay, run


def replay_unfigured(*args, **kwargs):
    """A replay whose report draws no figures: it is compared by its frames, and its recording drew
    the same figures."""
    with without_figures():
        return replay(*args, **kwargs)

ORDINARY = ["She kept the secret conversation to herself.", "Each made a token contribution to the pot.",
            "The bearer of bad news left.", "Our api key rotation policy is documented.",
            "password reset instructions were mailed", "secret: conversationalists gathered"]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_words_are_not_redacted(text, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key-value")
    assert redact(text) == text


def test_real_secrets_are_redacted(monkeypatch):
    env_secret = "value-from-the-environment-42"
    monkeypatch.setenv("MY_SERVICE_TOKEN", env_secret)
    shaped = "sk-" + "Ab3" * 8  # built at run time: no key-shaped literal in the repository
    google = "AIza" + "x1" * 18
    text = f"use {env_secret} or {shaped} or {google}; header Authorization: Bearer {'z9' * 12}"
    out = redact(text)
    for secret in (env_secret, shaped, google, "z9" * 12):
        assert secret not in out
    assert out.count("[REDACTED]") == 4 and out.startswith("use [REDACTED] or")


# every provider key shape, each built at run time (no key-shaped literal in the repository)
KEY_SHAPED = ["sk-" + "Ab3" * 6, "sk-ant-" + "Ab3" * 6, "sk-proj-" + "Ab3" * 6, "AIza" + "x1" * 16,
              "gsk_" + "Ab3" * 7, "hf_" + "Ab3" * 7, "xoxa_" + "Ab3" * 7, "xoxb_" + "Ab3" * 7, "xoxp_" + "Ab3" * 7,
              "ghp_" + "Ab3" * 7, "gho_" + "Ab3" * 7, "github_pat_" + "Ab3" * 7]


@pytest.mark.parametrize("key", KEY_SHAPED, ids=lambda key: key[:5])
@pytest.mark.parametrize("where", ["{}", "key {} here", "(key:{})", "first line\n{}\nlast line"])
def test_every_provider_key_shape_is_redacted_wherever_it_is_written(key, where, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert redact(where.format(key)) == where.format("[REDACTED]")


@pytest.mark.parametrize("header", ["Bearer", "bearer", "BEARER", "BeArEr"])
def test_an_authorization_headers_value_is_redacted_in_any_case(header):
    value = "z9" * 12
    assert redact(f"Authorization: {header} {value}, then") == f"Authorization: {header} [REDACTED], then"


def _redact_searching_everything(text: str) -> str:
    """``redact`` as it was before each key shape was looked for by its words first: every pattern run on
    every text (about ten times slower on a scenario file)."""
    for value in redact_module.secret_values():
        text = text.replace(value, redact_module.REDACTED)
        if redact_module._KEY_VALUE.fullmatch(value):
            text = redact_module._without_pieces(text, value)
    for _, pattern in [*redact_module._KEY_SHAPES, redact_module._BEARER]:
        text = pattern.sub(redact_module.REDACTED, text)
    for pattern in redact_module._URL_CREDENTIALS:
        text = pattern.sub(lambda m: m[1] + redact_module.REDACTED, text)
    return redact_module._without_credential_parameters(text)


_PIECES = ["sk-", "ant-", "proj-", "AIza", "gsk_", "hf_", "xoxb_", "ghp_", "gho_", "github_pat_", "Bearer ",
           "bEARER ", "https://", "user:", "pw@", "@", "?api_key=", "&token=", "#key=", ";sig=", "=", "Ab3x", "9",
           " ", "-", "_", ".", "\n", "é"]


@given(st.lists(st.sampled_from(_PIECES) | st.text(max_size=3), max_size=40).map("".join))
@settings(max_examples=300, deadline=None)
def test_looking_for_a_key_shapes_words_first_finds_every_key_searching_everything_would(text):
    assert redact(text) == _redact_searching_everything(text)


def test_a_piece_of_an_environment_key_is_redacted_as_the_key(monkeypatch):
    """A provider or a model may cut the key (an echo of its first half) or wrap it over lines:
    each piece of 12 characters or more is the key's, and would show most of it."""
    key = "Xq7" + "LeakPiece0123456789abcdefGHIJKLMNOPqrstuvwx"  # no provider's shape: only the environment knows it
    monkeypatch.setenv("OPENAI_API_KEY", key)
    assert redact(f"the key begins {key[:20]}, then") == "the key begins [REDACTED], then"
    assert redact(f"part one {key[:14]}\npart two {key[14:]}") == "part one [REDACTED]\npart two [REDACTED]"
    wrapped = "\n".join(key[i:i + 16] for i in range(0, len(key), 16))  # a middle line, neither end
    assert redact(wrapped) == "\n".join(["[REDACTED]"] * 3)
    assert redact(f"{key[5:30]}") == "[REDACTED]"
    assert redact(f"ends with {key[-8:]}") == f"ends with {key[-8:]}"  # too short a piece to be the key's


def test_no_piece_of_a_path_or_of_a_short_value_is_redacted(monkeypatch):
    """Only whole values of a file path, a placeholder or words are the secret: their pieces are
    ordinary text (a run's folder under the same home, the word 'placeholder', a name)."""
    monkeypatch.setenv("SERVICE_KEY_FILE", "/home/someone/.config/service/private-key.pem")
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    monkeypatch.setenv("LAB_SERVER_TOKEN", "our-lab-shared-server-7")  # its words are prose: only the whole is its
    text = "runs under /home/someone/.config/service/runs, a placeholder-like word on our-lab-shared-server-6"
    assert redact(text) == text


def test_a_piece_is_twelve_characters_of_a_key_of_twenty_or_more_in_key_characters(monkeypatch):
    """A value of 20 key characters (base64's + and =, a JWT's dots) has pieces; one of 19 has none;
    a piece of 12 at a window's start is the key's, one of 11 is not, and one of 14 is wherever it starts."""
    key = "Ab3_Xy.9=Qw+7Zk-0Lm5"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    assert redact(f"x {key[:14]} y") == "x [REDACTED] y"
    monkeypatch.setenv("OPENAI_API_KEY", key[:19])
    assert redact(f"x {key[:14]} y") == f"x {key[:14]} y"
    long_key = "Xq7" + "LeakPiece0123456789abcdefGHIJKLMNOPqrstuvwx"
    monkeypatch.setenv("OPENAI_API_KEY", long_key)
    assert redact(f"x {long_key[:12]} y") == "x [REDACTED] y"
    assert redact(f"x {long_key[:11]} y") == f"x {long_key[:11]} y"
    for start in range(len(long_key) - 13):
        assert redact(f"x {long_key[start:start + 14]} y") == "x [REDACTED] y", start


def test_a_piece_of_lowercase_words_is_kept_and_one_with_digits_is_not(monkeypatch):
    """A piece of words (with _ . -) is prose that a key made of words happens to hold; digits make it the key's."""
    monkeypatch.setenv("OPENAI_API_KEY", "snake_case.words_9Value-abcdef0123456789ghij")
    assert redact("see snake_case.words here") == "see snake_case.words here"
    assert redact("see abcdef0123456789 here") == "see [REDACTED] here"


@pytest.mark.parametrize("value", ["lm-studio-local", "any_key_at_all"])
def test_a_key_of_words_joined_by_hyphens_or_underscores_is_said_too(value, monkeypatch, caplog):
    monkeypatch.setattr(redact_module, "_told_plain", set())
    monkeypatch.setenv("LOCAL_SERVER_API_KEY", value)
    with caplog.at_level("WARNING", logger="socialsim.llm"):
        assert redact(f"the model wrote {value}") == "the model wrote [REDACTED]"
    assert any(r.getMessage().startswith("LOCAL_SERVER_API_KEY holds ordinary words") for r in caplog.records)


def test_a_key_with_a_digit_is_not_said_to_be_words(monkeypatch, caplog):
    monkeypatch.setattr(redact_module, "_told_plain", set())
    monkeypatch.setenv("LOCAL_SERVER_API_KEY", "key1-local-server")  # a digit: not words
    with caplog.at_level("WARNING", logger="socialsim.llm"):
        assert redact("it wrote key1-local-server") == "it wrote [REDACTED]"
    assert not any("holds ordinary words" in r.getMessage() for r in caplog.records)


def test_a_key_of_ordinary_words_is_redacted_and_said_once_to_change_the_record(monkeypatch, caplog):
    """A local server's placeholder key ("anything") is a secret like any: the model's "anything"
    became [REDACTED] in the tape without a word; the user is now told once, by the variable's name."""
    monkeypatch.setattr(redact_module, "_told_plain", set())  # said once a process: a test run twice is told again
    monkeypatch.setenv("LOCAL_SERVER_API_KEY", "anything")
    monkeypatch.setenv("OTHER_SERVICE_TOKEN", "Xq7-not-words-0123")
    with caplog.at_level("WARNING", logger="socialsim.llm"):
        assert redact("Nothing to change here.") == "Nothing to change here."
        assert not caplog.records  # said only once a text is changed
        assert redact("Is there anything I can get you?") == "Is there [REDACTED] I can get you?"
        monkeypatch.setenv("UNRELATED", "1")  # the environment looked at again: said once all the same
        redact("anything else")
    told = [r.getMessage() for r in caplog.records if "holds ordinary words" in r.getMessage()]
    assert len(told) == 1 and told[0].startswith("LOCAL_SERVER_API_KEY holds ordinary words, not a key")
    assert "anything" not in told[0]


def test_a_secret_inside_another_is_redacted_after_it_so_no_rest_of_the_longer_shows(monkeypatch):
    """Longest first: the shorter value replaced first would leave the longer's rest ("Xq7L...0123"
    around it) in the text, too short a piece to be redacted as the longer's."""
    monkeypatch.setenv("A_SERVICE_TOKEN", "Xq7LongSecret0123")
    monkeypatch.setenv("B_SERVICE_TOKEN", "ongSecret01")  # inside A's, and after it in reverse alphabetical order
    assert redact("sent Xq7LongSecret0123 and ongSecret01") == "sent [REDACTED] and [REDACTED]"


def test_json_is_redacted_before_its_strings_are_escaped(monkeypatch):
    """config.json and sweep.json: a secret with a quote, a backslash or a non-ASCII letter, in a value,
    a list or a key, is written as [REDACTED] and not as its escaped form."""
    from pathlib import Path

    from socialsim.llm.redact import redacted_json

    secret = 'pla"ce\\hölder-value'
    monkeypatch.setenv("A_SERVICE_TOKEN", secret)
    text = redacted_json({"a": secret, "b": [f"x {secret}"], secret: Path(f"/d/{secret}"), "n": 1.5}, indent=2)
    assert json.loads(text) == {"a": "[REDACTED]", "b": ["x [REDACTED]"], "[REDACTED]": "/d/[REDACTED]", "n": 1.5}


def test_a_secret_set_or_changed_after_a_first_redaction_is_still_redacted(monkeypatch):
    redact("warm the cache")
    monkeypatch.setenv("LATE_SERVICE_TOKEN", "set-after-the-first-call-1")
    assert redact("x set-after-the-first-call-1 y") == "x [REDACTED] y"
    monkeypatch.setenv("LATE_SERVICE_TOKEN", "changed-later-on-value-2")
    assert redact("set-after-the-first-call-1 / changed-later-on-value-2") == (
        "set-after-the-first-call-1 / [REDACTED]")  # the old value is no secret any more
    monkeypatch.delenv("LATE_SERVICE_TOKEN")
    assert redact("changed-later-on-value-2") == "changed-later-on-value-2"


def test_an_environment_without_cpythons_dict_is_watched_through_its_mapping(monkeypatch):
    """Off CPython (no ``os.environ._data``) a change is still seen, by reading the variables."""
    import types

    import socialsim.llm.redact as redact_module

    environ = {"PATH": "/bin", "OTHER_SERVICE_TOKEN": "first-value-of-the-token"}
    monkeypatch.setattr(redact_module, "os", types.SimpleNamespace(environ=environ))
    monkeypatch.setattr(redact_module, "_known", (None, []))
    assert redact("a first-value-of-the-token b") == "a [REDACTED] b"
    environ["OTHER_SERVICE_TOKEN"] = "second-value-of-the-token"
    assert redact("first-value-of-the-token second-value-of-the-token") == "first-value-of-the-token [REDACTED]"
    monkeypatch.undo()
    assert redact("second-value-of-the-token") == "second-value-of-the-token"  # CPython's environment again


def chatty(messages):
    """Options get a wordy, unusable first answer with ordinary 'secret'/'token' words, then a
    number when asked again (a repair round-trip whose key holds the first answer)."""
    text = messages[-1]["content"]
    digest = zlib.crc32(text.encode())
    options = re.findall(r"^(\d+)\. ", text, re.M)
    if "could not be used" in text:
        return "1"
    if options:
        return "I kept the secret conversation and made a token contribution of effort."
    return f"Our secret conversation was a token contribution ({digest % 97})."


def provider_run(tmp_path, name, server, steps=2):
    config = RunConfig(scenario="hobbs-cafe", arch="generic", model="openai/fake-model", steps=steps, rng=5,
                       api_base=server.api_base, breaker=0)  # every provider error falls back
    return run(config, tmp_path / name, progress=False, preflight=False)


def test_a_run_whose_text_has_ordinary_secret_words_replays(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=chatty) as server:
        recorded = provider_run(tmp_path, "run", server)
    assert recorded.model.llm.ledger.frame()["status"].eq("repaired").any()
    assert "secret conversation" in (tmp_path / "run" / "tape.jsonl").read_text()
    result, same = replay_unfigured(tmp_path / "run", progress=False)
    assert same and result.model.llm.ledger.live_calls == 0


def test_a_run_that_met_provider_errors_replays_with_the_same_fallbacks(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=chatty, fail_first=30) as server:  # > 10 agents x 3 attempts
        recorded = provider_run(tmp_path, "run", server)
    fallbacks = recorded.model.llm.ledger.totals()["fallbacks"]
    assert fallbacks > 0
    errors = [json.loads(line)["error"] for line in (tmp_path / "run" / "tape.jsonl").read_text().splitlines()]
    assert sum(e is not None for e in errors) == fallbacks
    result, same = replay_unfigured(tmp_path / "run", progress=False)
    assert same, first_difference(tmp_path / "run", result.run_dir)
    assert result.model.llm.ledger.live_calls == 0
    assert result.model.llm.ledger.totals()["fallbacks"] == fallbacks


def record(key, raw="1", error=None):
    return TapeRecord(key, "m", "op", 1, 0, [{"role": "user", "content": "q"}], {}, raw, 1, 1, 0.0, 0.0, error)


def test_an_answer_replaces_a_recorded_error_but_not_the_reverse(tmp_path):
    tape = Tape(tmp_path / "tape.jsonl")
    tape.add(record("k", raw="", error="InternalServerError: down"))
    tape.add(record("k", raw="2"))
    tape.add(record("k", raw="", error="InternalServerError: down again"))
    assert tape.get("k").raw == "2" and tape.get("k").error is None
    assert Tape(tmp_path / "tape.jsonl").get("k").raw == "2"  # the same after reloading


def test_an_answer_replaces_an_empty_reply_which_replaces_an_error_and_none_goes_back(tmp_path):
    """What an outage of empty replies left is replaced by the answer a resumed run got; a later
    failure or empty reply never replaces what is held, and the tape reloads the same."""
    tape = Tape(tmp_path / "tape.jsonl")
    tape.add(record("k", raw="", error="InternalServerError: down"))
    tape.add(record("k", raw="  "))
    assert tape.get("k").raw == "  " and tape.get("k").error is None
    tape.add(record("k", raw="", error="InternalServerError: down again"))
    assert tape.get("k").raw == "  "
    tape.add(record("k", raw="3"))
    tape.add(record("k", raw=""))
    assert tape.get("k").raw == "3"
    assert Tape(tmp_path / "tape.jsonl").get("k").raw == "3"


def test_a_sweeps_run_asks_again_a_call_another_run_got_an_empty_reply_to(tmp_path):
    """A sweep's shared tape hands another run's answer over, not its empty reply (nor its failure)."""
    import asyncio

    from socialsim.batch.sweeps import SharedTape

    tape = SharedTape(tmp_path / "tape.jsonl")
    tape.add(record("empty", raw=""))
    tape.add(record("answered", raw="2"))

    async def handed(key):
        async with tape.claim(key) as got:
            return got

    assert asyncio.run(handed("empty")) is None  # this run asks it
    assert asyncio.run(handed("answered")).raw == "2"


def test_a_sweeps_run_keeps_on_its_own_tape_the_reply_it_took_whatever_others_record_later(tmp_path):
    """Run 1 took an empty reply; run 2, not handed it, asked and got an answer. Run 1's next miss
    re-read the shared file, and its own tape was written with run 2's answer, which a replay of
    run 1 would then read instead of what run 1 did."""
    import asyncio

    from socialsim.batch.sweeps import SharedTape

    run1, run2 = SharedTape(tmp_path / "tape.jsonl"), SharedTape(tmp_path / "tape.jsonl")
    run1.add(record("K", raw=""))

    async def handed(tape, key):
        async with tape.claim(key) as got:
            return got

    assert run2.get("K").raw == "" and asyncio.run(handed(run2, "K")) is None
    run2.add(record("K", raw="2"))
    assert run1.get("other") is None  # a miss: run 1 re-reads what the others appended
    run1.write_used(tmp_path / "run1.jsonl")
    run2.write_used(tmp_path / "run2.jsonl")
    assert Tape(tmp_path / "run1.jsonl").get("K").raw == "" and Tape(tmp_path / "run2.jsonl").get("K").raw == "2"


def tape_of_a_then(tmp_path, text):
    """A tape holding record "a", then ``text`` written after it as a killed or odd writer left it."""
    path = tmp_path / "tape.jsonl"
    Tape(path).add(record("a"))
    with path.open("a") as fh:
        fh.write(text)
    return path


def test_torn_last_line_is_skipped_with_a_warning(tmp_path, caplog):
    path = tape_of_a_then(tmp_path, '{"key": "b", "mod')
    with caplog.at_level(logging.WARNING, logger="socialsim.llm"):
        tape = Tape(path)
    assert "a" in tape and "b" not in tape
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: line 2 is torn (a run killed while writing it); skipped"]


def test_a_last_line_torn_inside_a_character_is_a_torn_line(tmp_path, caplog):
    """A kill mid-"é" (two bytes in UTF-8) left half a character: the whole tape failed to decode, so
    --resume and replay both stopped with a codec error."""
    path = tmp_path / "tape.jsonl"
    Tape(path).add(record("a", raw="café"))
    with path.open("ab") as fh:
        fh.write(b'{"key": "b", "raw": "caf' + "é".encode()[:1])
    with caplog.at_level(logging.WARNING, logger="socialsim.llm"):
        resumed = Tape(path)
    assert "a" in resumed and "b" not in resumed and "line 2 is torn" in caplog.text
    resumed.add(record("c", raw="thé"))  # the resumed run's next record: the torn tail cut off first
    assert sorted(r.key for r in Tape(path).records()) == ["a", "c"] and Tape(path).get("c").raw == "thé"
    broken = tmp_path / "broken.jsonl"  # half a character mid-file is no torn tail: named
    lines = path.read_bytes().split(b"\n")
    broken.write_bytes(b"\n".join([lines[0], b'{"key": "x", "raw": "caf\xc3"}', *lines[1:]]))
    with pytest.raises(ValueError, match="line 2 is not a tape record"):
        Tape(broken)


def test_a_blank_line_in_the_tape_is_passed_over_and_the_records_after_it_kept(tmp_path):
    path = tape_of_a_then(tmp_path, "\n   \n")
    Tape(path).add(record("b"))
    assert "a" in Tape(path) and "b" in Tape(path) and len(Tape(path)) == 2


def test_a_tape_is_read_back_as_utf8_whatever_the_machines_locale(tmp_path, monkeypatch):
    """Answers are stored as written (not escaped): a Latin-1 locale must not garble them on replay."""
    path = tmp_path / "tape.jsonl"
    Tape(path).add(record("k", raw="Café au lait — 漢字 🙂"))
    assert "Café" in path.read_text(encoding="utf-8")  # stored unescaped
    monkeypatch.setattr("io.text_encoding", lambda encoding, stacklevel=2: encoding or "latin-1")
    assert Tape(path).get("k").raw == "Café au lait — 漢字 🙂"


@pytest.mark.parametrize("torn", ['{"key": "b", "mod', "x" * 150_000])  # a short tail, and one past a read chunk
def test_a_torn_tape_that_a_resumed_run_appends_to_still_loads(tmp_path, torn):
    """The torn tail a killed writer left is cut off before the next record: kept, it would sit
    mid-file, where a torn line is an error, and the tape would never load again."""
    path = tape_of_a_then(tmp_path, torn)
    resumed = Tape(path)
    resumed.add(record("c"))
    resumed.add(record("d"))
    assert sorted(r.key for r in Tape(path).records()) == ["a", "c", "d"]
    assert path.read_text().count("\n") == 3 and torn not in path.read_text()


def _append_many(path, writer, lines):
    from socialsim.llm.tape import append_line

    for j in range(lines):
        append_line(path, json.dumps({"writer": writer, "line": j, "pad": "x" * 30_000}))


def test_processes_sharing_a_tape_never_cut_or_lose_each_others_lines(tmp_path):
    """Sweep replicates share one tape: each append (cutting a torn tail first) holds a lock."""
    import multiprocessing

    path = tmp_path / "tape.jsonl"
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_append_many, args=(path, w, 100)) for w in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted((r["writer"], r["line"]) for r in lines) == [(w, j) for w in range(4) for j in range(100)]


def test_a_tape_torn_in_its_first_line_starts_over(tmp_path):
    path = tmp_path / "tape.jsonl"
    path.write_text('{"key": "a", "mo')
    Tape(path).add(record("b"))
    assert [r.key for r in Tape(path).records()] == ["b"] and path.read_text().count("\n") == 1


def test_a_tape_in_a_folder_not_made_yet_makes_it(tmp_path):
    path = tmp_path / "sweep" / "shared" / "tape.jsonl"
    Tape(path).add(record("k"))
    assert Tape(path).get("k").raw == "1"


def test_a_key_is_answered_once_and_written_once(tmp_path):
    path = tmp_path / "tape.jsonl"
    tape = Tape(path)
    tape.add(record("k", raw="first"))
    tape.add(record("k", raw="second"))
    tape.add(record("e", raw="", error="down"))
    tape.add(record("e", raw="", error="down again"))
    assert tape.get("k").raw == "first" and tape.get("e").error == "down"
    assert len(path.read_text().splitlines()) == 2


def test_a_calls_key_is_the_same_whatever_the_order_of_its_fields_and_across_versions():
    """Tapes recorded by earlier versions replay: the key of a known call is pinned."""
    from socialsim.llm.tape import call_key

    messages = [{"role": "user", "content": "Un café, s'il vous plaît"}]
    key = call_key("openai/gpt-4o-mini", messages, {"temperature": 0.7, "max_tokens": 40, "seed": 12345})
    assert key == "41dc8788ba316b559e4c87f11293d03a"
    assert call_key("openai/gpt-4o-mini", [{"content": messages[0]["content"], "role": "user"}],
                    {"seed": 12345, "max_tokens": 40, "temperature": 0.7}) == key


def test_what_a_tape_stores_of_the_messages_is_redacted_and_keeps_their_roles(tmp_path, monkeypatch):
    secret = "value-from-the-environment-42"
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    path = tmp_path / "tape.jsonl"
    call = record("k", raw=f"my token is {secret}", error=f"401 for {secret}")
    call.messages = [{"role": "system", "content": f"use {secret}"}, {"role": "user"}]
    Tape(path).add(call)
    stored = json.loads(path.read_text())
    assert secret not in path.read_text()
    assert stored["messages"] == [{"role": "system", "content": "use [REDACTED]"}, {"role": "user", "content": ""}]
    assert stored["raw"] == "my token is [REDACTED]" and stored["error"] == "401 for [REDACTED]"


def test_torn_line_in_mid_file_is_an_error_naming_the_line(tmp_path):
    path = tape_of_a_then(tmp_path, '{"key": "b", "mod\n' + json.dumps(vars(record("c"))) + "\n")
    with pytest.raises(ValueError, match=r"tape.jsonl: line 2 is not a tape record .*only the last line may be torn"):
        Tape(path)


@pytest.mark.parametrize(("edit", "named"), [({"raw": None}, "raw is NoneType"), ({"step": "one"}, "step is str"),
                                             ({"messages": "q"}, "messages is str"),
                                             ({"raw": None, "step": "one"}, "step is str, raw is NoneType")])
def test_a_tape_line_with_a_field_of_another_type_is_an_error_naming_it(tmp_path, edit, named):
    """A hand edit (a null ``raw``, a text ``step``) loaded, then stopped a replay or a resume with a
    traceback; now the line is named, like any line that is no record, with each wrong field's type."""
    path = tmp_path / "tape.jsonl"
    path.write_text("".join(json.dumps({**vars(record(k)), **(edit if k == "b" else {})}) + "\n" for k in "abc"))
    with pytest.raises(ValueError, match=rf"tape.jsonl: line 2 is not a tape record \({named}\);"):
        Tape(path)


def test_a_whole_last_line_that_is_no_record_is_an_error_not_a_torn_line(tmp_path):
    """A killed writer's last line lacks its newline. A whole one that is no record (a hand edit) was
    skipped as torn: the resumed run appended after it, and its tape never loaded again."""
    path = tape_of_a_then(tmp_path, json.dumps({"key": "b", "model": "m"}) + "\n")
    with pytest.raises(ValueError, match=r"tape.jsonl: line 2 is not a tape record .*missing"):
        Tape(path)


WRONG_TYPES = {"key": 1, "model": None, "op": 2, "agent": "1", "step": 1.5, "messages": {}, "params": [], "raw": 0,
               "prompt_tokens": "1", "completion_tokens": None, "latency_s": "0", "cost_usd": None, "error": 0,
               "finish_reason": 1}


@pytest.mark.parametrize("field", WRONG_TYPES)
def test_every_field_of_a_tape_line_is_type_checked(field):
    value = WRONG_TYPES[field]
    with pytest.raises(TypeError, match=rf"^{field} is {type(value).__name__}$"):
        record_of(json.dumps({**vars(record("a")), field: value}))


def test_a_tape_line_may_have_no_agent_error_or_finish_reason_and_whole_number_latency_and_cost():
    """The model's own calls have no agent, old tapes no finish reason; a hand-written 0 is an int."""
    line = {**vars(record("a")), "agent": None, "latency_s": 1, "cost_usd": 0}
    assert record_of(json.dumps(line)).agent is None
    assert record_of(json.dumps({**line, "error": "e", "finish_reason": "length"})).finish_reason == "length"


def test_a_bad_line_is_named_by_its_line_in_the_file_blank_lines_counted(tmp_path):
    """Leading blank lines count (the message is for someone opening the file), and blank space
    after a whole bad line makes it no torn last line."""
    path = tmp_path / "tape.jsonl"
    good = json.dumps(vars(record("a")))
    path.write_text(f"\n{good}\n{{}}\n{good}\n")
    with pytest.raises(ValueError, match=r"tape.jsonl: line 3 is not a tape record"):
        Tape(path)
    path.write_text(f"{good}\n{{}}\n   ")
    with pytest.raises(ValueError, match=r"tape.jsonl: line 2 is not a tape record"):
        Tape(path)


class Agent:
    def __init__(self, uid):
        self.unique_id = uid


def test_llm_calls_come_in_step_agent_call_order_whatever_finishes_first(scripted):
    actions = ["go to the street outside", "chat with Tom Gomez", "smoke a cigarette"]

    def frame_with(slow_agent):
        scripted(default="zzz", delay=lambda m: 0.05 if f"agent {slow_agent}" in m[1]["content"] else 0.0)
        g = Gateway(RouteTable("openai/fake-model"), ledger=Ledger())
        agents = [Agent(i) for i in range(5)]

        async def decide(agent):  # unusable answers: two calls (first answer, repair) per agent
            context = ActionContext(f"agent {agent.unique_id}", "A poet.", "A cafe.", "Here.", list(actions))
            return (await g.ask(CHOOSE_ACTION, context, agent_id=agent.unique_id, rng=agent.phase_rng)).status

        g.run_phase(agents, decide, random.Random(1))
        return g.ledger.frame()

    first, last = frame_with(0), frame_with(4)
    assert list(first["agent"]) == [0, 1, 2, 3, 4] and list(first["call"]) == [0] * 5
    assert first.drop(columns="latency_s").equals(last.drop(columns="latency_s"))


def test_two_identical_runs_write_byte_identical_parquet_files(tmp_path):
    config = RunConfig(scenario="hobbs-cafe", arch="generic", model="rules", steps=3, rng=9)
    a = run(config, tmp_path / "a", progress=False)
    b = run(config, tmp_path / "b", progress=False)
    files = sorted(p.relative_to(a.run_dir) for p in a.run_dir.rglob("*.parquet"))
    assert len(files) >= 5 and files == sorted(p.relative_to(b.run_dir) for p in b.run_dir.rglob("*.parquet"))
    for name in files:
        assert (a.run_dir / name).read_bytes() == (b.run_dir / name).read_bytes(), name


def test_replay_check_names_the_first_difference_in_any_table(tmp_path):
    import pandas as pd

    config = RunConfig(scenario="hobbs-cafe", arch="generic", model="rules", steps=2, rng=9)
    a = run(config, tmp_path / "a", progress=False).run_dir
    b = run(config, tmp_path / "b", progress=False).run_dir
    assert first_difference(a, b) is None
    assert "llm_calls.parquet" in recorded_files(a) and any(f.startswith("tables/") for f in recorded_files(a))
    table = sorted((b / "tables").glob("*.parquet"))[0]
    df = pd.read_parquet(table)
    df = pd.concat([df, df.tail(1)]) if len(df) else df.assign(extra=[])
    df.to_parquet(table, index=False)
    assert first_difference(a, b).startswith(f"tables/{table.name}: ")
    calls = pd.read_parquet(b / "llm_calls.parquet")
    calls.loc[3, "op"] = "changed"
    calls.to_parquet(b / "llm_calls.parquet", index=False)
    assert first_difference(a, b) == f"llm_calls.parquet: row 3, column 'op': {calls.loc[3, 'op']!r}".replace(
        "'changed'", repr(pd.read_parquet(a / 'llm_calls.parquet').loc[3, 'op'])) + " vs 'changed'"


def test_replay_check_tells_a_missing_value_from_a_present_one_in_a_nullable_column(tmp_path):
    """With the ledger's agent a nullable integer, a missing agent beside agent 3 compared as
    missing, not as different, and ``all()`` skipped it: two different ledgers were equal."""
    import pandas as pd

    for name, agents in (("a", [None, 1]), ("b", [3, 1]), ("c", [None, 1])):
        (tmp_path / name).mkdir()
        pd.DataFrame({"step": [1, 1], "agent": pd.array(agents, dtype="Int64")}).to_parquet(
            tmp_path / name / "llm_calls.parquet", index=False)
    assert first_difference(tmp_path / "a", tmp_path / "b").startswith("llm_calls.parquet: row 0, column 'agent': <NA> vs ")
    assert first_difference(tmp_path / "a", tmp_path / "c") is None
    old = pd.DataFrame({"step": [1, 1], "agent": [float("nan"), 1.0]})  # a recording from before: floats
    old.to_parquet(tmp_path / "c" / "llm_calls.parquet", index=False)
    assert first_difference(tmp_path / "c", tmp_path / "a") is None
    assert first_difference(tmp_path / "c", tmp_path / "b").startswith("llm_calls.parquet: row 0, column 'agent': ")


def test_config_json_exists_from_the_first_step(tmp_path, monkeypatch):
    """A run killed after model construction can be resumed: config.json is written before step 1."""
    from socialsim.model import runner

    def boom(self):
        assert (tmp_path / "r" / "config.json").is_file()
        assert json.loads((tmp_path / "r" / "config.json").read_text())["status"] == "running"
        raise KeyboardInterrupt

    monkeypatch.setattr(runner.SocietyModel, "step", boom)
    result = run(RunConfig(arch="generic", model="rules", steps=2), tmp_path / "r", progress=False)
    assert result.status == "interrupted" and result.steps_done == 0
    assert json.loads((tmp_path / "r" / "config.json").read_text())["status"] == "interrupted"


def test_a_run_replays_and_resumes_from_its_own_copy_of_the_scenario(tmp_path, monkeypatch, capsys, caplog):
    """A run of one's own scenario file used to fail to replay from another folder ("no such
    scenario file"), and to replay *another* run ("identical: NO") once the file was edited."""
    from socialsim.cli import main
    from socialsim.scenarios.loader import scenario_path

    here, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    here.mkdir(), elsewhere.mkdir()
    original = scenario_path("hobbs-cafe").read_text()
    assert "step_minutes: 10\n" in original
    (here / "my-cafe.yaml").write_text(original)
    monkeypatch.chdir(here)
    args = ["--model", "rules", "--no-progress"]
    assert main(["run", "my-cafe.yaml", "--steps", "2", "--out", "r", *args]) == 0
    assert (here / "r" / "scenario.yaml").read_text() == original
    (here / "my-cafe.yaml").write_text(original.replace("step_minutes: 10\n", "step_minutes: 15\n"))
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert main(["replay", str(here / "r"), "--no-progress"]) == 0
    assert "frames identical to the recording: yes" in capsys.readouterr().out
    assert f"using the run's own copy, {here / 'r' / 'scenario.yaml'}" in caplog.text
    # continued from the copy too: two steps more equal four steps of the scenario as it was
    assert main(["run", "--resume", str(here / "r"), "--steps", "4", "--no-progress"]) == 0
    (elsewhere / "as-it-was.yaml").write_text(original)
    assert main(["run", str(elsewhere / "as-it-was.yaml"), "--steps", "4", "--out", "fresh", *args]) == 0
    assert first_difference(here / "r", elsewhere / "fresh") is None
    # a run directory from before copies were kept still replays from the file it names
    (here / "r" / "scenario.yaml").unlink()
    monkeypatch.chdir(here)
    assert main(["replay", "r", "--out", "again", "--no-progress"]) == 1
    assert "frames identical to the recording: NO" in capsys.readouterr().out  # the edited file: another run


def test_a_runs_copy_of_its_scenario_keeps_line_endings_and_no_secret(tmp_path, monkeypatch, caplog):
    from socialsim.scenarios.loader import scenario_path

    key = "sk-" + "Zq7" * 8  # built at run time: no key-shaped literal in the repository
    monkeypatch.setenv("MY_PROVIDER_API_KEY", "a-long-private-value-1234")
    text = scenario_path("hobbs-cafe").read_text().replace("\n", "\r\n", 40)
    text = text.replace("name: hobbs-cafe", f"name: hobbs-cafe  # {key} a-long-private-value-1234", 1)
    assert key in text
    (tmp_path / "cafe.yaml").write_bytes(text.encode())
    result = run(RunConfig(scenario=str(tmp_path / "cafe.yaml"), model="rules", steps=1), tmp_path / "r", progress=False)
    kept = (result.run_dir / "scenario.yaml").read_bytes()
    assert key.encode() not in kept and b"a-long-private-value-1234" not in kept and b"[REDACTED]" in kept
    assert kept.count(b"\r\n") == 40  # line endings as they were
    (tmp_path / "plain.yaml").write_bytes(scenario_path("hobbs-cafe").read_text().replace("\n", "\r\n").encode())
    plain = run(RunConfig(scenario=str(tmp_path / "plain.yaml"), model="rules", steps=1), tmp_path / "p", progress=False)
    assert (plain.run_dir / "scenario.yaml").read_bytes() == (tmp_path / "plain.yaml").read_bytes()
    with caplog.at_level(logging.WARNING, logger="socialsim"):
        assert replay(plain.run_dir, tmp_path / "p2", progress=False)[1]
    assert "using the run's own copy" not in caplog.text  # the file still holds what the run kept


def test_a_tapes_last_step_is_its_latest_calls_whatever_the_order_written():
    """What a resume and a sweep's retry check against: the last step a recording made calls in."""
    tape = Tape()
    assert tape.last_step() is None
    for key, step in (("a", 2), ("b", 5), ("c", 3)):
        tape.add(TapeRecord(key, "m", "Op", 1, step, [], {}, "x", 1, 1, 0.1, 0.0))
    assert tape.last_step() == 5


@pytest.mark.parametrize(("name", "secret"), [("SNOWFLAKE_JWT", True), ("DB_PASS", True), ("SMTP_PASSWD", True),
                                              ("VERTEX_CREDENTIALS", True), ("SIGNING_KEY_PASSPHRASE", True),
                                              ("X_AUTH", True), ("AUTH_HEADER", True), ("PWD", False),
                                              ("OLDPWD", False), ("GIT_AUTHOR_NAME", False), ("PASSAGE_TITLE", False),
                                              ("GPG_PASSPHRASE", True), ("MYSQL_ROOT_PASSWORD", True),
                                              ("github_token", True), ("db_pass", True), ("CACHE_BYPASS", False)])
def test_an_environment_variable_is_a_secret_by_its_name(monkeypatch, name, secret):
    """A JWT, a database's PASS or a credentials variable was left in texts: only KEY, TOKEN, SECRET and
    PASSWORD were read as naming a secret."""
    value = "value-of-the-variable-" + name.lower()
    monkeypatch.setenv(name, value)
    assert (redact(f"it said {value}.") == "it said [REDACTED].") is secret
