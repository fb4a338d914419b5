"""The interpreted view of a workload object: components, instances, pods, demand, gangs, phase.

These frozen types are what the rest of placer (solver, describe, daemon) works with;
`placer.definitions.interpret` builds them from an object and its definition.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Mapping

from placer.model.quantity import add
from placer.model.selectors import format_label_selector, matches_label_selector
from placer.model.topology import TopologyRequest


def api_group(api_version: str) -> str:
    """The API group of an apiVersion: `batch/v1` -> `batch`, `v1` -> `` (core)."""
    group, sep, _ = (api_version or "").rpartition("/")
    return group if sep else ""


@dataclass(frozen=True, order=True)
class WorkloadRef:
    """One workload's identity wherever placer meets it (files, plans, clusters, the
    hub): API group, kind, namespace and name. `ns/name` alone is not enough: a Job and
    a Deployment may share it. The version is not part of it: it names a representation."""

    group: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> "WorkloadRef":
        """The reference of a Kubernetes object (namespace `default` when unset)."""
        meta = obj.get("metadata") or {}
        return cls(api_group(str(obj.get("apiVersion") or "")), str(obj.get("kind") or ""),
                   meta.get("namespace") or "default", str(meta.get("name") or ""))

    @classmethod
    def parse(cls, text: str) -> "WorkloadRef":
        """The inverse of `str()`: `namespace/Kind.group/name` (`namespace/Kind/name` in the core group)."""
        ns, kind, name = text.split("/", 2)
        kind, _, group = kind.partition(".")
        return cls(group, kind, ns, name)

    @property
    def short(self) -> str:
        """`namespace/name`: what people write, unique only among workloads of one kind."""
        return f"{self.namespace}/{self.name}"

    @property
    def kind_group(self) -> str:
        """`Kind.group` as kubectl prints it (`Job.batch`, `JobSet.jobset.x-k8s.io`; `Pod`)."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def to_dict(self) -> dict[str, str]:
        return {"apiGroup": self.group, "kind": self.kind, "namespace": self.namespace, "name": self.name}

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind_group}/{self.name}"


