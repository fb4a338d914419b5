"""What a cluster must have to accept a group: the kinds of its workloads served there, the
PriorityClasses its pods name (there, or brought by the same submission), and what a submit
creates there first (namespaces, brought PriorityClasses). Pure: the cluster's facts come
with the fleet snapshot (`Cluster.serves`, `.priority_classes`, `.namespaces`; None: not
known, taken as accepting anything)."""

from __future__ import annotations

from placer.model import reasons as R
from placer.model.fleet import BUILTIN_PRIORITY_CLASSES, Cluster, accepts_kind
from placer.model.workload import PlacementGroup


def _brought(group: PlacementGroup) -> set[str]:
    return {str((o.get("metadata") or {}).get("name") or "") for o in group.brings}


def refusal(group: PlacementGroup, cluster: Cluster) -> R.Reason | None:
    """Why the cluster's API server would refuse the group's objects or pods (None: it would not)."""
    if cluster.serves is None and cluster.priority_classes is None:
        return None                     # nothing known about it: taken as accepting anything
    for w in group.workloads:
        if not accepts_kind(cluster, w.api_version, w.kind):
            return R.DoesNotServe(w.kind, w.api_version)
    if cluster.priority_classes is None:
        return None
    have = cluster.priority_classes | BUILTIN_PRIORITY_CLASSES | _brought(group)
    for w in group.workloads:
        for i in w.instances:
            name = i.pod.priority_class_name
            if name and name not in have:
                return R.MissingPriorityClass(name, w.key)
    return None


def creates(group: PlacementGroup, cluster: Cluster) -> tuple[str, ...]:
    """What a submit creates on the cluster before the group's objects (`Kind name`): the
    namespaces missing there and the brought PriorityClasses it does not have."""
    out: list[str] = []
    if cluster.namespaces is not None:
        namespaces = [w.namespace for w in group.workloads]
        namespaces += [str((c.get("metadata") or {}).get("namespace")) for c in group.companions
                       if (c.get("metadata") or {}).get("namespace")]
        out += [f"Namespace {ns}" for ns in dict.fromkeys(namespaces) if ns not in cluster.namespaces]
    if cluster.priority_classes is not None:
        out += [f"PriorityClass {n}" for n in sorted(_brought(group)) if n not in cluster.priority_classes]
    return tuple(out)
