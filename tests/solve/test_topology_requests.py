"""Topology requests read from the workload's and its pod templates' annotations, through
the definitions (one code path for every kind), and bad values refused with one line."""
from __future__ import annotations

import copy

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret
from placer.model.errors import InputError
from placer.model.topology import KUEUE_PREFERRED, KUEUE_REQUIRED, TopologyRequest
from tests.definitions.catalog_helpers import example_object as example

RACK, BLOCK = "example.com/rack", "example.com/block"
runner = CliRunner()


@pytest.fixture(scope="module")
def cat():
    return load_catalog()



def annotate(obj: dict, **ann: str) -> dict:
    obj["metadata"].setdefault("annotations", {}).update({k.replace("_", "/", 1): v for k, v in ann.items()})
    return obj


def template_annotate(template: dict, key: str, value: str) -> None:
    template.setdefault("metadata", {}).setdefault("annotations", {})[key] = value


def test_workload_annotation_applies_to_every_gang_of_every_kind(cat):
    for kind in ("JobSet", "PyTorchJob", "LeaderWorkerSet", "RayCluster"):
        obj = example(kind)
        obj["metadata"]["annotations"] = {"placer.dev/topology-required": RACK}
        w = interpret(obj, cat)
        assert w.gangs and all(g.topology == (TopologyRequest(RACK, True),) for g in w.gangs), kind
        obj["metadata"]["annotations"] = {"placer.dev/topology-preferred": BLOCK}
        assert all(g.topology == (TopologyRequest(BLOCK, False),) for g in interpret(obj, cat).gangs), kind


def test_no_annotation_no_request(cat):
    assert all(g.topology == () for g in interpret(example("JobSet"), cat).gangs)


def test_kueue_annotation_on_one_replicated_job_covers_that_job_only(cat):
    js = example("JobSet")
    other = copy.deepcopy(js["spec"]["replicatedJobs"][0])
    other["name"] = "evaluator"
    js["spec"]["replicatedJobs"].append(other)
    template_annotate(js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"], KUEUE_REQUIRED, RACK)
    (g,) = interpret(js, cat).gangs
    (req,) = g.topology
    assert req == TopologyRequest(RACK, True, frozenset({"replicatedJob/evaluator"}))
    assert req.covers("replicatedJob", "evaluator") and not req.covers("replicatedJob", "trainer")


def test_kueue_annotations_per_pod_set_of_a_pytorchjob(cat):
    pj = example("PyTorchJob")
    specs = pj["spec"]["pytorchReplicaSpecs"]
    template_annotate(specs["Worker"]["template"], KUEUE_PREFERRED, BLOCK)
    template_annotate(specs["Master"]["template"], KUEUE_REQUIRED, RACK)
    annotate(pj, **{"placer.dev_topology-preferred": "topology.kubernetes.io/zone"})
    (g,) = interpret(pj, cat).gangs
    assert set(g.topology) == {TopologyRequest("topology.kubernetes.io/zone", False),
                               TopologyRequest(RACK, True, frozenset({"replica/Master"})),
                               TopologyRequest(BLOCK, False, frozenset({"replica/Worker"}))}


def test_kueue_annotation_on_lws_leader_template_applies_to_each_group(cat):
    lws = example("LeaderWorkerSet")
    lws["spec"]["replicas"] = 3
    template_annotate(lws["spec"]["leaderWorkerTemplate"]["workerTemplate"], KUEUE_REQUIRED, RACK)
    gangs = interpret(lws, cat).gangs
    assert len(gangs) == 3
    assert all(g.topology == (TopologyRequest(RACK, True, frozenset({"worker"})),) for g in gangs)


def test_kueue_annotation_on_a_ray_worker_group(cat):
    rc = example("RayCluster")
    template_annotate(rc["spec"]["workerGroupSpecs"][0]["template"], KUEUE_REQUIRED, RACK)
    (g,) = interpret(rc, cat).gangs
    assert g.topology == (TopologyRequest(RACK, True, frozenset({"workerGroup"})),)
    second = copy.deepcopy(rc["spec"]["workerGroupSpecs"][0])
    second["groupName"] = "cpu-workers"
    second["template"]["metadata"]["annotations"] = {}
    rc["spec"]["workerGroupSpecs"].append(second)
    (g,) = interpret(rc, cat).gangs
    assert g.topology == (TopologyRequest(RACK, True, frozenset({"workerGroup/gpu-workers"})),)


BAD = [
    ({"placer.dev/topology-required": ""}, "placer.dev/topology-required"),
    ({"placer.dev/topology-required": "Example.com/rack"}, "prefix"),
    ({"placer.dev/topology-preferred": "a/b/c"}, "at most one '/'"),
    ({"placer.dev/topology-preferred": "example.com/" + "r" * 64}, "1-63"),
    ({"placer.dev/topology-required": RACK, "placer.dev/topology-preferred": RACK}, "both name example.com/rack"),
]


def test_required_and_preferred_levels_together_on_the_workload(cat):
    obj = example("JobSet")
    obj["metadata"]["annotations"] = {"placer.dev/topology-required": BLOCK, "placer.dev/topology-preferred": RACK}
    (g,) = interpret(obj, cat).gangs
    assert g.topology == (TopologyRequest(BLOCK, True), TopologyRequest(RACK, False))


def test_both_kueue_annotations_on_one_template_are_refused_as_kueue_does(cat):
    pj = example("PyTorchJob")
    t = pj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    template_annotate(t, KUEUE_REQUIRED, RACK)
    template_annotate(t, KUEUE_PREFERRED, BLOCK)
    with pytest.raises(InputError, match="replica/Worker: pod template annotations .* give one of them, not both"):
        interpret(pj, cat)


@pytest.mark.parametrize("ann,words", BAD)
def test_bad_workload_annotations_are_input_errors(cat, ann, words):
    obj = example("JobSet")
    obj["metadata"]["annotations"] = ann
    with pytest.raises(InputError) as e:
        interpret(obj, cat)
    assert words in str(e.value) and "JobSet" in str(e.value)


def test_bad_template_annotation_names_the_pod_set(cat):
    pj = example("PyTorchJob")
    template_annotate(pj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"], KUEUE_REQUIRED, "rack name")
    with pytest.raises(InputError) as e:
        interpret(pj, cat)
    assert "replica/Worker: pod template annotation kueue.x-k8s.io/podset-required-topology" in str(e.value)


@pytest.mark.parametrize("ann,words", BAD[:2] + BAD[-1:])
def test_bad_annotation_exits_2_with_one_line(tmp_path, ann, words):
    obj = example("JobSet")
    obj["metadata"]["annotations"] = ann
    f = tmp_path / "js.yaml"
    f.write_text(yaml.safe_dump(obj))
    for cmd in (["describe", "-f", str(f)], ["plan", "--dry-run", "-f", str(f)]):
        r = runner.invoke(app, cmd)
        lines = [x for x in r.stderr.strip().splitlines() if not x.startswith("note:")]
        assert r.exit_code == 2 and len(lines) == 1, (cmd, r.stderr)
        assert words in lines[0] and "js.yaml" in lines[0] and "mistral-sft" in lines[0]
