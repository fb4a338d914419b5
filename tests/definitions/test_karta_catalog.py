"""Karta (Workload Map) definitions in the catalog: reading them from files (plain, multi-
document, `kind: List`), KAI's precedence, and the same Workload as placer's own definitions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from placer.definitions.catalog import load_catalog, load_definition_file
from placer.definitions.interpret import interpret, patch_pod_templates, suspend_path
from placer.model.workload import Workload
from tests.definitions.catalog_helpers import cond
from tests.definitions.karta_helpers import EXAMPLES, FIXTURES, require_shared

KARTAS = load_catalog([FIXTURES], builtin=False)
BUILTIN = load_catalog()


def example(name: str, kind: str) -> dict:
    return next(d for d in yaml.safe_load_all((EXAMPLES / f"{name}.yaml").read_text()) if d and d["kind"] == kind)


def shape(w: Workload) -> tuple:
    """What must agree between two definitions of one type: pods, GPUs, phase and the
    per-pod requests of each group of pods."""
    per_pod = sorted((i.pods, tuple(sorted(i.pod.requests.items()))) for i in w.instances if i.pods)
    return w.pods, w.gpus, w.phase, per_pod


# (example, kind, the test Karta serving it)
TYPES = [("job", "Job", "test-job"), ("deployment", "Deployment", "test-deployment"),
         ("statefulset", "StatefulSet", "test-statefulset"), ("pod", "Pod", "test-pod"),
         ("jobset", "JobSet", "test-jobset"), ("pytorchjob", "PyTorchJob", "test-pytorchjob"),
         ("mpijob", "MPIJob", "test-mpijob"), ("leaderworkerset", "LeaderWorkerSet", "test-leaderworkerset"),
         ("raycluster", "RayCluster", "test-raycluster")]


def variants(obj: dict) -> list[dict]:
    """The example as written, and scaled up (replica counts doubled where they are ints)."""
    def doubled(o):
        if isinstance(o, dict):
            return {k: (v * 2 if k in ("replicas", "parallelism", "completions") and type(v) is int and v > 0
                        else doubled(v)) for k, v in o.items()}
        return [doubled(v) for v in o] if isinstance(o, list) else o
    return [obj, doubled(obj)]


@pytest.mark.parametrize("name,kind,karta", TYPES)
def test_a_test_karta_gives_what_the_builtin_definition_gives(name, kind, karta):
    for obj in variants(example(name, kind)):
        served = KARTAS.lookup(obj["apiVersion"], kind)
        assert served is not None and served.name == karta and served.format == "karta"
        assert shape(interpret(obj, KARTAS)) == shape(interpret(obj, BUILTIN))


@pytest.mark.parametrize("name,kind,status,phase", [
    ("job", "Job", {"conditions": [cond("Complete")]}, "Completed"),
    ("job", "Job", {"conditions": [cond("Failed")]}, "Failed"),
    ("jobset", "JobSet", {"conditions": [cond("Completed")]}, "Completed"),
    ("pytorchjob", "PyTorchJob", {"conditions": [cond("Created"), cond("Running")]}, "Running"),
    ("pod", "Pod", {"phase": "Running", "conditions": [cond("Ready")]}, "Running"),
    ("pod", "Pod", {"phase": "Running", "conditions": [cond("Ready", "False")]}, "Initializing"),
])
def test_statuses_map_onto_the_same_phases(name, kind, status, phase):
    obj = {**example(name, kind), "status": status}
    assert interpret(obj, KARTAS).phase.value == phase == interpret(obj, BUILTIN).phase.value


def test_an_extra_status_becomes_a_placer_phase_and_keeps_its_name_in_the_reason():
    obj = {**example("jobset", "JobSet"), "status": {"conditions": [cond("Suspended")]}}
    w = interpret(obj, KARTAS)
    assert (w.phase.value, w.reason) == ("Pending", "Suspended")


def test_precedence_is_kais_placer_first_then_kartas_and_prefer_flips_it():
    both = load_catalog([FIXTURES])
    assert both.lookup("batch/v1", "Job").format == "placer"
    preferred = load_catalog([FIXTURES], prefer="karta")
    assert preferred.lookup("batch/v1", "Job").name == "test-job"
    assert preferred.lookup("milvus.io/v1beta1", "Milvus").format == "placer"   # no Karta for it


def test_a_karta_serves_a_kind_placer_has_no_definition_for(tmp_path):
    karta = yaml.safe_load((FIXTURES / "core.yaml").read_text())["items"][0]
    karta["metadata"]["name"] = "widget"
    karta["spec"]["structureDefinition"]["rootComponent"]["kind"] = {"group": "example.com", "version": "v1",
                                                                     "kind": "Widget"}
    (tmp_path / "widget.yaml").write_text(yaml.safe_dump(karta))
    obj = {**example("job", "Job"), "apiVersion": "example.com/v1", "kind": "Widget"}
    w = interpret(obj, load_catalog([tmp_path]))
    assert (w.definition, w.pods, w.gpus) == ("widget", 2, 2)


def test_kind_list_and_multi_document_files_load():
    assert [d.name for d in load_definition_file(FIXTURES / "core.yaml")] == [
        "test-job", "test-deployment", "test-statefulset", "test-pod"]
    assert [d.name for d in load_definition_file(FIXTURES / "training.yaml")] == [
        "test-jobset", "test-pytorchjob", "test-mpijob"]


def test_gangs_are_predicted_from_the_selectors():
    lws = example("leaderworkerset", "LeaderWorkerSet")
    lws = {**lws, "spec": {**lws["spec"], "replicas": 3}}
    gangs = interpret(lws, KARTAS).gangs
    size = lws["spec"]["leaderWorkerTemplate"]["size"]
    assert [(g.name, g.pods) for g in gangs] == [(f"group-{lws['metadata']['name']}-{i}", size) for i in range(3)]
    jobset = interpret(example("jobset", "JobSet"), KARTAS)
    assert [(g.name, g.pods) for g in jobset.gangs] == [("jobset-mistral-sft", jobset.pods)]


def test_pod_templates_are_patched_through_the_kartas_paths():
    obj = example("jobset", "JobSet")
    out = patch_pod_templates(obj, KARTAS, {"labels": {"placer.dev/x": "1"}, "schedulerName": "kai"})
    tpl = out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert tpl["metadata"]["labels"]["placer.dev/x"] == "1" and tpl["spec"]["schedulerName"] == "kai"
    assert suspend_path(obj, KARTAS) == ["spec", "suspend"]


def test_catalog_list_names_the_format_and_source():
    out = subprocess.run([sys.executable, "-m", "placer", "catalog", "list", "--catalog", str(FIXTURES),
                          "--prefer", "karta", "-o", "json"], capture_output=True, text=True, check=True).stdout
    rows = {(r["apiVersion"], r["kind"]): r for r in json.loads(out)}
    job = rows["batch/v1", "Job"]
    assert (job["definition"], job["format"], Path(job["source"]).name) == ("test-job", "karta", "core.yaml")
    assert rows["milvus.io/v1beta1", "Milvus"]["format"] == "placer"


def test_the_nine_real_definitions_load_and_count_what_their_paths_say():
    corpus = require_shared()
    real = load_catalog([corpus / "definitions"], builtin=False)
    assert len({d.name for d in real.by_gvk.values()}) == 9
    for name, kind in [("job", "Job"), ("deployment", "Deployment"), ("jobset", "JobSet"),
                       ("pytorchjob", "PyTorchJob"), ("raycluster", "RayCluster"), ("nimservice", "NIMService"),
                       ("leaderworkerset", "LeaderWorkerSet")]:
        obj = example(name, kind)
        assert interpret(obj, real).pods == interpret(obj, BUILTIN).pods, name
    # Dynamo v1beta1: the Karta counts `replicas` per component and has no multinode nodeCount
    dgd = example("dynamo-v1beta1", "DynamoGraphDeployment")
    expected = sum(c.get("replicas", 1) for c in dgd["spec"]["components"])
    assert interpret(dgd, real).pods == expected
    # Grove: cliques inside a scaling group have no pod spec in the Karta, so they are not counted
    pcs = example("podcliqueset", "PodCliqueSet")
    t = pcs["spec"]["template"]
    grouped = {n for g in t.get("podCliqueScalingGroups", []) for n in g.get("cliqueNames", [])}
    expected = sum((pcs["spec"].get("replicas") or 1) * (c["spec"].get("replicas") or 1)
                   for c in t["cliques"] if c["name"] not in grouped)
    assert interpret(pcs, real).pods == expected


def test_a_directory_is_compiled_again_once_a_file_changes(tmp_path):
    karta = yaml.safe_load((FIXTURES / "core.yaml").read_text())["items"][0]
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(karta))
    first = load_catalog([tmp_path], builtin=False).lookup("batch/v1", "Job")
    assert load_catalog([tmp_path], builtin=False).lookup("batch/v1", "Job") is first     # remembered
    karta["metadata"]["name"] = "test-job-2"
    path.write_text(yaml.safe_dump(karta))
    assert load_catalog([tmp_path], builtin=False).lookup("batch/v1", "Job").name == "test-job-2"
