"""The CP-SAT driver: the aggregate model (placer.solve.model) solved in lexicographic
stages, each stage's value fixed before the next."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from placer.solve.cpsat import cmh  # CP-SAT's native layer (not cp_model: pandas), imported by the first model
from placer.solve.fairshare import LABEL as FAIR
from placer.solve.gap import Linear, Relaxation, lp_bound, scaled, scaled_lex
from placer.solve.groups import GroupInfo
from placer.solve.model import INF, Agg
from placer.solve.preference import stage_terms
from placer.solve.problem import Problem

DEFAULT_WORKERS = max(1, min(8, os.cpu_count() or 1))
# the search configuration, fixed so that the plan does not depend on the thread count
SEARCH_SUBSOLVERS = 4
SEARCH_BATCH = 4                   # tasks per synchronised batch: the effort limit's granularity
DEFAULT_EFFORT = 1.0               # CP-SAT deterministic time for all stages together
POLISH_MAX_VARS = 1500             # larger models skip the tie-break stage
SPREAD_RESERVE = 0.25              # of the wall clock left, kept by GPU stages for the topology spread stage
# CP-SAT's presolve of the staged model, in deterministic time per linear term (measured, issue 24:
# 0.12 for 23,572 terms at 1,000 workloads on 10,000 nodes): a stage whose effort share is below
# it ends in the presolve without a solution, so it is not started
PRESOLVE_EFFORT_PER_TERM = 5e-6
# a priority stage's whole share is skipped for being below the presolve only on models this large
# (the estimate's own scale): on smaller ones the search may end its presolve sooner (heterogeneous
# scenario: 12,600 terms, a 0.056 share below the 0.063 estimate still searched)
PRESOLVE_SKIP_MIN_TERMS = 20_000

Progress = Callable[[str], None]


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


class _Model:
    """The staged model: the aggregate and the stages' fixings; its CP-SAT proto built when a
    stage is first searched (issue 24: at 1,000 workloads on 10,000 nodes no stage is searched,
    the LP bound decides it, and the proto cost 0.03 s of CPU for nothing)."""

    def __init__(self, agg: Agg) -> None:
        self.agg = agg
        self.fixed: list[Linear] = []
        self._proto = None

    def fix(self, terms: Sequence[tuple[int, int]], lo: int, hi: int) -> None:
        self.fixed.append((terms, lo, hi))
        if self._proto is not None:
            _linear(self._proto, terms, lo, hi)

    def proto(self):
        """The CP-SAT model proto with every fixing so far (variable i = agg variable i)."""
        if self._proto is None:
            self._proto = _to_cpsat(self.agg)
            for terms, lo, hi in self.fixed:
                _linear(self._proto, terms, lo, hi)
        return self._proto


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


@dataclass(frozen=True)
class Stage:
    """One lexicographic objective: its terms and sense, and for a priority stage `top`, the
    value that places all of it; for a minimised stage `floor`, a value none is below."""

    label: str
    terms: list[tuple[int, int]]
    maximize: bool
    top: int | None = None
    floor: int | None = None
    unit: int | None = None          # one priority level's stage: the weight of one GPU in its terms

    def value(self, vals: Sequence[int] | None) -> int | None:
        return None if vals is None else sum(a * vals[v] for a, v in self.terms)

    def uncontested(self, vals: Sequence[int] | None) -> bool:
        """A priority stage the incumbent `vals` places entirely, or a minimised stage it
        brings to its floor: fixed without a search."""
        value = self.value(vals)
        if value is None:
            return False
        if self.maximize:
            return self.top is not None and value >= self.top
        return self.floor is not None and value <= self.floor


def stages_of(agg: Agg, problem: Problem, groups: Sequence[GroupInfo]) -> list[Stage]:
    """Priority levels (highest first), then fair share of borrowed capacity, spread weights and
    clusters, cluster preference and cost, topology spread, fragmentation and, on small models,
    the tie-break (the order docs/planning.md gives and argues)."""
    levels = sorted({g.priority for g in groups}, reverse=True)
    ng = len(problem.groups) + 1
    stages = _priority_stages(agg, levels, ng)
    # issue 23: among plans placing the most at every level, borrowed capacity by weighted
    # fair share: the largest share as small as possible, then the next (placer.solve.fairshare)
    stages += [Stage(label, terms, False, floor=0) for label, terms in agg.fair.stages]
    if agg.deviations:
        # after GPUs placed: weighted shares as close to their weights as the nodes allow
        stages.append(Stage("spread weights", [(1, d) for d, _, _ in agg.deviations], False))
    if agg.share_clusters:
        # after GPUs placed: a divided workload without weights on as few clusters as hold it
        stages.append(Stage("spread clusters", [(1, u) for u in agg.share_clusters], False))
    # issue 21: after GPUs placed, each group's clusters filled in its order, then the cheapest
    stages += [Stage(label, terms, maximize) for label, terms, maximize in stage_terms(agg, problem, ng)]
    if agg.spread:
        # after GPUs placed: preferred topology requests span as few domains as they can
        stages.append(Stage("topology spread", [(1, s) for s in agg.spread], False))
    if agg.opens:
        stages.append(Stage("fragmentation", [(1, o) for o in agg.opens], False))
    if len(agg.lb) <= POLISH_MAX_VARS:
        # a polish (the plan is already deterministic): on large models it costs a presolve
        # and rarely finishes, so the decoder's canonical order stands in for it there
        stages.append(Stage("tie-break", _tie_weights(agg, ng), False))
    return stages


def _priority_stages(agg: Agg, levels: Sequence[int], ng: int) -> list[Stage]:
    """One weighted stage when exact in doubles (each level outweighs all below it), else
    one stage per level, in order."""
    per_level = []
    for p in levels:
        terms = [((sg.rep.gpus * ng + 1), agg.z[(sg.index, c)]) for sg in agg.sigs
                 if sg.rep.priority == p for c in sg.rep.eligible]
        top = sum((sg.rep.gpus * ng + 1) * len(sg.groups) for sg in agg.sigs if sg.rep.priority == p)
        per_level.append((p, terms, top))
    scale, combined = 1, []
    for p, terms, top in reversed(per_level):
        combined += [(a * scale, v) for a, v in terms]
        scale *= top + 1
    # (measured: the weighted form's huge coefficients slowed CP-SAT's search on the large
    # benchmark, so it is only used when small)
    if len(per_level) > 1 and scale < 2**31:
        return [Stage("priorities " + ",".join(str(p) for p, _, _ in per_level), combined, True, scale - 1)]
    return [Stage(f"priority {p}", terms, True, top, unit=ng) for p, terms, top in per_level]


@dataclass(frozen=True)
class _Limits:
    """What bounds and reports every stage's search."""

    deadline: float
    workers: int
    seed: int
    effort: float
    spread: bool                     # GPU stages leave the spread stage part of the clock
    progress: Progress | None
    by_gap: bool = False             # a priority stage's share scaled by its LP gap (placer.solve.gap)
    relaxation: Relaxation | None = None   # the model's LP, kept across the stages' bounds


