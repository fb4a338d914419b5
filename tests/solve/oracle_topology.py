"""The topology half of the exact judge (tests/solve/oracle.py): plans judged from their nodes'
labels (required requests split, domains spanned by preferred ones), the topology reasons,
and random small fleets of blocks and racks. Nothing here imports placer's solver."""

from __future__ import annotations

import random
from typing import Sequence

from placer.model.fleet import Cluster, Fleet
from placer.model.workload import PlacementGroup
from tests.builders import cluster, fleet, group, wl
from tests.solve.oracle import HOST, Unit, demand, dom, fits, has_level, instances, may_run, units


def _cluster(f: Fleet, name: str) -> Cluster:
    cl = f.cluster(name)
    assert cl is not None, name
    return cl


def spread_of(f: Fleet, groups: Sequence[PlacementGroup], plan) -> int:
    """Values spanned by every preferred request of every placed group (from the plan's nodes)."""
    total = 0
    for g in groups:
        ps = [p for p in plan.placements if any(p.workload == w.key for w in g.workloads)]
        if len(ps) != len(g.workloads):
            continue
        insts = instances(g)
        nodes = {n.name: n for n in _cluster(f, ps[0].cluster).nodes}
        for key, required, pos in units(g):
            if required:
                continue
            want = {(insts[n][0], insts[n][1].key) for n in pos}
            vals = {dom(nodes[node], key) or "" for p in ps for node, per in p.nodes.items()
                    for ikey in per if (p.workload, ikey) in want}
            total += len(vals)
    return total


def topology_violations(f: Fleet, groups: Sequence[PlacementGroup], plan) -> list[str]:
    """Required requests of placed groups whose pods use more than one value (or none)."""
    out = []
    for g in groups:
        ps = [p for p in plan.placements if any(p.workload == w.key for w in g.workloads)]
        if not ps:
            continue
        insts = instances(g)
        nodes = {n.name: n for n in _cluster(f, ps[0].cluster).nodes}
        for key, required, pos in units(g):
            want = {(insts[n][0], insts[n][1].key) for n in pos}
            vals = {dom(nodes[node], key) for p in ps for node, per in p.nodes.items()
                    for ikey in per if (p.workload, ikey) in want}
            if required and (len(vals) != 1 or None in vals):
                out.append(f"{g.key}: required {key} spans {sorted(map(str, vals))}")
            if not has_level(_cluster(f, ps[0].cluster), key):
                out.append(f"{g.key}: placed on {ps[0].cluster}, which has no {key}")
    return out


def check_domain(r, g: PlacementGroup, us: Sequence[Unit], cl: Cluster, base) -> bool | str:
    """A required request whose pods fit in no single value of its key, by themselves; the
    numbers: how many of one of its pod kinds (the one named) fit in the roomiest value and
    on the whole cluster, each kind alone (per node: the least, over resources, of free over
    request)."""
    insts = [i for _, i in instances(g)]
    for key, required, pos in us:
        if not required or key != r.key or sum(insts[n].pods for n in pos) != r.pods:
            continue
        mine = [insts[n] for n in pos]
        if fits(mine, cl.nodes, base, [(key, True, tuple(range(len(mine))))]):
            continue
        for inst in mine:
            d = demand(inst)
            if d.get(r.resource, 0) != r.per_pod or (r.single and len(mine) != 1):
                continue
            per: dict[str, int] = {}
            total = 0
            for i, n in enumerate(cl.nodes):
                if not may_run(inst, n):
                    continue
                k = min(base[i].get(x, 0) // a for x, a in d.items() if a)
                total += k
                v = dom(n, key)
                if v is not None:
                    per[v] = per.get(v, 0) + k
            if max(per.values(), default=0) == r.largest and total == r.total:
                return True
        return f"numbers differ for {key}"
    return "no required request of that level fails to fit by itself"


# --- random instances with topology -----------------------------------------------------------

TOPO_KEYS = ("example.com/block", "example.com/rack", HOST)


def topo_instance(seed: int, big: bool = False) -> tuple[Fleet, list[PlacementGroup]]:
    """Small fleets of blocks and racks (one cluster in five without rack labels or
    levels), gangs asking for a level required or preferred, some only for one component.
    `big`: beyond the node-exact size (the class model), more and larger gangs, no host level."""
    from placer.model.topology import TopologyRequest

    rnd = random.Random(seed)
    cls = []
    per_rack, pods, n_wl = ((20, 40), (2, 16), (25, 40)) if big else ((1, 3), (1, 4), (4, 9))
    keys = TOPO_KEYS[:2] if big else TOPO_KEYS
    for c in range(rnd.randint(2, 3)):
        labelled = c == 0 or rnd.random() < 0.8
        specs = []
        for b in range(rnd.randint(1, 2)):
            for r in range(rnd.randint(1, 2)):
                s = f"{rnd.randint(*per_rack)}x{rnd.choice((8, 8, 4))} used={rnd.choice((0, 0, 1, 2, 4))}"
                if labelled:
                    s += f" example.com/block=b{b} example.com/rack=b{b}r{r}"
                specs.append(s)
        cls.append(cluster(f"c{c}", *specs, topology=TOPO_KEYS if labelled else (HOST,)))
    f = fleet(*cls)
    levels = [rnd.randrange(100) for _ in range(2)]
    gs = []
    for i in range(rnd.randint(*n_wl)):
        specs = [f"{rnd.randint(*pods)}x{rnd.choice((1, 2, 4, 8))}" for _ in range(rnd.choice((1, 1, 2)))]
        reqs = []
        roll = rnd.random()
        if roll < 0.75:
            comps = frozenset({"c0"}) if len(specs) > 1 and rnd.random() < 0.4 else None
            reqs.append(TopologyRequest(rnd.choice(keys), roll < 0.45, comps))
            if rnd.random() < 0.2:
                reqs.append(TopologyRequest(rnd.choice(TOPO_KEYS[:2]), rnd.random() < 0.5))
        gs.append(group(wl(f"ns/t{i:02d}", *specs, prio=rnd.choice(levels), topology=reqs)))
    return f, gs
