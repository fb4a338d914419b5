"""Catalog definitions of Grove PodCliqueSet and Dynamo DynamoGraphDeployment (v1alpha1 map
form, v1beta1 list form): FACTS.md sections 12-13. Manifests are written here."""

from __future__ import annotations

import pytest
import yaml

from placer.definitions.interpret import interpret
from placer.model.workload import Phase
from tests.definitions.catalog_helpers import (
    EXAMPLES_DIR,
    GI,
    catalog,
    cond,
    container,
    gangs,
    pods_by_instance,
    with_status,
)
from tests.definitions.serving_helpers import check_patch

# --- Grove PodCliqueSet --------------------------------------------------------------------

GROVE = catalog("podcliqueset")


def clique(name, replicas=None, *, gpu=1, min_available=None, labels=None):
    spec = {"roleName": name, "podSpec": {"containers": [container(name, cpu="4", memory="32Gi", gpu=gpu)]}}
    if replicas is not None:
        spec["replicas"] = replicas
    if min_available is not None:
        spec["minAvailable"] = min_available
    out = {"name": name, "spec": spec}
    if labels:
        out["labels"] = labels
    return out


def pcsg(name, cliques, replicas=None, min_available=None):
    out = {"name": name, "cliqueNames": list(cliques)}
    if replicas is not None:
        out["replicas"] = replicas
    if min_available is not None:
        out["minAvailable"] = min_available
    return out


def pcs(cliques, groups=(), *, replicas=None, name="svc"):
    spec = {"template": {"cliques": list(cliques)}}
    if groups:
        spec["template"]["podCliqueScalingGroups"] = list(groups)
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
            "metadata": {"name": name, "namespace": "grove"}, "spec": spec}


def test_grove_standalone_cliques_and_defaults():
    w = interpret(pcs([clique("router", 2, gpu=0), clique("engine")]), GROVE)
    assert pods_by_instance(w) == {"clique/router": 2, "clique/engine": 1}   # clique replicas default 1
    assert w.gpus == 1
    # clique minAvailable defaults to its replicas: the base gang needs every pod
    assert gangs(w) == [("svc-0", 3, 3, 1)]
    sel = {i.key: i.selector for i in w.instances}
    assert sel["clique/router"] == {"app.kubernetes.io/part-of": "svc", "grove.io/podclique": "svc-0-router"}


def test_grove_scaling_group_multiplies_and_scaled_podgangs():
    # leader 1 + workers 3 per PCSG replica, 2 PCSG replicas: 8 pods (FACTS worked example)
    w = interpret(pcs([clique("leader", 1), clique("worker", 3)], [pcsg("model", ["leader", "worker"], 2)]), GROVE)
    assert pods_by_instance(w) == {"pcsgClique/leader": 2, "pcsgClique/worker": 6}
    assert (w.pods, w.gpus) == (8, 8)
    # base gang holds PCSG replica 0 (minAvailable default 1); replica 1 is scaled gang "-0"
    assert gangs(w) == [("svc-0", 4, 4, 4), ("svc-0-model-0", 4, 4, 4)]
    assert {i.key: i.selector for i in w.instances}["pcsgClique/leader"] == {
        "app.kubernetes.io/part-of": "svc", "grove.io/podcliquescalinggroup": "svc-0-model"}


def test_grove_scaled_podgang_index_is_not_the_pcsg_replica_index():
    w = interpret(pcs([clique("fe", 1, gpu=0), clique("l", 1), clique("w", 1, min_available=0)],
                      [pcsg("grp", ["l", "w"], replicas=4, min_available=2)]), GROVE)
    assert pods_by_instance(w) == {"clique/fe": 1, "pcsgClique/l": 4, "pcsgClique/w": 4}
    # base: fe + PCSG replicas 0,1 (min: fe 1 + 2 x (l 1 + w 0)); replicas 2,3 -> "grp-0", "grp-1"
    assert gangs(w) == [("svc-0", 5, 3, 4), ("svc-0-grp-0", 2, 1, 2), ("svc-0-grp-1", 2, 1, 2)]


