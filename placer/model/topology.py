"""Topology: the levels of a cluster's network / NVLink hierarchy, what a gang asks of
them, and which domains a placement chose. Plain data shared by interpretation (which
reads the requests), the fleet (which knows the levels), the solver (which chooses
domains) and actuation (which hands the choice to the cluster's own scheduler)."""

from __future__ import annotations

import re
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

    def covers(self, component: str, instance: str) -> bool:
        """Does this request cover the gang member (component, instance)? An entry of
        `components` is a component name (all its instances in the gang) or, where one
        component has several instances of which only some form the pod set (a JobSet's
        replicated jobs, a RayCluster's worker groups), `component/instance`."""
        c = self.components
        return c is None or component in c or f"{component}/{instance}" in c


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


# --- label keys ------------------------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_key_problem(key: Any) -> str | None:
    """Why `key` is not a Kubernetes label key (`[prefix/]name`: a DNS subdomain of at most
    253 characters, and a name of at most 63 alphanumerics, '-', '_' or '.'), or None."""
    if not isinstance(key, str) or not key:
        return "expected a label key such as example.com/rack, got " + (repr(key) if key is not None else "nothing")
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return f"{key!r} is not a label key: at most one '/'"
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"{key!r} is not a label key: prefix {prefix!r} must be a lower-case DNS subdomain"
    if len(name) > 63 or not _NAME.match(name):
        return (f"{key!r} is not a label key: name {name!r} must be 1-63 characters, alphanumerics, "
                "'-', '_' or '.', starting and ending with an alphanumeric")
    return None


_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a label value (at most 63 alphanumerics, '-', '_', '.'), or None."""
    if len(value) > 63 or not _VALUE.match(value):
        return (f"{value!r} is not a label value: at most 63 characters, alphanumerics, '-', '_' or '.', "
                "starting and ending with an alphanumeric")
    return None
