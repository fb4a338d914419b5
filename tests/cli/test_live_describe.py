"""Live describe: objects and operator-style pods (labels per FACTS.md) created in the test API
server as the operators would, read back through placer.ops.describe and `placer describe KIND/NAME`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from placer.cli import app
from placer.definitions.catalog import load_catalog
from placer.kube import Kube
from placer.model.errors import InputError, NotFound
from placer.ops.describe import describe_live, parse_ref
from tests.kubeapi import bound_pod, gpu_node


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def container(gpus, cpu="8", memory="64Gi"):
    res = {"cpu": cpu, "memory": memory}
    if gpus:
        res["nvidia.com/gpu"] = gpus
    return {"name": "main", "image": "registry.example/ai:1", "resources": {"requests": res, "limits": res}}


def template(gpus, **labels):
    return {"metadata": {"labels": labels} if labels else {}, "spec": {"containers": [container(gpus)]}}


def put(client, obj, status=None):
    res = client.resource_for(obj["apiVersion"], obj["kind"])
    client.create(res, obj)
    if status is not None:
        client.patch_status(res, obj["metadata"]["name"], status, obj["metadata"]["namespace"])


def pods(client, ns, specs):
    """Create pods as an operator would: (name, node or None, gpus, labels, phase)."""
    for name, node, gpus, labels, phase in specs:
        client.create("pods", bound_pod(name, node, gpus=gpus, namespace=ns, labels=labels))
        if phase != "Pending":
            client.patch_status("pods", name, {"phase": phase}, ns)


@pytest.fixture
def alpha(kube_fleet):
    kube = Kube(str(kube_fleet.kubeconfig))
    kube_fleet["alpha"].seed([gpu_node(f"gpu-{i}") for i in range(4)])
    return kube, kube.client("alpha")


def by_key(pods_by_component):
    return {k: [(p.name, p.node, p.phase) for p in v] for k, v in pods_by_component.items()}


def test_jobset(alpha, kube_ns, catalog):
    kube, client = alpha
    put(client, {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                 "metadata": {"name": "train", "namespace": kube_ns},
                 "spec": {"replicatedJobs": [
                     {"name": "driver", "replicas": 1, "template": {"spec": {"template": template(0)}}},
                     {"name": "trainer", "replicas": 2, "template": {"spec": {
                         "parallelism": 2, "completions": 2, "template": template(2)}}}]}},
        status={"replicatedJobsStatus": [{"name": "driver", "ready": 1}, {"name": "trainer", "ready": 1, "active": 1}]})

    def js(rjob, job, idx):
        return {"jobset.sigs.k8s.io/jobset-name": "train", "jobset.sigs.k8s.io/replicatedjob-name": rjob,
                "jobset.sigs.k8s.io/job-index": str(job), "batch.kubernetes.io/job-name": f"train-{rjob}-{job}",
                "batch.kubernetes.io/job-completion-index": str(idx)}
    pods(client, kube_ns, [
        ("train-driver-0-0-aaaaa", "gpu-0", 0, js("driver", 0, 0), "Running"),
        ("train-trainer-0-0-bbbbb", "gpu-1", 2, js("trainer", 0, 0), "Running"),
        ("train-trainer-0-1-ccccc", "gpu-1", 2, js("trainer", 0, 1), "Running"),
        ("train-trainer-1-0-ddddd", None, 2, js("trainer", 1, 0), "Pending"),
        # another JobSet's pod with the same role name is not ours
        ("other-trainer-0-0-eeeee", "gpu-2", 2, {**js("trainer", 0, 0), "jobset.sigs.k8s.io/jobset-name": "other"},
         "Running"),
    ])
    w, found = describe_live("jobset/train", kube_ns, "alpha", None, catalog, kube=kube)
    assert (w.kind, w.name, w.pods, w.gpus) == ("JobSet", "train", 5, 8)
    assert (w.phase.value, w.reason) == ("Initializing", "JobsStarting")
    assert by_key(found) == {
        "replicatedJob/driver": [("train-driver-0-0-aaaaa", "gpu-0", "Running")],
        "replicatedJob/trainer": [("train-trainer-0-0-bbbbb", "gpu-1", "Running"),
                                  ("train-trainer-0-1-ccccc", "gpu-1", "Running"),
                                  ("train-trainer-1-0-ddddd", None, "Pending")]}


def test_raycluster(alpha, kube_ns, catalog):
    kube, client = alpha
    put(client, {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "emb", "namespace": kube_ns},
                 "spec": {"headGroupSpec": {"rayStartParams": {}, "template": template(0)},
                          "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 0,
                                                "maxReplicas": 4, "rayStartParams": {}, "template": template(1)}]}},
        status={"conditions": [{"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady"}],
                "readyWorkerReplicas": 2, "minWorkerReplicas": 0, "desiredWorkerReplicas": 2})
    common = {"app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator",
              "ray.io/is-ray-node": "yes", "ray.io/cluster": "emb"}
    pods(client, kube_ns, [
        ("emb-head-x1", "gpu-0", 0, {**common, "ray.io/node-type": "head", "ray.io/group": "headgroup",
                                     "ray.io/identifier": "emb-head"}, "Running"),
        ("emb-gpu-worker-a", "gpu-1", 1, {**common, "ray.io/node-type": "worker", "ray.io/group": "gpu",
                                          "ray.io/identifier": "emb-worker"}, "Running"),
        ("emb-gpu-worker-b", "gpu-2", 1, {**common, "ray.io/node-type": "worker", "ray.io/group": "gpu",
                                          "ray.io/identifier": "emb-worker"}, "Running"),
    ])
    w, found = describe_live("raycluster.ray.io/emb", kube_ns, "alpha", None, catalog, kube=kube)
    assert (w.pods, w.gpus, w.phase.value) == (3, 2, "Running")
    found = by_key(found)
    head = next(k for k in found if k.startswith("head/"))
    assert found[head] == [("emb-head-x1", "gpu-0", "Running")]
    assert found["workerGroup/gpu"] == [("emb-gpu-worker-a", "gpu-1", "Running"),
                                        ("emb-gpu-worker-b", "gpu-2", "Running")]


def test_leaderworkerset_leader_pods_are_not_counted_as_workers(alpha, kube_ns, catalog):
    kube, client = alpha
    put(client, {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                 "metadata": {"name": "llm", "namespace": kube_ns},
                 "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": template(4)}}},
        status={"conditions": [{"type": "Available", "status": "True", "reason": "AllGroupsReady",
                                "message": "All replicas are ready"}], "readyReplicas": 2})
    pods_ = []
    for g in range(2):
        for w in range(2):
            name = f"llm-{g}" if w == 0 else f"llm-{g}-{w}"
            pods_.append((name, f"gpu-{g}", 4, {"leaderworkerset.sigs.k8s.io/name": "llm",
                                                "leaderworkerset.sigs.k8s.io/group-index": str(g),
                                                "leaderworkerset.sigs.k8s.io/worker-index": str(w),
                                                "leaderworkerset.sigs.k8s.io/group-key": f"key{g}"}, "Running"))
    pods(client, kube_ns, pods_)
    w, found = describe_live("lws/llm", kube_ns, "alpha", None, catalog, kube=kube)
    assert (w.pods, w.gpus, w.phase.value, w.reason) == (4, 16, "Running", "AllGroupsReady")
    found = by_key(found)
    leader = next(k for k in found if k.startswith("leader/"))
    worker = next(k for k in found if k.startswith("worker/"))
    assert [p[0] for p in found[leader]] == ["llm-0", "llm-1"]
    assert [p[0] for p in found[worker]] == ["llm-0-1", "llm-1-1"]


def test_pytorchjob_through_the_cli_json_and_table(alpha, kube_fleet, kube_ns):
    kube, client = alpha
    put(client, {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "ddp", "namespace": kube_ns},
                 "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template(1)},
                                                  "Worker": {"replicas": 2, "template": template(1)}}}},
        status={"conditions": [{"type": "Created", "status": "True", "reason": "PyTorchJobCreated"},
                               {"type": "Running", "status": "True", "reason": "PyTorchJobRunning",
                                "message": "job is running"}]})

    def tk(rt, i):
        labels = {"training.kubeflow.org/job-name": "ddp", "training.kubeflow.org/operator-name": "pytorchjob-controller",
                  "training.kubeflow.org/replica-type": rt, "training.kubeflow.org/replica-index": str(i)}
        return {**labels, "training.kubeflow.org/job-role": "master"} if rt == "master" else labels
    pods(client, kube_ns, [("ddp-master-0", "gpu-3", 1, tk("master", 0), "Running"),
                           ("ddp-worker-0", "gpu-3", 1, tk("worker", 0), "Running"),
                           ("ddp-worker-1", "gpu-2", 1, tk("worker", 1), "Failed")])
    args = ["describe", "pytorchjob/ddp", "-n", kube_ns, "--context", "alpha",
            "--kubeconfig", str(kube_fleet.kubeconfig)]
    res = CliRunner().invoke(app, args + ["-o", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    doc = doc[0] if isinstance(doc, list) else doc
    assert (doc["kind"], doc["phase"], doc["reason"], doc["gpus"]) == ("PyTorchJob", "Running", "PyTorchJobRunning", 3)
    assert doc["podsByComponent"] == {
        "replica/Master": [{"name": "ddp-master-0", "node": "gpu-3", "phase": "Running"}],
        "replica/Worker": [{"name": "ddp-worker-0", "node": "gpu-3", "phase": "Running"},
                           {"name": "ddp-worker-1", "node": "gpu-2", "phase": "Failed"}]}

    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "PyTorchJobRunning" in res.stdout and "gpus=3" in res.stdout
    assert "ddp-worker-1" in res.stdout and "node=gpu-2" in res.stdout and "Failed" in res.stdout


def test_errors(alpha, kube_fleet, kube_ns, catalog):
    kube, _ = alpha
    with pytest.raises(NotFound) as e:
        describe_live("jobset/missing", kube_ns, "alpha", None, catalog, kube=kube)
    assert e.value.cluster == "alpha" and "missing" in str(e.value)
    with pytest.raises(NotFound, match="resource type"):
        describe_live("gizmo/x", kube_ns, "alpha", None, catalog, kube=kube)
    with pytest.raises(InputError):
        parse_ref("jobset")
    res = CliRunner().invoke(app, ["describe", "jobset/missing", "-n", kube_ns, "--context", "alpha",
                                   "--kubeconfig", str(kube_fleet.kubeconfig)])
    assert res.exit_code == 1 and "alpha" in res.stderr and "not found" in res.stderr
    assert "Traceback" not in res.output


def test_pending_pods_show_the_schedulers_reason(alpha, kube_fleet, kube_ns, catalog):
    """Issue 25, item 8: live describe shows each pending pod's PodScheduled=False message, as
    the kube-scheduler writes it, in JSON and in the tree."""
    kube, client = alpha
    put(client, {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": kube_ns},
                 "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                          "template": template(1, app="db")}})
    pods(client, kube_ns, [("db-0", "gpu-0", 1, {"app": "db"}, "Running"), ("db-1", None, 1, {"app": "db"}, "Pending")])
    unbound = ("0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/4 nodes "
               "are available: 4 Preemption is not helpful for scheduling.")
    client.patch_status("pods", "db-1", {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unbound}]}, kube_ns)
    _, found = describe_live("statefulset/db", kube_ns, "alpha", None, catalog, kube=kube)
    got = {p.name: p.scheduling for refs in found.values() for p in refs}
    assert got == {"db-0": None, "db-1": f"Unschedulable: {unbound}"}
    r = CliRunner().invoke(app, ["describe", "statefulset/db", "-n", kube_ns, "--kubeconfig", str(kube_fleet.kubeconfig),
                                 "--context", "alpha", "-o", "json"])
    assert r.exit_code == 0, r.output
    listed = [p for refs in json.loads(r.stdout)[0]["podsByComponent"].values() for p in refs]
    assert {p["name"]: p.get("scheduling") for p in listed} == {"db-0": None, "db-1": f"Unschedulable: {unbound}"}
    tree = CliRunner().invoke(app, ["describe", "statefulset/db", "-n", kube_ns, "--kubeconfig",
                                    str(kube_fleet.kubeconfig), "--context", "alpha"], terminal_width=400)
    assert tree.exit_code == 0, tree.output
    line = next(x for x in tree.stdout.splitlines() if "db-1" in x)
    assert "node=-" in line and "Pending" in line and "unbound immediate PersistentVolumeClaims" in line
