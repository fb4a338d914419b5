"""Live describe: read a workload object from a cluster, interpret it, find its pods.

The pods of each instance are found through the definition's pod selectors
(`Instance.selector`, the labels the operator puts on the pods it creates). A pod that
matches several instances' selectors belongs to the most specific one (most labels).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from placer.definitions.describe import served_by
from placer.definitions.interpret import interpret
from placer.fleetview.registry import with_cluster_definitions
from placer.inputs.manifests import classify, read_documents
from placer.kube import Kube, KubeClient, run_concurrently
from placer.model.errors import InputError
from placer.model.podspec import DEFAULT_GPU_RESOURCES
from placer.model.workload import Workload
from placer.ops.context import Context, Scope, local_context
from placer.ops.requests import DescribeRequest


@dataclass(frozen=True)
class PodRef:
    name: str
    node: str | None
    phase: str
    # a pending pod's scheduling condition (PodScheduled=False): `reason: message`
    scheduling: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "node": self.node, "phase": self.phase,
                **({"scheduling": self.scheduling} if self.scheduling else {})}


PodsByComponent = dict[str, list[PodRef]]


def parse_ref(ref: str) -> tuple[str, str]:
    """`KIND/NAME` as kubectl takes it (KIND: kind, plural or short name, optionally
    with `.group` or `.version.group`)."""
    kind, sep, name = ref.partition("/")
    if not sep or not kind or not name or "/" in name:
        raise InputError(f"expected KIND/NAME (e.g. jobset/train), got {ref!r}")
    return kind, name


def describe_live(ref: str, namespace: str | None, context: str | None, kubeconfig: str | None,
                  catalog: Any, *, kube: Kube | None = None,
                  warn: Callable[[str], None] | None = None,
                  gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> tuple[Workload, PodsByComponent]:
    """The live object's interpretation and its pods by `component/instance`. Definitions
    registered in the cluster override the catalog's."""
    kind, name = parse_ref(ref)
    kube = kube or Kube(kubeconfig)
    client = kube.client(context)
    catalog = with_cluster_definitions(catalog, client, warn or _stderr)
    res = client.resolve(kind)
    obj = client.get(res, name, namespace)
    workload = interpret(obj, catalog, gpu_resources=gpu_resources, source=f"cluster {client.cluster}")
    return workload, find_pods(client, workload)


def find_pods(client: KubeClient, workload: Workload) -> PodsByComponent:
    """Pods of each instance (by selector, concurrently), each pod under one instance."""
    instances = [i for i in workload.instances if i.has_selector]
    listed = run_concurrently({
        i.key: partial(client.list, "pods", workload.namespace, label_selector=i.selector_string())
        for i in instances})
    owner: dict[str, tuple[int, str]] = {}      # pod name -> (selector size, instance key)
    pods: dict[str, dict] = {}
    for inst in instances:
        for pod in listed[inst.key].items:
            pname = pod["metadata"]["name"]
            pods[pname] = pod
            size = len(inst.selector) + len(inst.selector_expressions)
            if pname not in owner or size > owner[pname][0]:
                owner[pname] = (size, inst.key)
    out: PodsByComponent = {i.key: [] for i in workload.instances}
    for pname, (_, key) in owner.items():
        out[key].append(_pod_ref(pods[pname]))
    for refs in out.values():
        refs.sort(key=lambda p: p.name)
    return out


def _pod_ref(pod: Mapping[str, Any]) -> PodRef:
    status = pod.get("status") or {}
    phase = status.get("phase") or "Unknown"
    return PodRef(name=pod["metadata"]["name"], node=(pod.get("spec") or {}).get("nodeName"), phase=phase,
                  scheduling=_not_scheduled(status) if phase == "Pending" else None)


def _not_scheduled(status: Mapping[str, Any]) -> str | None:
    """Why the scheduler has not bound the pod: its PodScheduled=False condition."""
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == "PodScheduled" and c.get("status") == "False":
            reason, message = c.get("reason") or "", " ".join(str(c.get("message") or "").split())
            return f"{reason}: {message}" if reason and message else (reason or message or None)
    return None


def _stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


# --- the use case of `placer describe` ---------------------------------------------

@dataclass(frozen=True)
class Described:
    """A workload's interpretation, for a live one its pods by `component/instance`, and
    which definition served it (`definitionFormat`, `definitionSource`, `warnings`)."""

    workload: Workload
    pods: Mapping[str, Sequence[PodRef]] | None = None
    served: Mapping[str, Any] = field(default_factory=dict)

    @property
    def pod_dicts(self) -> dict[str, list[dict[str, Any]]] | None:
        """The pods as plain mappings (what the tree and the JSON render)."""
        return None if self.pods is None else {k: [p.to_json() for p in v] for k, v in self.pods.items()}


def describe(ctx: Context, request: DescribeRequest) -> tuple[Described, ...]:
    """The use case of `placer describe`: interpret the files' workloads (companions
    skipped), or read the live object and find its pods. The Context gives the catalog,
    the GPU names and the Kube handle; a live cluster's own definitions override the catalog's."""
    request.check()
    if request.files:
        docs = read_documents(list(request.files), namespace=request.namespace)
        return tuple(Described(w, None, _served(ctx, w))
                     for w in classify(docs, ctx.catalog, gpu_resources=ctx.gpu_resources).workloads)
    assert request.ref is not None, "checked: a ref or files"
    workload, pods = describe_live(request.ref, request.namespace, request.context, None, ctx.catalog,
                                   kube=ctx.kube, warn=ctx.warn, gpu_resources=ctx.gpu_resources)
    return (Described(workload, pods, _served(ctx, workload)),)


def _served(ctx: Context, w: Workload) -> dict[str, Any]:
    """From the Context's catalog (the files'): a definition not in it was registered in
    the live object's cluster."""
    return served_by(ctx.catalog.lookup(w.api_version, w.kind), w)


# --- the library API's describe (placer.api), on the use case -------------------------

def describe_files(paths: Sequence[str], *, catalog_dirs: Sequence[str] = (),
                   gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
                   namespace: str | None = None) -> list[Workload]:
    """Interpret every workload document in the files (companions skipped); `namespace`
    as kubectl's -n with -f (fills in, and must agree with, the objects' namespaces)."""
    with local_context(Scope(catalog_dirs=tuple(catalog_dirs), gpu_resources=tuple(gpu_resources))) as ctx:
        return [d.workload for d in describe(ctx, DescribeRequest(files=tuple(paths), namespace=namespace))]


def describe_ref(ref: str, *, namespace: str | None = None, context: str | None = None,
                 kubeconfig: str | None = None, catalog_dirs: Sequence[str] = (),
                 gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES
                 ) -> tuple[Workload, Mapping[str, Sequence[Mapping[str, Any]]]]:
    """A live object's workload and its pods by `component/instance`."""
    scope = Scope(kubeconfig=kubeconfig, catalog_dirs=tuple(catalog_dirs), gpu_resources=tuple(gpu_resources))
    with local_context(scope, warn=_stderr) as ctx:
        [found] = describe(ctx, DescribeRequest(ref, namespace=namespace, context=context))
    return found.workload, found.pod_dicts or {}
