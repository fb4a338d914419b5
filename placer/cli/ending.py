"""How placer's own process ends: at once, when the command is done (issue 24).

After its last atexit handler CPython frees every object one at a time and tears its modules
down: 0.03-0.09 s of a 1,000-workload `placer plan` spent on memory the kernel takes back whole.
So the console script, once the command has returned or raised SystemExit with a number, does
what Python's exit does that keeps a promise, in Python's order, and then leaves with
`os._exit` (as mypy does):

1. the atexit handlers: logging's handlers flushed and closed, tempfile's and weakref.finalize's
   cleanups, a host's own handlers (a probe printing what it measured);
2. stdout and stderr flushed. A reader gone (`placer plan | head -1`) ends the command quietly
   with 1, as typer ends it when the pipe breaks while the command writes (Python's exit said
   "Exception ignored ... BrokenPipeError" and 120 when the rest was still buffered); any other
   failure (a full disk) is said on stderr, with Python's 120.

Left to Python's own exit: a SystemExit whose code is text (Python prints it), an exception
that is no SystemExit (a bug: its traceback as ever), and a process where another thread still
runs (Python waits for it: the submit's worker and the kube client's pools have all returned by
then, so this is a safety net, not a path taken). placer writes nothing through C's stdio (CP-SAT
logs nothing), so skipping C's exit loses nothing; a forked child (placer.model.forked) is reaped
before its result is used, and dies with the parent on any path (its parent-death signal).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Callable, NoReturn, TextIO

BROKEN_PIPE = 1        # typer's status when the reader of stdout is gone
FLUSH_FAILED = 120     # CPython's status when it cannot flush stdout at exit


def run_then_exit(command: Callable[[], object]) -> None:
    """`command()` (a click app in standalone mode, which ends by raising SystemExit), then
    the process ends at once with its status; returns or raises only where Python's own exit
    is kept (see the module's docstring)."""
    try:
        command()
    except SystemExit as e:
        code = _status(e.code)
        if code is None or _others_running():
            raise
    else:
        if _others_running():
            return
        code = 0
    exit_now(code)


def _status(code: object) -> int | None:
    """The process status of SystemExit(code), None where Python's exit has more to do."""
    if code is None:
        return 0
    return int(code) if isinstance(code, int) else None


def _others_running() -> bool:
    return threading.active_count() > 1


def exit_now(code: int) -> NoReturn:
    """The atexit handlers, stdout and stderr flushed, then the process's end with `code`
    (or the status of a failed flush)."""
    atexit._run_exitfuncs()
    os._exit(_flushed(code))


def _flushed(code: int) -> int:
    """`code` once stdout and stderr are flushed; a reader gone or a failed write change it."""
    try:
        _flush(sys.stdout)
    except BrokenPipeError:
        code = BROKEN_PIPE
    except (OSError, ValueError) as e:
        _say(f"error: cannot write the output: {e}")
        code = FLUSH_FAILED
    try:
        _flush(sys.stderr)
    except (OSError, ValueError):
        pass                                  # nowhere left to say it
    return code


def _flush(stream: TextIO | None) -> None:
    if stream is not None and not stream.closed:
        stream.flush()


def _say(message: str) -> None:
    try:
        if sys.stderr is not None:
            sys.stderr.write(message + "\n")
    except (OSError, ValueError):
        pass
