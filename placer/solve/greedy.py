"""Node-level greedy placement: the seed, the fallback and the baselines the plan must beat."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

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


class Bar:
    """Whether a greedy pass can still end lexicographically above `best` (per priority level,
    highest first: GPUs * `ng` + 1 per group placed, as placer.solve ranks plans): what it
    may still reach per level is every group of the level less those it left out, and a
    plan at or below `best` on that bound is at or below it lexicographically."""

    def __init__(self, groups: Sequence[GroupInfo], best: tuple, ng: int):
        levels = sorted({g.priority for g in groups}, reverse=True)
        self.pos = {p: i for i, p in enumerate(levels)}
        self.upper = [0] * len(levels)
        for g in groups:
            self.upper[self.pos[g.priority]] += g.gpus * ng + 1
        self.best, self.ng = best, ng

    def miss(self, g: GroupInfo) -> bool:
        """`g` left out: True when the pass can no longer end above `best`."""
        self.upper[self.pos[g.priority]] -= g.gpus * self.ng + 1
        return tuple(self.upper) <= self.best


def greedy(problem: Problem, states: dict[int, ClusterState], groups: Iterable[GroupInfo] | None = None,
           order: Callable[[Iterable[GroupInfo]], list[GroupInfo]] = greedy_order, bar: Bar | None = None,
           ) -> dict[int, tuple[int, PodAssign]]:
    """Node-level greedy: groups in `order` (by default highest priority, then biggest), each
    on the first cluster in file order where all its pods fit (best fit per pod). With `bar`,
    the pass stops at the first group it leaves out that makes it unable to end above the
    bar (issue 24: a baseline that cannot beat the best is not worth finishing)."""
    out: dict[int, tuple[int, PodAssign]] = {}
    quota = tally(problem)                  # issue 23: each group within its quotas
    for g in order(problem.groups if groups is None else groups):
        use = group_use(quota.quotas, g) if quota else {}
        if not (quota and not quota.room(use)) and _first_fit(states, g, out):
            if quota:
                quota.add(use)
        elif bar is not None and bar.miss(g):
            break
    return out


def _first_fit(states: dict[int, ClusterState], g: GroupInfo, out: dict[int, tuple[int, PodAssign]]) -> bool:
    """`g` on the first eligible cluster where all its pods fit (recorded in `out`)."""
    gpus = g.gpus
    for c in g.eligible:
        if gpus > states[c].free_gpus:
            continue                # full (issue 24: most clusters, late in a pass at 100 clusters)
        assign = try_place(states[c], g)
        if assign is not None:
            out[g.index] = (c, assign)
            return True
    return False
