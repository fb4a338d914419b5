"""Reading back what placer placed (every placer-managed workload on every live cluster,
concurrently; `read_live`: inventory + pods + placed objects in one pass per cluster) and the
capacity it still promises (placed objects whose pods are not all bound still hold their demand)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from placer.definitions.catalog import Catalog
from placer.definitions.interpret import Interpreter, interpret
from placer.fleetview.inventory import (
    ACTIVE_PODS,
    error_reason,
    list_runtime_classes,
    list_storage_classes,
    snapshot,
    with_topology,
)
from placer.inputs.clusters_file import ClusterEntry, as_entry
from placer.kube import Kube, run_concurrently
from placer.model.errors import Forbidden, NotFound, PlacerError
from placer.model.fleet import Cluster, kind_key
from placer.model.labels import MANAGED_SELECTOR, workload_label
from placer.model.names import GROUP, ORIGIN, PLAN, WORKLOAD
from placer.model.podspec import DEFAULT_GPU_RESOURCES, pod_requests
from placer.model.quantity import add
from placer.model.workload import Instance, Phase, PlacementGroup, Workload, WorkloadRef

if TYPE_CHECKING:
    from placer.kube import KubeClient  # the client library loads when a client is made


@dataclass(frozen=True)
class PlacedRef:
    """A workload object placer created on a cluster, as read from that cluster."""

    cluster: str
    object: Mapping[str, Any]

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.object.get("metadata") or {}

    @property
    def ref(self) -> WorkloadRef:
        """The copy has the identity of its source (same group, kind, namespace, name)."""
        return WorkloadRef.of(self.object)

    @property
    def key(self) -> str:
        return str(self.ref)

    @property
    def plan(self) -> str | None:
        return (self.meta.get("annotations") or {}).get(PLAN)

    @property
    def group(self) -> str | None:
        return (self.meta.get("annotations") or {}).get(GROUP)

    @property
    def origin(self) -> str | None:
        return (self.meta.get("annotations") or {}).get(ORIGIN)


class Placed(dict):
    """WorkloadRef -> PlacedRef, plus the clusters that could not be read
    (`unreachable`: cluster -> reason) and any workload found on more than one cluster
    (`duplicates`: ref -> every PlacedRef)."""

    def __init__(self, refs: Mapping[WorkloadRef, PlacedRef] | None = None, *,
                 unreachable: Mapping[str, str] | None = None,
                 duplicates: Mapping[WorkloadRef, Sequence[PlacedRef]] | None = None):
        super().__init__(refs or {})
        self.unreachable: dict[str, str] = dict(unreachable or {})
        self.duplicates: dict[WorkloadRef, list[PlacedRef]] = {k: list(v) for k, v in (duplicates or {}).items()}

    def on(self, cluster: str) -> list[PlacedRef]:
        return [r for r in self.values() if r.cluster == cluster]


def managed_objects(client: KubeClient, catalog: Catalog) -> list[dict[str, Any]]:
    """Every object labelled placer.dev/managed=true of every catalog kind the cluster
    serves (kinds it does not serve are skipped), all namespaces."""
    found: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for api_version, kind in catalog.kinds():
        try:
            res = client.resource_for(api_version, kind)
        except NotFound:
            continue
        if (res.group, res.plural) in seen:
            continue
        seen.add((res.group, res.plural))
        for item in client.list(res, label_selector=MANAGED_SELECTOR).items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            if WORKLOAD in ((item.get("metadata") or {}).get("labels") or {}):
                found.append(item)
    return found


def index_placed(per_cluster: Mapping[str, Sequence[Mapping[str, Any]]],
                 unreachable: Mapping[str, str] | None = None, order: Sequence[str] = ()) -> Placed:
    """Index objects read from each cluster by WorkloadRef (clusters in `order` first)."""
    refs: dict[WorkloadRef, PlacedRef] = {}
    dups: dict[WorkloadRef, list[PlacedRef]] = {}
    names = list(order) + [c for c in per_cluster if c not in order]
    for cluster in names:
        for obj in per_cluster.get(cluster, ()):
            ref = PlacedRef(cluster, obj)
            if ref.ref in refs:
                dups.setdefault(ref.ref, [refs[ref.ref]]).append(ref)
                continue
            refs[ref.ref] = ref
    return Placed(refs, unreachable=unreachable, duplicates=dups)


def _live_entries(entries: Iterable[Any]) -> list[ClusterEntry]:
    return [e for e in map(as_entry, entries) if e.context]


def client_for(kube: Kube, entry: Any) -> KubeClient:
    entry = as_entry(entry)
    return kube.client(entry.context, cluster=entry.name)


def find_placed(kube: Kube, entries: Iterable[Any], catalog: Catalog) -> Placed:
    """Every workload placer placed, on every live cluster of `entries`, read concurrently.
    A cluster that cannot be read is listed in `.unreachable`, never raised."""
    live = _live_entries(entries)

    def scan(entry: Any) -> list[dict[str, Any]] | PlacerError:
        try:
            return managed_objects(client_for(kube, entry), catalog)
        except PlacerError as e:
            return e
    results = run_concurrently({e.name: partial(scan, e) for e in live},
                               max_workers=kube.max_workers)
    ok = {n: r for n, r in results.items() if not isinstance(r, PlacerError)}
    bad = {n: error_reason(r) for n, r in results.items() if isinstance(r, PlacerError)}
    return index_placed(ok, bad, [e.name for e in live])


@dataclass(frozen=True)
class LiveState:
    """One consistent read of the live clusters: their snapshots (with `reserved` filled
    in), every pod per cluster, what placer placed, and what of it is still promised."""

    clusters: Mapping[str, Cluster]
    pods: Mapping[str, Sequence[Mapping[str, Any]]]
    placed: Placed
    promised: Sequence[tuple[PlacementGroup, str]]


def read_cluster_state(client: KubeClient, name: str, catalog: Catalog, *,
                       labels: Mapping[str, str] | None = None, context: str | None = None
                       ) -> tuple[Cluster, list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes, non-terminated pods (as the inventory reads them) and placer's objects."""
    nodes = client.list("nodes").items
    pods = list(client.list("pods", field_selector=ACTIVE_PODS).items)
    classes = list_runtime_classes(client)
    storage = list_storage_classes(client)
    managed = managed_objects(client, catalog)
    cluster = snapshot(name, nodes, pods, labels=labels, context=context, runtime_class_objs=classes,
                       storage_class_objs=storage)
    return with_api_facts(cluster, client, catalog), pods, managed


