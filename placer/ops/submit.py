"""`placer submit`: plan files' workloads against the live fleet and create them where placed;
apply edits to workloads already placed, where they live.

One pass: read every live cluster once (nodes, pods, what placer already placed there;
`fleetview.read_fleet`, the same read `placer plan` does). Workloads not placed yet are
planned together with the capacity already promised; each placed group is applied to its
cluster, all or nothing per group. A group already placed is applied where it lives
(server-side apply, reported `configured` or `unchanged` as kubectl does); when its new
version asks for different pods, it is first planned on that cluster with its old usage
taken out, and if it no longer fits there nothing changes, unless `replace` moves it
(delete there, place anew).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Iterable, Mapping, Sequence

from placer import actuate as A
from placer.actuate.compare import contains, demand
from placer.actuate.steer import nodes_by_workload, nodes_of
from placer.actuate.topology import choices_by_workload, choices_of
from placer.definitions.interpret import interpret
from placer.fleetview.view import (
    SIMULATED,
    Already,
    FleetView,
    freeing,
    pin,
    pin_groups,
    plan_groups,
    read_fleet,
    split_already_placed,  # noqa: F401 (re-exported)
)
from placer.inputs.clusters_file import ClusterEntry
from placer.inputs.manifests import load_groups
from placer.inputs.priority import read_classes
from placer.kube import KubeClient, run_concurrently
from placer.model.errors import Conflict, InputError, KubeError, NotFound, PlacerError
from placer.model.names import ANN_SPREAD
from placer.model.plan import Placement, Plan
from placer.model.topology import TopologyChoice
from placer.model.workload import PlacementGroup, WorkloadRef
from placer.ops.context import Context, Say
from placer.ops.delete import remove_objects
from placer.ops.interrupt import uninterrupted
from placer.ops.plan import with_quotas
from placer.ops.requests import SubmitRequest, check_cluster  # noqa: F401 (re-exported)
from placer.solve import solve
from placer.solve.policy import unknown_order_names

__all__ = ["SIMULATED", "Already", "pin", "pin_groups", "submit", "SubmitRequest", "SubmitResult"]

# what happened to a workload that was already placed
UNCHANGED, CONFIGURED, REPLACED, KEPT = "unchanged", "configured", "replaced", "kept"


@dataclass(frozen=True)
class Created:
    """A workload created on its cluster by this submit."""

    workload: str                    # the WorkloadRef's text
    kind: str
    group: str
    cluster: str
    gpus: int
    objects: tuple[str, ...]         # "Kind ns/name" of everything applied for its group


@dataclass(frozen=True)
class Updated:
    """A workload placer had placed before, and what this submit did with its new version:
    `unchanged`, `configured` (applied where it lives), `replaced` (moved from `previous`),
    or `kept` (the new version no longer fits there: nothing changed; `why` says why)."""

    workload: str
    kind: str
    cluster: str
    result: str
    previous: str | None = None
    why: str = ""
    gpus: int = 0                    # what the new version asks for


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
    updated: tuple[Updated, ...] = ()
    groups: tuple[PlacementGroup, ...] = ()           # on a dry run: what was planned (for previews)
    interrupted: bool = False                         # Ctrl-C: stopped after the groups in flight

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        if self.failed:
            return 1
        if self.plan is not None and self.plan.unplaced:
            return 3
        return 0

    def to_dict(self) -> dict[str, Any]:
        plan = self.plan.to_dict() if self.plan else {"placements": [], "unplaced": [], "summary": {}}
        created = {(c.group, c.cluster) for c in self.created}
        failed = {f.group for f in self.failed}
        updated = {u.workload: u for u in self.updated}
        placements = []
        for p in plan["placements"]:
            ref = p.get("ref")
            u = updated.get(str(WorkloadRef(ref["apiGroup"], ref["kind"], ref["namespace"], ref["name"]))) \
                if ref else None
            if u is not None:
                status = u.result if not self.dry_run else f"{u.result} (dry run)"
            elif self.dry_run:
                status = "planned"
            elif (p["group"], p["cluster"]) in created:
                status = "created"
            else:
                status = "failed" if not self.interrupted or p["group"] in failed else "interrupted"
            placements.append({**p, "status": status})
        return {"planId": self.plan_id, "dryRun": self.dry_run, "interrupted": self.interrupted,
                "placements": placements,
                "alreadyPlaced": [{"workload": a.workload, "kind": a.kind, "cluster": a.cluster,
                                   "plan": a.plan} for a in self.already],
                "updated": [{"workload": u.workload, "kind": u.kind, "cluster": u.cluster, "result": u.result,
                             "gpus": u.gpus,
                             **({"previous": u.previous} if u.previous else {}),
                             **({"why": u.why} if u.why else {})} for u in self.updated],
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

def groups_by_cluster(plan: Plan, keys: Iterable[str] | None = None) -> dict[str, list[str]]:
    """cluster -> group keys placed there, in plan order (only `keys` when given)."""
    wanted = set(keys) if keys is not None else None
    out: dict[str, list[str]] = {}
    for p in plan.placements:
        if wanted is not None and p.group not in wanted:
            continue
        keys_ = out.setdefault(p.cluster, [])
        if p.group not in keys_:
            keys_.append(p.group)
    return out


@dataclass
class _PlacedGroup:
    """A group whose workloads are all placed on one cluster, with its new objects."""

    group: PlacementGroup
    cluster: str
    objects: list[dict[str, Any]]
    changed: bool                      # some object differs from what the cluster holds
    demand_changed: bool               # some workload asks for different pods


def _placed_groups(ctx: Context, groups: Sequence[PlacementGroup], view: FleetView) -> list[_PlacedGroup]:
    """The groups whose workloads are all placed on one cluster, with their new objects."""
    entries = _by_name(ctx)
    out = []
    for g in groups:
        found = [view.placed.get(w.ref) for w in g.workloads]
        refs = [r for r in found if r is not None]
        if not refs or len(refs) != len(found) or len({r.cluster for r in refs}) != 1:
            continue
        if any(k.startswith(ANN_SPREAD) for w in g.workloads for k in w.annotations):
            continue                  # spread copies are left as placed (not yet updated in place)
        cluster = refs[0].cluster
        # the domains chosen when it was placed stay (recorded on each copy)
        kept = {w.ref: choices_of(r.object) for w, r in zip(g.workloads, refs) if r is not None}
        steered = {w.ref: nodes_of(r.object, w) for w, r in zip(g.workloads, refs) if r is not None}
        objects = A.prepare_objects(g, entries[cluster], ctx.catalog, plan_id=refs[0].plan or "",
                                    cluster=cluster, topology=kept, nodes=steered)
        have = {WorkloadRef.of(r.object): r.object for r in refs}
        changed = demand_changed = False
        for obj in objects:
            live = have.get(WorkloadRef.of(obj))
            if live is None:
                continue                                # a companion: the apply itself tells
            changed = changed or not contains(live, obj)
            new = interpret(obj, ctx.catalog, gpu_resources=ctx.gpu_resources)
            old = interpret(live, ctx.catalog, gpu_resources=ctx.gpu_resources)
            demand_changed = demand_changed or demand(new) != demand(old)
        out.append(_PlacedGroup(g, cluster, objects, changed, demand_changed))
    return out


# --- the command -----------------------------------------------------------------------

def submit(ctx: Context, request: SubmitRequest, *, progress: Say | None = None) -> SubmitResult:
    """The use case of `placer submit`: plan the files' workloads on the Context's clusters
    and create them; apply new versions of workloads already placed where they live
    (`replace`: move those that no longer fit there)."""
    check_cluster(request.cluster, ctx.entries, dry_run=request.dry_run)
    for e in ctx.entries:
        A.handoff_of(e)                                   # bad hand-off settings are bad input
    groups = _load(ctx, request)
    plan_id = request.plan_id or A.new_plan_id()
    view = _read(ctx, request)
    pending, already, split = split_already_placed(groups, view.placed)
    refused = [Failed(key, "-", _workloads(next(g for g in groups if g.key == key)),
                      f"group {key}: {why}; delete the stray copies first") for key, why in split.items()]
    for note in unknown_order_names(pending, view.fleet.clusters):    # issue 21: skipped, said
        ctx.warn(note)
    if request.cluster is not None:
        pending = pin_groups(pending, request.cluster)
    placed_groups = _placed_groups(ctx, groups, view)
    # a new version asking for other pods must fit where it lives, in the room its old one leaves
    moving = [pg for pg in placed_groups if pg.demand_changed]
    planning = pending + [dataclasses.replace(pg.group, workloads=tuple(pin(w, pg.cluster) for w in pg.group.workloads))
                          for pg in moving]
    plan = _plan(ctx, request, view, planning, moving, progress) if planning else None
    updates, apply_now, move = _decide(placed_groups, plan, request.replace)
    result: dict[str, Any] = dict(already=tuple(already), unreachable=view.unreachable, reserved=view.reserved)
    if request.dry_run:
        return SubmitResult(plan_id, True, plan, failed=tuple(refused), updated=tuple(updates),
                            groups=tuple(planning), **result)

    def act(stop: threading.Event) -> tuple[list[Created], list[Failed], list[Updated], list[Failed]]:
        created, failed = apply_plan(ctx, plan, pending, plan_id, stop=stop) if plan else ([], [])
        done, failed_updates = _apply_updates(ctx, apply_now, move, plan_id,
                                              choices_by_workload(plan.placements) if plan else {}, stop=stop,
                                              placements=plan.placements if plan else ())
        return created, failed, done, failed_updates
    (created, failed, done, failed_updates), interrupted = uninterrupted(act)
    done_refs = {u.workload for u in done}
    updates = [u for u in updates if u.workload not in done_refs and u.result in (KEPT, UNCHANGED)] + done
    return SubmitResult(plan_id, False, plan, tuple(created), failed=tuple(refused + failed + failed_updates),
                        updated=tuple(updates), interrupted=interrupted, **result)


def _load(ctx: Context, request: SubmitRequest) -> list[PlacementGroup]:
    """The files' groups, with the PriorityClasses of the target clusters."""
    classes = read_classes(ctx.kube, [e.context for e in ctx.live])
    groups = load_groups(list(request.files), ctx.catalog, gpu_resources=ctx.gpu_resources,
                         namespace=request.namespace, priority_classes=classes)
    if not groups:
        raise InputError("no workloads in the given files", source=", ".join(request.files))
    return groups


