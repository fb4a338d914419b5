"""Spread (issue 21 item 1): placer's plans against the exact judge in tests/solve/oracle_spread.py
(written apart from the solver), on the issue's fleet and on random small fleets."""

import random

import pytest

from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret
from placer.model.errors import InputError
from placer.model.workload import PlacementGroup
from placer.solve import solve
from tests.builders import cluster, fleet, wl
from tests.solve import oracle as O
from tests.solve import oracle_spread as S

CATALOG = load_catalog()


def deployment(name: str, replicas: int, gpus: int, **ann: str) -> PlacementGroup:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": "serve",
                        "annotations": {f"placer.dev/{k.replace('_', '-')}": v for k, v in ann.items()}},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                                     "requests": {"cpu": "1", "memory": "1Gi"},
                                     "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}
    w = interpret(obj, CATALOG)
    return PlacementGroup(f"g-{name}", (w,))


def shares_of(plan, key="serve/web"):
    return {p.cluster: p.replicas for p in plan.placements if p.workload == key}


def test_must_show_divided_shares_fit_where_cluster_totals_would_not():
    # east has 21 free GPUs (room by totals for its weighted 8 replicas x 2 GPUs) but 3 free per
    # node: its nodes hold 7 such pods; west holds 8
    f = fleet("east: 7x8 used=5", "west: 2x8")
    g = deployment("web", 12, 2, spread="divide", spread_weights="east=2,west=1")
    plan = solve(f, [g])
    assert shares_of(plan) == {"east": 7, "west": 5}
    assert all(p.spread == {"mode": "divide", "shares": {"east": 7, "west": 5}} for p in plan.placements)
    assert plan.summary.gpus_placed == 24 and plan.summary.status == "optimal"
    best, options = S.divide_options(f, g)
    assert best == 12 and {"east": 7, "west": 5} in options


def test_weights_give_way_only_as_far_as_the_nodes_require():
    # east's nodes hold 5 of the 2-GPU pods, not its weighted 8: all 12 still land, east full
    f = fleet("east: 5x8 used=5", "west: 2x8")
    plan = solve(f, [deployment("web", 12, 2, spread="divide", spread_weights="east=2,west=1")])
    assert shares_of(plan) == {"east": 5, "west": 7} and plan.summary.status == "optimal"


def test_divide_without_weights_uses_as_few_clusters_as_fit():
    # east (first in order) holds 4 of the 2-GPU pods, west 8: all 8 on west, not 4 + 4
    f = fleet("east: 1x8", "west: 2x8")
    plan = solve(f, [deployment("web", 8, 2, spread="divide")])
    assert shares_of(plan) == {"west": 8} and plan.summary.status == "optimal"


def test_duplicate_exactly_n_copies_or_none():
    f = fleet("a: 2x8", "b: 2x8", "c: 2x8", "d: 1x8")
    g = deployment("web", 2, 8, spread="duplicate", spread_clusters="3")
    plan = solve(f, [g])
    assert sorted(p.cluster for p in plan.placements) == ["a", "b", "c"]
    assert all(p.gpus == 16 for p in plan.placements)
    # every eligible cluster: d takes one such pod, not the copy, so no copy at all
    plan = solve(f, [deployment("web", 2, 8, spread="duplicate")])
    assert not plan.placements and plan.unplaced[0].reasons["a"].code == "DuplicateShort"


@pytest.mark.parametrize("ann, msg", [
    ({"spread": "split"}, "is not duplicate or divide"),
    ({"spread": "divide", "spread_clusters": "0"}, "spread-clusters: '0' is not a positive integer"),
    ({"spread": "divide", "spread_weights": "east=two"}, "is not cluster=weight"),
    ({"spread": "duplicate", "spread_weights": "east=1"}, "applies to placer.dev/spread: divide"),
    ({"spread_clusters": "2"}, "needs placer.dev/spread"),
])
def test_bad_annotations_are_one_line_input_errors(ann, msg):
    with pytest.raises(InputError, match=msg):
        deployment("web", 4, 1, **ann)


def test_divide_refused_on_a_type_without_scale():
    obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "annotations": {
        "placer.dev/spread": "divide"}}, "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}
    with pytest.raises(InputError, match=r"divide: Job \(batch/v1\) has no scalable replicas"):
        interpret(obj, CATALOG)


def _random_fleet(rng: random.Random):
    out = []
    for name in ("east", "west", "eu")[:rng.randint(2, 3)]:
        specs = [f"{rng.randint(1, 3)}x8 used={rng.choice([0, 2, 3, 5, 7])}" for _ in range(rng.randint(1, 2))]
        out.append(cluster(name, *specs))
    return fleet(*out)


def _random_divide(rng: random.Random, names):
    ann = {"spread": "divide"}
    if rng.random() < 0.5:
        ann["spread_weights"] = ",".join(f"{n}={rng.randint(1, 3)}" for n in names if rng.random() < 0.8) \
            or f"{names[0]}=1"
    if rng.random() < 0.3:
        ann["spread_clusters"] = str(rng.randint(1, 2))
    if rng.random() < 0.3:
        ann["spread_min_replicas"] = str(rng.randint(1, 6))
    return deployment("web", rng.randint(2, 8), rng.choice([1, 2, 4]), **ann)


