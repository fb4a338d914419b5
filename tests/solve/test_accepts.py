"""What each target accepts, in the solver: a cluster that does not serve a workload's kind
or lacks a PriorityClass its pods name is never chosen, and says why in words; what a submit
creates there first (namespaces, PriorityClasses the files bring) is part of the plan."""
from __future__ import annotations

import dataclasses

from placer.model.fleet import Fleet
from placer.solve import solve
from tests.builders import cluster, group, wl

JOBSET = "jobset.x-k8s.io/v1alpha2/JobSet"


def _solve(fleet, *groups):
    return solve(fleet, list(groups), time_limit=5, workers=1)


def _with_class(w, name):
    insts = tuple(dataclasses.replace(i, pod=dataclasses.replace(i.pod, priority_class_name=name))
                  for i in w.instances)
    return dataclasses.replace(w, instances=insts)


def test_the_cluster_that_serves_the_kind_is_chosen_and_the_other_says_why():
    # east comes first and has room: without knowing what each serves, the plan chose it
    fleet = Fleet((dataclasses.replace(cluster("east", "2x8"), serves=frozenset()),
                   dataclasses.replace(cluster("west", "2x8"), serves=frozenset({JOBSET}))))
    plan = _solve(fleet, group(wl("ml/train", "2x4")), group(wl("ml/big", "4x8")))
    assert [(p.workload, p.cluster) for p in plan.placements] == [("ml/train", "west")]
    (big,) = plan.unplaced
    assert big.reasons["east"].render() == "does not serve JobSet (jobset.x-k8s.io/v1alpha2); install its operator there"
    assert big.reasons["east"].code == "DoesNotServe"
    assert big.reasons["west"].code != "DoesNotServe"


def test_no_cluster_serving_the_kind_leaves_it_unplaced_with_a_reason_per_cluster():
    fleet = Fleet(tuple(dataclasses.replace(cluster(n, "2x8"), serves=frozenset({"kubeflow.org/v1/PyTorchJob"}))
                        for n in ("east", "west")))
    plan = _solve(fleet, group(wl("ml/train", "1x1")))
    assert plan.placements == () and [u.workload for u in plan.unplaced] == ["ml/train"]
    assert {c: r.code for c, r in plan.unplaced[0].reasons.items()} == {"east": "DoesNotServe", "west": "DoesNotServe"}


def test_built_in_kinds_need_no_declaration_and_unknown_means_accepting():
    fleet = Fleet((dataclasses.replace(cluster("east", "1x8"), serves=frozenset()), cluster("west", "1x8")))
    job = dataclasses.replace(wl("ml/job", "1x4", kind="Job"), api_version="batch/v1")
    plan = _solve(fleet, group(job), group(wl("ml/js", "1x8")))
    assert {p.workload: p.cluster for p in plan.placements} == {"ml/job": "east", "ml/js": "west"}


def test_a_missing_priority_class_excludes_the_cluster_unless_the_submission_brings_it():
    east = dataclasses.replace(cluster("east", "2x8"), priority_classes=frozenset({"low"}),
                               namespaces=frozenset({"default"}))
    west = dataclasses.replace(cluster("west", "2x8"), priority_classes=frozenset({"prod-high"}),
                               namespaces=frozenset({"default", "ml"}))
    w = _with_class(wl("ml/serve", "1x4"), "prod-high")
    plan = _solve(Fleet((east, west)), group(w))
    assert [(p.cluster, p.creates) for p in plan.placements] == [("west", ())]
    # nothing fits on west: east's reason names the class
    plan = _solve(Fleet((east, west)), group(_with_class(wl("ml/serve", "3x8"), "prod-high")))
    assert plan.unplaced[0].reasons["east"].render() == (
        "has no PriorityClass prod-high (pods of ml/serve name it); create it there, or submit it with the workload")
    # the files bring it: east may take it, and the plan says what submit creates there first
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "prod-high"},
          "value": 1000}
    brought = dataclasses.replace(group(w), brings=(pc,))
    plan = _solve(Fleet((east, west)), brought)
    assert [(p.cluster, p.creates) for p in plan.placements] == [
        ("east", ("Namespace ml", "PriorityClass prod-high"))]
    assert plan.placements[0].to_dict()["creates"] == ["Namespace ml", "PriorityClass prod-high"]


def test_builtin_priority_classes_are_everywhere():
    east = dataclasses.replace(cluster("east", "1x8"), priority_classes=frozenset())
    plan = _solve(Fleet((east,)), group(_with_class(wl("ml/x", "1x1"), "system-cluster-critical")))
    assert [p.cluster for p in plan.placements] == ["east"]


def test_what_would_make_it_fit_never_proposes_a_cluster_that_would_refuse_it():
    from placer.solve.options import what_would_fit

    # east does not serve JobSet: adding nodes there, or preempting there, would not help
    fleet = Fleet((dataclasses.replace(cluster("east", "4x8"), serves=frozenset()),
                   dataclasses.replace(cluster("west", "1x8"), serves=frozenset({JOBSET}))))
    groups = [group(wl("ml/big", "2x8"))]
    plan = _solve(fleet, *groups)
    options = what_would_fit(fleet, groups, plan, solve=solve)
    found = [o for opts in options.values() for o in opts.options]
    assert found and all(o.cluster == "west" for o in found if getattr(o, "cluster", None))
