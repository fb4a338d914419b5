"""After decoding: fill what still fits, then let higher priority displace lower.

- `pack`: an exact node-level check for one group on one cluster's current free capacity (a
  small CP-SAT model over the nodes with room, identical nodes capped at the group's pod
  count), used when best-fit fails, so "does not fit" is never a greedy artefact;
- `repair`: every unplaced group that fits beside the plan is placed (highest priority, then
  largest, first); then each still unplaced group may take a cluster from lower-priority
  work, which is re-placed wherever it still fits, and else gets a turn of its own to take a
  cluster from still lower work. Each step only improves the plan lexicographically by
  priority.
"""

from __future__ import annotations

import bisect
import heapq
import time
from typing import Literal, Mapping, overload

from placer.solve.budget import Work
from placer.solve.cpsat import cmh  # CP-SAT's native layer, imported by the first exact check
from placer.solve.greedy import greedy_order
from placer.solve.groups import GroupInfo
from placer.solve.problem import Problem, states_of
from placer.solve.quotas import group_use, tally, within
from placer.solve.scheduling import fits_resources
from placer.solve.state import ClusterState, PodAssign, may_fit, redo, redo_all, try_place
from placer.solve.topology import pack_domains

PACK_MAX_VARS = 4000          # larger exact checks are skipped (best fit decides alone)
PACK_EFFORT = 0.2             # CP-SAT deterministic seconds per exact check

Result = dict[int, tuple[int, PodAssign]]


def _candidates(st: ClusterState, g: GroupInfo) -> list[int]:
    """Nodes with room for at least one pod of the group; of identical nodes (same class, same
    free capacity) at most as many as the group has pods."""
    info = st.info
    seen: dict[tuple, int] = {}
    out = []
    classes = sorted({k for p in g.parts for k in info.compat(p)})
    for k in classes:
        for i in info.class_nodes[k]:
            if not any(fits_resources(p.demand, st.free[i]) for p in g.parts if k in info.compat(p)):
                continue
            key = (k, tuple(sorted(st.free[i].items())))
            if seen.get(key, 0) >= g.pods:
                continue
            seen[key] = seen.get(key, 0) + 1
            out.append(i)
    return out


@overload
def pack(st: ClusterState, g: GroupInfo, *, maximize: Literal[False] = False,
         deadline: float | None = None) -> PodAssign | None: ...


@overload
def pack(st: ClusterState, g: GroupInfo, *, maximize: Literal[True], deadline: float | None = None) -> int | None: ...


def pack(st: ClusterState, g: GroupInfo, *, maximize: bool = False, deadline: float | None = None,
         ) -> PodAssign | int | None:
    """Exactly: an assignment of all the group's pods to the cluster's free capacity (None if
    there is none or the check was skipped), each required topology unit inside one domain,
    or, with `maximize`, the most pods that fit at once whatever the topology (None if not
    proven). The state is unchanged."""
    info = st.info
    nodes = _candidates(st, g)
    xs: list[tuple[int, int]] = []
    for j, p in enumerate(g.parts):
        ok = set(info.compat(p))
        xs += [(j, i) for i in nodes if st.node_class[i] in ok and fits_resources(p.demand, st.free[i])]
    if len(xs) > PACK_MAX_VARS or (deadline is not None and time.monotonic() >= deadline):
        return None
    if not maximize and any(all(jj != j for jj, _ in xs) for j in range(len(g.parts))):
        st.prove_no_fit(g.shape)
        return None
    m = _pack_model(st, g, xs, maximize)
    r = _pack_solve(m, deadline)
    if maximize:
        return -int(round(r.objective_value)) if r.status == cmh.CpSolverStatus.OPTIMAL else None
    if r.status == cmh.CpSolverStatus.INFEASIBLE:
        st.prove_no_fit(g.shape)
    if r.status not in (cmh.CpSolverStatus.OPTIMAL, cmh.CpSolverStatus.FEASIBLE):
        return None
    out: PodAssign = []
    for n, (j, i) in enumerate(xs):
        out += [(j, i)] * int(r.solution[n])
    return out


