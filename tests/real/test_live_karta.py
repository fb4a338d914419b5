"""A type that only a Workload Map definition (a Karta) describes, registered the way KAI and
Run:ai register types: one `kubectl apply` of the Karta to the real hub. `placer plan` and
`placer submit` with a clusters file naming that hub read it from there, place the workload at
node level, and the real target API server accepts the copy. Before the Karta is applied the kind
is unknown to placer. The real `placer daemon` reads it from the hub too and places a staged
object of that kind. The kartas.run.ai CRD is the real one, read in place from ../shared."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from tests.definitions.karta_helpers import require_shared
from tests.kubeenv import wait_for

pytestmark = pytest.mark.kube

GROUP = "placer-test.dev"

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}

# written for this test: a root component whose pods come from .spec.template, .spec.replicas of them
WIDGET_KARTA = {
    "apiVersion": "run.ai/v1alpha1", "kind": "Karta", "metadata": {"name": "test-widget"},
    "spec": {"structureDefinition": {"rootComponent": {
        "name": "widget",
        "kind": {"group": GROUP, "version": "v1", "kind": "Widget"},
        "specDefinition": {"podTemplateSpecPath": ".spec.template"},
        "scaleDefinition": {"replicasPath": ".spec.replicas"},
        "statusDefinition": {"conditionsDefinition": {"path": ".status.conditions"},
                             "statusMappings": {"running": [{"byConditions": [{"type": "Ready",
                                                                               "status": "True"}]}]}}}}}}


def widget(name: str, ns: str, replicas: int, gpus: int) -> dict:
    resources = {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "serve", "image": "registry.example/serve:1", "resources": resources}]}}}}


def write(path: Path, *docs: dict) -> Path:
    path.write_text(yaml.safe_dump_all(docs))
    return path


def placer(real, clusters: Path, *args: str):
    return CliRunner().invoke(app, [*args, "--kubeconfig", str(real.kubeconfig), "--clusters", str(clusters),
                                    "-o", "json"])


@pytest.fixture
def hub_with_kinds(real, tmp_path):
    """The Widget CRD on the hub and both targets, the real kartas.run.ai CRD on the hub (no Karta
    yet); east has room for 2 pods of 4 GPUs, west for 3."""
    corpus = require_shared()
    crd = write(tmp_path / "widget-crd.yaml", WIDGET_CRD)
    for name in ("hub", "east", "west"):
        real.install_crds(name, [crd])
    real.install_crds("hub", [corpus / "crd" / "run.ai_kartas.yaml"])
    real.kubectl("--context", "hub", "delete", "kartas", WIDGET_KARTA["metadata"]["name"], "--ignore-not-found")
    real.nodes("east", count=2, prefix="ke", gpus=4)
    real.nodes("west", count=3, prefix="kw", gpus=4)
    return real


def test_a_karta_applied_to_the_hub_makes_its_kind_plannable_and_submittable(hub_with_kinds, tmp_path):
    real = hub_with_kinds
    ns = real.unique("karta")
    for name in ("east", "west"):
        real.namespace(name, ns)
    clusters = write(tmp_path / "clusters.yaml", {"hub": {"context": "hub"},
                                                  "clusters": [{"name": "east", "context": "east"},
                                                               {"name": "west", "context": "west"}]})
    manifest = write(tmp_path / "widget.yaml", widget("w1", ns, replicas=3, gpus=4))

    # no definition anywhere yet: the kind is unknown, bad input
    before = placer(real, clusters, "plan", "-f", str(manifest))
    assert before.exit_code == 2, before.output
    assert "Widget" in before.output

    real.kubectl("--context", "hub", "apply", "-f", "-", input=yaml.safe_dump(WIDGET_KARTA))
    planned = placer(real, clusters, "plan", "-f", str(manifest))
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    (placement,) = plan["placements"]
    # 3 pods x 4 GPUs: only west's nodes hold three (east has room for two)
    assert placement["cluster"] == "west" and placement["gpus"] == 12, placement

    submitted = placer(real, clusters, "submit", "-f", str(manifest))
    assert submitted.exit_code == 0, submitted.output
    copy = json.loads(real.kubectl("--context", "west", "get", "widgets", "w1", "-n", ns, "-o", "json").stdout)
    assert copy["spec"]["replicas"] == 3
    assert copy["metadata"]["annotations"]["placer.dev/placed-cluster"] == "west"
    missing = real.kubectl("--context", "east", "get", "widgets", "-n", ns, "-o", "json").stdout
    assert json.loads(missing)["items"] == []


def test_a_karta_never_takes_a_kind_from_placers_own_definition(hub_with_kinds, tmp_path):
    """KAI's precedence: a Karta on the hub claiming Job does not replace the built-in Job definition
    (a Karta that counted one pod per Job would otherwise halve the GPUs below)."""
    real = hub_with_kinds
    one_pod_job = json.loads(json.dumps(WIDGET_KARTA))
    one_pod_job["metadata"]["name"] = "test-one-pod-job"
    root = one_pod_job["spec"]["structureDefinition"]["rootComponent"]
    root["kind"] = {"group": "batch", "version": "v1", "kind": "Job"}
    root["scaleDefinition"] = {"replicasPath": "1"}
    real.kubectl("--context", "hub", "apply", "-f", "-", input=yaml.safe_dump(one_pod_job))
    try:
        clusters = write(tmp_path / "clusters.yaml", {"hub": {"context": "hub"},
                                                      "clusters": [{"name": "west", "context": "west"}]})
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
               "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {
                   "restartPolicy": "Never", "containers": [{"name": "c", "image": "x", "resources": {
                       "requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}}]}}}}
        res = placer(real, clusters, "plan", "-f", str(write(tmp_path / "job.yaml", job)))
        assert res.exit_code == 0, res.output
        (placement,) = json.loads(res.stdout)["placements"]
        assert placement["gpus"] == 8
    finally:
        real.kubectl("--context", "hub", "delete", "kartas", "test-one-pod-job", "--ignore-not-found")


def start_daemon(real, tmp_path: Path, staging: str) -> tuple[subprocess.Popen, Path]:
    """The real `placer daemon` as a user runs it, on the hub and both targets; its log file."""
    clusters = write(tmp_path / "clusters.yaml", {"hub": {"context": "hub", "stagingNamespace": staging},
                                                  "clusters": [{"name": "east", "context": "east"},
                                                               {"name": "west", "context": "west"}]})
    log = tmp_path / "daemon.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "placer", "daemon", "--clusters", str(clusters),
                                 "--kubeconfig", str(real.kubeconfig), "--batch-window", "0.1", "--time-limit", "2"],
                                stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return proc, log


def widgets_on(real, cluster: str, ns: str) -> list:
    out = real.kubectl("--context", cluster, "get", "widgets", "-n", ns, "-o", "json", check=False)
    return json.loads(out.stdout)["items"] if out.returncode == 0 else []


def test_the_daemon_places_a_staged_kind_that_only_a_karta_on_the_hub_describes(hub_with_kinds, tmp_path):
    real = hub_with_kinds
    staging = real.namespace("hub", real.unique("karta-staging"))
    real.kubectl("--context", "hub", "apply", "-f", "-", input=yaml.safe_dump(WIDGET_KARTA))
    proc, log = start_daemon(real, tmp_path, staging)
    try:
        real.kubectl("--context", "hub", "apply", "-f", "-", input=yaml.safe_dump(widget("w2", staging, 3, 4)))
        wait_for(lambda: widgets_on(real, "west", staging) or proc.poll() is not None, 120,
                 "the Widget's copy on west")
        assert proc.poll() is None, log.read_text()[-2000:]
        (copy,) = widgets_on(real, "west", staging)
        assert copy["spec"]["replicas"] == 3 and widgets_on(real, "east", staging) == []
        staged = json.loads(real.kubectl("--context", "hub", "get", "widgets", "w2", "-n", staging,
                                         "-o", "json").stdout)
        assert staged["metadata"]["annotations"]["placer.dev/placed-cluster"] == "west"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def test_the_daemon_follows_a_karta_applied_after_it_started(hub_with_kinds, tmp_path):
    """Issue 19: the daemon is running, with no definition for Widget, and a Widget is already
    staged; then the Karta is applied to the hub. Without a restart the daemon reads it (on its
    discovery poll), watches the kind and places the Widget; the real west API server holds the copy."""
    real = hub_with_kinds
    staging = real.namespace("hub", real.unique("karta-late"))
    proc, log = start_daemon(real, tmp_path, staging)
    try:
        wait_for(lambda: "watching " in log.read_text() or proc.poll() is not None, 120, "the daemon started")
        real.kubectl("--context", "hub", "apply", "-f", "-", input=yaml.safe_dump(widget("w3", staging, 3, 4)))
        real.kubectl("--context", "hub", "apply", "-f", "-", input=yaml.safe_dump(WIDGET_KARTA))
        wait_for(lambda: widgets_on(real, "west", staging) or proc.poll() is not None, 180,
                 "the Widget's copy on west")
        assert proc.poll() is None, log.read_text()[-2000:]
        (copy,) = widgets_on(real, "west", staging)
        assert copy["spec"]["replicas"] == 3 and widgets_on(real, "east", staging) == []
        assert "workload definitions changed: new placer-test.dev/v1/Widget" in log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
