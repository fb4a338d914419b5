"""The daemon's long-lived, I/O-fed state: an injectable clock, a delaying work queue of
object keys, and informers (a watch per resource feeding a local cache).

Informer threads only update their cache and report keys; all decisions happen on the
daemon's single reconcile thread, which reads the caches.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .errors import PlacerError
from .kube import KubeClient, Resource
from .workload import WorkloadRef, api_group

log = logging.getLogger("placer.daemon")


# --- time ---------------------------------------------------------------------------

class Clock:
    """Seconds on a monotonic scale; the daemon reads time only through this. `wall` is
    the calendar time, for comparing with timestamps the API server wrote."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()


class FakeClock(Clock):
    """Real time plus an offset tests move forward (`advance`), so that everything keeps
    flowing while a test jumps over a reschedule delay or a retry interval."""

    def __init__(self):
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


# --- keys ---------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class ObjKey:
    """One object: apiVersion, kind, namespace, name."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> "ObjKey":
        meta = obj.get("metadata") or {}
        return cls(obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("namespace") or "",
                   meta.get("name") or "")

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def workload(self) -> WorkloadRef:
        return WorkloadRef(api_group(self.api_version), self.kind, self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


# --- work queue ---------------------------------------------------------------------

class WorkQueue:
    """Keys to reconcile, each at most once, at the earliest time it was asked for."""

    def __init__(self):
        self._due: dict[Any, float] = {}
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = 0
        self._lock = threading.Lock()

    def add(self, key: Any, at: float) -> None:
        with self._lock:
            current = self._due.get(key)
            if current is not None and current <= at:
                return
            self._due[key] = at
            self._seq += 1
            heapq.heappush(self._heap, (at, self._seq, key))

    def pop_due(self, now: float, limit: int | None = None) -> list[Any]:
        out = []
        with self._lock:
            while self._heap and self._heap[0][0] <= now and (limit is None or len(out) < limit):
                at, _, key = heapq.heappop(self._heap)
                if self._due.get(key) == at:
                    del self._due[key]
                    out.append(key)
        return out

    def next_due(self) -> float | None:
        with self._lock:
            while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
                heapq.heappop(self._heap)
            return self._heap[0][0] if self._heap else None

    def due_count(self, now: float) -> int:
        with self._lock:
            return sum(1 for at in self._due.values() if at <= now)

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: Any) -> bool:
        return key in self._due


# --- informers ----------------------------------------------------------------------

Handler = Callable[["Informer", tuple[str, str], dict | None], None]


class Informer:
    """One watch (resource, namespace, label selector) kept in a local cache.

    `handler(informer, (namespace, name), obj or None)` is called from the informer's
    thread for every change, deletions included (also those a relist reveals)."""

    def __init__(self, client: KubeClient, resource: Resource, *, namespace: str | None,
                 label_selector: str | None, handler: Handler, cluster: str, stop: threading.Event,
                 on_error: Callable[[PlacerError], None], retry_delay: float = 1.0,
                 timeout_seconds: int = 120):
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.handler = handler
        self.cluster = cluster
        self.stop = stop
        self.on_error = on_error
        self.retry_delay = retry_delay
        self.timeout_seconds = timeout_seconds
        self.synced = threading.Event()
        self.tried = threading.Event()               # a first list was attempted (synced or failed)
        self.gvk: tuple[str, str] = (resource.api_version, resource.kind)
        self.relists = 0
        self._cache: dict[tuple[str, str], dict] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        return f"{self.cluster}:{self.resource.group_resource}"

    def start(self) -> "Informer":
        self._thread = threading.Thread(target=self._run, name=f"watch-{self.name}", daemon=True)
        self._thread.start()
        return self

    def get(self, namespace: str, name: str) -> dict | None:
        with self._lock:
            return self._cache.get((namespace, name))

    def items(self) -> list[dict]:
        with self._lock:
            return list(self._cache.values())

    def assume(self, obj: dict) -> None:
        """Put an object we just wrote into the cache before its watch event arrives."""
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        with self._lock:
            if not _newer(self._cache.get(key), obj):
                self._cache[key] = obj

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._cache.pop((namespace, name), None)

    def _run(self) -> None:
        rv: str | None = None
        while not self.stop.is_set():
            try:
                for ev in self.client.watch(self.resource, self.namespace, resource_version=rv,
                                            label_selector=self.label_selector,
                                            timeout_seconds=self.timeout_seconds, stop=self.stop.is_set):
                    rv = ev.resource_version or rv
                    if self.stop.is_set():
                        return
                    self._apply(ev)
            except PlacerError as e:
                if self.stop.is_set():
                    return
                self.tried.set()
                self.on_error(e)
                log.warning("watch %s: %s; retrying", self.name, e)
                self.stop.wait(self.retry_delay)
            except Exception:                       # never let a watch thread die silently
                log.exception("watch %s crashed; restarting from a fresh list", self.name)
                rv = None
                self.stop.wait(self.retry_delay)

    def _apply(self, ev) -> None:
        if ev.type == "RELIST":
            fresh = {_key(o): o for o in ev.items}
            with self._lock:
                gone = [k for k in self._cache if k not in fresh]
                self._cache = fresh
            self.relists += 1
            for k in gone:
                self.handler(self, k, None)
            for k, o in fresh.items():
                self.handler(self, k, o)
            self.synced.set()
            self.tried.set()
            return
        if ev.object is None or ev.type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        k = _key(ev.object)
        with self._lock:
            if ev.type == "DELETED":
                self._cache.pop(k, None)
            else:
                self._cache[k] = ev.object
        self.handler(self, k, None if ev.type == "DELETED" else ev.object)


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _newer(current: dict | None, candidate: dict) -> bool:
    """Whether the cached object is newer than `candidate` (resourceVersions are opaque,
    but every server we know uses increasing integers; unknown shapes count as older)."""
    if current is None:
        return False
    try:
        return int(current["metadata"]["resourceVersion"]) > int(candidate["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return False


def all_synced(informers: Iterable[Informer]) -> bool:
    return all(i.synced.is_set() for i in informers)
