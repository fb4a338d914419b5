"""Catalog definitions of the batch training types: JobSet, PyTorchJob, MPIJob v2beta1.

Manifests are written here (see FACTS.md sections 1-3 for the rules they exercise)."""

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

# --- JobSet ------------------------------------------------------------------------------

JOBSET = catalog("jobset")


def rjob(name, *, replicas=None, parallelism=None, completions=None, tpl=None):
    job_spec = {"template": tpl or template()}
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    if completions is not None:
        job_spec["completions"] = completions
    out = {"name": name, "template": {"spec": job_spec}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def jobset(*rjobs, name="train", **spec):
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"replicatedJobs": list(rjobs), **spec}}


@pytest.mark.parametrize("rj,pods", [
    (rjob("w"), 1),                                               # replicas 1, parallelism 1
    (rjob("w", replicas=3, parallelism=2, completions=2), 6),     # 3 Jobs x 2 pods
    (rjob("w", parallelism=4), 4),                                # completions unset = parallelism
    (rjob("w", completions=4), 1),                                # parallelism unset = 1
    (rjob("w", replicas=2, parallelism=4, completions=2), 4),     # never more than completions
    (rjob("w", replicas=2, parallelism=2, completions=8), 4),     # 2 at a time out of 8
    (rjob("w", replicas=0, parallelism=4), 0),
])
def test_jobset_pods_are_replicas_times_min_parallelism_completions(rj, pods):
    w = interpret(jobset(rj), JOBSET)
    assert pods_by_instance(w) == {"replicatedJob/w": pods}
    assert w.gpus == pods
    assert gangs(w) == [("train", pods, pods, pods)]


def test_jobset_roles_gpus_requests_and_selectors():
    obj = jobset(
        rjob("driver", tpl=template(container("driver", cpu="2", memory="4Gi"))),
        rjob("workers", replicas=2, parallelism=4, completions=4,
             tpl=template(container("trainer", cpu="16", memory="128Gi", gpu=8, limits_only=True),
                          init=[container("stage", cpu="32", memory="8Gi")])))
    w = interpret(obj, JOBSET)
    assert pods_by_instance(w) == {"replicatedJob/driver": 1, "replicatedJob/workers": 8}
    assert w.pods == 9 and w.gpus == 64
    workers = w.instances_of("replicatedJob")[1]
    # limits stand in for requests; the init container's 32 CPUs exceed the app's 16
    assert dict(workers.pod.requests) == {"cpu": 32000, "memory": 128 * GI, GPU: 8}
    assert dict(workers.selector) == {"jobset.sigs.k8s.io/jobset-name": "train",
                                      "jobset.sigs.k8s.io/replicatedjob-name": "workers"}
    assert gangs(w) == [("train", 9, 9, 64)]


def test_jobset_suspended_still_counts_its_demand():
    w = interpret(jobset(rjob("w", replicas=2, parallelism=2), suspend=True), JOBSET)
    assert w.suspended is True and w.pods == 4 and w.phase == Phase.PENDING
    assert interpret(jobset(rjob("w")), JOBSET).suspended is False


TWO_RJOBS = jobset(rjob("driver"), rjob("workers", replicas=2, parallelism=2, completions=2))


