"""placer.actuate: clean copies, suspend handling, promised capacity (pure), and the I/O half
(find_placed, apply_group, `placer clusters` reserved) through the real client against the harness."""
from __future__ import annotations

import copy
import json
import textwrap

import pytest
from typer.testing import CliRunner

from placer import actuate as A
from placer.cli import app
from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret
from placer.inputs.manifests import Document, classify, group
from placer.kube import Kube, RetryPolicy
from placer.model.errors import InputError, Invalid
from placer.model.workload import Phase, WorkloadRef
from tests.kubeapi.builders import bound_pod, gpu_node

FAST = RetryPolicy(attempts=3, base=0.001, cap=0.002)
JOBSET = "jobset.x-k8s.io/v1alpha2"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def pytorchjob(name="ddp", ns="vision", suspend=None, workers=1, gpus=4) -> dict:
    def replica(n):
        return {"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [
            {"name": "pytorch", "image": "pt:1", "resources": {"requests": {"cpu": "8", "memory": "32Gi",
                                                                            "nvidia.com/gpu": gpus}}}]}}}
    spec = {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}}
    if suspend is not None:
        spec["runPolicy"] = {"suspend": suspend}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def live_copy(obj: dict) -> dict:
    """`obj` as a server returns it: with server-set metadata and status."""
    out = copy.deepcopy(obj)
    out["metadata"].update({"uid": "u-1", "resourceVersion": "42", "generation": 3,
                            "creationTimestamp": "2025-01-01T00:00:00Z",
                            "managedFields": [{"manager": "kubectl"}], "selfLink": "/x",
                            "ownerReferences": [{"kind": "Thing", "name": "t", "uid": "u-0"}],
                            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}",
                                            "keep": "me"}})
    out["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    return out


def one_group(catalog, *objs, source="f.yaml"):
    docs = [Document(o, source, i + 1) for i, o in enumerate(objs)]
    (g,) = group(classify(docs, catalog))
    return g


# --- pure: copies ------------------------------------------------------------------------------

def test_prepare_objects_strips_labels_patches_and_namespaces(catalog):
    job = live_copy(pytorchjob(suspend=True))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}}
    g = one_group(catalog, job, cm)
    entry = {"name": "east", "context": "east", "podTemplatePatch": {"schedulerName": "kai-scheduler",
                                                  "labels": {"kai.scheduler/queue": "research"},
                                                  "tolerations": [{"key": "gpu", "operator": "Exists"}]},
             "objectPatch": {"labels": {"kai.scheduler/queue": "research"}}}
    cm_out, job_out = A.prepare_objects(g, entry, catalog, plan_id="p9",
                                        origin=lambda o: f"hub/x/{o['kind']}/{o['metadata']['name']}")
    meta = job_out["metadata"]
    for f in A.SERVER_FIELDS:
        assert f not in meta
    assert "status" not in job_out
    assert meta["annotations"]["keep"] == "me"
    assert "kubectl.kubernetes.io/last-applied-configuration" not in meta["annotations"]
    assert meta["labels"] == {"kai.scheduler/queue": "research", A.MANAGED: "true",
                              A.GROUP: A.label_value("f.yaml"), A.PLACED_CLUSTER: "east",
                              A.WORKLOAD: A.workload_label("vision/PyTorchJob.kubeflow.org/ddp")}
    assert meta["annotations"][A.ORIGIN] == "hub/x/PyTorchJob/ddp"
    assert meta["annotations"][A.PLAN] == "p9" and meta["annotations"][A.PLACED_CLUSTER] == "east"
    assert job_out["spec"]["runPolicy"]["suspend"] is False            # un-suspended at its path
    for role in ("Master", "Worker"):
        pod = job_out["spec"]["pytorchReplicaSpecs"][role]["template"]
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
        assert pod["metadata"]["labels"] == {"kai.scheduler/queue": "research",
                                             A.WORKLOAD: A.workload_label("vision/PyTorchJob.kubeflow.org/ddp")}
    # the companion lands in the group's namespace, with the group label but no workload label
    assert cm_out["metadata"]["namespace"] == "vision"
    assert A.WORKLOAD not in cm_out["metadata"]["labels"] and cm_out["metadata"]["labels"][A.MANAGED] == "true"
    # the source objects are untouched
    assert g.workloads[0].obj["spec"]["runPolicy"]["suspend"] is True and "uid" in g.workloads[0].obj["metadata"]


