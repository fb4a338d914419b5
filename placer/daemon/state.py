"""What the daemon knows between rounds: its configuration and the book of decisions it
rebuilds from the clusters after a restart (where each workload is placed, what waits).
Nothing here lives only in memory that could not be read back from the hub and the targets."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from placer.daemon.leadership import LeaseTiming
from placer.daemon.metrics import Metrics
from placer.model.workload import PlacementGroup, WorkloadRef

GVK = tuple[str, str]


@dataclass(frozen=True)
class DaemonConfig:
    staging_namespace: str
    clusters: tuple[Any, ...]                 # clusters-file entries (name, context, labels, hand-off)
    hub_context: str | None = None
    batch_window: float = 0.2                 # seconds arrivals wait to be planned together
    retry_interval: float = 30.0              # unplaced workloads are retried at least this often
    resync_interval: float = 60.0             # every placed workload re-checked this often (from the caches)
    reschedule_after: float | None = None     # for every workload; else only annotated ones
    time_limit: float = 2.0                   # solver time limit per planning round
    lease_name: str = "placer-daemon"
    identity: str = ""
    lease: LeaseTiming = LeaseTiming()
    workers: int = 8                          # kept for compatibility: applies now run per cluster
    solver_workers: int = 2
    watch_retry: float = 1.0
    secrets: bool = False                     # Secrets follow their groups (hub.secrets: the RBAC must allow it)
    discovery_interval: float = 10.0          # how often the hub and targets are asked for kinds served since
    call_timeout: float | None = None         # per API call (connect, then answer); default renew_deadline / 3
    request_deadline: float | None = None     # a target silent this long is degraded; default: the call bound
    quotas: Any = None                        # the clusters file's quotas (placer.model.quota.Quotas; issue 23)
    preemption: str = "off"                   # off | within-quota | reclaim | priority (placer.solve.preemption)
    preemption_rate: int = 10                 # at most this many workloads preempted per minute, fleet-wide
    min_run_time: float = 60.0                # a copy younger than this (seconds) is never preempted
    settle_heap: bool = False                 # the process is the daemon's own: the collector tuned (daemon/heap.py)

    def __post_init__(self) -> None:
        if not self.identity:
            object.__setattr__(self, "identity", f"{socket.gethostname()}-{os.getpid()}-{id(self):x}")

    @property
    def timeout(self) -> float:
        """Every API call's bound: two of them (connect, answer) fit well inside the lease."""
        return self.call_timeout or self.lease.renew_deadline / 3

    @property
    def deadline(self) -> float:
        """The per-cluster request deadline: a target request unanswered this long marks the
        cluster degraded (docs/daemon.md#a-cluster-that-does-not-answer)."""
        return self.request_deadline if self.request_deadline is not None else self.timeout

    def deadline_problem(self) -> str | None:
        return deadline_problem(self.deadline, self.lease)


def deadline_problem(deadline: float, lease: LeaseTiming) -> str | None:
    """Why a request deadline cannot work with `lease`, if it cannot: a target write (connect,
    then answer: up to twice the deadline) must end before another daemon can hold the lease,
    however late after a renewal it starts."""
    room = (lease.duration + lease.renew_deadline) / 2 - lease.retry_period
    if not deadline > 0:
        return f"{deadline:g}: must be positive"
    if 2 * deadline > room:
        return (f"{deadline:g}s: a target write's connect and answer (twice the deadline) must end inside the "
                f"lease ({room:g}s after a renewal with this lease timing): at most {room / 2:g}s")
    return None


@dataclass
class Remote:
    """Where a staging workload's copy lives, as far as this daemon knows."""

    cluster: str
    placed_at: float                          # our clock: when placed (the copy's age after a restart)


@dataclass
class Pending:
    since: float                              # our clock: when it started waiting
    message: str = ""


@dataclass(frozen=True)
class Creating:
    """A create in flight on a cluster's queue: its demand counts as promised there."""

    cluster: str
    group: PlacementGroup
    members: tuple[WorkloadRef, ...]


class Book:
    """What the daemon has decided and not yet seen through, shared by the parts that change
    it (planner, reconciler, rescheduler, executor): where each workload is placed, what waits,
    what is excluded, and the creates and deletes in flight. Nothing else is shared."""

    def __init__(self) -> None:
        self.placed: dict[WorkloadRef, Remote] = {}
        self.pending: dict[WorkloadRef, Pending] = {}
        self.excluded: dict[WorkloadRef, set[str]] = {}
        self.why_excluded: dict[tuple[WorkloadRef, str], str] = {}   # (ref, cluster) -> what it said
        self.creating: dict[WorkloadRef, Creating] = {}
        self.spreading: dict[tuple[WorkloadRef, str], Creating] = {}    # a spread share's create, per cluster
        self.deleting: dict[tuple[str, WorkloadRef], float] = {}
        self.checked: dict[tuple[str, WorkloadRef], str] = {}     # copy version found free of drift
        self.suspects: dict[str, set[WorkloadRef]] = {}          # cluster -> creates that timed out there
        self.blocked_edit: dict[WorkloadRef, str] = {}            # why a spec edit was not forwarded
        self.window_opened: float | None = None                  # a planning window is open since
        self.retry_at: float | None = None                       # unplaced workloads retried then
        self.fleet_changed: float | None = None                  # capacity changed since

    def open_window(self, now: float) -> None:
        if self.window_opened is None:
            self.window_opened = now

    def in_flight(self, ref: WorkloadRef) -> bool:
        """A create of `ref` (or of one of its shares) is in flight."""
        return ref in self.creating or any(r == ref for r, _ in self.spreading)

    def make_pending(self, ref: WorkloadRef, now: float) -> None:
        if ref not in self.pending:
            self.pending[ref] = Pending(now)
            self.open_window(now)

    def forget(self, ref: WorkloadRef) -> None:
        self.placed.pop(ref, None)
        self.pending.pop(ref, None)
        for cluster in self.excluded.pop(ref, ()):
            self.why_excluded.pop((ref, cluster), None)
        self.blocked_edit.pop(ref, None)

    def exclude(self, ref: WorkloadRef, cluster: str, clusters: Iterable[str], why: str = "") -> bool:
        """Leave `cluster` out for `ref`; `why` (what the cluster said, or why placer withdrew
        it) is the reason given for that cluster while it stays out. True when that left
        every cluster out, and so none is (every cluster competes again)."""
        excluded = self.excluded.setdefault(ref, set())
        excluded.add(cluster)
        if why:
            self.why_excluded[(ref, cluster)] = why
        if excluded >= set(clusters):
            for c in excluded:                  # excluded everywhere: let every cluster compete again
                self.why_excluded.pop((ref, c), None)
            excluded.clear()
            return True
        return False

    def exclusions(self, refs: Iterable[WorkloadRef]) -> dict[str, str]:
        """cluster -> why, for the clusters any of `refs` is excluded from."""
        out: dict[str, str] = {}
        for ref in refs:
            for cluster in sorted(self.excluded.get(ref, ())):
                out.setdefault(cluster, self.why_excluded.get((ref, cluster)) or "excluded for it")
        return out


@dataclass(frozen=True)
class ApiErrors:
    """Counts a failed API call per cluster (the caller logs or retries)."""

    metrics: Metrics

    def __call__(self, cluster: str, e: Exception) -> None:
        self.metrics.inc("placer_api_errors_total", labels={"cluster": cluster})


def origin_of(ref: WorkloadRef) -> str:
    return f"hub/{ref.namespace}/{ref.kind}/{ref.name}"


def ann_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}
