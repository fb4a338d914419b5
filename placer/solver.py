"""Gang-aware placement of placement groups onto clusters: CP-SAT over node classes.

Pure: a fleet snapshot and pending groups in, a verified `Plan` out.

How it scales by structure rather than brute force:
- nodes with identical free capacity, labels and taints form a class; pods of identical
  requests and predicates form a type; CP-SAT decides group -> cluster (one bool per
  eligible pair) and how many pods of each type go to each class;
- per class, GPUs are constrained exactly: when the GPU sizes landing there form a
  divisibility chain (1, 2, 4, 8) by "block" constraints (for each size s, pods of size
  >= s use at most N * floor(F/s) blocks of s, which first-fit-decreasing then realises);
  otherwise by node patterns (multisets of sizes that fit one node); CPU, memory and pod
  slots are aggregate constraints plus a per-pod limit per node;
- the aggregate answer is decoded into concrete pod -> node assignments (first-fit
  decreasing with best fit inside classes); a group whose pods do not decode (possible
  only through CPU/memory interplay) is moved or dropped, and the plan is no longer
  called optimal;
- a node-level greedy first-fit-decreasing plan seeds the solver as a hint and is the
  fallback at timeout; the better of the two (lexicographically) is returned;
- the objective is lexicographic, solved in stages: per priority level (highest first)
  maximise GPUs placed (then workloads placed), fixing each level's value before the next;
  then minimise whole nodes broken open, then (small models) a tie-break by cluster order
  then name;
- determinism: CP-SAT runs its interleaved search (a fixed set of subsolvers in batches of
  fixed size, results exchanged only between batches) and each stage stops on deterministic
  time (`effort`), so the same input gives the same plan whatever the thread count or the
  machine's load; the wall-clock `time_limit` is only a safety net (a plan it cuts short is
  flagged `time_limit_hit` and may differ between runs);
- every plan goes through `placer.verify` before it is returned.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from itertools import combinations_with_replacement
from typing import Callable, Iterable, Mapping, Sequence

# the native model and solver of CP-SAT: `cp_model` would import pandas (~0.5 s per run)
from ortools.sat.python import cp_model_helper as cmh

from . import reasons as R
from .errors import InputError
from .fleet import Cluster, Fleet
from .names import ANN_CLUSTER, ANN_PRIORITY, ANN_SELECTOR  # noqa: F401 (re-exported)
from .plan import Placement, Plan, Summary, Unplaced
from .podspec import DEFAULT_GPU_RESOURCES
from .scheduling import (
    NodeClass,
    Requirement,
    describe_constraints,
    fits_resources,
    matches_affinity,
    matches_node_selector,
    mismatch,
    node_classes,
    parse_label_selector,
    pod_demand,
    selector_matches,
    untolerated_taints,
)
from .workload import Instance, PlacementGroup, PodShape, Workload

GPU_RESOURCES = tuple(DEFAULT_GPU_RESOURCES)
UNLIMITED = 10**15                 # pod slots on nodes that declare no `pods` allocatable
MAX_PATTERNS = 400                 # beyond that a class keeps only necessary GPU constraints
DEFAULT_WORKERS = max(1, min(8, os.cpu_count() or 1))
# the search configuration, fixed so that the plan does not depend on the thread count
SEARCH_SUBSOLVERS = 4
SEARCH_BATCH = 4                   # tasks per synchronised batch: the effort limit's granularity
DEFAULT_EFFORT = 1.0               # CP-SAT deterministic time for all stages together
POLISH_MAX_VARS = 1500             # larger models skip the tie-break stage

Progress = Callable[[str], None]


# --- policy from annotations --------------------------------------------------------------

@dataclass(frozen=True)
class Policy:
    priority: int
    pin: str | None
    pins: tuple[tuple[str, str], ...]                      # (workload, cluster) as annotated
    selectors: tuple[tuple[str, tuple[Requirement, ...]], ...]

    @property
    def conflicting(self) -> bool:
        return len({c for _, c in self.pins}) > 1


def group_policy(group: PlacementGroup) -> Policy:
    """A group takes the strictest of its workloads: the highest priority, every selector,
    the pin they agree on."""
    priority, pins, selectors = None, [], []
    for w in group.workloads:
        ann = w.annotations or {}
        if ANN_PRIORITY in ann:
            try:
                p = int(str(ann[ANN_PRIORITY]).strip())
            except ValueError:
                raise InputError(f"annotation {ANN_PRIORITY}: {ann[ANN_PRIORITY]!r} is not an integer",
                                 obj=w.key, source=w.source) from None
            priority = p if priority is None else max(priority, p)
        if ann.get(ANN_CLUSTER):
            pins.append((w.key, str(ann[ANN_CLUSTER]).strip()))
        if ann.get(ANN_SELECTOR):
            text = str(ann[ANN_SELECTOR]).strip()
            try:
                selectors.append((text, parse_label_selector(text)))
            except InputError as e:
                raise InputError(f"annotation {ANN_SELECTOR}: {e.message}", obj=w.key, source=w.source) from None
    pin = pins[0][1] if pins and len({c for _, c in pins}) == 1 else None
    return Policy(priority or 0, pin, tuple(pins), tuple(dict.fromkeys(selectors)))


# --- problem preparation --------------------------------------------------------------------

def _gpus(demand: Mapping[str, int], names: Sequence[str] = GPU_RESOURCES) -> int:
    """GPUs of a demand or a free capacity: every resource name configured as a GPU."""
    return sum(demand.get(r, 0) for r in names)


def _sort_key(demand: Mapping[str, int], names: Sequence[str] = GPU_RESOURCES) -> tuple:
    return (-_gpus(demand, names), -demand.get("cpu", 0), -demand.get("memory", 0))


@dataclass
class Part:
    """One instance of one workload of a group: `pods` identical pods."""

    workload: Workload
    instance: Instance
    demand: dict[str, int]
    pred_key: tuple
    gpu: int
    sort_key: tuple = ()

    @property
    def pods(self) -> int:
        return self.instance.pods


def _pred_key(shape: PodShape) -> tuple:
    return (tuple(sorted(shape.node_selector.items())), repr(shape.affinity_terms), repr(shape.tolerations))


@dataclass
class GroupInfo:
    index: int
    group: PlacementGroup
    policy: Policy
    parts: list[Part]
    rank: int = 0
    eligible: list[int] = field(default_factory=list)
    static: dict[int, R.Reason] = field(default_factory=dict)   # why not on cluster (policy/statics)

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
        self.nodes = [n for n in cluster.nodes if n.schedulable]
        self.classes: list[NodeClass] = node_classes(self.nodes, by_name=by_name)
        pos = {n.name: i for i, n in enumerate(self.nodes)}
        self.class_nodes = [[pos[n.name] for n in k.nodes] for k in self.classes]
        self.class_free = [_free(k.sample) for k in self.classes]
        self._compat: dict[tuple, tuple[int, ...]] = {}
        self._pred: dict[tuple, tuple[int, ...]] = {}

    def matching(self, part: Part) -> tuple[int, ...]:
        """Classes whose nodes pass the pods' selector, affinity and taint predicates."""
        got = self._pred.get(part.pred_key)
        if got is None:
            shape = part.instance.pod
            got = tuple(k.index for k in self.classes if mismatch(shape, k.sample) is None)
            self._pred[part.pred_key] = got
        return got

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
        self.gpu = [_gpus(f, info.gpu_names) for f in self.free]
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

    def _class_of_nodes(self) -> list[int]:
        out = [0] * len(self.info.nodes)
        for k, members in enumerate(self.info.class_nodes):
            for i in members:
                out[i] = k
        return out

    def best_node(self, demand: Mapping[str, int], gpu: int, classes: Sequence[int]) -> int | None:
        """Best fit: the node left with the fewest free GPUs (fill partly used nodes first,
        keep whole nodes whole), then class preference order, then node order."""
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

    def _move(self, i: int, new_gpu: int) -> None:
        b = self.buckets[self.node_class[i]]
        old = self.gpu[i]
        if old != new_gpu:
            lst = b[old]
            lst.remove(i)
            if not lst:
                del b[old]
            dst = b.setdefault(new_gpu, [])
            # keep node order inside a bucket for deterministic first fit
            lo, hi = 0, len(dst)
            while lo < hi:
                mid = (lo + hi) // 2
                if dst[mid] < i:
                    lo = mid + 1
                else:
                    hi = mid
            dst.insert(lo, i)
            self.free_gpus += new_gpu - old
            self.gpu[i] = new_gpu

    def take(self, i: int, demand: Mapping[str, int]) -> None:
        f = self.free[i]
        for r, v in demand.items():
            f[r] = f.get(r, 0) - v
        self._move(i, _gpus(f, self.info.gpu_names))

    def give(self, i: int, demand: Mapping[str, int]) -> None:
        f = self.free[i]
        for r, v in demand.items():
            f[r] = f.get(r, 0) + v
        self._move(i, _gpus(f, self.info.gpu_names))


