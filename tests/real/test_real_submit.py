"""`placer submit` onto real control planes (hack/kube-env): the real kube-controller-manager makes
the pods, the real kube-scheduler binds them. What placer places gets bound; what placer leaves
unplaced for fragmentation stays unschedulable when forced there, for the scheduler's own reason.
Also server-side apply, idempotent resubmit and all-or-nothing rollback as the real apiserver does them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from placer import actuate as A
from placer.cli import app
from tests.kubeenv import module_crds

pytestmark = pytest.mark.kube

JOB_PODS = "batch.kubernetes.io/job-name"


def job(name: str, ns: str, pods: int, gpus: int, annotations: dict | None = None) -> dict:
    """An Indexed Job running `pods` pods at once, `gpus` GPUs each (one rank per index)."""
    meta = {"name": name, "namespace": ns, **({"annotations": annotations} if annotations else {})}
    resources = {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                 "limits": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"completionMode": "Indexed", "completions": pods, "parallelism": pods, "backoffLimit": 0,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [
                         {"name": "train", "image": "registry.example/train:1", "resources": resources}]}}}}


def configmap(name: str, ns: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}}


def write(tmp_path: Path, name: str, *docs: dict) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return path


def clusters_file(real, tmp_path: Path) -> Path:
    path = tmp_path / "clusters.yaml"
    path.write_text(yaml.safe_dump({"clusters": [{"name": "east", "context": "east"},
                                                 {"name": "west", "context": "west"}]}))
    return path


def submit(real, tmp_path, *files: Path, extra=()) -> tuple[int, dict]:
    res = CliRunner().invoke(app, ["submit", "--kubeconfig", str(real.kubeconfig), "--clusters",
                                   str(clusters_file(real, tmp_path)), "-o", "json", "--time-limit", "5",
                                   *(a for f in files for a in ("-f", str(f))), *extra])
    try:
        return res.exit_code, json.loads(res.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"placer submit exit {res.exit_code}: {res.output}") from None


def filler(name: str, node: str, gpus: int) -> dict:
    """A pod already running on `node` (bound directly, as the scheduler would have)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [
                {"name": "c", "image": "registry.example/x:1", "resources": {
                    "requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]}}


@pytest.fixture
def fleet(real):
    """east: 3 free nodes with 4 GPUs each; west: 4 nodes with 4 GPUs each, each half used by a
    running pod (8 GPUs free in total, but no 4-GPU block on any node)."""
    real.nodes("east", count=3, prefix="e4", gpus=4)
    real.nodes("west", count=4, prefix="w4", gpus=4)
    busy = real.namespace("west", real.unique("busy"))
    for i in range(4):
        real.client("west").create("pods", filler(f"busy-{i}", f"w4-{i}", 2), busy)
    return real


def test_indexed_job_placed_by_placer_is_bound_by_the_real_scheduler(fleet, tmp_path):
    ns = fleet.unique("must-show")
    code, out = submit(fleet, tmp_path, write(tmp_path, "train.yaml", job("train", ns, pods=3, gpus=4)))
    assert code == 0, (out["unplaced"], out["reserved"], out["failed"])
    (placement,) = out["placements"]
    assert placement["cluster"] == "east"
    assert sorted(placement["nodes"]) == ["e4-0", "e4-1", "e4-2"]
    # the real Job controller makes the 3 pods, the real scheduler binds each to a node
    pods = fleet.wait_bound("east", ns, 3, f"{JOB_PODS}=train")
    assert len(pods) == 3
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["e4-0", "e4-1", "e4-2"]
    assert fleet.pods("west", ns) == []


def test_fragmented_workload_left_unplaced_stays_unschedulable_when_forced(fleet, tmp_path):
    ns = fleet.unique("fragmented")
    pinned = job("frag", ns, pods=2, gpus=4, annotations={"placer.dev/cluster": "west"})
    code, out = submit(fleet, tmp_path, write(tmp_path, "frag.yaml", pinned))
    assert code == 3, out
    unplaced = out["unplaced"]
    assert [u["workload"] for u in unplaced] == [f"{ns}/frag"]
    assert "largest free block is 2 GPUs" in unplaced[0]["reasons"]["west"], unplaced
    west = fleet.client("west")
    assert not [n for n in west.list("namespaces").items if n["metadata"]["name"] == ns]   # nothing created
    # forced there anyway: the real scheduler cannot bind it either, and says why
    fleet.namespace("west", ns)
    west.create("jobs", job("frag", ns, pods=2, gpus=4))
    stuck = fleet.wait_unschedulable("west", ns)
    message = next(c["message"] for c in stuck[0]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "Insufficient nvidia.com/gpu" in message, message
    assert all(not p["spec"].get("nodeName") for p in fleet.pods("west", ns))
    assert any("Insufficient nvidia.com/gpu" in e.get("message", "")
               for e in fleet.events("west", ns, "FailedScheduling"))


def test_server_side_apply_resubmit_and_rollback(fleet, tmp_path):
    ns = fleet.unique("ssa")
    path = write(tmp_path, "g.yaml", configmap("cfg", ns), job("train", ns, pods=2, gpus=4))
    code, out = submit(fleet, tmp_path, path)
    assert code == 0, out
    east = fleet.client("east")
    created = east.get("jobs", "train", ns)
    managers = {(m["manager"], m["operation"]) for m in created["metadata"]["managedFields"]}
    assert ("placer", "Apply") in managers                         # server-side apply, by the real server
    assert created["metadata"]["labels"][A.MANAGED] == "true"
    assert east.get("configmaps", "cfg", ns)["metadata"]["annotations"][A.PLACED_CLUSTER] == "east"
    fleet.wait_bound("east", ns, 2, f"{JOB_PODS}=train")
    def placer_write(obj):          # the Job controller writes status; placer's own apply must not recur
        return obj["metadata"]["generation"], [m["time"] for m in obj["metadata"]["managedFields"]
                                               if m["manager"] == "placer"]
    before = placer_write(east.get("jobs", "train", ns))
    # resubmit: already placed, nothing written
    code, again = submit(fleet, tmp_path, path)
    assert code == 0, again
    assert again["created"] == [] and [a["cluster"] for a in again["alreadyPlaced"]] == ["east"]
    assert placer_write(east.get("jobs", "train", ns)) == before
    # a group whose second object the real apiserver rejects (a ConfigMap data key it refuses;
    # placer checks names itself, not every field): nothing of the group is left behind
    rb = fleet.unique("rollback")
    rejected = {**configmap("rejected", rb), "data": {"not a valid key!": "v"}}
    bad = write(tmp_path, "bad.yaml", configmap("good-config", rb), rejected,
                job("broken", rb, pods=1, gpus=4))
    code, failed = submit(fleet, tmp_path, bad)
    assert code == 1, failed
    (f,) = failed["failed"]
    assert f["cluster"] == "east" and "rejected" in f["error"], f
    assert [c["metadata"]["name"] for c in east.list("configmaps", rb).items] in ([], ["kube-root-ca.crt"])
    assert not east.list("jobs", rb).items and not fleet.pods("east", rb)


def jobset(name: str, ns: str, pods: int, gpus: int) -> dict:
    resources = {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                 "limits": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": pods, "template": {"spec": {
                "parallelism": 1, "completions": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "train", "image": "registry.example/train:1", "resources": resources}]}}}}}]}}


