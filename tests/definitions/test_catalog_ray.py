"""Catalog definitions of the KubeRay types: RayCluster, RayJob, RayService.

Manifests are written here (see FACTS.md sections 4-6 for the rules they exercise)."""

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

RAYCLUSTER, RAYJOB, RAYSERVICE = catalog("raycluster"), catalog("rayjob"), catalog("rayservice")

HEAD = {"rayStartParams": {"num-cpus": "0"},
        "template": template(container("ray-head", cpu="4", memory="16Gi"))}


def group(name, gpu=1, **fields):
    return {"groupName": name, "rayStartParams": {}, "template": template(container("ray-worker", cpu="8",
                                                                                    memory="32Gi", gpu=gpu)),
            **fields}


def cluster_spec(*groups, head=None, **extra):
    return {"headGroupSpec": head or HEAD, "workerGroupSpecs": list(groups), **extra}


def raycluster(*groups, name="rc", head=None, **extra):
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name, "namespace": "ray"},
            "spec": cluster_spec(*groups, head=head, **extra)}


def rayjob(*groups, name="rj", **spec):
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name, "namespace": "ray"},
            "spec": {"entrypoint": "python train.py", "rayClusterSpec": cluster_spec(*groups), **spec}}


def rayservice(*groups, name="rs", **spec):
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": name, "namespace": "ray"},
            "spec": {"serveConfigV2": "applications: []\n", "rayClusterConfig": cluster_spec(*groups), **spec}}


# --- worker group counts, shared by the three types --------------------------------------

GROUP_CASES = [
    (group("g"), 0),                                                  # replicas default 0
    (group("g", replicas=3), 3),
    (group("g", replicas=1, minReplicas=2, maxReplicas=5), 2),        # clamp up to min
    (group("g", replicas=10, minReplicas=1, maxReplicas=4), 4),       # clamp down to max
    (group("g", minReplicas=2), 2),                                   # replicas nil -> min
    (group("g", replicas=1, minReplicas=5, maxReplicas=3), 3),        # min > max -> max
    (group("g", replicas=2, numOfHosts=4), 8),                        # multi-host replicas
    (group("g", replicas=2, minReplicas=1, numOfHosts=4, suspend=True), 0),
]


@pytest.mark.parametrize("build,cat", [(raycluster, RAYCLUSTER), (rayservice, RAYSERVICE),
                                       (lambda *g: rayjob(*g, submissionMode="HTTPMode"), RAYJOB)],
                         ids=["RayCluster", "RayService", "RayJob"])
@pytest.mark.parametrize("grp,workers", GROUP_CASES)
def test_worker_groups_clamp_times_num_of_hosts_and_head_is_one(build, cat, grp, workers):
    w = interpret(build(grp), cat)
    assert pods_by_instance(w) == {"head/headgroup": 1, "workerGroup/g": workers}
    assert w.gpus == workers
    assert gangs(w) == [(w.name, 1 + workers, 1 + workers, workers)]


@pytest.mark.parametrize("build,cat", [(raycluster, RAYCLUSTER), (rayservice, RAYSERVICE), (rayjob, RAYJOB)],
                         ids=["RayCluster", "RayService", "RayJob"])
def test_worker_pods_carry_kuberays_wait_gcs_ready_init_container(build, cat):
    """KubeRay (v1.6.0, controllers/ray/common/pod.go) appends an init container `wait-gcs-ready`
    of 200m/256Mi to every worker pod, after the template's own: a worker asking less, or with
    sidecars before it, asks more than its template says (found by benchmarks/operators.py)."""
    small = {"groupName": "small", "replicas": 1, "rayStartParams": {},
             "template": template(container("ray-worker", cpu="100m", memory=None, gpu=1))}
    sidecar = {**container("proxy", cpu="1", memory="2Gi"), "restartPolicy": "Always"}
    side = {"groupName": "side", "replicas": 1, "rayStartParams": {},
            "template": template(container("ray-worker", cpu="100m", memory=None, gpu=1), init=[sidecar])}
    big = group("big", replicas=1)
    w = interpret(build(small, side, big), cat)
    requests = {i.key: dict(i.pod.requests) for i in w.instances}
    assert requests["workerGroup/small"] == {"cpu": 200, "memory": 256 * 2**20, GPU: 1}
    # the sidecar runs beside both: 100m + 1 CPU, or 200m + 1 CPU while wait-gcs-ready runs
    assert requests["workerGroup/side"] == {"cpu": 1200, "memory": 2 * GI + 256 * 2**20, GPU: 1}
    assert requests["workerGroup/big"] == {"cpu": 8000, "memory": 32 * GI, GPU: 1}
    assert requests["head/headgroup"] == {"cpu": 4000, "memory": 16 * GI}     # the head has none


