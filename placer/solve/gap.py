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

from typing import Sequence

from placer.solve.model import INF

GAP_FULL = 0.01        # a relative gap of 1% or more gets the stage's whole share
GAP_LEAST = 0.1        # the least fraction of its share a contested stage gets


def lp_bound(m, terms: Sequence[tuple[int, int]]) -> float | None:
    """The LP relaxation's maximum of `terms` over the CP-SAT model `m` (linear constraints
    only, as placer.solve.stages builds it), or None when GLOP gives no optimum."""
    from ortools.linear_solver import pywraplp  # only when asked for (import ~0.06 s)

    lp = pywraplp.Solver.CreateSolver("GLOP")
    if lp is None:
        return None
    inf = lp.infinity()
    xs = []
    for v in m.variables:
        dom = list(v.domain)
        xs.append(lp.NumVar(dom[0], dom[-1], ""))
    for c in m.constraints:
        lin = c.linear
        dom = list(lin.domain)
        ct = lp.Constraint(-inf if dom[0] <= -INF else dom[0], inf if dom[-1] >= INF else dom[-1])
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
