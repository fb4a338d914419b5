"""Kueue MultiKueue as hack/kube-env sets it up for the peer comparison (benchmarks/peers.py): the real
Kueue (sigs.k8s.io/kueue, pinned in hack/operators-release, its CRDs and webhooks from the same
module) on a manager (the hub) and on one worker with KWOK nodes. A suspended Job labelled with the
queue on the manager is admitted there, dispatched, admitted again by the worker's Kueue with
Topology-Aware Scheduling and its pods run on the worker's nodes; a Job that fits the quotas but no
node stays unadmitted on the worker: the worker judges node by node."""
from __future__ import annotations

import pytest

from tests.kubeenv import kube_env, wait_for

pytestmark = pytest.mark.kube

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_NAME = "batch.kubernetes.io/job-name"
WORKLOADS = "workloads.kueue.x-k8s.io"


@pytest.fixture(scope="module")
def mk(tmp_path_factory):
    from tests import kubeenv as realkube

    realkube.require_binaries()
    env = realkube.RealKube(tmp_path_factory.mktemp("multikueue"), ("hub", "east"), operators="kueue", hub="hub")
    try:
        env.nodes("east", count=2, prefix="e-", gpus=8, cpu="32", memory="256Gi", kwok=True)
        env.ns = "train"
        out = kube_env("multikueue", "--dir", str(env.dir), "--manager", "hub", "--namespace", env.ns, "east")
        assert "east: ClusterQueue kube-env cpu=64 memory=549755813888 nvidia.com/gpu=16" in out, out
        yield env
    finally:
        env.down()


def job(name: str, ns: str, *, pods: int, gpus: int) -> dict:
    container = {"name": "trainer", "image": "registry.example/train:1",
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                               "limits": {"nvidia.com/gpu": str(gpus)}}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "kube-env"}},
            "spec": {"suspend": True, "parallelism": pods, "completions": pods, "backoffLimit": 0,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}}


def workload_of(env, context: str, ns: str, name: str) -> dict | None:
    for w in env.client(context).list(WORKLOADS, ns).items:
        if any(o.get("kind") == "Job" and o.get("name") == name for o in w["metadata"].get("ownerReferences") or ()):
            return w
    return None


def copy(env, local: dict) -> dict | None:
    """MultiKueue's copy of a manager's Workload on the worker (same name)."""
    found = env.client("east").list(WORKLOADS, local["metadata"]["namespace"]).items
    return next((w for w in found if w["metadata"]["name"] == local["metadata"]["name"]), None)


def condition(obj: dict | None, kind: str) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or () if c["type"] == kind), {})


def test_a_job_admitted_by_the_manager_runs_on_the_worker(mk):
    hub = mk.client("hub")
    hub.create("jobs", job("fits", mk.ns, pods=2, gpus=5))

    # the manager admits it: its quota and the MultiKueue admission check, which names the worker
    wl = wait_for(lambda: (w := workload_of(mk, "hub", mk.ns, "fits")) and
                  condition(w, "Admitted").get("status") == "True" and w, 120, "admitted on the manager")
    (check,) = wl["status"]["admissionChecks"]
    assert check["name"] == "kube-env-multikueue" and check["state"] == "Ready"
    assert "east" in check["message"]
    # the manager's Job is Kueue's to mirror (managedBy), not a job controller's
    assert hub.get("jobs", "fits", mk.ns)["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"

    # the worker admitted its copy with a topology assignment, and its pods run on the KWOK nodes,
    # one per node (5 + 5 GPUs do not fit one 8-GPU node)
    remote = wait_for(lambda: (w := copy(mk, wl)) and condition(w, "Admitted").get("status") == "True" and w,
                      60, "admitted on the worker")
    assert remote["status"]["admission"]["podSetAssignments"][0].get("topologyAssignment")
    pods = mk.wait_bound("east", mk.ns, 2, f"{JOB_NAME}=fits", timeout=120)
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["e-0", "e-1"]
    wait_for(lambda: all((p.get("status") or {}).get("phase") == "Running"
                         for p in mk.pods("east", mk.ns, f"{JOB_NAME}=fits")) or None, 60, "pods Running")
    assert mk.pods("hub", mk.ns) == []
    # the worker's status flows back to the manager's Job
    wait_for(lambda: (hub.get("jobs", "fits", mk.ns).get("status") or {}).get("active") == 2 or None, 60,
             "the manager's Job shows the worker's 2 active pods")

    # 6 GPUs are left on the worker (3 + 3): a 6-GPU pod fits both quotas, no node
    hub.create("jobs", job("no-node", mk.ns, pods=1, gpus=6))
    local = wait_for(lambda: workload_of(mk, "hub", mk.ns, "no-node"), 60, "a Workload on the manager")
    wait_for(lambda: (w := copy(mk, local)) and condition(w, "QuotaReserved").get("reason") == "Pending" and w,
             120, "pending on the worker")
    local = workload_of(mk, "hub", mk.ns, "no-node")
    assert condition(local, "QuotaReserved").get("status") == "True"     # the manager counted quota only
    assert condition(local, "Admitted").get("status") != "True"
    assert mk.pods("east", mk.ns, f"{JOB_NAME}=no-node") == []
