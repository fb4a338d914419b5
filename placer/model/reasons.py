"""Why a workload does not fit a cluster: every reason, as data, in one place.

The solver attaches one of these per (unplaced group, cluster); `render()` gives the
plain-words form with numbers shown by `placer plan`, `code` a stable identifier for
machines. Add a reason here, never as an ad-hoc string elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from placer.model.quantity import format_quantity

GPU_WORDS = {"nvidia.com/gpu": "GPU", "amd.com/gpu": "AMD GPU"}


def amount(resource: str, value: int) -> str:
    """`4 GPUs`, `1 GPU`, `32 CPU`, `64Gi memory`, `3 pod slots`."""
    if resource in GPU_WORDS:
        word = GPU_WORDS[resource]
        return f"{value} {word}" + ("" if value == 1 else "s")
    if resource == "cpu":
        return f"{format_quantity('cpu', value)} CPU"
    if resource == "pods":
        return f"{value} pod slot" + ("" if value == 1 else "s")
    return f"{format_quantity(resource, value)} {resource}"


def _pods(n: int) -> str:
    return f"{n} pod" + ("" if n == 1 else "s")


def _where(match: str) -> str:
    return f" on nodes matching {match}" if match else ""


def _of(workload: str, instance: str) -> str:
    """An instance, with its workload when the group has several."""
    return f"{workload} {instance}" if workload else instance


class Reason:
    # the stable identifier machines read (`reasonCodes` in JSON): the class's name
    code: ClassVar[str] = "reason"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.code = cls.__name__

    def render(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def __str__(self) -> str:
        return self.render()


@dataclass(frozen=True)
class Unreachable(Reason):
    error: str

    def render(self) -> str:
        # the inventory's own wording may already say "unreachable (...)"
        return self.error if self.error.startswith("unreachable") else f"unreachable ({self.error})"


@dataclass(frozen=True)
class PinnedElsewhere(Reason):
    pinned_to: str

    def render(self) -> str:
        return f"pinned to {self.pinned_to} by placer.dev/cluster"


@dataclass(frozen=True)
class UnknownPin(Reason):
    pinned_to: str

    def render(self) -> str:
        return f"pinned to {self.pinned_to} by placer.dev/cluster, which is not in the fleet"


@dataclass(frozen=True)
class ConflictingPins(Reason):
    pins: tuple[tuple[str, str], ...]           # (workload, cluster)

    def render(self) -> str:
        listed = ", ".join(f"{w} -> {c}" for w, c in self.pins)
        return f"its workloads are pinned to different clusters ({listed})"


@dataclass(frozen=True)
class ExcludedBySelector(Reason):
    selector: str

    def render(self) -> str:
        return f"excluded by cluster-selector {self.selector}"


@dataclass(frozen=True)
class Excluded(Reason):
    """Placer keeps the group off the cluster: it was withdrawn from it, or the cluster refused it."""

    code = "Excluded"

    def render(self) -> str:
        return "excluded by placer: the group was withdrawn from this cluster or refused by it"


@dataclass(frozen=True)
class NoSchedulableNodes(Reason):

    def render(self) -> str:
        return "has no schedulable nodes"


@dataclass(frozen=True)
class NoMatchingNodes(Reason):
    """No schedulable node passes the pods' selector/affinity/taint predicates."""

    instance: str
    constraint: str          # nodeSelector | affinity | taint
    detail: str              # e.g. `gpu=h100`, or the untolerated taint
    workload: str = ""       # set when the group has several workloads
    # only among the nodes with room for one pod (the nodes it may use have none)
    among_roomy: bool = False

    def render(self) -> str:
        who = _of(self.workload, self.instance)
        if self.constraint == "taint":
            where = "the nodes with room for one" if self.among_roomy else "the nodes they select"
            return f"pods of {who} do not tolerate taint {self.detail} on {where}"
        what = "nodeSelector" if self.constraint == "nodeSelector" else "required node affinity"
        node = "node with room for one of its pods" if self.among_roomy else "schedulable node"
        return f"no {node} matches the {what} of {who} ({self.detail})"