@pytest.mark.parametrize("seed", range(30))
def test_divide_matches_the_exact_judge(seed):
    rng = random.Random(seed)
    f = _random_fleet(rng)
    g = _random_divide(rng, [c.name for c in f.clusters])
    plan = solve(f, [g], workers=2)
    best, options = S.divide_options(f, g)
    got = shares_of(plan)
    per = g.workloads[0].instances[0].gpus_per_pod
    assert sum(got.values()) == best, (got, best, options)
    assert sum(p.gpus for p in plan.placements) == best * per
    if best:
        assert {c: k for c, k in got.items() if k} in options
        if "placer.dev/spread-weights" not in g.workloads[0].annotations:    # as few clusters as hold it
            assert len(got) == min(len(o) for o in options), (got, options)
        for p in plan.placements:               # the share is its pods, each on a node that holds it
            assert p.pods == p.replicas and sum(sum(v.values()) for v in p.nodes.values()) == p.replicas
            assert p.spread["shares"] == got
    else:
        (u,) = plan.unplaced
        assert u.workload == "serve/web"
        (inst,) = g.workloads[0].instances
        for cl in f.clusters:                 # every number of every reason, against the judge
            r = u.reasons[cl.name]
            room = min(S.units_on(inst, cl.nodes, [O.free(n) for n in cl.nodes]), inst.pods)
            if r.code == "SpreadShort":
                assert (r.room, r.total) == (room, inst.pods), (cl.name, r, room)
            else:
                assert room == 0, (cl.name, r.render(), room)


@pytest.mark.parametrize("seed", range(20))
def test_duplicate_matches_the_exact_judge(seed):
    rng = random.Random(100 + seed)
    f = _random_fleet(rng)
    ann = {"spread": "duplicate"}
    if rng.random() < 0.6:
        ann["spread_clusters"] = str(rng.randint(1, len(f.clusters)))
    g = deployment("web", rng.randint(1, 4), rng.choice([1, 2, 4, 8]), **ann)
    plan = solve(f, [g], workers=2)
    placed, fit = S.duplicate_outcome(f, g)
    clusters = sorted(p.cluster for p in plan.placements)
    if placed:
        need = int(ann.get("spread_clusters", 0)) or len(clusters)
        assert len(clusters) == need and set(clusters) <= set(fit) and len(set(clusters)) == len(clusters)
        assert all(p.gpus == g.workloads[0].gpus for p in plan.placements)
    else:
        assert clusters == [], (clusters, fit)


def _greedy_with_policy(f, spread_group, others):
    """A baseline written here: plain groups by priority first fit (oracle.greedy's rule), then the
    divided workload on what they leave, with the policy (the exact share enumeration)."""
    placed = O.greedy(f, others, "priority")
    caps = {cl.name: [O.free(n) for n in cl.nodes] for cl in f.clusters}
    # replay the baseline's loads: first fit in the same order (oracle.greedy keeps no nodes)
    for g in sorted(others, key=lambda g: (-O.priority(g), -O.gpus(g))):
        if g.key not in placed:
            continue
        pods = sorted(((i, O.demand(i)) for _, i in O.instances(g) for _ in range(i.pods)),
                      key=lambda t: -t[1].get("nvidia.com/gpu", 0))
        for cl in f.clusters:
            if not O.policy_ok(g, cl):
                continue
            cap = O._first_fit(cl, caps[cl.name], [(0, i, d) for i, d in pods], [], ())
            if cap is not None:
                caps[cl.name] = cap
                break
    best, _ = S.divide_options(f, spread_group, caps, max_excess=S.slack(f, spread_group))
    return placed, best


@pytest.mark.parametrize("seed", range(15))
def test_never_below_a_greedy_baseline_with_the_policy(seed):
    rng = random.Random(200 + seed)
    f = _random_fleet(rng)
    g = _random_divide(rng, [c.name for c in f.clusters])
    others = [PlacementGroup(f"o{i}", (wl(f"serve/o{i}", f"{rng.randint(1, 2)}x{rng.choice([1, 2, 4])}",
                                          prio=rng.choice([0, 5])),)) for i in range(rng.randint(1, 3))]
    plan = solve(f, [g, *others], workers=2)
    placed, best = _greedy_with_policy(f, g, others)
    per = g.workloads[0].instances[0].gpus_per_pod
    mine = sum(p.gpus for p in plan.placements if p.workload == "serve/web")
    got = {}
    for prio in (5, 0):
        got[prio] = sum(p.gpus for p in plan.placements if p.priority == prio)
    base = {prio: sum(O.gpus(o) for o in others if o.key in placed and O.priority(o) == prio) for prio in (5, 0)}
    base[0] += best * per
    assert (got[5], got[0]) >= (base[5], base[0]), (got, base, mine)
