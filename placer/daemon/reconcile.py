"""One staging workload against its copy: finalizer, status back, spec forward (checked
for fit first), drift put back, a copy deleted by someone else, deletion, adoption.
Reads only the caches; what to do comes from the pure steps in `decide` as actions, which
the executor performs (writes to targets go to the target's own queue)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping

from placer import actuate as A
from placer.actuate.compare import demand
from placer.actuate.steer import nodes_of
from placer.actuate.topology import choices_of
from placer.daemon import decide as DC
from placer.daemon.actions import Check, Delete
from placer.daemon.caches import selects_pods_of
from placer.daemon.creates import prepare
from placer.daemon.decide import COPY_DELETED, DRIFT_CORRECTED, EDIT_DOES_NOT_FIT, PHASE_INVALID
from placer.daemon.definitions import CurrentCatalog
from placer.daemon.execute import ClusterWorkers
from placer.daemon.executor import COMPANION_KINDS
from placer.daemon.hub import Notices, controlled_note, controller_of
from placer.daemon.reschedule import Rescheduler
from placer.daemon.spread import SpreadKeeper, is_spread
from placer.daemon.staging import HubWriter
from placer.daemon.state import DaemonConfig, Remote, ann_of, origin_of
from placer.daemon.targets import Interpret
from placer.daemon.workbench import Workbench
from placer.model.errors import InputError, NotFound, PlacerError
from placer.model.names import ANN_SOURCE_GENERATION, FINALIZER, PLACED_CLUSTER
from placer.model.workload import Phase, PlacementGroup, Workload, WorkloadRef

log = logging.getLogger("placer.daemon")

__all__ = ["COMPANION_KINDS", "COPY_DELETED", "DRIFT_CORRECTED", "EDIT_DOES_NOT_FIT", "PHASE_INVALID", "Reconciler"]


def _raise(ref: WorkloadRef, e: PlacerError) -> None:
    raise e


@dataclass(eq=False)
class Reconciler:
    """Given the book, both caches, the executor (and the hub writer for the finalizer), the
    rescheduler, and what a spec forward needs (catalog, clusters-file entries, config)."""

    bench: Workbench
    config: DaemonConfig
    entries: Mapping[str, Any]
    catalogs: CurrentCatalog
    interpret: Interpret
    writer: HubWriter
    rescheduler: Rescheduler
    workers: ClusterWorkers
    spread: SpreadKeeper
    notices: Notices = field(default_factory=Notices)
    # a hub write of a reconcile that failed (a pass's writes end after the reconcile): the
    # daemon retries the workload with backoff; None: raised to the caller, as at once
    write_failed: Callable[[WorkloadRef, PlacerError], None] = field(default=_raise)

    def reconcile(self, ref: WorkloadRef) -> None:
        if self.bench.book.in_flight(ref):
            return                                    # its create's result brings it back
        staging = self.bench.view.staged(ref)
        copies = self.bench.targets.copies_of(ref)
        if staging is None:
            self.bench.executor.perform(DC.staging_gone(ref, [c for c, _ in copies]))
            self.bench.book.forget(ref)
            self.spread.forget(ref)
            return
        if (staging.get("metadata") or {}).get("deletionTimestamp"):
            self.finalize(ref, staging, copies)
            return
        owner = controller_of(staging)
        if owner is not None:                         # a controller's product: its owner is what is placed
            self.notices.warn("controlled", controlled_note(str(ref), owner))
            self.never_placed(ref, staging, copies, owner)
            return
        workload = self.interpret_staging(ref, staging)
        if workload is None:
            return
        spec = is_spread(workload)
        if spec is not None:                          # one copy per share (daemon/spread.py)
            self.writer.ensure_finalizer(ref, staging)
            if self.spread.reconcile(ref, staging, workload, spec, copies):
                now = self.bench.clock.now()
                self.bench.book.make_pending(ref, now)
                if not self.bench.book.pending[ref].message:     # not judged yet (a create's result may have
                    self.bench.book.open_window(now)              # held it back): the next round plans it
            else:
                self.bench.book.pending.pop(ref, None)
            return
        if len(copies) > 1:
            keep, deletes = DC.keep_one(ref, ann_of(staging).get(PLACED_CLUSTER), copies)
            self.bench.executor.perform(deletes)
            copies = [keep]
        if copies:
            self.sync_placed(ref, staging, workload, *copies[0])
            return
        known = self.bench.book.placed.get(ref)
        where = known.cluster if known else ann_of(staging).get(PLACED_CLUSTER)
        if where and where in self.entries:
            self.copy_missing(ref, where)
            return
        # pending (planned) only once the finalizer is on: never a copy of an object that could
        # be deleted without placer's knowing; beside other arrivals' writes (daemon/overlap.py)
        self.bench.executor.hub(ref, lambda: self.writer.ensure_finalizer(ref, staging),
                                then=lambda _: self.bench.book.make_pending(ref, self.bench.clock.now()),
                                failed=lambda e: self.write_failed(ref, e))

    def never_placed(self, ref: WorkloadRef, staging: dict, copies: list[tuple[str, dict]], owner: str) -> None:
        """What an older daemon did with a controller's product is undone: its copies go,
        then placer's finalizer (else the hub's controller could never delete it)."""
        if copies:
            self.bench.executor.perform(Delete(c, ref, f"made by {owner} on the hub: never placed")
                                        for c, _ in copies)
            return                                    # the deletions bring it back here
        self.bench.book.forget(ref)
        if FINALIZER in ((staging.get("metadata") or {}).get("finalizers") or ()):
            self._release(ref, staging, retry_in=1.0)

    def interpret_staging(self, ref: WorkloadRef, staging: dict) -> Workload | None:
        """The staging object's workload; a malformed one is annotated with why, and None."""
        try:
            w = self.interpret(staging, str(ref))
            is_spread(w)                              # a bad spread annotation is bad input
            return w
        except InputError as e:
            self.bench.book.pending.pop(ref, None)
            message = f"invalid: {e.message}"
            log.warning("%s: %s", ref, message)
            self.bench.executor.perform(DC.invalid(ref, message))
            return None

    # --- a copy that is not where the staging object says --------------------------------------

    def copy_missing(self, ref: WorkloadRef, cluster: str) -> None:
        """The caches hold no copy where one should be: ask the cluster itself (a GET on its
        queue), then act on the answer (`copy_checked`)."""
        cache = self.bench.targets.caches[cluster]
        if not cache.synced:
            self.bench.queue.add(ref, self.bench.clock.now() + 1.0)
            return
        gvk = self.bench.view.gvk_of(ref)
        if gvk is None or gvk not in cache.kinds:     # the cluster does not serve the kind (any more)
            self.copy_checked(ref, cluster, None)
            return
        self.bench.executor.do(Check(ref, cluster))

    def copy_checked(self, ref: WorkloadRef, cluster: str, found: Any) -> None:
        if isinstance(found, PlacerError):
            self.bench.executor.on_error(cluster, found)
            self.bench.queue.add(ref, self.bench.clock.now() + 2.0)
            return
        if found is not None and ann_of(found).get(A.ORIGIN) == origin_of(ref):
            gvk = self.bench.view.gvk_of(ref)
            if gvk:
                self.bench.targets.caches[cluster].copies[gvk].assume(found)       # its watch event was late
            return
        staging = self.bench.view.staged(ref)
        if staging is None:
            return self.bench.book.forget(ref)
        known = self.bench.book.placed.pop(ref, None)
        gone, actions = DC.copy_gone(ref, cluster, ann_of(staging), known is not None)
        if gone.replace and actions:
            log.info("%s: %s", ref, gone.reason)
        self.bench.executor.perform(actions)
        if gone.replace:
            self.bench.book.make_pending(ref, self.bench.clock.now())

    # --- placed: status back, spec forward, drift, reschedule ------------------------------------

    def sync_placed(self, ref: WorkloadRef, staging: dict, workload: Workload, cluster: str, remote: dict) -> None:
        now = self.bench.clock.now()
        known = self.bench.book.placed.get(ref)
        if known is None or known.cluster != cluster:
            if known is None and ref not in self.bench.book.pending:
                log.info("%s: adopting the copy on %s", ref, cluster)
            # the copy's age, not the moment we first saw it: a restarted daemon keeps the
            # reschedule deadline the previous one was counting towards
            self.bench.book.placed[ref] = Remote(cluster, now - self.age(remote))
            self.bench.book.pending.pop(ref, None)
        try:
            phase = self.interpret(remote, f"{cluster}/{ref}")
            phase_text, detail = phase.phase.value, _phase_detail(phase)
        except PlacerError as e:
            phase_text, detail = Phase.UNKNOWN.value, f"cannot read the copy's status: {e.message}"
        self.bench.executor.perform(DC.placed_status(ref, cluster, ann_of(staging), phase_text, detail,
                                               self.bench.book.blocked_edit.get(ref), remote.get("status")))
        staging = self.bench.view.staged(ref) or staging
        self.forward_or_correct(ref, staging, workload, cluster, remote)
        self.rescheduler.check(ref, staging, workload, cluster, phase_text)

    def age(self, remote: Mapping[str, Any]) -> float:
        """Seconds since the copy was created, by its creationTimestamp (second precision,
        the cluster's clock: skew shifts it; a timestamp in the future counts as now)."""
        created = (remote.get("metadata") or {}).get("creationTimestamp")
        try:
            at = datetime.fromisoformat(str(created)).timestamp()
        except (TypeError, ValueError):
            return 0.0
        return max(0.0, self.bench.clock.wall() - at)

    def desired(self, ref: WorkloadRef, staging: dict, workload: Workload, cluster: str, plan_id: str,
                remote: dict) -> dict:
        """The copy as placer would write it now; the topology domains it was placed with stay
        (recorded on the copy), so neither a forward nor a drift correction drops them; so do
        the nodes it was steered to, unless the edit changed its demand (placer.actuate.steer)."""
        group = PlacementGroup(self.bench.view.group_key(ref, staging), (workload,))
        return prepare(group, self.entries[cluster], self.catalogs.current, cluster, plan_id,
                       topology={workload.ref: choices_of(remote)},
                       nodes={workload.ref: nodes_of(remote, workload)})[-1]

    def forward_or_correct(self, ref: WorkloadRef, staging: dict, workload: Workload, cluster: str,
                           remote: dict) -> None:
        """A staging spec edit is forwarded when it fits; a copy edited on its cluster is put back."""
        generation = (staging.get("metadata") or {}).get("generation")
        rmeta = remote.get("metadata") or {}
        made_from = ann_of(remote).get(ANN_SOURCE_GENERATION)
        plan_id = ann_of(remote).get(A.PLAN) or "spec-update"
        if generation is not None and str(generation) != made_from:
            self.forward(ref, staging, workload, cluster, remote, plan_id, str(generation))
            return
        self.bench.book.blocked_edit.pop(ref, None)
        seen = str(rmeta.get("generation") or rmeta.get("resourceVersion"))
        if self.bench.book.checked.get((cluster, ref)) == seen:
            return
        fix = DC.correct_drift(ref, cluster, self.desired(ref, staging, workload, cluster, plan_id, remote), remote)
        if fix is None:
            self.bench.book.checked[(cluster, ref)] = seen
            return
        self.bench.executor.do(fix)

    def forward(self, ref: WorkloadRef, staging: dict, workload: Workload, cluster: str, remote: dict,
                plan_id: str, generation: str) -> None:
        try:
            old = self.interpret(remote, f"{cluster}/{ref}")
        except PlacerError:
            old = None
        if old is None or demand(old) != demand(workload):
            fit = self.edit_fits(ref, workload, old, cluster)
            if not fit.fits:
                text, actions = DC.edit_blocked(ref, fit.reason)
                if self.bench.book.blocked_edit.get(ref) != text:
                    self.bench.book.blocked_edit[ref] = text
                    self.bench.executor.perform(actions)
                self.bench.queue.add(ref, self.bench.clock.now() + min(self.config.retry_interval, 5.0))
                return
        self.bench.book.blocked_edit.pop(ref, None)
        desired = self.desired(ref, staging, workload, cluster, plan_id, remote)
        self.bench.executor.do(DC.forward_spec(ref, cluster, desired, generation))

    def edit_fits(self, ref: WorkloadRef, new: Workload, old: Workload | None, cluster: str) -> DC.EditFit:
        cache = self.bench.targets.caches[cluster]
        mine: list[tuple[str, str]] = []
        if old is not None:
            mine = cache.pod_keys(old.namespace, selects_pods_of(old))   # the old version's pods
        committed = [c for c in self.bench.targets.committed() if not c[0].key.endswith(f"{cluster}/{ref}")]
        return DC.edit_fits(cache.cluster(without=mine), new, committed, time_limit=self.config.time_limit)

    # --- deletion ------------------------------------------------------------------------------

    def finalize(self, ref: WorkloadRef, staging: dict, copies: list[tuple[str, dict]]) -> None:
        meta = staging.get("metadata") or {}
        if FINALIZER not in (meta.get("finalizers") or ()):
            return
        busy = [c for c in self.bench.targets.caches if (c, ref) in self.bench.book.deleting]
        if busy or self.workers.busy(("create", ref)):
            self.bench.queue.add(ref, self.bench.clock.now() + 0.1)
            return
        known = self.bench.book.placed.get(ref)
        where = known.cluster if known else ann_of(staging).get(PLACED_CLUSTER)
        if not copies and where is not None and where in self.entries and not self.bench.targets.caches[where].synced:
            self.bench.queue.add(ref, self.bench.clock.now() + 1.0)         # cannot confirm the copy is gone yet
            return
        if copies:
            last = not any(m != ref for m, _ in self.bench.view.group_members(ref, staging))
            group = self.bench.view.group_key(ref, staging) if last else None
            self.bench.executor.perform(Delete(c, ref, "its staging object is being deleted", group) for c, _ in copies)
            return                                               # the deletions bring it back here
        self.bench.book.forget(ref)
        self.spread.forget(ref)
        if self._release(ref, staging, retry_in=0.1):
            log.info("%s: copies deleted; finalizer removed", ref)

    def _release(self, ref: WorkloadRef, staging: dict, *, retry_in: float) -> bool:
        """Remove placer's finalizer from the staging object: True once removed; a hub that
        fails the write is reported and the object looked at again after `retry_in` s."""
        try:
            self.writer.remove_finalizer(ref, staging)
        except NotFound:
            return False                                     # gone already: nothing to release
        except PlacerError as e:
            self.bench.executor.on_error("hub", e)
            self.bench.queue.add(ref, self.bench.clock.now() + retry_in)
            return False
        return True


def _phase_detail(w: Workload) -> str:
    return ": ".join(p for p in (w.reason, w.message) if p)
