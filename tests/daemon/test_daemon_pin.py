"""The daemon pins the gated pods of its `steer: pinned` copies (issue 22): each gets one planned
node within the plan's count per node, a retry takes the slot its failed predecessor left, and
on a cluster not (or no longer) pinned a gated pod is ungated, not narrowed. Test API server: the
test plays the JobSet operator (it creates the pods from the copy's template). The real
scheduler's side is tests/real/test_real_pin.py."""

from __future__ import annotations

import copy as _copy
from collections import Counter

from placer.actuate.steer import ANN_PINNED, PIN_GATE, counts_of
from placer.inputs.clusters_file import ClusterEntry
from tests.daemon.daemon_helpers import STAGING, Env, jobset, wait_for

MEMBER = "replicatedJob/workers"


def placed_copy(env: Env, job: dict) -> tuple[str, dict]:
    copies = wait_for(lambda: env.copies(job) or None, what="the copy")
    ((cluster, copy),) = copies.items()
    return cluster, copy


def make_pod(env: Env, cluster: str, copy: dict, name: str) -> None:
    """What the JobSet operator would create from the copy's template."""
    tpl = copy["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    labels = {**((tpl.get("metadata") or {}).get("labels") or {}),
              "jobset.sigs.k8s.io/jobset-name": copy["metadata"]["name"],
              "jobset.sigs.k8s.io/replicatedjob-name": "workers"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": STAGING, "labels": labels},
           "spec": _copy.deepcopy(tpl["spec"])}
    env.kube.client(cluster).create("pods", pod, STAGING)


def pods(env: Env, cluster: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in env.kube.client(cluster).list("pods", STAGING).items}


def released(env: Env, cluster: str, names: list[str]) -> dict[str, dict] | None:
    now = pods(env, cluster)
    return now if all(n in now and not now[n]["spec"].get("schedulingGates") for n in names) else None


def terms(pod: dict) -> list[dict]:
    return pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]


def test_each_gated_pod_is_pinned_within_the_plans_counts_and_a_retry_takes_the_freed_slot(env):
    env.entries = tuple(ClusterEntry(name=e.name, context=e.context, steer="pinned") for e in env.entries)
    d = env.daemon()
    job = jobset("pinned", pods=3, gpus=4)
    env.create(job)
    assert d.wait_idle(20)
    cluster, copy = placed_copy(env, job)
    tpl = copy["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert tpl["schedulingGates"] == [{"name": PIN_GATE}]
    plan = counts_of(copy)[MEMBER]
    assert sum(plan.values()) == 3
    names = [f"pinned-workers-0-{i}" for i in range(3)]
    for n in names:
        make_pod(env, cluster, copy, n)
    now = wait_for(lambda: released(env, cluster, names), what="the pods pinned and ungated")
    on = {n: now[n]["metadata"]["annotations"][ANN_PINNED] for n in names}
    assert Counter(on.values()) == Counter(plan)
    for n in names:      # narrowed: every term of the pod now requires its one node
        assert all({"key": "metadata.name", "operator": "In", "values": [on[n]]} in t["matchFields"]
                   for t in terms(now[n]))
    # one pod fails; the operator's retry arrives gated and takes the slot it left
    gone = names[0]
    env.kube.client(cluster).patch_status("pods", gone, {"phase": "Failed"}, STAGING)
    make_pod(env, cluster, copy, "pinned-workers-0-0-retry")
    now = wait_for(lambda: released(env, cluster, ["pinned-workers-0-0-retry"]), what="the retry pinned")
    assert now["pinned-workers-0-0-retry"]["metadata"]["annotations"][ANN_PINNED] == on[gone]


def test_a_gated_pod_on_a_cluster_not_pinned_is_ungated_not_narrowed(env):
    d = env.daemon()                                         # the default: required
    job = jobset("held", pods=1, gpus=4)
    env.create(job)
    assert d.wait_idle(20)
    cluster, copy = placed_copy(env, job)
    tpl = copy["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "schedulingGates" not in tpl
    # a pod made while the cluster was pinned (its copy from before the entry changed)
    tpl["schedulingGates"] = [{"name": "other"}, {"name": PIN_GATE}]
    make_pod(env, cluster, copy, "held-workers-0-0")
    before = terms(pods(env, cluster)["held-workers-0-0"])

    def ungated():
        p = pods(env, cluster)["held-workers-0-0"]
        return p if p["spec"].get("schedulingGates") == [{"name": "other"}] else None
    p = wait_for(ungated, what="the pin gate lifted")
    assert terms(p) == before and ANN_PINNED not in (p["metadata"].get("annotations") or {})
