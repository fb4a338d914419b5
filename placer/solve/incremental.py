"""A few arrivals placed against the plan already committed, reusing what the previous
round built: per cluster, its node classes (rebuilt only when the cluster changed) and its
free capacity after the committed demand (updated by what was added or went away since,
never recomputed from scratch while the cluster is unchanged).

`place_arrivals` places every group exactly (`try_place`: each pod on a node where it fits,
as the greedy baselines do), in priority order (highest first, then the most GPUs), each on
the first cluster in fleet order where it fits. It answers only when every group is placed:
then nothing is left out, so no lower-priority placement can keep a higher-priority group
out and no reason is owed. When a group does not fit anywhere, or asks for topology (the
class model's domains), it returns None and the caller runs the full `solve`, which judges
every pending group together (priorities, GPUs, reasons). What is committed is never moved.

The returned plan goes through the same independent verifier as every plan."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from placer.model.fleet import Cluster, Fleet
from placer.model.plan import Plan, Summary
from placer.model.quota import add_usage
from placer.model.workload import PlacementGroup, Workload
from placer.solve import _placements
from placer.solve.domains import needs_node_classes
from placer.solve.greedy import greedy_order
from placer.solve.groups import GPU_RESOURCES, ClusterInfo, GroupInfo
from placer.solve.problem import (
    NODE_EXACT_MAX_NODES,
    Problem,
    committed_on,
    group_info,
    judge,
    rank_clusters,
    uses_match_fields,
)
from placer.solve.quotas import group_use, tally
from placer.solve.state import ClusterState, PodAssign, try_place
from placer.solve.verify import verify

Signature = tuple


@dataclass
class _Kept:
    """One cluster as the last round left it."""

    cluster: Cluster                      # what its classes were built from (reserved left out)
    by_name: bool
    info: ClusterInfo
    state: ClusterState                   # free capacity after the committed groups in `pool`
    pool: dict[Signature, list[PodAssign]] = field(default_factory=dict)


@dataclass
class Reuse:
    """What one round leaves the next: clusters' classes and capacity, and each committed
    group's pod kinds (by its workloads, which the daemon's caches keep as the same objects
    while they are unchanged). Counters say what was reused (tests and logs read them)."""

    kept: dict[str, _Kept] = field(default_factory=dict)
    memo: dict[tuple, tuple[tuple[Workload, ...], GroupInfo, Signature]] = field(default_factory=dict)
    rebuilt: int = 0                      # clusters whose classes were built again
    reused: int = 0                       # clusters whose classes were reused


def _signature(g: GroupInfo) -> Signature:
    """What a committed group takes, part by part in order (so an assignment made for one
    group serves any group of the same signature)."""
    return tuple((tuple(sorted(p.demand.items())), p.pred_key, p.pods, p.topo) for p in g.parts) + (
        (id(g.group),) if g.units else ())


def _normal(cl: Cluster) -> Cluster:
    return dataclasses.replace(cl, reserved={}) if cl.reserved else cl


def place_arrivals(reuse: Reuse, fleet: Fleet, groups: Sequence[PlacementGroup],
                   committed: Sequence[tuple[PlacementGroup, str]] = (),
                   gpu_resources: Sequence[str] = GPU_RESOURCES, *, by_name: bool = False) -> Plan | None:
    """Every group placed against `committed` on `fleet`, or None (the full solve decides).
    `by_name`: each node its own class even before any group names nodes (the daemon's
    steered copies will: building them once, not again when the first one is committed)."""
    t0 = time.monotonic()
    gpu_names = tuple(gpu_resources)
    clusters = list(fleet.clusters)
    names = {cl.name: c for c, cl in enumerate(clusters)}
    ginfos = [group_info(i, g, gpu_names) for i, g in enumerate(groups)]
    if any(g.units for g in ginfos):
        return None
    triples = _committed(reuse, committed, clusters, names, gpu_names, len(ginfos))
    com = [(g, c) for g, c, _ in triples]
    cinfos = [g for g, _ in com]
    node_exact = sum(len(cl.nodes) for cl in clusters if cl.reachable) <= NODE_EXACT_MAX_NODES
    by_name = by_name or node_exact or uses_match_fields(ginfos + cinfos)
    kept: dict[int, _Kept] = {}
    for c, cl in enumerate(clusters):
        if cl.reachable:
            kept[c] = _cluster(reuse, c, cl, by_name or needs_node_classes(cl, ginfos + cinfos), gpu_names)
    reuse.kept = {clusters[c].name: k for c, k in kept.items()}
    assigns, overcommitted = _settle(kept, triples, clusters)
    infos = {c: k.info for c, k in kept.items()}
    for rank, g in enumerate(sorted(ginfos, key=lambda g: g.key)):
        g.rank = rank
    # a group's claims are walked only when some cluster knows its StorageClasses (as in
    # problem.prepare: storage_reason judges no other; the daemon's simulated fleets declare none)
    storage = any(cl.storage_classes is not None for cl in clusters)
    for g in ginfos:
        judge(g, clusters, infos, names, gpu_names, storage)
    rank_clusters(ginfos, clusters)       # arrivals take their clusters in their own order too
    placed = _place(kept, ginfos)
    if placed is None:
        return None
    problem = Problem(fleet, clusters, infos, ginfos, com, gpu_names, node_exact)
    if not _within_quotas(problem):
        return None                       # issue 23: the full solve keeps the quotas and says why
    plan, near = _plan(problem, placed, assigns, overcommitted, t0)
    verify(fleet, groups, plan, committed=near)
    return plan


def _within_quotas(problem: Problem) -> bool:
    """Every arrival placed keeps every fleet-wide quota (all of them together)."""
    t = tally(problem)
    if t is None:
        return True
    use: dict[str, dict[str, int]] = {}
    for g in problem.groups:
        for q, u in group_use(t.quotas, g).items():
            add_usage(use, q, u)
    return t.room(use)


def _committed(reuse: Reuse, committed: Sequence[tuple[PlacementGroup, str]], clusters: Sequence[Cluster],
               names: Mapping[str, int], gpu_names: Sequence[str], first: int
               ) -> list[tuple[GroupInfo, int, Signature]]:
    """Each committed group's pod kinds, from memory when its workloads are the same objects."""
    memo: dict[tuple, tuple[tuple[Workload, ...], GroupInfo, Signature]] = {}
    out = []
    for i, (g, cname) in enumerate(committed):
        # the ids are of objects the memo holds, so an id found there is that very object
        key = (cname, tuple(map(id, g.workloads)))
        hit = reuse.memo.get(key)
        if hit is None:
            info = group_info(first + i, g, gpu_names)
            c = committed_on(info, cname, clusters, names, gpu_names)
            hit = (g.workloads, info, _signature(info))
        else:
            c = names[cname]
            hit[1].group, hit[1].index = g, first + i
        memo[key] = hit
        out.append((hit[1], c, hit[2]))
    reuse.memo = memo                          # what is no longer committed is forgotten
    return out


