"""A planning round: the pending workloads as groups, a snapshot from the caches, the
pure `decide`, then each Create queued on its cluster and each Unplace annotated. A
create's result comes back through the inbox: the copy goes into the cache, the staging
object gets one patch; a refused apply or a name collision excludes that cluster for the
workload, and the next round places it elsewhere."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable, Hashable, Mapping, Sequence

from placer import actuate as A
from placer.actuate.topology import choices_by_workload
from placer.daemon import decide as DC
from placer.daemon.events import FAILED, NORMAL, PLACED, WARNING
from placer.daemon.leadership import NotLeader
from placer.daemon.messages import Created
from placer.daemon.reconcile import Reconcile
from placer.daemon.state import Creating, Remote, ann_of, origin_of
from placer.inputs.priority import PriorityClasses, from_objects, with_priorities
from placer.model.errors import InputError, KubeError, PlacerError, Unreachable
from placer.model.fleet import Fleet
from placer.model.names import ANN_MESSAGE, ANN_PHASE, ANN_SOURCE_GENERATION, PLACED_CLUSTER
from placer.model.topology import TopologyChoice
from placer.model.workload import Phase, PlacementGroup, Workload, WorkloadRef

log = logging.getLogger("placer.daemon")


class Planning(Reconcile):
    # --- the snapshot ----------------------------------------------------------------------

    def usable(self) -> list[str]:
        """Clusters a round may plan on: their caches synced (and, for a new leader, their
        copies relisted)."""
        return [c for c, cache in self.caches.items() if cache.synced and c in self._resynced]

    def committed(self) -> list[tuple[PlacementGroup, str]]:
        out: list[tuple[PlacementGroup, str]] = []
        for name in self.usable():
            out += self.caches[name].promises(self.interpret)
        seen: set[str] = set()
        for c in self.creating.values():
            if c.group.key not in seen:
                seen.add(c.group.key)
                out.append((dataclasses.replace(c.group, key=f"creating:{c.group.key}"), c.cluster))
        return out

    def snapshot(self) -> DC.Snapshot:
        committed = self.committed()
        reserved = A.reserved_by_cluster(committed)
        clusters = tuple(dataclasses.replace(self.caches[n].cluster(), reserved=reserved.get(n, {}))
                         for n in self.usable())
        return DC.Snapshot(Fleet(clusters), tuple(committed))

    # --- one round ---------------------------------------------------------------------------

    def plan_round(self) -> None:
        now = self.clock.now()
        self._window_opened = None
        self._fleet_changed = None
        self._retry_at = now + self.config.retry_interval
        pending = self.pending_groups()
        if not pending:
            return
        t0 = time.perf_counter()
        snap = self.snapshot()
        took = time.perf_counter() - t0
        self.interpret.sweep()
        decision = DC.decide(snap, pending, now, plan_id=A.new_plan_id(), time_limit=self.config.time_limit,
                             workers=self.config.solver_workers)
        self.metrics.observe("placer_solve_seconds", decision.seconds)
        self.metrics.inc("placer_solves_total")
        if decision.error:
            log.error("planning failed: %s", decision.error)
        log.info("plan %s: %d of %d groups placed in %.2fs (snapshot %.2fs, %d promised)", decision.plan_id,
                 len(decision.creates), decision.groups, decision.seconds, took, len(snap.committed))
        groups = {p.group.key: p.group for p in pending}
        for c in decision.creates:
            self.start_create(c, groups[c.group], decision.plan_id)
        for u in decision.unplaced:
            self.set_unplaced(u.ref, u.reason)

    def pending_groups(self) -> list[DC.PendingGroup]:
        """Pending workloads as placement groups (by `placer.dev/group`), with their
        companions; a newcomer to a group already placed is pinned to the group's cluster."""
        by_group: dict[str, list[tuple[WorkloadRef, Workload]]] = {}
        pins: dict[str, str] = {}
        for ref in sorted(self.pending):
            staging = self.staged(ref)
            if staging is None or (staging.get("metadata") or {}).get("deletionTimestamp") or ref in self.placed:
                self.pending.pop(ref, None)
                continue
            if ref in self.creating:
                continue
            where = ann_of(staging).get(PLACED_CLUSTER)
            if where and where in self.caches and where not in self.usable():
                continue                          # its copy may be there: wait until that cluster is known
            w = self.interpret_staging(ref, staging)
            if w is None:
                continue
            gk = self.group_key(ref, staging)
            by_group.setdefault(gk, []).append((ref, w))
            for member, _ in self.group_members(ref, staging):
                if member in self.placed:
                    pins[gk] = self.placed[member].cluster
        out = []
        classes = self.priority_classes()
        for gk, items in by_group.items():
            g = PlacementGroup(gk, tuple(w for _, w in items), tuple(self.companions_of(gk)))
            try:
                [g] = with_priorities([g], classes)
            except InputError as e:                 # an unknown class: unplaced, retried (it may be created)
                for ref, _ in items:
                    self.set_unplaced(ref, f"unplaced: {e.message}")
                continue
            refs = tuple(r for r, _ in items)
            excluded = frozenset(set().union(*(self.excluded.get(r, set()) for r in refs)))
            out.append(DC.PendingGroup(A.planning_view(g, self.catalog), refs, excluded, pins.get(gk)))
        return out

    def priority_classes(self) -> PriorityClasses:
        """The hub's PriorityClasses and WorkloadPriorityClasses, from its watches."""
        objs = [{**o, "apiVersion": inf.gvk[0], "kind": inf.gvk[1]} for inf in self.classes for o in inf.items()]
        return from_objects(objs, f"context {self.config.hub_context or '(current)'}")

    def companions_of(self, group_key: str) -> list[dict]:
        ns, _, name = group_key.partition("/")
        out = []
        for (api, kind), inf in self.companions.items():
            for obj in inf.items():
                meta = obj.get("metadata") or {}
                if ann_of(obj).get(A.GROUP) == name and meta.get("namespace") == ns:
                    out.append({**obj, "apiVersion": api, "kind": kind})
        return sorted(out, key=lambda o: (o["kind"], o["metadata"]["name"]))

    # --- creating a group on its cluster -------------------------------------------------------

    def prepare(self, group: PlacementGroup, cluster: str, plan_id: str,
                topology: Mapping[WorkloadRef, Sequence[TopologyChoice]] | None = None) -> list[dict]:
        """The group's copies for `cluster`; `topology`: the domains chosen per workload,
        handed to the cluster's scheduler (placer.actuate.topology)."""
        objects = A.prepare_objects(group, self.entries[cluster], self.catalog, plan_id=plan_id,
                                    origin=lambda obj: origin_of(WorkloadRef.of(obj)), cluster=cluster,
                                    topology=topology)
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

    def start_create(self, c: DC.Create, planning: PlacementGroup, plan_id: str) -> None:
        if c.cluster not in self.caches:             # never a cluster outside the clusters file
            return
        for ref in c.members:
            self.creating[ref] = Creating(c.cluster, planning, c.members)

        def create() -> Any:
            return self.create_group(c, plan_id)

        def done(result: Any) -> None:
            self.inbox.put(Created(c, result))
        if not self.submit(c.cluster, ("create", c.group), create, done):
            for ref in c.members:
                self.creating.pop(ref, None)
            if self._window_opened is None:           # planned again next round
                self._window_opened = self.clock.now()

    def create_group(self, c: DC.Create, plan_id: str) -> Any:
        """On the cluster's queue: the group's copies, made from the staging objects as they
        are now. Returns the objects applied and their AppliedRefs (or the error)."""
        failing = self.caches[c.cluster].error
        if failing:                               # queued behind a failure: go back to planning now
            raise Unreachable(f"{c.cluster} is failing ({failing})", cluster=c.cluster)
        sources = []
        for ref in c.members:
            if self.copies_of(ref):
                return "placed meanwhile"         # adopted: never a second copy
            staging = self.staged(ref)
            if staging is None or (staging.get("metadata") or {}).get("deletionTimestamp"):
                return "deleted meanwhile"
            sources.append(self.interpret(staging, str(ref)))
        group = PlacementGroup(c.group, tuple(sources), tuple(self.companions_of(c.group)))
        objects = self.prepare(group, c.cluster, plan_id, topology=choices_by_workload(c.placements))
        applied = A.apply_group(self.client(c.cluster), objects, group_key=c.group,  # type: ignore[arg-type]
                                pod_security=A.handoff_of(self.entries[c.cluster]).pod_security)
        return objects, applied

    def created(self, c: DC.Create, result: Any) -> None:
        for ref in c.members:
            self.creating.pop(ref, None)
        now = self.clock.now()
        if isinstance(result, (NotLeader, str)):
            # fenced (the next leader, or this one again, plans it) or overtaken (adopted,
            # deleted): look again, and plan what is still pending in the next round
            for ref in c.members:
                self.queue.add(ref, now)
            if self._window_opened is None:
                self._window_opened = now
            return
        if isinstance(result, PlacerError):
            self.create_failed(c, result)
            return
        objects, applied = result
        for ref in c.members:
            obj, ap = next(((o, a) for o, a in zip(objects, applied) if WorkloadRef.of(o) == ref), (None, None))
            if obj is None or ap is None:
                continue
            gvk = self.gvk_of(ref)
            if gvk is not None:
                meta = {**obj["metadata"], "resourceVersion": ap.after or "0", "uid": ap.uid,
                        "generation": 1}
                self.caches[c.cluster].copies[gvk].assume({**obj, "metadata": meta})
            self.placed[ref] = Remote(c.cluster, now)
            self.pending.pop(ref, None)
            self.metrics.inc("placer_placements_total")
            message = c.messages.get(ref, f"placed on {c.cluster}")
            staging = self.staged(ref)
            if staging is None or (staging.get("metadata") or {}).get("deletionTimestamp"):
                self.queue.add(ref, now)          # deleted while being placed: reconcile removes the copy
                continue
            self.event(ref, staging, NORMAL, PLACED, message + (f" (group {c.group})" if len(c.members) > 1 else ""))
            try:
                self.annotate(ref, staging, {PLACED_CLUSTER: c.cluster, ANN_PHASE: Phase.PENDING.value,
                                             ANN_MESSAGE: message}, finalizer=True)
            except PlacerError as e:
                self.api_error("hub", e)
                self.queue.add(ref, now + 1.0)    # the copy exists: the next pass annotates it
            log.info("%s: %s", ref, message)

    def create_failed(self, c: DC.Create, e: PlacerError) -> None:
        self.api_error(c.cluster, e)
        log.warning("group %s: placing on %s failed: %s", c.group, c.cluster, e)
        refused = _refused(e)
        text = f"placing on {c.cluster} failed: {e.message}"
        if refused:                 # the same cluster would refuse again: let the next round go elsewhere
            for ref in c.members:
                self.exclude(ref, c.cluster)
            text += f"; {c.cluster} is excluded for it, placing elsewhere"
        for ref in c.members:
            staging = self.staged(ref)
            if staging is not None:
                self.event(ref, staging, WARNING, FAILED, f"placing on {c.cluster} failed: {e.message}")
            self.set_unplaced(ref, text)
        now = self.clock.now()
        self._retry_at = min(self._retry_at or now + 0.2, now + 0.2)   # elsewhere, or here once it answers

    def submit(self, cluster: str, key: Hashable, fn: Callable[[], Any], done: Callable[[Any], None]) -> bool:
        """Queue a job on the cluster's worker; when one for the same key is already there,
        look at the workload again shortly."""
        if self.workers.submit(cluster, key, fn, done):
            return True
        ref = key[1] if isinstance(key, tuple) and isinstance(key[1], WorkloadRef) else None
        if ref is not None:
            self.queue.add(ref, self.clock.now() + 0.1)
        return False


def _refused(e: PlacerError) -> bool:
    """An apply the cluster refused for this workload and would refuse again (someone
    else's object of the same name, a Pod Security level, a forbidden or invalid object),
    as opposed to a transient failure worth retrying there."""
    if isinstance(e, (A.NotOurs, InputError)):
        return True
    return isinstance(e, KubeError) and e.status in (400, 403, 404, 409, 422)