class Phase(str, Enum):
    PENDING = "Pending"
    INITIALIZING = "Initializing"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class PodShape:
    """What scheduling needs to know about the pods of one instance (all identical)."""

    requests: Mapping[str, int]                   # effective per-pod requests, canonical units
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # required node affinity: the list of nodeSelectorTerms (ORed), each as in the PodSpec
    affinity_terms: tuple[Mapping[str, Any], ...] = ()
    tolerations: tuple[Mapping[str, Any], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str | None = None
    priority_class_name: str | None = None
    # spec.runtimeClassName: the cluster's RuntimeClass of that name adds its overhead
    # (unless the template sets spec.overhead itself, which is then in `requests`)
    runtime_class: str | None = None
    overhead_set: bool = False


@dataclass(frozen=True)
class Instance:
    """One instance of a component (one replicated job, one worker group, one service...)."""

    component: str
    instance: str
    replicas: int
    pods_per_replica: int
    pods: int
    pod: PodShape
    gpus_per_pod: int
    # the pods the operator creates for this instance: matchLabels and matchExpressions
    selector: Mapping[str, str] = field(default_factory=dict)
    selector_expressions: tuple[Mapping[str, Any], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.component}/{self.instance}"

    @property
    def has_selector(self) -> bool:
        return bool(self.selector or self.selector_expressions)

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Does this instance's pod selector match a pod with these labels?"""
        return matches_label_selector(self.selector, self.selector_expressions, labels)

    def selector_string(self) -> str:
        """The selector as the API server takes it in `labelSelector=`."""
        return format_label_selector(self.selector, self.selector_expressions)

    @property
    def gpus(self) -> int:
        return self.gpus_per_pod * self.pods


@dataclass(frozen=True)
class Gang:
    """Pods that must be co-scheduled; members are (component, instance, pods)."""

    name: str
    members: tuple[tuple[str, str, int], ...]
    min_member: int
    pods: int
    gpus: int
    # startup window: gangs of one window run at the same time; a later window starts once
    # an earlier one has completed (JobSet dependsOn ... Complete). None: no such order.
    window: int | None = None
    # topology levels this gang asks for (placer.model.topology); () when it asks for none
    topology: tuple[TopologyRequest, ...] = ()


@dataclass(frozen=True)
class Scaling:
    """How `placer.dev/spread: divide` may split a workload (its definition's `scale`): the
    scalable replica paths with their values, `units` whole units (the gcd of the values; one
    unit is values/units replicas of each path, the part that stays together), the workload
    at one unit and at none (`fixed`: the pods every copy has whatever its share, a Ray head).
    Where each unit is a gang of its own (a LeaderWorkerSet group), `unit` carries that gang
    (with its topology requests) and `unit_gangs` names the units' gangs in order: a share of
    k units has the first k of them (its copy's gangs, to which chosen domains are handed)."""

    paths: tuple[tuple[str | int, ...], ...]
    replicas: tuple[int, ...]
    units: int
    unit: "Workload"
    fixed: "Workload"
    unit_name: str = "replica"
    string: bool = False                          # the count is written as a string
    unit_gangs: tuple[str, ...] = ()

    def replicas_at(self, units: int) -> tuple[int, ...]:
        """Each path's value for a share of `units` units."""
        return tuple(v // self.units * units for v in self.replicas) if self.units else self.replicas


@dataclass(frozen=True)
class Workload:
    api_version: str
    kind: str
    namespace: str
    name: str
    definition: str
    phase: Phase
    reason: str
    message: str
    instances: tuple[Instance, ...]
    gangs: tuple[Gang, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    suspended: bool | None = None
    source: str | None = None                     # file it came from, if any
    obj: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # placer.dev/spread: divide only (placer.definitions.scale)
    scaling: Scaling | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        """`namespace/name`, for people; `ref` is the identity."""
        return f"{self.namespace}/{self.name}"

    @property
    def ref(self) -> WorkloadRef:
        return WorkloadRef(api_group(self.api_version), self.kind, self.namespace, self.name)

    @property
    def pods(self) -> int:
        return sum(i.pods for i in self.instances)

    @property
    def gpus(self) -> int:
        return sum(i.gpus for i in self.instances)

    @property
    def resources(self) -> dict[str, int]:
        """Total requests over all pods, canonical units."""
        total: dict[str, int] = {}
        for i in self.instances:
            add(total, i.pod.requests, i.pods)
        return total

    def at_once(self) -> "Workload":
        """The part of the workload that must fit at the same time: when its gangs start in
        windows one after the other, the window asking for the most (GPUs, then pods, then
        all resources); otherwise the whole workload. Later windows reuse the room of the
        earlier ones, on the same cluster."""
        windows: dict[int, set[tuple[str, str]]] = {}
        for g in self.gangs:
            if g.window is not None:
                windows.setdefault(g.window, set()).update((c, i) for c, i, _ in g.members)
        if len(windows) < 2:
            return self
        covered = set().union(*windows.values())
        always = [i for i in self.instances if (i.component, i.instance) not in covered]

        def demand(members: set[tuple[str, str]]) -> tuple[int, int]:
            inst = [i for i in self.instances if (i.component, i.instance) in members]
            return sum(i.gpus for i in inst), sum(i.pods for i in inst)
        peak = max(sorted(windows), key=lambda w: demand(windows[w]))
        keep = [i for i in self.instances if (i.component, i.instance) in windows[peak]] + always
        return replace(self, instances=tuple(i for i in self.instances if i in keep),
                       gangs=tuple(g for g in self.gangs if g.window in (peak, None)))

    def instances_of(self, component: str) -> tuple[Instance, ...]:
        return tuple(i for i in self.instances if i.component == component)


@dataclass(frozen=True)
class PlacementGroup:
    """Workloads that must land together on one cluster, with the plain objects that
    travel with them: what shares `placer.dev/group` or a companion object (see
    `placer.inputs.grouping`). `notes`: what the user should be told about how it was formed."""

    key: str
    workloads: tuple[Workload, ...]
    companions: tuple[Mapping[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    # placer's own policy, typed: clusters the group was withdrawn from or refused by, and
    # the cluster the rest of its group lives on (stands for its workloads' own pins)
    excluded: frozenset[str] = frozenset()
    pin: str | None = None
    # PriorityClasses of the same submission that its pods name: created on its cluster
    # when missing there (never changed or deleted), so a cluster without them may take it
    brings: tuple[Mapping[str, Any], ...] = ()

    @property
    def gpus(self) -> int:
        return sum(w.gpus for w in self.workloads)
