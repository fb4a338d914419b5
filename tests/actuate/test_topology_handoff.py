"""Hand-off of chosen domains: the node affinity (or Kueue annotations) that prepare_objects
writes into the pod templates of each placed gang, per kind, merged with the user's own.
Placements are written by hand: these tests do not depend on the solver."""
from __future__ import annotations

import copy

import pytest

from placer import actuate as A
from placer.actuate.topology import choices_by_workload, hand_off_topology
from placer.definitions.catalog import load_catalog
from placer.inputs.manifests import Document, classify, group
from placer.model.errors import InputError
from placer.model.names import WORKLOAD
from placer.model.plan import Placement
from placer.model.topology import KUEUE_PREFERRED, KUEUE_REQUIRED, TopologyChoice
from placer.model.workload import WorkloadRef
from tests.definitions.catalog_helpers import example_object as example

RACK, BLOCK = "example.com/rack", "example.com/block"
EAST = {"name": "east", "context": "east"}


@pytest.fixture(scope="module")
def cat():
    return load_catalog()



def prepare(cat, obj, choices, entry=EAST):
    (g,) = group(classify([Document(obj, "f.yaml", 1)], cat))
    ref = g.workloads[0].ref
    return A.prepare_objects(g, entry, cat, plan_id="p", topology={ref: tuple(choices)})[0]


def node_terms(template: dict) -> list[dict]:
    return template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]


def rack_in(*racks: str) -> dict:
    return {"key": RACK, "operator": "In", "values": list(racks)}


def test_jobset_every_replicated_job_of_the_gang_gets_the_rack(cat):
    js = example("JobSet")
    second = copy.deepcopy(js["spec"]["replicatedJobs"][0])
    second["name"] = "evaluator"
    js["spec"]["replicatedJobs"].append(second)
    out = prepare(cat, js, [TopologyChoice("mistral-sft", RACK, ("r3",))])
    for rj in out["spec"]["replicatedJobs"]:
        assert node_terms(rj["template"]["spec"]["template"]) == [{"matchExpressions": [rack_in("r3")]}]
    assert "affinity" not in js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]  # a copy


def test_a_pod_set_choice_reaches_only_that_replicated_job(cat):
    js = example("JobSet")
    second = copy.deepcopy(js["spec"]["replicatedJobs"][0])
    second["name"] = "evaluator"
    js["spec"]["replicatedJobs"].append(second)
    out = prepare(cat, js, [TopologyChoice("mistral-sft", RACK, ("r1",), components=("replicatedJob/evaluator",))])
    trainer, evaluator = (rj["template"]["spec"]["template"]["spec"] for rj in out["spec"]["replicatedJobs"])
    assert "affinity" not in trainer
    assert evaluator["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [rack_in("r1")]}]}


def test_pytorchjob_master_and_workers_anded_into_the_users_terms(cat):
    pj = example("PyTorchJob")
    user = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}}
    pj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["affinity"] = copy.deepcopy(user)
    out = prepare(cat, pj, [TopologyChoice("resnet50-ddp", RACK, ("r2",)),
                            TopologyChoice("resnet50-ddp", BLOCK, ("b1", "b0"), required=False)])
    specs = out["spec"]["pytorchReplicaSpecs"]
    assert node_terms(specs["Master"]["template"]) == [{"matchExpressions": [rack_in("r2")]}]
    worker = specs["Worker"]["template"]
    assert node_terms(worker) == [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}, rack_in("r2")]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
         "matchExpressions": [rack_in("r2")]}]
    preferred = worker["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred[0] == user["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert preferred[1] == {"weight": 100, "preference": {"matchExpressions": [
        {"key": BLOCK, "operator": "In", "values": ["b0", "b1"]}]}}


def test_lws_groups_in_different_racks_get_a_pod_affinity_per_group(cat):
    lws = example("LeaderWorkerSet")
    lws["spec"]["replicas"] = 3
    choices = [TopologyChoice("llama70b-pp2-0", RACK, ("r1",)), TopologyChoice("llama70b-pp2-1", RACK, ("r4",)),
               TopologyChoice("llama70b-pp2-2", RACK, ("r1",))]
    out = prepare(cat, lws, choices)
    tpl = out["spec"]["leaderWorkerTemplate"]
    tag = out["metadata"]["labels"][WORKLOAD]
    for name in ("leaderTemplate", "workerTemplate"):
        t = tpl[name]
        assert node_terms(t) == [{"matchExpressions": [rack_in("r1", "r4")]}]
        assert t["spec"]["affinity"]["podAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {WORKLOAD: tag}}, "matchLabelKeys": ["leaderworkerset.sigs.k8s.io/group-key"],
             "topologyKey": RACK}]}
        assert "podAntiAffinity" not in t["spec"]["affinity"]        # two groups share r1
        assert t["metadata"]["labels"][WORKLOAD] == tag


