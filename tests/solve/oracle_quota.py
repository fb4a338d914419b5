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
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
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
    big = 10**6

    def constrain(m: cp_model.CpModel, y) -> None:
        used = {q.name: sum(use(qs, groups[gi]).get(q.name, 0) * v for (gi, _), v in y.items()) for q in qs}
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
        shares = []
        for c in sorted({q.cohort for q in qs if q.cohort}):
            members = [q.name for q in qs if q.cohort == c]
            share = m.NewIntVar(0, big, f"share_{c}")
            m.Add(sum(borrowed[n] for n in members) <= sum(unused[n] for n in members) + share)
            shares.append(share)
        if shares:
            m.Add(sum(shares) <= pool(f, qs))

    return O.optimum(f, groups, constrain=constrain)


def instance(seed: int) -> tuple[Fleet, list[Q], list[PlacementGroup]]:
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
    return f, qs, out


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
        specs.append(QuotaSpec.model_validate(d))
    return to_quotas(specs)
