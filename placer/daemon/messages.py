"""What arrives in the daemon's inbox, as typed values matched by type (`match msg:
case Created(...)`): informer threads report keys and capacity changes, the per-cluster
work queues report their jobs' results. A result is recorded even by a daemon that just
lost the lease: it only says what happened."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placer.daemon.actions import Create
from placer.model.workload import WorkloadRef


@dataclass(frozen=True)
class Touched:
    """A staging object or one of its copies changed: reconcile it."""

    ref: WorkloadRef


@dataclass(frozen=True)
class FleetChanged:
    """Nodes or pods changed somewhere (coalesced): unplaced workloads may fit now."""


@dataclass(frozen=True)
class Created:
    """A group's create on its cluster ended: (objects, AppliedRefs), a word, or the error."""

    create: Create
    result: Any


@dataclass(frozen=True)
class Checked:
    """The cluster's own answer on a copy its cache did not hold (None: not there)."""

    ref: WorkloadRef
    cluster: str
    found: Any


@dataclass(frozen=True)
class Applied:
    """A forwarded spec or a drift correction was applied to the copy (or failed)."""

    ref: WorkloadRef
    cluster: str
    result: Any
    why: str
    type_: str | None = None              # the Event to record, if any
    reason: str | None = None


@dataclass(frozen=True)
class Deleted:
    """A copy's delete ended (None, or the error)."""

    ref: WorkloadRef
    cluster: str
    result: Any
    why: str


@dataclass(frozen=True)
class Recovered:
    """A degraded cluster answers again (daemon/health.py): look there for late copies."""

    cluster: str


@dataclass(frozen=True)
class Swept:
    """The copies of `ref` found on `cluster` by placer's labels (or the error)."""

    ref: WorkloadRef
    cluster: str
    found: Any


Message = Touched | FleetChanged | Created | Checked | Applied | Deleted | Recovered | Swept

__all__ = ["Applied", "Checked", "Created", "Deleted", "FleetChanged", "Message", "Recovered", "Swept", "Touched"]
