"""A plan's entries from a solver's result (placer.solve): each placed group's workloads with their
pods per node, each unplaced group's workloads with their reasons."""

from __future__ import annotations

from collections import Counter
from typing import Callable, Mapping

from placer.model.plan import Placement, Unplaced
from placer.model.reasons import Reason
from placer.solve.accepts import creates
from placer.solve.groups import GroupInfo
from placer.solve.preference import cost_of
from placer.solve.problem import Problem
from placer.solve.ranking import costed
from placer.solve.state import PodAssign
from placer.solve.topology import choices


def placements(problem: Problem, g: GroupInfo, c: int, assign: PodAssign,
               passed: Mapping[str, Reason] | None = None, with_cost: bool | None = None) -> list[Placement]:
    """The workloads of group `g`, placed on cluster `c` by `assign`, each with its pods per node."""
    info = problem.infos[c]
    refs = [w.ref for w in g.group.workloads]
    per_wl: list[dict[str, dict[str, int]]] = [{} for _ in refs]
    # each part's workload (by position: a ref hashes its fields) and instance named once, not
    # once per pod (issue 24)
    at = {r: n for n, r in enumerate(refs)}
    names = [(at[part.workload.ref], part.instance.key) for part in g.parts]
    order, names_of = info.pos, info.nodes
    # a node's pods of a part counted at once, in the order they first come (issue 24: one
    # step per pod was half of the explanations' phase at 4,000 workloads)
    for (j, i), n in Counter(assign).items():
        k, ikey = names[j]
        slot = per_wl[k].setdefault(names_of[i].name, {})
        slot[ikey] = slot.get(ikey, 0) + n
    out = []
    with_cost = costed(problem.clusters) if with_cost is None else with_cost
    for w, ref, on in zip(g.group.workloads, refs, per_wl):
        nodes = dict(sorted(on.items(), key=lambda kv: order[kv[0]]))
        out.append(Placement(w.key, w.kind, g.key, problem.clusters[c].name, w.gpus, w.pods,
                             g.priority, nodes, ref=ref, topology=choices(g, w.key, info, assign),
                             creates=creates(g.group, problem.clusters[c]),
                             cost=cost_of(problem.clusters[c], w.gpus, with_cost),
                             passed_over=dict(passed or {})))
    return out


def unplaced(problem: Problem, result: Mapping[int, tuple[int, PodAssign]],
             why: Callable[[GroupInfo], Mapping[str, Reason]]) -> tuple[Unplaced, ...]:
    """The workloads of the groups `result` leaves unplaced, in group order, with `why(group)`."""
    out: list[Unplaced] = []
    for g in problem.groups:
        if g.index not in result:
            reasons = why(g)
            out += [Unplaced(w.key, w.kind, g.key, w.gpus, w.pods, g.priority, reasons, ref=w.ref)
                    for w in g.group.workloads]
    return tuple(out)
