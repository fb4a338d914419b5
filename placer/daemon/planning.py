"""A planning round: the pending workloads as groups, a snapshot from the caches, the
pure `decide`, then each Create started on its cluster (`creates`) and each Unplace
performed by the executor."""

from __future__ import annotations

import dataclasses
import logging
import time

from placer import actuate as A
from placer.actuate.steer import HOLDS
from placer.daemon import decide as DC
from placer.daemon.creates import Creator
from placer.daemon.definitions import CurrentCatalog
from placer.daemon.heap import Heap
from placer.daemon.metrics import Metrics
from placer.daemon.preempt import Preempter
from placer.daemon.quotas import HubQuotas
from placer.daemon.reconcile import Reconciler
from placer.daemon.spread import is_spread, share_create
from placer.daemon.state import DaemonConfig, ann_of
from placer.daemon.workbench import Workbench
from placer.definitions.interpret import Interpreter
from placer.inputs.priority import PriorityClasses, with_priorities
from placer.model.errors import InputError
from placer.model.names import PLACED_CLUSTER
from placer.model.workload import PlacementGroup, Workload, WorkloadRef

log = logging.getLogger("placer.daemon")

# how often a round forgets the interpretations not asked for since the sweep before: every
# round, a burst's staging object (read at arrival, in its round, at its create) and its copy
# (at its create, then at its first watch event) were forgotten between two reads of the same
# content, 34 rounds in a burst of 1,000: read again, 5 interpretations per workload, not 2
SWEEP_EVERY = 5.0


