"""What would make a spread workload fit (issue 21, item 3): a relaxed weight, or a duplicate on
fewer clusters, each offered only when a real re-solve places it (placer.solve.options); the
re-solve's plan is checked here against the fleet by the verifier inside solve."""

import dataclasses

from placer.model.workload import PlacementGroup
from placer.solve import solve
from placer.solve.options import what_would_fit
from tests.builders import fleet, wl
from tests.solve.test_spread import deployment


def options(f, gs):
    plan = solve(f, gs)
    return plan, what_would_fit(f, gs, plan)


def test_a_duplicate_on_fewer_clusters():
    f = fleet("east: 1x8", "west: 2x8")              # one copy of 2 x 8 GPUs fits west only
    g = deployment("web", 2, 8, spread="duplicate", spread_clusters="2")
    plan, found = options(f, [g])
    assert not plan.placements
    texts = [o.render() for o in found[g.key].options]
    assert "set placer.dev/spread-clusters=1 (was 2) on serve/web: it then fits on west" in texts, texts


def test_a_relaxed_weight_when_other_work_took_the_weighted_room():
    # west's room went to higher-priority work: 6 and 6 cannot be kept within one, 8 and 4 fit
    f = fleet("east: 1x8", "west: 1x8")
    web = deployment("web", 12, 1, spread="divide", spread_weights="east=1,west=1")
    other = PlacementGroup("other", (wl("serve/other", "1x4", prio=100, pin="west"),))
    plan, found = options(f, [web, other])
    assert [p.workload for p in plan.placements] == ["serve/other"]
    (relax,) = [o for o in found[web.key].options if o.kind == "relax"]
    assert relax.constraint == "spread-weights" and relax.value == "placer.dev/spread-weights=east=1,west=1"
    unweighted = dataclasses.replace(web.workloads[0], annotations={"placer.dev/spread": "divide"})
    relaxed = solve(f, [PlacementGroup(web.key, (unweighted,)), other])
    assert {p.cluster: p.replicas for p in relaxed.placements if p.workload == "serve/web"} == {"east": 8, "west": 4}
