"""The preference scenario of benchmarks/plan.py (issue 21): cluster order and cost.

Two fleets, each planned by placer and by greedy baselines of the same policy:

- `cost`: four clusters priced 1.0, 2.0, 2.5 and 4.0 per GPU-hour, most nodes partly used,
  two priorities, demand about 78% of the fleet's free GPUs. Baselines: cheapest-greedy (priority then
  size, each workload onto the cheapest cluster where it fits at node level, best fit) and
  cheapest-by-totals (the same order, onto the cheapest cluster whose free GPU total covers it,
  as cluster-level cost optimisers choose; its placements that no node holds stay Pending);
- `order`: an on-prem cluster and two clouds; every workload annotated
  `placer.dev/cluster-order: onprem,cloud-a,cloud-b`, demand about 60% of the fleet's free GPUs, nearly twice on-prem's.
  Baselines: ordered greedy (each workload onto the first cluster of its order where it fits
  at node level, Nova's `orderedClusterSelector` done at node level) and ordered-by-totals.

Per plan: GPUs placed, cost per hour (`cost`), GPUs on the first cluster of the order and
that cluster's free GPUs (`order`), and for the by-totals baselines the placements that would
stay Pending. placer's plan must be lexicographically at least the node-level greedy's:
(priority levels, preference, -cost).
"""

from __future__ import annotations

import time
from dataclasses import replace
from decimal import Decimal

from generate import FleetSpec, MixSpec, make_fleet, make_workloads

from placer import solve as S
from placer.solve import problem as PR
from placer.solve.state import try_place

GPU = "nvidia.com/gpu"
ORDER = "placer.dev/cluster-order"
PRICES = (Decimal("2.0"), Decimal("4.0"), Decimal("1.0"), Decimal("2.5"))


def cost_fleet():
    f = make_fleet(FleetSpec(clusters=4, nodes=60, fragmentation=0.6, tainted=0.0), seed=21)
    f = replace(f, clusters=tuple(replace(c, cost=p) for c, p in zip(f.clusters, PRICES)))
    gs = make_workloads(MixSpec(workloads=80, size_weights=(4, 5, 8, 10, 10, 6, 2, 0), priorities=(0, 100),
                                priority_weights=(3, 1), tolerating=1.0), seed=21)
    return f, gs


def order_fleet():
    f = make_fleet(FleetSpec(clusters=3, nodes=50, fragmentation=0.5, tainted=0.0, products=1), seed=7)
    names = ("onprem", "cloud-a", "cloud-b")
    f = replace(f, clusters=tuple(replace(c, name=n, nodes=tuple(replace(x, name=f"{n}-{i}") for i, x in
                                                                 enumerate(c.nodes)))
                                  for c, n in zip(f.clusters, names)))
    gs = make_workloads(MixSpec(workloads=60, size_weights=(4, 5, 8, 10, 10, 6, 0, 0), priorities=(0, 100),
                                priority_weights=(3, 1), tolerating=1.0, products=1), seed=7)
    gs = [replace(g, workloads=tuple(replace(w, annotations={**(w.annotations or {}), ORDER: ",".join(names)})
                                     for w in g.workloads)) for g in gs]
    return f, gs


def node_greedy(fleet, groups, key) -> dict[str, str]:
    """Priority then size; each group onto the first cluster by `key(cluster index)` where it
    fits at node level (best fit)."""
    problem = PR.prepare(fleet, groups)
    states = problem.state()
    out = {}
    for g in sorted(problem.groups, key=lambda g: (-g.priority, -g.gpus, g.key)):
        for c in sorted(g.eligible, key=key):
            if try_place(states[c], g) is not None:
                out[g.key] = fleet.clusters[c].name
                break
    return out


