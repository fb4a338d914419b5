"""Generators for placement benchmarks: fleets and workload mixes, seeded and deterministic.

One scenario, two renderings:
- in memory: `make_fleet` / `make_workloads` (the solver measured without parsing);
- on disk: `write_clusters_file` (simulated clusters, node groups with `count`) and
  `write_manifests` (one YAML file per workload, every catalog type, the shapes each
  operator really takes), for `placer plan --dry-run -f DIR --clusters FILE` end to end.
Both come from the same per-workload specs, so the GPUs requested agree exactly.
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from placer.inputs.clusters_file import parse_clusters, simulated_cluster  # noqa: E402
from placer.model.fleet import Fleet  # noqa: E402  # noqa: E402
from placer.model.workload import Gang, Instance, Phase, PlacementGroup, PodShape, Workload  # noqa: E402

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"
GI = 2**30
PRODUCTS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S")
PRODUCT_LABEL = "nvidia.com/gpu.product"
TAINT = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}


# --- fleets ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class FleetSpec:
    clusters: int
    nodes: int                    # GPU nodes per cluster
    gpus: int = 8                 # per node
    fragmentation: float = 0.3    # share of nodes partly used
    products: int = 2             # GPU products in the fleet (one per cluster, round robin)
    tainted: float = 0.1          # share of clusters whose nodes carry a NoSchedule taint
    cpu: int = 96
    memory_gi: int = 1024
    mig: float = 0.0              # share of clusters with an extra pool of MIG nodes (A100, 7 x 1g.10gb per GPU)
    distinct: bool = False        # every node written by name with its own hostname label (one class per node)


def clusters_document(spec: FleetSpec, seed: int = 0) -> dict[str, Any]:
    """The fleet as a clusters file: per cluster, one node group per used-GPU level."""
    rnd = random.Random(seed)
    clusters = []
    for c in range(spec.clusters):
        product = PRODUCTS[c % spec.products]
        tainted = rnd.random() < spec.tainted
        levels: dict[int, int] = {}
        for _ in range(spec.nodes):
            g = rnd.randint(1, spec.gpus - 1) if rnd.random() < spec.fragmentation else 0
            levels[g] = levels.get(g, 0) + 1
        groups = []
        for g in sorted(levels):
            group: dict[str, Any] = {
                "namePrefix": f"c{c}-gpu{'' if g == 0 else f'-u{g}'}-", "count": levels[g],
                "allocatable": {GPU: spec.gpus, "cpu": str(spec.cpu), "memory": f"{spec.memory_gi}Gi",
                                "pods": 110},
                "labels": {PRODUCT_LABEL: product, "node.kubernetes.io/instance-type": "gpu"}}
            if g:
                group["used"] = {GPU: g, "cpu": f"{11 * g}", "memory": f"{120 * g}Gi", "pods": g}
            if tainted:
                group["taints"] = [dict(TAINT)]
            groups.append(group)
        groups.append({"namePrefix": f"c{c}-cpu-", "count": max(1, spec.nodes // 50),   # CPU-only nodes
                       "allocatable": {"cpu": "64", "memory": "256Gi", "pods": 110}})
        if spec.mig and rnd.random() < spec.mig:
            groups.append({"namePrefix": f"c{c}-mig-", "count": max(1, spec.nodes // 10),
                           "allocatable": {MIG: 56, "cpu": "96", "memory": "1Ti", "pods": 110},
                           "labels": {PRODUCT_LABEL: "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig.strategy": "mixed"}})
        if spec.distinct:
            groups = _distinct(groups)
        clusters.append({"name": f"c{c:02d}", "labels": {"region": ("us-east", "us-west", "eu")[c % 3],
                                                          "product": product},
                         "nodes": groups})
    return {"clusters": clusters}


def _distinct(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Node groups as single nodes, as live clusters look: a hostname label each, and CPU in
    use that differs a little from node to node."""
    out = []
    for g in groups:
        for i in range(g["count"]):
            name = f"{g['namePrefix']}{i}"
            used = dict(g.get("used") or {})
            used["cpu"] = f"{int(str(used.get('cpu', '0'))) * 1000 + 100 + i % 700}m"
            node = {k: v for k, v in g.items() if k not in ("namePrefix", "count", "used")}
            node.update(name=name, used=used, labels={**g.get("labels", {}), "kubernetes.io/hostname": name})
            out.append(node)
    return out


