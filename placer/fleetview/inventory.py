"""Live inventory: what each cluster's nodes offer and what bound pods already take.

The I/O half of the fleet: it lists nodes and non-terminated pods of each cluster (all
clusters concurrently) and freezes them into `placer.model.fleet.Cluster` values. A cluster
that cannot be read comes back with `.error` set and no nodes, never as an exception,
so one bad cluster never hides the others.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol, Sequence

from placer.model.errors import Forbidden, InputError, KubeError, NotFound, PlacerError, ServerError, Unreachable
from placer.model.fleet import Cluster, Node, RuntimeClass, StorageClass, Taint
from placer.model.plan import number
from placer.model.podspec import DEFAULT_GPU_RESOURCES, gpu_count, pod_requests
from placer.model.quantity import add, canonical

if TYPE_CHECKING:           # `placer clusters` imports this module at CLI start: the client loads when used
    from placer.kube import Kube, KubeClient

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
_TERMINAL = frozenset({"Succeeded", "Failed"})


class ClusterEntry(Protocol):
    """What inventory needs of a clusters-file entry."""

    @property
    def name(self) -> str: ...

    @property
    def context(self) -> str | None: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


# --- objects -> snapshot -----------------------------------------------------------

def node_from_object(obj: Mapping[str, Any], used: Mapping[str, int] | None = None) -> Node:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allocatable = {r: canonical(r, q) for r, q in (status.get("allocatable") or {}).items()}
    # the scheduler lets a node that reports no pod capacity take no pod at all
    allocatable.setdefault("pods", 0)
    taints = tuple(Taint(t.get("key", ""), t.get("value") or "", t.get("effect") or "NoSchedule")
                   for t in spec.get("taints") or ())
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or ())
    return Node(name=meta.get("name", ""), allocatable=allocatable, used=dict(used or {}),
                labels=dict(meta.get("labels") or {}), taints=taints,
                unschedulable=bool(spec.get("unschedulable")), ready=ready)


def usage_by_node(pods: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Effective requests (with overhead) of bound, non-terminated pods, per node, and the
    pod slot each takes (the scheduler counts them against the node's `pods`)."""
    used: dict[str, dict[str, int]] = {}
    cache: dict[str, dict[str, int]] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in _TERMINAL:
            continue
        slot = used.setdefault(node, {})
        add(slot, _requests_cached(spec, cache))
        slot["pods"] = slot.get("pods", 0) + 1
    return used


def _requests_cached(spec: Mapping[str, Any], cache: dict[str, dict[str, int]]) -> dict[str, int]:
    # Pods of one workload share their resources exactly; parsing quantities is the
    # costly part, so key on the few fields that decide the requests.
    key = repr((_resources_of(spec.get("containers")), _resources_of(spec.get("initContainers")),
                spec.get("overhead"), spec.get("resources")))
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = pod_requests(spec)
    return hit


def _resources_of(containers: Any) -> tuple:
    return tuple((c.get("resources"), c.get("restartPolicy")) for c in containers or ())


def runtime_class_from_object(obj: Mapping[str, Any]) -> RuntimeClass:
    fixed = (obj.get("overhead") or {}).get("podFixed") or {}
    scheduling = obj.get("scheduling") or {}
    return RuntimeClass((obj.get("metadata") or {}).get("name", ""), {r: canonical(r, q) for r, q in fixed.items()},
                        {str(k): str(v) for k, v in (scheduling.get("nodeSelector") or {}).items()},
                        tuple(scheduling.get("tolerations") or ()))


DEFAULT_STORAGE_CLASS = "storageclass.kubernetes.io/is-default-class"


def storage_class_from_object(obj: Mapping[str, Any]) -> StorageClass:
    meta = obj.get("metadata") or {}
    return StorageClass(meta.get("name", ""), (meta.get("annotations") or {}).get(DEFAULT_STORAGE_CLASS) == "true")