PodAssign = list[tuple[int, int]]          # (part index in group, node index in cluster)


def _expand(g: GroupInfo) -> list[int]:
    """Pod list of a group as part indices, biggest pods first (first-fit decreasing)."""
    order = sorted(range(len(g.parts)), key=lambda j: (g.parts[j].sort_key, j))
    return [j for j in order for _ in range(g.parts[j].pods)]


def try_place(state: ClusterState, g: GroupInfo) -> PodAssign | None:
    """Place every pod of the group on this cluster or nothing (state unchanged then)."""
    info = state.info
    if g.gpus > state.free_gpus:
        return None
    compat = [info.compat(p) for p in g.parts]
    if any(not c for c in compat):
        return None
    done: PodAssign = []
    for j in _expand(g):
        part = g.parts[j]
        i = state.best_node(part.demand, part.gpu, compat[j])
        if i is None:
            for jj, ii in reversed(done):
                state.give(ii, g.parts[jj].demand)
            return None
        state.take(i, part.demand)
        done.append((j, i))
    return done


def _undo(state: ClusterState, g: GroupInfo, assign: PodAssign) -> None:
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

    def state(self) -> dict[int, ClusterState]:
        return {c: ClusterState(info) for c, info in self.infos.items()}


def _group_info(index: int, group: PlacementGroup, names: Sequence[str] = GPU_RESOURCES) -> GroupInfo:
    parts = []
    for w in group.workloads:
        for inst in w.instances:
            if inst.pods <= 0:
                continue
            demand = pod_demand(inst.pod)
            parts.append(Part(w, inst, demand, _pred_key(inst.pod), _gpus(demand, names), _sort_key(demand, names)))
    return GroupInfo(index, group, group_policy(group), parts)


def _uses_match_fields(groups: Iterable[GroupInfo]) -> bool:
    return any(t.get("matchFields") for g in groups for p in g.parts for t in p.instance.pod.affinity_terms)


def prepare(fleet: Fleet, groups: Sequence[PlacementGroup],
            committed: Sequence[tuple[PlacementGroup, str]] = (),
            gpu_resources: Sequence[str] = GPU_RESOURCES) -> Problem:
    gpu_names = tuple(gpu_resources)
    ginfos = [_group_info(i, g, gpu_names) for i, g in enumerate(groups)]
    cinfos = [_group_info(len(ginfos) + i, g, gpu_names) for i, (g, _) in enumerate(committed)]
    by_name = _uses_match_fields(ginfos + cinfos)
    clusters = list(fleet.clusters)
    infos = {c: ClusterInfo(c, cl, by_name, gpu_names) for c, cl in enumerate(clusters) if cl.reachable}
    names = {cl.name: c for c, cl in enumerate(clusters)}
    for rank, g in enumerate(sorted(ginfos, key=lambda g: g.key)):
        g.rank = rank
    for g in ginfos:
        for c, cl in enumerate(clusters):
            reason = _policy_reason(g, cl, names)
            if reason is None and c in infos:
                reason = _static_reason(g, infos[c])
            if reason is None:
                g.eligible.append(c)
            else:
                g.static[c] = reason
    com = []
    for g, (_, cname) in zip(cinfos, committed):
        if cname not in names:
            raise InputError(f"committed group {g.key} is on cluster {cname!r}, which is not in the fleet")
        com.append((g, names[cname]))
    return Problem(fleet, clusters, infos, ginfos, com, gpu_names)


