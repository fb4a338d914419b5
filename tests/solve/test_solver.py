"""Solver: table-driven placement cases built with one-line fleets and workloads."""

from dataclasses import replace

import pytest

from placer.model import reasons as R
from placer.model.errors import VerificationError
from placer.model.plan import Placement
from placer.solve import solve
from placer.solve.verify import verify
from tests.builders import cluster, fleet, group, groups, wl

TOL = ({"key": "dedicated", "operator": "Exists"},)
T = 10.0         # time limit (a safety net, shared by search, repair and reasons): cases end on effort


def placed(plan):
    return {p.workload: p.cluster for p in plan.placements}


def reason(plan, workload, cluster_name):
    return plan.unplaced_entry(workload).reasons[cluster_name]


# name, fleet, groups, expected {workload: cluster or None}
CASES = [
    ("greedy-fails-optimum-exists",
     fleet("east: 1x8", "west: 2x4"),
     groups(wl("ml/a", "2x4"), wl("ml/b", "1x8")),
     {"ml/a": "west", "ml/b": "east"}),
    ("aggregate-suffices-no-node-fits",
     fleet("east: 10x8 used=5 gpu=h100", "west: 2x8 gpu=a100"),
     groups(wl("ml/x", "3x4 gpu=h100")),
     {"ml/x": None}),
    ("cluster-selector",
     fleet(cluster("east", "2x8", labels={"region": "us-east"}),
           cluster("west", "2x8", labels={"region": "us-west"})),
     groups(wl("ml/x", "1x8", selector="region=us-west")),
     {"ml/x": "west"}),
    ("node-affinity",
     fleet("east: 2x8 gpu=h100 | 1x8 gpu=a100"),
     groups(wl("ml/x", "1x8", affinity=[{"matchExpressions": [
         {"key": "gpu", "operator": "NotIn", "values": ["h100"]}]}])),
     {"ml/x": "east"}),
    ("taint-tolerated-only-where-needed",
     fleet("east: 2x8 taint=dedicated=ml:NoSchedule", "west: 1x8"),
     groups(wl("ml/tol", "2x8", tolerations=TOL), wl("ml/plain", "1x8")),
     {"ml/tol": "east", "ml/plain": "west"}),
    ("priority-wins",
     fleet("east: 2x8"),
     groups(wl("ml/a-low", "2x8"), wl("ml/z-high", "2x8", prio=10)),
     {"ml/a-low": None, "ml/z-high": "east"}),
    ("pin",
     fleet("east: 2x8", "west: 2x8"),
     groups(wl("ml/x", "1x8", pin="west")),
     {"ml/x": "west"}),
    ("cluster-order-tie-break",
     fleet("east: 2x8", "west: 2x8"),
     groups(wl("ml/x", "1x8")),
     {"ml/x": "east"}),
    ("group-lands-whole-or-not-at-all",
     fleet("east: 1x8", "west: 1x8"),
     [group(wl("ml/a", "1x8"), wl("ml/b", "1x8"), key="file.yaml")],
     {"ml/a": None, "ml/b": None}),
    ("non-divisible-gpu-sizes-exact",
     fleet("east: 2x8"),
     groups(wl("ml/threes", "4x3"), wl("ml/twos", "2x2")),
     {"ml/threes": "east", "ml/twos": "east"}),
    ("cordoned-and-notready-nodes-take-nothing",
     fleet("east: 1x8 unschedulable | 1x8 notready", "west: 1x8"),
     groups(wl("ml/x", "1x8")),
     {"ml/x": "west"}),
    ("cpu-binds-not-gpu",
     fleet("east: 2x8 cpu=64"),
     groups(wl("ml/big-cpu", "2x4 cpu=40"), wl("ml/more", "2x4 cpu=20")),
     {"ml/big-cpu": "east", "ml/more": "east"}),
    ("pod-slots",
     fleet("east: 1x8 pods=3 usedpods=1", "west: 1x8"),
     groups(wl("ml/x", "4x1")),
     {"ml/x": "west"}),
]


@pytest.mark.parametrize("name,f,gs,want", CASES, ids=[c[0] for c in CASES])
def test_placement_cases(name, f, gs, want):
    plan = solve(f, gs, time_limit=T, workers=2)
    got = {w: placed(plan).get(w) for w in want}
    assert got == want
    assert plan.summary.optimal
    verify(f, gs, plan)          # solve already verified; re-check independently


def test_greedy_baseline_is_worse_where_the_optimum_exists():
    f, gs = CASES[0][1], CASES[0][2]
    assert solve(f, gs, use_solver=False).summary.gpus_placed == 8
    assert solve(f, gs, time_limit=T).summary.gpus_placed == 16


def test_fill_partly_used_nodes_first_and_keep_whole_nodes_whole():
    f = fleet("east: 1x8 | 1x8 used=4")
    plan = solve(f, groups(wl("ml/x", "1x4")), time_limit=T)
    assert list(plan.placement("ml/x").nodes) == ["east-1-0"]
    plan = solve(f, groups(wl("ml/a", "2x2"), wl("ml/b", "1x8")), time_limit=T)
    assert list(plan.placement("ml/a").nodes) == ["east-1-0"]
    assert list(plan.placement("ml/b").nodes) == ["east-0-0"]


def test_cpu_exactness_after_decoding():
    # GPUs alone would allow two 4-GPU pods per node; CPU allows one 40-CPU pod per node
    f = fleet("east: 2x8 cpu=64")
    plan = solve(f, groups(wl("ml/x", "3x4 cpu=40")), time_limit=T)
    assert plan.unplaced_entry("ml/x") is not None
    assert "40 CPU" in reason(plan, "ml/x", "east").render()


def test_committed_groups_take_capacity_first():
    f = fleet("east: 2x8", "west: 2x8")
    promised = group(wl("ml/old", "2x8"))
    plan = solve(f, groups(wl("ml/new", "1x8")), time_limit=T, committed=[(promised, "east")])
    assert plan.cluster_of("ml/new") == "west"
    assert plan.committed[0].cluster == "east" and not plan.overcommitted


def test_overcommitted_group_is_reported():
    f = fleet("east: 1x8")
    plan = solve(f, [], time_limit=T, committed=[(group(wl("ml/old", "2x8")), "east")])
    assert "ml/old" in plan.overcommitted


@pytest.mark.parametrize("seed_groups", [
    groups(*[wl(f"ml/w{i}", f"{1 + i % 3}x{(1, 2, 4, 8)[i % 4]}", prio=i % 2) for i in range(24)]),
])
def test_deterministic_across_worker_counts(seed_groups):
    f = fleet("east: 4x8 used=3 | 2x8", "west: 3x8 used=1 | 2x4", "north: 2x8 used=6")
    # a generous safety net: at load 25 on 2 cores the 10 s one cut a solve short (the plan
    # may then differ, and says so); what is promised is the same plan when nothing is cut
    a, b, c = (solve(f, seed_groups, time_limit=120, workers=w) for w in (1, 8, 2))
    assert not any(p.summary.time_limit_hit for p in (a, b, c))
    assert a.summary.optimal and b.summary.optimal
    assert [p.to_dict() for p in a.placements] == [p.to_dict() for p in b.placements] \
        == [p.to_dict() for p in c.placements]
    assert [u.to_dict() for u in a.unplaced] == [u.to_dict() for u in b.unplaced]


def _contended():
    """Fragmented nodes, mixed sizes, demand about twice the supply: not provable quickly."""
    specs = ["12x8 used=5", "10x8 used=3", "8x8 used=1", "6x8", "6x8 used=6"]
    f = fleet(*(f"c{c}: " + " | ".join(specs[c:] + specs[:c]) for c in range(3)))
    sizes = ("3x4", "2x8", "5x2", "1x8", "6x1", "2x4", "4x4", "1x2", "7x2", "3x8")
    gs = groups(*[wl(f"ml/w{i:02d}", sizes[i % len(sizes)], prio=(i % 3 == 0) * 5) for i in range(70)])
    return f, gs


def test_deterministic_across_worker_counts_when_the_effort_limit_ends_the_search():
    # a deterministic-time budget (not seconds): the same work is done whatever the load
    f, gs = _contended()
    log: list[str] = []
    plans = [solve(f, gs, time_limit=60, workers=w, effort=0.1, progress=log.append) for w in (1, 8, 2)]
    # the premise: the effort limit, not a proof, ended a stage (here the tie-break)
    assert any(m.startswith("tie-break: FEASIBLE") for m in log), log
    assert not any(p.summary.time_limit_hit for p in plans)
    dumps = [([p.to_dict() for p in plan.placements], [u.to_dict() for u in plan.unplaced]) for plan in plans]
    assert dumps[0] == dumps[1] == dumps[2]


