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
from placer.solve.groups import MANY_CLASSES, GroupInfo, gpus_of
from placer.solve.levels import blocks
from placer.solve.problem import Problem, states_of
from placer.solve.state import ClusterState, PodAssign, enough_blocks, redo, try_place, undo

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
    # each waiting group's GPU pods per (classes, size) on each cluster it may use: what
    # `may_fit` asks first of a state (`_Blocks`)
    needs: dict[int, dict[int, tuple]] = {}
    for (_, c), gs in waiting.items():
        kinds, on = problem.infos[c].kinds, needs.setdefault(c, {})
        on.update((g.index, kinds(g)[1]) for g in gs)
    by_idx = {g.index: g for g in problem.groups}
    out, states, changed = dict(result), states_of(problem, result), False
    tried: set[tuple[int, tuple]] = set()          # (cluster, shape) out with nothing better in
    usable: dict[tuple, int] = {}
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
        if (sum(gpus[g.index] for g in fit), len(fit)) <= (need, 1):
            continue                       # even all of them together would not beat it
        cands = _candidates(st, h, assign, fit, gpus, needs[c], usable)
        added = _swap(st, h, assign, cands, gpus, needs[c]) if cands else None
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


def _candidates(st: ClusterState, h: GroupInfo, assign: PodAssign, fit: Sequence[GroupInfo], gpus: Mapping[int, int],
                needs: Mapping[int, tuple], usable: dict[tuple, int]) -> list[GroupInfo] | None:
    """The groups of `fit` that the swap of `h` could place, in the order it tries them; None
    when not even those could beat `h` (the swap would fail). With `h` out, a group whose GPU
    pods find too few GPU blocks is refused by every try (the swap only takes after that), and
    groups of one need placed together take its blocks (issue 24: 18,000 tries at 1,000
    workloads, 98% of them refused so, most in swaps that could not succeed)."""
    room = _Blocks(st, h, assign, usable)
    fit = [g for g in fit if room.most(needs[g.index]) != 0]
    need = gpus[h.index]
    # of as many GPUs as it, last: one alone only ties (the fill would stop at it)
    cands = [g for g in fit if gpus[g.index] != need] + [g for g in fit if gpus[g.index] == need]
    return cands if room.bound(cands, gpus, needs) > (need, 1) else None


def _swap(st: ClusterState, h: GroupInfo, assign: PodAssign, cands: Sequence[GroupInfo],
          gpus: Mapping[int, int], needs: Mapping[int, tuple]) -> list[tuple[GroupInfo, PodAssign]] | None:
    """`h` taken out and `cands` placed in their order where they fit: kept when they place
    more GPUs than `h`, or as many in more groups; else the state is as before."""
    mark = st.mark()
    undo(st, h, assign)
    added: list[tuple[GroupInfo, PodAssign]] = []
    need, got = (gpus[h.index], 1), 0
    # GPUs of the candidates from each one on: with what is added and what is still free, the
    # most the swap can reach (issue 24: nine in ten swaps fail, most after trying every candidate)
    rest = list(itertools.accumulate((gpus[g.index] for g in reversed(cands)), initial=0))[::-1]
    # GPU blocks enough per need (`may_fit`'s test) on the content as it is: a refused try
    # leaves it, so the candidates after one of a need found short are passed over at once
    enough: dict[tuple, bool] = {}
    for n, g in enumerate(cands):
        if (got + min(st.free_gpus, rest[n]), len(added) + len(cands) - n) <= need:
            break                          # not even every candidate left, in, would beat it
        if gpus[g.index] > st.free_gpus:
            continue
        blocks_need = needs[g.index]
        ok = enough.get(blocks_need)
        if ok is None:
            ok = enough[blocks_need] = enough_blocks(st, blocks_need)
        if ok and (a := try_place(st, g)) is not None:
            added.append((g, a))
            got += gpus[g.index]
            enough.clear()                 # the content changed
    if (got, len(added)) > need:
        return added
    for g, a in reversed(added):
        undo(st, g, a)
    redo(st, h, assign)
    st.restore(mark)                       # the same content as before
    return None


