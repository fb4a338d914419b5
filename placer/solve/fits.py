"""Capacity arithmetic for the options search (placer.solve.options): necessary conditions
for a group's pods to fit some nodes, cheap enough to prune every candidate change before
it is proven by a re-solve."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from placer.model.fleet import Cluster
from placer.solve.groups import UNLIMITED, gpus_of


@dataclass(frozen=True)
class PodKind:
    """Pods of one instance of a group on one cluster, as the arithmetic sees them."""

    demand: dict[str, int]
    pods: int
    gpu: int
    nodes: frozenset[str]                         # nodes its predicates allow


Entry = tuple[Mapping[str, int], int, frozenset[int]]   # free, multiplicity, parts that may go there


def could_fit(parts: Sequence[PodKind], entries: Sequence[Entry], gpu_names: Sequence[str]) -> bool:
    """Necessary conditions for every pod of `parts` to fit the nodes `entries` describe:
    one pod of each kind fits some node; every resource in total over the nodes some pod
    may use; each kind's pods at most what its nodes hold of it alone (every resource of the
    node counted); for each GPU size s, pods of >= s GPUs at most the s-blocks free."""
    for j, p in enumerate(parts):
        room = sum(m * min(f.get(r, 0) // v for r, v in p.demand.items() if v > 0)
                   for f, m, ok in entries if m and j in ok) if any(v > 0 for v in p.demand.values()) else p.pods
        if room < p.pods:
            return False
    usable = [e for e in entries if e[1] and e[2]]
    for r in {r for p in parts for r in p.demand}:
        need = sum(p.demand.get(r, 0) * p.pods for p in parts)
        if need > sum(f.get(r, 0) * m for f, m, _ in usable):
            return False
    for s in sorted({p.gpu for p in parts if p.gpu}):
        idx = frozenset(j for j, p in enumerate(parts) if p.gpu >= s)
        need = sum(parts[j].pods for j in idx)
        if need > sum(m * (gpus_of(f, gpu_names) // s) for f, m, ok in usable if ok & idx):
            return False
    return True


def free_of(alloc: Mapping[str, int], load: Mapping[str, int]) -> dict[str, int]:
    """A node's free capacity under `load` (pod slots unlimited when it declares none)."""
    f = {r: max(0, v - load.get(r, 0)) for r, v in alloc.items()}
    if "pods" not in alloc:
        f["pods"] = UNLIMITED
    return f


def add_demand(into: dict[str, dict[str, int]], node: str, demand: Mapping[str, int], times: int = 1) -> None:
    """`times` x `demand` added to `into[node]` (negative `times` takes it out)."""
    slot = into.setdefault(node, {})
    for r, v in demand.items():
        slot[r] = slot.get(r, 0) + v * times


def usable_nodes(cl: Cluster, parts: Sequence[PodKind]) -> dict[str, frozenset[int]]:
    """node -> the parts whose predicates allow it (nodes no part may use left out)."""
    out = {}
    for n in cl.nodes:
        ok = frozenset(j for j, p in enumerate(parts) if n.name in p.nodes)
        if ok:
            out[n.name] = ok
    return out


def first_true(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """The smallest n in [lo, hi] with ok(n), for a monotone ok that holds at hi."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi
