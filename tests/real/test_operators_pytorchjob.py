"""A PyTorchJob (Master + Workers) through `placer submit` onto clusters running the real Kubeflow
training operator (github.com/kubeflow/training-operator, pinned in hack/operators-release, its CRDs
and validating webhook from the same module) and KWOK kubelets: the webhook admits placer's object
(and rejects a broken one), the pods the operator creates are the ones placer predicts, init
container it injects into the workers included, bound on the cluster placer chose, and placer's
phase follows the real status from Pending to Completed."""
from __future__ import annotations

import pytest
import yaml

from tests.realkube.operators import COMPLETE, NAMES, describe_file, kubeflow_job_completes, matches_describe, submit

pytestmark = pytest.mark.kube

JOB_NAME = "training.kubeflow.org/job-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"


def replica(replicas: int, gpus: int, run_for: str, container: str = "pytorch") -> dict:
    """No memory request: the init container the operator injects into workers (10Mi) is then
    what the scheduler counts for their memory."""
    spec = {"restartPolicy": "Never", "containers": [
        {"name": container, "image": "registry.example/train:1",
         "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]}
    return {"replicas": replicas, "restartPolicy": "Never",
            "template": {"metadata": {"annotations": {COMPLETE: run_for}}, "spec": spec}}


def pytorchjob(name: str, ns: str, *, workers: int, run_for: str, container: str = "pytorch") -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": ns},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(1, 4, run_for, container),
                                              "Worker": replica(workers, 4, run_for, container)}}}


def test_pytorchjob_runs_on_the_real_operator_from_pending_to_completed(ops, tmp_path):
    ops.nodes("east", count=2, prefix="e-", gpus=8, kwok=True)
    ops.nodes("west", count=1, prefix="w-", gpus=8, kwok=True)       # too small: placer picks east
    ns = ops.unique("torch")
    for name in NAMES:
        ops.namespace(name, ns)

    # the real validating webhook is called: a job without a `pytorch` container is refused
    bad = pytorchjob("bad", ns, workers=1, run_for="1s", container="trainer")
    refused = ops.kubectl("--context", "east", "create", "-f", "-", check=False, input=yaml.safe_dump(bad))
    assert refused.returncode != 0
    assert "validator.pytorchjob.training-operator.kubeflow.org" in refused.stderr, refused.stderr

    obj = pytorchjob("pt", ns, workers=3, run_for="10s")
    predicted = describe_file(tmp_path, obj)
    assert predicted["phase"] == "Pending" and predicted["pods"] == 4 and predicted["gpus"] == 16

    (placement,) = submit(ops.kubeconfig, tmp_path, obj)["placements"]
    assert placement["cluster"] == "east"
    assert ops.client("east").get("pytorchjobs", "pt", ns)["metadata"]["name"] == "pt"

    # the operator's pods: 1 master + 3 workers, each the template's requests (workers with the
    # init container it injects), all bound on east
    pods = ops.wait_bound("east", ns, 4, f"{JOB_NAME}=pt", timeout=120)
    assert len(pods) == 4
    assert {p["spec"]["nodeName"] for p in pods} <= {"e-0", "e-1"}
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob" for p in pods)
    assert ops.pods("west", ns) == []
    assert sorted(p["metadata"]["labels"][REPLICA_TYPE] for p in pods) == ["master", "worker", "worker", "worker"]
    workers = [p for p in pods if p["metadata"]["labels"][REPLICA_TYPE] == "worker"]
    assert all([c["name"] for c in p["spec"].get("initContainers") or ()] == ["init-pytorch"] for p in workers)
    matches_describe(predicted, lambda sel: ops.pods("east", ns, sel))

    # KWOK runs them, then completes them; placer's phase follows the real PyTorchJob status
    kubeflow_job_completes(ops, tmp_path, ns, "pytorchjob", "pt")
