"""Live inventory and `placer clusters` against the test API server."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from typer.testing import CliRunner

from placer.cli import app
from placer.fleetview.inventory import ACTIVE_PODS, live_clusters, summarize
from placer.kube import Kube, RetryPolicy
from tests.kubeapi import bound_pod, gpu_node, loaded_node


@dataclass
class Entry:
    name: str
    context: str | None
    labels: dict = field(default_factory=dict)


def fast_kube(fleet, sleeps=None) -> Kube:
    return Kube(str(fleet.kubeconfig), sleep=(sleeps.append if sleeps is not None else (lambda s: None)),
                retry=RetryPolicy(attempts=3, base=0.05))


@pytest.fixture
def four(make_fleet):
    fleet = make_fleet(names=("alpha", "beta", "down", "broken"), crds=False)
    fleet["alpha"].seed([
        *loaded_node("a1", gpus=8, used_gpus=6, pods=3),
        gpu_node("a2", gpus=8, product="NVIDIA-H100-80GB-HBM3", taints=["nvidia.com/gpu=present:NoSchedule"]),
        gpu_node("a3", gpus=8, ready=False),
        bound_pod("done", "a2", gpus=8, phase="Succeeded"),
        bound_pod("gone", "a2", gpus=8, phase="Failed"),
        bound_pod("pending", None, gpus=8, phase="Pending"),
        bound_pod("with-overhead", "a2", gpus=1, cpu="2", overhead={"cpu": "500m", "memory": "1Gi"}),
    ])
    fleet["beta"].seed([gpu_node("b1", gpus=4, product="NVIDIA-A100-SXM4-80GB"),
                        gpu_node("b2", gpus=0, labels={"role": "cpu"}),
                        gpu_node("b3", gpus=4, product="NVIDIA-A100-SXM4-80GB", unschedulable=True)])
    fleet["down"].down()
    fleet["broken"].faults.fail(500)
    return fleet


def test_multi_context_inventory_with_gpus_used_by_bound_pods(four):
    entries = [Entry("alpha", "alpha", {"region": "us"}), Entry("beta", "beta"),
               Entry("down", "down"), Entry("broken", "broken"), Entry("sim", None)]
    result = live_clusters(entries, kube=fast_kube(four))
    assert list(result) == ["alpha", "beta", "down", "broken"]       # simulated ones are not read

    alpha = result["alpha"]
    assert alpha.error is None and alpha.labels == {"region": "us"} and alpha.context == "alpha"
    a1, a2, a3 = alpha.nodes
    assert a1.used["nvidia.com/gpu"] == 6 and a1.free("nvidia.com/gpu") == 2
    # Succeeded/Failed/unbound pods take nothing; overhead counts; each bound pod takes a slot
    assert a2.used == {"nvidia.com/gpu": 1, "cpu": 2500, "memory": 5 * 2**30, "pods": 1}
    assert a2.taints[0].key == "nvidia.com/gpu" and a2.taints[0].effect == "NoSchedule"
    assert not a3.ready and a3.used == {}
    assert a1.allocatable["cpu"] == 96000 and a1.allocatable["memory"] == 2**40

    beta = result["beta"]
    assert [n.name for n in beta.nodes] == ["b1", "b2", "b3"] and beta.nodes[2].unschedulable

    assert result["down"].error == "unreachable (connection refused)" and result["down"].nodes == ()
    assert result["broken"].error.startswith("server error (HTTP 500") and result["broken"].nodes == ()


def test_pods_are_listed_cluster_wide_active_only_and_paginated(make_fleet):
    fleet = make_fleet(names=("big",), crds=False)
    c = fleet["big"]
    objs = []
    for i in range(600):
        objs += loaded_node(f"n{i:04d}", gpus=8, used_gpus=2, pods=2, namespace=f"ns{i % 3}")
    c.seed(objs)
    cluster = live_clusters([Entry("big", "big")], kube=fast_kube(fleet))["big"]
    assert len(cluster.nodes) == 600 and all(n.used["nvidia.com/gpu"] == 2 for n in cluster.nodes)
    pod_lists = [r for r in c.requests.entries if r.verb == "list" and r.resource == "pods"]
    assert len(pod_lists) == 3 and all(r.namespace == "" for r in pod_lists)     # 1200 pods, pages of 500
    assert {r.query.get("fieldSelector") for r in pod_lists} == {ACTIVE_PODS}
    assert c.requests.count(verb="list", resource="nodes") == 2


def test_forbidden_cluster_is_reported_not_raised(make_fleet):
    fleet = make_fleet(names=("alpha", "beta"), crds=False)
    fleet["alpha"].seed([gpu_node("n1")])
    fleet["beta"].faults.fail(403)
    result = live_clusters([Entry("alpha", "alpha"), Entry("beta", "beta")], kube=fast_kube(fleet))
    assert result["alpha"].error is None and len(result["alpha"].nodes) == 1
    assert result["beta"].error.startswith("forbidden (")


def test_unknown_context_is_reported_per_cluster(make_fleet):
    fleet = make_fleet(names=("alpha",), crds=False)
    result = live_clusters([Entry("alpha", "alpha"), Entry("x", "nope")], kube=fast_kube(fleet))
    assert result["alpha"].error is None
    assert "context 'nope' not found" in result["x"].error


def test_cluster_names_travel_in_errors(make_fleet):
    fleet = make_fleet(names=("alpha",), crds=False)
    fleet["alpha"].faults.fail(500)
    sleeps = []
    out = live_clusters([Entry("prod-east", "alpha")], kube=fast_kube(fleet, sleeps))["prod-east"]
    assert out.name == "prod-east" and "injected fault" in out.error and len(sleeps) == 2


# --- placer clusters ---------------------------------------------------------------

def test_placer_clusters_json_from_kubeconfig_contexts(four, monkeypatch):
    four["broken"].faults.clear()
    four["broken"].faults.fail(403)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    res = CliRunner().invoke(app, ["clusters", "--kubeconfig", str(four.kubeconfig), "--all-contexts", "-o", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)["clusters"]}
    assert rows["alpha"]["reachable"] and rows["alpha"]["nodes"] == {"ready": 2, "total": 3}
    # a1: 8 alloc, 2 free; a2: 8 alloc, 7 free; a3 not ready: 8 alloc, not free
    assert rows["alpha"]["gpus"] == {"allocatable": 24, "free": 9, "largestFreeBlock": 7, "reserved": 0}
    assert rows["alpha"]["gpuProducts"] == ["NVIDIA-H100-80GB-HBM3"]
    assert rows["beta"]["gpus"]["free"] == 4 and rows["beta"]["gpuProducts"] == ["NVIDIA-A100-SXM4-80GB"]
    assert rows["down"] == {**rows["down"], "reachable": False, "error": "unreachable (connection refused)"}
    assert rows["broken"]["error"].startswith("forbidden")


def test_placer_clusters_table(four):
    four["broken"].faults.clear()
    four["down"].up()
    res = CliRunner().invoke(app, ["clusters", "--kubeconfig", str(four.kubeconfig), "--all-contexts"])
    assert res.exit_code == 0, res.output
    lines = {line.split()[0]: line for line in res.stdout.splitlines() if line.strip()}
    assert "9/24" in lines["alpha"] and "NVIDIA-H100-80GB-HBM3" in lines["alpha"] and "2/3" in lines["alpha"]
    assert "ok" in lines["down"] and "0/0" in lines["down"]


def test_summary_counts_match_snapshot(four):
    alpha = live_clusters([Entry("alpha", "alpha")], kube=fast_kube(four))["alpha"]
    s = summarize(alpha)
    assert (s.gpus_allocatable, s.gpus_free, s.largest_free_block) == (24, 9, 7)


def test_placer_clusters_with_a_clusters_file_live_and_simulated(four, tmp_path):
    path = tmp_path / "clusters.yaml"
    path.write_text("""
clusters:
- name: prod-east
  context: alpha
  labels: {region: us-east}
- name: lab
  nodes:
  - namePrefix: h100-
    count: 2
    allocatable: {cpu: "96", memory: 1Ti, nvidia.com/gpu: 8}
    used: {nvidia.com/gpu: 3}
    labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
- name: gone
  context: down
""")
    res = CliRunner().invoke(app, ["clusters", "--clusters", str(path), "--kubeconfig", str(four.kubeconfig),
                                   "-o", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["clusters"]
    assert [(r["name"], r["source"], r["reachable"]) for r in rows] == [
        ("prod-east", "live", True), ("lab", "simulated", True), ("gone", "live", False)]
    assert rows[0]["gpus"]["free"] == 9 and rows[0]["labels"] == {"region": "us-east"}
    assert rows[1]["gpus"] == {"allocatable": 16, "free": 10, "largestFreeBlock": 5, "reserved": 0}
    assert rows[2]["error"] == "unreachable (connection refused)"
