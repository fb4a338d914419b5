"""One identity per workload (issue 12, defect 1): API group, kind, namespace and name.
A Job and a Deployment that share `namespace/name` are two workloads everywhere."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from placer.cli import app
from placer.model.workload import WorkloadRef

runner = CliRunner()

JOB_AND_DEPLOYMENT = """apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: ml}
spec:
  replicas: 1
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      containers:
      - {name: main, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}
"""


def test_job_and_deployment_sharing_a_name_both_place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)       # no kubeconfig: the bundled fleet
    monkeypatch.setenv("HOME", str(tmp_path))                # (no ~/.kube/config either)
    (tmp_path / "train.yaml").write_text(JOB_AND_DEPLOYMENT)
    r = runner.invoke(app, ["plan", "-f", "train.yaml", "-o", "json", "--time-limit", "3"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["unplaced"] == []
    # `workload` is ns/name only where that is unambiguous; `ref` always names the object
    assert sorted(p["workload"] for p in data["placements"]) == ["ml/Deployment.apps/train", "ml/Job.batch/train"]
    assert sorted((p["ref"]["apiGroup"], p["ref"]["kind"]) for p in data["placements"]) == [
        ("apps", "Deployment"), ("batch", "Job")]


def test_workload_ref_text_round_trips():
    for ref in (WorkloadRef("batch", "Job", "ml", "train"), WorkloadRef("", "Pod", "default", "p")):
        assert WorkloadRef.parse(str(ref)) == ref
    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "t"}}
    assert str(WorkloadRef.of(obj)) == "default/JobSet.jobset.x-k8s.io/t"


def test_job_and_deployment_sharing_a_name_are_submitted_and_found_again_apart(fresh_fleet, tmp_path):
    from placer.definitions.catalog import load_catalog
    from placer.kube import Kube
    from placer.ops.context import context_of
    from placer.ops.submit import SubmitRequest, submit
    from tests.kubeapi.builders import gpu_node

    fresh_fleet["alpha"].seed([gpu_node("a0")])
    fresh_fleet["beta"].seed([gpu_node("b0")])
    (tmp_path / "train.yaml").write_text(JOB_AND_DEPLOYMENT)
    entries = [{"name": "alpha", "context": "alpha"}, {"name": "beta", "context": "beta"}]

    def run():
        kube = Kube(str(fresh_fleet.kubeconfig))
        try:
            return submit(context_of(entries, load_catalog(), kube),
                          SubmitRequest((str(tmp_path / "train.yaml"),), time_limit=3, workers=1))
        finally:
            kube.close()
    first = run()
    assert first.exit_code == 0 and sorted(c.workload for c in first.created) == [
        "ml/Deployment.apps/train", "ml/Job.batch/train"]
    again = run()
    assert again.created == () and sorted((u.workload, u.result) for u in again.updated) == [
        ("ml/Deployment.apps/train", "unchanged"), ("ml/Job.batch/train", "unchanged")]
