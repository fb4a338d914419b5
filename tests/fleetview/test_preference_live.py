"""Issue 21 on live clusters, against the test API server: clusters-file entries that name a
context carry `preference` and `cost` into the fleet `placer plan` plans on (read_fleet), so
an order and prices work on live clusters as on simulated ones."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from placer.cli import app
from tests.kubeapi import gpu_node

runner = CliRunner()

JOBS = "\n---\n".join(f"""apiVersion: batch/v1
kind: Job
metadata: {{name: train-{i}, namespace: ml}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {{limits: {{nvidia.com/gpu: 8}}}}
""" for i in range(3))


def test_live_entries_carry_preference_and_cost(make_fleet, tmp_path):
    kf = make_fleet(names=("alpha", "beta"), crds=False)
    kf["alpha"].seed([gpu_node("a1", gpus=8), gpu_node("a2", gpus=8)])
    kf["beta"].seed([gpu_node("b1", gpus=8), gpu_node("b2", gpus=8)])
    (tmp_path / "jobs.yaml").write_text(JOBS)
    clusters = tmp_path / "c.yaml"
    clusters.write_text("clusters:\n- {name: alpha, context: alpha, cost: 3}\n"
                        "- {name: beta, context: beta, cost: 1.5}\n")
    args = ["plan", "--time-limit", "10", "-f", str(tmp_path / "jobs.yaml"), "--clusters", str(clusters),
            "--kubeconfig", str(kf.kubeconfig), "-o", "json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert sorted((p["cluster"], p["cost"]) for p in doc["placements"]) == [("alpha", 24), ("beta", 12), ("beta", 12)]
    assert doc["summary"]["cost"] == 48
    # a preference on the live entry outranks the price
    clusters.write_text("clusters:\n- {name: alpha, context: alpha, cost: 3, preference: 1}\n"
                        "- {name: beta, context: beta, cost: 1.5}\n")
    doc = json.loads(runner.invoke(app, args).stdout)
    assert sorted(p["cluster"] for p in doc["placements"]) == ["alpha", "alpha", "beta"]
    assert doc["summary"]["cost"] == 60
