"""An exact judge for cluster preference and cost (issue 21), written without placer's solver.

The rules, restated from docs/planning.md and implemented here on their own:
- a group ranks the clusters: those its `placer.dev/cluster-order` annotation names, in that
  order, first; then the others by the cluster's `preference`, higher first; equal keys share
  a rank; names the fleet lacks are ignored;
- after the priority levels (GPUs, then groups placed, per level): per level again, highest
  first, per rank, best first, the most of (GPUs x (groups + 1) + 1) placed on clusters of
  that rank, each fixed before the next; then the least cost (GPUs x the cluster's `cost`, 0
  where none is given);
- `cheapest_greedy`: groups by priority then size, each onto the cluster it ranks best, then
  the cheapest, where every pod fits first-fit (the "cheapest cluster that fits" baseline).
"""

from __future__ import annotations

import random
from dataclasses import replace
from decimal import Decimal
from typing import Sequence

from placer.model.fleet import Cluster, Fleet
from placer.model.workload import PlacementGroup
from tests.solve import oracle as O

ORDER = "placer.dev/cluster-order"
SCALE = 10**6                      # costs in millionths: exact for the costs the instances use


def order_of(g: PlacementGroup) -> list[str]:
    for w in g.workloads:
        text = (w.annotations or {}).get(ORDER)
        if text:
            out: list[str] = []
            for name in text.split(","):
                if name.strip() and name.strip() not in out:
                    out.append(name.strip())
            return out
    return []


def ranks(g: PlacementGroup, f: Fleet) -> list[int]:
    """Per cluster (fleet order), the group's rank of it."""
    order = order_of(g)
    keys = [(order.index(cl.name) if cl.name in order else len(order), -cl.preference) for cl in f.clusters]
    distinct = sorted(set(keys))
    return [distinct.index(k) for k in keys]


def cost(cl: Cluster) -> Decimal:
    return cl.cost if cl.cost is not None else Decimal(0)


def levels(groups: Sequence[PlacementGroup]) -> list[int]:
    return sorted({O.priority(g) for g in groups}, reverse=True)


def value(f: Fleet, groups: Sequence[PlacementGroup], where: dict[str, str]) -> tuple[tuple[int, ...], Decimal]:
    """(placed per priority level, highest first, per rank; total cost) of groups placed on
    clusters `where[group key]`."""
    big = len(groups) + 1
    cells = [(p, r) for p in levels(groups) for r in range(len(f.clusters))]
    per = dict.fromkeys(cells, 0)
    total = Decimal(0)
    names = [cl.name for cl in f.clusters]
    for g in groups:
        if g.key in where:
            c = names.index(where[g.key])
            per[O.priority(g), ranks(g, f)[c]] += O.gpus(g) * big + 1
            total += O.gpus(g) * cost(f.clusters[c])
    return tuple(per[cell] for cell in cells), total


def plan_where(plan, groups: Sequence[PlacementGroup]) -> dict[str, str]:
    """Group key -> cluster, for every group the plan places whole."""
    at = {p.workload: p.cluster for p in plan.placements}
    out = {}
    for g in groups:
        cs = {at.get(w.key) for w in g.workloads}
        if len(cs) == 1 and None not in cs:
            out[g.key] = cs.pop()
    return out


def optimum(f: Fleet, groups: Sequence[PlacementGroup]) -> tuple[tuple, tuple[int, ...], Decimal]:
    """The exact lexicographic optimum: (`O.lex` value, placed per rank, cost)."""
    big = len(groups) + 1
    stages = []
    for p in levels(groups):
        for r in range(len(f.clusters)):
            def rank_stage(y, p=p, r=r):
                return sum((O.gpus(groups[gi]) * big + 1) * v for (gi, c), v in y.items()
                           if O.priority(groups[gi]) == p and ranks(groups[gi], f)[c] == r), True
            stages.append(rank_stage)

    def cost_stage(y):
        return sum(int(cost(f.clusters[c]) * SCALE) * O.gpus(groups[gi]) * v for (gi, c), v in y.items()), False
    stages.append(cost_stage)
    values: list[int] = []
    lex = O.optimum(f, groups, then=stages, values=values)
    return lex, tuple(values[:-1]), Decimal(values[-1]) / SCALE


