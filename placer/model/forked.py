"""Work done in a forked child process beside the parent's (issue 24: `placer plan` on the
machine's second core).

Only where it is safe and can pay (`why_serial`): Linux, more than one CPU to run on, and no
other thread alive in the process (a thread that holds a lock when the process forks leaves it
held for ever in the child: CP-SAT's native layer and rich's status spinner start threads, and
the daemon has many). PLACER_SERIAL=1 turns it off.

The child sends its result back pickled through a pipe and leaves with os._exit: no atexit
handler, no buffered output of the parent's written twice. Whatever goes wrong in it (an
exception, a kill, no answer in time) comes back as None, and the caller does the work itself,
so a result or an error is the serial run's. The child dies with the parent (Linux's parent
death signal) and on Ctrl-C (SIGINT's default action: a terminal sends it to the whole
foreground process group); `stop` kills and reaps it whatever the parent is doing.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import sys
import threading
import time
from typing import Callable, Generic, TypeVar

T = TypeVar("T")

SERIAL_ENV = "PLACER_SERIAL"
_PR_SET_PDEATHSIG = 1


def why_serial() -> str | None:
    """Why work may not be forked off here (None: it may). PLACER_SERIAL=0 forks even when
    the CPUs are busy (for tests of the forked path on a loaded machine)."""
    told = os.environ.get(SERIAL_ENV, "")
    if told not in ("", "0"):
        return f"{SERIAL_ENV} is set"
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return "not Linux"
    cpus = len(os.sched_getaffinity(0))
    if cpus < 2:
        return "one CPU"
    if threading.active_count() > 1 or _threads() != 1:
        return "other threads are running"
    if told != "0" and _running() >= cpus:
        # no CPU that nothing else wants: the child would take turns with the parent (another
        # session's busy task keeps its CPU: the scheduler shares CPUs between sessions first),
        # adding its CPU (the reading child's compiles, the fork's copies) to the wait (issue 24:
        # with one other task running, 10% slower than one process; at a load of 13, 29%)
        return "the CPUs are busy"
    return None


def _running() -> int:
    """Tasks running or ready to run on the machine now, this one included (/proc/loadavg)."""
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 1


def _threads() -> int:
    """The process's threads, native ones included (the kernel's count)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0                     # unknown: treated as unsafe


class Child(Generic[T]):
    """A forked child computing `work()`; `result` waits for it, `stop` ends it."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self.waited = 0.0                     # seconds the parent spent waiting in `result`

    @classmethod
    def start(cls, work: Callable[[], T]) -> Child[T] | None:
        """The child computing `work()`, or None where forking is not safe (`why_serial`)."""
        if why_serial() is not None:
            return None
        parent = os.getpid()
        read, write = os.pipe()
        # the heap so far frozen: the child's collections skip it, and do not write to (so copy)
        # every page of it; the parent takes it back at once
        gc.freeze()
        # Ctrl-C held back over the fork: in the child it would interrupt the fork's own hooks
        # (a traceback); in the parent it lands once the child is known, so that it can be killed
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        pid = os.fork()
        if pid == 0:                          # the child: never returns
            os.close(read)
            _child(work, write, parent, mask)
        gc.unfreeze()
        os.close(write)
        child = cls(pid, read)
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        except BaseException:                 # a Ctrl-C held back
            child.stop()
            raise
        return child

    def working(self) -> bool:
        """Whether the child has not answered yet (its answer, or its end, not in the pipe)."""
        return self.fd >= 0 and not select.select([self.fd], [], [], 0)[0]

    def result(self, timeout: float) -> T | None:
        """The child's result; None when it failed, died or did not answer within `timeout`
        seconds. The child is gone afterwards."""
        t = time.monotonic()
        try:
            data = self._read(t + timeout)
            ok = data is not None and self._exited_cleanly()
        finally:
            self.stop()
            self.waited = time.monotonic() - t
        if not ok or not data:
            return None
        try:
            return pickle.loads(data)
        except Exception:                     # noqa: BLE001 (a truncated answer: done again)
            return None

    def _read(self, deadline: float) -> bytes | None:
        chunks: list[bytes] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None                   # no answer in time
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)

    def _exited_cleanly(self) -> bool:
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        return os.waitstatus_to_exitcode(status) == 0

    def stop(self) -> None:
        """Kill the child if it still runs, reap it, close the pipe (idempotent)."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.pid = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _child(work: Callable[[], object], fd: int, parent: int, mask) -> None:
    """In the child: compute, write the pickled result, leave without the parent's cleanup."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)     # Ctrl-C ends it at once, without a traceback
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _die_with(parent)
        data = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        code = 0
    except BaseException:                     # noqa: BLE001 (the parent does the work itself)
        pass
    finally:
        os._exit(code)


def _die_with(parent: int) -> None:
    """Killed when the parent dies (SIGKILL included): no orphan keeps a CPU."""
    import ctypes  # only in the child

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:                # the parent died before the call
        os._exit(1)
