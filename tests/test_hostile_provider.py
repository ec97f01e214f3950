"""What a provider can do to a run, found by an audit (2026-11-26): a reply holding a Unicode line
separator, a reply echoing the key, an error message cut inside the key, replies without a message
or without text call after call, a model's numbers that overflow, a key pasted into a scenario or
an endpoint, and an error in the simulation itself. None may lose the tape, leak a key or stop a
run without saying how to go on."""

import json
import logging
import re
import subprocess
import sys
import zlib
from pathlib import Path

import adversary
import pandas as pd
import pytest
from adversary import answer

from socialsim.agents.generic import GenerativeAgent
from socialsim.batch.sweeps import SharedTape
from socialsim.llm.fake_server import FakeOpenAIServer
from socialsim.llm.tape import Tape, TapeRecord
from socialsim.metrics.report import without_figures
from socialsim.model.runner import RunConfig, RunFailed, replay, run


def replay_unfigured(*args, **kwargs):
    """A replay whose report draws no figures: it is compared by its frames, and its recording drew
    the same figures."""
    with without_figures():
        return replay(*args, **kwargs)

pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
KEY = "sk-" + "AuditSecret7" * 2  # built at run time: no key-shaped literal in the repository
SEPARATORS = "one\u2028two\u0085three\u2029four\x1cfive"  # str.splitlines() splits at each of these


def everything_in(run_dir: Path) -> str:
    """Every byte of text a run directory holds, Parquet cells included."""
    texts = []
    for path in sorted(run_dir.rglob("*")):
        if path.suffix == ".parquet":
            texts.append(pd.read_parquet(path).to_json(force_ascii=False))
        elif path.is_file() and path.suffix != ".png":
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(texts)


def itcmas_run(tmp_path, name, server, steps=2):
    config = RunConfig(scenario="irollan-valley", arch="itcmas", model="openai/fake-model", steps=steps, rng=3,
                       api_base=server.api_base, num_retries=0, breaker=0)
    return run(config, tmp_path / name, progress=False, preflight=False)


def test_a_tape_whose_replies_hold_line_separators_reads_back_whole(tmp_path):
    tape = Tape(tmp_path / "tape.jsonl")
    for n in range(3):
        tape.add(TapeRecord(f"k{n}", "m", "op", 1, 0, [{"role": "user", "content": SEPARATORS}], {}, SEPARATORS,
                            1, 1, 0.0, 0.0))
    assert len(Tape(tmp_path / "tape.jsonl")) == 3
    assert Tape(tmp_path / "tape.jsonl").get("k2").raw == SEPARATORS
    assert len(SharedTape(tmp_path / "tape.jsonl")) == 3


def test_a_run_whose_model_writes_line_separators_replays_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    monkeypatch.setattr(adversary, "NASTY_TEXTS", (SEPARATORS,))
    with FakeOpenAIServer(policy=answer) as server:
        recorded = itcmas_run(tmp_path, "run", server)
    assert recorded.status == "completed"
    assert "\u2028" in (tmp_path / "run" / "tape.jsonl").read_text(encoding="utf-8")
    result, same = replay_unfigured(tmp_path / "run", progress=False)
    assert same and result.model.llm.ledger.live_calls == 0


