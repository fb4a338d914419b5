"""A plan over spread members merged back into the plan the user reads: one placement per share
(the workload, its cluster, its replicas, `spread: {mode, shares}`), and one unplaced entry per
workload of a family placed nowhere, with a reason per cluster (placer.solve.spread)."""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping, Sequence

from placer.model import reasons as R
from placer.model.errors import VerificationError
from placer.model.plan import Placement, Plan, Unplaced
from placer.model.spread import spread_of
from placer.model.topology import TopologyChoice
from placer.model.workload import PlacementGroup, Workload
from placer.solve.problem import Problem
from placer.solve.spread import Family
from placer.solve.weights import room


def _origins(problem: Problem, families: Sequence[Family]) -> dict[str, tuple[Family, Workload]]:
    """Member workload key -> (its family, the workload as given)."""
    by_idx = {g.index: g for g in problem.groups}
    out: dict[str, tuple[Family, Workload]] = {}
    for fam in families:
        for gi in [*fam.members, *fam.bases.values()]:
            members = by_idx[gi].group.workloads
            given = fam.group.workloads if len(members) == len(fam.group.workloads) else (fam.workload,)
            for m, w in zip(members, given):
                out[m.key] = (fam, w)
    return out


def _merge_into(into: Placement | None, p: Placement, w: Workload, fam: Family) -> Placement:
    topology = _share_topology(into, p, fam)
    if into is None:
        return dataclasses.replace(p, workload=w.key, ref=w.ref, group=fam.group.key, topology=topology,
                                   nodes={n: dict(per) for n, per in p.nodes.items()})
    nodes = {n: dict(per) for n, per in into.nodes.items()}
    for n, per in p.nodes.items():
        slot = nodes.setdefault(n, {})
        for k, v in per.items():
            slot[k] = slot.get(k, 0) + v
    order = {n: i for i, n in enumerate(p.nodes)} | {n: i for i, n in enumerate(into.nodes)}
    nodes = dict(sorted(nodes.items(), key=lambda kv: (_node_key(kv[0]), order[kv[0]])))
    cost = into.cost + p.cost if into.cost is not None and p.cost is not None else into.cost
    return dataclasses.replace(into, gpus=into.gpus + p.gpus, pods=into.pods + p.pods, nodes=nodes, cost=cost,
                               topology=topology)


def _share_topology(into: Placement | None, p: Placement, fam: Family) -> tuple[TopologyChoice, ...]:
    """The share's domains so far, and a unit's renamed to the next of the copy's gangs (a share
    of k units has the first k of `unit_gangs`: the unit's gang is one of them in turn)."""
    have = tuple(into.topology) if into is not None else ()
    s = fam.workload.scaling
    if not p.topology or s is None or not s.unit_gangs:
        return have
    gang = s.unit_gangs[len({c.gang for c in have})]
    return have + tuple(dataclasses.replace(c, gang=gang) for c in p.topology)