def _read(ctx: Context, request: SubmitRequest) -> FleetView:
    """The fleet; a cluster that cannot be checked for copies already placed stops the
    submit unless `skip_unreachable`."""
    # a dry run also plans on simulated clusters, as `placer plan` does (nothing is created)
    view = with_quotas(ctx, read_fleet(ctx.entries, ctx.kube, ctx.catalog, gpu_resources=ctx.gpu_resources,
                                       simulated_usable=request.dry_run))
    unreachable = view.unreachable
    if unreachable and not request.skip_unreachable:
        raise KubeError("cannot check " + "; ".join(f"{n} ({why})" for n, why in unreachable.items())
                        + " for workloads already placed there; nothing submitted. Retry, or pass "
                        "--skip-unreachable to place on the reachable clusters anyway")
    return view


def _plan(ctx: Context, request: SubmitRequest, view: FleetView, planning: Sequence[PlacementGroup],
          moving: Sequence[_PlacedGroup], progress: Say | None) -> Plan:
    """Plan what is pending and what moves, in the room the moving groups' old versions leave."""
    kwargs = {"workers": request.workers} if request.workers else {}
    options = dict(time_limit=request.time_limit, seed=request.seed, progress=progress, **kwargs)
    view_ = freeing(view, [w.ref for pg in moving for w in pg.group.workloads], ctx.catalog,
                    gpu_resources=ctx.gpu_resources)
    plan = plan_groups(view_, planning, ctx.catalog, solve=solve, gpu_resources=ctx.gpu_resources, **options)
    misfits = [pg for pg in moving if plan.placement(pg.group.workloads[0].ref) is None]
    if request.replace and misfits:
        plan = _replan(ctx, plan, view_, planning, misfits, options)
    return plan