@dataclass(frozen=True)
class UnknownRuntimeClass(Reason):
    """The pods name a RuntimeClass the cluster does not have, or whose scheduling
    nodeSelector contradicts theirs: its API server refuses them."""

    instance: str
    runtime_class: str
    conflict: str = ""        # the nodeSelector key both set, differently

    def render(self) -> str:
        if self.conflict:
            return (f"pods of {self.instance} set nodeSelector {self.conflict} differently from their "
                    f"RuntimeClass {self.runtime_class}")
        return f"pods of {self.instance} use RuntimeClass {self.runtime_class}, which the cluster does not have"


@dataclass(frozen=True)
class UnboundClaim(Reason):
    """A PersistentVolumeClaim of the workload (a volumeClaimTemplate, or a claim its pods
    mount) cannot bind on the cluster: it names no StorageClass and the cluster has no
    default one, or it names one the cluster does not have. Its pods would stay Pending."""

    claim: str
    storage_class: str | None         # None: the claim names none
    workload: str = ""

    def render(self) -> str:
        of = f" of {self.workload}" if self.workload else ""
        if self.storage_class is None:
            return (f"claim {self.claim}{of} names no StorageClass and the cluster has no default "
                    f"StorageClass: its pods would stay Pending")
        return (f"claim {self.claim}{of} asks for StorageClass {self.storage_class}, which the cluster "
                f"does not have: its pods would stay Pending")


@dataclass(frozen=True)
class DoesNotServe(Reason):
    """The cluster's API server does not serve the workload's kind (its CRD is not installed):
    it would refuse the object."""

    kind: str
    api_version: str

    def render(self) -> str:
        return f"does not serve {self.kind} ({self.api_version}); install its operator there"


@dataclass(frozen=True)
class MissingPriorityClass(Reason):
    """Pods name a PriorityClass the cluster does not have and the submission does not
    bring: the API server would refuse every pod."""

    name: str
    workload: str

    def render(self) -> str:
        return (f"has no PriorityClass {self.name} (pods of {self.workload} name it); create it there, "
                f"or submit it with the workload")


@dataclass(frozen=True)
class PodTooLarge(Reason):
    """A single pod exceeds what any matching node has even when empty."""

    instance: str
    resource: str
    per_pod: int
    largest: int
    match: str
    workload: str = ""

    def render(self) -> str:
        matching = f" matching {self.match}" if self.match else ""
        return (f"a pod of {_of(self.workload, self.instance)} needs {amount(self.resource, self.per_pod)}; "
                f"the largest node{matching} has {amount(self.resource, self.largest)} allocatable")


@dataclass(frozen=True)
class InsufficientCapacity(Reason):
    """The pods of one instance cannot all find room among the free capacity."""

    pods: int
    resource: str
    per_pod: int
    match: str
    largest_free: int
    total_free: int

    def render(self) -> str:
        block = "largest free block is" if self.resource in GPU_WORDS else "most free on one node is"
        return (f"needs {_pods(self.pods)} x {amount(self.resource, self.per_pod)}{_where(self.match)}; "
                f"{block} {amount(self.resource, self.largest_free)} "
                f"({amount(self.resource, self.total_free)} free)")


def _word(resource: str) -> str:
    """`GPUs`, `CPU`, `memory`, `pod slots`, or the resource's name."""
    if resource in GPU_WORDS:
        return GPU_WORDS[resource] + "s"
    return {"cpu": "CPU", "pods": "pod slots"}.get(resource, resource)


