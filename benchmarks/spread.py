"""The spread scenario of benchmarks/plan.py (issue 21): divided and duplicated serving workloads.

Fleet: 4 clusters of 8-GPU nodes, most nodes partly used (free GPUs look plentiful by cluster
totals, the blocks are small). Workloads: Deployments with `placer.dev/spread: divide` (4 to 24
replicas of 1, 2 or 4 GPUs, half with `spread-weights`, some with `spread-clusters`) and a few
`duplicate` ones (`spread-clusters: 2`), interpreted through the real catalog.

Measured on the same input: placer (shares decided at node level); and a cluster-totals policy,
as Nova and Karmada divide: per workload in arrival order, shares by the weights (largest
remainder; without weights, the clusters with the most free GPUs first), accepted when each
cluster's free GPU total covers its share, then the shares' pods placed first-fit on the real
nodes. Per plan: GPUs placed (for the totals policy: claimed, and what the nodes really hold),
shares sent where some pod stays Pending (placer: 0, by its verifier), and weighted shares
within one replica of their weight.
"""

from __future__ import annotations

import random
import time
from datetime import datetime, timezone
from typing import Any

from placer import solve as S
from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret
from placer.model.fleet import Cluster, Fleet, Node
from placer.model.workload import PlacementGroup

GPU = "nvidia.com/gpu"
GI = 2**30


def make_fleet(rng: random.Random) -> Fleet:
    clusters = []
    for c, name in enumerate(("east", "west", "central", "eu")):
        nodes = []
        for i in range(24 + 8 * c):
            used = rng.choice([0, 2, 3, 5, 6, 7]) if rng.random() < 0.8 else 0
            nodes.append(Node(f"{name}-{i}", {GPU: 8, "cpu": 96_000, "memory": 1024 * GI, "pods": 110},
                              {GPU: used} if used else {}, {}))
        clusters.append(Cluster(name=name, nodes=tuple(nodes)))
    return Fleet(tuple(clusters), datetime(2026, 1, 1, tzinfo=timezone.utc))


def deployment(name: str, replicas: int, gpus: int, ann: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "serve", "annotations": ann},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                         {"name": "s", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                                   "limits": {GPU: str(gpus)}}}]}}}}


def make_workloads(rng: random.Random, n: int) -> list[PlacementGroup]:
    catalog = load_catalog()
    names = ["east", "west", "central", "eu"]
    out = []
    for i in range(n):
        ann = {"placer.dev/spread": "divide"}
        if rng.random() < 0.15:
            ann = {"placer.dev/spread": "duplicate", "placer.dev/spread-clusters": "2"}
        elif rng.random() < 0.5:
            chosen = rng.sample(names, rng.randint(2, 3))
            ann["placer.dev/spread-weights"] = ",".join(f"{c}={rng.randint(1, 3)}" for c in chosen)
        elif rng.random() < 0.3:
            ann["placer.dev/spread-clusters"] = "2"
        replicas = rng.randint(1, 3) if ann["placer.dev/spread"] == "duplicate" else rng.randint(4, 24)
        w = interpret(deployment(f"svc-{i:02d}", replicas, rng.choice([1, 2, 2, 4]), ann), catalog)
        out.append(PlacementGroup(f"svc-{i:02d}", (w,)))
    return out


# --- the cluster-totals policy (Nova/Karmada-like), judged at node level -------------------------

