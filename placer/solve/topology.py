"""Topology in the solver: which pods of a gang a request covers (units), the domain of a
node class, the topology-aware best-fit placement, the domain variables of the exact fit
check and of the class model, and the domains a plan reports.

A required unit puts every pod it covers on nodes sharing one value of its key; a preferred
unit spans as few values as it can (a cost after GPUs placed). Node classes never mix
domains: a class's nodes share all their labels, and a cluster whose nodes do not carry
`kubernetes.io/hostname` (simulated ones) gets one class per node when a pending gang asks
for that level (the node's name is then its host domain).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping, Sequence

from placer.model import reasons as R
from placer.model.fleet import Cluster, Node
from placer.model.topology import TopologyChoice
from placer.model.workload import PlacementGroup
from placer.solve.problem import ClusterInfo, ClusterState, GroupInfo, Part, PodAssign, Problem, may_fit

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
    """Give the group its units, and each covered part a type of its own (the model
    constrains its pods per domain, apart from every other group's)."""
    g.units = units_of(g.parts)
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


def _free_gpus(st: ClusterState, classes: Iterable[int]) -> int:
    return sum(level * len(nodes) for k in classes for level, nodes in st.buckets[k].items())


# --- best fit with domains ---------------------------------------------------------------------

def _pods(g: GroupInfo, js: Iterable[int]) -> list[int]:
    """Pods of these parts, biggest first."""
    js = sorted(js, key=lambda j: (g.parts[j].sort_key, j))
    return [j for j in js for _ in range(g.parts[j].pods)]


class _Placer:
    def __init__(self, st: ClusterState, g: GroupInfo):
        self.st, self.g, self.info = st, g, st.info
        self.allowed = [list(self.info.compat(p)) for p in g.parts]
        self.done: PodAssign = []

    def rollback(self, mark: int = 0) -> None:
        while len(self.done) > mark:
            j, i = self.done.pop()
            self.st.give(i, self.g.parts[j].demand)

    def put(self, js: Iterable[int], classes: Callable[[int], Sequence[Sequence[int]]]) -> bool:
        """Every pod of parts `js`, each on the best node of the first class list that has one."""
        mark = len(self.done)
        for j in _pods(self.g, js):
            part = self.g.parts[j]
            i = None
            for ks in classes(j):
                if ks:
                    i = self.st.best_node(part.demand, part.gpu, ks)
                if i is not None:
                    break
            if i is None:
                self.rollback(mark)
                return False
            self.st.take(i, part.demand)
            self.done.append((j, i))
        return True

    def used(self, u: Unit) -> set[str | None]:
        mine = set(u.parts)
        return {domain_of(self.info.nodes[i], u.key) for j, i in self.done if j in mine}

    def required(self, u: Unit) -> bool:
        pending = [j for j in u.parts if not any(jj == j for jj, _ in self.done)]
        fixed = self.used(u)
        if len(fixed) > 1 or None in fixed:
            return False
        doms = by_domain(self.info, dict.fromkeys(k for j in u.parts for k in self.allowed[j]), u.key)
        doms.pop(None, None)
        need = sum(self.g.parts[j].gpu * self.g.parts[j].pods for j in pending)
        cands = [v for v in doms if not fixed or v in fixed]
        # best fit: the domain left with the fewest free GPUs first, whole domains kept whole
        free = {v: _free_gpus(self.st, doms[v]) for v in cands}
        for v in sorted((v for v in cands if free[v] >= need), key=lambda v: (free[v], str(v))):
            inside = {j: [k for k in self.allowed[j] if class_domain(self.info, k, u.key) == v] for j in u.parts}
            if any(not inside[j] for j in pending):
                continue
            if self.put(pending, lambda j: (inside[j],)):
                for j in u.parts:
                    self.allowed[j] = inside[j]
                return True
        return False

    def preferred(self, u: Unit) -> bool:
        pending = [j for j in u.parts if not any(jj == j for jj, _ in self.done)]
        if not pending:
            return True
        doms = by_domain(self.info, dict.fromkeys(k for j in pending for k in self.allowed[j]), u.key, pseudo=True)
        used = {"" if v is None else v for v in self.used(u)}
        need = sum(self.g.parts[j].gpu * self.g.parts[j].pods for j in pending)
        free = {v: _free_gpus(self.st, ks) for v, ks in doms.items()}

        def inside(v):
            return lambda j: ([k for k in self.allowed[j] if k in doms[v]],)
        if not used:
            # one domain if one holds them all: the fullest that does
            for v in sorted((v for v in doms if free[v] >= need), key=lambda v: (free[v], str(v))):
                if self.put(pending, inside(v)):
                    return True
        # else fill: domains already used, then the emptiest first (fewest domains)
        order = sorted(doms, key=lambda v: (v not in used, -free[v], str(v)))
        return self.put(pending, lambda j: [[k for k in self.allowed[j] if k in doms[v]] for v in order])


def try_place_topology(st: ClusterState, g: GroupInfo) -> PodAssign | None:
    """Best fit for a group with topology units: each required unit (largest first) into the
    best-fitting domain where all its pods fit, preferred units into one domain if one holds
    them else the fewest, the rest anywhere. All or nothing (state unchanged on failure)."""
    if not may_fit(st, g):
        return None
    pl = _Placer(st, g)
    if any(not a for a in pl.allowed):
        return None
    order = sorted(g.units, key=lambda u: (not u.required, -u.gpus, -u.pods, u.key, u.parts))
    for u in order:
        if not (pl.required(u) if u.required else pl.preferred(u)):
            pl.rollback()
            return None
    rest = [j for j in range(len(g.parts)) if not any(j in u.parts for u in g.units)]
    if not pl.put(rest, lambda j: (pl.allowed[j],)):
        pl.rollback()
        return None
    return pl.done


def compact(problem: Problem, result: dict[int, tuple[int, PodAssign]], deadline: float | None = None) -> None:
    """Each placed group with a preferred request, highest priority first, taken out and
    placed again on its cluster beside the rest (best fit puts it in one domain when one
    holds it); kept when it spans fewer domains. GPUs and clusters never change."""
    import time

    from placer.solve.repair import states_of
    by_idx = {g.index: g for g in problem.groups}
    todo = sorted((by_idx[gi] for gi in result if any(not u.required for u in by_idx[gi].units)),
                  key=lambda g: (-g.priority, g.key))
    if not todo:
        return
    states = states_of(problem, result)
    for g in todo:
        if deadline is not None and time.monotonic() >= deadline:
            return
        c, old = result[g.index]
        st, info = states[c], problem.infos[c]
        before = sum(len(spans(g, u, info, old)) for u in g.units if not u.required)
        for j, i in old:
            st.give(i, g.parts[j].demand)
        new = try_place_topology(st, g)
        if new is not None and sum(len(spans(g, u, info, new)) for u in g.units if not u.required) < before:
            result[g.index] = (c, new)
            continue
        if new is not None:
            for j, i in new:
                st.give(i, g.parts[j].demand)
        for j, i in old:
            st.take(i, g.parts[j].demand)


# --- the exact check's and the model's domain variables -------------------------------------------

def pack_domains(m, g: GroupInfo, st: ClusterState, xs: Sequence[tuple[int, int]]) -> None:
    """Into a CP-SAT proto whose variable n counts pods of part xs[n][0] on node xs[n][1]:
    one chosen domain per required unit (preferred units are a cost, not a constraint)."""
    info = st.info
    for u in g.units:
        if not u.required:
            continue
        mine = set(u.parts)
        per: dict[str | None, list[int]] = {}
        for n, (j, i) in enumerate(xs):
            if j in mine:
                per.setdefault(domain_of(info.nodes[i], u.key), []).append(n)
        for n in per.pop(None, []):
            _lin(m, [(1, n)], 0, 0)
        ds = []
        for v in sorted(per, key=str):
            d = len(m.variables)
            m.variables.add().domain.extend([0, 1])
            ds.append((1, d))
            _lin(m, [(1, n) for n in per[v]] + [(-u.pods, d)], -INF, 0)
        _lin(m, ds, 1, 1)


def _lin(m, terms: Sequence[tuple[int, int]], lo: int, hi: int) -> None:
    lin = m.constraints.add().linear
    lin.vars.extend([v for _, v in terms])
    lin.coeffs.extend([a for a, _ in terms])
    lin.domain.extend([lo, hi])


def add_to_model(agg, problem: Problem, groups: Sequence[GroupInfo], part_type) -> None:
    """Domain variables on the class model: a required unit's pods all in the one domain
    its d variables choose (exactly one when the group is on the cluster); a preferred
    unit's pods only in domains whose spread variable is set (their sum is minimised)."""
    for g in groups:
        for c in g.eligible if g.units else ():
            info = problem.infos[c]
            z = agg.z[(agg.sig_of[g.index], c)]
            for ui, u in enumerate(g.units):
                per: dict[str | None, list[tuple[int, int]]] = {}
                for j in u.parts:
                    t = part_type(info, g.parts[j])
                    for k in t[1]:
                        v = class_domain(info, k, u.key)
                        per.setdefault("" if v is None and not u.required else v, []).extend(agg.n_expr[(c, t, k)])
                if u.required:
                    outside = per.pop(None, [])
                    if outside:
                        agg.add(outside, 0, 0)
                ds = []
                for v in sorted(per, key=str):
                    d = agg.var(f"{'d' if u.required else 's'}_{g.index}_{c}_{ui}_{v}", 0, 1)
                    agg.topo_vars.append((d, g.index, c, ui, v))
                    agg.add(per[v] + [(-u.pods, d)], -INF, 0)
                    ds.append((1, d))
                    if not u.required:
                        agg.spread.append(d)
                if u.required:
                    agg.add(ds + [(-1, z)], 0, 0)


def hint_values(agg, vals: list[int], by_idx: Mapping[int, GroupInfo], assignment, states) -> None:
    """The domain variables' values for a node-level plan (the solver's hint)."""
    for d, gi, c, ui, v in agg.topo_vars:
        got = assignment.get(gi)
        if got is None or got[0] != c:
            continue
        g = by_idx[gi]
        u = g.units[ui]
        info = states[c].info
        mine = set(u.parts)
        used = {domain_of(info.nodes[i], u.key) for j, i in got[1] if j in mine}
        if not u.required:
            used = {"" if x is None else x for x in used}
        vals[d] = int(v in used)


# --- what a plan reports -----------------------------------------------------------------------------

def spans(g: GroupInfo, u: Unit, info: ClusterInfo, assign: PodAssign) -> list[str]:
    """The domains the unit's pods use, most pods first (unlabelled nodes as '')."""
    mine = set(u.parts)
    count: dict[str, int] = {}
    for j, i in assign:
        if j in mine:
            v = domain_of(info.nodes[i], u.key) or ""
            count[v] = count.get(v, 0) + 1
    return sorted(count, key=lambda v: (-count[v], v))


def spread(problem: Problem, result: Mapping[int, tuple[int, PodAssign]]) -> int:
    """Domains spanned by every preferred unit of every placed group, in total."""
    by_idx = {g.index: g for g in problem.groups}
    total = 0
    for gi, (c, assign) in result.items():
        g = by_idx[gi]
        for u in g.units:
            if not u.required:
                total += len(spans(g, u, problem.infos[c], assign))
    return total


def choices(g: GroupInfo, workload: str, info: ClusterInfo, assign: PodAssign) -> tuple[TopologyChoice, ...]:
    return tuple(TopologyChoice(u.gang, u.key, tuple(spans(g, u, info, assign)), u.required, u.components)
                 for u in g.units if u.workload == workload)


def without_topology(groups: Sequence[PlacementGroup]) -> list[PlacementGroup]:
    """The same groups asking for no topology (the topology-blind baseline)."""
    return [replace(pg, workloads=tuple(replace(w, gangs=tuple(replace(gg, topology=()) for gg in w.gangs))
                                        for w in pg.workloads)) for pg in groups]


# --- reasons --------------------------------------------------------------------------------------------

def room(st: ClusterState, part: Part, classes: Iterable[int]) -> int:
    """How many pods of this kind alone fit on the nodes of these classes (exact per node)."""
    total = 0
    for k in classes:
        for i in st.info.class_nodes[k]:
            f = st.free[i]
            total += min((f.get(r, 0) // v for r, v in part.demand.items() if v), default=0)
    return total


def domain_reason(g: GroupInfo, u: Unit, st: ClusterState) -> R.Reason:
    """A required unit that fits no single domain: its biggest pods' room per domain."""
    info = st.info
    big = min(u.parts, key=lambda j: (g.parts[j].sort_key, j))
    p = g.parts[big]
    doms = by_domain(info, info.compat(p), u.key)
    doms.pop(None, None)
    per = [room(st, p, ks) for ks in doms.values()]
    resource = next((r for r in info.gpu_names if p.demand.get(r)), "cpu")
    return R.TopologyDomainTooSmall(
        u.key, u.pods, p.pods if len(u.parts) == 1 else 0, resource, p.demand.get(resource, 0),
        max(per, default=0), room(st, p, info.compat(p)), info.cluster.name, u.gpus)