class _Blocks:
    """How many groups of a need (GPU pods per (classes, size), `ClusterInfo.kinds`) the
    cluster's free GPU blocks (`blocks`, `may_fit`'s test) could hold once `h`'s pods are given
    back (`assign`), without giving them back: the blocks now, plus what each of h's nodes gains
    (a node's GPUs are the sum of its GPU resources, so giving pods back adds theirs). A pod of
    a need placed on a node takes exactly one of its blocks of its size."""

    def __init__(self, st: ClusterState, h: GroupInfo, assign: PodAssign, usable: dict[tuple, int]):
        self.st, self.usable = st, usable          # `usable`: `_usable`'s sums on contents, kept by the caller
        names = st.info.gpu_names
        per_part = [gpus_of(p.demand, names) for p in h.parts]
        gained: dict[int, int] = {}
        for j, i in assign:
            gained[i] = gained.get(i, 0) + per_part[j]
        self.free_gpus = st.free_gpus + sum(gained.values())
        self.gained = [(st.node_class[i], st.gpu[i], d) for i, d in gained.items() if d]
        self.known: dict[tuple, int] = {}

    def most(self, need: tuple[tuple[tuple[int, ...], int, int], ...]) -> int:
        """At most how many groups of `need` fit together (-1: no GPU pods, no bound)."""
        got = self.known.get(need)
        if got is None:
            got = self.known[need] = min((self._after(classes, size) // pods for classes, size, pods in need
                                          if pods > 0), default=-1)
        return got

    def bound(self, cands: Sequence[GroupInfo], gpus: Mapping[int, int],
              needs: Mapping[int, tuple]) -> tuple[int, int]:
        """At most how many GPUs, and how many groups, of `cands` fit together: of each need
        at most `most`, and no more GPUs than the nodes they may use have free (the fewest
        GPUs first, for the count)."""
        per: dict[tuple, list[int]] = {}
        for g in cands:
            per.setdefault(needs[g.index], []).append(gpus[g.index])
        most: list[int] = []
        least: list[int] = []
        for need, gs in per.items():
            k = self.most(need)
            k = len(gs) if k < 0 else min(k, len(gs))
            gs.sort()
            most += gs[len(gs) - k:]
            least += gs[:k]
        least.sort()
        room = min(self.free_gpus, self._usable(per))
        count = 0
        for n in least:
            if n > room:
                break
            count, room = count + 1, room - n
        return min(sum(most), self.free_gpus, self._usable(per)), count

    def _usable(self, per: Mapping[tuple, object]) -> int:
        """The GPUs free on the nodes that GPU pods of these needs may use, each node with at
        least as many as the smallest such pod (a pod takes GPUs of its node only)."""
        classes = {k for need in per for cl, _, _ in need for k in cl}
        if len(classes) > MANY_CLASSES or any(len(cl) > MANY_CLASSES for need in per for cl, _, _ in need):
            return self.free_gpus                   # not counted (many classes: `blocks` counts every node)
        least = min((size for need in per for _, size, _ in need), default=0)
        key = (self.st.version, frozenset(classes), least)
        n = self.usable.get(key)
        if n is None:
            buckets = self.st.buckets
            n = self.usable[key] = sum(level * len(nodes) for k in classes
                                       for level, nodes in buckets[k].items() if level >= least)
        for k, level, d in self.gained:
            if k in classes:
                n += (level + d if level + d >= least else 0) - (level if level >= least else 0)
        return n

    def _after(self, classes: tuple[int, ...], size: int) -> int:
        n = blocks(self.st, classes, size)
        every = len(classes) > MANY_CLASSES          # `blocks` counts every node then
        for k, level, d in self.gained:
            if every or k in classes:
                n += (level + d) // size - level // size
        return n