def test_a_key_the_model_echoes_reaches_no_file_and_the_run_still_replays(tmp_path, monkeypatch):
    """The reply is redacted before the run reads it: the frames, tables and report hold what the
    tape holds, so nothing shows the key and the replay asks the same calls."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setattr(adversary, "NASTY_TEXTS", (f"my key is {KEY}, keep it", "fine"))
    with FakeOpenAIServer(policy=answer) as server:
        recorded = itcmas_run(tmp_path, "run", server)
        echoed = sum(KEY in json.dumps(r["messages"]) for r in server.requests)
    assert recorded.status == "completed"
    held = everything_in(tmp_path / "run")
    assert KEY not in held and KEY[:12] not in held
    assert "[REDACTED]" in pd.read_parquet(tmp_path / "run" / "tables" / "itcmas_actions.parquet").to_json()
    assert echoed == 0  # no later prompt sent the key back to the provider either
    result, same = replay(tmp_path / "run", progress=False)
    assert same and result.model.llm.ledger.live_calls == 0


def test_an_error_message_cut_to_length_keeps_no_piece_of_a_key(monkeypatch, scripted):
    """Redacted before it is cut: a cut inside the key would leave a prefix no rule recognises."""
    from test_gateway import ask

    from socialsim.llm.gateway import Gateway
    from socialsim.llm.routing import RouteTable

    secret = "AUDITKEY0123456789abcdef0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    for pad in (250, 280, 290):
        scripted(error=ConnectionError("x" * pad + f" Bearer {secret}"))
        gateway = Gateway(RouteTable("openai/fake-model"), breaker=0)
        ask(gateway)
        errors = " ".join(str(r.error) for r in gateway.ledger.rows) + " ".join(
            r.error or "" for r in gateway.tape.records())
        assert secret[:6] not in errors and "x" * 10 in errors


@pytest.mark.parametrize("fault", ["no_choices", "empty"])
def test_a_provider_that_answers_nothing_call_after_call_trips_the_breaker(tmp_path, monkeypatch, fault):
    """A reply without a message (a provider error) or without text (kept, and unusable) five
    times in a row is an outage: the run stops, resumable, instead of completing on fallbacks."""
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=lambda m: "1", faults=lambda n, m: fault) as server:
        config = RunConfig(scenario="hobbs-cafe", arch="generic", model="openai/fake-model", steps=3, rng=3,
                           api_base=server.api_base, num_retries=0, breaker=5)
        result = run(config, tmp_path / "run", progress=False, preflight=False)
    # (a phase's calls are in flight together: more than five may have failed when the run stops)
    assert re.match(r"stopped by provider outage: \d+ calls in a row to openai/fake-model failed", result.status)
    assert result.steps_done == 0 and json.loads((tmp_path / "run" / "config.json").read_text())["status"] == \
        result.status


def test_a_provider_whose_replies_are_mostly_usable_is_not_cut_off_by_a_few_empty_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    every_third = lambda n, m: "empty" if n % 3 == 0 else None  # noqa: E731
    with FakeOpenAIServer(policy=lambda m: "1", faults=every_third) as server:
        config = RunConfig(scenario="hobbs-cafe", arch="generic", model="openai/fake-model", steps=2, rng=3,
                           api_base=server.api_base, num_retries=0, breaker=5)
        result = run(config, tmp_path / "run", progress=False, preflight=False)
    assert result.status == "completed"


@pytest.mark.parametrize("weights", [[1e308, 1e308], [float("nan"), 1.0], [float("inf"), 1.0],
                                     [-1.0, 2.0], [0.0, 0.0], [1.0]])
def test_synthesis_weights_a_model_cannot_use_give_the_members_equal_say(weights):
    from socialsim.agents.crsec.operations import NormView, weighted_utility

    members = [NormView("a", "injunctive", 20), NormView("b", "injunctive", 60)]
    assert weighted_utility(members, weights) == 40


def test_large_but_usable_synthesis_weights_keep_their_proportions():
    from socialsim.agents.crsec.operations import NormView, weighted_utility

    members = [NormView("a", "injunctive", 20), NormView("b", "injunctive", 60)]
    assert weighted_utility(members, [1e308, 3e308 / 3 * 0.5]) == 40  # 1 : 0.5 of utilities 20, 60
    assert weighted_utility(members, [3.0, 1.0]) == 30
    assert weighted_utility(members, [1e308, 0.0]) == 20  # all on the first: no overflow


def test_a_key_in_a_scenario_is_read_redacted_so_the_run_replays_from_its_copy(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    source = Path(__file__).parents[1] / "socialsim" / "scenarios" / "data" / "hobbs-cafe.yaml"
    text = source.read_text(encoding="utf-8")
    first = re.search(r"description: >-\n( +)", text)  # the first agent's description, a folded block
    scenario = tmp_path / "cafe.yaml"
    scenario.write_text(text.replace(first[0], f"{first[0]}My key is {KEY}. ", 1), encoding="utf-8")
    with FakeOpenAIServer(policy=lambda m: str(zlib.crc32(m[-1]["content"].encode()) % 2 + 1)) as server:
        config = RunConfig(scenario=str(scenario), arch="generic", model="openai/fake-model", steps=2, rng=3,
                           api_base=server.api_base, num_retries=0, breaker=0)
        with caplog.at_level(logging.WARNING, logger="socialsim"):
            run(config, tmp_path / "run", progress=False, preflight=False)
        sent = json.dumps(server.requests)
    assert KEY not in sent and "[REDACTED]" in sent  # never sent to the provider
    assert f"{scenario} holds a secret value" in caplog.text
    assert KEY not in everything_in(tmp_path / "run")
    caplog.clear()
    result, same = replay_unfigured(tmp_path / "run", progress=False)
    assert same and result.model.llm.ledger.live_calls == 0
    assert "is not what" not in caplog.text  # the file was not edited: its copy differs only by the redaction


@pytest.mark.parametrize("endpoint", ["http://bob:hunter2pass@127.0.0.1:9/v1",
                                      "http://hunter2pass@127.0.0.1:9/v1",  # a token as the user name
                                      "http://127.0.0.1:9/v1?api_key=hunter2pass",
                                      "http://127.0.0.1:9/v1#api_key=hunter2pass",  # a fragment: never sent, recorded
                                      "http://127.0.0.1:9/v1;api_key=hunter2pass",  # a path's parameter
                                      "http://127.0.0.1:9/v1?model=x;api_key=hunter2pass",  # ; between query pairs
                                      "http://127.0.0.1:9/v1?credential=hunter2pass"])
def test_an_endpoint_carrying_a_credential_is_refused_without_echoing_it(tmp_path, endpoint, capsys):
    from socialsim.batch.sweepfile import SweepFileError, validate_sweep
    from socialsim.cli import main

    with pytest.raises(ValueError, match="carries a credential") as refused:
        RunConfig(api_base=endpoint)
    assert "hunter2pass" not in str(refused.value)  # the Python API's refusal, as the command line's
    with pytest.raises(SweepFileError, match="api_base: the endpoint carries a credential") as refused:
        validate_sweep({"api_base": endpoint, "parameters": {"arch": "generic", "model": "rules"}})
    assert "hunter2pass" not in str(refused.value)  # the message itself, wherever it is shown (a page too)
    assert main(["run", "hobbs-cafe", "--model", "rules", "--steps", "1", "--api-base", endpoint,
                 "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "carries a credential" in err and "hunter2pass" not in err and not (tmp_path / "r").exists()
    assert RunConfig(api_base="http://127.0.0.1:9/v1?model=x").api_base.endswith("model=x")  # other queries pass


def test_a_sweep_named_with_a_key_is_refused_without_echoing_it(monkeypatch):
    """A sweep's name is its folder's, shown on the console and never redacted: sweeps/sk-... kept the key."""
    from socialsim.batch.sweepfile import SweepFileError, validate_sweep

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with pytest.raises(SweepFileError, match="name: holds a secret value") as refused:
        validate_sweep({"name": KEY, "parameters": {"arch": "generic", "model": "rules"}})
    assert KEY not in str(refused.value)
    assert validate_sweep({"name": "key-token-secret", "parameters": {"arch": "generic", "model": "rules"}})


def test_a_parameter_value_holding_a_key_is_refused_without_echoing_it(tmp_path, monkeypatch, capsys):
    """A key in a text parameter was accepted: sent to the provider in prompts while config.json kept
    [REDACTED], so a replay could not make the same prompts. Refused wherever a parameter is given."""
    from socialsim.agents.params import ParamError
    from socialsim.batch.sweepfile import SweepFileError, validate_sweep
    from socialsim.cli import main

    env_key = "placeholder-env-key-0123"  # no key's shape: a secret only as an environment variable's value
    monkeypatch.setenv("A_SERVICE_TOKEN", env_key)
    for secret in (KEY, env_key):
        assert main(["run", "hobbs-cafe", "--arch", "itcmas", "--model", "rules", "--steps", "1",
                     "--set", f"itcmas.goal=Live well. {secret}", "--out", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert "itcmas.goal=...: holds a secret value" in err and secret not in err
        assert not (tmp_path / "r").exists()
        with pytest.raises(ParamError, match="goal: holds a secret value") as refused:
            run(RunConfig(arch="itcmas", model="rules", steps=1, arch_params={"goal": secret}),
                tmp_path / "r", progress=False, preflight=False)
        assert secret not in str(refused.value) and not (tmp_path / "r").exists()
        with pytest.raises(SweepFileError, match="parameters.goal: holds a secret value") as refused:
            validate_sweep({"parameters": {"arch": "itcmas", "model": "rules",
                                           "goal": ["Rest.", f"Say {secret}."]}})
        assert secret not in str(refused.value)
    # words that only sound like one pass, and are what the run records
    assert main(["run", "hobbs-cafe", "--arch", "itcmas", "--model", "rules", "--steps", "1",
                 "--set", "itcmas.goal=Keep a secret; give a token of thanks.", "--out", str(tmp_path / "ok")]) == 0
    assert json.loads((tmp_path / "ok" / "config.json").read_text())["config"]["arch_params"]["goal"] == \
        "Keep a secret; give a token of thanks."


def test_a_parameter_named_with_a_key_is_refused_without_echoing_it(tmp_path, capsys):
    """A key written as a parameter's name (a paste in the wrong place) is refused as a secret, never as an
    unknown parameter whose message repeats the name."""
    from socialsim.agents.params import ParamError, check_params, parse_assignments
    from socialsim.batch.sweepfile import SweepFileError, validate_sweep
    from socialsim.cli import main

    assert main(["run", "hobbs-cafe", "--arch", "itcmas", "--model", "rules", "--steps", "1",
                 "--set", f"{KEY}=1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "--set [REDACTED]=...: holds a secret value" in err and KEY not in err
    with pytest.raises(ParamError) as refused:  # the message itself, wherever it is shown (a page too)
        parse_assignments("itcmas", [f"itcmas.{KEY}=1"])
    assert str(refused.value).startswith("--set itcmas.[REDACTED]=...: holds a secret value")
    with pytest.raises(ParamError, match=re.escape("itcmas parameter(s) [REDACTED]: holds a secret value")) as refused:
        check_params("itcmas", {KEY: 1, "goal": "Rest."})
    assert KEY not in str(refused.value)
    with pytest.raises(SweepFileError, match=re.escape("parameters.[REDACTED]: holds a secret value")) as refused:
        validate_sweep({"parameters": {"arch": "itcmas", "model": "rules", KEY: [1, 2]}})
    assert KEY not in str(refused.value)


@pytest.mark.parametrize(("endpoint", "named"), [
    ("http://bob:hunter2pass@127.0.0.1:9/v1", "(a password in it)"),
    ("http://hunter2pass@127.0.0.1:9/v1", "(a user name in it)"),
    ("http://127.0.0.1:9/v1?model=x&api_key=hunter2pass", "(its query parameter 'api_key')"),
    ("http://127.0.0.1:9/v1?model=x&token=", "(its query parameter 'token')"),  # a slot for a key, left empty
    ("http://127.0.0.1:9/v1#x=1&api%5Fkey=hunter2pass", "(its fragment parameter 'api_key')"),
    ("http://127.0.0.1:9/v1;access_token=hunter2pass/chat", "(its path parameter 'access_token')"),
    ("http://127.0.0.1:9/v1?user_credentials=hunter2pass", "(its query parameter 'user_credentials')"),
    ("http://127.0.0.1:9/v1/hunter2pass-from-the-env/", "(a secret value in it)"),
    ("http://127.0.0.1:9/v1#hunter2pass-from-the-env", "(a secret value in it)")])
def test_an_endpoints_refusal_says_where_the_credential_is(endpoint, named, monkeypatch):
    from socialsim.llm.redact import no_credential_in_url, redact

    monkeypatch.setenv("A_SERVICE_TOKEN", "hunter2pass-from-the-env")
    assert "hunter2pass" not in redact(endpoint)  # and an address shown anyway (a log line) keeps none of it
    with pytest.raises(ValueError, match=re.escape(f"the endpoint carries a credential {named}; give keys")):
        no_credential_in_url(endpoint)


@pytest.mark.parametrize("name", ["design", "author", "signal", "authority", "keyword", "max_tokens", "Design",
                                  "sigma", "credit"])
def test_a_parameter_whose_name_only_holds_a_credential_word_inside_another_passes(name):
    """``sig`` matched inside ``design`` and ``signal``, ``auth`` inside ``author``: such an endpoint was refused
    and such a parameter's value redacted wherever it was written."""
    from socialsim.llm.redact import no_credential_in_url, redact

    endpoint = f"https://host.example/v1?{name}=x1&model=m"
    assert no_credential_in_url(endpoint) == endpoint
    assert redact(f"see {endpoint}") == f"see {endpoint}"


