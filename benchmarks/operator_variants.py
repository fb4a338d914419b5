"""Seeded variants of the operator-backed workload types for benchmarks/operators.py: replica
counts, sizes, GPUs per pod, sidecars (restartable init containers) and plain init containers,
GPUs asked through limits only (the API server defaults the requests), startup policies, LWS
size with or without a leader template, Ray numOfHosts and elastic bounds, RayJob submission
modes, PyTorchJob elastic bounds, MPIJob launchers. Each generator returns one object whose pods
fit one 8-GPU node each and whose total stays small (at most about 24 GPUs, 16 pods)."""
from __future__ import annotations

import random
from typing import Any

GPU = "nvidia.com/gpu"
IMAGE = "registry.example/train:1"


def resources(rng: random.Random, gpus: int, *, cpu: str | None = None) -> dict[str, Any]:
    """Requests (and GPU limits): a GPU asked through limits alone about a time in four."""
    requests: dict[str, str] = {"cpu": cpu or rng.choice(["250m", "1", "2", "3500m"])}
    if rng.random() < 0.7:
        requests["memory"] = rng.choice(["512Mi", "2Gi", "8Gi", "3G"])
    out: dict[str, Any] = {"requests": requests}
    if gpus:
        out["limits"] = {GPU: str(gpus)}
        if rng.random() < 0.75:
            requests[GPU] = str(gpus)
    return out


def container(rng: random.Random, name: str, gpus: int, **kw) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, "resources": resources(rng, gpus, **kw)}


def pod_spec(rng: random.Random, main: str, gpus: int, features: list[str], *, restart: str | None = None,
             cpu: str | None = None) -> dict[str, Any]:
    """A pod spec: the main container, sometimes a second container, a sidecar (restartable init
    container) and/or a plain init container asking more CPU than the rest."""
    spec: dict[str, Any] = {"containers": [container(rng, main, gpus, cpu=cpu)]}
    if restart:
        spec["restartPolicy"] = restart
    inits = []
    if rng.random() < 0.35:
        inits.append({**container(rng, "sidecar", 0), "restartPolicy": "Always"})
        features.append("sidecar")
    if rng.random() < 0.3:
        inits.append({**container(rng, "setup", 0, cpu=rng.choice(["4", "6"]))})
        features.append("init")
    if rng.random() < 0.2:
        spec["containers"].append(container(rng, "logger", 0, cpu="100m"))
        features.append("2 containers")
    if inits:
        spec["initContainers"] = inits
    return spec


def meta(name: str, ns: str) -> dict[str, str]:
    return {"name": name, "namespace": ns}


def jobset(rng: random.Random, name: str, ns: str) -> tuple[dict, list[str]]:
    features: list[str] = []
    jobs = []
    for j in range(rng.choice([1, 1, 2])):
        gpus = rng.choice([0, 1, 2, 4])
        parallelism = rng.randint(1, 3)
        job: dict[str, Any] = {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
                               "template": {"spec": pod_spec(rng, "trainer", gpus, features, restart="Never")}}
        # JobSet's Jobs are Indexed, which needs completions: parallelism alone is invalid
        draw = rng.random()
        if draw < 0.4:                                       # completions below or above parallelism
            job["completions"] = rng.randint(1, 4)
            features.append(f"completions {job['completions']}/parallelism {parallelism}")
        elif draw < 0.55:
            del job["parallelism"]
            features.append("parallelism unset")
        elif draw < 0.65:
            del job["parallelism"], job["completions"]
            features.append("parallelism and completions unset")
        jobs.append({"name": f"rj{j}", "replicas": rng.randint(1, 3), "template": {"spec": job}})
    spec: dict[str, Any] = {"replicatedJobs": jobs}
    if len(jobs) > 1 and rng.random() < 0.5:
        spec["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
        features.append("startupPolicy InOrder")
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta(name, ns),
            "spec": spec}, features