def test_grove_pcs_replicas_multiply_everything():
    w = interpret(pcs([clique("fe", 2, gpu=0, min_available=1), clique("l", 1), clique("w", 2)],
                      [pcsg("grp", ["l", "w"], replicas=2)], replicas=2), GROVE)
    assert pods_by_instance(w) == {"clique/fe": 4, "pcsgClique/l": 4, "pcsgClique/w": 8}
    assert w.pods == 2 * (2 + 2 * 3)
    assert sorted(gangs(w)) == [("svc-0", 5, 4, 3), ("svc-0-grp-0", 3, 3, 3),
                                ("svc-1", 5, 4, 3), ("svc-1-grp-0", 3, 3, 3)]
    assert sum(g[1] for g in gangs(w)) == w.pods


def test_grove_pcsg_defaults_replicas_one():
    w = interpret(pcs([clique("a", 3), clique("b", 2), clique("c", 2)], [pcsg("sg", ["b", "c"])]), GROVE)
    assert w.pods == 3 + 1 * (2 + 2)
    assert gangs(w) == [("svc-0", 7, 7, 7)]


def gang_status(*phases, available=0, replicas=1):
    return {"replicas": replicas, "availableReplicas": available, "updatedReplicas": replicas,
            "podGangStatuses": [{"name": f"svc-{i}", "phase": p} for i, p in enumerate(phases)]}


@pytest.mark.parametrize("status,phase", [
    (None, Phase.PENDING),
    (gang_status("Pending"), Phase.PENDING),
    ({"replicas": 1}, Phase.PENDING),
    (gang_status("Starting"), Phase.INITIALIZING),
    (gang_status("Running", "Starting"), Phase.INITIALIZING),
    (gang_status("Running", available=1), Phase.RUNNING),
    (gang_status("Running", "Failed"), Phase.FAILED),
    (gang_status("Succeeded", "Succeeded", available=0), Phase.COMPLETED),
])
def test_grove_status(status, phase):
    assert interpret(with_status(pcs([clique("a")]), status), GROVE).phase == phase


def test_grove_patch_round_trip():
    obj = pcs([clique("fe", gpu=0, labels={"role": "fe"}), clique("l"), clique("w", 2)], [pcsg("g", ["l", "w"], 2)])
    allowed = [("spec", "template", "cliques", i, *p) for i in range(3)
               for p in (("labels",), ("annotations",), ("spec", "podSpec"))]
    patched = check_patch(obj, GROVE, allowed)
    assert patched["spec"]["template"]["cliques"][0]["labels"]["role"] == "fe"


def test_grove_example():
    (obj,) = [d for d in yaml.safe_load_all((EXAMPLES_DIR / "podcliqueset.yaml").read_text()) if d]
    w = interpret(obj, GROVE)
    assert (w.pods, w.gpus) == (5, 8)
    assert gangs(w) == [("disagg-llm-0", 5, 4, 8)]


# --- Dynamo DynamoGraphDeployment ------------------------------------------------------------

DYNAMO = catalog("dynamo-v1alpha1", "dynamo-v1beta1")


def svc_a(gpu=None, replicas=None, nodes=None, *, gpu_type=None, cpu=None, custom=None, **extra):
    """v1alpha1 service: Dynamo's own resource struct."""
    out = {"componentType": "worker" if gpu else "frontend",
           "extraPodSpec": {"mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.0"}}, **extra}
    limits = {}
    if gpu is not None:
        limits["gpu"] = str(gpu)
    if gpu_type:
        limits["gpuType"] = gpu_type
    if cpu:
        limits["cpu"] = cpu
    if limits or custom:
        out["resources"] = {"limits": limits, **({"requests": {"custom": custom}} if custom else {})}
    if replicas is not None:
        out["replicas"] = replicas
    if nodes is not None:
        out["multinode"] = {"nodeCount": nodes}
    return out


def dgd_a(services, *, name="graph", annotations=None):
    meta = {"name": name, "namespace": "dyn", **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": meta,
            "spec": {"services": services}}


