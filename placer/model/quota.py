"""Fleet-wide quotas (issue 23): who belongs to which quota, and what a quota may use.

A quota guarantees its members `nominal` amounts per resource, counted over the whole
fleet. Quotas in one `cohort` lend each other what they leave unused; the fleet's capacity
beyond the sum of all nominal amounts is a pool every quota with a cohort may borrow from.
What one quota borrows is capped by its `borrowing_limit` (per resource; absent: unlimited).
A quota without a cohort borrows nothing and lends nothing.

The limits as linear constraints over the usage `u[q][r]` (committed and new work together),
for every resource `r` a quota names in `nominal` (other resources are not restricted):
- u[q][r] <= nominal[q][r] + limit[q][r]          (limit 0 without a cohort)
- per cohort C: excess[C][r] = max(0, sum_{q in C} u[q][r] - sum_{q in C} nominal[q][r])
- sum_C excess[C][r] <= pool[r] = max(0, capacity[r] - sum_q nominal[q][r])
A workload matches the first quota (in file order) whose members it is; else the `default`
entry when there is one; else it is in no quota and unrestricted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from placer.model.selectors import Requirement, selector_matches

if TYPE_CHECKING:
    from placer.model.workload import Workload

DEFAULT_QUOTA = "default"


@dataclass(frozen=True)
class Quota:
    name: str
    nominal: Mapping[str, int]                              # canonical units
    namespaces: frozenset[str] | None = None                # members by namespace
    selector: tuple[Requirement, ...] | None = None         # or by the workload's labels
    selector_text: str | None = None
    borrowing_limit: Mapping[str, int] | None = None        # None: unlimited (within the cohort)
    cohort: str | None = None
    weight: Decimal = Decimal(1)

    def member(self, workload: "Workload") -> bool:
        if self.namespaces is not None:
            return workload.namespace in self.namespaces
        if self.selector is not None:
            return selector_matches(self.selector, workload.labels)
        return False

    def may_borrow(self, resource: str) -> int | None:
        """The most this quota may borrow of `resource`; None: no limit of its own."""
        if self.cohort is None:
            return 0
        if self.borrowing_limit is None or resource not in self.borrowing_limit:
            return None
        return self.borrowing_limit[resource]


@dataclass(frozen=True)
class Quotas:
    entries: tuple[Quota, ...] = ()
    # what the quotas' committed work already uses, counted by the caller (the daemon, from its
    # book of placed copies, bound pods or not); None: counted from the committed groups
    counted: "Mapping[str, Mapping[str, int]] | None" = field(default=None, compare=False)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def of(self, workload: "Workload") -> Quota | None:
        """The quota `workload` counts against, or None (unrestricted)."""
        for q in self.entries:
            if q.name != DEFAULT_QUOTA and q.member(workload):
                return q
        return self.get(DEFAULT_QUOTA)

    def get(self, name: str) -> Quota | None:
        return next((q for q in self.entries if q.name == name), None)

    def resources(self) -> list[str]:
        return sorted({r for q in self.entries for r in q.nominal})

    def cohorts(self) -> dict[str, list[Quota]]:
        out: dict[str, list[Quota]] = {}
        for q in self.entries:
            if q.cohort is not None:
                out.setdefault(q.cohort, []).append(q)
        return out


Usage = Mapping[str, Mapping[str, int]]           # quota -> resource -> amount


def capacity(fleet: Any, resource: str) -> int:
    """The fleet's capacity of `resource`: allocatable on schedulable nodes of reachable clusters
    (`fleet`: a placer.model.fleet.Fleet, untyped here as the Fleet holds the quotas)."""
    return sum(n.allocatable.get(resource, 0) for c in fleet.clusters if c.reachable
               for n in c.nodes if n.schedulable)


def pool(fleet: Any, quotas: Quotas) -> dict[str, int]:
    """Per resource: the fleet's capacity beyond the sum of all nominal amounts (as given
    when the snapshot is part of the fleet: Fleet.quota_pool)."""
    given = getattr(fleet, "quota_pool", None)
    if given is not None:
        return {r: given.get(r, 0) for r in quotas.resources()}
    return {r: max(0, capacity(fleet, r) - sum(q.nominal.get(r, 0) for q in quotas.entries))
            for r in quotas.resources()}


@dataclass(frozen=True)
class Headroom:
    """What a quota may still add of one resource, and why: its figures for a reason."""

    quota: str
    resource: str
    used: int
    nominal: int
    borrowed: int
    may_borrow: int            # more it may borrow now (own limit and cohort together)
    cohort: str | None
    cohort_unused: int         # the cohort's unused nominal plus what is left of the pool
    left: int                  # what it may still add, all limits together


def headroom(quotas: Quotas, usage: Usage, pools: Mapping[str, int], quota: Quota, resource: str) -> Headroom:
    used = usage.get(quota.name, {}).get(resource, 0)
    nominal = quota.nominal.get(resource, 0)
    borrowed = max(0, used - nominal)
    unused = 0
    if quota.cohort is not None:
        excess = _excess(quotas, usage, resource)
        pool_left = max(0, pools.get(resource, 0) - sum(excess.values()))
        members = quotas.cohorts()[quota.cohort]
        total_used = sum(usage.get(m.name, {}).get(resource, 0) for m in members)
        total_nominal = sum(m.nominal.get(resource, 0) for m in members)
        unused = max(0, total_nominal - total_used) + pool_left
    own = quota.may_borrow(resource)
    room = nominal + own - used if own is not None else unused
    if quota.cohort is not None:
        room = min(room, unused)
    room = max(0, room)
    # what it may add beyond its own unused nominal amount
    may = max(0, room - max(0, nominal - used))
    return Headroom(quota.name, resource, used, nominal, borrowed, may, quota.cohort, unused, room)


def _excess(quotas: Quotas, usage: Usage, resource: str) -> dict[str, int]:
    out = {}
    for name, members in quotas.cohorts().items():
        used = sum(usage.get(m.name, {}).get(resource, 0) for m in members)
        out[name] = max(0, used - sum(m.nominal.get(resource, 0) for m in members))
    return out


def violations(quotas: Quotas, usage: Usage, pools: Mapping[str, int]) -> list[str]:
    """Every limit `usage` breaks, in words (empty: within every quota)."""
    out = []
    for q in quotas.entries:
        for r, nominal in sorted(q.nominal.items()):
            used = usage.get(q.name, {}).get(r, 0)
            own = q.may_borrow(r)
            if own is not None and used > nominal + own:
                out.append(f"quota {q.name} uses {used} {r}, over nominal {nominal} + borrowing limit {own}")
    for r in quotas.resources():
        excess = _excess(quotas, usage, r)
        if sum(excess.values()) > pools.get(r, 0):
            out.append(f"cohorts borrow {sum(excess.values())} {r} beyond their nominal amounts, "
                       f"the pool has {pools.get(r, 0)}")
    return out


def overs(quotas: Quotas, usage: Usage, pools: Mapping[str, int]) -> dict[tuple[str, str], int]:
    """How far `usage` is over each limit it breaks: (quota, resource) over nominal + borrowing
    limit, ("", resource) the cohorts' borrowing over the pool. Work may be added where it
    makes no amount here grow: committed work already over a limit (a quota lowered since)
    holds back only its own quota, never the others."""
    out: dict[tuple[str, str], int] = {}
    for q in quotas.entries:
        for r, nominal in q.nominal.items():
            own = q.may_borrow(r)
            used = usage.get(q.name, {}).get(r, 0)
            if own is not None and used > nominal + own:
                out[(q.name, r)] = used - nominal - own
    for r in quotas.resources():
        borrowed = sum(_excess(quotas, usage, r).values())
        if borrowed > pools.get(r, 0):
            out[("", r)] = borrowed - pools.get(r, 0)
    return out


def grows(before: Mapping[tuple[str, str], int], after: Mapping[tuple[str, str], int]) -> bool:
    """Whether `after` (overs with new work) is over some limit by more than `before` was."""
    return any(v > before.get(k, 0) for k, v in after.items())


def add_usage(usage: dict[str, dict[str, int]], quota: str, demand: Mapping[str, int], times: int = 1) -> None:
    slot = usage.setdefault(quota, {})
    for r, v in demand.items():
        slot[r] = slot.get(r, 0) + v * times


def workload_usage(quotas: Quotas, workloads: Sequence[tuple["Workload", Mapping[str, int]]]
                   ) -> dict[str, dict[str, int]]:
    """Usage per quota of (workload, total demand) pairs."""
    usage: dict[str, dict[str, int]] = {}
    for w, demand in workloads:
        q = quotas.of(w)
        if q is not None:
            add_usage(usage, q.name, {r: v for r, v in demand.items() if r in q.nominal})
    return usage


EMPTY = Quotas()


# --- fair share (issue 23) -------------------------------------------------------------------------

def lendable(quotas: Quotas, pools: Mapping[str, int]) -> dict[tuple[str, str], int]:
    """(cohort, resource) -> what the cohort's quotas may borrow at most together: their
    nominal amounts plus the fleet's pool (Kueue's "lendable resources in the cohort", with
    the pool in the place of a cohort's own resources)."""
    out = {}
    for name, members in quotas.cohorts().items():
        for r in sorted({r for m in members for r in m.nominal}):
            out[(name, r)] = sum(m.nominal.get(r, 0) for m in members) + pools.get(r, 0)
    return out


