"""Preemption carried out by the daemon (issue 23 item 4; `--preemption`, default off).

After a full round that left something unplaced, the pure step (placer.solve.preemption)
picks at most one preemptor and its proven minimal victim set among the daemon's own
copies older than `--min-run-time`; this part carries it out, within `--preemption-rate`
victims per minute (fleet-wide, a sliding minute):

1. the preemptor's capacity is reserved: its group counts as a create in flight on the
   chosen cluster (`Book.creating`: committed demand every round plans around, its quota
   use counted), so no third workload takes what the victims free, and no round plans it;
2. each victim workload (every member of a victim group) goes back to pending: its copy is
   deleted (a fenced write on its cluster's queue), its staging object keeps its spec and
   gets `placer.dev/phase: Pending`, the message, a `Preempted=True` condition (reason
   `WithinQuota`, `Reclaim` or `Priority`; where its status keeps conditions), and a
   Warning Event `Preempted` naming the preemptor and the rule; it is
   then planned like any arrival (never excluded from its cluster);
3. the preemptor gets a Normal Event `Preempting` naming its victims;
4. once every victim's copy and bound pods are gone from the caches, the reservation ends
   and a full round is due: the preemptor is planned (first, by its priority) on what its
   victims left. Until then it is never created.

Nothing here lives only in memory that a restart needs: a daemon killed mid-way restarts
with the victims pending (their staging objects say so, or their copies are gone and
`copy_gone` says so) or still placed (their copies are adopted), and the preemptor pending.
Every write goes through the fenced clients, and only the leader plans: two daemons never
preempt twice.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from placer import actuate as A
from placer.daemon import decide as DC
from placer.daemon.actions import Annotate, Condition, Delete, Record
from placer.daemon.caches import TERMINAL, selects_pods_of
from placer.daemon.events import NORMAL, WARNING
from placer.daemon.metrics import Metrics
from placer.daemon.spread import is_spread
from placer.daemon.state import Creating, DaemonConfig, Pending, ann_of
from placer.daemon.workbench import Workbench
from placer.definitions.interpret import Interpreter
from placer.inputs.priority import with_priorities
from placer.model.errors import PlacerError
from placer.model.names import ANN_MESSAGE, ANN_PHASE, PLACED_CLUSTER
from placer.model.podspec import pod_requests
from placer.model.workload import Phase, PlacementGroup, Workload, WorkloadRef
from placer.solve.policy import group_policy
from placer.solve.preemption import Eligible, Preemption, preemptions

log = logging.getLogger("placer.daemon")

PREEMPTED, PREEMPTING = "Preempted", "Preempting"
WINDOW = 60.0                      # the rate limit's window, seconds
RESERVE_FOR = 300.0                # a reservation whose victims' pods never go ends after this long
RULE_REASONS = {"within-quota": "WithinQuota", "reclaim": "Reclaim", "priority": "Priority"}   # the condition's


@dataclass
class InFlight:
    """A preemption carried out, its preemptor waiting for the victims' pods to go."""

    preemption: Preemption
    members: tuple[WorkloadRef, ...]
    victims: tuple[tuple[WorkloadRef, str, Workload], ...]      # (ref, cluster, workload)
    since: float