def _node_key(name: str) -> tuple:
    """Node names in natural order (`n-2` before `n-10`)."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def merge(problem: Problem, plan: Plan, families: Sequence[Family], result) -> Plan:
    if not families:
        return plan
    origins = _origins(problem, families)
    merged: dict[tuple[int, str, str], Placement] = {}
    placements: list[Placement] = []
    for p in plan.placements:
        if p.workload not in origins:
            placements.append(p)
            continue
        fam, w = origins[p.workload]
        key = (fam.index, w.key, p.cluster)
        merged[key] = _merge_into(merged.get(key), p, w, fam)
    share_units = _units(problem, families, result)
    short = {fam.index: short_reasons(problem, fam, share_units[fam.index], plan) for fam in families}
    for (fi, _, cluster), p in sorted(merged.items(), key=lambda kv: kv[0]):
        fam = families[fi]
        placements.append(_with_spread(p, fam, share_units[fi], cluster, short[fi]))
    unplaced = [u for u in plan.unplaced if u.workload not in origins]
    placed_families = {fi for fi, _, _ in merged}
    for fam in families:
        if fam.index not in placed_families:
            why = family_reasons(problem, fam, plan)
            unplaced += [Unplaced(w.key, w.kind, fam.group.key, w.gpus, w.pods, _priority(fam, problem), why,
                                  ref=w.ref) for w in fam.group.workloads]
    left_out = sum((fam.units - sum(share_units[fam.index].values())) * fam.workload.scaling.unit.gpus
                   for fam in families if short[fam.index] and fam.workload.scaling is not None)
    return _summarised(dataclasses.replace(plan, placements=tuple(placements), unplaced=tuple(unplaced)),
                       problem, families, left_out)


def _priority(fam: Family, problem: Problem) -> int:
    gi = (fam.members or list(fam.bases.values()) or [0])[0]
    return next((g.priority for g in problem.groups if g.index == gi), 0)


def _units(problem: Problem, families: Sequence[Family], result) -> dict[int, dict[str, int]]:
    names = [cl.name for cl in problem.clusters]
    out: dict[int, dict[str, int]] = {}
    for fam in families:
        per: dict[str, int] = {}
        for gi in fam.members:
            if gi in result:
                c = names[result[gi][0]]
                per[c] = per.get(c, 0) + 1
        out[fam.index] = per
    return out


def _with_spread(p: Placement, fam: Family, units: Mapping[str, int], cluster: str,
                 why: Mapping[str, R.Reason]) -> Placement:
    s = fam.workload.scaling
    if fam.divide and s is not None:
        shares = {c: sum(s.replicas_at(k)) for c, k in sorted(units.items())}
        spread: dict = {"mode": "divide", "shares": shares}
        if why:
            spread.update(unplaced=sum(s.replicas) - sum(shares.values()), reasons=dict(why))
        return dataclasses.replace(p, replicas=shares.get(cluster, 0), spread=spread)
    return dataclasses.replace(p, spread={"mode": "duplicate", "shares": {c: 1 for c in sorted(units)}})


def _summarised(plan: Plan, problem: Problem, families: Sequence[Family], left_out: int = 0) -> Plan:
    """The summary over the merged plan; `left_out`: GPUs of divides placed in part, requested
    but not placed."""
    nonmember = [g for g in problem.groups if g.family is None]
    groups = len(nonmember) + len(families)
    placed_refs = {p.ref or p.workload for p in plan.placements}
    fam_placed = {p.group for p in plan.placements if p.spread is not None}
    summary = dataclasses.replace(
        plan.summary, workloads=len(placed_refs) + len(plan.unplaced), placed=len(placed_refs),
        gpus_requested=sum(p.gpus for p in plan.placements) + sum(u.gpus for u in plan.unplaced) + left_out,
        gpus_placed=sum(p.gpus for p in plan.placements), groups=groups,
        groups_placed=len({p.group for p in plan.placements if p.spread is None}) + len(fam_placed))
    return dataclasses.replace(plan, summary=summary)


# --- reasons -----------------------------------------------------------------------------------

def family_reasons(problem: Problem, fam: Family, plan: Plan) -> dict[str, R.Reason]:
    """Per cluster, why the family is placed nowhere: a member's own reason where no member may go
    there at all, else what the policy needs against what the cluster holds alone."""
    by_idx = {g.index: g for g in problem.groups}
    member_why = {u.group: u.reasons for u in plan.unplaced}
    out: dict[str, R.Reason] = {}
    names = [cl.name for cl in problem.clusters]
    if fam.divide:
        rooms = {c: room(problem, by_idx[fam.members[0]], c, fam.units) for c in problem.infos} \
            if fam.members else {}
        for c, name in enumerate(names):
            g = by_idx[fam.members[0]] if fam.members else None
            static = g.static.get(c) if g is not None else None
            out[name] = static or R.SpreadShort(fam.unit_name, rooms.get(c, 0), fam.min_units(), fam.units,
                                                _policy_text(fam))
        return out
    fits = {}
    for gi, name in fam.copy_cluster.items():
        c = names.index(name)
        g = by_idx[gi]
        fits[name] = c in problem.infos and c in g.eligible and room(problem, g, c, 1) == 1
    need = fam.spec.clusters or sum(1 for gi in fam.members if by_idx[gi].eligible)
    for gi, name in fam.copy_cluster.items():
        own = member_why.get(by_idx[gi].key, {}).get(name)
        out[name] = R.DuplicateShort(need, sum(fits.values())) if fits[name] or own is None else own
    return out


def short_reasons(problem: Problem, fam: Family, units: Mapping[str, int], plan: Plan) -> dict[str, R.Reason]:
    """A divide placed in part (`spread-min-replicas`): per cluster, why its share is no larger:
    where its nodes hold no unit at all, a unit left out's own reason there; else its share
    against the units its nodes hold alone and what kept it below that. {} when placed whole or
    not at all."""
    placed = sum(units.values())
    if not fam.divide or not fam.members or not placed or placed >= fam.units:
        return {}
    by_idx = {x.index: x for x in problem.groups}
    g = by_idx[fam.members[0]]
    left_out = {by_idx[gi].key for gi in fam.members}
    own = next((u.reasons for u in plan.unplaced if u.group in left_out), {})
    names = [cl.name for cl in problem.clusters]
    weights = dict(fam.spec.weights)
    out: dict[str, R.Reason] = {}
    for c, name in enumerate(names):
        share, most = units.get(name, 0), room(problem, g, c, fam.units)
        if not most and (g.static.get(c) or own.get(name)):
            out[name] = g.static.get(c) or own[name]
            continue
        limit = ""
        if weights and name not in weights:
            limit = "it has no weight in spread-weights"
        elif not share and fam.spec.clusters and len(units) >= fam.spec.clusters:
            limit = f"spread-clusters {fam.spec.clusters} are in use"
        elif weights:
            limit = (f"spread-weights {','.join(f'{k}={v}' for k, v in fam.spec.weights)}, or other workloads "
                     "of the plan, hold it there")
        out[name] = R.ShareShort(fam.unit_name, _replicas(fam, share), _replicas(fam, most), limit)
    return out


def _replicas(fam: Family, units: int) -> int:
    s = fam.workload.scaling
    return sum(s.replicas_at(units)) if s is not None else units


def _policy_text(fam: Family) -> str:
    parts = []
    if fam.spec.weights:
        parts.append("spread-weights " + ",".join(f"{c}={w}" for c, w in fam.spec.weights))
    if fam.spec.clusters:
        parts.append(f"spread-clusters {fam.spec.clusters}")
    return " and ".join(parts)


__all__: Sequence[str] = ("family_reasons", "merge", "verify_shares")


def verify_shares(fleet, groups: Sequence[PlacementGroup], plan: Plan) -> None:
    """The spread policy on the merged plan, from the annotations as given: each workload at
    most once per cluster; duplicate copies exactly N when N is given; divided shares summing to
    at most the workload's replicas, at least its minimum, on at most N clusters."""
    for g in groups:
        for w in g.workloads:
            spec = spread_of(w.annotations, w.key, w.source)
            mine = [p for p in plan.placements if p.ref == w.ref]
            clusters = [p.cluster for p in mine]
            if spec is None or not mine:
                continue
            bad = len(set(clusters)) != len(clusters)
            if spec.mode == "duplicate":
                bad = bad or (spec.clusters is not None and len(mine) != spec.clusters)
            elif w.scaling is not None:
                total = sum(p.replicas or 0 for p in mine)
                most = sum(w.scaling.replicas)
                bad = bad or total > most or total < min(spec.min_replicas or most, most)
                bad = bad or (spec.clusters is not None and len(mine) > spec.clusters)
            if bad:
                raise VerificationError(f"plan rejected by verifier: spread of {w.key} breaks its policy "
                                        f"({', '.join(f'{p.cluster}={p.replicas}' for p in mine)})", obj=w.key)
