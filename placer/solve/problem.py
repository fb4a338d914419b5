"""The problem as the solver sees it: groups of pod kinds, clusters of node classes, and
mutable free capacity per node with a best-fit search."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

from placer.model import reasons as R
from placer.model.errors import InputError
from placer.model.fleet import Cluster, Fleet
from placer.model.podspec import DEFAULT_GPU_RESOURCES
from placer.model.workload import Instance, PlacementGroup, PodShape, Workload
from placer.solve.policy import Policy, group_policy, policy_reason
from placer.solve.scheduling import (
    NodeClass,
    admitted,
    fits_resources,
    mismatch,
    node_classes,
    pod_demand,
    runtime_overhead,
)

GPU_RESOURCES = tuple(DEFAULT_GPU_RESOURCES)

UNLIMITED = 10**15                 # pod slots on nodes that declare no `pods` allocatable
MANY_CLASSES = 16                  # a pod that may use more classes is searched node by node
NODE_EXACT_MAX_NODES = 100         # up to this many nodes, every node is its own class (exact)


def gpus_of(demand: Mapping[str, int], names: Sequence[str] = GPU_RESOURCES) -> int:
    """GPUs of a demand or a free capacity: every resource name configured as a GPU."""
    return sum(demand.get(r, 0) for r in names)


def sort_key(demand: Mapping[str, int], names: Sequence[str] = GPU_RESOURCES) -> tuple:
    return (-gpus_of(demand, names), -demand.get("cpu", 0), -demand.get("memory", 0))


@dataclass
class Part:
    """One instance of one workload of a group: `pods` identical pods."""

    workload: Workload
    instance: Instance
    demand: dict[str, int]
    pred_key: tuple
    gpu: int
    sort_key: tuple = ()
    # (group index, part index) when a topology request covers these pods: a type of its own
    topo: tuple[int, int] | None = None

    @property
    def pods(self) -> int:
        return self.instance.pods


def _pred_key(shape: PodShape) -> tuple:
    return (tuple(sorted(shape.node_selector.items())), repr(shape.affinity_terms), repr(shape.tolerations),
            shape.runtime_class)


@dataclass
class GroupInfo:
    index: int
    group: PlacementGroup
    policy: Policy
    parts: list[Part]
    rank: int = 0
    eligible: list[int] = field(default_factory=list)
    static: dict[int, R.Reason] = field(default_factory=dict)   # why not on cluster (policy/statics)
    units: list = field(default_factory=list)     # topology requests (placer.solve.topology.Unit)

    @property
    def key(self) -> str:
        return self.group.key

    @property
    def gpus(self) -> int:
        return sum(p.gpu * p.pods for p in self.parts)

    @property
    def pods(self) -> int:
        return sum(p.pods for p in self.parts)

    @property
    def priority(self) -> int:
        return self.policy.priority


def _free(node) -> dict[str, int]:
    free = node.free_all()
    if "pods" not in node.allocatable:
        free["pods"] = UNLIMITED
    return free


class ClusterInfo:
    """A reachable cluster's nodes, classes and which classes each pod kind may use."""

    def __init__(self, index: int, cluster: Cluster, by_name: bool, gpu_names: Sequence[str] = GPU_RESOURCES):
        self.index = index
        self.gpu_names = tuple(gpu_names)
        self.cluster = cluster
        # cordoned nodes too: a pod that tolerates the cordon may go there (see `mismatch`)
        self.nodes = [n for n in cluster.nodes if n.ready]
        self.classes: list[NodeClass] = node_classes(self.nodes, by_name=by_name)
        pos = {n.name: i for i, n in enumerate(self.nodes)}
        self.class_nodes = [[pos[n.name] for n in k.nodes] for k in self.classes]
        self.class_free = [_free(k.sample) for k in self.classes]
        self._compat: dict[tuple, tuple[int, ...]] = {}
        self.statics: dict[tuple, R.Reason] = {}          # static reasons by pod kind (explain)
        self._pred: dict[tuple, tuple[int, ...]] = {}
        self.domains: dict[str, list[str | None]] = {}   # topology key -> domain per class

    def matching(self, part: Part) -> tuple[int, ...]:
        """Classes whose nodes pass the pods' selector, affinity and taint predicates."""
        got = self._pred.get(part.pred_key)
        if got is None:
            shape = self.shape(part)
            got = () if shape is None else tuple(k.index for k in self.classes if mismatch(shape, k.sample) is None)
            self._pred[part.pred_key] = got
        return got

    def shape(self, part: Part) -> PodShape | None:
        """The part's pods as this cluster's RuntimeClass admission leaves them (None: refused)."""
        return admitted(part.instance.pod, self.cluster.runtime_classes)

    def compat(self, part: Part) -> tuple[int, ...]:
        """Matching classes on whose (currently free) nodes one such pod fits."""
        key = (part.pred_key, tuple(sorted(part.demand.items())))
        got = self._compat.get(key)
        if got is None:
            got = tuple(k for k in self.matching(part) if fits_resources(part.demand, self.class_free[k]))
            self._compat[key] = got
        return got


