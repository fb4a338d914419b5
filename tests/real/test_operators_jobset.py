"""A JobSet through `placer submit` onto clusters running the real JobSet controller (sigs.k8s.io/jobset,
pinned in hack/operators-release, its CRD and webhooks from the same module) and KWOK kubelets: the
webhook admits placer's object, the controller's pods are the ones placer predicts, bound on the
cluster placer chose, and placer's phase follows the real status from Pending to Completed."""
from __future__ import annotations

import pytest

from tests.kubeenv import wait_for
from tests.realkube.operators import COMPLETE, NAMES, describe, describe_file, matches_describe, phase, submit

pytestmark = pytest.mark.kube

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"


def jobset(name: str, ns: str, *, replicas: int, pods: int, gpus: int, run_for: str) -> dict:
    """One replicatedJob of `replicas` Jobs, `pods` pods each; KWOK completes each pod `run_for`
    after it runs."""
    container = {"name": "trainer", "image": "registry.example/train:1",
                 "resources": {"requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": str(gpus)},
                               "limits": {"nvidia.com/gpu": str(gpus)}}}
    pod = {"metadata": {"annotations": {COMPLETE: run_for}},
           "spec": {"restartPolicy": "Never", "containers": [container]}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {"spec": {
                "parallelism": pods, "completions": pods, "backoffLimit": 0, "template": pod}}}]}}


def test_jobset_runs_on_the_real_controller_from_pending_to_completed(ops, tmp_path):
    ops.nodes("east", count=2, prefix="e-", gpus=8, kwok=True)
    ops.nodes("west", count=1, prefix="w-", gpus=8, kwok=True)       # too small: placer picks east
    ns = ops.unique("train")
    for name in NAMES:
        ops.namespace(name, ns)
    obj = jobset("train", ns, replicas=2, pods=2, gpus=4, run_for="8s")
    predicted = describe_file(tmp_path, obj)
    assert predicted["phase"] == "Pending" and predicted["pods"] == 4

    (placement,) = submit(ops.kubeconfig, tmp_path, obj)["placements"]
    assert placement["cluster"] == "east"
    # admitted by the real webhook, which defaults what placer left out
    created = ops.client("east").get("jobsets", "train", ns)
    assert created["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "Indexed"
    assert created["spec"]["network"]["enableDNSHostnames"] is True

    # the controller's pods: 2 Jobs x 2 pods, each with the template's requests, all bound on east
    selector = f"{JOBSET_NAME}=train,{RJOB_NAME}=workers"
    pods = ops.wait_bound("east", ns, 4, selector, timeout=120)
    assert len(pods) == 4
    assert {p["spec"]["nodeName"] for p in pods} <= {"e-0", "e-1"}
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "Job" for p in pods)
    assert ops.pods("west", ns) == []
    assert sorted(p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] for p in pods) == ["0", "0", "1", "1"]
    matches_describe(predicted, lambda sel: ops.pods("east", ns, sel))

    # KWOK runs them, then completes them; placer's phase follows the real JobSet status
    wait_for(lambda: all((p.get("status") or {}).get("phase") == "Running" and p["status"].get("podIP")
                         for p in ops.pods("east", ns, selector)) or None, 60, "pods Running")
    assert phase(ops.kubeconfig, tmp_path, "train") in ("Initializing", "Running")
    wait_for(lambda: phase(ops.kubeconfig, tmp_path, "train") in ("Running", "Completed") or None, 60,
             "placer says Running")
    wait_for(lambda: phase(ops.kubeconfig, tmp_path, "train") == "Completed" or None, 120, "placer says Completed")
    live = describe("jobset/train", "-n", ns, "--context", "east", "--kubeconfig", str(ops.kubeconfig))
    assert live["phase"] == "Completed"
    assert ops.client("east").get("jobsets", "train", ns)["status"].get("terminalState") == "Completed"
    assert all((p.get("status") or {}).get("phase") == "Succeeded" for p in ops.pods("east", ns, selector))