def snapshot(name: str, node_objs: Iterable[Mapping[str, Any]], pod_objs: Iterable[Mapping[str, Any]],
             *, labels: Mapping[str, str] | None = None, context: str | None = None,
             runtime_class_objs: Iterable[Mapping[str, Any]] | None = None,
             storage_class_objs: Iterable[Mapping[str, Any]] | None = None) -> Cluster:
    used = usage_by_node(pod_objs)
    nodes = tuple(sorted((node_from_object(n, used.get((n.get("metadata") or {}).get("name", "")))
                          for n in node_objs), key=lambda n: n.name))
    classes = None if runtime_class_objs is None else {
        rc.name: rc for rc in map(runtime_class_from_object, runtime_class_objs)}
    storage = None if storage_class_objs is None else {
        sc.name: sc for sc in map(storage_class_from_object, storage_class_objs)}
    return Cluster(name=name, labels=dict(labels or {}), nodes=nodes, context=context, runtime_classes=classes,
                   storage_classes=storage)


def list_runtime_classes(client: KubeClient) -> Sequence[dict[str, Any]] | None:
    """The cluster's RuntimeClasses; None when it does not serve them or we may not read
    them (their overhead is then not counted)."""
    try:
        return client.list("runtimeclasses").items
    except (NotFound, Forbidden):
        return None


def list_storage_classes(client: KubeClient) -> Sequence[dict[str, Any]] | None:
    """The cluster's StorageClasses; None when it does not serve them or we may not read
    them (claims are then not checked)."""
    try:
        return client.list("storageclasses").items
    except (NotFound, Forbidden):
        return None


# Kueue serves its Topology kind at these group versions (newest first)
KUEUE_TOPOLOGY_VERSIONS = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1alpha1")


