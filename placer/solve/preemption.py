"""Preemption carried out (issue 23): which placed workloads to take out so that an unplaced
one is placed, by policy. Pure: the round's fleet, groups and plan in, frozen decisions out.

Policies, each allowing the rules of the one before it:
- `within-quota`: a strictly lower priority in the preemptor's own quota (both in no quota
  counts as one);
- `reclaim`: also workloads of OTHER quotas that borrow (their quota uses more than its
  nominal amount of a resource it names), the youngest first, and only when the preemptor's
  quota is within its nominal amounts once the preemption is done;
- `priority`: also a strictly lower priority of any other quota.
Never a priority equal to or higher than the preemptor's, and never anything but the eligible
placed workloads the caller hands in (the daemon: its own copies, older than the minimum run
time).

The victim set is the options search's proven minimal set (`placer.solve.minimal`): capacity
and quota arithmetic prune every subset, and a subset is taken only when the real solve, the
preemptor alone against the fleet with everything else held where it is (`placer.solve.resolve`)
and the subset taken out, places it. Among the sets that work: fewest GPUs, then fewest
workloads, then the youngest. A search cut short (budget, deadline) proves nothing minimal:
no preemption then.

One preemption per call (the highest-priority unplaced group a policy lets in): what a second
would see depends on where the first lands. The daemon calls it once per round.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from placer.model.fleet import Cluster, Fleet
from placer.model.names import ANN_SPREAD
from placer.model.plan import Plan
from placer.model.quota import Quota, Quotas, add_usage, grows, overs, pool
from placer.model.workload import PlacementGroup
from placer.solve.accepts import refusal
from placer.solve.changes import Victim
from placer.solve.fits import PodKind, add_demand, could_fit, free_of, usable_nodes
from placer.solve.groups import GPU_RESOURCES, gpus_of
from placer.solve.minimal import EXACT_MAX_CANDIDATES, Cand, minimal_removal
from placer.solve.options import pod_kinds
from placer.solve.policy import group_policy, policy_reason
from placer.solve.quota_options import Use, group_use
from placer.solve.quotas import workload_demand
from placer.solve.resolve import HeldPlan, Resolver, Stop, loaded_cluster

POLICIES = ("off", "within-quota", "reclaim", "priority")
CLUSTERS_PER_SEARCH = 3        # many candidates: the clusters searched on their own candidates first
RULES = ("within-quota", "reclaim", "priority")         # each policy allows its rule and those before it


@dataclass(frozen=True)
class Eligible:
    """A placed group that may be preempted (the caller decides which: placer's own copies,
    old enough). `frees`: node -> requests of its bound pods on `cluster` (in the snapshot's
    `used`); `promise`: the key of its committed group while its pods are not all bound."""

    key: str
    group: PlacementGroup
    cluster: str
    priority: int
    placed_at: float                          # the caller's clock: larger is younger
    frees: Mapping[str, Mapping[str, int]]
    promise: str | None = None
    promises: tuple[str, ...] = ()            # more committed keys (a group of several workloads)


@dataclass(frozen=True)
class Preemption:
    """Take `victims` (Eligible keys) out so that the group `preemptor` is placed on `cluster`."""

    preemptor: str
    cluster: str
    victims: tuple[str, ...]
    rule: str                                 # the broadest rule a victim needed: within-quota | reclaim | priority
    reason: str                               # for people: who, why, by which rule
    priority: int                             # the preemptor's
    gpus: int                                 # GPUs taken out


def allows(policy: str, rule: str) -> bool:
    return policy in RULES and RULES.index(rule) <= RULES.index(policy)


def borrowing(quotas: Quotas | None, usage: Use) -> frozenset[str]:
    """The quotas whose use of some resource they name is beyond their nominal amount."""
    if not quotas:
        return frozenset()
    return frozenset(q.name for q in quotas.entries
                     if any(usage.get(q.name, {}).get(r, 0) > n for r, n in q.nominal.items()))


def rule_of(mine: Quota | None, theirs: Quota | None, borrowers: frozenset[str]) -> str:
    """The rule that lets a workload of quota `mine` preempt one of `theirs` (a lower priority)."""
    if (mine.name if mine else None) == (theirs.name if theirs else None):
        return "within-quota"
    if theirs is not None and theirs.name in borrowers and mine is not None:
        return "reclaim"
    return "priority"


def preemptions(fleet: Fleet, groups: Sequence[PlacementGroup], plan: Plan, policy: str,
                eligible: Sequence[Eligible], *, committed: Sequence[tuple[PlacementGroup, str]] = (),
                gpu_resources: Sequence[str] = GPU_RESOURCES, deadline: float | None = None,
                solve: Callable[..., Plan] | None = None) -> tuple[Preemption, ...]:
    """At most one preemption: for the highest-priority unplaced group of `plan` (solved from
    `groups` and `committed` on `fleet`) that `policy` and the `eligible` victims let in.
    `fleet.quotas.counted`, when set (the daemon), counts every placed workload, the eligible
    ones included; else the committed groups and the eligible ones are counted.
    `deadline` (time.monotonic()) bounds the search."""
    if policy not in RULES or not eligible or not plan.unplaced:
        return ()
    if solve is None:
        from placer.solve import solve as default_solve
        solve = default_solve
    search = _Search(fleet, groups, plan, eligible, committed, gpu_resources, solve, deadline)
    unplaced = {u.group for u in plan.unplaced}
    todo = sorted((g for g in groups if g.key in unplaced and not _spread(g)),
                  key=lambda g: (-group_policy(g).priority, g.key))
    for g in todo:
        if deadline is not None and time.monotonic() >= deadline:
            break
        got = search.one(g, policy)
        if got is not None:
            return (got,)
    return ()


def _spread(g: PlacementGroup) -> bool:
    return any((w.annotations or {}).get(ANN_SPREAD) for w in g.workloads)


class _Search:
    """The held plan, the quotas' use, and the victim search for one preemptor at a time."""

    def __init__(self, fleet: Fleet, groups: Sequence[PlacementGroup], plan: Plan, eligible: Sequence[Eligible],
                 committed: Sequence[tuple[PlacementGroup, str]], gpu_names: Sequence[str],
                 solve: Callable[..., Plan], deadline: float | None):
        self.fleet, self.gpu_names = fleet, tuple(gpu_names)
        self.eligible = {e.key: e for e in eligible}
        every = {**{g.key: g for g, _ in committed}, **{g.key: g for g in groups}}
        self.hold = HeldPlan(fleet, every, plan)
        self.resolver = Resolver(fleet, gpu_names, solve, deadline)
        self.names = {c.name: i for i, c in enumerate(fleet.clusters)}
        self.quotas = fleet.quotas or None
        self.pools = pool(fleet, self.quotas) if self.quotas else {}
        self.usage: Use = {}
        self.uses: dict[str, Use] = {}
        self.cand_keys: frozenset[str] = frozenset()
        self.cand_use: Use = {}
        if self.quotas:
            self._count(plan, committed)

    def _count(self, plan: Plan, committed: Sequence[tuple[PlacementGroup, str]]) -> None:
        assert self.quotas is not None
        for q, u in self.fleet.quota_held.items():
            add_usage(self.usage, q, u)
        if self.quotas.counted is not None:
            for q, u in self.quotas.counted.items():
                add_usage(self.usage, q, u)
        else:
            promised = set()
            for g, _ in committed:
                promised.add(g.key)
                for q, u in group_use(self.quotas, g).items():
                    add_usage(self.usage, q, u)
            for e in self.eligible.values():
                if not promised & {e.promise, *e.promises}:
                    for q, u in group_use(self.quotas, e.group).items():
                        add_usage(self.usage, q, u)
        placed = {p.group for p in plan.placements}
        for key in sorted(placed):
            held = self.hold.all_groups.get(key)
            if held is not None:
                for q, u in group_use(self.quotas, held).items():
                    add_usage(self.usage, q, u)
        self.uses = {k: group_use(self.quotas, e.group) for k, e in self.eligible.items()}

    # -- the usage and the clusters with a subset taken out --

    def usage_less(self, keys: Iterable[str]) -> Use:
        """The quotas' use with the eligible `keys` taken out. A set of most of the current
        candidates (the shrinking search's) is counted from what it leaves in."""
        names = set(keys)
        out: Use = {q: dict(u) for q, u in self.usage.items()}
        sign = -1
        if len(names) * 2 > len(self.cand_keys) and names <= self.cand_keys:
            for q, u in self.cand_use.items():
                add_usage(out, q, u, -1)
            names, sign = set(self.cand_keys - names), 1
        for k in names:
            for q, u in self.uses.get(k, {}).items():
                add_usage(out, q, u, sign)
        return out

    def candidates_are(self, cands: Sequence[Cand]) -> None:
        """The candidates of the search under way, and their use together."""
        self.cand_keys = frozenset(c.name for c in cands)
        self.cand_use = {}
        for k in self.cand_keys:
            for q, u in self.uses.get(k, {}).items():
                add_usage(self.cand_use, q, u)

    def contrib(self, e: Eligible) -> dict[str, dict[str, int]]:
        """What taking `e` out frees on its cluster: its bound pods and its promise."""
        out: dict[str, dict[str, int]] = {}
        for node, d in e.frees.items():
            add_demand(out, node, d)
        for key in dict.fromkeys((e.promise, *e.promises)):
            for node, d in self.hold.held.get(key or "", {}).get(e.cluster, {}).items():
                add_demand(out, node, d)
        return out

    def load_less(self, cl: Cluster, subset: Sequence[Cand]) -> dict[str, dict[str, int]]:
        """`cl`'s load with the plan held, less what the candidates of `subset` free (those on `cl`)."""
        load = self.hold.loads(cl)
        for c in subset:
            if self.eligible[c.name].cluster == cl.name:
                for node, d in c.contrib.items():
                    if node in load:
                        add_demand(load, node, d, -1)
        return load

    def on_time(self) -> None:
        """The arithmetic runs without re-solves: the deadline is checked here too."""
        if self.resolver.deadline is not None and time.monotonic() >= self.resolver.deadline:
            raise Stop("time limit")

    # -- one preemptor --

    def one(self, group: PlacementGroup, policy: str) -> Preemption | None:
        prio = group_policy(group).priority
        mine = self.quotas.of(group.workloads[0]) if self.quotas else None
        allowed = [c for c in self.fleet.clusters if c.reachable and c.nodes
                   and policy_reason(_View(group), c, self.names) is None and refusal(group, c) is None]
        if not allowed:
            return None
        parts = {c.name: pod_kinds(group, c, self.gpu_names) for c in allowed}
        usable = {c.name: usable_nodes(c, parts[c.name]) for c in allowed}
        rules: dict[str, str] = {}
        cands = self._candidates(prio, policy, mine, usable, rules)
        if not cands:
            return None
        self.candidates_are(cands)
        need = group_use(self.quotas, group) if self.quotas else {}
        cheap = self._cheap(policy, mine, need, allowed, parts, usable, rules)
        spent = [0, 0]

        def works(subset: Sequence[Cand]) -> bool:
            return self._place(group, allowed, subset, spent) is not None

        try:
            chosen = self._search(cands, cheap, works, spent)
            where = self._place(group, allowed, chosen, spent) if chosen is not None else None
        except Stop:
            return None
        if chosen is None or where is None:
            return None
        if not self.within_nominal(mine, need, chosen):
            rules = {k: ("priority" if r == "reclaim" else r) for k, r in rules.items()}
        return self._decision(group, prio, mine, where, chosen, rules)

    def _candidates(self, prio: int, policy: str, mine: Quota | None,
                    usable: Mapping[str, Mapping[str, frozenset[int]]], rules: dict[str, str]) -> list[Cand]:
        """The eligible victims `policy` allows against priority `prio` (each one's rule into
        `rules`) that free capacity the preemptor's pods could use, or quota."""
        borrowers = borrowing(self.quotas, self.usage)
        cands: list[Cand] = []
        for e in sorted(self.eligible.values(), key=lambda e: e.key):
            theirs = self.quotas.of(e.group.workloads[0]) if self.quotas else None
            rule = rule_of(mine, theirs, borrowers)
            if e.priority >= prio or not allows(policy, rule):
                continue
            contrib = self.contrib(e)
            frees_here = any(n in usable.get(e.cluster, {}) and any(v > 0 for v in d.values())
                             for n, d in contrib.items())
            if not frees_here and not any(self.uses.get(e.key, {}).values()):
                continue                          # frees neither capacity it could use nor quota
            rules[e.key] = rule
            victims = tuple(Victim(w.key, w.kind, gpus_of(workload_demand(w), self.gpu_names), e.priority, "running")
                            for w in e.group.workloads)
            cands.append(Cand(victims, sum(v.gpus for v in victims), frozenset({e.key}), contrib, e.key))
        return cands

    def _search(self, cands: Sequence[Cand], cheap: Callable[[Sequence[Cand]], bool],
                works: Callable[[Sequence[Cand]], bool], spent: list[int]) -> Sequence[Cand] | None:
        """The proven minimal set (minimal_removal): exact over every subset of few candidates;
        of many, first the candidates of each of the CLUSTERS_PER_SEARCH first clusters where
        the arithmetic lets it in by them alone (the best of those by `_order`), else all of
        them together. A search cut short proves nothing: None."""
        searches: list[Sequence[Cand]] = []
        if len(cands) > EXACT_MAX_CANDIDATES:
            by_cluster: dict[str, list[Cand]] = {}
            for c in cands:
                by_cluster.setdefault(self.eligible[c.name].cluster, []).append(c)
            searches = [cs for cl in self.fleet.clusters if (cs := by_cluster.get(cl.name)) and cheap(cs)]
            searches = searches[:CLUSTERS_PER_SEARCH]
        best: Sequence[Cand] | None = None
        for some in (*searches, None):
            if some is None and best is not None:
                break
            some = cands if some is None else some
            if not cheap(some):
                continue
            spent[1] = 0
            chosen, cut = minimal_removal(some, cheap, works, lambda: (None, None), order=self._order)
            if chosen is not None and cut is None and (best is None or self._order(chosen) < self._order(best)):
                best = chosen
        return best

    def _order(self, s: Sequence[Cand]) -> tuple:
        """Fewest GPUs, then fewest workloads, then the youngest, then names."""
        return (sum(c.gpus for c in s), len(s), sorted(-self.eligible[c.name].placed_at for c in s),
                [c.name for c in s])

    def within_nominal(self, mine: Quota | None, need: Use, subset: Sequence[Cand], usage: Use | None = None) -> bool:
        """The preemptor's quota within its nominal amounts once `subset` is out and it is in."""
        if mine is None:
            return False
        usage = usage if usage is not None else self.usage_less(c.name for c in subset)
        return all(usage.get(mine.name, {}).get(r, 0) + need.get(mine.name, {}).get(r, 0) <= n
                   for r, n in mine.nominal.items())

    def _cheap(self, policy: str, mine: Quota | None, need: Use, allowed: Sequence[Cluster],
               parts: Mapping[str, list[PodKind]], usable: Mapping[str, Mapping[str, frozenset[int]]],
               rules: Mapping[str, str]) -> Callable[[Sequence[Cand]], bool]:
        by_name = {cl.name: {n.name: n for n in cl.nodes} for cl in allowed}

        def fits(cl: Cluster, subset: Sequence[Cand]) -> bool:
            ps = parts[cl.name]
            if any(not p.nodes for p in ps):
                return False
            load = self.load_less(cl, subset)
            nodes = by_name[cl.name]
            entries = [(free_of(nodes[n].allocatable, load[n]), 1, ok) for n, ok in usable[cl.name].items()]
            return could_fit(ps, entries, self.gpu_names)

        as_is = any(fits(cl, ()) for cl in allowed)      # a cluster no victim changes keeps its verdict

        def quota_ok(subset: Sequence[Cand]) -> bool:
            self.on_time()
            if not self.quotas:
                return True
            usage = self.usage_less(c.name for c in subset)
            # reclaim only while the preemptor's quota stays within its nominal amounts (the
            # priority policy takes such victims by priority alone)
            if policy == "reclaim" and any(rules[c.name] == "reclaim" for c in subset) \
                    and not self.within_nominal(mine, need, subset, usage):
                return False
            before = overs(self.quotas, usage, self.pools)
            for q, u in need.items():
                add_usage(usage, q, u)
            return not grows(before, overs(self.quotas, usage, self.pools))

        def room_ok(subset: Sequence[Cand]) -> bool:
            if as_is:
                return True
            touched = {self.eligible[c.name].cluster for c in subset}
            return any(fits(cl, [c for c in subset if self.eligible[c.name].cluster == cl.name])
                       for cl in allowed if cl.name in touched)

        return lambda subset: quota_ok(subset) and room_ok(subset)

    def _place(self, group: PlacementGroup, allowed: Sequence[Cluster], subset: Sequence[Cand],
               spent: list[int]) -> str | None:
        """The real solve, the group alone, the subset taken out (a counted re-solve)."""
        clusters = [loaded_cluster(cl, self.load_less(cl, subset)) for cl in allowed]
        if not self.quotas:
            return self.resolver.places(clusters, group, spent)
        return self.resolver.places(clusters, group, spent, Quotas(self.quotas.entries),
                                    self.usage_less(c.name for c in subset), self.pools)

    def _decision(self, group: PlacementGroup, prio: int, mine: Quota | None, where: str,
                  chosen: Sequence[Cand], rules: Mapping[str, str]) -> Preemption:
        ordered = sorted(chosen, key=lambda c: (-self.eligible[c.name].placed_at, c.name))
        rule = max((rules[c.name] for c in ordered), key=RULES.index)
        who = f"{group.key} (priority {prio}" + (f", quota {mine.name})" if mine else ")")
        why = {"within-quota": "a higher priority of the same quota",
               "reclaim": "its quota reclaims capacity other quotas borrow beyond their nominal amounts",
               "priority": "a higher priority"}[rule]
        taken = ", ".join(f"{c.name} (priority {self.eligible[c.name].priority}, {c.gpus} GPUs, "
                          f"{rules[c.name]})" for c in ordered)
        reason = f"{rule}: {who} is placed on {where} once {taken} are taken out: {why}"
        return Preemption(group.key, where, tuple(c.name for c in ordered), rule, reason, prio,
                          sum(c.gpus for c in ordered))


class _View:
    """What `policy_reason` reads of a group."""

    def __init__(self, group: PlacementGroup):
        self.policy = group_policy(group)


__all__ = ["Eligible", "POLICIES", "Preemption", "allows", "borrowing", "preemptions", "rule_of"]
