"""What runs on the live clusters, as the options search needs it, and the plan with its
options attached (`placer plan`).

No I/O: everything comes from the `FleetView` that `plan` already read (nodes, active
pods, placer's own copies and their promises); the Context gives only the catalog and the
GPU names. Running workloads are placer's copies read back, and other GPU pods grouped by
their controlling owner (a Job, a ReplicaSet, a bare pod): what a cluster's own scheduler
could preempt or what could finish.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from placer import actuate as A
from placer.definitions.catalog import Catalog
from placer.definitions.interpret import interpret
from placer.fleetview.inventory import usage_by_node
from placer.fleetview.view import FleetView, bound_pods
from placer.model.errors import PlacerError
from placer.model.names import ANN_PRIORITY
from placer.model.plan import Plan
from placer.model.podspec import DEFAULT_GPU_RESOURCES
from placer.model.workload import PlacementGroup
from placer.ops.context import Context
from placer.solve.options import Running, what_would_fit, with_options
from placer.solve.problem import gpus_of

NOT_PREEMPTIBLE_OWNERS = ("DaemonSet", "Node")       # per-node system pods: never offered


def _priority(annotations: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> int:
    """placer's priority annotation when set (what placer plans by), else the pods' own
    (spec.priority, resolved by the API server from their PriorityClass), else 0."""
    text = str((annotations or {}).get(ANN_PRIORITY, "")).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    values = [p["spec"]["priority"] for p in pods if isinstance((p.get("spec") or {}).get("priority"), int)]
    return max(values, default=0)


def _pod_key(p: Mapping[str, Any]) -> tuple[str, str]:
    meta = p.get("metadata") or {}
    return meta.get("namespace") or "default", meta.get("name") or ""


def running_workloads(view: FleetView, catalog: Catalog, *,
                      gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> list[Running]:
    """placer's copies with their bound pods and promise, then other GPU pods by owner."""
    out: list[Running] = []
    promises = {g.key for g, _ in view.promised}
    claimed: set[tuple[str, str, str]] = set()            # (cluster, namespace, pod)
    for ref, placed in sorted(view.placed.items(), key=lambda kv: (kv[1].cluster, str(kv[0]))):
        try:
            w = interpret(placed.object, catalog, gpu_resources=gpu_resources, source=placed.key)
        except PlacerError:
            continue
        pods = bound_pods(w, view.live.pods.get(placed.cluster, ()))
        claimed.update((placed.cluster, *_pod_key(p)) for p in pods)
        promise = f"promised:{placed.cluster}/{ref}"
        out.append(Running(w.key, w.kind, placed.cluster, _priority(w.annotations, pods), usage_by_node(pods),
                           promise if promise in promises else None, ref))
    for cluster, active in view.live.pods.items():
        owners: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
        for p in active:
            spec = p.get("spec") or {}
            if not spec.get("nodeName") or (cluster, *_pod_key(p)) in claimed:
                continue
            if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            ns, name = _pod_key(p)
            owner = next((o for o in (p.get("metadata") or {}).get("ownerReferences") or () if o.get("controller")),
                         {"kind": "Pod", "name": name})
            if owner.get("kind") in NOT_PREEMPTIBLE_OWNERS:
                continue
            owners.setdefault((ns, str(owner.get("kind")), str(owner.get("name"))), []).append(p)
        for (ns, kind, name), owned in sorted(owners.items()):
            usage = usage_by_node(owned)
            if any(gpus_of(d, gpu_resources) for d in usage.values()):
                out.append(Running(f"{ns}/{name}", kind, cluster, _priority({}, owned), usage))
    return out


def plan_with_options(ctx: Context, plan: Plan, view: FleetView, pending: Sequence[PlacementGroup],
                      originals: Sequence[PlacementGroup], *, deadline: float | None = None) -> Plan:
    """The use case of the options search (`placer plan`, what-if with running work): `plan`
    (solved from `pending`, the rest of `originals` once workloads already placed are set
    aside) with options on every unplaced workload, on the Context's catalog and GPU names."""
    if not plan.unplaced:
        return plan
    gpus = ctx.gpu_resources
    planning = [A.planning_view(g, ctx.catalog, gpu_resources=gpus) for g in pending]
    # a group partly placed already is pinned where that part runs: placer's pin, not the user's
    held = {g.key for g in originals if any(w.ref in view.placed for w in g.workloads)}
    found = what_would_fit(view.fleet, planning, plan, committed=view.promised,
                           running=running_workloads(view, ctx.catalog, gpu_resources=gpus),
                           gpu_resources=gpus, deadline=deadline, held_pins=held)
    return with_options(plan, found)
