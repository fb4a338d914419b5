"""Creating a group on its cluster: the copies prepared from the staging objects as they are
when the cluster's queue gets to them, applied there, and the result recorded when it comes
back through the inbox: the copy goes into the cache, the staging object gets one patch; a
refused apply or a name collision excludes that cluster for the workload, and the next
round places it elsewhere."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from placer import actuate as A
from placer.actuate.steer import HOLDS, counts_by_workload, nodes_by_workload, pinned
from placer.actuate.topology import choices_by_workload
from placer.daemon import decide as DC
from placer.daemon.actions import Annotate, Create, Record
from placer.daemon.definitions import CurrentCatalog
from placer.daemon.events import CLUSTER_DEGRADED, FAILED, NORMAL, PLACED, WARNING
from placer.daemon.health import timed_out
from placer.daemon.leadership import NotLeader
from placer.daemon.messages import Created
from placer.daemon.metrics import Metrics
from placer.daemon.spread import share_create
from placer.daemon.state import Creating, Remote, origin_of
from placer.daemon.targets import Interpret
from placer.daemon.workbench import Workbench
from placer.definitions.catalog import Catalog
from placer.model.errors import InputError, KubeError, PlacerError, Unreachable
from placer.model.names import ANN_MESSAGE, ANN_PHASE, ANN_SOURCE_GENERATION, PLACED_CLUSTER
from placer.model.topology import TopologyChoice
from placer.model.workload import Phase, PlacementGroup, WorkloadRef

log = logging.getLogger("placer.daemon")


def prepare(group: PlacementGroup, entry: Any, catalog: Catalog, cluster: str, plan_id: str,
            topology: Mapping[WorkloadRef, Sequence[TopologyChoice]] | None = None,
            shares: Mapping[WorkloadRef, int] | None = None,
            nodes: Mapping[WorkloadRef, Mapping[str, Sequence[str]]] | None = None,
            counts: Mapping[WorkloadRef, Mapping[str, Mapping[str, int]]] | None = None) -> list[dict]:
    """The group's copies for `cluster` (its clusters-file `entry`); `topology`: the domains
    chosen per workload, handed to the cluster's scheduler (placer.actuate.topology);
    `shares`: a divided workload's replicas there, written through its scale path; `nodes`:
    the planned nodes per pod template, steered to (placer.actuate.steer)."""
    objects = A.prepare_objects(group, entry, catalog, plan_id=plan_id,
                                origin=lambda obj: origin_of(WorkloadRef.of(obj)), cluster=cluster,
                                topology=topology, shares=shares, nodes=nodes, counts=counts)
    by_name = {(w.kind, w.name): w for w in group.workloads}
    for obj in objects:
        meta = obj["metadata"]
        # finalizers on the hub belong to hub-side controllers (ours among them): a copy
        # carrying them could never be deleted on its cluster (the server's own fields,
        # owners included, prepare_objects has already left out)
        meta.pop("finalizers", None)
        w = by_name.get((str(obj.get("kind")), str(meta.get("name"))))
        gen = (w.obj.get("metadata") or {}).get("generation") if w else None
        if gen is not None:
            meta["annotations"][ANN_SOURCE_GENERATION] = str(gen)
    return objects


def refused(e: PlacerError) -> bool:
    """An apply the cluster refused for this workload and would refuse again (someone
    else's object of the same name, a Pod Security level, a forbidden or invalid object),
    as opposed to a transient failure worth retrying there."""
    if isinstance(e, (A.NotOurs, InputError)):
        return True
    return isinstance(e, KubeError) and e.status in (400, 403, 404, 409, 422)


def _as_made(obj: dict, ap: Any) -> dict:
    """The copy as its cluster holds it after the create: the apply's answer (what the watch
    event then carries, so that interpreting it is remembered: one interpretation, not two),
    else the object sent with the server's version, uid and first generation."""
    live = getattr(ap, "live", None)
    if isinstance(live, dict) and live.get("metadata"):
        # as given: the memo is keyed by the text, so the watch event's equal object hits it
        return live if live.get("apiVersion") and live.get("kind") else \
            {"apiVersion": obj["apiVersion"], "kind": obj["kind"], **live}
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": ap.after or "0", "uid": ap.uid,
                                "generation": 1}}


