"""Capacity reasons name the limit that binds, with its numbers (issue 25, item 7), each
judged by the oracle's independent reason checker (tests/solve/oracle.py)."""

import pytest

from placer.model import reasons as R
from placer.model.plan import Unplaced
from placer.solve import solve
from tests.builders import cluster, fleet, groups, wl
from tests.solve import oracle as O

T = 10


def only_reason(f, gs, key="ml/a", where="east"):
    plan = solve(f, gs, time_limit=T, workers=1)
    assert not O.false_reasons(f, gs, plan), O.false_reasons(f, gs, plan)
    return plan.unplaced_entry(key).reasons[where]


def test_gpus_per_node_room_for_3_of_4():
    # free GPUs per node 8, 5, 3, 2 (18 free): two nodes hold 4-GPU pods, 2 + 1 of them
    f = fleet(cluster("east", "1x8", "1x8 used=3", "1x8 used=5", "1x8 used=6"))
    gs = groups(wl("ml/a", "4x4"))
    r = only_reason(f, gs)
    assert isinstance(r, R.RoomForFewer)
    assert (r.room, r.pods, r.limit, r.limit_room, r.holders, r.free) == (3, 4, "nvidia.com/gpu", 3, 2, 18)
    assert r.render() == ("needs 4 pods x 4 GPUs; room for 3 of 4 pods: nodes with >= 4 GPUs free hold 3 such pods "
                          "(2 nodes; 18 GPUs free)")


def test_pod_slots_bind_on_the_gpu_nodes():
    # the GPU nodes are at 110/110 pods (10 GPUs free); a CPU node has slots but no GPU
    f = fleet(cluster("east", "2x8 used=3 usedpods=110", "1x0 usedpods=10"))
    gs = groups(wl("ml/a", "2x1"))
    r = only_reason(f, gs)
    assert isinstance(r, R.RoomForFewer)
    assert (r.room, r.limit, r.limit_room, r.limit_free, r.holders) == (0, "pods", 0, 0, 2)
    assert r.render() == ("needs 2 pods x 1 GPU; room for 0 of 2 pods: by pod slots the 2 nodes with >= 1 GPU free "
                          "hold 0 such pods (0 pod slots free there)")


def test_pod_slots_bind_after_some_pods_fit():
    # one slot left on each of the two GPU nodes: room for 2 of 3, and slots bind there
    f = fleet(cluster("east", "2x8 usedpods=109", "1x0"))
    r = only_reason(f, groups(wl("ml/a", "3x1")))
    assert (r.room, r.limit, r.limit_room) == (2, "pods", 2)
    assert "room for 2 of 3 pods: by pod slots the 2 nodes with >= 1 GPU free hold 2 such pods" in r.render()


@pytest.mark.parametrize("node,pod,limit,text", [
    ("2x8 cpu=64", "3x4 cpu=40", "cpu", "by CPU (40 CPU a pod) the 2 nodes with >= 4 GPUs free hold 2 such pods"),
    ("2x8 mem=100Gi", "3x4 mem=60Gi", "memory",
     "by memory (60Gi memory a pod) the 2 nodes with >= 4 GPUs free hold 2 such pods (200Gi memory free there)"),
    ("3x0 cpu=8 usedcpu=2", "4x0 cpu=4", "cpu", "nodes with >= 4 CPU free hold 3 such pods (3 nodes; 18 CPU free)"),
])
def test_cpu_and_memory_bind(node, pod, limit, text):
    f = fleet(cluster("east", node))
    r = only_reason(f, groups(wl("ml/a", pod)))
    assert isinstance(r, R.RoomForFewer) and r.limit == limit and r.room < r.pods
    assert text in r.render(), r.render()


def test_no_single_request_binds():
    # GPUs alone leave room for 2 + 1 pods, CPU alone for 1 + 2: each binds on one node
    f = fleet(cluster("east", "1x8 usedcpu=56", "1x8 used=4"))
    gs = groups(wl("ml/a", "3x4 cpu=40"))
    r = only_reason(f, gs)
    assert (r.room, r.limit, r.limit_room, r.short) == (2, "nvidia.com/gpu", 3, (("cpu", 1),))
    assert r.render() == ("needs 3 pods x 4 GPUs; room for 2 of 3 pods: nodes with >= 4 GPUs free hold 3 such pods "
                          "(2 nodes; 12 GPUs free); 2 with every request counted (CPU short on 1 of those nodes)")
    plan = solve(f, gs, time_limit=T, workers=1)
    u = plan.unplaced_entry("ml/a")
    silent = R.RoomForFewer("c0/0", 3, 2, "nvidia.com/gpu", 4, 2, 12, "nvidia.com/gpu", 3, 12, 4)   # no `short`
    assert O.false_reasons(f, gs, plan.__class__((), (Unplaced(u.workload, u.kind, u.group, u.gpus, u.pods,
                                                                u.priority, {"east": silent}),), plan.summary))


def test_the_room_checker_catches_wrong_numbers():
    """A RoomForFewer that names the wrong limit or count is false to the oracle."""
    f = fleet(cluster("east", "1x8", "1x8 used=3", "1x8 used=5", "1x8 used=6"))
    gs = groups(wl("ml/a", "4x4"))
    plan = solve(f, gs, time_limit=T, workers=1)
    u = plan.unplaced_entry("ml/a")
    good = u.reasons["east"]
    for lie in (R.RoomForFewer("c0/0", 4, 4, "nvidia.com/gpu", 4, 2, 18, "nvidia.com/gpu", 3, 18, 4),  # room
                R.RoomForFewer("c0/0", 4, 3, "nvidia.com/gpu", 4, 2, 18, "pods", 3, 18, 1),             # limit
                R.RoomForFewer("c0/0", 4, 3, "nvidia.com/gpu", 4, 3, 18, "nvidia.com/gpu", 3, 18, 4)):  # nodes
        bad = plan.__class__((), (Unplaced(u.workload, u.kind, u.group, u.gpus, u.pods, u.priority,
                                           {"east": lie}),), plan.summary)
        assert O.false_reasons(f, gs, bad), lie
    assert good.code == "RoomForFewer"
