"""Hub writes of different workloads at once, within one pass of the daemon thread.

The daemon thread waited for each hub answer in turn: three per placed workload (the
finalizer, the placed Event, the placed patch), about 65% of a burst's wall time while the
in-repo hub, another process, did the work. Within a pass (`batch`), `run` hands a
workload's write to a few hub threads and the daemon thread goes on with the next
workload; one workload's writes stay in order (each starts once its previous one ended);
and the pass ends only when every write it asked for is answered. What follows the pass
(the next phase of the step, the planning round) therefore finds the hub as if the writes
had been made one by one. What the caller does with each outcome (`then`, `failed`) runs
back on the daemon thread when the pass ends, in the order the writes were asked for, so
the book is only ever touched there. Every try still goes through the fenced hub client:
a leader that lost its lease writes nothing, on whichever thread.

Outside a pass (tests driving the parts by hand, or `workers=0`) a write is made at once.

Not i24's hub queue (branch i24-burst4, not merged): its writes outlived the pass, so the
reconcile thread never waited, planned a burst in 30+ rounds instead of 3, each with its
fixed cost, and a workload reconciled with writes in flight had to wait for them anyway.
Here the daemon's steps keep their shape; only the waiting overlaps."""

from __future__ import annotations

import logging
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator

from placer.model.errors import PlacerError

log = logging.getLogger("placer.daemon")

HUB_WRITERS = 4             # threads; the hub's answers overlap, the client's CPU stays one interpreter's


@dataclass(frozen=True)
class _Write:
    future: Future
    then: Callable[[Any], None] | None
    failed: Callable[[PlacerError], None]


class Overlap:
    """`batch()` opens a pass; `run(key, fn, ...)` makes the write `fn` in it (after the
    pass's earlier writes for the same `key`), or at once outside a pass."""

    def __init__(self, workers: int = HUB_WRITERS):
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._open: list[_Write] | None = None
        self._last: dict[Hashable, Future] = {}

    @contextmanager
    def batch(self) -> Iterator[None]:
        if self._open is not None or self.workers <= 0:
            yield                                  # nested: the outer pass waits for its writes
            return
        self._open = []
        try:
            yield
        finally:
            self._finish()

    def run(self, key: Hashable, fn: Callable[[], Any], *, failed: Callable[[PlacerError], None],
            then: Callable[[Any], None] | None = None) -> None:
        if self._open is None:
            try:
                out = fn()
            except PlacerError as e:
                failed(e)
                return
            if then is not None:
                then(out)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="placer-hub")
        future = self._pool.submit(_after, self._last.get(key), fn)
        self._last[key] = future
        self._open.append(_Write(future, then, failed))

    def _finish(self) -> None:
        """Every write of the pass answered; their outcomes handed back, in order."""
        writes, self._open, self._last = self._open or [], None, {}
        for w in writes:
            try:
                try:
                    out = w.future.result()
                except PlacerError as e:
                    w.failed(e)
                    continue
                if w.then is not None:
                    w.then(out)
            except CancelledError:                 # stopped: the next leader looks again
                continue
            except Exception:                      # a bug in one must not lose the others' outcomes
                log.exception("a hub write or its outcome failed")

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def _after(previous: Future | None, fn: Callable[[], Any]) -> Any:
    """`fn`, once the same workload's previous write of the pass has ended (whatever its
    outcome: that is its caller's). Never a deadlock: `previous` was submitted first, so
    with first-in first-out workers it is running or done when this one starts."""
    if previous is not None:
        try:
            previous.result()
        except BaseException:
            pass
    return fn()
