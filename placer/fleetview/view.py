"""The fleet as `plan` and `submit` both see it: one code path.

`read_fleet` reads every live cluster once (nodes, pods, what placer already placed there,
and what of it is still promised: placed workloads whose pods are not all bound), and
adds the simulated clusters of the file. `plan_groups` then plans files' groups on it:
workloads already placed are set aside, and the rest are solved together with the
promised capacity, so `placer plan` and `placer submit --dry-run` give the same plan.

`freeing` takes placed workloads out of that view (their bound pods' usage and their
promise), so that a new version of one can be checked against the room it would have.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from placer.definitions.catalog import Catalog
from placer.definitions.interpret import interpret
from placer.definitions.suspend import planning_view
from placer.fleetview.placed import LiveState, Placed, PlacedRef, instance_pods, read_live
from placer.inputs.clusters_file import as_entry, simulated_cluster, with_policy
from placer.kube import Kube
from placer.model.errors import PlacerError
from placer.model.fleet import Cluster, Fleet
from placer.model.names import ANN_PIN
from placer.model.podspec import DEFAULT_GPU_RESOURCES, pod_requests
from placer.model.quota import Quotas, add_usage
from placer.model.workload import Phase, PlacementGroup, Workload, WorkloadRef
from placer.solve.quotas import workload_demand
from placer.solve.spread import check_weights

SIMULATED = "simulated (no context): placer cannot create objects there"


@dataclass(frozen=True)
class FleetView:
    """A fleet snapshot with what placer promised on it."""

    fleet: Fleet
    live: LiveState

    @property
    def placed(self) -> Placed:
        return self.live.placed

    @property
    def promised(self) -> Sequence[tuple[PlacementGroup, str]]:
        return self.live.promised

    @property
    def unreachable(self) -> dict[str, str]:
        return {n: c.error for n, c in self.live.clusters.items() if c.error}

    @property
    def reserved(self) -> dict[str, dict[str, int]]:
        return {n: dict(c.reserved) for n, c in self.live.clusters.items() if c.reserved}


def read_fleet(entries: Sequence[Any], kube: Kube | None, catalog: Catalog, *,
               gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
               simulated_usable: bool = True) -> FleetView:
    """Live clusters read concurrently (with promised capacity) and simulated ones, in
    entry order. `simulated_usable=False` (submit) shows simulated clusters as unusable."""
    entries = [as_entry(e) for e in entries]
    if any(e.context for e in entries):
        assert kube is not None, "live clusters are read through a Kube"
        live = read_live(kube, entries, catalog, gpu_resources=gpu_resources)
    else:
        live = LiveState({}, {}, Placed(), [])
    clusters = []
    for e in entries:
        if e.context:
            clusters.append(with_policy(live.clusters[e.name], e))
        elif simulated_usable:
            clusters.append(simulated_cluster(e))
        else:
            clusters.append(Cluster(name=e.name, labels=dict(e.labels or {}), error=SIMULATED))
    return FleetView(Fleet(tuple(clusters)), live)


def freeing(view: FleetView, refs: Iterable[WorkloadRef], catalog: Catalog, *,
            gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> FleetView:
    """The view without these placed workloads: their bound pods no longer use their
    nodes and their promise is dropped (what a new version of them would find)."""
    refs = {r for r in refs if r in view.placed}
    if not refs:
        return view
    freed: dict[str, dict[str, dict[str, int]]] = {}         # cluster -> node -> requests
    for ref in refs:
        placed = view.placed[ref]
        w = interpret(placed.object, catalog, gpu_resources=gpu_resources, source=placed.key)
        for pod in bound_pods(w, view.live.pods.get(placed.cluster, ())):
            node = freed.setdefault(placed.cluster, {}).setdefault(pod["spec"]["nodeName"], {})
            for r, v in pod_requests(pod.get("spec") or {}).items():
                node[r] = node.get(r, 0) + v
    clusters = tuple(_minus(c, freed.get(c.name, {})) for c in view.fleet.clusters)
    keys = {f"promised:{view.placed[r].cluster}/{r}" for r in refs}
    promised = [(g, c) for g, c in view.promised if g.key not in keys]
    live = dataclasses.replace(view.live, promised=promised)
    return FleetView(dataclasses.replace(view.fleet, clusters=clusters), live)


def bound_pods(w: Workload, pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The workload's pods the inventory counts as using a node (bound, not terminated)."""
    ns_pods = [p for p in pods if ((p.get("metadata") or {}).get("namespace") or "default") == w.namespace]
    cache: dict[int, dict[str, int]] = {}
    seen, out = set(), []
    for inst in w.instances:
        for p in instance_pods(inst, w, ns_pods, len(w.instances) > 1, cache):
            bound = (p.get("spec") or {}).get("nodeName")
            if bound and id(p) not in seen and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                seen.add(id(p))
                out.append(p)
    return out