def test_ray_logical_resources_are_not_kubernetes_requests():
    cpu_only = template(container("ray-worker", cpu="8", memory="32Gi"))
    grp = {"groupName": "accel", "replicas": 2, "rayStartParams": {"num-gpus": "8"},
           "resources": {"GPU": "8", "TPU": "4"}, "template": cpu_only}
    head = {"rayStartParams": {"num-gpus": "4"}, "template": template(container("ray-head", cpu="4"))}
    w = interpret(raycluster(grp, head=head), RAYCLUSTER)
    assert w.pods == 3 and w.gpus == 0 and GPU not in w.resources


def test_gpus_on_the_head_and_several_groups():
    head = {"template": template(container("ray-head", cpu="36", memory="144Gi", gpu=4))}
    w = interpret(raycluster(group("a", gpu=2, replicas=2), group("b", gpu=8, replicas=1, numOfHosts=2),
                             head=head), RAYCLUSTER)
    assert pods_by_instance(w) == {"head/headgroup": 1, "workerGroup/a": 2, "workerGroup/b": 2}
    assert w.gpus == 4 + 4 + 16
    assert [dict(i.selector) for i in w.instances] == [
        {"ray.io/cluster": "rc", "ray.io/node-type": "head"},
        {"ray.io/cluster": "rc", "ray.io/node-type": "worker", "ray.io/group": "a"},
        {"ray.io/cluster": "rc", "ray.io/node-type": "worker", "ray.io/group": "b"}]


