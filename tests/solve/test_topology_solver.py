"""Topology-aware gangs in the solver (issue 14): required and preferred requests at each
level, a level a cluster does not have, priorities, the class model beyond node-exact size,
and the reasons. Plans are judged from their nodes' labels (tests/solve/oracle.py's `dom`), not
from what the solver reports about itself."""

import pytest

from placer.model import reasons as R
from placer.model.topology import TopologyRequest
from placer.solve import solve
from placer.solve.problem import NODE_EXACT_MAX_NODES
from tests.builders import LEVELS, cluster, fleet, group, groups, racks, wl
from tests.solve import oracle as O
from tests.solve import oracle_topology as OT

T = 10.0
LABELLED = ("zone", "block", "rack", "clique")


def values(f, plan, workload, key, instance=None):
    """The values of `key` on the nodes a workload's pods use (from the fleet's labels)."""
    p = plan.placement(workload)
    nodes = {n.name: n for n in f.cluster(p.cluster).nodes}
    return {O.dom(nodes[n], key) for n, per in p.nodes.items() if instance is None or instance in per}


def check(f, gs, plan):
    assert not OT.topology_violations(f, gs, plan)
    assert not O.false_reasons(f, gs, plan)


@pytest.mark.parametrize("level", LABELLED)
def test_required_keeps_each_gang_in_one_domain(level):
    # two domains of 4 nodes; a topology-blind first fit puts b across both
    f = fleet(racks("east", "4x8", **{level: 2}))
    gs = groups(wl("ml/a", "3x8", required=level), wl("ml/b", "3x8", required=level), wl("ml/c", "2x8"))
    plan = solve(f, gs, time_limit=T)
    key = LEVELS[level]
    assert plan.summary.gpus_placed == 64
    da, db = values(f, plan, "ml/a", key), values(f, plan, "ml/b", key)
    assert len(da) == len(db) == 1 and da != db
    assert plan.placement("ml/a").topology[0].domains == tuple(da)
    assert plan.placement("ml/a").to_dict()["topology"] == [{"gang": "a", "key": key, "domain": da.pop()}]
    check(f, gs, plan)


@pytest.mark.parametrize("level", LABELLED)
def test_required_too_big_for_any_domain_says_so(level):
    f = fleet(racks("east", "3x8", **{level: 2}))
    gs = groups(wl("ml/big", "4x8", required=level), wl("ml/fits", "3x8", required=level))
    plan = solve(f, gs, time_limit=T)
    assert plan.cluster_of("ml/fits") == "east" and plan.cluster_of("ml/big") is None
    why = plan.unplaced_entry("ml/big").reasons["east"]
    assert isinstance(why, R.TopologyDomainTooSmall)
    assert why.render() == (f"needs 4 pods x 8 GPUs inside one {LEVELS[level]}; the largest free {LEVELS[level]} "
                            "has room for 3 such pods (east has room for 6 in all)")
    check(f, gs, plan)


def test_required_host_puts_the_gang_on_one_node():
    # best fit alone would use the half-used node for one pod and split the gang
    f = fleet(cluster("east", "1x8 used=4", "1x8", topology=(LEVELS["host"],)))
    gs = groups(wl("ml/pair", "2x4", required="host"))
    plan = solve(f, gs, time_limit=T)
    assert list(plan.placement("ml/pair").nodes) == ["east-1-0"]
    assert plan.placement("ml/pair").topology[0].domains == ("east-1-0",)
    check(f, gs, plan)


def test_required_host_uses_the_label_when_nodes_carry_it():
    f = fleet(cluster("east", "1x8 kubernetes.io/hostname=h-a used=4", "1x8 kubernetes.io/hostname=h-b"))
    plan = solve(f, groups(wl("ml/pair", "2x4", required="host")), time_limit=T)
    assert plan.placement("ml/pair").topology[0].domains == ("h-b",)


@pytest.mark.parametrize("level", LABELLED)
def test_preferred_spans_as_few_domains_as_it_can(level):
    # domain d0 has 2 free nodes, d1 has 4: best fit in node order would use both
    key = LEVELS[level]
    f = fleet(cluster("east", f"2x8 {key}=d0", f"4x8 {key}=d1", topology=(key,)))
    gs = groups(wl("ml/pref", "4x8", preferred=level))
    plan = solve(f, gs, time_limit=T)
    assert values(f, plan, "ml/pref", key) == {"d1"}
    assert plan.placement("ml/pref").to_dict()["topology"] == [
        {"gang": "pref", "key": key, "domain": "d1", "preferred": True}]
    assert plan.summary.status == "optimal"
    check(f, gs, plan)


def test_preferred_host_packs_one_node():
    # two half-used nodes and a free one: a 2x4 gang prefers one host
    f = fleet(cluster("east", "2x8 used=4", "1x8", topology=(LEVELS["host"],)))
    gs = groups(wl("ml/pref", "2x4", preferred="host"), wl("ml/other", "1x4"))
    plan = solve(f, gs, time_limit=T)
    assert len(values(f, plan, "ml/pref", LEVELS["host"])) == 1
    assert plan.summary.gpus_placed == 12
    check(f, gs, plan)


