"""`placer plan` end to end on the bundled example fleet and on given clusters files."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app

ROOT = Path(__file__).resolve().parent.parent
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
def _isolated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)            # no ./clusters.yaml: the bundled fleet
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)


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
    assert set(u["reasons"]) == {"east", "west", "eu", "dev"}
    # the Job does not tolerate the GPU nodes' taint: that is the reason, not capacity
    assert u["reasons"]["east"] == ("pods of job/huge do not tolerate taint nvidia.com/gpu:NoSchedule "
                                    "on the nodes they select")
    assert u["reasons"]["dev"].startswith("needs 40 pods x 8 GPUs")
    table = plan("-f", str(tmp_path / "big.yaml"))
    assert table.exit_code == 3 and "unplaced" in table.stdout


@pytest.mark.parametrize("content,field", [
    ("clusters:\n- name: a\n  nodes:\n  - namePrefix: n-\n    allocatable: {gpu: 8}\n",
     "clusters.yaml: clusters[0].nodes[0].allocatable.gpu: unknown resource 'gpu'"),
    ("clusters:\n- name: a\n  nodes: []\n  zone: x\n", "clusters.yaml: clusters[0].zone: unknown field"),
    ("clusters:\n- name: a\n  nodes: []\n- name: a\n  nodes: []\n",
     "clusters.yaml: clusters[1].name: duplicate cluster name 'a'"),
    ("clusters: [\n", "clusters.yaml: line"),
])
def test_bad_clusters_file_exits_2_naming_the_field(tmp_path, content, field):
    path = tmp_path / "clusters.yaml"
    path.write_text(content)
    r = plan("--clusters", str(path), "-f", EXAMPLES)
    assert r.exit_code == 2
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith("error: ") and line.removeprefix("error: ").replace(str(tmp_path) + "/", "").startswith(field), line


def test_given_clusters_file_with_live_entry(tmp_path, monkeypatch):
    import placer.inventory as inv
    from placer.fleet import Cluster
    monkeypatch.setattr(inv, "live_clusters", lambda entries, kubeconfig=None:
                        {e.name: Cluster(e.name, error="unreachable (connection refused)") for e in entries})
    (tmp_path / "c.yaml").write_text(
        "clusters:\n- {name: north, context: kind-north}\n"
        "- name: south\n  nodes:\n  - {namePrefix: n-, count: 1, allocatable: {nvidia.com/gpu: 8, cpu: '64', memory: 512Gi}}\n")
    (tmp_path / "big.yaml").write_text(BIG)
    r = plan("--clusters", str(tmp_path / "c.yaml"), "-f", str(tmp_path / "big.yaml"), "-o", "json")
    assert r.exit_code == 3
    reasons = json.loads(r.stdout)["unplaced"][0]["reasons"]
    assert reasons["north"] == "unreachable (connection refused)"
    assert "bundled" not in r.stderr


def test_no_files_and_bad_options_exit_2(tmp_path):
    r = plan()
    assert r.exit_code == 2 and "pass -f FILE" in r.stderr
    r = plan("-f", EXAMPLES, "-o", "xml")
    assert r.exit_code == 2 and "-o xml" in r.stderr
    r = runner.invoke(app, ["plan", "-f", EXAMPLES, "--time-limit", "0"])
    assert r.exit_code == 2