@dataclass(eq=False)
class Creator:
    """Performs a round's Creates and records their results."""

    bench: Workbench
    entries: Mapping[str, Any]
    catalogs: CurrentCatalog
    interpret: Interpret
    metrics: Metrics
    degraded: Callable[[str], str | None] = lambda _: None     # why a cluster is degraded (daemon/health.py)

    def start(self, c: Create, planning: PlacementGroup, plan_id: str) -> None:
        if c.cluster not in self.bench.targets.caches:     # never a cluster outside the clusters file
            return
        share = share_create(c)
        if A.handoff_of(self.entries[c.cluster]).steer in HOLDS:
            # counted as its steered copies will be scheduled (issue 22): held to its nodes
            planning = pinned(planning, nodes_by_workload(c.placements, c.cluster))
        for ref in c.members:
            if share:                             # a spread share: one create per cluster
                self.bench.book.spreading[(ref, c.cluster)] = Creating(c.cluster, planning, c.members)
            else:
                self.bench.book.creating[ref] = Creating(c.cluster, planning, c.members)

        def create() -> Any:
            return self.create_group(c, plan_id)

        def done(result: Any) -> None:
            self.bench.executor.inbox.put(Created(c, result))
        if not self.bench.executor.submit(c.cluster, ("create", c.group) + ((c.cluster,) if share else ()),
                                          create, done):
            self._settle(c)
            self.bench.book.open_window(self.bench.clock.now())     # planned again next round

    def _settle(self, c: Create) -> None:
        """The create is no longer in flight."""
        for ref in c.members:
            if share_create(c):
                self.bench.book.spreading.pop((ref, c.cluster), None)
            else:
                self.bench.book.creating.pop(ref, None)

    def create_group(self, c: Create, plan_id: str) -> Any:
        """On the cluster's queue: the group's copies, made from the staging objects as they
        are now. Returns the objects applied and their AppliedRefs (or the error)."""
        failing = self.bench.targets.caches[c.cluster].error
        if failing:                               # queued behind a failure: go back to planning now
            raise Unreachable(f"{c.cluster} is failing ({failing})", cluster=c.cluster)
        sources = []
        shares = A.shares_on(c.placements, c.cluster)
        for ref in c.members:
            held = [cl for cl, _ in self.bench.targets.copies_of(ref)]
            if (held and not share_create(c)) or (c.cluster in held and ref not in shares):
                return "placed meanwhile"         # adopted: never a second copy (a divided share there grows)
            staging = self.bench.view.staged(ref)
            if staging is None or (staging.get("metadata") or {}).get("deletionTimestamp"):
                return "deleted meanwhile"
            sources.append(self.interpret(staging, str(ref)))
        group = PlacementGroup(c.group, tuple(sources), tuple(self.bench.view.companions_of(c.group)))
        objects = prepare(group, self.entries[c.cluster], self.catalogs.current, c.cluster, plan_id,
                          topology=choices_by_workload(c.placements), shares=shares,
                          nodes=nodes_by_workload(c.placements, c.cluster),
                          counts=counts_by_workload(c.placements, c.cluster))
        applied = A.apply_group(self.bench.targets.client(c.cluster), objects, group_key=c.group,  # type: ignore[arg-type]
                                pod_security=A.handoff_of(self.entries[c.cluster]).pod_security,
                                namespaces=self.bench.targets.namespaces_on(c.cluster))
        if not share_create(c):
            self._interpret_made(c, objects, applied)
        return objects, applied

    def _interpret_made(self, c: Create, objects: Sequence[dict], applied: Sequence[Any]) -> None:
        """Each member's copy as made, interpreted here on the cluster's worker: the report
        (`report`, on the daemon thread, which every step waits for) and the copy's watch
        event then find it remembered. A copy that does not read is left to the report."""
        for obj, ap in zip(objects, applied):
            ref = WorkloadRef.of(obj)
            if ap is not None and ref in c.members:
                try:
                    self.interpret(_as_made(obj, ap), f"{c.cluster}/{ref}")
                except PlacerError:
                    pass

    def created(self, c: Create, result: Any) -> None:
        self._settle(c)
        now = self.bench.clock.now()
        if isinstance(result, (NotLeader, str)):
            # fenced (the next leader, or this one again, plans it) or overtaken (adopted,
            # deleted): look again, and plan what is still pending in the next round
            for ref in c.members:
                self.bench.queue.add(ref, now)
            self.bench.book.open_window(now)
            # no copy made: what the create held is free again for anything waiting unplaced
            self.bench.book.fleet_changed = self.bench.book.fleet_changed or now
            return
        if isinstance(result, PlacerError):
            self.failed(c, result)
            return
        objects, applied = result
        for ref in c.members:
            obj, ap = next(((o, a) for o, a in zip(objects, applied) if WorkloadRef.of(o) == ref), (None, None))
            if obj is not None and ap is not None:
                self.placed(c, ref, obj, ap, now)

    def placed(self, c: Create, ref: WorkloadRef, obj: dict, ap: Any, now: float) -> None:
        gvk = self.bench.view.gvk_of(ref)
        made = _as_made(obj, ap)
        if gvk is not None:
            self.bench.targets.caches[c.cluster].copies[gvk].assume(made)
            # what was just created is what placer wants: no drift to look for until the copy
            # changes (its first watch event, of this generation, then costs no desired copy)
            meta = made["metadata"]
            self.bench.book.checked[(c.cluster, ref)] = str(meta.get("generation") or meta.get("resourceVersion"))
        if share_create(c):                       # a share: the spread keeper reports it (daemon/spread.py)
            self.metrics.inc("placer_placements_total")
            self.bench.executor.perform([Record(ref, NORMAL, PLACED, c.messages.get(ref, f"placed on {c.cluster}"))])
            self.bench.queue.add(ref, now)
            return
        self.bench.book.placed[ref] = Remote(c.cluster, now)
        self.bench.book.pending.pop(ref, None)
        self.metrics.inc("placer_placements_total")
        message = c.messages.get(ref, f"placed on {c.cluster}")
        staging = self.bench.view.staged(ref)
        if staging is None or (staging.get("metadata") or {}).get("deletionTimestamp"):
            self.bench.queue.add(ref, now)          # deleted while being placed: reconcile removes the copy
            return
        ex = self.bench.executor

        def unreported(e: PlacerError) -> None:
            ex.on_error("hub", e)
            self.bench.queue.add(ref, now + 1.0)    # the copy exists: the next pass annotates it
        # both after the copy, in this order, beside other workloads' writes (daemon/overlap.py)
        ex.later(Record(ref, NORMAL, PLACED, message + (f" (group {c.group})" if len(c.members) > 1 else "")),
                 failed=lambda e: ex.on_error("hub", e))
        ex.later(Annotate(ref, self.report(c.cluster, ref, made, message), finalizer=True), failed=unreported)
        log.info("%s: %s", ref, message)

    def report(self, cluster: str, ref: WorkloadRef, copy: dict, message: str) -> dict[str, str | None]:
        """The annotations of a workload just placed: where, and the phase and message the
        reconciler writes once the copy's watch event comes (`decide.placed_status` of the
        copy as created), so that its pass finds nothing to change: one patch, not two."""
        values: dict[str, str | None] = {PLACED_CLUSTER: cluster, ANN_PHASE: Phase.PENDING.value, ANN_MESSAGE: message}
        try:
            w = self.interpret(copy, f"{cluster}/{ref}")
        except PlacerError:
            return values
        detail = ": ".join(p for p in (w.reason, w.message) if p)
        _, annotate = DC.placed_status(ref, cluster, {PLACED_CLUSTER: cluster, ANN_MESSAGE: message},
                                       w.phase.value, detail, None, None)
        return dict(annotate.values)

    def failed(self, c: Create, e: PlacerError) -> None:
        self.bench.executor.on_error(c.cluster, e)
        log.warning("group %s: placing on %s failed: %s", c.group, c.cluster, e)
        if timed_out(e):            # it may have happened anyway: looked for when the cluster answers
            self.bench.book.suspects.setdefault(c.cluster, set()).update(c.members)
        if share_create(c):         # the spread keeper finds the share missing and places it again
            for ref in c.members:
                if refused(e):
                    self.bench.book.exclude(ref, c.cluster, self.entries, f"refused it: {e.message}")
                self.bench.executor.do(Record(ref, WARNING, FAILED, f"placing on {c.cluster} failed: {e.message}"))
                self.bench.queue.add(ref, self.bench.clock.now())
            return
        degraded = self.degraded(c.cluster)
        if degraded:                # no answer within the deadline: moved, the next round goes elsewhere
            self.moved(c, degraded)
            return
        text = f"placing on {c.cluster} failed: {e.message}"
        everywhere = False
        if refused(e):              # the same cluster would refuse again: let the next round go elsewhere
            for ref in c.members:
                everywhere |= self.bench.book.exclude(ref, c.cluster, self.entries, f"refused it: {e.message}")
            text += "; every cluster refused it: tried again at the next retry" if everywhere else \
                f"; {c.cluster} is excluded for it, placing elsewhere"
        for ref in c.members:
            self.bench.executor.do(Record(ref, WARNING, FAILED, f"placing on {c.cluster} failed: {e.message}"))
            self.bench.executor.unplace(ref, text)
        now, book = self.bench.clock.now(), self.bench.book
        if not everywhere:          # elsewhere, or here once it answers; refused everywhere: at the retry interval
            book.retry_at = min(book.retry_at or now + 0.2, now + 0.2)

    def moved(self, c: Create, why: str) -> None:
        """A create on a degraded cluster (its own request, or one before it, got no answer
        within the request deadline): planned again at once, elsewhere."""
        text = f"{c.cluster} is degraded ({why}): moved, placing elsewhere"
        for ref in c.members:
            self.bench.executor.do(Record(ref, WARNING, CLUSTER_DEGRADED, text))
            self.bench.executor.unplace(ref, text)
        now, book = self.bench.clock.now(), self.bench.book
        book.retry_at = min(book.retry_at or now, now)
