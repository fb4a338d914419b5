"""Topology domains: which pods of a gang a request covers (units), the domain of a node
or a node class, and whether a cluster has a requested level.

A required unit puts every pod it covers on nodes sharing one value of its key; a preferred
unit spans as few values as it can (a cost after GPUs placed). Node classes never mix
domains: a class's nodes share all their labels, and a cluster whose nodes do not carry
`kubernetes.io/hostname` (simulated ones) gets one class per node when a pending gang asks
for that level (the node's name is then its host domain).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from placer.model import reasons as R
from placer.model.fleet import Cluster, Node
from placer.solve.groups import ClusterInfo, GroupInfo, Part

HOSTNAME = "kubernetes.io/hostname"
INF = 2**62


@dataclass(frozen=True)
class Unit:
    """One topology request of one gang: the group's parts (indices) it covers."""

    workload: str                        # ns/name
    gang: str
    key: str
    required: bool
    parts: tuple[int, ...]
    components: tuple[str, ...] | None
    pods: int
    gpus: int


def units_of(parts: Sequence[Part]) -> list[Unit]:
    """The topology units of a group's parts, in workload then gang then request order."""
    out: list[Unit] = []
    seen: set[tuple] = set()
    workloads = {id(p.workload): p.workload for p in parts}      # frozen but unhashable (mappings)
    for w in workloads.values():
        for gang in w.gangs:
            members = {(c, i) for c, i, _ in gang.members}
            for req in gang.topology:
                js = tuple(j for j, p in enumerate(parts) if p.workload is w
                           and (p.instance.component, p.instance.instance) in members
                           and req.covers(p.instance.component, p.instance.instance))
                sig = (w.key, gang.name, req.key, req.required, js)
                if not js or sig in seen:
                    continue
                seen.add(sig)
                comps = tuple(sorted(req.components)) if req.components is not None else None
                out.append(Unit(w.key, gang.name, req.key, req.required, js, comps,
                                sum(parts[j].pods for j in js), sum(parts[j].pods * parts[j].gpu for j in js)))
    return out


def tag_parts(g: GroupInfo) -> None:
    """Give each covered part of the group's units a type of its own (the model constrains
    its pods per domain, apart from every other group's)."""
    covered = {j for u in g.units for j in u.parts}
    for j in covered:
        g.parts[j].topo = (g.index, j)


def domain_of(node: Node, key: str) -> str | None:
    """The node's value of a level: its label; for the host level its name when unlabelled."""
    v = node.labels.get(key)
    if v is None and key == HOSTNAME:
        return node.name
    return v


def has_key(cluster: Cluster, key: str) -> bool:
    """Every node has a host; other levels exist when declared or carried by some node."""
    return key == HOSTNAME or key in cluster.topology or any(key in n.labels for n in cluster.nodes)


def needs_node_classes(cluster: Cluster, groups: Iterable[GroupInfo]) -> bool:
    """One class per node: the host level is asked for and some node has no host label."""
    return (any(u.key == HOSTNAME for g in groups for u in g.units)
            and any(HOSTNAME not in n.labels for n in cluster.nodes))


def missing_key(g: GroupInfo, cluster: Cluster) -> R.Reason | None:
    for u in g.units:
        if not has_key(cluster, u.key):
            return R.TopologyKeyMissing(u.key, u.required, u.gang, u.workload if len(g.group.workloads) > 1 else "")
    return None


def class_domain(info: ClusterInfo, k: int, key: str) -> str | None:
    got = info.domains.get(key)
    if got is None:
        got = info.domains[key] = [domain_of(c.sample, key) for c in info.classes]
    return got[k]


def by_domain(info: ClusterInfo, classes: Iterable[int], key: str, pseudo: bool = False) -> dict[str | None, list[int]]:
    """Classes per domain value, in the given order; `pseudo`: unlabelled ones as one domain ''."""
    out: dict[str | None, list[int]] = {}
    for k in classes:
        v = class_domain(info, k, key)
        out.setdefault("" if v is None and pseudo else v, []).append(k)
    return out

