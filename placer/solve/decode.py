"""From the aggregate answer to concrete pod -> node assignments."""

from __future__ import annotations

from typing import Mapping, Sequence

from placer.solve.greedy import greedy_order
from placer.solve.groups import ClusterInfo, GroupInfo, expand, runs
from placer.solve.model import Agg, part_type
from placer.solve.problem import Problem
from placer.solve.state import ClusterState, PodAssign, undo


def decode(problem: Problem, states: dict[int, ClusterState], agg: Agg, values: list[int],
           groups: Sequence[GroupInfo]) -> tuple[dict[int, tuple[int, PodAssign]], list[GroupInfo]]:
    """Concrete nodes for the aggregate answer: per cluster, all pods biggest first, each to
    the best-fitting node of a class with quota left (else any class it may use). A group
    with a pod that finds no node is rolled back and returned as dropped."""
    by_cluster = _groups_by_cluster(agg, values)
    out: dict[int, tuple[int, PodAssign]] = {}
    dropped: list[GroupInfo] = []
    counts = _counts_by_cluster(agg)
    for c in sorted(by_cluster):
        st, info = states[c], problem.infos[c]
        members = greedy_order(by_cluster[c])
        # the model's pods per (type, class): read only where a topology request confines pods
        # or plain first fit fails (issue 24: summed for every cluster, read by neither at 1,000
        # workloads on 10,000 nodes)
        topo = any(part.topo is not None for g in members for part in g.parts)
        quota = _quota(counts.get(c, ()), values) if topo else None
        confined = _confined(info, members, quota) if quota is not None else {}
        plain = _ffd_cluster(st, members, confined)
        if plain is not None:
            # canonical: depends only on which groups are on the cluster
            out.update({gi: (c, a) for gi, a in plain.items()})
            continue
        if quota is None:
            quota = _quota(counts.get(c, ()), values)
        placed, failed = _by_quota(st, info, members, confined, quota)
        for g in members:
            if g.index in failed:
                dropped.append(g)
            else:
                out[g.index] = (c, placed[g.index])
    return out, dropped


def _counts_by_cluster(agg: Agg) -> dict[int, list[tuple[tuple, int, list[tuple[int, int]]]]]:
    """The model's pod counts (type, class, terms) per cluster, in the model's order."""
    out: dict[int, list[tuple[tuple, int, list[tuple[int, int]]]]] = {}
    for (c, t, k), terms in agg.n_expr.items():
        out.setdefault(c, []).append((t, k, terms))
    return out


def _quota(counts, values: Sequence[int]) -> dict[tuple[tuple, int], int]:
    """How many pods of each (type, class) the model's answer puts on the cluster."""
    return {(t, k): sum(a * values[v] for a, v in terms) for t, k, terms in counts}


def _groups_by_cluster(agg: Agg, values: list[int]) -> dict[int, list[GroupInfo]]:
    """The groups the aggregate answer puts on each cluster."""
    by_cluster: dict[int, list[GroupInfo]] = {}
    for sg in agg.sigs:
        # interchangeable groups: the first by name are placed, on clusters in file order
        todo = iter(sg.groups)
        for c in sg.rep.eligible:
            for _ in range(values[agg.z[(sg.index, c)]]):
                by_cluster.setdefault(c, []).append(next(todo))
    return by_cluster


def _confined(info: ClusterInfo, members: Sequence[GroupInfo],
              quota: Mapping[tuple[tuple, int], int]) -> dict[tuple[int, int], list[int]]:
    """Pods a topology request covers keep to the classes (domains) the model gave them."""
    confined: dict[tuple[int, int], list[int]] = {}
    for g in members:
        for j, part in enumerate(g.parts):
            if part.topo is not None:
                t = part_type(info, part)
                confined[(g.index, j)] = [k for k in t[1] if quota.get((t, k), 0) > 0]
    return confined


def _by_quota(st: ClusterState, info: ClusterInfo, members: Sequence[GroupInfo],
              confined: Mapping[tuple[int, int], Sequence[int]],
              quota: dict[tuple[tuple, int], int]) -> tuple[dict[int, PodAssign], set[int]]:
    """All pods biggest first, each to the best-fitting node of a class with quota left, else
    of any class it may use; a group with a pod that finds none is rolled back (failed)."""
    pods = [(g, j) for g in members for j in expand(g)]
    pods.sort(key=lambda gj: (gj[0].parts[gj[1]].sort_key, members.index(gj[0]), gj[1]))
    placed: dict[int, PodAssign] = {g.index: [] for g in members}
    failed: set[int] = set()
    for g, j in pods:
        if g.index in failed:
            continue
        part = g.parts[j]
        t = part_type(info, part)
        classes = confined.get((g.index, j), t[1])
        with_quota = [k for k in classes if quota.get((t, k), 0) > 0]
        i = st.best_node(part.demand, part.gpu, with_quota) if with_quota else None
        if i is None:
            i = st.best_node(part.demand, part.gpu, classes)
        if i is None:
            failed.add(g.index)
            undo(st, g, placed[g.index])
            placed[g.index] = []
            continue
        k = st.node_class[i]
        if quota.get((t, k), 0) > 0:
            quota[(t, k)] -= 1
        st.take(i, part.demand)
        placed[g.index].append((j, i))
    return placed, failed


def _ffd_cluster(st: ClusterState, members: Sequence[GroupInfo],
                 confined: Mapping[tuple[int, int], Sequence[int]]) -> dict[int, PodAssign] | None:
    """All pods of the cluster's groups, biggest first, best fit; None (state unchanged)
    unless every pod finds a node."""
    order = {g.index: n for n, g in enumerate(members)}
    # a part's pods follow one another in that order: placed as one run, each node filled in
    # turn, as best fit pod by pod places them (ClusterState.best_nodes; issue 24: a search per pod)
    todo = [(g, j, pods) for g in members for j, pods in runs(g)]
    todo.sort(key=lambda gjn: (gjn[0].parts[gjn[1]].sort_key, order[gjn[0].index], gjn[1]))
    done: list[tuple[GroupInfo, int, int, int]] = []
    for g, j, pods in todo:
        part = g.parts[j]
        got = st.best_nodes(part.demand, part.gpu, confined.get((g.index, j), st.info.compat(part)), pods)
        if got is None:
            for gg, jj, ii, n in reversed(done):
                st.give(ii, gg.parts[jj].demand, n)
            return None
        for i, n in got:
            st.take(i, part.demand, n)
            done.append((g, j, i, n))
    out: dict[int, PodAssign] = {g.index: [] for g in members}
    for g, j, i, n in done:
        out[g.index] += [(j, i)] * n
    return out
