"""placer.model.forked (issue 24: `placer plan` on a second core): a child's result comes back;
a child that raises, dies or hangs comes back as None (the caller then does the work), never a
hang; Ctrl-C and the parent's death end the child; no fork where threads run, on one CPU or
with PLACER_SERIAL. Forks are probed in fresh interpreters (no thread of the test runner's)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from placer.model import forked as F

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env[F.SERIAL_ENV] = "0"                     # fork even on a busy machine
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60, env=env, **kw)


def _gone(pid: int) -> bool:
    """Whether `pid` no longer runs (a zombie counts as gone: it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if _gone(pid):
            return True
        time.sleep(0.02)
    return False


def test_the_childs_result_comes_back_and_the_child_is_reaped():
    done = _run("""
        import os
        from placer.model.forked import Child
        child = Child.start(lambda: {"pid": os.getpid(), "big": list(range(200_000))})
        got = child.result(30)
        print(got["pid"] != os.getpid(), got["big"][-1], child.pid, child.fd, child.waited >= 0)
        try:
            os.waitpid(-1, os.WNOHANG)
            print("a child is left")
        except ChildProcessError:
            print("reaped")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "199999", "0", "-1", "True", "reaped"]


@pytest.mark.parametrize("work", [
    "lambda: 1 / 0",                                          # an exception
    "lambda: os.kill(os.getpid(), signal.SIGKILL)",            # killed
    "lambda: os._exit(0)",                                    # gone without an answer
    "lambda: (os.write(1, b''), os.kill(os.getpid(), signal.SIGTERM))",
])
def test_a_child_that_fails_or_dies_comes_back_as_none(work):
    done = _run(f"""
        import os, signal
        from placer.model.forked import Child
        child = Child.start({work})
        print(child is not None, child.result(30), child.pid)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "None", "0"]
    assert "Traceback" not in done.stderr and "ZeroDivision" not in done.stderr


def test_a_child_that_hangs_is_killed_after_the_timeout():
    done = _run("""
        import os, time
        from placer.model.forked import Child
        child = Child.start(lambda: time.sleep(60))
        pid = child.pid
        t = time.monotonic()
        print(child.result(0.5), round(time.monotonic() - t) < 5, pid)
    """)
    assert done.returncode == 0, done.stderr
    got, quick, pid = done.stdout.split()
    assert (got, quick) == ("None", "True")
    assert _gone(int(pid))


SLEEPER = """
    import os, sys, time
    from placer.model.forked import Child
    try:
        child = Child.start(lambda: time.sleep(60))
        print(child.pid, flush=True)
        child.result(60)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
"""


def _as_a_terminal_gives_it() -> None:
    """SIGINT's default action and unblocked in the sleeper, whatever the test process has: a run
    started in the background by a non-interactive shell (as CI's) has SIGINT ignored, and exec
    passes that on (Python then keeps it ignored); a mask passes on too."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _sleeper(**kw) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env[F.SERIAL_ENV] = "0"                     # fork even on a busy machine
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SLEEPER)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_as_a_terminal_gives_it, **kw)
    return proc, int(proc.stdout.readline())


def test_ctrl_c_on_the_terminal_ends_parent_and_child():
    proc, child = _sleeper(start_new_session=True)
    os.killpg(proc.pid, signal.SIGINT)              # as a terminal does: the whole process group
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in out, err
    assert _wait_gone(child)


def test_ctrl_c_on_the_parent_alone_kills_the_child():
    proc, child = _sleeper()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in out, err
    assert _wait_gone(child)


def test_the_child_dies_with_a_killed_parent():
    proc, child = _sleeper()
    proc.kill()
    proc.communicate(timeout=30)
    assert _wait_gone(child)


def test_no_fork_where_a_thread_runs(monkeypatch):
    monkeypatch.delenv(F.SERIAL_ENV, raising=False)
    monkeypatch.setattr(F.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(F, "_threads", lambda: 1)
    monkeypatch.setattr(F, "_running", lambda: 1)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert F.why_serial() == "other threads are running"
        assert F.Child.start(lambda: 1) is None
    finally:
        stop.set()
        t.join()


def test_no_fork_where_a_native_thread_runs_on_one_cpu_or_when_told(monkeypatch):
    monkeypatch.delenv(F.SERIAL_ENV, raising=False)
    monkeypatch.setattr(F.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(F, "_running", lambda: 1)
    monkeypatch.setattr(F.threading, "active_count", lambda: 1)   # the test runner's own threads aside
    monkeypatch.setattr(F, "_threads", lambda: 1)
    assert F.why_serial() is None
    monkeypatch.setattr(F, "_threads", lambda: 2)            # a thread Python does not know of
    assert F.why_serial() == "other threads are running"
    monkeypatch.setattr(F, "_threads", lambda: 1)
    monkeypatch.setattr(F.os, "sched_getaffinity", lambda pid: {3})
    assert F.why_serial() == "one CPU"
    monkeypatch.setattr(F.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setenv(F.SERIAL_ENV, "1")
    assert F.why_serial() == "PLACER_SERIAL is set"
    monkeypatch.setenv(F.SERIAL_ENV, "0")
    assert F.why_serial() is None


def test_the_kernel_counts_this_process_threads_and_the_running_tasks():
    assert F._threads() == len(os.listdir("/proc/self/task")) >= 1
    assert F._running() >= 1                                  # this one runs
