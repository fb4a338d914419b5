"""The options search's modified snapshot and its counted re-solve: every placement of the
plan held where it is (its pods' demand on the nodes the plan chose), and the real `solve`
run on one group against such a snapshot, within the search's budgets and deadline."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from placer.model.fleet import Cluster, Fleet, Node
from placer.model.plan import Placement, Plan
from placer.model.workload import Instance, PlacementGroup
from placer.solve.fits import add_demand
from placer.solve.scheduling import pod_demand, runtime_overhead

RESOLVE_EFFORT = 0.2           # CP-SAT deterministic seconds per re-solve (one group: ample)
RESOLVE_SECONDS = 2.0          # wall bound per re-solve (never reached on one group in practice)
SOLVES_PER_GROUP = 40          # re-solves spent on one unplaced group
SOLVES_PER_SEARCH = 12         # ... and on one (kind, cluster) search
SOLVES_TOTAL = 2000            # ... and on the whole plan (the time limit usually binds first)


class Stop(Exception):
    """A search cut short: `why` is "search budget" or "time limit"."""

    def __init__(self, why: str):
        self.why = why


def demand_on(inst: Instance, cl: Cluster) -> dict[str, int]:
    """One pod's requests on `cl`, its RuntimeClass overhead included."""
    d = pod_demand(inst.pod)
    for r, v in (runtime_overhead(inst.pod, cl.runtime_classes) or {}).items():
        d[r] = d.get(r, 0) + v
    return d


class HeldPlan:
    """The plan's placements (and committed groups) held where they are."""

    def __init__(self, fleet: Fleet, all_groups: Mapping[str, PlacementGroup], plan: Plan):
        self.fleet, self.all_groups = fleet, all_groups
        # held demand per planned / committed group: group key -> cluster -> node -> requests
        self.held: dict[str, dict[str, dict[str, dict[str, int]]]] = {}
        self.prio: dict[str, int] = {}
        for p in (*plan.placements, *plan.committed):
            self._hold(p)
        self._held_loads: dict[str, dict[str, dict[str, int]]] = {}

    def _hold(self, p: Placement) -> None:
        g = self.all_groups.get(p.group)
        cl = self.fleet.cluster(p.cluster)
        w = next((w for w in g.workloads if (w.ref == p.ref if p.ref else w.key == p.workload)), None) if g else None
        if w is None or cl is None:
            return
        insts = {i.key: i for i in w.instances}
        per = self.held.setdefault(p.group, {}).setdefault(p.cluster, {})
        self.prio[p.group] = p.priority
        for node, counts in p.nodes.items():
            for ikey, n in counts.items():
                if ikey in insts:
                    add_demand(per, node, demand_on(insts[ikey], cl), n)

    def loads(self, cl: Cluster) -> dict[str, dict[str, int]]:
        """node -> used, with every placement of the plan held where it is (a fresh copy)."""
        load = self._held_loads.get(cl.name)
        if load is None:
            load = {n.name: dict(n.used) for n in cl.nodes}
            for per in self.held.values():
                for node, d in per.get(cl.name, {}).items():
                    if node in load:
                        add_demand(load, node, d)
            self._held_loads[cl.name] = load
        return {n: dict(d) for n, d in load.items()}


def loaded_cluster(cl: Cluster, load: Mapping[str, Mapping[str, int]], extra: Sequence[Node] = ()) -> Cluster:
    """`cl` with its nodes' usage set to `load` and the `extra` nodes appended."""
    nodes = tuple(n if load[n.name] == n.used else replace(n, used={r: max(0, v) for r, v in load[n.name].items()})
                  for n in cl.nodes)
    return replace(cl, nodes=nodes + tuple(extra))


class Resolver:
    """The real solve, one group alone, counted against the budgets and the deadline."""

    def __init__(self, fleet: Fleet, gpu_names: Sequence[str], solve: Callable[..., Plan], deadline: float | None):
        self.fleet, self.gpu_names, self.solve_fn, self.deadline = fleet, tuple(gpu_names), solve, deadline
        self.solves_total = 0
        self.longest = 0.0                        # the longest re-solve so far, seconds

    def places(self, clusters: Sequence[Cluster], group: PlacementGroup, spent: list[int],
               quotas: Any = None, quota_held: Mapping[str, Mapping[str, int]] | None = None,
               quota_pool: Mapping[str, int] | None = None) -> str | None:
        """The real solve, the group alone on these clusters: where it lands, or None.
        `spent`: re-solves so far on this group and on this search (both counted here).
        `quotas` (placer.model.quota.Quotas): the fleet-wide quotas then apply, with
        `quota_held` (the held plan's use) counted first and the fleet's pool `quota_pool`;
        without them, none apply."""
        if self.solves_total >= SOLVES_TOTAL or spent[0] >= SOLVES_PER_GROUP or spent[1] >= SOLVES_PER_SEARCH:
            raise Stop("search budget")
        now = time.monotonic()
        # a re-solve is not cut short: none starts that the longest one so far would not finish
        if self.deadline is not None and now + self.longest >= self.deadline:
            raise Stop("time limit")
        limit = RESOLVE_SECONDS if self.deadline is None else min(RESOLVE_SECONDS, self.deadline - now)
        self.solves_total += 1
        spent[0] += 1
        spent[1] += 1
        fleet = Fleet(tuple(clusters), self.fleet.taken_at, quotas, dict(quota_held or {}), quota_pool)
        started = time.monotonic()
        try:
            return self._solve(fleet, group, limit)
        finally:
            self.longest = max(self.longest, time.monotonic() - started)

    def _solve(self, fleet: Fleet, group: PlacementGroup, limit: float) -> str | None:
        # the solver's greedy pass first: a placement it finds is verified like any other
        # (placer.solve.verify inside solve); only when it fails does the search (CP-SAT) decide
        for use_solver in (False, True):
            got = self.solve_fn(fleet, [group], time_limit=limit, effort=RESOLVE_EFFORT,
                                gpu_resources=self.gpu_names, use_solver=use_solver)
            if got.summary.time_limit_hit:
                raise Stop("time limit")
            if got.placements and not got.unplaced:
                return got.placements[0].cluster
        return None
