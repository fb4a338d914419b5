"""`placer submit`: plan files' workloads against the live fleet and create them where placed.

One pass: read every live cluster once (nodes, pods, what placer already placed there),
drop workloads that are already placed (found by their `placer.dev/workload` label), plan
the rest together with the capacity already promised to placed-but-not-running
workloads, then apply each placed group to its cluster, all or nothing per group.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import actuate as A
from .catalog import Catalog
from .clusters_file import as_entry
from .errors import InputError, KubeError, PlacerError
from .fleet import Cluster, Fleet
from .kube import Kube, run_concurrently
from .manifests import load_groups
from .plan import Placement, Plan
from .podspec import DEFAULT_GPU_RESOURCES
from .solver import ANN_CLUSTER, solve
from .workload import PlacementGroup, Workload

SIMULATED = "simulated (no context): placer cannot create objects there"
DEFAULT_TIME_LIMIT = 10.0


@dataclass(frozen=True)
class Created:
    """A workload created on its cluster by this submit."""

    workload: str                    # ns/Kind/name
    kind: str
    group: str
    cluster: str
    gpus: int
    objects: tuple[str, ...]         # "Kind ns/name" of everything applied for its group


@dataclass(frozen=True)
class Already:
    """A workload that placer had placed before: found on `cluster` by its label."""

    workload: str
    kind: str
    cluster: str
    plan: str | None


@dataclass(frozen=True)
class Failed:
    """A placed group whose objects could not be applied (what was applied is removed)."""

    group: str
    cluster: str
    workloads: tuple[str, ...]
    error: str
    leftovers: tuple[str, ...] = ()


@dataclass(frozen=True)
class SubmitResult:
    plan_id: str
    dry_run: bool
    plan: Plan | None                                 # None when nothing was left to plan
    created: tuple[Created, ...] = ()
    already: tuple[Already, ...] = ()
    failed: tuple[Failed, ...] = ()
    unreachable: Mapping[str, str] = field(default_factory=dict)
    reserved: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    groups: tuple[PlacementGroup, ...] = ()           # on a dry run: what was planned (for previews)

    @property
    def exit_code(self) -> int:
        if self.failed:
            return 1
        if self.plan is not None and self.plan.unplaced:
            return 3
        return 0

    def to_dict(self) -> dict[str, Any]:
        plan = self.plan.to_dict() if self.plan else {"placements": [], "unplaced": [], "summary": {}}
        created = {c.workload: c for c in self.created}
        placements = []
        for p in plan["placements"]:
            status = "planned" if self.dry_run else "failed"
            for c in created.values():
                if c.group == p["group"] and c.cluster == p["cluster"]:
                    status = "created"
            placements.append({**p, "status": status})
        return {"planId": self.plan_id, "dryRun": self.dry_run, "placements": placements,
                "alreadyPlaced": [{"workload": a.workload, "kind": a.kind, "cluster": a.cluster,
                                   "plan": a.plan} for a in self.already],
                "unplaced": plan["unplaced"],
                "failed": [{"group": f.group, "cluster": f.cluster, "workloads": list(f.workloads),
                            "error": f.error, "leftovers": list(f.leftovers)} for f in self.failed],
                "created": [{"workload": c.workload, "cluster": c.cluster, "objects": list(c.objects)}
                            for c in self.created],
                "unreachable": dict(self.unreachable),
                "reserved": {c: dict(r) for c, r in self.reserved.items()},
                "overcommitted": plan.get("overcommitted", {}),
                "summary": plan["summary"]}


# --- pure steps ------------------------------------------------------------------------

def split_already_placed(groups: Sequence[PlacementGroup], placed: Mapping[str, A.PlacedRef]
                         ) -> tuple[list[PlacementGroup], list[Already], dict[str, str]]:
    """Groups still to place (workloads already placed removed, and a group partly placed
    pinned to where its placed part is), the workloads already placed, and groups whose
    placed parts sit on different clusters (key -> why; they are left alone)."""
    pending, already, split = [], [], {}
    for g in groups:
        found = [(w, placed[A.key_of(w)]) for w in g.workloads if A.key_of(w) in placed]
        already += [Already(A.key_of(w), w.kind, ref.cluster, ref.plan) for w, ref in found]
        rest = [w for w in g.workloads if A.key_of(w) not in placed]
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
    return dataclasses.replace(w, annotations={**w.annotations, ANN_CLUSTER: cluster})


def pin_groups(groups: Iterable[PlacementGroup], cluster: str) -> list[PlacementGroup]:
    return [dataclasses.replace(g, workloads=tuple(pin(w, cluster) for w in g.workloads)) for g in groups]


def build_fleet(entries: Sequence[Any], live: Mapping[str, Cluster], *, simulated: bool = False) -> Fleet:
    """Clusters in file order; entries without a context appear as unusable, with why
    (`simulated`: a dry run plans on their inline nodes, as `placer plan` does)."""
    from .clusters_file import simulated_cluster

    clusters = []
    for e in entries:
        e = as_entry(e)
        name = e.name
        if name in live:
            clusters.append(live[name])
        elif simulated and e.nodes is not None:
            clusters.append(simulated_cluster(e))
        else:
            clusters.append(Cluster(name=name, labels=dict(e.labels or {}), error=SIMULATED))
    return Fleet(tuple(clusters))


def groups_by_cluster(plan: Plan) -> dict[str, list[str]]:
    """cluster -> group keys placed there, in plan order."""
    out: dict[str, list[str]] = {}
    for p in plan.placements:
        keys = out.setdefault(p.cluster, [])
        if p.group not in keys:
            keys.append(p.group)
    return out


def check_cluster(cluster: str | None, entries: Sequence[Any]) -> None:
    names = [as_entry(e).name for e in entries]
    if not entries:
        raise InputError("no clusters to submit to (give --clusters FILE or a kubeconfig with contexts)")
    if cluster is not None and cluster not in names:
        raise InputError(f"--cluster {cluster}: no such cluster (known: {', '.join(names)})")


# --- the command -----------------------------------------------------------------------

def submit(paths: Sequence[str], *, entries: Sequence[Any], catalog: Catalog, kube: Kube,
           dry_run: bool = False, cluster: str | None = None,
           time_limit: float = DEFAULT_TIME_LIMIT, workers: int | None = None, seed: int = 0,
           plan_id: str | None = None, skip_unreachable: bool = False,
           gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
           progress: Callable[[str], None] | None = None, namespace: str | None = None,
           priority_classes: Any = None) -> SubmitResult:
    """Plan the files' workloads on the live clusters of `entries` and create them."""
    check_cluster(cluster, entries)
    for e in entries:
        A.handoff_of(e)                                   # bad hand-off settings are bad input
    if priority_classes is None:                          # PriorityClasses of the target clusters
        from .priority import read_classes
        priority_classes = read_classes(kube, [as_entry(e).context for e in entries if as_entry(e).context])
    groups = load_groups(paths, catalog, gpu_resources=gpu_resources, namespace=namespace,
                         priority_classes=priority_classes)
    if not groups:
        raise InputError("no workloads in the given files", source=", ".join(paths))
    plan_id = plan_id or A.new_plan_id()

    live = A.read_live(kube, entries, catalog, gpu_resources=gpu_resources)
    unreachable = {n: c.error for n, c in live.clusters.items() if c.error}
    if unreachable and not skip_unreachable:
        raise KubeError("cannot check " + "; ".join(f"{n} ({why})" for n, why in unreachable.items())
                        + " for workloads already placed there; nothing submitted. Retry, or pass "
                        "--skip-unreachable to place on the reachable clusters anyway")
    pending, already, split = split_already_placed(groups, live.placed)
    refused = [Failed(key, "-", _workloads(next(g for g in groups if g.key == key)),
                      f"group {key}: {why}; delete the stray copies first") for key, why in split.items()]
    if cluster is not None:
        pending = pin_groups(pending, cluster)
    reserved = {n: dict(c.reserved) for n, c in live.clusters.items() if c.reserved}
    if not pending:
        return SubmitResult(plan_id, dry_run, None, already=tuple(already), failed=tuple(refused),
                            unreachable=unreachable, reserved=reserved)

    fleet = build_fleet(entries, live.clusters, simulated=dry_run)
    planning = [A.planning_view(g, catalog, gpu_resources=gpu_resources) for g in pending]
    kwargs = {"workers": workers} if workers else {}
    plan = solve(fleet, planning, time_limit=time_limit, seed=seed, committed=live.promised,
                 progress=progress, **kwargs)
    if dry_run:
        return SubmitResult(plan_id, True, plan, already=tuple(already), failed=tuple(refused),
                            unreachable=unreachable, reserved=reserved, groups=tuple(pending))
    created, failed = apply_plan(plan, pending, entries, catalog, kube, plan_id)
    return SubmitResult(plan_id, False, plan, tuple(created), tuple(already), tuple(refused + failed),
                        unreachable, reserved)


