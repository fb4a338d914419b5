"""Deterministic bounds on the solve's work, and the default wall-clock safety net (issue 24).

The same input must give the same plan on a quiet or a loaded machine. So every step that
could run long (the repair of each baseline, the exchange) is bounded by work counted in
deterministic units (node-level placement tries), sized from the instance, and CP-SAT by its
deterministic time (`effort`). The wall clock (`--time-limit`) stays a safety net only: a step
it ends early says so (`timeLimitHit`), since such a plan may differ between runs.

By default the safety net grows with the instance (`default_time_limit`): a fixed 10 s cut
the 10,000-workload plan on 100,000 nodes in its greedy phase, so the plan depended on the
machine's speed (issue 24: 521,333 GPUs at default, 526,821 without a deadline).
"""

from __future__ import annotations

from typing import Callable

from placer.solve.problem import Problem
from placer.solve.state import PodAssign

# the default --time-limit: a floor, plus per group and per node what the bounded work costs with
# room to spare (issue 24: at 10,000 groups on 100,000 nodes ~20-26 s of CPU, so 70 s: a machine
# three times slower or busier than that still gets the same plan)
BASE_TIME_LIMIT = 10.0
TIME_PER_GROUP = 0.004
TIME_PER_NODE = 0.0002

# node-level placement tries a repair may make, per group of the instance: a repair that needs
# more is stopped there, the same way on every machine, and its plan dropped (measured, issue 24:
# the six benchmark scenarios need at most 8.5 per group, the baselines at 10,000 groups 20-36)
REPAIR_TRIES_PER_GROUP = 100
# above this many groups, the baselines that ignore priority are repaired only when their greedy
# plan beats the best seed (placer.solve._best_baseline; the six benchmark scenarios have at most
# 1,000 groups, and at 10,000 those repairs cost 12 s of CPU for no better plan)
ALL_BASELINES_MAX_GROUPS = 2000
# the exchange looks at each placed group's waiting groups of its priority on its cluster: it
# runs when those looks, counted beforehand, stay within this many per group of the instance
EXCHANGE_LOOKS_PER_GROUP = 400


def default_time_limit(groups: int, nodes: int) -> float:
    """The wall-clock safety net for a plan of `groups` on `nodes` when none is given."""
    return BASE_TIME_LIMIT + TIME_PER_GROUP * groups + TIME_PER_NODE * nodes


class Work:
    """A count of work units left; `spend` says whether a unit was still there. Exhausted,
    it stays so: a step that stops on it stops at the same place on every machine."""

    def __init__(self, units: int):
        self.left = units
        self.spent = 0

    def spend(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        self.spent += 1
        return True

    @property
    def out(self) -> bool:
        return self.left <= 0


def within_looks(problem: Problem, result: dict[int, tuple[int, PodAssign]],
                 progress: Callable[[str], None] | None = None) -> bool:
    """Whether the exchange's looks (each placed group's waiting groups of its priority on its
    cluster, counted here) stay within EXCHANGE_LOOKS_PER_GROUP: past it, the exchange is
    skipped the same way on every machine (issue 24: 8.4 million looks, 17 s of CPU, at
    10,000 groups on 100 clusters, where it placed more groups but not one GPU more)."""
    waiting: dict[tuple[int, int], int] = {}
    for g in problem.groups:
        if g.eligible and g.index not in result and not g.units:
            for c in g.eligible:
                waiting[(g.priority, c)] = waiting.get((g.priority, c), 0) + 1
    if not waiting:
        return True
    by_idx = {g.index: g for g in problem.groups}
    looks = sum(waiting.get((by_idx[h].priority, c), 0) for h, (c, _) in result.items())
    bound = EXCHANGE_LOOKS_PER_GROUP * len(problem.groups)
    if looks > bound and progress:
        progress(f"exchange skipped: {looks} looks over its bound {bound}")
    return looks <= bound
