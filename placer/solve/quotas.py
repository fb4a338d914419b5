"""Fleet-wide quotas in the solve (issue 23): hard linear constraints of the CP-SAT model,
the room the greedy plans and the repair respect, the trim that keeps any plan within them,
and the reason a group left out by its quota gets.

A group's use of a quota is the sum of its pods' requests (the resources the quota names),
per quota its workloads belong to; the committed groups' use is counted first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from placer.model import reasons as R
from placer.model.quota import Quotas, QuotaUse, add_usage, grows, headroom, overs, pool, quota_uses
from placer.solve.groups import GroupInfo
from placer.solve.problem import Problem
from placer.solve.scheduling import pod_demand

Use = dict[str, dict[str, int]]


def group_use(quotas: Quotas, g: GroupInfo) -> Use:
    """quota -> resource -> what the group's pods request of it."""
    out: Use = {}
    for p in g.parts:
        q = quotas.of(p.workload)
        if q is not None:
            add_usage(out, q.name, {r: v for r, v in p.demand.items() if r in q.nominal}, p.pods)
    return out


def tag(problem: Problem, groups: Iterable[GroupInfo]) -> None:
    """Each group's quota use as a key: groups of different quotas never share a signature."""
    quotas = problem.fleet.quotas
    if not quotas:
        return
    for g in groups:
        g.quota_key = tuple(sorted((q, tuple(sorted(u.items()))) for q, u in group_use(quotas, g).items()))


@dataclass
class Tally:
    """The usage of a plan in progress (committed groups counted), and whether a group fits."""

    quotas: Quotas
    pools: Mapping[str, int]
    usage: Use = field(default_factory=dict)

    def add(self, use: Use, sign: int = 1) -> None:
        for q, u in use.items():
            add_usage(self.usage, q, u, sign)

    def room(self, use: Use) -> bool:
        if not use:
            return True
        before = overs(self.quotas, self.usage, self.pools)
        self.add(use)
        after = overs(self.quotas, self.usage, self.pools)
        self.add(use, -1)
        return not grows(before, after)         # committed work over a lowered limit blocks only its quota


def tally(problem: Problem, placed: Iterable[int] = ()) -> Tally | None:
    """The usage of the committed groups and of `placed` (group indices); None without quotas."""
    quotas = problem.fleet.quotas
    if not quotas:
        return None
    t = Tally(quotas, pool(problem.fleet, quotas))
    t.add({q: dict(u) for q, u in problem.fleet.quota_held.items()})
    if quotas.counted is not None:          # the daemon counts its placed copies in full itself
        t.add({q: dict(u) for q, u in quotas.counted.items()})
    else:
        for g, _ in problem.committed:
            t.add(group_use(quotas, g))
    by_idx = {g.index: g for g in problem.groups}
    for gi in placed:
        t.add(group_use(quotas, by_idx[gi]))
    return t


def within(problem: Problem, result: dict) -> dict:
    """`result` kept within every quota: its groups taken again in greedy order (highest
    priority, then most GPUs), each kept only if it stays within its quotas."""
    t = tally(problem)
    if t is None:
        return result
    full = tally(problem, result)
    if full is not None and not grows(overs(t.quotas, t.usage, t.pools), overs(full.quotas, full.usage, full.pools)):
        return result
    by_idx = {g.index: g for g in problem.groups}
    kept = {}
    for gi in sorted(result, key=lambda i: (-by_idx[i].priority, -by_idx[i].gpus, by_idx[i].key)):
        use = group_use(t.quotas, by_idx[gi])
        if t.room(use):
            t.add(use)
            kept[gi] = result[gi]
    return kept


def figures(problem: Problem, result: Mapping[int, object]) -> tuple[QuotaUse, ...]:
    """Per quota: what it holds once `result` is carried out, and what its unplaced groups want."""
    t = tally(problem, result)
    if t is None:
        return ()
    pending: Use = {}
    for g in problem.groups:
        if g.index not in result:
            for q, u in group_use(t.quotas, g).items():
                add_usage(pending, q, u)
    return quota_uses(t.quotas, t.usage, pending, t.pools)


