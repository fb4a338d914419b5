"""Deciding, with no I/O: a frozen snapshot of the fleet and the staging state in, plain
actions with their reasons out. The daemon's executor applies them.

- `decide(snapshot, pending, now)`: one planning round. Pending groups (with the clusters
  they were withdrawn from or refused by, and a pin to the cluster their group already
  lives on) go to `placer.solve.solve` against the snapshot and what is already promised;
  each placed group becomes a `Create`, each unplaced workload an `Unplace` with its
  reasons per cluster.
- `decide_arrivals(snapshot, pending, memory)`: the same for a round of new arrivals,
  placed against what is committed with the last round's node classes and capacity
  (`Memory`); None when one does not fit, and then `decide` judges them all.
- `on_copy_gone(...)`, `drifted(...)`, `edit_fits(...)`: what to do when a copy vanished, was
  edited on its cluster, or its staging object's spec changed after placement.
- `staging_gone`, `keep_one`, `invalid`, `placed_status`, `copy_gone`, `correct_drift`,
  `forward_spec`, `edit_blocked`, `withdrawal`, `unplaced`: one staging workload's
  actions (`placer.daemon.actions`), each with its reason.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from placer.actuate.compare import contains
from placer.daemon.actions import (
    Action,
    Annotate,
    Condition,
    Create,
    Delete,
    ForwardSpec,
    MirrorStatus,
    Record,
    Unplace,
)
from placer.daemon.events import FAILED, NORMAL, RESCHEDULED, UNPLACED, WARNING
from placer.model.fleet import Cluster, Fleet
from placer.model.names import ANN_MESSAGE, ANN_PHASE, ANN_PIN, PLACED_CLUSTER
from placer.model.plan import Plan
from placer.model.words import plural
from placer.model.workload import Phase, PlacementGroup, Workload, WorkloadRef
from placer.solve import ANN_SELECTOR, solve
from placer.solve.incremental import Reuse, place_arrivals

FINISHED = (Phase.COMPLETED.value, Phase.FAILED.value)
PHASE_INVALID = "Invalid"
COPY_DELETED, DRIFT_CORRECTED, EDIT_DOES_NOT_FIT = "CopyDeleted", "DriftCorrected", "EditDoesNotFit"


# --- what goes in ----------------------------------------------------------------------

@dataclass(frozen=True)
class Snapshot:
    """The fleet as the caches saw it at one moment, and the demand already promised on it
    (placed copies whose pods are not all bound, creates still in flight)."""

    fleet: Fleet
    committed: tuple[tuple[PlacementGroup, str], ...] = ()

    def cluster(self, name: str) -> Cluster | None:
        return self.fleet.cluster(name)


@dataclass(frozen=True)
class PendingGroup:
    """Workloads waiting to be placed together (`placer.dev/group`), as the solver sees them."""

    group: PlacementGroup
    members: tuple[WorkloadRef, ...]
    excluded: frozenset[str] = frozenset()     # clusters withdrawn from or refusing it
    pin: str | None = None                     # the cluster the rest of its group lives on
    why_excluded: tuple[tuple[str, str], ...] = ()     # (cluster, what it said): the reason given for it


# --- what comes out ----------------------------------------------------------------------

@dataclass(frozen=True)
class Decision:
    actions: tuple[Create | Unplace, ...]
    plan: Plan | None = None
    plan_id: str = ""
    seconds: float = 0.0
    error: str | None = None
    groups: int = 0

    @property
    def creates(self) -> list[Create]:
        return [a for a in self.actions if isinstance(a, Create)]

    @property
    def unplaced(self) -> list[Unplace]:
        return [a for a in self.actions if isinstance(a, Unplace)]


# --- one planning round --------------------------------------------------------------------

def with_policy(p: PendingGroup) -> PlacementGroup:
    """Exclusions and the group pin, as the PlacementGroup's typed fields the solver honours."""
    if not p.excluded and not p.pin:
        return p.group
    return dataclasses.replace(p.group, excluded=frozenset(p.excluded), pin=p.pin or None)


def label_keys(workloads: Sequence[Workload]) -> set[str]:
    """The node label keys these workloads' pods can tell apart: their nodeSelectors,
    required node affinity and gang topology requests."""
    keys: set[str] = set()
    for w in workloads:
        for i in w.instances:
            keys.update(i.pod.node_selector)
            for term in i.pod.affinity_terms:
                keys.update(str(e.get("key")) for e in (term.get("matchExpressions") or ()) if isinstance(e, Mapping))
        for g in w.gangs:
            keys.update(t.key for t in g.topology)
    return keys


