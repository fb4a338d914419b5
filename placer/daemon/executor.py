"""Acting on the decisions: each action (`placer.daemon.actions`) performed, hub writes at
once through `staging.HubWriter`, target writes queued on the target's own worker
(`execute.ClusterWorkers`) with their results coming back through the inbox, where the
executor records them (`deleted`, `applied`). Creates have their own part (`creates`)."""

from __future__ import annotations

import logging
import queue as _queue
from typing import Any, Callable, Hashable, Iterable

from placer import actuate as A
from placer.daemon import decide as DC
from placer.daemon.actions import Action, Annotate, Check, Condition, Delete, ForwardSpec, MirrorStatus, Record, Unplace
from placer.daemon.clock import TimeSource
from placer.daemon.execute import ClusterWorkers
from placer.daemon.informer import WorkQueue
from placer.daemon.messages import Applied, Checked, Deleted, Message
from placer.daemon.overlap import Overlap
from placer.daemon.staging import HubWriter
from placer.daemon.state import Book
from placer.daemon.targets import Targets
from placer.daemon.view import StagingView
from placer.model.errors import NotFound, PlacerError
from placer.model.workload import WorkloadRef

log = logging.getLogger("placer.daemon")

COMPANION_KINDS = (("v1", "ConfigMap"), ("v1", "Secret"))


