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

import itertools
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from placer.model.fleet import Cluster, Fleet, Node
from placer.model.plan import Placement, Plan
from placer.model.workload import Instance, PlacementGroup
from placer.solve import solve as default_solve
from placer.solve.changes import KIND_ORDER, NewNode, Option, Options, Running, Victim, relaxations
from placer.solve.groups import GPU_RESOURCES, UNLIMITED, gpus_of
from placer.solve.policy import group_policy, policy_reason
from placer.solve.removal import Kind, fewest
from placer.solve.scheduling import admitted, fits_resources, mismatch, pod_demand, runtime_overhead

RESOLVE_EFFORT = 0.2           # CP-SAT deterministic seconds per re-solve (one group: ample)
RESOLVE_SECONDS = 2.0          # wall bound per re-solve (never reached on one group in practice)
SOLVES_PER_GROUP = 40          # re-solves spent on one unplaced group
SOLVES_PER_SEARCH = 12         # ... and on one (kind, cluster) search
SOLVES_TOTAL = 2000            # ... and on the whole plan (the time limit usually binds first)
EXACT_MAX_CANDIDATES = 10      # up to this many, removal sets are enumerated exactly
MAX_SHAPES = 3                 # node shapes tried per cluster (the most common first)
CLUSTERS_PER_KIND = 3          # clusters re-solved per kind of option, the most promising by arithmetic
NODE_NAME_LABELS = ("kubernetes.io/hostname",)     # per node, not part of a shape


# --- the engine -----------------------------------------------------------------------------

class _Stop(Exception):
    def __init__(self, why: str):
        self.why = why


@dataclass(frozen=True)
class _Cand:
    victims: tuple[Victim, ...]
    gpus: int
    drop: frozenset[str]                          # held group keys it takes out
    contrib: Mapping[str, Mapping[str, int]]      # node -> what taking it out frees there
    name: str

    @property
    def priority(self) -> int:
        return max(v.priority for v in self.victims)


@dataclass
class _Part:
    demand: dict[str, int]
    pods: int
    gpu: int
    nodes: frozenset[str]                         # nodes its predicates allow


Entry = tuple[Mapping[str, int], int, frozenset[int]]   # free, multiplicity, parts that may go there
# a search on one cluster: its rank by arithmetic (lower is more promising), and the re-solving part
_Search = tuple[tuple, Callable[[list[int]], "Option | None"]]


