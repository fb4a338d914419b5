"""What would make it fit, for a workload its fleet-wide quota keeps out (issue 23):
- reclaim: take out workloads of other quotas that borrow (placed by this plan, or placer's
  copies still promised), freeing both what they borrow and their capacity; the set is the
  smallest that works (fewest GPUs, then workloads, then lowest priorities: placer.solve.minimal),
  pruned by the quota arithmetic (exact for the quota rules) and proven by a re-solve;
- raise-quota: the group's quota's nominal amount raised by the least amount that works: the
  least amount (from the arithmetic lower bound, what it needs beyond what its quota still
  allows) by which the quota rules, raised nominal and the smaller pool together, let it in,
  proven by a re-solve.
Each re-solve is the real solve with the group alone, the rest of the plan held where it is
(its capacity on its nodes, its use of every quota counted first: Fleet.quota_held).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Mapping, Sequence

from placer.model.fleet import Cluster, Fleet, Node
from placer.model.plan import Plan
from placer.model.quota import Quotas, add_usage, capacity, headroom, pool, violations
from placer.model.reasons import OverQuota
from placer.model.workload import PlacementGroup
from placer.solve.changes import Option, Victim
from placer.solve.fits import add_demand, first_true
from placer.solve.minimal import Cand, minimal_removal
from placer.solve.resolve import HeldPlan, Resolver, Stop, loaded_cluster
from placer.solve.scheduling import pod_demand

Use = dict[str, dict[str, int]]
SCAN_MAX = 4096                  # raise amounts tried one by one (GPUs); beyond, bisected (memory bytes)


def group_use(quotas: Quotas, group: PlacementGroup) -> Use:
    """quota -> resource -> what the group's pods request of it (the resources it names)."""
    out: Use = {}
    for w in group.workloads:
        q = quotas.of(w)
        if q is None:
            continue
        for inst in w.instances:
            d = pod_demand(inst.pod)
            add_usage(out, q.name, {r: v for r, v in d.items() if r in q.nominal}, max(0, inst.pods))
    return out


