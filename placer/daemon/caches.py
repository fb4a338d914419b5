"""Per-cluster caches fed by watches, and the frozen snapshot each planning round reads.

For every target cluster: its nodes, its pods (slimmed to what capacity needs: node,
phase, labels and the fields that decide requests), its RuntimeClasses, and placer's own
copies (label placer.dev/managed=true) of every catalog kind. Used capacity is kept per
node incrementally (each pod's contribution added and taken away as it changes), frozen
`Node`s are rebuilt only for nodes that changed, and what placed copies still promise is
interpreted once per (copy, namespace's pods) version. No LIST on the steady path: a
cache relists only when its watch starts, on 410 Gone, and once for a new leader.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from placer import actuate as A
from placer.actuate.steer import ANN_PINNED, is_gated
from placer.daemon.informer import Informer
from placer.fleetview.inventory import node_from_object, runtime_class_from_object, storage_class_from_object
from placer.inputs.clusters_file import with_policy
from placer.kube import KubeClient, Resource, run_concurrently
from placer.model.errors import NotFound, PlacerError
from placer.model.fleet import Cluster, Node, kind_key
from placer.model.podspec import pod_requests
from placer.model.quantity import add
from placer.model.workload import PlacementGroup, Workload, WorkloadRef

log = logging.getLogger("placer.daemon")

NODE = Resource("", "v1", "Node", "nodes", False)
POD = Resource("", "v1", "Pod", "pods", True)
# the built-in kinds a cache also watches, as every supported Kubernetes serves them: used
# when the cluster did not answer discovery (a 404 on the list then means "not served")
BUILTIN = {("node.k8s.io/v1", "RuntimeClass"): Resource("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", False),
           ("scheduling.k8s.io/v1", "PriorityClass"): Resource("scheduling.k8s.io", "v1", "PriorityClass",
                                                               "priorityclasses", False),
           ("storage.k8s.io/v1", "StorageClass"): Resource("storage.k8s.io", "v1", "StorageClass", "storageclasses",
                                                           False)}
TERMINAL = ("Succeeded", "Failed")             # pod phases that hold no node
GVK = tuple[str, str]


def slim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What capacity and promises need of a pod, nothing more (memory at 50,000 pods)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    keep = {k: spec[k] for k in ("nodeName", "overhead", "resources") if spec.get(k)}
    if is_gated(pod):                 # what pinning reads and narrows (placer/daemon/pin.py)
        keep.update({k: spec[k] for k in ("schedulingGates", "affinity") if spec.get(k)})
    for k in ("containers", "initContainers"):
        if spec.get(k):
            keep[k] = [{"resources": c.get("resources") or {}, **({"restartPolicy": c["restartPolicy"]}
                                                                 if c.get("restartPolicy") else {})}
                       for c in spec[k]]
    pinned = (meta.get("annotations") or {}).get(ANN_PINNED)
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                         "labels": meta.get("labels") or {}, "resourceVersion": meta.get("resourceVersion"),
                         **({"annotations": {ANN_PINNED: pinned}} if pinned else {})},
            "spec": keep, "status": {"phase": (pod.get("status") or {}).get("phase")}}


class Gated:
    """The pods waiting on the pin gate (`steer: pinned`, placer/daemon/pin.py), slim, as the
    pod watch last saw them; read from the daemon's loop (`pods`: one C-level copy)."""

    def __init__(self) -> None:
        self._pods: dict[tuple[str, str], dict] = {}

    def seen(self, key: tuple[str, str], obj: dict | None) -> None:
        if obj is not None and is_gated(obj):
            self._pods[key] = obj
        else:
            self._pods.pop(key, None)

    def pods(self) -> list[dict]:
        return list(self._pods.values())


@dataclass
class _Promise:
    version: tuple[str, int]                 # (copy resourceVersion, namespace pods version)
    rest: Workload | None                    # what is not bound yet, None when nothing


