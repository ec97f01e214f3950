"""The one background loop every LLM call runs on: a process can always exit with it running, a
forked child and a closed loop get a new one, and a call made from the loop itself is refused
instead of waiting on itself forever.

Each case runs in its own small Python process: closing or forking the loop of the test process
would strand the HTTP clients later tests share, and a case that hangs is read as a timeout. The
cases of the collector's threshold while calls are in flight close and fork nothing, and run in the
test process (but the fork's)."""

import asyncio
import gc
import subprocess
import sys
import textwrap
import threading

import pytest

HANG_S = 60  # a hang is a failure; the cases take well under a second each


def run_script(body: str) -> subprocess.CompletedProcess:
    script = "from socialsim.llm.loop import run_sync\n\nasync def answer():\n    return 42\n\n" + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_S)


def test_a_process_that_used_the_loop_exits_without_waiting_on_it():
    """The loop's thread runs forever; a process must not wait on it to end."""
    done = run_script("""
        print(run_sync(answer()))
    """)
    assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr


def test_a_forked_child_runs_calls_on_a_loop_of_its_own():
    """A fork copies the loop but not the thread that runs it: the child makes its own."""
    done = run_script("""
        import os
        import signal

        run_sync(answer())
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a child left waiting on the parent's loop dies, not left behind
            os._exit(0 if run_sync(answer()) == 42 else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    assert (done.returncode, done.stdout) == (0, "0\n"), done.stderr


def test_a_closed_loop_is_replaced_by_a_new_one():
    done = run_script("""
        import time

        from socialsim.llm import loop

        run_sync(answer())
        old = loop._loop
        old.call_soon_threadsafe(old.stop)
        while old.is_running():
            time.sleep(0.01)
        old.close()
        print(run_sync(answer()), loop._loop is not old)
    """)
    assert (done.returncode, done.stdout) == (0, "42 True\n"), done.stderr


def test_a_call_made_from_the_loop_itself_is_refused_instead_of_waiting_on_itself():
    done = run_script("""
        async def nested():
            try:
                run_sync(answer())
            except RuntimeError as error:
                return str(error)

        print(run_sync(nested()))
    """)
    assert done.returncode == 0, done.stderr
    assert "run_sync called from inside the LLM loop" in done.stdout


@pytest.fixture
def threshold():
    """The test process's thresholds, put back whatever a case does."""
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def _threshold_during_a_call() -> tuple[int, ...]:
    from socialsim.llm.loop import run_sync

    async def seen():
        await asyncio.sleep(0)
        return gc.get_threshold()

    return run_sync(seen())


def test_calls_in_flight_raise_the_collectors_first_threshold_and_put_it_back(threshold):
    from socialsim.llm.loop import PHASE_GC_THRESHOLD

    gc.set_threshold(700, 11, 12)
    assert _threshold_during_a_call() == (PHASE_GC_THRESHOLD, 11, 12)
    assert gc.get_threshold() == (700, 11, 12)


@pytest.mark.parametrize("first", [0, 200_000])
def test_a_threshold_of_zero_or_already_higher_is_left_alone(threshold, first):
    gc.set_threshold(first, 10, 10)
    assert _threshold_during_a_call() == (first, 10, 10)
    assert gc.get_threshold() == (first, 10, 10)


def test_a_threshold_the_program_sets_during_the_calls_is_kept(threshold):
    from socialsim.llm.loop import run_sync

    async def set_own():
        gc.set_threshold(1234, 5, 6)

    gc.set_threshold(700, 10, 10)
    run_sync(set_own())
    assert gc.get_threshold() == (1234, 5, 6)


def test_the_threshold_comes_back_when_the_last_of_two_threads_calls_ends(threshold):
    """Two threads' calls overlap (a dashboard's run beside a notebook's): the first to end leaves the
    threshold raised for the other's calls."""
    from socialsim.llm.loop import PHASE_GC_THRESHOLD, run_sync

    gc.set_threshold(700, 10, 10)
    first_started, first_may_end = threading.Event(), threading.Event()

    async def held():
        first_started.set()
        while not first_may_end.is_set():
            await asyncio.sleep(0.01)

    other = threading.Thread(target=run_sync, args=(held(),), daemon=True)
    other.start()
    try:
        assert first_started.wait(HANG_S)
        assert _threshold_during_a_call()[0] == PHASE_GC_THRESHOLD
        assert gc.get_threshold()[0] == PHASE_GC_THRESHOLD  # the other thread's call is still in flight
    finally:
        first_may_end.set()
        other.join(HANG_S)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_child_forked_during_calls_collects_at_the_parents_own_threshold():
    """A fork copies the raised threshold but not the calls in flight: the child puts it back."""
    done = run_script("""
        import asyncio, gc, os, signal, threading

        gc.set_threshold(700, 10, 10)
        started, may_end = threading.Event(), threading.Event()

        async def held():
            started.set()
            while not may_end.is_set():
                await asyncio.sleep(0.01)

        other = threading.Thread(target=run_sync, args=(held(),), daemon=True)
        other.start()
        started.wait(20)
        raised = gc.get_threshold()[0]
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)
            os._exit(0 if gc.get_threshold() == (700, 10, 10) and run_sync(answer()) == 42
                     and gc.get_threshold() == (700, 10, 10) else 3)
        _, status = os.waitpid(pid, 0)
        may_end.set()
        other.join(20)
        print(raised, os.waitstatus_to_exitcode(status), gc.get_threshold())
    """)
    from socialsim.llm.loop import PHASE_GC_THRESHOLD

    assert (done.returncode, done.stdout) == (0, f"{PHASE_GC_THRESHOLD} 0 (700, 10, 10)\n"), done.stderr