class QuotaSearch:
    """The quota options of one plan: its held groups' quota use, and the searches."""

    def __init__(self, fleet: Fleet, groups: Mapping[str, PlacementGroup], plan: Plan, hold: HeldPlan,
                 resolver: Resolver):
        assert fleet.quotas is not None
        self.fleet, self.quotas, self.plan, self.hold, self.resolver = fleet, fleet.quotas, plan, hold, resolver
        self.pools = pool(fleet, fleet.quotas)
        self.uses = {key: group_use(self.quotas, groups[key]) for key in hold.held if key in groups}
        self.state = {p.group: "planned" for p in plan.placements}
        self.state.update({p.group: "placed" for p in plan.committed})
        self.victims: dict[str, list[Victim]] = {}
        for p in (*plan.placements, *plan.committed):
            self.victims.setdefault(p.group, []).append(
                Victim(p.workload, p.kind, p.gpus, p.priority, self.state[p.group]))
        # committed work already over a limit (it is never taken back) fails any re-solve's
        # verification: the re-solves then go without quotas, and none is offered
        self.sound = not violations(self.quotas, self.usage(), self.pools)

    def pool(self, quotas: Quotas | None = None, extra: Sequence[Node] = ()) -> dict[str, int]:
        """The fleet's pool under `quotas`, with `extra` (new) nodes."""
        quotas = quotas or self.quotas
        out = {}
        for r in quotas.resources():
            cap = capacity(self.fleet, r) + sum(n.allocatable.get(r, 0) for n in extra if n.schedulable)
            out[r] = max(0, cap - sum(q.nominal.get(r, 0) for q in quotas.entries))
        return out

    def usage(self, without: Iterable[str] = ()) -> Use:
        out: Use = {}
        for q, u in self.fleet.quota_held.items():
            add_usage(out, q, u)
        skip = set(without)
        for key, use in self.uses.items():
            if key not in skip:
                for q, u in use.items():
                    add_usage(out, q, u)
        return out

    def clusters(self, without: Iterable[str] = ()) -> list[Cluster]:
        """Every reachable cluster loaded with the held plan, less the groups `without`."""
        skip = set(without)
        out = []
        for cl in self.fleet.clusters:
            if not cl.reachable or not cl.nodes:
                continue
            load = self.hold.loads(cl)
            for key in skip:
                for node, d in self.hold.held.get(key, {}).get(cl.name, {}).items():
                    add_demand(load, node, d, -1)
            out.append(loaded_cluster(cl, load))
        return out

    def options(self, group: PlacementGroup, spent: list[int]) -> tuple[list[Option], str | None]:
        """The group's quota options (none when no quota keeps it out) and why a search stopped short."""
        over = self._reason(group)
        if over is None or not self.sound:
            return [], None
        out: list[Option] = []
        cut: str | None = None
        for search in (self._reclaim, self._raise):
            try:
                opt, why = search(group, over, spent)
            except Stop as stop:
                opt, why = None, stop.why
            cut = cut or why
            if opt is not None:
                out.append(opt)
        return out, cut

    def _reason(self, group: PlacementGroup) -> OverQuota | None:
        for u in self.plan.unplaced:
            if u.group == group.key:
                return next((r for r in u.reasons.values() if isinstance(r, OverQuota)), None)
        return None

    def _fits_quota(self, use: Use, usage: Use) -> bool:
        trial: Use = {q: dict(u) for q, u in usage.items()}
        for q, u in use.items():
            add_usage(trial, q, u)
        return not violations(self.quotas, trial, self.pools)

    # -- reclaim --

    def _reclaim(self, group: PlacementGroup, over: OverQuota, spent: list[int]) -> tuple[Option | None, str | None]:
        usage = self.usage()
        r = over.resource
        borrowing = {q.name for q in self.quotas.entries if q.cohort is not None and q.name != over.quota
                     and r in q.nominal and usage.get(q.name, {}).get(r, 0) > q.nominal[r]}
        cands = [Cand(tuple(self.victims[key]), sum(v.gpus for v in self.victims[key]), frozenset({key}), {}, key)
                 for key, use in sorted(self.uses.items())
                 if key in self.victims and use and set(use) <= borrowing and any(use[q].get(r, 0) for q in use)]
        if not cands:
            return None, None
        need = group_use(self.quotas, group)

        def cheap(subset: Sequence[Cand]) -> bool:
            return self._fits_quota(need, self.usage(k for c in subset for k in c.drop))

        def works(subset: Sequence[Cand]) -> bool:
            drop = [k for c in subset for k in c.drop]
            return self.resolver.places(self.clusters(drop), group, spent, self.quotas, self.usage(drop),
                                        self.pools) is not None

        if not cheap(cands):
            return None, None
        chosen, cut = minimal_removal(cands, cheap, works, lambda: (None, None))
        if chosen is None:
            return None, cut
        drop = [k for c in chosen for k in c.drop]
        where = self.resolver.places(self.clusters(drop), group, spent, self.quotas, self.usage(drop), self.pools)
        if where is None:
            return None, cut
        taken: dict[str, int] = {}
        for key in drop:
            for q, u in self.uses[key].items():
                taken[q] = taken.get(q, 0) + u.get(r, 0)
        borrowed = {q: max(0, usage.get(q, {}).get(r, 0) - self.quotas.get(q).nominal[r])  # type: ignore[union-attr]
                    for q in taken}
        victims = tuple(v for c in sorted(chosen, key=lambda c: (c.gpus, c.name)) for v in c.victims)
        reclaimed = tuple((q, min(v, borrowed[q])) for q, v in sorted(taken.items()))
        return Option("reclaim", where, victims, quotas=reclaimed, resource=r), cut

    # -- raise the quota --

    def _raise(self, group: PlacementGroup, over: OverQuota, spent: list[int]) -> tuple[Option | None, str | None]:
        quota = self.quotas.get(over.quota)
        if quota is None:
            return None, None
        r = over.resource
        usage = self.usage()
        need = group_use(self.quotas, group)
        lo = max(1, over.needs - headroom(self.quotas, usage, self.pools, quota, r).left)

        def raised(by: int) -> Quotas:
            q = replace(quota, nominal={**quota.nominal, r: quota.nominal[r] + by})
            return Quotas(tuple(q if e.name == quota.name else e for e in self.quotas.entries))

        def cheap(by: int) -> bool:
            # the quota rules with the raise, exactly: a larger nominal amount shrinks the pool
            quotas = raised(by)
            trial: Use = {q: dict(u) for q, u in usage.items()}
            for q, u in need.items():
                add_usage(trial, q, u)
            return not violations(quotas, trial, self.pool(quotas))

        by = _least(lo, lo + over.needs, cheap)
        if by is None:
            return None, None
        where = self.resolver.places(self.clusters(), group, spent, raised(by), usage, self.pool(raised(by)))
        if where is None:
            return None, None
        return Option("raise-quota", where, quotas=((quota.name, 0),), resource=r, by=by,
                      to=quota.nominal[r] + by), None


def _least(lo: int, hi: int, ok) -> int | None:
    """The least value in [lo, hi] `ok` accepts, by scanning (few values) or bisecting."""
    if hi - lo <= SCAN_MAX:
        return next((v for v in range(lo, hi + 1) if ok(v)), None)
    if not ok(hi):
        return None
    return first_true(lo, hi, ok)
