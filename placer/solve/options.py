"""What would make it fit: for each unplaced group, the smallest changes that would let it
be placed, each proven by re-solving.

Pure: the fleet snapshot, the planned groups, the plan, the committed (promised) groups and
what runs on live clusters in; per group key, `Options` out.

How a candidate change is checked: the real `solve` runs on a modified snapshot with the
group alone, every other placement of the plan **held as it was** (its pods' demand added to
the nodes the plan chose, committed groups likewise). Held, not re-planned: an option then
changes only what it names (re-planning could move or drop other planned workloads, a
larger change than the option says), and each check is one small solve of one group.
- preempt: lower-priority groups the plan placed on the cluster, and lower-priority running
  workloads there, are taken out (their held demand, their bound pods' usage and promise);
- wait: running workloads of any priority are taken out, as if they had finished;
- add-nodes: N empty nodes of a shape that exists on the cluster are appended;
- relax: the group's own constraint (cluster selector, pin, pod nodeSelector, topology
  request) is dropped and the group is solved against the clusters that could then take it.
Cheap first: capacity arithmetic (necessary conditions: per resource over the nodes the pods
may use, per pod kind what each node holds of it, GPU blocks per pod size) prunes every
candidate before a re-solve, and ranks the clusters per kind of option (GPUs missing, nodes
needed): only the CLUSTERS_PER_KIND most promising are re-solved. The removal set comes from
a node-level model (placer.solve.removal: fewest GPUs, then workloads, then the lowest
priorities) and is proven by one re-solve; failing that, sets are enumerated exactly, fewest
GPUs first, when there are few candidates, else the set of all is shrunk (irreducible). Node
counts start at the arithmetic lower bound, bisected up to one node per pod. Re-solves are
counted (a budget per group and in all), which keeps the options deterministic; only the wall
clock (`deadline`) can cut a search short, and that is said (`Options.incomplete`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from placer.model.fleet import Cluster, Fleet, Node
from placer.model.plan import Plan
from placer.model.workload import PlacementGroup
from placer.solve import solve as default_solve
from placer.solve.accepts import refusal
from placer.solve.changes import KIND_ORDER, NewNode, Option, Options, Running, Victim, relaxations
from placer.solve.fits import Entry, PodKind, add_demand, could_fit, first_true, free_of, usable_nodes
from placer.solve.groups import GPU_RESOURCES, gpus_of
from placer.solve.minimal import Cand, Shape, fewest_nodes, fewest_removal, minimal_removal
from placer.solve.policy import group_policy, policy_reason
from placer.solve.quota_options import QuotaSearch
from placer.solve.resolve import SOLVES_PER_GROUP, SOLVES_TOTAL, HeldPlan, Resolver, Stop, demand_on, loaded_cluster
from placer.solve.scheduling import admitted, fits_resources, mismatch

MAX_SHAPES = 3                 # node shapes tried per cluster (the most common first)
CLUSTERS_PER_KIND = 3          # clusters re-solved per kind of option, the most promising by arithmetic
NODE_NAME_LABELS = ("kubernetes.io/hostname",)     # per node, not part of a shape

# a search on one cluster: its rank by arithmetic (lower is more promising), and the re-solving part
_Search = tuple[tuple, Callable[[list[int]], "Option | None"]]


# --- the engine -----------------------------------------------------------------------------

class _Engine:
    """The searches for one plan: per unplaced group, per kind of option, the clusters the
    arithmetic ranks first, each proven by a counted re-solve (placer.solve.resolve)."""

    def __init__(self, fleet: Fleet, groups: Sequence[PlacementGroup], plan: Plan,
                 committed: Sequence[tuple[PlacementGroup, str]], running: Sequence[Running],
                 gpu_names: Sequence[str], solve: Callable[..., Plan], deadline: float | None,
                 held_pins: frozenset[str]):
        self.fleet, self.running = fleet, list(running)
        self.gpu_names, self.deadline = tuple(gpu_names), deadline
        self.held_pins = held_pins
        self.groups = {g.key: g for g in groups}
        self.names = {c.name: i for i, c in enumerate(fleet.clusters)}
        every = {**self.groups, **{g.key: g for g, _ in committed}}
        self.hold = HeldPlan(fleet, every, plan)
        self.resolver = Resolver(fleet, gpu_names, solve, deadline)
        self.cut: str | None = None               # why the last search stopped short
        # issue 23: quota options, and the fleet-wide quotas in every re-solve
        self.quota = QuotaSearch(fleet, every, plan, self.hold, self.resolver) if fleet.quotas else None

    def _quotas(self, drop: Iterable[str] = (), extra: Sequence[Node] = ()) -> tuple[Any, Any, Any]:
        """The re-solve's quotas, the held plan's use of them (less the groups `drop`) and
        the fleet's pool (with `extra` new nodes): a re-solve sees one cluster, not the fleet."""
        if self.quota is None or not self.quota.sound:
            return None, None, None
        return self.quota.quotas, self.quota.usage(drop), self.quota.pool(extra=extra)

    # -- one unplaced group --

    def options_for(self, group: PlacementGroup) -> Options:
        found: list[tuple[tuple, Option]] = []
        spent = [0, 0]
        incomplete: str | None = None
        if self.quota is not None:
            opts, incomplete = self.quota.options(group, spent)
            found += [((KIND_ORDER[o.kind], o.by or o.gpus, len(o.victims), self.names.get(o.cluster or "", 0)), o)
                      for o in opts]
        searches = self._searches(group)
        if searches is None:
            return Options(tuple(o for _, o in sorted(found, key=lambda t: t[0])), "time limit")
        for kind, cl, run in searches:
            spent[1], self.cut = 0, None
            try:
                if kind == "relax":
                    found += [((KIND_ORDER[kind], i), o) for i, o in enumerate(run(spent))]
                    continue
                assert cl is not None
                opt = run(spent)
                if opt is not None:
                    size = opt.count if kind == "add-nodes" else opt.gpus
                    found.append(((KIND_ORDER[kind], size, len(opt.victims), self.names[cl.name]), opt))
                incomplete = incomplete or self.cut
            except Stop as stop:
                incomplete = incomplete or stop.why
                if (stop.why == "time limit" or self.resolver.solves_total >= SOLVES_TOTAL
                        or spent[0] >= SOLVES_PER_GROUP):
                    break
        found.sort(key=lambda t: t[0])
        return Options(tuple(o for _, o in found), incomplete)

    def _searches(self, group: PlacementGroup) -> list[tuple[str, Cluster | None, Callable[[list[int]], Any]]] | None:
        """Per kind of option, the clusters the arithmetic ranks most promising, then the
        relaxations; None when the deadline passes while ranking."""
        priority = group_policy(group).priority
        allowed = [c for c in self.fleet.clusters
                   if c.reachable and c.nodes and policy_reason(_PolicyView(group), c, self.names) is None
                   and refusal(group, c) is None]
        searches: list[tuple[str, Cluster | None, Callable[[list[int]], Any]]] = []
        for kind in ("preempt", "wait", "add-nodes"):
            # arithmetic ranks the clusters; only the most promising few are re-solved
            ranked: list[tuple[tuple, int, Cluster, Callable[[list[int]], Option | None]]] = []
            for c in allowed:
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    return None
                got = self._add_nodes(group, c) if kind == "add-nodes" else self._removal(group, c, priority, kind)
                if got is not None:
                    ranked.append((got[0], self.names[c.name], c, got[1]))
            ranked.sort(key=lambda t: (t[0], t[1]))
            searches += [(kind, c, run) for _, _, c, run in ranked[:CLUSTERS_PER_KIND]]
        searches.append(("relax", None, lambda spent: self._relax(group, spent)))
        return searches

    def _parts(self, group: PlacementGroup, cl: Cluster, extra: Sequence[Node] = ()) -> list[PodKind]:
        return pod_kinds(group, cl, self.gpu_names, extra)

    def _entries(self, cl: Cluster, parts: Sequence[PodKind], load: Mapping[str, Mapping[str, int]],
                 usable: Mapping[str, frozenset[int]] | None = None) -> list[Entry]:
        """Free capacity of the nodes some part may use, with the parts that may go there."""
        if usable is None:
            usable = usable_nodes(cl, parts)
        by_name = {n.name: n for n in cl.nodes}
        return [(free_of(by_name[name].allocatable, load[name]), 1, ok) for name, ok in usable.items()]

    # -- preempt and wait --

    def _candidates(self, cl: Cluster, priority: int, kind: str, usable: frozenset[str]) -> list[Cand]:
        out = self._planned(cl, priority) if kind == "preempt" else []
        for r in self.running:
            if r.cluster != cl.name or (kind == "preempt" and r.priority >= priority):
                continue
            out.append(self._running(cl, r))
        # only what frees something on nodes the group's pods may use can help
        out = [c for c in out if any(n in usable and any(v > 0 for v in d.values()) for n, d in c.contrib.items())]
        return sorted(out, key=lambda c: (c.gpus, c.name))

    def _planned(self, cl: Cluster, priority: int) -> list[Cand]:
        """Lower-priority groups the plan placed on `cl`."""
        held, prio, out = self.hold.held, self.hold.prio, []
        for key, per in sorted(held.items()):
            if key in self.groups and cl.name in per and prio.get(key, 0) < priority:
                g = self.groups[key]
                victims = tuple(Victim(w.key, w.kind, w.gpus, prio[key], "planned") for w in g.workloads)
                out.append(Cand(victims, sum(v.gpus for v in victims), frozenset({key}), per[cl.name], key))
        return out

    def _running(self, cl: Cluster, r: Running) -> Cand:
        """A running workload on `cl`: its bound pods' usage and its promise's held demand."""
        held = self.hold.held
        contrib: dict[str, dict[str, int]] = {}
        for node, d in r.usage.items():
            add_demand(contrib, node, d)
        drop = frozenset({r.promise}) if r.promise and r.promise in held else frozenset()
        for key in drop:
            for node, d in held[key].get(cl.name, {}).items():
                add_demand(contrib, node, d)
        gpus = sum(gpus_of(d, self.gpu_names) for d in contrib.values())
        state = "running" if r.usage else "placed"        # placed: its pods are not bound yet
        return Cand((Victim(r.workload, r.kind, gpus, r.priority, state),), gpus, drop, contrib,
                    str(r.ref) if r.ref else r.workload)

    def _removal(self, group: PlacementGroup, cl: Cluster, priority: int, kind: str) -> _Search | None:
        """A preempt or wait search on `cl`, ranked by the GPUs missing on the nodes the pods
        may use (arithmetic); None when even every candidate taken out cannot be enough."""
        parts = self._parts(group, cl)
        if any(not p.nodes for p in parts):
            return None
        usable = usable_nodes(cl, parts)
        cands = self._candidates(cl, priority, kind, frozenset(usable))
        if not cands:
            return None
        held = self.hold.loads(cl)
        base = {n: held[n] for n in usable}
        # GPU arithmetic first, per subset in O(candidates): free on usable nodes plus what it frees there
        need = sum(p.gpu * p.pods for p in parts)
        free_gpus = sum(gpus_of(f, self.gpu_names) for f, _, _ in self._entries(cl, parts, base, usable))
        freed = {id(c): sum(gpus_of(d, self.gpu_names) for n, d in c.contrib.items() if n in usable) for c in cands}

        def cheap(subset: Sequence[Cand]) -> bool:
            if free_gpus + sum(freed[id(c)] for c in subset) < need:
                return False
            return could_fit(parts, self._entries(cl, parts, _without(subset, base), usable), self.gpu_names)

        def works(subset: Sequence[Cand], spent: list[int]) -> bool:
            return self.resolver.places([loaded_cluster(cl, _without(subset, held))], group, spent,
                                        *self._quotas(k for c in subset for k in c.drop)) == cl.name

        if not cheap(cands):
            return None

        def run(spent: list[int]) -> Option | None:
            chosen, self.cut = minimal_removal(cands, cheap, lambda s: works(s, spent),
                                               lambda: fewest_removal(cl, parts, usable, held, cands))
            return None if chosen is None else _removal_option(kind, cl, chosen)
        return (max(0, need - free_gpus),), run

    # -- add nodes --

    def _add_nodes(self, group: PlacementGroup, cl: Cluster) -> _Search | None:
        """An add-nodes search on `cl`, ranked by the fewest nodes the arithmetic allows."""
        load = self.hold.loads(cl)
        shapes: list[Shape] = []
        for order, shape in enumerate(_shapes(cl)):
            probe = _new_node(cl, shape, 0)
            parts = self._parts(group, cl, [probe])
            on_new = frozenset(j for j, p in enumerate(parts) if probe.name in p.nodes
                               and fits_resources(p.demand, free_of(shape.allocatable, {})))
            if not on_new or any(not p.nodes for p in parts):
                continue
            entries = self._entries(cl, parts, load)

            def cheap(n: int, parts=parts, entries=entries, on_new=on_new, shape=shape) -> bool:
                return could_fit(parts, [*entries, (free_of(shape.allocatable, {}), n, on_new)], self.gpu_names)

            hi = sum(parts[j].pods for j in on_new)         # one node per pod that may go there
            if hi >= 1 and cheap(hi):
                shapes.append((first_true(1, hi, cheap), hi, order, shape))
        if not shapes:
            return None
        shapes.sort(key=lambda t: (t[0], t[2]))

        def works(shape: NewNode, n: int, spent: list[int]) -> bool:
            extra = [_new_node(cl, shape, i) for i in range(n)]
            return self.resolver.places([loaded_cluster(cl, load, extra)], group, spent,
                                        *self._quotas(extra=extra)) == cl.name

        def run(spent: list[int]) -> Option | None:
            best, self.cut = fewest_nodes(shapes, lambda shape, n: works(shape, n, spent))
            return None if best is None else Option("add-nodes", cl.name, count=best[0], node=best[1])
        return (shapes[0][0],), run

    # -- relax --

    def _relax(self, group: PlacementGroup, spent: list[int]) -> list[Option]:
        """Each constraint dropped in turn, re-solved on the clusters where the arithmetic
        says the relaxed group could fit (its policy allows it, and capacity is there)."""
        out = []
        for constraint, who, value, relaxed in relaxations(group, self.held_pins):
            pol = _PolicyView(relaxed)
            room = []
            for cl in self.fleet.clusters:
                if not (cl.reachable and cl.nodes and policy_reason(pol, cl, self.names) is None
                        and refusal(relaxed, cl) is None):
                    continue
                parts = self._parts(relaxed, cl)
                loads = self.hold.loads(cl)
                # a spread workload lands on several clusters: the re-solve alone decides
                if constraint.startswith("spread-") or (
                        all(p.nodes for p in parts) and could_fit(parts, self._entries(cl, parts, loads),
                                                                  self.gpu_names)):
                    room.append(loaded_cluster(cl, loads))
            where = self.resolver.places(room, relaxed, spent, *self._quotas()) if room else None
            if where is not None:
                out.append(Option("relax", where, constraint=constraint, value=value, relaxed=who))
        return out