class Memory:
    """What a round leaves the next (the daemon keeps one): each cluster's nodes with the
    labels cut, while its nodes and the keys are the same, and the incremental placement's
    node classes and capacity (`placer.solve.incremental.Reuse`)."""

    def __init__(self) -> None:
        self.labels: dict[str, tuple[tuple, frozenset[str], tuple]] = {}
        self.reuse = Reuse()


def relevant_labels(fleet: Fleet, keys: set[str], memory: Memory | None = None) -> Fleet:
    """The fleet with node labels cut to the keys some workload (or the cluster's topology
    levels, or a RuntimeClass's scheduling) can tell apart. Placement cannot depend on the
    others, and nodes alike in everything else then fall into one class for the solver (a
    live node's own hostname label would otherwise make every node a class of its own).
    With `memory`, a cluster whose nodes and keys are as last time gets the same cut nodes
    (the same objects, so the next round can tell it unchanged)."""
    clusters = []
    for c in fleet.clusters:
        keep = keys | set(c.topology)
        for rc in (c.runtime_classes or {}).values():
            keep.update(rc.node_selector)
        frozen = frozenset(keep)
        seen = memory.labels.get(c.name) if memory is not None else None
        if seen is not None and seen[0] is c.nodes and seen[1] == frozen:
            clusters.append(c if seen[2] is c.nodes else dataclasses.replace(c, nodes=seen[2]))
            continue
        if all(k in keep for n in c.nodes for k in n.labels):
            nodes = c.nodes
        else:
            nodes = tuple(dataclasses.replace(n, labels={k: v for k, v in n.labels.items() if k in keep})
                          for n in c.nodes)
        if memory is not None:
            memory.labels[c.name] = (c.nodes, frozen, nodes)
        clusters.append(c if nodes is c.nodes else dataclasses.replace(c, nodes=nodes))
    return dataclasses.replace(fleet, clusters=tuple(clusters))     # the quotas too


def decide(snapshot: Snapshot, pending: Sequence[PendingGroup], now: float, *, plan_id: str = "",
           time_limit: float = 2.0, workers: int = 1, seed: int = 0, memory: Memory | None = None) -> Decision:
    """Plan the pending groups on the snapshot. `now` is the caller's clock (the plan does
    not depend on it; it is kept for the reasons' wording and for symmetry with the other
    decisions). A solver failure leaves every workload pending with that reason."""
    if not pending:
        return Decision(())
    planned = [with_policy(p) for p in pending]
    fleet = _fleet(snapshot, pending, memory)
    t0 = time.perf_counter()
    try:
        plan = solve(fleet, planned, time_limit=time_limit, workers=workers, seed=seed,
                     committed=snapshot.committed)
    except Exception as e:                       # a solver bug must not wedge the queue
        return Decision(tuple(Unplace(k, f"planning failed: {e}") for p in pending for k in p.members),
                        None, plan_id, time.perf_counter() - t0, str(e), len(pending))
    return _decision(plan, pending, plan_id, time.perf_counter() - t0)


def decide_arrivals(snapshot: Snapshot, pending: Sequence[PendingGroup], memory: Memory, *,
                    plan_id: str = "", by_name: bool = False) -> Decision | None:
    """The pending groups placed against what is committed, reusing the last round's node
    classes and capacity (`placer.solve.incremental`): a Decision when every group is
    placed, None when one is not (then `decide`, the full solve, judges them all).
    `by_name`: the copies are steered to their nodes by name, so the classes are nodes."""
    if not pending:
        return Decision(())
    fleet = _fleet(snapshot, pending, memory)
    t0 = time.perf_counter()
    plan = place_arrivals(memory.reuse, fleet, [with_policy(p) for p in pending], snapshot.committed,
                          by_name=by_name)
    return None if plan is None else _decision(plan, pending, plan_id, time.perf_counter() - t0)


def warm(snapshot: Snapshot, memory: Memory, *, by_name: bool = False) -> None:
    """Build what an arrivals round reuses (each cluster's classes, and its capacity after
    what is committed) before the first arrival needs it: in the daemon's idle time."""
    place_arrivals(memory.reuse, _fleet(snapshot, (), memory), (), snapshot.committed, by_name=by_name)


def _fleet(snapshot: Snapshot, pending: Sequence[PendingGroup], memory: Memory | None) -> Fleet:
    keys = label_keys([w for p in pending for w in p.group.workloads] +
                      [w for g, _ in snapshot.committed for w in g.workloads])
    return relevant_labels(snapshot.fleet, keys, memory)