def could_fit(parts: Sequence[_Part], entries: Sequence[Entry], gpu_names: Sequence[str]) -> bool:
    """Necessary conditions for every pod of `parts` to fit the nodes `entries` describe:
    one pod of each kind fits some node; every resource in total over the nodes some pod
    may use; each kind's pods at most what its nodes hold of it alone (every resource of the
    node counted); for each GPU size s, pods of >= s GPUs at most the s-blocks free."""
    for j, p in enumerate(parts):
        room = sum(m * min(f.get(r, 0) // v for r, v in p.demand.items() if v > 0)
                   for f, m, ok in entries if m and j in ok) if any(v > 0 for v in p.demand.values()) else p.pods
        if room < p.pods:
            return False
    usable = [e for e in entries if e[1] and e[2]]
    for r in {r for p in parts for r in p.demand}:
        need = sum(p.demand.get(r, 0) * p.pods for p in parts)
        if need > sum(f.get(r, 0) * m for f, m, _ in usable):
            return False
    for s in sorted({p.gpu for p in parts if p.gpu}):
        idx = frozenset(j for j, p in enumerate(parts) if p.gpu >= s)
        need = sum(parts[j].pods for j in idx)
        if need > sum(m * (gpus_of(f, gpu_names) // s) for f, m, ok in usable if ok & idx):
            return False
    return True


def _free(alloc: Mapping[str, int], load: Mapping[str, int]) -> dict[str, int]:
    f = {r: max(0, v - load.get(r, 0)) for r, v in alloc.items()}
    if "pods" not in alloc:
        f["pods"] = UNLIMITED
    return f


def _add(into: dict[str, dict[str, int]], node: str, demand: Mapping[str, int], times: int = 1) -> None:
    slot = into.setdefault(node, {})
    for r, v in demand.items():
        slot[r] = slot.get(r, 0) + v * times


class _Engine:
    def __init__(self, fleet: Fleet, groups: Sequence[PlacementGroup], plan: Plan,
                 committed: Sequence[tuple[PlacementGroup, str]], running: Sequence[Running],
                 gpu_names: Sequence[str], solve: Callable[..., Plan], deadline: float | None,
                 held_pins: frozenset[str]):
        self.fleet, self.plan, self.running = fleet, plan, list(running)
        self.gpu_names, self.solve_fn, self.deadline = tuple(gpu_names), solve, deadline
        self.held_pins = held_pins
        self.groups = {g.key: g for g in groups}
        self.all_groups = {**self.groups, **{g.key: g for g, _ in committed}}
        self.names = {c.name: i for i, c in enumerate(fleet.clusters)}
        # held demand per planned / committed group: group key -> cluster -> node -> requests
        self.held: dict[str, dict[str, dict[str, dict[str, int]]]] = {}
        self.prio: dict[str, int] = {}
        for p in (*plan.placements, *plan.committed):
            self._hold(p)
        self.solves_total = 0
        self._held_loads: dict[str, dict[str, dict[str, int]]] = {}
        self.cut: str | None = None               # why the last search stopped short
        self.longest = 0.0                        # the longest re-solve so far, seconds

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
                    _add(per, node, self._demand(insts[ikey], cl), n)

    def _demand(self, inst: Instance, cl: Cluster) -> dict[str, int]:
        d = pod_demand(inst.pod)
        for r, v in (runtime_overhead(inst.pod, cl.runtime_classes) or {}).items():
            d[r] = d.get(r, 0) + v
        return d

    # -- the modified snapshot and the re-solve --

    def _loads(self, cl: Cluster) -> dict[str, dict[str, int]]:
        """node -> used, with every placement of the plan held where it is (a fresh copy)."""
        load = self._held_loads.get(cl.name)
        if load is None:
            load = {n.name: dict(n.used) for n in cl.nodes}
            for per in self.held.values():
                for node, d in per.get(cl.name, {}).items():
                    if node in load:
                        _add(load, node, d)
            self._held_loads[cl.name] = load
        return {n: dict(d) for n, d in load.items()}

    def _cluster(self, cl: Cluster, load: Mapping[str, Mapping[str, int]], extra: Sequence[Node] = ()) -> Cluster:
        nodes = tuple(n if load[n.name] == n.used else replace(n, used={r: max(0, v) for r, v in load[n.name].items()})
                      for n in cl.nodes)
        return replace(cl, nodes=nodes + tuple(extra))

    def _places(self, clusters: Sequence[Cluster], group: PlacementGroup, spent: list[int]) -> str | None:
        """The real solve, the group alone on these clusters: where it lands, or None."""
        if self.solves_total >= SOLVES_TOTAL or spent[0] >= SOLVES_PER_GROUP or spent[1] >= SOLVES_PER_SEARCH:
            raise _Stop("search budget")
        now = time.monotonic()
        # a re-solve is not cut short: none starts that the longest one so far would not finish
        if self.deadline is not None and now + self.longest >= self.deadline:
            raise _Stop("time limit")
        limit = RESOLVE_SECONDS if self.deadline is None else min(RESOLVE_SECONDS, self.deadline - now)
        self.solves_total += 1
        spent[0] += 1
        spent[1] += 1
        fleet = Fleet(tuple(clusters), self.fleet.taken_at)
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
                raise _Stop("time limit")
            if got.placements and not got.unplaced:
                return got.placements[0].cluster
        return None

    # -- one unplaced group --

    def options_for(self, group: PlacementGroup) -> Options:
        found: list[tuple[tuple, Option]] = []
        spent = [0, 0]
        incomplete: str | None = None
        priority = group_policy(group).priority
        allowed = [c for c in self.fleet.clusters
                   if c.reachable and c.nodes and policy_reason(_PolicyView(group), c, self.names) is None]
        searches: list[tuple[str, Cluster | None, Callable[[list[int]], Any]]] = []
        for kind in ("preempt", "wait", "add-nodes"):
            # arithmetic ranks the clusters; only the most promising few are re-solved
            ranked: list[tuple[tuple, int, Cluster, Callable[[list[int]], Option | None]]] = []
            for c in allowed:
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    return Options((), "time limit")
                got = self._add_nodes(group, c) if kind == "add-nodes" else self._removal(group, c, priority, kind)
                if got is not None:
                    ranked.append((got[0], self.names[c.name], c, got[1]))
            ranked.sort(key=lambda t: (t[0], t[1]))
            searches += [(kind, c, run) for _, _, c, run in ranked[:CLUSTERS_PER_KIND]]
        searches.append(("relax", None, lambda spent: self._relax(group, spent)))
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
            except _Stop as stop:
                incomplete = incomplete or stop.why
                if stop.why == "time limit" or self.solves_total >= SOLVES_TOTAL or spent[0] >= SOLVES_PER_GROUP:
                    break
        found.sort(key=lambda t: t[0])
        return Options(tuple(o for _, o in found), incomplete)

    def _parts(self, group: PlacementGroup, cl: Cluster, extra: Sequence[Node] = ()) -> list[_Part]:
        out = []
        for w in group.workloads:
            for inst in w.instances:
                if inst.pods <= 0:
                    continue
                shape = admitted(inst.pod, cl.runtime_classes)
                nodes = frozenset() if shape is None else frozenset(
                    n.name for n in (*cl.nodes, *extra) if mismatch(shape, n) is None)
                d = self._demand(inst, cl)
                out.append(_Part(d, inst.pods, gpus_of(d, self.gpu_names), nodes))
        return out

    def _entries(self, cl: Cluster, parts: Sequence[_Part], load: Mapping[str, Mapping[str, int]],
                 usable: Mapping[str, frozenset[int]] | None = None) -> list[Entry]:
        """Free capacity of the nodes some part may use, with the parts that may go there."""
        if usable is None:
            usable = _usable(cl, parts)
        by_name = {n.name: n for n in cl.nodes}
        return [(_free(by_name[name].allocatable, load[name]), 1, ok) for name, ok in usable.items()]

    def _candidates(self, group: PlacementGroup, cl: Cluster, priority: int, kind: str,
                    usable: frozenset[str]) -> list[_Cand]:
        out = []
        if kind == "preempt":
            for key, per in sorted(self.held.items()):
                if key in self.groups and cl.name in per and self.prio.get(key, 0) < priority:
                    g = self.groups[key]
                    victims = tuple(Victim(w.key, w.kind, w.gpus, self.prio[key], "planned") for w in g.workloads)
                    out.append(_Cand(victims, sum(v.gpus for v in victims), frozenset({key}), per[cl.name], key))
        for r in self.running:
            if r.cluster != cl.name or (kind == "preempt" and r.priority >= priority):
                continue
            contrib: dict[str, dict[str, int]] = {}
            for node, d in r.usage.items():
                _add(contrib, node, d)
            drop = frozenset({r.promise}) if r.promise and r.promise in self.held else frozenset()
            for key in drop:
                for node, d in self.held[key].get(cl.name, {}).items():
                    _add(contrib, node, d)
            gpus = sum(gpus_of(d, self.gpu_names) for d in contrib.values())
            state = "running" if r.usage else "placed"        # placed: its pods are not bound yet
            out.append(_Cand((Victim(r.workload, r.kind, gpus, r.priority, state),), gpus, drop, contrib,
                             str(r.ref) if r.ref else r.workload))
        # only what frees something on nodes the group's pods may use can help
        out = [c for c in out if any(n in usable and any(v > 0 for v in d.values()) for n, d in c.contrib.items())]
        return sorted(out, key=lambda c: (c.gpus, c.name))

    def _removal(self, group: PlacementGroup, cl: Cluster, priority: int, kind: str) -> _Search | None:
        """A preempt or wait search on `cl`, ranked by the GPUs missing on the nodes the pods
        may use (arithmetic); None when even every candidate taken out cannot be enough."""
        parts = self._parts(group, cl)
        if any(not p.nodes for p in parts):
            return None
        usable = _usable(cl, parts)
        cands = self._candidates(group, cl, priority, kind, frozenset(usable))
        if not cands:
            return None
        held = self._loads(cl)
        base = {n: held[n] for n in usable}
        # GPU arithmetic first, per subset in O(candidates): free on usable nodes plus what it frees there
        need = sum(p.gpu * p.pods for p in parts)
        free_gpus = sum(gpus_of(f, self.gpu_names) for f, _, _ in self._entries(cl, parts, base, usable))
        freed = {id(c): sum(gpus_of(d, self.gpu_names) for n, d in c.contrib.items() if n in usable) for c in cands}

        def load_without(subset: Sequence[_Cand], src: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
            load = {n: dict(d) for n, d in src.items()}
            for c in subset:
                for node, d in c.contrib.items():
                    if node in load:
                        _add(load, node, d, -1)
            return load

        def cheap(subset: Sequence[_Cand]) -> bool:
            if free_gpus + sum(freed[id(c)] for c in subset) < need:
                return False
            return could_fit(parts, self._entries(cl, parts, load_without(subset, base), usable), self.gpu_names)

        def works(subset: Sequence[_Cand], spent: list[int]) -> bool:
            return self._places([self._cluster(cl, load_without(subset, held))], group, spent) == cl.name

        if not cheap(cands):
            return None

        def model() -> list[_Cand] | None:
            return self._fewest(cl, parts, usable, held, cands)
        return (max(0, need - free_gpus),), lambda spent: self._minimal(cl, kind, cands, cheap,
                                                                        lambda s: works(s, spent), model)

    def _fewest(self, cl: Cluster, parts: Sequence[_Part], usable: Mapping[str, frozenset[int]],
                held: Mapping[str, Mapping[str, int]], cands: Sequence[_Cand]) -> list[_Cand] | None:
        """The removal set of fewest GPUs (then fewest workloads, then lowest priorities) by
        the node-level model of placer.solve.removal; None when it finds none."""
        by_name = {n.name: n for n in cl.nodes}
        res = {r for p in parts for r in p.demand}
        room, unlimited = {}, {}
        for name in usable:
            node = by_name[name]
            room[name] = {r: node.allocatable.get(r, 0) - held[name].get(r, 0) for r in res}
            unlimited[name] = frozenset({"pods"} - set(node.allocatable))
        # nodes where not even taking every candidate out makes room for one pod stay out
        full = {n: {r: v + sum(c.contrib.get(n, {}).get(r, 0) for c in cands) for r, v in room[n].items()}
                for n in room}
        keep = {n for n in room if any(j in usable[n] and all(full[n].get(r, 0) >= v or r in unlimited[n]
                                                              for r, v in p.demand.items())
                                       for j, p in enumerate(parts))}
        kinds = [Kind(p.demand, p.pods, p.nodes & keep) for p in parts]
        n = len(cands)
        by_prio = {c.name: i for i, c in enumerate(sorted(cands, key=lambda c: (c.priority, c.name)))}
        count_w = n * n + 1
        gpu_w = (n + 1) * count_w + 1
        weights = [c.gpus * gpu_w + count_w + by_prio[c.name] for c in cands]
        got = fewest(kinds, {k: room[k] for k in keep}, unlimited, [c.contrib for c in cands], weights)
        if got is None:
            return None
        chosen, proven = got
        if not proven:
            self.cut = self.cut or "search budget"
        return [cands[i] for i in chosen]

    def _minimal(self, cl: Cluster, kind: str, cands: Sequence[_Cand], cheap: Callable[[Sequence[_Cand]], bool],
                 works: Callable[[Sequence[_Cand]], bool], model: Callable[[], list[_Cand] | None]) -> Option | None:
        """The smallest removal set that re-solves: the node-level model's pick, proven by
        one re-solve; failing that, exactly over every subset (few candidates), else by
        shrinking the set of all."""
        try:
            pick = model()
            if pick and cheap(pick) and works(pick):
                return self._removal_option(kind, cl, pick)
        except _Stop as stop:
            self.cut = stop.why
            return None
        self.cut = None
        if not works(cands):
            return None
        best: Sequence[_Cand] = cands
        try:                   # a budget cut here keeps the proven set, said incomplete
            if len(cands) <= EXACT_MAX_CANDIDATES:
                subsets = [s for k in range(1, len(cands)) for s in itertools.combinations(cands, k)]
                # fewest GPUs, then fewest workloads, then the lowest priorities (as the
                # kube-scheduler picks victims), then names
                subsets.sort(key=lambda s: (sum(c.gpus for c in s), len(s), sorted((c.priority for c in s), reverse=True),
                                            [c.name for c in s]))
                for s in subsets:
                    if cheap(s) and works(s):
                        best = s
                        break
            else:
                # shrink by arithmetic alone (free), the least wanted victims leaving first
                # (most GPUs, highest priority, last name), and re-solve what is left: usually
                # it works, and it is irreducible (taking any one out fails the arithmetic).
                # Else shrink the set of all one by one, re-solving each step.
                wanted = sorted(cands, key=lambda c: (c.gpus, c.priority, c.name), reverse=True)
                lean = list(cands)
                for c in wanted:
                    trial = [x for x in lean if x is not c]
                    if trial and cheap(trial):
                        lean = trial
                if len(lean) < len(cands) and works(lean):
                    best = lean
                else:
                    for c in wanted:
                        trial = [x for x in best if x is not c]
                        if trial and cheap(trial) and works(trial):
                            best = trial
        except _Stop as stop:
            self.cut = stop.why
        return self._removal_option(kind, cl, best)

    def _removal_option(self, kind: str, cl: Cluster, chosen: Sequence[_Cand]) -> Option:
        victims = tuple(v for c in sorted(chosen, key=lambda c: (c.gpus, c.name)) for v in c.victims)
        return Option(kind, cl.name, victims)

    def _shapes(self, cl: Cluster) -> list[NewNode]:
        by: dict[tuple, list[Node]] = {}
        for n in cl.nodes:
            if n.schedulable:
                labels = {k: v for k, v in n.labels.items() if k not in NODE_NAME_LABELS}
                key = (tuple(sorted(n.allocatable.items())), tuple(sorted(labels.items())), n.taints)
                by.setdefault(key, []).append(n)
        ranked = sorted(by.items(), key=lambda kv: -len(kv[1]))[:MAX_SHAPES]
        return [NewNode(ns[0].name, dict(k[0]), dict(k[1]), k[2]) for k, ns in ranked]

    def _add_nodes(self, group: PlacementGroup, cl: Cluster) -> _Search | None:
        """An add-nodes search on `cl`, ranked by the fewest nodes the arithmetic allows."""
        load = self._loads(cl)
        shapes = []                                          # (lower bound, upper bound, order, shape, checks)
        for order, shape in enumerate(self._shapes(cl)):
            probe = _new_node(cl, shape, 0)
            parts = self._parts(group, cl, [probe])
            on_new = frozenset(j for j, p in enumerate(parts) if probe.name in p.nodes
                               and fits_resources(p.demand, _free(shape.allocatable, {})))
            if not on_new or any(not p.nodes for p in parts):
                continue
            entries = self._entries(cl, parts, load)

            def cheap(n: int, parts=parts, entries=entries, on_new=on_new, shape=shape) -> bool:
                return could_fit(parts, [*entries, (_free(shape.allocatable, {}), n, on_new)], self.gpu_names)

            hi = sum(parts[j].pods for j in on_new)         # one node per pod that may go there
            if hi >= 1 and cheap(hi):
                shapes.append((_first(1, hi, cheap), hi, order, shape))
        if not shapes:
            return None
        shapes.sort(key=lambda t: (t[0], t[2]))
        return (shapes[0][0],), lambda spent: self._fewest_nodes(group, cl, load, shapes, spent)

    def _fewest_nodes(self, group: PlacementGroup, cl: Cluster, load: Mapping[str, Mapping[str, int]],
                      shapes: Sequence[tuple[int, int, int, NewNode]], spent: list[int]) -> Option | None:
        best: Option | None = None
        for lo, hi, _, shape in shapes:                      # fewest nodes by arithmetic first

            def works(n: int, shape=shape) -> bool:
                extra = [_new_node(cl, shape, i) for i in range(n)]
                return self._places([self._cluster(cl, load, extra)], group, spent) == cl.name

            if best is not None:
                hi = min(hi, best.count - 1)                # only a shape needing fewer matters
            if lo > hi:
                continue
            # more empty nodes never hurt, so the checks are monotone in n: the arithmetic
            # bound is usually the answer; else prove `hi`, then bisect
            proven = False
            try:
                if works(lo):
                    hi, proven = lo, True
                elif lo < hi and works(hi):
                    proven, lo = True, lo + 1
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if works(mid):
                            hi = mid
                        else:
                            lo = mid + 1
            except _Stop as stop:                           # what is proven so far stands
                self.cut = stop.why
            if proven and (best is None or hi < best.count):
                best = Option("add-nodes", cl.name, count=hi, node=shape)
            if self.cut:
                break
        return best

    def _relax(self, group: PlacementGroup, spent: list[int]) -> list[Option]:
        """Each constraint dropped in turn, re-solved on the clusters where the arithmetic
        says the relaxed group could fit (its policy allows it, and capacity is there)."""
        out = []
        for constraint, who, value, relaxed in relaxations(group, self.held_pins):
            pol = _PolicyView(relaxed)
            room = []
            for cl in self.fleet.clusters:
                if not (cl.reachable and cl.nodes and policy_reason(pol, cl, self.names) is None):
                    continue
                parts = self._parts(relaxed, cl)
                if all(p.nodes for p in parts) and could_fit(parts, self._entries(cl, parts, self._loads(cl)),
                                                            self.gpu_names):
                    room.append(self._cluster(cl, self._loads(cl)))
            where = self._places(room, relaxed, spent) if room else None
            if where is not None:
                out.append(Option("relax", where, constraint=constraint, value=value, relaxed=who))
        return out

def _usable(cl: Cluster, parts: Sequence[_Part]) -> dict[str, frozenset[int]]:
    """node -> the parts whose predicates allow it (nodes no part may use left out)."""
    out = {}
    for n in cl.nodes:
        ok = frozenset(j for j, p in enumerate(parts) if n.name in p.nodes)
        if ok:
            out[n.name] = ok
    return out


def _new_node(cl: Cluster, shape: NewNode, i: int) -> Node:
    name = f"{cl.name}-new-{i}"
    return Node(name, dict(shape.allocatable), {}, {**shape.labels, "kubernetes.io/hostname": name}, shape.taints)


def _first(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """The smallest n in [lo, hi] with ok(n), for a monotone ok that holds at hi."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


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


__all__ = ["NewNode", "Option", "Options", "Running", "Victim", "could_fit", "what_would_fit", "with_options"]
