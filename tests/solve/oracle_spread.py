"""An exact judge for spread (`placer.dev/spread`), written without placer's solver.

It reads the annotations itself and decides with plain enumeration what the best plan gives:
- divide (one workload, single-pod units such as a Deployment's replicas): per cluster the most
  units its nodes hold at node level (per node, the fewest of free/request over resources, on
  nodes the pod may run on), then every vector of shares is enumerated: the most units placed
  such that the total is 0 or in [min, units] and at most N clusters carry a share (with weights,
  only weighted clusters), then, at that total, the least deviation beyond one unit of the
  weights (sum over weighted clusters that can take a unit of max(0, |W k_c - w_c T| - W));
- duplicate: a copy fits a cluster when the exact node-level check of tests/solve/oracle.py says
  so; placed when the copies that fit number N (default: every cluster that could take each of
  its pods at all), else nothing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping, Sequence

from placer.model.fleet import Fleet, Node
from placer.model.workload import Instance, PlacementGroup, Workload
from tests.solve.oracle import demand, fits, free, instances, may_run, policy_ok


@dataclass(frozen=True)
class Policy:
    mode: str
    clusters: int | None
    weights: dict[str, int]
    min_replicas: int | None


def policy_of(w: Workload) -> Policy:
    a = w.annotations
    weights = {}
    for item in (a.get("placer.dev/spread-weights") or "").split(","):
        if item.strip():
            k, v = item.split("=")
            weights[k.strip()] = int(v)
    n = a.get("placer.dev/spread-clusters")
    m = a.get("placer.dev/spread-min-replicas")
    return Policy(a["placer.dev/spread"], int(n) if n else None, weights, int(m) if m else None)


def units_on(inst: Instance, nodes: Sequence[Node], caps: Sequence[Mapping[str, int]]) -> int:
    """How many single pods of `inst` the nodes hold (independent, identical pods: per node)."""
    d = demand(inst)
    total = 0
    for n, cap in zip(nodes, caps):
        if may_run(inst, n):
            total += min(cap.get(r, 0) // v for r, v in d.items() if v)
    return total


def divide_options(f: Fleet, g: PlacementGroup, caps: Mapping[str, Sequence[Mapping[str, int]]] | None = None,
                   max_excess: int | None = None) -> tuple[int, list[dict[str, int]]]:
    """(the most replicas placed, every share vector reaching it with the least excess beyond
    one unit of the weights); `max_excess`: vectors with more excess are not allowed (the
    slack the nodes as they are force: `slack`)."""
    w = g.workloads[0]
    pol = policy_of(w)
    (inst,) = w.instances
    total = inst.pods
    room = {}
    for cl in f.clusters:
        cap = caps[cl.name] if caps else [free(n) for n in cl.nodes]
        room[cl.name] = units_on(inst, cl.nodes, cap) if cl.reachable and policy_ok(g, cl) else 0
    able = [c for c, r in room.items() if r > 0]
    weights = {c: pol.weights[c] for c in able if c in pol.weights}
    lo = min(pol.min_replicas or total, total)
    best, found = (0, 0), [{}]
    for ks in itertools.product(*[range(min(room[c], total) + 1) for c in able]):
        T = sum(ks)
        share = {c: k for c, k in zip(able, ks) if k}
        if T == 0 or T < lo or T > total or (pol.clusters and len(share) > pol.clusters):
            continue
        if pol.weights and any(c not in weights for c in share):
            continue
        if max_excess is not None and pol.weights and deviation(share, weights, T) > max_excess:
            continue
        key = (T, -deviation(share, weights, T))
        if key > best:
            best, found = key, [share]
        elif key == best:
            found.append(share)
    return best[0], found


def slack(f: Fleet, g: PlacementGroup) -> int:
    """The excess the nodes as they are force on a weighted divide: the least at its best total alone."""
    best, options = divide_options(f, g)
    pol = policy_of(g.workloads[0])
    if not best or not pol.weights:
        return 0
    (inst,) = g.workloads[0].instances
    able = [cl.name for cl in f.clusters
            if cl.reachable and policy_ok(g, cl) and units_on(inst, cl.nodes, [free(n) for n in cl.nodes]) > 0]
    return deviation(options[0], {c: pol.weights[c] for c in able if c in pol.weights}, best)


def deviation(share: Mapping[str, int], weights: Mapping[str, int], T: int) -> int:
    """How far beyond one unit of their weights the shares are: sum of max(0, |W k - w T| - W)."""
    W = sum(weights.values())
    return sum(max(0, abs(W * share.get(c, 0) - w * T) - W) for c, w in weights.items())


def duplicate_outcome(f: Fleet, g: PlacementGroup) -> tuple[bool, list[str]]:
    """(placed?, clusters a copy fits)."""
    pol = policy_of(g.workloads[0])
    insts = [i for _, i in instances(g)]
    eligible, fit = [], []
    for cl in f.clusters:
        if not cl.reachable or not policy_ok(g, cl):
            continue
        caps = [free(n) for n in cl.nodes]
        if all(any(may_run(i, n) and all(demand(i)[r] <= c.get(r, 0) for r in demand(i))
                   for n, c in zip(cl.nodes, caps)) for i in insts):
            eligible.append(cl.name)
            if fits(insts, cl.nodes, caps):
                fit.append(cl.name)
    need = pol.clusters or len(eligible)
    return (need > 0 and len(fit) >= need and need <= len(eligible)), fit
