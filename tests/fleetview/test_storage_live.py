"""Storage through the live inventory (issue 25, item 8), against the test API server: the
inventory reads each cluster's StorageClasses as it reads RuntimeClasses, and `placer plan`
keeps a StatefulSet whose volumeClaimTemplates name no class off a cluster without a default
one, saying so; a simulated cluster declares its classes in the clusters file."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from placer.cli import app
from placer.fleetview.inventory import live_clusters
from placer.kube import Kube
from placer.model.fleet import StorageClass
from tests.kubeapi import gpu_node

ROOT = Path(__file__).resolve().parents[2]
STS = str(ROOT / "examples" / "statefulset.yaml")        # claim model-cache, no storageClassName
runner = CliRunner()
NO_DEFAULT = "claim model-cache names no StorageClass and the cluster has no default StorageClass"


def storage_class(name: str, default: bool = False) -> dict:
    ann = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "example.com/csi",
            "metadata": {"name": name, "annotations": ann}}


class Entry:
    def __init__(self, name: str):
        self.name = self.context = name
        self.labels: dict = {}


def _fleet(make_fleet):
    kf = make_fleet(names=("alpha", "beta", "gamma"), crds=False)
    kf["alpha"].seed([gpu_node("a1", gpus=8), storage_class("standard", default=True), storage_class("fast-ssd")])
    kf["beta"].seed([gpu_node("b1", gpus=8), storage_class("fast-ssd")])
    kf["gamma"].seed([gpu_node("g1", gpus=8)])
    return kf


def plan(kf, *contexts: str):
    args = [a for c in contexts for a in ("--context", c)]
    return runner.invoke(app, ["plan", "--time-limit", "5", "-f", STS, "--kubeconfig", str(kf.kubeconfig), *args,
                               "-o", "json"])


def test_inventory_reads_storage_classes(make_fleet):
    kf = _fleet(make_fleet)
    got = live_clusters([Entry("alpha"), Entry("beta"), Entry("gamma")], kube=Kube(str(kf.kubeconfig)))
    assert got["alpha"].storage_classes == {"standard": StorageClass("standard", True),
                                            "fast-ssd": StorageClass("fast-ssd", False)}
    assert got["beta"].storage_classes == {"fast-ssd": StorageClass("fast-ssd", False)}
    assert got["gamma"].storage_classes == {}


def test_plan_keeps_unbindable_claims_off_a_cluster(make_fleet, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    kf = _fleet(make_fleet)
    r = plan(kf, "beta", "gamma")
    assert r.exit_code == 3, r.output
    doc = json.loads(r.stdout)
    u = next(u for u in doc["unplaced"] if u["workload"] == "serving/triton-rerank")
    assert u["reasonCodes"] == {"beta": "UnboundClaim", "gamma": "UnboundClaim"}
    assert u["reasons"]["beta"].startswith(NO_DEFAULT) and u["reasons"]["gamma"].startswith(NO_DEFAULT)
    r = plan(kf, "beta", "alpha", "gamma")
    assert r.exit_code == 0, r.output
    assert [p["cluster"] for p in json.loads(r.stdout)["placements"]] == ["alpha"]


SIM = """clusters:
- name: east
  nodes: [{namePrefix: e-, count: 1, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti}}]
  storageClasses: [{name: fast-ssd}]
- name: west
  nodes: [{namePrefix: w-, count: 1, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti}}]
  storageClasses: [{name: standard, default: true}]
"""


def test_simulated_clusters_declare_storage_classes(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    (tmp_path / "c.yaml").write_text(SIM)
    r = runner.invoke(app, ["plan", "--clusters", "c.yaml", "-f", STS, "-o", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [p["cluster"] for p in doc["placements"]] == ["west"]
    for bad, field in ((SIM.replace("{name: standard, default: true}", "{name: a}, {name: a}"),
                        "clusters[1].storageClasses: [1].name: StorageClass 'a' is given twice"),
                       ("clusters:\n- {name: lab, context: lab, storageClasses: []}\n",
                        "clusters[0]: storageClasses: only a simulated cluster declares them")):
        (tmp_path / "c.yaml").write_text(bad)
        r = runner.invoke(app, ["plan", "--clusters", "c.yaml", "-f", STS])
        assert r.exit_code == 2, r.output
        line = r.stderr.strip().splitlines()[-1]
        assert "c.yaml" in line and field in line, line
