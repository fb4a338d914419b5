"""One staging workload against its copy: finalizer, status back, spec forward (checked
for fit first), drift put back, a copy deleted by someone else, deletion, adoption.
Reads only the caches; writes to targets go to the target's own queue."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Callable, Hashable, Mapping, Sequence

from placer import actuate as A
from placer.actuate.compare import demand
from placer.actuate.topology import choices_of
from placer.daemon import decide as DC
from placer.daemon.events import FAILED, NORMAL, WARNING
from placer.daemon.messages import Applied, Checked, Deleted
from placer.daemon.reschedule import Reschedule
from placer.daemon.state import Pending, Remote, ann_of, origin_of
from placer.model.errors import InputError, NotFound, PlacerError
from placer.model.names import ANN_GROUP, ANN_MESSAGE, ANN_PHASE, ANN_SOURCE_GENERATION, FINALIZER, PLACED_CLUSTER
from placer.model.topology import TopologyChoice
from placer.model.workload import Phase, PlacementGroup, Workload, WorkloadRef

log = logging.getLogger("placer.daemon")

PHASE_INVALID = "Invalid"
COPY_DELETED, DRIFT_CORRECTED, EDIT_DOES_NOT_FIT = "CopyDeleted", "DriftCorrected", "EditDoesNotFit"
COMPANION_KINDS = (("v1", "ConfigMap"), ("v1", "Secret"))


class Reconcile(Reschedule):
    def reconcile(self, ref: WorkloadRef) -> None:
        if ref in self.creating:
            return                                    # its create's result brings it back
        staging = self.staged(ref)
        copies = self.copies_of(ref)
        if staging is None:
            # gone from the hub without our finalizer's consent (or never finalized): no copy survives
            for cluster, obj in copies:
                self.delete_copy(cluster, ref, "its staging object is gone")
            self.forget(ref)
            return
        meta = staging.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            self.finalize(ref, staging, copies)
            return
        workload = self.interpret_staging(ref, staging)
        if workload is None:
            return
        if len(copies) > 1:
            copies = self.dedupe(ref, staging, copies)
        if copies:
            self.sync_placed(ref, staging, workload, *copies[0])
            return
        known = self.placed.get(ref)
        where = known.cluster if known else ann_of(staging).get(PLACED_CLUSTER)
        if where and where in self.entries:
            self.copy_missing(ref, where)
            return
        self.ensure_finalizer(ref, staging)
        self.make_pending(ref)

    def make_pending(self, ref: WorkloadRef) -> None:
        if ref not in self.pending:
            now = self.clock.now()
            self.pending[ref] = Pending(now)
            if self._window_opened is None:
                self._window_opened = now

    def forget(self, ref: WorkloadRef) -> None:
        self.placed.pop(ref, None)
        self.pending.pop(ref, None)
        self.excluded.pop(ref, None)
        self._blocked_edit.pop(ref, None)

    def copies_of(self, ref: WorkloadRef) -> list[tuple[str, dict]]:
        """placer's copies of `ref` on every cluster, in clusters-file order (not those being deleted)."""
        gvk = self.gvk_of(ref)
        if gvk is None:
            return []
        want = {A.workload_label(ref), A.legacy_workload_label(ref)}
        out = []
        for cluster, cache in self.caches.items():
            obj = cache.copy(gvk, ref.namespace, ref.name)
            if obj is None or (cluster, ref) in self.deleting:
                continue
            meta = obj.get("metadata") or {}
            if (meta.get("labels") or {}).get(A.WORKLOAD) in want and ann_of(obj).get(A.ORIGIN) == origin_of(ref):
                out.append((cluster, {**obj, "apiVersion": gvk[0], "kind": gvk[1]}))
        return out

    # --- a copy that is not where the staging object says --------------------------------------

    def copy_missing(self, ref: WorkloadRef, cluster: str) -> None:
        """The caches hold no copy where one should be: ask the cluster itself (a GET on its
        queue), then act on the answer (`copy_checked`)."""
        cache = self.caches[cluster]
        if not cache.synced:
            self.queue.add(ref, self.clock.now() + 1.0)
            return
        gvk = self.gvk_of(ref)
        res = cache.kinds.get(gvk) if gvk else None
        if res is None:                       # the cluster does not serve the kind (any more)
            self.copy_checked(ref, cluster, None)
            return

        def get() -> Any:
            try:
                return self.client(cluster).get(res, ref.name, ref.namespace)
            except NotFound:
                return None
        self.submit(cluster, ("check", ref), get, lambda r: self.inbox.put(Checked(ref, cluster, r)))

    def copy_checked(self, ref: WorkloadRef, cluster: str, found: Any) -> None:
        if isinstance(found, PlacerError):
            self.api_error(cluster, found)
            self.queue.add(ref, self.clock.now() + 2.0)
            return
        if found is not None and ann_of(found).get(A.ORIGIN) == origin_of(ref):
            gvk = self.gvk_of(ref)
            if gvk:
                self.caches[cluster].copies[gvk].assume(found)       # its watch event was late
            return
        staging = self.staged(ref)
        if staging is None:
            return self.forget(ref)
        known = self.placed.pop(ref, None)
        gone = DC.on_copy_gone(cluster, ann_of(staging).get(ANN_PHASE))
        if not gone.replace:
            if ann_of(staging).get(ANN_MESSAGE, "").find("was deleted after it finished") < 0:
                self.annotate(ref, staging, {ANN_MESSAGE: f"{ann_of(staging).get(ANN_MESSAGE, '')} | "
                                                          f"{gone.reason}"[:1000]})
            return
        if known is not None or ann_of(staging).get(PLACED_CLUSTER) == cluster:
            log.info("%s: %s", ref, gone.reason)
            self.event(ref, staging, WARNING, COPY_DELETED, gone.reason)
            self.annotate(ref, staging, {PLACED_CLUSTER: None, ANN_PHASE: Phase.PENDING.value,
                                         ANN_MESSAGE: gone.reason}, finalizer=True)
        self.make_pending(ref)

    def dedupe(self, ref: WorkloadRef, staging: dict, copies: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
        """Two copies must never exist; if they do (a copy made by hand, an old split brain),
        keep the one the staging object names, else the oldest, and delete the rest."""
        named = ann_of(staging).get(PLACED_CLUSTER)
        keep = next((c for c in copies if c[0] == named), None) or \
            min(copies, key=lambda c: (c[1].get("metadata") or {}).get("creationTimestamp") or "")
        for cluster, _ in copies:
            if cluster != keep[0]:
                self.delete_copy(cluster, ref, f"duplicate of the copy on {keep[0]}")
        return [keep]

    # --- placed: status back, spec forward, drift, reschedule ------------------------------------

    def sync_placed(self, ref: WorkloadRef, staging: dict, workload: Workload, cluster: str, remote: dict) -> None:
        now = self.clock.now()
        known = self.placed.get(ref)
        if known is None or known.cluster != cluster:
            if known is None and ref not in self.pending:
                log.info("%s: adopting the copy on %s", ref, cluster)
            # the copy's age, not the moment we first saw it: a restarted daemon keeps the
            # reschedule deadline the previous one was counting towards
            self.placed[ref] = Remote(cluster, now - self.age(remote))
            self.pending.pop(ref, None)
        try:
            phase = self.interpret(remote, f"{cluster}/{ref}")
            phase_text, detail = phase.phase.value, _phase_detail(phase)
        except PlacerError as e:
            phase_text, detail = Phase.UNKNOWN.value, f"cannot read the copy's status: {e.message}"
        ann = ann_of(staging)
        message = ann.get(ANN_MESSAGE) if ann.get(PLACED_CLUSTER) == cluster else None
        if not message or not message.startswith(f"placed on {cluster}"):
            message = f"placed on {cluster}"
        blocked = self._blocked_edit.get(ref)
        message = blocked or _with_detail(message, detail)
        # status first: whoever sees the new phase annotation finds the status that explains it
        self.mirror_status(ref, staging, remote, cluster)
        staging = self.annotate(ref, self.staged(ref) or staging,
                                {PLACED_CLUSTER: cluster, ANN_PHASE: phase_text, ANN_MESSAGE: message}, finalizer=True)
        self.forward_or_correct(ref, staging, workload, cluster, remote)
        self.check_reschedule(ref, staging, workload, cluster, phase_text)

    def age(self, remote: Mapping[str, Any]) -> float:
        """Seconds since the copy was created, by its creationTimestamp (second precision,
        the cluster's clock: skew shifts it; a timestamp in the future counts as now)."""
        created = (remote.get("metadata") or {}).get("creationTimestamp")
        try:
            at = datetime.fromisoformat(str(created)).timestamp()
        except (TypeError, ValueError):
            return 0.0
        return max(0.0, self.clock.wall() - at)

    def desired(self, ref: WorkloadRef, staging: dict, workload: Workload, cluster: str, plan_id: str,
                remote: dict) -> dict:
        """The copy as placer would write it now; the topology domains it was placed with stay
        (recorded on the copy), so neither a forward nor a drift correction drops them."""
        group = PlacementGroup(self.group_key(ref, staging), (workload,))
        return self.prepare(group, cluster, plan_id, topology={workload.ref: choices_of(remote)})[-1]

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
        self._blocked_edit.pop(ref, None)
        seen = str(rmeta.get("generation") or rmeta.get("resourceVersion"))
        if self._checked.get((cluster, ref)) == seen:
            return
        desired = self.desired(ref, staging, workload, cluster, plan_id, remote)
        fields = DC.drifted(desired, remote)
        if not fields:
            self._checked[(cluster, ref)] = seen
            return
        why = f"spec.{', spec.'.join(fields)} changed on {cluster} by someone else; put back"
        self.apply_copy(ref, cluster, desired, why, NORMAL, DRIFT_CORRECTED)

    def forward(self, ref: WorkloadRef, staging: dict, workload: Workload, cluster: str, remote: dict,
                plan_id: str, generation: str) -> None:
        try:
            old = self.interpret(remote, f"{cluster}/{ref}")
        except PlacerError:
            old = None
        if old is None or demand(old) != demand(workload):
            fit = self.edit_fits(ref, workload, old, cluster)
            if not fit.fits:
                text = f"spec edit not forwarded: {fit.reason}"
                if self._blocked_edit.get(ref) != text:
                    self._blocked_edit[ref] = text
                    self.event(ref, staging, WARNING, EDIT_DOES_NOT_FIT, text)
                    self.annotate(ref, staging, {ANN_MESSAGE: text[:1000]})
                    self.condition(ref, self.staged(ref) or staging, placed=True, reason="Placed", message=text)
                self.queue.add(ref, self.clock.now() + min(self.config.retry_interval, 5.0))
                return
        self._blocked_edit.pop(ref, None)
        desired = self.desired(ref, staging, workload, cluster, plan_id, remote)
        self.apply_copy(ref, cluster, desired, f"spec change (generation {generation}) applied to the copy", None, None)

    def edit_fits(self, ref: WorkloadRef, new: Workload, old: Workload | None, cluster: str) -> DC.EditFit:
        cache = self.caches[cluster]
        mine: list[tuple[str, str]] = []
        if old is not None:
            tag = A.workload_label(old.ref)
            mine = cache.pod_keys(old.namespace, lambda labels: labels.get(A.WORKLOAD) == tag or any(
                i.has_selector and i.selects(labels) for i in old.instances))
        committed = [c for c in self.committed() if not c[0].key.endswith(f"{cluster}/{ref}")]
        return DC.edit_fits(cache.cluster(without=mine), new, committed, time_limit=self.config.time_limit)

    def apply_copy(self, ref: WorkloadRef, cluster: str, desired: dict, why: str, type_: str | None,
                   reason: str | None) -> None:
        gvk = self.gvk_of(ref)
        if gvk is None:
            return
        res = self.caches[cluster].kinds[gvk]

        def apply() -> Any:
            return self.client(cluster).apply(desired, res, ref.namespace, force=True)

        def done(result: Any) -> None:
            self.inbox.put(Applied(ref, cluster, result, why, type_, reason))
        self.submit(cluster, ("apply", ref), apply, done)

    def copy_applied(self, ref: WorkloadRef, cluster: str, result: Any, why: str, type_: str | None,
                     reason: str | None) -> None:
        if isinstance(result, PlacerError):
            self.api_error(cluster, result)
            log.warning("%s: applying to the copy on %s failed: %s", ref, cluster, result)
            self.queue.add(ref, self.clock.now() + 2.0)
            return
        gvk = self.gvk_of(ref)
        if gvk:
            self.caches[cluster].copies[gvk].assume(result)
        meta = (result or {}).get("metadata") or {}
        # what we just applied is what placer wants: no drift until the copy changes again
        # (a value the server normalises, e.g. 1000m -> 1, must not be corrected forever)
        self._checked[(cluster, ref)] = str(meta.get("generation") or meta.get("resourceVersion"))
        log.info("%s: %s on %s", ref, why, cluster)
        staging = self.staged(ref)
        if type_ and reason and staging is not None:
            self.event(ref, staging, type_, reason, why)

    # --- deletion ------------------------------------------------------------------------------

    def finalize(self, ref: WorkloadRef, staging: dict, copies: list[tuple[str, dict]]) -> None:
        meta = staging.get("metadata") or {}
        if FINALIZER not in (meta.get("finalizers") or ()):
            return
        busy = [c for c in self.caches if (c, ref) in self.deleting]
        if busy or any(self.workers.busy(("create", m)) for m in (ref,)):
            self.queue.add(ref, self.clock.now() + 0.1)
            return
        known = self.placed.get(ref)
        where = known.cluster if known else ann_of(staging).get(PLACED_CLUSTER)
        if not copies and where in self.entries and not self.caches[where].synced:
            self.queue.add(ref, self.clock.now() + 1.0)         # cannot confirm the copy is gone yet
            return
        if copies:
            for cluster, _ in copies:
                self.delete_copy(cluster, ref, "its staging object is being deleted", companions=staging)
            return                                               # the deletions bring it back here
        self.forget(ref)
        gvk = (staging["apiVersion"], staging["kind"])
        rest = [f for f in meta.get("finalizers") or () if f != FINALIZER]
        try:
            self.hub.patch(self._resources[gvk], ref.name, {"metadata": {
                "finalizers": rest or None, "resourceVersion": meta.get("resourceVersion")}}, ref.namespace)
        except NotFound:
            return
        except PlacerError as e:
            self.api_error("hub", e)
            self.queue.add(ref, self.clock.now() + 0.1)
            return
        log.info("%s: copies deleted; finalizer removed", ref)

    def delete_copy(self, cluster: str, ref: WorkloadRef, why: str, companions: dict | None = None) -> None:
        gvk = self.gvk_of(ref)
        if gvk is None:
            return
        res = self.caches[cluster].kinds[gvk]
        self.deleting[(cluster, ref)] = self.clock.now()
        group = self.group_key(ref, companions) if companions is not None else None
        last = companions is not None and not any(m != ref for m, _ in self.group_members(ref, companions))

        def delete() -> Any:
            client = self.client(cluster)
            client.delete(res, ref.name, ref.namespace, missing_ok=True)
            if last and group:
                self.delete_companions(cluster, ref.namespace, group)
            return None

        def done(result: Any) -> None:
            self.inbox.put(Deleted(ref, cluster, result, why))
        if not self.submit(cluster, ("delete", ref), delete, done):
            self.deleting.pop((cluster, ref), None)

    def copy_deleted(self, ref: WorkloadRef, cluster: str, result: Any, why: str) -> None:
        self.deleting.pop((cluster, ref), None)
        if isinstance(result, PlacerError):
            self.api_error(cluster, result)
            log.warning("%s: deleting the copy on %s failed: %s; retrying", ref, cluster, result)
        else:
            gvk = self.gvk_of(ref)
            if gvk:
                self.caches[cluster].copies[gvk].forget(ref.namespace, ref.name)
            log.info("%s: deleted the copy on %s (%s)", ref, cluster, why)
        self.queue.add(ref, self.clock.now() + (1.0 if isinstance(result, PlacerError) else 0.0))

    def delete_companions(self, cluster: str, namespace: str, group: str) -> None:
        """Companions placed with a group go when the group's last workload goes."""
        client = self.client(cluster)
        for api, kind in COMPANION_KINDS:
            try:
                res = client.resource_for(api, kind)
                items = client.list(res, namespace,
                                    label_selector=f"{A.MANAGED}=true,{A.GROUP}={A.label_value(group)}").items
                for item in items:
                    client.delete(res, item["metadata"]["name"], namespace, missing_ok=True)
            except PlacerError as e:
                self.api_error(cluster, e)

    # --- staging objects -----------------------------------------------------------------------

    # provided by the planning part
    def submit(self, cluster: str, key: Hashable, fn: Callable[[], Any], done: Callable[[Any], None]) -> bool:
        raise NotImplementedError

    def prepare(self, group: PlacementGroup, cluster: str, plan_id: str,
                topology: Mapping[WorkloadRef, Sequence[TopologyChoice]] | None = None) -> list[dict]:
        raise NotImplementedError

    def committed(self) -> list[tuple[PlacementGroup, str]]:
        raise NotImplementedError

    def interpret_staging(self, ref: WorkloadRef, staging: dict) -> Workload | None:
        """The staging object's workload; a malformed one is annotated with why, and None."""
        try:
            return self.interpret(staging, str(ref))
        except InputError as e:
            self.pending.pop(ref, None)
            message = f"invalid: {e.message}"
            log.warning("%s: %s", ref, message)
            self.event(ref, staging, WARNING, FAILED, message)
            self.annotate(ref, staging, {ANN_PHASE: PHASE_INVALID, ANN_MESSAGE: message[:1000]}, finalizer=True)
            return None

    def group_key(self, ref: WorkloadRef, staging: Mapping[str, Any]) -> str:
        # Deliberately not inputs/grouping's key (files, the bare annotation, namespace/name):
        # the daemon's groups are `namespace/annotation` (companions_of splits it back) and a
        # lone workload is its full ref, so a Job and a JobSet of one name stay apart; the key
        # is written on the copies (the group label), so changing it would orphan companions.
        group = ann_of(staging).get(ANN_GROUP)
        return f"{ref.namespace}/{group}" if group else str(ref)

    def group_members(self, ref: WorkloadRef, staging: Mapping[str, Any]) -> list[tuple[WorkloadRef, dict]]:
        group = ann_of(staging).get(ANN_GROUP)
        if not group:
            return [(ref, dict(staging))]
        out = []
        for gvk, inf in self.staging.items():
            for obj in inf.items():
                meta = obj.get("metadata") or {}
                if ann_of(obj).get(ANN_GROUP) == group and not meta.get("deletionTimestamp") and \
                        (meta.get("namespace") or "") == ref.namespace:
                    out.append((self.ref_of(gvk, meta.get("namespace") or "", meta["name"]),
                                {**obj, "apiVersion": gvk[0], "kind": gvk[1]}))
        return sorted(out, key=lambda m: m[0])


def _phase_detail(w: Workload) -> str:
    return ": ".join(p for p in (w.reason, w.message) if p)


def _with_detail(message: str, detail: str) -> str:
    base = message.split(" | ", 1)[0]
    return f"{base} | {detail}"[:1000] if detail else base
