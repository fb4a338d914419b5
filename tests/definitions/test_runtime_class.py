"""RuntimeClass overhead: the API server's RuntimeClass admission writes the class's
overhead into every pod naming it, and the scheduler counts it. Found missing by the
scheduler-fidelity judge (tests/real/test_fidelity_kube.py, overhead-nofit): placer placed a
3.5-CPU pod with a 1-CPU overhead class on a 4-CPU node, where it stayed Pending."""

from dataclasses import replace

from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret
from placer.fleetview.inventory import snapshot
from placer.model.fleet import RuntimeClass
from placer.model.workload import PlacementGroup
from placer.solve import solve
from tests.builders import cluster, fleet, wl

KATA = {"kata": RuntimeClass("kata", {"cpu": 1000, "memory": 2**30}), "runc": RuntimeClass("runc")}


def _with_class(w, name, overhead_set=False):
    insts = tuple(replace(i, pod=replace(i.pod, runtime_class=name, overhead_set=overhead_set)) for i in w.instances)
    return replace(w, instances=insts)


def _plan(clusters, w):
    return solve(fleet(*clusters), [PlacementGroup(w.key, (w,))])


def test_overhead_counts_on_the_node():
    east = replace(cluster("east", "1x8 cpu=4"), runtime_classes=KATA)
    near = _with_class(wl("ml/near", "1x1 cpu=3"), "kata")         # 3 + 1 = 4: fits exactly
    over = _with_class(wl("ml/over", "1x1 cpu=3500m"), "kata")     # 3.5 + 1 > 4
    assert _plan([east], near).cluster_of("ml/near") == "east"
    plan = _plan([east], over)
    assert plan.cluster_of("ml/over") is None
    assert plan.unplaced_entry("ml/over").reasons["east"].code == "PodTooLarge"
    # a class without overhead, and overhead written in the template, add nothing more
    assert _plan([east], _with_class(wl("ml/runc", "1x1 cpu=4"), "runc")).cluster_of("ml/runc") == "east"
    assert _plan([east], _with_class(wl("ml/set", "1x1 cpu=4"), "kata", overhead_set=True)).cluster_of("ml/set") == "east"


def test_cluster_without_the_class_refuses_and_unknown_classes_count_nothing():
    bare = replace(cluster("bare", "1x8"), runtime_classes={})
    sim = cluster("sim", "1x8 cpu=4")                                # simulated: classes not known
    w = _with_class(wl("ml/x", "1x1 cpu=4"), "kata")
    plan = _plan([bare, sim], w)
    assert plan.cluster_of("ml/x") == "sim"
    plan = _plan([bare], w)
    assert plan.unplaced_entry("ml/x").reasons["bare"].render() == (
        "pods of c0/0 use RuntimeClass kata, which the cluster does not have")


def test_overhead_is_the_largest_among_candidate_clusters():
    big = {"kata": RuntimeClass("kata", {"cpu": 2000})}
    east = replace(cluster("east", "1x8 cpu=4"), runtime_classes=KATA)
    west = replace(cluster("west", "1x8 cpu=5"), runtime_classes=big)
    w = _with_class(wl("ml/x", "1x1 cpu=3"), "kata")
    # never less than a cluster's own overhead: 3 + 2 on west fits its 5 CPUs, and east too
    assert _plan([east, west], w).cluster_of("ml/x") in ("east", "west")
    pinned = replace(w, annotations={"placer.dev/cluster": "east"})
    assert _plan([east, west], pinned).cluster_of("ml/x") == "east"       # exact when pinned


def test_inventory_reads_classes_and_interpretation_reads_the_name():
    c = snapshot("east", [], [], runtime_class_objs=[
        {"metadata": {"name": "kata"}, "handler": "kata", "overhead": {"podFixed": {"cpu": "250m", "memory": "1Gi"}}},
        {"metadata": {"name": "runc"}, "handler": "runc"}])
    assert c.runtime_classes == {"kata": RuntimeClass("kata", {"cpu": 250, "memory": 2**30}),
                                 "runc": RuntimeClass("runc", {})}
    assert snapshot("east", [], []).runtime_classes is None
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
           "spec": {"runtimeClassName": "kata", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    shape = interpret(obj, load_catalog()).instances[0].pod
    assert shape.runtime_class == "kata" and not shape.overhead_set


def test_runtime_class_name_must_be_a_string():
    import pytest

    from placer.model.errors import InputError
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
           "spec": {"runtimeClassName": ["kata"], "containers": [{"name": "c"}]}}
    with pytest.raises(InputError, match=r"spec.runtimeClassName: expected a string, got a list"):
        interpret(obj, load_catalog())


POOL = {"pool": RuntimeClass("pool", node_selector={"pool": "gpu"},
                             tolerations=({"key": "dedicated", "operator": "Exists"},))}


def test_runtime_class_scheduling_merges_node_selector_and_tolerations():
    """The RuntimeClass admission merges the class's scheduling nodeSelector into the pod's and
    adds its tolerations; the scheduler then judges the merged pod."""
    east = replace(cluster("east", "1x8 pool=gpu taint=dedicated=ml:NoSchedule", "1x8 pool=cpu"), runtime_classes=POOL)
    w = _with_class(wl("ml/x", "2x8"), "pool")
    plan = _plan([east], w)           # only the tainted pool=gpu node: the class's toleration, one node
    assert plan.cluster_of("ml/x") is None
    one = _with_class(wl("ml/one", "1x8"), "pool")
    plan = _plan([east], one)
    assert plan.placement("ml/one").nodes == {"east-0-0": {"c0/0": 1}}


def test_runtime_class_node_selector_conflict_is_refused():
    east = replace(cluster("east", "1x8 pool=cpu"), runtime_classes=POOL)
    w = _with_class(wl("ml/x", "1x1 pool=cpu"), "pool")
    plan = _plan([east], w)
    assert plan.unplaced_entry("ml/x").reasons["east"].render() == (
        "pods of c0/0 set nodeSelector pool=cpu differently from their RuntimeClass pool")


def test_inventory_reads_runtime_class_scheduling():
    c = snapshot("east", [], [], runtime_class_objs=[{"metadata": {"name": "pool"}, "handler": "runc", "scheduling": {
        "nodeSelector": {"pool": "gpu"}, "tolerations": [{"key": "dedicated", "operator": "Exists"}]}}])
    assert c.runtime_classes == POOL