def _largest_remainder(total: int, weights: dict[str, int]) -> dict[str, int]:
    W = sum(weights.values())
    base = {c: total * w // W for c, w in weights.items()}
    left = total - sum(base.values())
    for c in sorted(weights, key=lambda c: (-(total * weights[c] % W), c))[:left]:
        base[c] += 1
    return base


def _totals_shares(w, free: dict[str, int]) -> dict[str, int] | None:
    a = w.annotations
    replicas, per = w.pods, w.instances[0].gpus_per_pod
    if a["placer.dev/spread"] == "duplicate":
        chosen = sorted(free, key=lambda c: -free[c])[:2]
        return {c: replicas for c in chosen} if all(free[c] >= replicas * per for c in chosen) else None
    if "placer.dev/spread-weights" in a:
        weights = {k: int(v) for k, v in (x.split("=") for x in a["placer.dev/spread-weights"].split(","))}
        shares = _largest_remainder(replicas, weights)
    else:
        shares, left = {}, replicas
        limit = int(a.get("placer.dev/spread-clusters", "4"))
        for c in sorted(free, key=lambda c: -free[c])[:limit]:
            k = min(left, free[c] // per)
            if k:
                shares[c], left = k, left - k
        if left:
            return None
    return shares if all(free[c] >= k * per for c, k in shares.items()) else None


def totals_policy(fleet: Fleet, groups: list[PlacementGroup]) -> dict[str, int]:
    free_nodes = {cl.name: [n.allocatable[GPU] - n.used.get(GPU, 0) for n in cl.nodes] for cl in fleet.clusters}
    free = {c: sum(v) for c, v in free_nodes.items()}
    claimed = real = pending_shares = shares_sent = whole = stuck = 0
    for g in groups:
        (w,) = g.workloads
        per = w.instances[0].gpus_per_pod
        shares = _totals_shares(w, free)
        if shares is None:
            continue
        before = pending_shares
        for c, k in shares.items():
            free[c] -= k * per
            claimed += k * per
            shares_sent += 1
            bound = 0
            for _ in range(k):                       # the scheduler's view: first fit per pod
                i = next((i for i, f in enumerate(free_nodes[c]) if f >= per), None)
                if i is None:
                    break
                free_nodes[c][i] -= per
                bound += 1
            real += bound * per
            pending_shares += bound < k
        if pending_shares == before:
            whole += sum(shares.values()) * per
        else:
            stuck += 1
    return {"claimed": claimed, "real": real, "pending": pending_shares, "shares": shares_sent, "whole": whole,
            "stuck": stuck}


def _within_one(plan, groups) -> tuple[int, int]:
    ok = total = 0
    for g in groups:
        (w,) = g.workloads
        text = w.annotations.get("placer.dev/spread-weights")
        mine = [p for p in plan.placements if p.ref == w.ref]
        if not text or not mine:
            continue
        weights = {k: int(v) for k, v in (x.split("=") for x in text.split(","))}
        shares = mine[0].spread["shares"]
        T, W = sum(shares.values()), sum(weights.values())     # every cluster here accepts every workload
        total += 1
        ok += all(abs(W * shares.get(c, 0) - weights[c] * T) <= W for c in weights)
    return ok, total


def run(time_limit: float, workers: int, effort: float, seed: int = 7, n: int = 40) -> None:
    rng = random.Random(seed)
    fleet = make_fleet(rng)
    groups = make_workloads(rng, n)
    t0 = time.monotonic()
    plan = S.solve(fleet, groups, time_limit=time_limit, workers=workers, effort=effort)
    seconds = time.monotonic() - t0
    totals = totals_policy(fleet, groups)
    free = sum(n.allocatable[GPU] - n.used.get(GPU, 0) for cl in fleet.clusters for n in cl.nodes)
    demand = sum(g.gpus for g in groups)
    ok, weighted = _within_one(plan, groups)
    print(f"\n# spread: {n} serving workloads (divide, duplicate), {sum(len(c.nodes) for c in fleet.clusters)} "
          f"nodes, {free} GPUs free, {demand} GPUs asked (one copy each)")
    print("| plan | GPUs sent | GPUs bound | GPUs of workloads running whole | shares sent | shares with "
          "Pending pods (workloads) | weighted shares within one replica |")
    print("|---|---|---|---|---|---|---|")
    print(f"| placer ({plan.summary.status}, {seconds:.2f} s) | {plan.summary.gpus_placed} | "
          f"{plan.summary.gpus_placed} | {plan.summary.gpus_placed} | {len(plan.placements)} "
          f"| 0 (0; verified at node level) | {ok} of {weighted} |")
    print(f"| cluster totals (Nova/Karmada-like) | {totals['claimed']} | {totals['real']} | {totals['whole']} | "
          f"{totals['shares']} | {totals['pending']} ({totals['stuck']}) | by construction |")
