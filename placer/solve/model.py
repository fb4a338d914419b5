"""The aggregate model over node classes, as plain data (`Agg`): what placer.solve.stages
solves with CP-SAT in lexicographic stages, and the hint a node-level plan gives it."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations_with_replacement
from typing import Mapping, Sequence

from placer.solve.fairshare import FairDefs
from placer.solve.fairshare import add_stages as fair_stages
from placer.solve.fairshare import hint as fair_hint
from placer.solve.groups import UNLIMITED, ClusterInfo, GroupInfo, Part, sort_key
from placer.solve.problem import Problem
from placer.solve.quotas import add_constraints as quota_constraints
from placer.solve.quotas import tag as tag_quotas
from placer.solve.state import ClusterState, PodAssign
from placer.solve.topology import add_to_model, hint_values

MAX_PATTERNS = 400                 # beyond that a class keeps only necessary GPU constraints


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
    # topology (placer.solve.topology): (var, group, cluster, unit, domain); the spread variables
    topo_vars: list[tuple[int, int, int, int, str | None]] = field(default_factory=list)
    spread: list[int] = field(default_factory=list)
    # placer.dev/spread (placer.solve.spread): 0/1 variables that are 1 iff their terms sum above
    # 0 (for hints), and the clusters used by divided workloads without weights (minimised)
    indicators: list[tuple[int, list[tuple[int, int]]]] = field(default_factory=list)
    share_clusters: list[int] = field(default_factory=list)
    # weighted shares: (var, terms, slack), var = max(0, |terms| - slack), minimised after GPUs
    deviations: list[tuple[int, list[tuple[int, int]], int]] = field(default_factory=list)
    # issue 23: weighted fair share of borrowed capacity (placer.solve.fairshare)
    fair: FairDefs = field(default_factory=FairDefs)

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
        # a group with topology requests chooses its own domains: never interchangeable
        sig = (g.priority, tuple(g.eligible), tuple(sorted(pods.items())), g.index if g.units else None,
               tuple(g.ranks[c] for c in g.eligible) if g.ranks else (), g.family, g.quota_key)
        if sig not in by:
            by[sig] = Sig(len(by), [], pods)
        by[sig].groups.append(g)
    return list(by.values())


def part_type(info: ClusterInfo, p: Part) -> tuple:
    """A pod kind on a cluster: its demand and the classes it may use (and, for pods a
    topology request covers, their own part: constrained per domain)."""
    # the part's demand as sorted items, as its kind key holds it (issue 24: sorted again for
    # every signature on every cluster)
    return (p.kind_key[1], info.compat(p), p.topo)


def build_aggregate(problem: Problem, groups: Sequence[GroupInfo]) -> Agg:
    agg = Agg()
    tag_quotas(problem, groups)                # issue 23: groups of different quotas stay apart
    agg.sigs = signatures(groups)
    on: dict[int, list[Sig]] = {c: [] for c in problem.infos}     # per cluster, the signatures that may use it
    for sg in agg.sigs:
        _sig_vars(agg, sg)
        for c in sg.rep.eligible:
            on.setdefault(c, []).append(sg)
    for c, info in problem.infos.items():
        dem, tdemand, bound = _cluster_types(agg, info, c, on[c])
        for k, items in _split_types(agg, info, c, dem, tdemand, bound).items():
            _class_constraints(agg, info, c, k, items, tdemand)
    add_to_model(agg, problem, groups, part_type)
    quota_constraints(agg, problem)            # issue 23: fleet-wide quotas, hard
    agg.fair = fair_stages(agg, problem)       # issue 23: fair share of what quotas borrow
    return agg


def _sig_vars(agg: Agg, sg: Sig) -> None:
    """How many of the signature's groups go to each eligible cluster (at most all of them)."""
    m = len(sg.groups)
    for g in sg.groups:
        agg.sig_of[g.index] = sg.index
    for c in sg.rep.eligible:
        agg.z[(sg.index, c)] = agg.var(f"z_{sg.index}_{c}", 0, m)
    if len(sg.rep.eligible) > 1:
        agg.add([(1, agg.z[(sg.index, c)]) for c in sg.rep.eligible], 0, m)


def _cluster_types(agg: Agg, info: ClusterInfo, c: int, sigs: Sequence[Sig]) -> tuple[dict, dict, dict]:
    """Pod types on this cluster (demand + the classes they may use) of the signatures `sigs`
    that may use it, in signature order (issue 24: every signature was looked at for every
    cluster): the terms counting their pods, their demand, and the most pods of each there can be."""
    dem: dict[tuple, list[tuple[int, int]]] = {}
    tdemand: dict[tuple, dict[str, int]] = {}
    bound: dict[tuple, int] = {}
    for sg in sigs:
        z = agg.z[(sg.index, c)]
        per: dict[tuple, int] = {}
        for p in sg.groups[0].parts:
            t = part_type(info, p)
            per[t] = per.get(t, 0) + p.pods
            tdemand[t] = p.demand
        m = len(sg.groups)
        for t, cnt in per.items():
            dem.setdefault(t, []).append((cnt, z))
            bound[t] = bound.get(t, 0) + cnt * m
    return dem, tdemand, bound


