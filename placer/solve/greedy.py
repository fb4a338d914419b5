"""Node-level greedy placement: the seed, the fallback and the baselines the plan must beat."""

from __future__ import annotations

from typing import Iterable

from .problem import ClusterState, GroupInfo, PodAssign, Problem, try_place


def greedy_order(groups: Iterable[GroupInfo]) -> list[GroupInfo]:
    return sorted(groups, key=lambda g: (-g.priority, -g.gpus, -g.pods, g.key))


def greedy(problem: Problem, states: dict[int, ClusterState], groups: Iterable[GroupInfo] | None = None,
           ) -> dict[int, tuple[int, PodAssign]]:
    """Node-level greedy: biggest (and highest priority) groups first, each on the first
    cluster in file order where all its pods fit."""
    out: dict[int, tuple[int, PodAssign]] = {}
    for g in greedy_order(problem.groups if groups is None else groups):
        for c in g.eligible:
            assign = try_place(states[c], g)
            if assign is not None:
                out[g.index] = (c, assign)
                break
    return out

