"""Catalog definitions of the serving types: KServe InferenceService, Knative Service,
NIMService (FACTS.md sections 7-9). Manifests are written here."""

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
    with_status,
)
from tests.definitions.serving_helpers import check_patch

# --- KServe InferenceService -------------------------------------------------------------

KSERVE = catalog("inferenceservice")


def isvc(predictor=None, *, name="chat", annotations=None, **spec):
    meta = {"name": name, "namespace": "serve"}
    if annotations:
        meta["annotations"] = annotations
    pred = predictor if predictor is not None else {"model": model(gpu=1)}
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": meta,
            "spec": {"predictor": pred, **spec}}


def model(gpu=0, cpu="4", memory="16Gi", fmt="huggingface", limits_only=False):
    c = container("ignored", cpu=cpu, memory=memory, gpu=gpu, limits_only=limits_only)
    return {"modelFormat": {"name": fmt}, "storageUri": "hf://org/model", "resources": c["resources"]}


STANDARD = {"serving.kserve.io/deploymentMode": "Standard"}
KNATIVE = {"serving.kserve.io/deploymentMode": "Knative"}


@pytest.mark.parametrize("framework", ["model", "sklearn", "pytorch", "tensorflow", "huggingface", "triton"])
def test_kserve_model_container_is_any_framework_field(framework):
    w = interpret(isvc({framework: model(gpu=2)}), KSERVE)
    (inst,) = w.instances
    assert inst.key == "predictor/predictor"
    assert inst.pod.requests == {"cpu": 4000, "memory": 16 * GI, GPU: 2}
    assert (w.pods, w.gpus, w.gangs) == (1, 2, ())


def test_kserve_custom_containers_and_model_plus_sidecar():
    custom = {"containers": [container("kserve-container", cpu="2", memory="8Gi", gpu=1, limits_only=True)]}
    assert interpret(isvc(custom), KSERVE).instances[0].pod.requests == {"cpu": 2000, "memory": 8 * GI, GPU: 1}
    both = {"model": model(gpu=1), "containers": [container("proxy", cpu="500m", memory="256Mi")]}
    req = interpret(isvc(both), KSERVE).instances[0].pod.requests
    assert req == {"cpu": 4500, "memory": 16 * GI + 256 * 2**20, GPU: 1}


@pytest.mark.parametrize("annotations,pred_extra,status,pods", [
    (None, {}, None, 1),                                    # minReplicas default 1
    (STANDARD, {}, None, 1),
    (STANDARD, {"minReplicas": 3, "maxReplicas": 5}, None, 3),
    (STANDARD, {"minReplicas": 0}, None, 1),                # HPA min never below 1
    ({**STANDARD, "serving.kserve.io/autoscalerClass": "none"}, {"minReplicas": 2}, None, 2),
    ({"serving.kserve.io/deploymentMode": "RawDeployment"}, {"minReplicas": 0}, None, 1),
    (KNATIVE, {"minReplicas": 0}, None, 1),                 # scale-to-zero, but starts at initial-scale 1
    ({"serving.kserve.io/deploymentMode": "Serverless"}, {"minReplicas": 2}, None, 2),
    (KNATIVE, {"minReplicas": 0, "annotations": {"autoscaling.knative.dev/initial-scale": "3"}}, None, 3),
    ({**KNATIVE, "autoscaling.knative.dev/initial-scale": "4"}, {"maxReplicas": 2}, None, 2),
    (None, {"minReplicas": 0}, {"deploymentMode": "RawDeployment"}, 1),
    ({"serving.kserve.io/deploymentMode": "ModelMesh"}, {}, None, 0),
    ({**STANDARD, "serving.kserve.io/stop": "true"}, {"minReplicas": 2}, None, 0),
])
def test_kserve_replicas_by_deployment_mode(annotations, pred_extra, status, pods):
    obj = with_status(isvc({"model": model(gpu=1), **pred_extra}, annotations=annotations), status)
    w = interpret(obj, KSERVE)
    assert pods_by_instance(w) == {"predictor/predictor": pods}
    assert w.gpus == pods