def leaderworkerset(rng: random.Random, name: str, ns: str) -> tuple[dict, list[str]]:
    features: list[str] = []
    size = rng.choice([1, 2, 3, 4])
    template: dict[str, Any] = {"size": size, "workerTemplate": {"spec": pod_spec(
        rng, "worker", rng.choice([0, 1, 2, 4]), features)}}
    if rng.random() < 0.5:
        template["leaderTemplate"] = {"spec": pod_spec(rng, "leader", rng.choice([0, 1, 2]), features)}
        features.append("leader template")
    spec: dict[str, Any] = {"replicas": rng.randint(1, 3), "leaderWorkerTemplate": template}
    if rng.random() < 0.4:
        spec["startupPolicy"] = "LeaderReady"
        features.append("LeaderReady")
    features.append(f"size {size}")
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta(name, ns),
            "spec": spec}, features


def ray_spec(rng: random.Random, features: list[str]) -> dict[str, Any]:
    """A RayCluster spec: the head and one or two worker groups, numOfHosts 1-2, replicas inside
    or outside [minReplicas, maxReplicas] (the operator clamps), in-tree autoscaling sometimes."""
    groups = []
    for g in range(rng.choice([1, 2])):
        hosts = rng.choice([1, 1, 2])
        group: dict[str, Any] = {"groupName": f"g{g}", "replicas": rng.randint(0, 2), "numOfHosts": hosts,
                                 "rayStartParams": {},
                                 "template": {"spec": pod_spec(rng, "ray-worker", rng.choice([0, 1, 2, 4]), features)}}
        if rng.random() < 0.5:
            group["minReplicas"] = rng.randint(0, 1)
            group["maxReplicas"] = group["minReplicas"] + rng.randint(0, 2)
            features.append(f"bounds {group['minReplicas']}..{group['maxReplicas']} replicas {group['replicas']}")
        if hosts > 1:
            features.append(f"numOfHosts {hosts}")
        groups.append(group)
    spec: dict[str, Any] = {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod_spec(
        rng, "ray-head", 0, features, cpu=rng.choice(["1", "2"]))}}, "workerGroupSpecs": groups}
    if rng.random() < 0.25:
        spec["enableInTreeAutoscaling"] = True
        features.append("autoscaler")
    return spec


def raycluster(rng: random.Random, name: str, ns: str) -> tuple[dict, list[str]]:
    features: list[str] = []
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta(name, ns),
            "spec": ray_spec(rng, features)}, features


def rayjob(rng: random.Random, name: str, ns: str) -> tuple[dict, list[str]]:
    features: list[str] = []
    spec: dict[str, Any] = {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": ray_spec(rng, features)}
    mode = rng.choice(["K8sJobMode", "K8sJobMode", "SidecarMode", None])
    if mode:
        spec["submissionMode"] = mode
    features.append(mode or "default mode")
    if mode != "SidecarMode" and rng.random() < 0.4:
        spec["submitterPodTemplate"] = {"spec": {"restartPolicy": "Never", "containers": [
            container(rng, "ray-job-submitter", 0, cpu="300m")]}}
        features.append("submitter template")
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta(name, ns), "spec": spec}, features


def pytorchjob(rng: random.Random, name: str, ns: str) -> tuple[dict, list[str]]:
    features: list[str] = []
    gpus = rng.choice([0, 1, 2, 4])
    replica = {"Master": {"replicas": 1, "restartPolicy": "OnFailure",
                          "template": {"spec": pod_spec(rng, "pytorch", gpus, features)}},
               "Worker": {"replicas": rng.randint(1, 3), "restartPolicy": "OnFailure",
                          "template": {"spec": pod_spec(rng, "pytorch", gpus, features)}}}
    spec: dict[str, Any] = {"pytorchReplicaSpecs": replica}
    if rng.random() < 0.3:
        low = rng.randint(1, 2)
        spec["elasticPolicy"] = {"minReplicas": low, "maxReplicas": low + rng.randint(0, 2)}
        features.append("elastic bounds")
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta(name, ns), "spec": spec}, features


def mpijob(rng: random.Random, name: str, ns: str) -> tuple[dict, list[str]]:
    features: list[str] = []
    gpus = rng.choice([1, 2, 4])
    spec = {"slotsPerWorker": gpus, "mpiReplicaSpecs": {
        "Launcher": {"replicas": 1, "template": {"spec": pod_spec(rng, "launcher", 0, features)}},
        "Worker": {"replicas": rng.randint(1, 3), "template": {"spec": pod_spec(rng, "worker", gpus, features)}}}}
    if rng.random() < 0.3:
        spec["runLauncherAsWorker"] = True
        features.append("launcher as worker")
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": meta(name, ns), "spec": spec}, features
