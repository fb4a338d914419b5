"""One real cluster through the kubernetes client: register nodes, bind pods directly, create
objects, read pods, clean up. Placer is not used here, so what it reads is the API's word."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

PAUSE = "registry.k8s.io/pause:3.10"
NATIVE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
NOT_READY = "node.kubernetes.io/not-ready"
CORDONED = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    allocatable: Mapping[str, str]                    # e.g. {"cpu": "8", "nvidia.com/gpu": "8"}
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()        # {"key", "value", "effect"}
    unschedulable: bool = False


@dataclass(frozen=True)
class BoundPod:
    """A pod already on a node (created with spec.nodeName, as if scheduled earlier), that
    tolerates every taint."""

    name: str
    node: str
    requests: Mapping[str, str]
    phase: str | None = None                          # Succeeded/Failed: terminated, takes nothing


def container(name: str, requests: Mapping[str, str]) -> dict[str, Any]:
    """A pause container; extended resources need limits equal to requests."""
    res: dict[str, Any] = {"requests": dict(requests)}
    ext = {k: v for k, v in requests.items() if k not in NATIVE_RESOURCES}
    if ext:
        res["limits"] = ext
    return {"name": name, "image": PAUSE, "resources": res}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Cluster:
    """A context of the kubeconfig, with the typed APIs the judge needs."""

    def __init__(self, kubeconfig: str, context: str):
        self.context = context
        self.api = k8s_config.new_client_from_config(config_file=str(kubeconfig), context=context)
        self.core = k8s.CoreV1Api(self.api)
        self.apps = k8s.AppsV1Api(self.api)
        self.batch = k8s.BatchV1Api(self.api)
        self.node_v1 = k8s.NodeV1Api(self.api)

    def plain(self, model: Any) -> Any:
        return self.api.sanitize_for_serialization(model)

    # --- nodes ---------------------------------------------------------------------

    def add_nodes(self, specs: Sequence[NodeSpec], timeout: float = 30) -> None:
        """Create Ready nodes and wait until the node controller has settled their taints
        (the admission's not-ready taint gone, cordoned nodes tainted), so that placer and
        the scheduler see the same nodes."""
        for s in specs:
            body = {"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": s.name, "labels": {"kubernetes.io/hostname": s.name, **s.labels}},
                    "spec": {"taints": [dict(t) for t in s.taints], "unschedulable": s.unschedulable}}
            self.core.create_node(body)
            now = _now()
            status = {"capacity": dict(s.allocatable), "allocatable": dict(s.allocatable),
                      "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                      "message": "registered by the fidelity judge",
                                      "lastHeartbeatTime": now, "lastTransitionTime": now}]}
            self.core.patch_node_status(s.name, {"status": status})
        self.wait_nodes_settled(specs, timeout)

    def wait_nodes_settled(self, specs: Sequence[NodeSpec], timeout: float = 30) -> None:
        want = {s.name: s.unschedulable for s in specs}
        deadline = time.monotonic() + timeout
        while True:
            pending = []
            for n in self.core.list_node().items:
                if n.metadata.name not in want:
                    continue
                keys = {t.key for t in n.spec.taints or ()}
                if NOT_READY in keys or want[n.metadata.name] != (CORDONED in keys):
                    pending.append(n.metadata.name)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.context}: node taints not settled after {timeout:.0f}s on "
                                   f"{', '.join(pending[:5])} (is the node lifecycle controller running?)")
            time.sleep(0.1)

    def delete_nodes(self, names: Iterable[str]) -> None:
        for name in names:
            try:
                self.core.delete_node(name)
            except ApiException as e:
                if e.status != 404:
                    raise

    def node_names(self) -> list[str]:
        return [n.metadata.name for n in self.core.list_node().items]

    # --- namespaces, pods, objects ---------------------------------------------------

    def ensure_namespace(self, name: str, timeout: float = 10) -> None:
        """The namespace, and its default ServiceAccount when the controller makes one (the
        ServiceAccount admission, where enabled, refuses pods without it)."""
        try:
            self.core.create_namespace({"metadata": {"name": name}})
        except ApiException as e:
            if e.status != 409:
                raise
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.core.read_namespaced_service_account("default", name)
                return
            except ApiException as e:
                if e.status != 404:
                    raise
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)

    def bind_pods(self, namespace: str, pods: Sequence[BoundPod]) -> None:
        for p in pods:
            meta = {"name": p.name, "labels": {"fidelity/bound": "true"}}
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                    # tolerating everything, as pods that were there before a NoExecute taint
                    # would (else the taint-eviction controller deletes them at once)
                    "spec": {"nodeName": p.node, "terminationGracePeriodSeconds": 0,
                             "tolerations": [{"operator": "Exists"}],
                             "containers": [container("c", p.requests)]}}
            self.core.create_namespaced_pod(namespace, body)
            if p.phase:
                self.core.patch_namespaced_pod_status(p.name, namespace, {"status": {"phase": p.phase}})

    def create(self, namespace: str, obj: Mapping[str, Any]) -> None:
        """Create a Pod, Job, Deployment or StatefulSet (the controllers do the rest)."""
        kind = obj.get("kind")
        body = {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": namespace}}
        create = {"Pod": self.core.create_namespaced_pod, "Job": self.batch.create_namespaced_job,
                  "Deployment": self.apps.create_namespaced_deployment,
                  "StatefulSet": self.apps.create_namespaced_stateful_set}.get(kind)
        if create is None:
            raise ValueError(f"the judge cannot create a {kind}")
        create(namespace, body)

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        return [self.plain(p) for p in self.core.list_namespaced_pod(namespace).items]

    def events(self, namespace: str) -> list[dict[str, Any]]:
        return [self.plain(e) for e in self.core.list_namespaced_event(namespace).items]

    def clear_namespace(self, namespace: str, timeout: float = 60) -> None:
        """Delete every controller and pod in the namespace, pods at once (no kubelet will
        ever confirm a graceful deletion), finalizers dropped."""
        bg = k8s.V1DeleteOptions(propagation_policy="Background")
        self.batch.delete_collection_namespaced_job(namespace, body=bg)
        self.apps.delete_collection_namespaced_deployment(namespace, body=bg)
        self.apps.delete_collection_namespaced_stateful_set(namespace, body=bg)
        self.apps.delete_collection_namespaced_replica_set(namespace, body=bg)
        deadline = time.monotonic() + timeout
        while True:
            left = (self.core.list_namespaced_pod(namespace).items
                    + [None] * (len(self.batch.list_namespaced_job(namespace).items)
                                + len(self.apps.list_namespaced_replica_set(namespace).items)
                                + len(self.apps.list_namespaced_stateful_set(namespace).items)))
            if not left:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.context}: namespace {namespace} not empty after {timeout:.0f}s")
            for p in left:
                if p is not None and p.metadata.finalizers:
                    try:
                        self.core.patch_namespaced_pod(p.metadata.name, namespace, {"metadata": {"finalizers": None}})
                    except ApiException as e:
                        if e.status != 404:
                            raise
            self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            time.sleep(0.1)

    def ensure_runtime_class(self, name: str, fields: Mapping[str, Any] | None = None) -> None:
        """A RuntimeClass (handler runc) with `fields` such as overhead and scheduling."""
        body: dict[str, Any] = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                "metadata": {"name": name}, "handler": "runc", **(fields or {})}
        try:
            self.node_v1.create_runtime_class(body)
        except ApiException as e:
            if e.status != 409:
                raise

    def ensure_crds(self, crds: Sequence[Mapping[str, Any]], timeout: float = 60) -> None:
        """CustomResourceDefinitions, each waited for until Established: the cluster then serves
        those kinds, as a target running their operators does (placer plans only there)."""
        ext = k8s.ApiextensionsV1Api(self.api)
        for body in crds:
            try:
                ext.create_custom_resource_definition(body)
            except ApiException as e:
                if e.status != 409:
                    raise
        deadline = time.monotonic() + timeout
        for body in crds:
            name = body["metadata"]["name"]
            while not any(c.get("type") == "Established" and c.get("status") == "True" for c in
                          (self.plain(ext.read_custom_resource_definition(name)).get("status") or {})
                          .get("conditions") or ()):
                if time.monotonic() > deadline:
                    raise AssertionError(f"{self.context}: CRD {name} not Established after {timeout:.0f}s")
                time.sleep(0.2)
