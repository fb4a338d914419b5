"""Node-level greedy placement: the seed, the fallback and the baselines the plan must beat."""

from __future__ import annotations

from typing import Callable, Iterable

from placer.solve.groups import GroupInfo
from placer.solve.problem import Problem
from placer.solve.quotas import group_use, tally
from placer.solve.state import ClusterState, PodAssign, try_place


def greedy_order(groups: Iterable[GroupInfo]) -> list[GroupInfo]:
    """Priority then size: highest priority first, then the most GPUs, then the most pods."""
    return sorted(groups, key=lambda g: (-g.priority, -g.gpus, -g.pods, g.key))


def size_order(groups: Iterable[GroupInfo]) -> list[GroupInfo]:
    """First-fit decreasing: the most GPUs first, whatever the priority."""
    return sorted(groups, key=lambda g: (-g.gpus, -g.pods, g.key))


def arrival_order(groups: Iterable[GroupInfo]) -> list[GroupInfo]:
    """The order the groups were given in."""
    return sorted(groups, key=lambda g: g.index)


def priority_arrival_order(groups: Iterable[GroupInfo]) -> list[GroupInfo]:
    """Highest priority first, then the order the groups were given in (a seed)."""
    return sorted(groups, key=lambda g: (-g.priority, g.index))


BASELINES: dict[str, Callable[[Iterable[GroupInfo]], list[GroupInfo]]] = {
    "priority": greedy_order, "ffd": size_order, "arrival": arrival_order}


def greedy(problem: Problem, states: dict[int, ClusterState], groups: Iterable[GroupInfo] | None = None,
           order: Callable[[Iterable[GroupInfo]], list[GroupInfo]] = greedy_order,
           ) -> dict[int, tuple[int, PodAssign]]:
    """Node-level greedy: groups in `order` (by default highest priority, then biggest), each
    on the first cluster in file order where all its pods fit (best fit per pod)."""
    out: dict[int, tuple[int, PodAssign]] = {}
    quota = tally(problem)                  # issue 23: each group within its quotas
    for g in order(problem.groups if groups is None else groups):
        use = group_use(quota.quotas, g) if quota else {}
        if quota and not quota.room(use):
            continue
        gpus = g.gpus
        for c in g.eligible:
            if gpus > states[c].free_gpus:
                continue                # full (issue 24: most clusters, late in a pass at 100 clusters)
            assign = try_place(states[c], g)
            if assign is not None:
                out[g.index] = (c, assign)
                if quota:
                    quota.add(use)
                break
    return out
