"""`placer daemon`: place what arrives in the hub's staging namespace, keep it placed,
report back, clean up.

Shape (Kueue's, in Python):
- caches fed by watches (`caches.ClusterCache` per target: nodes, pods, RuntimeClasses,
  placer's copies; informers on the hub for staging objects, companions and priority
  classes); their threads only fill caches and report keys;
- one reconcile thread takes keys from a delaying work queue and compares a staging
  object with its copy (`reconcile.Reconciler`), and runs planning rounds
  (`planning.Planner`): a frozen snapshot of the caches -> the pure `decide` -> actions
  as data (`actions`);
- the executor (`executor.Executor`, `creates.Creator`) performs them: hub writes through
  `staging.HubWriter`, target writes on one work queue per cluster
  (`execute.ClusterWorkers`), so a hung or refusing cluster slows only its own work;
  results come back through the inbox;
- a Lease renewed on its own thread (`leadership`) makes exactly one daemon act, and
  every write is fenced by it.

The daemon owns these parts and hands each only what it uses (constructor injection, as
Kueue's scheduler composes queues, cache, client and recorder); the one state they share
is the book of placed, pending and in-flight workloads (`state.Book`).

Restart safety: nothing lives only in memory. Where a workload runs is read back from the
copies on the clusters (labels and annotations), so a daemon killed between creating a copy
and annotating the staging object adopts that copy instead of creating a second one.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from datetime import datetime, timezone

from placer.daemon.caches import ClusterCache
from placer.daemon.clock import Clock, TimeSource
from placer.daemon.creates import Creator
from placer.daemon.definitions import CurrentCatalog, FleetDefinitions
from placer.daemon.events import Recorder
from placer.daemon.execute import ClusterWorkers, fenced_client
from placer.daemon.executor import Executor
from placer.daemon.health import Degradation, TargetHealth
from placer.daemon.hub import Notices, controllers_on_hub
from placer.daemon.informer import Informer, WorkQueue
from placer.daemon.leadership import LeaderElector
from placer.daemon.messages import Applied, Checked, Created, Deleted, FleetChanged, Message, Recovered, Swept, Touched
from placer.daemon.metrics import Metrics, MetricsServer
from placer.daemon.overlap import Overlap
from placer.daemon.pin import Pinner
from placer.daemon.planning import Planner
from placer.daemon.quotas import HubQuotas
from placer.daemon.reconcile import Reconciler
from placer.daemon.reschedule import Rescheduler
from placer.daemon.spread import SpreadKeeper
from placer.daemon.staging import HubWriter
from placer.daemon.state import GVK, ApiErrors, Book, Creating, DaemonConfig
from placer.daemon.sweep import Sweeper
from placer.daemon.targets import Targets
from placer.daemon.view import StagingView
from placer.daemon.watches import Callbacks, Relist, Watches
from placer.daemon.workbench import Workbench
from placer.definitions.catalog import Catalog
from placer.definitions.interpret import Interpreter
from placer.inputs.clusters_file import as_entry
from placer.kube import Kube
from placer.model.errors import PlacerError
from placer.model.workload import WorkloadRef

log = logging.getLogger("placer.daemon")
STOP_WAIT = 60.0            # seconds stop() waits for the reconcile thread to finish its step


class Daemon:
    """The daemon. `start()` runs it in threads; `stop()` ends it. Tests may instead call
    `step()` themselves, and `wait_idle()` waits until nothing is left to do."""

    def __init__(self, config: DaemonConfig, kube: Kube, catalog: Catalog, *,
                 clock: TimeSource | None = None, metrics: Metrics | None = None,
                 definitions: FleetDefinitions | None = None):     # re-read on each discovery poll
        self.config = config
        self.catalogs = CurrentCatalog(catalog)     # one holder: every part reads .current
        self.interpret = Interpreter(self.catalogs)  # remembers interpretations of unchanged objects
        self.clock: TimeSource = clock or Clock()
        self.metrics = metrics or Metrics()
        self.api_error = ApiErrors(self.metrics)
        self.entries = {e.name: e for e in map(as_entry, config.clusters) if e.context}
        hub = kube.client(config.hub_context, cluster="hub")
        lease_client = fenced_client(hub, None, config.timeout)      # bounded, not fenced
        self.hub_reader = lease_client
        self.notices = Notices()                  # what the operator is told once, not every retry
        self.leader = LeaderElector(lease_client, config.staging_namespace, config.lease_name, config.identity,
                                    clock=self.clock.now, timing=config.lease,
                                    on_error=lambda e: self.api_error("hub", e), notices=self.notices)
        self.hub = fenced_client(hub, self.leader, config.timeout)
        # Events on staging objects: what `kubectl describe` shows users on the hub
        self.events = Recorder(self.hub, lambda: datetime.fromtimestamp(self.clock.wall(), timezone.utc),
                               config.identity)
        self.queue = WorkQueue()
        self.inbox: queue.SimpleQueue[Message] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._capacity = threading.Event()
        self._busy = threading.Lock()
        self._thread: threading.Thread | None = None
        self._last_loop = self.clock.now()
        self._was_leader = False
        self._next_resync = 0.0
        self.book = Book()
        self.view = StagingView(config.hub_context)
        self.targets = Targets(self.view, self.book, self.interpret)
        self.workers = ClusterWorkers(list(self.entries), self._stop)
        self.health = TargetHealth(config.deadline, self._stop, interval=config.watch_retry)
        self.targets_health = Degradation(self.health, self.targets, config, self.inbox, self._wake,
                                          self._on_capacity)
        self.watches = Watches(config, kube, self.catalogs, self.entries, hub, self.leader, self.view, self.targets,
                               self._stop, Callbacks(self._on_staging, self._on_copy, self._on_capacity,
                                                     self.targets_health.target_failed, self.api_error),
                               definitions=definitions, health=self.health)
        self.overlap, self.retries = Overlap(), Retries(self.queue, self.clock, self.api_error)   # per pass; backoff
        self.relist = Relist(self.targets, self.leader, self.api_error, self._wake, self.health.degraded,
                             self.targets_health.patience)
        self._compose()

    def _compose(self) -> None:
        """The parts that act, each given what it uses."""
        self.writer = HubWriter(self.hub, self.view, self.events, self.clock, self.api_error)
        self.executor = Executor(self.writer, self.view, self.targets, self.book, self.workers, self.inbox,
                                 self.queue, self.clock, self.api_error, self.overlap)
        bench = Workbench(self.book, self.view, self.targets, self.executor, self.queue, self.clock)
        self.creator = Creator(bench, self.entries, self.catalogs, self.interpret, self.metrics, self.health.degraded)
        self.pinner = Pinner(self.targets, self.entries, self.interpret, self.workers.submit, self.api_error)
        self.sweeper = Sweeper(bench, self.inbox)
        self.rescheduler = Rescheduler(bench, self.config.reschedule_after, tuple(self.entries), self.metrics)
        # a cluster failing this long has its spread shares placed elsewhere (the failure window)
        self.spread = SpreadKeeper(bench, self.entries, self.interpret, max(2.0, 2 * self.config.watch_retry + 1))
        self.reconciler = Reconciler(bench, self.config, self.entries, self.catalogs, self.interpret, self.writer,
                                     self.rescheduler, self.workers, self.spread, self.notices,
                                     write_failed=self.retries.failed)
        self.quotas = HubQuotas(self.config.quotas, self.view, self.book, self.targets, self.interpret, self.events)
        self.planner = Planner(self.config, self.catalogs, self.interpret, bench, self.reconciler, self.creator,
                               self.metrics, self.quotas)

    # --- what tests and tools read ------------------------------------------------------

    @property
    def catalog(self) -> Catalog:               # the one serving now
        return self.catalogs.current

    @property
    def caches(self) -> dict[str, ClusterCache]:
        return self.targets.caches

    @property
    def creating(self) -> dict[WorkloadRef, Creating]:
        return self.book.creating

    # --- lifecycle --------------------------------------------------------------------

    def start_watches(self) -> None:
        """Discover the kinds and start every informer (idempotent)."""
        if self.watches.start():
            self.workers.start()

    def start(self, metrics_addr: str | None = None) -> "Daemon":
        if metrics_addr:        # first: a busy port is an input error, before any watch starts
            self.server = MetricsServer(self.metrics, metrics_addr, self.healthy).start()
            log.info("serving /metrics and /healthz on %s", self.server.address)
        self.start_watches()
        self.say_hub_shape()
        self.leader.start()
        self._thread = threading.Thread(target=self._run, name="placer-daemon", daemon=True)
        self._thread.start()
        return self

    def stop(self, release: bool = True) -> str:
        """Stop acting; give the lease up (`release=False` simulates a crash). Returns what
        became of the lease, in words."""
        self._stop.set()
        self._wake.set()
        self.leader.stop()
        if self._thread:
            # a step ends within its requests' deadlines; a loaded machine can stretch it well past
            # 10 s, and a thread left running would act (and log) after stop() returned
            self._thread.join(timeout=STOP_WAIT)
            if self._thread.is_alive():
                log.warning("the reconcile thread is still in a step after %.0f s; stopping without it", STOP_WAIT)
        self.workers.stop()
        self.overlap.stop()
        self.planner.stop()
        outcome = self.leader.release() if release else "lease kept"
        if server := getattr(self, "server", None):
            server.stop()
        return outcome

    def say_hub_shape(self) -> bool | None:
        """One line at start: whether the hub runs a kube-controller-manager (whose workload
        controllers would run what is staged there). A warning, not a refusal: a hub may
        run one without workload controllers (Karmada's), and pods they make are never
        placed anyway (docs/deploy.md#the-hub)."""
        known, line = controllers_on_hub(self.hub_reader)
        (log.warning if known is not False else log.info)("%s", line)
        return known

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                did = self.step()
            except Exception:                        # the loop must survive a bug in one step
                log.exception("reconcile step failed")
                did = False
            self._last_loop = self.clock.now()
            if not did:
                self._wake.wait(self._idle_wait())
                self._wake.clear()

    def _idle_wait(self) -> float:
        now = self.clock.now()
        due = [t for t in (self.queue.next_due(), self.planner.due(), self._next_resync) if t is not None]
        return min(0.25, max(0.005, min(due, default=now + 0.25) - now))

    def healthy(self) -> tuple[bool, str]:
        if self._thread is not None and not self._thread.is_alive():
            return False, "reconcile loop stopped"
        stale = self.clock.now() - self._last_loop
        if stale > 60:
            return False, f"reconcile loop stuck for {stale:.0f}s"
        role = "leader" if self.leader.is_leader else "standby"
        return True, f"ok ({role})" + (f"; {d}" if (d := self.health.summary()) else "")   # 200: it works elsewhere

    # --- informer callbacks (informer threads) ----------------------------------------

    def _on_staging(self, inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
        self.inbox.put(Touched(self.view.ref_of(inf.gvk, *key)))
        self._wake.set()

    def _on_copy(self, cluster: str, gvk: GVK, key: tuple[str, str]) -> None:
        if key[0] == self.config.staging_namespace:
            self.inbox.put(Touched(self.view.ref_of(gvk, *key)))
            self._wake.set()

    def _on_capacity(self) -> None:
        if not self._capacity.is_set():          # coalesced: pods and nodes change all the time
            self._capacity.set()
            self.inbox.put(FleetChanged())
            self._wake.set()

    # --- the loop ---------------------------------------------------------------------

    def step(self) -> bool:
        """One pass: events, results, due keys, planning. True when it did work."""
        with self._busy:
            if self.leader._thread is None:
                self.leader.tick()                   # driven by hand (tests): renew here
            now = self.clock.now()
            leader = self.leader.is_leader
            self.metrics.set("placer_leader", 1 if leader else 0)
            with self.overlap.batch():               # each phase's hub writes answered before the next
                did = self._drain_inbox(now, leader)
            self.targets_health.watch_first_lists()
            if not leader:
                self._was_leader = False
                self.targets.resynced.clear()
                return did
            if not self.watches.synced():
                return did
            if not self._was_leader:
                # a new leader trusts nothing it did not read: relist the copies, recheck everything
                self._was_leader = True
                self.relist.start()
                self._enqueue_all(now)
            elif len(self.targets.resynced) < len(self.caches):
                self.relist.start()
            if now >= self._next_resync:
                self._next_resync = now + self.config.resync_interval
                self._enqueue_all(now, over=self.config.resync_interval / 2)
                self.interpret.sweep()           # bounded even when no round reads the fleet
            self.spread.tick(now)
            keys = self.queue.pop_due(now)
            with self.overlap.batch():
                for key in keys:
                    if not self.leader.is_leader:
                        break                        # lost it: stop acting at once
                    self._reconcile_safely(key)
            did = did or bool(keys)
            did = self.pinner.tick() or did          # gated pods of pinned copies (issue 22)
            if self.leader.is_leader and self.relist.done():
                did = self.planner.step(self.clock.now(), idle=not did, term=self.leader.acquired) or did
                self.quotas.refresh(self.hub, self.api_error, did, self.config.resync_interval, self._on_capacity)
            update_gauges(self.metrics, len(self.queue), self.book, self.interpret)
            self.metrics.set("placer_degraded_clusters", len(self.health.names()))
            return did

    def _drain_inbox(self, now: float, leader: bool) -> bool:
        did = False
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return did
            did = True
            match item:
                case FleetChanged():
                    self._capacity.clear()
                    if self.book.fleet_changed is None:
                        self.book.fleet_changed = now
                case Touched(ref):
                    self.queue.add(ref, now)
                case _:
                    try:
                        self._result(item)
                    except PlacerError as e:         # e.g. fenced: this daemon lost the lease meanwhile
                        self.api_error(e.cluster or "hub", e)
                        log.warning("recording a result failed: %s", e)

    def _result(self, item: Message) -> None:
        """A job's result from a cluster's queue (applied even by a daemon that just lost
        the lease: it only records what happened)."""
        match item:
            case Created(create, result):
                self.creator.created(create, result)
            case Checked(ref, cluster, found):
                self.reconciler.copy_checked(ref, cluster, found)
            case Applied(ref, cluster, result, why, type_, reason):
                self.executor.applied(ref, cluster, result, why, type_, reason)
            case Deleted(ref, cluster, result, why):
                self.executor.deleted(ref, cluster, result, why)
            case Recovered() | Swept():
                self.sweeper.receive(item)

    def _enqueue_all(self, now: float, over: float = 0.0) -> None:
        """Every staging object and copy to reconcile: now (a new leader), or spread `over` seconds."""
        refs = every_ref(self.view, self.caches, self.config.staging_namespace)
        for ref, at in zip(refs, resync_times(now, len(refs), over)):
            self.queue.add(ref, at)

    def wait_idle(self, timeout: float = 30.0, settle: float = 0.05) -> bool:
        """Until every informer has synced, the inbox is empty, no cluster queue has work,
        nothing is due and no planning window is open (delayed retries do not count)."""
        deadline = time.monotonic() + timeout
        quiet_since = None
        while time.monotonic() < deadline:
            if self._idle_now():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= settle:
                    return True
            else:
                quiet_since = None
            time.sleep(0.01)
        return False

    def _idle_now(self) -> bool:
        if not self.watches.tried() or not self.inbox.empty() or not self.watches.quiet() or not self.workers.idle():
            return False
        with self._busy:
            if not self.inbox.empty() or not self.workers.idle():
                return False
            if not self.leader.is_leader:
                return self.leader.attempted.is_set()    # a standby (or not yet tried) has nothing to do
            if not self.relist.done() or not self.planner.prepared(self.leader.acquired):
                return False
            now = self.clock.now()
            if self.queue.due_count(now):
                return False
            due = self.planner.due()
            return due is None or due > now + 0.5

    def _reconcile_safely(self, ref: WorkloadRef) -> None:
        try:
            self.reconciler.reconcile(ref)
            self.retries.ok(ref)
        except PlacerError as e:
            self.retries.failed(ref, e)


class Retries:
    """Workloads whose reconcile failed, looked at again with backoff; a reconcile's hub
    write may fail after the reconcile returned (its pass ends later: daemon/overlap.py)."""

    def __init__(self, queue: WorkQueue, clock: TimeSource, api_error: ApiErrors):
        self.queue, self.clock, self.api_error = queue, clock, api_error
        self._failed: dict[WorkloadRef, float] = {}

    def ok(self, ref: WorkloadRef) -> None:
        self._failed.pop(ref, None)

    def failed(self, ref: WorkloadRef, e: PlacerError) -> None:
        self.api_error(e.cluster or "hub", e)
        delay = min(30.0, 2 * self._failed.get(ref, 0.25))
        self._failed[ref] = delay
        log.warning("%s: %s; retrying in %.1fs", ref, e, delay)
        self.queue.add(ref, self.clock.now() + delay)




RESYNC_GAP = 0.002          # seconds between two keys of a resync: a reconcile from the caches takes under 1 ms


def every_ref(view: StagingView, caches: dict[str, ClusterCache], namespace: str) -> list[WorkloadRef]:
    """Every staging object, and every copy in the staging namespace on a target, once each."""
    refs = dict.fromkeys(view.refs())
    for cache in caches.values():
        for gvk, inf in cache.copies.items():
            for obj in inf.items():
                meta = obj.get("metadata") or {}
                if meta.get("namespace") == namespace:
                    refs.setdefault(view.ref_of(gvk, meta["namespace"], meta.get("name") or ""))
    return list(refs)


def resync_times(now: float, n: int, over: float) -> list[float]:
    """When each of a resync's n keys is due: RESYNC_GAP apart, all within `over`. The loop
    then re-checks a few in each pass, and an arrival (its key, its round) waits behind those
    few, not behind all of them (1,200 placed workloads took 0.76 s CPU in one pass)."""
    gap = min(RESYNC_GAP, over / n) if n else 0.0
    return [now + i * gap for i in range(n)]


def update_gauges(metrics: Metrics, queued: int, book: Book, interpret: Interpreter) -> None:
    metrics.set("placer_queue_depth", queued + len(book.pending))
    metrics.set("placer_unplaced", sum(1 for p in book.pending.values() if p.message))
    metrics.set("placer_placed", len(book.placed))
    metrics.set("placer_interpretations_total", interpret.misses, labels={"result": "computed"})
    metrics.set("placer_interpretations_total", interpret.hits, labels={"result": "remembered"})


__all__ = ["Daemon", "DaemonConfig"]