class ClusterState:
    """Mutable free capacity per node of one cluster, indexed for best-fit search."""

    def __init__(self, info: ClusterInfo):
        self.info = info
        self.free = [dict(info.class_free[k]) for k in self._class_of_nodes()]
        self.gpu = [gpus_of(f, info.gpu_names) for f in self.free]
        self.buckets: list[dict[int, list[int]]] = []
        for k, members in enumerate(info.class_nodes):
            b: dict[int, list[int]] = {}
            for i in members:
                b.setdefault(self.gpu[i], []).append(i)
            self.buckets.append(b)
        self.node_class = [0] * len(info.nodes)
        for k, members in enumerate(info.class_nodes):
            for i in members:
                self.node_class[i] = k
        self.free_gpus = sum(self.gpu)
        # every node by free GPUs, in node order: the search when a pod may use many classes
        self.levels: dict[int, list[int]] = {}
        for i, lv in enumerate(self.gpu):
            self.levels.setdefault(lv, []).append(i)
        self._allowed: dict[tuple[int, ...], frozenset[int]] = {}

    def _class_of_nodes(self) -> list[int]:
        out = [0] * len(self.info.nodes)
        for k, members in enumerate(self.info.class_nodes):
            for i in members:
                out[i] = k
        return out

    def best_node(self, demand: Mapping[str, int], gpu: int, classes: Sequence[int]) -> int | None:
        """Best fit: the node left with the fewest free GPUs (fill partly used nodes first,
        keep whole nodes whole), then class preference order, then node order. When the pod
        may use many classes (nodes that differ, as live ones do): the fewest free GPUs, then
        node order, searched over all nodes at once."""
        if len(classes) > MANY_CLASSES:
            return self._best_node_many(demand, gpu, classes)
        best: tuple[int, int, int] | None = None
        for pos, k in enumerate(classes):
            b = self.buckets[k]
            for level in sorted(lv for lv in b if lv >= gpu):
                if best is not None and level > best[0]:
                    break
                hit = next((i for i in b[level] if fits_resources(demand, self.free[i])), None)
                if hit is not None:
                    cand = (level, pos, hit)
                    if best is None or cand < best:
                        best = cand
                    break
        return None if best is None else best[2]

    def allowed(self, classes: Sequence[int]) -> frozenset[int]:
        key = tuple(classes)
        got = self._allowed.get(key)
        if got is None:
            got = self._allowed[key] = frozenset(key)
        return got

    def _best_node_many(self, demand: Mapping[str, int], gpu: int, classes: Sequence[int]) -> int | None:
        ok = self.allowed(classes)
        for level in sorted(lv for lv in self.levels if lv >= gpu):
            for i in self.levels[level]:
                if self.node_class[i] in ok and fits_resources(demand, self.free[i]):
                    return i
        return None

    def _move(self, i: int, new_gpu: int) -> None:
        old = self.gpu[i]
        if old != new_gpu:
            for index in (self.buckets[self.node_class[i]], self.levels):
                lst = index[old]
                lst.remove(i)
                if not lst:
                    del index[old]
                # keep node order inside a bucket for deterministic first fit
                bisect.insort(index.setdefault(new_gpu, []), i)
            self.free_gpus += new_gpu - old
            self.gpu[i] = new_gpu

    def take(self, i: int, demand: Mapping[str, int]) -> None:
        f = self.free[i]
        for r, v in demand.items():
            f[r] = f.get(r, 0) - v
        self._move(i, gpus_of(f, self.info.gpu_names))

    def give(self, i: int, demand: Mapping[str, int]) -> None:
        f = self.free[i]
        for r, v in demand.items():
            f[r] = f.get(r, 0) + v
        self._move(i, gpus_of(f, self.info.gpu_names))