def comp_b(name, gpu=0, replicas=None, nodes=None, **extra):
    out = {"name": name, "type": "worker" if gpu else "frontend",
           "podTemplate": {"spec": {"containers": [container("main", cpu="8", memory="64Gi", gpu=gpu)]}}, **extra}
    if replicas is not None:
        out["replicas"] = replicas
    if nodes is not None:
        out["multinode"] = {"nodeCount": nodes}
    return out


def dgd_b(components, *, name="graph", annotations=None):
    meta = {"name": name, "namespace": "dyn", **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": meta,
            "spec": {"components": list(components)}}


def test_dynamo_v1alpha1_map_vendor_resources_and_counts():
    w = interpret(dgd_a({"Frontend": svc_a(), "decode": svc_a(8, nodes=2), "prefill": svc_a(8, 1, 2)}), DYNAMO)
    assert w.definition == "dynamo-v1alpha1"
    assert pods_by_instance(w) == {"service/Frontend": 1, "service/decode": 2, "service/prefill": 2}
    by = {i.instance: i for i in w.instances}
    assert by["decode"].gpus_per_pod == 8 and by["decode"].gpus == 16 and by["prefill"].gpus == 16
    assert w.gpus == 32
    assert by["decode"].selector == {"nvidia.com/dynamo-graph-deployment-name": "graph",
                                     "nvidia.com/dynamo-component": "decode"}


def test_dynamo_v1alpha1_gpu_type_cpu_custom_and_main_container_merge():
    svc = svc_a(2, gpu_type="amd.com/gpu", cpu="12", custom={"ephemeral-storage": "20Gi"})
    svc["extraPodSpec"]["mainContainer"]["resources"] = {"requests": {"memory": "64Gi"}}
    svc["extraPodSpec"]["containers"] = [container("sidecar", cpu="1", memory="1Gi")]
    w = interpret(dgd_a({"w": svc}), DYNAMO)
    (inst,) = w.instances
    assert inst.pod.requests == {"cpu": 13000, "memory": 65 * GI, "amd.com/gpu": 2, "ephemeral-storage": 20 * GI}
    assert w.gpus == 0            # GPU totals count nvidia.com/gpu by default
    w2 = interpret(dgd_a({"w": svc}), DYNAMO, gpu_resources=("amd.com/gpu",))
    assert w2.gpus == 2


def test_dynamo_v1alpha1_struct_without_gpu_keeps_the_main_containers_own():
    svc = svc_a(cpu="4")                      # Dynamo's struct names a CPU limit, no GPU
    svc["extraPodSpec"]["mainContainer"]["resources"] = {"limits": {"nvidia.com/gpu": 4}}
    (inst,) = interpret(dgd_a({"w": svc}), DYNAMO).instances
    assert inst.pod.requests == {"cpu": 4000, "nvidia.com/gpu": 4}


def test_dynamo_v1beta1_list_podtemplate_counts():
    w = interpret(dgd_b([comp_b("Frontend"), comp_b("decode", 2, nodes=2), comp_b("prefill", 1, replicas=3)]), DYNAMO)
    assert w.definition == "dynamo-v1beta1"
    assert pods_by_instance(w) == {"component/Frontend": 1, "component/decode": 2, "component/prefill": 3}
    assert w.gpus == 2 * 2 + 3
    assert {i.instance: i.selector["nvidia.com/dynamo-component"] for i in w.instances} == {
        "Frontend": "Frontend", "decode": "decode", "prefill": "prefill"}


@pytest.mark.parametrize("form", ["v1alpha1", "v1beta1"])
def test_dynamo_gangs_on_grove_min_available_default_one(form):
    # decode: 3 replicas x nodeCount 2; Frontend 2 single-node pods
    if form == "v1alpha1":
        obj = dgd_a({"Frontend": svc_a(replicas=2), "Decode": svc_a(4, 3, 2)})
        fe, dec = ("service", "Frontend"), ("service", "Decode")
    else:
        obj = dgd_b([comp_b("Frontend", replicas=2), comp_b("Decode", 4, 3, 2)])
        fe, dec = ("component", "Frontend"), ("component", "Decode")
    w = interpret(obj, DYNAMO)
    assert w.pods == 2 + 6
    # base PodGang: both Frontend pods (at least 1) + Decode replica 0 (leader + 1 worker)
    assert gangs(w) == [("graph-0", 4, 3, 8), ("graph-0-decode-0", 2, 2, 8), ("graph-0-decode-1", 2, 2, 8)]
    assert w.gangs[0].members == (fe + (2,), dec + (2,))


