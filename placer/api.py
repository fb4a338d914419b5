"""placer's library API: what a dashboard, controller or scheduler imports.

    from placer import api
    catalog = api.load_catalog()                      # built-in definitions (+ extra dirs)
    w = api.interpret(obj, catalog)                   # -> Workload: instances, pods, demand, gangs, phase
    w.gpus, w.pods, w.phase, w.gangs
    api.instances(w, "workerGroup")                   # a component's instances
    patched = api.patch_pod_templates(obj, catalog, {"schedulerName": "kai-scheduler"})

The commands' use cases, each on one Context (built once: `open_context(Scope(...))`
resolves the clusters as the CLI does; `context_of(entries, catalog, kube)` takes them as
values; `local_context(Scope(...))` has none), each returning frozen data:

    with api.open_context(api.Scope(clusters="clusters.yaml")) as ctx:
        result = api.submit(ctx, api.SubmitRequest(("job.yaml",), dry_run=True))   # -> SubmitResult
        rows = api.get_placed(ctx, api.Query.parse("jobsets"))                      # -> [Row]

The interpretation functions are pure; the use cases read clusters through placer.kube.
"""

from __future__ import annotations

from placer.definitions.catalog import Catalog, load_catalog
from placer.definitions.interpret import interpret, patch_pod_templates
from placer.inputs.manifests import load_groups, read_documents
from placer.model.workload import Instance, Workload
from placer.ops.clusters import ClustersResult, cluster_snapshots
from placer.ops.context import Context, Scope, context_of, local_context, open_context
from placer.ops.delete import DeleteRequest, DeleteResult, delete
from placer.ops.describe import Described, describe, describe_files
from placer.ops.describe import describe_ref as describe_live
from placer.ops.get import Query, Row, get_placed
from placer.ops.options import plan_with_options
from placer.ops.plan import Hooks, PlanRequest, PlanResult, plan_files, plan_in
from placer.ops.preview import Preview, preview
from placer.ops.requests import DescribeRequest, SubmitRequest
from placer.ops.submit import SubmitResult, submit

__all__ = ["Catalog", "Workload", "Instance", "load_catalog", "interpret", "patch_pod_templates",
           "instances", "describe_files", "describe_live", "load_groups", "read_documents",
           # the context every use case works on
           "Context", "Scope", "open_context", "context_of", "local_context",
           # the use cases and their requests and results
           "plan_files", "plan_in", "PlanRequest", "PlanResult", "Hooks", "plan_with_options",
           "submit", "SubmitRequest", "SubmitResult", "preview", "Preview",
           "get_placed", "Query", "Row", "delete", "DeleteRequest", "DeleteResult",
           "describe", "DescribeRequest", "Described", "cluster_snapshots", "ClustersResult"]


def instances(workload: Workload, component: str) -> tuple[Instance, ...]:
    return workload.instances_of(component)
