"""Cluster preference and cost (issue 21): which clusters a group fills first, what a plan
costs, and the lexicographic stages that follow priority and GPUs placed.

- a group's rank of each cluster: the clusters its `placer.dev/cluster-order` names, in that
  order, then the rest by the clusters file's `preference` (higher first); clusters of equal
  key share a rank (placer.solve.ranking). Names the fleet lacks are skipped (`plan` says so:
  placer.solve.policy.unknown_order_names);
- the preference stage: per priority level (highest first: a higher priority gets its first
  choice first), per rank, best first, the most placed (GPUs x (groups + 1) + 1 per group, as
  the priority stages count) on clusters of that rank, each value fixed before the next:
  "fill the first cluster before spilling to the next", exactly;
- the cost stage: among plans equal on everything before, the least sum of GPUs x the
  cluster's `cost` per GPU-hour (a cluster without `cost` costs 0 when others have one);
- `prefer`: a placed group that fits a cluster it ranks better (or, at the same rank, a
  cheaper one) beside the rest of the plan moves there; the plan only gets better.
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Mapping, Sequence

from placer.model import reasons as R
from placer.model.fleet import Cluster
from placer.solve.groups import GroupInfo
from placer.solve.problem import Problem, states_of
from placer.solve.ranking import cost_units
from placer.solve.repair import Result, place
from placer.solve.state import undo

COMBINED_MAX = 2**31              # the rank stages become one weighted stage below this (as priorities do)
PREFER_ROUNDS = 3                 # passes of `prefer` over the placed groups


def active(problem: Problem) -> tuple[bool, bool]:
    """(some group ranks its eligible clusters differently, the fleet's costs differ)."""
    ranked = any(len({g.ranks[c] for c in g.eligible}) > 1 for g in problem.groups if g.ranks)
    return ranked, len(set(cost_units(problem.clusters))) > 1


# --- the model's stages ----------------------------------------------------------------------------

Terms = list[tuple[int, int]]


def stage_terms(agg, problem: Problem, ng: int) -> list[tuple[str, Terms, bool]]:
    """(label, terms, maximize) of the preference stage(s), then the cost stage."""
    ranked, priced = active(problem)
    out: list[tuple[str, Terms, bool]] = []
    if ranked:
        out += _rank_stages(agg, ng)
    if priced:
        units = cost_units(problem.clusters)
        terms = [(units[c] * sg.rep.gpus, agg.z[(sg.index, c)]) for sg in agg.sigs for c in sg.rep.eligible
                 if units[c] * sg.rep.gpus]
        if terms:
            out.append(("cost", terms, False))
    return out


def _rank_stages(agg, ng: int) -> list[tuple[str, Terms, bool]]:
    """Per priority level (highest first), per rank but the level's last (its total is fixed
    already), the most placed there; one weighted stage when its coefficients stay small."""
    per: list[tuple[str, Terms, int]] = []
    for p in sorted({sg.rep.priority for sg in agg.sigs}, reverse=True):
        sigs = [sg for sg in agg.sigs if sg.rep.priority == p and sg.rep.ranks]
        depth = max((sg.rep.ranks[c] for sg in sigs for c in sg.rep.eligible), default=0)
        for r in range(depth):
            terms = [(sg.rep.gpus * ng + 1, agg.z[(sg.index, c)]) for sg in sigs for c in sg.rep.eligible
                     if sg.rep.ranks[c] == r]
            top = sum((sg.rep.gpus * ng + 1) * len(sg.groups) for sg in sigs
                      if any(sg.rep.ranks[c] == r for c in sg.rep.eligible))
            if terms:
                per.append((f"preference {p}/{r}", terms, top))
    scale, combined = 1, []
    for _, terms, top in reversed(per):
        combined += [(a * scale, v) for a, v in terms]
        scale *= top + 1
    if len(per) > 1 and scale < COMBINED_MAX:
        return [("preference", combined, True)]
    return [(label, terms, True) for label, terms, _ in per]


# --- the value of a plan and of the model's answer ---------------------------------------------------

def _key(per: Mapping[tuple[int, int], int], cost: int, problem: Problem) -> tuple:
    """Per priority level (highest first), per rank: placed there; then -cost."""
    levels = sorted({g.priority for g in problem.groups}, reverse=True)
    n = len(problem.clusters)
    return tuple(per.get((p, r), 0) for p in levels for r in range(n)) + (-cost,)


def plan_key(problem: Problem, result: Result, ng: int) -> tuple:
    """What the preference and cost stages compare, larger better."""
    units = cost_units(problem.clusters)
    by_idx = {g.index: g for g in problem.groups}
    per: dict[tuple[int, int], int] = {}
    cost = 0
    for gi, (c, _) in result.items():
        g = by_idx[gi]
        cell = (g.priority, g.ranks[c] if g.ranks else 0)
        per[cell] = per.get(cell, 0) + g.gpus * ng + 1
        cost += units[c] * g.gpus
    return _key(per, cost, problem)


def model_key(agg, values: Sequence[int], problem: Problem, ng: int) -> tuple:
    """The same for the model's answer."""
    units = cost_units(problem.clusters)
    per: dict[tuple[int, int], int] = {}
    cost = 0
    for sg in agg.sigs:
        for c in sg.rep.eligible:
            n = values[agg.z[(sg.index, c)]]
            cell = (sg.rep.priority, sg.rep.ranks[c] if sg.rep.ranks else 0)
            per[cell] = per.get(cell, 0) + (sg.rep.gpus * ng + 1) * n
            cost += units[c] * sg.rep.gpus * n
    return _key(per, cost, problem)


# --- moving placed groups to clusters they rank better ------------------------------------------------

def better(problem: Problem, g: GroupInfo, c: int) -> list[int]:
    """The clusters (any, eligible or not) the group ranks before `c`, or at its rank and cheaper."""
    units = cost_units(problem.clusters)
    ranks = g.ranks or (0,) * len(problem.clusters)
    return [d for d in range(len(problem.clusters)) if (ranks[d], units[d]) < (ranks[c], units[c])]


def prefer(problem: Problem, result: Result, deadline: float | None = None) -> bool:
    """Each placed group (highest priority first) that fits, beside the rest of the plan, a
    cluster it ranks better, or one of its rank that is cheaper, moves to the best such
    cluster. Spread members stay where the spread stages put them. Returns whether anything moved."""
    ranked, priced = active(problem)
    if not (ranked or priced):
        return False
    moved = False
    states = states_of(problem, result)
    by_idx = {g.index: g for g in problem.groups}
    for _ in range(PREFER_ROUNDS):
        changed = False
        for g in sorted((by_idx[gi] for gi in result), key=lambda g: (-g.priority, -g.gpus, g.key)):
            if g.family is not None:
                continue                # a spread member: its share is the spread stages' to choose
            if deadline is not None and time.monotonic() >= deadline:
                return moved
            c, assign = result[g.index]
            ahead = set(better(problem, g, c))
            for d in (d for d in g.eligible if d in ahead):
                new = place(states[d], g, deadline)
                if new is not None:
                    undo(states[c], g, assign)
                    result[g.index] = (d, new)
                    changed = moved = True
                    break
        if not changed:
            break
    return moved


def passed_reason(why: R.Reason, g: GroupInfo, c: int, d: int) -> R.Reason:
    """Why cluster d, which the group placed on c ranks better (or finds cheaper), did not take
    it: the explainer's reason, where it names work of the group's own or lower priority said
    as what it is (the preference and cost stages gave it the room)."""
    if isinstance(why, R.CapacityTaken) and not why.higher_priority and why.by:
        same_rank = not g.ranks or g.ranks[d] == g.ranks[c]
        return R.PreferenceTaken(why.by, why.groups, cheaper=same_rank)
    return why


def cost_of(cluster: Cluster, gpus: int, fleet_costed: bool) -> Decimal | None:
    """A placement's cost per hour: its GPUs x the cluster's cost (None when the fleet gives none)."""
    if not fleet_costed:
        return None
    return (cluster.cost or Decimal(0)) * gpus