@pytest.mark.parametrize("form", ["v1alpha1", "v1beta1"])
def test_dynamo_gangs_without_grove_are_lws_groups(form):
    ann = {"nvidia.com/enable-grove": "false"}
    obj = (dgd_a({"Frontend": svc_a(), "Decode": svc_a(4, 2, 4)}, annotations=ann) if form == "v1alpha1"
           else dgd_b([comp_b("Frontend"), comp_b("Decode", 4, 2, 4)], annotations=ann))
    w = interpret(obj, DYNAMO)
    assert gangs(w) == [("graph-decode-0", 4, 4, 16), ("graph-decode-1", 4, 4, 16)]


def test_dynamo_single_node_graph_has_one_base_gang():
    w = interpret(dgd_b([comp_b("Frontend"), comp_b("Worker", 1, replicas=2)]), DYNAMO)
    assert gangs(w) == [("graph-0", 3, 2, 2)]


def dyn_status(state, ready=None, reason=""):
    st = {"state": state}
    if ready:
        st["conditions"] = [cond("Ready", ready, reason=reason)]
    return st


@pytest.mark.parametrize("status,phase", [
    (None, Phase.PENDING),
    (dyn_status("initializing"), Phase.PENDING),                                 # CRD default
    (dyn_status("pending", "False", "some_resources_are_not_ready"), Phase.INITIALIZING),
    (dyn_status("pending", "False", "rolling_update_in_progress"), Phase.INITIALIZING),
    (dyn_status("successful", "True", "all_resources_are_ready"), Phase.RUNNING),
    (dyn_status("failed", "False", "insufficient_capacity"), Phase.FAILED),
])
@pytest.mark.parametrize("form", ["v1alpha1", "v1beta1"])
def test_dynamo_status_inverted_names(form, status, phase):
    obj = dgd_a({"Frontend": svc_a()}) if form == "v1alpha1" else dgd_b([comp_b("Frontend")])
    w = interpret(with_status(obj, status), DYNAMO)
    assert w.phase == phase
    if phase == Phase.FAILED:
        assert w.reason == "insufficient_capacity"


def test_dynamo_v1alpha1_patch_round_trip():
    obj = dgd_a({"Frontend": svc_a(), "decode": svc_a(8, nodes=2, labels={"tier": "gpu"})})
    obj["spec"]["services"]["decode"]["extraPodSpec"]["nodeSelector"] = {"zone": "a"}
    allowed = [("spec", "services", s, *p) for s in ("Frontend", "decode")
               for p in (("labels",), ("annotations",), ("extraPodSpec",))]
    patched = check_patch(obj, DYNAMO, allowed)
    assert patched["spec"]["services"]["decode"]["labels"]["tier"] == "gpu"
    assert patched["spec"]["services"]["decode"]["extraPodSpec"]["mainContainer"] == \
        obj["spec"]["services"]["decode"]["extraPodSpec"]["mainContainer"]


def test_dynamo_v1beta1_patch_round_trip():
    obj = dgd_b([comp_b("Frontend"), comp_b("decode", 2, nodes=2)])
    allowed = [("spec", "components", i, "podTemplate") for i in range(2)]
    check_patch(obj, DYNAMO, allowed)


@pytest.mark.parametrize("name,pods,gpus,gang", [
    ("dynamo-v1alpha1", 3, 2, [("qwen-agg-0", 3, 2, 2)]),
    ("dynamo-v1beta1", 4, 6, [("qwen-disagg-0", 4, 4, 6)]),
])
def test_dynamo_examples(name, pods, gpus, gang):
    obj = [d for d in yaml.safe_load_all((EXAMPLES_DIR / f"{name}.yaml").read_text()) if d][0]
    w = interpret(obj, DYNAMO)
    assert (w.pods, w.gpus, gangs(w)) == (pods, gpus, gang)
