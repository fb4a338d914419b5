"""A LeaderWorkerSet through `placer submit` onto clusters running the real LWS controller
(sigs.k8s.io/lws, pinned in hack/operators-release) and KWOK kubelets: the webhook admits placer's
object, the leader and worker pods the controller creates (through its StatefulSets) are the ones
placer predicts, bound on the cluster placer chose, and placer's phase becomes Running."""
from __future__ import annotations

import pytest

from tests.kubeenv import wait_for
from tests.realkube.operators import NAMES, describe, describe_file, matches_describe, phase, submit

pytestmark = pytest.mark.kube

LWS_NAME = "leaderworkerset.sigs.k8s.io/name"


def container(name: str, cpu: str, gpus: int) -> dict:
    return {"name": name, "image": "registry.example/serve:1",
            "resources": {"requests": {"cpu": cpu, "nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}


def lws(name: str, ns: str, *, replicas: int, size: int, leader: bool) -> dict:
    template: dict = {"size": size, "workerTemplate": {"spec": {"containers": [container("worker", "2", 4)]}}}
    if leader:
        template["leaderTemplate"] = {"spec": {"containers": [container("leader", "1", 2)]}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": template}}


@pytest.mark.parametrize("leader", [True, False], ids=["leader-template", "workers-only"])
def test_lws_groups_run_on_the_real_controller(ops, tmp_path, leader):
    ops.nodes("east", count=3, prefix="e-", gpus=8, kwok=True)
    ops.nodes("west", count=1, prefix="w-", gpus=8, kwok=True)       # too small: placer picks east
    ns = ops.unique("serve")
    for name in NAMES:
        ops.namespace(name, ns)
    obj = lws("serve", ns, replicas=2, size=3, leader=leader)
    predicted = describe_file(tmp_path, obj)
    assert predicted["pods"] == 6

    (placement,) = submit(ops.kubeconfig, tmp_path, obj)["placements"]
    assert placement["cluster"] == "east"
    created = ops.client("east").get("leaderworkersets", "serve", ns)
    assert created["spec"]["startupPolicy"] == "LeaderCreated"          # defaulted by the real webhook

    pods = ops.wait_bound("east", ns, 6, f"{LWS_NAME}=serve", timeout=120)
    assert len(pods) == 6
    assert {p["spec"]["nodeName"] for p in pods} <= {"e-0", "e-1", "e-2"}
    assert ops.pods("west", ns) == []
    matches_describe(predicted, lambda sel: ops.pods("east", ns, sel))

    wait_for(lambda: all((p.get("status") or {}).get("phase") == "Running" and p["status"].get("podIP")
                         for p in ops.pods("east", ns, f"{LWS_NAME}=serve")) or None, 60, "pods Running")
    wait_for(lambda: phase(ops.kubeconfig, tmp_path, "serve") == "Running" or None, 90, "placer says Running")
    live = describe("leaderworkerset/serve", "-n", ns, "--context", "east", "--kubeconfig", str(ops.kubeconfig))
    assert live["phase"] == "Running"
