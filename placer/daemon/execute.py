"""Acting: every write fenced by the lease and bounded in time, and one work queue (a
thread) per target cluster, so that a hung or refusing cluster slows only its own work.

- `FencedClient` looks like a `placer.kube.KubeClient` to `placer.actuate` and the daemon:
  each call has a timeout shorter than the lease (connect and read, `call_timeout` each),
  and each attempt of a write first checks that the lease is held for at least that long
  (`LeaderElector.fence`); retries (with backoff) are the fenced client's own, so that no
  retry of a write can outlive leadership either.
- `ClusterWorkers` runs jobs per cluster, one at a time per cluster, at most one per key
  in flight; each job's result comes back through a callback (the daemon's inbox).
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable

from placer.daemon.leadership import LeaderElector
from placer.kube import NO_RETRY, KubeClient, Resource
from placer.model.errors import KubeError, PlacerError, ServerError, Unreachable

log = logging.getLogger("placer.daemon")

_WRITES = ("create", "apply", "patch", "patch_status", "delete")


class FencedClient:
    """A KubeClient whose calls are time-bounded and whose writes are fenced."""

    def __init__(self, base: KubeClient, leader: LeaderElector | None, call_timeout: float,
                 sleep: Callable[[float], None] = time.sleep,
                 on_failure: Callable[[PlacerError], None] | None = None):
        self.base = base
        # a target's client: a failure marks the cluster failing (the planner goes elsewhere at
        # once) and is not retried in place; the daemon retries the work itself, with backoff
        self.on_failure = on_failure
        self.cluster = base.cluster
        self.leader = leader
        self.call_timeout = call_timeout
        self.retry = base.retry
        self.sleep = sleep
        self._rng = random.Random()
        # the same connection pool, a short timeout, no retries of its own
        self._once = KubeClient(base.api, cluster=base.cluster, namespace=base.namespace, timeout=call_timeout,
                                connect_timeout=min(base.connect_timeout, call_timeout), retry=NO_RETRY,
                                stats=base.stats)
        self._once._res = base._res                             # type: ignore[method-assign]  # share discovery

    @property
    def margin(self) -> float:
        """How long one attempt may take at most: connecting, then waiting for the answer."""
        return self._once.connect_timeout + self.call_timeout

    def resource_for(self, api_version: str, kind: str) -> Resource:
        return self.base.resource_for(api_version, kind)

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._once, name)
        if name in _WRITES:
            return lambda *a, **kw: self._call(fn, True, *a, **kw)
        if name in ("get", "list"):
            return lambda *a, **kw: self._call(fn, False, *a, **kw)
        return getattr(self.base, name)

    def _call(self, fn: Callable[..., Any], write: bool, *args: Any, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            attempt += 1
            if write and self.leader is not None:
                self.leader.fence(self.margin)
            try:
                return fn(*args, **kwargs)
            except (ServerError, Unreachable) as e:
                if self.on_failure is not None and e.status != 429:
                    self.on_failure(e)
                    raise
                if attempt >= self.retry.attempts or (e.status is not None and e.status not in (429, 500, 502, 503,
                                                                                               504)):
                    raise
                self.sleep(self.retry.delay(attempt, getattr(e, "retry_after", None), self._rng))


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