def topology_levels(topology_objs: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The levels of Kueue Topology objects (`spec.levels[].nodeLabel`, widest first). A
    cluster may hold several (one per ResourceFlavor): their levels merge in the order of
    the longest first, each key once."""
    lists = []
    for obj in topology_objs:
        levels = ((obj.get("spec") or {}).get("levels")) or []
        keys = [lv.get("nodeLabel") for lv in levels if isinstance(lv, Mapping)]
        lists.append([k for k in keys if isinstance(k, str) and k])
    lists.sort(key=lambda ks: -len(ks))
    return tuple(dict.fromkeys(k for ks in lists for k in ks))


def read_kueue_topology(client: KubeClient) -> tuple[str, ...]:
    """The cluster's topology levels from its Kueue Topology objects; () when it serves
    none or we may not read them."""
    for gv in KUEUE_TOPOLOGY_VERSIONS:
        res = next((r for r in client.group_version(gv) if r.kind == "Topology"), None)
        if res is None:
            continue
        try:
            return topology_levels(client.list(res).items)
        except (NotFound, Forbidden):
            return ()
    return ()


# --- live --------------------------------------------------------------------------

def read_cluster(client: KubeClient, name: str, *, labels: Mapping[str, str] | None = None,
                 context: str | None = None, topology: Iterable[str] | None = None) -> Cluster:
    """List nodes and active pods of one cluster; errors propagate. `topology`: the levels
    the clusters file gives; None reads them from the cluster's Kueue Topology objects."""
    nodes = client.list("nodes")
    pods = client.list("pods", field_selector=ACTIVE_PODS)
    cluster = snapshot(name, nodes.items, pods.items, labels=labels, context=context,
                       runtime_class_objs=list_runtime_classes(client),
                       storage_class_objs=list_storage_classes(client))
    return with_topology(cluster, client, topology)


def with_topology(cluster: Cluster, client: KubeClient, given: Iterable[str] | None) -> Cluster:
    """`cluster` with its topology levels: those the clusters file gives, else those of
    its Kueue Topology objects (a read error there leaves it without levels)."""
    try:
        levels = tuple(given) if given is not None else read_kueue_topology(client)
    except KubeError:
        levels = ()
    return dataclasses.replace(cluster, topology=levels) if levels else cluster


def live_cluster(entry: ClusterEntry, kube: Kube) -> Cluster:
    """One cluster's snapshot, or a Cluster with `.error` saying why it has none."""
    labels = dict(getattr(entry, "labels", None) or {})
    try:
        client = kube.client(entry.context, cluster=entry.name)
        return read_cluster(client, entry.name, labels=labels, context=entry.context,
                            topology=getattr(entry, "topology", None))
    except PlacerError as e:
        return Cluster(name=entry.name, labels=labels, context=entry.context, error=error_reason(e))


def live_clusters(entries: Iterable[ClusterEntry], kubeconfig: str | None = None, *,
                  kube: Kube | None = None) -> dict[str, Cluster]:
    """Snapshots of every entry that names a context, read concurrently, by name."""
    from placer.kube import Kube, run_concurrently  # the client loads when used (see above)

    kube = kube or Kube(kubeconfig)
    live = [e for e in entries if getattr(e, "context", None)]
    results = run_concurrently({e.name: partial(live_cluster, e, kube) for e in live},
                               max_workers=kube.max_workers)
    return {e.name: results[e.name] for e in live}


def error_reason(e: PlacerError) -> str:
    """A short reason for a cluster that could not be inventoried."""
    if isinstance(e, Unreachable):
        return e.message if e.message.startswith("unreachable") else f"unreachable ({e.message})"
    if isinstance(e, Forbidden):
        return f"forbidden ({e.message})"
    if isinstance(e, ServerError):
        return f"server error (HTTP {e.status}: {e.message})"
    if isinstance(e, KubeError):
        return f"error (HTTP {e.status}: {e.message})" if e.status else e.message
    if isinstance(e, InputError):
        return f"config error ({e.message})"
    return str(e)


# --- summary (what `placer clusters` shows) ----------------------------------------

@dataclass(frozen=True)
class ClusterSummary:
    name: str
    source: str                             # live | simulated
    context: str | None
    error: str | None
    nodes_ready: int
    nodes_total: int
    gpus_allocatable: int
    gpus_free: int
    largest_free_block: int                 # most free GPUs on one schedulable node
    gpu_products: tuple[str, ...]
    reserved_gpus: int
    labels: Mapping[str, str]
    topology: tuple[str, ...] = ()
    # pod slots (the nodes' `pods` allocatable; None when no node declares it): allocatable,
    # free on schedulable nodes, and free on the schedulable nodes with a free GPU
    pods_allocatable: int | None = None
    pods_free: int | None = None
    pods_free_where_gpus_free: int | None = None
    preference: int = 0                     # issue 21: from the clusters file
    cost: Any = None                        # Decimal per GPU-hour, None when not given

    @property
    def reachable(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "context": self.context,
                "reachable": self.reachable, "error": self.error,
                "nodes": {"ready": self.nodes_ready, "total": self.nodes_total},
                "gpus": {"allocatable": self.gpus_allocatable, "free": self.gpus_free,
                         "largestFreeBlock": self.largest_free_block,
                         "reserved": self.reserved_gpus},
                "pods": {"allocatable": self.pods_allocatable, "free": self.pods_free,
                         "freeWhereGPUsFree": self.pods_free_where_gpus_free},
                "gpuProducts": list(self.gpu_products), "labels": dict(self.labels),
                **({"topology": list(self.topology)} if self.topology else {}),
                **({"preference": self.preference} if self.preference else {}),
                **({"cost": number(self.cost)} if self.cost is not None else {})}


def summarize(cluster: Cluster, source: str = "live",
              gpu_resources: Iterable[str] = DEFAULT_GPU_RESOURCES) -> ClusterSummary:
    gpu_resources = tuple(gpu_resources)
    schedulable = [n for n in cluster.nodes if n.schedulable]
    free = [gpu_count(n.free_all(), gpu_resources) for n in schedulable]
    products = sorted({n.labels[GPU_PRODUCT_LABEL] for n in cluster.nodes
                       if GPU_PRODUCT_LABEL in n.labels})
    slots = [n for n in cluster.nodes if "pods" in n.allocatable]
    free_slots = [(n.free("pods"), g) for n, g in zip(schedulable, free) if "pods" in n.allocatable]
    return ClusterSummary(
        name=cluster.name, source=source, context=cluster.context, error=cluster.error,
        nodes_ready=sum(n.ready for n in cluster.nodes), nodes_total=len(cluster.nodes),
        gpus_allocatable=sum(gpu_count(n.allocatable, gpu_resources) for n in cluster.nodes),
        gpus_free=sum(free), largest_free_block=max(free, default=0),
        gpu_products=tuple(products), reserved_gpus=gpu_count(cluster.reserved, gpu_resources),
        labels=dict(cluster.labels), topology=tuple(cluster.topology),
        pods_allocatable=sum(n.allocatable["pods"] for n in slots) if slots else None,
        pods_free=sum(f for f, _ in free_slots) if slots else None,
        pods_free_where_gpus_free=sum(f for f, g in free_slots if g) if slots else None,
        preference=cluster.preference, cost=cluster.cost)
