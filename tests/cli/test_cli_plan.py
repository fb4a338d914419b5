"""`placer plan` end to end on the bundled example fleet and on given clusters files."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = str(ROOT / "examples")
runner = CliRunner()

BIG = """apiVersion: batch/v1
kind: Job
metadata: {name: huge, namespace: ml}
spec:
  parallelism: 40
  completions: 40
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {limits: {nvidia.com/gpu: 8}}
"""

SMALL = """apiVersion: batch/v1
kind: Job
metadata: {name: small, namespace: ml, annotations: {placer.dev/cluster-selector: "region=us-west"}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: main
        image: busybox
        resources: {limits: {nvidia.com/gpu: 2}}
"""


@pytest.fixture(autouse=True)
def _isolated(unconfigured):
    return unconfigured             # see tests/conftest.py


def plan(*args):
    return runner.invoke(app, ["plan", "--dry-run", "--time-limit", "3", *args])


def test_examples_on_bundled_fleet_table():
    r = plan("-f", EXAMPLES)
    assert r.exit_code == 0, r.output
    assert "bundled example fleet" in r.stderr
    assert "research/mistral-sft" in r.stdout and "placed 18/18 workloads" in r.stdout


def test_json_contract(tmp_path):
    (tmp_path / "small.yaml").write_text(SMALL)
    r = plan("-f", str(tmp_path / "small.yaml"), "-o", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    p = doc["placements"][0]
    assert {"workload", "kind", "cluster", "gpus", "pods", "nodes"} <= set(p)
    assert p["workload"] == "ml/small" and p["cluster"] == "west" and p["gpus"] == 2
    assert sum(n for per in p["nodes"].values() for n in per.values()) == 1
    assert {"workloads", "placed", "gpusRequested", "gpusPlaced", "solveSeconds", "optimal"} <= set(doc["summary"])
    assert doc["unplaced"] == []


def test_unplaced_exits_3_with_reasons(tmp_path):
    (tmp_path / "big.yaml").write_text(BIG)
    r = plan("-f", str(tmp_path / "big.yaml"), "-o", "yaml")
    assert r.exit_code == 3, r.output
    doc = yaml.safe_load(r.stdout)
    u = doc["unplaced"][0]
    assert u["workload"] == "ml/huge" and u["gpus"] == 320
    assert set(u["reasons"]) == {"east", "west", "eu", "dev", "gb"}
    # the Job does not tolerate the GPU nodes' taint: that is the reason, not capacity (the
    # untainted nodes it may use, CPU-only ones, have no room for a GPU pod)
    assert u["reasons"]["east"] == ("pods of job/huge do not tolerate taint nvidia.com/gpu:NoSchedule "
                                    "on the nodes with room for one")
    assert u["reasons"]["dev"].startswith("needs 40 pods x 8 GPUs")
    table = plan("-f", str(tmp_path / "big.yaml"))
    assert table.exit_code == 3 and "unplaced" in table.stdout


@pytest.mark.parametrize("content,field", [
    ("clusters:\n- name: a\n  nodes:\n  - namePrefix: n-\n    allocatable: {gpu: 8}\n",
     "clusters.yaml: clusters[0].nodes[0].allocatable.gpu: unknown resource 'gpu'"),
    ("clusters:\n- name: a\n  nodes: []\n  zone: x\n", "clusters.yaml: clusters[0].zone: unknown field"),
    ("clusters:\n- name: a\n  nodes: []\n- name: a\n  nodes: []\n",
     "clusters.yaml: clusters[1].name: duplicate cluster name 'a'"),
    ("clusters: [\n", "clusters.yaml: malformed YAML (line 2)"),
])
def test_bad_clusters_file_exits_2_naming_the_field(tmp_path, content, field):
    path = tmp_path / "clusters.yaml"
    path.write_text(content)
    r = plan("--clusters", str(path), "-f", EXAMPLES)
    assert r.exit_code == 2
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith("error: ") and line.removeprefix("error: ").replace(str(tmp_path) + "/", "").startswith(field), line


def test_given_clusters_file_with_live_entry(tmp_path, make_fleet):
    kf = make_fleet(names=("north",), crds=False)
    kf["north"].down()                                  # a live entry whose API server refuses connections
    (tmp_path / "c.yaml").write_text(
        "clusters:\n- {name: north, context: north}\n"
        "- name: south\n  nodes:\n  - {namePrefix: n-, count: 1, allocatable: {nvidia.com/gpu: 8, cpu: '64', memory: 512Gi}}\n")
    (tmp_path / "big.yaml").write_text(BIG)
    r = plan("--clusters", str(tmp_path / "c.yaml"), "-f", str(tmp_path / "big.yaml"), "-o", "json",
             "--kubeconfig", str(kf.kubeconfig))
    assert r.exit_code == 3
    reasons = json.loads(r.stdout)["unplaced"][0]["reasons"]
    assert reasons["north"] == "unreachable (connection refused)"
    assert "bundled" not in r.stderr


def test_no_files_and_bad_options_exit_2(tmp_path):
    r = plan()
    assert r.exit_code == 2 and "pass -f FILE" in r.stderr and "hub:" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: nothing to plan: pass -f FILE")
    r = plan("-f", EXAMPLES, "-o", "xml")
    assert r.exit_code == 2 and "-o xml" in r.stderr
    r = runner.invoke(app, ["plan", "-f", EXAMPLES, "--time-limit", "0"])
    assert r.exit_code == 2


# --- no files: the pending objects of the hub's staging namespace -------------------------------

def _job(name, ns, gpus, pods=1, annotations=None):
    meta = {"name": name, "namespace": ns, **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "parallelism": pods, "completions": pods, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "m", "image": "i", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}}


WIDGET_DEF = {
    "name": "widget", "description": "a type registered on the hub only",
    "matches": [{"apiVersion": "example.com/v1", "kind": "Widget"}],
    "components": [{"name": "worker", "pod": {"template": ".spec.template"}, "replicas": ".spec.replicas // 1"}],
}


def test_no_files_plans_the_hub_staging_namespace(make_fleet, tmp_path):
    from placer.fleetview.registry import apply_definitions, ensure_crd
    from placer.kube import Kube
    from tests.kubeapi import crd, custom_object

    kf = make_fleet(names=("hub",))
    hub = kf["hub"]
    hub.install_crds([crd("example.com", "Widget", "widgets")])
    client = Kube(str(kf.kubeconfig)).client("hub")
    ensure_crd(client)
    apply_definitions(client, [("widget.yaml", WIDGET_DEF)])
    widget = custom_object("example.com/v1", "Widget", "w1", "placer-staging", {
        "replicas": 2, "template": {"spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}})
    hub.seed([_job("solo", "placer-staging", 4, pods=2),
              _job("done", "placer-staging", 8, annotations={"placer.dev/placed-cluster": "sim"}),   # placed already
              # a spread workload the daemon placed: its shares recorded, no single cluster (issue 21)
              _job("spreaded", "placer-staging", 1, annotations={"placer.dev/spread": "duplicate",
                                                                 "placer.dev/placed-shares": "sim"}),
              # a user's pin is a request, not a placement (issue 12, defect 2): still planned
              _job("pinned", "placer-staging", 2, annotations={"placer.dev/cluster": "sim"}),
              _job("c1", "placer-staging", 2, annotations={"placer.dev/group": "pair"}),
              _job("c2", "placer-staging", 2, annotations={"placer.dev/group": "pair"}),
              _job("elsewhere", "default", 8), widget])
    (tmp_path / "c.yaml").write_text(
        "hub: {context: hub, stagingNamespace: placer-staging}\n"
        "clusters:\n- name: sim\n  nodes:\n"
        "  - {namePrefix: n-, count: 2, allocatable: {nvidia.com/gpu: 8, cpu: '64', memory: 512Gi}}\n")
    r = plan("--clusters", str(tmp_path / "c.yaml"), "--kubeconfig", str(kf.kubeconfig), "-o", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    got = {p["workload"]: (p["group"], p["gpus"]) for p in doc["placements"]}
    assert got == {"placer-staging/solo": ("placer-staging/solo", 8),
                   "placer-staging/c1": ("placer-staging/pair", 2), "placer-staging/c2": ("placer-staging/pair", 2),
                   "placer-staging/w1": ("placer-staging/w1", 2),
                   "placer-staging/pinned": ("placer-staging/pinned", 2)}
    assert "spreaded" not in r.stdout
    assert "planning the pending objects of namespace placer-staging on hub context hub" in r.stderr


def test_gpu_resource_option_and_env_reach_the_solver(tmp_path, monkeypatch):
    (tmp_path / "c.yaml").write_text(
        "clusters:\n- name: sim\n  nodes:\n"
        "  - {namePrefix: n-, count: 1, allocatable: {amd.com/gpu: 8, cpu: '64', memory: 512Gi}}\n")
    job = SMALL.replace("nvidia.com/gpu: 2", "amd.com/gpu: 2").replace(
        'annotations: {placer.dev/cluster-selector: "region=us-west"}', "")
    (tmp_path / "amd.yaml").write_text(job)
    args = ("--clusters", str(tmp_path / "c.yaml"), "-f", str(tmp_path / "amd.yaml"), "-o", "json")
    summary = json.loads(plan(*args).stdout)["summary"]
    assert (summary["gpusRequested"], summary["placed"]) == (0, 1)          # not a GPU by default
    r = plan(*args, "--gpu-resource", "nvidia.com/gpu", "--gpu-resource", "amd.com/gpu")
    assert json.loads(r.stdout)["summary"]["gpusPlaced"] == 2
    monkeypatch.setenv("PLACER_GPU_RESOURCES", "amd.com/gpu")
    assert json.loads(plan(*args).stdout)["summary"]["gpusPlaced"] == 2
