"""What an option proposes, as plain data: the workloads it takes out (`Victim`), the node
shape it adds (`NewNode`), the `Option` itself with its JSON and its one line for people,
the `Options` of one unplaced group; `Running`, what runs on a live cluster; and the
relaxations of a group's own constraints (one at a time). The search is placer.solve.options.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from placer.model.fleet import Taint
from placer.model.names import ANN_PIN, ANN_SELECTOR, ANN_SPREAD, ANN_SPREAD_CLUSTERS, ANN_SPREAD_WEIGHTS
from placer.model.quantity import format_quantity, to_json_number
from placer.model.reasons import amount
from placer.model.workload import Gang, PlacementGroup, Workload, WorkloadRef
from placer.solve.groups import GPU_RESOURCES, gpus_of

# issue 23: for a workload its quota keeps out, reclaiming what others borrow, or raising its quota
KIND_ORDER = {"reclaim": 0, "raise-quota": 1, "preempt": 2, "wait": 3, "add-nodes": 4, "relax": 5}


# --- what is offered ----------------------------------------------------------------------

@dataclass(frozen=True)
class Victim:
    """A workload an option takes out: planned by this plan, or running on the cluster."""

    workload: str
    kind: str
    gpus: int
    priority: int
    state: str                        # planned (by this plan) | running | placed (its pods not bound yet)

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "kind": self.kind, "gpus": self.gpus,
                "priority": self.priority, "state": self.state}

    def render(self) -> str:
        return f"{self.workload} ({amount('nvidia.com/gpu', self.gpus)}, priority {self.priority}, {self.state})"


@dataclass(frozen=True)
class NewNode:
    """A node shape of the cluster: what an added node would offer."""

    like: str                                     # an existing node of that shape
    allocatable: Mapping[str, int]
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"like": self.like,
                               "allocatable": {r: format_quantity(r, v) for r, v in sorted(self.allocatable.items())},
                               "labels": dict(sorted(self.labels.items()))}
        if self.taints:
            out["taints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in self.taints]
        return out


@dataclass(frozen=True)
class Option:
    kind: str                                     # preempt | wait | add-nodes | relax
    cluster: str | None = None                    # where it would then be placed
    victims: tuple[Victim, ...] = ()              # preempt, wait
    count: int = 0                                # add-nodes
    node: NewNode | None = None                   # add-nodes
    # relax: cluster-selector | pin | topology | nodeSelector | spread-weights | spread-clusters
    constraint: str | None = None
    value: str | None = None                      # relax: the constraint as written
    relaxed: tuple[str, ...] = ()                 # relax: whose constraint (workload or workload instance)
    # reclaim: (quota, amount of `resource` taken back from what it borrows) per borrowing quota;
    # raise-quota: the quota, its resource, by how much its nominal amount is raised and to what
    quotas: tuple[tuple[str, int], ...] = ()
    resource: str | None = None
    by: int = 0
    to: int = 0

    @property
    def gpus(self) -> int:
        """GPUs disturbed (preempt, wait, reclaim) or added (add-nodes)."""
        if self.node is not None:
            return self.count * gpus_of(self.node.allocatable)
        return sum(v.gpus for v in self.victims)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind in ("preempt", "wait", "reclaim"):
            out.update(cluster=self.cluster, workloads=[v.workload for v in self.victims], gpus=self.gpus,
                       details=[v.to_dict() for v in self.victims])
            if self.kind == "reclaim":
                out.update(resource=self.resource,
                           reclaimed={q: _amount_json(self.resource, v) for q, v in self.quotas})
        elif self.kind == "raise-quota":
            q = self.quotas[0][0] if self.quotas else None
            out.update(cluster=self.cluster, quota=q, resource=self.resource,
                       by=_amount_json(self.resource, self.by), to=_amount_json(self.resource, self.to))
        elif self.kind == "add-nodes":
            out.update(cluster=self.cluster, count=self.count, node=self.node.to_dict() if self.node else None)
        else:
            out.update(constraint=self.constraint, value=self.value, workloads=list(self.relaxed),
                       cluster=self.cluster)
        out["text"] = self.render()
        return out

    def render(self) -> str:
        """One line for people."""
        if self.kind == "preempt":
            return f"preempt {', '.join(v.render() for v in self.victims)} on {self.cluster}"
        if self.kind == "wait":
            return f"wait for {', '.join(v.render() for v in self.victims)} to finish on {self.cluster}"
        if self.kind == "reclaim":
            what = ", ".join(f"{amount(self.resource or '', v)} from quota {q}" for q, v in self.quotas)
            return (f"reclaim borrowed {what}: take out {', '.join(v.render() for v in self.victims)}; "
                    f"it then fits on {self.cluster}")
        if self.kind == "raise-quota":
            q = self.quotas[0][0] if self.quotas else "?"
            r = self.resource or ""
            return (f"raise quota {q}'s nominal {r} by {amount(r, self.by)} (to {amount(r, self.to)}): "
                    f"it then fits on {self.cluster}")
        if self.kind == "add-nodes" and self.node is not None:
            n = self.node
            res = ", ".join(amount(r, v) for r, v in sorted(n.allocatable.items(), key=lambda kv: _res_order(kv[0]))
                            if r != "pods")
            return f"add {self.count} node{'s' if self.count != 1 else ''} like {n.like} ({res}) to {self.cluster}"
        whose = ", ".join(self.relaxed)
        if self.constraint == "spread-clusters":       # a duplicate on fewer clusters, a divide on more
            return f"set {self.value} on {whose}: it then fits on {self.cluster}"
        return f"drop {self.constraint} {self.value} of {whose}: it then fits on {self.cluster}"


def _amount_json(resource: str | None, v: int) -> int | float:
    return to_json_number(resource or "", v)


def _res_order(r: str) -> tuple:
    return (0 if r in GPU_RESOURCES else 1 if r == "cpu" else 2 if r == "memory" else 3, r)


@dataclass(frozen=True)
class Options:
    """The options found for one unplaced group, best first. `incomplete`: why the search
    stopped before trying everything ("time limit", "search budget"), else None."""

    options: tuple[Option, ...]
    incomplete: str | None = None


@dataclass(frozen=True)
class Running:
    """A workload running on a live cluster: placer's own copy (read back), or other pods
    grouped by their owner. `usage`: node -> requests of its bound pods (already counted in
    the snapshot's `used`); `promise`: the key of its committed group, if its pods are not
    all bound yet."""

    workload: str
    kind: str
    cluster: str
    priority: int
    usage: Mapping[str, Mapping[str, int]]
    promise: str | None = None
    ref: WorkloadRef | None = None


# --- relaxations: the group's own constraints, one at a time -------------------------------

def relaxations(group: PlacementGroup, held_pins: frozenset[str]
                 ) -> list[tuple[str, tuple[str, ...], str, PlacementGroup]]:
    out = []
    for constraint, ann in (("cluster-selector", ANN_SELECTOR), ("pin", ANN_PIN)):
        if constraint == "pin" and group.key in held_pins:
            continue                 # pinned where its group already runs: not the user's to drop
        who = [w for w in group.workloads if (w.annotations or {}).get(ann)]
        if who:
            value = ", ".join(dict.fromkeys(f"{ann}={w.annotations[ann]}" for w in who))
            out.append((constraint, tuple(w.key for w in who), value,
                        _each(group, lambda w: replace(w, annotations={k: v for k, v in w.annotations.items()
                                                                        if k != ann}))))
    sel = [(w, i) for w in group.workloads for i in w.instances if i.pod.node_selector]
    if sel:
        value = ", ".join(dict.fromkeys(f"{k}={v}" for _, i in sel for k, v in sorted(i.pod.node_selector.items())))
        out.append(("nodeSelector", tuple(dict.fromkeys(f"{w.key} {i.key}" for w, i in sel)), value,
                    _each(group, _without_node_selector)))
    out += _spread_relaxations(group)
    topo = [(w, g) for w in group.workloads for g in w.gangs if any(t.required for t in g.topology)]
    if topo:
        value = ", ".join(dict.fromkeys(f"topology-required {t.key}" for _, g in topo for t in g.topology
                                        if t.required))
        out.append(("topology", tuple(dict.fromkeys(w.key for w, _ in topo)), value, _each(group, _without_topology)))
    return out


def _spread_relaxations(group: PlacementGroup) -> list[tuple[str, tuple[str, ...], str, PlacementGroup]]:
    """placer.dev/spread (issue 21): a divide without its weights or on one cluster more; a
    duplicate on one cluster fewer."""
    out: list[tuple[str, tuple[str, ...], str, PlacementGroup]] = []
    for w in group.workloads:
        ann = w.annotations or {}
        if ann.get(ANN_SPREAD_WEIGHTS):
            out.append(("spread-weights", (w.key,), f"{ANN_SPREAD_WEIGHTS}={ann[ANN_SPREAD_WEIGHTS]}",
                        _each(group, lambda x: replace(x, annotations={k: v for k, v in x.annotations.items()
                                                                      if k != ANN_SPREAD_WEIGHTS}))))
        n = str(ann.get(ANN_SPREAD_CLUSTERS, "")).strip()
        # duplicate: exactly N copies, one fewer; divide: at most N clusters, one more
        other = str(int(n) - 1 if ann.get(ANN_SPREAD) == "duplicate" else int(n) + 1) if n.isdigit() else "0"
        if other != "0":
            out.append(("spread-clusters", (w.key,), f"{ANN_SPREAD_CLUSTERS}={other} (was {n})",
                        _each(group, lambda x: replace(x, annotations={**x.annotations, ANN_SPREAD_CLUSTERS: other}))))
    return out


def _each(group: PlacementGroup, f: Callable[[Workload], Workload]) -> PlacementGroup:
    return replace(group, workloads=tuple(f(w) for w in group.workloads))


def _without_node_selector(w: Workload) -> Workload:
    return replace(w, instances=tuple(replace(i, pod=replace(i.pod, node_selector={})) for i in w.instances))


def _without_topology(w: Workload) -> Workload:
    gangs: tuple[Gang, ...] = tuple(replace(g, topology=tuple(t for t in g.topology if not t.required))
                                    for g in w.gangs)
    return replace(w, gangs=gangs)