def test_kserve_transformer_and_explainer_components():
    obj = isvc({"model": model(gpu=1), "minReplicas": 2},
               transformer={"containers": [container("kserve-container", cpu="1", memory="2Gi")]},
               explainer={"minReplicas": 3, "containers": [container("kserve-container", cpu="2", memory="4Gi")]},
               annotations=STANDARD)
    w = interpret(obj, KSERVE)
    assert pods_by_instance(w) == {"predictor/predictor": 2, "transformer/transformer": 1,
                                   "explainer/explainer": 3}
    sel = {i.component: i.selector for i in w.instances}
    for comp in ("predictor", "transformer", "explainer"):
        assert sel[comp] == {"serving.kserve.io/inferenceservice": "chat", "component": comp}
    assert w.gpus == 2 and w.gangs == ()


def multinode(head_gpu, worker_gpu, tp=None, pp=None):
    ws = {"containers": [{"name": "worker-container",
                          "resources": {"requests": {"cpu": "8", GPU: worker_gpu}, "limits": {GPU: worker_gpu}}}]}
    if tp:
        ws["tensorParallelSize"] = tp
    if pp:
        ws["pipelineParallelSize"] = pp
    pred = {"model": {**model(gpu=head_gpu), "modelFormat": {"name": "huggingface"}}, "workerSpec": ws}
    return isvc(pred, annotations=STANDARD)


@pytest.mark.parametrize("head,worker,tp,pp,nodes,head_gpus,worker_gpus", [
    (4, 4, 4, 2, 2, 4, 4),        # ray: ceil(8 / 4) = 2 nodes
    (0, 2, 2, 4, 4, 2, 2),        # head unset: head gets total - worker x (n-1) = 2
    (8, 4, 4, 2, 1, 8, 0),        # head alone holds TP x PP: single node, no workers
    (1, 1, 8, 2, 16, 1, 1),       # 16 single-GPU nodes
    (0, 0, 2, 2, 4, 1, 1),        # no GPUs given: TP x PP nodes of 1 GPU
])
def test_kserve_multinode_head_plus_ray_node_count_minus_one_workers(head, worker, tp, pp, nodes,
                                                                      head_gpus, worker_gpus):
    w = interpret(multinode(head, worker, tp, pp), KSERVE)
    by = {i.key: i for i in w.instances}
    assert by["predictor/predictor"].pods == 1
    assert by["worker/predictor-worker"].pods == nodes - 1
    assert by["predictor/predictor"].gpus_per_pod == head_gpus     # overwritten as the operator does
    if nodes > 1:
        assert by["worker/predictor-worker"].gpus_per_pod == worker_gpus
        assert w.gpus == tp * pp
        assert gangs(w) == [("chat-predictor", nodes, nodes, tp * pp)]
    else:
        assert gangs(w) == []
    assert by["worker/predictor-worker"].selector["app"] == "isvc.chat-predictor-worker"
    assert by["predictor/predictor"].selector["app"] == "isvc.chat-predictor"


def test_kserve_multinode_defaults_tp_pp_one():
    w = interpret(multinode(1, 1), KSERVE)
    assert pods_by_instance(w) == {"predictor/predictor": 1, "worker/predictor-worker": 0}


READY_MODEL = {"transitionStatus": "UpToDate", "states": {"activeModelState": "Loaded", "targetModelState": "Loaded"}}


