"""An exact judge for fleet-wide quotas (issue 23), written without placer's solver or
placer.model.quota's arithmetic.

The rules, restated from docs/clusters-file.md and implemented here on their own, in
Kueue's terms (borrowed and lent amounts rather than a cohort's total):
- a workload belongs to the first quota listing its namespace, else to `default` if there is
  one, else to none (unrestricted); a group uses, per quota, its pods' GPU requests;
- a quota's `borrowed` is max(0, used - nominal), its `unused` max(0, nominal - used);
- a quota without a cohort borrows nothing; with one, at most its borrowing limit (if any);
- per cohort, what its quotas borrow is covered by what its quotas leave unused plus a share
  of the pool; the shares together are at most the pool = GPUs on schedulable nodes of
  reachable clusters minus every quota's nominal amount (at least 0).
`optimum`: tests/solve/oracle.py's exact optimum with these as hard constraints.

Fair share (Kueue's fair sharing, restated): a quota of a cohort has share
max(borrowed / lendable) / weight, lendable = its cohort's nominal amounts plus the pool;
among the plans that reach the exact optimum, the best divides borrowing so that the shares,
sorted largest first, are lexicographically least. `fair_optimum` finds that vector by brute
force: every combination of what each quota could borrow (from the subset sums of its
groups' GPUs), in increasing order of the sorted shares, each checked by the exact oracle
with each quota's use fixed to it, until one reaches the optimum.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Mapping, Sequence

from ortools.sat.python import cp_model

from placer.model.fleet import Fleet
from placer.model.workload import PlacementGroup
from tests.solve import oracle as O

GPU = O.GPU


@dataclass(frozen=True)
class Q:
    name: str
    namespaces: tuple[str, ...]
    nominal: int                       # GPUs
    limit: int | None = None           # borrowing limit; None: none
    cohort: str | None = None
    weight: int = 1


def owner(qs: Sequence[Q], namespace: str) -> Q | None:
    for q in qs:
        if q.name != "default" and namespace in q.namespaces:
            return q
    return next((q for q in qs if q.name == "default"), None)


def use(qs: Sequence[Q], g: PlacementGroup) -> dict[str, int]:
    out: dict[str, int] = {}
    for w in g.workloads:
        q = owner(qs, w.namespace)
        if q is not None:
            out[q.name] = out.get(q.name, 0) + sum(O.demand(i).get(GPU, 0) * i.pods for i in w.instances)
    return out


def pool(f: Fleet, qs: Sequence[Q]) -> int:
    cap = sum(n.allocatable.get(GPU, 0) for c in f.clusters if c.error is None for n in c.nodes if O.schedulable(n))
    return max(0, cap - sum(q.nominal for q in qs))


def within(f: Fleet, qs: Sequence[Q], used: Mapping[str, int]) -> list[str]:
    """What `used` (per quota) breaks, by direct counting (empty: nothing)."""
    bad = []
    borrowed = {q.name: max(0, used.get(q.name, 0) - q.nominal) for q in qs}
    unused = {q.name: max(0, q.nominal - used.get(q.name, 0)) for q in qs}
    for q in qs:
        if q.cohort is None and borrowed[q.name]:
            bad.append(f"{q.name} borrows {borrowed[q.name]} without a cohort")
        if q.limit is not None and borrowed[q.name] > q.limit:
            bad.append(f"{q.name} borrows {borrowed[q.name]}, limit {q.limit}")
    from_pool = 0
    for c in sorted({q.cohort for q in qs if q.cohort}):
        members = [q for q in qs if q.cohort == c]
        from_pool += max(0, sum(borrowed[q.name] for q in members) - sum(unused[q.name] for q in members))
    if from_pool > pool(f, qs):
        bad.append(f"cohorts take {from_pool} from a pool of {pool(f, qs)}")
    return bad


def plan_violations(f: Fleet, qs: Sequence[Q], groups: Sequence[PlacementGroup], plan) -> list[str]:
    """The quotas a plan breaks, counted from its placements (GPUs per workload)."""
    gpus = {w.key: w for g in groups for w in g.workloads}
    used: dict[str, int] = {}
    for p in plan.placements:
        q = owner(qs, gpus[p.workload].namespace)
        if q is not None:
            used[q.name] = used.get(q.name, 0) + sum(
                O.demand(i).get(GPU, 0) * i.pods for i in gpus[p.workload].instances)
    return within(f, qs, used)


def optimum(f: Fleet, qs: Sequence[Q], groups: Sequence[PlacementGroup]) -> tuple:
    """The exact lexicographic optimum (tests/solve/oracle.py) under the quotas."""
    return O.optimum(f, groups, constrain=_constrain(f, qs, groups))


def _constrain(f: Fleet, qs: Sequence[Q], groups: Sequence[PlacementGroup], fix: Mapping[str, int] | None = None,
               held: Mapping[str, int] | None = None):
    """The quota rules as constraints on the oracle's placement bools; `fix`: per quota the
    exact amount it borrows (0: it stays within its nominal amount); `held`: per quota what
    work held elsewhere already uses."""
    big = 10**6

    def constrain(m: cp_model.CpModel, y) -> None:
        used = {q.name: (held or {}).get(q.name, 0)
                + sum(use(qs, groups[gi]).get(q.name, 0) * v for (gi, _), v in y.items()) for q in qs}
        borrowed, unused = {}, {}
        for q in qs:
            u = m.NewIntVar(0, big, f"u_{q.name}")
            m.Add(u == used[q.name])
            b, n = m.NewIntVar(0, big, ""), m.NewIntVar(0, big, "")
            m.AddMaxEquality(b, [u - q.nominal, 0])
            m.AddMaxEquality(n, [q.nominal - u, 0])
            borrowed[q.name], unused[q.name] = b, n
            if q.cohort is None:
                m.Add(b == 0)
            elif q.limit is not None:
                m.Add(b <= q.limit)
            if fix is not None and q.name in fix:
                m.Add(b == fix[q.name])
        shares = []
        for c in sorted({q.cohort for q in qs if q.cohort}):
            members = [q.name for q in qs if q.cohort == c]
            share = m.NewIntVar(0, big, f"share_{c}")
            m.Add(sum(borrowed[n] for n in members) <= sum(unused[n] for n in members) + share)
            shares.append(share)
        if shares:
            m.Add(sum(shares) <= pool(f, qs))

    return constrain


# --- fair share -------------------------------------------------------------------------------

def fair_vector(f: Fleet, qs: Sequence[Q], borrowed: Mapping[str, int]) -> tuple[Fraction, ...]:
    """The shares of the quotas of a cohort, largest first."""
    out = []
    for q in qs:
        if q.cohort is None:
            continue
        lend = sum(o.nominal for o in qs if o.cohort == q.cohort) + pool(f, qs)
        out.append(Fraction(borrowed.get(q.name, 0), lend) / q.weight if lend else Fraction(0))
    return tuple(sorted(out, reverse=True))


def plan_borrowed(qs: Sequence[Q], groups: Sequence[PlacementGroup], plan) -> dict[str, int]:
    """What each quota borrows in a plan, counted from its placements."""
    wls = {w.key: w for g in groups for w in g.workloads}
    used: dict[str, int] = {}
    for p in plan.placements:
        q = owner(qs, wls[p.workload].namespace)
        if q is not None:
            used[q.name] = used.get(q.name, 0) + sum(O.demand(i).get(GPU, 0) * i.pods
                                                     for i in wls[p.workload].instances)
    return {q.name: max(0, used.get(q.name, 0) - q.nominal) for q in qs}


def _borrowable(qs: Sequence[Q], groups: Sequence[PlacementGroup], q: Q) -> list[int]:
    """Every amount `q` could borrow: its use beyond nominal over every subset of its groups."""
    sums = {0}
    for g in groups:
        u = use(qs, g).get(q.name, 0)
        if u:
            sums |= {s + u for s in sums}
    return sorted({max(0, s - q.nominal) for s in sums if q.limit is None or s - q.nominal <= q.limit})


def fair_optimum(f: Fleet, qs: Sequence[Q], groups: Sequence[PlacementGroup],
                 below: tuple[Fraction, ...] | None = None) -> tuple[tuple[Fraction, ...] | None, int]:
    """The least sorted share vector among the plans reaching the exact optimum, by brute
    force over what each quota borrows; with `below`, only vectors strictly below it are
    tried (None: none of them is reachable). Also returns how many combinations the exact
    oracle checked."""
    best = optimum(f, qs, groups)
    lenders = [q for q in qs if q.cohort is not None]
    combos = []
    for amounts in itertools.product(*(_borrowable(qs, groups, q) for q in lenders)):
        fix = dict(zip((q.name for q in lenders), amounts))
        vec = fair_vector(f, qs, fix)
        if (below is None or vec < below) and _may_cover(f, qs, fix):
            combos.append((vec, fix))
    combos.sort(key=lambda c: c[0])
    checked = 0
    for vec, fix in combos:
        checked += 1
        try:
            O.optimum(f, groups, constrain=_constrain(f, qs, groups, fix), at=best)
        except LookupError:             # no plan at the optimum borrows exactly these amounts
            continue
        return vec, checked
    return None, checked


def _may_cover(f: Fleet, qs: Sequence[Q], fix: Mapping[str, int]) -> bool:
    """A quick necessary condition: each cohort's borrowing is covered by its quotas that
    borrow nothing (at most their whole nominal amounts) and the pool."""
    need = 0
    for c in sorted({q.cohort for q in qs if q.cohort}):
        members = [q for q in qs if q.cohort == c]
        need += max(0, sum(fix.get(q.name, 0) for q in members)
                    - sum(q.nominal for q in members if not fix.get(q.name, 0)))
    return need <= pool(f, qs)


def instance(seed: int, weights: bool = False) -> tuple[Fleet, list[Q], list[PlacementGroup]]:
    """A small random fleet (tests/solve/oracle.py's `gpu` family) whose workloads are spread
    over four namespaces, and two to four quotas over three of them (some in cohort `lab`,
    some with a borrowing limit, sometimes a default entry)."""
    rnd = random.Random(seed)
    f, gs = O.instance(O.FAMILIES["gpu"], seed)
    spaces = ("red", "blue", "green", "free")
    out = []
    for g in gs:
        ws = tuple(replace(w, namespace=rnd.choice(spaces)) for w in g.workloads)
        out.append(replace(g, workloads=ws))
    total = sum(n.allocatable.get(GPU, 0) for c in f.clusters for n in c.nodes)
    qs = []
    for name in rnd.sample(("red", "blue", "green"), rnd.randint(2, 3)):
        cohort = "lab" if rnd.random() < 0.7 else None
        limit = rnd.choice((None, 0, 4, 8)) if cohort else None
        qs.append(Q(name, (name,), rnd.randint(0, max(1, total // 3)), limit, cohort))
    if rnd.random() < 0.3:
        qs.append(Q("default", (), rnd.randint(0, 8), None, rnd.choice((None, "lab"))))
    if weights:                          # drawn apart, so the instances without weights stay as they were
        wr = random.Random(seed + 7919)
        qs = [replace(q, weight=wr.choice((1, 1, 2, 3))) for q in qs]
    return f, qs, out


# --- options: does a group fit beside the plan held where it is ---------------------------------

def placeable(f: Fleet, qs: Sequence[Q], groups: Sequence[PlacementGroup], plan, g: PlacementGroup,
              without: Sequence[str] = ()) -> bool:
    """Whether `g` can be placed (exactly, over every node-level assignment) with every other
    placement of `plan` held on its nodes and counted against its quota, the groups
    `without` taken out; `qs` as given (an option's raised quota included)."""
    wls = {w.key: w for gr in groups for w in gr.workloads}
    gone = set(without) | {g.key}
    used: dict[tuple[str, str], dict[str, int]] = {}
    held: dict[str, int] = {}
    for p in plan.placements:
        if p.group in gone:
            continue
        w = wls[p.workload]
        insts = {i.key: i for i in w.instances}
        for node, counts in p.nodes.items():
            slot = used.setdefault((p.cluster, node), {})
            for ikey, n in counts.items():
                for r, v in O.demand(insts[ikey]).items():
                    if r != "pods":
                        slot[r] = slot.get(r, 0) + v * n
        q = owner(qs, w.namespace)
        if q is not None:
            held[q.name] = held.get(q.name, 0) + sum(O.demand(i).get(GPU, 0) * i.pods for i in w.instances)
    clusters = []
    for c in f.clusters:
        nodes = []
        for n in c.nodes:
            extra = used.get((c.name, n.name), {})
            nodes.append(replace(n, used={r: n.used.get(r, 0) + extra.get(r, 0) for r in {*n.used, *extra}}))
        clusters.append(replace(c, nodes=tuple(nodes)))
    loaded = replace(f, clusters=tuple(clusters))
    got = O.optimum(loaded, [g], constrain=_constrain(loaded, qs, [g], held=held))
    return any(n for level in got for n in level)


def fair_instance(seed: int) -> tuple[Fleet, list[Q], list[PlacementGroup]]:
    """An instance for fair share: two clusters of 8-GPU nodes, one-pod jobs of 2, 4 or 8 GPUs
    (many plans then place the same GPUs, so who borrows is open) in two priority levels,
    wanting more than the fleet holds, and three weighted quotas with small nominal amounts,
    mostly in cohort `lab`."""
    from tests.builders import fleet, group, wl
    rnd = random.Random(seed)
    f = fleet(*(f"c{i}: {rnd.randint(1, 3)}x8" for i in range(2)))
    total = sum(n.allocatable.get(GPU, 0) for c in f.clusters for n in c.nodes)
    names = ("red", "blue", "green")
    gs = [group(wl(f"{rnd.choice(names)}/w{i}", f"1x{rnd.choice((2, 4, 4, 8))}", prio=rnd.choice((0, 0, 0, 10))))
          for i in range(total // 4 + rnd.randint(2, 5))]
    qs = [Q(n, (n,), rnd.randint(0, total // 4), rnd.choice((None, None, None, 4)),
            "lab" if rnd.random() < 0.85 else None, rnd.choice((1, 1, 2, 3))) for n in names]
    return f, [replace(q, limit=None) if q.cohort is None else q for q in qs], gs


def to_yaml_quotas(qs: Sequence[Q]):
    """The quotas as placer reads them (placer.model.quota), through the clusters file's model."""
    from placer.inputs.quotas import QuotaSpec, to_quotas
    specs = []
    for q in qs:
        d: dict = {"name": q.name, "nominal": {GPU: q.nominal}}
        if q.name != "default":
            d["members"] = {"namespaces": list(q.namespaces)}
        if q.cohort:
            d["cohort"] = q.cohort
        if q.limit is not None:
            d["borrowingLimit"] = {GPU: q.limit}
        if q.weight != 1:
            d["weight"] = q.weight
        specs.append(QuotaSpec.model_validate(d))
    return to_quotas(specs)
