"""The JSON-schema capability probe (`socialsim models --probe MODEL`): one question with a
schema response format, against the project's OpenAI-compatible test server, tells whether a
model litellm's map does not know can be run with --json-schema on."""

import json

import pytest

from socialsim.cli import main
from socialsim.llm.engines import probe_json_schema
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