def test_origin_defaults_to_the_source_file(catalog):
    g = one_group(catalog, pytorchjob(), source="jobs/train.yaml")
    (obj,) = A.prepare_objects(g, {"name": "east", "context": "east"}, catalog, plan_id="p")
    assert obj["metadata"]["annotations"][A.ORIGIN] == "jobs/train.yaml"


@pytest.mark.parametrize("mode, suspend, expect", [
    ("unsuspend", True, False), ("unsuspend", False, False), ("unsuspend", None, "absent"),
    ("omit", True, "absent"), ("omit", False, "absent"), ("keep", True, True)])
def test_suspend_modes_at_the_definitions_path(catalog, mode, suspend, expect):
    out = A.set_suspend(pytorchjob(suspend=suspend), catalog, mode)
    run_policy = out["spec"].get("runPolicy") or {}
    assert run_policy.get("suspend", "absent") == expect


def test_bad_suspend_mode_is_input_error(catalog):
    with pytest.raises(InputError, match="suspend: .*got 'later'"):
        A.handoff_of({"name": "east", "context": "east", "suspend": "later"})


def test_handoff_reads_clusters_file_models():
    from placer.inputs.clusters_file import parse_clusters
    f = parse_clusters({"clusters": [{"name": "east", "context": "east",
                                      "podTemplatePatch": {"schedulerName": "kai-scheduler"},
                                      "objectPatch": {"labels": {"kueue.x-k8s.io/queue-name": "q"}},
                                      "suspend": "omit"}]}, "c.yaml")
    h = A.handoff_of(f.clusters[0])
    assert h.pod_template_patch == {"schedulerName": "kai-scheduler"}
    assert h.object_labels == {"kueue.x-k8s.io/queue-name": "q"} and h.suspend == "omit"


def test_planning_view_interprets_suspended_workloads_unsuspended_and_keeps_policy(catalog):
    import dataclasses
    g = one_group(catalog, pytorchjob(suspend=True))
    w = dataclasses.replace(g.workloads[0], annotations={"placer.dev/cluster": "east"})
    view = A.planning_view(dataclasses.replace(g, workloads=(w,)), catalog)
    assert view.workloads[0].suspended is False and view.workloads[0].annotations == {"placer.dev/cluster": "east"}
    assert view.workloads[0].gpus == 8


# --- pure: promised capacity -----------------------------------------------------------------

def pt_pod(job, role, i, node, phase="Running", ns="vision", gpus=4):
    labels = {"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": role.lower(),
              "training.kubeflow.org/replica-index": str(i)}
    return bound_pod(f"{job}-{role.lower()}-{i}", node, gpus=gpus, cpu="8", memory="32Gi", namespace=ns,
                     labels=labels, phase=phase)


def test_outstanding_subtracts_bound_pods_per_instance(catalog):
    w = interpret(pytorchjob(workers=3), catalog)
    assert w.pods == 4 and w.gpus == 16
    pods = [pt_pod("ddp", "Master", 0, "n1"), pt_pod("ddp", "Worker", 0, "n1"),
            pt_pod("ddp", "Worker", 1, None, phase="Pending"),            # not bound: still promised
            pt_pod("ddp", "Worker", 2, "n2", ns="other")]                  # another namespace
    rest = A.outstanding(w, pods)
    assert {i.component + "/" + i.instance: i.pods for i in rest.instances} == {"replica/Worker": 2}
    assert rest.gpus == 8 and rest.gangs == ()
    all_bound = pods[:2] + [pt_pod("ddp", "Worker", i, "n2") for i in (1, 2)]
    assert A.outstanding(w, all_bound) is None


def test_finished_workloads_promise_nothing(catalog):
    obj = pytorchjob()
    obj["status"] = {"conditions": [{"type": "Succeeded", "status": "True", "reason": "Done"}]}
    w = interpret(obj, catalog)
    assert w.phase is Phase.COMPLETED and A.outstanding(w, []) is None


