"""Live inventory and `placer clusters` read from real control planes (hack/kube-env): nodes
registered with real status, pods bound by the real scheduler, pods in every phase the real
apiserver keeps. The used GPUs placer reports are checked against where the scheduler put pods."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from placer.cli import app
from placer.fleetview.inventory import live_clusters
from placer.kube import Kube

pytestmark = pytest.mark.kube

PRODUCT = "nvidia.com/gpu.product"


def pod(name: str, gpus: int, node: str | None = None, overhead=False) -> dict:
    res = {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
           "limits": {"nvidia.com/gpu": str(gpus)}}
    spec = {"containers": [{"name": "c", "image": "registry.example/x:1", "resources": res}],
            "restartPolicy": "Never"}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def loaded(real):
    """east: 2 ready H100 nodes (8 GPUs), 1 cordoned, 1 NotReady, 1 tainted; pods bound by the
    scheduler (6 GPUs), one bound pod that then Succeeded, one that cannot be scheduled."""
    real.nodes("east", count=2, prefix="h100", gpus=8, label=[f"{PRODUCT}=NVIDIA-H100-80GB-HBM3"])
    real.nodes("east", count=1, prefix="cordoned", gpus=8, cordon=True)
    real.nodes("east", count=1, prefix="down", gpus=8, not_ready=True)
    real.nodes("east", count=1, prefix="tainted", gpus=4, taint=["dedicated=infer:NoSchedule"])
    real.nodes("west", count=1, prefix="a100", gpus=4, label=[f"{PRODUCT}=NVIDIA-A100-SXM4-80GB"])
    ns = real.namespace("east", real.unique("inv"))
    real.inv = ns
    c = real.client("east")
    for name, gpus in (("p6", 6), ("p2", 2)):
        c.create("pods", pod(name, gpus), ns)
    real.wait_bound("east", ns, 2)
    c.create("pods", pod("done", 8, node="cordoned-0"), ns)     # bound directly, as a static pod would be
    c.patch_status("pods", "done", {"phase": "Succeeded"}, ns)
    c.create("pods", pod("toobig", 16), ns)          # fits nowhere: stays Pending, unbound
    real.wait_unschedulable("east", ns)
    return real


def test_live_inventory_matches_where_the_real_scheduler_put_pods(loaded):
    east = live_clusters([type("E", (), {"name": "east", "context": "east", "labels": {}})()],
                         kube=Kube(str(loaded.kubeconfig)))["east"]
    assert east.error is None
    nodes = {n.name: n for n in east.nodes}
    assert set(nodes) == {"h100-0", "h100-1", "cordoned-0", "down-0", "tainted-0"}
    used_by_scheduler: dict[str, int] = {}
    for p in loaded.pods("east", loaded.inv):
        node = p["spec"].get("nodeName")
        if node and p["status"].get("phase") not in ("Succeeded", "Failed"):
            gpus = int(p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
            used_by_scheduler[node] = used_by_scheduler.get(node, 0) + gpus
    assert sum(used_by_scheduler.values()) == 8
    for name, n in nodes.items():
        assert n.used.get("nvidia.com/gpu", 0) == used_by_scheduler.get(name, 0), name
        assert n.allocatable["nvidia.com/gpu"] == (4 if name == "tainted-0" else 8)
    assert nodes["cordoned-0"].unschedulable and not nodes["cordoned-0"].schedulable
    assert not nodes["down-0"].ready and not nodes["down-0"].schedulable
    assert [(t.key, t.effect) for t in nodes["tainted-0"].taints] == [("dedicated", "NoSchedule")]
    assert nodes["h100-0"].labels[PRODUCT] == "NVIDIA-H100-80GB-HBM3"


def test_placer_clusters_on_real_clusters(loaded, monkeypatch):
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    monkeypatch.chdir(loaded.dir)
    res = CliRunner().invoke(app, ["clusters", "--kubeconfig", str(loaded.kubeconfig), "--all-contexts", "-o", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)["clusters"]}
    assert set(rows) >= {"hub", "east", "west"} and all(r["reachable"] for r in rows.values())
    # east: 5 nodes, 4 ready; GPUs on schedulable nodes: h100s 16 - 8 used, tainted 4 (a taint does not
    # make a node unschedulable for pods that tolerate it)
    assert rows["east"]["nodes"] == {"ready": 4, "total": 5}
    assert rows["east"]["gpus"]["allocatable"] == 36
    used = {p["spec"]["nodeName"]: 0 for p in loaded.pods("east", loaded.inv) if p["spec"].get("nodeName")}
    for p in loaded.pods("east", loaded.inv):
        if p["spec"].get("nodeName") and p["status"].get("phase") != "Succeeded":
            used[p["spec"]["nodeName"]] += int(p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
    free = {n: alloc - used.get(n, 0) for n, alloc in (("h100-0", 8), ("h100-1", 8), ("tainted-0", 4))}
    assert rows["east"]["gpus"]["free"] == sum(free.values()) == 12
    assert rows["east"]["gpus"]["largestFreeBlock"] == max(free.values())
    assert rows["east"]["gpuProducts"] == ["NVIDIA-H100-80GB-HBM3"]
    assert rows["west"]["gpus"]["free"] == 4 and rows["west"]["gpuProducts"] == ["NVIDIA-A100-SXM4-80GB"]
    assert rows["hub"]["nodes"]["total"] == 0
