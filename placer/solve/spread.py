"""Spread (`placer.dev/spread`) inside the one solve: a spread group becomes member groups the
model places like any other, tied by linear constraints on the model's count variables.

- `duplicate`: one copy of the group per cluster, pinned there; the copies placed are exactly
  N (`spread-clusters`, default: every cluster that accepts a copy) or none.
- `divide`: the workload's scalable replicas (its definition's `scale`) become `units`
  identical unit groups, free to go anywhere the workload may; interchangeable, they share one
  count variable per cluster in the model, which is the share on that cluster. A workload
  whose copies all carry some pods whatever their share (a Ray head) gets a base group per
  cluster, placed there exactly when the share there is not empty. Units placed: all, or at
  least `spread-min-replicas` (as units), or none; at most N clusters; with weights, only the
  weighted clusters, and each share within one unit of its weight (`|W x_c - w_c x T| <= W`,
  over the weighted clusters that accept the workload) as far as the nodes as they are allow:
  the excess is at most what their room forces (placer.solve.weights; zero when they allow the
  weights, so other work never bends them), and minimised in a stage after GPUs placed.
  Without weights, as few clusters as hold it (the stage after).

Each unit and copy is placed whole at node level by the same model, decoding and repair as
every group; `legalize` brings a greedy or repaired plan back inside the policy (dropping
what breaks it), so the baselines the solver is never below obey it too. Shares are merged
back into one placement per cluster by placer.solve.shares.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from placer.model.errors import InputError
from placer.model.fleet import Fleet
from placer.model.spread import DIVIDE, DUPLICATE, Spread, spread_of
from placer.model.workload import PlacementGroup, Workload
from placer.solve.state import PodAssign
from placer.solve.weights import excess, least_excess, room

Result = dict[int, tuple[int, PodAssign]]


@dataclass
class Family:
    """One spread group and the member groups it became (indices into the expanded list)."""

    index: int
    group: PlacementGroup                 # the group as given
    spec: Spread
    workload: Workload                    # the spread workload (divide: the one with scaling)
    members: list[int] = field(default_factory=list)      # duplicate: copies; divide: units
    copy_cluster: dict[int, str] = field(default_factory=dict)   # duplicate: member -> cluster
    bases: dict[str, int] = field(default_factory=dict)         # divide: cluster -> base group
    units: int = 0
    # weighted divide: the most excess beyond one unit of the weights a plan may have
    # (placer.solve.weights; None: unbounded, too large to work out)
    slack: int | None = 0

    @property
    def divide(self) -> bool:
        return self.spec.mode == DIVIDE

    @property
    def unit_name(self) -> str:
        s = self.workload.scaling
        return s.unit_name if s else "replica"

    def min_units(self) -> int:
        """Units that must land for the family to be placed at all."""
        s = self.workload.scaling
        if not self.spec.min_replicas or s is None or not s.units:
            return self.units
        per = sum(s.replicas) // s.units            # replicas of one unit
        return min(self.units, -(-self.spec.min_replicas // max(per, 1)))


def _spec(g: PlacementGroup) -> tuple[Spread, Workload] | None:
    found = [(spread_of(w.annotations, w.key, w.source), w) for w in g.workloads]
    specs = [(s, w) for s, w in found if s is not None]
    if not specs:
        return None
    if len({s for s, _ in specs}) > 1:
        raise InputError(f"the workloads of group {g.key} give different placer.dev/spread policies",
                         obj=specs[1][1].key, source=specs[1][1].source)
    spec, w = specs[0]
    if spec.mode == DIVIDE and len(g.workloads) > 1:
        raise InputError(f"placer.dev/spread: divide splits one workload; group {g.key} has "
                         f"{len(g.workloads)} (a group's workloads land together)", obj=w.key, source=w.source)
    return spec, w


def _renamed(w: Workload, suffix: str) -> Workload:
    return dataclasses.replace(w, name=f"{w.name}{suffix}")


def expand(fleet: Fleet, groups: Sequence[PlacementGroup]) -> tuple[list[PlacementGroup], list[Family]]:
    """The groups with every spread group replaced by its members (workloads renamed apart so
    that each member is a workload of its own to the solver and the verifier)."""
    out: list[PlacementGroup] = []
    families: list[Family] = []
    names = [cl.name for cl in fleet.clusters]
    for g in groups:
        found = _spec(g)
        if found is None:
            out.append(g)
            continue
        spec, w = found
        fam = Family(len(families), g, spec, w)
        if spec.mode == DUPLICATE:
            for name in names:
                fam.members.append(len(out))
                fam.copy_cluster[len(out)] = name
                out.append(dataclasses.replace(g, key=f"{g.key}@{name}", pin=name,
                                               workloads=tuple(_renamed(x, f"@{name}") for x in g.workloads)))
        else:
            _divide(fam, g, w, names, out)
        families.append(fam)
    return out, families


def check_weights(fleet: Fleet, groups: Sequence[PlacementGroup]) -> None:
    """Weights naming a cluster the fleet lacks are bad input (`plan`, `submit`). The solve itself
    gives such a cluster no share: the options search re-solves on part of the fleet."""
    names = {cl.name for cl in fleet.clusters}
    for g in groups:
        found = _spec(g)
        unknown = [c for c, _ in found[0].weights if c not in names] if found else []
        if found and unknown:
            raise InputError(f"annotation placer.dev/spread-weights: cluster {unknown[0]!r} is not in the fleet",
                             obj=found[1].key, source=found[1].source)


def _divide(fam: Family, g: PlacementGroup, w: Workload, names: Sequence[str], out: list[PlacementGroup]) -> None:
    s = w.scaling
    assert s is not None                     # placer.definitions.scale attaches it to every divide
    fam.units = s.units if s.unit.instances else 0
    for i in range(fam.units):
        fam.members.append(len(out))
        out.append(dataclasses.replace(g, key=f"{g.key}#{i}", workloads=(_renamed(s.unit, f"#{i}"),)))
    if s.fixed.instances and fam.units:
        for name in names:
            fam.bases[name] = len(out)
            out.append(dataclasses.replace(g, key=f"{g.key}@{name}", pin=name,
                                           workloads=(_renamed(s.fixed, f"@{name}"),)))


def tag(problem, families: Sequence[Family]) -> None:
    """Mark each member's GroupInfo with its family (the model keeps families apart), and work
    out each weighted family's slack from the clusters' room as they are."""
    by_idx = {g.index: g for g in problem.groups}
    names = [cl.name for cl in problem.clusters]
    for fam in families:
        for gi in [*fam.members, *fam.bases.values()]:
            by_idx[gi].family = fam.index
        if fam.divide and fam.spec.weights and fam.members:
            unit = by_idx[fam.members[0]]
            w = weighted(fam, unit.eligible, names)
            rooms = {c: room(problem, unit, c, fam.units) for c in w}
            fam.slack = least_excess(rooms, w, fam.units, fam.spec.clusters)


def weighted(fam: Family, eligible: Sequence[int], cluster_names: Sequence[str]) -> dict[int, int]:
    """Cluster index -> weight, over the weighted clusters the units may use."""
    weights = dict(fam.spec.weights)
    return {c: weights[cluster_names[c]] for c in eligible if cluster_names[c] in weights}


# --- the model ---------------------------------------------------------------------------------

def constrain(agg, problem, families: Sequence[Family]) -> None:
    """Add each family's policy to the aggregate model (placer.solve.model.Agg)."""
    by_idx = {g.index: g for g in problem.groups}
    names = [cl.name for cl in problem.clusters]
    for fam in families:
        if fam.divide:
            _constrain_divide(agg, fam, by_idx, names)
        else:
            _constrain_duplicate(agg, fam, by_idx)