@pytest.mark.parametrize("status,phase,reason", [
    (None, Phase.PENDING, "NotStarted"),
    ({"conditions": [cond("Suspended", reason="JobSetSuspended")]}, Phase.PENDING, "JobSetSuspended"),
    ({"replicatedJobsStatus": [{"name": "driver", "ready": 0, "active": 0},
                               {"name": "workers", "ready": 0, "active": 0}]}, Phase.PENDING, "NoActiveJobs"),
    ({"replicatedJobsStatus": [{"name": "driver", "ready": 1, "active": 1},
                               {"name": "workers", "ready": 1, "active": 2}]}, Phase.INITIALIZING, "JobsStarting"),
    ({"conditions": [cond("StartupPolicyInProgress", reason="InOrderStartupPolicyInProgress")],
      "replicatedJobsStatus": [{"name": "driver", "ready": 1, "active": 1}]},
     Phase.INITIALIZING, "InOrderStartupPolicyInProgress"),
    ({"replicatedJobsStatus": [{"name": "driver", "ready": 1, "active": 1},
                               {"name": "workers", "ready": 2, "active": 2}]}, Phase.RUNNING, "AllJobsReady"),
    # a finished Job counts as up (succeeded) while the others still run
    ({"replicatedJobsStatus": [{"name": "driver", "ready": 1, "active": 1},
                               {"name": "workers", "ready": 1, "succeeded": 1, "active": 1}]},
     Phase.RUNNING, "AllJobsReady"),
    ({"conditions": [cond("RestartingJobSet", reason="FailedJobsRestart")],
      "replicatedJobsStatus": [{"name": "driver", "ready": 1}, {"name": "workers", "ready": 2}]},
     Phase.INITIALIZING, "FailedJobsRestart"),
    ({"conditions": [cond("Completed", reason="AllJobsCompleted")], "terminalState": "Completed",
      "replicatedJobsStatus": [{"name": "driver", "succeeded": 1}, {"name": "workers", "succeeded": 2}]},
     Phase.COMPLETED, "AllJobsCompleted"),
    ({"terminalState": "Completed"}, Phase.COMPLETED, "Completed"),
    ({"conditions": [cond("Failed", reason="ReachedMaxRestarts")], "terminalState": "Failed", "restarts": 3},
     Phase.FAILED, "ReachedMaxRestarts"),
    ({"conditions": [cond("Suspended", "False", reason="ResumeJobs")],
      "replicatedJobsStatus": [{"name": "driver", "active": 1}]}, Phase.INITIALIZING, "JobsStarting"),
])
def test_jobset_status(status, phase, reason):
    w = interpret(with_status(TWO_RJOBS, status), JOBSET)
    assert (w.phase, w.reason) == (phase, reason)


def test_jobset_patch_reaches_every_replicated_job():
    obj = jobset(rjob("driver", tpl=template(container("d"), labels={"app": "x"},
                                                  nodeSelector={"pool": "cpu"})),
                 rjob("workers", replicas=2, parallelism=2,
                      tpl=template(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])))
    check_patch_round_trip(obj, JOBSET, [
        ("spec", "replicatedJobs", 0, "template", "spec", "template"),
        ("spec", "replicatedJobs", 1, "template", "spec", "template")])


# --- PyTorchJob --------------------------------------------------------------------------

PYTORCH = catalog("pytorchjob")


def replica_spec(replicas=None, tpl=None):
    out = {"restartPolicy": "OnFailure", "template": tpl or template(container("pytorch", gpu=4))}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def pytorchjob(specs, name="ddp", **spec):
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"pytorchReplicaSpecs": specs, **spec}}


@pytest.mark.parametrize("specs,expected", [
    ({"Master": replica_spec(1), "Worker": replica_spec(3)}, {"replica/Master": 1, "replica/Worker": 3}),
    # replicas default to 1 each
    ({"Master": replica_spec(), "Worker": replica_spec()}, {"replica/Master": 1, "replica/Worker": 1}),
    # lowercase keys are camel-cased by the operator's defaulting
    ({"master": replica_spec(), "worker": replica_spec(2)}, {"replica/Master": 1, "replica/Worker": 2}),
    ({"Worker": replica_spec(4)}, {"replica/Worker": 4}),
])
def test_pytorchjob_pods_per_replica_type(specs, expected):
    w = interpret(pytorchjob(specs), PYTORCH)
    assert pods_by_instance(w) == expected
    total = sum(expected.values())
    assert w.gpus == 4 * total
    assert gangs(w) == [("ddp", total, total, 4 * total)]


def test_pytorchjob_selectors_use_lowercase_replica_type():
    w = interpret(pytorchjob({"master": replica_spec(), "Worker": replica_spec(2)}), PYTORCH)
    assert [dict(i.selector) for i in w.instances] == [
        {"training.kubeflow.org/job-name": "ddp", "training.kubeflow.org/replica-type": "master"},
        {"training.kubeflow.org/job-name": "ddp", "training.kubeflow.org/replica-type": "worker"}]


def test_pytorchjob_workers_count_the_init_container_the_operator_injects():
    """With a Master (any key case) the training operator appends init-pytorch (50m CPU, 10Mi) to
    every Worker pod: per resource the scheduler counts the larger of it and the app containers.
    The real operator's pods agree: tests/real/test_operators_pytorchjob.py."""
    lean = template(container("pytorch", cpu="8", memory=None, gpu=4), init=[container("fetch", cpu="20m", memory="4Mi")])
    w = interpret(pytorchjob({"master": replica_spec(), "Worker": replica_spec(2, tpl=lean)}), PYTORCH)
    master, worker = w.instances
    assert master.pod.requests == {"cpu": 1000, "memory": GI, GPU: 4}        # masters get none
    assert worker.pod.requests == {"cpu": 8000, "memory": 10 * 2**20, GPU: 4}
    # without a Master (elastic, workers only) there is no init container
    w = interpret(pytorchjob({"Worker": replica_spec(2, tpl=lean)}), PYTORCH)
    assert w.instances[0].pod.requests == {"cpu": 8000, "memory": 4 * 2**20, GPU: 4}


