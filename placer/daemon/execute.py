"""Acting: every write fenced by the lease and bounded in time, and one work queue (a
thread) per target cluster, so that a hung or refusing cluster slows only its own work.

- `fenced_client` derives, from a `placer.kube.KubeClient`, one for `placer.actuate` and the
  daemon: each try has a timeout shorter than the lease (connect and read, `call_timeout` each),
  and each try of a write first checks that the lease is held for at least that long
  (`LeaderElector.fence`, the transport's `before_attempt` hook), so that no retry of a write
  can outlive leadership either.
- `ClusterWorkers` runs jobs per cluster, one at a time per cluster, at most one per key
  in flight; each job's result comes back through a callback (the daemon's inbox).
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Hashable

from placer.daemon.leadership import LeaderElector
from placer.kube import KubeClient, Request
from placer.model.errors import KubeError, PlacerError, ServerError, Unreachable

log = logging.getLogger("placer.daemon")

# a target's failure is not retried in place (the planner goes elsewhere at once; the daemon
# retries the work itself, with backoff): only 429, which says "later", is tried again
FAIL_FAST = frozenset({429})


@dataclass(frozen=True)
class Fence:
    """The hook run before every try of a request: writes only while the lease is held for
    `margin` more seconds (one try's longest time), so none lands after leadership ends."""

    leader: LeaderElector
    margin: float

    def __call__(self, request: Request) -> None:
        if request.write:
            self.leader.fence(self.margin)


@dataclass(frozen=True)
class Both:
    """Two hooks run before every try, in order (a target's gate, then the fence)."""

    first: Callable[[Request], None]
    then: Callable[[Request], None]

    def __call__(self, request: Request) -> None:
        self.first(request)
        self.then(request)


@dataclass(frozen=True)
class ReportFailure:
    """The hook run when a call fails for good: a server error or an unreachable cluster (a
    429 aside) marks the cluster failing."""

    on_failure: Callable[[PlacerError], None]

    def __call__(self, e: KubeError) -> None:
        if isinstance(e, (ServerError, Unreachable)) and e.status != 429:
            self.on_failure(e)


def fenced_client(base: KubeClient, leader: LeaderElector | None, call_timeout: float,
                  sleep: Callable[[float], None] = time.sleep,
                  on_failure: Callable[[PlacerError], None] | None = None,
                  gate: Callable[[Request], None] | None = None) -> KubeClient:
    """`base`'s cluster, namespace and discovery, every try bounded by `call_timeout`, writes
    fenced by `leader` (unless None); with `on_failure`, failures are reported, not retried;
    `gate` runs before every try, first (a degraded target's requests fail at once)."""
    connect_timeout = min(base.transport.connect_timeout, call_timeout)
    retry = base.transport.retry
    if on_failure is not None:
        retry = replace(retry, statuses=FAIL_FAST, connection_errors=False)
    before: Callable[[Request], None] | None = Fence(leader, connect_timeout + call_timeout) \
        if leader is not None else None
    if gate is not None:
        before = gate if before is None else Both(gate, before)
    transport = base.transport.derive(
        timeout=call_timeout, connect_timeout=connect_timeout, retry=retry, sleep=sleep, rng=random.Random(),
        before_attempt=before, on_failure=ReportFailure(on_failure) if on_failure is not None else None)
    return base.through(transport)


@dataclass
class _Job:
    key: Hashable
    fn: Callable[[], Any]
    done: Callable[[Any], None]


class ClusterWorkers:
    """A queue and a thread per cluster. `submit` returns False when a job for the same
    key is already queued or running (it will be looked at again when that one ends)."""

    def __init__(self, clusters: list[str], stop: threading.Event):
        self._stop = stop
        self._queues: dict[str, queue.Queue[_Job | None]] = {c: queue.Queue() for c in clusters}
        self._inflight: dict[Hashable, str] = {}
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(c,), name=f"placer-exec-{c}", daemon=True)
                         for c in clusters]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        for q in self._queues.values():
            q.put(None)
        for t in self._threads:
            if t.is_alive():
                t.join(timeout=5)

    def submit(self, cluster: str, key: Hashable, fn: Callable[[], Any], done: Callable[[Any], None]) -> bool:
        with self._lock:
            if key in self._inflight:
                return False
            self._inflight[key] = cluster
        self._queues[cluster].put(_Job(key, fn, done))
        return True

    def busy(self, key: Hashable) -> str | None:
        """The cluster a job for `key` is queued on or running on, if any."""
        with self._lock:
            return self._inflight.get(key)

    def idle(self) -> bool:
        with self._lock:
            return not self._inflight

    def _run(self, cluster: str) -> None:
        q = self._queues[cluster]
        while True:
            job = q.get()
            if job is None or self._stop.is_set():
                return
            try:
                result: Any = job.fn()
            except PlacerError as e:
                result = e
            except Exception as e:                   # a bug in one job must not kill the cluster's queue
                log.exception("job for %s on %s failed", job.key, cluster)
                result = KubeError(f"internal error: {e}", cluster=cluster)
            try:
                job.done(result)                     # first: whoever sees the key free finds its result
            except Exception:
                log.exception("completing the job for %s on %s failed", job.key, cluster)
            with self._lock:
                self._inflight.pop(job.key, None)