def _cluster(reuse: Reuse, c: int, cl: Cluster, by_name: bool, gpu_names: Sequence[str]) -> _Kept:
    """The cluster's classes and capacity from the last round, unless it changed since. Kept
    node by node, they also serve a round that classes would: each node its own class is
    exact for every group (and no round pays for building them back and forth)."""
    norm = _normal(cl)
    old = reuse.kept.get(cl.name)
    if old is not None and old.by_name >= by_name and old.info.index == c and old.cluster == norm \
            and old.info.gpu_names == tuple(gpu_names):
        reuse.reused += 1
        return old
    reuse.rebuilt += 1
    info = ClusterInfo(c, norm, by_name, gpu_names)
    return _Kept(norm, by_name, info, ClusterState(info))


def _settle(kept: Mapping[int, _Kept], com: Sequence[tuple[GroupInfo, int, Signature]], clusters: Sequence[Cluster]
            ) -> tuple[list[tuple[GroupInfo, int, PodAssign]], dict[str, str]]:
    """Bring each cluster's capacity to the committed groups now: those it already holds keep
    their nodes, those gone give theirs back, and then the new ones are placed."""
    assigns: list[tuple[GroupInfo, int, PodAssign]] = []
    overcommitted: dict[str, str] = {}
    pools = {c: k.pool for c, k in kept.items()}
    for k in kept.values():
        k.pool = {}
    fresh: list[tuple[GroupInfo, int, Signature]] = []
    for g, c, sig in com:
        if c not in kept:
            continue
        taken = pools[c].get(sig)
        if taken:
            assign = taken.pop()
            assigns.append((g, c, assign))
            kept[c].pool.setdefault(sig, []).append(assign)
        else:
            fresh.append((g, c, sig))
    for c, pool in pools.items():
        st = kept[c].state
        for sig, left in pool.items():
            for assign in left:                 # gone since the last round: its capacity comes back
                for j, i in assign:
                    st.give(i, dict(sig[j][0]))
    for g, c, sig in fresh:
        got = try_place(kept[c].state, g)
        if got is None:
            overcommitted[g.key] = f"no longer fits on {clusters[c].name}"
            continue
        assigns.append((g, c, got))
        kept[c].pool.setdefault(sig, []).append(got)
    return assigns, overcommitted