@pytest.mark.parametrize("status,phase,reason", [
    (None, Phase.PENDING, "NotStarted"),
    ({"conditions": [cond("PredictorReady", "Unknown"), cond("Ready", "Unknown")],
      "modelStatus": {"transitionStatus": "InProgress", "states": {"activeModelState": "Pending"}}},
     Phase.PENDING, "NotReady"),
    ({"conditions": [cond("PredictorReady", "False"), cond("Ready", "False")],
      "modelStatus": {"transitionStatus": "InProgress", "states": {"activeModelState": "Loading"}}},
     Phase.INITIALIZING, "ModelLoading"),
    ({"conditions": [cond("IngressReady"), cond("PredictorReady"), cond("Ready")], "url": "http://chat.serve",
      "modelStatus": READY_MODEL}, Phase.RUNNING, "Ready"),
    ({"conditions": [cond("PredictorReady", "False"), cond("Ready", "False")],
      "modelStatus": {"transitionStatus": "BlockedByFailedLoad", "states": {"activeModelState": "FailedToLoad"},
                      "lastFailureInfo": {"reason": "ModelLoadFailed", "message": "OOM loading weights"}}},
     Phase.FAILED, "ModelLoadFailed"),
    ({"conditions": [cond("Ready", "False")],
      "modelStatus": {"transitionStatus": "InvalidSpec",
                      "lastFailureInfo": {"reason": "NoSupportingRuntime", "message": "no runtime for onnx"}}},
     Phase.FAILED, "NoSupportingRuntime"),
    ({"conditions": [cond("Ready", "False"), cond("Stopped", reason="Stopped")]}, Phase.PENDING, "Stopped"),
])
def test_kserve_status(status, phase, reason):
    w = interpret(with_status(isvc(), status), KSERVE)
    assert (w.phase, w.reason) == (phase, reason)
    if phase == Phase.FAILED:
        assert w.message


def test_kserve_patch_round_trip_every_component():
    obj = isvc({"model": model(gpu=4), "labels": {"team": "a"}, "nodeSelector": {"zone": "1"},
                "workerSpec": {"tensorParallelSize": 4, "pipelineParallelSize": 2,
                               "containers": [{"name": "worker-container", "resources": {"limits": {GPU: 4}}}]}},
               transformer={"containers": [container("kserve-container")]},
               explainer={"containers": [container("kserve-container")], "annotations": {"x": "y"}},
               annotations=STANDARD)
    prefixes = [("spec", c, f) for c in ("predictor", "transformer", "explainer")
                for f in ("labels", "annotations", "nodeSelector", "tolerations", "schedulerName")]
    prefixes += [("spec", "predictor", "workerSpec", f) for f in ("nodeSelector", "tolerations", "schedulerName")]
    patched = check_patch(obj, KSERVE, prefixes)
    assert patched["spec"]["predictor"]["labels"]["team"] == "a"
    assert len(interpret(patched, KSERVE).instances) == 4


def test_kserve_example():
    (obj,) = [d for d in yaml.safe_load_all((EXAMPLES_DIR / "inferenceservice.yaml").read_text()) if d]
    w = interpret(obj, KSERVE)
    assert pods_by_instance(w) == {"predictor/predictor": 1, "transformer/transformer": 1}
    assert w.gpus == 1


# --- Knative Service -------------------------------------------------------------------

KNATIVE_DEF = catalog("knative-service")


def ksvc(annotations=None, *, gpu=1, name="embed", service_annotations=None):
    tpl = {"spec": {"containers": [container("user-container", cpu="2", memory="8Gi", gpu=gpu)]}}
    if annotations is not None:
        tpl["metadata"] = {"annotations": annotations}
    meta = {"name": name, "namespace": "serve"}
    if service_annotations:
        meta["annotations"] = service_annotations
    return {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": meta,
            "spec": {"template": tpl}}


A = "autoscaling.knative.dev/"


@pytest.mark.parametrize("annotations,pods", [
    (None, 1),                                              # min 0, initial-scale 1
    ({A + "min-scale": "3"}, 3),
    ({A + "minScale": "5", A + "maxScale": "5"}, 5),        # legacy camelCase keys
    ({A + "min-scale": "2", A + "minScale": "7"}, 2),       # kebab-case wins
    ({A + "initial-scale": "4"}, 4),
    ({A + "initialScale": "0"}, 0),                         # allow-zero-initial-scale clusters
    ({A + "initial-scale": "6", A + "max-scale": "3"}, 3),  # capped by max-scale
    ({A + "max-scale": "0", A + "min-scale": "2"}, 2),      # 0 = unbounded
    ({A + "target": "10"}, 1),
])
def test_knative_scale_from_template_annotations(annotations, pods):
    w = interpret(ksvc(annotations), KNATIVE_DEF)
    assert pods_by_instance(w) == {"revision/latest": pods}
    assert w.gpus == pods and w.gangs == ()


