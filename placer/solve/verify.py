"""The independent verifier: re-checks a plan against the fleet, pod by pod.

It shares nothing with the solver's model (no classes, no aggregates): it
walks the plan's concrete assignments and the fleet's nodes and asks the scheduling
predicates directly. Any disagreement is a solver bug and raises VerificationError.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NoReturn, Sequence

from placer.model.errors import VerificationError
from placer.model.fleet import Cluster, Fleet, Node
from placer.model.names import ANN_PIN, ANN_SELECTOR
from placer.model.plan import Placement, Plan
from placer.model.quota import add_usage, grows, overs, pool, violations, workload_usage
from placer.model.selectors import parse_label_selector, selector_matches
from placer.model.workload import Instance, PlacementGroup, Workload
from placer.solve.scheduling import admitted, mismatch, pod_demand, runtime_overhead
from placer.solve.storage import claims_of, storage_reason

UNLIMITED_PODS = 10**15
HOSTNAME = "kubernetes.io/hostname"


def _fail(msg: str, cluster: str | None = None, obj: str | None = None) -> NoReturn:
    raise VerificationError(f"plan rejected by verifier: {msg}", cluster=cluster, obj=obj)


def _check_policy(g: PlacementGroup, w: Workload, cluster_name: str, cluster_labels: Mapping[str, str]) -> None:
    ann = w.annotations or {}
    if cluster_name in g.excluded:
        _fail(f"group {g.key} is excluded from {cluster_name}", cluster_name, w.key)
    pin = g.pin or ann.get(ANN_PIN)           # the group's pin stands for its workloads' own
    if pin and str(pin).strip() != cluster_name:
        _fail(f"pinned to {pin} but placed on {cluster_name}", cluster_name, w.key)
    sel = ann.get(ANN_SELECTOR)
    if sel and not selector_matches(parse_label_selector(str(sel)), cluster_labels):
        _fail(f"cluster-selector {sel} does not match", cluster_name, w.key)


def verify(fleet: Fleet, groups: Sequence[PlacementGroup], plan: Plan,
           committed: Sequence[tuple[PlacementGroup, str]] = ()) -> None:
    workloads = {w.ref: (g, w) for g in groups for w in g.workloads}
    cwl = {w.ref: w for g, _ in committed for w in g.workloads}
    _ref = _ref_in([*workloads, *cwl])
    placed = {_ref(p): p for p in plan.placements}
    _check_coverage(groups, plan, workloads, placed, {_ref(u) for u in plan.unplaced})
    load: dict[tuple[str, str], tuple[Node, dict[str, int]]] = {}
    clusters = _by_name(fleet)
    for p in plan.placements:
        _check_placement(clusters, p, workloads[_ref(p)][1], load, policy=workloads[_ref(p)][0])
        _check_storage(clusters, p, workloads[_ref(p)][0])
    for p in plan.committed:
        if _ref(p) not in cwl:
            _fail("the plan names a committed workload that was not given", obj=p.workload)
        _check_placement(clusters, p, cwl[_ref(p)], load, policy=None)
    _check_load(load)
    counted = fleet.quotas is not None and fleet.quotas.counted is not None   # committed use given whole
    _check_quotas(fleet, [workloads[_ref(p)][1] for p in plan.placements],
                  [] if counted else [cwl[_ref(p)] for p in plan.committed])


def _check_quotas(fleet: Fleet, placed: Sequence[Workload], committed: Sequence[Workload]) -> None:
    """No fleet-wide quota (issue 23) is exceeded by the placed workloads, counted from their
    pods' requests on top of the committed ones' (or the use the caller counted): committed
    work already over a lowered limit may stay, new work may not add to it."""
    if not fleet.quotas:
        return
    quotas, pools = fleet.quotas, pool(fleet, fleet.quotas)
    base = workload_usage(quotas, [(w, _demand(w)) for w in committed])
    for q, u in (quotas.counted or {}).items():
        add_usage(base, q, u)
    for q, u in fleet.quota_held.items():     # held outside this solve (an options re-solve)
        add_usage(base, q, u)
    usage = {q: dict(u) for q, u in base.items()}
    for q, u in workload_usage(quotas, [(w, _demand(w)) for w in placed]).items():
        add_usage(usage, q, u)
    if grows(overs(quotas, base, pools), overs(quotas, usage, pools)):
        broken = violations(quotas, usage, pools)
        _fail(broken[0] if broken else "the plan adds to a quota over its limit")


def _demand(w: Workload) -> dict[str, int]:
    total: dict[str, int] = {}
    for inst in w.instances:
        for r, v in pod_demand(inst.pod).items():
            total[r] = total.get(r, 0) + v * max(0, inst.pods)
    return total


def _by_name(fleet: Fleet) -> dict[str, Cluster]:
    """The fleet's clusters by name, the first of a name as `Fleet.cluster` finds it (looked
    up once per node placed: issue 24, the linear search was a sixth of the verification)."""
    out: dict[str, Cluster] = {}
    for c in fleet.clusters:
        out.setdefault(c.name, c)
    return out


def _check_storage(clusters: Mapping[str, Cluster], p: Placement, g: PlacementGroup) -> None:
    """Every claim the group carries can bind on the cluster (placer.solve.storage)."""
    cluster = clusters.get(p.cluster)
    if cluster is None or cluster.storage_classes is None:
        return                # StorageClasses not known: no claim is judged (storage_reason), none walked
    why = storage_reason(claims_of(g), cluster, True)
    if why is not None:
        _fail(why.render(), p.cluster, p.workload)


def _check_coverage(groups: Sequence[PlacementGroup], plan: Plan, workloads: Mapping[Any, Any],
                    placed: Mapping[Any, Placement], unplaced: set) -> None:
    """Every workload asked for placed or unplaced, once; no group split across clusters."""
    if len(placed) != len(plan.placements):
        _fail("a workload is placed twice")
    for key in list(placed) + list(unplaced):
        if key not in workloads:
            _fail("the plan names a workload that was not asked for", obj=str(key))
    for key in workloads:
        if (key in placed) == (key in unplaced):
            _fail("every workload must be either placed or unplaced, once", obj=str(key))
    for g in groups:
        clusters = {placed[w.ref].cluster for w in g.workloads if w.ref in placed}
        if len(clusters) > 1 or (clusters and any(w.ref not in placed for w in g.workloads)):
            _fail(f"group {g.key} is split ({sorted(clusters)})", obj=g.key)


def _check_load(load: Mapping[tuple[str, str], tuple[Node, Mapping[str, int]]]) -> None:
    """No node asked for more than it has free (each node's requests tallied once, beside it)."""
    for (cname, nname), (node, used) in load.items():
        alloc, bound = node.allocatable, node.used
        for r, v in used.items():
            # Node.free, inline (issue 24: 165,000 calls at 4,000 workloads on 50,000 nodes)
            free = UNLIMITED_PODS if r == "pods" and r not in alloc else max(0, alloc.get(r, 0) - bound.get(r, 0))
            if v > free:
                _fail(f"node {nname} is over-committed on {r}: {v} requested, {free} free", cname)


def _ref_in(known) -> "Callable[[Any], Any]":
    """A plan entry's identity: its WorkloadRef; an entry made without one (by hand) is
    taken by its `ns/name` among the `known` refs."""
    by_short: dict[str, Any] = {}
    for r in known:
        by_short.setdefault(r.short, r)

    def ref(entry):
        return entry.ref if entry.ref is not None else by_short.get(entry.workload, entry.workload)
    return ref


def _node(clusters: Mapping[str, Cluster], cname: str, nname: str) -> Node:
    cluster = clusters.get(cname)
    return _named_node(_nodes(cluster.nodes) if cluster is not None else {}, cname, nname)


def _named_node(nodes: Mapping[str, Node], cname: str, nname: str) -> Node:
    node = nodes.get(nname)
    if node is None:
        _fail(f"node {nname} does not exist", cname)
    return node


def _nodes(nodes: tuple[Node, ...]) -> dict[str, Node]:
    """A cluster's nodes by name, built once per nodes tuple (frozen: a daemon's unchanged
    cluster keeps its tuple from round to round, and its index with it)."""
    index = _BY_NAME.get(id(nodes))
    if index is None or index[0] is not nodes:
        if len(_BY_NAME) > 256:
            _BY_NAME.clear()
        index = _BY_NAME[id(nodes)] = (nodes, {n.name: n for n in nodes})
    return index[1]


_BY_NAME: dict[int, tuple[tuple[Node, ...], dict[str, Node]]] = {}


def _check_placement(clusters: Mapping[str, Cluster], p: Placement, w: Workload, load,
                     policy: PlacementGroup | None) -> None:
    """`policy`: the group whose pins, exclusions and selectors apply (None: committed work)."""
    cluster = clusters.get(p.cluster)
    if cluster is None:
        _fail("placed on a cluster that is not in the fleet", p.cluster, w.key)
    if not cluster.reachable:
        _fail(f"placed on an unreachable cluster ({cluster.error})", p.cluster, w.key)
    if policy is not None:
        _check_policy(policy, w, cluster.name, cluster.labels)
    instances = {i.key: i for i in w.instances}
    demands: dict[str, dict[str, int]] = {}      # one pod's admitted requests per instance
    counts: dict[str, int] = {}
    nodes = _nodes(cluster.nodes)
    for nname, per in p.nodes.items():
        node, slot = _tally(load, nodes, p.cluster, nname)
        for ikey, n in per.items():
            inst = instances.get(ikey)
            if inst is None:
                _fail(f"unknown instance {ikey}", p.cluster, w.key)
            if n <= 0:
                _fail(f"non-positive pod count for {ikey} on {nname}", p.cluster, w.key)
            _check_pods(cluster, node, inst, w)
            counts[ikey] = counts.get(ikey, 0) + n
            demand = demands.get(ikey)
            if demand is None:
                demand = demands[ikey] = _admitted_demand(cluster, inst, w)
            for r, v in demand.items():
                slot[r] = slot.get(r, 0) + v * n
    for ikey, inst in instances.items():
        if counts.get(ikey, 0) != inst.pods:
            _fail(f"{ikey} has {counts.get(ikey, 0)} pods assigned, needs {inst.pods}", p.cluster, w.key)
    _check_topology(clusters, p, w)


def _tally(load, nodes: Mapping[str, Node], cname: str, nname: str) -> tuple[Node, dict[str, int]]:
    """The node (it must exist) and the requests the plan puts on it so far."""
    got = load.get((cname, nname))
    if got is None:
        got = load[(cname, nname)] = (_named_node(nodes, cname, nname), {})
    return got


def _check_pods(cluster: Cluster, node: Node, inst: Instance, w: Workload) -> None:
    """The instance's pods pass the cluster's RuntimeClass admission and the node's predicates."""
    shape = admitted(inst.pod, cluster.runtime_classes)
    if shape is None:
        _fail(f"pods of {inst.key} are refused by the cluster's RuntimeClass admission", cluster.name, w.key)
    why = mismatch(shape, node)
    if why is not None:
        _fail(f"pods of {inst.key} cannot run on {node.name} ({why})", cluster.name, w.key)


def _admitted_demand(cluster: Cluster, inst: Instance, w: Workload) -> dict[str, int]:
    """One pod's requests with the overhead the admission gives it."""
    extra = runtime_overhead(inst.pod, cluster.runtime_classes)
    if extra is None:
        _fail(f"pods of {inst.key} use RuntimeClass {inst.pod.runtime_class}, which the cluster does not have",
              cluster.name, w.key)
    demand = pod_demand(inst.pod)
    for r, v in extra.items():              # the pods the admission gives the overhead
        demand[r] = demand.get(r, 0) + v
    return demand


def _check_topology(clusters: Mapping[str, Cluster], p: Placement, w: Workload) -> None:
    """Each required topology request: the pods it covers on nodes sharing one value of its
    key (the node's label; a node's host is its name when it carries no host label)."""
    for gang in w.gangs:
        members = {f"{c}/{i}" for c, i, _ in gang.members}
        for req in gang.topology:
            if not req.required:
                continue
            covered = {k for k in members if req.covers(*k.split("/", 1))}
            values = set()
            for nname, per in p.nodes.items():
                if covered & set(per):
                    node = _node(clusters, p.cluster, nname)
                    values.add(node.labels.get(req.key) or (nname if req.key == HOSTNAME else None))
            if len(values) > 1 or None in values:
                _fail(f"gang {gang.name} requires one {req.key} but uses {sorted(map(str, values))}",
                      p.cluster, w.key)