def make_fleet(spec: FleetSpec, seed: int = 0) -> Fleet:
    return Fleet(tuple(simulated_cluster(c) for c in parse_clusters(clusters_document(spec, seed), "<generated>").clusters))


def write_clusters_file(spec: FleetSpec, path: str | Path, seed: int = 0) -> Path:
    path = Path(path)
    path.write_text(yaml.safe_dump(clusters_document(spec, seed), sort_keys=False))
    return path


# --- workload mixes -----------------------------------------------------------------------

KINDS = ("JobSet", "PyTorchJob", "MPIJob", "RayCluster", "RayJob", "RayService", "InferenceService",
         "Service", "NIMService", "LeaderWorkerSet", "Milvus", "PodCliqueSet", "DynamoGraphDeployment",
         "Job", "Deployment", "StatefulSet", "Pod")
SERVING = ("InferenceService", "Service", "NIMService", "Deployment", "Milvus")
SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass(frozen=True)
class MixSpec:
    workloads: int
    size_weights: tuple[int, ...] = (5, 5, 8, 10, 12, 15, 20, 25)
    priorities: tuple[int, ...] = (0,)
    priority_weights: tuple[int, ...] = (1,)
    product_pinned: float = 0.2        # share selecting a GPU product by nodeSelector
    tolerating: float = 0.3
    products: int = 2
    selector_share: float = 0.05       # share carrying a cluster-selector on region
    max_size: int = 128
    mig: float = 0.0                   # share asking for MIG slices (1-3 per pod) instead of GPUs
    pinned: float = 0.0                # share pinned to one of `clusters` clusters
    clusters: int = 0
    cpu_only: float = 0.0              # share of CPU-only workloads (1-8 pods of `cpu_zero` CPU)
    cpu_per_gpu: int = 11              # CPU per GPU of a GPU pod
    cpu_zero: int = 4                  # CPU of a pod without GPUs


@dataclass(frozen=True)
class Spec:
    """One workload of a mix: its kind, GPUs per pod and pod layout, predicates, policy."""

    index: int
    kind: str
    namespace: str
    name: str
    per: int                                        # GPUs per GPU pod
    layout: tuple[tuple[str, str, int, int], ...]   # (component, instance, pods, GPUs per pod)
    product: str | None
    tolerate: bool
    annotations: dict[str, str] = field(default_factory=dict)
    gpu_key: str = GPU
    cpu_per_gpu: int = 11
    cpu_zero: int = 4

    @property
    def gpus(self) -> int:
        return sum(n * g for _, _, n, g in self.layout)


