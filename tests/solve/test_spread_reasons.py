"""Why a divided workload's shares are no larger, per cluster (issue 21, item 3): a workload placed
in part (`spread-min-replicas`) says how many replicas were left out and, per cluster, its share
against what its nodes hold alone; a divide held to too few clusters is offered one more. The
rooms and the best totals come from the exact judge (tests/solve/oracle_spread.py), not placer."""

import dataclasses

from placer.model.workload import PlacementGroup
from placer.solve import solve
from placer.solve.options import what_would_fit
from tests.builders import fleet
from tests.solve import oracle as O
from tests.solve import oracle_spread as S
from tests.solve.test_spread import deployment, shares_of


def rooms(f, g) -> dict[str, int]:
    (inst,) = g.workloads[0].instances
    return {cl.name: S.units_on(inst, cl.nodes, [O.free(n) for n in cl.nodes]) for cl in f.clusters}


def test_a_divide_placed_in_part_says_why_per_cluster():
    # 16 replicas of 1 GPU, at least 6: east holds 8, west 4, eu's only node is tainted
    f = fleet("east: 1x8", "west: 1x4", "eu: 1x8 taint=dedicated=ml:NoSchedule")
    g = deployment("web", 16, 1, spread="divide", spread_min_replicas="6")
    plan = solve(f, [g])
    best, options = S.divide_options(f, g)
    assert sum(shares_of(plan).values()) == best == 12 and shares_of(plan) in options
    room = rooms(f, g)
    assert room == {"east": 8, "west": 4, "eu": 0}
    for p in plan.placements:
        out = p.to_dict()["spread"]
        assert out["unplaced"] == 16 - best
        codes = out["reasonCodes"]
        assert codes["east"] == codes["west"] == "ShareShort" and codes["eu"] != "ShareShort", codes
        why = p.spread["reasons"]
        for c in ("east", "west"):
            assert (why[c].share, why[c].room) == (shares_of(plan)[c], room[c])
            assert "all its nodes hold of it" in why[c].render()
        assert "taint" in why["eu"].render().lower()
    assert not plan.unplaced and plan.summary.placed == 1
    # the summary asks for all 16 GPUs, places 12
    assert (plan.summary.gpus_requested, plan.summary.gpus_placed) == (16, 12)


def test_a_share_held_by_spread_clusters_says_so():
    # at most one cluster: east (8) is the best alone, west's room of 8 goes unused
    f = fleet("east: 1x8", "west: 1x8 used=2")
    g = deployment("web", 16, 1, spread="divide", spread_min_replicas="4", spread_clusters="1")
    plan = solve(f, [g])
    best, options = S.divide_options(f, g)
    assert best == 8 and shares_of(plan) in options and shares_of(plan) == {"east": 8}
    why = plan.placements[0].spread["reasons"]
    assert (why["west"].share, why["west"].room) == (0, rooms(f, g)["west"]) == (0, 6)
    assert why["west"].render().endswith("spread-clusters 1 are in use")


def test_placed_whole_gives_no_short_reasons():
    f = fleet("east: 1x8", "west: 1x8")
    plan = solve(f, [deployment("web", 12, 1, spread="divide", spread_min_replicas="4")])
    assert sum(shares_of(plan).values()) == 12
    assert all("reasons" not in p.to_dict()["spread"] for p in plan.placements)


def test_a_divide_on_too_few_clusters_is_offered_one_more():
    f = fleet("east: 1x8", "west: 1x8", "eu: 1x4")
    g = deployment("web", 12, 1, spread="divide", spread_clusters="1")
    plan = solve(f, [g])
    assert not plan.placements and S.divide_options(f, g)[0] == 0
    found = what_would_fit(f, [g], plan)
    (relax,) = [o for o in found[g.key].options if o.kind == "relax"]
    assert relax.constraint == "spread-clusters" and relax.value == "placer.dev/spread-clusters=2 (was 1)"
    # the judge: with two clusters every replica lands
    more = dataclasses.replace(g.workloads[0], annotations={**g.workloads[0].annotations,
                                                            "placer.dev/spread-clusters": "2"})
    assert S.divide_options(f, PlacementGroup(g.key, (more,)))[0] == 12
