"""The topology scenario of benchmarks/plan.py (issue 14): racks and NVLink cliques.

Fleet: GB200 NVL72-like clusters (zones, blocks of cliques, each clique 18 nodes x 4 GPUs,
labelled `nvidia.com/gpu.clique`), part of the nodes partly used, and one H100 cluster with
8-GPU nodes in racks and no clique level (gangs asking for cliques cannot go there).
Workloads: gangs of 2 to 18 nodes, most requiring one clique, some preferring one clique or
requiring one block, some asking for nothing; two priorities; demand above supply.

Measured, on the same input: placer; placer's topology-aware greedy baselines (the three
orders, unrepaired); a topology-blind greedy and a topology-blind placer (the same
workloads without their requests, as a placer that ignores topology would plan them).
Per plan: the share of placed gangs with a required request that sit inside one domain
(from the nodes' labels), GPUs placed, and for preferred requests the average number of
domains spanned.
"""

from __future__ import annotations

import random
import time
from typing import Any

from placer import solve as S
from placer.model.fleet import Cluster, Fleet, Node
from placer.model.topology import TopologyRequest
from placer.model.workload import Gang, Instance, Phase, PlacementGroup, PodShape, Workload
from placer.solve import problem as PR
from placer.solve.greedy import BASELINES
from placer.solve.greedy import greedy as greedy_plan
from placer.solve.topology import without_topology

GPU = "nvidia.com/gpu"
ZONE, BLOCK, CLIQUE, RACK = "topology.kubernetes.io/zone", "example.com/block", "nvidia.com/gpu.clique", "example.com/rack"
HOST = "kubernetes.io/hostname"
GI = 2**30


def _node(name: str, gpus: int, used: int, labels: dict[str, str]) -> Node:
    alloc = {GPU: gpus, "cpu": 144_000, "memory": 900 * GI, "pods": 110}
    return Node(name, alloc, {GPU: used, "cpu": used * 8000} if used else {}, dict(labels))


def make_fleet(seed: int = 1, nvl_clusters: int = 3, blocks: int = 2, cliques: int = 4,
               fragmentation: float = 0.3) -> Fleet:
    rnd = random.Random(seed)
    out = []
    for c in range(nvl_clusters):
        name = f"nvl{c}"
        nodes = []
        for b in range(blocks):
            for q in range(cliques):
                for n in range(18):
                    used = rnd.choice((1, 2, 3, 4)) if rnd.random() < fragmentation else 0
                    nodes.append(_node(f"{name}-b{b}-q{q}-{n:02d}", 4, used, {
                        ZONE: f"z{b % 2}", BLOCK: f"{name}-b{b}", CLIQUE: f"{name}-b{b}-q{q}"}))
        out.append(Cluster(name, {"gpu": "gb200"}, tuple(nodes), topology=(ZONE, BLOCK, CLIQUE, HOST)))
    nodes = []
    for r in range(4):
        for n in range(8):
            used = rnd.choice((2, 4, 6)) if rnd.random() < fragmentation else 0
            nodes.append(_node(f"h100-r{r}-{n}", 8, used, {RACK: f"h100-r{r}"}))
    out.append(Cluster("h100", {"gpu": "h100"}, tuple(nodes), topology=(RACK, HOST)))
    return Fleet(tuple(out))


def make_groups(seed: int = 2, count: int = 60) -> list[PlacementGroup]:
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        pods = rnd.choice((2, 4, 4, 8, 8, 12, 16, 18))
        gpus = 4
        roll = rnd.random()
        reqs: tuple[TopologyRequest, ...]
        if roll < 0.5:
            reqs = (TopologyRequest(CLIQUE, True),)
        elif roll < 0.7:
            reqs = (TopologyRequest(CLIQUE, False),)
        elif roll < 0.8:
            reqs = (TopologyRequest(BLOCK, True), TopologyRequest(CLIQUE, False))
        else:
            reqs = ()
        name = f"train-{i:03d}"
        shape = PodShape(requests={GPU: gpus, "cpu": 32_000, "memory": 200 * GI})
        inst = Instance("worker", "0", pods, 1, pods, shape, gpus)
        gang = Gang(name, (("worker", "0", pods),), pods, pods, pods * gpus, topology=reqs)
        ann = {"placer.dev/priority": str(rnd.choice((0, 0, 100)))}
        w = Workload("jobset.x-k8s.io/v1alpha2", "JobSet", "ml", name, "jobset", Phase.PENDING, "", "",
                     (inst,), (gang,), annotations=ann)
        out.append(PlacementGroup(w.key, (w,)))
    return out


def domain_stats(fleet: Fleet, groups: list[PlacementGroup], placements) -> dict[str, Any]:
    """From the nodes' labels: required gangs placed / inside one domain; preferred gangs
    placed and the domains they span; GPUs placed."""
    nodes = {(c.name, n.name): n for c in fleet.clusters for n in c.nodes}
    gangs = {w.key: w.gangs[0] for g in groups for w in g.workloads}
    req = inside = pref = spanned = gpus = 0
    per: dict[tuple[str, str], int] = {}
    for p in placements:
        gpus += p.gpus
        for r in gangs[p.workload].topology:
            vals = {nodes[(p.cluster, n)].labels.get(r.key) for n in p.nodes}
            if r.required:
                req += 1
                inside += len(vals) == 1 and None not in vals
            else:
                pref += 1
                spanned += len(vals)
                per[(p.workload, r.key)] = len(vals)
    return {"required": req, "inside": inside, "preferred": pref,
            "spread": spanned / pref if pref else 0.0, "gpus": gpus, "per": per}


