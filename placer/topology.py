"""Topology: the levels of a cluster's network / NVLink hierarchy, what a gang asks of
them, and which domains a placement chose. Plain data shared by interpretation (which
reads the requests), the fleet (which knows the levels), the solver (which chooses
domains) and actuation (which hands the choice to the cluster's own scheduler)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# on the workload: applies to each of its gangs
ANN_REQUIRED = "placer.dev/topology-required"
ANN_PREFERRED = "placer.dev/topology-preferred"
# Kueue's TAS annotations on a pod template: apply to that pod set (component) only
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


@dataclass(frozen=True)
class TopologyRequest:
    """What a gang asks of one topology level. `required`: every pod it covers on nodes
    sharing one value of `key`; otherwise as few values as possible (a cost after GPUs).
    `components`: the gang's pods of these components (a Kueue pod set); None: all of them."""

    key: str
    required: bool
    components: frozenset[str] | None = None


@dataclass(frozen=True)
class TopologyChoice:
    """The domain(s) a placement chose for one request of one gang: one value for a
    required request, the values spanned (fewest first) for a preferred one."""

    gang: str
    key: str
    domains: tuple[str, ...]
    required: bool = True
    components: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"gang": self.gang, "key": self.key, "domain": self.domains[0] if self.domains else None}
        if len(self.domains) > 1:
            out["domains"] = list(self.domains)
        if not self.required:
            out["preferred"] = True
        if self.components is not None:
            out["components"] = list(self.components)
        return out
