"""Snapshot building from node and pod objects (no server)."""

from placer.fleetview.inventory import node_from_object, snapshot, summarize, usage_by_node
from placer.model.fleet import Cluster, Node, Taint


def node(name, gpus=8, product="NVIDIA-H100-80GB-HBM3", ready="True", taints=(), unschedulable=False):
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product}},
            "spec": {"taints": list(taints), "unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": "95500m", "memory": "1Ti", "nvidia.com/gpu": str(gpus),
                                       "pods": "110"},
                       "conditions": [{"type": "MemoryPressure", "status": "False"},
                                      {"type": "Ready", "status": ready}]}}


def pod(name, node=None, gpus=1, phase="Running", cpu="1", overhead=None, init=None):
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu},
                                                       "limits": {"nvidia.com/gpu": gpus}}}]}
    if node:
        spec["nodeName"] = node
    if overhead:
        spec["overhead"] = overhead
    if init:
        spec["initContainers"] = init
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}}


def test_node_fields_in_canonical_units():
    n = node_from_object(node("a", taints=[{"key": "gpu", "effect": "NoSchedule"}], ready="False",
                              unschedulable=True))
    assert n.allocatable == {"cpu": 95500, "memory": 2**40, "nvidia.com/gpu": 8, "pods": 110}
    assert n.taints == (Taint("gpu", "", "NoSchedule"),)
    assert not n.ready and n.unschedulable and not n.schedulable
    assert n.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_usage_counts_bound_active_pods_with_overhead_and_init():
    pods = [pod("p1", "a", gpus=2), pod("p2", "a", gpus=1, overhead={"cpu": "250m"}),
            pod("done", "a", gpus=4, phase="Succeeded"), pod("failed", "a", gpus=4, phase="Failed"),
            pod("pending", None, gpus=4, phase="Pending"),
            pod("init", "b", gpus=1, cpu="1", init=[{"name": "i", "resources": {"requests": {"cpu": "3"}}}])]
    used = usage_by_node(pods)
    assert used["a"] == {"cpu": 2250, "nvidia.com/gpu": 3, "pods": 2}
    assert used["b"] == {"cpu": 3000, "nvidia.com/gpu": 1, "pods": 1}


def test_snapshot_and_summary():
    c = snapshot("east", [node("b", gpus=8), node("a", gpus=8), node("c", gpus=4, ready="False")],
                 [pod("p", "a", gpus=6), pod("q", "c", gpus=1)], labels={"region": "us"}, context="ctx")
    assert [n.name for n in c.nodes] == ["a", "b", "c"] and c.context == "ctx"
    s = summarize(c)
    assert (s.nodes_ready, s.nodes_total) == (2, 3)
    assert s.gpus_allocatable == 20 and s.gpus_free == 2 + 8 and s.largest_free_block == 8
    assert s.gpu_products == ("NVIDIA-H100-80GB-HBM3",) and s.reserved_gpus == 0
    assert s.to_json()["gpus"] == {"allocatable": 20, "free": 10, "largestFreeBlock": 8, "reserved": 0}


def test_summary_of_unreachable_cluster():
    s = summarize(Cluster("down", error="unreachable (connection refused)"))
    assert not s.reachable and s.nodes_total == 0 and s.to_json()["error"].startswith("unreachable")


def test_reserved_shown_from_cluster():
    c = Cluster("x", nodes=(Node("n", {"nvidia.com/gpu": 8}),), reserved={"nvidia.com/gpu": 3})
    assert summarize(c).reserved_gpus == 3


def test_bound_pods_take_pod_slots():
    """Found by the scheduler-fidelity judge: a node with pods=3 and one bound pod has two
    slots left, and the real scheduler refuses a third new pod ("Too many pods")."""
    n = node("a")
    n["status"]["allocatable"]["pods"] = "3"
    c = snapshot("east", [n], [pod("old", "a", gpus=0), pod("done", "a", phase="Succeeded")])
    assert c.nodes[0].free("pods") == 2


def test_node_without_pod_capacity_takes_no_pod():
    """The scheduler lets a node whose allocatable has no `pods` take no pod at all."""
    n = node("a")
    del n["status"]["allocatable"]["pods"]
    got = node_from_object(n)
    assert got.allocatable["pods"] == 0 and got.free("pods") == 0