@dataclass
class ClusterCache:
    """One target cluster, as its watches tell it."""

    name: str
    labels: Mapping[str, str]
    context: str | None
    client: KubeClient
    kinds: Mapping[GVK, Resource]             # catalog kinds this cluster serves (copies are watched)
    stop: threading.Event
    on_error: Callable[[PlacerError], None]
    on_copy: Callable[[GVK, tuple[str, str]], None]     # a copy changed (reconcile its workload)
    on_capacity: Callable[[], None]                      # capacity may have been freed (replan the unplaced)
    retry_delay: float = 1.0
    topology: tuple[str, ...] = ()
    kinds_known: bool = True                  # False: `kinds` are the hub's (the target did not answer)
    entry: Any = None                         # its clusters-file entry: `preference` and `cost` (issue 21)
    degraded: Callable[[], str | None] = lambda: None    # why the cluster is degraded (daemon/health.py)
    nodes: Informer = field(init=False)
    pods: Informer = field(init=False)
    runtime_classes: Informer | None = field(init=False, default=None)
    storage_classes: Informer | None = field(init=False, default=None)
    priority_classes: Informer | None = field(init=False, default=None)
    copies: dict[GVK, Informer] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._base: dict[str, Node] = {}                 # node name -> Node without usage
        self._used: dict[str, dict[str, int]] = {}       # node name -> requests of its bound pods
        self._frozen: dict[str, Node] = {}
        self._dirty: set[str] = set()
        self._nodes_tuple: tuple[Node, ...] = ()
        self._contrib: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}
        self._ns_pods: dict[str, dict[str, dict]] = {}
        self._ns_version: dict[str, int] = {}
        self._promises: dict[tuple[GVK, str, str], _Promise] = {}
        self._generations: dict[tuple[GVK, str, str], Any] = {}   # each copy's last seen generation
        self._req_cache: dict[str, dict[str, int]] = {}
        self.gated = Gated()                            # pods carrying the pin gate (daemon/pin.py)
        self._left_out = _LeftOut(self.stop, lambda: self.on_capacity())
        self.nodes = self._informer(NODE, None, self._on_node)
        self.pods = self._informer(POD, None, self._on_pod, transform=slim_pod)
        self.nodes.on_recover = self.pods.on_recover = self.on_capacity      # back: plan on it again
        for gvk, res in self.kinds.items():
            self.copies[gvk] = self._informer(res, A.MANAGED_SELECTOR, self._on_copy, gvk=gvk)
        self._true: dict[str, int] = {}            # checks found true (`_once`), for how many kinds' copies
        # not served, not readable or not reachable now: overhead not counted, classes not checked
        self.runtime_classes = self._optional("node.k8s.io/v1", "RuntimeClass")
        self.priority_classes = self._optional("scheduling.k8s.io/v1", "PriorityClass")
        self.storage_classes = self._optional("storage.k8s.io/v1", "StorageClass")

    def _optional(self, api_version: str, kind: str) -> Informer | None:
        try:
            # a cluster that did not answer discovery is not asked again here (it would hold the start)
            res = self.client.resource_for(api_version, kind) if self.kinds_known else BUILTIN[(api_version, kind)]
            inf = self._informer(res, None, lambda *_: self.on_capacity())
        except PlacerError:
            return None
        inf.optional = True
        return inf

    def _informer(self, res: Resource, selector: str | None, handler, *, transform=None,
                  gvk: GVK | None = None) -> Informer:
        return Informer(self.client, res, namespace=None, label_selector=selector, handler=handler,
                        cluster=self.name, stop=self.stop, on_error=self.on_error, retry_delay=self.retry_delay,
                        transform=transform, gvk=gvk)

    def add_kind(self, gvk: GVK, res: Resource) -> None:
        """Watch placer's copies of a kind this cluster serves since the start (a CRD
        installed later); copy-on-write, as other threads iterate these maps."""
        inf = self._informer(res, A.MANAGED_SELECTOR, self._on_copy, gvk=gvk)
        self.kinds = {**self.kinds, gvk: res}
        self.copies = {**self.copies, gvk: inf}
        inf.start()

    def informers(self) -> list[Informer]:
        out = [self.nodes, self.pods, *self.copies.values()]
        # `is not None`: an Informer with nothing cached has len 0, so it is falsy
        return out + [i for i in (self.runtime_classes, self.priority_classes, self.storage_classes)
                      if i is not None]

    def start(self) -> None:
        for inf in self.informers():
            inf.start()

    @property
    def synced(self) -> bool:
        # the optional ones (Runtime-, Priority-, StorageClasses) listed once, or given up on
        optional = (self.runtime_classes, self.priority_classes, self.storage_classes)
        return self._once("synced", lambda: all(i.synced.is_set() for i in (self.nodes, self.pods,
                                                                           *self.copies.values())) and
                          all(i.tried.is_set() for i in optional if i is not None))

    @property
    def tried(self) -> bool:
        """Every watch has made its first list (answered or failed)."""
        return self._once("tried", lambda: all(i.tried.is_set() for i in self.informers()))

    def _once(self, what: str, check: Callable[[], bool]) -> bool:
        """An informer's events are never cleared: a check found true holds while the same
        informers are watched (a kind's copies are watched once it appears, never removed).
        Asked several times a step, 20 clusters' informers took ~1 ms a step."""
        if self._true.get(what) == len(self.copies):
            return True
        ok = check()
        if ok:
            self._true[what] = len(self.copies)
        return ok

    @property
    def error(self) -> str | None:
        why = self.degraded()
        return (f"degraded: {why}" if why else None) or self.nodes.error or self.pods.error or self._left_out.why

    def fail(self, why: str, seconds: float) -> None:
        """Leave the cluster out of planning for a while (an apply could not reach it)."""
        self._left_out.start(why, seconds)

    # --- watch handlers (informer threads) ---------------------------------------------

    def _on_node(self, inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
        name = key[1]
        with self._lock:
            old = self._base.get(name)
            if obj is None:
                self._base.pop(name, None)
                self._frozen.pop(name, None)
                changed = old is not None
            else:
                new = node_from_object(obj)
                changed = new != old
                if changed:
                    self._base[name] = new
                    self._dirty.add(name)
            if changed:
                self._dirty.add(name)
        if changed and inf.synced.is_set():
            self.on_capacity()

    def _on_pod(self, inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
        """Usage follows bound, non-terminal pods. Only a pod that stops using its node (or uses
        less) frees capacity: a newly bound pod only turns a promise into usage, and a status
        update of a running pod changes nothing a round reads (its node stays the same object)."""
        ns = key[0]
        with self._lock:
            old = self._contrib.get(key)
            new = None
            pods = self._ns_pods.setdefault(ns, {})
            self.gated.seen(key, obj)
            if obj is None:
                pods.pop(key[1], None)
            else:
                pods[key[1]] = obj
                spec = obj.get("spec") or {}
                where = spec.get("nodeName")
                if where and (obj.get("status") or {}).get("phase") not in TERMINAL:
                    new = (where, self._requests(spec))
            if new != old:
                if old is not None:
                    self._sub(*old)
                    del self._contrib[key]
                if new is not None:
                    self._contrib[key] = new
                    self._add(*new)
            self._ns_version[ns] = self._ns_version.get(ns, 0) + 1
        if old is not None and new != old and inf.synced.is_set():
            self.on_capacity()

    def _requests(self, spec: Mapping[str, Any]) -> dict[str, int]:
        # pods of one workload share their resources exactly: parse each shape once
        k = repr((spec.get("containers"), spec.get("initContainers"), spec.get("overhead"), spec.get("resources")))
        hit = self._req_cache.get(k)
        if hit is None:
            if len(self._req_cache) > 10_000:
                self._req_cache.clear()
            hit = self._req_cache[k] = {**pod_requests(spec), "pods": 1}
        return hit

    def _add(self, node: str, req: Mapping[str, int]) -> None:
        add(self._used.setdefault(node, {}), req)
        self._dirty.add(node)

    def _sub(self, node: str, req: Mapping[str, int]) -> None:
        used = self._used.get(node, {})
        for r, q in req.items():
            used[r] = used.get(r, 0) - q
        self._dirty.add(node)

    def _on_copy(self, inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
        """A copy gone frees what it promised, and so may a copy whose spec changed (its
        generation); a new copy, or a status update, frees nothing."""
        k = (inf.gvk, key[0], key[1])
        with self._lock:
            if obj is None:
                self._promises.pop(k, None)
                self._generations.pop(k, None)
                freed = True
            else:
                generation = (obj.get("metadata") or {}).get("generation")
                before = self._generations.get(k)
                self._generations[k] = generation
                freed = before is not None and before != generation
        self.on_copy(inf.gvk, key)
        if freed and inf.synced.is_set():
            self.on_capacity()

    # --- what a round reads -------------------------------------------------------------

    def cluster(self, without: Iterable[tuple[str, str]] = ()) -> Cluster:
        """The frozen snapshot of this cluster (`without`: pods whose usage is left out,
        e.g. a workload's own pods when checking whether its new version fits)."""
        if self.error:
            return with_policy(Cluster(self.name, dict(self.labels), context=self.context, error=self.error),
                               self.entry)
        with self._lock:
            if self._dirty:
                changed = False
                for name in self._dirty:
                    base = self._base.get(name)
                    if base is None:
                        changed = True                    # gone
                        continue
                    used = {r: q for r, q in self._used.get(name, {}).items() if q}
                    fresh = dataclasses.replace(base, used=used)
                    if self._frozen.get(name) != fresh:    # else the same object stays: unchanged
                        self._frozen[name] = fresh
                        changed = True
                self._dirty.clear()
                if changed:
                    self._nodes_tuple = tuple(self._frozen[n] for n in sorted(self._frozen))
            nodes = self._nodes_tuple
            skip = [self._contrib[k] for k in without if k in self._contrib]
        if skip:
            less: dict[str, dict[str, int]] = {}
            for node, req in skip:
                for r, q in req.items():
                    less.setdefault(node, {})[r] = less.get(node, {}).get(r, 0) + q
            nodes = tuple(dataclasses.replace(n, used={r: q - less[n.name].get(r, 0) for r, q in n.used.items()})
                          if n.name in less else n for n in nodes)
        classes = None
        if self.runtime_classes is not None and self.runtime_classes.synced.is_set():
            classes = {rc.name: rc for rc in map(runtime_class_from_object, self.runtime_classes.items())}
        storage = None
        if self.storage_classes is not None and self.storage_classes.synced.is_set():
            storage = {sc.name: sc for sc in map(storage_class_from_object, self.storage_classes.items())}
        serves = frozenset(kind_key(*gvk) for gvk in self.kinds) if self.kinds_known else None
        pcs = self.priority_classes
        priority = frozenset(o["metadata"]["name"] for o in pcs.items()) \
            if pcs is not None and pcs.synced.is_set() else None
        return with_policy(Cluster(self.name, dict(self.labels), nodes, context=self.context, runtime_classes=classes,
                                   topology=self.topology, storage_classes=storage, serves=serves,
                                   priority_classes=priority), self.entry)

    def copy(self, gvk: GVK, namespace: str, name: str) -> dict | None:
        inf = self.copies.get(gvk)
        return inf.get(namespace, name) if inf else None

    def pods_in(self, namespace: str) -> list[dict]:
        with self._lock:
            return list(self._ns_pods.get(namespace, {}).values())

    def pod_keys(self, namespace: str, select: Callable[[Mapping[str, str]], bool]) -> list[tuple[str, str]]:
        with self._lock:
            return [(namespace, n) for n, p in self._ns_pods.get(namespace, {}).items()
                    if select((p.get("metadata") or {}).get("labels") or {})]

    def promises(self, interpret: Callable[[Mapping[str, Any], str], Workload],
                 seen: set[tuple[GVK, str, str]] | None = None) -> list[tuple[PlacementGroup, str]]:
        """Placed copies whose pods are not all bound yet, reduced to what is not bound
        (bound pods are in the nodes' usage already): committed demand for the solver.
        `seen` gets every copy looked at (the watches keep adding them meanwhile)."""
        out = []
        for gvk, inf in self.copies.items():
            for obj in inf.items():
                meta = obj.get("metadata") or {}
                ns, name = meta.get("namespace") or "", meta.get("name") or ""
                if seen is not None:
                    seen.add((gvk, ns, name))
                if A.WORKLOAD not in (meta.get("labels") or {}):
                    continue
                version = (str(meta.get("resourceVersion")), self._ns_version.get(ns, 0))
                k = (gvk, ns, name)
                p = self._promises.get(k)
                if p is None or p.version != version:
                    p = _Promise(version, _outstanding(self.name, {**obj, "apiVersion": gvk[0], "kind": gvk[1]},
                                                       interpret, self.pods_in))
                    with self._lock:
                        self._promises[k] = p
                if p.rest is not None:
                    ref = WorkloadRef.of({"apiVersion": gvk[0], "kind": gvk[1], "metadata": meta})
                    out.append((PlacementGroup(f"promised:{self.name}/{ref}", (p.rest,)), self.name))
        return out

    def running(self, w: Workload) -> int:
        """Pods of the workload that are Running or Succeeded (by the definition's pod
        selectors, else by placer's workload label)."""
        return _running(w, self.pods_in(w.namespace))

    def resync_copies(self) -> None:
        """LIST placer's copies now (a new leader, before it plans)."""
        run_concurrently({gvk: inf.resync for gvk, inf in self.copies.items()}, max_workers=8)


def _outstanding(cluster: str, obj: Mapping[str, Any], interpret, pods_in: Callable[[str], list[dict]]
                 ) -> Workload | None:
    try:
        w = interpret(obj, f"{cluster}/{WorkloadRef.of(obj)}")
    except PlacerError:
        return None                           # a copy placer cannot read any more promises nothing
    return A.outstanding(w, pods_in(w.namespace))


def selects_pods_of(w: Workload) -> Callable[[Mapping[str, str]], bool]:
    """Whether a pod's labels make it one of the workload's pods: placer's workload label, or
    one of the definition's own pod selectors."""
    tag = A.workload_label(w.ref)
    return lambda labels: labels.get(A.WORKLOAD) == tag or any(
        i.has_selector and i.selects(labels) for i in w.instances)


def _running(w: Workload, pods: Iterable[dict]) -> int:
    mine = selects_pods_of(w)
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Succeeded")
               and mine((p.get("metadata") or {}).get("labels") or {}))


class _LeftOut:
    """Why a cluster is left out of planning, and until when (set by the executor after a
    refused connection). When the while is over the unplaced are planned again: the
    cluster's watches may have recovered (their own wake-up) while it was still left out."""

    def __init__(self, stop: threading.Event, on_over: Callable[[], None]):
        self._stop, self._on_over = stop, on_over
        self._why: str | None = None
        self._until = 0.0

    @property
    def why(self) -> str | None:
        return self._why if time.monotonic() < self._until else None

    def start(self, why: str, seconds: float) -> None:
        self._why, self._until = why, time.monotonic() + seconds
        timer = threading.Timer(seconds, self._over)
        timer.daemon = True
        timer.start()

    def _over(self) -> None:
        if not self._stop.is_set() and time.monotonic() >= self._until:
            self._on_over()


def served_kinds(client: KubeClient, kinds: Iterable[GVK], fallback: Mapping[GVK, Resource]
                 ) -> tuple[dict[GVK, Resource], str | None]:
    """The catalog kinds a target serves; when it cannot be asked now, the hub's shapes
    (its watches then retry until it answers) and why."""
    out: dict[GVK, Resource] = {}
    for gvk in kinds:
        try:
            out[gvk] = client.resource_for(*gvk)
        except NotFound:
            continue
        except PlacerError as e:
            return {g: fallback[g] for g in kinds if g in fallback}, e.message
    return out, None


__all__ = ["ClusterCache", "served_kinds", "slim_pod"]
