"""Issue 21, cluster preference and cost, judged by tests/solve/oracle_preference.py (written
apart from the solver): on random fleets with per-cluster `preference` and `cost` and per-group
`placer.dev/cluster-order`, the plan equals the exact lexicographic optimum (priority levels,
then each group's clusters filled in its order, then the least cost), no placed group would fit
a cluster it ranks better beside the plan, the plan is never below the cheapest-greedy
baseline, and every reason it gives (unplaced, and why a better cluster was passed over) is true.
`PLACER_ORACLE_CASES` sets the instances per family, as in test_solver_oracle.py."""

import os
from dataclasses import replace
from decimal import Decimal

import pytest

from placer.solve import solve
from tests.builders import cluster, fleet, group, wl
from tests.solve import oracle as O
from tests.solve import oracle_preference as OP

CASES = int(os.environ.get("PLACER_ORACLE_CASES", "40"))
ORDER = "placer.dev/cluster-order"


def judge(f, gs, exact: bool) -> list[str]:
    plan = solve(f, gs, time_limit=30, workers=2)
    where = OP.plan_where(plan, gs)
    got = OP.key(f, gs, where)
    out = []
    if exact:
        lex, per, cost = OP.optimum(f, gs)
        if got != (lex, per, -cost):
            out.append(f"not the optimum: {got} != {(lex, per, -cost)} ({plan.summary.status})")
    base = OP.key(f, gs, OP.cheapest_greedy(f, gs))
    if got < base:
        out.append(f"below the cheapest greedy: {got} < {base}")
    total = sum((p.cost for p in plan.placements), Decimal(0))
    if any(cl.cost is not None for cl in f.clusters) and plan.summary.cost != total:
        out.append(f"summary cost {plan.summary.cost} is not the placements' {total}")
    if total != OP.value(f, gs, where)[1]:
        out.append(f"placements cost {total}, the oracle says {OP.value(f, gs, where)[1]}")
    out += OP.order_violations(f, gs, plan)
    out += O.strict_priority_violations(f, gs, plan)
    out += O.false_reasons(f, gs, plan)
    out += OP.false_passed_over(f, gs, plan)
    return out


@pytest.mark.parametrize("family", ["gpu", "mixed-sizes", "predicates", "many-levels"])
def test_order_and_cost_match_the_exact_optimum(family):
    failures = [f"{family} seed {seed}: {m}" for seed in range(CASES)
                for m in judge(*OP.pref_instance(seed, O.FAMILIES[family]), exact=True)]
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:25])


@pytest.mark.parametrize("family", ["medium-gpu", "medium-hetero"])
def test_beyond_exact_size_order_first_never_below_cheapest_greedy(family):
    failures = [f"{family} seed {seed}: {m}" for seed in range(max(1, CASES // 10))
                for m in judge(*OP.pref_instance(seed, O.MEDIUM[family]), exact=False)]
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:25])


def _ordered(n: int, order: str, spec: str = "1x4"):
    return [group(wl(f"ns/w{i}", spec, annotations={ORDER: order})) for i in range(n)]


def test_cluster_order_fills_the_first_cluster_to_its_last_node_before_the_second():
    """Must show: `cluster-order: b,a`; b's three 8-GPU nodes (one half used) hold five 4-GPU
    workloads: all five go to b, and only the rest spill to a (which comes first in the file)."""
    f = fleet(cluster("a", "4x8"), cluster("b", "2x8", "1x8 used=4"))
    gs = _ordered(8, "b,a")
    plan = solve(f, gs, time_limit=30, workers=2)
    on = [p.cluster for p in plan.placements]
    assert plan.summary.status == "optimal"
    assert on.count("b") == 5 and on.count("a") == 3
    used = {n for p in plan.placements if p.cluster == "b" for n in p.nodes}
    assert used == {"b-0-0", "b-0-1", "b-1-0"}                    # to the last node that fits
    spilled = next(p for p in plan.placements if p.cluster == "a")
    assert spilled.passed_over["b"].code == "PreferenceTaken"
    assert OP.optimum(f, gs)[1][0] == 5 * (4 * 9 + 1)          # the oracle agrees: five on the first


def test_without_an_order_the_file_order_only_breaks_ties():
    """No order and no preference: the objective is the one it was (b is not filled first)."""
    f = fleet(cluster("a", "4x8"), cluster("b", "3x8"))
    plan = solve(f, [group(wl("ns/x", "1x4"))], time_limit=10, workers=2)
    assert plan.placements[0].cluster == "a" and plan.placements[0].cost is None
    assert "cost" not in plan.to_dict()["summary"] and "passedOver" not in plan.to_dict()["placements"][0]


