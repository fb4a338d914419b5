"""Through the CLI (issue 25, item 7): `placer plan` names the limit that binds, with its
numbers, and `placer clusters -o wide|json` shows the pod slots that bind."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from placer.cli import app

runner = CliRunner()

# east: free GPUs per node 8, 5, 3, 2; west: two GPU nodes with 5 free GPUs each at 110/110 pods,
# and a CPU node with free pod slots
CLUSTERS = """clusters:
- name: east
  nodes:
  - {namePrefix: e8-, count: 1, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti, pods: 110}}
  - {namePrefix: e5-, count: 1, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti, pods: 110},
     used: {nvidia.com/gpu: 3}}
  - {namePrefix: e3-, count: 1, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti, pods: 110},
     used: {nvidia.com/gpu: 5}}
  - {namePrefix: e2-, count: 1, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti, pods: 110},
     used: {nvidia.com/gpu: 6}}
- name: west
  nodes:
  - {namePrefix: w-gpu-, count: 2, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti, pods: 110},
     used: {nvidia.com/gpu: 3, pods: 110}}
  - {namePrefix: w-cpu-, count: 1, allocatable: {cpu: "96", memory: 1Ti, pods: 110}, used: {pods: 10}}
"""

JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: %(name)s, namespace: ml, annotations: {placer.dev/cluster: %(where)s}}
spec:
  parallelism: %(pods)d
  completions: %(pods)d
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, resources: {limits: {nvidia.com/gpu: %(gpus)d}}}
"""


@pytest.fixture(autouse=True)
def _isolated(unconfigured):
    (unconfigured / "clusters.yaml").write_text(CLUSTERS)


def test_plan_names_room_for_3_of_4_and_the_pod_slot_limit(tmp_path):
    (tmp_path / "jobs.yaml").write_text(JOB % {"name": "gang", "where": "east", "pods": 4, "gpus": 4} + "---\n"
                                        + JOB % {"name": "small", "where": "west", "pods": 2, "gpus": 1})
    r = runner.invoke(app, ["plan", "--time-limit", "5", "--clusters", "clusters.yaml", "-f", "jobs.yaml",
                            "-o", "json"])
    assert r.exit_code == 3, r.output
    got = {u["workload"]: u for u in json.loads(r.stdout)["unplaced"]}
    assert got["ml/gang"]["reasonCodes"]["east"] == "RoomForFewer"
    assert got["ml/gang"]["reasons"]["east"] == (
        "needs 4 pods x 4 GPUs; room for 3 of 4 pods: nodes with >= 4 GPUs free hold 3 such pods "
        "(2 nodes; 18 GPUs free)")
    assert got["ml/small"]["reasons"]["west"] == (
        "needs 2 pods x 1 GPU; room for 0 of 2 pods: by pod slots the 2 nodes with >= 1 GPU free hold 0 such pods "
        "(0 pod slots free there)")


def test_clusters_show_free_pod_slots():
    wide = runner.invoke(app, ["clusters", "--clusters", "clusters.yaml", "-o", "wide"], terminal_width=250)
    assert wide.exit_code == 0, wide.output
    head, east, west = wide.stdout.splitlines()[:3]
    assert "PODS FREE/ALLOC" in head and "PODS FREE ON GPU NODES" in head
    assert "440/440" in east.split() and "100/330" in west.split() and "0" in west.split()
    doc = json.loads(runner.invoke(app, ["clusters", "--clusters", "clusters.yaml", "-o", "json"]).stdout)
    assert [c["pods"] for c in doc["clusters"]] == [
        {"allocatable": 440, "free": 440, "freeWhereGPUsFree": 440},
        {"allocatable": 330, "free": 100, "freeWhereGPUsFree": 0}]
