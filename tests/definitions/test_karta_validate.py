"""Karta validation as Workload Map validates (schema, validator rules, every jq compiled),
one line per problem naming file, definition and field; and `describe` naming the Karta."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import yaml

from placer.definitions.catalog import load_catalog, validate_path
from placer.definitions.interpret import interpret
from placer.definitions.karta import karta_problems
from placer.definitions.warnings import definition_warnings
from placer.model.errors import DefinitionError
from tests.definitions.karta_helpers import EXAMPLES, FIXTURES, require_shared

JOB = yaml.safe_load((FIXTURES / "core.yaml").read_text())["items"][0]
ROOT = "spec.structureDefinition.rootComponent"


def placer(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placer", *args], capture_output=True, text=True)


def broken(change) -> dict:
    doc = copy.deepcopy(JOB)
    change(doc["spec"]["structureDefinition"])
    return doc


HOSTILE = {
    "jq-error": (lambda s: s["rootComponent"]["scaleDefinition"].update(replicasPath=".spec.parallelism |"),
                 f"{ROOT}.scaleDefinition.replicasPath: jq does not compile"),
    "cycle": (lambda s: s.update(childComponents=[{"name": "a", "ownerRef": "b"}, {"name": "b", "ownerRef": "a"}]),
              "spec.structureDefinition.childComponents[0].ownerRef: owner chain a -> b -> a is a cycle"),
    "two-forms": (lambda s: s["rootComponent"]["specDefinition"].update(podSpecPath=".spec.template.spec"),
                  f"{ROOT}.specDefinition: give one pod-spec form, not podTemplateSpecPath and podSpecPath"),
    "unknown-field": (lambda s: s["rootComponent"].update(replicas=3),
                      f"{ROOT}.replicas: Extra inputs are not permitted"),
    "no-status": (lambda s: s["rootComponent"].pop("statusDefinition"),
                  f"{ROOT}.statusDefinition: the root component needs a status definition"),
    "unknown-owner": (lambda s: s.update(childComponents=[{"name": "a", "ownerRef": "nope"}]),
                      "childComponents[0].ownerRef: 'nope' is no component"),
    "path-without-dot": (lambda s: s["rootComponent"]["specDefinition"].update(podTemplateSpecPath="spec.template"),
                         f"{ROOT}.specDefinition.podTemplateSpecPath: jq does not compile 'spec.template'"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_karta_is_rejected_with_one_line_and_nothing_else_breaks(case, tmp_path):
    change, expected = HOSTILE[case]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(broken(change)))
    (tmp_path / "good.yaml").write_text((FIXTURES / "training.yaml").read_text())
    with pytest.raises(DefinitionError) as e:
        validate_path(tmp_path / "bad.yaml")
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"{tmp_path / 'bad.yaml'}: karta test-job: ") and expected in line
    result = placer("catalog", "validate", str(tmp_path / "bad.yaml"), str(tmp_path / "good.yaml"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: {line}"]
    assert "good.yaml: ok (test-jobset, test-pytorchjob, test-mpijob)" in result.stdout
    assert load_catalog([FIXTURES]).lookup("batch/v1", "Job").format == "placer"   # the rest still loads


def test_every_problem_is_listed_for_a_karta_with_several():
    found = karta_problems(broken(lambda s: (s["rootComponent"].pop("statusDefinition"),
                                             s.update(childComponents=[{"name": "job", "ownerRef": "job"}]))))
    assert isinstance(found, list) and len(found) >= 2


def test_the_real_definitions_validate():
    corpus = require_shared()
    result = placer("catalog", "validate", str(corpus / "definitions"))
    assert result.returncode == 0, result.stderr
    assert len([line for line in result.stdout.splitlines() if ": ok (" in line]) == 9


def test_describe_names_the_karta_that_serves_a_kind_only_it_knows(tmp_path):
    karta = yaml.safe_load((FIXTURES / "training.yaml").read_text().split("\n---\n")[0])
    karta["metadata"]["name"] = "widgetset"
    karta["spec"]["structureDefinition"]["rootComponent"]["kind"] = {
        "group": "example.com", "version": "v1", "kind": "WidgetSet"}
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "widgetset.yaml").write_text(yaml.safe_dump(karta))
    obj = next(d for d in yaml.safe_load_all((EXAMPLES / "jobset.yaml").read_text()) if d and d["kind"] == "JobSet")
    obj.update(apiVersion="example.com/v1", kind="WidgetSet")
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(obj))
    result = placer("describe", "-f", str(tmp_path / "w.yaml"), "--catalog", str(catalog), "-o", "json")
    assert result.returncode == 0, result.stderr
    w = json.loads(result.stdout)
    w = w[0] if isinstance(w, list) else w["items"][0] if "items" in w else w
    assert (w["definition"], w["definitionFormat"], w["definitionSource"]) == (
        "widgetset", "karta", str(catalog / "widgetset.yaml"))
    assert (w["pods"], w["gpus"], w["phase"]) == (4, 8, "Pending")
    assert [(g["name"], g["pods"]) for g in w["gangs"]] == [("jobset-mistral-sft", 4)]


def test_a_gang_key_that_cannot_be_predicted_falls_back_to_one_gang_and_says_so():
    corpus = require_shared()
    result = placer("describe", "-f", str(EXAMPLES / "podcliqueset.yaml"), "--catalog", str(corpus / "definitions"),
                    "-o", "json")
    assert result.returncode == 0, result.stderr
    # placer's own PodCliqueSet definition serves first: no fallback there
    assert "warning" not in result.stderr
    with_karta = load_catalog([corpus / "definitions"], prefer="karta")
    obj = next(d for d in yaml.safe_load_all((EXAMPLES / "podcliqueset.yaml").read_text())
               if d and d["kind"] == "PodCliqueSet")
    w = interpret(obj, with_karta)
    assert [g.name for g in w.gangs] == [obj["metadata"]["name"]]
    (warning,) = definition_warnings(with_karta.lookup(obj["apiVersion"], obj["kind"]), obj)
    assert "grove-io-podcliqueset-v1alpha1" in warning
    assert '.metadata.labels["grove.io/podcliqueset-replica-index"]' in warning
