"""Rescheduling: a placed workload whose pods are not all running after a delay (the
daemon's `--reschedule-after`, or `placer.dev/reschedule: "true"`) is withdrawn from its
cluster (its whole group) and planned again, with that cluster excluded. The running pods
are counted from the pod cache, never by listing."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping

from placer.daemon import decide as DC
from placer.daemon.metrics import Metrics
from placer.daemon.state import Pending, ann_of
from placer.daemon.workbench import Workbench
from placer.model.names import ANN_RESCHEDULE
from placer.model.words import plural
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
    return Verdict(True, None, f"{pods - running} of {plural(pods, 'pod')} not running after {after:.0f}s")


@dataclass(eq=False)
class Rescheduler:
    """Watches placed workloads' pods (from the pod caches) and withdraws the stuck ones."""

    bench: Workbench
    default_after: float | None
    clusters: tuple[str, ...]
    metrics: Metrics

    def check(self, ref: WorkloadRef, staging: dict, workload: Workload, cluster: str, phase: str) -> None:
        after = reschedule_after(staging, self.default_after)
        placed = self.bench.book.placed.get(ref)
        if placed is None or after is None:
            return
        now = self.bench.clock.now()
        running = self.bench.targets.caches[cluster].running(workload) if now - placed.placed_at >= after else 0
        v = judge(phase, placed.placed_at, now, after, running, workload.pods)
        if v.recheck_at is not None:
            self.bench.queue.add(ref, v.recheck_at)
        if v.withdraw:
            self.withdraw(ref, staging, cluster, v.why)

    def withdraw(self, ref: WorkloadRef, staging: dict, cluster: str, why: str) -> None:
        """Take a stuck group off its cluster and plan it again elsewhere."""
        for member, _ in self.bench.view.group_members(ref, staging):
            actions = DC.withdrawal(member, cluster, why, [c for c, _ in self.bench.targets.copies_of(member)])
            self.bench.book.placed.pop(member, None)
            self.bench.book.exclude(member, cluster, self.clusters, f"withdrawn: {why}")
            self.bench.executor.perform(actions)
            self.bench.book.pending[member] = Pending(self.bench.clock.now())
            self.metrics.inc("placer_withdrawals_total")
            log.info("%s: withdrawn from %s: %s; placing elsewhere", member, cluster, why)
        self.bench.book.open_window(self.bench.clock.now())