def _minus(c: Cluster, freed: Mapping[str, Mapping[str, int]]) -> Cluster:
    if not freed:
        return c
    nodes = []
    for n in c.nodes:
        less = freed.get(n.name)
        if less:
            n = dataclasses.replace(n, used={r: max(0, v - less.get(r, 0)) for r, v in n.used.items()})
        nodes.append(n)
    return dataclasses.replace(c, nodes=tuple(nodes))


def plan_groups(view: FleetView, groups: Sequence[PlacementGroup], catalog: Catalog, *,
                solve: Callable[..., Any], gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES, **options):
    """Plan `groups` (as they will run: suspended ones un-suspended) on the view, with the
    capacity promised to placed workloads as committed demand. The one planning call of
    `placer plan` and `placer submit`."""
    planning = [planning_view(g, catalog, gpu_resources=gpu_resources) for g in groups]
    check_weights(view.fleet, planning)
    return solve(view.fleet, planning, committed=view.promised, gpu_resources=gpu_resources, **options)


# --- workloads already placed ------------------------------------------------------------

@dataclass(frozen=True)
class Already:
    """A workload that placer had placed before: found on `cluster` by its identity."""

    workload: str                     # the WorkloadRef's text
    kind: str
    cluster: str
    plan: str | None
    ref: WorkloadRef | None = None


def split_already_placed(groups: Sequence[PlacementGroup], placed: Mapping[WorkloadRef, PlacedRef]
                         ) -> tuple[list[PlacementGroup], list[Already], dict[str, str]]:
    """Groups still to place (workloads already placed removed, and a group partly placed
    pinned to where its placed part is), the workloads already placed, and groups whose
    placed parts sit on different clusters (key -> why; they are left alone)."""
    pending, already, split = [], [], {}
    for g in groups:
        found = [(w, placed[w.ref]) for w in g.workloads if w.ref in placed]
        already += [Already(str(w.ref), w.kind, ref.cluster, ref.plan, w.ref) for w, ref in found]
        rest = [w for w in g.workloads if w.ref not in placed]
        if not rest:
            continue
        clusters = {ref.cluster for _, ref in found}
        if len(clusters) > 1:
            split[g.key] = f"its workloads are already placed on several clusters ({', '.join(sorted(clusters))})"
            continue
        if clusters:
            rest = [pin(w, next(iter(clusters))) for w in rest]
        pending.append(dataclasses.replace(g, workloads=tuple(rest)))
    return pending, already, split


def pin(w: Workload, cluster: str) -> Workload:
    """The planning copy of `w` pinned to `cluster` (the object itself is not changed)."""
    return dataclasses.replace(w, annotations={**w.annotations, ANN_PIN: cluster})


def pin_groups(groups: Iterable[PlacementGroup], cluster: str) -> list[PlacementGroup]:
    return [dataclasses.replace(g, workloads=tuple(pin(w, cluster) for w in g.workloads)) for g in groups]


def with_counted_quotas(view: FleetView, quotas: Quotas, catalog: Catalog, *,
                        gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> FleetView:
    """The view with fleet-wide quotas (issue 23) and what placer's copies on its live clusters
    already use of them counted: every copy not finished, its pods bound or not (the promised
    groups are then capacity only). A copy placer cannot read any more counts nothing."""
    used: dict[str, dict[str, int]] = {}
    for key, placed in sorted(view.placed.items(), key=lambda kv: (kv[1].cluster, kv[0])):
        try:
            w = interpret(placed.object, catalog, gpu_resources=gpu_resources, source=f"{placed.cluster}/{key}")
        except PlacerError:
            continue
        q = quotas.of(w) if w.phase not in (Phase.COMPLETED, Phase.FAILED) else None
        if q is not None:
            add_usage(used, q.name, {r: v for r, v in workload_demand(w).items() if r in q.nominal})
    fleet = dataclasses.replace(view.fleet, quotas=Quotas(quotas.entries, counted=used))
    return dataclasses.replace(view, fleet=fleet)
