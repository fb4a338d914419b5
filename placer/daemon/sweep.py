"""Copies that a create with no answer in time committed after all. Such a create is a
suspect on its cluster (`Book.suspects`); when the cluster answers again
(`daemon/health.py`), the daemon looks there for the workload's copy by placer's labels
and deletes it where the workload runs elsewhere meanwhile, so that no workload is left
on two clusters (its copies watch would see it too, if it still streams: this does not
rely on it). A copy of a workload placed nowhere else is the workload's copy: the
reconciler adopts it."""

from __future__ import annotations

import logging
import queue as _queue
from dataclasses import dataclass
from typing import Any, Iterable

from placer import actuate as A
from placer.daemon.actions import Delete, Record
from placer.daemon.events import LATE_COPY_DELETED, NORMAL
from placer.daemon.messages import Message, Recovered, Swept
from placer.daemon.state import ann_of, origin_of
from placer.daemon.workbench import Workbench
from placer.model.errors import PlacerError
from placer.model.workload import WorkloadRef

log = logging.getLogger("placer.daemon")


@dataclass(eq=False)
class Sweeper:
    """Given the book (its suspects), both caches, the executor and the inbox."""

    bench: Workbench
    inbox: _queue.SimpleQueue[Message]

    def suspect(self, cluster: str, refs: Iterable[WorkloadRef]) -> None:
        """A create of `refs` on `cluster` got no answer: it may have happened anyway."""
        self.bench.book.suspects.setdefault(cluster, set()).update(refs)

    def receive(self, item: Recovered | Swept) -> None:
        match item:
            case Recovered(cluster):
                self.recovered(cluster)
            case Swept(ref, cluster, found):
                self.swept(ref, cluster, found)

    def recovered(self, cluster: str) -> None:
        for ref in sorted(self.bench.book.suspects.get(cluster, ())):
            self.look(ref, cluster)

    def look(self, ref: WorkloadRef, cluster: str) -> None:
        """LIST the workload's copies on `cluster` by placer's labels, on its own queue."""
        gvk = self.bench.view.gvk_of(ref)
        res = self.bench.targets.caches[cluster].kinds.get(gvk) if gvk else None
        if res is None:                             # the kind is not served there: nothing to find
            self.bench.book.suspects.get(cluster, set()).discard(ref)
            return
        client = self.bench.targets.client(cluster)
        selector = f"{A.MANAGED}=true,{A.WORKLOAD}={A.workload_label(ref)}"

        def find() -> Any:
            return client.list(res, ref.namespace, label_selector=selector).items
        self.bench.executor.submit(cluster, ("sweep", ref), find, lambda r: self.inbox.put(Swept(ref, cluster, r)))

    def swept(self, ref: WorkloadRef, cluster: str, found: Any) -> None:
        if isinstance(found, PlacerError):          # still a suspect: looked for when it next answers
            self.bench.executor.on_error(cluster, found)
            log.warning("%s: looking for a late copy on %s failed: %s", ref, cluster, found)
            return
        self.bench.book.suspects.get(cluster, set()).discard(ref)
        mine = [o for o in found or () if ann_of(o).get(A.ORIGIN) == origin_of(ref)]
        if not mine:
            return
        book = self.bench.book
        placed, creating = book.placed.get(ref), book.creating.get(ref)
        elsewhere = next((c for c in (placed and placed.cluster, creating and creating.cluster)
                          if c and c != cluster), None)
        if elsewhere is None:                       # its only copy: the reconciler adopts it
            gvk = self.bench.view.gvk_of(ref)
            if gvk is not None:
                for obj in mine:
                    self.bench.targets.caches[cluster].copies[gvk].assume(obj)
            self.bench.queue.add(ref, self.bench.clock.now())
            return
        why = f"a create on {cluster} that got no answer in time committed this copy after all; it runs on {elsewhere}"
        log.info("%s: deleting the late copy on %s (%s)", ref, cluster, why)
        self.bench.executor.perform([Delete(cluster, ref, why),
                                     Record(ref, NORMAL, LATE_COPY_DELETED, f"deleted the copy on {cluster}: {why}")])
