"""Kinds and definitions that appear while the daemon runs, followed by watches rather than
polled: a CustomResourceDefinition watch on the hub and on every target, and (when the daemon
follows registered definitions) a watch of `WorkloadDefinition`s and Workload Map `Karta`s on
each of them. A change wakes one thread, which re-reads the definitions from those watches'
caches (no LIST) and asks discovery, on the clusters that changed, for the kinds not served
before (a few GETs per change). Nothing changes: no request at all.

A cluster whose CRDs cannot be watched (not readable, not answering yet) is asked instead
every `discovery_interval`, by discovery GETs only (never a LIST), until its watch works."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from placer.daemon.informer import Informer
from placer.fleetview.registry import API_VERSION, KARTA_API_VERSION, KARTA_KIND, KIND, Registered, registered_objects
from placer.kube import KubeClient
from placer.model.errors import PlacerError

log = logging.getLogger("placer.daemon")

CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
DEFINITION_KINDS = ((API_VERSION, KIND), (KARTA_API_VERSION, KARTA_KIND))
RECHECK = 2.0                    # seconds after a CRD change its cluster is asked once more
# what follows a change: (clusters whose served kinds may have changed, whether definitions changed)
OnChange = Callable[[set[str], bool], None]


def slim_crd(obj: dict) -> dict:
    """What tells a change apart (name, version, group, kind, served versions, conditions);
    not the schemas, which can be large and are never read here."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    return {"metadata": {"name": meta.get("name"), "resourceVersion": meta.get("resourceVersion")},
            "spec": {"group": spec.get("group"), "names": {"kind": (spec.get("names") or {}).get("kind")},
                     "versions": [{"name": v.get("name"), "served": v.get("served")}
                                  for v in spec.get("versions") or () if isinstance(v, Mapping)]},
            "status": {"conditions": [{"type": c.get("type"), "status": c.get("status")}
                                      for c in (obj.get("status") or {}).get("conditions") or ()
                                      if isinstance(c, Mapping)]}}


@dataclass
class _Cluster:
    name: str
    client: KubeClient
    context: str | None
    crds: Informer | None = None
    definitions: dict[tuple[str, str], Informer] = field(default_factory=dict)

    def watched(self) -> bool:
        """Its CRDs are watched now (else it is asked on the poll)."""
        return self.crds is not None and self.crds.synced.is_set() and self.crds.error is None


