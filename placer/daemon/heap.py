"""The garbage collector tuned for the daemon's own process (`placer daemon`).

The caches hold most of the daemon's objects for its whole life: at 20 clusters x 500 nodes,
10,000 nodes and 50,000 pods as JSON, about 930,000 objects the collector tracks. CPython's
full collection walks all of them each time what survived the younger collections grows by a
quarter; in benchmarks/daemon.py one took 0.74 s with the interpreter lock held and freed
nothing, while an arrivals round, and every arrival behind it, waited.

So in idle time, once the node classes are built (the first settle), and again every
`interval` seconds (10), the daemon collects once and freezes what survives (`gc.freeze`):
later collections skip those objects, and a full one walks only what was made since the
last settle (with a settle a minute, a 75 s steady phase of 1,500 arrivals still had full
collections of 0.12-0.17 s, and the settle itself took 0.2 s CPU). Frozen objects are still
freed when nothing refers to them; a reference cycle among them is not, so every `renew`
seconds (an hour) a settle unfreezes everything first (one full pass over the heap, in idle
time), and `release` (the daemon's stop) hands them back.

The youngest generation is collected every `YOUNG` (10,000) net allocations, not CPython's
700, from the first settle until `release`: a burst of 1,000 arrivals (benchmarks/daemon.py,
20 x 500 nodes) made 330-430 collections with the interpreter lock held (0.2-0.67 s, 2-4 of
them full, up to 0.17 s each) while the arrivals' copies waited; most of what a request,
an event or an interpretation allocates is gone well before 10,000 allocations, so the
passes are fewer and find less to move on (`placer plan` does the same: cli/common.py).
Reference cycles are still freed, a little later.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger("placer.daemon")

YOUNG = 10_000              # net allocations between collections of the youngest generation


class Heap:
    def __init__(self, interval: float = 10.0, renew: float = 3600.0):
        self.interval, self.renew = interval, renew
        self.term: int | None = None          # the term of leadership of the last settle
        self.next_at = 0.0
        self.renew_at: float | None = None    # when a settle unfreezes everything first
        self.thresholds: tuple[int, ...] | None = None   # the collector's own, while ours is set

    def due(self, now: float, term: int) -> bool:
        return self.term != term or now >= self.next_at

    def step(self, now: float, term: int) -> bool:
        """Settle when due (the caller calls it only in idle time). True when it did."""
        if not self.due(now, term):
            return False
        if self.renew_at is not None and now >= self.renew_at:
            gc.unfreeze()                     # a cycle frozen, then dropped, is collected now
            self.renew_at = None
        if self.renew_at is None:
            self.renew_at = now + self.renew
        self.term, self.next_at = term, now + self.interval
        if self.thresholds is None:
            self.thresholds = gc.get_threshold()
            gc.set_threshold(YOUNG, *self.thresholds[1:])
        self.settle()
        return True

    @staticmethod
    def settle() -> None:
        t0 = time.process_time()
        freed = gc.collect()
        gc.freeze()
        if log.isEnabledFor(logging.DEBUG):   # counting the frozen walks every one of them
            log.debug("heap settled: %d objects frozen, %d freed, %.3fs CPU", gc.get_freeze_count(), freed,
                      time.process_time() - t0)

    def release(self) -> None:
        gc.unfreeze()
        if self.thresholds is not None:           # the collector as it was before the first settle
            gc.set_threshold(*self.thresholds)
            self.thresholds = None
