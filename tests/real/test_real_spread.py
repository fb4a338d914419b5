"""`placer.dev/spread: divide` onto real control planes (hack/kube-env): `placer submit` writes one
Deployment per cluster with its share of the replicas, the real kube-controller-manager makes the
pods and the real kube-scheduler binds every one of them (issue 21, Must show)."""
from __future__ import annotations

import pytest

from tests.real.test_real_submit import filler, submit, write

pytestmark = pytest.mark.kube


def deployment(name: str, ns: str, replicas: int, gpus: int, annotations: dict) -> dict:
    resources = {"requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": str(gpus)},
                 "limits": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                         {"name": "server", "image": "registry.example/serve:1", "resources": resources}]}}}}


def test_divided_shares_are_created_per_cluster_and_every_pod_is_bound(real, tmp_path):
    # east: 7 nodes of 4 GPUs, 1 in use on each: 21 GPUs free by cluster totals (room for its
    # weighted 8 replicas x 2 GPUs), but each node holds one 2-GPU pod: 7. west: 2 free 8-GPU nodes.
    real.nodes("east", count=7, prefix="e4", gpus=4)
    real.nodes("west", count=2, prefix="w8", gpus=8)
    busy = real.namespace("east", real.unique("busy"))
    for i in range(7):
        real.client("east").create("pods", filler(f"busy-{i}", f"e4-{i}", 1), busy)
    ns = real.unique("spread")
    web = deployment("web", ns, 12, 2, {"placer.dev/spread": "divide", "placer.dev/spread-weights": "east=2,west=1"})
    code, out = submit(real, tmp_path, write(tmp_path, "web.yaml", web))
    assert code == 0, (out["unplaced"], out["failed"])
    shares = {p["cluster"]: p["replicas"] for p in out["placements"]}
    assert shares == {"east": 7, "west": 5}, out["placements"]
    assert all(p["spread"] == {"mode": "divide", "shares": shares} for p in out["placements"])
    for cluster, n in shares.items():
        assert real.client(cluster).get("deployments", "web", ns)["spec"]["replicas"] == n
        pods = real.wait_bound(cluster, ns, n, "app=web")
        assert len(pods) == n and all(p["spec"].get("nodeName") for p in pods)
    assert sorted(p["spec"]["nodeName"] for p in real.pods("east", ns)) == [f"e4-{i}" for i in range(7)]
