"""An exact judge for placer's solver, written without it.

Nothing here imports placer's solver. The fleet and workloads are placer's frozen data types
(built with tests/builders.py); everything that decides where a pod may go is re-implemented
here in the simplest possible way, for the features the random instances use: nodeSelector
equality, NoSchedule/NoExecute taints with Equal/Exists tolerations, cordoned/NotReady nodes,
`pods` slots, pins and `key=value` / `key in (a,b)` cluster selectors.

- `optimum`: a node-level CP-SAT model (pod counts per instance per node, every resource
  per node, a group on one cluster or nowhere) solved lexicographically by priority,
  highest first: per level the GPUs placed, then the groups placed.
- `greedy`: node-level greedy baselines (arrival order, first-fit decreasing,
  priority-then-size), each pod first fit onto nodes in order.
- `strict_priority_violations`: unplaced groups that would fit a cluster if the plan's
  lower-priority work there were removed (an exact fit check).
- `false_reasons`: every per-cluster reason of a plan, checked against the fleet.
- topology (issue 14): a gang's request covers its pods (of the named components); a
  required one puts them all on nodes sharing one value of the key (a node's label; for
  `kubernetes.io/hostname` its name when unlabelled), a preferred one counts the values
  spanned (unlabelled nodes as one value), minimised after the levels; a request for a
  level a cluster does not have (not in its topology, on no node; every node has a host)
  keeps the group off it. Judging plans for it and random topology fleets:
  tests/solve/oracle_topology.py.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from ortools.sat.python import cp_model

from placer.model.fleet import Cluster, Fleet, Node, Taint
from placer.model.workload import Instance, PlacementGroup
from tests.builders import MIG, cluster, fleet, group, wl

GPU = "nvidia.com/gpu"
GPUS: tuple[str, ...] = (GPU, MIG)  # resources counted as GPUs: MIG slices too (oracle_hetero)
NO_LIMIT = 10**15


# --- predicates, independently ---------------------------------------------------------------

def schedulable(n: Node) -> bool:
    return n.ready and not n.unschedulable


def selector_ok(inst: Instance, n: Node) -> bool:
    return all(n.labels.get(k) == v for k, v in inst.pod.node_selector.items())


CORDON = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def taints_of(n: Node) -> tuple[Taint, ...]:
    """A cordoned node keeps off every pod that does not tolerate this taint, whether or not
    the node controller has added it yet (the kube-scheduler's NodeUnschedulable plugin)."""
    return n.taints + ((CORDON,) if n.unschedulable and CORDON not in n.taints else ())


def tolerated(inst: Instance, n: Node) -> bool:
    for t in taints_of(n):
        if t.effect not in ("NoSchedule", "NoExecute"):
            continue
        ok = False
        for tol in inst.pod.tolerations:
            if tol.get("effect") and tol["effect"] != t.effect:
                continue
            if tol.get("operator") == "Exists":
                ok = ok or not tol.get("key") or tol["key"] == t.key
            else:
                ok = ok or (tol.get("key") == t.key and str(tol.get("value") or "") == t.value)
        if not ok:
            return False
    return True


def may_run(inst: Instance, n: Node) -> bool:
    assert not inst.pod.affinity_terms, "the oracle's instances use no node affinity"
    return n.ready and selector_ok(inst, n) and tolerated(inst, n)      # cordon: a taint in taints_of


def demand(inst: Instance) -> dict[str, int]:
    d = {r: v for r, v in inst.pod.requests.items() if v}
    d["pods"] = 1
    return d


def free(n: Node) -> dict[str, int]:
    f = {r: max(0, v - n.used.get(r, 0)) for r, v in n.allocatable.items()}
    f.setdefault("pods", NO_LIMIT)
    return f


def priority(g: PlacementGroup) -> int:
    ps = [int(w.annotations["placer.dev/priority"]) for w in g.workloads
          if "placer.dev/priority" in (w.annotations or {})]
    return max(ps) if ps else 0


def gpus(g: PlacementGroup) -> int:
    return sum(i.pods * i.pod.requests.get(r, 0) for w in g.workloads for i in w.instances for r in GPUS)


def _selector_ok(text: str, labels: Mapping[str, str]) -> bool:
    text = text.strip()
    if " in (" in text:
        key, _, rest = text.partition(" in (")
        return labels.get(key.strip()) in [v.strip() for v in rest.rstrip(")").split(",")]
    key, _, value = text.partition("=")
    return labels.get(key.strip()) == value.strip()


def _pins(g: PlacementGroup) -> set[str]:
    """The group's typed pin stands for its workloads' own annotations."""
    if g.pin:
        return {g.pin}
    return {w.annotations["placer.dev/cluster"] for w in g.workloads if (w.annotations or {}).get("placer.dev/cluster")}


def policy_ok(g: PlacementGroup, c: Cluster) -> bool:
    if c.error is not None or c.name in g.excluded:
        return False
    pins = _pins(g)
    if len(pins) > 1 or (pins and pins != {c.name}):
        return False
    return all(_selector_ok(w.annotations["placer.dev/cluster-selector"], c.labels)
               for w in g.workloads if (w.annotations or {}).get("placer.dev/cluster-selector"))


def instances(g: PlacementGroup) -> list[tuple[str, Instance]]:
    return [(w.key, i) for w in g.workloads for i in w.instances if i.pods > 0]


# --- topology, independently -------------------------------------------------------------------

HOST = "kubernetes.io/hostname"
Unit = tuple[str, bool, tuple[int, ...]]          # key, required, positions in instances(g)


def dom(n: Node, key: str) -> str | None:
    return n.labels.get(key) or (n.name if key == HOST else None)


def has_level(cl: Cluster, key: str) -> bool:
    return key == HOST or key in cl.topology or any(key in n.labels for n in cl.nodes)


def units(g: PlacementGroup) -> list[Unit]:
    insts = instances(g)
    out = []
    for w in g.workloads:
        for gang in w.gangs:
            members = {(c, i) for c, i, _ in gang.members}
            for req in gang.topology:
                pos = tuple(n for n, (wk, i) in enumerate(insts) if wk == w.key and (i.component, i.instance) in members
                            and req.covers(i.component, i.instance))
                if pos:
                    out.append((req.key, req.required, pos))
    return out


def levels_ok(g: PlacementGroup, cl: Cluster) -> bool:
    return all(has_level(cl, key) for key, _, _ in units(g))


def _domain_vars(m: cp_model.CpModel, us: Sequence[Unit], xs: Mapping[int, list[tuple[Node, object]]],
                 pods: Sequence[int], on) -> list:
    """Required units: one domain each when `on`; returns the preferred units' spread bools.
    `xs[position]`: (node, count variable) of that instance's pods."""
    spread = []
    for key, required, pos in us:
        per: dict[str | None, list] = {}
        for n in pos:
            for node, v in xs.get(n, []):
                d = dom(node, key)
                per.setdefault("" if d is None and not required else d, []).append(v)
        total = sum(pods[n] for n in pos)
        if required:
            for v in per.pop(None, []):
                m.Add(v == 0)
        bools = []
        for value, vs in per.items():
            b = m.NewBoolVar("")
            m.Add(sum(vs) <= total * b)
            bools.append(b)
        if required:
            m.Add(sum(bools) == on)
        else:
            spread += bools
    return spread


# --- exact node-level fit --------------------------------------------------------------------

def _solver(seconds: float = 20.0) -> cp_model.CpSolver:
    s = cp_model.CpSolver()
    s.parameters.num_workers = 1
    s.parameters.max_time_in_seconds = seconds
    return s


def max_pods_fitting(parts: Sequence[Instance], nodes: Sequence[Node], cap: Sequence[Mapping[str, int]],
                     need_all: bool = False, us: Sequence[Unit] = ()) -> int:
    """The most pods of `parts` (each with its count) that fit `cap` (free per node) at once;
    with `us` (and need_all), each required unit inside one domain."""
    m = cp_model.CpModel()
    x: dict[tuple[int, int], cp_model.IntVar] = {}
    for j, inst in enumerate(parts):
        d = demand(inst)
        for i, n in enumerate(nodes):
            if may_run(inst, n) and all(d[r] <= cap[i].get(r, 0) for r in d):
                x[j, i] = m.NewIntVar(0, inst.pods, "")
        m.Add(sum(v for (jj, _), v in x.items() if jj == j) <= inst.pods)
        if need_all:
            m.Add(sum(v for (jj, _), v in x.items() if jj == j) == inst.pods)
    for i in range(len(nodes)):
        for r in {r for inst in parts for r in demand(inst)}:
            terms = [demand(parts[j]).get(r, 0) * v for (j, ii), v in x.items() if ii == i]
            if terms:
                m.Add(sum(terms) <= cap[i].get(r, 0))
    if us and need_all:
        xs: dict[int, list] = {}
        for (j, i), v in x.items():
            xs.setdefault(j, []).append((nodes[i], v))
        _domain_vars(m, us, xs, [p.pods for p in parts], 1)
    m.Maximize(sum(x.values()))
    s = _solver()
    st = s.Solve(m)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return -1
    assert st == cp_model.OPTIMAL
    return int(s.ObjectiveValue())


def fits(g_parts: Sequence[Instance], nodes: Sequence[Node], cap: Sequence[Mapping[str, int]],
         us: Sequence[Unit] = ()) -> bool:
    # cheap necessary condition first: every resource in total over the nodes the pods may use
    usable = {i for inst in g_parts for i, n in enumerate(nodes) if may_run(inst, n)}
    for r in {r for inst in g_parts for r in demand(inst)}:
        if sum(demand(inst).get(r, 0) * inst.pods for inst in g_parts) > sum(cap[i].get(r, 0) for i in usable):
            return False
    return max_pods_fitting(g_parts, nodes, cap, need_all=True, us=us) >= 0


# --- the exact optimum -----------------------------------------------------------------------

def lex(groups: Sequence[PlacementGroup], placed: set[str]) -> tuple:
    """Per priority level, highest first: (GPUs placed, groups placed)."""
    levels = sorted({priority(g) for g in groups}, reverse=True)
    return tuple((sum(gpus(g) for g in groups if priority(g) == p and g.key in placed),
                  sum(1 for g in groups if priority(g) == p and g.key in placed)) for p in levels)


def optimum(f: Fleet, groups: Sequence[PlacementGroup], spread: list[int] | None = None,
            then: Sequence = (), values: list | None = None, constrain=None, at: tuple | None = None) -> tuple:
    """The lexicographic optimum's value (as `lex`) over every node-level assignment; then the
    fewest values spanned by preferred topology requests, appended to `spread` when given.
    `then`: more stages after the levels and before the spread, each a function of the
    placement bools `y[(group, cluster)]` giving (expression, maximize); their optimal values
    are appended to `values` (tests/solve/oracle_preference.py: cluster order and cost).
    `constrain(m, y)`: more hard constraints on the placement bools (tests/solve/oracle_quota.py).
    `at`: a `lex` value to reach rather than maximise (LookupError when proven unreachable)."""
    m = cp_model.CpModel()
    y: dict[tuple[int, int], cp_model.IntVar] = {}
    load: dict[tuple[int, int, str], list] = {}
    score: dict[tuple[int, int], object] = {}
    spans: list = []
    for gi, g in enumerate(groups):
        for c, cl in enumerate(f.clusters):
            if not policy_ok(g, cl) or not levels_ok(g, cl):
                continue
            yv = m.NewBoolVar("")
            feasible = True
            xs_all = []
            by_pos: dict[int, list] = {}
            for pos, (_, inst) in enumerate(instances(g)):
                d = demand(inst)
                xs = []
                for i, n in enumerate(cl.nodes):
                    fr = free(n)
                    if may_run(inst, n) and all(d[r] <= fr.get(r, 0) for r in d):
                        v = m.NewIntVar(0, inst.pods, "")
                        xs.append(v)
                        by_pos.setdefault(pos, []).append((n, v))
                        for r, a in d.items():
                            load.setdefault((c, i, r), []).append(a * v)
                        score[c, i] = score.get((c, i), 0) + (1 + 1000 * d.get(GPU, 0) + d.get("cpu", 0) // 1000) * v
                if not xs:
                    feasible = False
                m.Add(sum(xs) == inst.pods * yv) if xs else None
                xs_all += xs
            if not feasible:
                m.Add(yv == 0)
            spans += _domain_vars(m, units(g), by_pos, [i.pods for _, i in instances(g)], yv)
            y[gi, c] = yv
        m.Add(sum(v for (gg, _), v in y.items() if gg == gi) <= 1)
    if constrain is not None:
        constrain(m, y)
    for (c, i, r), terms in load.items():
        m.Add(sum(terms) <= free(f.clusters[c].nodes[i]).get(r, 0))
    levels = sorted({priority(g) for g in groups}, reverse=True)
    big = len(groups) + 1
    # identical nodes of a cluster are interchangeable: order them by a scalar of their load
    for c, cl in enumerate(f.clusters):
        for i in range(len(cl.nodes) - 1):
            a, b = cl.nodes[i], cl.nodes[i + 1]
            if (free(a), a.labels, a.taints, schedulable(a)) == (free(b), b.labels, b.taints, schedulable(b)):
                m.Add(score.get((c, i), 0) >= score.get((c, i + 1), 0))
    s = _solver(120)
    s.parameters.num_workers = 2
    for li, p in enumerate(levels):
        expr = sum((gpus(groups[gi]) * big + 1) * v for (gi, _), v in y.items() if priority(groups[gi]) == p)
        if isinstance(expr, int):
            continue
        if at is not None:               # (GPUs, groups) placed at this level given: feasibility only
            m.Add(expr == at[li][0] * big + at[li][1])
            continue
        m.Maximize(expr)
        st = s.Solve(m)
        assert st == cp_model.OPTIMAL, f"oracle not proven at priority {p}"
        m.Add(expr >= int(round(s.ObjectiveValue())))
    for stage in then:
        expr, maximize = stage(y)
        if isinstance(expr, int):
            (values if values is not None else []).append(expr)
            continue
        m.Maximize(expr) if maximize else m.Minimize(expr)
        st = s.Solve(m)
        assert st == cp_model.OPTIMAL, "oracle not proven on a stage after the levels"
        best = int(round(s.ObjectiveValue()))
        m.Add(expr >= best) if maximize else m.Add(expr <= best)
        (values if values is not None else []).append(best)
    m.ClearObjective()
    if spans:
        m.Minimize(sum(spans))
        st = s.Solve(m)
        assert st == cp_model.OPTIMAL, "oracle not proven on the topology spread"
    else:
        st = s.Solve(m)
    if at is not None and st == cp_model.INFEASIBLE:
        raise LookupError(f"no assignment reaches {at}")
    assert st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    if spread is not None:
        spread.append(sum(s.Value(b) for b in spans))
    placed = {groups[gi].key for (gi, _), v in y.items() if s.Value(v)}
    return lex(groups, placed)


# --- greedy baselines -------------------------------------------------------------------------

def greedy(f: Fleet, groups: Sequence[PlacementGroup], order: str) -> set[str]:
    """Node-level greedy: groups in `order` (arrival | ffd | priority), each on the first
    cluster where every pod fits first-fit (biggest pods first, nodes in order)."""
    if order == "arrival":
        seq = list(groups)
    elif order == "ffd":
        seq = sorted(groups, key=lambda g: -gpus(g))
    else:
        seq = sorted(groups, key=lambda g: (-priority(g), -gpus(g)))
    caps = {c: [free(n) for n in cl.nodes] for c, cl in enumerate(f.clusters)}
    placed = set()
    for g in seq:
        insts = instances(g)
        pods = sorted(((pos, i, demand(i)) for pos, (_, i) in enumerate(insts) for _ in range(i.pods)),
                      key=lambda t: (-sum(t[2].get(x, 0) for x in GPUS), -t[2].get("cpu", 0)))
        req = [(key, pos) for key, required, pos in units(g) if required]
        for c, cl in enumerate(f.clusters):
            if not policy_ok(g, cl) or not levels_ok(g, cl):
                continue
            # topology-aware: every choice of one value per required request, in order
            values = [sorted(v for v in {dom(n, key) for n in cl.nodes} if v is not None) for key, _ in req]
            for choice in itertools.product(*values):
                cap = _first_fit(cl, caps[c], pods, req, choice)
                if cap is not None:
                    caps[c] = cap
                    placed.add(g.key)
                    break
            if g.key in placed:
                break
    return placed


def _first_fit(cl: Cluster, caps: Sequence[Mapping[str, int]], pods, req, choice) -> list[dict] | None:
    cap = [dict(x) for x in caps]
    for pos, inst, d in pods:
        i = next((i for i, n in enumerate(cl.nodes)
                  if may_run(inst, n) and all(d[r] <= cap[i].get(r, 0) for r in d)
                  and all(dom(n, key) == v for (key, covered), v in zip(req, choice) if pos in covered)), None)
        if i is None:
            return None
        for r, a in d.items():
            cap[i][r] -= a
    return cap


# --- judging a plan ---------------------------------------------------------------------------

def placed_groups(plan, groups: Sequence[PlacementGroup]) -> set[str]:
    where = {p.workload for p in plan.placements}
    return {g.key for g in groups if all(w.key in where for w in g.workloads)}


def plan_load(f: Fleet, groups: Sequence[PlacementGroup], plan, keep=lambda g: True) -> dict[str, list[dict]]:
    """Free capacity per cluster and node after the plan's placements of groups `keep` selects."""
    insts = {(w.key, i.key): i for g in groups for w in g.workloads for i in w.instances}
    gof = {w.key: g for g in groups for w in g.workloads}
    out = {cl.name: [free(n) for n in cl.nodes] for cl in f.clusters}
    for p in plan.placements:
        if not keep(gof[p.workload]):
            continue
        cl = f.cluster(p.cluster)
        pos = {n.name: i for i, n in enumerate(cl.nodes)}
        for node, per in p.nodes.items():
            for ikey, cnt in per.items():
                for r, a in demand(insts[p.workload, ikey]).items():
                    out[p.cluster][pos[node]][r] -= a * cnt
    return out


def strict_priority_violations(f: Fleet, groups: Sequence[PlacementGroup], plan) -> list[str]:
    done = placed_groups(plan, groups)
    out = []
    everything = plan_load(f, groups, plan)
    per_level: dict[int, dict] = {}
    for g in groups:
        if g.key in done:
            continue
        p = priority(g)
        if p not in per_level:
            per_level[p] = plan_load(f, groups, plan, keep=lambda o: priority(o) >= p)
        caps = per_level[p]
        for cl in f.clusters:
            parts, us = [i for _, i in instances(g)], units(g)
            if policy_ok(g, cl) and levels_ok(g, cl) and fits(parts, cl.nodes, caps[cl.name], us):
                if not fits(parts, cl.nodes, everything[cl.name], us):
                    out.append(f"{g.key} (priority {p}) fits {cl.name} without lower-priority work")
                else:
                    out.append(f"{g.key} (priority {p}) fits {cl.name} beside the plan")
    return out


def _pool(inst: Instance, cl: Cluster) -> list[int]:
    return [i for i, n in enumerate(cl.nodes) if may_run(inst, n)]


def false_reasons(f: Fleet, groups: Sequence[PlacementGroup], plan) -> list[str]:
    """Every per-cluster reason of every unplaced workload, checked; returns the false ones."""
    by_key = {w.key: g for g in groups for w in g.workloads}
    names = {cl.name for cl in f.clusters}
    where = {p.workload: p.cluster for p in plan.placements}
    workload_group = {w.key: g for g in groups for w in g.workloads}
    bad = []
    for u in plan.unplaced:
        g = by_key[u.workload]
        parts = [i for _, i in instances(g)]
        for cl in f.clusters:
            r = u.reasons.get(cl.name)
            if r is None:
                bad.append(f"{u.workload}@{cl.name}: no reason")
                continue
            ok = _check(r, g, parts, cl, f, groups, plan, names, where, workload_group)
            if ok is not True:
                bad.append(f"{u.workload}@{cl.name}: {r.code} {r.render()!r} is false ({ok})")
    return bad


def _check(r, g, parts, cl: Cluster, f, groups, plan, names, where, workload_group) -> bool | str:
    pins = _pins(g)
    sels = [w.annotations["placer.dev/cluster-selector"] for w in g.workloads
            if (w.annotations or {}).get("placer.dev/cluster-selector")]
    code = r.code
    if code == "ConflictingPins":
        return len(pins) > 1 or "pins agree"
    if code == "UnknownPin":
        return (pins == {r.pinned_to} and r.pinned_to not in names) or "pin is known"
    if code == "PinnedElsewhere":
        return (pins == {r.pinned_to} and r.pinned_to != cl.name) or "not pinned elsewhere"
    if code == "ExcludedBySelector":
        return (r.selector in sels and not _selector_ok(r.selector, cl.labels)) or "selector matches"
    if code == "Excluded":
        return cl.name in g.excluded or "not excluded"
    if code == "Unexplained":
        return True                                     # makes no claim
    if code == "Unreachable":
        return cl.error is not None or "reachable"
    if not policy_ok(g, cl):
        return "policy excludes the cluster but the reason says otherwise"
    if code == "UnboundClaim":
        return _check_claim(r, g, cl)
    us = units(g)
    if code == "TopologyKeyMissing":
        return (any(k == r.key and req == r.required for k, req, _ in us) and not has_level(cl, r.key)) or \
            "the cluster has that level, or nothing asks for it"
    if not levels_ok(g, cl):
        return "a requested level is missing but the reason says otherwise"
    nodes = cl.nodes
    if code == "NoSchedulableNodes":
        return not any(schedulable(n) for n in nodes) or "a node is schedulable"
    named = [i for wkey, i in instances(g) if i.key == getattr(r, "instance", None)
             and getattr(r, "workload", "") in ("", wkey)]
    inst = named[0] if len(named) == 1 else None          # an ambiguous name is no name
    if code == "NoMatchingNodes":
        if inst is None:
            return "unknown instance"
        sched = [n for n in nodes if n.ready]
        if r.among_roomy:
            room = plan_load(f, groups, plan, keep=lambda o: False)[cl.name]
            d = demand(inst)
            if any(may_run(inst, n) and all(d[x] <= room[i].get(x, 0) for x in d) for i, n in enumerate(nodes)):
                return "a node it may use has room"
            sched = [n for i, n in enumerate(nodes) if n.ready and all(d[x] <= room[i].get(x, 0) for x in d)]
        if r.constraint == "nodeSelector":
            return not any(selector_ok(inst, n) for n in sched) or "a schedulable node matches the selector"
        if r.constraint == "taint":
            sel = [n for n in sched if selector_ok(inst, n)]
            return (bool(sel) and not any(tolerated(inst, n) for n in sel)
                    and any(r.detail.startswith(t.key) for n in sel for t in taints_of(n))) or \
                "an untainted (or tolerated) matching node exists"
        return "unexpected constraint"
    if code == "PodTooLarge":
        if inst is None:
            return "unknown instance"
        pool = [nodes[i] for i in _pool(inst, cl)]
        allocs = [n.allocatable.get(r.resource, 0) for n in pool]
        return (bool(pool) and max(allocs) < r.per_pod == demand(inst).get(r.resource)
                and max(allocs) == r.largest) or f"allocatable {allocs}"
    base = plan_load(f, groups, plan, keep=lambda o: False)[cl.name]
    if code == "RoomForFewer":
        return _check_room(r, inst, cl, nodes, base)
    if code == "InsufficientCapacity":
        inst = next((i for i in parts if i.pods == r.pods and demand(i).get(r.resource) == r.per_pod
                     and not fits([i], nodes, base)), None)
        if inst is None:
            return "no instance of that size fails to fit"
        pool = _pool(inst, cl)
        frees = [base[i].get(r.resource, 0) for i in pool]
        return (max(frees, default=0) == r.largest_free and sum(frees) == r.total_free) or \
            f"free {r.resource}: largest {max(frees, default=0)}, total {sum(frees)}"
    if code == "DoesNotFitTogether":
        if fits(parts, nodes, base):
            return "the group fits"
        best = max_pods_fitting(parts, nodes, base)
        pool = sorted({i for p in parts for i in _pool(p, cl)})
        return (best == r.fitting and r.gpus == gpus(g) and r.pods == sum(p.pods for p in parts)
                and r.free_gpus == sum(base[i].get(x, 0) for i in pool for x in GPUS)) or f"{best} fit together"
    if code == "TopologyDomainTooSmall":
        from tests.solve.oracle_topology import check_domain
        return check_domain(r, g, us, cl, base)
    if code == "TopologyDoesNotFit":
        return (fits(parts, nodes, base) and not fits(parts, nodes, base, us)) or \
            "it fits with its topology, or not even without"
    if code == "CapacityTaken":
        if not fits(parts, nodes, base, us):
            return "it does not fit alone"
        blamed = [workload_group.get(k) for k in r.by]
        if any(b is None for b in blamed) or any(where.get(w.key) != cl.name for b in blamed for w in b.workloads):
            return f"blames {r.by}, not all placed on {cl.name}"
        p = priority(g)
        higher = plan_load(f, groups, plan, keep=lambda o: priority(o) > p)[cl.name]
        everything = plan_load(f, groups, plan)[cl.name]
        if fits(parts, nodes, everything, us):
            return "it fits beside the plan"
        if r.higher_priority:
            return (all(priority(b) > p for b in blamed) and not fits(parts, nodes, higher, us)) or \
                "fits after the higher-priority placements"
        # issue 24: work of its own priority only, and lower-priority work is not what keeps it out
        same = plan_load(f, groups, plan, keep=lambda o: priority(o) >= p)[cl.name]
        if not fits(parts, nodes, higher, us):
            return "higher-priority work is the cause"
        if fits(parts, nodes, same, us):
            return "lower-priority work keeps it out"
        return (bool(blamed) and all(priority(b) == p for b in blamed)) or "names work of another priority"
    return f"unchecked reason {code}"


def _group_claims(g: PlacementGroup) -> list[tuple[str, str | None]]:
    """(claim, storage class or None) of the group, read from the objects: a StatefulSet's
    volumeClaimTemplates, and the companion PVCs its pod template's volumes name."""
    out = []
    pvcs = {c["metadata"]["name"]: c for c in g.companions if c.get("kind") == "PersistentVolumeClaim"}
    for w in g.workloads:
        spec = (w.obj or {}).get("spec") or {}
        for t in spec.get("volumeClaimTemplates") or ():
            if (t.get("spec") or {}).get("storageClassName") != "":
                out.append((t["metadata"]["name"], (t.get("spec") or {}).get("storageClassName")))
        for v in ((spec.get("template") or {}).get("spec") or {}).get("volumes") or ():
            name = (v.get("persistentVolumeClaim") or {}).get("claimName")
            sc = ((pvcs.get(name) or {}).get("spec") or {}).get("storageClassName", None)
            if name in pvcs and sc != "":
                out.append((name, sc))
    return out


def _check_claim(r, g: PlacementGroup, cl: Cluster) -> bool | str:
    """The claim is the group's, with that class, and the cluster (whose classes are known)
    has no such class, or, for a claim naming none, no default one."""
    if (r.claim, r.storage_class) not in _group_claims(g):
        return f"no claim {r.claim} of class {r.storage_class} in {_group_claims(g)}"
    if cl.storage_classes is None:
        return "the cluster's StorageClasses are not known"
    if r.storage_class is None:
        return not any(sc.default for sc in cl.storage_classes.values()) or "the cluster has a default class"
    return r.storage_class not in cl.storage_classes or "the cluster has that class"


def _check_room(r, inst: Instance | None, cl: Cluster, nodes: Sequence[Node], base) -> bool | str:
    """`room` of the instance's pods fit at once (the exact count), fewer than all; on the
    nodes it may use with room for `per_pod` of `resource`, `limit` alone holds `limit_room`
    such pods, the least of any request's, fewer than all; every count and sum as stated."""
    if inst is None:
        return "unknown instance"
    d = demand(inst)
    pool = _pool(inst, cl)
    exact = max_pods_fitting([inst], nodes, base)
    if not (r.pods == inst.pods and r.room == exact < inst.pods):
        return f"{exact} of {inst.pods} pods fit"
    if d.get(r.resource) != r.per_pod or d.get(r.limit) != r.limit_per_pod:
        return f"the pods ask {d}"
    holders = [i for i in pool if base[i].get(r.resource, 0) >= r.per_pod]
    by = {x: sum(base[i].get(x, 0) // d[x] for i in holders) for x in d}
    if len(holders) != r.holders or sum(base[i].get(r.resource, 0) for i in pool) != r.free:
        return f"{len(holders)} nodes with room for {r.resource}"
    if by[r.limit] != r.limit_room or by[r.limit] > min(by.values()):
        return f"by each request alone those nodes hold {by}"
    # no single request binds: each named one cuts the nodes it names below the limit's count
    short = {x: sum(1 for i in holders if base[i].get(x, 0) // d[x] < base[i].get(r.limit, 0) // d[r.limit])
             for x in d if x != r.limit}
    if dict(r.short) != {x: n for x, n in short.items() if n} or (by[r.limit] >= inst.pods and not r.short):
        return f"requests short per node {short}"
    return sum(base[i].get(r.limit, 0) for i in holders) == r.limit_free or f"{r.limit} free differs"


# --- random instances ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    name: str
    clusters: tuple[int, int] = (2, 3)
    nodes: tuple[int, int] = (2, 5)
    workloads: tuple[int, int] = (5, 14)
    sizes: tuple[int, ...] = (1, 2, 4, 8)
    levels: int = 2
    cpu_bound: bool = False
    predicates: bool = False
    groups_of_two: float = 0.1


FAMILIES = {
    "gpu": Family("gpu"),
    "mixed-sizes": Family("mixed-sizes", sizes=(1, 2, 3, 6)),
    "cpu-bound": Family("cpu-bound", clusters=(3, 3), nodes=(4, 4), workloads=(16, 20), cpu_bound=True, levels=3),
    "many-levels": Family("many-levels", workloads=(10, 18), levels=12),
    "predicates": Family("predicates", predicates=True, levels=3, sizes=(1, 2, 4, 8, 3)),
}
# beyond the node-exact size: the class model, decoding and repair (no exact optimum here)
MEDIUM = {
    "medium-gpu": Family("medium-gpu", clusters=(3, 4), nodes=(80, 120), workloads=(60, 90), levels=4),
    "medium-hetero": Family("medium-hetero", clusters=(3, 4), nodes=(80, 120), workloads=(60, 90), levels=12,
                            predicates=True, sizes=(1, 2, 3, 4, 6, 8)),
    "medium-cpu": Family("medium-cpu", clusters=(3, 3), nodes=(100, 120), workloads=(80, 100), levels=3,
                         cpu_bound=True),
}


def instance(fam: Family, seed: int) -> tuple[Fleet, list[PlacementGroup]]:
    rnd = random.Random(seed)
    ncl = rnd.randint(*fam.clusters)
    regions = ("east", "west")
    products = ("h100", "a100")
    cls = []
    for c in range(ncl):
        specs = []
        for k in range(rnd.randint(1, 3)):
            cnt = rnd.randint(1, max(1, fam.nodes[1] // 2))
            g = rnd.choice((8, 8, 4)) if not fam.cpu_bound else 8
            s = f"{cnt}x{g} used={rnd.choice((0, 0, 1, 2, 3, 5))}"
            if fam.cpu_bound:
                s += f" cpu={rnd.choice((32, 48, 64))} usedcpu={rnd.choice((0, 4, 16))}"
            if fam.predicates:
                s += f" gpu={rnd.choice(products)}"
                if rnd.random() < 0.3:
                    s += " taint=dedicated=ml:NoSchedule"
                if rnd.random() < 0.1:
                    s += " unschedulable"
                if rnd.random() < 0.1:
                    s += " pods=3 usedpods=1"
            specs.append(s)
        if fam.predicates and rnd.random() < 0.4:
            specs.append(f"{rnd.randint(1, 2)}x0 cpu=32")         # CPU-only nodes, untainted
        err = "connection refused" if fam.predicates and rnd.random() < 0.1 else None
        cls.append(cluster(f"c{c}", *specs, labels={"region": regions[c % 2]}, error=err))
    f = fleet(*cls)
    levels = [rnd.randrange(100) for _ in range(fam.levels)]
    gs = []
    n = rnd.randint(*fam.workloads)
    i = 0
    while i < n:
        members = []
        for _ in range(2 if rnd.random() < fam.groups_of_two else 1):
            specs = []
            for _ in range(rnd.choice((1, 1, 2))):
                size = rnd.choice(fam.sizes)
                pods = rnd.randint(1, 3)
                if fam.cpu_bound:
                    size = rnd.choice((0, 1, 2, 4))
                    spec = f"{pods}x{size} cpu={rnd.choice((4, 8, 16, 24, 40))}"
                else:
                    spec = f"{pods}x{size}"
                if fam.predicates and rnd.random() < 0.3:
                    spec += f" gpu={rnd.choice(products + ('l40s',))}"
                specs.append(spec)
            kw = {}
            if fam.predicates:
                if rnd.random() < 0.4:
                    kw["tolerations"] = ({"key": "dedicated", "operator": "Exists"},)
                if rnd.random() < 0.1:
                    kw["pin"] = rnd.choice([c.name for c in cls] + ["nowhere"])
                if rnd.random() < 0.15:
                    kw["selector"] = f"region={rnd.choice(regions)}"
            members.append(wl(f"ns/w{i:02d}", *specs, prio=rnd.choice(levels), **kw))
            i += 1
        gs.append(group(*members, key=f"file-{i:02d}.yaml" if len(members) > 1 else None))
    return f, gs