def _layout(kind: str, total: int, per: int) -> tuple[tuple[str, str, int, int], ...]:
    pods = max(1, total // per)
    if kind == "PyTorchJob":
        return (("Master", "0", 1, per),) + ((("Worker", "0", pods - 1, per),) if pods > 1 else ())
    if kind in ("RayCluster", "RayJob", "RayService"):
        submitter = (("submitter", "0", 1, 0),) if kind == "RayJob" else ()   # the job's submitter pod
        return (("head", "0", 1, 0), ("workers", "gpu-group", pods, per)) + submitter
    if kind == "MPIJob":
        return (("Launcher", "0", 1, 0), ("Worker", "0", pods, per))
    if kind == "LeaderWorkerSet":
        size = min(pods, 4)
        return tuple(("group", str(i), size, per) for i in range(max(1, pods // size)))
    if kind in ("DynamoGraphDeployment", "PodCliqueSet"):
        return (("frontend", "0", 1, 0), ("prefill", "0", max(1, pods // 2), per),
                ("decode", "0", max(1, pods - pods // 2), per))
    if kind == "Pod":
        return (("main", "0", 1, per),)
    return (("main", "0", pods, per),)


def mix(spec: MixSpec, seed: int = 0) -> list[Spec]:
    rnd = random.Random(seed)
    out = []
    sizes = [s for s in SIZES if s <= spec.max_size]
    for i in range(spec.workloads):
        kind = KINDS[i % len(KINDS)]
        total = rnd.choices(sizes, spec.size_weights[:len(sizes)])[0]
        per = min(8, total)
        if total >= 8 and rnd.random() < 0.3:
            per = 4                       # some 4-GPU pods (gangs up to 32 pods)
        if kind in SERVING:
            per = min(per, rnd.choice((1, 2, 4)))
            total = min(total, per * 8)
        product = PRODUCTS[rnd.randrange(spec.products)] if rnd.random() < spec.product_pinned else None
        tol = rnd.random() < spec.tolerating
        ann = {}
        prio = rnd.choices(spec.priorities, spec.priority_weights)[0]
        if prio:
            ann["placer.dev/priority"] = str(prio)
        if rnd.random() < spec.selector_share:
            ann["placer.dev/cluster-selector"] = f"region in ({rnd.choice(('us-east', 'us-west', 'eu'))})"
        layout, key = _layout(kind, total, per), GPU
        if spec.pinned and rnd.random() < spec.pinned:
            ann["placer.dev/cluster"] = f"c{rnd.randrange(spec.clusters):02d}"
        if spec.mig and rnd.random() < spec.mig:
            per, key = rnd.randint(1, 3), MIG
            layout, product = (("main", "0", rnd.randint(1, 8), per),), None
        elif spec.cpu_only and rnd.random() < spec.cpu_only:
            per, layout, product = 0, (("main", "0", rnd.randint(1, 8), 0),), None
        out.append(Spec(i, kind, f"team{i % 7}", f"w{i:04d}-{kind.lower()}", per, layout,
                        product, tol, ann, key, spec.cpu_per_gpu, spec.cpu_zero))
    return out


def _requests(gpus: int, key: str = GPU, cpu_per_gpu: int = 11, cpu_zero: int = 4) -> dict[str, int]:
    if key != GPU:                     # MIG slices: a seventh of a GPU each
        return {"cpu": 2_000 * gpus, "memory": 16 * gpus * GI, key: gpus}
    req = {"cpu": 1000 * cpu_per_gpu * gpus if gpus else 1000 * cpu_zero, "memory": (120 * gpus if gpus else 16) * GI}
    if gpus:
        req[GPU] = gpus
    return req


def to_workload(s: Spec) -> Workload:
    sel = {PRODUCT_LABEL: s.product} if s.product else {}
    tol = (TOLERATION,) if s.tolerate else ()
    insts = tuple(Instance(c, i, n, 1, n, PodShape(requests=_requests(g, s.gpu_key, s.cpu_per_gpu, s.cpu_zero), node_selector=sel, tolerations=tol), g)
                  for c, i, n, g in s.layout)
    pods = sum(x.pods for x in insts)
    gang = Gang("g", tuple((x.component, x.instance, x.pods) for x in insts), pods, pods, s.gpus)
    return Workload("v1", s.kind, s.namespace, s.name, s.kind.lower(), Phase.PENDING, "", "", insts, (gang,),
                    annotations=dict(s.annotations))


def make_workloads(spec: MixSpec, seed: int = 0) -> list[PlacementGroup]:
    out = []
    for s in mix(spec, seed):
        w = to_workload(s)
        out.append(PlacementGroup(w.key, (w,)))
    return out


# --- manifests --------------------------------------------------------------------------------

def _resources(gpus: int, gpu_key: str = GPU) -> dict[str, Any]:
    req: dict[str, Any] = {"cpu": str(11 * gpus) if gpus else "4", "memory": f"{120 * gpus if gpus else 16}Gi"}
    lim: dict[str, Any] = {"memory": req["memory"]}
    if gpus:
        req[gpu_key] = lim[gpu_key] = gpus if gpu_key == GPU else str(gpus)
    return {"requests": req, "limits": lim}


def _placement(s: Spec, gpus: int) -> dict[str, Any]:
    """nodeSelector/tolerations of a pod (GPU pods only carry the product selector)."""
    out: dict[str, Any] = {}
    if s.product and gpus:
        out["nodeSelector"] = {PRODUCT_LABEL: s.product}
    if s.tolerate:
        out["tolerations"] = [dict(TOLERATION)]
    return out


def _pod(s: Spec, gpus: int, name: str, image: str, restart: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if restart:
        spec["restartPolicy"] = restart
    spec.update(_placement(s, gpus))
    spec["containers"] = [{"name": name, "image": image, "resources": _resources(gpus)}]
    return spec


TRAIN = "nvcr.io/nvidia/pytorch:24.05-py3"
SERVE = "vllm/vllm-openai:v0.6.3"
RAY = "rayproject/ray:2.52.0-gpu"


def _ray_cluster(s: Spec) -> dict[str, Any]:
    _, (_, _, n, g), *_ = s.layout
    return {"rayVersion": "2.52.0",
            "headGroupSpec": {"rayStartParams": {"num-gpus": "0"},
                              "template": {"spec": _pod(s, 0, "ray-head", RAY)}},
            "workerGroupSpecs": [{"groupName": "gpu-group", "replicas": n, "minReplicas": n, "maxReplicas": n,
                                  "rayStartParams": {}, "template": {"spec": _pod(s, g, "ray-worker", RAY)}}]}


def _job_template(s: Spec, n: int, g: int, image: str = TRAIN) -> dict[str, Any]:
    return {"parallelism": n, "completions": n, "completionMode": "Indexed", "backoffLimit": 0,
            "template": {"spec": _pod(s, g, "main", image, restart="Never")}}


def _manifest(s: Spec) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """(apiVersion, spec, companions) of a workload spec."""
    k, L, meta = s.kind, s.layout, {"name": s.name, "namespace": s.namespace}
    main = next(x for x in L if x[3] or len(L) == 1)
    _, _, n, g = main
    if k == "JobSet":
        return "jobset.x-k8s.io/v1alpha2", {"failurePolicy": {"maxRestarts": 3}, "replicatedJobs": [
            {"name": "trainer", "replicas": 1, "template": {"spec": _job_template(s, n, g)}}]}, []
    if k == "PyTorchJob":
        specs = {c: {"replicas": cnt, "restartPolicy": "OnFailure",
                     "template": {"spec": _pod(s, gg, "pytorch", TRAIN)}} for c, _, cnt, gg in L}
        return "kubeflow.org/v1", {"nprocPerNode": str(g), "pytorchReplicaSpecs": specs}, []
    if k == "MPIJob":
        (_, _, _, _), (_, _, n, g) = L
        return "kubeflow.org/v2beta1", {"slotsPerWorker": g, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": _pod(s, 0, "launcher", TRAIN)}},
            "Worker": {"replicas": n, "template": {"spec": _pod(s, g, "worker", TRAIN)}}}}, []
    if k == "RayCluster":
        return "ray.io/v1", _ray_cluster(s), []
    if k == "RayJob":
        return "ray.io/v1", {"entrypoint": "python -m batch.run", "shutdownAfterJobFinishes": True,
                             "rayClusterSpec": _ray_cluster(s)}, []
    if k == "RayService":
        return "ray.io/v1", {"serveConfigV2": "applications: []\n", "rayClusterConfig": _ray_cluster(s)}, []
    if k == "InferenceService":
        pred = {"minReplicas": n, "maxReplicas": n, **_placement(s, g),
                "model": {"modelFormat": {"name": "huggingface"}, "storageUri": "hf://org/model",
                          "resources": _resources(g)}}
        return "serving.kserve.io/v1beta1", {"predictor": pred}, []
    if k == "Service":
        tmpl = {"metadata": {"annotations": {"autoscaling.knative.dev/min-scale": str(n),
                                             "autoscaling.knative.dev/initial-scale": str(n)}},
                "spec": {**_placement(s, g), "containers": [
                    {"name": "user-container", "image": SERVE, "resources": _resources(g)}]}}
        return "serving.knative.dev/v1", {"template": tmpl}, []
    if k == "NIMService":
        return "apps.nvidia.com/v1alpha1", {
            "image": {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.8.3"},
            "authSecret": "ngc-api", "replicas": n, "resources": _resources(g), **_placement(s, g),
            "expose": {"service": {"type": "ClusterIP", "port": 8000}}}, []
    if k == "LeaderWorkerSet":
        size = L[0][2]
        return "leaderworkerset.x-k8s.io/v1", {"replicas": len(L), "leaderWorkerTemplate": {
            "size": size, "restartPolicy": "RecreateGroupOnPodRestart",
            "workerTemplate": {"spec": _pod(s, g, "vllm", SERVE)}}}, []
    if k == "Milvus":
        comp = {"replicas": n, "resources": _resources(g), **_placement(s, g)}
        return "milvus.io/v1beta1", {"mode": "standalone", "components": {"standalone": comp},
                                     "dependencies": {"etcd": {"inCluster": {"deletionPolicy": "Delete"}}}}, []
    if k == "PodCliqueSet":
        cliques = [{"name": c if c != "frontend" else "router",
                    "spec": {"roleName": c, "replicas": cnt, "podSpec": _pod(s, gg, c, SERVE)}}
                   for c, _, cnt, gg in L]
        return "grove.io/v1alpha1", {"replicas": 1, "template": {"cliques": cliques}}, []
    if k == "DynamoGraphDeployment":
        svc = {}
        for c, _, cnt, gg in L:
            ent: dict[str, Any] = {"componentType": "frontend" if not gg else "worker", "replicas": cnt,
                                   "resources": _resources(gg, "gpu"),
                                   "extraPodSpec": {**_placement(s, gg), "mainContainer": {"image": SERVE}}}
            if gg:
                ent["subComponentType"] = c
            svc[{"frontend": "Frontend", "prefill": "VllmPrefillWorker", "decode": "VllmDecodeWorker"}[c]] = ent
        return "nvidia.com/v1alpha1", {"services": svc}, []
    if k == "Job":
        return "batch/v1", _job_template(s, n, g), []
    if k in ("Deployment", "StatefulSet"):
        labels = {"app": s.name}
        spec = {"replicas": n, "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": _pod(s, g, "server", SERVE)}}
        if k == "StatefulSet":
            spec = {"serviceName": s.name, "podManagementPolicy": "Parallel", **spec}
        service = {"apiVersion": "v1", "kind": "Service", "metadata": dict(meta),
                   "spec": {"selector": labels, "ports": [{"port": 8000, "name": "http"}]}}
        return "apps/v1", spec, [service]
    if k == "Pod":
        return "v1", _pod(s, g, "cuda", TRAIN, restart="Never"), []
    raise ValueError(f"no manifest for kind {k}")


def manifest_documents(s: Spec) -> list[dict[str, Any]]:
    api, spec, companions = _manifest(s)
    meta: dict[str, Any] = {"name": s.name, "namespace": s.namespace, "labels": {"team": s.namespace}}
    if s.annotations:
        meta["annotations"] = dict(s.annotations)
    return [{"apiVersion": api, "kind": s.kind, "metadata": meta, "spec": spec}] + companions


def write_manifests(spec: MixSpec, directory: str | Path, seed: int = 0) -> list[Path]:
    """One file per workload (its companions in the same file, so they follow it)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for s in mix(spec, seed):
        p = d / f"{s.name}.yaml"
        p.write_text(yaml.safe_dump_all(manifest_documents(s), sort_keys=False))
        out.append(p)
    return out
