"""The JSON-schema capability probe (`socialsim models --probe MODEL`): one question with a
schema response format, against the project's OpenAI-compatible test server, tells whether a
model litellm's map does not know can be run with --json-schema on."""

import json

import pytest

from socialsim.cli import main
from socialsim.llm.engines import SchemaProbe, probe_json_schema
from socialsim.llm.fake_server import FakeOpenAIServer, always


@pytest.fixture
def provider(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer() as server:
        yield server


def test_a_model_that_answers_to_the_schema_is_advised_on(provider):
    provider.policy = always(json.dumps({"colour": "blue", "count": 3}))
    probe = probe_json_schema("openai/custom-model", provider.api_base)
    assert probe.accepted and probe.valid and "--json-schema on" in probe.advice()
    sent = provider.requests[-1]
    assert sent["response_format"]["type"] == "json_schema"
    assert set(sent["response_format"]["json_schema"]["schema"]["properties"]) == {"colour", "count"}


def test_an_answer_outside_the_schema_is_not_trusted(provider):
    provider.policy = always(json.dumps({"colour": "purple", "count": 30}))
    probe = probe_json_schema("openai/custom-model", provider.api_base)
    assert probe.accepted and not probe.valid and "off" in probe.advice()
    provider.policy = always("blue, 3")  # not JSON at all
    assert not probe_json_schema("openai/custom-model", provider.api_base).valid


def test_a_model_that_refuses_the_format_is_advised_off(provider):
    provider.refuse_response_format = True
    probe = probe_json_schema("openai/custom-model", provider.api_base)
    assert not probe.accepted and "refused" in probe.advice() and "response_format" in probe.detail


def test_the_command_prints_the_advice(provider, capsys):
    provider.policy = always(json.dumps({"colour": "blue", "count": 3}))
    assert main(["models", "--probe", "openai/custom-model", "--api-base", provider.api_base]) == 0
    out = capsys.readouterr().out
    assert "openai/custom-model: it answers to a JSON schema" in out and "placeholder-key" not in out
    assert main(["models", "--probe", "no-such-provider-model"]) == 2


def test_an_endpoint_that_cannot_be_reached_is_not_taken_for_a_refusal(provider, capsys):
    """An unreachable endpoint was reported as "it refused the schema: keep --json-schema off"."""
    import socket

    with socket.socket() as free:  # a port nobody listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    nowhere = f"http://127.0.0.1:{port}/v1"
    probe = probe_json_schema("openai/custom-model", nowhere, timeout_s=5)
    assert not probe.reached and "refused" not in probe.advice() and "unknown" in probe.advice()
    assert main(["models", "--probe", "openai/custom-model", "--api-base", nowhere]) == 1
    assert "check the endpoint (--api-base) and the key, then probe again" in capsys.readouterr().out
    provider.fail_first = 10  # a server error is no refusal either
    assert not probe_json_schema("openai/custom-model", provider.api_base).reached
    provider.refuse_response_format, provider.fail_first = True, 0
    assert probe_json_schema("openai/custom-model", provider.api_base).reached  # a 400: a refusal


@pytest.fixture
def stand_in(monkeypatch):
    """litellm's call stood in: ``answer`` is the reply's content (None: no choices), ``raise_`` an
    error to raise instead; every request is kept."""
    from types import SimpleNamespace

    from socialsim.llm.litellm_setup import litellm

    seen = SimpleNamespace(asked=[], answer=None, raise_=None)

    async def acompletion(**request):
        seen.asked.append(request)
        if seen.raise_:
            raise seen.raise_
        choices = [] if seen.answer is None else [SimpleNamespace(message=SimpleNamespace(content=seen.answer))]
        return SimpleNamespace(choices=choices)

    monkeypatch.setattr(litellm, "acompletion", acompletion)
    return seen


def test_the_probe_asks_one_short_question_with_the_schema_and_no_retry(stand_in):
    stand_in.answer = json.dumps({"colour": "blue", "count": 3})
    probe = probe_json_schema("openai/m", "http://here/v1", timeout_s=12)
    schema = {"title": "Probe", "type": "object", "required": ["colour", "count"], "properties": {
        "colour": {"title": "Colour", "type": "string", "pattern": "^(red|green|blue)$"},
        "count": {"title": "Count", "type": "integer", "minimum": 1, "maximum": 9}}}
    assert stand_in.asked == [{
        "model": "openai/m", "max_tokens": 40, "timeout": 12, "num_retries": 0, "api_base": "http://here/v1",
        "messages": [{"role": "user", "content": "Reply with a JSON object: the colour 'blue' and the count 3."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "Probe", "schema": schema}}}]
    assert probe == SchemaProbe("openai/m", True, True, """answer '{"colour": "blue", "count": 3}' matches the schema""")
    stand_in.answer = json.dumps({"colour": "blue", "count": 3}, indent=40)  # quoted to its first 80 characters
    assert probe_json_schema("openai/m").detail == f"answer {stand_in.answer[:80]!r} matches the schema"
    assert "api_base" not in stand_in.asked[-1] and stand_in.asked[-1]["timeout"] == 30.0


@pytest.mark.parametrize("answer,valid", [
    ({"colour": "red", "count": 1}, True), ({"colour": "green", "count": 9}, True),
    ({"colour": "blue", "count": 0}, False), ({"colour": "blue", "count": 10}, False),
    ({"colour": "RED", "count": 3}, False), ({"colour": "purple", "count": 3}, False), ({"count": 3}, False),
    ({"colour": "blue"}, False)])
def test_an_answer_is_checked_against_the_schema_itself(stand_in, answer, valid):
    stand_in.answer = json.dumps(answer)
    probe = probe_json_schema("openai/m")
    assert (probe.model, probe.accepted, probe.valid, probe.reached) == ("openai/m", True, valid, True)


def test_an_answer_that_does_not_match_is_quoted_short(stand_in):
    stand_in.answer = json.dumps({"colour": "purple", "count": 30, "why": "x" * 100})
    probe = probe_json_schema("openai/m")
    quoted = probe.detail.removeprefix(f"answer {stand_in.answer[:80]!r} does not match: ")
    assert quoted != probe.detail and len(quoted) == 120 and "colour" in quoted  # pydantic's message, cut
    for empty in (None, ""):  # no choices, or an empty answer: taken, not matching
        stand_in.answer = empty
        probe = probe_json_schema("openai/m")
        assert (probe.accepted, probe.valid) == (True, False) and probe.detail.startswith("answer '' does not match: ")


def test_a_key_in_the_answer_is_redacted_before_the_answer_is_quoted_short(stand_in):
    """The answer was cut to 80 characters, then redacted: a key across the cut kept its first part,
    too short to have a key's shape; pydantic's own cut of an input in its message split one too."""
    key = "sk-" + "Ab3" * 10  # built at run time: no key-shaped literal in the repository
    for answer in ({"colour": "purple " + " " * 50 + key, "count": 3},  # across the cut of the answer
                   {"why": key + " " * 40, "colour": "blue"}):  # whole in the answer, cut in pydantic's message
        stand_in.answer = json.dumps(answer)
        detail = probe_json_schema("openai/m").detail
        assert "Ab3" not in detail and " does not match: 1 validation error for Probe" in detail
    stand_in.answer = json.dumps({"colour": "blue", "count": 3, "note": " " * 35 + key})  # matches: "note" is ignored
    assert probe_json_schema("openai/m").detail == (
        f"answer {stand_in.answer.replace(key, '[REDACTED]')[:75]!r} matches the schema")  # the marker left out whole


def test_a_refused_request_is_told_from_no_answer(stand_in, monkeypatch):
    from types import SimpleNamespace

    from socialsim.llm.litellm_setup import litellm

    monkeypatch.setenv("PROBE_TEST_API_KEY", "placeholder-probe-secret")
    stand_in.raise_ = litellm.BadRequestError(message="no response_format for placeholder-probe-secret " + "x" * 300,
                                              model="openai/m", llm_provider="openai")
    probe = probe_json_schema("openai/m")
    assert probe == SchemaProbe("openai/m", False, False, ("BadRequestError: litellm.BadRequestError: no "
                                                           "response_format for [REDACTED] " + "x" * 300)[:200])
    stand_in.raise_ = litellm.UnprocessableEntityError(message="no", model="openai/m", llm_provider="openai",
                                                       response=SimpleNamespace(status_code=422, headers={},
                                                                                request=None))
    assert probe_json_schema("openai/m").reached
    stand_in.raise_ = RuntimeError("connection reset")
    assert probe_json_schema("openai/m") == SchemaProbe("openai/m", False, False, "RuntimeError: connection reset",
                                                        reached=False)


def test_the_advice_follows_what_the_probe_showed():
    def advice(accepted, valid, reached=True):
        return SchemaProbe("m", accepted, valid, "", reached).advice()

    assert advice(True, True) == "it answers to a JSON schema: --json-schema on makes every typed answer constrained"
    assert advice(True, False) == ("it took the schema but its answer did not match: keep --json-schema off "
                                   "(answers are repaired)")
    assert advice(False, False) == ("it refused the schema: keep --json-schema off (typed answers rely on the "
                                    "instruction and repair)")
    assert advice(False, False, reached=False) == advice(True, True, reached=False) == (
        "the probe got no answer, so its JSON-schema support is unknown: check the endpoint (--api-base) and the "
        "key, then probe again")
