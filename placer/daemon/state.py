"""What the daemon knows between rounds, declared once for its parts (hub writes,
reconcile, planning): configuration, the decisions it rebuilds from the clusters after a
restart, and the handles every part uses. Nothing here lives only in memory that could not
be read back from the hub and the targets."""

from __future__ import annotations

import os
import queue as _queue
import socket
import threading
from dataclasses import dataclass
from typing import Any, Mapping

from placer.daemon.caches import ClusterCache
from placer.daemon.clock import TimeSource
from placer.daemon.events import Recorder
from placer.daemon.execute import ClusterWorkers
from placer.daemon.informer import Informer, WorkQueue
from placer.daemon.leadership import LeaderElector, LeaseTiming
from placer.daemon.metrics import Metrics
from placer.definitions.catalog import Catalog
from placer.definitions.interpret import Interpreter
from placer.kube import Kube, KubeClient, Resource
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
    call_timeout: float | None = None         # per API call (connect, then answer); default renew_deadline / 3

    def __post_init__(self) -> None:
        if not self.identity:
            object.__setattr__(self, "identity", f"{socket.gethostname()}-{os.getpid()}-{id(self):x}")

    @property
    def timeout(self) -> float:
        """Every API call's bound: two of them (connect, answer) fit well inside the lease."""
        return self.call_timeout or self.lease.renew_deadline / 3


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


class DaemonState:
    """Attributes shared by the daemon's parts (set in `Daemon.__init__`)."""

    config: DaemonConfig
    kube: Kube
    catalog: Catalog
    interpret: Interpreter
    clock: TimeSource
    metrics: Metrics
    entries: dict[str, Any]
    leader: LeaderElector
    hub: KubeClient
    events: Recorder
    queue: WorkQueue
    inbox: _queue.SimpleQueue
    workers: ClusterWorkers
    caches: dict[str, ClusterCache]
    staging: dict[GVK, Informer]               # (apiVersion, kind) -> hub informer
    companions: dict[GVK, Informer]
    classes: list[Informer]
    _resources: dict[GVK, Resource]
    _gvk: dict[tuple[str, str], GVK]           # (group, kind) -> (apiVersion, kind)
    _clients: dict[str, KubeClient]
    _resynced: set[str]
    _stop: threading.Event
    _wake: threading.Event
    placed: dict[WorkloadRef, Remote]
    pending: dict[WorkloadRef, Pending]
    excluded: dict[WorkloadRef, set[str]]
    creating: dict[WorkloadRef, Creating]
    deleting: dict[tuple[str, WorkloadRef], float]
    _checked: dict[tuple[str, WorkloadRef], str]
    _blocked_edit: dict[WorkloadRef, str]
    _window_opened: float | None
    _retry_at: float | None
    _fleet_changed: float | None

    # --- lookups every part uses ---------------------------------------------------------

    def gvk_of(self, ref: WorkloadRef) -> GVK | None:
        return self._gvk.get((ref.group, ref.kind))

    def ref_of(self, gvk: GVK, namespace: str, name: str) -> WorkloadRef:
        return WorkloadRef.of({"apiVersion": gvk[0], "kind": gvk[1], "metadata": {"namespace": namespace,
                                                                                   "name": name}})

    def staged(self, ref: WorkloadRef) -> dict | None:
        """The staging object as the hub's cache holds it (with apiVersion and kind)."""
        gvk = self.gvk_of(ref)
        inf = self.staging.get(gvk) if gvk else None
        obj = inf.get(ref.namespace, ref.name) if inf else None
        if obj is not None and gvk:
            obj = {**obj, "apiVersion": gvk[0], "kind": gvk[1]}
        return obj

    def client(self, cluster: str) -> KubeClient:
        return self._clients[cluster]

    def api_error(self, cluster: str, e: Exception) -> None:
        self.metrics.inc("placer_api_errors_total", labels={"cluster": cluster})


def origin_of(ref: WorkloadRef) -> str:
    return f"hub/{ref.namespace}/{ref.kind}/{ref.name}"


def ann_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}
