"""Catalog definition of LeaderWorkerSet (FACTS.md section 10), manifests written here."""

from __future__ import annotations

import pytest
import yaml

from placer.definitions.interpret import interpret
from placer.model.workload import Phase
from tests.definitions.catalog_helpers import (
    EXAMPLES_DIR,
    catalog,
    check_patch_round_trip,
    cond,
    container,
    gangs,
    pods_by_instance,
    template,
    with_status,
)

LWS = catalog("leaderworkerset")


def lws(*, replicas=None, size=None, leader=None, worker=None, name="vllm", **lwt):
    tpl = {"workerTemplate": worker or template(container("worker", cpu="8", memory="64Gi", gpu=4)), **lwt}
    if size is not None:
        tpl["size"] = size
    if leader is not None:
        tpl["leaderTemplate"] = leader
    spec = {"leaderWorkerTemplate": tpl}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": "serve"}, "spec": spec}


@pytest.mark.parametrize("replicas,size,leaders,workers", [
    (None, None, 1, 0),     # defaults: 1 group of size 1 = a lone leader
    (None, 4, 1, 3),        # size includes the leader
    (3, 4, 3, 9),           # pods = replicas x size
    (2, 1, 2, 0),
    (0, 4, 0, 0),
])
def test_lws_pods_are_groups_times_size_leader_included(replicas, size, leaders, workers):
    w = interpret(lws(replicas=replicas, size=size), LWS)
    assert pods_by_instance(w) == {"leader/leader": leaders, "worker/worker": workers}
    assert w.pods == leaders + workers
    assert w.gpus == 4 * (leaders + workers)
    n = size or 1
    assert gangs(w) == [(f"vllm-{g}", n, n, 4 * n) for g in range(replicas if replicas is not None else 1)]


def test_lws_leader_template_optional_and_distinct_when_given():
    leader = template(container("leader", cpu="2", memory="8Gi"), labels={"role": "leader"})
    w = interpret(lws(replicas=2, size=3, leader=leader), LWS)
    by = {i.key: i for i in w.instances}
    assert by["leader/leader"].pod.requests == {"cpu": 2000, "memory": 8 * 2**30}
    assert by["leader/leader"].gpus_per_pod == 0 and by["leader/leader"].pod.labels == {"role": "leader"}
    assert by["worker/worker"].gpus_per_pod == 4
    assert w.gpus == 2 * 2 * 4
    assert gangs(w) == [("vllm-0", 3, 3, 8), ("vllm-1", 3, 3, 8)]
    # without a leaderTemplate the leader runs the worker template (4 GPUs)
    w2 = interpret(lws(replicas=2, size=3), LWS)
    assert {i.key: i.gpus_per_pod for i in w2.instances} == {"leader/leader": 4, "worker/worker": 4}
    assert w2.gpus == 24


def test_lws_selectors_use_name_and_worker_index_zero_for_leader():
    w = interpret(lws(size=2), LWS)
    sel = {i.key: i.selector for i in w.instances}
    assert sel["leader/leader"] == {"leaderworkerset.sigs.k8s.io/name": "vllm",
                                    "leaderworkerset.sigs.k8s.io/worker-index": "0"}
    assert sel["worker/worker"] == {"leaderworkerset.sigs.k8s.io/name": "vllm"}


@pytest.mark.parametrize("policy,min_member", [(None, 4), ("LeaderCreated", 4), ("LeaderReady", 1)])
def test_lws_gang_min_member_follows_startup_policy(policy, min_member):
    """startupPolicy is a field of the spec (lws v0.8.0 LeaderWorkerSetSpec; the real API server
    refuses it under leaderWorkerTemplate: found by benchmarks/operators.py)."""
    obj = lws(size=4)
    if policy:
        obj["spec"]["startupPolicy"] = policy
    w = interpret(obj, LWS)
    assert gangs(w) == [("vllm-0", 4, min_member, 16)]


@pytest.mark.parametrize("status,phase", [
    (None, Phase.PENDING),
    ({"conditions": [cond("Progressing", reason="GroupsProgressing")], "replicas": 2, "readyReplicas": 0},
     Phase.INITIALIZING),
    ({"conditions": [cond("Available", "False"), cond("Progressing")], "readyReplicas": 1, "replicas": 2},
     Phase.INITIALIZING),
    ({"conditions": [cond("Available", reason="AllGroupsReady"), cond("Progressing", "False")],
      "readyReplicas": 2, "replicas": 2}, Phase.RUNNING),
    ({"conditions": [cond("Available"), cond("UpdateInProgress")], "readyReplicas": 2}, Phase.RUNNING),
])
def test_lws_status(status, phase):
    w = interpret(with_status(lws(replicas=2, size=2), status), LWS)
    assert w.phase == phase
    if phase == Phase.RUNNING:
        assert "groups ready" in w.message


@pytest.mark.parametrize("with_leader", [False, True])
def test_lws_patch_round_trip(with_leader):
    leader = template(container("leader"), labels={"role": "leader"}, nodeSelector={"zone": "a"}) \
        if with_leader else None
    obj = lws(replicas=2, size=3, leader=leader)
    paths = [("spec", "leaderWorkerTemplate", "workerTemplate")]
    if with_leader:
        paths.insert(0, ("spec", "leaderWorkerTemplate", "leaderTemplate"))
        check_patch_round_trip(obj, LWS, paths)
    else:
        # the leader shares the worker template: one template, two instances
        check_patch_round_trip(obj, LWS, paths, untouched=["leader/leader"])


def test_lws_example():
    docs = [d for d in yaml.safe_load_all((EXAMPLES_DIR / "leaderworkerset.yaml").read_text()) if d]
    w = interpret(docs[0], LWS)
    assert (w.pods, w.gpus) == (2, 8)
    assert gangs(w) == [("llama70b-pp2-0", 2, 2, 8)]
    assert all(i.pod.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"} for i in w.instances)
