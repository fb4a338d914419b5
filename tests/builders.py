"""One-line fleet and workload builders for tests and benchmarks (no YAML involved).

    fleet("east: 4x8 used=3 gpu=h100 | 2x8 taint=dedicated=ml:NoSchedule",
          cluster("west", "16x8", labels={"region": "us-west"}))
    wl("ml/train", "3x4 gpu=h100", "1x0 cpu=4", prio=10, pin="east")
    group(wl(...), wl(...))  /  groups(wl(...), wl(...))   # one group each
    racks("east", "4x8", block=2, rack=3)     # nested topology domains, Cluster.topology set
    wl("ml/train", "4x8", required="example.com/rack")      # Gang.topology, one line

Node spec: `COUNTxGPUS` then tokens: used=N (GPUs in use), cpu=C, mem=M, pods=P (allocatable;
defaults 96 / 1Ti / 110), usedcpu=C, usedmem=M, usedpods=N, mig=N / usedmig=N (MIG slices, MIG),
taint=k[=v]:Effect, unschedulable, notready, name=PREFIX; any other k=v is a node label.
Pod spec: `PODSxGPUS` then cpu=C, mem=M (defaults 1 / 1Gi), mig=N (MIG slices per pod),
as=component/instance, any other k=v is a nodeSelector entry.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from placer.model.fleet import Cluster, Fleet, Node, Taint
from placer.model.quantity import canonical
from placer.model.topology import TopologyRequest
from placer.model.workload import Gang, Instance, Phase, PlacementGroup, PodShape, Workload

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"       # MIG slices: a resource of their own, counted as GPUs on request
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _count_gpus(head: str) -> tuple[int, int]:
    n, g = head.lower().split("x")
    return int(n), int(g)


def nodes(spec: str, prefix: str) -> list[Node]:
    tokens = spec.split()
    count, gpus = _count_gpus(tokens[0])
    alloc: dict[str, Any] = {GPU: gpus, "cpu": "96", "memory": "1Ti", "pods": 110}
    used: dict[str, Any] = {}
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    unschedulable, ready, name = False, True, prefix
    for tok in tokens[1:]:
        key, _, val = tok.partition("=")
        if tok == "unschedulable":
            unschedulable = True
        elif tok == "notready":
            ready = False
        elif key == "used":
            used[GPU] = int(val)
        elif key in ("cpu", "mem", "pods", "mig"):
            alloc[{"mem": "memory", "mig": MIG}.get(key, key)] = val
        elif key in ("usedcpu", "usedmem", "usedpods", "usedmig"):
            used[{"usedcpu": "cpu", "usedmem": "memory", "usedpods": "pods", "usedmig": MIG}[key]] = val
        elif key == "taint":
            kv, _, effect = val.rpartition(":")
            tk, _, tv = kv.partition("=")
            taints.append(Taint(tk, tv, effect))
        elif key == "name":
            name = val
        else:
            labels[key] = val
    if not gpus:
        alloc.pop(GPU)
    alloc_c = {r: canonical(r, v) for r, v in alloc.items()}
    used_c = {r: canonical(r, v) for r, v in used.items()}
    return [Node(f"{name}{i}", alloc_c, used_c, dict(labels), tuple(taints), unschedulable, ready)
            for i in range(count)]


def cluster(name: str, *node_specs: str, labels: Mapping[str, str] | None = None,
            error: str | None = None, context: str | None = None, topology: Sequence[str] = ()) -> Cluster:
    ns: list[Node] = []
    for i, spec in enumerate(node_specs):
        ns += nodes(spec, f"{name}-{i}-")
    return Cluster(name, dict(labels or {}), tuple(ns), context=context, error=error, topology=tuple(topology))


LEVELS = {"zone": "topology.kubernetes.io/zone", "block": "example.com/block", "rack": "example.com/rack",
          "clique": "nvidia.com/gpu.clique", "host": "kubernetes.io/hostname"}


def racks(name: str, per_domain: str, *, extra: Sequence[str] = (), labels: Mapping[str, str] | None = None,
          **levels: int) -> Cluster:
    """A cluster whose nodes sit in nested domains: `racks("east", "4x8", block=2, rack=3)` is
    2 blocks x 3 racks of 4 nodes with 8 GPUs, labelled `example.com/block=b0`,
    `example.com/rack=b0-r1`...; level names are LEVELS' (zone, block, rack, clique) or
    label keys, widest first. `per_domain` may be a list separated by `;` (one node group
    per entry in every narrowest domain). `extra` node specs are added unlabelled."""
    keys = [LEVELS.get(k, k) for k in levels]
    specs: list[str] = []

    def walk(depth: int, path: list[str], labels_: list[str]) -> None:
        if depth == len(keys):
            specs.extend(f"{s.strip()} {' '.join(labels_)}" for s in per_domain.split(";"))
            return
        short = list(levels)[depth][0]
        for d in range(list(levels.values())[depth]):
            here = path + [f"{short}{d}"]
            walk(depth + 1, here, labels_ + [f"{keys[depth]}={'-'.join(here)}"])
    walk(0, [], [])
    return cluster(name, *specs, *extra, labels=labels,
                   topology=tuple(keys) + ((LEVELS["host"],) if LEVELS["host"] not in keys else ()))


def fleet(*clusters: Cluster | str) -> Fleet:
    """Clusters, or strings `name: nodespec | nodespec`."""
    out = []
    for c in clusters:
        if isinstance(c, str):
            name, _, rest = c.partition(":")
            c = cluster(name.strip(), *[s.strip() for s in rest.split("|") if s.strip()])
        out.append(c)
    return Fleet(tuple(out), T0)


def instance(spec: str, index: int = 0, tolerations: Sequence[Mapping[str, Any]] = (),
             affinity: Sequence[Mapping[str, Any]] = ()) -> Instance:
    tokens = spec.split()
    pods, gpus = _count_gpus(tokens[0])
    req: dict[str, Any] = {"cpu": "1", "memory": "1Gi"}
    if gpus:
        req[GPU] = gpus
    selector: dict[str, str] = {}
    component, inst = f"c{index}", "0"
    for tok in tokens[1:]:
        key, _, val = tok.partition("=")
        if key in ("cpu", "mem", "mig"):
            req[{"mem": "memory", "mig": MIG}.get(key, key)] = val
        elif key == "as":
            component, _, inst = val.partition("/")
            inst = inst or "0"
        else:
            selector[key] = val
    shape = PodShape(requests={r: canonical(r, v) for r, v in req.items()}, node_selector=selector,
                     affinity_terms=tuple(affinity), tolerations=tuple(tolerations))
    return Instance(component, inst, pods, 1, pods, shape, gpus)


def wl(key: str, *pod_specs: str, prio: int | None = None, pin: str | None = None,
       selector: str | None = None, kind: str = "JobSet", tolerations: Sequence[Mapping[str, Any]] = (),
       affinity: Sequence[Mapping[str, Any]] = (), annotations: Mapping[str, str] | None = None,
       required: str | None = None, preferred: str | None = None,
       topology: Sequence[TopologyRequest] = ()) -> Workload:
    """A pending workload `ns/name` with one instance per pod spec (default `1x1`), one gang of
    all its pods; `required` / `preferred`: a topology level (key or LEVELS name) for it."""
    ns, _, name = key.rpartition("/")
    insts = tuple(instance(s, i, tolerations, affinity) for i, s in enumerate(pod_specs or ("1x1",)))
    ann = dict(annotations or {})
    if prio is not None:
        ann["placer.dev/priority"] = str(prio)
    if pin is not None:
        ann["placer.dev/cluster"] = pin
    if selector is not None:
        ann["placer.dev/cluster-selector"] = selector
    pods = sum(i.pods for i in insts)
    topo = list(topology)
    for level, req in ((required, True), (preferred, False)):
        if level is not None:
            topo.append(TopologyRequest(LEVELS.get(level, level), req))
    gang = Gang(name, tuple((i.component, i.instance, i.pods) for i in insts), pods, pods,
                sum(i.gpus for i in insts), topology=tuple(topo))
    return Workload("jobset.x-k8s.io/v1alpha2", kind, ns or "default", name, kind.lower(), Phase.PENDING,
                    "", "", insts, (gang,), annotations=ann)


def group(*workloads: Workload, key: str | None = None) -> PlacementGroup:
    return PlacementGroup(key or workloads[0].key, tuple(workloads))


def groups(*workloads: Workload) -> list[PlacementGroup]:
    return [group(w) for w in workloads]