def test_promised_and_reserved_from_placed_refs(catalog):
    a = A.prepare_objects(one_group(catalog, pytorchjob("a", workers=1)), {"name": "east", "context": "east"}, catalog, plan_id="p")[0]
    b = A.prepare_objects(one_group(catalog, pytorchjob("b", workers=2, gpus=2)), {"name": "west", "context": "west"}, catalog,
                          plan_id="p")[0]
    placed = A.index_placed({"east": [a], "west": [b]})
    pods = {"east": [pt_pod("a", "Master", 0, "n1")], "west": []}
    promises = A.promised(placed, pods, catalog)
    assert [(g.workloads[0].name, c, g.gpus) for g, c in promises] == [("a", "east", 4), ("b", "west", 6)]
    reserved = A.reserved_by_cluster(promises)
    assert reserved["east"]["nvidia.com/gpu"] == 4 and reserved["west"]["nvidia.com/gpu"] == 6


def test_index_placed_reports_duplicates_keeping_the_first_cluster(catalog):
    obj = A.prepare_objects(one_group(catalog, pytorchjob()), {"name": "east", "context": "east"}, catalog, plan_id="p")[0]
    placed = A.index_placed({"west": [obj], "east": [obj]}, order=["east", "west"])
    assert placed[WorkloadRef.parse("vision/PyTorchJob.kubeflow.org/ddp")].cluster == "east"
    assert [r.cluster for r in placed.duplicates[WorkloadRef.parse("vision/PyTorchJob.kubeflow.org/ddp")]] == ["east", "west"]


# --- I/O against the harness -------------------------------------------------------------------

ENTRIES = [{"name": "alpha", "context": "alpha"}, {"name": "beta", "context": "beta"}]


def kube_for(fleet) -> Kube:
    return Kube(str(fleet.kubeconfig), retry=FAST, sleep=lambda s: None, connect_timeout=1.0)


def test_find_placed_reads_every_cluster_and_reports_the_unreachable(make_fleet, catalog):
    fleet = make_fleet(("alpha", "beta", "gamma"))
    entries = ENTRIES + [{"name": "gamma", "context": "gamma"}, {"name": "sim", "nodes": []}]
    kube = kube_for(fleet)
    try:
        for name, job in (("alpha", "a"), ("beta", "b")):
            objs = A.prepare_objects(one_group(catalog, pytorchjob(job)), {"name": name, "context": name}, catalog,
                                     plan_id="p")
            A.apply_group(kube.client(name, cluster=name), objs, group_key=job)
        # an unmanaged PyTorchJob is not placer's
        fleet["alpha"].seed([pytorchjob("mine")])
        fleet["gamma"].down()
        placed = A.find_placed(kube, entries, catalog)
    finally:
        kube.close()
    assert {str(k): r.cluster for k, r in placed.items()} == {"vision/PyTorchJob.kubeflow.org/a": "alpha",
                                                             "vision/PyTorchJob.kubeflow.org/b": "beta"}
    assert placed[WorkloadRef.parse("vision/PyTorchJob.kubeflow.org/a")].plan == "p"
    assert placed.unreachable == {"gamma": "unreachable (connection refused)"}
    # one labelled list per served catalog kind, all namespaces
    lists = [r for r in fleet["alpha"].requests.entries if r.verb == "list" and r.resource != "nodes"]
    assert lists and all(r.query.get("labelSelector") == A.MANAGED_SELECTOR for r in lists)


def test_apply_group_rollback_keeps_objects_that_existed_before(fresh_fleet, catalog):
    kube = kube_for(fresh_fleet)
    client = kube.client("alpha", cluster="alpha")
    cm = lambda n: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": {"k": "v"}}
    g = one_group(catalog, cm("old"), pytorchjob())
    first = A.apply_group(client, A.prepare_objects(g, {"name": "alpha", "context": "alpha"}, catalog, plan_id="p1"), group_key=g.key)
    assert [a.created for a in first] == [True, True]
    g2 = one_group(catalog, cm("old"), cm("new"), cm("Bad_Name"), pytorchjob())
    with pytest.raises(Invalid) as e:
        A.apply_group(client, A.prepare_objects(g2, {"name": "alpha", "context": "alpha"}, catalog, plan_id="p2"), group_key=g2.key)
    kube.close()
    assert e.value.cluster == "alpha" and "Bad_Name" in str(e.value) and "removed the 1 object" in str(e.value)
    names = {o["metadata"]["name"] for o in fresh_fleet["alpha"].objects("v1", "ConfigMap", "vision")}
    assert names == {"old"}                                   # updated one kept, new one removed
    assert fresh_fleet["alpha"].get("v1", "ConfigMap", "old", "vision")["metadata"]["annotations"][A.PLAN] == "p2"
    assert len(fresh_fleet["alpha"].objects("kubeflow.org/v1", "PyTorchJob", "vision")) == 1