def _replan(ctx: Context, plan: Plan, view: FleetView, planning: Sequence[PlacementGroup],
            misfits: Sequence[_PlacedGroup], options: Mapping[str, Any]) -> Plan:
    """--replace: the groups that no longer fit where they live are planned anywhere,
    around what the first plan placed (held as committed demand)."""
    keys = {pg.group.key for pg in misfits}
    held = [(g, p.cluster) for g in planning
            if g.key not in keys and (p := plan.placement(g.workloads[0].ref)) is not None]
    view2 = FleetView(view.fleet, dataclasses.replace(view.live, promised=list(view.promised) + held))
    second = plan_groups(view2, [pg.group for pg in misfits], ctx.catalog, solve=solve,
                         gpu_resources=ctx.gpu_resources, **options)
    first = [p for p in plan.placements if p.group not in keys]
    unplaced = [u for u in plan.unplaced if u.group not in keys]
    summary = dataclasses.replace(plan.summary, placed=len(first) + len(second.placements))
    return dataclasses.replace(plan, placements=tuple(first) + second.placements,
                               unplaced=tuple(unplaced) + second.unplaced, summary=summary)


def _decide(placed_groups: Sequence[_PlacedGroup], plan: Plan | None, replace: bool
            ) -> tuple[list[Updated], list[_PlacedGroup], list[tuple[_PlacedGroup, str]]]:
    """Per placed group: apply where it lives, move it (replace), or keep it (no longer fits)."""
    updates, apply_now, move = [], [], []
    for pg in placed_groups:
        ws = pg.group.workloads
        if not pg.demand_changed:
            if pg.changed or pg.group.companions:       # companions: the apply itself tells
                apply_now.append(pg)
            result = CONFIGURED if pg.changed else UNCHANGED
            updates += [Updated(str(w.ref), w.kind, pg.cluster, result, gpus=w.gpus) for w in ws]
            continue
        where = plan.placement(ws[0].ref) if plan else None
        if where is not None and where.cluster == pg.cluster:
            apply_now.append(pg)
            updates += [Updated(str(w.ref), w.kind, pg.cluster, CONFIGURED, gpus=w.gpus) for w in ws]
        elif where is not None:
            move.append((pg, where.cluster))
            updates += [Updated(str(w.ref), w.kind, where.cluster, REPLACED, previous=pg.cluster, gpus=w.gpus)
                        for w in ws]
        else:
            entry = plan.unplaced_entry(ws[0].ref) if plan else None
            reason = entry.reasons.get(pg.cluster) if entry else None
            why = f"the new version no longer fits on {pg.cluster}" + (f": {reason.render()}" if reason else "")
            why += "; nothing changed" + ("" if replace else " (pass --replace to move it)")
            updates += [Updated(str(w.ref), w.kind, pg.cluster, KEPT, why=why, gpus=w.gpus) for w in ws]
    return updates, apply_now, move


