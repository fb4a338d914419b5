"""A JobSet through `placer submit` onto clusters running the real JobSet controller (sigs.k8s.io/jobset,
pinned in hack/operators-release, its CRD and webhooks from the same module) and KWOK kubelets: the
webhook admits placer's object, the controller's pods are the ones placer predicts, bound on the
cluster placer chose, and placer's phase follows the real status from Pending to Completed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.model.quantity import parse_quantity
from tests.kubeenv import RealKube, require_binaries, wait_for

pytestmark = pytest.mark.kube

NAMES = ("east", "west")
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
COMPLETE = "pod-complete.stage.kwok.x-k8s.io/delay"


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    """east and west with the real JobSet controller and KWOK (its own control planes: the session's
    hub/east/west run no operators)."""
    require_binaries()
    env = RealKube(tmp_path_factory.mktemp("operators"), NAMES, operators="jobset")
    yield env
    env.down()


def jobset(name: str, ns: str, *, replicas: int, pods: int, gpus: int, run_for: str) -> dict:
    """One replicatedJob of `replicas` Jobs, `pods` pods each; KWOK completes each pod `run_for`
    after it runs."""
    container = {"name": "trainer", "image": "registry.example/train:1",
                 "resources": {"requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": str(gpus)},
                               "limits": {"nvidia.com/gpu": str(gpus)}}}
    pod = {"metadata": {"annotations": {COMPLETE: run_for}},
           "spec": {"restartPolicy": "Never", "containers": [container]}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {"spec": {
                "parallelism": pods, "completions": pods, "backoffLimit": 0, "template": pod}}}]}}


def placer(ops: RealKube, tmp_path: Path, *args: str):
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(yaml.safe_dump({"clusters": [{"name": n, "context": n} for n in NAMES]}))
    return CliRunner().invoke(app, [*args, "--kubeconfig", str(ops.kubeconfig), "--clusters", str(clusters)])


def phase(ops: RealKube, tmp_path: Path, name: str) -> str:
    r = placer(ops, tmp_path, "get", "-A", "-o", "json")
    assert r.exit_code == 0, r.output
    (item,) = [i for i in json.loads(r.stdout)["items"] if i["name"] == name]
    return item["phase"]


def describe(ops: RealKube, tmp_path: Path, *args: str) -> dict:
    r = CliRunner().invoke(app, ["describe", *args, "-o", "json"])
    assert r.exit_code == 0, r.output
    (out,) = json.loads(r.stdout)
    return out


def matches_describe(predicted: dict, pods_of) -> None:
    """The operator's pods are placer's prediction: per component instance, as many pods as
    predicted under its selector, each requesting what placer counted per pod."""
    for comp in predicted["components"]:
        pods = pods_of(comp["selector"])
        assert len(pods) == comp["pods"], (comp["instance"], len(pods))
        for p in pods:
            requests: dict = {}
            for c in p["spec"]["containers"]:
                for k, v in (c["resources"].get("requests") or {}).items():
                    requests[k] = requests.get(k, 0) + parse_quantity(v)
            assert requests == {k: parse_quantity(v) for k, v in comp["podResources"].items()}, p["metadata"]["name"]
    assert sum(len(pods_of(c["selector"])) for c in predicted["components"]) == predicted["pods"]


def test_jobset_runs_on_the_real_controller_from_pending_to_completed(ops, tmp_path):
    for name in NAMES:
        ops.wipe(name)
    ops.nodes("east", count=2, prefix="e-", gpus=8, kwok=True)
    ops.nodes("west", count=1, prefix="w-", gpus=8, kwok=True)       # too small: placer picks east
    ns = ops.unique("train")
    for name in NAMES:
        ops.namespace(name, ns)
    obj = jobset("train", ns, replicas=2, pods=2, gpus=4, run_for="8s")
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(obj))

    predicted = describe(ops, tmp_path, "-f", str(path))
    assert predicted["phase"] == "Pending" and predicted["pods"] == 4

    r = placer(ops, tmp_path, "submit", "-f", str(path), "-o", "json", "--time-limit", "5")
    out = json.loads(r.stdout)
    assert r.exit_code == 0, r.output
    (placement,) = out["placements"]
    assert placement["cluster"] == "east"
    # admitted by the real webhook, which defaults what placer left out
    created = ops.client("east").get("jobsets", "train", ns)
    rjob = created["spec"]["replicatedJobs"][0]
    assert rjob["template"]["spec"]["completionMode"] == "Indexed"
    assert created["spec"]["network"]["enableDNSHostnames"] is True

    # the controller's pods: 2 Jobs x 2 pods, each with the template's requests, all bound on east
    selector = f"{JOBSET_NAME}=train,{RJOB_NAME}=workers"
    pods = ops.wait_bound("east", ns, 4, selector, timeout=120)
    assert len(pods) == 4
    assert {p["spec"]["nodeName"] for p in pods} <= {"e-0", "e-1"}
    for p in pods:
        (c,) = p["spec"]["containers"]
        assert c["resources"]["requests"] == {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "4"}
        assert p["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert ops.pods("west", ns) == []
    matches_describe(predicted, lambda sel: ops.pods("east", ns, sel))
    assert sorted(p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] for p in pods) == ["0", "0", "1", "1"]

    # KWOK runs them, then completes them; placer's phase follows the real JobSet status
    wait_for(lambda: all((p.get("status") or {}).get("phase") == "Running" and p["status"].get("podIP")
                         for p in ops.pods("east", ns, selector)) or None, 60, "pods Running")
    assert phase(ops, tmp_path, "train") in ("Initializing", "Running")
    wait_for(lambda: phase(ops, tmp_path, "train") == "Running" or
             phase(ops, tmp_path, "train") == "Completed" or None, 60, "placer says Running")
    wait_for(lambda: phase(ops, tmp_path, "train") == "Completed" or None, 120, "placer says Completed")
    live = describe(ops, tmp_path, "jobset/train", "-n", ns, "--context", "east", "--kubeconfig", str(ops.kubeconfig))
    assert live["phase"] == "Completed"
    status = ops.client("east").get("jobsets", "train", ns)["status"]
    assert status.get("terminalState") == "Completed"
    assert all((p.get("status") or {}).get("phase") == "Succeeded" for p in ops.pods("east", ns, selector))
