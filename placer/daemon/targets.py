"""The target clusters as the daemon's caches hold them: placer's copies of a workload, the
clusters a round may plan on, the demand promised there, and the frozen snapshot a
planning round decides on. Read only: writes go to a cluster's own queue (`executor`)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Callable, Mapping

from placer import actuate as A
from placer.daemon import decide as DC
from placer.daemon.caches import ClusterCache
from placer.daemon.state import GVK, Book, Creating, ann_of, origin_of
from placer.daemon.view import StagingView
from placer.kube import KubeClient
from placer.model.fleet import Fleet
from placer.model.workload import PlacementGroup, Workload, WorkloadRef

Interpret = Callable[[Mapping[str, Any], str], Workload]


def apart(committed: list[tuple[PlacementGroup, str]]) -> list[tuple[PlacementGroup, str]]:
    """A spread workload's copies (placer.dev/spread) are committed on several clusters under
    one name: each named for its cluster, so the solver and its verifier tell them apart."""
    seen = Counter(w.ref for g, _ in committed for w in g.workloads)
    if all(n == 1 for n in seen.values()):
        return committed
    return [(dataclasses.replace(g, workloads=tuple(
        dataclasses.replace(w, name=f"{w.name}@{cluster}") if seen[w.ref] > 1 else w for w in g.workloads)), cluster)
        for g, cluster in committed]


class Targets:
    """Filled by the daemon's watches (`watches.start_watches`) once it starts."""

    def __init__(self, view: StagingView, book: Book, interpret: Interpret):
        self.view = view
        self.book = book
        self.interpret = interpret
        self.caches: dict[str, ClusterCache] = {}
        self.clients: dict[str, KubeClient] = {}            # fenced, one per cluster
        self.resynced: set[str] = set()                     # copies relisted since this daemon leads
        self.namespaces: dict[str, A.Namespaces] = {}       # known to exist, per cluster (not asked again)

    def client(self, cluster: str) -> KubeClient:
        return self.clients[cluster]

    def namespaces_on(self, cluster: str) -> A.Namespaces:
        """The namespaces known to exist on `cluster` (its creates ensure each once)."""
        return self.namespaces.setdefault(cluster, A.Namespaces())

    def copies_of(self, ref: WorkloadRef) -> list[tuple[str, dict]]:
        """placer's copies of `ref` on every cluster, in clusters-file order (not those being deleted)."""
        gvk = self.view.gvk_of(ref)
        if gvk is None:
            return []
        want = {A.workload_label(ref), A.legacy_workload_label(ref)}
        out = []
        for cluster, cache in self.caches.items():
            obj = cache.copy(gvk, ref.namespace, ref.name)
            if obj is None or (cluster, ref) in self.book.deleting:
                continue
            meta = obj.get("metadata") or {}
            if (meta.get("labels") or {}).get(A.WORKLOAD) in want and ann_of(obj).get(A.ORIGIN) == origin_of(ref):
                out.append((cluster, {**obj, "apiVersion": gvk[0], "kind": gvk[1]}))
        return out

    def usable(self) -> list[str]:
        """Clusters a round may plan on: their caches synced (and, for a new leader, their
        copies relisted)."""
        return [c for c, cache in self.caches.items() if cache.synced and c in self.resynced]

    def committed(self) -> list[tuple[PlacementGroup, str]]:
        out: list[tuple[PlacementGroup, str]] = []
        counted: dict[str, set[tuple[GVK, str, str]]] = {}
        for name in self.usable():
            out += self.caches[name].promises(self.interpret, counted.setdefault(name, set()))
        seen: set[str] = set()
        for c in self.book.creating.values():
            if c.group.key not in seen:
                seen.add(c.group.key)
                if not self._copied(c, counted):
                    out.append((dataclasses.replace(c.group, key=f"creating:{c.group.key}"), c.cluster))
        for (_, cluster), c in self.book.spreading.items():       # a share: its own demand, per cluster
            if not self._copied(c, counted):
                out.append((dataclasses.replace(c.group, key=f"creating:{c.group.key}@{cluster}"), cluster))
        return apart(out)

    def _copied(self, c: Creating, counted: Mapping[str, set[tuple[GVK, str, str]]]) -> bool:
        """Every copy of an in-flight create was among the copies its cluster's promises
        looked at (its watch event came before the create's result): they count it, the
        create must not again. Not the cache as it is now: a copy its watch adds after the
        promises were counted would be counted by neither (one GPU promised twice)."""
        copies = counted.get(c.cluster)
        if copies is None:
            return False
        for ref in c.members:
            gvk = self.view.gvk_of(ref)
            if gvk is None or (gvk, ref.namespace, ref.name) not in copies:
                return False
        return True

    def snapshot(self) -> DC.Snapshot:
        """The clusters as their caches hold them (each the same frozen nodes while nothing
        changed on it) and what is committed; the solver takes the committed demand from
        `committed` (no per-cluster totals are added here: a round stays proportional to
        what changed)."""
        committed = self.committed()
        return DC.Snapshot(Fleet(tuple(self.caches[n].cluster() for n in self.usable())), tuple(committed))
