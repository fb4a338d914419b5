"""Steering (issue 22): the node affinity prepare_objects writes into each pod template toward
the nodes the plan chose for that template's pods, merged with the user's own (ANDed into
every term, nothing dropped), per the cluster entry's `steer`. Placements are written by hand:
these tests do not depend on the solver. The real scheduler's side is in
tests/real/test_real_steer.py."""
from __future__ import annotations

import copy

import pytest

from placer import actuate as A
from placer.actuate.steer import ANN_NODES, nodes_by_workload, nodes_of, with_required_nodes
from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret
from placer.inputs.clusters_file import parse_clusters
from placer.inputs.manifests import Document, classify, group
from placer.model.errors import InputError
from placer.model.plan import Placement
from placer.model.workload import WorkloadRef
from tests.definitions.catalog_helpers import example_object as example

EAST = {"name": "east", "context": "east"}


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def prepare(cat, obj, nodes, entry=EAST):
    (g,) = group(classify([Document(obj, "f.yaml", 1)], cat))
    w = next(x for x in g.workloads if x.kind == obj["kind"])
    objects = A.prepare_objects(g, entry, cat, plan_id="p", nodes={w.ref: nodes})
    return next(o for o in objects if o["kind"] == obj["kind"])


def by_name(node: str) -> dict:
    return {"key": "metadata.name", "operator": "In", "values": [node]}


def required_terms(template: dict) -> list[dict]:
    return template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]


def jobset_with_two_jobs() -> dict:
    js = example("JobSet")
    second = copy.deepcopy(js["spec"]["replicatedJobs"][0])
    second["name"] = "evaluator"
    js["spec"]["replicatedJobs"].append(second)
    return js


def test_each_template_gets_the_nodes_planned_for_its_own_pods(cat):
    js = jobset_with_two_jobs()
    out = prepare(cat, js, {"replicatedJob/trainer": ("n-1", "n-2"), "replicatedJob/evaluator": ("n-3",)})
    t0, t1 = (rj["template"]["spec"]["template"] for rj in out["spec"]["replicatedJobs"])
    assert required_terms(t0) == [{"matchFields": [by_name("n-1")]}, {"matchFields": [by_name("n-2")]}]
    assert required_terms(t1) == [{"matchFields": [by_name("n-3")]}]
    assert nodes_of(out) == {"replicatedJob/trainer": ("n-1", "n-2"), "replicatedJob/evaluator": ("n-3",)}