def test_verifier_rejects_corrupted_assignments():
    f = fleet("east: 2x8")
    gs = groups(wl("ml/x", "2x8"))
    plan = solve(f, gs, time_limit=T)
    p = plan.placements[0]
    both_on_one = replace(p, nodes={"east-0-0": {"c0/0": 2}})
    with pytest.raises(VerificationError, match="over-committed"):
        verify(f, gs, replace(plan, placements=(both_on_one,)))
    missing_pod = replace(p, nodes={"east-0-0": {"c0/0": 1}})
    with pytest.raises(VerificationError, match="needs 2"):
        verify(f, gs, replace(plan, placements=(missing_pod,)))
    ghost = replace(p, nodes={"east-0-0": {"c0/0": 1}, "nope": {"c0/0": 1}})
    with pytest.raises(VerificationError, match="does not exist"):
        verify(f, gs, replace(plan, placements=(ghost,)))


def test_verifier_rejects_predicate_and_policy_violations():
    f = fleet("east: 1x8 taint=dedicated=ml:NoSchedule", "west: 1x8")
    gs = groups(wl("ml/x", "1x8", pin="west"))
    plan = solve(f, gs, time_limit=T)
    moved = Placement("ml/x", "JobSet", "ml/x", "east", 8, 1, 0, {"east-0-0": {"c0/0": 1}})
    with pytest.raises(VerificationError, match="pinned to west"):
        verify(f, gs, replace(plan, placements=(moved,)))
    gs2 = groups(wl("ml/x", "1x8"))
    with pytest.raises(VerificationError, match="taint"):
        verify(f, gs2, replace(plan, placements=(moved,)))


# --- explanations: one case per reason, with the exact words --------------------------------

def test_reason_insufficient_capacity_wording():
    f = fleet("east: 10x8 used=5 gpu=h100")
    plan = solve(f, groups(wl("ml/x", "3x4 gpu=h100")), time_limit=T)
    assert reason(plan, "ml/x", "east").render() == \
        "needs 3 pods x 4 GPUs on nodes matching gpu=h100; largest free block is 3 GPUs (30 GPUs free)"


def test_reason_excluded_unreachable_pinned_taint_selector_wording():
    f = fleet(cluster("east", "1x8", labels={"region": "us-east"}),
              cluster("west", "1x8", labels={"region": "us-west"}),
              cluster("north", error="connection refused"),
              cluster("south", "1x8 taint=dedicated=ml:NoSchedule", labels={"region": "us-east"}),
              cluster("dev", "1x8 gpu=l40s", labels={"region": "us-east"}))
    gs = groups(wl("ml/x", "1x8 gpu=h100", selector="region=us-east"),
                wl("ml/p", "9x8", pin="west"))
    plan = solve(f, gs, time_limit=T)
    rx = {c: r.render() for c, r in plan.unplaced_entry("ml/x").reasons.items()}
    assert rx["west"] == "excluded by cluster-selector region=us-east"
    assert rx["north"] == "excluded by cluster-selector region=us-east" or rx["north"].startswith("unreachable")
    assert rx["east"] == "no schedulable node matches the nodeSelector of c0/0 (gpu=h100)"
    assert rx["south"] == "no schedulable node matches the nodeSelector of c0/0 (gpu=h100)"
    rp = {c: r.render() for c, r in plan.unplaced_entry("ml/p").reasons.items()}
    assert rp["east"] == "pinned to west by placer.dev/cluster"
    assert rp["west"] == ("needs 9 pods x 8 GPUs; room for 1 of 9 pods: nodes with >= 8 GPUs free hold 1 such pod "
                          "(1 node; 8 GPUs free)")
    f2 = fleet(cluster("north", error="connection refused"), "south: 1x8 taint=dedicated=ml:NoSchedule")
    plan2 = solve(f2, groups(wl("ml/y", "1x8")), time_limit=T)
    ry = {c: r.render() for c, r in plan2.unplaced_entry("ml/y").reasons.items()}
    assert ry["north"] == "unreachable (connection refused)"
    assert ry["south"] == "pods of c0/0 do not tolerate taint dedicated=ml:NoSchedule on the nodes they select"