def _apply_updates(ctx: Context, apply_now: Sequence[_PlacedGroup], move: Sequence[tuple[_PlacedGroup, str]],
                   plan_id: str, chosen: Mapping[WorkloadRef, Sequence[TopologyChoice]] | None = None,
                   stop: threading.Event | None = None, placements: Sequence[Placement] = ()
                   ) -> tuple[list[Updated], list[Failed]]:
    """Server-side apply of new versions where they live; moves: delete there, create anew
    (steered to the nodes of `placements` on the target). `stop` set: no further group is started."""
    by_name, kube = _by_name(ctx), ctx.kube
    done, failed = [], []
    stopped = stop.is_set if stop is not None else (lambda: False)
    for pg in apply_now:
        if stopped():
            break
        try:
            applied = A.apply_group(A.client_for(kube, by_name[pg.cluster]), pg.objects, group_key=pg.group.key,
                                    pod_security=A.handoff_of(by_name[pg.cluster]).pod_security)
        except PlacerError as e:
            failed.append(Failed(pg.group.key, pg.cluster, _workloads(pg.group), str(e)))
            continue
        changed = {(a.kind, a.namespace, a.name) for a in applied if a.changed}
        any_companion = any(a.changed for a in applied if (a.kind, a.namespace, a.name) not in
                            {(w.kind, w.namespace, w.name) for w in pg.group.workloads})
        for w in pg.group.workloads:
            result = CONFIGURED if (w.kind, w.namespace, w.name) in changed or any_companion else UNCHANGED
            done.append(Updated(str(w.ref), w.kind, pg.cluster, result, gpus=w.gpus))
    for pg, target in move:
        if stopped():
            break
        try:
            remove_objects(A.client_for(kube, by_name[pg.cluster]), pg.objects, group_key=pg.group.key)
            ensure_brought(A.client_for(kube, by_name[target]), pg.group)
            objects = A.prepare_objects(pg.group, by_name[target], ctx.catalog, plan_id=plan_id, cluster=target,
                                        topology=chosen, nodes=nodes_by_workload(placements, target))
            A.apply_group(A.client_for(kube, by_name[target]), objects, group_key=pg.group.key,
                          pod_security=A.handoff_of(by_name[target]).pod_security)
        except PlacerError as e:
            failed.append(Failed(pg.group.key, target, _workloads(pg.group),
                                 f"moving from {pg.cluster}: {e}"))
            continue
        done += [Updated(str(w.ref), w.kind, target, REPLACED, previous=pg.cluster, gpus=w.gpus)
                 for w in pg.group.workloads]
    return done, failed


