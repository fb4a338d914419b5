"""Steering a copy's pods to the nodes the plan chose for them (issue 22). Pure.

The plan is node level (`Placement.nodes`: node -> "<component>/<instance>" -> pods), but
the cluster's own scheduler binds the pods. The default kube-scheduler scores
LeastAllocated and spreads, so the pods of a workload created earlier can take the nodes the
plan kept for a later gang, which then stays Pending (`Insufficient nvidia.com/gpu`).
Steering writes, into each pod template through the definition's paths (the same mechanism
as the topology hand-off), a node affinity to the nodes the plan chose for that template's
pods, by node name (`matchFields: metadata.name In [node]`, what the DaemonSet controller
uses: exact whatever the nodes' hostname labels say; the API server takes one value per
such field selector, so one term per node), merged with the user's own affinity:

- `required` (default): each required nodeSelectorTerm the template already has (they are
  ORed) is ANDed with each planned node, a copy per node (one term per node when it has
  none), so the template's pods can bind only there, and only where the user's terms allow;
- `preferred`: a preferred term of weight 100 per planned node (the scheduler still binds
  elsewhere when the planned nodes are full);
- `pinned`: `required`, and a scheduling gate (`placer.dev/pin`, `spec.schedulingGates`) on
  each steered template, with the plan's pod count per node recorded on the copy: the
  daemon (placer/daemon/pin.py) lifts each pod's gate in the request that narrows its node
  affinity to ONE planned node whose count is not used up (`assign`, `pin_patch`), so the
  pods of overlapping templates pair with nodes exactly as the plan did;
- `off`: nothing written.

A template whose pods the plan put on several nodes gets all of them: its pods are
identical, so any of them may take any of those nodes; the plan's per-node accounting keeps
the sum of every copy's pods on a node within the node, so a set can be over-filled only
when sets of several templates overlap and the scheduler pairs pods and nodes differently
from the plan (docs/planning.md, Steering), which `pinned` rules out. Templates the plan gave no pod (a worker group at
0 replicas) are left as they are, and so are templates whose definition gives no path to
their affinity. The nodes are recorded on the copy (`placer.dev/nodes`) with a fingerprint of
the demand they were planned for (`placer.actuate.compare.demand` of the source), so
re-applying the same demand (a drift put back, `submit` again, an edit that changes no
request) keeps them, and an edit that changes the demand drops them: the plan's nodes were
chosen for the old one, and the cluster's scheduler then places the new pods unsteered.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from typing import Any, Iterable, Mapping, Sequence

from placer.actuate.compare import demand
from placer.actuate.topology import Templates, _get, _set, templates_of
from placer.definitions.catalog import Catalog
from placer.definitions.interpret import target_path
from placer.definitions.program import NOT_A_PATH
from placer.model.workload import PlacementGroup, Workload, WorkloadRef

STEER_REQUIRED, STEER_PREFERRED, STEER_OFF, STEER_PINNED = "required", "preferred", "off", "pinned"
STEER_MODES = (STEER_REQUIRED, STEER_PREFERRED, STEER_OFF, STEER_PINNED)
HOLDS = (STEER_REQUIRED, STEER_PINNED)        # the modes whose pods can bind only on planned nodes
PREFERRED_WEIGHT = 100
ANN_NODES = "placer.dev/nodes"
PIN_GATE = "placer.dev/pin"                   # the scheduling gate of a pinned copy's pods
ANN_PINNED = "placer.dev/pinned"              # on a pod: the one node it was pinned to
NODE_NAME_FIELD = "metadata.name"

# "<component>/<instance>" -> the nodes the plan chose for that template's pods
Steering = Mapping[str, Sequence[str]]
# "<component>/<instance>" -> node -> how many of that template's pods the plan put there
Counts = Mapping[str, Mapping[str, int]]


def nodes_by_workload(placements: Iterable[Any], cluster: str | None = None
                      ) -> dict[WorkloadRef, dict[str, tuple[str, ...]]]:
    """WorkloadRef -> per pod template the planned nodes, for `prepare_objects`; only the
    placements on `cluster` when given (a duplicated workload has one per cluster)."""
    return {ref: {m: tuple(sorted(on)) for m, on in sorted(per.items())}
            for ref, per in counts_by_workload(placements, cluster).items()}


def counts_by_workload(placements: Iterable[Any], cluster: str | None = None
                       ) -> dict[WorkloadRef, dict[str, dict[str, int]]]:
    """WorkloadRef -> per pod template, node -> the plan's pods there (on `cluster`)."""
    out: dict[WorkloadRef, dict[str, dict[str, int]]] = {}
    for p in placements:
        if p.ref is None or (cluster is not None and p.cluster != cluster):
            continue
        for node, members in p.nodes.items():
            for member, count in members.items():
                if count > 0:
                    out.setdefault(p.ref, {}).setdefault(member, {})[node] = int(count)
    return out