def _policy_reason(g: GroupInfo, cl: Cluster, names: Mapping[str, int]) -> R.Reason | None:
    pol = g.policy
    if pol.conflicting:
        return R.ConflictingPins(pol.pins)
    if pol.pin is not None:
        if pol.pin not in names:
            return R.UnknownPin(pol.pin)
        if pol.pin != cl.name:
            return R.PinnedElsewhere(pol.pin)
    for text, reqs in pol.selectors:
        if not selector_matches(reqs, cl.labels):
            return R.ExcludedBySelector(text)
    if not cl.reachable:
        return R.Unreachable(cl.error or "unknown error")
    return None


def _static_reason(g: GroupInfo, info: ClusterInfo) -> R.Reason | None:
    """Reasons that hold even on an empty cluster: no matching node, pod too large."""
    if not info.classes:
        return R.NoSchedulableNodes()
    for p in g.parts:
        if info.compat(p):
            continue
        # nodes with room for one such pod: if there are some, predicates keep it off them
        roomy = [k.index for k in info.classes if fits_resources(p.demand, info.class_free[k.index])]
        if roomy or not info.matching(p):
            return _no_match(p, info, roomy or None)
        return _too_large(p, info)
    return None


def _no_match(p: Part, info: ClusterInfo, among: Sequence[int] | None = None) -> R.Reason:
    shape = p.instance.pod
    samples = [k.sample for k in info.classes if among is None or k.index in among]
    sel_ok = [n for n in samples if matches_node_selector(shape.node_selector, n.labels)]
    aff_ok = [n for n in sel_ok if matches_affinity(shape.affinity_terms, n)]
    if aff_ok:
        t = untolerated_taints(shape.tolerations, aff_ok[0].taints)[0]
        return R.NoMatchingNodes(p.instance.key, "taint", f"{t.key}={t.value}:{t.effect}" if t.value
                                 else f"{t.key}:{t.effect}")
    if sel_ok:
        return R.NoMatchingNodes(p.instance.key, "affinity", describe_constraints(
            PodShape(requests={}, affinity_terms=shape.affinity_terms)))
    return R.NoMatchingNodes(p.instance.key, "nodeSelector",
                             ",".join(f"{k}={v}" for k, v in sorted(shape.node_selector.items())))


def _too_large(p: Part, info: ClusterInfo) -> R.Reason:
    matching = info.matching(p)
    order = sorted(p.demand, key=lambda r: (r not in info.gpu_names, r != "cpu", r != "memory", r))
    for r in order:
        largest = max(info.class_free[k].get(r, 0) for k in matching)
        if p.demand[r] > largest:
            alloc = max(info.classes[k].sample.allocatable.get(r, 0) for k in matching)
            if p.demand[r] > alloc:
                return R.PodTooLarge(p.instance.key, r, p.demand[r], alloc, describe_constraints(p.instance.pod))
            return R.InsufficientCapacity(p.pods, r, p.demand[r], describe_constraints(p.instance.pod),
                                          largest, sum(info.class_free[k].get(r, 0) * info.classes[k].size
                                                       for k in matching))
    return R.NoSchedulableNodes()  # pragma: no cover - compat() empty implies a resource exceeds


# --- greedy first-fit decreasing ------------------------------------------------------------

def greedy_order(groups: Iterable[GroupInfo]) -> list[GroupInfo]:
    return sorted(groups, key=lambda g: (-g.priority, -g.gpus, -g.pods, g.key))


def greedy(problem: Problem, states: dict[int, ClusterState], groups: Iterable[GroupInfo] | None = None,
           ) -> dict[int, tuple[int, PodAssign]]:
    """Node-level greedy: biggest (and highest priority) groups first, each on the first
    cluster in file order where all its pods fit."""
    out: dict[int, tuple[int, PodAssign]] = {}
    for g in greedy_order(problem.groups if groups is None else groups):
        for c in g.eligible:
            assign = try_place(states[c], g)
            if assign is not None:
                out[g.index] = (c, assign)
                break
    return out


# --- aggregate model ------------------------------------------------------------------------

def _is_chain(sizes: Sequence[int]) -> bool:
    return all(b % a == 0 for a, b in zip(sizes, sizes[1:]))


def _patterns(sizes: Sequence[int], cap: int) -> list[dict[int, int]] | None:
    """Maximal multisets of sizes fitting one node of `cap` GPUs (None if too many)."""
    out: list[dict[int, int]] = []
    max_items = cap // min(sizes)
    for n in range(max_items, 0, -1):
        for combo in combinations_with_replacement(sizes, n):
            if sum(combo) <= cap and cap - sum(combo) < min(sizes):
                counts: dict[int, int] = {}
                for s in combo:
                    counts[s] = counts.get(s, 0) + 1
                out.append(counts)
                if len(out) > MAX_PATTERNS:
                    return None
    # non-maximal fills are dominated: a maximal pattern's counts cover them
    return out


@dataclass
class Agg:
    """The aggregate model as plain data, emitted to CP-SAT (or to an LP for the bound)."""

    lb: list[int] = field(default_factory=list)
    ub: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    cons: list[tuple[list[tuple[int, int]], int, int]] = field(default_factory=list)  # terms, lo, hi
    # interchangeable groups (same pods, predicates, priority, eligibility) share one
    # count variable per cluster: z[(signature, cluster)] = how many of them go there
    sigs: list["Sig"] = field(default_factory=list)
    sig_of: dict[int, int] = field(default_factory=dict)               # group index -> signature
    z: dict[tuple[int, int], int] = field(default_factory=dict)
    n: dict[tuple[int, tuple, int], int] = field(default_factory=dict)  # (cluster, type, class) -> var
    n_expr: dict[tuple[int, tuple, int], list[tuple[int, int]]] = field(default_factory=dict)
    opens: list[int] = field(default_factory=list)
    open_defs: list[tuple[int, list[tuple[int, int]], int]] = field(default_factory=list)  # var, terms, F
    pattern_defs: list[tuple[int, int, str, list[dict[int, int]], list[int]]] = field(default_factory=list)

    def var(self, name: str, lb: int, ub: int) -> int:
        self.lb.append(lb)
        self.ub.append(ub)
        self.names.append(name)
        return len(self.lb) - 1

    def add(self, terms: list[tuple[int, int]], lo: int, hi: int) -> None:
        self.cons.append((terms, lo, hi))