HPA = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                    "averageUtilization": 80}}}]


@pytest.mark.parametrize("replicas,policy,workers", [
    (1, {"minReplicas": 2, "maxReplicas": 4, "metrics": HPA}, 2),   # the HPA raises to min
    (8, {"minReplicas": 2, "maxReplicas": 4, "metrics": HPA}, 4),   # and caps at max
    (3, {"minReplicas": 2, "maxReplicas": 4, "metrics": HPA}, 3),
    (1, {"maxReplicas": 3, "metrics": HPA}, 3),                     # min defaults to max
    (5, {"minReplicas": 2, "metrics": HPA}, 2),                     # max defaults to min
    (1, {"minReplicas": 2, "maxReplicas": 4}, 1),                   # no metrics, no HPA
    (6, {"rdzvBackend": "c10d", "metrics": HPA}, 6),                # no bounds: both = replicas
])
def test_pytorchjob_elastic_policy_bounds_workers(replicas, policy, workers):
    w = interpret(pytorchjob({"Worker": replica_spec(replicas)}, elasticPolicy=policy), PYTORCH)
    assert pods_by_instance(w) == {"replica/Worker": workers}


def test_pytorchjob_gang_min_available_and_suspend():
    obj = pytorchjob({"Master": replica_spec(), "Worker": replica_spec(3)},
                     runPolicy={"suspend": True, "schedulingPolicy": {"minAvailable": 2}})
    w = interpret(obj, PYTORCH)
    assert gangs(w) == [("ddp", 4, 2, 16)]
    assert w.suspended is True and w.pods == 4


