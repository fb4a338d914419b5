"""Why an unplaced group is not on each cluster: reasons as data (placer.model.reasons), each one
true at node level.

Per cluster, in this order:
- policy (pins, exclusions, cluster selectors, reachability; from placer.solve.problem) and
  statics that hold on the cluster as it is (worked out here): no schedulable node, no node
  passing the pods' predicates (named by the predicate that rules out every schedulable
  node), a pod larger than any matching node, no matching node with room for one pod
  (RoomForFewer with room 0: the request that binds on the nodes with room for its first);
- the group does not fit the cluster as it is (an exact check): the instance that does not
  fit, with how many of its pods the nodes hold and the request that binds there
  (RoomForFewer), or how many of the group's pods fit together at most;
- it fits the cluster as it is but not after the plan's higher-priority placements there:
  those workloads are named; else the capacity went to work of its own priority (the repair
  lets no lower-priority work keep it out).

Exact checks (placer.solve.repair.pack) run while the deadline allows; past it, a cluster
whose reason is not worked out yet says so (Unexplained) instead of guessing.
"""

from __future__ import annotations

import time
from dataclasses import fields, replace
from typing import Any, Mapping, Sequence

from placer.model import reasons as R
from placer.model.workload import PodShape
from placer.solve.groups import UNLIMITED, ClusterInfo, GroupInfo, Part, expand
from placer.solve.problem import Problem
from placer.solve.repair import pack
from placer.solve.scheduling import (
    UNSCHEDULABLE_TAINT,
    describe_constraints,
    fits_resources,
    matches_affinity,
    matches_node_selector,
    untolerated_taints,
)
from placer.solve.state import ClusterState, PodAssign, holds, may_fit, redo_all, try_place, undo
from placer.solve.topology import domain_reason


def _who(g: GroupInfo, p: Part) -> str:
    return p.workload.key if len(g.group.workloads) > 1 else ""


def _alloc(node, r: str) -> int:
    return node.allocatable.get(r, UNLIMITED if r == "pods" else 0)


def _resources(p: Part, info: ClusterInfo) -> list[str]:
    """The pod's resources, GPUs first, then CPU, memory, the rest, pod slots last."""
    return sorted(p.demand, key=lambda r: (r == "pods", r not in info.gpu_names, r != "cpu", r != "memory", r))


# --- statics: true on the cluster as it is, whatever the plan ---------------------------------

def static_reason(g: GroupInfo, info: ClusterInfo) -> R.Reason | None:
    if not info.classes:
        return R.NoSchedulableNodes()
    for p in g.parts:
        if not info.matching(p) and all(k.sample.unschedulable for k in info.classes):
            return R.NoSchedulableNodes()       # only cordoned nodes, and the pods do not tolerate it
        if not info.compat(p):
            # the same pod kind gets the same reason: worked out once per cluster, then named
            # for this part (its instance, its pods, its workload)
            who = _who(g, p)
            key = (p.kind_key, p.instance.key, p.pods, who)
            got = info.statics.get(key)
            if not isinstance(got, R.Reason):
                kind = info.statics.get(p.kind_key)
                if not isinstance(kind, R.Reason):
                    kind = info.statics[p.kind_key] = _part_static(g, p, info)
                got = info.statics[key] = _named(kind, p, who)
            return got
    return None


_PER_PART = ("instance", "pods", "workload")


def _named(reason: R.Reason, p: Part, who: str) -> R.Reason:
    """A static reason worked out for another part of the same kind (demand and predicates:
    all that `_part_static` reads), named for part `p`."""
    values = {"instance": p.instance.key, "pods": p.pods, "workload": who}
    named: Any = reason                  # every reason is a frozen dataclass
    return replace(named, **{f.name: values[f.name] for f in fields(named) if f.name in _PER_PART})


def _part_static(g: GroupInfo, p: Part, info: ClusterInfo) -> R.Reason:
    matching = info.matching(p)
    if not matching:
        return _no_match(g, p, info, [k.index for k in info.classes])
    # no matching node has room: if other nodes do, the predicates keep the pods off them
    roomy = [k.index for k in info.classes if fits_resources(p.demand, info.class_free[k.index])]
    if roomy:
        return _no_match(g, p, info, roomy, among_roomy=True)
    match = describe_constraints(p.instance.pod)
    for r in _resources(p, info):
        # a class holds nodes of equal free capacity, not equal allocatable: ask every node
        alloc = [max(_alloc(n, r) for n in info.classes[k].nodes) for k in matching]
        if max(alloc) < p.demand[r]:
            return R.PodTooLarge(p.instance.key, r, p.demand[r], max(alloc), match, _who(g, p))
    for r in _resources(p, info):
        free = [(info.class_free[k].get(r, 0), info.classes[k].size) for k in matching]
        if max(f for f, _ in free) < p.demand[r]:
            return R.InsufficientCapacity(p.pods, r, p.demand[r], match, max(f for f, _ in free),
                                          sum(f * n for f, n in free))
    frees = [info.class_free[k] for k in matching for _ in info.classes[k].nodes]
    return _room_reason(g, p, info, frees)