def totals_greedy(fleet, groups, key) -> tuple[dict[str, str], int, int]:
    """The same order onto the first cluster by `key` whose free GPU total covers the group:
    (its choices, how many do not fit at node level there, GPUs that really fit)."""
    problem = PR.prepare(fleet, groups)
    states = problem.state()
    free = {c: sum(n.free(GPU) for n in cl.nodes if n.schedulable) for c, cl in enumerate(fleet.clusters)}
    out, misfits, real = {}, 0, 0
    for g in sorted(problem.groups, key=lambda g: (-g.priority, -g.gpus, g.key)):
        ok = [c for c in sorted(range(len(fleet.clusters)), key=key) if not g.static.get(c) and free[c] >= g.gpus]
        if not ok:
            continue
        c = ok[0]
        free[c] -= g.gpus
        out[g.key] = fleet.clusters[c].name
        if try_place(states[c], g) is None:
            misfits += 1
        else:
            real += g.gpus
    return out, misfits, real


def measure(fleet, groups, where: dict[str, str]) -> tuple[int, Decimal, int]:
    """(GPUs placed, cost per hour, GPUs on the fleet's first cluster)."""
    price = {c.name: c.cost or Decimal(0) for c in fleet.clusters}
    gpus = {g.key: sum(w.gpus for w in g.workloads) for g in groups}
    first = fleet.clusters[0].name
    return (sum(gpus[k] for k in where), sum((gpus[k] * price[c] for k, c in where.items()), Decimal(0)),
            sum(gpus[k] for k, c in where.items() if c == first))


def cost_bound(fleet, gpus: int) -> Decimal:
    """The least any plan placing `gpus` GPUs can cost: the cheapest clusters' free GPUs filled
    in price order, as if GPUs were divisible (a lower bound, not always reachable)."""
    left, total = gpus, Decimal(0)
    for c in sorted(fleet.clusters, key=lambda c: c.cost or Decimal(0)):
        take = min(left, sum(n.free(GPU) for n in c.nodes if n.schedulable))
        total += take * (c.cost or Decimal(0))
        left -= take
    return total


def _plan_where(plan) -> dict[str, str]:
    return {p.group: p.cluster for p in plan.placements}


def run(time_limit: float, workers: int, effort: float) -> None:
    print("\n# preference (issue 21): cluster cost and cluster-order against greedy baselines of the same policy")
    print("| fleet | plan | GPUs placed | cost per hour (bound for those GPUs) | GPUs on first cluster | "
          "would stay Pending | solve s | status |")
    print("|---|---|---|---|---|---|---|---|")
    for name, make in (("cost", cost_fleet), ("order", order_fleet)):
        fleet, groups = make()
        free = sum(n.free(GPU) for c in fleet.clusters for n in c.nodes if n.schedulable)
        demand = sum(w.gpus for g in groups for w in g.workloads)
        t = time.monotonic()
        plan = S.solve(fleet, groups, time_limit=time_limit, workers=workers, effort=effort)
        secs = time.monotonic() - t
        units = [c.cost or Decimal(0) for c in fleet.clusters]
        key = (lambda c: (units[c], c)) if name == "cost" else (lambda c: c)
        label = "cheapest" if name == "cost" else "ordered"
        rows = [("placer", _plan_where(plan), "0", f"{secs:.2f}", plan.summary.status)]
        rows.append((f"{label} greedy (node level)", node_greedy(fleet, groups, key), "0", "", ""))
        where, misfits, real = totals_greedy(fleet, groups, key)
        rows.append((f"{label} by cluster totals", where, f"{misfits} ({real} GPUs really fit)", "", ""))
        first_free = sum(n.free(GPU) for n in fleet.clusters[0].nodes if n.schedulable)
        for plan_name, w, pending, s, status in rows:
            gpus, cost, first = measure(fleet, groups, w)
            spent = f"{cost} ({cost_bound(fleet, gpus)})" if name == "cost" else "-"
            on_first = f"{first} of {first_free}" if name == "order" else "-"
            print(f"| {name} ({len(groups)} workloads, {free} free GPUs, demand {demand}) | {plan_name} | {gpus} | "
                  f"{spent} | {on_first} | {pending} | {s} | {status} |", flush=True)