@dataclass(eq=False)
class Preempter:
    bench: Workbench
    config: DaemonConfig
    interpret: Interpreter
    metrics: Metrics
    in_flight: dict[str, InFlight] = field(default_factory=dict)
    recent: deque = field(default_factory=deque)                # when each recent victim was preempted
    _members: dict[str, list[tuple[WorkloadRef, Workload]]] = field(default_factory=dict)   # of the eligible
    term: int | None = None                                     # of leadership, the reservations were made in

    # --- after a round -------------------------------------------------------------------

    def after_round(self, snap: DC.Snapshot, pending: list[DC.PendingGroup], decision: DC.Decision) -> None:
        """Decide and carry out at most one preemption for what `decision` left unplaced."""
        plan = decision.plan
        if self.in_flight or plan is None or not plan.unplaced:
            return                                # one at a time: the next round sees the fleet after it
        now = self.bench.clock.now()
        if self.draining():                       # capacity is still being freed: see it first
            self._retry_at(now + 1.0)
            return
        eligible, young = self.eligible(now)
        groups = [DC.with_policy(p) for p in pending]
        got: tuple[Preemption, ...] = ()
        if eligible:
            try:
                got = preemptions(snap.fleet, groups, plan, self.config.preemption, eligible,
                                  committed=snap.committed, deadline=time.monotonic() + self.config.time_limit)
            except Exception:                     # a bug here must not stop planning
                log.exception("deciding a preemption failed")
                return
        if not got:
            if young:                             # a victim may become old enough: look again then
                self._retry_at(min(young))
            return
        p = got[0]
        members = {e.key: e for e in eligible}
        victims = [(ref, members[k].cluster, w) for k in p.victims for ref, w in self._members[k]]
        self._trim(now)
        if len(self.recent) + len(victims) > self.config.preemption_rate:
            log.info("preemption for %s waits: %d preemptions in the last minute (limit %d)", p.preemptor,
                     len(self.recent), self.config.preemption_rate)
            self._retry_at((self.recent[0] if self.recent else now) + WINDOW)
            return
        pg = next(x for x in pending if x.group.key == p.preemptor)
        self.carry_out(p, pg, victims, now)

    def eligible(self, now: float) -> tuple[list[Eligible], list[float]]:
        """Placed groups whose every member is placer's placed copy, older than the minimum
        run time (and, for the others, when they will be)."""
        book, view = self.bench.book, self.bench.view
        by_group: dict[str, list[tuple[WorkloadRef, str, float, Workload]]] = {}
        for ref, remote in list(book.placed.items()):
            staging = view.staged(ref)
            if staging is None or (staging.get("metadata") or {}).get("deletionTimestamp") \
                    or book.in_flight(ref) or (remote.cluster, ref) in book.deleting \
                    or ann_of(staging).get(ANN_PHASE) in DC.FINISHED:
                continue                          # gone, moving, or finished (it holds nothing)
            try:
                w = self.interpret(staging, str(ref))
                if is_spread(w):
                    continue
            except PlacerError:
                continue
            by_group.setdefault(view.group_key(ref, staging), []).append((ref, remote.cluster, remote.placed_at, w))
        out, young = [], []
        self._members = {}
        classes = view.priority_classes()
        for gk, items in sorted(by_group.items()):
            if len({c for _, c, _, _ in items}) != 1:
                continue
            placed_at = max(t for _, _, t, _ in items)
            if now - placed_at < self.config.min_run_time:
                young.append(placed_at + self.config.min_run_time)
                continue
            try:
                [g] = with_priorities([PlacementGroup(gk, tuple(w for *_, w in items))], classes)
            except PlacerError:
                continue
            cluster = items[0][1]
            self._members[gk] = [(ref, w) for ref, _, _, w in items]
            out.append(Eligible(gk, g, cluster, group_policy(g).priority, placed_at,
                                self._frees(cluster, [w for *_, w in items]),
                                promises=tuple(f"promised:{cluster}/{ref}" for ref, *_ in items)))
        return out, young

    def _frees(self, cluster: str, workloads: list[Workload]) -> dict[str, dict[str, int]]:
        """node -> what the workloads' bound pods request there (from the pod cache)."""
        out: dict[str, dict[str, int]] = {}
        cache = self.bench.targets.caches.get(cluster)
        if cache is None:
            return out
        for w in workloads:
            for pod in self._pods(cache, w):
                spec = pod.get("spec") or {}
                slot = out.setdefault(spec["nodeName"], {})
                for r, v in {**pod_requests(spec), "pods": 1}.items():
                    slot[r] = slot.get(r, 0) + v
        return out

    @staticmethod
    def _pods(cache: Any, w: Workload) -> list[dict]:
        """The workload's bound pods that still hold their node (not Succeeded or Failed)."""
        mine = selects_pods_of(w)
        return [p for p in cache.pods_in(w.namespace)
                if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("phase") not in TERMINAL
                and mine((p.get("metadata") or {}).get("labels") or {})]

    def draining(self) -> bool:
        """Bound pods of placer's copies that are gone (a preemption, a withdrawal or a delete
        under way, perhaps by an earlier leader) still hold capacity on some cluster: what
        they free is not seen yet, and a preemption now could take more than it needs. Read
        from the caches, so a restarted or new leader sees it too."""
        for cache in self.bench.targets.caches.values():
            have = {((o.get("metadata") or {}).get("labels") or {}).get(A.WORKLOAD)
                    for inf in cache.copies.values() for o in inf.items()}
            for p in cache.pods_in(self.config.staging_namespace):
                tag = ((p.get("metadata") or {}).get("labels") or {}).get(A.WORKLOAD)
                if tag and tag not in have and (p.get("spec") or {}).get("nodeName") \
                        and (p.get("status") or {}).get("phase") not in TERMINAL:
                    return True
        return False

    # --- carrying it out -----------------------------------------------------------------------

    def carry_out(self, p: Preemption, pg: DC.PendingGroup, victims: list[tuple[WorkloadRef, str, Workload]],
                  now: float) -> None:
        book, ex = self.bench.book, self.bench.executor
        for ref in pg.members:                    # the reservation: committed demand on p.cluster
            book.creating[ref] = Creating(p.cluster, pg.group, pg.members)
        names = ", ".join(str(ref) for ref, _, _ in victims)
        for ref, cluster, _ in victims:
            text = (f"preempted by {p.preemptor} (priority {p.priority}) on {cluster}, rule {p.rule}: "
                    f"{p.reason}; placing it again")[:1000]
            ex.perform([Delete(cluster, ref, f"preempted by {p.preemptor} ({p.rule})")])
            book.placed.pop(ref, None)
            book.pending[ref] = Pending(now)
            try:
                ex.perform([Record(ref, WARNING, PREEMPTED, text),
                            Condition(ref, True, RULE_REASONS[p.rule], text, type_=PREEMPTED),
                            Annotate(ref, {PLACED_CLUSTER: None, ANN_PHASE: Phase.PENDING.value, ANN_MESSAGE: text},
                                     finalizer=True)])
            except PlacerError as e:              # the copy is going: the reconciler says it next
                ex.on_error("hub", e)
            self.recent.append(now)
            self.metrics.inc("placer_preemptions_total", labels={"policy": self.config.preemption})
        waiting = f"preempting {names} on {p.cluster} ({p.rule}); created once their pods are gone"
        for ref in pg.members:
            try:
                ex.perform([Record(ref, NORMAL, PREEMPTING, waiting), Annotate(ref, {ANN_MESSAGE: waiting[:1000]})])
            except PlacerError as e:
                ex.on_error("hub", e)
        self.in_flight[p.preemptor] = InFlight(p, pg.members, tuple(victims), now)
        book.open_window(now)                     # the victims are planned again like arrivals
        log.info("preemption (%s): %s", self.config.preemption, p.reason)

    # --- every pass ---------------------------------------------------------------------------

    def step(self, now: float, term: int | None = None) -> bool:
        """The reservations whose victims are gone end, and a full round is due. True when one did.
        A new term of leadership (`term`) starts with none: leadership was lost meanwhile."""
        if term != self.term:
            self.forget()
            self.term = term
        done = [k for k, f in self.in_flight.items() if self._gone(f) or now - f.since >= RESERVE_FOR]
        for key in done:
            f = self.in_flight.pop(key)
            for ref in f.members:
                c = self.bench.book.creating.get(ref)
                if c is not None and c.group.key == key:
                    self.bench.book.creating.pop(ref, None)
                pending = self.bench.book.pending.get(ref)
                if pending is not None and not pending.message:
                    pending.message = "waiting for the capacity its preemption freed"
            log.info("preemption for %s: the victims are gone; planning it", key)
            self.bench.book.fleet_changed = now
        return bool(done)

    def _gone(self, f: InFlight) -> bool:
        for ref, cluster, w in f.victims:
            cache = self.bench.targets.caches.get(cluster)
            if cache is None:
                continue
            gvk = self.bench.view.gvk_of(ref)
            if (cluster, ref) in self.bench.book.deleting or (gvk and cache.copy(gvk, ref.namespace, ref.name)):
                return False
            if self._pods(cache, w):
                return False
        return True

    def forget(self) -> None:
        """Leadership lost: the reservations end (the next leader, this one again or another,
        decides again, and waits for what is still being freed: `draining`)."""
        for key, f in self.in_flight.items():
            for ref in f.members:
                c = self.bench.book.creating.get(ref)
                if c is not None and c.group.key == key:
                    self.bench.book.creating.pop(ref, None)
        self.in_flight.clear()

    def _trim(self, now: float) -> None:
        while self.recent and now - self.recent[0] >= WINDOW:
            self.recent.popleft()

    def _retry_at(self, when: float) -> None:
        book = self.bench.book
        book.retry_at = min(book.retry_at, when) if book.retry_at is not None else when

