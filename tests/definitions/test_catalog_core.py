"""Catalog definitions of the core kinds: batch/v1 Job, apps/v1 Deployment and
StatefulSet, v1 Pod. Manifests are written here."""

from __future__ import annotations

import pytest
import yaml

from placer.definitions.interpret import interpret
from placer.model.workload import Phase
from tests.definitions.catalog_helpers import (
    EXAMPLES_DIR,
    GI,
    GPU,
    catalog,
    check_patch_round_trip,
    cond,
    container,
    gangs,
    pods_by_instance,
    template,
    with_status,
)

JOB, DEPLOYMENT, STATEFULSET, POD = catalog("job"), catalog("deployment"), catalog("statefulset"), catalog("pod")


def job(name="eval", tpl=None, **spec):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"template": tpl or template(restartPolicy="Never"), **spec}}


def workload(kind, name="srv", replicas=None, tpl=None, **spec):
    labels = {"app": name}
    body = {"selector": {"matchLabels": labels}, "template": tpl or template(labels=labels), **spec}
    if replicas is not None:
        body["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "serving"},
            "spec": body}


def pod(name="dbg", labels=None, **spec):
    meta = {"name": name, "namespace": "ml"}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [container("cuda", gpu=1)], **spec}}


# --- Job ---------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,pods", [
    ({}, 1),                                        # parallelism 1, completions 1
    ({"parallelism": 4}, 4),                        # completions unset: a work queue of 4
    ({"completions": 5}, 1),                        # parallelism defaults to 1
    ({"parallelism": 3, "completions": 10}, 3),
    ({"parallelism": 5, "completions": 2}, 2),      # never more pods than completions
    ({"parallelism": 0, "completions": 4}, 0),      # parallelism 0 pauses the Job
    ({"parallelism": 2, "suspend": True}, 2),       # suspended: the demand it will ask for
])
def test_job_pods_are_min_parallelism_completions(spec, pods):
    w = interpret(job(**spec), JOB)
    assert pods_by_instance(w) == {"job/eval": pods}
    assert w.gpus == pods
    assert w.suspended is bool(spec.get("suspend"))
    assert dict(w.instances[0].selector) == {"batch.kubernetes.io/job-name": "eval"}


@pytest.mark.parametrize("spec,gang", [
    ({"completionMode": "Indexed", "completions": 4, "parallelism": 4}, [("eval", 4, 4, 4)]),
    ({"completionMode": "Indexed", "completions": 4}, []),              # one index at a time
    ({"completionMode": "Indexed", "completions": 8, "parallelism": 4}, []),
    ({"completionMode": "Indexed", "completions": 1}, []),
    ({"completions": 4, "parallelism": 4}, []),                          # NonIndexed: interchangeable pods
    ({"parallelism": 4}, []),
])
def test_job_gang_only_for_indexed_all_at_once(spec, gang):
    assert gangs(interpret(job(**spec), JOB)) == gang


@pytest.mark.parametrize("status,phase,reason", [
    (None, Phase.PENDING, "NotStarted"),
    ({"conditions": [cond("Suspended", reason="JobSuspended")]}, Phase.PENDING, "JobSuspended"),
    ({"startTime": "2025-01-01T00:00:00Z", "active": 0}, Phase.PENDING, "NoActivePods"),
    ({"startTime": "2025-01-01T00:00:00Z", "active": 2, "ready": 1}, Phase.INITIALIZING, "PodsStarting"),
    ({"startTime": "2025-01-01T00:00:00Z", "active": 2, "ready": 0}, Phase.INITIALIZING, "PodsStarting"),
    ({"startTime": "2025-01-01T00:00:00Z", "active": 2, "ready": 2}, Phase.RUNNING, "PodsReady"),
    ({"conditions": [cond("SuccessCriteriaMet", reason="CompletionsReached")], "succeeded": 2, "active": 1},
     Phase.COMPLETED, "CompletionsReached"),
    ({"conditions": [cond("SuccessCriteriaMet", reason="CompletionsReached"),
                     cond("Complete", reason="CompletionsReached")], "succeeded": 2}, Phase.COMPLETED,
     "CompletionsReached"),
    ({"conditions": [cond("FailureTarget", reason="BackoffLimitExceeded")], "failed": 3, "active": 1},
     Phase.FAILED, "BackoffLimitExceeded"),
    ({"conditions": [cond("FailureTarget", reason="DeadlineExceeded"), cond("Failed", reason="DeadlineExceeded")]},
     Phase.FAILED, "DeadlineExceeded"),
    # resumed: Suspended=False stays in the list
    ({"conditions": [cond("Suspended", "False", reason="JobResumed")], "active": 2, "ready": 2},
     Phase.RUNNING, "PodsReady"),
])
def test_job_status(status, phase, reason):
    w = interpret(with_status(job(parallelism=2, completions=2), status), JOB)
    assert (w.phase, w.reason) == (phase, reason)


