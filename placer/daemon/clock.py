"""The daemon reads time only through a Clock, so that tests can move it forward.
`Clock` and `FakeClock` are plain classes that both satisfy `TimeSource` (no
inheritance): the daemon's parts are typed against the protocol."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class TimeSource(Protocol):
    def now(self) -> float: ...

    def wall(self) -> float: ...


class Clock:
    """Seconds on a monotonic scale; `wall` is the calendar time, for comparing with
    timestamps the API server wrote."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()


class FakeClock:
    """Real time plus an offset tests move forward (`advance`), so that everything keeps
    flowing while a test jumps over a reschedule delay or a retry interval."""

    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return time.monotonic() + self._offset

    def wall(self) -> float:
        with self._lock:
            return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds
