"""Capacity reasons that name the binding limit, on real control planes (issue 25, item 7).
The judge is the real kube-scheduler: forced onto the cluster, the workload gets exactly as
many pods bound as placer said there was room for, and the rest stay unschedulable for the
limit placer named (`Insufficient nvidia.com/gpu`, `Too many pods`)."""
from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from tests.kubeenv import wait_for

pytestmark = pytest.mark.kube


def job(name: str, ns: str, pods: int, gpus: int) -> dict:
    res = {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
           "limits": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"completionMode": "Indexed", "completions": pods, "parallelism": pods, "backoffLimit": 0,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [
                         {"name": "train", "image": "registry.example/train:1", "resources": res}]}}}}


def filler(name: str, node: str, gpus: int) -> dict:
    """A pod already on `node` (bound directly, as the scheduler would have)."""
    res = {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "registry.example/x:1", "resources": res}]}}


def reason_for(real, tmp_path, context: str, obj: dict) -> str:
    (tmp_path / "clusters.yaml").write_text(yaml.safe_dump({"clusters": [{"name": context, "context": context}]}))
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(obj))
    r = CliRunner().invoke(app, ["plan", "-f", str(tmp_path / "job.yaml"), "--kubeconfig", str(real.kubeconfig),
                                 "--clusters", str(tmp_path / "clusters.yaml"), "--time-limit", "5", "-o", "json"])
    assert r.exit_code == 3, r.output
    return json.loads(r.stdout)["unplaced"][0]["reasons"][context]


def forced(real, context: str, ns: str, obj: dict, bound: int) -> str:
    """Create the Job there anyway: wait for `bound` pods bound and one unschedulable; its message."""
    real.client(context).create("jobs", obj, ns)
    sel = f"batch.kubernetes.io/job-name={obj['metadata']['name']}"

    def settled():
        pods = real.pods(context, ns, sel)
        stuck = [c["message"] for p in pods for c in (p.get("status") or {}).get("conditions") or ()
                 if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"]
        done = [p for p in pods if p["spec"].get("nodeName")]
        return (len(done), stuck[0]) if stuck and len(done) >= bound else None
    got, message = wait_for(settled, 90, f"{bound} pods bound and one unschedulable in {context}/{ns}")
    assert got == bound, got
    return message


def test_gpus_per_node_8_5_3_2_room_for_3_of_4(real, tmp_path):
    real.nodes("east", count=4, prefix="r8", gpus=8)
    busy = real.namespace("east", real.unique("busy"))
    for node, used in (("r8-1", 3), ("r8-2", 5), ("r8-3", 6)):
        real.client("east").create("pods", filler(f"busy-{node}", node, used), busy)
    ns = real.unique("gang")
    reason = reason_for(real, tmp_path, "east", job("gang", ns, pods=4, gpus=4))
    assert reason == ("needs 4 pods x 4 GPUs; room for 3 of 4 pods: nodes with >= 4 GPUs free hold 3 such pods "
                      "(2 nodes; 18 GPUs free)"), reason
    real.namespace("east", ns)
    message = forced(real, "east", ns, job("gang", ns, pods=4, gpus=4), bound=3)
    assert "Insufficient nvidia.com/gpu" in message, message


def test_gpu_nodes_out_of_pod_slots(real, tmp_path):
    real.nodes("west", count=2, prefix="slots", gpus=8, pods=2)
    real.nodes("west", count=1, prefix="cpu", gpus=0)
    busy = real.namespace("west", real.unique("busy"))
    for node in ("slots-0", "slots-1"):
        real.client("west").create("pods", filler(f"{node}-a", node, 3), busy)
        real.client("west").create("pods", filler(f"{node}-b", node, 0), busy)
    ns = real.unique("small")
    reason = reason_for(real, tmp_path, "west", job("small", ns, pods=2, gpus=1))
    assert reason == ("needs 2 pods x 1 GPU; room for 0 of 2 pods: by pod slots the 2 nodes with >= 1 GPU free "
                      "hold 0 such pods (0 pod slots free there)"), reason
    real.namespace("west", ns)
    message = forced(real, "west", ns, job("small", ns, pods=2, gpus=1), bound=0)
    assert "Too many pods" in message, message