INF = 2**62


@dataclass
class Sig:
    index: int
    groups: list[GroupInfo]               # by name
    pods: dict[tuple, int]                # (demand, predicates) -> pods of one group

    @property
    def rep(self) -> GroupInfo:
        return self.groups[0]


def signatures(groups: Sequence[GroupInfo]) -> list[Sig]:
    by: dict[tuple, Sig] = {}
    for g in sorted(groups, key=lambda g: g.rank):
        pods: dict[tuple, int] = {}
        for p in g.parts:
            key = (tuple(sorted(p.demand.items())), p.pred_key)
            pods[key] = pods.get(key, 0) + p.pods
        key = (g.priority, tuple(g.eligible), tuple(sorted(pods.items())))
        if key not in by:
            by[key] = Sig(len(by), [], pods)
        by[key].groups.append(g)
    return list(by.values())


def part_type(info: ClusterInfo, p: Part) -> tuple:
    """A pod kind on a cluster: its demand and the classes it may use."""
    return (tuple(sorted(p.demand.items())), info.compat(p))


def build_aggregate(problem: Problem, groups: Sequence[GroupInfo]) -> Agg:
    agg = Agg()
    agg.sigs = signatures(groups)
    for sg in agg.sigs:
        m = len(sg.groups)
        for g in sg.groups:
            agg.sig_of[g.index] = sg.index
        for c in sg.rep.eligible:
            agg.z[(sg.index, c)] = agg.var(f"z_{sg.index}_{c}", 0, m)
        if len(sg.rep.eligible) > 1:
            agg.add([(1, agg.z[(sg.index, c)]) for c in sg.rep.eligible], 0, m)
    for c, info in problem.infos.items():
        # pod types on this cluster: demand + the classes they may use
        dem: dict[tuple, list[tuple[int, int]]] = {}
        tdemand: dict[tuple, dict[str, int]] = {}
        bound: dict[tuple, int] = {}
        for sg in agg.sigs:
            if (sg.index, c) not in agg.z:
                continue
            per: dict[tuple, int] = {}
            for p in sg.rep.parts:
                t = part_type(info, p)
                per[t] = per.get(t, 0) + p.pods
                tdemand[t] = p.demand
            for t, cnt in per.items():
                dem.setdefault(t, []).append((cnt, agg.z[(sg.index, c)]))
                bound[t] = bound.get(t, 0) + cnt * len(sg.groups)
        per_class: dict[int, list[tuple[tuple, list[tuple[int, int]], int]]] = {}
        for t in sorted(dem, key=lambda t: (_sort_key(tdemand[t], info.gpu_names), t)):
            terms = dem[t]
            total = bound[t]
            classes = t[1]
            if len(classes) == 1:
                per_class.setdefault(classes[0], []).append((t, terms, total))
                agg.n_expr[(c, t, classes[0])] = terms
                continue
            split = []
            for k in classes:
                ub = min(total, _max_per_class(tdemand[t], info, k))
                v = agg.var(f"n_{c}_{k}", 0, ub)
                agg.n[(c, t, k)] = v
                agg.n_expr[(c, t, k)] = [(1, v)]
                split.append((1, v))
                per_class.setdefault(k, []).append((t, [(1, v)], ub))
            agg.add(split + [(-cnt, x) for cnt, x in terms], 0, 0)
        for k, items in per_class.items():
            _class_constraints(agg, info, c, k, items, tdemand)
    return agg