def test_capacity_promised_to_a_workload_without_pods_yet_is_not_given_twice(fleet, tmp_path):
    crds = module_crds("jobset")       # sigs.k8s.io/jobset's own CRD, pinned in hack/operators-release
    for c in ("east", "west"):
        fleet.install_crds(c, crds)
    ns = fleet.unique("promised")
    # no JobSet controller runs: the JobSet placer creates has no pods, only a promise
    code, out = submit(fleet, tmp_path, write(tmp_path, "first.yaml", jobset("first", ns, pods=3, gpus=4)))
    assert code == 0 and [p["cluster"] for p in out["placements"]] == ["east"], out
    assert not fleet.pods("east", ns)
    # east looks empty to the inventory, but its 12 GPUs are promised: the next one does not fit there
    code, out = submit(fleet, tmp_path, write(tmp_path, "second.yaml", job("second", ns, pods=3, gpus=4)))
    assert code == 3, out
    assert out["reserved"]["east"]["nvidia.com/gpu"] == 12 and out["placements"] == []
    # once its pods exist (as the JobSet operator would make them, bound to the three nodes), they count
    # as used, not promised
    for i in range(3):
        fleet.client("east").create("pods", {**filler(f"first-workers-{i}-0", f"e4-{i}", 4),
                                             "metadata": {"name": f"first-workers-{i}-0", "labels": {
                                                 "jobset.sigs.k8s.io/jobset-name": "first",
                                                 "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                                                 "jobset.sigs.k8s.io/job-index": str(i)}}}, ns)
    code, out = submit(fleet, tmp_path, write(tmp_path, "second.yaml", job("second", ns, pods=3, gpus=4)))
    assert code == 3 and out["reserved"] == {}, out