def test_job_patch_round_trip():
    check_patch_round_trip(job(parallelism=2, tpl=template(labels={"app": "eval"}, nodeSelector={"a": "b"})),
                           JOB, [("spec", "template")])


# --- Deployment and StatefulSet ------------------------------------------------------------

@pytest.mark.parametrize("cat,kind", [(DEPLOYMENT, "Deployment"), (STATEFULSET, "StatefulSet")])
@pytest.mark.parametrize("replicas,pods", [(None, 1), (3, 3), (0, 0)])
def test_replicas_default_to_one_and_select_by_match_labels(cat, kind, replicas, pods):
    w = interpret(workload(kind, replicas=replicas), cat)
    assert pods_by_instance(w) == {f"{kind.lower()}/srv": pods}
    assert w.gpus == pods
    assert dict(w.instances[0].selector) == {"app": "srv"}
    assert gangs(w) == []                       # independent replicas: no gang
    assert w.suspended is None                  # nothing to suspend


def test_apps_selector_keeps_match_expressions():
    obj = workload("Deployment", replicas=2)
    obj["spec"]["selector"]["matchExpressions"] = [{"key": "tier", "operator": "In", "values": ["gpu"]}]
    inst = interpret(obj, DEPLOYMENT).instances[0]
    assert inst.selects({"app": "srv", "tier": "gpu"}) and not inst.selects({"app": "srv", "tier": "cpu"})


def test_statefulset_pod_requests_take_init_containers_into_account():
    tpl = template(container("triton", cpu="4", memory="24Gi", gpu=1),
                   init=[container("fetch", cpu="8", memory="4Gi"),
                         container("proxy", cpu="500m", memory="256Mi", restartPolicy="Always")])
    w = interpret(workload("StatefulSet", replicas=2, tpl=tpl), STATEFULSET)
    # app 4 + sidecar 0.5 CPU vs init 8: 8 CPU; memory 24Gi + 256Mi
    assert dict(w.instances[0].pod.requests) == {"cpu": 8000, "memory": 24 * GI + 256 * 2**20, GPU: 1}
    assert w.resources[GPU] == 2


@pytest.mark.parametrize("status,phase,reason", [
    (None, Phase.PENDING, "NotStarted"),
    ({"observedGeneration": 1}, Phase.PENDING, "NoReplicas"),
    ({"replicas": 3, "updatedReplicas": 3, "readyReplicas": 1, "unavailableReplicas": 2,
      "conditions": [cond("Available", "False", reason="MinimumReplicasUnavailable"),
                     cond("Progressing", reason="ReplicaSetUpdated")]}, Phase.INITIALIZING, "ReplicasStarting"),
    ({"replicas": 3, "readyReplicas": 3, "availableReplicas": 3,
      "conditions": [cond("Available", reason="MinimumReplicasAvailable"),
                     cond("Progressing", reason="NewReplicaSetAvailable")]}, Phase.RUNNING, "ReplicasReady"),
    ({"replicas": 3, "readyReplicas": 1,
      "conditions": [cond("Progressing", "False", reason="ProgressDeadlineExceeded")]},
     Phase.FAILED, "ProgressDeadlineExceeded"),
    ({"replicas": 0, "conditions": [cond("ReplicaFailure", reason="FailedCreate",
                                         message="exceeded quota: gpu-quota")]}, Phase.FAILED, "FailedCreate"),
])
def test_deployment_status(status, phase, reason):
    w = interpret(with_status(workload("Deployment", replicas=3), status), DEPLOYMENT)
    assert (w.phase, w.reason) == (phase, reason)


