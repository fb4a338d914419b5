"""placer's library API: what a dashboard, controller or scheduler imports.

    from placer import api
    catalog = api.load_catalog()                      # built-in definitions (+ extra dirs)
    w = api.interpret(obj, catalog)                   # -> Workload: instances, pods, demand, gangs, phase
    w.gpus, w.pods, w.phase, w.gangs
    api.instances(w, "workerGroup")                   # a component's instances
    patched = api.patch_pod_templates(obj, catalog, {"schedulerName": "kai-scheduler"})

Everything here is pure except `describe_live` (reads a cluster through placer.kube).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .catalog import Catalog, load_catalog
from .interpret import interpret, patch_pod_templates
from .manifests import classify, load_groups, read_documents
from .podspec import DEFAULT_GPU_RESOURCES
from .workload import Instance, Workload

__all__ = ["Catalog", "Workload", "Instance", "load_catalog", "interpret", "patch_pod_templates",
           "instances", "describe_files", "describe_live", "load_groups", "read_documents"]


def instances(workload: Workload, component: str) -> tuple[Instance, ...]:
    return workload.instances_of(component)


def describe_files(paths: Sequence[str], *, catalog_dirs: Sequence[str] = (),
                   gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
                   namespace: str | None = None) -> list[Workload]:
    """Interpret every workload document in the files (companions skipped); `namespace`
    as kubectl's -n with -f (fills in, and must agree with, the objects' namespaces)."""
    catalog = load_catalog(catalog_dirs)
    docs = read_documents(paths, namespace=namespace)
    return list(classify(docs, catalog, gpu_resources=gpu_resources).workloads)


def describe_live(ref: str, *, namespace: str | None = None, context: str | None = None,
                  kubeconfig: str | None = None, catalog_dirs: Sequence[str] = (),
                  gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES
                  ) -> tuple[Workload, Mapping[str, Sequence[Mapping[str, Any]]]]:
    """A live object's workload and its pods by `component/instance`."""
    from .live import describe_live as _live
    workload, pods = _live(ref, namespace, context, kubeconfig, load_catalog(catalog_dirs))
    return workload, {k: [p if isinstance(p, Mapping) else vars(p) for p in v] for k, v in pods.items()}
