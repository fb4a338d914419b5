"""Gangs predicted before the pods exist: the shortcut for plain key paths (no pod built per
replica combination) judged against the full prediction of the same definition."""

from __future__ import annotations

import copy

import pytest
import yaml

from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret
from tests.definitions.test_karta_lint import example, fixture


@pytest.mark.parametrize("name,example_name,kind", [
    ("test-leaderworkerset", "leaderworkerset", "LeaderWorkerSet"), ("test-jobset", "jobset", "JobSet"),
    ("test-pytorchjob", "pytorchjob", "PyTorchJob")])
def test_gangs_known_without_building_each_pod_equal_the_full_prediction(name, example_name, kind, tmp_path):
    """Plain key paths skip building each predicted pod; a filter that keeps every pod forces the
    full evaluation, the judge here: both must give the same gangs."""
    karta = fixture(name)
    full = copy.deepcopy(karta)
    full["metadata"]["name"] = name + "-full"
    for group in full["spec"]["optimizationInstructions"]["gangScheduling"]["podGroups"]:
        for member in group["members"]:
            member["filters"] = ["true"]
    (tmp_path / "fast").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "fast" / "k.yaml").write_text(yaml.safe_dump(karta))
    (tmp_path / "full" / "k.yaml").write_text(yaml.safe_dump(full))
    fast_cat = load_catalog([tmp_path / "fast"], builtin=False)
    full_cat = load_catalog([tmp_path / "full"], builtin=False)
    obj = example(example_name, kind)
    for replicas in (1, 3, 7):
        o = copy.deepcopy(obj)
        if "replicas" in o["spec"]:
            o["spec"]["replicas"] = replicas
        for spec in o["spec"].get("workerGroupSpecs", []):
            spec["replicas"] = replicas
        gangs = interpret(o, fast_cat).gangs
        assert gangs and gangs == interpret(o, full_cat).gangs


def test_a_key_that_cannot_be_predicted_makes_one_gang_and_says_which(tmp_path):
    from placer.definitions.warnings import definition_warnings
    karta = fixture("test-jobset")
    member = karta["spec"]["optimizationInstructions"]["gangScheduling"]["podGroups"][0]["members"][0]
    member["groupByKeyPaths"] = ['.metadata.labels["controller-uid"]']      # an owner UID: unknown before
    (tmp_path / "k.yaml").write_text(yaml.safe_dump(karta))
    catalog = load_catalog([tmp_path], builtin=False)
    obj = example("jobset", "JobSet")
    w = interpret(obj, catalog)
    assert [(g.name, g.pods) for g in w.gangs] == [(obj["metadata"]["name"], w.pods)]
    served = catalog.lookup(obj["apiVersion"], "JobSet")
    assert definition_warnings(served, obj) == [
        f"definition test-jobset ({tmp_path / 'k.yaml'}): gang key .metadata.labels[\"controller-uid\"] cannot be "
        "predicted before the pods exist; the workload is one gang"]