@pytest.mark.parametrize("status,phase,reason", [
    (None, Phase.PENDING, "NotStarted"),
    ({"replicas": 0, "availableReplicas": 0}, Phase.PENDING, "NoReplicas"),
    ({"replicas": 1, "readyReplicas": 0, "currentReplicas": 1}, Phase.INITIALIZING, "ReplicasStarting"),
    ({"replicas": 2, "readyReplicas": 1, "currentReplicas": 2}, Phase.INITIALIZING, "ReplicasStarting"),
    ({"replicas": 2, "readyReplicas": 2, "currentReplicas": 2, "availableReplicas": 2},
     Phase.RUNNING, "ReplicasReady"),
])
def test_statefulset_status(status, phase, reason):
    w = interpret(with_status(workload("StatefulSet", replicas=2), status), STATEFULSET)
    assert (w.phase, w.reason) == (phase, reason)


@pytest.mark.parametrize("cat,kind", [(DEPLOYMENT, "Deployment"), (STATEFULSET, "StatefulSet")])
def test_apps_patch_round_trip(cat, kind):
    check_patch_round_trip(workload(kind, replicas=2), cat, [("spec", "template")])


# --- Pod ---------------------------------------------------------------------------------

def test_pod_is_one_pod_selected_by_its_labels():
    obj = pod(labels={"app": "dbg", "owner": "alice"},
              initContainers=[container("warm", cpu="6", memory="2Gi")], overhead={"cpu": "250m"})
    w = interpret(obj, POD)
    assert pods_by_instance(w) == {"pod/dbg": 1}
    # init container: 6 CPU / 2Gi beats the app's 1 / 1Gi; overhead adds on top
    assert dict(w.instances[0].pod.requests) == {"cpu": 6250, "memory": 2 * GI, GPU: 1}
    assert dict(w.instances[0].selector) == {"app": "dbg", "owner": "alice"}
    assert gangs(w) == [] and w.gpus == 1


@pytest.mark.parametrize("status,phase,reason", [
    (None, Phase.PENDING, "NotStarted"),
    ({"phase": "Pending", "conditions": [cond("PodScheduled", "False", reason="Unschedulable",
                                              message="0/8 nodes are available: 8 Insufficient nvidia.com/gpu.")]},
     Phase.PENDING, "Unschedulable"),
    ({"phase": "Pending", "conditions": [cond("PodScheduled"), cond("Ready", "False")],
      "containerStatuses": [{"name": "cuda", "ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}]},
     Phase.INITIALIZING, "ContainerCreating"),
    ({"phase": "Running", "conditions": [cond("PodScheduled"), cond("Initialized"), cond("Ready")],
      "containerStatuses": [{"name": "cuda", "ready": True, "state": {"running": {}}}]}, Phase.RUNNING, "Ready"),
    ({"phase": "Running", "conditions": [cond("PodScheduled"), cond("Ready", "False")],
      "containerStatuses": [{"name": "cuda", "ready": False, "restartCount": 5,
                             "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]},
     Phase.INITIALIZING, "CrashLoopBackOff"),
    ({"phase": "Succeeded", "conditions": [cond("Ready", "False", reason="PodCompleted")]},
     Phase.COMPLETED, "Succeeded"),
    ({"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."},
     Phase.FAILED, "Evicted"),
])
def test_pod_status(status, phase, reason):
    w = interpret(with_status(pod(labels={"app": "dbg"}), status), POD)
    assert (w.phase, w.reason) == (phase, reason)


@pytest.mark.parametrize("labels", [None, {"app": "dbg"}])
def test_pod_patch_round_trip(labels):
    check_patch_round_trip(pod(labels=labels, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]),
                           POD, [()], selector_from_labels=True)


# --- the shipped examples ----------------------------------------------------------------

@pytest.mark.parametrize("name,pods,gpus,gang", [
    ("job", 2, 2, [("eval-mmlu", 2, 2, 2)]),
    ("deployment", 2, 2, []),
    ("statefulset", 2, 2, []),
    ("pod", 1, 1, []),
])
def test_core_examples(name, pods, gpus, gang):
    docs = [d for d in yaml.safe_load_all((EXAMPLES_DIR / f"{name}.yaml").read_text()) if d]
    w = interpret(docs[0], catalog(name))
    assert (w.pods, w.gpus, gangs(w)) == (pods, gpus, gang)
