"""Why an unplaced group is not on each cluster: reasons as data (placer.reasons)."""

from __future__ import annotations

from typing import Mapping, Sequence

from .. import reasons as R
from ..scheduling import describe_constraints, fits_resources, matches_affinity, matches_node_selector, untolerated_taints
from ..workload import PodShape
from .problem import ClusterInfo, ClusterState, GroupInfo, Part, Problem, expand, try_place, undo


def static_reason(g: GroupInfo, info: ClusterInfo) -> R.Reason | None:
    """Reasons that hold even on an empty cluster: no matching node, pod too large."""
    if not info.classes:
        return R.NoSchedulableNodes()
    for p in g.parts:
        if info.compat(p):
            continue
        # nodes with room for one such pod: if there are some, predicates keep it off them
        roomy = [k.index for k in info.classes if fits_resources(p.demand, info.class_free[k.index])]
        if roomy or not info.matching(p):
            return _no_match(p, info, roomy or None)
        return _too_large(p, info)
    return None


def _no_match(p: Part, info: ClusterInfo, among: Sequence[int] | None = None) -> R.Reason:
    shape = p.instance.pod
    samples = [k.sample for k in info.classes if among is None or k.index in among]
    sel_ok = [n for n in samples if matches_node_selector(shape.node_selector, n.labels)]
    aff_ok = [n for n in sel_ok if matches_affinity(shape.affinity_terms, n)]
    if aff_ok:
        t = untolerated_taints(shape.tolerations, aff_ok[0].taints)[0]
        return R.NoMatchingNodes(p.instance.key, "taint", f"{t.key}={t.value}:{t.effect}" if t.value
                                 else f"{t.key}:{t.effect}")
    if sel_ok:
        return R.NoMatchingNodes(p.instance.key, "affinity", describe_constraints(
            PodShape(requests={}, affinity_terms=shape.affinity_terms)))
    return R.NoMatchingNodes(p.instance.key, "nodeSelector",
                             ",".join(f"{k}={v}" for k, v in sorted(shape.node_selector.items())))


def _too_large(p: Part, info: ClusterInfo) -> R.Reason:
    matching = info.matching(p)
    order = sorted(p.demand, key=lambda r: (r not in info.gpu_names, r != "cpu", r != "memory", r))
    for r in order:
        largest = max(info.class_free[k].get(r, 0) for k in matching)
        if p.demand[r] > largest:
            alloc = max(info.classes[k].sample.allocatable.get(r, 0) for k in matching)
            if p.demand[r] > alloc:
                return R.PodTooLarge(p.instance.key, r, p.demand[r], alloc, describe_constraints(p.instance.pod))
            return R.InsufficientCapacity(p.pods, r, p.demand[r], describe_constraints(p.instance.pod),
                                          largest, sum(info.class_free[k].get(r, 0) * info.classes[k].size
                                                       for k in matching))
    return R.NoSchedulableNodes()  # pragma: no cover - compat() empty implies a resource exceeds



def _explain_key(g: GroupInfo) -> tuple:
    """Groups with the same pods, priority and per-cluster policy get the same reasons."""
    pods = sorted(((tuple(sorted(p.demand.items())), p.pred_key, p.instance.key), p.pods) for p in g.parts)
    return (g.priority, tuple(g.eligible), tuple(sorted(g.static.items(), key=lambda kv: kv[0])), tuple(pods))


def explain(problem: Problem, g: GroupInfo, states: Mapping[int, ClusterState],
            placed_on: Mapping[int, list[GroupInfo]], cache: dict | None = None) -> dict[str, R.Reason]:
    """The first reason per cluster, in cluster order."""
    cache = {} if cache is None else cache
    key = _explain_key(g)
    if key in cache:
        return cache[key]
    out: dict[str, R.Reason] = {}
    for c, cl in enumerate(problem.clusters):
        if c in g.static:
            out[cl.name] = g.static[c]
            continue
        st = states[c]
        assign = try_place(st, g)
        if assign is not None:
            undo(st, g, assign)
            others = sorted(placed_on.get(c, []), key=lambda o: (-o.priority, o.key))
            higher = [o.key for o in others if o.priority > g.priority]
            out[cl.name] = R.CapacityTaken(tuple(higher) if higher else tuple(o.key for o in others),
                                           bool(higher))
            continue
        out[cl.name] = _capacity_reason(g, st)
    cache[key] = out
    return out


def _capacity_reason(g: GroupInfo, st: ClusterState) -> R.Reason:
    info = st.info
    for p in sorted(g.parts, key=lambda p: p.sort_key):
        classes = info.compat(p)
        nodes = [i for k in classes for i in info.class_nodes[k]]
        fit = sum(_per_node(p.demand, st.free[i]) for i in nodes)
        if fit >= p.pods:
            continue
        # the resource that runs out first for this pod kind
        order = sorted(p.demand, key=lambda r: (r not in info.gpu_names, r != "cpu", r != "memory", r))
        binding = next((r for r in order if r != "pods" and
                        sum(st.free[i].get(r, 0) // p.demand[r] for i in nodes) < p.pods), None)
        if binding is None:
            binding = next((r for r in order if r != "pods"), "pods")
        pool = [i for k in info.matching(p) for i in info.class_nodes[k]]
        largest = max((st.free[i].get(binding, 0) for i in pool), default=0)
        total = sum(st.free[i].get(binding, 0) for i in pool)
        return R.InsufficientCapacity(p.pods, binding, p.demand.get(binding, 0),
                                      describe_constraints(p.instance.pod), largest, total)
    pool = {i for p in g.parts for k in info.matching(p) for i in info.class_nodes[k]}
    fitting = _fit_count(g, st)
    return R.DoesNotFitTogether(g.pods, fitting, g.gpus, sum(st.gpu[i] for i in pool))


def _per_node(demand: Mapping[str, int], free: Mapping[str, int]) -> int:
    return min((free.get(r, 0) // v for r, v in demand.items() if v), default=0)


def _fit_count(g: GroupInfo, st: ClusterState) -> int:
    """How many of the group's pods fit at once (greedy), state left unchanged."""
    done = []
    compat = [st.info.compat(p) for p in g.parts]
    for j in expand(g):
        i = st.best_node(g.parts[j].demand, g.parts[j].gpu, compat[j])
        if i is None:
            continue
        st.take(i, g.parts[j].demand)
        done.append((j, i))
    undo(st, g, done)
    return len(done)
