"""Issue 23: "what would make it fit" for a workload its quota keeps out offers reclaiming
what other quotas borrow (naming them and how much) or raising its quota (by how much), as
typed options. Each is judged by the exact oracle (tests/solve/oracle_quota.placeable, over
every node-level assignment, with the rest of the plan held): the change really makes the
group fit, and it is the least (a raise one unit smaller fails; taking any one victim back
out of a reclaim set fails)."""

from __future__ import annotations

from dataclasses import replace

from placer.model.reasons import OverQuota
from placer.solve import solve
from placer.solve.options import what_would_fit
from tests.builders import fleet, group, wl
from tests.solve import oracle_quota as OQ


def _options(f, qs, gs):
    fq = replace(f, quotas=OQ.to_yaml_quotas(qs))
    plan = solve(fq, gs, time_limit=20, workers=2)
    return plan, what_would_fit(fq, gs, plan)


def _raised(qs, name: str, by: int):
    return [replace(q, nominal=q.nominal + by) if q.name == name else q for q in qs]


def _judge(f, qs, gs, plan, found) -> tuple[list[str], dict[str, int]]:
    """Every quota option of every unplaced group, checked by the oracle."""
    bad, seen = [], {"reclaim": 0, "raise-quota": 0}
    by_key = {g.key: g for g in gs}
    victim_groups = {p.workload: p.group for p in plan.placements}
    for key, opts in found.items():
        g = by_key[key]
        for o in opts.options:
            if o.kind == "raise-quota":
                seen[o.kind] += 1
                q = o.quotas[0][0]
                if not OQ.placeable(f, _raised(qs, q, o.by), gs, plan, g):
                    bad.append(f"{key}: raising {q} by {o.by} does not make it fit")
                if o.by > 1 and OQ.placeable(f, _raised(qs, q, o.by - 1), gs, plan, g):
                    bad.append(f"{key}: raising {q} by {o.by - 1} already makes it fit")
            elif o.kind == "reclaim":
                seen[o.kind] += 1
                drop = sorted({victim_groups[v.workload] for v in o.victims})
                owners = {OQ.owner(qs, v.workload.split("/")[0]).name for v in o.victims}
                if set(dict(o.quotas)) != owners:
                    bad.append(f"{key}: reclaim names {dict(o.quotas)}, the victims are of {owners}")
                if not OQ.placeable(f, qs, gs, plan, g, without=drop):
                    bad.append(f"{key}: reclaiming {drop} does not make it fit")
                for d in drop:
                    if OQ.placeable(f, qs, gs, plan, g, without=[x for x in drop if x != d]):
                        bad.append(f"{key}: reclaiming {drop} without {d} already makes it fit")
    return bad, seen


def test_reclaim_takes_back_what_a_higher_priority_quota_borrowed():
    """blue (priority 10) took the whole fleet, borrowing red's nominal 8 GPUs; red's jobs
    are over quota (the cohort has nothing unused): reclaiming one of blue's borrowed jobs
    makes one fit, and nothing less does."""
    f = fleet("a: 2x8")
    qs = [OQ.Q("red", ("red",), 8, None, "lab"), OQ.Q("blue", ("blue",), 8, None, "lab")]
    gs = [group(wl(f"blue/b{i}", "1x4", prio=10)) for i in range(4)] + [group(wl(f"red/r{i}", "1x4")) for i in range(2)]
    plan, found = _options(f, qs, gs)
    assert {p.workload.split("/")[0] for p in plan.placements} == {"blue"}
    assert all(isinstance(next(iter(u.reasons.values())), OverQuota) for u in plan.unplaced)
    bad, seen = _judge(f, qs, gs, plan, found)
    assert not bad, bad
    first = found["red/r0"].options[0]
    assert first.kind == "reclaim" and dict(first.quotas) == {"blue": 4} and len(first.victims) == 1
    assert first.render().startswith("reclaim borrowed 4 GPUs from quota blue: take out blue/b")
    d = first.to_dict()
    assert d["kind"] == "reclaim" and d["reclaimed"] == {"blue": 4} and d["resource"] == "nvidia.com/gpu"


def test_raise_the_quota_by_what_it_lacks():
    """red has no cohort and nominal 8 on a fleet of 32 idle GPUs: raising its nominal
    amount by 4 lets one more 4-GPU job in, by 3 does not."""
    f = fleet("a: 4x8")
    qs = [OQ.Q("red", ("red",), 8)]
    gs = [group(wl(f"red/r{i}", "1x4")) for i in range(4)]
    plan, found = _options(f, qs, gs)
    assert len(plan.placements) == 2
    bad, seen = _judge(f, qs, gs, plan, found)
    assert not bad, bad
    assert seen["raise-quota"] == 2 and seen["reclaim"] == 0
    o = found[plan.unplaced[0].group].options[0]
    assert (o.kind, o.quotas[0][0], o.by, o.to) == ("raise-quota", "red", 4, 12)
    assert o.render() == "raise quota red's nominal nvidia.com/gpu by 4 GPUs (to 12 GPUs): it then fits on a"
    assert o.to_dict()["by"] == 4


def test_quota_options_on_random_instances_hold_under_the_oracle():
    bad, seen = [], {"reclaim": 0, "raise-quota": 0}
    for seed in range(8):
        f, qs, gs = OQ.fair_instance(seed)
        plan, found = _options(f, qs, gs)
        b, s = _judge(f, qs, gs, plan, found)
        bad += [f"seed {seed}: {x}" for x in b]
        for k in seen:
            seen[k] += s[k]
    assert not bad, bad
    assert seen["reclaim"] >= 1 and seen["raise-quota"] >= 2, seen
