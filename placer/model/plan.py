"""A plan: where each placed workload's pods go, why the rest could not go anywhere.

Plain frozen data produced by `placer.solve.solve`; `to_dict()` renders the JSON
contract of `placer plan -o json` (keys fixed by the issue; extra keys are additive).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Mapping

from placer.model.reasons import Reason
from placer.model.topology import TopologyChoice
from placer.model.workload import WorkloadRef


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
    ref: WorkloadRef | None = None                  # the identity; `workload` is for people
    topology: tuple[TopologyChoice, ...] = ()       # each gang's chosen domain(s)
    # what a submit creates on the cluster first (`Namespace team-a`, `PriorityClass prod-high`)
    creates: tuple[str, ...] = ()
    # issue 21: GPUs x the cluster's cost per GPU-hour (None: the fleet gives no cost), and per
    # cluster the group ranks better (or at its rank, cheaper), why that one did not take it
    cost: Decimal | None = None
    passed_over: Mapping[str, Reason] = field(default_factory=dict)
    # placer.dev/spread: this share's replicas (divide) and {mode, shares: {cluster: replicas}}
    replicas: int | None = None
    spread: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"workload": self.workload, "kind": self.kind, **_ref_dict(self.ref), "group": self.group,
               "cluster": self.cluster, "gpus": self.gpus, "pods": self.pods,
               "priority": self.priority,
               "nodes": {n: dict(per) for n, per in self.nodes.items()}}
        if self.replicas is not None:
            out["replicas"] = self.replicas
        if self.spread is not None:
            out["spread"] = {"mode": self.spread["mode"], "shares": dict(self.spread["shares"])}
            why = self.spread.get("reasons")
            if why:             # divide placed in part: the replicas left out, why per cluster
                out["spread"].update(unplaced=self.spread["unplaced"], reasons={c: r.render() for c, r in why.items()},
                                     reasonCodes={c: r.code for c, r in why.items()})
        if self.topology:
            out["topology"] = [t.to_dict() for t in self.topology]
        if self.creates:
            out["creates"] = list(self.creates)
        if self.cost is not None:
            out["cost"] = number(self.cost)
        if self.passed_over:
            out["passedOver"] = {c: r.render() for c, r in self.passed_over.items()}
            out["passedOverCodes"] = {c: r.code for c, r in self.passed_over.items()}
        return out

    def is_(self, workload: "str | WorkloadRef") -> bool:
        return _is(self.workload, self.ref, workload)


@dataclass(frozen=True)
class Unplaced:
    workload: str
    kind: str
    group: str
    gpus: int
    pods: int
    priority: int
    reasons: Mapping[str, Reason]                    # cluster -> first reason
    ref: WorkloadRef | None = None
    # what would make it fit (placer.solve.options.Option), best first; None: not searched
    options: tuple[Any, ...] | None = None
    options_incomplete: str | None = None            # why the search for options stopped short

    def is_(self, workload: "str | WorkloadRef") -> bool:
        return _is(self.workload, self.ref, workload)

    def to_dict(self) -> dict[str, Any]:
        out = {"workload": self.workload, "kind": self.kind, **_ref_dict(self.ref), "group": self.group,
               "gpus": self.gpus, "pods": self.pods, "priority": self.priority,
               "reasons": {c: r.render() for c, r in self.reasons.items()},
               "reasonCodes": {c: r.code for c, r in self.reasons.items()}}
        if self.options is not None:
            out["options"] = [o.to_dict() for o in self.options]
        if self.options_incomplete:
            out["optionsIncomplete"] = self.options_incomplete
        return out


def number(d: Decimal) -> int | float:
    """A cost as a JSON number: an integer when whole."""
    return int(d) if d == d.to_integral_value() else float(d)


def _ref_dict(ref: WorkloadRef | None) -> dict[str, Any]:
    return {"ref": ref.to_dict()} if ref is not None else {}


def _is(short: str, ref: WorkloadRef | None, wanted: "str | WorkloadRef") -> bool:
    """A plan entry matches a WorkloadRef exactly, or a string given as `ns/name` or as
    the ref's text (`ns/Kind.group/name`)."""
    if isinstance(wanted, WorkloadRef):
        return ref == wanted if ref is not None else short == wanted.short
    return wanted == short or (ref is not None and wanted == str(ref))


