"""One-line builders for test objects: GPU nodes, pods bound to them, namespaces, and CRDs for the
catalog's workload kinds (minimal, schema-less: x-kubernetes-preserve-unknown-fields)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

GPU = "nvidia.com/gpu"
H100 = "NVIDIA-H100-80GB-HBM3"


def _taint(t) -> dict:
    """A taint from a dict, a (key, value, effect) tuple or "key=value:Effect" / "key:Effect"."""
    if isinstance(t, Mapping):
        return dict(t)
    if isinstance(t, str):
        kv, _, effect = t.rpartition(":")
        key, _, value = kv.partition("=")
        return {"key": key, **({"value": value} if value else {}), "effect": effect}
    key, value, effect = t
    return {"key": key, **({"value": value} if value else {}), "effect": effect}


def gpu_node(name: str, gpus: int = 8, product: str = H100, cpu: str = "96", memory: str = "1Ti",
             taints: Iterable = (), labels: Mapping[str, str] | None = None, ready: bool = True,
             unschedulable: bool = False, pods: str = "110", extra: Mapping[str, str] | None = None) -> dict:
    """A v1 Node with `gpus` nvidia.com/gpu allocatable and the GPU feature-discovery labels."""
    resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "1Ti", **(extra or {})}
    all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    if gpus:
        resources[GPU] = str(gpus)
        all_labels.update({"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus),
                           "nvidia.com/gpu.present": "true"})
    all_labels.update(labels or {})
    spec: dict = {}
    if taints:
        spec["taints"] = [_taint(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {
            "capacity": dict(resources), "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                            "reason": "KubeletReady" if ready else "KubeletNotReady",
                            "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                            "lastTransitionTime": "2025-01-01T00:00:00Z"}],
            # every field: the kubernetes client's models reject a partial nodeInfo
            "nodeInfo": {"architecture": "amd64", "bootID": f"boot-{name}", "containerRuntimeVersion":
                         "containerd://1.7.0", "kernelVersion": "6.1.0", "kubeProxyVersion": "v1.32.0",
                         "kubeletVersion": "v1.32.0", "machineID": f"machine-{name}", "operatingSystem": "linux",
                         "osImage": "Ubuntu 22.04 LTS", "systemUUID": f"uuid-{name}"},
        },
    }


def bound_pod(name: str, node: str | None, gpus: int = 0, cpu: str = "1", memory: str = "4Gi",
              phase: str = "Running", namespace: str = "default", labels: Mapping[str, str] | None = None,
              annotations: Mapping[str, str] | None = None, owner: Mapping | None = None,
              overhead: Mapping[str, str] | None = None, scheduler_name: str | None = None) -> dict:
    """A v1 Pod with one container requesting cpu/memory/GPUs, bound to `node` (None: pending)."""
    requests = {"cpu": cpu, "memory": memory}
    limits = {}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    container = {"name": "main", "image": "registry.example/train:1",
                 "resources": {"requests": requests, **({"limits": limits} if limits else {})}}
    meta: dict = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner:
        meta["ownerReferences"] = [{"controller": True, "blockOwnerDeletion": True, **owner}]
    spec: dict = {"containers": [container], "restartPolicy": "Never"}
    if node:
        spec["nodeName"] = node
    if overhead:
        spec["overhead"] = dict(overhead)
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    status: dict = {"phase": phase}
    if node and phase == "Running":
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def loaded_node(name: str, gpus: int = 8, used_gpus: int = 0, pods: int | None = None,
                namespace: str = "default", **node_options) -> list[dict]:
    """A GPU node plus running pods on it that together request `used_gpus` GPUs (split over `pods`
    pods, default one pod per GPU)."""
    n = pods if pods is not None else used_gpus
    objs = [gpu_node(name, gpus, **node_options)]
    for i in range(n):
        share = used_gpus // n + (1 if i < used_gpus % n else 0)
        objs.append(bound_pod(f"{name}-p{i}", name, gpus=share, namespace=namespace))
    return objs


def synthetic_cluster(nodes: int = 500, pods_per_node: int = 4, gpus: int = 8, gpus_per_pod: int = 1,
                      prefix: str = "node", namespace: str = "default", product: str = H100) -> list[dict]:
    """Many nodes with bound pods, for seeding benchmarks and pagination tests (seed, not HTTP)."""
    objs: list[dict] = []
    for i in range(nodes):
        node = f"{prefix}-{i:05d}"
        objs.append(gpu_node(node, gpus, product=product))
        objs.extend(bound_pod(f"{node}-p{j}", node, gpus=gpus_per_pod, namespace=namespace,
                              labels={"app": "bench"}) for j in range(pods_per_node))
    return objs


def namespace(name: str, labels: Mapping[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def crd(group: str, kind: str, plural: str, versions: Iterable[str] = ("v1",), short_names: Iterable[str] = (),
        scope: str = "Namespaced", status: bool = True, categories: Iterable[str] = (),
        storage: str | None = None) -> dict:
    """A minimal apiextensions.k8s.io/v1 CustomResourceDefinition (storage: the last version by default)."""
    versions = list(versions)
    storage = storage or versions[-1]
    names = {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"}
    if short_names:
        names["shortNames"] = list(short_names)
    if categories:
        names["categories"] = list(categories)
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group, "scope": scope, "names": names,
            "versions": [{
                "name": v, "served": True, "storage": v == storage,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                **({"subresources": {"status": {}}} if status else {}),
            } for v in versions],
        },
    }


# (group, kind, plural, versions, shortNames, categories) for the catalog's custom workload kinds
CATALOG_KINDS = (
    ("jobset.x-k8s.io", "JobSet", "jobsets", ("v1alpha2",), (), ()),
    ("kubeflow.org", "PyTorchJob", "pytorchjobs", ("v1",), (), ()),
    ("kubeflow.org", "MPIJob", "mpijobs", ("v2beta1",), (), ()),
    ("ray.io", "RayCluster", "rayclusters", ("v1",), (), ("all",)),
    ("ray.io", "RayJob", "rayjobs", ("v1",), (), ("all",)),
    ("ray.io", "RayService", "rayservices", ("v1",), (), ("all",)),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet", "leaderworkersets", ("v1",), ("lws",), ()),
    ("serving.kserve.io", "InferenceService", "inferenceservices", ("v1beta1",), ("isvc",), ()),
    ("serving.knative.dev", "Service", "services", ("v1",), ("kservice", "ksvc"), ("all", "knative", "serving")),
    ("apps.nvidia.com", "NIMService", "nimservices", ("v1alpha1",), (), ()),
    ("milvus.io", "Milvus", "milvuses", ("v1beta1",), ("mi",), ()),
    ("grove.io", "PodCliqueSet", "podcliquesets", ("v1alpha1",), ("pcs",), ()),
    ("nvidia.com", "DynamoGraphDeployment", "dynamographdeployments", ("v1alpha1", "v1beta1"), ("dgd",), ()),
)


def catalog_crds() -> list[dict]:
    return [crd(g, k, p, versions=v, short_names=s, categories=c) for g, k, p, v, s, c in CATALOG_KINDS]


def custom_object(api_version: str, kind: str, name: str, namespace: str = "default", spec: dict | None = None,
                  labels: Mapping[str, str] | None = None) -> dict:
    meta = {"name": name, "namespace": namespace, **({"labels": dict(labels)} if labels else {})}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec or {}}
