"""Rescheduling: a placed workload whose pods are not all running after a delay (the
daemon's `--reschedule-after`, or `placer.dev/reschedule: "true"`) is withdrawn from its
cluster (its whole group) and planned again, with that cluster excluded. The running pods
are counted from the pod cache, never by listing."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping

from placer.daemon.events import RESCHEDULED, WARNING
from placer.daemon.staging import HubWrites
from placer.daemon.state import Pending, ann_of
from placer.model.names import ANN_MESSAGE, ANN_PHASE, ANN_RESCHEDULE, PLACED_CLUSTER
from placer.model.workload import Phase, Workload, WorkloadRef

log = logging.getLogger("placer.daemon")

DEFAULT_RESCHEDULE_AFTER = 600.0
_SETTLED = (Phase.RUNNING.value, Phase.COMPLETED.value, Phase.FAILED.value)


def reschedule_after(staging: Mapping[str, Any], default: float | None) -> float | None:
    """The delay for this workload: its annotation ("false" never, "true" the daemon's or
    10 minutes), else the daemon's."""
    flag = str(ann_of(staging).get(ANN_RESCHEDULE, "")).strip().lower()
    if flag == "false":
        return None
    if flag == "true":
        return default or DEFAULT_RESCHEDULE_AFTER
    return default


@dataclass(frozen=True)
class Verdict:
    withdraw: bool
    recheck_at: float | None = None          # when to look again
    why: str = ""


def judge(phase: str, placed_at: float, now: float, after: float | None, running: int, pods: int) -> Verdict:
    """Pure: whether a placed workload has waited too long for its pods."""
    if after is None or phase in _SETTLED:
        return Verdict(False)
    if now - placed_at < after:
        return Verdict(False, placed_at + after)
    if running >= pods:
        return Verdict(False)
    return Verdict(True, None, f"{pods - running} of {pods} pods not running after {after:.0f}s")


class Reschedule(HubWrites):
    def check_reschedule(self, ref: WorkloadRef, staging: dict, workload: Workload, cluster: str,
                         phase: str) -> None:
        after = reschedule_after(staging, self.config.reschedule_after)
        placed = self.placed.get(ref)
        if placed is None or after is None:
            return
        now = self.clock.now()
        running = self.caches[cluster].running(workload) if now - placed.placed_at >= after else 0
        v = judge(phase, placed.placed_at, now, after, running, workload.pods)
        if v.recheck_at is not None:
            self.queue.add(ref, v.recheck_at)
        if v.withdraw:
            self.withdraw(ref, staging, cluster, v.why)

    def withdraw(self, ref: WorkloadRef, staging: dict, cluster: str, why: str) -> None:
        """Take a stuck group off its cluster and plan it again elsewhere."""
        for member, obj in self.group_members(ref, staging):
            for c, _ in self.copies_of(member):
                if c == cluster:
                    self.delete_copy(c, member, f"rescheduling: {why}")
            self.placed.pop(member, None)
            self.exclude(member, cluster)
            message = f"withdrawn from {cluster}: {why}; placing elsewhere"
            self.event(member, obj, WARNING, RESCHEDULED, message)
            self.annotate(member, obj, {PLACED_CLUSTER: None, ANN_PHASE: Phase.PENDING.value, ANN_MESSAGE: message})
            self.pending[member] = Pending(self.clock.now())
            self.metrics.inc("placer_withdrawals_total")
            log.info("%s: %s", member, message)
        if self._window_opened is None:
            self._window_opened = self.clock.now()

    def exclude(self, ref: WorkloadRef, cluster: str) -> None:
        excluded = self.excluded.setdefault(ref, set())
        excluded.add(cluster)
        if excluded >= set(self.entries):
            excluded.clear()                    # excluded everywhere: let every cluster compete again

    # provided by the reconcile part
    def group_members(self, ref: WorkloadRef, staging: Mapping[str, Any]) -> list[tuple[WorkloadRef, dict]]:
        raise NotImplementedError

    def copies_of(self, ref: WorkloadRef) -> list[tuple[str, dict]]:
        raise NotImplementedError

    def delete_copy(self, cluster: str, ref: WorkloadRef, why: str, companions: dict | None = None) -> None:
        raise NotImplementedError
