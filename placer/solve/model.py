"""The aggregate model over node classes, and the CP-SAT driver that solves it in
lexicographic stages."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from itertools import combinations_with_replacement
from typing import Callable, Mapping, Sequence

# the native model and solver of CP-SAT: `cp_model` would import pandas (~0.5 s per run)
from ortools.sat.python import cp_model_helper as cmh

from placer.solve.groups import UNLIMITED, ClusterInfo, GroupInfo, Part, sort_key
from placer.solve.problem import Problem
from placer.solve.state import ClusterState, PodAssign
from placer.solve.topology import add_to_model, hint_values

MAX_PATTERNS = 400                 # beyond that a class keeps only necessary GPU constraints
DEFAULT_WORKERS = max(1, min(8, os.cpu_count() or 1))
# the search configuration, fixed so that the plan does not depend on the thread count
SEARCH_SUBSOLVERS = 4
SEARCH_BATCH = 4                   # tasks per synchronised batch: the effort limit's granularity
DEFAULT_EFFORT = 1.0               # CP-SAT deterministic time for all stages together
POLISH_MAX_VARS = 1500             # larger models skip the tie-break stage
SPREAD_RESERVE = 0.25              # of the wall clock left, kept by GPU stages for the topology spread stage

Progress = Callable[[str], None]


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
        sig = (g.priority, tuple(g.eligible), tuple(sorted(pods.items())), g.index if g.units else None)
        if sig not in by:
            by[sig] = Sig(len(by), [], pods)
        by[sig].groups.append(g)
    return list(by.values())


def part_type(info: ClusterInfo, p: Part) -> tuple:
    """A pod kind on a cluster: its demand and the classes it may use (and, for pods a
    topology request covers, their own part: constrained per domain)."""
    return (tuple(sorted(p.demand.items())), info.compat(p), p.topo)


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
        for k, items in per_class.items():
            _class_constraints(agg, info, c, k, items, tdemand)
    add_to_model(agg, problem, groups, part_type)
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
        if size == 1:
            # one node: its GPUs are a plain count, the total is exact
            agg.add([(sz * a, v) for sz, ts, _ in sized for a, v in ts], 0, F)
            _opens(agg, info, c, k, r, sized, F, size)
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
        _opens(agg, info, c, k, r, sized, F, size)


def _opens(agg: Agg, info: ClusterInfo, c: int, k: int, r: str, sized, F: int, size: int) -> None:
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
        for j, i in pods:
            key = (c, part_type(st.info, g.parts[j]), st.node_class[i])
            counts[key] = counts.get(key, 0) + 1
    for key, v in agg.n.items():
        vals[v] = counts.get(key, 0)
    for o, terms, F in agg.open_defs:
        vals[o] = -(-sum(a * vals[v] for a, v in terms) // F)
    if agg.topo_vars:
        hint_values(agg, vals, by_idx, assignment, states_nodes)
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


def solve_stages(agg: Agg, problem: Problem, groups: Sequence[GroupInfo], hint: list[int] | None,
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
        top = sum((sg.rep.gpus * ng + 1) * len(sg.groups) for sg in agg.sigs if sg.rep.priority == p)
        per_level.append((p, terms, top))
    # one weighted stage when exact in doubles (each level outweighs all below it), else one
    # stage per level, in order; a level the incumbent places entirely is fixed without a search
    scale, combined = 1, []
    for p, terms, top in reversed(per_level):
        combined += [(a * scale, v) for a, v in terms]
        scale *= top + 1
    # (measured: the weighted form's huge coefficients slowed CP-SAT's search on the large
    # benchmark, so it is only used when small)
    tops: dict[str, int] = {}
    if len(per_level) > 1 and scale < 2**31:
        stages.append(("priorities " + ",".join(str(p) for p, _, _ in per_level), combined, True))
        tops[stages[-1][0]] = scale - 1
    else:
        stages += [(f"priority {p}", terms, True) for p, terms, _ in per_level]
        tops.update({f"priority {p}": top for p, _, top in per_level})
    tie = _tie_weights(agg, ng)
    if agg.spread:
        # after GPUs placed: preferred topology requests span as few domains as they can
        stages.append(("topology spread", [(1, s) for s in agg.spread], False))
    if agg.opens:
        stages.append(("fragmentation", [(1, o) for o in agg.opens], False))
    if len(agg.lb) <= POLISH_MAX_VARS:
        # a polish (the plan is already deterministic): on large models it costs a presolve
        # and rarely finishes, so the decoder's canonical order stands in for it there
        stages.append(("tie-break", tie, False))
    best = hint
    all_optimal, timed_out = True, False
    shares = [8 if mx else 1 for _, _, mx in stages]
    spent = 0.0
    for si, (label, terms, maximize) in enumerate(stages):
        value = None if best is None else sum(a * best[v] for a, v in terms)
        left = deadline - time.monotonic()
        if label in tops and value is not None and value >= tops[label]:
            if progress:
                progress(f"{label}: uncontested (the incumbent places all of it)")
        elif left > 0.05:
            # the effort left, shared among the stages left that may need a search
            need = [j for j in range(si, len(stages)) if not (
                stages[j][0] in tops and best is not None
                and sum(a * best[v] for a, v in stages[j][1]) >= tops[stages[j][0]])]
            polish = effort * sum(shares[j] for j in need if not stages[j][2]) / sum(shares)
            if maximize:       # a priority stage: what is left, less the polish stages' own share
                share = (effort - spent - polish) * shares[si] / max(1, sum(shares[j] for j in need if stages[j][2]))
            else:
                share = effort * shares[si] / sum(shares)
            share = max(0.01, share)
            _objective(m, terms, maximize)
            m.clear_solution_hint()
            if best is not None:
                m.solution_hint.vars.extend(range(len(best)))
                m.solution_hint.values.extend(best)
            params = cmh.SatParameters()
            # with preferred topology requests, a GPU stage leaves the spread stage part of the clock
            wall = left * (1 - SPREAD_RESERVE) if maximize and agg.spread else left
            _search_parameters(params, workers, seed, share, wall)
            if progress:
                progress(f"solving: {label}")
            solver = cmh.SolveWrapper()
            solver.set_parameters(params)
            r = solver.solve(m)
            spent += r.deterministic_time
            st = r.status
            optimal = st == cmh.CpSolverStatus.OPTIMAL
            found = optimal or st == cmh.CpSolverStatus.FEASIBLE
            if not optimal and r.wall_time >= wall * 0.98:
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