def _place(kept: Mapping[int, _Kept], ginfos: Sequence[GroupInfo]) -> dict[int, tuple[int, PodAssign]] | None:
    """Every group in priority order on the first cluster where it fits; None (and the
    capacity as it was) when one fits nowhere."""
    out: dict[int, tuple[int, PodAssign]] = {}
    for g in greedy_order(ginfos):
        for c in g.eligible:
            assign = try_place(kept[c].state, g)
            if assign is not None:
                out[g.index] = (c, assign)
                break
        else:
            by_idx = {x.index: x for x in ginfos}
            for gi, (c, assign) in out.items():
                for j, i in assign:
                    kept[c].state.give(i, by_idx[gi].parts[j].demand)
            return None
    for gi, (c, assign) in out.items():
        g = next(x for x in ginfos if x.index == gi)
        kept[c].pool.setdefault(_signature(g), []).append(assign)
    return out


def _plan(problem: Problem, placed: Mapping[int, tuple[int, PodAssign]],
          assigns: Sequence[tuple[GroupInfo, int, PodAssign]], overcommitted: Mapping[str, str], t0: float
          ) -> tuple[Plan, list[tuple[PlacementGroup, str]]]:
    """The plan, and the committed groups it names: those with pods on a node the arrivals
    use (what the verifier needs to judge them; the rest is as the last rounds left it)."""
    placements = []
    touched: set[tuple[int, int]] = set()
    for g in problem.groups:
        c, assign = placed[g.index]
        placements += _placements(problem, g, c, assign)
        touched.update((c, i) for _, i in assign)
    near = [(g, c, a) for g, c, a in assigns if any((c, i) in touched for _, i in a)]
    committed = [p for g, c, a in near for p in _placements(problem, g, c, a)]
    seconds = time.monotonic() - t0
    summary = Summary(workloads=len(placements), placed=len(placements),
                      gpus_requested=sum(g.gpus for g in problem.groups), gpus_placed=sum(p.gpus for p in placements),
                      solve_seconds=seconds, optimal=False, status="incremental", groups=len(problem.groups),
                      groups_placed=len(placed), timings={"incremental": round(seconds, 4)})
    plan = Plan(tuple(placements), (), summary, tuple(committed), dict(overcommitted))
    return plan, [(g.group, problem.clusters[c].name) for g, c, _ in near]


__all__ = ["Reuse", "place_arrivals"]