def test_autoscaling_adds_the_sidecar_and_gangs_on_min_replicas():
    groups = (group("a", replicas=3, minReplicas=1, maxReplicas=8, numOfHosts=2),
              group("b", replicas=2, minReplicas=2, maxReplicas=4),
              group("c", replicas=2, minReplicas=2, suspend=True))
    w = interpret(raycluster(*groups, enableInTreeAutoscaling=True), RAYCLUSTER)
    assert pods_by_instance(w) == {"head/headgroup": 1, "workerGroup/a": 6, "workerGroup/b": 2,
                                   "workerGroup/c": 0}
    head = w.instances[0]
    assert dict(head.pod.requests) == {"cpu": 4500, "memory": 16 * GI + 512 * 2**20}
    # 1 head + a: 1 x 2 hosts + b: 2 (+ c suspended: 0)
    assert gangs(w) == [("rc", 9, 5, 8)]
    custom = interpret(raycluster(enableInTreeAutoscaling=True,
                                  autoscalerOptions={"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}),
                       RAYCLUSTER)
    assert dict(custom.instances[0].pod.requests) == {"cpu": 5000, "memory": 17 * GI}
    assert gangs(custom) == [("rc", 1, 1, 0)]


def test_raycluster_suspend_keeps_the_demand():
    w = interpret(raycluster(group("g", replicas=2), suspend=True), RAYCLUSTER)
    assert w.suspended is True and w.pods == 3


@pytest.mark.parametrize("status,phase,reason", [
    (None, Phase.PENDING, "NotStarted"),
    ({"state": "", "desiredWorkerReplicas": 2}, Phase.PENDING, "NotProvisioned"),
    ({"conditions": [cond("HeadPodReady", "False", reason="HeadPodNotFound"),
                     cond("RayClusterProvisioned", "False", reason="RayClusterPodsProvisioning")]},
     Phase.INITIALIZING, "HeadPodNotFound"),
    ({"conditions": [cond("HeadPodReady", reason="HeadPodRunningAndReady"),
                     cond("RayClusterProvisioned", "False", reason="RayClusterPodsProvisioning")],
      "readyWorkerReplicas": 0, "minWorkerReplicas": 2, "desiredWorkerReplicas": 2},
     Phase.INITIALIZING, "RayClusterPodsProvisioning"),
    ({"conditions": [cond("HeadPodReady"), cond("RayClusterProvisioned", reason="AllPodRunningAndReadyFirstTime")],
      "readyWorkerReplicas": 2, "minWorkerReplicas": 2, "desiredWorkerReplicas": 3, "state": "ready"},
     Phase.RUNNING, "Ready"),
    # Provisioned never flips back: a lost worker below min shows as starting again
    ({"conditions": [cond("HeadPodReady"), cond("RayClusterProvisioned")],
      "readyWorkerReplicas": 1, "minWorkerReplicas": 2}, Phase.INITIALIZING, "WorkersStarting"),
    ({"conditions": [cond("HeadPodReady"), cond("ReplicaFailure", reason="FailedCreateWorkerPod")]},
     Phase.FAILED, "FailedCreateWorkerPod"),
    ({"conditions": [cond("RayClusterSuspended", reason="RayClusterSuspended")], "state": "suspended"},
     Phase.PENDING, "RayClusterSuspended"),
    ({"state": "suspended"}, Phase.PENDING, "Suspended"),
    ({"state": "ready", "availableWorkerReplicas": 2}, Phase.RUNNING, "Ready"),   # pre-conditions operator
])
def test_raycluster_status(status, phase, reason):
    w = interpret(with_status(raycluster(group("g", replicas=2, minReplicas=2)), status), RAYCLUSTER)
    assert (w.phase, w.reason) == (phase, reason)


def test_raycluster_patch_reaches_head_and_every_group():
    obj = raycluster(group("a", replicas=1), group("b", replicas=0, minReplicas=0),
                     enableInTreeAutoscaling=True)
    check_patch_round_trip(obj, RAYCLUSTER, [
        ("spec", "headGroupSpec", "template"),
        ("spec", "workerGroupSpecs", 0, "template"), ("spec", "workerGroupSpecs", 1, "template")])


# --- RayJob ------------------------------------------------------------------------------

SUBMITTER = {"cpu": 500, "memory": 200 * 2**20}


@pytest.mark.parametrize("spec,submitter", [
    ({}, ("defaultSubmitter/submitter", SUBMITTER)),                        # K8sJobMode by default
    ({"submissionMode": "K8sJobMode"}, ("defaultSubmitter/submitter", SUBMITTER)),
    ({"submitterPodTemplate": template(container("submit", cpu="1", memory="1Gi"))},
     ("submitter/submitter", {"cpu": 1000, "memory": GI})),
    ({"submissionMode": "HTTPMode"}, None),
    ({"submissionMode": "InteractiveMode"}, None),
    ({"submissionMode": "SidecarMode"}, None),
    # a template is ignored outside K8sJobMode
    ({"submissionMode": "HTTPMode", "submitterPodTemplate": template()}, None),
])
def test_rayjob_submitter_pod_by_submission_mode(spec, submitter):
    w = interpret(rayjob(group("gpu", replicas=2, numOfHosts=2), **spec), RAYJOB)
    expected = {"head/headgroup": 1, "workerGroup/gpu": 4}
    if submitter:
        expected[submitter[0]] = 1
        inst = next(i for i in w.instances if i.key == submitter[0])
        assert dict(inst.pod.requests) == submitter[1] and inst.gpus_per_pod == 0
        assert dict(inst.selector) == {"batch.kubernetes.io/job-name": "rj"}
    assert pods_by_instance(w) == expected
    assert w.gpus == 4
    assert gangs(w) == [("rj", 5, 5, 4)]                  # the submitter is not in the gang


def test_rayjob_sidecar_mode_puts_the_submitter_in_the_head_pod():
    w = interpret(rayjob(group("gpu", replicas=1), submissionMode="SidecarMode",
                         rayClusterSpec=cluster_spec(group("gpu", replicas=1), enableInTreeAutoscaling=True)),
                  RAYJOB)
    head = w.instances[0]
    # ray-head 4 CPU/16Gi + autoscaler 500m/512Mi + submitter 500m/200Mi
    assert dict(head.pod.requests) == {"cpu": 5000, "memory": 16 * GI + 712 * 2**20}
    assert w.pods == 2


def test_rayjob_with_cluster_selector_only_runs_the_submitter():
    obj = rayjob(group("gpu", replicas=4), clusterSelector={"ray.io/cluster": "shared"})
    del obj["spec"]["rayClusterSpec"]
    w = interpret(obj, RAYJOB)
    assert pods_by_instance(w) == {"defaultSubmitter/submitter": 1}
    assert w.gpus == 0 and gangs(w) == []
    obj["spec"]["submissionMode"] = "HTTPMode"
    assert interpret(obj, RAYJOB).pods == 0


def test_rayjob_selectors_take_the_cluster_name_from_status():
    obj = rayjob(group("gpu", replicas=1))
    before = interpret(obj, RAYJOB)
    assert before.instances[0].selector["ray.io/cluster"] == ""       # no cluster yet: selects nothing
    w = interpret(with_status(obj, {"rayClusterName": "rj-x7k2p", "jobDeploymentStatus": "Running"}), RAYJOB)
    assert [dict(i.selector) for i in w.instances[:2]] == [
        {"ray.io/cluster": "rj-x7k2p", "ray.io/node-type": "head"},
        {"ray.io/cluster": "rj-x7k2p", "ray.io/node-type": "worker", "ray.io/group": "gpu"}]


def test_rayjob_autoscaling_gang_and_suspend():
    obj = rayjob(group("gpu", replicas=4, minReplicas=2, maxReplicas=8), suspend=True)
    obj["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    w = interpret(obj, RAYJOB)
    assert gangs(w) == [("rj", 5, 3, 4)]
    assert w.suspended is True and w.pods == 6


@pytest.mark.parametrize("status,phase,reason", [
    (None, Phase.PENDING, "NotStarted"),
    ({"jobDeploymentStatus": ""}, Phase.PENDING, "New"),
    ({"jobDeploymentStatus": "New"}, Phase.PENDING, "New"),
    ({"jobDeploymentStatus": "Suspended"}, Phase.PENDING, "Suspended"),
    ({"jobDeploymentStatus": "Suspending"}, Phase.PENDING, "Suspending"),
    ({"jobDeploymentStatus": "Waiting"}, Phase.PENDING, "Waiting"),
    ({"jobDeploymentStatus": "Initializing", "rayClusterName": "rj-abcde"}, Phase.INITIALIZING, "Initializing"),
    ({"jobDeploymentStatus": "Retrying", "failed": 1}, Phase.INITIALIZING, "Retrying"),
    ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, Phase.RUNNING, "Running"),
    ({"jobDeploymentStatus": "Running", "jobStatus": "PENDING"}, Phase.RUNNING, "Running"),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "succeeded": 1},
     Phase.COMPLETED, "Complete"),
    # Complete is also how a stopped Ray job ends: not a success
    ({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}, Phase.FAILED, "JobSTOPPED"),
    ({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "reason": "AppFailed"}, Phase.FAILED, "AppFailed"),
    ({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"}, Phase.FAILED, "DeadlineExceeded"),
    ({"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed",
      "message": "entrypoint is required"}, Phase.FAILED, "ValidationFailed"),
])
def test_rayjob_status(status, phase, reason):
    w = interpret(with_status(rayjob(group("gpu", replicas=1)), status), RAYJOB)
    assert (w.phase, w.reason) == (phase, reason)


def test_rayjob_patch_reaches_cluster_and_template_submitter():
    obj = rayjob(group("a", replicas=1), group("b", replicas=2),
                 submitterPodTemplate=template(container("submit"), labels={"app": "submit"}))
    check_patch_round_trip(obj, RAYJOB, [
        ("spec", "rayClusterSpec", "headGroupSpec", "template"),
        ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template"),
        ("spec", "rayClusterSpec", "workerGroupSpecs", 1, "template"),
        ("spec", "submitterPodTemplate")])


def test_rayjob_patch_leaves_the_default_submitter_to_kuberay():
    # the default submitter is not in the object; writing a partial submitterPodTemplate
    # would replace KubeRay's default container, so nothing is written for it
    patched = check_patch_round_trip(rayjob(group("a", replicas=1)), RAYJOB, [
        ("spec", "rayClusterSpec", "headGroupSpec", "template"),
        ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template")],
        untouched=["defaultSubmitter/submitter"])
    assert "submitterPodTemplate" not in patched["spec"]


# --- RayService --------------------------------------------------------------------------

def test_rayservice_uses_ray_cluster_config_and_ignores_serve_gpus():
    obj = rayservice(group("gpu", gpu=8, replicas=2, minReplicas=2, maxReplicas=2))
    obj["spec"]["serveConfigV2"] = ("applications:\n- name: llm\n  deployments:\n"
                                    "  - name: LLM\n    num_replicas: 4\n    ray_actor_options: {num_gpus: 4}\n")
    w = interpret(obj, RAYSERVICE)
    assert pods_by_instance(w) == {"head/headgroup": 1, "workerGroup/gpu": 2}
    assert w.gpus == 16 and gangs(w) == [("rs", 3, 3, 16)]
    assert w.instances[0].selector["ray.io/cluster"] == ""
    live = interpret(with_status(obj, {"activeServiceStatus": {"rayClusterName": "rs-q8x2z"}}), RAYSERVICE)
    assert live.instances[1].selector == {"ray.io/cluster": "rs-q8x2z", "ray.io/node-type": "worker",
                                          "ray.io/group": "gpu"}
    assert interpret(rayservice(suspend=True), RAYSERVICE).suspended is True


@pytest.mark.parametrize("status,phase,reason", [
    (None, Phase.PENDING, "NotStarted"),
    ({"conditions": [cond("Ready", "False", reason="Initializing")]}, Phase.PENDING, "Initializing"),
    ({"conditions": [cond("Ready", "False", reason="Initializing")],
      "pendingServiceStatus": {"rayClusterName": "rs-a1b2c"}}, Phase.INITIALIZING, "Initializing"),
    ({"conditions": [cond("Ready", reason="NonZeroServeEndpoints"), cond("UpgradeInProgress", "False")],
      "activeServiceStatus": {"rayClusterName": "rs-a1b2c"}, "numServeEndpoints": 2, "serviceStatus": "Running"},
     Phase.RUNNING, "NonZeroServeEndpoints"),
    ({"conditions": [cond("Ready", "False", reason="ZeroServeEndpoints")],
      "activeServiceStatus": {"rayClusterName": "rs-a1b2c"}}, Phase.INITIALIZING, "ZeroServeEndpoints"),
    ({"conditions": [cond("Ready", "False", reason="InitializingTimeout")],
      "pendingServiceStatus": {"rayClusterName": "rs-a1b2c"}}, Phase.FAILED, "InitializingTimeout"),
    ({"conditions": [cond("Ready", "False", reason="ValidationFailed")]}, Phase.FAILED, "ValidationFailed"),
    ({"conditions": [cond("Ready", "False", reason="Suspended"), cond("Suspended", reason="Suspended")]},
     Phase.PENDING, "Suspended"),
    ({"serviceStatus": "Running", "activeServiceStatus": {"rayClusterName": "rs-a1b2c"}},
     Phase.RUNNING, "Running"),
    ({"activeServiceStatus": {"rayClusterName": "rs-a1b2c"}}, Phase.INITIALIZING, "Starting"),
])
def test_rayservice_status(status, phase, reason):
    w = interpret(with_status(rayservice(group("gpu", replicas=1)), status), RAYSERVICE)
    assert (w.phase, w.reason) == (phase, reason)


def test_rayservice_upgrade_runs_a_second_cluster():
    # FACTS: during a NewCluster upgrade the pending cluster runs beside the active one until
    # cutover, so pods and GPUs roughly double; both are counted from the spec
    obj = rayservice(group("gpu", gpu=4, replicas=2))
    steady = interpret(with_status(obj, {"activeServiceStatus": {"rayClusterName": "rs-old"}}), RAYSERVICE)
    upgrading = interpret(with_status(obj, {"activeServiceStatus": {"rayClusterName": "rs-old"},
                                            "pendingServiceStatus": {"rayClusterName": "rs-new"}}), RAYSERVICE)
    assert (upgrading.pods, upgrading.gpus) == (2 * steady.pods, 2 * steady.gpus)
    assert [g.name for g in upgrading.gangs] == ["rs", "rs-new"]
    assert upgrading.gangs[1].pods == steady.gangs[0].pods
    pending = {i.key: i.selector for i in upgrading.instances if i.component.startswith("pending")}
    assert pending == {"pendingHead/headgroup": {"ray.io/cluster": "rs-new", "ray.io/node-type": "head"},
                       "pendingWorkerGroup/gpu": {"ray.io/cluster": "rs-new", "ray.io/node-type": "worker",
                                                  "ray.io/group": "gpu"}}


def test_rayservice_patch_reaches_head_and_groups():
    check_patch_round_trip(rayservice(group("a", replicas=1), group("b", replicas=1)), RAYSERVICE, [
        ("spec", "rayClusterConfig", "headGroupSpec", "template"),
        ("spec", "rayClusterConfig", "workerGroupSpecs", 0, "template"),
        ("spec", "rayClusterConfig", "workerGroupSpecs", 1, "template")])


# --- the shipped examples ----------------------------------------------------------------

@pytest.mark.parametrize("name,pods,gpus,gang", [
    ("raycluster", 3, 2, ("embeddings", 3, 2, 2)),
    ("rayjob", 4, 2, ("batch-caption", 3, 3, 2)),
    ("rayservice", 2, 2, ("qwen-chat", 2, 2, 2)),
])
def test_ray_examples(name, pods, gpus, gang):
    (obj,) = [d for d in yaml.safe_load_all((EXAMPLES_DIR / f"{name}.yaml").read_text()) if d]
    w = interpret(obj, catalog(name))
    assert (w.pods, w.gpus, gangs(w)) == (pods, gpus, [gang])


@pytest.mark.parametrize("build,defn", [(raycluster, RAYCLUSTER), (rayjob, RAYJOB), (rayservice, RAYSERVICE)],
                         ids=["raycluster", "rayjob", "rayservice"])
def test_worker_pods_count_the_init_container_kuberay_injects(build, defn):
    """KubeRay appends wait-gcs-ready (200m CPU, 256Mi) to every worker pod (not the head): a lean
    worker takes 256Mi and 200m in the scheduler's count. The real operator's pods agree:
    tests/real/test_operators_kuberay.py."""
    lean = {"groupName": "lean", "replicas": 1, "rayStartParams": {},
            "template": template(container("ray-worker", cpu="100m", memory=None, gpu=1))}
    w = interpret(build(lean), defn)
    (worker,) = [i for i in w.instances if i.instance == "lean"]
    assert worker.pod.requests == {"cpu": 200, "memory": 256 * 2**20, "nvidia.com/gpu": 1}
    (head,) = [i for i in w.instances if i.component != "workerGroup" and i.instance == "headgroup"]
    assert head.pod.requests == {"cpu": 4000, "memory": 16 * 2**30}