def test_preferred_that_cannot_fit_one_domain_is_placed_across_few():
    f = fleet(cluster("east", "2x8 example.com/rack=r0", "3x8 example.com/rack=r1", "3x8 example.com/rack=r2",
                      topology=("example.com/rack",)))
    gs = groups(wl("ml/pref", "6x8", preferred="rack"))
    plan = solve(f, gs, time_limit=T)
    assert len(values(f, plan, "ml/pref", "example.com/rack")) == 2
    choice = plan.placement("ml/pref").topology[0]
    assert len(choice.domains) == 2 and not choice.required
    assert plan.placement("ml/pref").to_dict()["topology"][0]["domains"] == list(choice.domains)


def test_missing_level_excludes_the_cluster_with_a_reason():
    f = fleet(cluster("east", "8x8"), racks("west", "2x8", rack=2))
    gs = groups(wl("ml/r", "2x8", required="rack"), wl("ml/p", "1x8", preferred="rack"))
    plan = solve(f, gs, time_limit=T)
    assert plan.cluster_of("ml/r") == "west" and plan.cluster_of("ml/p") == "west"
    gs2 = groups(wl("ml/big", "3x8", required="rack"))
    plan2 = solve(f, gs2, time_limit=T)
    why = plan2.unplaced_entry("ml/big").reasons
    assert isinstance(why["east"], R.TopologyKeyMissing)
    assert why["east"].render() == ("gang big requires topology level example.com/rack, which the cluster does "
                                    "not have (not in its topology, on none of its nodes)")
    assert isinstance(why["west"], R.TopologyDomainTooSmall)
    check(f, gs2, plan2)


def test_level_declared_in_the_clusters_topology_but_on_no_node_is_not_missing():
    f = fleet(cluster("east", "2x8", topology=("example.com/rack",)))
    gs = groups(wl("ml/r", "1x8", required="rack"))
    plan = solve(f, gs, time_limit=T)
    assert isinstance(plan.unplaced_entry("ml/r").reasons["east"], R.TopologyDomainTooSmall)
    check(f, gs, plan)


def test_priority_first_then_topology():
    # one rack of 4 free nodes: the high-priority gang gets it, the low one cannot split
    f = fleet(racks("east", "4x8", rack=1))
    gs = groups(wl("ml/low", "3x8", required="rack", prio=1), wl("ml/high", "2x8", required="rack", prio=10))
    plan = solve(f, gs, time_limit=T)
    assert plan.cluster_of("ml/high") == "east" and plan.cluster_of("ml/low") is None
    why = plan.unplaced_entry("ml/low").reasons["east"]
    assert isinstance(why, R.CapacityTaken) and why.higher_priority and why.by == ("ml/high",)
    check(f, gs, plan)
    assert not O.strict_priority_violations(f, gs, plan)


def test_higher_priority_topology_gang_displaces_lower_priority_work():
    # greedy order is by priority, but a low-priority blind job placed first must not keep the rack
    f = fleet(cluster("east", "2x8 example.com/rack=r0", "2x8 example.com/rack=r1", topology=("example.com/rack",)))
    gs = groups(wl("ml/blind", "2x8", prio=0), wl("ml/gang", "2x8", required="rack", prio=5),
                wl("ml/gang2", "2x8", required="rack", prio=5))
    plan = solve(f, gs, time_limit=T)
    assert plan.cluster_of("ml/gang") == plan.cluster_of("ml/gang2") == "east"
    assert plan.cluster_of("ml/blind") is None
    check(f, gs, plan)


def test_components_only_the_named_pod_set_is_confined():
    # workers (c0) must share a rack; the launcher (c1) may go anywhere
    f = fleet(cluster("east", "2x8 example.com/rack=r0", "1x8 example.com/rack=r1", topology=("example.com/rack",)))
    w = wl("ml/job", "2x8", "1x8", topology=[TopologyRequest("example.com/rack", True, frozenset({"c0"}))])
    plan = solve(f, groups(w), time_limit=T)
    assert values(f, plan, "ml/job", "example.com/rack", "c0/0") == {"r0"}
    assert values(f, plan, "ml/job", "example.com/rack", "c1/0") == {"r1"}
    assert plan.placement("ml/job").to_dict()["topology"] == [
        {"gang": "job", "key": "example.com/rack", "domain": "r0", "components": ["c0"]}]


def test_nested_levels_required_block_and_rack():
    f = fleet(racks("east", "2x8", block=2, rack=2))
    w = wl("ml/job", "3x8", topology=[TopologyRequest("example.com/block", True),
                                      TopologyRequest("example.com/rack", False)])
    plan = solve(f, groups(w, wl("ml/x", "1x8", required="rack")), time_limit=T)
    assert len(values(f, plan, "ml/job", "example.com/block")) == 1
    assert len(values(f, plan, "ml/job", "example.com/rack")) == 2
    assert [t.key for t in plan.placement("ml/job").topology] == ["example.com/block", "example.com/rack"]