def _z(agg, gi: int, c: int) -> int | None:
    sig = agg.sig_of.get(gi)
    return None if sig is None else agg.z.get((sig, c))


def _constrain_duplicate(agg, fam: Family, by_idx) -> None:
    copies = [(gi, c) for gi in fam.members for c in by_idx[gi].eligible]
    zs = [v for v in (_z(agg, gi, c) for gi, c in copies) if v is not None]
    need = fam.spec.clusters or len(copies)
    b = agg.var(f"dup_{fam.index}", 0, 1 if need <= len(copies) else 0)
    agg.add([(1, v) for v in zs] + [(-need, b)], 0, 0)
    agg.indicators.append((b, [(1, v) for v in zs]))


def _constrain_divide(agg, fam: Family, by_idx, names: Sequence[str]) -> None:
    if not fam.members:
        return
    rep = by_idx[fam.members[0]]
    U = fam.units
    zc = {c: v for c in rep.eligible if (v := _z(agg, fam.members[0], c)) is not None}
    b = agg.var(f"div_{fam.index}", 0, 1)
    total = [(1, v) for v in zc.values()]
    agg.indicators.append((b, total))
    agg.add(total + [(-fam.min_units(), b)], 0, 2**40)
    agg.add(total + [(-U, b)], -2**40, 0)
    for name, gi in fam.bases.items():
        c = names.index(name)
        zb = _z(agg, gi, c) if c in by_idx[gi].eligible else None
        if c in zc:
            if zb is None:
                agg.add([(1, zc[c])], 0, 0)
            else:
                agg.add([(1, zc[c]), (-U, zb)], -2**40, 0)
                agg.add([(1, zb), (-1, zc[c])], -2**40, 0)
    if fam.spec.clusters or not fam.spec.weights:
        used = {c: agg.var(f"div_{fam.index}_u{c}", 0, 1) for c in zc}
        for c, v in zc.items():
            agg.add([(1, v), (-U, used[c])], -2**40, 0)
            agg.add([(1, used[c]), (-1, v)], -2**40, 0)
            agg.indicators.append((used[c], [(1, v)]))
        agg.add([(1, u) for u in used.values()], 0, fam.spec.clusters or len(used))
        if not fam.spec.weights:
            agg.share_clusters += list(used.values())
    if fam.spec.weights:
        _constrain_weights(agg, fam, zc, total, names)