def _pack_model(st: ClusterState, g: GroupInfo, xs: list[tuple[int, int]], maximize: bool):
    """One count variable per (part, node) of `xs`: each part's pods placed (at most, with
    `maximize`, whose objective is the pods placed), each node's free capacity respected."""
    m = cmh.CpModelProto()
    for j, i in xs:
        v = m.variables.add()
        v.domain.extend([0, g.parts[j].pods])
    for j, p in enumerate(g.parts):
        lin = m.constraints.add().linear
        idx = [n for n, (jj, _) in enumerate(xs) if jj == j]
        lin.vars.extend(idx)
        lin.coeffs.extend([1] * len(idx))
        lin.domain.extend([0 if maximize else p.pods, p.pods])
    by_node: dict[int, list[int]] = {}
    for n, (_, i) in enumerate(xs):
        by_node.setdefault(i, []).append(n)
    for i, idx in by_node.items():
        _node_capacity(m, st, g, xs, i, idx)
    if g.units and not maximize:
        pack_domains(m, g, st, xs)
    if maximize:
        m.objective.vars.extend(range(len(xs)))
        m.objective.coeffs.extend([-1] * len(xs))
    return m


def _node_capacity(m, st: ClusterState, g: GroupInfo, xs: list[tuple[int, int]], i: int, idx: list[int]) -> None:
    """Node i's free capacity per resource, for the variables `idx` on it (skipped when the
    pods could not exceed it)."""
    for r in {r for n in idx for r in g.parts[xs[n][0]].demand}:
        terms = [(g.parts[xs[n][0]].demand.get(r, 0), n) for n in idx if g.parts[xs[n][0]].demand.get(r, 0)]
        if sum(a * g.parts[xs[n][0]].pods for a, n in terms) <= st.free[i].get(r, 0):
            continue
        lin = m.constraints.add().linear
        lin.vars.extend([n for _, n in terms])
        lin.coeffs.extend([a for a, _ in terms])
        lin.domain.extend([0, st.free[i].get(r, 0)])


def _pack_solve(m, deadline: float | None):
    """One deterministic worker, a fixed effort; the deadline as a safety net."""
    params = cmh.SatParameters()
    params.num_workers = 1
    params.random_seed = 0
    params.max_deterministic_time = PACK_EFFORT
    params.catch_sigint_signal = False  # Ctrl-C is the caller's (see stages._search_parameters)
    if deadline is not None:
        params.max_time_in_seconds = max(0.01, deadline - time.monotonic())
    solver = cmh.SolveWrapper()
    solver.set_parameters(params)
    return solver.solve(m)


def place(st: ClusterState, g: GroupInfo, deadline: float | None = None) -> PodAssign | None:
    """Best fit, else the exact check; the state takes the pods when they fit. A group proven
    not to fit stays out until capacity comes back (exact fit only loses room as pods come)."""
    if st.proven_no_fit(g.shape):
        return None
    assign = try_place(st, g)
    if assign is not None:
        return assign
    if not may_fit(st, g):
        st.prove_no_fit(g.shape)
        return None
    packed = pack(st, g, deadline=deadline)
    if not isinstance(packed, list):
        return None
    assign = packed
    redo(st, g, assign)
    return assign


