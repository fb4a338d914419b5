"""A plan: where each placed workload's pods go, why the rest could not go anywhere.

Plain frozen data produced by `placer.solver.solve`; `to_dict()` renders the JSON
contract of `placer plan -o json` (keys fixed by the issue; extra keys are additive).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .reasons import Reason


@dataclass(frozen=True)
class Placement:
    """One workload of a placed group: its cluster and its pods per node."""

    workload: str                                   # ns/name
    kind: str
    group: str
    cluster: str
    gpus: int
    pods: int
    priority: int
    # node -> "<component>/<instance>" -> pod count
    nodes: Mapping[str, Mapping[str, int]]

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "kind": self.kind, "group": self.group,
                "cluster": self.cluster, "gpus": self.gpus, "pods": self.pods,
                "priority": self.priority,
                "nodes": {n: dict(per) for n, per in self.nodes.items()}}


@dataclass(frozen=True)
class Unplaced:
    workload: str
    kind: str
    group: str
    gpus: int
    pods: int
    priority: int
    reasons: Mapping[str, Reason]                    # cluster -> first reason

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "kind": self.kind, "group": self.group,
                "gpus": self.gpus, "pods": self.pods, "priority": self.priority,
                "reasons": {c: r.render() for c, r in self.reasons.items()},
                "reasonCodes": {c: r.code for c, r in self.reasons.items()}}


@dataclass(frozen=True)
class Summary:
    workloads: int
    placed: int
    gpus_requested: int
    gpus_placed: int
    solve_seconds: float
    optimal: bool
    status: str                       # optimal | feasible | greedy (fallback) | trivial
    groups: int = 0
    groups_placed: int = 0
    # the wall-clock limit ended the search before its deterministic effort: the plan is
    # valid but may differ between runs
    time_limit_hit: bool = False
    timings: Mapping[str, float] = field(default_factory=dict)    # phase -> seconds

    def to_dict(self) -> dict[str, Any]:
        return {"workloads": self.workloads, "placed": self.placed,
                "gpusRequested": self.gpus_requested, "gpusPlaced": self.gpus_placed,
                "solveSeconds": round(self.solve_seconds, 3), "optimal": self.optimal,
                "status": self.status, "groups": self.groups, "groupsPlaced": self.groups_placed,
                "timeLimitHit": self.time_limit_hit,
                "timings": {k: round(v, 3) for k, v in self.timings.items()}}


@dataclass(frozen=True)
class Plan:
    placements: tuple[Placement, ...]
    unplaced: tuple[Unplaced, ...]
    summary: Summary
    # committed groups (already placed elsewhere, pods not bound yet) as accounted for
    committed: tuple[Placement, ...] = ()
    # committed groups that no longer fit their cluster: key -> why
    overcommitted: Mapping[str, str] = field(default_factory=dict)

    @property
    def all_placed(self) -> bool:
        return not self.unplaced

    def placement(self, workload: str) -> Placement | None:
        return next((p for p in self.placements if p.workload == workload), None)

    def cluster_of(self, workload: str) -> str | None:
        p = self.placement(workload)
        return p.cluster if p else None

    def unplaced_entry(self, workload: str) -> Unplaced | None:
        return next((u for u in self.unplaced if u.workload == workload), None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"placements": [p.to_dict() for p in self.placements],
                               "unplaced": [u.to_dict() for u in self.unplaced],
                               "summary": self.summary.to_dict()}
        if self.committed:
            out["committed"] = [p.to_dict() for p in self.committed]
        if self.overcommitted:
            out["overcommitted"] = dict(self.overcommitted)
        return out