def _constrain_weights(agg, fam: Family, zc: Mapping[int, int], total: list[tuple[int, int]],
                       names: Sequence[str]) -> None:
    """Only weighted clusters; the excess beyond one unit of the weights (|W z_c - w_c T| - W)
    at most the family's slack (what the nodes as they are force), and minimised after GPUs."""
    w = weighted(fam, list(zc), names)
    W = sum(w.values())
    ds = []
    for c, v in zc.items():
        if c not in w:
            agg.add([(1, v)], 0, 0)
            continue
        e = [(W, v)] + [(-w[c] * a, x) for a, x in total]
        d = agg.var(f"div_{fam.index}_d{c}", 0, W * fam.units)
        agg.add([(1, d)] + [(-a, x) for a, x in e], -W, 2**40)
        agg.add([(1, d)] + list(e), -W, 2**40)
        agg.deviations.append((d, e, W))
        ds.append((1, d))
    if fam.slack is not None:
        agg.add(ds, 0, fam.slack)


def hint(agg, values: list[int]) -> None:
    """Complete a hint (placer.solve.model.values_from) with the spread indicators."""
    for v, terms in agg.indicators:
        values[v] = 1 if sum(a * values[x] for a, x in terms) > 0 else 0
    for v, terms, slack in agg.deviations:
        values[v] = max(0, abs(sum(a * values[x] for a, x in terms)) - slack)


# --- legal plans -------------------------------------------------------------------------------

def shares(fam: Family, result: Mapping[int, tuple[int, PodAssign]]) -> dict[int, int]:
    """Cluster index -> units placed there."""
    out: dict[int, int] = {}
    for gi in fam.members:
        if gi in result:
            c = result[gi][0]
            out[c] = out.get(c, 0) + 1
    return out


def legalize(problem, result: Result, families: Sequence[Family]) -> Result:
    """The plan with every family brought inside its policy: what breaks it is dropped."""
    if not families:
        return result
    out = dict(result)
    by_idx = {g.index: g for g in problem.groups}
    names = [cl.name for cl in problem.clusters]
    for fam in families:
        if fam.divide:
            _legal_divide(out, fam, by_idx, names)
        else:
            _legal_duplicate(out, fam, by_idx)
    return out


def _drop(out: Result, members) -> None:
    for gi in members:
        out.pop(gi, None)


def _legal_duplicate(out: Result, fam: Family, by_idx) -> None:
    able = [gi for gi in fam.members if by_idx[gi].eligible]
    need = fam.spec.clusters or len(able)
    placed = [gi for gi in fam.members if gi in out]
    if len(placed) < need or need > len(able):
        _drop(out, fam.members)
    else:
        _drop(out, placed[need:])


def _legal_divide(out: Result, fam: Family, by_idx, names: Sequence[str]) -> None:
    if not fam.members:
        return
    bases = {names.index(n): gi for n, gi in fam.bases.items()}
    share = shares(fam, out)
    for c, gi in bases.items():              # a base goes with a share, a share with its base
        if gi in out and not share.get(c):
            out.pop(gi)
    for gi in fam.members:
        if gi in out and bases and bases.get(out[gi][0]) not in out:
            out.pop(gi)
    share = shares(fam, out)
    if fam.spec.clusters and len(share) > fam.spec.clusters:
        keep = sorted(share, key=lambda c: (-share[c], c))[:fam.spec.clusters]
        _drop(out, [gi for gi in fam.members if gi in out and out[gi][0] not in keep])
        _drop(out, [gi for c, gi in bases.items() if c not in keep])
        share = shares(fam, out)
    if not ok_divide(fam, share, by_idx[fam.members[0]].eligible, names):
        _drop(out, [*fam.members, *fam.bases.values()])


def ok_divide(fam: Family, share: Mapping[int, int], eligible: Sequence[int], names: Sequence[str]) -> bool:
    """Whether shares (cluster index -> units) obey the family's policy."""
    total = sum(share.values())
    if total == 0:
        return True
    if total < fam.min_units() or total > fam.units:
        return False
    if fam.spec.clusters and len([c for c, k in share.items() if k]) > fam.spec.clusters:
        return False
    if fam.spec.weights:                  # unweighted clusters get none; the excess within the slack
        w = weighted(fam, eligible, names)
        return all(c in w for c, k in share.items() if k) and (
            fam.slack is None or excess(share, w, total) <= fam.slack)
    return True