def least_domains(fleet: Fleet, groups: list[PlacementGroup], placements) -> float:
    """For the preferred gangs placed: the fewest domains each would span alone on its
    cluster as it is (the roomiest domains first), averaged: a floor no plan can beat."""
    gangs = {w.key: w for g in groups for w in g.workloads}
    total = count = 0
    for p in placements:
        w = gangs[p.workload]
        per_pod = w.instances[0].pod.requests[GPU]
        for r in w.gangs[0].topology:
            if r.required:
                continue
            room: dict[str | None, int] = {}
            for n in fleet.cluster(p.cluster).nodes:                    # type: ignore[union-attr]
                room[n.labels.get(r.key)] = room.get(n.labels.get(r.key), 0) + n.free(GPU) // per_pod
            need, k = w.pods, 0
            for v in sorted(room.values(), reverse=True):
                if need <= 0:
                    break
                need, k = need - v, k + 1
            total, count = total + k, count + 1
    return total / count if count else 0.0


def _common(mine: dict, other: dict) -> str:
    """Average domains spanned over the preferred gangs both plans placed: placer / other."""
    both = sorted(set(mine) & set(other))
    if not both:
        return "-"
    return (f"{sum(mine[k] for k in both) / len(both):.2f} / {sum(other[k] for k in both) / len(both):.2f} "
            f"({len(both)} gangs)")


class _P:                       # a greedy result as placements (cluster, nodes, GPUs)
    def __init__(self, workload: str, cluster: str, nodes: list[str], gpus: int):
        self.workload, self.cluster, self.nodes, self.gpus = workload, cluster, nodes, gpus


def _greedy_placements(fleet: Fleet, groups: list[PlacementGroup], order) -> list[_P]:
    problem = PR.prepare(fleet, groups, node_exact=False)
    result = greedy_plan(problem, problem.state(), order=order)
    out = []
    for g in problem.groups:
        if g.index in result:
            c, assign = result[g.index]
            info = problem.infos[c]
            out.append(_P(g.group.workloads[0].key, info.cluster.name,
                          sorted({info.nodes[i].name for _, i in assign}), g.gpus))
    return out


def run(time_limit: float, workers: int, effort: float) -> None:
    """Two mixes on the same fleet: demand above supply (60 gangs), and room for most (35)."""
    for count in (60, 35):
        run_one(count, time_limit, workers, effort)


def run_one(count: int, time_limit: float, workers: int, effort: float) -> None:
    fleet = make_fleet()
    groups = make_groups(count=count)
    blind_groups = without_topology(groups)
    t = time.monotonic()
    plan = S.solve(fleet, groups, time_limit=time_limit, workers=workers, effort=effort)
    secs = time.monotonic() - t
    blind = S.solve(fleet, blind_groups, time_limit=time_limit, workers=workers, effort=effort)
    rows: list[tuple[str, dict]] = [(f"placer ({plan.summary.status}, {secs:.2f} s)", domain_stats(fleet, groups, plan.placements))]
    for name, order in BASELINES.items():
        rows.append((f"topology-aware greedy, {name}",
                     domain_stats(fleet, groups, _greedy_placements(fleet, groups, order))))
    rows.append(("topology-blind greedy, priority",
                 domain_stats(fleet, groups, _greedy_placements(fleet, blind_groups, BASELINES["priority"]))))
    rows.append((f"topology-blind placer ({blind.summary.status})", domain_stats(fleet, groups, blind.placements)))
    nodes = sum(len(c.nodes) for c in fleet.clusters)
    free = sum(n.free(GPU) for c in fleet.clusters for n in c.nodes)
    demand = sum(w.gpus for g in groups for w in g.workloads)
    aware = max(r["gpus"] for name, r in rows if name.startswith("topology-aware"))
    print(f"\n# topology: {len(groups)} gangs ({demand} GPUs) on {nodes} nodes ({free} GPUs free): "
          f"3 GB200 NVL72-like clusters (2 blocks x 4 cliques x 18 nodes x 4 GPUs) and an H100 cluster "
          f"with racks and no clique level")
    print("| plan | GPUs placed | vs best topology-aware greedy | required gangs placed | inside their domain | "
          "preferred gangs placed | avg domains spanned (preferred) | same gangs: placer / this |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows:
        share = f"{100 * r['inside'] / r['required']:.1f}%" if r["required"] else "-"
        print(f"| {name} | {r['gpus']:.0f} | {r['gpus'] / aware:.3f} | {r['required']} | {r['inside']} ({share}) | "
              f"{r['preferred']} | {r['spread']:.2f} | {_common(rows[0][1]['per'], r['per'])} |", flush=True)
    print(f"The preferred gangs placer placed would span at least {least_domains(fleet, groups, plan.placements):.2f} "
          f"domains on average, each alone on its cluster as it is.")
