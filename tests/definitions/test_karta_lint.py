"""`placer catalog lint`: Karta definitions evaluated over real manifests with the real jq.
The judge is the definition's own paths on the manifest (read by hand below), never placer's
opinion of the type."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from placer.definitions.karta import parse_karta
from placer.definitions.karta.lint import lint, stream_fallback
from tests.definitions.karta_helpers import EXAMPLES, FIXTURES, ROOT, require_shared


def placer(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placer", *args], capture_output=True, text=True, cwd=ROOT)


def fixture(name: str) -> dict:
    for path in FIXTURES.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            items = doc.get("items", [doc]) if doc else []
            for item in items:
                if item["metadata"]["name"] == name:
                    return copy.deepcopy(item)
    raise KeyError(name)


def example(name: str, kind: str) -> dict:
    return next(d for d in yaml.safe_load_all((EXAMPLES / f"{name}.yaml").read_text()) if d and d["kind"] == kind)


def findings(karta: dict, *objs: dict) -> list[tuple[str, str]]:
    return [(f.field, f.message) for f in lint(parse_karta(karta, "t"), [(f"s{i}", o) for i, o in enumerate(objs)])]


def test_the_nine_real_definitions_show_the_leaderworkerset_group_scale_defect_and_exit_3():
    corpus = require_shared()
    res = placer("catalog", "lint", str(corpus / "definitions"), "-f", str(corpus.parent / "upstream"),
                 "-f", str(EXAMPLES))
    assert res.returncode == 3, res.stderr
    lws = [line for line in res.stdout.splitlines() if "karta leaderworkerset-x-k8s-io-leaderworkerset-v1:" in line]
    # the definition's group scale reads .spec.leaderWorkerTemplate.size,
    # its leader counts .spec.replicas and its worker replicas*(size-1): the library's subtree scale
    # of the gang member `group` is size * (replicas + replicas*(size-1)), for replicas*size pods
    obj = example("leaderworkerset", "LeaderWorkerSet")
    size, replicas = obj["spec"]["leaderWorkerTemplate"]["size"], obj["spec"]["replicas"]
    need, pods = size * (replicas + replicas * (size - 1)), replicas * size
    assert any(f"gang of group needs {need} pods (its subtree scale) but the workload has {pods} pods there "
               f"(sample {EXAMPLES.relative_to(ROOT)}" in line or f"needs {need} pods" in line for line in lws), lws
    assert any("childComponents[0].scaleDefinition.replicasPath: group counts" in line for line in lws)
    # every line names the file, the definition and a field
    assert all(line.startswith(str(corpus / "definitions")) and ": karta " in line and ": spec." in line
               for line in res.stdout.splitlines())
    # the JobSet product over a replicated job without parallelism
    assert any("jobset-x-k8s-io-jobset-v1alpha2: spec.structureDefinition.childComponents[0].scaleDefinition"
               ".replicasPath: a product or sum with an unset field" in line for line in res.stdout.splitlines())


def test_a_clean_definition_exits_0():
    corpus = require_shared()
    res = placer("catalog", "lint", str(corpus / "definitions" / "batch-job-v1.yaml"),
                 str(corpus / "definitions" / "apps-deployment-v1.yaml"), "-f", str(EXAMPLES))
    assert (res.returncode, res.stdout) == (0, ""), res.stdout + res.stderr
    assert "2 definitions" in res.stderr and "0 findings" in res.stderr


def test_a_correct_group_scale_is_clean():
    """The same LeaderWorkerSet definition with the group scaled by the number of groups."""
    karta = fixture("test-leaderworkerset")
    assert findings(karta, example("leaderworkerset", "LeaderWorkerSet")) == []


def test_streams_of_another_length_and_a_fallback_inside_a_stream():
    karta = fixture("test-raycluster")
    worker = next(c for c in karta["spec"]["structureDefinition"]["childComponents"] if c["name"] == "worker")
    worker["scaleDefinition"]["replicasPath"] = ".spec.workerGroupSpecs[].replicas // 1"
    obj = example("raycluster", "RayCluster")
    obj["spec"]["workerGroupSpecs"].append({**obj["spec"]["workerGroupSpecs"][0], "groupName": "extra"})
    del obj["spec"]["workerGroupSpecs"][0]["replicas"]            # one entry omits the field
    found = findings(karta, obj)
    fields = [f for f, _ in found]
    assert any("`//` inside a stream" in m for _, m in found)
    ids = len(obj["spec"]["workerGroupSpecs"])
    assert any(m.startswith(f"yields {ids - 1} values for {ids} instance ids") for _, m in found), found
    assert all(f.endswith("scaleDefinition.replicasPath") for f in fields)


def test_a_fragmented_path_that_cannot_be_assigned_and_a_missing_field():
    karta = fixture("test-deployment")
    root = karta["spec"]["structureDefinition"]["rootComponent"]
    root["specDefinition"] = {"fragmentedPodSpecDefinition": {
        "containersPath": ".spec.template.spec.containers",
        "schedulerNamePath": '.spec.template.spec.schedulerName // "default-scheduler"'}}
    root["scaleDefinition"] = {"replicasPath": ".spec.replicaCount"}
    found = dict(findings(karta, example("deployment", "Deployment")))
    at = "spec.structureDefinition.rootComponent"
    assert found[f"{at}.specDefinition.fragmentedPodSpecDefinition.schedulerNamePath"].startswith(
        "cannot be assigned through")
    assert found[f"{at}.scaleDefinition.replicasPath"] == "reads a field the sample does not have (.spec.replicaCount)"
    assert f"{at}.specDefinition.fragmentedPodSpecDefinition.containersPath" not in found


@pytest.mark.parametrize("path,flagged", [
    (".spec.workerGroupSpecs[].replicas // 1", True),
    (".spec.components[] | (.replicas // 1)", False),
    (".spec.replicatedJobs[] | .replicas // 1", False),
    ('.metadata.labels["a//b"] // "0"', False),
    ("[.items[].n] | add // 0", False),
])
def test_a_fallback_inside_a_stream_is_told_from_one_per_entry(path, flagged):
    assert stream_fallback(path) is flagged


def test_invalid_definitions_and_files_without_a_karta_exit_2_in_one_line(tmp_path):
    bad = fixture("test-job")
    bad["spec"]["structureDefinition"]["rootComponent"]["scaleDefinition"] = {"replicasPath": ".spec.("}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    res = placer("catalog", "lint", str(tmp_path / "bad.yaml"), "-f", str(EXAMPLES / "job.yaml"))
    assert res.returncode == 2 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "bad.yaml" in res.stderr and "replicasPath" in res.stderr
    res = placer("catalog", "lint", str(ROOT / "catalog" / "job.yaml"), "-f", str(EXAMPLES / "job.yaml"))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "no run.ai/v1alpha1 Karta" in res.stderr

