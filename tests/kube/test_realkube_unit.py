"""The fidelity judge's pure parts (no cluster): operator-style pods, verdict comparison,
the benchmark's scenario generator."""

from __future__ import annotations

import os
import sys

import pytest

from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret
from placer.model.plan import Placement, Plan, Summary, Unplaced
from placer.model.reasons import PodTooLarge
from tests.realkube import manifests as M
from tests.realkube.pods import is_native, operator_pods
from tests.realkube.scenario import Outcome, PodState, compare, pod_state

CATALOG = load_catalog()
GPU = "nvidia.com/gpu"


@pytest.mark.parametrize("obj", [
    M.jobset("js", [("workers", 2, 2, M.pod_spec({GPU: "4"})), ("driver", 1, 1, M.pod_spec({"cpu": "1"}))]),
    M.leaderworkerset("lws", 2, 3, M.pod_spec({GPU: "2"}), leader=M.pod_spec({"cpu": "2"})),
    M.leaderworkerset("lws1", 1, 2, M.pod_spec({GPU: "2"})),
    M.raycluster("ray", M.pod_spec({"cpu": "2"}), 3, M.pod_spec({GPU: "1"})),
    M.pytorchjob("pt", 2, M.pod_spec({GPU: "8"}, init=[{"cpu": "4"}], sidecars=[(0, {"cpu": "1"})])),
], ids=lambda o: o["kind"])
def test_operator_pods_follow_the_interpretation(obj):
    w = interpret(obj, CATALOG)
    pods = operator_pods(w, CATALOG)
    assert not is_native(obj) and len(pods) == w.pods
    assert len({p["metadata"]["name"] for p in pods}) == len(pods)
    for inst in w.instances:
        mine = [p for p in pods if inst.selects(p["metadata"]["labels"])]
        assert len(mine) >= inst.pods, inst.key          # labelled as the operator labels them
    gpus = [int(p["spec"]["containers"][0]["resources"]["requests"].get(GPU, 0)) for p in pods]
    assert gpus == sorted(gpus, reverse=True)              # biggest first, as placer packs


def test_operator_pods_copy_the_template():
    spec = M.pod_spec({GPU: "2"}, init=[{"cpu": "3"}], terms=[M.term(("tier", "In", "a"))],
                      tolerations=[{"operator": "Exists"}], runtime_class="kata")
    w = interpret(M.jobset("js", [("w", 1, 2, spec)]), CATALOG)
    pod = operator_pods(w, CATALOG)[0]
    for key in ("initContainers", "affinity", "tolerations", "runtimeClassName", "containers"):
        assert pod["spec"][key] == spec[key]


def test_pod_state_reads_binding_and_scheduler_reason():
    bound = {"metadata": {"name": "a"}, "spec": {"nodeName": "n1"}, "status": {}}
    stuck = {"metadata": {"name": "b"}, "spec": {}, "status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]}}
    assert pod_state(bound) == PodState("a", "n1", None)
    assert pod_state(stuck) == PodState("b", None, "Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")


def _plan(placed: bool) -> Plan:
    s = Summary(1, int(placed), 8, 8 if placed else 0, 0.0, True, "optimal")
    if placed:
        return Plan((Placement("ns/w", "Job", "g", "c", 8, 1, 0, {"n1": {"job/w": 1}}),), (), s)
    return Plan((), (Unplaced("ns/w", "Job", "g", 8, 1, 0, {"c": PodTooLarge("job/w", GPU, 8, 4, "")}),), s)


BOUND = PodState("w-0", "n1", None)
STUCK = PodState("w-1", None, "Unschedulable: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")


@pytest.mark.parametrize("placed,pods,expected,timed_out,agree", [
    (True, (BOUND,), 1, False, True),
    (True, (BOUND, STUCK), 2, False, False),          # placer says fits, a pod stays Pending
    (False, (STUCK,), 1, False, True),
    (False, (BOUND,), 1, False, False),               # placer refuses, the scheduler binds
    (True, (BOUND,), 2, True, False),                 # a pod was never created
    (False, (), 1, False, True),                      # refused by the API server (below)
    (True, (), 1, False, False),
])
def test_compare_both_ways(placed, pods, expected, timed_out, agree):
    refused = () if pods or timed_out else ("pod w-0: pod rejected: RuntimeClass \"x\" not found",)
    v = compare("s", "c", _plan(placed), Outcome(pods, expected, 1.0, timed_out, (), refused))
    assert v.agree is agree and v.placer_fits is placed
    if not agree:
        assert v.problems and all(isinstance(p, str) for p in v.problems)


def test_benchmark_scenarios_are_seeded_and_interpretable():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    from collections import Counter

    import fidelity
    a = [fidelity.scenario(1, i, Counter()) for i in range(40)]
    b = [fidelity.scenario(1, i, Counter()) for i in range(40)]
    assert a == b and a != [fidelity.scenario(2, i, Counter()) for i in range(40)]
    for s in a:
        assert interpret(s.workload, CATALOG).pods >= 1
        assert {b.node for b in s.bound} <= {n.name for n in s.nodes}


def test_pods_of_definitions_with_fields_keep_the_template_rest():
    """RayCluster's head takes its containers from a field (the autoscaler sidecar): the pod
    still carries the template's RuntimeClass, with the interpreted requests and constraints."""
    head = M.pod_spec({GPU: "1", "cpu": "2"}, runtime_class="pool", tolerations=[{"operator": "Exists"}])
    w = interpret(M.raycluster("ray", head, 1, M.pod_spec({"cpu": "1"})), CATALOG)
    pod = next(p for p in operator_pods(w, CATALOG) if "head" in p["metadata"]["name"])
    assert pod["spec"]["runtimeClassName"] == "pool" and pod["spec"]["tolerations"] == [{"operator": "Exists"}]
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {GPU: "1", "cpu": "2000m"}