@dataclass(frozen=True)
class _Outcome:
    """One stage's search: the incumbent after it and what the search proved and spent."""

    best: list[int] | None
    value: int | None
    optimal: bool
    timed_out: bool                  # the wall clock, not the effort, ended this stage
    effort: float


def solve_stages(agg: Agg, problem: Problem, groups: Sequence[GroupInfo], hint: list[int] | None,
                 deadline: float, workers: int, seed: int, progress: Progress | None,
                 effort: float = 1.0, by_gap: bool = False) -> Solution | None:
    """Lexicographic stages on one model; `optimal` means every placement stage (priority
    levels, GPUs, fragmentation) was proven; the final tie-break is a bounded polish."""
    m = _Model(agg)
    stages = stages_of(agg, problem, groups)
    lim = _Limits(deadline, workers, seed, effort, bool(agg.spread), progress, by_gap, Relaxation(agg))
    best = hint
    all_optimal, timed_out = True, False
    # the searches that decide what is placed where (and its cost) get the large shares; the
    # polish stages (spread, fragmentation, tie-break) the small ones; the fair-share stages
    # share one large share among them, so that many quotas do not starve the priority stages
    nfair = sum(1 for s in stages if s.label.startswith(FAIR))
    shares = [8 if s.maximize or s.label == "cost" else max(1, 8 // nfair) if s.label.startswith(FAIR) else 1
              for s in stages]
    spent = 0.0
    terms = sum(len(terms) for terms, _, _ in agg.cons)
    presolve = PRESOLVE_EFFORT_PER_TERM * terms
    for si, stage in enumerate(stages):
        value = stage.value(best)
        left = deadline - time.monotonic()
        full = share = _share(stages, si, best, shares, effort, spent)
        contested = not stage.uncontested(best)
        short = share < presolve and terms >= PRESOLVE_SKIP_MIN_TERMS
        # the LP bound only scales the share down: not computed when the whole share is short
        if contested and stage.maximize and left > 0.05 and not short:
            share = _by_gap(m, stage, best, share, lim)
        if not contested:
            if progress:
                progress(f"{stage.label}: uncontested (the incumbent places all of it)")
        elif (not stage.maximize or share < full or short) and share < presolve:
            # not proven; the incumbent's value stands, as when the search ends in its presolve
            # (issue 24: at 10,000 groups a priority stage's whole share, 0.94, ended there after
            # 1.03 effort and 19 s of wall clock, the incumbent unchanged)
            if progress:
                progress(f"{stage.label}: not searched (its effort {share:.3f} is below the model's presolve, "
                         f"{presolve:.3f})")
            all_optimal &= stage.label == "tie-break"
        elif left > 0.05:
            out = _run_stage(m, stage, best, value, share, left, lim)
            spent += out.effort
            best, value = out.best, out.value
            timed_out = timed_out or out.timed_out
            if stage.label != "tie-break":
                all_optimal &= out.optimal
        else:
            all_optimal, timed_out = False, True
        if value is None:
            break
        # fix this stage's value for the stages after it
        if stage.maximize:
            m.fix(stage.terms, value, INF)
        else:
            m.fix(stage.terms, -INF, value)
    if best is None:
        return None
    # rounded shares (placer.solve.fairshare) order the plans nearly, not provably, right
    all_optimal &= agg.fair.exact or not agg.fair.stages
    return Solution(best, "optimal" if all_optimal else "feasible", timed_out)


def _by_gap(m: _Model, stage: Stage, best: Sequence[int] | None, share: float, lim: _Limits) -> float:
    """A priority stage's share scaled by its incumbent's gap to the LP bound (placer.solve.gap):
    by default counted in GPUs, then groups (one level's stage; a stage of several levels,
    on small models only, keeps its share); with `--effort-by-gap` relative to the value."""
    if not lim.by_gap and stage.unit is None:
        return share
    value = stage.value(best)
    bound = lp_bound(m, stage.terms, lim.relaxation)
    if lim.by_gap:
        got = scaled(share, value, bound)
    else:
        got = scaled_lex(share, value, bound, stage.unit or 1, sum(best[v] for _, v in stage.terms) if best else 0)
    if lim.progress:
        lim.progress(f"{stage.label}: LP bound {bound}, incumbent {value}: effort {got:.3f} of {share:.3f}")
    return got


def _share(stages: Sequence[Stage], si: int, best: Sequence[int] | None, shares: Sequence[int],
           effort: float, spent: float) -> float:
    """The effort left, shared among the stages left that may need a search."""
    need = [j for j in range(si, len(stages)) if not stages[j].uncontested(best)]
    polish = effort * sum(shares[j] for j in need if not stages[j].maximize) / sum(shares)
    if stages[si].maximize:       # a priority stage: what is left, less the polish stages' own share
        share = (effort - spent - polish) * shares[si] / max(1, sum(shares[j] for j in need if stages[j].maximize))
    else:
        share = effort * shares[si] / sum(shares)
    return max(0.01, share)


def _run_stage(model: _Model, stage: Stage, best: list[int] | None, value: int | None, share: float, left: float,
               lim: _Limits) -> _Outcome:
    """One stage's search from the incumbent `best`, kept unless strictly better here (it
    may be better on later stages)."""
    m = model.proto()
    _objective(m, stage.terms, stage.maximize)
    m.clear_solution_hint()
    if best is not None:
        m.solution_hint.vars.extend(range(len(best)))
        m.solution_hint.values.extend(best)
    params = cmh.SatParameters()
    # with preferred topology requests, a GPU stage leaves the spread stage part of the clock
    wall = left * (1 - SPREAD_RESERVE) if stage.maximize and lim.spread else left
    _search_parameters(params, lim.workers, lim.seed, share, wall)
    if lim.progress:
        lim.progress(f"solving: {stage.label}")
    solver = cmh.SolveWrapper()
    solver.set_parameters(params)
    r = solver.solve(m)
    optimal = r.status == cmh.CpSolverStatus.OPTIMAL
    found = optimal or r.status == cmh.CpSolverStatus.FEASIBLE
    if lim.progress:
        lim.progress(f"{stage.label}: {r.status.name} objective "
                     f"{abs(r.objective_value) if found else None} (incumbent {value}, "
                     f"{r.deterministic_time:.2f} effort, {r.wall_time:.2f}s)")
    if found:
        new = [int(x) for x in r.solution]
        new_value = sum(a * new[v] for a, v in stage.terms)
        if value is None or (new_value > value if stage.maximize else new_value < value):
            best, value = new, new_value
    return _Outcome(best, value, optimal, not optimal and r.wall_time >= wall * 0.98, r.deterministic_time)


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
    # Ctrl-C is the caller's: CP-SAT's default handler took it to end the search early (submit
    # then went on to create) and stayed installed after (the next Ctrl-C killed placer mid-request)
    p.catch_sigint_signal = False