def with_api_facts(cluster: Cluster, client: KubeClient, catalog: Catalog) -> Cluster:
    """The cluster with what it accepts (`Cluster.serves`, `.priority_classes`, `.namespaces`): the
    catalog kinds it serves (discovery, cached by `managed_objects`' lookups), its
    PriorityClasses and namespaces (None where we may not read them)."""
    served = frozenset(kind_key(av, kind) for av, kind in catalog.kinds()
                       if any(r.kind == kind for r in client.group_version(av)))
    try:
        pcs = client.list(client.resource_for("scheduling.k8s.io/v1", "PriorityClass")).items
        priority_classes: frozenset[str] | None = frozenset((o.get("metadata") or {}).get("name", "") for o in pcs)
    except (NotFound, Forbidden):
        priority_classes = None
    try:
        namespaces: frozenset[str] | None = frozenset(
            (o.get("metadata") or {}).get("name", "") for o in client.list("namespaces").items)
    except Forbidden:
        namespaces = None
    return dataclasses.replace(cluster, serves=served, priority_classes=priority_classes, namespaces=namespaces)


def read_live(kube: Kube, entries: Iterable[Any], catalog: Catalog, *,
              gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
              interpreter: Interpreter | None = None) -> LiveState:
    """Read every live cluster of `entries` concurrently. A cluster that cannot be read
    comes back with `.error` set (and no nodes), never as an exception. `interpreter`: a
    long-lived caller's memory of interpretations (the daemon's), else none."""
    live = _live_entries(entries)

    def one(entry: Any):
        name, ctx, labels = entry.name, entry.context, dict(entry.labels or {})
        try:
            client = client_for(kube, entry)
            cluster, pods, managed = read_cluster_state(client, name, catalog, labels=labels, context=ctx)
            return with_topology(cluster, client, getattr(entry, "topology", None)), pods, managed
        except PlacerError as e:
            return Cluster(name=name, labels=labels, context=ctx, error=error_reason(e)), [], None
    results = run_concurrently({e.name: partial(one, e) for e in live},
                               max_workers=kube.max_workers)
    order = [e.name for e in live]
    clusters = {n: results[n][0] for n in order}
    pods = {n: results[n][1] for n in order}
    placed = index_placed({n: results[n][2] for n in order if results[n][2] is not None},
                          {n: clusters[n].error for n in order if clusters[n].error}, order)
    promises = promised(placed, pods, catalog, gpu_resources=gpu_resources, interpreter=interpreter)
    reserved = reserved_by_cluster(promises)
    clusters = {n: dataclasses.replace(c, reserved=reserved.get(n, {})) for n, c in clusters.items()}
    return LiveState(clusters, pods, placed, promises)