def disambiguate(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`workload` stays `ns/name` where that names one workload of the list; where a Job
    and a Deployment share it, it becomes the full reference `ns/Kind.group/name`."""
    seen: dict[str, set] = {}
    for e in entries:           # the shares of a spread workload are one workload
        ref = e.get("ref")
        seen.setdefault(e["workload"], set()).add(tuple(sorted(ref.items())) if ref else id(e))
    counts = {w: len(refs) for w, refs in seen.items()}
    for e in entries:
        ref = e.get("ref")
        if counts[e["workload"]] > 1 and ref:
            e["workload"] = str(WorkloadRef(ref["apiGroup"], ref["kind"], ref["namespace"], ref["name"]))
    return entries


@dataclass(frozen=True)
class Summary:
    workloads: int
    placed: int
    gpus_requested: int
    gpus_placed: int
    solve_seconds: float
    optimal: bool
    status: str                       # optimal | feasible | greedy (fallback) | trivial | incremental
    groups: int = 0
    groups_placed: int = 0
    # the wall-clock limit ended the search before its deterministic effort: the plan is
    # valid but may differ between runs
    time_limit_hit: bool = False
    timings: Mapping[str, float] = field(default_factory=dict)    # phase -> seconds
    cost: Decimal | None = None       # the placements' cost per hour (issue 21); None: no cluster gives one

    def to_dict(self) -> dict[str, Any]:
        return {"workloads": self.workloads, "placed": self.placed,
                "gpusRequested": self.gpus_requested, "gpusPlaced": self.gpus_placed,
                "solveSeconds": round(self.solve_seconds, 3), "optimal": self.optimal,
                "status": self.status, "groups": self.groups, "groupsPlaced": self.groups_placed,
                "timeLimitHit": self.time_limit_hit,
                "timings": {k: round(v, 3) for k, v in self.timings.items()},
                **({"cost": number(self.cost)} if self.cost is not None else {})}


@dataclass(frozen=True)
class Plan:
    placements: tuple[Placement, ...]
    unplaced: tuple[Unplaced, ...]
    summary: Summary
    # committed groups (already placed elsewhere, pods not bound yet) as accounted for
    committed: tuple[Placement, ...] = ()
    # committed groups that no longer fit their cluster: key -> why
    overcommitted: Mapping[str, str] = field(default_factory=dict)
    # per fleet-wide quota (issue 23), what it holds once the plan is carried out
    quotas: tuple[Any, ...] = ()            # placer.model.quota.QuotaUse

    @property
    def all_placed(self) -> bool:
        return not self.unplaced

    def placement(self, workload: str | WorkloadRef) -> Placement | None:
        """By WorkloadRef, or by `ns/name` (the first match) or the ref's text."""
        return next((p for p in self.placements if p.is_(workload)), None)

    def cluster_of(self, workload: str | WorkloadRef) -> str | None:
        p = self.placement(workload)
        return p.cluster if p else None

    def unplaced_entry(self, workload: str | WorkloadRef) -> Unplaced | None:
        return next((u for u in self.unplaced if u.is_(workload)), None)

    def to_dict(self) -> dict[str, Any]:
        entries = disambiguate([p.to_dict() for p in self.placements] + [u.to_dict() for u in self.unplaced])
        n = len(self.placements)
        out: dict[str, Any] = {"placements": entries[:n], "unplaced": entries[n:],
                               "summary": self.summary.to_dict()}
        if self.committed:
            out["committed"] = [p.to_dict() for p in self.committed]
        if self.overcommitted:
            out["overcommitted"] = dict(self.overcommitted)
        if self.quotas:
            out["quotas"] = [q.to_dict() for q in self.quotas]
        return out