def test_placer_clusters_shows_reserved_capacity(fresh_fleet, catalog, tmp_path):
    fresh_fleet["alpha"].seed([gpu_node("a0"), gpu_node("a1")])
    fresh_fleet["beta"].seed([gpu_node("b0")])
    kube = kube_for(fresh_fleet)
    objs = A.prepare_objects(one_group(catalog, pytorchjob(workers=2)), {"name": "alpha", "context": "alpha"}, catalog, plan_id="p")
    A.apply_group(kube.client("alpha", cluster="alpha"), objs, group_key="g")
    kube.close()
    fresh_fleet["alpha"].seed([pt_pod("ddp", "Master", 0, "a0")])
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(textwrap.dedent("""\
        clusters:
        - {name: alpha, context: alpha}
        - {name: beta, context: beta}
        """))
    res = CliRunner().invoke(app, ["clusters", "--clusters", str(clusters), "--kubeconfig",
                                   str(fresh_fleet.kubeconfig), "-o", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)["clusters"]}
    # 3 pods x 4 GPUs placed; the master is bound (its 4 GPUs are used), 8 still promised
    assert rows["alpha"]["gpus"] == {"allocatable": 16, "free": 12, "largestFreeBlock": 8, "reserved": 8}
    assert rows["beta"]["gpus"]["reserved"] == 0


def test_apply_group_asks_about_a_namespace_it_knows_once(fresh_fleet, catalog):
    """Issue 24 (the daemon's burst): with the namespaces known on the cluster, the second
    group in a namespace costs no namespace GET; the first still ensures it."""
    kube = kube_for(fresh_fleet)
    client = kube.client("alpha", cluster="alpha")
    known = A.Namespaces()
    for name in ("one", "two", "three"):
        objs = A.prepare_objects(one_group(catalog, pytorchjob(name)), {"name": "alpha", "context": "alpha"}, catalog,
                                 plan_id="p")
        A.apply_group(client, objs, group_key=name, namespaces=known)
    kube.close()
    assert "vision" in known
    assert fresh_fleet["alpha"].requests.count(verb="get", resource="namespaces") == 1
    assert fresh_fleet["alpha"].get("v1", "Namespace", "vision")["metadata"]["labels"][A.MANAGED] == "true"
    assert len(fresh_fleet["alpha"].objects("kubeflow.org/v1", "PyTorchJob", "vision")) == 3


def test_apply_group_creates_a_known_namespace_again_when_the_apply_says_it_is_gone(fresh_fleet, catalog):
    """A namespace remembered but deleted since: the apply's 404 makes it ensured again
    and the apply tried once more, as a call without memory would have done: the group is
    placed (a 404 would otherwise count as the cluster refusing the workload)."""
    kube = kube_for(fresh_fleet)
    client = kube.client("alpha", cluster="alpha")
    known = A.Namespaces()
    known.add("vision")                                   # stale: the server has no such namespace
    fresh_fleet["alpha"].faults.fail(404, count=2, match="/pytorchjobs/ddp")   # the ownership GET, the apply
    objs = A.prepare_objects(one_group(catalog, pytorchjob()), {"name": "alpha", "context": "alpha"}, catalog,
                             plan_id="p")
    [applied] = A.apply_group(client, objs, group_key="g", namespaces=known)
    kube.close()
    assert applied.created and "vision" in known
    assert fresh_fleet["alpha"].get("v1", "Namespace", "vision")["metadata"]["labels"][A.MANAGED] == "true"
    assert fresh_fleet["alpha"].get("kubeflow.org/v1", "PyTorchJob", "ddp", "vision")