PodAssign = list[tuple[int, int]]          # (part index in group, node index in cluster)


def expand(g: GroupInfo) -> list[int]:
    """Pod list of a group as part indices, biggest pods first (first-fit decreasing)."""
    order = sorted(range(len(g.parts)), key=lambda j: (g.parts[j].sort_key, j))
    return [j for j in order for _ in range(g.parts[j].pods)]


def may_fit(st: ClusterState, g: GroupInfo) -> bool:
    """A cheap necessary condition: the cluster's GPUs in total, and for each pod kind enough
    GPU blocks of its size on the nodes it may use (CPU and memory aside)."""
    if g.gpus > st.free_gpus:
        return False
    need: dict[tuple, int] = {}
    for p in g.parts:
        if p.gpu:
            key = (st.info.compat(p), p.gpu)
            need[key] = need.get(key, 0) + p.pods
    for (classes, size), pods in need.items():
        if len(classes) > MANY_CLASSES:        # over all nodes: weaker, as necessary, cheaper
            have = sum(len(nodes) * (level // size) for level, nodes in st.levels.items() if level >= size)
        else:
            have = sum(len(nodes) * (level // size) for k in classes for level, nodes in st.buckets[k].items()
                       if level >= size)
        if have < pods:
            return False
    return True


def try_place(state: ClusterState, g: GroupInfo) -> PodAssign | None:
    """Place every pod of the group on this cluster or nothing (state unchanged then)."""
    if g.units:
        from placer.solve.topology import try_place_topology
        return try_place_topology(state, g)
    info = state.info
    if not may_fit(state, g):
        return None
    compat = [info.compat(p) for p in g.parts]
    if any(not c for c in compat):
        return None
    done: PodAssign = []
    for j in expand(g):
        part = g.parts[j]
        i = state.best_node(part.demand, part.gpu, compat[j])
        if i is None:
            for jj, ii in reversed(done):
                state.give(ii, g.parts[jj].demand)
            return None
        state.take(i, part.demand)
        done.append((j, i))
    return done


def undo(state: ClusterState, g: GroupInfo, assign: PodAssign) -> None:
    for j, i in reversed(assign):
        state.give(i, g.parts[j].demand)


@dataclass
class Problem:
    fleet: Fleet
    clusters: list[Cluster]
    infos: dict[int, ClusterInfo]               # reachable clusters only
    groups: list[GroupInfo]
    committed: list[tuple[GroupInfo, int]]
    gpu_names: tuple[str, ...] = GPU_RESOURCES
    node_exact: bool = False

    def state(self) -> dict[int, ClusterState]:
        return {c: ClusterState(info) for c, info in self.infos.items()}


def _group_info(index: int, group: PlacementGroup, names: Sequence[str] = GPU_RESOURCES) -> GroupInfo:
    parts = []
    for w in group.workloads:
        for inst in w.instances:
            if inst.pods <= 0:
                continue
            demand = pod_demand(inst.pod)
            parts.append(Part(w, inst, demand, _pred_key(inst.pod), gpus_of(demand, names), sort_key(demand, names)))
    g = GroupInfo(index, group, group_policy(group), parts)
    from placer.solve.topology import tag_parts
    tag_parts(g)
    return g


def _uses_match_fields(groups: Iterable[GroupInfo]) -> bool:
    return any(t.get("matchFields") for g in groups for p in g.parts for t in p.instance.pod.affinity_terms)


def prepare(fleet: Fleet, groups: Sequence[PlacementGroup],
            committed: Sequence[tuple[PlacementGroup, str]] = (),
            gpu_resources: Sequence[str] = GPU_RESOURCES, node_exact: bool | None = None) -> Problem:
    """`node_exact`: every node its own class, so the model constrains every resource per
    node (exact); by default when the fleet is small (NODE_EXACT_MAX_NODES)."""
    gpu_names = tuple(gpu_resources)
    ginfos = [_group_info(i, g, gpu_names) for i, g in enumerate(groups)]
    cinfos = [_group_info(len(ginfos) + i, g, gpu_names) for i, (g, _) in enumerate(committed)]
    if node_exact is None:
        node_exact = sum(len(cl.nodes) for cl in fleet.clusters if cl.reachable) <= NODE_EXACT_MAX_NODES
    by_name = node_exact or _uses_match_fields(ginfos + cinfos)
    clusters = list(fleet.clusters)
    from placer.solve.topology import missing_key, needs_node_classes
    infos = {c: ClusterInfo(c, cl, by_name or needs_node_classes(cl, ginfos + cinfos), gpu_names)
             for c, cl in enumerate(clusters) if cl.reachable}
    names = {cl.name: c for c, cl in enumerate(clusters)}
    for rank, g in enumerate(sorted(ginfos, key=lambda g: g.key)):
        g.rank = rank
    for g in ginfos:
        policy = [policy_reason(g, cl, names) for cl in clusters]
        missing = _runtime_classes(g, [clusters[c] for c in infos if policy[c] is None], gpu_names)
        for c, cl in enumerate(clusters):
            reason = policy[c] or missing.get(cl.name) or missing_key(g, cl)
            if reason is None and c in infos:
                from placer.solve.explain import static_reason
                reason = static_reason(g, infos[c])
            if reason is None:
                g.eligible.append(c)
            else:
                g.static[c] = reason
    com = []
    for g, (_, cname) in zip(cinfos, committed):
        if cname not in names:
            raise InputError(f"committed group {g.key} is on cluster {cname!r}, which is not in the fleet")
        _runtime_classes(g, [clusters[names[cname]]], gpu_names)
        com.append((g, names[cname]))
    return Problem(fleet, clusters, infos, ginfos, com, gpu_names, node_exact)


def _runtime_classes(g: GroupInfo, candidates: Sequence[Cluster], names: Sequence[str]) -> dict[str, R.Reason]:
    """Add to each part's demand the overhead its RuntimeClass puts on every pod: the
    largest among the candidate clusters (exact when there is one; never less than any).
    Clusters without that RuntimeClass come back with a reason (they refuse the pods)."""
    missing: dict[str, R.Reason] = {}
    for p in g.parts:
        extra: dict[str, int] = {}
        for cl in candidates:
            got = runtime_overhead(p.instance.pod, cl.runtime_classes)
            if got is None or admitted(p.instance.pod, cl.runtime_classes) is None:
                missing.setdefault(cl.name, _refused(p, cl))
            for r, v in (got or {}).items():
                extra[r] = max(extra.get(r, 0), v)
        if extra:
            p.demand = {r: p.demand.get(r, 0) + extra.get(r, 0) for r in {**p.demand, **extra}}
            p.gpu, p.sort_key = gpus_of(p.demand, names), sort_key(p.demand, names)
    return missing


def _refused(p: Part, cl: Cluster) -> R.Reason:
    shape = p.instance.pod
    rc = (cl.runtime_classes or {}).get(shape.runtime_class or "")
    clash = next((f"{k}={shape.node_selector[k]}" for k, v in (rc.node_selector if rc else {}).items()
                  if shape.node_selector.get(k, v) != v), "")
    return R.UnknownRuntimeClass(p.instance.key, shape.runtime_class or "", clash)




def rebase(problem: Problem, states: Mapping[int, ClusterState]) -> Problem:
    """The same problem on the fleet as left by the committed groups."""
    if not problem.committed:
        return problem
    clusters = list(problem.clusters)
    for c, st in states.items():
        cl = clusters[c]
        info = st.info
        nodes = []
        for i, node in enumerate(info.nodes):
            base_free = info.class_free[st.node_class[i]]
            used = dict(node.used)
            for r, v in base_free.items():
                taken = v - st.free[i].get(r, 0)
                if taken and r in node.allocatable:
                    used[r] = used.get(r, 0) + taken
            nodes.append(_replace_used(node, used))
        nodes += [n for n in cl.nodes if not n.ready]
        clusters[c] = replace(cl, nodes=tuple(nodes))
    fleet = Fleet(tuple(clusters), problem.fleet.taken_at)
    fresh = prepare(fleet, [g.group for g in problem.groups], gpu_resources=problem.gpu_names,
                    node_exact=problem.node_exact)
    fresh.committed = problem.committed
    return fresh


def _replace_used(node, used):
    return replace(node, used=used)