def repair(problem: Problem, result: Result, deadline: float | None = None,
           states: dict[int, ClusterState] | None = None, work: Work | None = None) -> Result:
    """Every unplaced group that fits beside the plan is placed; then, highest priority first,
    each unplaced group may take a cluster from strictly lower-priority work. A group displaced
    so is placed again wherever it fits beside the plan, and if it fits nowhere, gets its own
    turn to take a cluster from work of still lower priority (issue 24: a displaced group used
    to get no turn, so it could stay out while lower-priority work held what it needed). The
    turns go in greedy order, so the priority of the group on turn never rises: the work of
    at least its priority on each cluster only grows, and a group that found no cluster on
    its turn never would later. `states`: the free capacity the result leaves, when the caller
    has it (a greedy plan's own states; the repair then changes them), else computed.
    `work`: node-level placement tries allowed (placer.solve.budget), a bound that stops the
    repair at the same step on every machine; `deadline` is the wall clock's safety net."""
    result = dict(result)
    states = states_of(problem, result) if states is None else states
    by_idx = {g.index: g for g in problem.groups}
    rank = {g.index: n for n, g in enumerate(greedy_order(problem.groups))}
    _fill(problem, result, states, rank, deadline, work=work)
    on = _Placed(problem, result, by_idx)
    turns = [(rank[g.index], g.index) for g in problem.groups if g.eligible and g.index not in result]
    heapq.heapify(turns)
    while turns:
        g = by_idx[heapq.heappop(turns)[1]]
        if g.index in result or (deadline is not None and time.monotonic() >= deadline):
            continue
        if work is not None and work.out:
            break
        lower = _displace(problem, result, states, on, g, deadline, work)
        if lower is None:
            continue
        c = result[g.index][0]
        on.add(g.index, c)
        for h in lower:
            on.remove(h.index, c)
        _fill(problem, result, states, rank, deadline, only=lower, work=work)
        for h in lower:
            if h.index in result:
                on.add(h.index, result[h.index][0])
            else:
                heapq.heappush(turns, (rank[h.index], h.index))
    _fill(problem, result, states, rank, deadline, work=work)
    return within(problem, result)          # issue 23: a displacement may break a quota


def _displace(problem: Problem, result: Result, states: dict[int, ClusterState],
              on: "_Placed", g: GroupInfo, deadline: float | None, work: Work | None = None,
              ) -> list[GroupInfo] | None:
    """Places `g` on the first cluster where it fits once that cluster's strictly
    lower-priority work is taken out (that work leaves the plan); returns the work taken
    out, or None (nothing changed). The cluster without that work is `on.without`'s copy:
    a cluster where `g` does not fit is left as it was, not emptied and filled again."""
    for c in g.eligible:
        st = states[c]
        if not on.any_lower(c, g.priority) or g.gpus > st.free_gpus + on.lower_gpus(c, g.priority):
            continue                    # even without the lower-priority work it cannot fit
        lower = on.lower(c, g.priority)
        if not _quota_room(problem, result, lower, g):
            continue
        if work is not None and not work.spend():
            return None
        emptied = on.without(c, st, g.priority, lower, result)
        assign = place(emptied, g, deadline)
        if assign is None:
            continue
        states[c] = emptied             # the cluster as the displacement leaves it
        result[g.index] = (c, assign)
        for h in lower:
            del result[h.index]
        return lower
    return None


def _quota_room(problem: Problem, result: Result, lower: list[GroupInfo], g: GroupInfo) -> bool:
    """Whether `g` stays within its quotas once `lower` leaves the plan: a displacement that
    the final quota trim would undo takes the lower-priority work out for nothing (issue 23:
    a higher priority over its quota used to push out a lower one within it, then both left)."""
    if not problem.fleet.quotas:
        return True
    out = {h.index for h in lower}
    t = tally(problem, [i for i in result if i not in out])
    return t is None or t.room(group_use(t.quotas, g))


