"""Writing to the hub: annotations, label and finalizer in one merge patch per staging
object; the status mirrored from the copy (with placer's Placed condition); Events; the
finalizer given up. Every write goes through the fenced hub client, and what it returns
goes into the hub's cache at once."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from placer import actuate as A
from placer.daemon.clock import TimeSource
from placer.daemon.events import Recorder, condition_of, placed_condition, with_condition
from placer.daemon.view import StagingView
from placer.kube import KubeClient
from placer.model.errors import Conflict, PlacerError
from placer.model.names import FINALIZER, PLACED_CLUSTER
from placer.model.workload import WorkloadRef

log = logging.getLogger("placer.daemon")


def status_patch(have: Mapping[str, Any] | None, want: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The merge patch that turns status `have` into `want` (None: nothing to do); a merge
    patch only adds, so what the copy no longer reports is nulled out."""
    if want == have or (not want and not have):
        return None
    return _nulling(have or {}, want or {})


def _nulling(have: Mapping[str, Any], want: Mapping[str, Any]) -> dict[str, Any]:
    """`want`, with every key of `have` it lacks set to None, at every depth where both hold an
    object: a merge patch merges nested objects, so a Job's finished status
    (`uncountedTerminatedPods: {}`) would otherwise keep the uids it held before and be refused."""
    out: dict[str, Any] = {}
    for k, v in want.items():
        old = have.get(k)
        out[k] = _nulling(old, v) if isinstance(v, Mapping) and isinstance(old, Mapping) else v
    for k in have:
        out.setdefault(k, None)
    return out


class HubWriter:
    """The daemon's one writer to the hub, given the fenced hub client and the view whose
    cache it keeps current."""

    def __init__(self, hub: KubeClient, view: StagingView, events: Recorder, clock: TimeSource,
                 on_error: Callable[[str, Exception], None]):
        self.hub = hub
        self.view = view
        self.events = events
        self.clock = clock
        self.on_error = on_error

    def wall(self) -> datetime:
        return datetime.fromtimestamp(self.clock.wall(), timezone.utc)

    def event(self, ref: WorkloadRef, staging: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.record(staging, type_, reason, message)

    def annotate(self, ref: WorkloadRef, staging: dict, values: Mapping[str, str | None], *,
                 finalizer: bool = False) -> dict:
        """Set (None: remove) annotations and add our finalizer, in one patch. The placed
        cluster is also kept as a label, so that `kubectl get -l` finds it on the hub."""
        meta = staging.get("metadata") or {}
        have = meta.get("annotations") or {}
        changes = {k: v for k, v in values.items() if have.get(k) != v}
        labels: dict[str, str | None] = {}
        if PLACED_CLUSTER in values:
            placed = values[PLACED_CLUSTER]
            want = A.cluster_label(placed) if placed else None
            if (meta.get("labels") or {}).get(PLACED_CLUSTER) != want:
                labels[PLACED_CLUSTER] = want
        finalizers = list(meta.get("finalizers") or ())
        add_finalizer = finalizer and FINALIZER not in finalizers
        if not changes and not labels and not add_finalizer:
            return staging
        patch: dict[str, Any] = {"metadata": {}}
        if changes:
            patch["metadata"]["annotations"] = changes
        if labels:
            patch["metadata"]["labels"] = labels
        if add_finalizer:
            # a merge patch replaces the list: guard it with the version we read
            patch["metadata"]["finalizers"] = finalizers + [FINALIZER]
            patch["metadata"]["resourceVersion"] = meta.get("resourceVersion")
        gvk = (staging["apiVersion"], staging["kind"])
        res = self.view.resources[gvk]
        try:
            updated = self.hub.patch(res, ref.name, patch, ref.namespace)
        except Conflict:
            fresh = self.view.assume(gvk, self.hub.get(res, ref.name, ref.namespace))
            return self.annotate(ref, fresh, values, finalizer=finalizer)
        return self.view.assume(gvk, updated)

    def ensure_finalizer(self, ref: WorkloadRef, staging: dict) -> None:
        self.annotate(ref, staging, {}, finalizer=True)

    def write_status(self, ref: WorkloadRef, staging: dict, status: Mapping[str, Any]) -> None:
        gvk = (staging["apiVersion"], staging["kind"])
        res = self.view.resources[gvk]
        if "status" in res.subresources:
            updated = self.hub.patch_status(res, ref.name, status, ref.namespace)
        else:
            updated = self.hub.patch(res, ref.name, {"status": dict(status)}, ref.namespace)
        self.view.assume(gvk, updated)

    def condition(self, ref: WorkloadRef, staging: dict, *, placed: bool, reason: str, message: str) -> None:
        """Set the Placed condition on a staging object whose status keeps conditions."""
        have = staging.get("status")
        old = condition_of(have)
        cond = placed_condition(placed, reason, message, self.wall(), old)
        if old and all(old.get(k) == cond[k] for k in ("status", "reason", "message")):
            return
        status = with_condition(have, cond)
        if status is None:
            return
        try:
            self.write_status(ref, staging, {"conditions": status["conditions"]})
        except PlacerError as e:
            self.on_error("hub", e)

    def mirror_status(self, ref: WorkloadRef, staging: dict, remote_status: Mapping[str, Any] | None,
                      cluster: str) -> None:
        """The copy's status on the staging object, plus placer's Placed condition where it fits."""
        have = staging.get("status")
        want = remote_status
        cond = placed_condition(True, "Placed", f"placed on {cluster}", self.wall(), condition_of(have))
        want = with_condition(want, cond) or want
        patch = status_patch(have, want)
        if patch is not None:
            self.write_status(ref, staging, patch)

    def remove_finalizer(self, ref: WorkloadRef, staging: Mapping[str, Any]) -> None:
        """Give our finalizer up (guarded by the version read: someone else's may change)."""
        meta = staging.get("metadata") or {}
        gvk = (staging["apiVersion"], staging["kind"])
        rest = [f for f in meta.get("finalizers") or () if f != FINALIZER]
        self.hub.patch(self.view.resources[gvk], ref.name, {"metadata": {
            "finalizers": rest or None, "resourceVersion": meta.get("resourceVersion")}}, ref.namespace)
