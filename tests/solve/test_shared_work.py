"""Work the plan shares instead of repeating (issue 24, items 2 and 3): what a group's pods
gave on a cluster whose free capacity has not changed is not computed again, and per
cluster the pod kinds a group has are judged once, not once per group. Counted, not timed;
the plans are judged by the exact oracle."""

from __future__ import annotations

import placer.solve as S
from placer.solve import groups as G
from placer.solve import state as ST
from tests.builders import fleet, groups, wl
from tests.solve import oracle as O


def _fleet(clusters: int):
    return fleet(*(f"c{c}: 4x8 used=3 | 2x8" for c in range(clusters)))


def test_pod_kinds_judged_once_per_cluster_not_per_group(monkeypatch):
    calls = []
    compat = G.ClusterInfo.compat
    monkeypatch.setattr(G.ClusterInfo, "compat", lambda self, p: calls.append(self.index) or compat(self, p))
    gs = groups(*(wl(f"ml/w{i}", "2x4", "1x1") for i in range(200)))
    problem = S.prepare(_fleet(10), gs)
    assert all(g.eligible == list(range(10)) for g in problem.groups)
    # 10 clusters x 2 pod kinds; on the old code each of the 200 groups asked again
    assert len(calls) <= 10 * 2 * 2


def test_a_shape_that_found_no_room_is_not_tried_again_on_the_same_cluster(monkeypatch):
    calls = []
    may_fit = ST.may_fit
    monkeypatch.setattr(ST, "may_fit", lambda st, g: calls.append(st.info.index) or may_fit(st, g))
    # 60 identical groups too large for any of the 8 clusters, then ones that fit
    gs = groups(*(wl(f"ml/big{i:02d}", "7x8") for i in range(60)), *(wl(f"ml/s{i}", "1x8") for i in range(4)))
    problem = S.prepare(_fleet(8), gs)
    placed = S.greedy(problem, problem.state())
    assert len(placed) == 4
    # each big group would be tried on each cluster; one try per cluster is what is learnt
    assert calls.count(0) <= 5


def test_plans_with_shared_work_are_judged_exact():
    gs = groups(*(wl(f"ml/a{i:02d}", "2x4", prio=i % 3) for i in range(40)),
                *(wl(f"ml/b{i:02d}", "3x8", prio=i % 2) for i in range(12)),
                *(wl(f"ml/c{i:02d}", "1x2", "1x1", prio=1) for i in range(20)))
    fl = _fleet(4)
    plan = S.solve(fl, gs, time_limit=60)
    assert plan.unplaced, "the instance must be contested"
    assert O.false_reasons(fl, gs, plan) == []
    assert O.strict_priority_violations(fl, gs, plan) == []


def test_best_fit_keeps_filling_the_node_it_just_used(monkeypatch):
    calls = []
    best_node = ST.ClusterState.best_node
    monkeypatch.setattr(ST.ClusterState, "best_node", lambda self, *a: calls.append(1) or best_node(self, *a))
    # two 8-GPU nodes, one 3 GPUs used: best fit fills the partly used node first
    fl = fleet("c0: 1x8 | 1x8 used=3")
    gs = groups(wl("ml/eight", "8x1"))
    problem = S.prepare(fl, gs)
    placed = S.greedy(problem, problem.state())
    nodes = problem.infos[0].nodes
    plan = sorted(nodes[i].name for _, i in placed[0][1])
    assert plan == ["c0-0-0"] * 3 + ["c0-1-0"] * 5
    # one search per node used, not one per pod (8 on the old code)
    assert len(calls) <= 2