def test_knative_service_metadata_annotations_do_not_scale():
    w = interpret(ksvc(None, service_annotations={A + "min-scale": "4"}), KNATIVE_DEF)
    assert w.pods == 1


def test_knative_queue_proxy_sidecar_and_selector():
    (inst,) = interpret(ksvc(None), KNATIVE_DEF).instances
    assert inst.pod.requests == {"cpu": 2025, "memory": 8 * GI, GPU: 1}
    assert inst.selector == {"serving.knative.dev/service": "embed"}


@pytest.mark.parametrize("status,phase", [
    (None, Phase.PENDING),
    ({"conditions": [cond("ConfigurationsReady", "Unknown"), cond("Ready", "Unknown", reason="RevisionMissing"),
                     cond("RoutesReady", "Unknown")], "latestCreatedRevisionName": "embed-00001"},
     Phase.INITIALIZING),
    ({"conditions": [cond("ConfigurationsReady"), cond("Ready"), cond("RoutesReady")],
      "latestReadyRevisionName": "embed-00001", "url": "http://embed.serve.example.com"}, Phase.RUNNING),
    ({"conditions": [cond("ConfigurationsReady", "False", reason="RevisionFailed"),
                     cond("Ready", "False", reason="RevisionFailed", message="Container failed: OOMKilled")]},
     Phase.FAILED),
])
def test_knative_status(status, phase):
    w = interpret(with_status(ksvc(None), status), KNATIVE_DEF)
    assert w.phase == phase


