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


def test_divided_leaderworkerset_groups_run_whole_on_the_real_controller(ops, tmp_path):
    """Shares of whole groups: the real LWS controller makes each copy's groups, every pod bound."""
    from tests.realkube.operators import NAMES
    from tests.realkube.operators import submit as submit_ops
    ops.nodes("east", count=1, prefix="e-", gpus=8, kwok=True)        # one group of 2 x 4 GPUs
    ops.nodes("west", count=2, prefix="w-", gpus=8, kwok=True)        # two groups
    ns = ops.unique("spread")
    for name in NAMES:
        ops.namespace(name, ns)
    worker = {"name": "worker", "image": "registry.example/serve:1",
              "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}}
    obj = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "serve", "namespace": ns, "annotations": {"placer.dev/spread": "divide"}},
           "spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
               "containers": [worker]}}}}}
    out = submit_ops(ops.kubeconfig, tmp_path, obj)
    shares = {p["cluster"]: p["replicas"] for p in out["placements"]}
    assert shares == {"east": 1, "west": 2}, out["placements"]
    for cluster, groups in shares.items():
        assert ops.client(cluster).get("leaderworkersets", "serve", ns)["spec"]["replicas"] == groups
        pods = ops.wait_bound(cluster, ns, 2 * groups, "leaderworkerset.sigs.k8s.io/name=serve", timeout=120)
        by_group: dict[str, int] = {}
        for p in pods:
            g = p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"]
            by_group[g] = by_group.get(g, 0) + 1
        assert by_group == {str(i): 2 for i in range(groups)}, by_group
