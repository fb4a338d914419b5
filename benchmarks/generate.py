"""Generators for placement benchmarks: fleets and workload mixes, seeded and deterministic.

Workloads are built directly as `placer.workload.Workload` values with the shapes each
catalog type produces (components, instances, pods, GPUs per pod), so solving is measured
without parsing; `write_manifests` emits the same mix as YAML for end-to-end runs.
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from builders import T0  # noqa: E402
from placer.fleet import Cluster, Fleet, Node, Taint  # noqa: E402
from placer.workload import Gang, Instance, Phase, PlacementGroup, PodShape, Workload  # noqa: E402

GPU = "nvidia.com/gpu"
GI = 2**30
PRODUCTS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S")
PRODUCT_LABEL = "nvidia.com/gpu.product"


@dataclass(frozen=True)
class FleetSpec:
    clusters: int
    nodes: int                    # per cluster
    gpus: int = 8                 # per node
    fragmentation: float = 0.3    # share of nodes partly used
    products: int = 2             # GPU products in the fleet (one per cluster, round robin)
    tainted: float = 0.1          # share of clusters whose nodes carry a NoSchedule taint
    cpu: int = 96
    memory_gi: int = 1024


def make_fleet(spec: FleetSpec, seed: int = 0) -> Fleet:
    rnd = random.Random(seed)
    clusters = []
    for c in range(spec.clusters):
        product = PRODUCTS[c % spec.products]
        tainted = rnd.random() < spec.tainted
        taints = (Taint("dedicated", "ml", "NoSchedule"),) if tainted else ()
        nodes = []
        for n in range(spec.nodes):
            used = {}
            if rnd.random() < spec.fragmentation:
                g = rnd.randint(1, spec.gpus - 1)
                used = {GPU: g, "cpu": 11_000 * g, "memory": 120 * GI * g, "pods": g}
            nodes.append(Node(f"c{c}-n{n}", {GPU: spec.gpus, "cpu": spec.cpu * 1000,
                                             "memory": spec.memory_gi * GI, "pods": 110},
                              used, {PRODUCT_LABEL: product, "node.kubernetes.io/instance-type": "gpu"},
                              taints))
        for n in range(max(1, spec.nodes // 50)):      # a few CPU-only nodes per cluster
            nodes.append(Node(f"c{c}-cpu{n}", {"cpu": 64_000, "memory": 256 * GI, "pods": 110}, {}, {}))
        clusters.append(Cluster(f"c{c:02d}", {"region": ("us-east", "us-west", "eu")[c % 3],
                                              "product": product}, tuple(nodes)))
    return Fleet(tuple(clusters), T0)


def _shape(gpus: int, product: str | None, tolerate: bool) -> PodShape:
    req = {"cpu": 11_000 * gpus if gpus else 4_000, "memory": (120 * gpus if gpus else 16) * GI}
    if gpus:
        req[GPU] = gpus
    sel = {PRODUCT_LABEL: product} if product else {}
    tol = ({"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},) if tolerate else ()
    return PodShape(requests=req, node_selector=sel, tolerations=tol)


def _inst(component: str, instance: str, pods: int, gpus: int, product, tolerate) -> Instance:
    return Instance(component, instance, pods, 1, pods, _shape(gpus, product, tolerate), gpus)


# kind -> builder(total GPUs, GPUs per pod, pods) -> instances
def _instances(kind: str, total: int, per: int, product, tol) -> tuple[Instance, ...]:
    pods = max(1, total // per) if per else 1
    mk = lambda c, i, n, g: _inst(c, i, n, g, product, tol)  # noqa: E731
    if kind == "PyTorchJob":
        return (mk("Master", "0", 1, per), mk("Worker", "0", pods - 1, per)) if pods > 1 else (mk("Master", "0", 1, per),)
    if kind in ("RayCluster", "RayJob", "RayService"):
        return (mk("head", "0", 1, 0), mk("workers", "gpu-group", pods, per))
    if kind == "MPIJob":
        return (mk("Launcher", "0", 1, 0), mk("Worker", "0", pods, per))
    if kind == "LeaderWorkerSet":
        size = min(pods, 4)
        groups = max(1, pods // size)
        return tuple(mk("group", str(i), size, per) for i in range(groups))
    if kind in ("DynamoGraphDeployment", "PodCliqueSet"):
        return (mk("frontend", "0", 1, 0), mk("prefill", "0", max(1, pods // 2), per),
                mk("decode", "0", max(1, pods - pods // 2), per))
    return (mk("main", "0", pods, per),)


KINDS = ("JobSet", "PyTorchJob", "MPIJob", "RayCluster", "RayJob", "RayService", "InferenceService",
         "Service", "NIMService", "LeaderWorkerSet", "Milvus", "PodCliqueSet", "DynamoGraphDeployment",
         "Job", "Deployment", "StatefulSet", "Pod")
SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass(frozen=True)
class MixSpec:
    workloads: int
    size_weights: tuple[int, ...] = (5, 5, 8, 10, 12, 15, 20, 25)
    priorities: tuple[int, ...] = (0,)
    priority_weights: tuple[int, ...] = (1,)
    product_pinned: float = 0.2        # share selecting a GPU product by nodeSelector
    tolerating: float = 0.3
    products: int = 2
    selector_share: float = 0.05       # share carrying a cluster-selector on region
    max_size: int = 128


def make_workloads(spec: MixSpec, seed: int = 0) -> list[PlacementGroup]:
    rnd = random.Random(seed)
    out = []
    sizes = [s for s in SIZES if s <= spec.max_size]
    for i in range(spec.workloads):
        kind = KINDS[i % len(KINDS)]
        total = rnd.choices(sizes, spec.size_weights[:len(sizes)])[0]
        per = min(8, total) if total >= 8 else total
        if total >= 8 and rnd.random() < 0.3:
            per = 4                       # some 4-GPU pods (gangs up to 32 pods)
        if kind in ("InferenceService", "Service", "NIMService", "Deployment", "Milvus"):
            per = min(per, rnd.choice((1, 2, 4)))
            total = min(total, per * 8)
        product = PRODUCTS[rnd.randrange(spec.products)] if rnd.random() < spec.product_pinned else None
        tol = rnd.random() < spec.tolerating
        ann = {}
        prio = rnd.choices(spec.priorities, spec.priority_weights)[0]
        if prio:
            ann["placer.dev/priority"] = str(prio)
        if rnd.random() < spec.selector_share:
            ann["placer.dev/cluster-selector"] = f"region in ({rnd.choice(('us-east', 'us-west', 'eu'))})"
        insts = _instances(kind, total, per, product, tol)
        pods = sum(x.pods for x in insts)
        gpus = sum(x.gpus for x in insts)
        w = Workload("v1", kind, f"team{i % 7}", f"w{i:04d}-{kind.lower()}", kind.lower(), Phase.PENDING,
                     "", "", insts, (Gang("g", tuple((x.component, x.instance, x.pods) for x in insts),
                                           pods, pods, gpus),), annotations=ann)
        out.append(PlacementGroup(w.key, (w,)))
    return out
