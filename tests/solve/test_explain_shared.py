"""Reasons worked out once and named many times (issue 24, item 3: at 10,000 workloads on 100
clusters the explanations took 3.7-6 s): a static reason once per cluster and pod kind, not
per instance name and pod count; the verdict on a cluster (no room as it is, taken by higher-
or same-priority work) once per cluster, priority and group shape. Counted, not timed; the
reasons are judged by the exact oracle and by the reasons of the plain computation."""

from __future__ import annotations

import placer.solve as S
from placer.model import reasons as R
from placer.solve import explain as EX
from tests.builders import fleet, groups, wl
from tests.solve import oracle as O


def _counting(monkeypatch, name):
    calls = []
    real = getattr(EX, name)
    monkeypatch.setattr(EX, name, lambda *a, **k: calls.append(a) or real(*a, **k))
    return calls


def test_a_static_reason_is_worked_out_once_per_cluster_and_pod_kind(monkeypatch):
    calls = _counting(monkeypatch, "_part_static")
    # 40 workloads of one pod kind (8 GPUs, nodeSelector gpu=h100), each its own pod count and
    # instance name; only c0 has such nodes (too few), c1-c5 have none
    gs = groups(*(wl(f"ml/w{i:02d}", f"{3 + i % 7}x8 gpu=h100 as=part{i % 5}/0", prio=i % 2) for i in range(40)))
    fl = fleet("c0: 2x8 gpu=h100", *(f"c{c}: 4x8 gpu=a100" for c in range(1, 6)))
    plan = S.solve(fl, gs, time_limit=60)
    assert len(plan.unplaced) == 40
    for u in plan.unplaced:
        for c in ("c1", "c2", "c3", "c4", "c5"):
            why = u.reasons[c]
            assert isinstance(why, R.NoMatchingNodes) and why.detail == "gpu=h100"
            assert why.instance == f"part{int(u.workload[-2:]) % 5}/0"      # named for its own part
    # 5 clusters x 1 pod kind; the old code worked it out per instance name and pod count (35)
    assert len(calls) <= 5
    assert O.false_reasons(fl, gs, plan) == []


def test_the_verdict_on_a_cluster_is_asked_once_per_priority_and_shape(monkeypatch):
    calls = _counting(monkeypatch, "fits")
    # a full fleet: 30 groups of one shape under 30 names and kinds (so each is explained on
    # its own), at two priorities; four clusters
    kinds = ("JobSet", "Job", "RayCluster")
    gs = groups(*(wl(f"ml/fill{c}", "4x8", prio=5, pin=f"c{c}") for c in range(4)),
                *(wl(f"ml/w{i:02d}", f"2x4 as=x{i}/0", prio=i % 2, kind=kinds[i % 3]) for i in range(30)))
    fl = fleet(*(f"c{c}: 4x8" for c in range(4)))
    plan = S.solve(fl, gs, time_limit=60)
    assert len(plan.unplaced) == 30
    assert all(isinstance(r, R.CapacityTaken) and r.higher_priority for u in plan.unplaced for r in u.reasons.values())
    # per cluster and priority: base, higher, after at most (3 x 4 x 2 = 24); the old code asked
    # for each of the 30 groups (90 per cluster)
    assert len(calls) <= 24
    assert O.false_reasons(fl, gs, plan) == []


def test_shared_reasons_are_the_reasons_worked_out_one_by_one(monkeypatch):
    gs = groups(*(wl(f"ml/a{i:02d}", f"{2 + i % 3}x4 gpu=h100 as=t{i % 4}/0", prio=i % 3) for i in range(30)),
                *(wl(f"ml/b{i:02d}", "3x8", "1x2", prio=i % 2) for i in range(12)),
                *(wl(f"ml/c{i:02d}", "1x2 gpu=a100", "1x1", prio=1) for i in range(20)))
    fl = fleet("c0: 4x8 used=3 gpu=h100 | 2x8", "c1: 4x8 gpu=a100", "c2: 3x8 used=5 gpu=h100", "c3: 2x8")
    plan = S.solve(fl, gs, time_limit=60)
    assert plan.unplaced, "the instance must be contested"
    shared = {u.workload: u.reasons for u in plan.unplaced}

    # the same plan explained with nothing shared: every cache of the Explainer and of the
    # clusters' static reasons emptied before each group
    class OneByOne(EX.Explainer):
        def reasons(self, g):
            self.cache.clear()
            self.statics.clear()
            self.verdicts.clear()
            for info in self.problem.infos.values():
                info.statics.clear()
            return super().reasons(g)

    monkeypatch.setattr(EX, "Explainer", OneByOne)
    again = S.solve(fl, gs, time_limit=60)
    assert again.placements == plan.placements
    assert {u.workload: u.reasons for u in again.unplaced} == shared
    assert O.false_reasons(fl, gs, plan) == []


def test_a_group_of_one_pod_kind_is_counted_not_placed(monkeypatch):
    calls = _counting(monkeypatch, "try_place")
    # leaders and workers of one kind (two instances, the same pods): 20 such groups left out
    # by higher-priority work that fills the clusters, on 3 clusters with partly used nodes
    gs = groups(*(wl(f"ml/fill{c}", "4x8", prio=9, pin=f"c{c}") for c in range(3)),
                *(wl(f"ml/lws{i:02d}", f"{1 + i % 3}x4", f"{2 + i % 4}x4", prio=i % 2) for i in range(20)))
    fl = fleet(*(f"c{c}: 4x8 | 2x8 used=6" for c in range(3)))
    plan = S.solve(fl, gs, time_limit=60)
    assert len(plan.unplaced) == 20
    assert calls == []              # the old code placed and gave back every pod on each cluster
    assert O.false_reasons(fl, gs, plan) == []


def test_groups_of_one_pod_kind_get_true_reasons_on_mixed_fleets():
    gs = groups(*(wl(f"ml/a{i:02d}", f"{1 + i % 3}x2 cpu=40", f"{1 + i % 2}x2 cpu=40", prio=i % 3) for i in range(24)),
                *(wl(f"ml/b{i:02d}", "2x8 gpu=h100", "3x8 gpu=h100", prio=1) for i in range(8)),
                *(wl(f"ml/c{i:02d}", "1x1", "1x1", "2x1", prio=2) for i in range(10)))
    fl = fleet("c0: 3x8 used=3 gpu=h100 | 2x8 usedcpu=60", "c1: 4x8 gpu=a100", "c2: 2x8 used=6 gpu=h100")
    plan = S.solve(fl, gs, time_limit=60)
    assert plan.unplaced, "the instance must be contested"
    assert O.false_reasons(fl, gs, plan) == []
    assert O.strict_priority_violations(fl, gs, plan) == []