@dataclass(frozen=True)
class RoomForFewer(Reason):
    """The pods of one instance: the nodes they may use hold only `room` of its `pods` at
    once (every request of a pod on one node), and what binds. `resource` is the pod's first
    request (GPUs first): `holders` nodes have at least `per_pod` of it free (`free` in all).
    By `limit` alone those nodes hold `limit_room` such pods (`limit_free` of it free on them,
    `limit_per_pod` a pod), the least of any request's. `short`: when that is more than
    `room`, per other request the number of those nodes where it alone allows fewer pods
    than `limit` does (no single request binds: each binds on some nodes)."""

    instance: str
    pods: int
    room: int
    resource: str
    per_pod: int
    holders: int
    free: int
    limit: str
    limit_room: int
    limit_free: int
    limit_per_pod: int = 1
    match: str = ""
    workload: str = ""
    short: tuple[tuple[str, int], ...] = ()

    def render(self) -> str:
        need = f"needs {_pods(self.pods)} x {amount(self.resource, self.per_pod)}{_where(self.match)}"
        with_it = f">= {amount(self.resource, self.per_pod)} free"
        such = f"{self.limit_room} such pod" + ("" if self.limit_room == 1 else "s")
        if self.limit == self.resource:
            nodes = f"{self.holders} node" + ("" if self.holders == 1 else "s")
            why = f"nodes with {with_it} hold {such} ({nodes}; {amount(self.resource, self.free)} free)"
        else:
            each = "" if self.limit == "pods" else f" ({amount(self.limit, self.limit_per_pod)} a pod)"
            nodes = "the 1 node" if self.holders == 1 else f"the {self.holders} nodes"
            why = (f"by {_word(self.limit)}{each} {nodes} with {with_it} hold{'s' if self.holders == 1 else ''} "
                   f"{such} ({amount(self.limit, self.limit_free)} free there)")
        if self.short:
            cut = ", ".join(f"{_word(r)} short on {n} of those nodes" for r, n in self.short)
            why += f"; {self.room} with every request counted ({cut})"
        return f"{need}; room for {self.room} of {_pods(self.pods)}: {why}"


@dataclass(frozen=True)
class DoesNotFitTogether(Reason):
    """Each part fits on its own but not all pods of the group at once."""

    pods: int
    fitting: int
    gpus: int
    free_gpus: int

    def render(self) -> str:
        return (f"needs {_pods(self.pods)} ({amount('nvidia.com/gpu', self.gpus)}) at once; only "
                f"{self.fitting} fit together ({amount('nvidia.com/gpu', self.free_gpus)} free)")


@dataclass(frozen=True)
class CapacityTaken(Reason):
    """It would fit on the cluster as it is; the plan gave the room to others: to
    higher-priority workloads (without which it would not fit), or else to workloads of its
    own or lower priority. `by` names workloads."""

    by: tuple[str, ...]
    higher_priority: bool
    # per workload of `by`, its placement group when that holds several workloads ("" if not)
    groups: tuple[str, ...] = ()

    def render(self) -> str:
        named = [f"{w} (group {g})" if g else w for w, g in zip(self.by, self.groups or ("",) * len(self.by))]
        names = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
        if self.higher_priority:
            return f"fits alone, but its capacity went to higher-priority {names}"
        if not self.by:
            return "fits alone, but the solver found no room for it next to the rest of the plan"
        return f"fits alone, but its capacity went to {names} (more GPUs placed overall)"


@dataclass(frozen=True)
class PreferenceTaken(Reason):
    """A placed workload's better-ranked cluster (issue 21; `cheaper`: one of the same rank that
    costs less) would take it as it is; the plan gave that room to workloads of its own or lower
    priority, because moving it there does not fill more preferred clusters overall (nor, for a
    cheaper one, cost less): each move would push others down their own order or off."""

    by: tuple[str, ...]
    groups: tuple[str, ...] = ()
    cheaper: bool = False

    def render(self) -> str:
        named = [f"{w} (group {g})" if g else w for w, g in zip(self.by, self.groups or ("",) * len(self.by))]
        names = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
        why = "the plan costs least this way" if self.cheaper else \
            "the plan fills the clusters each workload ranks first the most this way"
        return f"fits alone, but its capacity went to {names} ({why})"


@dataclass(frozen=True)
class Unexplained(Reason):
    """The time limit ended before this cluster's reason was worked out (no claim made)."""


    def render(self) -> str:
        return "not explained: the time limit ended first (placer plan --time-limit)"


# --- spread (issue 21) -----------------------------------------------------------------------

@dataclass(frozen=True)
class SpreadShort(Reason):
    """`placer.dev/spread: divide`: this cluster holds `room` whole units at node level (as it
    is, alone); the shares the clusters could hold under the policy fall short of `need`."""

    unit: str
    room: int
    need: int
    total: int
    policy: str = ""

    def render(self) -> str:
        policy = f" under {self.policy}" if self.policy else ""
        return (f"divide: room for {self.room} of {self.total} {self.unit}s here at node level; the shares "
                f"the clusters could hold{policy} come to fewer than {self.need}")