def pod_kinds(group: PlacementGroup, cl: Cluster, gpu_names: Sequence[str], extra: Sequence[Node] = ()
              ) -> list[PodKind]:
    """The group's pods on `cl` as the arithmetic sees them: per instance, its demand there
    and the nodes (of `cl` and `extra`) its predicates allow."""
    out = []
    for w in group.workloads:
        for inst in w.instances:
            if inst.pods <= 0:
                continue
            shape = admitted(inst.pod, cl.runtime_classes)
            nodes = frozenset() if shape is None else frozenset(
                n.name for n in (*cl.nodes, *extra) if mismatch(shape, n) is None)
            d = demand_on(inst, cl)
            out.append(PodKind(d, inst.pods, gpus_of(d, gpu_names), nodes))
    return out


def _without(subset: Sequence[Cand], src: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """The loads `src` (copied) less what taking `subset` out frees."""
    load = {n: dict(d) for n, d in src.items()}
    for c in subset:
        for node, d in c.contrib.items():
            if node in load:
                add_demand(load, node, d, -1)
    return load


def _removal_option(kind: str, cl: Cluster, chosen: Sequence[Cand]) -> Option:
    victims = tuple(v for c in sorted(chosen, key=lambda c: (c.gpus, c.name)) for v in c.victims)
    return Option(kind, cl.name, victims)


def _shapes(cl: Cluster) -> list[NewNode]:
    """The most common node shapes of `cl` (allocatable, labels but the host's, taints)."""
    by: dict[tuple, list[Node]] = {}
    for n in cl.nodes:
        if n.schedulable:
            labels = {k: v for k, v in n.labels.items() if k not in NODE_NAME_LABELS}
            key = (tuple(sorted(n.allocatable.items())), tuple(sorted(labels.items())), n.taints)
            by.setdefault(key, []).append(n)
    ranked = sorted(by.items(), key=lambda kv: -len(kv[1]))[:MAX_SHAPES]
    return [NewNode(ns[0].name, dict(k[0]), dict(k[1]), k[2]) for k, ns in ranked]


def _new_node(cl: Cluster, shape: NewNode, i: int) -> Node:
    name = f"{cl.name}-new-{i}"
    return Node(name, dict(shape.allocatable), {}, {**shape.labels, "kubernetes.io/hostname": name}, shape.taints)


class _PolicyView:
    """What `policy_reason` reads of a group."""

    def __init__(self, group: PlacementGroup):
        self.policy = group_policy(group)


# --- entry points ----------------------------------------------------------------------------

def what_would_fit(fleet: Fleet, groups: Sequence[PlacementGroup], plan: Plan, *,
                   committed: Sequence[tuple[PlacementGroup, str]] = (), running: Sequence[Running] = (),
                   gpu_resources: Sequence[str] = GPU_RESOURCES, deadline: float | None = None,
                   held_pins: Iterable[str] = (), solve: Callable[..., Plan] | None = None
                   ) -> dict[str, Options]:
    """Options per unplaced group key, the highest-priority groups searched first.
    `groups` and `committed` are what `plan` was solved from (the planning views);
    `held_pins`: group keys whose pin placer set (their group already runs there), never
    offered for relaxing; `deadline` (time.monotonic()) bounds the search."""
    if solve is None:
        solve = default_solve
    engine = _Engine(fleet, groups, plan, committed, running, gpu_resources, solve, deadline,
                     frozenset(held_pins))
    unplaced = {u.group for u in plan.unplaced}
    todo = sorted((g for g in groups if g.key in unplaced), key=lambda g: (-group_policy(g).priority, g.key))
    out: dict[str, Options] = {}
    for g in todo:
        if deadline is not None and time.monotonic() >= deadline:
            out[g.key] = Options((), "time limit")
            continue
        out[g.key] = engine.options_for(g)
    return out


def with_options(plan: Plan, options: Mapping[str, Options]) -> Plan:
    """The plan with each unplaced workload carrying its group's options."""
    unplaced = tuple(replace(u, options=options[u.group].options, options_incomplete=options[u.group].incomplete)
                     if u.group in options else u for u in plan.unplaced)
    return replace(plan, unplaced=unplaced)


__all__ = ["NewNode", "Option", "Options", "Running", "Victim", "could_fit", "pod_kinds", "what_would_fit",
           "with_options"]