@pytest.mark.parametrize("name", ["input_cost_per_token", "inputCostPerToken", "cache_read_input_token_cost",
                                  "configurable_clientside_auth_params", "authParams"])
def test_a_price_or_a_list_of_parameters_named_with_a_credential_word_is_no_credential(name):
    """litellm's prices (``input_cost_per_token``) and its list of the parameters a caller may set
    (``configurable_clientside_auth_params``) hold a credential word as a whole part; a deployments file
    writing one (``1e-6`` is a YAML string) was refused as holding a secret."""
    from socialsim.llm.redact import names_a_credential, no_credential_in_url

    assert not names_a_credential(name)
    endpoint = f"https://host.example/v1?{name}=x1&model=m"
    assert no_credential_in_url(endpoint) == endpoint


@pytest.mark.parametrize("name", ["sig", "x_sig", "auth_token", "X-Auth", "XAuth", "apiKey", "APIKey", "apikey",
                                  "API_KEY", "accesstoken", "client.secret", "db-password", "passwd", "pwd", "creds",
                                  "Signature", "key2", "api_keys", "authorization", "oauth", "clientCredentials",
                                  "api%5Fkey", "api%2Dkey", "My-Sig", "apiKeyValue", "secretKeyV2",
                                  "paramsSignature", "costco_api_key"])  # no price; not parameters' names
