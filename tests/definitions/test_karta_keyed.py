"""Karta gangs grouped in Python (`keyed` gang rows) judged against the same grouping done by
the real jq (`group_by`, `add`, `ascii_downcase`), over the nine real Workload Map definitions
and the test Kartas, on every corpus and example manifest of a kind they serve."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jq
import pytest

from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret, jq_view, json_text, keyed_gangs
from placer.definitions.program import build_program
from placer.inputs.manifests import read_documents
from placer.model.errors import EvaluationError
from tests.definitions.karta_helpers import EXAMPLES, FIXTURES, shared_karta

# the grouping as jq did it before it moved to Python: the judge
_JQ_GROUPED = ('[$karta_e[] | select(.[4] > 0)] | group_by([.[0], .[1]]) | map({name: (.[0][0] + "-" +'
               ' (.[0][1] | join("-")) | ascii_downcase), members: (group_by([.[2], .[3]]) | map({component: .[0][2],'
               ' instance: .[0][3], pods: (map(.[4]) | add)})), minMember: (map(.[5]) | add)})')
_KEYED = "{keyed: $karta_e}"


def _both(definition, obj) -> tuple[list[dict], list[dict]] | None:
    """(gangs grouped by Python, gangs grouped by jq) of one object, or None on a fallback."""
    gangs = definition.definition.gangs or ""
    if _KEYED not in gangs:
        return None
    text = json_text(jq_view(obj))
    keyed = jq.compile(build_program(definition.definition)).input_text(text).first()[-1]
    judged_defn = replace(definition.definition, gangs=gangs.replace(_KEYED, _JQ_GROUPED))
    judged = jq.compile(build_program(judged_defn)).input_text(text).first()[-1]
    if not isinstance(keyed, dict):
        return None                             # a key could not be predicted: one gang, in jq
    python = [{**g, "name": g["name"].lower()} for g in keyed_gangs(keyed["keyed"])]
    for g in python:
        assert g.pop("lowercase") is True
    return python, judged


def _manifests(corpus: Path | None) -> list[dict]:
    dirs = [str(EXAMPLES)] + ([str(corpus.parent / "upstream")] if corpus else [])
    return [d.obj for d in read_documents(dirs) if isinstance(d.obj, dict)]


@pytest.mark.parametrize("where", ["fixtures", "corpus"])
def test_python_grouping_of_predicted_pods_equals_jq_group_by(where):
    corpus = shared_karta()
    if where == "corpus" and corpus is None:
        pytest.skip("../shared/corpus/karta is absent: the Workload Map corpus is read in place")
    kartas = load_catalog([FIXTURES if where == "fixtures" else corpus / "definitions"],  # type: ignore[operator]
                          builtin=False, prefer="karta")
    compared = set()
    for obj in _manifests(corpus):
        definition = kartas.lookup(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if definition is None:
            continue
        for replicas in (None, 0, 1, 3, 5):     # the replica levels are what the keys vary over
            o = json.loads(json.dumps(obj))
            if replicas is not None and isinstance(o.get("spec"), dict) and "replicas" in o["spec"]:
                o["spec"]["replicas"] = replicas
            try:
                found = _both(definition, o)
            except ValueError:                  # a manifest the definition cannot read (lint's job)
                continue
            if found is not None:
                python, judged = found
                assert python == judged, (definition.name, o["metadata"].get("name"))
                assert [g.name for g in interpret(o, kartas).gangs] == [g["name"] for g in judged]
                if judged:
                    compared.add(definition.name)
    # the kinds whose definitions group by key paths were all compared
    expected = {"fixtures": {"test-jobset", "test-leaderworkerset", "test-mpijob", "test-pytorchjob"},
                "corpus": {"apps-nvidia-com-nimservice-v1alpha1", "batch-job-v1", "jobset-x-k8s-io-jobset-v1alpha2",
                           "kubeflow-org-pytorchjob-v1", "leaderworkerset-x-k8s-io-leaderworkerset-v1",
                           "nvidia-com-dynamographdeployment-v1beta1", "ray-io-raycluster-v1"}}[where]
    assert expected <= compared, compared


def _thing_catalog(directory: Path, gangs: str):
    (directory / "d.yaml").write_text(json.dumps({
        "name": "keyed", "matches": [{"apiVersion": "example.com/v1", "kind": "Thing"}],
        "components": [{"name": "main", "replicas": ".spec.replicas", "pod": {"template": ".spec.template"}}],
        "gangs": gangs}))
    return load_catalog([directory], builtin=False)


def test_keyed_gang_rows_sum_per_instance_and_a_bad_row_is_one_evaluation_error(tmp_path):
    obj = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"},
           "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    rows = '["g", ["A"], "main", "0", 2, 2], ["g", ["A"], "main", "0", 1, 0], ["g", ["b"], "main", "0", 0, 0]'
    [gang] = interpret(obj, _thing_catalog(tmp_path, "{keyed: [" + rows + "]}")).gangs
    assert (gang.name, gang.members, gang.min_member) == ("g-a", (("main", "0", 3),), 2)
    with pytest.raises(EvaluationError) as e:
        interpret(obj, _thing_catalog(tmp_path, '{keyed: [["g", ["a"], "main"]]}'))
    assert "bad keyed gang rows" in str(e.value) and "\n" not in str(e.value)
