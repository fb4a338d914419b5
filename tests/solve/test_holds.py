"""Whether a group of one pod kind fits a cluster's state, answered by counting (issue 24):
`holds` must say what the exact oracle (tests/solve/oracle.py) says, and reasons must no
longer place and give back every pod of such a group to find out. Counted, not timed."""

from __future__ import annotations

import random

import placer.solve as S
from placer.solve import state as ST
from placer.solve.explain import explain_all
from tests.builders import fleet, groups, wl
from tests.solve import oracle as O

SPECS = ["1x8", "2x4", "3x2", "4x1", "5x1 cpu=40", "2x2 mem=600Gi", "6x1 cpu=30", "2x0 cpu=90", "9x1",
         "2x8 zone=a", "3x4 zone=b", "1x3"]


def _fleet():
    return fleet("c0: 4x8 used=3 | 2x8 cpu=64 | 3x4 zone=a", "c1: 2x8 used=7 | 4x2 zone=b mem=512Gi",
                 "c2: 1x8 cpu=20 | 5x1 zone=a")


def test_holds_says_what_the_exact_oracle_says():
    rng = random.Random(7)
    fl = _fleet()
    checked = 0
    for round_ in range(12):
        # a random partial plan makes the states: nodes partly used in every way
        filler = groups(*(wl(f"ml/f{round_}-{i}", rng.choice(SPECS)) for i in range(rng.randint(0, 14))))
        probes = groups(*(wl(f"ml/p{i}", spec) for i, spec in enumerate(SPECS)))
        problem = S.prepare(fl, filler + probes)
        states = problem.state()
        S.greedy(problem, states, [g for g in problem.groups if g.key.startswith("ml/f")])
        for g in problem.groups:
            if not g.key.startswith("ml/p"):
                continue
            inst = g.group.workloads[0].instances[0]
            for c in g.eligible:
                st = states[c]
                held = ST.holds(st, g)
                assert held is not None
                truth = O.fits([inst], list(st.info.nodes), [dict(f) for f in st.free])
                assert held == truth, (g.key, c, round_)
                checked += 1
    assert checked > 200


def test_holds_leaves_other_groups_to_placement():
    problem = S.prepare(_fleet(), groups(wl("ml/two", "1x8", "2x1")))
    assert ST.holds(problem.state()[0], problem.groups[0]) is None


def test_reasons_do_not_place_groups_of_one_pod_kind(monkeypatch):
    gs = groups(*(wl(f"ml/a{i:02d}", "2x4", prio=i % 3) for i in range(30)),
                *(wl(f"ml/b{i:02d}", "3x8", prio=i % 2) for i in range(12)))
    fl = fleet(*(f"c{c}: 4x8 used=3 | 2x8" for c in range(4)))
    problem = S.prepare(fl, gs)
    result = S.greedy(problem, problem.state())
    assert len(result) < len(gs), "the instance must leave work unplaced"
    takes = []
    take = ST.ClusterState.take
    monkeypatch.setattr(ST.ClusterState, "take",
                        lambda self, i, d, n=1: takes.extend([i] * n) or take(self, i, d, n))   # pods taken
    explain_all(problem, result, None)
    placed_pods = sum(len(assign) for _, assign in result.values())
    # building the states beside the plan takes each placed pod (twice: all of it, and the
    # work above each level); on the old code every fit check placed its group's pods as well
    assert len(takes) <= 2 * placed_pods


def test_plans_of_one_pod_kind_groups_have_true_reasons():
    gs = groups(*(wl(f"ml/a{i:02d}", "2x4", prio=i % 3) for i in range(30)),
                *(wl(f"ml/b{i:02d}", "3x8", prio=i % 2) for i in range(12)),
                *(wl(f"ml/c{i:02d}", "5x1 cpu=40", prio=1) for i in range(8)))
    fl = fleet(*(f"c{c}: 4x8 used=3 | 2x8 cpu=64" for c in range(3)))
    plan = S.solve(fl, gs, time_limit=60)
    assert plan.unplaced
    assert O.false_reasons(fl, gs, plan) == []
    assert O.strict_priority_violations(fl, gs, plan) == []