def test_knative_patch_round_trip():
    obj = ksvc({A + "min-scale": "2"})
    obj["spec"]["template"]["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    check_patch_round_trip(obj, KNATIVE_DEF, [("spec", "template")])


def test_knative_example():
    (obj,) = [d for d in yaml.safe_load_all((EXAMPLES_DIR / "knative-service.yaml").read_text()) if d]
    w = interpret(obj, KNATIVE_DEF)
    assert (w.pods, w.gpus) == (1, 1)


# --- NIMService --------------------------------------------------------------------------

NIM = catalog("nimservice")


def nim(*, name="llama", gpu=1, **spec):
    base = {"image": {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.8.3"},
            "authSecret": "ngc-api", "storage": {"nimCache": {"name": "llama-cache"}},
            "resources": {"limits": {GPU: gpu}, "requests": {"cpu": "4", "memory": "24Gi", GPU: gpu}} if gpu else {},
            "expose": {"service": {"type": "ClusterIP", "port": 8000}}}
    return {"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMService",
            "metadata": {"name": name, "namespace": "nim"}, "spec": {**base, **spec}}


@pytest.mark.parametrize("spec,pods", [
    ({}, 1),                                                          # replicas default 1
    ({"replicas": 3}, 3),
    ({"scale": {"enabled": True, "hpa": {"minReplicas": 2, "maxReplicas": 6}}}, 2),
    ({"scale": {"enabled": True, "hpa": {"maxReplicas": 6}}}, 1),
    ({"scale": {"enabled": False, "hpa": {"minReplicas": 4}}, "replicas": 2}, 2),
    ({"inferencePlatform": "kserve", "replicas": 2}, 2),
    ({"inferencePlatform": "kserve", "scale": {"enabled": True, "hpa": {"minReplicas": 3}}}, 3),
])
def test_nim_single_node_counts(spec, pods):
    w = interpret(nim(**spec), NIM)
    assert pods_by_instance(w) == {"service/llama": pods}
    assert w.gpus == pods and w.gangs == ()
    (inst,) = w.instances
    assert inst.pod.requests == {"cpu": 4000, "memory": 24 * GI, GPU: 1}
    kserve = spec.get("inferencePlatform") == "kserve"
    assert inst.selector == ({"serving.kserve.io/inferenceservice": "llama", "component": "predictor"}
                             if kserve else {"app": "llama"})


def test_nim_fragmented_pod_fields():
    w = interpret(nim(nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L40S"},
                      tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
                      affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                          "nodeSelectorTerms": [{"matchExpressions": [
                              {"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
                      labels={"team": "x"}, annotations={"a": "b"}, schedulerName="kai-scheduler",
                      initContainers=[container("warm", cpu="8", memory="1Gi")]), NIM)
    pod = w.instances[0].pod
    assert pod.node_selector == {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    assert pod.tolerations == ({"key": "nvidia.com/gpu", "operator": "Exists"},)
    assert pod.affinity_terms[0]["matchExpressions"][0]["key"] == "zone"
    assert (pod.labels, pod.annotations, pod.scheduler_name) == ({"team": "x"}, {"a": "b"}, "kai-scheduler")
    assert pod.requests["cpu"] == 8000                               # init container max


def test_nim_dra_resources_carry_no_gpu_request():
    dra = [{"claimCreationSpec": {"devices": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}}]
    w = interpret(nim(gpu=0, draResources=dra), NIM)
    assert (w.pods, w.gpus) == (1, 0)


@pytest.mark.parametrize("replicas,pipeline,tensor", [(None, 2, 8), (2, 2, 8), (1, 4, 4), (3, 1, 8), (1, None, 2)])
def test_nim_multi_node_pods_are_replicas_times_pipeline(replicas, pipeline, tensor):
    par = {"tensor": tensor, **({"pipeline": pipeline} if pipeline else {})}
    spec = {"multiNode": {"parallelism": par, "mpi": {"mpiStartTimeout": 6000}}}
    if replicas:
        spec["replicas"] = replicas
    w = interpret(nim(gpu=tensor, **spec), NIM)
    r, p = replicas or 1, pipeline or 1
    assert pods_by_instance(w) == {"leader/leader": r, "worker/worker": r * (p - 1)}
    assert w.pods == r * p and w.gpus == r * p * tensor
    assert gangs(w) == [(f"llama-lws-{g}", p, p, p * tensor) for g in range(r)]
    sel = {i.key: i.selector for i in w.instances}
    assert sel["leader/leader"] == {"leaderworkerset.sigs.k8s.io/name": "llama-lws",
                                    "leaderworkerset.sigs.k8s.io/worker-index": "0"}


def nim_status(state, cond_type=None, cond_status="True", reason=""):
    st = {"state": state, "availableReplicas": 1 if state == "Ready" else 0}
    if cond_type:
        st["conditions"] = [cond(cond_type, cond_status, reason=reason)]
    return st


@pytest.mark.parametrize("status,phase,reason", [
    (None, Phase.PENDING, "NotStarted"),
    (nim_status("Pending"), Phase.PENDING, "Pending"),
    (nim_status("NotReady", "Ready", "False", "NIMCacheNotReady"), Phase.INITIALIZING, "NIMCacheNotReady"),
    (nim_status("Ready", "Ready", reason="Ready"), Phase.RUNNING, "Ready"),
    (nim_status("Failed", "Failed", reason="DeploymentFailed"), Phase.FAILED, "DeploymentFailed"),
])
def test_nim_status(status, phase, reason):
    w = interpret(with_status(nim(), status), NIM)
    assert (w.phase, w.reason) == (phase, reason)


@pytest.mark.parametrize("multi", [False, True])
def test_nim_patch_round_trip(multi):
    extra = {"multiNode": {"parallelism": {"pipeline": 2, "tensor": 1}}} if multi else {}
    obj = nim(labels={"team": "x"}, nodeSelector={"zone": "a"}, **extra)
    allowed = [("spec", f) for f in ("labels", "annotations", "nodeSelector", "tolerations", "schedulerName")]
    # multi-node workers get no NIM labels (only LWS labels): documented in the definition
    check_patch(obj, NIM, allowed, no_labels=["worker/worker"] if multi else ())


def test_nim_example_with_nimcache_companion():
    docs = [d for d in yaml.safe_load_all((EXAMPLES_DIR / "nimservice.yaml").read_text()) if d]
    assert [d["kind"] for d in docs] == ["NIMCache", "NIMService"]
    w = interpret(docs[1], NIM)
    assert (w.pods, w.gpus) == (2, 2)
