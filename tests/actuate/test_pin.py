"""Pinning (`steer: pinned`, issue 22), the pure part: what prepare_objects writes (the gate, the
plan's counts), which planned node each gated pod gets (`assign`: the plan's count per node less
the template's pods bound or pinned there; a recreated pod takes the slot a finished one left),
and the patch that narrows a gated pod's affinity and lifts its gate. The real API server and
scheduler judge the patch in tests/real/test_real_pin.py."""
from __future__ import annotations

import pytest

from placer import actuate as A
from placer.actuate.steer import ANN_PINNED, PIN_GATE, Seat, assign, counts_by_workload, counts_of, is_gated, pin_patch
from placer.inputs.manifests import Document, classify, group
from placer.model.plan import Placement
from placer.model.workload import WorkloadRef
from tests.actuate.test_steer import EAST, by_name, cat, jobset_with_two_jobs, required_terms  # noqa: F401
from tests.definitions.catalog_helpers import example_object as example

PINNED = {**EAST, "steer": "pinned"}


def prepare(cat, obj, nodes, counts, entry=PINNED):
    (g,) = group(classify([Document(obj, "f.yaml", 1)], cat))
    w = next(x for x in g.workloads if x.kind == obj["kind"])
    objects = A.prepare_objects(g, entry, cat, plan_id="p", nodes={w.ref: nodes},
                                counts={w.ref: counts} if counts is not None else None)
    return next(o for o in objects if o["kind"] == obj["kind"])


# --- what the copy carries ------------------------------------------------------------------

def test_pinned_gates_each_steered_template_and_records_the_plans_counts(cat):  # noqa: F811
    js = jobset_with_two_jobs()
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "other"}]
    counts = {"replicatedJob/trainer": {"n-1": 1, "n-2": 2}, "replicatedJob/evaluator": {"n-2": 1}}
    out = prepare(cat, js, {"replicatedJob/trainer": ("n-1", "n-2"), "replicatedJob/evaluator": ("n-2",)}, counts)
    t0, t1 = (rj["template"]["spec"]["template"] for rj in out["spec"]["replicatedJobs"])
    assert t0["spec"]["schedulingGates"] == [{"name": "other"}, {"name": PIN_GATE}]      # the user's kept
    assert t1["spec"]["schedulingGates"] == [{"name": PIN_GATE}]
    # the required affinity to the union stays: it is what holds if the daemon is gone
    assert required_terms(t0) == [{"matchFields": [by_name("n-1")]}, {"matchFields": [by_name("n-2")]}]
    assert counts_of(out) == counts


def test_pinned_without_counts_is_required_and_other_modes_never_gate(cat):  # noqa: F811
    job = example("Job")
    for entry, counts in ((PINNED, None), ({**EAST, "steer": "required"}, {"job/eval-mmlu": {"n-1": 2}}),
                          ({**EAST, "steer": "preferred"}, {"job/eval-mmlu": {"n-1": 2}})):
        out = prepare(cat, job, {"job/eval-mmlu": ("n-1",)}, counts, entry)
        assert "schedulingGates" not in out["spec"]["template"]["spec"], entry
        assert counts_of(out) == {}
    assert required_terms(prepare(cat, job, {"job/eval-mmlu": ("n-1",)}, None)["spec"]["template"]) == [
        {"matchFields": [by_name("n-1")]}]


def test_counts_by_workload_per_template_and_node_on_one_cluster():
    ref = WorkloadRef("batch/v1", "Job", "ns", "a")
    def at(cluster, nodes):
        return Placement("ns/a", "Job", "g", cluster, 0, 0, 0, nodes, ref=ref)
    p = [at("east", {"n-1": {"job/a": 2}, "n-2": {"job/a": 1, "job/b": 0}}), at("west", {"w-1": {"job/a": 5}})]
    assert counts_by_workload(p, "east") == {ref: {"job/a": {"n-1": 2, "n-2": 1}}}


# --- which node each gated pod gets --------------------------------------------------------

def gated(*names: str) -> list[Seat]:
    return [Seat(n, None, True) for n in names]


def test_each_planned_node_gets_exactly_its_count():
    out = assign({"x": 1, "y": 2}, gated("p-0", "p-1", "p-2"))
    assert sorted(out) == ["p-0", "p-1", "p-2"]
    assert sorted(out.values()) == ["x", "y", "y"]


def test_pods_already_bound_or_pinned_use_up_their_nodes_count():
    seats = [Seat("p-0", "y", False), Seat("p-1", "y", False), *gated("p-2")]   # bound, pinned not yet bound
    assert assign({"x": 1, "y": 2}, seats) == {"p-2": "x"}


def test_a_recreated_pod_takes_the_slot_its_finished_predecessor_left():
    # p-1 failed (its terminal pod is not a seat: the caller leaves finished pods out) and the Job
    # made p-1-retry: it goes where p-1 was, the only node with room left
    seats = [Seat("p-0", "x", False), Seat("p-2", "y", False), *gated("p-1-retry")]
    assert assign({"x": 1, "y": 2}, seats) == {"p-1-retry": "y"}


def test_more_pods_than_the_plan_counted_are_not_pinned():
    seats = [Seat("p-0", "x", False), *gated("p-1", "p-2")]
    assert assign({"x": 1, "y": 1}, seats) == {"p-1": "y", "p-2": None}


def test_a_pod_bound_off_plan_does_not_count_against_a_planned_node():
    seats = [Seat("p-0", "elsewhere", False), *gated("p-1")]
    assert assign({"x": 1}, seats) == {"p-1": "x"}


# --- the patch ---------------------------------------------------------------------------

def gated_pod(terms: list[dict] | None) -> dict:
    spec: dict = {"schedulingGates": [{"name": "other"}, {"name": PIN_GATE}]}
    if terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}, "podAffinity": {"x": 1}}
    return {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7"}, "spec": spec}


def test_the_patch_ands_the_node_into_every_term_and_lifts_only_the_pin_gate():
    user = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
    terms = [{**user, "matchFields": [by_name("n-1")]}, {**user, "matchFields": [by_name("n-2")]}]
    pod = gated_pod(terms)
    assert is_gated(pod)
    patch = pin_patch(pod, "n-2")
    assert patch["metadata"] == {"resourceVersion": "7", "annotations": {ANN_PINNED: "n-2"}}
    assert patch["spec"]["schedulingGates"] == [{"name": "other"}]
    # terms are only added to (KEP-3838): none removed, none of their requirements changed
    assert patch["spec"]["affinity"] == {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{**user, "matchFields": [by_name("n-1"), by_name("n-2")]},
                              {**user, "matchFields": [by_name("n-2")]}]}}}
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"] == terms                                     # the cached pod untouched


@pytest.mark.parametrize("node", [None, "n-1"])
def test_the_last_gate_lifted_is_a_null_and_a_pod_without_terms_gets_one(node):
    pod = gated_pod(None)
    pod["spec"]["schedulingGates"] = [{"name": PIN_GATE}]
    patch = pin_patch(pod, node)
    assert patch["spec"]["schedulingGates"] is None
    if node is None:
        assert "affinity" not in patch["spec"] and "annotations" not in patch["metadata"]
    else:
        assert patch["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [{"matchFields": [by_name("n-1")]}]}