class _Placed:
    """The plan's groups per cluster in (priority, index) order, kept up to date, so that the
    work below a priority is one slice (issue 24: rebuilding and filtering every cluster's
    list for every turn cost most of the repair at 10,000 groups)."""

    def __init__(self, problem: Problem, result: Result, by_idx: Mapping[int, GroupInfo]):
        self.problem, self.by_idx = problem, by_idx
        self.emptied: dict[tuple[int, int], tuple[int, ClusterState]] = {}
        self.sums: dict[int, dict[int, int]] = {}          # cluster -> priority -> GPUs below it
        self.rows: dict[int, list[tuple[int, int]]] = {}
        for h, (c, _) in result.items():
            self.rows.setdefault(c, []).append((by_idx[h].priority, h))
        for row in self.rows.values():
            row.sort()

    def add(self, h: int, c: int) -> None:
        bisect.insort(self.rows.setdefault(c, []), (self.by_idx[h].priority, h))
        self.sums.pop(c, None)

    def remove(self, h: int, c: int) -> None:
        row = self.rows[c]
        row.pop(bisect.bisect_left(row, (self.by_idx[h].priority, h)))
        self.sums.pop(c, None)

    def _below(self, c: int, priority: int) -> list[tuple[int, int]]:
        row = self.rows.get(c, [])
        return row[:bisect.bisect_left(row, (priority, -1))]      # group indexes are >= 0

    def any_lower(self, c: int, priority: int) -> bool:
        row = self.rows.get(c, [])
        return bool(row) and row[0][0] < priority

    def lower_gpus(self, c: int, priority: int) -> int:
        """GPUs of the cluster's work below `priority`, remembered until its row changes
        (issue 24: summed for every cluster on every turn, a third of the displacements)."""
        sums = self.sums.setdefault(c, {})
        got = sums.get(priority)
        if got is None:
            got = sums[priority] = sum(self.by_idx[h].gpus for _, h in self._below(c, priority))
        return got

    def lower(self, c: int, priority: int) -> list[GroupInfo]:
        """The cluster's placed groups of strictly lower priority, by index."""
        return [self.by_idx[h] for h in sorted(h for _, h in self._below(c, priority))]

    def without(self, c: int, st: ClusterState, priority: int, lower: list[GroupInfo],
                result: Result) -> ClusterState:
        """A copy of cluster c's state with its `lower` work (below `priority`) taken out,
        kept while the cluster's content is unchanged (its version): the groups that find no
        room there try the same emptied cluster in turn (issue 24: each try took every
        lower-priority pod out and put it back, most of the repair at 10,000 groups). A
        group's best fit and exact check depend on the content alone, so a group fits the
        copy exactly when it would fit the cluster emptied in place."""
        key = (c, priority)
        got = self.emptied.get(key)
        if got is not None and got[0] == st.version:
            return got[1]
        # whichever moves fewer pods: the lower work given back, or the rest taken on a fresh
        # copy in bulk (issue 24: at 1,000 workloads giving back was a sixth of the repairs)
        out = {h.index for h in lower}
        rest = [(self.by_idx[h], result[h][1]) for _, h in self.rows.get(c, []) if h not in out]
        if sum(len(a) for _, a in rest) < sum(len(result[h.index][1]) for h in lower):
            emptied = self.problem.state_of(c)
            redo_all(emptied, rest)
        else:
            emptied = st.copy()
            emptied.give_all((i, h.parts[j].demand) for h in lower for j, i in result[h.index][1])
        self.emptied[key] = (st.version, emptied)
        return emptied


def _fill(problem: Problem, result: Result, states: Mapping[int, ClusterState], rank: Mapping[int, int],
          deadline: float | None, only=None, work: Work | None = None) -> None:
    """The unplaced groups of `only` (else all), each on the first cluster where it fits, in
    greedy order (`rank`: each group's place in it, computed once for the repair)."""
    todo = problem.groups if only is None else only
    quota = tally(problem, result)          # issue 23: each group within its quotas
    for g in sorted((g for g in todo if g.eligible and g.index not in result), key=lambda g: rank[g.index]):
        use = group_use(quota.quotas, g) if quota else {}
        if quota and not quota.room(use):
            continue
        gpus = g.gpus
        for c in g.eligible:
            if gpus > states[c].free_gpus:
                continue                # cannot fit: not worth a call (issue 24: most clusters at scale)
            if work is not None and not work.spend():
                return
            assign = place(states[c], g, deadline)
            if assign is not None:
                result[g.index] = (c, assign)
                if quota:
                    quota.add(use)
                break