def fingerprint(w: Workload) -> str:
    """A short digest of what placement depends on (pods, requests, node constraints)."""
    return hashlib.sha256(repr(demand(w)).encode()).hexdigest()[:16]


def annotation_value(nodes: Steering, planned_for: str | None = None, counts: Counts | None = None) -> str:
    data: dict[str, Any] = {"demand": planned_for, "templates": {m: list(ns) for m, ns in nodes.items()}}
    if counts:
        data["counts"] = {m: dict(c) for m, c in counts.items()}
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def counts_of(obj: Mapping[str, Any] | None) -> dict[str, dict[str, int]]:
    """The plan's pods per template and node recorded on a pinned copy; {} when none."""
    text = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(ANN_NODES)
    try:
        data = json.loads(text) if isinstance(text, str) else {}
        return {str(m): {str(n): int(k) for n, k in c.items()} for m, c in (data.get("counts") or {}).items()}
    except (ValueError, TypeError, AttributeError):
        return {}


def nodes_of(obj: Mapping[str, Any] | None, source: Workload | None = None) -> dict[str, tuple[str, ...]]:
    """The nodes a placed copy was steered to (its `placer.dev/nodes` annotation), when they
    were planned for the demand of `source` (the workload about to be re-applied); {} when it
    has none, it cannot be read, or the demand changed (then nothing is steered again)."""
    text = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(ANN_NODES)
    try:
        data = json.loads(text) if isinstance(text, str) else {}
        if source is not None and data.get("demand") != fingerprint(source):
            return {}
        return {str(m): tuple(str(n) for n in ns) for m, ns in (data.get("templates") or {}).items()
                if isinstance(ns, list)}
    except (ValueError, TypeError, AttributeError):
        return {}