def _decision(plan: Plan, pending: Sequence[PendingGroup], plan_id: str, seconds: float) -> Decision:
    members = {p.group.key: p.members for p in pending}
    said = {p.group.key: dict(p.why_excluded) for p in pending}
    actions: list[Create | Unplace] = []
    # one Create per group and cluster: a spread group (placer.dev/spread) has one per share
    where = list(dict.fromkeys((pl.group, pl.cluster) for pl in plan.placements))
    for gk, cluster in where:
        here = tuple(x for x in plan.placements if x.group == gk and x.cluster == cluster)
        msgs = {}
        for ref in members[gk]:
            found: Any = next((x for x in here if x.ref == ref), None)
            nodes = len(found.nodes) if found else 0
            share = f" (a share of {found.replicas})" if found is not None and found.replicas is not None else ""
            msgs[ref] = f"placed on {cluster} by plan {plan_id}" + (
                f": {plural(found.pods, 'pod')} on {plural(nodes, 'node')}{share}" if found else "")
        actions.append(Create(cluster, gk, members[gk], msgs, placements=here))
    reasons: dict[str, str] = {}
    for u in plan.unplaced:
        if u.group not in reasons:
            # a cluster placer left out says why (its refusal), not the solver's rendering of the exclusion
            text = "; ".join(f"{c}: {said.get(u.group, {}).get(c) or r.render()}" for c, r in u.reasons.items())
            reasons[u.group] = text or "no reachable cluster"
    for gk, text in reasons.items():
        for ref in members.get(gk, ()):
            actions.append(Unplace(ref, f"unplaced: {text}"))
    return Decision(tuple(actions), plan, plan_id, seconds, None, len(pending))


# --- one placed workload ---------------------------------------------------------------------

@dataclass(frozen=True)
class CopyGone:
    """What to do when the copy a staging object names is gone from its cluster."""

    replace: bool
    reason: str


def on_copy_gone(cluster: str, last_phase: str | None) -> CopyGone:
    """A finished workload (its last mirrored phase Completed or Failed) is not run again:
    the staging object keeps its status. Anything else goes back to pending."""
    if last_phase in FINISHED:
        return CopyGone(False, f"the copy on {cluster} was deleted after it finished ({last_phase}); not run again")
    return CopyGone(True, f"the copy on {cluster} was deleted by someone else; placing it again")


def drifted(desired: Mapping[str, Any], copy: Mapping[str, Any]) -> list[str]:
    """The top-level spec fields placer sets that differ on the copy (empty: no drift).
    Fields placer does not set are someone else's and never count."""
    want, have = desired.get("spec") or {}, copy.get("spec") or {}
    if not isinstance(want, dict):
        return []
    return sorted(k for k, v in want.items() if not contains((have or {}).get(k), v))


@dataclass(frozen=True)
class EditFit:
    fits: bool
    reason: str = ""


def edit_fits(cluster: Cluster, new: Workload, committed: Sequence[tuple[PlacementGroup, str]] = (), *,
              time_limit: float = 1.0) -> EditFit:
    """Whether the new version of a placed workload fits its cluster: `cluster` is the
    snapshot with the workload's own pods taken out (the room its old version leaves),
    `committed` what others are promised there."""
    group = PlacementGroup(f"edit:{new.ref}", (dataclasses.replace(
        new, annotations={k: v for k, v in new.annotations.items() if k not in (ANN_PIN, ANN_SELECTOR)}),))
    plan = solve(Fleet((cluster,)), [group], time_limit=time_limit, workers=1, seed=0,
                 committed=[c for c in committed if c[1] == cluster.name])
    if plan.placements:
        return EditFit(True)
    reasons = [r.render() for u in plan.unplaced for r in u.reasons.values()]
    return EditFit(False, reasons[0] if reasons else f"does not fit {cluster.name}")


# --- one staging workload's actions ------------------------------------------------------------

def staging_gone(ref: WorkloadRef, clusters: Sequence[str]) -> tuple[Delete, ...]:
    """Gone from the hub without our finalizer's consent (or never finalized): no copy survives."""
    return tuple(Delete(c, ref, "its staging object is gone") for c in clusters)


def keep_one(ref: WorkloadRef, named: str | None, copies: Sequence[tuple[str, Mapping[str, Any]]]
             ) -> tuple[tuple[str, Any], tuple[Delete, ...]]:
    """Two copies must never exist; if they do (a copy made by hand, an old split brain),
    keep the one the staging object names, else the oldest, and delete the rest."""
    keep = next((c for c in copies if c[0] == named), None) or \
        min(copies, key=lambda c: (c[1].get("metadata") or {}).get("creationTimestamp") or "")
    return keep, tuple(Delete(c, ref, f"duplicate of the copy on {keep[0]}") for c, _ in copies if c != keep[0])


def invalid(ref: WorkloadRef, message: str) -> tuple[Action, ...]:
    """A malformed staging object: say why, on the object and as an Event."""
    return (Record(ref, WARNING, FAILED, message),
            Annotate(ref, {ANN_PHASE: PHASE_INVALID, ANN_MESSAGE: message[:1000]}, finalizer=True))