class Follower:
    """Given each cluster's reading client and context ("hub" first), whether to follow the
    definitions they register, and what to call on a change."""

    def __init__(self, clusters: Mapping[str, tuple[KubeClient, str | None]], *, follow: bool,
                 stop: threading.Event, on_change: OnChange, on_error: Callable[[str, Exception], None],
                 poll: float, retry_delay: float = 1.0):
        self.clusters = {n: _Cluster(n, c, ctx) for n, (c, ctx) in clusters.items()}
        self.follow = follow
        self.stop = stop
        self.on_change = on_change
        self.on_error = on_error
        self.poll = poll
        self.retry_delay = retry_delay
        self.wake = threading.Event()
        self.passes = 0                      # change passes done
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._definitions_dirty = False
        self._busy = False
        self._recheck: dict[str, float] = {}     # cluster -> when to ask it once more after a change
        self._thread: threading.Thread | None = None

    # --- the watches -------------------------------------------------------------------------

    def start(self) -> None:
        for cl in self.clusters.values():
            cl.crds = self._informer(cl, CRD, self._crd_changed, transform=slim_crd)
            if self.follow:
                self._watch_definitions(cl)
        for inf in self.informers():
            inf.start()
        self._thread = threading.Thread(target=self._run, name="placer-discovery", daemon=True)
        self._thread.start()

    def _informer(self, cl: _Cluster, gvk: tuple[str, str], handler, transform=None) -> Informer | None:
        try:
            res = cl.client.resource_for(*gvk)
        except PlacerError:
            return None                      # not served, or not answering now: asked on the poll
        return Informer(cl.client, res, namespace=None, label_selector=None, handler=handler, cluster=cl.name,
                        stop=self.stop, on_error=lambda e: self.on_error(cl.name, e), retry_delay=self.retry_delay,
                        transform=transform, gvk=gvk, optional=True)

    def _watch_definitions(self, cl: _Cluster) -> list[Informer]:
        """Start watching the definition kinds this cluster serves and is not watched for yet."""
        added = []
        for gvk in DEFINITION_KINDS:
            if gvk not in cl.definitions:
                inf = self._informer(cl, gvk, self._definition_changed)
                if inf is not None:
                    cl.definitions = {**cl.definitions, gvk: inf}
                    added.append(inf)
        return added

    def informers(self) -> list[Informer]:
        out = []
        for cl in self.clusters.values():
            out += [i for i in (cl.crds, *cl.definitions.values()) if i is not None]
        return out

    def _crd_changed(self, inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
        with self._lock:
            self._dirty.add(inf.cluster)
        self.wake.set()

    def _definition_changed(self, inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
        with self._lock:
            self._definitions_dirty = True
        self.wake.set()

    # --- what the watches hold -----------------------------------------------------------------

    def registered(self, warn: Callable[[str], None]) -> dict[str | None, Registered | Exception]:
        """context -> what it registers, from the caches; a cluster whose definition watches
        have not synced is left out (it keeps what it registered when last read)."""
        out: dict[str | None, Registered | Exception] = {}
        for cl in self.clusters.values():
            infs = cl.definitions
            if any(not i.synced.is_set() for i in infs.values()):
                continue
            objs = {gvk: (infs[gvk].items() if gvk in infs else []) for gvk in DEFINITION_KINDS}
            out[cl.context] = registered_objects(cl.client.cluster, objs[DEFINITION_KINDS[0]],
                                                 objs[DEFINITION_KINDS[1]], warn)
        return out

    def quiet(self) -> bool:
        """No change waiting to be followed (and none being followed now)."""
        with self._lock:
            return not (self._dirty or self._definitions_dirty or self._busy or self._recheck)

    # --- the one thread ------------------------------------------------------------------------

    def _run(self) -> None:
        next_poll = time.monotonic() + self.poll
        while not self.stop.is_set():
            polled = [n for n, cl in self.clusters.items() if not cl.watched()]
            soon = min([next_poll] * bool(polled) + list(self._recheck.values()), default=time.monotonic() + 1.0)
            wait = max(0.0, min(1.0, soon - time.monotonic()))
            self.wake.wait(wait)
            if self.stop.is_set():
                return
            self.wake.clear()
            now = time.monotonic()
            due = bool(polled) and now >= next_poll
            if due:
                next_poll = now + self.poll
            again = {n for n, t in self._recheck.items() if now >= t}
            with self._lock:
                changed = self._dirty
                dirty, self._dirty = changed | again | (set(polled) if due else set()), set()
                definitions, self._definitions_dirty = self._definitions_dirty, False
                self._busy = bool(dirty or definitions)
                # a CRD's events can come before its kind is in discovery: ask once more a little later
                self._recheck = {**{n: t for n, t in self._recheck.items() if n not in again},
                                 **{n: now + RECHECK for n in changed}}
            if not self._busy:
                continue
            try:
                self.follow_change(dirty, definitions)
            except Exception:                    # the loop must outlive a bug
                log.exception("following new kinds and definitions failed")
            finally:
                with self._lock:
                    self._busy = False
                self.passes += 1

    def follow_change(self, dirty: set[str], definitions: bool) -> None:
        if self.follow:
            for name in sorted(dirty):           # a definition CRD installed there: watch it now
                for inf in self._watch_definitions(self.clusters[name]):
                    inf.start()
                    definitions = True
        if dirty or definitions:
            self.on_change(dirty, definitions)


__all__ = ["CRD", "DEFINITION_KINDS", "Follower", "slim_crd"]