def test_gangs_that_fit_alone_but_not_together_say_so():
    f = fleet(cluster("east", "4x8 example.com/rack=r0", "2x8 example.com/rack=r1", topology=("example.com/rack",)))
    gs = [group(wl("ml/a", "3x8", required="rack"), wl("ml/b", "3x8", required="rack"), key="file.yaml")]
    plan = solve(f, gs, time_limit=T)
    why = plan.unplaced_entry("ml/a").reasons["east"]
    assert isinstance(why, R.TopologyDoesNotFit)
    assert why.render() == ("its 6 pods fit the cluster, but no choice of one example.com/rack per gang "
                            "holds them all at once")
    check(f, gs, plan)


def test_class_model_beyond_node_exact_size():
    # more nodes than the node-exact limit: classes, still one class per domain
    n = NODE_EXACT_MAX_NODES // 8 + 2
    f = fleet(racks("east", f"{n}x8", rack=8), racks("west", "4x8 used=4", rack=2))
    assert sum(len(c.nodes) for c in f.clusters) > NODE_EXACT_MAX_NODES
    gs = groups(*[wl(f"ml/g{i}", f"{n - 1}x8", required="rack") for i in range(9)],
                *[wl(f"ml/p{i}", "3x8", preferred="rack") for i in range(4)])
    plan = solve(f, gs, time_limit=T)
    # 8 racks take 8 gangs (a node left in each); the 8 nodes left take 2 preferred gangs, 3 racks each
    assert plan.summary.gpus_placed == (8 * (n - 1) + 2 * 3) * 8
    assert sum(p.workload.startswith("ml/g") for p in plan.placements) == 8
    check(f, gs, plan)
    assert OT.spread_of(f, gs, plan) == 6


def test_host_level_on_a_large_unlabelled_fleet_gets_one_class_per_node():
    f = fleet(cluster("east", f"{NODE_EXACT_MAX_NODES + 20}x8 used=4", "1x8", topology=(LEVELS["host"],)))
    gs = groups(wl("ml/pair", "2x4", required="host"), wl("ml/one", "3x4", required="host"))
    plan = solve(f, gs, time_limit=T)
    assert values(f, plan, "ml/pair", LEVELS["host"]) == {"east-1-0"}
    assert plan.cluster_of("ml/one") is None
    check(f, gs, plan)


def test_topology_blind_fleet_and_workloads_plan_as_before():
    f = fleet("east: 4x8 | 2x4", "west: 3x8")
    gs = groups(wl("ml/a", "4x8"), wl("ml/b", "2x4"), wl("ml/c", "3x8"))
    plan = solve(f, gs, time_limit=T)
    assert all(p.topology == () for p in plan.placements)
    assert "topology" not in plan.to_dict()["placements"][0]


def test_the_verifier_rejects_a_split_required_gang():
    from placer.model.errors import VerificationError
    from placer.model.plan import Placement, Plan
    from placer.solve.verify import verify

    f = fleet(racks("east", "2x8", rack=2))
    gs = groups(wl("ml/a", "3x8", required="rack"))
    plan = solve(f, gs, time_limit=T)
    split = Placement("ml/a", "JobSet", "ml/a", "east", 24, 3, 0,
                      {"east-0-0": {"c0/0": 1}, "east-0-1": {"c0/0": 1}, "east-1-0": {"c0/0": 1}})
    with pytest.raises(VerificationError, match="requires one example.com/rack"):
        verify(f, gs, Plan((split,), (), plan.summary))


def test_pod_too_large_asks_every_node_of_a_class():
    # an 8-GPU node with 4 used and a free 4-GPU node share a class (equal free capacity):
    # an 8-GPU pod is not too large for the cluster, it lacks room
    f = fleet("east: 1x4 | 1x8 used=4")
    gs = groups(wl("ml/x", "1x8"))
    plan = solve(f, gs, time_limit=T)
    assert isinstance(plan.unplaced_entry("ml/x").reasons["east"], R.InsufficientCapacity)
    check(f, gs, plan)


def test_domain_reason_for_a_gang_of_mixed_pods():
    f = fleet(cluster("east", "2x8 example.com/rack=r0", "2x8 example.com/rack=r1", topology=("example.com/rack",)))
    gs = groups(wl("ml/mixed", "2x8", "2x4", required="rack"))
    plan = solve(f, gs, time_limit=T)
    why = plan.unplaced_entry("ml/mixed").reasons["east"]
    assert why.render() == ("needs 4 pods (24 GPUs) inside one example.com/rack; the largest free "
                            "example.com/rack has room for 2 of its pods of 8 GPUs (east has room for 4 in all)")
    check(f, gs, plan)
