"""What the daemon's decisions ask for, as plain frozen values (Armada's reasons as data):
the pure steps in `decide` return them, `executor.Executor` performs them. Each names the
staging workload it is about; the executor reads that object from the hub's cache when it
acts, so a value never carries a stale copy of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from placer.model.plan import Placement
from placer.model.workload import WorkloadRef


@dataclass(frozen=True)
class Create:
    """Create the group's copies on `cluster`; `messages`: what to tell each member."""

    cluster: str
    group: str
    members: tuple[WorkloadRef, ...]
    messages: Mapping[WorkloadRef, str]
    reason: str = "placed by the plan"
    placements: tuple[Placement, ...] = ()     # the plan's, per member: nodes (and chosen domains)


@dataclass(frozen=True)
class Unplace:
    """The workload stays pending: annotate it with why (one line per cluster)."""

    ref: WorkloadRef
    reason: str


@dataclass(frozen=True)
class Delete:
    """Delete the copy on `cluster`; `companions_of`: the group whose companions go with it
    (set when it is the group's last workload)."""

    cluster: str
    ref: WorkloadRef
    reason: str
    companions_of: str | None = None


@dataclass(frozen=True)
class Annotate:
    """Set (None: remove) annotations on the staging object, with our finalizer if asked."""

    ref: WorkloadRef
    values: Mapping[str, str | None]
    finalizer: bool = False


@dataclass(frozen=True)
class MirrorStatus:
    """The copy's status onto the staging object, with placer's Placed condition."""

    ref: WorkloadRef
    cluster: str
    status: Mapping[str, Any] | None


@dataclass(frozen=True)
class ForwardSpec:
    """Apply `desired` to the copy on `cluster`: a staging spec edit forwarded, or a copy
    edited on its cluster put back (`event`: the Event's type and reason to record then)."""

    ref: WorkloadRef
    cluster: str
    desired: Mapping[str, Any]
    reason: str
    event: tuple[str, str] | None = None


@dataclass(frozen=True)
class Record:
    """An Event on the staging object."""

    ref: WorkloadRef
    type_: str
    reason: str
    message: str


@dataclass(frozen=True)
class Condition:
    """placer's Placed condition on the staging object (where its status keeps conditions);
    `type_` another of placer's (`Preempted`), `placed` then its status."""

    ref: WorkloadRef
    placed: bool
    reason: str
    message: str
    type_: str = "Placed"


@dataclass(frozen=True)
class Check:
    """The caches hold no copy where one should be: ask the cluster itself."""

    ref: WorkloadRef
    cluster: str


Action = Create | Unplace | Delete | Annotate | MirrorStatus | ForwardSpec | Record | Condition | Check

__all__ = ["Action", "Annotate", "Check", "Condition", "Create", "Delete", "ForwardSpec", "MirrorStatus",
           "Record", "Unplace"]
