"""Watch-fed caches (informers) and the delaying work queue of workload keys.

Informer threads only update their cache and report keys; decisions happen on the
daemon's reconcile thread, which reads the caches. A cache is relisted only when its
watch starts or the server says 410 Gone (and, for a new leader, once on acquiring).
"""

from __future__ import annotations

import heapq
import logging
import threading
from typing import Any, Callable, Mapping

from placer.kube import NO_RETRY, KubeClient, Resource
from placer.model.errors import Forbidden, NotFound, PlacerError

log = logging.getLogger("placer.daemon")


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
        out: list[Any] = []
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

Handler = Callable[["Informer", tuple[str, str], "dict | None"], None]


class Informer:
    """One watch (resource, namespace, label selector) kept in a local cache.

    `handler(informer, (namespace, name), obj or None)` is called from the informer's
    thread for every change, deletions included (also those a relist reveals).
    `transform` slims each object before it is kept (pods: only what capacity needs).
    An event older than what the cache holds (a lagging stream after `resync()`, or an
    object this daemon just wrote and `assume`d) is ignored."""

    def __init__(self, client: KubeClient, resource: Resource, *, namespace: str | None,
                 label_selector: str | None, handler: Handler, cluster: str, stop: threading.Event,
                 on_error: Callable[[PlacerError], None], retry_delay: float = 1.0,
                 timeout_seconds: int = 120, transform: Callable[[dict], dict] | None = None,
                 gvk: tuple[str, str] | None = None, on_recover: Callable[[], None] | None = None,
                 optional: bool = False):
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
        self.transform = transform
        self.on_recover = on_recover or (lambda: None)
        self.optional = optional                     # forbidden or not served: give up quietly
        self.synced = threading.Event()
        self.tried = threading.Event()               # a first list was attempted (synced or failed)
        self.gvk: tuple[str, str] = gvk or (resource.api_version, resource.kind)
        self.relists = 0
        self.error: str | None = None                # the last watch error, until the watch works again
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

    def __len__(self) -> int:
        return len(self._cache)

    def assume(self, obj: dict, notify: bool = True) -> None:
        """Put an object we just wrote into the cache before its watch event arrives
        (`notify`: tell the handler, as a watch event would)."""
        obj = self.transform(obj) if self.transform else obj
        key = _key(obj)
        with self._lock:
            if _newer(self._cache.get(key), obj):
                return
            self._cache[key] = obj
        if notify:
            self.handler(self, key, obj)

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            gone = self._cache.pop((namespace, name), None)
        if gone is not None:
            self.handler(self, (namespace, name), None)

    def resync(self) -> None:
        """LIST now and replace the cache (a new leader does this once before it plans, so
        that it never plans against a cache lagging the previous leader's writes)."""
        lst = self.client.list(self.resource, self.namespace, label_selector=self.label_selector)
        self._relist(lst.items, lst.resource_version)

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
                    self.error = None
                    self._apply(ev)
            except PlacerError as e:
                if self.stop.is_set():
                    return
                self.tried.set()
                if self.optional and isinstance(e, (Forbidden, NotFound)):
                    log.info("watch %s: %s; going without it", self.name, e)
                    return
                self.error = e.message
                self.on_error(e)
                log.warning("watch %s: %s; retrying", self.name, e)
                self.stop.wait(self.retry_delay)
                while not self.stop.is_set() and not self._probe():
                    self.stop.wait(self.retry_delay)
            except Exception:                       # never let a watch thread die silently
                log.exception("watch %s crashed; restarting from a fresh list", self.name)
                rv = None
                self.stop.wait(self.retry_delay)

    def _probe(self) -> bool:
        """After a failed watch: clear the error once the server answers again (a cheap
        GET /version, not a relist), so the cluster is planned on again even when none of
        its objects changes."""
        try:
            self.client.request("GET", "/version", retry=NO_RETRY)
        except PlacerError:
            return False
        self.error = None
        self.on_recover()
        return True

    def _apply(self, ev) -> None:
        if ev.type == "RELIST":
            self._relist(ev.items, ev.resource_version)
            return
        if ev.object is None or ev.type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        obj = self.transform(ev.object) if self.transform else ev.object
        k = _key(obj)
        with self._lock:
            if _newer(self._cache.get(k), obj):
                return                              # older than what we hold: a lagging stream
            if ev.type == "DELETED":
                self._cache.pop(k, None)
            else:
                self._cache[k] = obj
        self.handler(self, k, None if ev.type == "DELETED" else obj)

    def _relist(self, items, resource_version: str | None) -> None:
        fresh = {}
        for o in items:
            o = self.transform(o) if self.transform else o
            fresh[_key(o)] = o
        with self._lock:
            # keep what we wrote after the list was taken (assumed, newer than the list)
            for k, o in self._cache.items():
                if k not in fresh and _rv(o) > _int(resource_version):
                    fresh[k] = o
            gone = [k for k in self._cache if k not in fresh]
            changed = [k for k, o in fresh.items() if self._cache.get(k) is not o]
            self._cache = fresh
        self.relists += 1
        for k in gone:
            self.handler(self, k, None)
        for k in changed:
            self.handler(self, k, fresh[k])
        self.synced.set()
        self.tried.set()


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _int(text: Any) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return -1


def _rv(obj: Mapping[str, Any] | None) -> int:
    return _int(((obj or {}).get("metadata") or {}).get("resourceVersion"))


def _newer(current: dict | None, candidate: Mapping[str, Any]) -> bool:
    """Whether the cached object is newer than `candidate` (resourceVersions are opaque,
    but every server we know uses increasing integers; unknown shapes count as older)."""
    if current is None:
        return False
    have, got = _rv(current), _rv(candidate)
    return have >= 0 and got >= 0 and have > got

