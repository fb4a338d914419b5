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


class Relaxation:
    """The LP relaxation of one CP-SAT model (GLOP), built on first use and kept up with the
    constraints added to the model since (the stages' fixings): each contested level's bound
    costs a re-solve, not a rebuild (measured on the heterogeneous fleet: 9 levels' bounds
    took 0.54 s of CPU, rebuilt each time). Given the aggregate model the CP-SAT model was made
    from (placer.solve.stages), its variables and constraints are read from the aggregate's
    lists, the same coefficients merged the same way, rather than from the proto (issue 24: at
    1,000 workloads on 10,000 nodes, 0.06 of the bound's 0.15 s of CPU)."""

    def __init__(self, agg: Agg | None = None) -> None:
        self.lp: Any = None
        self.xs: list[Any] = []
        self.loaded = 0                  # the model's constraints already in the LP
        self.agg = agg

    def bound(self, m, terms: Sequence[tuple[int, int]]) -> float | None:
        """The LP's maximum of `terms` over the model `m` as it is now (linear constraints
        only, as placer.solve.stages builds it), or None when GLOP gives no optimum."""
        if self.lp is None and not self._start(m):
            return None
        lp, inf = self.lp, self.lp.infinity()
        for k in range(self.loaded, len(m.constraints)):
            lin = m.constraints[k].linear
            lo, hi = lin.domain[0], lin.domain[len(lin.domain) - 1]
            ct = lp.Constraint(-inf if lo <= -INF else lo, inf if hi >= INF else hi)
            for v, a in zip(lin.vars, lin.coeffs):
                ct.SetCoefficient(self.xs[v], a)
        self.loaded = len(m.constraints)
        obj = lp.Objective()
        obj.Clear()
        for a, v in terms:
            obj.SetCoefficient(self.xs[v], obj.GetCoefficient(self.xs[v]) + a)
        obj.SetMaximization()
        return obj.Value() if lp.Solve() == lp.OPTIMAL else None

    def _start(self, m) -> bool:
        """The LP with the model's variables, and with the aggregate's constraints when given
        (the model's first ones, placer.solve.stages._to_cpsat); False without GLOP."""
        from ortools.linear_solver import pywraplp  # only when a bound is asked for (import ~0.06 s)

        self.lp = lp = pywraplp.Solver.CreateSolver("GLOP")
        if lp is None:
            return False
        agg = self.agg
        if agg is None or len(agg.lb) != len(m.variables) or len(agg.cons) > len(m.constraints):
            self.xs = [lp.NumVar(v.domain[0], v.domain[len(v.domain) - 1], "") for v in m.variables]
            return True
        self.xs = xs = [lp.NumVar(lo, hi, "") for lo, hi in zip(agg.lb, agg.ub)]
        inf = lp.infinity()
        for terms, lo, hi in agg.cons:
            ct = lp.Constraint(-inf if lo <= -INF else lo, inf if hi >= INF else hi)
            coeffs: dict[int, int] = {}
            for a, v in terms:
                coeffs[v] = coeffs.get(v, 0) + a
            for v, a in coeffs.items():
                ct.SetCoefficient(xs[v], a)
        self.loaded = len(agg.cons)
        return True


def lp_bound(m, terms: Sequence[tuple[int, int]], relaxation: Relaxation | None = None) -> float | None:
    """The LP relaxation's maximum of `terms` over the CP-SAT model `m` (through `relaxation`
    when the caller keeps one for the model)."""
    return (relaxation or Relaxation()).bound(m, terms)


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
