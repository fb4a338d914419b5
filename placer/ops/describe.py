"""Live describe: read a workload object from a cluster, interpret it, find its pods.

The pods of each instance are found through the definition's pod selectors
(`Instance.selector`, the labels the operator puts on the pods it creates). A pod that
matches several instances' selectors belongs to the most specific one (most labels).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from placer.definitions.catalog import load_catalog
from placer.fleetview.registry import with_cluster_definitions
from placer.inputs.manifests import classify, read_documents
from placer.kube import Kube, KubeClient, run_concurrently
from placer.model.errors import InputError
from placer.model.podspec import DEFAULT_GPU_RESOURCES
from placer.model.workload import Workload


@dataclass(frozen=True)
class PodRef:
    name: str
    node: str | None
    phase: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "node": self.node, "phase": self.phase}


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
    from placer.definitions.interpret import interpret

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
    return PodRef(name=pod["metadata"]["name"], node=(pod.get("spec") or {}).get("nodeName"),
                  phase=(pod.get("status") or {}).get("phase") or "Unknown")


def _stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


# --- the library API's describe (placer.api) ----------------------------------------

def describe_files(paths: Sequence[str], *, catalog_dirs: Sequence[str] = (),
                   gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
                   namespace: str | None = None) -> list[Workload]:
    """Interpret every workload document in the files (companions skipped); `namespace`
    as kubectl's -n with -f (fills in, and must agree with, the objects' namespaces)."""
    catalog = load_catalog(catalog_dirs)
    docs = read_documents(paths, namespace=namespace)
    return list(classify(docs, catalog, gpu_resources=gpu_resources).workloads)


def describe_ref(ref: str, *, namespace: str | None = None, context: str | None = None,
                  kubeconfig: str | None = None, catalog_dirs: Sequence[str] = (),
                  gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES
                  ) -> tuple[Workload, Mapping[str, Sequence[Mapping[str, Any]]]]:
    """A live object's workload and its pods by `component/instance`."""
    workload, pods = describe_live(ref, namespace, context, kubeconfig, load_catalog(catalog_dirs))
    return workload, {k: [p if isinstance(p, Mapping) else vars(p) for p in v] for k, v in pods.items()}
