"""A baseline whose order tries the groups as an earlier one did is not run again (issue 24):
its greedy plan and its repair would be the same, so the plan cannot change."""

from __future__ import annotations

import placer.solve as S
import placer.solve.baselines as B
from placer.solve.greedy import arrival_order, greedy, size_order
from placer.solve.repair import repair
from tests.builders import fleet, groups, wl


def _best(problem, monkeypatch):
    orders = []
    real = S.greedy
    monkeypatch.setattr(B, "greedy", lambda p, st, gs=None, order=B.greedy_order, bar=None: orders.append(order)
                        or real(p, st, gs, order, bar))
    rank = S._Rank(problem, {g.index: g for g in problem.groups}, len(problem.groups) + 1)
    run = S._Run(float("inf"), float("inf"), 1, 0, 1.0, None)
    work = problem.state()
    result = S._best_baseline(problem, real(problem, work), work, rank, run, True)
    return orders, rank, result


def test_first_fit_decreasing_is_not_run_again_when_every_group_has_one_priority(monkeypatch):
    fl = fleet("c0: 3x8 used=3 | 2x4", "c1: 4x8 used=5")
    gs = groups(*(wl(f"ml/w{i:02d}", f"{1 + i % 3}x{(1, 2, 4, 8)[i % 4]}") for i in range(14)))
    problem = S.prepare(fl, gs)
    orders, rank, result = _best(problem, monkeypatch)
    assert size_order not in orders and arrival_order in orders
    states = problem.state()
    ffd = repair(problem, greedy(problem, states, order=size_order), None, states)
    assert rank.key(result) >= rank.key(ffd)          # what running it again could have given


def test_every_baseline_runs_when_the_priorities_differ(monkeypatch):
    fl = fleet("c0: 3x8 used=3 | 2x4", "c1: 4x8 used=5")
    gs = groups(*(wl(f"ml/w{i:02d}", f"{1 + i % 3}x{(1, 2, 4, 8)[i % 4]}", prio=i % 2) for i in range(14)))
    orders, _, _ = _best(S.prepare(fl, gs), monkeypatch)
    assert size_order in orders and arrival_order in orders
