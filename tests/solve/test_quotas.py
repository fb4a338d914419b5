"""Issue 23: fleet-wide quotas are hard constraints of the one solve. Judged by the exact
oracle (tests/solve/oracle_quota.py, written apart from the solver): no quota is exceeded,
borrowing stays within limits and the pool, and a plan the solver calls optimal reaches the
exact optimum under the quotas; the greedy baseline, committed work, the verifier and the
over-quota reason besides."""

from __future__ import annotations

from dataclasses import replace

import pytest

from placer.model.errors import VerificationError
from placer.model.reasons import OverQuota
from placer.solve import solve
from placer.solve.verify import verify
from tests.builders import fleet, group, wl
from tests.solve import oracle as O
from tests.solve import oracle_quota as OQ

SEEDS = range(12)


def _check(seed: int, use_solver: bool = True) -> tuple[list[str], bool, bool]:
    f, qs, gs = OQ.instance(seed)
    fq = replace(f, quotas=OQ.to_yaml_quotas(qs))
    plan = solve(fq, gs, time_limit=30, workers=2, use_solver=use_solver)
    bad = OQ.plan_violations(f, qs, gs, plan)
    got = O.lex(gs, O.placed_groups(plan, gs))
    best = OQ.optimum(f, qs, gs)
    if got > best:
        bad.append(f"seed {seed}: the plan {got} beats the exact optimum {best}: a quota was not applied")
    if use_solver and plan.summary.optimal and got != best:
        bad.append(f"seed {seed}: called optimal, {got} != exact {best}")
    binding = best < O.optimum(f, gs)
    return bad, plan.summary.optimal, binding


def test_plans_stay_within_quotas_and_reach_the_exact_optimum():
    bad, optimal, binding = [], 0, 0
    for seed in SEEDS:
        b, opt, bind = _check(seed)
        bad += b
        optimal += opt
        binding += bind
    assert not bad, bad
    # the instances exercise the quotas: they cut the optimum in some, and most are proven
    assert binding >= 3, binding
    assert optimal >= len(SEEDS) // 2, optimal


def test_the_greedy_baseline_keeps_within_quotas():
    bad = []
    for seed in SEEDS:
        bad += _check(seed, use_solver=False)[0]
    assert not bad, bad


def _team_fleet(**quota):
    f = fleet("a: 2x8", "b: 2x8")                # 32 GPUs
    qs = [OQ.Q("red", ("red",), 8, quota.get("limit"), quota.get("cohort")),
          OQ.Q("blue", ("blue",), 8, None, quota.get("cohort"))]
    return f, qs, replace(f, quotas=OQ.to_yaml_quotas(qs))


def test_no_cohort_means_nominal_only_and_the_reason_says_so():
    f, qs, fq = _team_fleet()
    gs = [group(wl(f"red/r{i}", "1x4")) for i in range(4)]
    plan = solve(fq, gs, time_limit=20, workers=2)
    assert sum(p.gpus for p in plan.placements) == 8 and plan.summary.optimal
    why = {r for u in plan.unplaced for r in u.reasons.values()}
    assert all(isinstance(r, OverQuota) for r in why)
    assert {r.render() for r in why} == {
        "over quota: red uses 8 of 8 GPUs, may borrow 0 more (no cohort to borrow from); needs 4"}


def test_a_cohort_lends_unused_nominal_and_the_pool_within_the_borrowing_limit():
    f, qs, fq = _team_fleet(cohort="lab", limit=12)
    gs = [group(wl(f"red/r{i}", "1x4")) for i in range(8)]
    plan = solve(fq, gs, time_limit=20, workers=2)
    # nominal 8 + at most 12 borrowed (blue's 8 unused and 16 of pool are there)
    assert sum(p.gpus for p in plan.placements) == 20
    r = next(iter(plan.unplaced[0].reasons.values()))
    assert isinstance(r, OverQuota) and (r.uses, r.nominal, r.may_borrow, r.needs) == (20, 8, 0, 4)


def test_committed_work_counts_against_its_quota():
    f, qs, fq = _team_fleet(cohort="lab", limit=0)
    done = [(group(wl("red/old", "1x8")), "a")]
    gs = [group(wl("red/new", "1x4")), group(wl("blue/new", "1x4"))]
    plan = solve(fq, gs, committed=done, time_limit=20, workers=2)
    assert [p.workload for p in plan.placements] == ["blue/new"]
    r = next(iter(plan.unplaced[0].reasons.values()))
    assert isinstance(r, OverQuota) and r.uses == 8 and r.quota == "red"


def test_a_workload_in_no_quota_is_unrestricted_and_default_takes_it_when_given():
    f, qs, fq = _team_fleet()
    gs = [group(wl(f"other/o{i}", "1x8")) for i in range(4)]
    assert len(solve(fq, gs, time_limit=20, workers=2).placements) == 4
    fd = replace(f, quotas=OQ.to_yaml_quotas(qs + [OQ.Q("default", (), 16)]))
    assert len(solve(fd, gs, time_limit=20, workers=2).placements) == 2


def test_the_verifier_rejects_a_plan_over_a_quota():
    f, qs, fq = _team_fleet()
    gs = [group(wl(f"red/r{i}", "1x8")) for i in range(2)]
    free_plan = solve(f, gs, time_limit=20, workers=2)         # planned without the quotas
    assert len(free_plan.placements) == 2
    with pytest.raises(VerificationError, match="quota red"):
        verify(fq, gs, free_plan)