def _room_reason(g: GroupInfo, p: Part, info: ClusterInfo, frees: Sequence[Mapping[str, int]]) -> R.RoomForFewer:
    """How many of the part's pods the nodes it may use (free capacity `frees`) hold at once,
    and the request that binds on the nodes with room for its first one (GPUs first)."""
    rs = _resources(p, info)
    d = p.demand
    room = sum(min(f.get(r, 0) // d[r] for r in rs) for f in frees)
    first = rs[0]
    holders = [f for f in frees if f.get(first, 0) >= d[first]]

    def by(r: str) -> int:
        return sum(f.get(r, 0) // d[r] for f in holders)
    limit = min(rs, key=lambda r: (by(r), r != first, rs.index(r)))
    # nodes where another request alone allows fewer pods than the limit does
    short = tuple((r, n) for r in rs if r != limit
                  for n in [sum(f.get(r, 0) // d[r] < f.get(limit, 0) // d[limit] for f in holders)] if n)
    return R.RoomForFewer(p.instance.key, p.pods, room, first, d[first], len(holders),
                          sum(f.get(first, 0) for f in frees), limit, by(limit),
                          sum(f.get(limit, 0) for f in holders), d[limit], describe_constraints(p.instance.pod),
                          _who(g, p), short)


def _no_match(g: GroupInfo, p: Part, info: ClusterInfo, among: Sequence[int],
              among_roomy: bool = False) -> R.Reason:
    """No node of the classes `among` passes the predicates: the first predicate that rules
    them all out."""
    shape = info.shape(p) or p.instance.pod
    samples = [info.classes[k].sample for k in among]
    sel_ok = [n for n in samples if matches_node_selector(shape.node_selector, n.labels)]
    who = _who(g, p)
    if not sel_ok:
        return R.NoMatchingNodes(p.instance.key, "nodeSelector",
                                 ",".join(f"{k}={v}" for k, v in sorted(shape.node_selector.items())),
                                 who, among_roomy)
    aff_ok = [n for n in sel_ok if matches_affinity(shape.affinity_terms, n)]
    if not aff_ok:
        return R.NoMatchingNodes(p.instance.key, "affinity", describe_constraints(
            PodShape(requests={}, affinity_terms=shape.affinity_terms)), who, among_roomy)
    # no untolerated taint: the cordon keeps it off (a cordoned node's implied taint)
    t = (untolerated_taints(shape.tolerations, aff_ok[0].taints) or [UNSCHEDULABLE_TAINT])[0]
    return R.NoMatchingNodes(p.instance.key, "taint", f"{t.key}={t.value}:{t.effect}" if t.value
                             else f"{t.key}:{t.effect}", who, among_roomy)


# --- against the plan ------------------------------------------------------------------------

def fits(st: ClusterState, g: GroupInfo, deadline: float | None) -> bool:
    """Does the whole group fit the state (best fit, else exactly)? The state is unchanged.
    Remembered per pod shape while the state is unchanged (reasons ask it of every unplaced
    group on every cluster; a skipped exact check is not remembered)."""
    key = ("fits", g.shape)
    known = st.recall(key)
    if known is not None:
        return bool(known)
    held = holds(st, g)
    if held is None and (one := _kept(g, "_one_kind", _one_kind)) is not None:
        held = holds(st, one)
    if held is not None:
        st.remember(key, held)
        return held
    if (wide := _kept(g, "_widest", _widest)) is not None and holds(st, wide):
        st.remember(key, True)
        return True
    mark = st.mark()
    assign = try_place(st, g)
    if assign is not None:
        undo(st, g, assign)
        st.restore(mark)
        st.remember(key, True)
        return True
    if not may_fit(st, g):
        st.remember(key, False)
        return False
    if pack(st, g, deadline=deadline) is not None:
        st.remember(key, True)
        return True
    if st.proven_no_fit(g.shape):
        st.remember(key, False)
    return False


def _kept(g: GroupInfo, name: str, make) -> GroupInfo | None:
    """`make(g)`, made once per group (reasons ask `fits` of a group on every cluster, up to
    three states each; issue 24: the stand-ins were rebuilt, dataclasses replaced, each time),
    again once its parts change (`GroupInfo.forget` makes a new shape)."""
    shape = g.shape
    got = g.__dict__.get(name)
    if got is None or got[0] is not shape:
        got = g.__dict__[name] = (shape, make(g))
    return got[1]


def _one_kind(g: GroupInfo) -> GroupInfo | None:
    """A group whose parts are all one pod kind (the same demand and predicates; no topology
    request) as one part of all its pods: its pods are interchangeable, so it fits exactly when
    that part does, which `holds` answers by counting (a LeaderWorkerSet's leaders and workers,
    a PyTorchJob's master and workers), instead of placing every pod and giving it back."""
    if g.units or len(g.parts) < 2:
        return None
    first = g.parts[0]
    if any(p.kind_key != first.kind_key for p in g.parts[1:]):
        return None
    part = replace(first, instance=replace(first.instance, pods=g.pods))
    return GroupInfo(g.index, g.group, g.policy, [part])


def _widest(g: GroupInfo) -> GroupInfo | None:
    """A group whose parts share their predicates (no topology request) as one part of all its
    pods, each asking for the most any of its pods asks for, of every resource: where those
    fit, the group's own pods fit on the same nodes, so `holds` on it proves a fit by counting
    (a PyTorchJob's master and workers of different CPU; issue 24: the reasons placed and gave
    back every pod of such groups). Not a proof of the contrary."""
    if g.units or len(g.parts) < 2:
        return None
    first = g.parts[0]
    if any(p.pred_key != first.pred_key for p in g.parts[1:]):
        return None
    demand: dict[str, int] = {}
    for p in g.parts:
        for r, v in p.demand.items():
            demand[r] = max(demand.get(r, 0), v)
    part = replace(first, instance=replace(first.instance, pods=g.pods), demand=demand,
                   gpu=max(p.gpu for p in g.parts))
    return GroupInfo(g.index, g.group, g.policy, [part])


def _explain_key(g: GroupInfo, statics: Mapping[int, R.Reason]) -> tuple:
    """Groups with the same pods, priority and per-cluster policy get the same reasons."""
    pods = sorted(((tuple(sorted(p.demand.items())), p.pred_key, p.instance.key, _who(g, p)), p.pods)
                  for p in g.parts)
    return (g.priority, tuple(g.eligible), tuple(sorted(statics.items(), key=lambda kv: kv[0])), tuple(pods),
            tuple(g.units), g.index if g.units else None)


# what `_dynamic` found: the cluster as it is holds no such group, higher-priority work took
# the room, the room is there beside the whole plan, work of the same (or lower) priority took it
_CAPACITY, _TAKEN_HIGHER, _ROOM_LEFT, _TAKEN = range(4)


class _AsItIs(dict):
    """Each cluster's free capacity as it is, or beside `placed` (a plan's groups on it), built
    when first asked for (issue 24: at 1,000 workloads on 10,000 nodes the reasons asked for one
    cluster's of 20; at 4,000 replaying the whole plan on every cluster was most of their time)."""

    def __init__(self, problem: Problem, placed: Mapping[int, list[tuple[GroupInfo, PodAssign]]] | None = None):
        super().__init__()
        self.problem = problem
        self.placed = placed or {}

    def __missing__(self, c: int) -> ClusterState:
        st = self[c] = self.problem.state_of(c)
        if self.placed.get(c):
            redo_all(st, self.placed[c])
        return st


class Explainer:
    """Reasons for every unplaced group of a plan. Call `reasons` in order of decreasing
    priority: the states after higher-priority placements are built incrementally, each
    cluster's when it is asked for."""

    def __init__(self, problem: Problem, result: Mapping[int, tuple[int, PodAssign]], deadline: float | None):
        self.problem = problem
        self.deadline = deadline
        by_idx = {g.index: g for g in problem.groups}
        self.placed: dict[int, list[tuple[GroupInfo, PodAssign]]] = {}
        for gi, (c, assign) in result.items():
            self.placed.setdefault(c, []).append((by_idx[gi], assign))
        for lst in self.placed.values():
            lst.sort(key=lambda ga: (-ga[0].priority, ga[0].key))
        self.base = _AsItIs(problem)                      # the fleet as it is (after committed)
        self.after = _AsItIs(problem, self.placed)        # beside the whole plan
        self.higher = _AsItIs(problem)                    # after placements above the current level
        self.taken = {c: 0 for c in self.placed}           # how many of each list `higher` holds
        self.level: int | None = None
        self.cache: dict[tuple, dict[str, R.Reason]] = {}
        self.taken_by: dict[tuple[int, int, bool], R.Reason] = {}
        self.statics: dict[tuple, dict[int, R.Reason]] = {}
        self.verdicts: dict[tuple, int] = {}

    def _advance(self, priority: int) -> None:
        if self.level is None or priority < self.level:
            self.level = priority

    def _held(self, c: int) -> int:
        """How many of cluster c's placements, all above the current level, `higher` holds
        (taken when the cluster is asked for, in bulk: each node moved once)."""
        lst, level = self.placed.get(c, []), self.level
        n = start = self.taken.get(c, 0)
        while n < len(lst) and level is not None and lst[n][0].priority > level:
            n += 1
        if n > start:
            redo_all(self.higher[c], lst[start:n])
            self.taken[c] = n
        return n

    def reasons(self, g: GroupInfo) -> dict[str, R.Reason]:
        statics = self._statics(g)
        key = _explain_key(g, statics)
        if key in self.cache:
            return self.cache[key]
        self._advance(g.priority)
        out: dict[str, R.Reason] = {}
        for c, cl in enumerate(self.problem.clusters):
            if c in statics:
                out[cl.name] = statics[c]
            elif self.deadline is not None and time.monotonic() >= self.deadline:
                out[cl.name] = R.Unexplained()             # bounded: no claim rather than a guess
            else:
                out[cl.name] = self._dynamic(g, c)
        self.cache[key] = out
        return out

    def _statics(self, g: GroupInfo) -> dict[int, R.Reason]:
        """Policy reasons from the problem; the statics of every other cluster the group may
        not use (prepare leaves them out: a group placed on one cluster never needs them).
        Those depend on the group's parts alone (kind, instance, pods, workload, in order):
        worked out once per such parts and the clusters they leave out."""
        parts = tuple((p.kind_key, p.instance.key, p.pods, _who(g, p)) for p in g.parts)
        key = (parts, tuple(g.static), tuple(g.eligible))
        rest = self.statics.get(key)
        if rest is None:
            rest = {}
            for c, info in self.problem.infos.items():
                if c not in g.static and c not in g.eligible:
                    why = static_reason(g, info)
                    assert why is not None, "prepare left out a cluster the pods may use"
                    rest[c] = why
            self.statics[key] = rest
        return {**g.static, **rest}

    def _dynamic(self, g: GroupInfo, c: int) -> R.Reason:
        # which of the four it is depends on the cluster, the priority level (the `higher`
        # state) and the group's shape (what `fits` reads): asked once per those
        key = (c, g.priority, g.shape)
        verdict = self.verdicts.get(key)
        if verdict is None:
            verdict = self.verdicts[key] = self._verdict(g, c)
        if verdict == _CAPACITY:
            return _capacity_reason(g, self.base[c], self.deadline)
        if verdict == _ROOM_LEFT:
            return R.CapacityTaken((), False)             # the repair should have placed it
        return self._taken(c, g.priority, verdict == _TAKEN_HIGHER)

    def _verdict(self, g: GroupInfo, c: int) -> int:
        if self._held(c):
            # `higher` has no node with more free than in `base`: a group found to fit it (a
            # placement or an exact count) fits `base` too, so the usual verdict, taken by work
            # of its own priority, costs one exact check less (issue 24)
            if fits(self.higher[c], g, self.deadline):
                return _ROOM_LEFT if fits(self.after[c], g, self.deadline) else _TAKEN
            return _TAKEN_HIGHER if fits(self.base[c], g, self.deadline) else _CAPACITY
        # nothing of higher priority on it: `higher` holds what `base` holds
        if not fits(self.base[c], g, self.deadline):
            return _CAPACITY
        return _ROOM_LEFT if fits(self.after[c], g, self.deadline) else _TAKEN

    def _taken(self, c: int, priority: int, higher: bool) -> R.Reason:
        """The work on cluster c that took the room: of higher priority, or else of the same
        priority (the repair lets no lower-priority work keep it out, issue 24), or, should
        there be none, the lower; the same for every group of that priority (remembered)."""
        key = (c, priority, higher)
        got = self.taken_by.get(key)
        if got is None:
            others = self.placed.get(c, [])
            if higher:
                got = _taken([h for h, _ in others if h.priority > priority], True)
            else:
                same = [h for h, _ in others if h.priority == priority]
                got = _taken(same or [h for h, _ in others if h.priority < priority], False)
            self.taken_by[key] = got
        return got


def _taken(groups: Sequence[GroupInfo], higher: bool) -> R.Reason:
    """Capacity taken by these groups' workloads, each with its group when it has several."""
    by = [(w.key, h.key if len(h.group.workloads) > 1 else "") for h in groups for w in h.group.workloads]
    return R.CapacityTaken(tuple(w for w, _ in by), higher, tuple(g for _, g in by))


def _capacity_reason(g: GroupInfo, st: ClusterState, deadline: float | None) -> R.Reason:
    """The group does not fit the state: the first instance that does not fit by itself, or
    how many of the group's pods fit together at most."""
    info = st.info
    for p in sorted(g.parts, key=lambda p: p.sort_key):
        alone = GroupInfo(g.index, g.group, g.policy, [p])
        if fits(st, alone, deadline):
            continue
        pool = [i for k in info.matching(p) for i in info.class_nodes[k]]
        room = _room_reason(g, p, info, [st.free[i] for i in pool])
        if room.room < p.pods:
            return room
        rs = [r for r in _resources(p, info) if r != "pods" or any(_alloc(info.nodes[i], r) < UNLIMITED for i in pool)]
        binding = next((r for r in rs if sum(st.free[i].get(r, 0) // p.demand[r] for i in pool) < p.pods), rs[0])
        frees = [st.free[i].get(binding, 0) for i in pool]
        return R.InsufficientCapacity(p.pods, binding, p.demand[binding], describe_constraints(p.instance.pod),
                                      max(frees, default=0), sum(frees))
    if any(u.required for u in g.units):
        why = _topology_reason(g, st, deadline)
        if why is not None:
            return why
    pool = sorted({i for p in g.parts for k in info.matching(p) for i in info.class_nodes[k]})
    most = pack(st, g, maximize=True, deadline=deadline)
    fitting = most if isinstance(most, int) else _fit_count(g, st)
    return R.DoesNotFitTogether(g.pods, fitting, g.gpus, sum(st.gpu[i] for i in pool))


def _topology_reason(g: GroupInfo, st: ClusterState, deadline: float | None) -> R.Reason | None:
    """A required unit that fits no single domain by itself (biggest first); else, when the
    pods fit without their topology, that no choice of domains holds them; else None."""
    for u in sorted((u for u in g.units if u.required), key=lambda u: (-u.gpus, -u.pods, u.key, u.parts)):
        alone = GroupInfo(g.index, g.group, g.policy, [g.parts[j] for j in u.parts],
                          units=[replace(u, parts=tuple(range(len(u.parts))))])
        if not fits(st, alone, deadline):
            return domain_reason(g, u, st)
    if fits(st, GroupInfo(g.index, g.group, g.policy, g.parts), deadline):
        return R.TopologyDoesNotFit(tuple(dict.fromkeys(u.key for u in g.units if u.required)), g.pods)
    return None


def _fit_count(g: GroupInfo, st: ClusterState) -> int:
    """How many of the group's pods best fit places at once (state left unchanged)."""
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


def explain_all(problem: Problem, result: Mapping[int, tuple[int, PodAssign]],
                deadline: float | None, placed: Sequence[int] = ()) -> dict[int, dict[str, R.Reason]]:
    """Reasons per unplaced group index, highest priority first; then, with the time left, for
    the `placed` groups too (true of every cluster but their own: why a cluster they rank
    better did not take them), so that those never take the unplaced groups' time."""
    todo = sorted((g for g in problem.groups if g.index not in result), key=lambda g: (-g.priority, g.index))
    out: dict[int, dict[str, R.Reason]] = {}
    if todo:            # everything placed: no states to build (an Explainer builds three of the fleet)
        ex = Explainer(problem, result, deadline)
        out = {g.index: ex.reasons(g) for g in todo}
    if placed:
        ex = Explainer(problem, result, deadline)
        also = set(placed)
        for g in sorted((g for g in problem.groups if g.index in also), key=lambda g: (-g.priority, g.index)):
            out[g.index] = ex.reasons(g)
    return out


__all__: Sequence[str] = ("Explainer", "explain_all", "fits", "static_reason")