def placed_status(ref: WorkloadRef, cluster: str, ann: Mapping[str, str], phase: str, detail: str,
                  blocked: str | None, status: Mapping[str, Any] | None) -> tuple[MirrorStatus, Annotate]:
    """A placed workload's report: the copy's status first (whoever sees the new phase
    annotation finds the status that explains it), then where, the phase and a message that
    keeps the plan's wording (or says why a spec edit is held back)."""
    message = ann.get(ANN_MESSAGE) if ann.get(PLACED_CLUSTER) == cluster else None
    if not message or not message.startswith(f"placed on {cluster}"):
        message = f"placed on {cluster}"
    message = blocked or _with_detail(message, detail)
    return (MirrorStatus(ref, cluster, status),
            Annotate(ref, {PLACED_CLUSTER: cluster, ANN_PHASE: phase, ANN_MESSAGE: message}, finalizer=True))


def copy_gone(ref: WorkloadRef, cluster: str, ann: Mapping[str, str], known: bool
              ) -> tuple[CopyGone, tuple[Action, ...]]:
    """The copy on `cluster` is gone (the cluster said so): a finished workload only says so
    (once); anything else, when we placed it there, is told it goes back to pending."""
    gone = on_copy_gone(cluster, ann.get(ANN_PHASE))
    if not gone.replace:
        if ann.get(ANN_MESSAGE, "").find("was deleted after it finished") >= 0:
            return gone, ()
        return gone, (Annotate(ref, {ANN_MESSAGE: f"{ann.get(ANN_MESSAGE, '')} | {gone.reason}"[:1000]}),)
    if not known and ann.get(PLACED_CLUSTER) != cluster:
        return gone, ()
    return gone, (Record(ref, WARNING, COPY_DELETED, gone.reason),
                  Annotate(ref, {PLACED_CLUSTER: None, ANN_PHASE: Phase.PENDING.value, ANN_MESSAGE: gone.reason},
                           finalizer=True))


def correct_drift(ref: WorkloadRef, cluster: str, desired: Mapping[str, Any], copy: Mapping[str, Any]
                  ) -> ForwardSpec | None:
    """A copy edited on its cluster is put back (None: no drift)."""
    fields = drifted(desired, copy)
    if not fields:
        return None
    why = f"spec.{', spec.'.join(fields)} changed on {cluster} by someone else; put back"
    return ForwardSpec(ref, cluster, desired, why, (NORMAL, DRIFT_CORRECTED))


def forward_spec(ref: WorkloadRef, cluster: str, desired: Mapping[str, Any], generation: str) -> ForwardSpec:
    return ForwardSpec(ref, cluster, desired, f"spec change (generation {generation}) applied to the copy")


def edit_blocked(ref: WorkloadRef, reason: str) -> tuple[str, tuple[Action, ...]]:
    """A staging spec edit that does not fit its cluster stays on the hub; the copy keeps
    running as it is. Returns the text and what tells the user."""
    text = f"spec edit not forwarded: {reason}"
    return text, (Record(ref, WARNING, EDIT_DOES_NOT_FIT, text), Annotate(ref, {ANN_MESSAGE: text[:1000]}),
                  Condition(ref, True, "Placed", text))


def withdrawal(ref: WorkloadRef, cluster: str, why: str, copies_on: Sequence[str]) -> tuple[Action, ...]:
    """A stuck workload off `cluster` (its copy there deleted), told it is placed elsewhere."""
    message = f"withdrawn from {cluster}: {why}; placing elsewhere"
    deletes = tuple(Delete(c, ref, f"rescheduling: {why}") for c in copies_on if c == cluster)
    return deletes + (Record(ref, WARNING, RESCHEDULED, message),
                      Annotate(ref, {PLACED_CLUSTER: None, ANN_PHASE: Phase.PENDING.value, ANN_MESSAGE: message}))


def unplaced(ref: WorkloadRef, message: str) -> tuple[Record, Condition, Annotate]:
    """What an Unplace writes: an Event, the Placed condition false, the pending annotations."""
    return (Record(ref, WARNING, UNPLACED, message), Condition(ref, False, UNPLACED, message),
            Annotate(ref, {ANN_PHASE: Phase.PENDING.value, ANN_MESSAGE: message[:1000], PLACED_CLUSTER: None},
                     finalizer=True))


def _with_detail(message: str, detail: str) -> str:
    base = message.split(" | ", 1)[0]
    return f"{base} | {detail}"[:1000] if detail else base


__all__ = ["Create", "CopyGone", "Decision", "EditFit", "PendingGroup", "Snapshot", "Unplace",
           "copy_gone", "correct_drift", "decide", "drifted", "edit_blocked", "edit_fits", "forward_spec",
           "invalid", "keep_one", "on_copy_gone", "placed_status", "staging_gone", "unplaced", "with_policy",
           "withdrawal"]
