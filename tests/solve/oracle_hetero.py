"""Random heterogeneous fleets for the judges (issue 24), generated here, not by benchmarks/.

A fleet like the heterogeneous benchmark's, at any size: per cluster H100 and A100 pools (8 GPUs),
L40S pools (4 GPUs), A100 nodes partitioned into MIG slices (`nvidia.com/mig-1g.10gb`, 7 per
GPU, counted as GPUs), CPU-only nodes, GPUs and CPU partly in use, spot pools tainted
`spot=true:NoSchedule`, product labels. Workloads of every core kind (Job, Deployment,
StatefulSet, Pod, JobSet, PyTorchJob) with product node selectors, spot tolerations, MIG
requests, CPU-heavy pods, 12 priority levels, a few groups of two and a few pins.

`SIZES`: "small" fits the exact optimum (node-exact, up to 100 nodes), "medium" and "large"
(10 clusters x 100 nodes, 400 workloads: the fleet of issue 24) are beyond it; "live" is
"large" with every node its own class (a hostname label, CPU in use differing by node), as
live clusters look.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from placer.model.fleet import Cluster, Fleet
from placer.model.workload import PlacementGroup
from tests.builders import cluster, fleet, group, wl

PRODUCTS = ("H100", "A100", "L40S")
SPOT = "taint=spot=true:NoSchedule"
TOLERATE_SPOT = ({"key": "spot", "operator": "Exists", "effect": "NoSchedule"},)
KINDS = ("Job", "Deployment", "StatefulSet", "Pod", "JobSet", "PyTorchJob")


@dataclass(frozen=True)
class Size:
    clusters: tuple[int, int]
    pools: tuple[int, int]          # node pools per cluster
    pool_nodes: tuple[int, int]     # nodes per pool
    workloads: tuple[int, int]
    levels: int = 12
    distinct: bool = False          # every node its own class, as live nodes are (CPU in use differs)


SIZES = {
    "small": Size((2, 3), (2, 4), (1, 6), (10, 18)),
    "medium": Size((3, 4), (3, 5), (8, 20), (60, 90)),
    "large": Size((10, 10), (5, 7), (12, 22), (400, 400)),
    "live": Size((10, 10), (5, 7), (12, 22), (400, 400), distinct=True),
}


def _pool(rnd: random.Random, c: int, k: int, count: int) -> list[str]:
    """One node pool's specs (tests/builders.py): one per level of use, CPU in use growing with
    the GPUs in use (as on live nodes), so a pool is several node classes."""
    kind = rnd.choice(("H100", "A100", "L40S", "MIG", "H100", "A100", "cpu"))
    cpu = rnd.choice((64, 96, 128))
    tail = f" cpu={cpu}"
    if kind != "cpu" and rnd.random() < 0.3:
        tail += f" {SPOT} spot=true"
    if rnd.random() < 0.05:
        tail += " unschedulable"
    if kind == "cpu":
        return [f"{count}x0 usedcpu={rnd.choice((0, 8, 16))}{tail} name=c{c}-p{k}-"]
    frag = rnd.choice((0.0, 0.3, 0.6))
    levels: dict[int, int] = {}
    top = 55 if kind == "MIG" else (4 if kind == "L40S" else 8)
    for _ in range(count):
        u = rnd.randint(1, top - 1) if rnd.random() < frag else 0
        levels[u] = levels.get(u, 0) + 1
    out = []
    for n, (u, cnt) in enumerate(sorted(levels.items())):
        used_cpu = min(cpu, (u // 7 if kind == "MIG" else u) * rnd.choice((6, 11, 14)))
        if kind == "MIG":
            head = f"{cnt}x0 mig=56 usedmig={u} gpu.product=A100 mig.strategy=mixed"
        else:
            head = f"{cnt}x{top} used={u} gpu.product={kind}"
        out.append(f"{head} usedcpu={used_cpu}{tail} name=c{c}-p{k}-u{n}-")
    return out


def _pods(rnd: random.Random, kind: str) -> list[str]:
    """Pod specs (tests/builders.py) of one workload of this kind."""
    sel = f" gpu.product={rnd.choice(PRODUCTS)}" if rnd.random() < 0.5 else ""
    if rnd.random() < 0.15 and kind in ("Deployment", "Pod", "Job", "StatefulSet"):
        pods = 1 if kind == "Pod" else rnd.randint(1, 4)
        return [f"{pods}x0 mig={rnd.randint(1, 3)} cpu={rnd.choice((2, 4, 8))} gpu.product=A100"]
    if kind == "StatefulSet":
        return [f"{rnd.randint(2, 4)}x{rnd.choice((1, 1, 2))} cpu={rnd.choice((8, 16, 24))}{sel}"]
    if kind == "Deployment":
        return [f"{rnd.randint(1, 4)}x{rnd.choice((1, 1, 2, 4))} cpu={rnd.choice((4, 8, 16))}{sel}"]
    if kind == "Pod":
        return [f"1x{rnd.choice((1, 2, 4, 8))} cpu={rnd.choice((4, 16, 32))}{sel}"]
    if kind == "Job":
        return [f"{rnd.randint(1, 4)}x{rnd.choice((1, 2, 4, 8))} cpu={rnd.choice((8, 16, 32))}{sel}"]
    if rnd.random() < 0.2:              # a large training job: many 8-GPU workers
        return ["1x0 cpu=4", f"{rnd.randint(3, 12)}x8 cpu={rnd.choice((32, 64))}{sel}"]
    # JobSet / PyTorchJob: a CPU leader and GPU workers
    return [f"1x0 cpu={rnd.choice((2, 4))}", f"{rnd.randint(1, 4)}x{rnd.choice((2, 4, 8))} cpu={rnd.choice((16, 32))}{sel}"]


def _distinct(cl: Cluster) -> Cluster:
    nodes = []
    for k, n in enumerate(cl.nodes):
        used = {**n.used, "cpu": n.used.get("cpu", 0) + 100 + (k * 37) % 700}
        nodes.append(replace(n, used=used, labels={**n.labels, "kubernetes.io/hostname": n.name}))
    return replace(cl, nodes=tuple(nodes))


def hetero_instance(size: str, seed: int) -> tuple[Fleet, list[PlacementGroup]]:
    sz = SIZES[size]
    # "live" is "large"'s instance with distinct nodes
    rnd = random.Random(f"hetero-{'large' if size == 'live' else size}-{seed}")
    cls = []
    for c in range(rnd.randint(*sz.clusters)):
        specs = [s for k in range(rnd.randint(*sz.pools)) for s in _pool(rnd, c, k, rnd.randint(*sz.pool_nodes))]
        cls.append(cluster(f"c{c}", *specs, labels={"region": ("east", "west")[c % 2]}))
    if sz.distinct:
        cls = [_distinct(cl) for cl in cls]
    f = fleet(*cls)
    names = [n.name for cl in f.clusters for n in cl.nodes]
    assert len(names) == len(set(names)), "node names must be unique"
    levels = rnd.sample(range(100), sz.levels)
    gs: list[PlacementGroup] = []
    n, i = rnd.randint(*sz.workloads), 0
    while i < n:
        members = []
        for _ in range(2 if rnd.random() < 0.05 else 1):
            kind = rnd.choice(KINDS)
            kw: dict = {}
            if rnd.random() < 0.4:
                kw["tolerations"] = TOLERATE_SPOT
            if rnd.random() < 0.03:
                kw["pin"] = rnd.choice(cls).name
            members.append(wl(f"bench/h{i:04d}", *_pods(rnd, kind), prio=rnd.choice(levels), kind=kind, **kw))
            i += 1
        gs.append(group(*members, key=f"file-{i:04d}.yaml" if len(members) > 1 else None))
    return f, gs