def apply_plan(ctx: Context, plan: Plan, groups: Sequence[PlacementGroup], plan_id: str,
               stop: threading.Event | None = None) -> tuple[list[Created], list[Failed]]:
    """Create every placed group on its cluster: clusters concurrently, groups of one
    cluster in plan order, each all or nothing; `stop` set: no further group is started."""
    by_key = {g.key: g for g in groups}
    by_name, kube = _by_name(ctx), ctx.kube
    placements: dict[str, list[Placement]] = {}
    for p in plan.placements:
        placements.setdefault(p.group, []).append(p)

    def one_cluster(cluster: str, keys: list[str]) -> tuple[list[Created], list[Failed]]:
        entry = by_name[cluster]
        created, failed = [], []
        try:
            client = A.client_for(kube, entry)
        except PlacerError as e:
            return [], [Failed(k, cluster, _workloads(by_key[k]), str(e)) for k in keys]
        for key in keys:
            if stop is not None and stop.is_set():
                break
            g = by_key[key]
            try:
                ensure_brought(client, g)
                objects = A.prepare_objects(g, entry, ctx.catalog, plan_id=plan_id, cluster=cluster,
                                            topology=choices_by_workload(placements.get(key, ()), cluster),
                                            shares=A.shares_on(placements.get(key, ()), cluster),
                                            nodes=nodes_by_workload(placements.get(key, ()), cluster))
                applied = A.apply_group(client, objects, group_key=key,
                                        pod_security=A.handoff_of(entry).pod_security)
            except PlacerError as e:
                failed.append(Failed(key, cluster, _workloads(g), str(e),
                                     tuple(getattr(e, "leftovers", ()) or ())))
                continue
            refs = tuple(a.ref for a in applied)
            by_workload = {p.ref: p for p in placements.get(key, ())}
            for w in g.workloads:
                p = by_workload.get(w.ref)
                created.append(Created(str(w.ref), w.kind, key, cluster, p.gpus if p else w.gpus, refs))
        return created, failed

    results = run_concurrently({c: partial(one_cluster, c, ks)
                                for c, ks in groups_by_cluster(plan, by_key).items()}, max_workers=kube.max_workers)
    created = [c for cs, _ in results.values() for c in cs]
    failed = [f for _, fs in results.values() for f in fs]
    return created, failed


def ensure_brought(client: KubeClient, group: PlacementGroup) -> None:
    """Create the PriorityClasses the group brings where the cluster lacks them (the plan
    says so); one that exists is left as it is, and none is ever deleted by placer."""
    for obj in group.brings:
        meta = obj.get("metadata") or {}
        res = client.resource_for(str(obj.get("apiVersion")), str(obj.get("kind")))
        try:
            client.get(res, meta["name"])
            continue
        except NotFound:
            pass
        body = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
        body["metadata"] = {k: meta[k] for k in ("name", "labels", "annotations") if meta.get(k)}
        try:
            client.create(res, body)
        except Conflict:
            pass                                   # created meanwhile (another group or submit)


def _by_name(ctx: Context) -> dict[str, ClusterEntry]:
    return {e.name: e for e in ctx.entries}


def _workloads(g: PlacementGroup) -> tuple[str, ...]:
    return tuple(str(w.ref) for w in g.workloads)