class Planner:
    """Given the book, both caches, the creator and the executor, and the reconciler only to
    read a staging object's workload the way it does (an invalid one annotated)."""

    def __init__(self, config: DaemonConfig, catalogs: CurrentCatalog, interpret: Interpreter, bench: Workbench,
                 reconciler: Reconciler, creator: Creator, metrics: Metrics, quotas: HubQuotas | None = None):
        self.config = config
        self.catalogs = catalogs
        self.interpret = interpret
        self.bench = bench
        self.reconciler = reconciler
        self.creator = creator
        self.metrics = metrics
        self.quotas = quotas                  # fleet-wide quotas in force, their use counted (issue 23)
        # issue 23: preemption carried out, when --preemption is not off
        self.preempter = Preempter(bench, config, interpret, metrics) if config.preemption != "off" else None
        self.memory = DC.Memory()             # what one round leaves the next (classes, capacity)
        self.swept = float("-inf")            # when a round last swept the interpretations
        self.warmed: int | None = None        # the term of leadership the memory was built in
        # the collector settled in idle time once the memory is built (`placer daemon`: daemon/heap.py)
        self.heap = Heap() if config.settle_heap else None

    def due(self) -> float | None:
        """When the next round is due: the batch window closing, or (for workloads already
        told they are unplaced) a fleet change or the retry interval."""
        book, due = self.bench.book, []
        if book.window_opened is not None:
            due.append(book.window_opened + self.config.batch_window)
        # asked every step: the pending are only looked through when a change or a retry is due
        if (book.fleet_changed is not None or book.retry_at is not None) and \
                any(p.message for p in book.pending.values()):
            if book.fleet_changed is not None:
                due.append(book.fleet_changed)
            if book.retry_at is not None:
                due.append(book.retry_at)
        return min(due) if due else None

    def plan_round(self) -> None:
        """A round of new arrivals only (nothing waiting unplaced is due: no capacity change
        since it was judged, no retry due) is placed against the committed plan with the
        last round's classes and capacity; when one of them does not fit, or something
        unplaced is due, every pending group is planned together by the full solve."""
        now = self.bench.clock.now()
        book = self.bench.book
        full = any(p.message for p in book.pending.values()) and (
            book.fleet_changed is not None or (book.retry_at is not None and now >= book.retry_at))
        book.window_opened = None
        pending = self.pending_groups()
        arrivals = [p for p in pending if not any(book.pending.get(r) and book.pending[r].message for r in p.members)]
        if full:
            book.fleet_changed = None
            book.retry_at = now + self.config.retry_interval
        if not pending or not (full or arrivals):
            return                                # what waits unplaced keeps its retry
        t0 = time.perf_counter()
        snap = self.with_quotas(self.bench.targets.snapshot())
        took = time.perf_counter() - t0
        if now >= self.swept + SWEEP_EVERY:
            self.swept = now
            self.interpret.sweep()
        plan_id = A.new_plan_id()
        decision = None if full else self.arrivals(snap, arrivals, plan_id)
        if decision is None:
            book.fleet_changed = None
            book.retry_at = now + self.config.retry_interval
            decision = DC.decide(snap, pending, now, plan_id=plan_id, time_limit=self.config.time_limit,
                                 workers=self.config.solver_workers, memory=self.memory)
            self.metrics.inc("placer_solves_total", labels={"round": "full"})
        else:
            self.metrics.inc("placer_solves_total", labels={"round": "arrivals"})
        self.metrics.observe("placer_solve_seconds", decision.seconds)
        if decision.error:
            log.error("planning failed: %s", decision.error)
        log.info("plan %s: %d of %d groups placed in %.3fs (%s; snapshot %.3fs, %d promised)", decision.plan_id,
                 len(decision.creates), decision.groups, decision.seconds,
                 decision.plan.summary.status if decision.plan else "failed", took, len(snap.committed))
        groups = {p.group.key: p.group for p in pending}
        spread = self.reconciler.spread
        for c in spread.claim(decision.creates):       # a spread's shares recorded before they start
            self.creator.start(c, spread.share_group(groups[c.group], c) if share_create(c) else groups[c.group],
                               decision.plan_id)
        self.bench.executor.perform(decision.unplaced)
        if self.preempter is not None:
            self.preempter.after_round(snap, pending, decision)

    def with_quotas(self, snap: DC.Snapshot) -> DC.Snapshot:
        """The snapshot with the quotas in force and what their placed work already uses."""
        quotas = self.quotas.quotas() if self.quotas is not None else None
        return dataclasses.replace(snap, fleet=dataclasses.replace(snap.fleet, quotas=quotas)) if quotas else snap

    def step(self, now: float, *, idle: bool, term: int) -> bool:
        """The leader's turn: a round when one is due, else (when the loop is idle) the memory
        warmed for this term of leadership, or the heap settled. True when it did something."""
        freed = self.preempter.step(now, term) if self.preempter is not None else False
        due = self.due()
        if due is not None and now >= due:
            self.plan_round()
            return True
        return freed or (idle and (self.warm(term) or self.settle(now, term)))

    def settle(self, now: float, term: int) -> bool:
        """In idle time, once the memory is built: the collector's turn. True when it did."""
        return self.heap is not None and self.heap.step(now, term)

    def prepared(self, term: int) -> bool:
        """The memory built, and the heap settled, in this term of leadership."""
        return self.warmed == term and (self.heap is None or self.heap.term == term)

    def stop(self) -> None:
        if self.heap is not None:
            self.heap.release()               # what was frozen goes back to the collector

    def warm(self, term: int) -> bool:
        """Once per term of leadership, while nothing is due: build the node classes and the
        capacity the first arrivals round reuses (a 20 x 500-node fleet takes a few tenths of
        a second, which the first arrivals would otherwise wait for). True when it did."""
        if self.warmed == term:
            return False
        self.warmed = term
        try:
            DC.warm(self.bench.targets.snapshot(), self.memory, by_name=self.steered())
        except Exception:                        # the first arrivals round builds them instead
            log.exception("preparing the node classes failed")
        return True

    def steered(self) -> bool:
        """Copies are steered to their planned nodes by name (`steer: required` or `pinned`,
        the default): each committed copy names its nodes, so the arrivals rounds keep each
        node its own class from the start, not classes built again once the first copy is
        committed (0.4 s at 20 x 500 nodes, in an arrival's round)."""
        return any(A.handoff_of(e).steer in HOLDS for e in self.creator.entries.values())

    def arrivals(self, snap: DC.Snapshot, arrivals: list[DC.PendingGroup], plan_id: str) -> DC.Decision | None:
        """New arrivals placed incrementally; None: the full solve decides."""
        if any(is_spread(w) for p in arrivals for w in p.group.workloads):
            # the incremental placement knows no spread (its shares and copies are tied by the
            # full model's constraints, placer.solve.spread): a round with one is a full solve
            return None
        try:
            return DC.decide_arrivals(snap, arrivals, self.memory, plan_id=plan_id, by_name=self.steered())
        except Exception:                        # a bug here must not stop planning: the full solve decides
            log.exception("placing arrivals incrementally failed; planning every pending group")
            self.memory.reuse = DC.Memory().reuse
            return None

    def pending_groups(self) -> list[DC.PendingGroup]:
        """Pending workloads as placement groups (by `placer.dev/group`), with their
        companions; a newcomer to a group already placed is pinned to the group's cluster."""
        by_group: dict[str, list[tuple[WorkloadRef, Workload]]] = {}
        pins: dict[str, str] = {}
        keep_off: dict[WorkloadRef, frozenset[str]] = {}       # a spread's clusters its lost shares avoid
        for ref in sorted(self.bench.book.pending):
            found = self.plannable(ref)
            if found is None:
                continue
            staging, w = found
            if is_spread(w) is not None:             # what is planned: the whole spread, or its lost shares
                planned = self.reconciler.spread.for_planning(ref, staging, w)
                if planned is None:
                    self.bench.book.pending.pop(ref, None)
                    continue
                w, keep_off[ref] = planned
            gk = self.bench.view.group_key(ref, staging)
            by_group.setdefault(gk, []).append((ref, w))
            for member, _ in self.bench.view.group_members(ref, staging):
                if member in self.bench.book.placed:
                    pins[gk] = self.bench.book.placed[member].cluster
        out = []
        classes = self.bench.view.priority_classes()
        for gk, items in by_group.items():
            g = self.as_group(gk, items, classes)
            if g is None:
                continue
            refs = tuple(r for r, _ in items)
            why = self.bench.book.exclusions(refs)
            for c in sorted(set().union(*(keep_off.get(r, frozenset()) for r in refs))):
                why.setdefault(c, "holds a copy of it, or lost one")
            out.append(DC.PendingGroup(A.planning_view(g, self.catalogs.current), refs, frozenset(why), pins.get(gk),
                                       tuple(why.items())))
        return out

    def plannable(self, ref: WorkloadRef) -> tuple[dict, Workload] | None:
        """A pending workload's staging object and workload, if this round may plan it; one
        deleted or placed meanwhile leaves the pending set."""
        staging = self.bench.view.staged(ref)
        if staging is None or (staging.get("metadata") or {}).get("deletionTimestamp") or ref in self.bench.book.placed:
            self.bench.book.pending.pop(ref, None)
            return None
        if self.bench.book.in_flight(ref):
            return None
        where = ann_of(staging).get(PLACED_CLUSTER)
        if where and where in self.bench.targets.caches and where not in self.bench.targets.usable():
            return None                           # its copy may be there: wait until that cluster is known
        w = self.reconciler.interpret_staging(ref, staging)
        return None if w is None else (staging, w)

    def as_group(self, gk: str, items: list[tuple[WorkloadRef, Workload]],
                 classes: PriorityClasses) -> PlacementGroup | None:
        g = PlacementGroup(gk, tuple(w for _, w in items), tuple(self.bench.view.companions_of(gk)))
        try:
            [g] = with_priorities([g], classes)
        except InputError as e:                 # an unknown class: unplaced, retried (it may be created)
            self.bench.executor.perform(DC.Unplace(ref, f"unplaced: {e.message}") for ref, _ in items)
            return None
        return g