def _max_per_class(demand: Mapping[str, int], info: ClusterInfo, k: int) -> int:
    free = info.class_free[k]
    per_node = min((free.get(r, 0) // v for r, v in demand.items() if v), default=UNLIMITED)
    return per_node * info.classes[k].size


def _class_constraints(agg: Agg, info: ClusterInfo, c: int, k: int, items, tdemand) -> None:
    size = info.classes[k].size
    free = info.class_free[k]
    # per pod kind: at most what fits on the class's nodes by itself
    for t, terms, ub in items:
        cap = _max_per_class(tdemand[t], info, k)
        if ub > cap:
            agg.add(list(terms), 0, cap)
    # aggregate non-GPU resources (skipped when they cannot bind)
    resources = sorted({r for t, _, _ in items for r in tdemand[t] if r not in info.gpu_names})
    for r in resources:
        cap = free.get(r, 0) * size
        terms = [(tdemand[t].get(r, 0) * a, v) for t, ts, _ in items for a, v in ts if tdemand[t].get(r, 0)]
        if sum(tdemand[t].get(r, 0) * ub for t, _, ub in items) > cap:
            agg.add(terms, 0, cap)
    for r in info.gpu_names:
        F = free.get(r, 0)
        sized = [(tdemand[t].get(r, 0), ts, ub) for t, ts, ub in items if tdemand[t].get(r, 0)]
        if not sized or F <= 0:
            continue
        sizes = sorted({s for s, _, _ in sized})
        if sum(s * ub for s, _, ub in sized) <= F * size and max(sizes) * 2 > F and len(sizes) == 1:
            pass  # one size, each node takes at most one: the per-kind cap above is exact
        if _is_chain(sizes):
            for s in sizes:
                terms = [((sz // s) * a, v) for sz, ts, _ in sized if sz >= s for a, v in ts]
                cap = size * (F // s)
                if sum((sz // s) * ub for sz, _, ub in sized if sz >= s) > cap:
                    agg.add(terms, 0, cap)
        else:
            pats = _patterns(sizes, F)
            # necessary constraints always; patterns make them exact when enumerable
            for s in sizes:
                terms = [(a, v) for sz, ts, _ in sized if sz >= s for a, v in ts]
                agg.add(terms, 0, size * (F // s))
            agg.add([(sz * a, v) for sz, ts, _ in sized for a, v in ts], 0, size * F)
            if pats is not None:
                ys = [agg.var(f"y_{c}_{k}_{i}", 0, size) for i in range(len(pats))]
                agg.pattern_defs.append((c, k, r, pats, ys))
                agg.add([(1, y) for y in ys], 0, size)
                for s in sizes:
                    terms = [(a, v) for sz, ts, _ in sized if sz == s for a, v in ts]
                    agg.add(terms + [(-p.get(s, 0), y) for p, y in zip(pats, ys) if p.get(s, 0)], -INF, 0)
        if info.classes[k].sample.used.get(r, 0) == 0:
            # a whole-node class: count the nodes broken open (fragmentation)
            o = agg.var(f"open_{c}_{k}", 0, size)
            used_terms = [(sz * a, v) for sz, ts, _ in sized for a, v in ts]
            agg.add(used_terms + [(-F, o)], -INF, 0)
            agg.open_defs.append((o, used_terms, F))
            agg.opens.append(o)


# --- CP-SAT driver --------------------------------------------------------------------------

@dataclass
class Solution:
    values: list[int]
    status: str                      # optimal | feasible
    timed_out: bool = False          # the wall-clock limit (not the effort) ended a stage


def _to_cpsat(agg: Agg):
    """The aggregate model as a CP-SAT model proto (variable i = agg variable i)."""
    m = cmh.CpModelProto()
    for lo, hi, name in zip(agg.lb, agg.ub, agg.names):
        v = m.variables.add()
        v.name = name
        v.domain.extend([lo, hi])
    for terms, lo, hi in agg.cons:
        _linear(m, terms, lo, hi)
    return m


def _linear(m, terms: Sequence[tuple[int, int]], lo: int, hi: int) -> None:
    coeffs: dict[int, int] = {}
    for a, v in terms:
        coeffs[v] = coeffs.get(v, 0) + a
    lin = m.constraints.add().linear
    lin.vars.extend(list(coeffs))
    lin.coeffs.extend(list(coeffs.values()))
    lin.domain.extend([max(lo, -INF), min(hi, INF)])


def _objective(m, terms: Sequence[tuple[int, int]], maximize: bool) -> None:
    """CP-SAT minimises: a maximised objective is negated."""
    m.clear_objective()
    coeffs: dict[int, int] = {}
    for a, v in terms:
        coeffs[v] = coeffs.get(v, 0) + (-a if maximize else a)
    m.objective.vars.extend(list(coeffs))
    m.objective.coeffs.extend(list(coeffs.values()))


def _values_from(agg: Agg, assignment: Mapping[int, tuple[int, PodAssign]], problem: Problem,
                 states_nodes: Mapping[int, ClusterState]) -> list[int]:
    """A full assignment of the aggregate variables from a node-level plan (for hints)."""
    vals = [0] * len(agg.lb)
    by_idx = {g.index: g for g in problem.groups}
    counts: dict[tuple[int, tuple, int], int] = {}
    for gi, (c, pods) in assignment.items():
        if gi not in agg.sig_of:
            continue
        vals[agg.z[(agg.sig_of[gi], c)]] += 1
        st = states_nodes[c]
        g = by_idx[gi]
        for j, i in pods:
            key = (c, part_type(st.info, g.parts[j]), st.node_class[i])
            counts[key] = counts.get(key, 0) + 1
    for key, v in agg.n.items():
        vals[v] = counts.get(key, 0)
    for o, terms, F in agg.open_defs:
        vals[o] = -(-sum(a * vals[v] for a, v in terms) // F)
    for c, k, r, pats, ys in agg.pattern_defs:
        # each node's multiset of GPU sizes is covered by some maximal pattern
        fills: dict[int, dict[int, int]] = {}
        for gi, (cc, pods) in assignment.items():
            if cc != c or gi not in agg.sig_of:
                continue
            for j, i in pods:
                sz = by_idx[gi].parts[j].demand.get(r, 0)
                if sz and states_nodes[c].node_class[i] == k:
                    fill = fills.setdefault(i, {})
                    fill[sz] = fill.get(sz, 0) + 1
        for fill in fills.values():
            y = next((y for p, y in zip(pats, ys) if all(p.get(s, 0) >= n for s, n in fill.items())), None)
            if y is not None:
                vals[y] += 1
    return vals


def _tie_weights(agg: Agg, ng: int) -> list[tuple[int, int]]:
    """Prefer earlier clusters, then earlier names. When it fits in 2^53, mixed-radix weights
    (each (signature, cluster) count a digit, later clusters and names more significant) make
    the optimum unique, so the plan cannot depend on which optimum a worker finds first."""
    pairs = sorted(((c, sg.rep.rank, sg) for sg in agg.sigs for c in sg.rep.eligible), key=lambda t: t[:2])
    weights, w = [], 1
    for c, _, sg in pairs:
        weights.append((w, agg.z[(sg.index, c)]))
        w *= len(sg.groups) + 1
        if w > 2**53:
            return [(c * ng + sg.rep.rank + 1, agg.z[(sg.index, c)]) for c, _, sg in pairs]
    return weights


def _solve_stages(agg: Agg, problem: Problem, groups: Sequence[GroupInfo], hint: list[int] | None,
                  deadline: float, workers: int, seed: int, progress: Progress | None,
                  effort: float = 1.0) -> Solution | None:
    """Lexicographic stages on one model; `optimal` means every placement stage (priority
    levels, GPUs, fragmentation) was proven; the final tie-break is a bounded polish."""
    m = _to_cpsat(agg)
    levels = sorted({g.priority for g in groups}, reverse=True)
    ng = len(problem.groups) + 1
    stages: list[tuple[str, list[tuple[int, int]], bool]] = []
    per_level = []
    for p in levels:
        terms = [((sg.rep.gpus * ng + 1), agg.z[(sg.index, c)]) for sg in agg.sigs
                 if sg.rep.priority == p for c in sg.rep.eligible]
        per_level.append((p, terms))
    # one weighted stage when exact in doubles (each level outweighs all below it), else
    # one stage per level: the same lexicographic optimum, fewer proofs to wait for
    scale, combined = 1, []
    for p, terms in reversed(per_level):
        combined += [(a * scale, v) for a, v in terms]
        scale *= sum((sg.rep.gpus * ng + 1) * len(sg.groups) for sg in agg.sigs if sg.rep.priority == p) + 1
    # (measured: the weighted form's huge coefficients slowed CP-SAT's search on the large
    # benchmark, so it is only used when small)
    if len(per_level) > 1 and scale < 2**31:
        stages.append(("priorities " + ",".join(str(p) for p in levels), combined, True))
    else:
        stages += [(f"priority {p}", terms, True) for p, terms in per_level]
    tie = _tie_weights(agg, ng)
    if agg.opens:
        stages.append(("fragmentation", [(1, o) for o in agg.opens], False))
    if len(agg.lb) <= POLISH_MAX_VARS:
        # a polish (the plan is already deterministic): on large models it costs a presolve
        # and rarely finishes, so the decoder's canonical order stands in for it there
        stages.append(("tie-break", tie, False))
    best = hint
    all_optimal, timed_out = True, False
    shares = [8 if mx else 1 for _, _, mx in stages]
    for si, (label, terms, maximize) in enumerate(stages):
        value = None if best is None else sum(a * best[v] for a, v in terms)
        left = deadline - time.monotonic()
        if left > 0.05:
            _objective(m, terms, maximize)
            m.clear_solution_hint()
            if best is not None:
                m.solution_hint.vars.extend(range(len(best)))
                m.solution_hint.values.extend(best)
            params = cmh.SatParameters()
            _search_parameters(params, workers, seed, effort * shares[si] / sum(shares), left)
            if progress:
                progress(f"solving: {label}")
            solver = cmh.SolveWrapper()
            solver.set_parameters(params)
            r = solver.solve(m)
            st = r.status
            optimal = st == cmh.CpSolverStatus.OPTIMAL
            found = optimal or st == cmh.CpSolverStatus.FEASIBLE
            if not optimal and r.wall_time >= left * 0.98:
                timed_out = True             # the wall clock, not the effort, ended this stage
            if progress:
                progress(f"{label}: {st.name} objective "
                         f"{abs(r.objective_value) if found else None} (incumbent {value}, "
                         f"{r.deterministic_time:.2f} effort, {r.wall_time:.2f}s)")
            if label != "tie-break":
                all_optimal &= optimal
            if found:
                new = [int(x) for x in r.solution]
                new_value = sum(a * new[v] for a, v in terms)
                # keep the incumbent unless strictly better here: it may be better on later stages
                if value is None or (new_value > value if maximize else new_value < value):
                    best, value = new, new_value
        else:
            all_optimal, timed_out = False, True
        if value is None:
            break
        # fix this stage's value for the stages after it
        if maximize:
            _linear(m, terms, value, INF)
        else:
            _linear(m, terms, -INF, value)
    if best is None:
        return None
    return Solution(best, "optimal" if all_optimal else "feasible", timed_out)


def _search_parameters(p, workers: int, seed: int, effort: float, wall: float) -> None:
    """Deterministic search whatever the thread count: CP-SAT interleaves a fixed set of
    subsolvers in batches of fixed size (`interleave_search`), `workers` threads only run
    a batch's tasks, and each stage stops on deterministic time (`effort`, an operation
    count in ~seconds), not on the clock. The wall-clock limit stays as a safety net; a
    plan it cuts short may depend on machine load."""
    p.interleave_search = True
    # one worker takes a different (sequential) code path: two is the least for the same search
    p.num_workers = max(2, workers)
    p.num_full_subsolvers = SEARCH_SUBSOLVERS
    p.interleave_batch_size = SEARCH_BATCH
    p.random_seed = seed
    p.max_deterministic_time = max(0.01, effort)
    p.max_time_in_seconds = max(0.05, wall)


# --- decoding -------------------------------------------------------------------------------

def decode(problem: Problem, states: dict[int, ClusterState], agg: Agg, values: list[int],
           groups: Sequence[GroupInfo]) -> tuple[dict[int, tuple[int, PodAssign]], list[GroupInfo]]:
    """Concrete nodes for the aggregate answer: per cluster, all pods biggest first, each to
    the best-fitting node of a class with quota left (else any class it may use). A group
    with a pod that finds no node is rolled back and returned as dropped."""
    by_cluster: dict[int, list[GroupInfo]] = {}
    for sg in agg.sigs:
        # interchangeable groups: the first by name are placed, on clusters in file order
        todo = iter(sg.groups)
        for c in sg.rep.eligible:
            for _ in range(values[agg.z[(sg.index, c)]]):
                by_cluster.setdefault(c, []).append(next(todo))
    out: dict[int, tuple[int, PodAssign]] = {}
    dropped: list[GroupInfo] = []
    for c in sorted(by_cluster):
        st, info = states[c], problem.infos[c]
        quota: dict[tuple[tuple, int], int] = {}
        for (cc, t, k), terms in agg.n_expr.items():
            if cc == c:
                quota[(t, k)] = sum(a * values[v] for a, v in terms)
        members = greedy_order(by_cluster[c])
        plain = _ffd_cluster(st, members)
        if plain is not None:
            # canonical: depends only on which groups are on the cluster
            out.update({gi: (c, a) for gi, a in plain.items()})
            continue
        pods = [(g, j) for g in members for j in _expand(g)]
        pods.sort(key=lambda gj: (gj[0].parts[gj[1]].sort_key, members.index(gj[0]), gj[1]))
        placed: dict[int, PodAssign] = {g.index: [] for g in members}
        failed: set[int] = set()
        for g, j in pods:
            if g.index in failed:
                continue
            part = g.parts[j]
            t = part_type(info, part)
            classes = t[1]
            with_quota = [k for k in classes if quota.get((t, k), 0) > 0]
            i = st.best_node(part.demand, part.gpu, with_quota) if with_quota else None
            if i is None:
                i = st.best_node(part.demand, part.gpu, classes)
            if i is None:
                failed.add(g.index)
                _undo(st, g, placed[g.index])
                placed[g.index] = []
                continue
            k = st.node_class[i]
            if quota.get((t, k), 0) > 0:
                quota[(t, k)] -= 1
            st.take(i, part.demand)
            placed[g.index].append((j, i))
        for g in members:
            if g.index in failed:
                dropped.append(g)
            else:
                out[g.index] = (c, placed[g.index])
    return out, dropped


def _ffd_cluster(st: ClusterState, members: Sequence[GroupInfo]) -> dict[int, PodAssign] | None:
    """All pods of the cluster's groups, biggest first, best fit; None (state unchanged)
    unless every pod finds a node."""
    pods = [(g, j) for g in members for j in _expand(g)]
    order = {g.index: n for n, g in enumerate(members)}
    pods.sort(key=lambda gj: (gj[0].parts[gj[1]].sort_key, order[gj[0].index], gj[1]))
    done: list[tuple[GroupInfo, int, int]] = []
    for g, j in pods:
        part = g.parts[j]
        i = st.best_node(part.demand, part.gpu, st.info.compat(part))
        if i is None:
            for gg, jj, ii in reversed(done):
                st.give(ii, gg.parts[jj].demand)
            return None
        st.take(i, part.demand)
        done.append((g, j, i))
    out: dict[int, PodAssign] = {g.index: [] for g in members}
    for g, j, i in done:
        out[g.index].append((j, i))
    return out


# --- the entry point ----------------------------------------------------------------------

def _lex_value(groups_by_idx: Mapping[int, GroupInfo], placed: Iterable[int], ng: int) -> tuple:
    per: dict[int, int] = {}
    for gi in placed:
        g = groups_by_idx[gi]
        per[g.priority] = per.get(g.priority, 0) + g.gpus * ng + 1
    levels = sorted({g.priority for g in groups_by_idx.values()}, reverse=True)
    return tuple(per.get(p, 0) for p in levels)


def solve(fleet: Fleet, groups: Sequence[PlacementGroup], *, time_limit: float = 10.0,
          workers: int = DEFAULT_WORKERS, seed: int = 0,
          committed: Sequence[tuple[PlacementGroup, str]] = (),
          progress: Progress | None = None, use_solver: bool = True,
          effort: float = DEFAULT_EFFORT, gpu_resources: Sequence[str] = GPU_RESOURCES) -> Plan:
    """Plan `groups` onto `fleet`. `committed` groups are already placed on the named
    cluster but their pods are not bound yet: they take their capacity first.
    `effort` bounds the search in CP-SAT deterministic time (the same plan for the same
    input, whatever `workers` or the machine's load); `time_limit` (wall seconds) is a
    safety net: a plan it cuts short says so (`summary.timeLimitHit`) and may vary.
    `use_solver=False` returns the greedy plan (a baseline for benchmarks)."""
    t0 = time.monotonic()
    clock = _Clock(t0)
    deadline = t0 + max(0.1, time_limit)
    problem = prepare(fleet, groups, committed, gpu_resources)
    if progress:
        progress(f"prepared {len(problem.groups)} groups on {len(problem.infos)} reachable clusters")
    base = problem.state()
    overcommitted: dict[str, str] = {}
    committed_assign: list[tuple[GroupInfo, int, PodAssign]] = []
    for g, c in problem.committed:
        assign = try_place(base[c], g) if c in base else None
        if assign is None:
            overcommitted[g.key] = f"no longer fits on {problem.clusters[c].name}"
        else:
            committed_assign.append((g, c, assign))
    # the capacity left after committed groups is what the groups compete for
    problem = _rebase(problem, base)
    clock.lap("prepare")
    work = problem.state()
    seed_plan = greedy(problem, work)
    clock.lap("greedy")
    by_idx = {g.index: g for g in problem.groups}
    ng = len(problem.groups) + 1
    result, status, timed_out = seed_plan, "greedy", False
    candidates = [g for g in problem.groups if g.eligible]
    if use_solver and candidates:
        if progress:
            progress(f"greedy placed {len(seed_plan)} of {len(problem.groups)} groups; building model")
        agg = build_aggregate(problem, candidates)
        hint = _values_from(agg, seed_plan, problem, work)
        clock.lap("model")
        sol = _solve_stages(agg, problem, candidates, hint, deadline, workers, seed, progress, effort=effort)
        clock.lap("cpsat")
        if sol is not None:
            timed_out = sol.timed_out
            states = problem.state()
            decoded, dropped = decode(problem, states, agg, sol.values, candidates)
            st = sol.status
            if dropped:
                st = "feasible"
                decoded.update(greedy(problem, states, dropped))
            if _lex_value(by_idx, decoded, ng) >= _lex_value(by_idx, seed_plan, ng):
                result, status = decoded, st
        else:
            timed_out = time.monotonic() >= deadline
        clock.lap("decode")
    elif not candidates:
        status = "optimal"
    plan = _build_plan(problem, result, committed_assign, overcommitted, base_infos=problem.infos,
                       status=status, seconds=time.monotonic() - t0)
    clock.lap("explain")
    from .verify import verify
    verify(fleet, groups, plan, committed=committed)
    clock.lap("verify")
    from dataclasses import replace as _replace
    summary = _replace(plan.summary, solve_seconds=time.monotonic() - t0, time_limit_hit=timed_out,
                       timings=dict(clock.laps))
    return _replace(plan, summary=summary)


class _Clock:
    def __init__(self, t0: float):
        self.last = t0
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = round(self.laps.get(name, 0.0) + now - self.last, 4)
        self.last = now


def _rebase(problem: Problem, states: Mapping[int, ClusterState]) -> Problem:
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
        nodes += [n for n in cl.nodes if not n.schedulable]
        clusters[c] = Cluster(cl.name, cl.labels, tuple(nodes), cl.context, cl.error, cl.reserved)
    fleet = Fleet(tuple(clusters), problem.fleet.taken_at)
    fresh = prepare(fleet, [g.group for g in problem.groups], gpu_resources=problem.gpu_names)
    fresh.committed = problem.committed
    return fresh


def _replace_used(node, used):
    from dataclasses import replace
    return replace(node, used=used)


def _build_plan(problem: Problem, result: Mapping[int, tuple[int, PodAssign]],
                committed_assign, overcommitted, *, base_infos, status: str, seconds: float) -> Plan:
    placements: list[Placement] = []
    unplaced: list[Unplaced] = []
    reason_states = problem.state()
    reasons_cache: dict = {}
    by_cluster: dict[int, list[GroupInfo]] = {}
    for gi, (c, _) in result.items():
        by_cluster.setdefault(c, []).append(next(g for g in problem.groups if g.index == gi))
    for g in problem.groups:
        if g.index in result:
            c, assign = result[g.index]
            placements += _placements(problem, g, c, assign)
        else:
            why = explain(problem, g, reason_states, by_cluster, reasons_cache)
            for w in g.group.workloads:
                unplaced.append(Unplaced(w.key, w.kind, g.key, w.gpus, w.pods, g.priority, why, ref=w.ref))
    committed = [p for g, c, a in committed_assign for p in _placements(problem, g, c, a, infos_from=True)]
    nw = sum(len(g.group.workloads) for g in problem.groups)
    summary = Summary(
        workloads=nw, placed=len(placements),
        gpus_requested=sum(g.gpus for g in problem.groups),
        gpus_placed=sum(p.gpus for p in placements),
        solve_seconds=seconds, optimal=status == "optimal", status=status,
        groups=len(problem.groups), groups_placed=len(result))
    return Plan(tuple(placements), tuple(unplaced), summary, tuple(committed), overcommitted)


def _placements(problem: Problem, g: GroupInfo, c: int, assign: PodAssign, infos_from=False) -> list[Placement]:
    info = problem.infos[c]
    per_wl: dict[object, dict[str, dict[str, int]]] = {w.ref: {} for w in g.group.workloads}
    order = {n.name: i for i, n in enumerate(info.nodes)}
    for j, i in assign:
        part = g.parts[j]
        node = info.nodes[i].name
        slot = per_wl[part.workload.ref].setdefault(node, {})
        slot[part.instance.key] = slot.get(part.instance.key, 0) + 1
    out = []
    for w in g.group.workloads:
        nodes = dict(sorted(per_wl[w.ref].items(), key=lambda kv: order[kv[0]]))
        out.append(Placement(w.key, w.kind, g.key, problem.clusters[c].name, w.gpus, w.pods,
                             g.priority, nodes, ref=w.ref))
    return out


# --- explanations ---------------------------------------------------------------------------

def _explain_key(g: GroupInfo) -> tuple:
    """Groups with the same pods, priority and per-cluster policy get the same reasons."""
    pods = sorted(((tuple(sorted(p.demand.items())), p.pred_key, p.instance.key), p.pods) for p in g.parts)
    return (g.priority, tuple(g.eligible), tuple(sorted(g.static.items(), key=lambda kv: kv[0])), tuple(pods))


def explain(problem: Problem, g: GroupInfo, states: Mapping[int, ClusterState],
            placed_on: Mapping[int, list[GroupInfo]], cache: dict | None = None) -> dict[str, R.Reason]:
    """The first reason per cluster, in cluster order."""
    cache = {} if cache is None else cache
    key = _explain_key(g)
    if key in cache:
        return cache[key]
    out: dict[str, R.Reason] = {}
    for c, cl in enumerate(problem.clusters):
        if c in g.static:
            out[cl.name] = g.static[c]
            continue
        st = states[c]
        assign = try_place(st, g)
        if assign is not None:
            _undo(st, g, assign)
            others = sorted(placed_on.get(c, []), key=lambda o: (-o.priority, o.key))
            higher = [o.key for o in others if o.priority > g.priority]
            out[cl.name] = R.CapacityTaken(tuple(higher) if higher else tuple(o.key for o in others),
                                           bool(higher))
            continue
        out[cl.name] = _capacity_reason(g, st)
    cache[key] = out
    return out


def _capacity_reason(g: GroupInfo, st: ClusterState) -> R.Reason:
    info = st.info
    for p in sorted(g.parts, key=lambda p: p.sort_key):
        classes = info.compat(p)
        nodes = [i for k in classes for i in info.class_nodes[k]]
        fit = sum(_per_node(p.demand, st.free[i]) for i in nodes)
        if fit >= p.pods:
            continue
        # the resource that runs out first for this pod kind
        order = sorted(p.demand, key=lambda r: (r not in info.gpu_names, r != "cpu", r != "memory", r))
        binding = next((r for r in order if r != "pods" and
                        sum(st.free[i].get(r, 0) // p.demand[r] for i in nodes) < p.pods), None)
        if binding is None:
            binding = next((r for r in order if r != "pods"), "pods")
        pool = [i for k in info.matching(p) for i in info.class_nodes[k]]
        largest = max((st.free[i].get(binding, 0) for i in pool), default=0)
        total = sum(st.free[i].get(binding, 0) for i in pool)
        return R.InsufficientCapacity(p.pods, binding, p.demand.get(binding, 0),
                                      describe_constraints(p.instance.pod), largest, total)
    pool = {i for p in g.parts for k in info.matching(p) for i in info.class_nodes[k]}
    fitting = _fit_count(g, st)
    return R.DoesNotFitTogether(g.pods, fitting, g.gpus, sum(st.gpu[i] for i in pool))


def _per_node(demand: Mapping[str, int], free: Mapping[str, int]) -> int:
    return min((free.get(r, 0) // v for r, v in demand.items() if v), default=0)


def _fit_count(g: GroupInfo, st: ClusterState) -> int:
    """How many of the group's pods fit at once (greedy), state left unchanged."""
    done = []
    compat = [st.info.compat(p) for p in g.parts]
    for j in _expand(g):
        i = st.best_node(g.parts[j].demand, g.parts[j].gpu, compat[j])
        if i is None:
            continue
        st.take(i, g.parts[j].demand)
        done.append((j, i))
    _undo(st, g, done)
    return len(done)
