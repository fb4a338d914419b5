"""Topology beyond best fit: compacting preferred requests after the plan, the domain
variables of the exact fit check and of the class model, the domains a plan reports, and
why a required request fits no domain. Units and domains themselves: placer.solve.domains;
the topology-aware best fit: placer.solve.state."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Iterable, Mapping, Sequence

from placer.model import reasons as R
from placer.model.topology import TopologyChoice
from placer.model.workload import PlacementGroup
from placer.solve.domains import INF, Unit, by_domain, class_domain, domain_of
from placer.solve.groups import ClusterInfo, GroupInfo, Part
from placer.solve.problem import Problem, states_of
from placer.solve.state import ClusterState, PodAssign, redo, try_place_topology


def compact(problem: Problem, result: dict[int, tuple[int, PodAssign]], deadline: float | None = None) -> None:
    """Each placed group with a preferred request, highest priority first, taken out and
    placed again on its cluster beside the rest (best fit puts it in one domain when one
    holds it); kept when it spans fewer domains. GPUs and clusters never change."""
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
        redo(st, g, old)


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