def use_terms(agg, quotas: Quotas) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """(quota, resource) -> the model's terms for what new work uses of it."""
    terms: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for sg in agg.sigs:
        for qname, u in group_use(quotas, sg.rep).items():
            for r, v in u.items():
                terms.setdefault((qname, r), []).extend((v, agg.z[(sg.index, c)]) for c in sg.rep.eligible)
    return terms


def add_constraints(agg, problem: Problem) -> None:
    """The quota limits as linear constraints over the model's count variables."""
    t = tally(problem)
    if t is None:
        return
    quotas, done = t.quotas, t.usage
    terms = use_terms(agg, quotas)
    for q in quotas.entries:
        for r, nominal in q.nominal.items():
            own = q.may_borrow(r)
            if own is not None and terms.get((q.name, r)):
                had = done.get(q.name, {}).get(r, 0)
                agg.add(terms[(q.name, r)], 0, max(0, nominal + own - had))
    for r in quotas.resources():
        _cohorts(agg, quotas, terms, done, r, t.pools.get(r, 0))


def _cohorts(agg, quotas: Quotas, terms, done: Use, r: str, pool_r: int) -> None:
    """Per cohort an excess variable >= its use beyond its nominal amounts; together within the pool."""
    excess_vars, had_excess = [], 0
    for name, members in sorted(quotas.cohorts().items()):
        nominal = sum(m.nominal.get(r, 0) for m in members)
        had = sum(done.get(m.name, {}).get(r, 0) for m in members)
        new = [t for m in members for t in terms.get((m.name, r), ())]
        had_excess += max(0, had - nominal)
        if not new:
            continue
        most = sum(a * agg.ub[v] for a, v in new)          # tight bounds: CP-SAT refuses overflow
        x = agg.var(f"quota_excess_{name}_{r}", 0, most)
        agg.add(new + [(-1, x)], -most, nominal - had)
        excess_vars.append(x)
    if excess_vars:
        # committed work beyond the pool is never taken back here: new work may not add to it
        agg.add([(1, x) for x in excess_vars], 0, max(pool_r, had_excess))


def reason(problem: Problem, result: Mapping[int, object], g: GroupInfo) -> R.Reason | None:
    """Why `g` may not join the plan under its quotas (None: its quotas have room)."""
    t = tally(problem, result)
    if t is None:
        return None
    use = group_use(t.quotas, g)
    if t.room(use):
        return None
    for qname, u in sorted(use.items()):
        quota = t.quotas.get(qname)
        assert quota is not None
        for r, need in sorted(u.items()):
            h = headroom(t.quotas, t.usage, t.pools, quota, r)
            if need > h.left:
                return R.OverQuota(qname, r, h.used, h.nominal, h.may_borrow, h.cohort, h.cohort_unused, need, h.left)
    q, u = next(iter(sorted(use.items())))
    r = next(iter(sorted(u)))
    quota = t.quotas.get(q)
    assert quota is not None
    h = headroom(t.quotas, t.usage, t.pools, quota, r)
    return R.OverQuota(q, r, h.used, h.nominal, h.may_borrow, h.cohort, h.cohort_unused, u[r], h.left)


def over_quota(problem: Problem, result: Mapping[int, object], g: GroupInfo,
               why: Mapping[str, R.Reason]) -> dict[str, R.Reason]:
    """The group's reasons with its quota's where its quota, not the cluster, keeps it out:
    on every cluster it could use at all (static reasons and clusters it never fits stay)."""
    over = reason(problem, result, g)
    if over is None:
        return dict(why)
    out = dict(why)
    for c in g.eligible:
        out[problem.clusters[c].name] = over
    return out


def workload_demand(w) -> dict[str, int]:
    """What all of a workload's pods request (`placer.model.workload.Workload`): the amounts a
    quota counts for work already placed (the daemon's book, `plan`'s copies on live clusters)."""
    total: dict[str, int] = {}
    for inst in w.instances:
        for r, v in pod_demand(inst.pod).items():
            total[r] = total.get(r, 0) + v * max(0, inst.pods)
    return total