@dataclass(frozen=True)
class ShareShort(Reason):
    """`placer.dev/spread: divide` placed in part (`spread-min-replicas`): this cluster's share
    against the whole units its nodes hold of the workload alone (`room`, as they are), and what
    kept the share below that room (`limit`: the policy, or other workloads of the plan)."""

    unit: str
    share: int
    room: int
    limit: str = ""

    def render(self) -> str:
        if self.room <= self.share:
            return f"divide: its share of {self.share} {self.unit}s is all its nodes hold of it at node level"
        return (f"divide: room for {self.room} {self.unit}s here at node level alone; its share stays at "
                f"{self.share}: {self.limit or 'the rest of that room goes to other workloads of the plan'}")


@dataclass(frozen=True)
class DuplicateShort(Reason):
    """`placer.dev/spread: duplicate`: a copy fits here, but fewer than `need` clusters take one."""

    need: int
    able: int

    def render(self) -> str:
        return (f"duplicate: a copy fits here, but only {self.able} of the {self.need} clusters it needs "
                "could take one (all copies or none)")


# --- topology (issue 14) ---------------------------------------------------------------------

def _request(required: bool) -> str:
    return "requires" if required else "prefers"


@dataclass(frozen=True)
class TopologyKeyMissing(Reason):
    """A gang asks for a topology level the cluster does not have: not among its topology
    levels and on none of its nodes. A preferred level excludes the cluster too."""

    key: str
    required: bool
    gang: str
    workload: str = ""       # set when the group has several workloads

    def render(self) -> str:
        who = f"{self.workload} gang {self.gang}" if self.workload else f"gang {self.gang}"
        return (f"{who} {_request(self.required)} topology level {self.key}, which the cluster does not have "
                f"(not in its topology, on none of its nodes)")


@dataclass(frozen=True)
class TopologyDomainTooSmall(Reason):
    """A required gang fits in no single domain of its level. The numbers are for its
    biggest pods alone: how many fit in the roomiest domain and in the whole cluster."""

    key: str
    pods: int                # pods the request covers
    single: int              # = pods when they are all one kind, else 0
    resource: str
    per_pod: int             # of `resource`, for the biggest pod kind
    largest: int             # such pods that fit in the roomiest domain
    total: int               # such pods that fit on the whole cluster
    cluster: str
    gpus: int = 0

    def render(self) -> str:
        if self.single:
            need = f"needs {_pods(self.pods)} x {amount(self.resource, self.per_pod)} inside one {self.key}"
            such = "such pods"
        else:
            need = (f"needs {_pods(self.pods)} ({amount('nvidia.com/gpu', self.gpus)}) inside one {self.key}")
            such = f"of its pods of {amount(self.resource, self.per_pod)}"
        return (f"{need}; the largest free {self.key} has room for {self.largest} {such} "
                f"({self.cluster} has room for {self.total} in all)")


@dataclass(frozen=True)
class TopologyDoesNotFit(Reason):
    """All the group's pods fit the cluster at once, but not with each required gang inside
    one domain of its level."""

    keys: tuple[str, ...]
    pods: int

    def render(self) -> str:
        return (f"its {_pods(self.pods)} fit the cluster, but no choice of one "
                f"{' / '.join(self.keys)} per gang holds them all at once")


@dataclass(frozen=True)
class OverQuota(Reason):
    """Its fleet-wide quota (issue 23) has no room for it: the quota `uses` this much of
    `resource` against its `nominal` amount and may borrow `may_borrow` more, its cohort
    leaving `cohort_unused` (unused nominal amounts plus what is left of the pool); the
    group needs `needs`."""

    quota: str
    resource: str
    uses: int
    nominal: int
    may_borrow: int
    cohort: str | None
    cohort_unused: int
    needs: int
    left: int = 0              # what it may still add, all limits together (below `needs`)

    def render(self) -> str:
        what = _word(self.resource)
        where = (f"cohort {self.cohort} has {self._n(self.cohort_unused)} unused" if self.cohort
                 else "no cohort to borrow from")
        lent = (f"; its unused nominal is borrowed within cohort {self.cohort}"
                if self.cohort and self.uses < self.nominal and self.left < self.nominal - self.uses else "")
        return (f"over quota: {self.quota} uses {self._n(self.uses)} of {self._n(self.nominal)} {what}, "
                f"may borrow {self._n(self.may_borrow)} more ({where}){lent}; needs {self._n(self.needs)}")

    def _n(self, value: int) -> str:
        return str(value) if self.resource in GPU_WORDS else format_quantity(self.resource, value)
