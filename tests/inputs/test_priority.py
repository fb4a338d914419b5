"""Priority from Kubernetes (issue 12): a PriorityClass named by the pods, Kueue's
WorkloadPriorityClass label over it, placer.dev/priority over both; an unknown class is a
clear input error; classes come from the files, the clusters or Kubernetes' built-ins."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.definitions.catalog import load_catalog
from placer.inputs.manifests import load_groups

runner = CliRunner()


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)


def job(name, gpus=8, pods=1, pc=None, labels=None, annotations=None, ns="ml"):
    meta = {"name": name, "namespace": ns, **({"labels": labels} if labels else {}),
            **({"annotations": annotations} if annotations else {})}
    spec = {"restartPolicy": "Never", "containers": [{"name": "m", "image": "i",
                                                      "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
            **({"priorityClassName": pc} if pc else {})}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                     "template": {"spec": spec}}}


def pclass(name, value, default=False):
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, **({"globalDefault": True} if default else {})}


def wpclass(name, value):
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value}


def write(tmp_path, *docs, name="w.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(list(docs)))
    return str(path)


def priorities(paths, catalog, **kw):
    return {w.name: int(w.annotations.get("placer.dev/priority", 0))
            for g in load_groups(paths, catalog, **kw) for w in g.workloads}


def test_precedence_class_then_kueue_label_then_annotation(tmp_path, catalog):
    kueue = {"kueue.x-k8s.io/priority-class": "urgent"}
    path = write(tmp_path, pclass("high", 1000), wpclass("urgent", 5000),
                 job("by-class", pc="high"), job("by-label", pc="high", labels=kueue),
                 job("by-annotation", pc="high", labels=kueue, annotations={"placer.dev/priority": "7"}),
                 job("nothing"), job("system", pc="system-cluster-critical"))
    got = priorities([path], catalog)
    assert got == {"by-class": 1000, "by-label": 5000, "by-annotation": 7, "nothing": 0,
                   "system": 2_000_000_000}


def test_global_default_covers_pods_naming_no_class(tmp_path, catalog):
    path = write(tmp_path, pclass("base", 50, default=True), job("plain"))
    assert priorities([path], catalog) == {"plain": 50}


@pytest.mark.parametrize("doc,needle", [
    (job("lost", pc="nonexistent"), "priorityClassName 'nonexistent': no such PriorityClass"),
    (job("lost", labels={"kueue.x-k8s.io/priority-class": "ghost"}),
     "label kueue.x-k8s.io/priority-class=ghost: no such WorkloadPriorityClass"),
])
def test_unknown_class_is_a_clear_input_error(tmp_path, doc, needle):
    path = write(tmp_path, doc)
    r = runner.invoke(app, ["plan", "-f", path])
    assert r.exit_code == 2, r.output
    line = r.stderr.strip().splitlines()[-1]
    assert needle in line and "ml/lost" in line and "Traceback" not in r.stderr


def test_the_higher_class_gets_the_capacity(tmp_path):
    """One 8-GPU node, two 8-GPU Jobs: the one whose PriorityClass is higher is placed, the
    other is told its capacity went to higher-priority work (file order favours the low one)."""
    (tmp_path / "c.yaml").write_text(
        "clusters:\n- name: one\n  nodes:\n  - {name: n0, allocatable: {nvidia.com/gpu: 8, cpu: '64', memory: 512Gi}}\n")
    path = write(tmp_path, pclass("low", 10), pclass("high", 100), job("aaa-low", pc="low"), job("zzz-high", pc="high"))
    r = runner.invoke(app, ["plan", "-f", path, "--clusters", str(tmp_path / "c.yaml"), "-o", "json"])
    assert r.exit_code == 3, r.output
    doc = json.loads(r.stdout)
    assert [(p["workload"], p["priority"]) for p in doc["placements"]] == [("ml/zzz-high", 100)]
    [u] = doc["unplaced"]
    assert u["workload"] == "ml/aaa-low" and u["priority"] == 10
    assert "higher-priority" in u["reasons"]["one"] and "ml/zzz-high" in u["reasons"]["one"]


def test_classes_are_read_from_the_target_clusters(fresh_fleet, tmp_path, catalog):
    from placer.kube import Kube
    from placer.ops.context import context_of
    from placer.ops.submit import SubmitRequest, submit
    from tests.kubeapi.builders import gpu_node

    fresh_fleet["alpha"].seed([gpu_node("a0")])
    kube = Kube(str(fresh_fleet.kubeconfig))
    kube.client("alpha").create("priorityclasses.scheduling.k8s.io", pclass("team-high", 300))
    path = write(tmp_path, job("live", pc="team-high", ns="prio-live"))
    alpha = context_of([{"name": "alpha", "context": "alpha"}], catalog, kube)
    result = submit(alpha, SubmitRequest((path,), dry_run=True))
    [p] = result.plan.placements
    assert p.priority == 300
    missing = write(tmp_path, job("lost", pc="team-low", ns="prio-live"), name="lost.yaml")
    with pytest.raises(Exception, match="team-low.*looked in .*context alpha"):
        submit(alpha, SubmitRequest((missing,), dry_run=True))
