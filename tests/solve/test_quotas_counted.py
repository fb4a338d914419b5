"""Issue 23 in the daemon's rounds: committed work over a lowered limit holds back only its own
quota; the use a caller counts itself (`Quotas.counted`, the daemon's book of placed copies,
pods bound or not) stands for the committed groups' use; the arrivals round never breaks a
quota (it hands the round to the full solve). Judged by figures worked out by hand."""

from __future__ import annotations

from dataclasses import replace

from placer.model.quota import Quotas
from placer.model.reasons import OverQuota
from placer.solve import solve
from placer.solve.incremental import Reuse, place_arrivals
from tests.builders import fleet, group, wl
from tests.solve import oracle_quota as OQ

GPU = "nvidia.com/gpu"


def _fleet(counted=None):
    f = fleet("a: 2x8", "b: 2x8")                 # 32 GPUs
    qs = OQ.to_yaml_quotas([OQ.Q("red", ("red",), 8), OQ.Q("blue", ("blue",), 8)])    # no cohort
    return replace(f, quotas=Quotas(qs.entries, counted=counted) if counted is not None else qs)


def test_committed_work_over_a_lowered_limit_holds_back_only_its_own_quota():
    fq = _fleet()
    done = [(group(wl("red/old1", "1x8")), "a"), (group(wl("red/old2", "1x8")), "b")]    # 16 of red's 8
    gs = [group(wl("red/new", "1x4")), group(wl("blue/new", "1x4"))]
    for use_solver in (True, False):
        plan = solve(fq, gs, committed=done, time_limit=20, workers=2, use_solver=use_solver)
        assert [p.workload for p in plan.placements] == ["blue/new"], use_solver
        (u,) = plan.unplaced
        r = next(iter(u.reasons.values()))
        assert isinstance(r, OverQuota) and (r.quota, r.uses, r.nominal) == ("red", 16, 8)


def test_counted_use_stands_for_the_committed_groups():
    # red's copies run with every pod bound (nothing promised, no committed group): counted 8
    fq = _fleet(counted={"red": {GPU: 8}})
    gs = [group(wl("red/new", "1x4")), group(wl("blue/new", "1x4"))]
    plan = solve(fq, gs, time_limit=20, workers=2)
    assert [p.workload for p in plan.placements] == ["blue/new"]
    r = next(iter(plan.unplaced[0].reasons.values()))
    assert isinstance(r, OverQuota) and r.uses == 8
    # a committed group (a promise) is capacity only when the use is counted: not counted twice
    promised = [(group(wl("red/old", "1x4")), "a")]
    fq4 = _fleet(counted={"red": {GPU: 4}})
    plan = solve(fq4, [group(wl("red/new", "1x4"))], committed=promised, time_limit=20, workers=2)
    assert [p.workload for p in plan.placements] == ["red/new"]


def test_the_arrivals_round_never_breaks_a_quota():
    fq = _fleet()
    two = [group(wl("red/n1", "1x4")), group(wl("red/n2", "1x4")), group(wl("blue/n1", "1x8"))]
    plan = place_arrivals(Reuse(), fq, two)
    assert plan is not None and len(plan.placements) == 3
    over = [group(wl(f"red/n{i}", "1x4")) for i in range(3)]         # 12 > 8: the full solve decides
    assert place_arrivals(Reuse(), fq, over) is None
    assert place_arrivals(Reuse(), _fleet(counted={"red": {GPU: 4}}), two[:2]) is None     # 4 + 8 > 8