def test_reason_capacity_went_to_higher_priority():
    f = fleet("south: 2x8")
    plan = solve(f, groups(wl("research/llm-pretrain", "2x8", prio=100), wl("ml/x", "1x8")), time_limit=T)
    assert reason(plan, "ml/x", "south").render() == \
        "fits alone, but its capacity went to higher-priority research/llm-pretrain"


def test_reason_capacity_went_to_others_at_same_priority():
    f = fleet("east: 2x8")
    plan = solve(f, groups(wl("ml/a", "2x8"), wl("ml/b", "1x8")), time_limit=T)
    assert reason(plan, "ml/b", "east").render() == \
        "fits alone, but its capacity went to ml/a (more GPUs placed overall)"


def test_reason_pod_too_large_and_conflicting_pins_and_not_together():
    f = fleet("east: 2x8", "west: 1x8")
    plan = solve(f, [group(wl("ml/a", "1x8", pin="east"), wl("ml/b", "1x8", pin="west"), key="g"),
                     group(wl("ml/huge", "1x16")), group(wl("ml/c", "2x8"), wl("ml/d", "1x8"), key="h")],
                 time_limit=T)
    assert reason(plan, "ml/a", "east").render() == \
        "its workloads are pinned to different clusters (ml/a -> east, ml/b -> west)"
    assert reason(plan, "ml/huge", "east").render() == \
        "a pod of c0/0 needs 16 GPUs; the largest node has 8 GPUs allocatable"
    assert reason(plan, "ml/c", "east").render() == "needs 3 pods (24 GPUs) at once; only 2 fit together (16 GPUs free)"


@pytest.mark.parametrize("r,text", [
    (R.Unreachable("connection refused"), "unreachable (connection refused)"),
    (R.ExcludedBySelector("region=us-east"), "excluded by cluster-selector region=us-east"),
    (R.PinnedElsewhere("east"), "pinned to east by placer.dev/cluster"),
    (R.UnknownPin("mars"), "pinned to mars by placer.dev/cluster, which is not in the fleet"),
    (R.NoSchedulableNodes(), "has no schedulable nodes"),
    (R.NoMatchingNodes("w/0", "affinity", "gpu in (a100)"),
     "no schedulable node matches the required node affinity of w/0 (gpu in (a100))"),
    (R.InsufficientCapacity(2, "cpu", 40000, "", 24000, 48000),
     "needs 2 pods x 40 CPU; most free on one node is 24 CPU (48 CPU free)"),
    (R.InsufficientCapacity(1, "nvidia.com/gpu", 1, "", 0, 0),
     "needs 1 pod x 1 GPU; largest free block is 0 GPUs (0 GPUs free)"),
    (R.CapacityTaken(("a", "b", "c", "d"), True),
     "fits alone, but its capacity went to higher-priority a, b, c and 1 more"),
])
def test_reason_rendering(r, text):
    assert r.render() == text


def _amd(w, gpus_per_pod):
    """The workload with its GPUs requested as amd.com/gpu instead."""
    insts = tuple(replace(i, pod=replace(i.pod, requests={**{k: v for k, v in i.pod.requests.items()
                                                             if k != "nvidia.com/gpu"},
                                                          "amd.com/gpu": gpus_per_pod}))
                  for i in w.instances)
    return replace(w, instances=insts)


def test_configured_gpu_resources_count_in_objective_and_totals():
    node = fleet("east: 1x0")
    amd = replace(node.clusters[0].nodes[0], allocatable={**node.clusters[0].nodes[0].allocatable, "amd.com/gpu": 8})
    f = replace(node, clusters=(replace(node.clusters[0], nodes=(amd,)),))
    gs = groups(_amd(wl("ml/big", "1x8"), 8), _amd(wl("ml/s1", "1x1"), 1), _amd(wl("ml/s2", "1x1"), 1))
    # amd.com/gpu as a GPU: the 8-GPU workload wins over two 1-GPU ones
    plan = solve(f, gs, time_limit=T, gpu_resources=("nvidia.com/gpu", "amd.com/gpu"))
    assert placed(plan) == {"ml/big": "east"}
    assert (plan.summary.gpus_requested, plan.summary.gpus_placed) == (10, 8)
    # not configured: it is a plain resource, and more workloads placed wins
    plain = solve(f, gs, time_limit=T)
    assert set(placed(plain)) == {"ml/s1", "ml/s2"} and plain.summary.gpus_requested == 0
    why = reason(plan, "ml/s1", "east").render()
    assert why == "fits alone, but its capacity went to ml/big (more GPUs placed overall)"