def test_the_users_terms_are_anded_with_each_node_and_nothing_is_dropped(cat):
    job = example("Job")
    user = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}],
             "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n-9"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "fast", "operator": "Exists"}]}}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    job["spec"]["template"]["spec"]["affinity"] = copy.deepcopy(user)
    out = prepare(cat, job, {"job/eval-mmlu": ("n-1", "n-2")})
    aff = out["spec"]["template"]["spec"]["affinity"]
    a, b = user["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    # (pool a OR pool b and not n-9) AND (n-1 OR n-2): one term per pair
    assert required_terms(out["spec"]["template"]) == [
        {**a, "matchFields": [by_name("n-1")]}, {**a, "matchFields": [by_name("n-2")]},
        {**b, "matchFields": [*b["matchFields"], by_name("n-1")]},
        {**b, "matchFields": [*b["matchFields"], by_name("n-2")]}]
    assert aff["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == \
        user["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert aff["podAntiAffinity"] == user["podAntiAffinity"]
    assert job["spec"]["template"]["spec"]["affinity"] == user            # the source is untouched


def test_steering_again_is_idempotent():
    once = with_required_nodes(None, ["n-1", "n-2"])
    assert with_required_nodes(once, ["n-1", "n-2"]) == once


def test_preferred_and_off(cat):
    job = example("Job")
    pref = prepare(cat, job, {"job/eval-mmlu": ("n-1", "n-2")}, {**EAST, "steer": "preferred"})
    aff = pref["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in aff
    assert aff["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 100, "preference": {"matchFields": [by_name("n-1")]}},
        {"weight": 100, "preference": {"matchFields": [by_name("n-2")]}}]
    off = prepare(cat, job, {"job/eval-mmlu": ("n-1",)}, {**EAST, "steer": "off"})
    assert off["spec"]["template"]["spec"].get("affinity") == job["spec"]["template"]["spec"].get("affinity")
    assert ANN_NODES not in off["metadata"].get("annotations", {})


def test_off_by_default_where_kueue_tas_chooses_the_nodes(cat):
    job = example("Job")
    entry = {**EAST, "topologyHandoff": "kueue"}
    assert A.handoff_of(entry).steer == "off"
    assert A.handoff_of({**entry, "steer": "required"}).steer == "required"
    assert A.handoff_of(EAST).steer == "required"
    out = prepare(cat, job, {"job/eval-mmlu": ("n-1",)}, entry)
    assert ANN_NODES not in out["metadata"].get("annotations", {})


def test_a_template_the_plan_gave_no_pod_is_left_alone(cat):
    js = jobset_with_two_jobs()
    out = prepare(cat, js, {"replicatedJob/trainer": ("n-1",)})
    t0, t1 = (rj["template"]["spec"]["template"] for rj in out["spec"]["replicatedJobs"])
    assert required_terms(t0) == [{"matchFields": [by_name("n-1")]}]
    assert "affinity" not in t1["spec"]


def test_nodes_by_workload_per_template_on_one_cluster():
    ref = WorkloadRef("batch", "Job", "t", "a")
    east = Placement("t/a", "Job", "g", "east", 8, 3, 0, {"n-2": {"job/0": 1}, "n-1": {"job/0": 2, "x/0": 0}}, ref=ref)
    west = Placement("t/a", "Job", "g", "west", 8, 3, 0, {"w-1": {"job/0": 3}}, ref=ref)
    assert nodes_by_workload([east, west], "east") == {ref: {"job/0": ("n-1", "n-2")}}
    assert nodes_by_workload([east, west], "west") == {ref: {"job/0": ("w-1",)}}


def test_the_nodes_stay_for_the_same_demand_and_go_when_an_edit_changes_it(cat):
    job = example("Job")
    out = prepare(cat, job, {"job/eval-mmlu": ("n-1",)})
    same = interpret(job, cat)
    assert nodes_of(out, same) == {"job/eval-mmlu": ("n-1",)}
    grown = copy.deepcopy(job)
    grown["spec"]["parallelism"] = grown["spec"]["completions"] = 4
    assert nodes_of(out, interpret(grown, cat)) == {}


def test_nodes_of_a_copy_without_or_with_a_broken_annotation():
    assert nodes_of({"metadata": {}}) == {}
    assert nodes_of({"metadata": {"annotations": {ANN_NODES: "{not json"}}}) == {}


def test_an_unknown_steer_value_is_bad_input_naming_the_field():
    with pytest.raises(InputError, match=r"clusters\[0\]\.steer"):
        parse_clusters({"clusters": [{"name": "east", "context": "east", "steer": "always"}]}, "c.yaml")


def test_a_create_in_flight_counts_on_its_planned_nodes():
    """The daemon counts a create still in flight as committed demand (`pinned`): an arrival
    planned before the copy reaches its cluster's cache must not be put on the node the copy's
    pods are steered to. Unpinned, the solver is free to re-place the committed pod and puts
    the arrival on the very node the copy will take (the trace run's 2 unbound pods)."""
    from placer.actuate.steer import pinned
    from placer.solve import solve
    from tests.builders import cluster, fleet, group, groups, wl

    f = fleet(cluster("east", "2x8"))
    first, second = (n.name for n in f.clusters[0].nodes)
    a, b = wl("t/a", "1x8"), wl("t/b", "1x8")
    in_flight = pinned(group(a), {a.ref: {a.instances[0].key: (second,)}})
    assert in_flight.workloads[0].instances[0].pod.affinity_terms == (
        {"matchFields": [by_name(second)]},)
    (p,) = solve(f, groups(b), committed=[(in_flight, "east")], workers=1).placements
    assert list(p.nodes) == [first]


def test_instances_sharing_one_template_get_the_union_of_their_nodes(cat):
    """A LeaderWorkerSet without a leader template makes its leaders from workerTemplate too:
    steered per instance, the workers' nodes were ANDed with the leaders' (a term naming two
    nodes, which no node meets), and the real LWS controller's pods stayed Pending."""
    lws = example("LeaderWorkerSet")
    lws["spec"]["leaderWorkerTemplate"].pop("leaderTemplate")
    out = prepare(cat, lws, {"leader/leader": ("n-1",), "worker/worker": ("n-1", "n-2")})
    template = out["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert required_terms(template) == [{"matchFields": [by_name("n-1")]}, {"matchFields": [by_name("n-2")]}]
    assert "leaderTemplate" not in out["spec"]["leaderWorkerTemplate"]