def fair_shares(quotas: Quotas, usage: Usage, pools: Mapping[str, int]) -> dict[str, Fraction]:
    """Per quota with a cohort: its weighted dominant borrowed share (Kueue's fair sharing),
    max over the resources it names of borrowed / the cohort's lendable, divided by its weight.
    A quota without a cohort borrows nothing: 0."""
    lend = lendable(quotas, pools)
    out = {}
    for q in quotas.entries:
        share = Fraction(0)
        if q.cohort is not None:
            for r, nominal in q.nominal.items():
                borrowed = max(0, usage.get(q.name, {}).get(r, 0) - nominal)
                if borrowed and lend.get((q.cohort, r), 0) > 0:
                    share = max(share, Fraction(borrowed, lend[(q.cohort, r)]))
        out[q.name] = share / Fraction(q.weight)
    return out


def fair_key(shares: Mapping[str, Fraction]) -> tuple[Fraction, ...]:
    """The shares as a key, larger better: the largest share as small as possible, then the
    next (max-min, lexicographic on the shares sorted largest first, negated)."""
    return tuple(-s for s in sorted(shares.values(), reverse=True))


def lent(quotas: Quotas, usage: Usage) -> dict[str, dict[str, int]]:
    """Per quota and resource: how much of its unused nominal amount its cohort's borrowers
    take. A cohort's borrowing is covered by its quotas' unused nominal amounts before the
    pool; what they cover is split among them in proportion to what each leaves unused
    (rounded down, the remainder one unit each in file order)."""
    out: dict[str, dict[str, int]] = {q.name: {} for q in quotas.entries}
    for members in quotas.cohorts().values():
        for r in sorted({r for m in members for r in m.nominal}):
            used = {m.name: usage.get(m.name, {}).get(r, 0) for m in members if r in m.nominal}
            unused = {m.name: max(0, m.nominal[r] - used[m.name]) for m in members if r in m.nominal}
            borrowed = sum(max(0, used[m.name] - m.nominal[r]) for m in members if r in m.nominal)
            total, covered = sum(unused.values()), min(borrowed, sum(unused.values()))
            if not covered:
                continue
            part = {n: u * covered // total for n, u in unused.items()}
            left = covered - sum(part.values())
            for n in unused:
                if left and part[n] < unused[n]:
                    part[n], left = part[n] + 1, left - 1
            for n, v in part.items():
                out[n][r] = v
    return out


@dataclass(frozen=True)
class QuotaUse:
    """What a quota holds once a plan is carried out (issue 23): `used` by its committed and
    newly placed workloads, `borrowed` beyond its nominal amount, `pending` requested by its
    workloads the plan leaves out; amounts per resource it names."""

    name: str
    cohort: str | None
    nominal: Mapping[str, int]
    used: Mapping[str, int]
    borrowed: Mapping[str, int]
    pending: Mapping[str, int]
    lent: Mapping[str, int] = field(default_factory=dict)
    fair_share: Fraction = Fraction(0)

    def to_dict(self) -> dict[str, Any]:
        from placer.model.quantity import to_json_number

        def amounts(m: Mapping[str, int]) -> dict[str, int | float]:
            return {r: to_json_number(r, m.get(r, 0)) for r in sorted(self.nominal)}
        return {"name": self.name, "cohort": self.cohort, "nominal": amounts(self.nominal),
                "used": amounts(self.used), "borrowed": amounts(self.borrowed), "lent": amounts(self.lent),
                "pending": amounts(self.pending), "fairShare": round(float(self.fair_share), 6)}


def quota_uses(quotas: Quotas, usage: Usage, pending: Usage,
               pools: Mapping[str, int] | None = None) -> tuple[QuotaUse, ...]:
    """Per quota: what it holds under `usage`, what it lends, what is pending, and its fair
    share (borrowed against the cohort's lendable amount with `pools`, else without a pool)."""
    out = []
    shares = fair_shares(quotas, usage, pools or {})
    lends = lent(quotas, usage)
    for q in quotas.entries:
        used = {r: usage.get(q.name, {}).get(r, 0) for r in q.nominal}
        out.append(QuotaUse(q.name, q.cohort, dict(q.nominal), used,
                            {r: max(0, used[r] - n) for r, n in q.nominal.items()},
                            {r: pending.get(q.name, {}).get(r, 0) for r in q.nominal},
                            lends[q.name], shares[q.name]))
    return tuple(out)