TRAINING_STATUS = [
    (None, Phase.PENDING, "NotStarted"),
    ({}, Phase.PENDING, "NotStarted"),
    ({"conditions": [cond("Created", reason="JobCreated")]}, Phase.PENDING, "JobCreated"),
    ({"conditions": [cond("Created", reason="JobCreated")],
      "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 0}}}, Phase.INITIALIZING, "PodsStarting"),
    ({"conditions": [cond("Created"), cond("Running", reason="JobRunning")],
      "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 3}}}, Phase.RUNNING, "JobRunning"),
    # Restarting replaces Running
    ({"conditions": [cond("Created"), cond("Restarting", reason="JobRestarting")]},
     Phase.INITIALIZING, "JobRestarting"),
    ({"conditions": [cond("Created"), cond("Running", "False"), cond("Succeeded", reason="JobSucceeded")]},
     Phase.COMPLETED, "JobSucceeded"),
    ({"conditions": [cond("Created"), cond("Running", "False"), cond("Failed", reason="JobFailed")]},
     Phase.FAILED, "JobFailed"),
    ({"conditions": [cond("Created"), cond("Running", "False"), cond("Suspended", reason="JobSuspended")]},
     Phase.PENDING, "JobSuspended"),
    # resumed: Suspended=False appended last, Running not yet back
    ({"conditions": [cond("Created", reason="JobCreated"), cond("Running", "False"),
                     cond("Suspended", "False", reason="JobResumed")]}, Phase.PENDING, "JobCreated"),
    # resumed and running again: the last True condition is Running
    ({"conditions": [cond("Created"), cond("Suspended", "False"), cond("Running", reason="JobRunning")]},
     Phase.RUNNING, "JobRunning"),
]


@pytest.mark.parametrize("status,phase,reason", TRAINING_STATUS)
def test_pytorchjob_status_follows_the_last_condition(status, phase, reason):
    obj = pytorchjob({"Master": replica_spec(), "Worker": replica_spec(3)})
    w = interpret(with_status(obj, status), PYTORCH)
    assert (w.phase, w.reason) == (phase, reason)


def test_pytorchjob_patch_reaches_master_and_worker_of_any_key_case():
    obj = pytorchjob({"master": replica_spec(tpl=template(labels={"role": "m"})),
                      "Worker": replica_spec(2, tpl=template(schedulerName="default-scheduler"))})
    check_patch_round_trip(obj, PYTORCH, [("spec", "pytorchReplicaSpecs", "master", "template"),
                                          ("spec", "pytorchReplicaSpecs", "Worker", "template")])


# --- MPIJob v2beta1 ----------------------------------------------------------------------

MPI = catalog("mpijob")


def mpijob(workers=None, *, launcher_tpl=None, worker_tpl=None, launcher_replicas=1, name="hvd", **spec):
    specs = {"Launcher": {"replicas": launcher_replicas,
                          "template": launcher_tpl or template(container("launcher", cpu="1", memory="2Gi"))}}
    if workers is not False:
        specs["Worker"] = {"template": worker_tpl or template(container("worker", cpu="12", gpu=2))}
        if workers is not None:
            specs["Worker"]["replicas"] = workers
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"slotsPerWorker": 2, "mpiReplicaSpecs": specs, **spec}}


@pytest.mark.parametrize("obj,expected,gpus", [
    (mpijob(4), {"replica/Launcher": 1, "replica/Worker": 4}, 8),
    (mpijob(None), {"replica/Launcher": 1, "replica/Worker": 0}, 0),       # Worker replicas default 0
    (mpijob(False), {"replica/Launcher": 1}, 0),                           # no Worker spec
    (mpijob(2, launcher_replicas=None), {"replica/Launcher": 1, "replica/Worker": 2}, 4),
    # the launcher is one pod (a batch Job) whatever its replicas field says
    (mpijob(2, launcher_replicas=3), {"replica/Launcher": 1, "replica/Worker": 2}, 4),
    # runLauncherAsWorker: the launcher runs ranks on its own GPU; still 1 + workers pods
    (mpijob(3, runLauncherAsWorker=True, launcher_tpl=template(container("launcher", gpu=2))),
     {"replica/Launcher": 1, "replica/Worker": 3}, 8),
])
def test_mpijob_launcher_plus_workers(obj, expected, gpus):
    w = interpret(obj, MPI)
    assert pods_by_instance(w) == expected
    assert w.gpus == gpus
    pods = sum(expected.values())
    assert gangs(w) == [("hvd", pods, pods, gpus)]      # minMember = workers + 1


def test_mpijob_selectors_gang_min_available_and_suspend():
    w = interpret(mpijob(4, runPolicy={"suspend": True, "schedulingPolicy": {"minAvailable": 3}}), MPI)
    assert [dict(i.selector) for i in w.instances] == [
        {"training.kubeflow.org/job-name": "hvd", "training.kubeflow.org/job-role": "launcher"},
        {"training.kubeflow.org/job-name": "hvd", "training.kubeflow.org/job-role": "worker"}]
    assert gangs(w) == [("hvd", 5, 3, 8)]
    assert w.suspended is True


@pytest.mark.parametrize("status,phase,reason", TRAINING_STATUS + [
    ({"conditions": [cond("Created"), cond("Running", "False"), cond("Failed", reason="MPIJobEvicted")]},
     Phase.FAILED, "MPIJobEvicted"),
    ({"conditions": [cond("Created", reason="MPIJobCreated")],
      "replicaStatuses": {"Launcher": {}, "Worker": {"active": 2}}}, Phase.INITIALIZING, "PodsStarting"),
])
def test_mpijob_status(status, phase, reason):
    w = interpret(with_status(mpijob(2), status), MPI)
    assert (w.phase, w.reason) == (phase, reason)


def test_mpijob_patch_reaches_launcher_and_workers():
    check_patch_round_trip(mpijob(2), MPI, [("spec", "mpiReplicaSpecs", "Launcher", "template"),
                                            ("spec", "mpiReplicaSpecs", "Worker", "template")])


# --- the shipped examples ----------------------------------------------------------------

@pytest.mark.parametrize("name,pods,gpus,gang", [
    ("jobset", 4, 8, ("mistral-sft", 4, 4, 8)),
    ("pytorchjob", 2, 8, ("resnet50-ddp", 2, 2, 8)),
    ("mpijob", 3, 4, ("horovod-bench", 3, 3, 4)),
])
def test_training_examples(name, pods, gpus, gang):
    (obj,) = [d for d in yaml.safe_load_all((EXAMPLES_DIR / f"{name}.yaml").read_text()) if d]
    w = interpret(obj, catalog(name))
    assert (w.pods, w.gpus, gangs(w)) == (pods, gpus, [gang])