def test_only_pods_that_tolerate_the_cordon_use_a_cordoned_node():
    """Found by the scheduler-fidelity judge (tests/real/test_fidelity_kube.py, cordoned-tolerate-all-fit)."""
    f = fleet("east: 1x8 unschedulable")
    plan = solve(f, groups(wl("ml/any", "1x8", tolerations=[{"operator": "Exists"}]), wl("ml/plain", "1x8")))
    assert plan.cluster_of("ml/any") == "east" and plan.cluster_of("ml/plain") is None
    assert plan.unplaced_entry("ml/plain").reasons["east"].render() == "has no schedulable nodes"


def test_cordoned_node_beside_ready_ones_names_the_cordon():
    f = fleet("east: 1x8 unschedulable | 1x4")
    plan = solve(f, groups(wl("ml/big", "1x8")))
    assert plan.unplaced_entry("ml/big").reasons["east"].render() == (
        "pods of c0/0 do not tolerate taint node.kubernetes.io/unschedulable:NoSchedule on the nodes with room for one")


def test_past_the_deadline_reasons_make_no_claim_but_statics_stay():
    from placer.solve.explain import explain_all
    from placer.solve.problem import prepare
    f = fleet("east: 1x8", "west: 1x4")
    problem = prepare(f, groups(wl("ml/x", "1x8")))
    why = explain_all(problem, {}, deadline=0.0)[0]
    assert why["east"] == R.Unexplained()
    assert why["west"] == R.PodTooLarge("c0/0", "nvidia.com/gpu", 8, 4, "")   # static: known at preparation


def test_strict_priority_a_lower_priority_group_gives_way():
    # room for 4 GPUs on one node: the priority-5 group gets it though it comes later
    f = fleet("east: 1x8 used=4 | 1x2")
    gs = groups(wl("ml/low", "1x4"), wl("ml/high", "1x4 cpu=2", prio=5), wl("ml/small", "1x2"))
    plan = solve(f, gs, time_limit=T)
    assert plan.cluster_of("ml/high") == "east"


def test_reason_names_workloads_with_their_group_not_a_file_path():
    f = fleet("east: 2x8")
    gs = [group(wl("ml/a", "1x8", prio=5), wl("ml/b", "1x8", prio=5), key="jobs/pair.yaml"), group(wl("ml/c", "1x8"))]
    plan = solve(f, gs, time_limit=T)
    assert reason(plan, "ml/c", "east").render() == (
        "fits alone, but its capacity went to higher-priority ml/a (group jobs/pair.yaml), "
        "ml/b (group jobs/pair.yaml)")


def test_typed_exclusions_and_pin_are_honoured_with_their_own_reasons():
    f = fleet(cluster("east", "1x8", labels={"region": "us-east"}),
              cluster("west", "1x8", labels={"region": "us-west"}),
              cluster("south", "1x8", labels={"region": "us-east"}))
    [g] = groups(wl("ml/x", "1x8", selector="region=us-east"))
    plan = solve(f, [replace(g, excluded=frozenset({"east", "west"}))], time_limit=T)
    assert plan.cluster_of("ml/x") == "south"
    gone = replace(g, excluded=frozenset({"east", "west", "south"}))
    plan = solve(f, [gone], time_limit=T)
    why = plan.unplaced_entry("ml/x").reasons
    # the user's own selector keeps its reason; placer's exclusion has a typed one
    assert why["west"] == R.ExcludedBySelector("region=us-east")
    assert why["east"] == why["south"] == R.Excluded()
    assert why["east"].code == "Excluded" and "excluded by placer" in why["east"].render()
    # the group's pin stands for the workloads' own, as placer.dev/cluster would
    [p] = groups(wl("ml/p", "1x8", pin="east"))
    plan = solve(f, [replace(p, pin="south")], time_limit=T)
    assert plan.cluster_of("ml/p") == "south"
    assert plan.placements[0].cluster == "south"
    with pytest.raises(VerificationError):
        verify(f, [replace(p, excluded=frozenset({"south"}), pin="south")], plan)
