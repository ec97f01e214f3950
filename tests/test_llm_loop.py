"""The one background loop every LLM call runs on: a process can always exit with it running, a
forked child and a closed loop get a new one, and a call made from the loop itself is refused
instead of waiting on itself forever.

Each case runs in its own small Python process: closing or forking the loop of the test process
would strand the HTTP clients later tests share, and a case that hangs is read as a timeout."""

import subprocess
import sys
import textwrap

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