def _requirement(node: str) -> dict[str, Any]:
    # the API server takes one value for a node field selector with `In`: one term per node
    return {"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}


def _steered(term: Mapping[str, Any], nodes: Sequence[str]) -> bool:
    """The term already names one of `nodes` by node name (written before: kept once)."""
    return any(f.get("key") == NODE_NAME_FIELD and f.get("operator") == "In" and list(f.get("values") or ()) in
               ([n] for n in nodes) for f in term.get("matchFields") or ())


def with_required_nodes(affinity: Mapping[str, Any] | None, nodes: Sequence[str]) -> dict[str, Any]:
    """`affinity` whose required nodeSelectorTerms (ORed) are each ANDed with `metadata.name
    In [node]`, one copy of the term per node (one term per node when there is none): a pod
    may bind on one of `nodes` that also meets one of the user's terms. The user's terms,
    expressions and fields all stay."""
    out = copy.deepcopy(dict(affinity or {}))
    required = out.setdefault("nodeAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = []
    for term in required.get("nodeSelectorTerms") or [{}]:
        if _steered(term, nodes):
            terms.append(term)
            continue
        for node in nodes:
            one = copy.deepcopy(term)
            one["matchFields"] = [*(one.get("matchFields") or ()), _requirement(node)]
            terms.append(one)
    required["nodeSelectorTerms"] = terms
    return out


def with_preferred_nodes(affinity: Mapping[str, Any] | None, nodes: Sequence[str]) -> dict[str, Any]:
    """A preferred term of weight 100 per node (a node matches one of them)."""
    out = copy.deepcopy(dict(affinity or {}))
    preferred = out.setdefault("nodeAffinity", {}).setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
    for node in nodes:
        term = {"weight": PREFERRED_WEIGHT, "preference": {"matchFields": [_requirement(node)]}}
        if term not in preferred:
            preferred.append(term)
    return out


def steer_to_nodes(obj: Mapping[str, Any], catalog: Catalog, nodes: Steering, *, mode: str = STEER_REQUIRED,
                   source: str | None = None, planned_for: str | None = None,
                   templates: Templates | None = None, counts: Counts | None = None,
                   in_place: bool = False) -> dict[str, Any]:
    """A copy of `obj` whose pod templates carry a node affinity to their planned `nodes`
    (see the module's docstring), and the `placer.dev/nodes` annotation recording them with
    `planned_for`, the `fingerprint` of the demand they were planned for. `pinned` without
    `counts` (a re-apply that kept only the nodes) is `required`: nothing could lift a gate.
    `in_place`: `obj` itself (a dict the caller owns) is changed and returned."""
    gate = mode == STEER_PINNED and bool(counts)
    if mode == STEER_OFF or not nodes:
        return dict(obj)
    t = templates or templates_of(obj, catalog, source)
    # instances that share one template (a LeaderWorkerSet without a leader template: its
    # leaders and workers both come from workerTemplate) get the union of their nodes, written
    # once: steering the template per instance would AND one's nodes with the other's
    by_path: dict[tuple[Any, ...], set[str]] = {}
    for inst, row in t.members.values():
        planned = nodes.get(inst.key) or ()
        path = target_path(row, "affinity") if planned else None
        if path is None or NOT_A_PATH in path:
            continue                  # no pod, or the definition gives no path: left to the scheduler
        by_path.setdefault(tuple(path), set()).update(planned)
    out = obj if in_place and isinstance(obj, dict) else copy.deepcopy(dict(obj))
    for at, on in by_path.items():
        affinity = _get(out, at)
        affinity = (with_required_nodes(affinity, sorted(on)) if mode in HOLDS
                    else with_preferred_nodes(affinity, sorted(on)))
        _set(out, at, affinity)
        if gate:                      # the pod spec holding the affinity holds the gates
            gates = [g for g in _get(out, (*at[:-1], "schedulingGates")) or () if g.get("name") != PIN_GATE]
            _set(out, (*at[:-1], "schedulingGates"), [*gates, {"name": PIN_GATE}])
    out.setdefault("metadata", {}).setdefault("annotations", {})[ANN_NODES] = annotation_value(
        nodes, planned_for, counts if gate else None)
    return out


def pinned(group: PlacementGroup, nodes: Mapping[WorkloadRef, Steering]) -> PlacementGroup:
    """`group` as its steered copies will be scheduled: each instance's pods held to its
    planned nodes (their required node affinity ANDed as `with_required_nodes` writes it). The
    daemon counts a create still in flight this way, so a round planned before the copy shows
    up on its cluster plans around exactly the nodes its pods will take."""
    def pin(w: Workload) -> Workload:
        planned = nodes.get(w.ref)
        if not planned:
            return w
        instances = []
        for inst in w.instances:
            on = planned.get(inst.key)
            if on:
                affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [dict(t) for t in inst.pod.affinity_terms]}}}
                terms = with_required_nodes(affinity, on)["nodeAffinity"][
                    "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                inst = dataclasses.replace(inst, pod=dataclasses.replace(inst.pod, affinity_terms=tuple(terms)))
            instances.append(inst)
        return dataclasses.replace(w, instances=tuple(instances))
    return dataclasses.replace(group, workloads=tuple(pin(w) for w in group.workloads))


# --- pinning: one planned node per pod (the daemon's placer/daemon/pin.py applies it) ----------

@dataclasses.dataclass(frozen=True)
class Seat:
    """A live pod of a pinned template: `node` it is bound or pinned to (None: neither),
    `gated` while it still carries the pin gate and no node."""

    name: str
    node: str | None
    gated: bool


def assign(counts: Mapping[str, int], pods: Sequence[Seat]) -> dict[str, str | None]:
    """For each gated pod of one template (by name), the planned node it is pinned to: the
    plan's `counts` per node less the template's pods bound or pinned there; the freest
    node first (ties by name), pods in name order. None when no planned node has room
    left (more pods than the plan: a pod the plan did not count is not pinned)."""
    left = dict(counts)
    for p in pods:
        if p.node is not None and p.node in left:
            left[p.node] -= 1
    out: dict[str, str | None] = {}
    for p in sorted((p for p in pods if p.gated and p.node is None), key=lambda p: p.name):
        free = [n for n in sorted(left) if left[n] > 0]
        node = max(free, key=lambda n: left[n]) if free else None
        if node is not None:
            left[node] -= 1
        out[p.name] = node
    return out


def is_gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == PIN_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def pin_patch(pod: Mapping[str, Any], node: str | None) -> dict[str, Any]:
    """The merge patch that lifts `pod`'s pin gate and, with a `node`, narrows its required
    node affinity to that node in the same request. A gated pod's node affinity may only be
    narrowed (KEP-3838: requirements added to its terms, none changed or removed, the number
    of terms kept), so `metadata.name In [node]` is ANDed into every term; terms naming other
    nodes then match none. Guarded by the pod's resourceVersion (a changed pod: 409)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    gates = [g for g in spec.get("schedulingGates") or () if g.get("name") != PIN_GATE]
    patch: dict[str, Any] = {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                             "spec": {"schedulingGates": gates or None}}
    if node is not None:
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        terms = []
        for term in required.get("nodeSelectorTerms") or [{}]:
            one = copy.deepcopy(dict(term))
            if _requirement(node) not in (one.get("matchFields") or ()):
                one["matchFields"] = [*(one.get("matchFields") or ()), _requirement(node)]
            terms.append(one)
        patch["metadata"]["annotations"] = {ANN_PINNED: node}
        patch["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    return patch