def test_a_parameter_named_for_a_credential_in_any_of_its_parts_is_refused_and_redacted(name):
    from socialsim.llm.redact import no_credential_in_url, redact

    for endpoint in (f"https://host.example/v1?model=m&{name}=hunter2", f"https://host.example/v1#{name}=hunter2",
                     f"https://host.example/v1;{name}=hunter2"):
        with pytest.raises(ValueError, match="carries a credential"):
            no_credential_in_url(endpoint)
        assert "hunter2" not in redact(endpoint), endpoint


@pytest.mark.parametrize(("text", "redacted"), [
    ("https://h/v1?api_key=hunter2&model=m", "https://h/v1?api_key=[REDACTED]&model=m"),  # to the next parameter
    ("see https://h/v1?api_key=hunter2 for more", "see https://h/v1?api_key=[REDACTED] for more"),  # to a space
    ('{"api_base": "https://h/v1?api_key=hunter2", "n": 1}', '{"api_base": "https://h/v1?api_key=[REDACTED]", "n": 1}'),
    ("https://h/v1?next=https://i/cb?api_key=hunter2", "https://h/v1?next=https://i/cb?api_key=[REDACTED]"),  # inside
    ("https://h/v1?token=&model=m", "https://h/v1?token=&model=m")])  # an empty slot: nothing to redact