def test_lws_groups_each_in_its_own_rack_are_exclusive(cat):
    lws = example("LeaderWorkerSet")
    lws["spec"]["replicas"] = 2
    out = prepare(cat, lws, [TopologyChoice("llama70b-pp2-0", RACK, ("r1",)),
                             TopologyChoice("llama70b-pp2-1", RACK, ("r4",))])
    t = out["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert t["spec"]["affinity"]["podAntiAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {WORKLOAD: out["metadata"]["labels"][WORKLOAD]}},
         "mismatchLabelKeys": ["leaderworkerset.sigs.k8s.io/group-key"], "topologyKey": RACK}]}


def test_lws_groups_sharing_one_rack_need_no_pod_affinity(cat):
    lws = example("LeaderWorkerSet")
    lws["spec"]["replicas"] = 2
    out = prepare(cat, lws, [TopologyChoice(f"llama70b-pp2-{g}", RACK, ("r1",)) for g in range(2)])
    t = out["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert node_terms(t) == [{"matchExpressions": [rack_in("r1")]}]
    assert "podAffinity" not in t["spec"]["affinity"]


def test_raycluster_per_worker_group(cat):
    rc = example("RayCluster")
    second = copy.deepcopy(rc["spec"]["workerGroupSpecs"][0])
    second["groupName"] = "cpu-workers"
    rc["spec"]["workerGroupSpecs"].append(second)
    out = prepare(cat, rc, [TopologyChoice("embeddings", RACK, ("r7",), components=("workerGroup/gpu-workers",))])
    gpu, cpu = out["spec"]["workerGroupSpecs"]
    assert node_terms(gpu["template"]) == [{"matchExpressions": [rack_in("r7")]}]
    assert "affinity" not in cpu["template"]["spec"] and "affinity" not in out["spec"]["headGroupSpec"]["template"]["spec"]
    whole = prepare(cat, rc, [TopologyChoice("embeddings", RACK, ("r2",))])
    assert node_terms(whole["spec"]["headGroupSpec"]["template"]) == [{"matchExpressions": [rack_in("r2")]}]
    assert all(node_terms(g["template"]) == [{"matchExpressions": [rack_in("r2")]}]
               for g in whole["spec"]["workerGroupSpecs"])


def test_kueue_handoff_writes_podset_annotations_not_affinity(cat):
    pj = example("PyTorchJob")
    pj["spec"]["pytorchReplicaSpecs"]["Master"]["template"].setdefault("metadata", {})["annotations"] = {
        KUEUE_PREFERRED: BLOCK}
    entry = {**EAST, "topologyHandoff": "kueue", "topology": [BLOCK, RACK]}
    out = prepare(cat, pj, [TopologyChoice("resnet50-ddp", BLOCK, ("b1",)), TopologyChoice("resnet50-ddp", RACK, ("r2",))],
                  entry)
    master, worker = (out["spec"]["pytorchReplicaSpecs"][r]["template"] for r in ("Master", "Worker"))
    assert master["metadata"]["annotations"][KUEUE_PREFERRED] == BLOCK          # the user's own stays
    assert KUEUE_REQUIRED not in master["metadata"]["annotations"]
    assert worker["metadata"]["annotations"][KUEUE_REQUIRED] == RACK            # the narrowest level
    assert "affinity" not in master["spec"] and "affinity" not in worker["spec"]


def test_no_choice_no_change_and_choices_from_placements(cat):
    pj = example("PyTorchJob")
    assert prepare(cat, pj, []) == A.prepare_objects(
        group(classify([Document(pj, "f.yaml", 1)], cat))[0], EAST, cat, plan_id="p")[0]
    ref = WorkloadRef("kubeflow.org", "PyTorchJob", "vision", "x")
    c = TopologyChoice("x", RACK, ("r1",))
    ps = [Placement("vision/x", "PyTorchJob", "g", "east", 8, 2, 0, {}, ref=ref, topology=(c,)),
          Placement("vision/y", "PyTorchJob", "g", "east", 8, 2, 0, {}, ref=None)]
    assert choices_by_workload(ps) == {ref: (c,)}


def test_a_choice_for_an_unknown_gang_is_refused(cat):
    with pytest.raises(InputError, match="gang 'nope'"):
        hand_off_topology(example("PyTorchJob"), cat, [TopologyChoice("nope", RACK, ("r1",))])


def test_hand_off_is_idempotent(cat):
    pj = example("PyTorchJob")
    c = [TopologyChoice("resnet50-ddp", RACK, ("r2",))]
    once = hand_off_topology(pj, cat, c)
    assert hand_off_topology(once, cat, c) == once


def test_a_template_counting_no_pods_yet_still_gets_the_affinity(cat):
    rc = example("RayCluster")
    extra = copy.deepcopy(rc["spec"]["workerGroupSpecs"][0])
    extra.update(groupName="burst", replicas=0, minReplicas=0, maxReplicas=4)   # scaled up later
    rc["spec"]["workerGroupSpecs"].append(extra)
    out = prepare(cat, rc, [TopologyChoice("embeddings", RACK, ("r2",))])
    assert all(node_terms(g["template"]) == [{"matchExpressions": [rack_in("r2")]}]
               for g in out["spec"]["workerGroupSpecs"])


def test_the_choices_are_recorded_on_the_copy_and_read_back_for_a_re_apply(cat):
    from placer.actuate.topology import ANN_TOPOLOGY, choices_of
    lws = example("LeaderWorkerSet")
    lws["spec"]["replicas"] = 2
    choices = (TopologyChoice("llama70b-pp2-0", RACK, ("r1",)), TopologyChoice("llama70b-pp2-1", RACK, ("r4",)),
               TopologyChoice("llama70b-pp2-0", BLOCK, ("b0", "b1"), required=False, components=("worker",)))
    first = prepare(cat, lws, choices)
    assert choices_of(first) == choices
    assert prepare(cat, lws, choices_of(first)) == first          # submit again: the same object
    assert choices_of({"metadata": {"annotations": {ANN_TOPOLOGY: "not json"}}}) == ()
    assert choices_of({"metadata": {"annotations": {ANN_TOPOLOGY: '[{"key": 1}]'}}}) == ()
    assert choices_of(None) == ()
    assert ANN_TOPOLOGY not in prepare(cat, lws, [])["metadata"]["annotations"]


def test_podcliqueset_replicas_in_two_racks_are_told_apart_by_their_podgang_label(cat):
    pcs = example("PodCliqueSet")
    pcs["spec"]["replicas"] = 2
    out = prepare(cat, pcs, [TopologyChoice("disagg-llm-0", RACK, ("r1",)), TopologyChoice("disagg-llm-1", RACK, ("r2",))])
    for clique in out["spec"]["template"]["cliques"]:
        affinity = clique["spec"]["podSpec"]["affinity"]
        assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
            {"matchExpressions": [rack_in("r1", "r2")]}]
        (term,) = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["matchLabelKeys"] == ["grove.io/podgang"] and term["topologyKey"] == RACK
        assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
            "mismatchLabelKeys"] == ["grove.io/podgang"]
