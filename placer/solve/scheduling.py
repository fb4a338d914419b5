"""Scheduling predicates: does a pod shape fit a node, as the kube-scheduler decides it.

Pure functions over `placer.model.workload.PodShape` and `placer.model.fleet.Node`; the solver, the
verifier and the explanations all call these, so a pod is judged the same way everywhere.
Also: node classes (nodes that are interchangeable for placement). Label selectors live in
`placer.model.selectors` (re-exported here under their old names).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from placer.model.fleet import Node, RuntimeClass, Taint
from placer.model.selectors import (  # noqa: F401 (re-exported: the old path)
    Requirement,
    format_expression,
    matches_expression,
    matches_labels,
    parse_label_selector,
    selector_matches,
)
from placer.model.workload import PodShape

# Taint effects that keep a pod off a node; PreferNoSchedule is only a preference.
_HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
POD_COUNT = "pods"
# A cordoned node still takes pods that tolerate this taint (the scheduler's NodeUnschedulable
# plugin asks exactly that, whether or not the node controller has put the taint on yet).
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


# --- node selectors and required node affinity ---------------------------------------

def matches_node_selector(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return matches_labels(selector, labels)


def matches_term(term: Mapping[str, Any], node: Node) -> bool:
    """One nodeSelectorTerm: its expressions and fields are ANDed; an empty term matches nothing."""
    exprs = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not exprs and not fields:
        return False
    field_labels = {"metadata.name": node.name}
    return (all(matches_expression(e, node.labels) for e in exprs)
            and all(matches_expression(f, field_labels) for f in fields))


def matches_affinity(terms: Sequence[Mapping[str, Any]], node: Node) -> bool:
    """Required node affinity: the terms are ORed; no terms means no constraint."""
    return not terms or any(matches_term(t, node) for t in terms)


# --- taints and tolerations ----------------------------------------------------------

def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return not key or key == taint.key
    return key == taint.key and str(toleration.get("value") or "") == taint.value


def untolerated_taints(tolerations: Iterable[Mapping[str, Any]], taints: Iterable[Taint]) -> list[Taint]:
    tols = list(tolerations)
    return [t for t in taints
            if t.effect in _HARD_EFFECTS and not any(tolerates(tol, t) for tol in tols)]


# --- the whole predicate ---------------------------------------------------------------

def pod_demand(shape: PodShape, node_has_pod_limit: bool = True) -> dict[str, int]:
    """What one pod takes of a node: its requests plus one pod slot."""
    demand = {k: v for k, v in shape.requests.items() if v}
    if node_has_pod_limit:
        demand[POD_COUNT] = demand.get(POD_COUNT, 0) + 1
    return demand


def tolerates_cordon(shape: PodShape) -> bool:
    return any(tolerates(t, UNSCHEDULABLE_TAINT) for t in shape.tolerations)


def runtime_overhead(shape: PodShape, runtime_classes: Mapping[str, RuntimeClass] | None
                     ) -> dict[str, int] | None:
    """What the cluster's RuntimeClass adds to each pod of this shape: nothing without a
    runtimeClassName, with the overhead already in the template, or when the cluster's
    classes are not known; None when the cluster has no RuntimeClass of that name (the API
    server then refuses the pods)."""
    if not shape.runtime_class or runtime_classes is None:
        return {}
    rc = runtime_classes.get(shape.runtime_class)
    if rc is None:
        return None
    return {} if shape.overhead_set else dict(rc.overhead)


def admitted(shape: PodShape, runtime_classes: Mapping[str, RuntimeClass] | None) -> PodShape | None:
    """The pod as the RuntimeClass admission leaves it: the class's scheduling nodeSelector
    merged into the pod's, its tolerations added. None when the admission refuses the pod
    (no such class, or a nodeSelector key the class sets to another value)."""
    if not shape.runtime_class or runtime_classes is None:
        return shape
    rc = runtime_classes.get(shape.runtime_class)
    if rc is None:
        return None
    if not rc.node_selector and not rc.tolerations:
        return shape
    if any(shape.node_selector.get(k, v) != v for k, v in rc.node_selector.items()):
        return None
    return replace(shape, node_selector={**shape.node_selector, **rc.node_selector},
                   tolerations=shape.tolerations + tuple(t for t in rc.tolerations if t not in shape.tolerations))


def mismatch(shape: PodShape, node: Node) -> str | None:
    """Why the pod can never go on this node regardless of load (None: it may).
    Checked in the scheduler's order: schedulable, selector, affinity, taints."""
    if not node.ready:
        return "not ready"
    if node.unschedulable and not tolerates_cordon(shape):
        return "unschedulable"
    if not matches_node_selector(shape.node_selector, node.labels):
        return "nodeSelector"
    if not matches_affinity(shape.affinity_terms, node):
        return "affinity"
    if untolerated_taints(shape.tolerations, node.taints):
        return "taint"
    return None


def fits_resources(demand: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return all(v <= free.get(k, 0) for k, v in demand.items())


def fits(shape: PodShape, node: Node, free: Mapping[str, int] | None = None) -> bool:
    """Does one more pod of this shape fit the node given its free capacity?"""
    if mismatch(shape, node) is not None:
        return False
    free = node.free_all() if free is None else free
    return fits_resources(pod_demand(shape, POD_COUNT in node.allocatable), free)


def describe_constraints(shape: PodShape) -> str:
    """A short human description of where the pod may go, e.g. `gpu=h100`."""
    parts = [f"{k}={v}" for k, v in sorted(shape.node_selector.items())]
    for term in shape.affinity_terms[:1]:
        parts.extend(format_expression(e) for e in term.get("matchExpressions") or ())
    if len(shape.affinity_terms) > 1:
        parts.append(f"(or {len(shape.affinity_terms) - 1} more affinity terms)")
    return ",".join(parts)


# --- node classes --------------------------------------------------------------------

@dataclass(frozen=True)
class NodeClass:
    """Nodes with identical free capacity, labels, taints and state: interchangeable for
    every predicate except matchFields on the node name (handled by splitting classes)."""

    index: int
    nodes: tuple[Node, ...]

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def sample(self) -> Node:
        return self.nodes[0]


def _class_key(node: Node, by_name: bool) -> tuple:
    return (tuple(sorted(node.free_all().items())), tuple(sorted(node.labels.items())),
            tuple(sorted((t.key, t.value, t.effect) for t in node.taints)),
            POD_COUNT in node.allocatable, node.unschedulable, node.name if by_name else None)


def node_classes(nodes: Iterable[Node], by_name: bool = False) -> list[NodeClass]:
    """Group the ready nodes into classes, in first-seen order; nodes inside a class keep
    their order. Cordoned nodes are classes of their own: only pods that tolerate the
    cordon may use them (`mismatch`). `by_name` makes every node its own class (for matchFields)."""
    groups: dict[tuple, list[Node]] = {}
    # a node's key by the objects it is made of (the node kept with it, so that no id is
    # reused meanwhile): a clusters file's node group shares them among its nodes (issue 24:
    # the keys of 10,000 nodes were a third of `prepare`)
    made: dict[tuple[int, ...], tuple[tuple, Node]] = {}
    for node in nodes:
        if not node.ready:
            continue
        if by_name:
            key = _class_key(node, by_name)
        else:
            ident = (id(node.allocatable), id(node.used), id(node.labels), id(node.taints), node.unschedulable)
            got = made.get(ident)
            if got is None:
                got = made[ident] = (_class_key(node, by_name), node)
            key = got[0]
        groups.setdefault(key, []).append(node)
    out = []
    for i, members in enumerate(groups.values()):
        out.append(NodeClass(i, tuple(members)))
    return out
