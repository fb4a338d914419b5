"""An MPIJob (kubeflow.org/v2beta1: launcher + workers) through `placer submit` onto clusters running
the real MPI operator (github.com/kubeflow/mpi-operator, pinned in hack/operators-release, its CRD
from the same module; the operator has no webhooks, the CRD's schema validates) and KWOK kubelets:
the launcher pod (through the batch Job the operator creates) and the worker pods are the ones placer
predicts, bound on the cluster placer chose, and placer's phase follows the real status from Pending
to Running to Completed when KWOK completes the launcher."""
from __future__ import annotations

import pytest

from tests.realkube.operators import COMPLETE, NAMES, describe_file, kubeflow_job_completes, matches_describe, submit

pytestmark = pytest.mark.kube

JOB_NAME = "training.kubeflow.org/job-name"
JOB_ROLE = "training.kubeflow.org/job-role"


def mpijob(name: str, ns: str, *, workers: int, run_for: str) -> dict:
    """The launcher completes `run_for` after it runs; the workers (sshd in real life) run until
    the operator is done with them."""
    def spec(container: str, requests: dict) -> dict:
        limits = {"nvidia.com/gpu": requests["nvidia.com/gpu"]} if "nvidia.com/gpu" in requests else {}
        return {"containers": [{"name": container, "image": "mpioperator/mpi-pi:openmpi",
                                "resources": {"requests": requests, "limits": limits}}]}
    launcher = {"replicas": 1, "template": {"metadata": {"annotations": {COMPLETE: run_for}},
                                            "spec": spec("launcher", {"cpu": "1", "memory": "1Gi"})}}
    worker = {"replicas": workers,
              "template": {"spec": spec("worker", {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "4"})}}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "namespace": ns},
            "spec": {"slotsPerWorker": 4, "mpiReplicaSpecs": {"Launcher": launcher, "Worker": worker}}}


def test_mpijob_runs_on_the_real_operator_from_pending_to_completed(ops, tmp_path):
    ops.nodes("east", count=2, prefix="e-", gpus=8, kwok=True)
    ops.nodes("west", count=1, prefix="w-", gpus=4, kwok=True)       # too small: placer picks east
    ns = ops.unique("mpi")
    for name in NAMES:
        ops.namespace(name, ns)
    obj = mpijob("pi", ns, workers=3, run_for="15s")
    predicted = describe_file(tmp_path, obj)
    assert predicted["phase"] == "Pending" and predicted["pods"] == 4 and predicted["gpus"] == 12

    (placement,) = submit(ops.kubeconfig, tmp_path, obj)["placements"]
    assert placement["cluster"] == "east"
    created = ops.client("east").get("mpijobs", "pi", ns)
    assert created["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 3

    # the operator's pods: a launcher (through its Job) and 3 workers, all bound on east
    pods = ops.wait_bound("east", ns, 4, f"{JOB_NAME}=pi", timeout=120)
    assert len(pods) == 4
    assert {p["spec"]["nodeName"] for p in pods} <= {"e-0", "e-1"}
    assert ops.pods("west", ns) == []
    roles = {p["metadata"]["name"]: p["metadata"]["labels"][JOB_ROLE] for p in pods}
    assert sorted(roles.values()) == ["launcher", "worker", "worker", "worker"]
    owners = {p["metadata"]["labels"][JOB_ROLE]: p["metadata"]["ownerReferences"][0]["kind"] for p in pods}
    assert owners == {"launcher": "Job", "worker": "MPIJob"}
    matches_describe(predicted, lambda sel: ops.pods("east", ns, sel))

    # KWOK runs them; the operator reports Running, then Succeeded when the launcher completes
    kubeflow_job_completes(ops, tmp_path, ns, "mpijob", "pi")