def _split_types(agg: Agg, info: ClusterInfo, c: int, dem: Mapping[tuple, list[tuple[int, int]]],
                 tdemand: Mapping[tuple, Mapping[str, int]],
                 bound: Mapping[tuple, int]) -> dict[int, list[tuple[tuple, list[tuple[int, int]], int]]]:
    """Per class, the pod types that may use it: a type of several classes is split into a
    count variable per class (summing to its pods)."""
    per_class: dict[int, list[tuple[tuple, list[tuple[int, int]], int]]] = {}
    for t in sorted(dem, key=lambda t: (sort_key(tdemand[t], info.gpu_names), t[:2], t[2] or ())):
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
    return per_class


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
        if size == 1:
            # one node: its GPUs are a plain count, the total is exact
            agg.add([(sz * a, v) for sz, ts, _ in sized for a, v in ts], 0, F)
        else:
            # (one size, each node taking at most one: the per-kind cap above is already exact)
            sizes = sorted({s for s, _, _ in sized})
            if _is_chain(sizes):
                _block_constraints(agg, sized, sizes, F, size)
            else:
                _pattern_constraints(agg, c, k, r, sized, sizes, F, size)
        _opens(agg, info, c, k, r, sized, F, size)


def _block_constraints(agg: Agg, sized, sizes: Sequence[int], F: int, size: int) -> None:
    """Sizes forming a divisibility chain: for each size s, pods of >= s GPUs use at most
    N * floor(F/s) blocks of s (skipped when they cannot bind); first-fit decreasing
    realises any answer."""
    for s in sizes:
        terms = [((sz // s) * a, v) for sz, ts, _ in sized if sz >= s for a, v in ts]
        cap = size * (F // s)
        if sum((sz // s) * ub for sz, _, ub in sized if sz >= s) > cap:
            agg.add(terms, 0, cap)


def _pattern_constraints(agg: Agg, c: int, k: int, r: str, sized, sizes: Sequence[int], F: int, size: int) -> None:
    """Other sizes: necessary constraints always; node patterns (maximal multisets of sizes
    one node holds) make them exact when enumerable."""
    pats = _patterns(sizes, F)
    for s in sizes:
        terms = [(a, v) for sz, ts, _ in sized if sz >= s for a, v in ts]
        agg.add(terms, 0, size * (F // s))
    agg.add([(sz * a, v) for sz, ts, _ in sized for a, v in ts], 0, size * F)
    if pats is None:
        return
    ys = [agg.var(f"y_{c}_{k}_{i}", 0, size) for i in range(len(pats))]
    agg.pattern_defs.append((c, k, r, pats, ys))
    agg.add([(1, y) for y in ys], 0, size)
    for s in sizes:
        terms = [(a, v) for sz, ts, _ in sized if sz == s for a, v in ts]
        agg.add(terms + [(-p.get(s, 0), y) for p, y in zip(pats, ys) if p.get(s, 0)], -INF, 0)


def _opens(agg: Agg, info: ClusterInfo, c: int, k: int, r: str, sized, F: int, size: int) -> None:
    if info.classes[k].sample.used.get(r, 0) == 0:
        # a whole-node class: count the nodes broken open (fragmentation)
        o = agg.var(f"open_{c}_{k}", 0, size)
        used_terms = [(sz * a, v) for sz, ts, _ in sized for a, v in ts]
        agg.add(used_terms + [(-F, o)], -INF, 0)
        agg.open_defs.append((o, used_terms, F))
        agg.opens.append(o)


def values_from(agg: Agg, assignment: Mapping[int, tuple[int, PodAssign]], problem: Problem,
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
        # per part, not per pod; only types of several classes have count variables (agg.n)
        types = [t if len(t[1]) > 1 else None for t in (part_type(st.info, p) for p in g.parts)]
        node_class = st.node_class
        for j, i in pods:
            t = types[j]
            if t is not None:
                key = (c, t, node_class[i])
                counts[key] = counts.get(key, 0) + 1
    for key, v in agg.n.items():
        vals[v] = counts.get(key, 0)
    for o, terms, F in agg.open_defs:
        vals[o] = -(-sum(a * vals[v] for a, v in terms) // F)
    if agg.topo_vars:
        hint_values(agg, vals, by_idx, assignment, states_nodes)
    for c, k, r, pats, ys in agg.pattern_defs:
        # each node's multiset of GPU sizes is covered by some maximal pattern
        for fill in _fills(agg, assignment, by_idx, states_nodes[c], c, k, r).values():
            y = next((y for p, y in zip(pats, ys) if all(p.get(s, 0) >= n for s, n in fill.items())), None)
            if y is not None:
                vals[y] += 1
    fair_hint(agg.fair, vals)
    return vals


def _fills(agg: Agg, assignment: Mapping[int, tuple[int, PodAssign]], by_idx: Mapping[int, GroupInfo],
           st: ClusterState, c: int, k: int, r: str) -> dict[int, dict[int, int]]:
    """Per node of class k on cluster c: how many pods of each size of GPU r the plan puts there."""
    fills: dict[int, dict[int, int]] = {}
    for gi, (cc, pods) in assignment.items():
        if cc != c or gi not in agg.sig_of:
            continue
        for j, i in pods:
            sz = by_idx[gi].parts[j].demand.get(r, 0)
            if sz and st.node_class[i] == k:
                fill = fills.setdefault(i, {})
                fill[sz] = fill.get(sz, 0) + 1
    return fills
