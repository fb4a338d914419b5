"""Effort by gap (issue 24, item 2): a contested priority stage's share of the search effort
scaled by how far its incumbent is from the stage's LP bound.

Measured (benchmarks/RESULTS.md, "What `placer plan` costs follows what is hard"): at 1,000
workloads on 10,000 nodes the incumbent is 0.04% below the bound and a tenth of the effort
places the same GPUs; on the heterogeneous fleet every contested level is 4.5% or more below
it and the whole effort places 64 GPUs more at priority 80.

The default (`lexicographic`) counts the gap in the stage's own terms, GPUs then groups: a
level's value is GPUs x (groups + 1) + groups placed, so a gap below one GPU's weight is a gap
in groups, and it is measured against the groups placed, not against the whole value (on
`fragmented` the GPUs are at their bound and 35 groups, 43% of those placed, are not; the
relative gap of the value, 0.015%, undervalued them). `--effort-by-gap` is the older relative
rule (`scaled`), an option."""

from __future__ import annotations

from typing import Any, Sequence

from placer.solve.model import INF, Agg

GAP_FULL = 0.01        # a relative gap of 1% or more gets the stage's whole share
GAP_LEAST = 0.1        # the least fraction of its share a contested stage gets


# a linear constraint as the stages add it: terms (coefficient, variable), lower and upper bound
Linear = tuple[Sequence[tuple[int, int]], int, int]


class Relaxation:
    """The LP relaxation of the staged model (GLOP): the aggregate's variables and constraints,
    then the stages' fixings, built on first use and kept up with the fixings added since: each
    contested level's bound costs a re-solve, not a rebuild (measured on the heterogeneous
    fleet: 9 levels' bounds took 0.54 s of CPU, rebuilt each time). Read from the aggregate's
    lists and the fixings, each constraint's coefficients merged as the CP-SAT model merges
    them (placer.solve.stages._linear), not from the CP-SAT proto, which need not exist: a plan
    whose contested levels end below the presolve's effort never builds it (issue 24: at 1,000
    workloads on 10,000 nodes the proto cost 0.03 s of CPU for no search)."""

    def __init__(self, agg: Agg) -> None:
        self.lp: Any = None
        self.xs: list[Any] = []
        self.loaded = 0                  # the fixings already in the LP
        self.agg = agg

    def bound(self, fixed: Sequence[Linear], terms: Sequence[tuple[int, int]]) -> float | None:
        """The LP's maximum of `terms` over the aggregate with the `fixed` constraints (linear,
        as placer.solve.stages adds them), or None when GLOP gives no optimum."""
        if self.lp is None and not self._start():
            return None
        lp = self.lp
        for terms_k, lo, hi in fixed[self.loaded:]:
            self._constraint(terms_k, lo, hi)
        self.loaded = len(fixed)
        obj = lp.Objective()
        obj.Clear()
        for a, v in terms:
            obj.SetCoefficient(self.xs[v], obj.GetCoefficient(self.xs[v]) + a)
        obj.SetMaximization()
        return obj.Value() if lp.Solve() == lp.OPTIMAL else None

    def _start(self) -> bool:
        """The LP with the aggregate's variables and constraints; False without GLOP."""
        from ortools.linear_solver import pywraplp  # only when a bound is asked for (import ~0.06 s)

        self.lp = lp = pywraplp.Solver.CreateSolver("GLOP")
        if lp is None:
            return False
        agg = self.agg
        self.xs = [lp.NumVar(lo, hi, "") for lo, hi in zip(agg.lb, agg.ub)]
        for terms, lo, hi in agg.cons:
            self._constraint(terms, lo, hi)
        return True

    def _constraint(self, terms: Sequence[tuple[int, int]], lo: int, hi: int) -> None:
        lp, xs = self.lp, self.xs
        inf = lp.infinity()
        ct = lp.Constraint(-inf if lo <= -INF else lo, inf if hi >= INF else hi)
        coeffs: dict[int, int] = {}
        for a, v in terms:
            coeffs[v] = coeffs.get(v, 0) + a
        for v, a in coeffs.items():
            ct.SetCoefficient(xs[v], a)



def warm() -> None:
    """GLOP's layer imported ahead of the first bound (about 0.06 s of CPU): for a process
    that would otherwise wait (`placer plan` while its reading child works)."""
    from ortools.linear_solver import pywraplp  # noqa: F401


def lp_bound(model, terms: Sequence[tuple[int, int]], relaxation: Relaxation | None = None) -> float | None:
    """The LP relaxation's maximum of `terms` over the staged model (placer.solve.stages: its
    aggregate `agg` and fixings `fixed`), through `relaxation` when the caller keeps one for the
    model; else from the CP-SAT proto as it is (`model.proto()`), read on its own: a fresh LP
    that shares nothing with the kept one (the tests' judge of it)."""
    if relaxation is not None:
        return relaxation.bound(model.fixed, terms)
    from ortools.linear_solver import pywraplp

    proto = model.proto()
    lp = pywraplp.Solver.CreateSolver("GLOP")
    if lp is None:
        return None
    inf = lp.infinity()
    xs = [lp.NumVar(v.domain[0], v.domain[len(v.domain) - 1], "") for v in proto.variables]
    for c in proto.constraints:
        lin = c.linear
        lo, hi = lin.domain[0], lin.domain[len(lin.domain) - 1]
        ct = lp.Constraint(-inf if lo <= -INF else lo, inf if hi >= INF else hi)
        for v, a in zip(lin.vars, lin.coeffs):
            ct.SetCoefficient(xs[v], a)
    obj = lp.Objective()
    for a, v in terms:
        obj.SetCoefficient(xs[v], obj.GetCoefficient(xs[v]) + a)
    obj.SetMaximization()
    return obj.Value() if lp.Solve() == lp.OPTIMAL else None


def scaled_lex(share: float, value: int | None, bound: float | None, unit: int, placed: int) -> float:
    """The stage's share times its gap over GAP_FULL, between GAP_LEAST and 1, the gap counted
    in the stage's most significant term that is not closed: relative GPUs when the LP bound is
    a GPU's weight (`unit`) or more above the incumbent, else relative groups (the whole share
    when the bound is unknown)."""
    if bound is None or value is None or bound <= 0:
        return share
    gap = max(0.0, bound - value)
    rel = gap / max(1, value) if gap >= unit else gap / max(1, placed)
    return share * min(1.0, max(GAP_LEAST, rel / GAP_FULL))


def scaled(share: float, value: int | None, bound: float | None) -> float:
    """The stage's share times its relative gap over GAP_FULL, between GAP_LEAST and 1 (the
    whole share when the gap is unknown)."""
    if bound is None or value is None or bound <= 0:
        return share
    gap = max(0.0, (bound - value) / bound)
    return share * min(1.0, max(GAP_LEAST, gap / GAP_FULL))
