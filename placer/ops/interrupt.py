"""Ctrl-C while placer acts on clusters: finish the group in flight, then stop, and say
what was done.

A KeyboardInterrupt lands in the main thread wherever it is: in the middle of a group's
apply it would leave that group half applied. So the acting part runs in a worker
thread and the main thread only waits. On Ctrl-C (a second one too) the main thread
sets `stop`, which the worker checks between groups, and waits until the group in
flight is applied whole or rolled back; the caller then reports what was done.

A native library may replace the process's SIGINT handler and not give Python's back
(CP-SAT did, until `placer.solve` turned its `catch_sigint_signal` off: after a solve,
Ctrl-C killed placer outright, in the middle of whatever it was sending): Python's
handler is put back first.
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")


def uninterrupted(act: Callable[[threading.Event], T]) -> tuple[T, bool]:
    """act(stop)'s result, and whether Ctrl-C asked it to stop early. However early a
    Ctrl-C lands (even before the worker starts), the worker is waited for, with `stop` set."""
    _python_sigint()
    stop, done = threading.Event(), threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = act(stop)
        except BaseException as e:      # handed to the caller's thread
            box["error"] = e
        finally:
            done.set()
    worker = threading.Thread(target=work, name="placer-act")
    while True:
        try:
            if worker.ident is None:
                worker.start()
            done.wait()
            break
        except KeyboardInterrupt:
            stop.set()                      # the worker stops before its next group
    if "error" in box:
        raise box["error"]
    return box["result"], stop.is_set()


def _python_sigint() -> None:
    """Python's own SIGINT handler (KeyboardInterrupt) installed again at the C level, where
    a native library may have replaced it; left alone when the user's is another (ignored)."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
