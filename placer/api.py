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

from placer.definitions.catalog import Catalog, load_catalog
from placer.definitions.interpret import interpret, patch_pod_templates
from placer.inputs.manifests import load_groups, read_documents
from placer.model.podspec import DEFAULT_GPU_RESOURCES
from placer.model.workload import Instance, Workload
from placer.ops.describe import describe_files
from placer.ops.describe import describe_ref as describe_live

__all__ = ["Catalog", "Workload", "Instance", "load_catalog", "interpret", "patch_pod_templates",
           "instances", "describe_files", "describe_live", "load_groups", "read_documents"]


def instances(workload: Workload, component: str) -> tuple[Instance, ...]:
    return workload.instances_of(component)
