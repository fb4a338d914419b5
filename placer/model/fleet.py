"""The fleet as an immutable snapshot: clusters, their nodes, free capacity.

Fed either by a clusters file's inline (simulated) nodes or by live inventory
(`placer.fleetview.inventory`); the solver only ever sees these frozen values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from placer.model.quota import Quotas


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"          # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True)
class Node:
    name: str
    allocatable: Mapping[str, int]          # canonical units (cpu in millicores)
    used: Mapping[str, int] = field(default_factory=dict)   # already requested by bound pods
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.unschedulable

    def free(self, resource: str) -> int:
        return max(0, self.allocatable.get(resource, 0) - self.used.get(resource, 0))

    def free_all(self) -> dict[str, int]:
        """`free` of every allocatable resource (inline: node classes ask it of every node,
        10,000s per plan)."""
        used = self.used
        return {r: v - u if (u := used.get(r, 0)) < v else 0 for r, v in self.allocatable.items()}


@dataclass(frozen=True)
class RuntimeClass:
    """What a RuntimeClass adds to every pod that names it (the API server's RuntimeClass
    admission writes it into the pod): its overhead (canonical units), and its scheduling
    nodeSelector (merged into the pod's) and tolerations (added to the pod's)."""

    name: str
    overhead: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class StorageClass:
    """A StorageClass as placement needs it: its name, and whether it is the cluster's
    default (annotation `storageclass.kubernetes.io/is-default-class: "true"`), which a
    claim naming no class gets."""

    name: str
    default: bool = False


@dataclass(frozen=True)
class Cluster:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    nodes: tuple[Node, ...] = ()
    context: str | None = None              # kubeconfig context for live clusters
    error: str | None = None                # why it could not be inventoried (unreachable...)
    # capacity promised to placed workloads whose pods are not all bound yet (totals, for
    # display); the solver receives those workloads themselves as committed demand
    reserved: Mapping[str, int] = field(default_factory=dict)
    # the cluster's RuntimeClasses by name; None when not known (a simulated cluster)
    runtime_classes: Mapping[str, RuntimeClass] | None = None
    # topology levels as node label keys, widest first (zone, block, rack, clique, host)
    topology: tuple[str, ...] = ()
    # the cluster's StorageClasses by name; None when not known (claims are then not checked)
    storage_classes: Mapping[str, StorageClass] | None = None
    # what the cluster accepts; None: not known (a simulated cluster that declares nothing),
    # taken as accepting anything. `serves`: `apiVersion/Kind` of the kinds it serves outside
    # Kubernetes' built-in API groups (which every cluster serves); `priority_classes` and
    # `namespaces`: the names that exist there
    serves: frozenset[str] | None = None
    priority_classes: frozenset[str] | None = None
    namespaces: frozenset[str] | None = None
    # cluster preference (issue 21): a higher `preference` is filled first; `cost` per GPU-hour
    # (any unit; None: not given, counted as 0 when other clusters give one)
    preference: int = 0
    cost: Decimal | None = None

    @property
    def reachable(self) -> bool:
        return self.error is None


# API groups every Kubernetes API server serves (no operator or CRD needed)
BUILTIN_GROUPS = frozenset({"", "apps", "batch", "policy", "autoscaling", "networking.k8s.io", "node.k8s.io",
                            "scheduling.k8s.io", "rbac.authorization.k8s.io", "storage.k8s.io",
                            "coordination.k8s.io", "discovery.k8s.io"})
# PriorityClasses Kubernetes creates in every cluster
BUILTIN_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


def kind_key(api_version: str, kind: str) -> str:
    """How `Cluster.serves` names a kind: `jobset.x-k8s.io/v1alpha2/JobSet`, `v1/Pod`."""
    return f"{api_version}/{kind}"


def accepts_kind(cluster: Cluster, api_version: str, kind: str) -> bool:
    """Whether the cluster serves this kind (True when not known)."""
    group = api_version.rpartition("/")[0]
    return cluster.serves is None or group in BUILTIN_GROUPS or kind_key(api_version, kind) in cluster.serves


@dataclass(frozen=True)
class Fleet:
    clusters: tuple[Cluster, ...]
    taken_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    # fleet-wide quotas (issue 23; placer.model.quota); None: none, nothing restricted
    quotas: "Quotas | None" = None
    # quota -> resource -> use by work held outside this snapshot's groups and committed
    # groups (the options search holds the plan's placements so): counted first
    quota_held: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # resource -> the quotas' pool when this snapshot is part of the fleet (the options
    # search re-solves on one cluster); None: computed from the snapshot's clusters
    quota_pool: Mapping[str, int] | None = None

    def cluster(self, name: str) -> Cluster | None:
        return next((c for c in self.clusters if c.name == name), None)