def test_cluster_preference_fills_the_higher_one_first():
    f = fleet(cluster("a", "1x8"), replace(cluster("b", "1x8"), preference=5))
    plan = solve(f, [group(wl(f"ns/w{i}", "1x4")) for i in range(3)], time_limit=10, workers=2)
    on = sorted(p.cluster for p in plan.placements)
    assert on == ["a", "b", "b"]


def test_cost_chooses_the_cheaper_of_two_clusters_that_fit():
    """Must show: both fit; the cheaper takes it, and the plan's JSON gives the cost."""
    f = fleet(replace(cluster("a", "2x8"), cost=Decimal("3.5")), replace(cluster("b", "2x8"), cost=Decimal(2)))
    plan = solve(f, [group(wl("ns/x", "1x8")), group(wl("ns/y", "2x2"))], time_limit=10, workers=2)
    out = plan.to_dict()
    assert {p["workload"]: p["cluster"] for p in out["placements"]} == {"ns/x": "b", "ns/y": "b"}
    assert {p["workload"]: p["cost"] for p in out["placements"]} == {"ns/x": 16, "ns/y": 8}
    assert out["summary"]["cost"] == 24 and plan.summary.status == "optimal"


def test_order_outranks_cost_and_cost_decides_among_equal_ranks():
    f = fleet(replace(cluster("a", "1x8"), cost=Decimal(1)), replace(cluster("b", "1x8"), cost=Decimal(9)),
              replace(cluster("c", "1x8"), cost=Decimal("0.5")))
    plan = solve(f, [group(wl("ns/x", "1x8", annotations={ORDER: "b"})), group(wl("ns/y", "1x8"))],
                 time_limit=10, workers=2)
    assert plan.cluster_of("ns/x") == "b" and plan.cluster_of("ns/y") == "c"
    # x passed over nothing it ranks better; y is on the cheapest
    assert not plan.placement("ns/y").passed_over


def test_cost_never_costs_gpus_placed():
    """The cheap cluster holds the small job or the big one: GPUs placed come first."""
    f = fleet(replace(cluster("cheap", "1x8"), cost=Decimal(1)), replace(cluster("dear", "1x4"), cost=Decimal(10)))
    plan = solve(f, [group(wl("ns/big", "1x8")), group(wl("ns/small", "1x4"))], time_limit=10, workers=2)
    assert plan.cluster_of("ns/big") == "cheap" and plan.cluster_of("ns/small") == "dear"


def test_passed_over_says_why_the_preferred_cluster_did_not_take_it():
    """Higher-priority work holds the preferred cluster: the reason names it."""
    f = fleet(cluster("a", "1x8"), cluster("b", "1x8"))
    gs = [group(wl("ns/hi", "1x8", prio=10, annotations={ORDER: "a"})),
          group(wl("ns/lo", "1x8", prio=1, annotations={ORDER: "a,b"}))]
    plan = solve(f, gs, time_limit=10, workers=2)
    assert plan.cluster_of("ns/hi") == "a" and plan.cluster_of("ns/lo") == "b"
    why = plan.placement("ns/lo").passed_over["a"]
    assert why.code == "CapacityTaken" and why.higher_priority and why.by == ("ns/hi",)
    assert plan.to_dict()["placements"][1]["passedOverCodes"] == {"a": "CapacityTaken"}
    assert not OP.false_passed_over(f, gs, plan)


def test_the_preference_judges_can_fail():
    """A plan that spills early, costs more, or gives a false passed-over reason is caught."""
    from placer.model.reasons import PreferenceTaken

    f = fleet(replace(cluster("a", "2x8"), cost=Decimal(1)), replace(cluster("b", "2x8"), cost=Decimal(2)))
    gs = _ordered(4, "b,a")
    plan = solve(f, gs, time_limit=10, workers=2)
    assert [p.cluster for p in plan.placements].count("b") == 4
    spill = replace(plan.placements[0], cluster="a", nodes={"a-0-0": {"c0/0": 1}},
                    passed_over={"b": PreferenceTaken(("ns/w1",))})
    worse = replace(plan, placements=(spill,) + plan.placements[1:])
    assert OP.key(f, gs, OP.plan_where(worse, gs)) < OP.key(f, gs, OP.plan_where(plan, gs))
    assert OP.order_violations(f, gs, worse)
    assert OP.false_passed_over(f, gs, worse)            # b has room beside the plan
    lex, per, cost = OP.optimum(f, gs)
    assert OP.key(f, gs, OP.plan_where(worse, gs)) != (lex, per, -cost)
