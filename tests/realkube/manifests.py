"""Small builders for the workloads the fidelity judge forces onto real clusters: pod
specs with every scheduling feature placer models, and the objects that carry them."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .cluster import container

Spec = dict[str, Any]


def pod_spec(requests: Mapping[str, str] | None = None, *, node_selector: Mapping[str, str] | None = None,
             terms: Sequence[Mapping[str, Any]] = (), tolerations: Sequence[Mapping[str, Any]] = (),
             init: Sequence[Mapping[str, str]] = (), sidecars: Sequence[tuple[int, Mapping[str, str]]] = (),
             runtime_class: str | None = None, restart: str | None = None, extra: Sequence[Mapping[str, str]] = ()
             ) -> Spec:
    """A pod spec: one main container (plus `extra` app containers), `init` containers run
    in order, `sidecars` as (position among the init containers, requests) with
    restartPolicy Always, required node affinity `terms` (ORed nodeSelectorTerms)."""
    spec: Spec = {}
    if restart:
        spec["restartPolicy"] = restart
    spec["containers"] = [container("main", requests or {})] + [
        container(f"app{i}", r) for i, r in enumerate(extra, 1)]
    inits = [container(f"init{i}", r) for i, r in enumerate(init)]
    for pos, r in sorted(sidecars, key=lambda s: s[0]):
        side = {**container(f"sidecar{pos}", r), "restartPolicy": "Always"}
        inits.insert(min(pos, len(inits)), side)
    if inits:
        spec["initContainers"] = inits
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if terms:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [dict(t) for t in terms]}}}
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    spec["terminationGracePeriodSeconds"] = 0
    return spec


def term(*exprs: tuple) -> dict[str, Any]:
    """A nodeSelectorTerm from (key, operator, values...) tuples."""
    return {"matchExpressions": [{"key": k, "operator": op, **({"values": list(v)} if v else {})}
                                 for k, op, *v in exprs]}


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": "default"}


def job(name: str, pods: int, spec: Spec, *, indexed: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                            "template": {"spec": {**spec, "restartPolicy": "Never"}}}
    if indexed:
        body["completionMode"] = "Indexed"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(name), "spec": body}


def deployment(name: str, replicas: int, spec: Spec, kind: str = "Deployment") -> dict[str, Any]:
    labels = {"app": name}
    body: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": labels},
                            "template": {"metadata": {"labels": labels}, "spec": spec}}
    if kind == "StatefulSet":
        body = {"serviceName": name, "podManagementPolicy": "Parallel", **body}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": _meta(name), "spec": body}


def statefulset(name: str, replicas: int, spec: Spec) -> dict[str, Any]:
    return deployment(name, replicas, spec, kind="StatefulSet")


def pod(name: str, spec: Spec) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(name), "spec": {**spec, "restartPolicy": "Never"}}


def jobset(name: str, jobs: Sequence[tuple[str, int, int, Spec]]) -> dict[str, Any]:
    """jobs: (name, replicas, pods per job, pod spec)."""
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": _meta(name),
            "spec": {"replicatedJobs": [
                {"name": n, "replicas": r, "template": {"spec": {
                    "parallelism": p, "completions": p, "backoffLimit": 0,
                    "template": {"spec": {**s, "restartPolicy": "Never"}}}}}
                for n, r, p, s in jobs]}}


def leaderworkerset(name: str, groups: int, size: int, worker: Spec, leader: Spec | None = None) -> dict[str, Any]:
    tpl: dict[str, Any] = {"size": size, "workerTemplate": {"spec": worker}}
    if leader is not None:
        tpl["leaderTemplate"] = {"spec": leader}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": _meta(name),
            "spec": {"replicas": groups, "leaderWorkerTemplate": tpl}}


def raycluster(name: str, head: Spec, workers: int, worker: Spec) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": _meta(name),
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": head}},
                     "workerGroupSpecs": [{"groupName": "workers", "replicas": workers, "minReplicas": workers,
                                           "maxReplicas": workers, "rayStartParams": {},
                                           "template": {"spec": worker}}]}}


def pytorchjob(name: str, workers: int, spec: Spec) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": _meta(name),
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": spec}},
                "Worker": {"replicas": workers, "restartPolicy": "OnFailure", "template": {"spec": spec}}}}}