def apply_plan(plan: Plan, groups: Sequence[PlacementGroup], entries: Sequence[Any], catalog: Catalog,
               kube: Kube, plan_id: str) -> tuple[list[Created], list[Failed]]:
    """Create every placed group on its cluster: clusters concurrently, groups of one
    cluster in plan order, each all or nothing."""
    by_key = {g.key: g for g in groups}
    by_name = {as_entry(e).name: e for e in entries}
    placements: dict[str, list[Placement]] = {}
    for p in plan.placements:
        placements.setdefault(p.group, []).append(p)

    def one_cluster(cluster: str, keys: list[str]) -> tuple[list[Created], list[Failed]]:
        entry = by_name[cluster]
        created, failed = [], []
        try:
            client = A._client(kube, entry)
        except PlacerError as e:
            return [], [Failed(k, cluster, _workloads(by_key[k]), str(e)) for k in keys]
        for key in keys:
            g = by_key[key]
            try:
                objects = A.prepare_objects(g, entry, catalog, plan_id=plan_id, cluster=cluster)
                applied = A.apply_group(client, objects, group_key=key,
                                        pod_security=A.handoff_of(entry).pod_security)
            except PlacerError as e:
                failed.append(Failed(key, cluster, _workloads(g), str(e),
                                     tuple(getattr(e, "leftovers", ()) or ())))
                continue
            refs = tuple(a.ref for a in applied)
            by_workload = {p.workload: p for p in placements.get(key, ())}
            for w in g.workloads:
                p = by_workload.get(w.key)
                created.append(Created(A.key_of(w), w.kind, key, cluster, p.gpus if p else w.gpus, refs))
        return created, failed

    results = run_concurrently({c: (lambda c=c, ks=ks: one_cluster(c, ks))
                                for c, ks in groups_by_cluster(plan).items()}, max_workers=kube.max_workers)
    created = [c for cs, _ in results.values() for c in cs]
    failed = [f for _, fs in results.values() for f in fs]
    return created, failed


def _workloads(g: PlacementGroup) -> tuple[str, ...]:
    return tuple(A.key_of(w) for w in g.workloads)
