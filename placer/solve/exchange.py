"""One placed group out, more of its priority in (issue 24, item 2): a local improvement of a
plan, in the objective's own terms.

A priority level's value is its GPUs placed, then its groups placed. When the search stops
early (placer.solve.gap: the level is close to its LP bound), the improvements left are often
of one kind: on a cluster, a placed group makes room for unplaced groups of the same priority
that together place more GPUs, or as many GPUs in more groups (measured at 1,000 workloads on
10,000 nodes: the whole CP-SAT effort, about 3 s of CPU, found exactly one such exchange, a
32-GPU group out and two 16-GPU groups in). Every exchange keeps every other placement and
improves its level, so the plan only improves lexicographically; the group taken out is
unplaced, and the repair that follows gives it its turn (placer.solve.repair).

Plain groups only: none with topology requests, and no plan under quotas (a group let in
must stay within its quota, which the repair's trim would otherwise undo)."""

from __future__ import annotations

import itertools
import time
from typing import Mapping, Sequence

from placer.solve.greedy import greedy_order
from placer.solve.groups import GroupInfo
from placer.solve.problem import Problem, states_of
from placer.solve.state import ClusterState, PodAssign, redo, try_place, undo

Result = dict[int, tuple[int, PodAssign]]


def exchange(problem: Problem, result: Result, deadline: float | None = None,
             into: dict[int, ClusterState] | None = None) -> Result | None:
    """`result` with every exchange found (in group index order) made, or None when there is
    none; `into` (when given) gets the free capacity that plan leaves, for the repair after it
    (issue 24: it replayed the whole plan again)."""
    if problem.fleet.quotas:
        return None
    # the waiting groups per (priority, cluster they may use), in greedy order, with their GPUs
    # counted once (issue 24: filtering every waiting group for every placed one, each GPU count
    # summed over its parts, was half of the exchange's time)
    gpus = {g.index: g.gpus for g in problem.groups}
    waiting: dict[tuple[int, int], list[GroupInfo]] = {}
    for g in greedy_order(g for g in problem.groups if g.eligible and g.index not in result and not g.units):
        for c in g.eligible:
            waiting.setdefault((g.priority, c), []).append(g)
    if not waiting:
        return None
    by_idx = {g.index: g for g in problem.groups}
    out, states, changed = dict(result), states_of(problem, result), False
    tried: set[tuple[int, tuple]] = set()          # (cluster, shape) out with nothing better in
    for hi in sorted(result):
        h = by_idx[hi]
        c, assign = out[hi]
        if h.units or (h.priority, c) not in waiting or (c, h.shape) in tried:
            continue
        if deadline is not None and time.monotonic() >= deadline:
            break
        st = states[c]
        room, need = st.free_gpus + gpus[hi], gpus[hi]
        fit = [g for g in waiting[(h.priority, c)] if gpus[g.index] <= room and g.index not in out]
        # of as many GPUs as it, last: one alone only ties (the fill would stop at it)
        cands = [g for g in fit if gpus[g.index] != need] + [g for g in fit if gpus[g.index] == need]
        if (sum(gpus[g.index] for g in cands), len(cands)) <= (need, 1):
            continue                       # even all of them together would not beat it
        added = _swap(st, h, assign, cands, gpus)
        if added:
            del out[hi]
            out.update((g.index, (c, a)) for g, a in added)
            tried = {t for t in tried if t[0] != c}        # the cluster's content changed
            changed = True
        else:
            # another group of its shape there most likely frees the same (a local search: it
            # only ever improves the plan, it does not promise every exchange)
            tried.add((c, h.shape))
    if into is not None and changed:
        into.update(states)
    return out if changed else None


def _swap(st: ClusterState, h: GroupInfo, assign: PodAssign, cands: Sequence[GroupInfo],
          gpus: Mapping[int, int]) -> list[tuple[GroupInfo, PodAssign]] | None:
    """`h` taken out and `cands` placed in their order where they fit: kept when they place
    more GPUs than `h`, or as many in more groups; else the state is as before."""
    mark = st.mark()
    undo(st, h, assign)
    added: list[tuple[GroupInfo, PodAssign]] = []
    need, got = (gpus[h.index], 1), 0
    # GPUs of the candidates from each one on: with what is added and what is still free, the
    # most the swap can reach (issue 24: nine in ten swaps fail, most after trying every candidate)
    rest = list(itertools.accumulate((gpus[g.index] for g in reversed(cands)), initial=0))[::-1]
    for n, g in enumerate(cands):
        if (got + min(st.free_gpus, rest[n]), len(added) + len(cands) - n) <= need:
            break                          # not even every candidate left, in, would beat it
        if gpus[g.index] <= st.free_gpus and (a := try_place(st, g)) is not None:
            added.append((g, a))
            got += gpus[g.index]
    if (got, len(added)) > need:
        return added
    for g, a in reversed(added):
        undo(st, g, a)
    redo(st, h, assign)
    st.restore(mark)                       # the same content as before
    return None
