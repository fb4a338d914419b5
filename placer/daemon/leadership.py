"""Leader election with a `coordination.k8s.io/v1` Lease, the way client-go does it,
renewed on its own thread, and the fence every write of the daemon goes through.

Clocks of different machines are never compared: a candidate notes (on its own clock)
when it last saw the Lease record change, and takes the Lease over only when the record
has stayed unchanged for a whole lease duration. Every write carries the resourceVersion
it read, so two candidates racing for an expired Lease cannot both win.

Fencing: the holder counts its lease from the moment it *started* its last successful
renewal; it acts while that is less than `renew_deadline` ago, and a write is issued only
if it can end (its own time bound, `fence(margin)`) before another candidate could take
the Lease over (`duration` after that renewal, less a little for clock rates). So every
write of an old leader ends before any other daemon can have acquired the Lease, however
long its rounds take and however slow its targets are.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from placer.daemon.hub import Notices
from placer.kube import KubeClient
from placer.model.errors import Conflict, KubeError, NotFound, PlacerError

LEASE_API = "coordination.k8s.io/v1"
log = logging.getLogger("placer.daemon")


@dataclass(frozen=True)
class LeaseTiming:
    duration: float = 15.0          # a holder silent this long has lost the lease
    renew_deadline: float = 10.0    # a leader that could not renew for this long steps down
    retry_period: float = 2.0       # how often to renew / try to acquire

    def __post_init__(self):
        if not 0 < self.retry_period < self.renew_deadline < self.duration:
            raise ValueError("lease timing needs retry_period < renew_deadline < duration")


def _micro_time(now: datetime | None = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NotLeader(KubeError):
    """A write refused by the fence: this daemon does not hold the lease long enough."""


class LeaderElector:
    """`start()` renews on a thread of its own (or call `tick()`); `is_leader` says
    whether to act, `fence(margin)` guards each write."""

    def __init__(self, client: KubeClient, namespace: str, name: str, identity: str, *,
                 clock: Callable[[], float], timing: LeaseTiming = LeaseTiming(),
                 on_error: Callable[[PlacerError], None] | None = None, notices: Notices | None = None):
        self.client = client
        self.notices = notices or Notices()          # a failure said once, not every retry
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.clock = clock
        self.timing = timing
        self.on_error = on_error or (lambda e: None)
        self._resource: Any = None
        self._observed: tuple | None = None      # (holder, renewTime, transitions) last seen
        self._observed_at = 0.0                  # our clock when that record was first seen
        self._renewed_at: float | None = None    # our clock at our last successful write
        self._next_try = 0.0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.on_change: Callable[[bool], None] = lambda leading: None
        self.acquired = 0                        # how many times this daemon became leader
        self.attempted = threading.Event()       # a first try was made (leading, standing by, or failed)

    @property
    def is_leader(self) -> bool:
        return self.holds(self.clock())

    def holds(self, now: float, margin: float = 0.0) -> bool:
        """Whether the lease is ours from `now` until at least `now + margin`."""
        renewed = self._renewed_at
        return renewed is not None and now + margin < renewed + self.timing.renew_deadline

    def safe_until(self) -> float | None:
        """Until when (our clock) no other daemon can have taken the lease over: another
        candidate waits a whole `duration` from the moment it saw our last record, which we
        wrote after `_renewed_at`; half of `duration - renew_deadline` is kept back for
        clocks that run at slightly different rates."""
        renewed = self._renewed_at
        if renewed is None or self.clock() - renewed >= self.timing.renew_deadline:
            return None                          # stepped down: acts no more
        slack = (self.timing.duration - self.timing.renew_deadline) / 2
        return renewed + self.timing.duration - slack

    def fence(self, margin: float) -> None:
        """Raise NotLeader unless a write started now, taking at most `margin` seconds, ends
        before any other daemon can hold the lease."""
        until = self.safe_until()
        if until is None or self.clock() + margin >= until:
            raise NotLeader(f"not the leader (lease {self.namespace}/{self.name} not held for {margin:.1f}s more)",
                            cluster="hub")

    def start(self) -> "LeaderElector":
        self._thread = threading.Thread(target=self._run, name="placer-lease", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:                    # the renewal thread must outlive a bug
                log.exception("leader election failed")
            self._stop.wait(max(0.01, min(self.timing.retry_period, self._next_try - self.clock())))

    def next_due(self) -> float:
        return self._next_try

    def tick(self) -> bool:
        """Acquire or renew when due; returns `is_leader`."""
        with self._lock:
            now = self.clock()
            if now >= self._next_try and not self._stop.is_set():
                self._next_try = now + self.timing.retry_period
                was = self.is_leader
                try:
                    if self._try_acquire_or_renew(now):
                        self._renewed_at = now          # counted from before the write: conservative
                    self.notices.clear("lease", f"leader election: lease {self.namespace}/{self.name} "
                                                "can be written again")
                except PlacerError as e:
                    self.on_error(e)
                    self.notices.warn("lease", f"leader election: {e.message}")
                leading = self.is_leader
                self.attempted.set()
                if leading and not was:
                    self.acquired += 1
                if leading != was:
                    self.on_change(leading)
            return self.is_leader

    def _lease(self):
        if self._resource is None:
            self._resource = self.client.resource_for(LEASE_API, "Lease")
        return self._resource

    def _try_acquire_or_renew(self, now: float) -> bool:
        res = self._lease()
        try:
            lease = self.client.get(res, self.name, self.namespace)
        except NotFound:
            return self._create(res)
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity") or "", spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        holder = record[0]
        held_by_other = holder and holder != self.identity
        if held_by_other and now - self._observed_at < self.timing.duration:
            self._renewed_at = None
            return False
        stamp = _micro_time()
        new_spec = {"holderIdentity": self.identity, "renewTime": stamp,
                    "leaseDurationSeconds": int(round(self.timing.duration))}
        if holder != self.identity:
            new_spec["acquireTime"] = stamp
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        patch = {"metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]}, "spec": new_spec}
        try:
            self.client.patch(res, self.name, patch, self.namespace)
        except Conflict:
            return False
        if holder != self.identity:
            log.info("became leader (lease %s/%s, previous holder %r)", self.namespace, self.name, holder)
        return True

    def _create(self, res) -> bool:
        stamp = _micro_time()
        body = {"apiVersion": LEASE_API, "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(round(self.timing.duration)),
                         "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}}
        try:
            self.client.create(res, body, self.namespace)
        except Conflict:
            return False
        except NotFound as e:        # the one thing a Lease create can miss: its namespace
            raise NotFound(f"the staging namespace {self.namespace} does not exist on the hub: create it "
                           f"(`kubectl create namespace {self.namespace}`, or `kubectl apply -k deploy/`); "
                           f"the daemon waits for it and acts once it exists", cluster="hub") from e
        log.info("became leader (created lease %s/%s)", self.namespace, self.name)
        return True

    def release(self) -> str:
        """Give the lease up on a clean stop so that a standby takes over at once; what
        became of it, in words. Also when this daemon's own term ran out while it was
        stopping (its threads took longer than the renew deadline to end, on a slow
        target or a long round): the record still names it, and nobody else can have
        taken it (the write is guarded by the version read), so it is handed back."""
        self.stop()
        self._renewed_at = None                     # from here on, the fence refuses every write
        if not self.acquired:
            return f"lease {self.namespace}/{self.name} not held"
        try:
            res = self._lease()
            lease = self.client.get(res, self.name, self.namespace)
            holder = (lease.get("spec") or {}).get("holderIdentity")
            if holder != self.identity:
                return f"lease {self.namespace}/{self.name} held by {holder or 'nobody'} now"
            self.client.patch(res, self.name, {
                "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                "spec": {"holderIdentity": "", "renewTime": _micro_time()}}, self.namespace)
        except PlacerError as e:
            log.warning("releasing the lease: %s", e)
            return f"lease {self.namespace}/{self.name} not released ({e.message}): a standby takes it over " \
                   f"after {self.timing.duration:.0f}s"
        return f"lease {self.namespace}/{self.name} released"