def cheapest_greedy(f: Fleet, groups: Sequence[PlacementGroup]) -> dict[str, str]:
    """Priority then size; each group onto its best-ranked, then cheapest, then first cluster
    where all its pods fit (first fit, biggest pods first, nodes in order)."""
    caps = {c: [O.free(n) for n in cl.nodes] for c, cl in enumerate(f.clusters)}
    where: dict[str, str] = {}
    for g in sorted(groups, key=lambda g: (-O.priority(g), -O.gpus(g))):
        rk = ranks(g, f)
        pods = sorted(((pos, i, O.demand(i)) for pos, (_, i) in enumerate(O.instances(g)) for _ in range(i.pods)),
                      key=lambda t: (-sum(t[2].get(x, 0) for x in O.GPUS), -t[2].get("cpu", 0)))
        for c in sorted(range(len(f.clusters)), key=lambda c: (rk[c], cost(f.clusters[c]), c)):
            cl = f.clusters[c]
            if not O.policy_ok(g, cl):
                continue
            cap = O._first_fit(cl, caps[c], pods, [], ())
            if cap is not None:
                caps[c] = cap
                where[g.key] = cl.name
                break
    return where


def key(f: Fleet, groups: Sequence[PlacementGroup], where: dict[str, str]) -> tuple:
    """Lexicographically comparable: priority levels, placed per rank, then less cost."""
    per, total = value(f, groups, where)
    return O.lex(groups, set(where)), per, -total


def order_violations(f: Fleet, groups: Sequence[PlacementGroup], plan) -> list[str]:
    """Every placed group that would fit, beside the rest of the plan, a cluster it ranks
    better, or one of its rank that costs less (exact fit checks)."""
    where = plan_where(plan, groups)
    load = O.plan_load(f, groups, plan)
    out = []
    for g in groups:
        if g.key not in where:
            continue
        rk = ranks(g, f)
        c = [cl.name for cl in f.clusters].index(where[g.key])
        parts = [i for _, i in O.instances(g)]
        for d, cl in enumerate(f.clusters):
            ahead = (rk[d], cost(cl)) < (rk[c], cost(f.clusters[c]))
            if ahead and O.policy_ok(g, cl) and O.fits(parts, cl.nodes, load[cl.name]):
                out.append(f"{g.key} on {where[g.key]} fits {cl.name}, which it ranks "
                           f"{'better' if rk[d] < rk[c] else 'equal and cheaper'}, beside the plan")
    return out


def false_passed_over(f: Fleet, groups: Sequence[PlacementGroup], plan) -> list[str]:
    """Every `passed_over` reason of every placement, checked: PreferenceTaken here, the rest by
    the oracle's checks of unplaced reasons (true of a cluster the group is not on)."""
    by_key = {w.key: g for g in groups for w in g.workloads}
    names = {cl.name for cl in f.clusters}
    where = {p.workload: p.cluster for p in plan.placements}
    bad = []
    for p in plan.placements:
        g = by_key[p.workload]
        parts = [i for _, i in O.instances(g)]
        for cname, r in p.passed_over.items():
            cl = f.cluster(cname)
            if r.code == "PreferenceTaken":
                ok = _check_taken(r, g, parts, cl, f, groups, plan, where)
            else:
                ok = O._check(r, g, parts, cl, f, groups, plan, names, where, by_key)
            if ok is not True:
                bad.append(f"{p.workload} passed over {cname}: {r.code} {r.render()!r} is false ({ok})")
    return bad


def _check_taken(r, g, parts, cl: Cluster, f: Fleet, groups, plan, where) -> bool | str:
    base = O.plan_load(f, groups, plan, keep=lambda o: False)[cl.name]
    if not O.fits(parts, cl.nodes, base):
        return "it does not fit alone"
    if O.fits(parts, cl.nodes, O.plan_load(f, groups, plan)[cl.name]):
        return "it fits beside the plan"
    p = O.priority(g)
    if not O.fits(parts, cl.nodes, O.plan_load(f, groups, plan, keep=lambda o: O.priority(o) > p)[cl.name]):
        return "higher-priority work keeps it out"
    return (bool(r.by) and all(where.get(w) == cl.name for w in r.by)) or f"blames {r.by}, not all on {cl.name}"


# --- random instances -----------------------------------------------------------------------------

COSTS = (None, Decimal(1), Decimal("2.5"), Decimal(4), Decimal("0.75"))


def pref_instance(seed: int, family: O.Family = O.FAMILIES["gpu"]) -> tuple[Fleet, list[PlacementGroup]]:
    """An oracle instance with random cluster preferences, costs and per-group cluster orders
    (now and then naming a cluster the fleet lacks)."""
    f, gs = O.instance(family, seed)
    rnd = random.Random(10_000 + seed)
    clusters = tuple(replace(cl, preference=rnd.choice((0, 0, 1, 2)), cost=rnd.choice(COSTS)) for cl in f.clusters)
    f = replace(f, clusters=clusters)
    names = [cl.name for cl in clusters] + ["gone"]
    out = []
    for g in gs:
        if rnd.random() < 0.5:
            order = rnd.sample(names, rnd.randint(1, len(names)))
            ws = tuple(replace(w, annotations={**(w.annotations or {}), ORDER: ",".join(order)}) for w in g.workloads)
            g = replace(g, workloads=ws)
        out.append(g)
    return f, out