# --- capacity already promised -----------------------------------------------------------

_TERMINAL = Phase.COMPLETED, Phase.FAILED


def instance_pods(inst: Instance, w: Workload, pods: Sequence[Mapping[str, Any]], many: bool,
                   cache: dict[int, dict[str, int]]) -> list[Mapping[str, Any]]:
    """The pods of one instance: by the definition's pod selector; without one, the pods
    carrying the workload's label, split between instances by their requests."""
    if inst.has_selector:
        return [p for p in pods if inst.selects((p.get("metadata") or {}).get("labels") or {})]
    tag = workload_label(w.ref)
    tagged = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(WORKLOAD) == tag]
    if not many:
        return tagged
    out = []
    for p in tagged:
        req = cache.get(id(p))
        if req is None:
            req = cache[id(p)] = pod_requests((p.get("spec") or {}))
        if req == dict(inst.pod.requests):
            out.append(p)
    return out


def _covered(pod: Mapping[str, Any]) -> bool:
    """A pod whose demand the live inventory already accounts for (bound and running),
    or that is done and will not come back (Succeeded)."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return True
    return bool((pod.get("spec") or {}).get("nodeName")) and phase != "Failed"


def outstanding(w: Workload, pods: Sequence[Mapping[str, Any]]) -> Workload | None:
    """`w` reduced to the pods it still needs that are not bound yet, or None when it
    needs nothing more (finished, or every pod bound)."""
    if w.phase in _TERMINAL:
        return None
    ns_pods = [p for p in pods if ((p.get("metadata") or {}).get("namespace") or "default") == w.namespace]
    cache: dict[int, dict[str, int]] = {}
    many = len(w.instances) > 1
    instances = []
    for inst in w.instances:
        covered = sum(1 for p in instance_pods(inst, w, ns_pods, many, cache) if _covered(p))
        left = max(0, inst.pods - covered)
        if left:
            instances.append(dataclasses.replace(inst, pods=left))
    if not instances:
        return None
    # gangs are about co-scheduling the whole set; what is left is already placed
    return dataclasses.replace(w, instances=tuple(instances), gangs=())


def promised(placed: Mapping[WorkloadRef, PlacedRef], pods_by_cluster: Mapping[str, Sequence[Mapping[str, Any]]],
             catalog: Catalog, *, gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
             interpreter: Interpreter | None = None) -> list[tuple[PlacementGroup, str]]:
    """Committed demand for the solver: every placed workload whose pods are not all bound
    yet, reduced to its pods that are not bound (bound pods are in the inventory's `used`
    already), as a one-workload group on its cluster. Objects placer cannot interpret
    any more (definition removed) promise nothing."""
    out = []
    for key, ref in sorted(placed.items(), key=lambda kv: (kv[1].cluster, kv[0])):
        try:
            source = f"{ref.cluster}/{key}"
            w = (interpreter(ref.object, source) if interpreter is not None
                 else interpret(ref.object, catalog, gpu_resources=gpu_resources, source=source))
        except PlacerError:
            continue
        rest = outstanding(w, pods_by_cluster.get(ref.cluster, ()))
        if rest is not None:
            out.append((PlacementGroup(f"promised:{ref.cluster}/{key}", (rest,)), ref.cluster))
    return out


def reserved_by_cluster(promises: Iterable[tuple[PlacementGroup, str]]) -> dict[str, dict[str, int]]:
    """Totals of promised demand per cluster (what `placer clusters` shows as reserved)."""
    out: dict[str, dict[str, int]] = {}
    for g, cluster in promises:
        total = out.setdefault(cluster, {})
        for w in g.workloads:
            add(total, w.resources)
    return out