class Executor:
    """Performs actions; given the hub writer, the caches (to read what it writes against and
    to assume what it wrote), the book (deletes in flight, pending messages) and the queues."""

    def __init__(self, writer: HubWriter, view: StagingView, targets: Targets, book: Book, workers: ClusterWorkers,
                 inbox: _queue.SimpleQueue[Message], queue: WorkQueue, clock: TimeSource,
                 on_error: Callable[[str, Exception], None], overlap: Overlap | None = None):
        self.writer = writer
        self.view = view
        self.targets = targets
        self.book = book
        self.workers = workers
        self.inbox = inbox
        self.queue = queue
        self.clock = clock
        self.on_error = on_error
        self.overlap = overlap or Overlap(workers=0)      # none given: every write at once

    def perform(self, actions: Iterable[Action]) -> None:
        for action in actions:
            self.do(action)

    def do(self, action: Action) -> None:
        match action:
            case Unplace(ref, reason):
                self.unplace(ref, reason)
            case Delete():
                self.delete(action)
            case ForwardSpec():
                self.forward(action)
            case Check(ref, cluster):
                self.check(ref, cluster)
            case _:
                self.write(action)

    def write(self, action: Action) -> None:
        """A write to the staging object, as the hub's cache holds it now (gone: nothing to do,
        its deletion is reconciled next)."""
        staging = self.view.staged(action.ref)  # type: ignore[union-attr]
        if staging is None:
            return
        match action:
            case Annotate(ref, values, finalizer):
                self.writer.annotate(ref, staging, values, finalizer=finalizer)
            case MirrorStatus(ref, cluster, status):
                self.writer.mirror_status(ref, staging, status, cluster)
            case Record(ref, type_, reason, message):
                self.writer.event(ref, staging, type_, reason, message)
            case Condition(ref, placed, reason, message, "Placed"):
                self.writer.condition(ref, staging, placed=placed, reason=reason, message=message)
            case Condition(ref, placed, reason, message, type_):
                self.writer.condition(ref, staging, placed=placed, reason=reason, message=message, type_=type_)

    def later(self, action: Annotate | Record, failed: Callable[[PlacerError], None]) -> None:
        """A write to the staging object, beside other workloads' in an open pass (`overlap`);
        the staging object read when the write is made, after the workload's earlier ones."""
        self.overlap.run(action.ref, lambda: self.write(action), failed=failed)

    def hub(self, ref: WorkloadRef, fn: Callable[[], Any], *, then: Callable[[Any], None],
            failed: Callable[[PlacerError], None]) -> None:
        """Any hub write for `ref` in the open pass; `then` and `failed` run on this thread."""
        self.overlap.run(ref, fn, then=then, failed=failed)

    def unplace(self, ref: WorkloadRef, message: str) -> None:
        p = self.book.pending.get(ref)
        if p is None:
            return
        p.message = message
        event, condition, annotate = DC.unplaced(ref, message)
        self.perform((event, condition))
        try:
            self.write(annotate)
        except PlacerError as e:
            self.on_error("hub", e)

    def submit(self, cluster: str, key: Hashable, fn: Callable[[], Any], done: Callable[[Any], None]) -> bool:
        """Queue a job on the cluster's worker; when one for the same key is already there,
        look at the workload again shortly."""
        if self.workers.submit(cluster, key, fn, done):
            return True
        ref = key[1] if isinstance(key, tuple) and isinstance(key[1], WorkloadRef) else None
        if ref is not None:
            self.queue.add(ref, self.clock.now() + 0.1)
        return False

    # --- on a target's queue -------------------------------------------------------------------

    def check(self, ref: WorkloadRef, cluster: str) -> None:
        """A GET on the cluster's queue; the answer comes back as `Checked`."""
        gvk = self.view.gvk_of(ref)
        res = self.targets.caches[cluster].kinds.get(gvk) if gvk else None
        if res is None:                       # the caller answers that itself
            return
        client = self.targets.client(cluster)

        def get() -> Any:
            try:
                return client.get(res, ref.name, ref.namespace)
            except NotFound:
                return None
        self.submit(cluster, ("check", ref), get, lambda r: self.inbox.put(Checked(ref, cluster, r)))

    def forward(self, a: ForwardSpec) -> None:
        gvk = self.view.gvk_of(a.ref)
        if gvk is None:
            return
        res = self.targets.caches[a.cluster].kinds[gvk]
        client = self.targets.client(a.cluster)
        type_, reason = a.event or (None, None)

        def apply() -> Any:
            return client.apply(dict(a.desired), res, a.ref.namespace, force=True)

        def done(result: Any) -> None:
            self.inbox.put(Applied(a.ref, a.cluster, result, a.reason, type_, reason))
        self.submit(a.cluster, ("apply", a.ref), apply, done)

    def applied(self, ref: WorkloadRef, cluster: str, result: Any, why: str, type_: str | None,
                reason: str | None) -> None:
        if isinstance(result, PlacerError):
            self.on_error(cluster, result)
            log.warning("%s: applying to the copy on %s failed: %s", ref, cluster, result)
            self.queue.add(ref, self.clock.now() + 2.0)
            return
        gvk = self.view.gvk_of(ref)
        if gvk:
            self.targets.caches[cluster].copies[gvk].assume(result)
        meta = (result or {}).get("metadata") or {}
        # what we just applied is what placer wants: no drift until the copy changes again
        # (a value the server normalises, e.g. 1000m -> 1, must not be corrected forever)
        self.book.checked[(cluster, ref)] = str(meta.get("generation") or meta.get("resourceVersion"))
        log.info("%s: %s on %s", ref, why, cluster)
        if type_ and reason:
            self.write(Record(ref, type_, reason, why))

    def delete(self, a: Delete) -> None:
        cluster, ref = a.cluster, a.ref
        gvk = self.view.gvk_of(ref)
        if gvk is None:
            return
        res = self.targets.caches[cluster].kinds[gvk]
        self.book.deleting[(cluster, ref)] = self.clock.now()
        client = self.targets.client(cluster)

        def delete() -> Any:
            client.delete(res, ref.name, ref.namespace, missing_ok=True)
            if a.companions_of:
                self.delete_companions(cluster, ref.namespace, a.companions_of)
            return None

        def done(result: Any) -> None:
            self.inbox.put(Deleted(ref, cluster, result, a.reason))
        if not self.submit(cluster, ("delete", ref), delete, done):
            self.book.deleting.pop((cluster, ref), None)

    def deleted(self, ref: WorkloadRef, cluster: str, result: Any, why: str) -> None:
        self.book.deleting.pop((cluster, ref), None)
        if isinstance(result, PlacerError):
            self.on_error(cluster, result)
            log.warning("%s: deleting the copy on %s failed: %s; retrying", ref, cluster, result)
        else:
            gvk = self.view.gvk_of(ref)
            if gvk:
                self.targets.caches[cluster].copies[gvk].forget(ref.namespace, ref.name)
            log.info("%s: deleted the copy on %s (%s)", ref, cluster, why)
        self.queue.add(ref, self.clock.now() + (1.0 if isinstance(result, PlacerError) else 0.0))

    def delete_companions(self, cluster: str, namespace: str, group: str) -> None:
        """Companions placed with a group go when the group's last workload goes."""
        client = self.targets.client(cluster)
        for api, kind in COMPANION_KINDS:
            try:
                res = client.resource_for(api, kind)
                items = client.list(res, namespace,
                                    label_selector=f"{A.MANAGED}=true,{A.GROUP}={A.label_value(group)}").items
                for item in items:
                    client.delete(res, item["metadata"]["name"], namespace, missing_ok=True)
            except PlacerError as e:
                self.on_error(cluster, e)
