"""A RayCluster through `placer submit` onto clusters running the real KubeRay operator
(github.com/ray-project/kuberay/ray-operator, pinned in hack/operators-release; without webhooks, as
its own Helm chart installs it) and KWOK kubelets: the head and worker pods the operator creates
(two worker groups, one of numOfHosts 2) are the ones placer predicts, bound on the cluster placer
chose, and placer's phase follows the real status to Running."""
from __future__ import annotations

import pytest

from tests.kubeenv import wait_for
from tests.realkube.operators import NAMES, describe, describe_file, matches_describe, phase, submit

pytestmark = pytest.mark.kube

CLUSTER = "ray.io/cluster"


def container(name: str, gpus: int) -> dict:
    requests = {"cpu": "2", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {"name": name, "image": "rayproject/ray:2.40.0",
            "resources": {"requests": requests, **({"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {})}}


def raycluster(name: str, ns: str) -> dict:
    def group(group: str, replicas: int, hosts: int, gpus: int) -> dict:
        return {"groupName": group, "replicas": replicas, "minReplicas": replicas, "maxReplicas": replicas,
                "numOfHosts": hosts, "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker", gpus)]}}}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name, "namespace": ns},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                container("ray-head", 0)]}}},
                "workerGroupSpecs": [group("a", 1, 2, 4), group("b", 2, 1, 2)]}}


def test_raycluster_runs_on_the_real_operator(ops, tmp_path):
    ops.nodes("east", count=2, prefix="e-", gpus=8, kwok=True)
    ops.nodes("west", count=1, prefix="w-", gpus=4, kwok=True)       # too small: placer picks east
    ns = ops.unique("ray")
    for name in NAMES:
        ops.namespace(name, ns)
    obj = raycluster("rc", ns)
    predicted = describe_file(tmp_path, obj)
    assert predicted["pods"] == 5                                      # head + 1x2 hosts + 2x1

    (placement,) = submit(ops.kubeconfig, tmp_path, obj)["placements"]
    assert placement["cluster"] == "east"
    pods = ops.wait_bound("east", ns, 5, f"{CLUSTER}=rc", timeout=120)
    assert len(pods) == 5
    assert {p["spec"]["nodeName"] for p in pods} <= {"e-0", "e-1"}
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "RayCluster" for p in pods)
    assert ops.pods("west", ns) == []
    matches_describe(predicted, lambda sel: ops.pods("east", ns, sel))

    wait_for(lambda: ops.client("east").get("rayclusters", "rc", ns).get("status", {}).get("state") == "ready"
             or None, 90, "RayCluster ready")
    wait_for(lambda: phase(ops.kubeconfig, tmp_path, "rc") == "Running" or None, 90, "placer says Running")
    live = describe("raycluster/rc", "-n", ns, "--context", "east", "--kubeconfig", str(ops.kubeconfig))
    assert live["phase"] == "Running"