def test_a_credential_parameters_value_is_redacted_to_its_end_and_no_further(text, redacted):
    """The value ends at the next parameter, a space or a quote (a log line, a JSON text), and a parameter
    inside another's value (a callback address) is found too."""
    from socialsim.llm.redact import redact

    assert redact(text) == redacted


def test_the_console_redacts_what_it_shows():
    code = ("import logging; from socialsim.cli import main; main(['models']); "
            f"logging.getLogger('socialsim').warning('the provider said: bad key {KEY}')")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"})
    assert "the provider said: bad key [REDACTED]" in shown.stderr and KEY not in shown.stderr


class Failing(GenerativeAgent):
    """An architecture with a bug: its third step raises."""


    def perceive(self):
        super().perceive()
        if self.model.steps == 3:
            raise ValueError("cannot convert float NaN to integer")


def test_an_error_in_the_simulation_is_saved_logged_and_says_how_to_go_on(tmp_path, monkeypatch, capsys):
    """A bug (here: an architecture whose third step raises) is not a bad argument: the steps
    done are saved, run.log holds the traceback, and the command says how to resume (exit 1)."""
    from socialsim.agents import ARCHITECTURES
    from socialsim.cli import main

    monkeypatch.setitem(ARCHITECTURES, "failing", f"{__name__}:Failing")
    with pytest.raises(RunFailed) as failed:
        run(RunConfig(scenario="hobbs-cafe", arch="failing", model="rules", steps=5), tmp_path / "a", progress=False)
    assert failed.value.status == "failed: ValueError: cannot convert float NaN to integer"
    meta = json.loads((tmp_path / "a" / "config.json").read_text())
    assert (meta["status"], meta["steps_done"]) == (failed.value.status, 2)
    assert len(pd.read_parquet(tmp_path / "a" / "model.parquet")) == 2
    log_text = (tmp_path / "a" / "run.log").read_text()
    assert "step 3 failed" in log_text and "Traceback" in log_text
    assert main(["run", "hobbs-cafe", "--arch", "failing", "--model", "rules", "--steps", "5",
                 "--out", str(tmp_path / "b"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "the run failed: failed: ValueError" in err and f"resume with: socialsim run --resume {tmp_path / 'b'}" in err


class LeakingFailure(GenerativeAgent):
    """An architecture whose second step raises an error quoting the key (as a provider's may)."""

    def perceive(self):
        super().perceive()
        if self.model.steps == 2:
            raise ValueError(f"Incorrect API key provided: {KEY}")


def test_the_traceback_of_a_failed_step_holds_no_key(tmp_path, monkeypatch):
    """run.log and the console keep the traceback, whose last line repeats the error: redacted too."""
    import io

    from socialsim.agents import ARCHITECTURES
    from socialsim.llm.redact import RedactingFilter

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setitem(ARCHITECTURES, "leaking", f"{__name__}:LeakingFailure")
    with pytest.raises(RunFailed):
        run(RunConfig(scenario="hobbs-cafe", arch="leaking", model="rules", steps=3), tmp_path / "a", progress=False)
    log_text = (tmp_path / "a" / "run.log").read_text()
    assert "Traceback" in log_text and "ValueError: Incorrect API key provided: [REDACTED]" in log_text
    assert KEY not in log_text
    console = logging.StreamHandler(shown := io.StringIO())
    console.addFilter(RedactingFilter())
    logger = logging.getLogger("socialsim.test_console")
    logger.addHandler(console)
    try:
        try:
            raise ValueError(f"bad key {KEY}")
        except ValueError:
            logger.exception("the sweep's run failed")
    finally:
        logger.removeHandler(console)
    assert "Traceback" in shown.getvalue() and "ValueError: bad key [REDACTED]" in shown.getvalue()
    assert KEY not in shown.getvalue()


@pytest.mark.parametrize("reply", ["3.9", "2.7", "4,5", "1.0"])
def test_a_number_with_a_fraction_is_no_option_and_no_whole_number(reply):
    """'3.9' used to be read as 3 and '2.7' as option 2: a fraction is asked again, not truncated."""
    from socialsim.llm.questions import AnswerError, IntegerQuestion, PickOneQuestion

    for question in (IntegerQuestion(1, 9), PickOneQuestion(["a", "b", "c", "d", "e"])):
        with pytest.raises(AnswerError):
            question.parse(reply)
    assert IntegerQuestion(1, 9).parse("3, I think").value == 3 and PickOneQuestion(["a", "b"]).parse("2. b").index == 1


def test_a_report_shows_a_hostile_text_without_its_control_characters(tmp_path):
    """An escape sequence, a bell or a right-to-left override in a model's text (or a scenario's)
    would act in the terminal that shows report.md; the report keeps the words, not those."""
    from socialsim.metrics.markdown import printable

    hostile = "\x1b[31mred\x1b[0m \x07bell \u202eesrever\u202c kept\ttab"
    assert printable(hostile + "\nnext") == "[31mred[0m bell esrever kept\ttab\nnext"
    source = Path(__file__).parents[1] / "socialsim" / "scenarios" / "data" / "hobbs-cafe.yaml"
    text = source.read_text(encoding="utf-8")
    scenario = tmp_path / "cafe.yaml"
    scenario.write_text(re.sub(r"^title: .*$", lambda _: f"title: {json.dumps(hostile)}", text, count=1, flags=re.M),
                        encoding="utf-8")
    run(RunConfig(scenario=str(scenario), arch="crsec", model="rules", steps=1), tmp_path / "run", progress=False)
    report = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# [31mred[0m bell esrever kept\ttab — crsec")
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e]", report)


@pytest.mark.figures
def test_an_interaction_heat_map_with_no_interaction_says_so(tmp_path, monkeypatch):
    """An all-zero matrix drew a uniform blue block with a colour bar from -0.1 to 0.1: like data."""
    import matplotlib.pyplot as plt

    from socialsim.metrics import report
    from socialsim.model.society import SocietyModel

    kept = []
    monkeypatch.setattr(plt, "close", kept.append)
    quiet = SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=1)
    report.plot_interactions(quiet, tmp_path / "none.png")
    axes = kept[-1].axes
    assert axes[0].get_title() == "Interactions (none recorded)" and len(axes) == 1  # no colour bar
    assert [t.get_text() for t in axes[0].texts] == ["no agent interacted with another"]
    quiet.record_interaction(quiet.agents[0].name, quiet.agents[1].name, "chat", "hi")
    report.plot_interactions(quiet, tmp_path / "one.png")
    assert kept[-1].axes[0].get_title() == "Interactions" and len(kept[-1].axes) == 2 and not kept[-1].axes[0].texts


def test_the_calls_of_a_step_cut_short_are_counted_but_not_per_completed_agent_step(tmp_path, monkeypatch):
    """A budget stop in step 2: its calls were divided by the one completed step's agent-steps."""
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-key")
    with FakeOpenAIServer(policy=lambda m: "1") as server:
        config = RunConfig(scenario="hobbs-cafe", arch="generic", model="openai/fake-model", steps=3, rng=3,
                           api_base=server.api_base, num_retries=0, max_calls=15)
        result = run(config, tmp_path / "run", progress=False, preflight=False)
    assert result.status.startswith("stopped by budget") and result.steps_done == 1
    report = (tmp_path / "run" / "report.md").read_text()
    assert "LLM calls: 15 (1.00 per agent-step; 5 in the step cut short)" in report
