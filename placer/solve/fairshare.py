"""Weighted fair share of borrowed capacity (issue 23): stages of the lexicographic objective.

A quota's share is Kueue's fair-sharing value (placer.model.quota.fair_shares): the largest,
over the resources it names, of what it borrows (use beyond nominal, committed work counted)
divided by its cohort's lendable amount (the cohort's nominal amounts plus the fleet's pool),
divided by its weight. Among the plans equal on the priority stages (GPUs, then workloads,
placed per level), the solve takes the one whose largest share is smallest, then the next
largest, and so on: the shares sorted largest first, minimised lexicographically.

The encoding, per quota q that may borrow (a cohort, and work that could take it past its
nominal amount; a quota that never borrows has share 0 in every plan and changes no
comparison): b[q][r] >= used - nominal, b >= 0; s[q] >= c[q][r] * b[q][r] with integer
c[q][r] proportional to 1 / (lendable x weight) (exact: a common denominator, while the
values stay below 2^50; else rounded over 2^40 and the stages no longer prove the share
order). Stage k (k = 1..n) minimises the sum of the k largest shares with the classic
linear form min k * t + sum_q max(0, s[q] - t) (one t and n excess variables per stage), and
fixes it for the stages after: minimising the largest, then the two largest, ..., is the
lexicographic order on the sorted shares. n stages, n^2 variables: only quotas that may
borrow count, usually a handful.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from math import lcm
from typing import Iterable, Sequence

from placer.model.quota import fair_key, fair_shares, lendable
from placer.solve.problem import Problem
from placer.solve.quotas import group_use, tally, use_terms

EXACT_MAX = 2**50                 # exact integer shares while every term stays below this
APPROX_RANGE = 2**40              # else the largest share is scaled to about this
LABEL = "fair share"

Terms = list[tuple[int, int]]


@dataclass
class FairDefs:
    """The fair-share variables of one model, for hints and stages."""

    borrow: list[tuple[int, Terms, int]] = field(default_factory=list)   # b = max(lb, sum(terms) + offset)
    shares: list[tuple[int, list[tuple[int, int]]]] = field(default_factory=list)   # s = max coef * b
    tops: list[tuple[int, list[int], int]] = field(default_factory=list)  # (t, e per share, k)
    stages: list[tuple[str, Terms]] = field(default_factory=list)
    exact: bool = True


def add_stages(agg, problem: Problem) -> FairDefs:
    """The share variables and the n stage objectives (in `agg.fair`)."""
    defs = FairDefs()
    t = tally(problem)
    if t is None:
        return defs
    quotas, done = t.quotas, t.usage
    terms = use_terms(agg, quotas)
    lend = lendable(quotas, t.pools)
    rows: list[tuple[str, list[tuple[Fraction, int]]]] = []       # quota, (ratio, b var)
    for q in quotas.entries:
        if q.cohort is None:
            continue
        parts = []
        for r, nominal in sorted(q.nominal.items()):
            new, had = terms.get((q.name, r), []), done.get(q.name, {}).get(r, 0)
            most = had + sum(a * agg.ub[v] for a, v in new)
            if most <= nominal or lend.get((q.cohort, r), 0) <= 0:
                continue
            low = max(0, had - nominal)
            b = agg.var(f"borrow_{q.name}_{r}", low, most - nominal)
            # b >= new + had - nominal
            agg.add(new + [(-1, b)], -(most + most), nominal - had)
            defs.borrow.append((b, new, had - nominal))
            parts.append((Fraction(1, lend[(q.cohort, r)]) / Fraction(q.weight), b))
        if parts:
            rows.append((q.name, parts))
    if not rows:
        return defs
    coef = _coefficients(agg, rows, defs)
    svars = []
    for (name, parts), cs in zip(rows, coef):
        top = max(c * agg.ub[b] for c, (_, b) in zip(cs, parts))
        s = agg.var(f"share_{name}", 0, top)
        for c, (_, b) in zip(cs, parts):
            agg.add([(1, s), (-c, b)], 0, top)
        defs.shares.append((s, [(c, b) for c, (_, b) in zip(cs, parts)]))
        svars.append(s)
    _top_sums(agg, defs, svars)
    return defs


def _coefficients(agg, rows, defs: FairDefs) -> list[list[int]]:
    """Integer coefficients proportional to each (quota, resource) ratio: exact when small."""
    den = lcm(*(ratio.denominator for _, parts in rows for ratio, _ in parts))
    exact = [[int(ratio * den) for ratio, _ in parts] for _, parts in rows]
    most = max(c * agg.ub[b] for (_, parts), cs in zip(rows, exact) for c, (_, b) in zip(cs, parts))
    if most * len(rows) < EXACT_MAX:
        return exact
    defs.exact = False
    peak = max(ratio * agg.ub[b] for _, parts in rows for ratio, b in parts)
    scale = Fraction(APPROX_RANGE) / peak
    return [[max(1, round(ratio * scale)) for ratio, _ in parts] for _, parts in rows]


def _top_sums(agg, defs: FairDefs, svars: Sequence[int]) -> None:
    """Stage k: the sum of the k largest shares, as min k * t + sum max(0, s - t)."""
    n = len(svars)
    most = max(agg.ub[s] for s in svars)
    for k in range(1, n + 1):
        if k == n:
            defs.stages.append((f"{LABEL} {k}/{n}", [(1, s) for s in svars]))
            continue
        t = agg.var(f"fair_top_{k}", 0, most)
        es = []
        for s in svars:
            e = agg.var(f"fair_excess_{k}_{s}", 0, agg.ub[s])
            agg.add([(1, e), (-1, s), (1, t)], 0, agg.ub[s] + most)
            es.append(e)
        defs.tops.append((t, es, k))
        defs.stages.append((f"{LABEL} {k}/{n}", [(k, t)] + [(1, e) for e in es]))


def hint(defs: FairDefs, values: list[int]) -> None:
    """Complete a hint (placer.solve.model.values_from) with the fair-share variables."""
    for b, terms, offset in defs.borrow:
        values[b] = max(0, offset, sum(a * values[v] for a, v in terms) + offset)
    for s, parts in defs.shares:
        values[s] = max(c * values[b] for c, b in parts)
    ordered = sorted((values[s] for s, _ in defs.shares), reverse=True)
    for t, es, k in defs.tops:
        values[t] = ordered[k - 1]
        for e, (s, _) in zip(es, defs.shares):
            values[e] = max(0, values[s] - values[t])


# --- comparing plans ---------------------------------------------------------------------------

def key(problem: Problem, placed: Iterable[int]) -> tuple[Fraction, ...]:
    """A plan's shares as a key, larger better (placer.model.quota.fair_key); () without quotas."""
    t = tally(problem, placed)
    return () if t is None else fair_key(fair_shares(t.quotas, t.usage, t.pools))


def model_key(agg, problem: Problem, values: Sequence[int]) -> tuple[Fraction, ...]:
    """The same key for the model's answer (its count variables)."""
    t = tally(problem)
    if t is None:
        return ()
    for sg in agg.sigs:
        n = sum(values[agg.z[(sg.index, c)]] for c in sg.rep.eligible)
        if n:
            t.add(group_use(t.quotas, sg.rep), n)
    return fair_key(fair_shares(t.quotas, t.usage, t.pools))
