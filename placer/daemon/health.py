"""Target clusters that stop answering (issue 24): the per-cluster request deadline.

A target whose request gets no answer within `DaemonConfig.deadline` (a black-holed or
overloaded API server accepts the connection and says nothing) is *degraded* until it
answers again:

- the planner's fleet carries it with that error (no capacity, the reason says why), so
  new arrivals go elsewhere at once;
- every later request to it fails at once (`Gate`, a hook run before each try of the
  target's fenced client), so creates queued behind the one that hung are moved, not
  held: their groups are planned again elsewhere;
- a thread asks it `GET /version` (bounded by the deadline) until it answers; a cluster
  that is degraded again soon after it came back waits longer each time before it is
  trusted again (the deadline, doubled per repeat, at most a minute), so a server that
  answers reads but not writes costs one deadline now and then, not one per round;
- once it answers, `on_recover(cluster)`: the daemon looks there, by placer's labels, for
  copies that a timed-out create committed after all, and deletes them where the workload
  runs elsewhere.

Planning never waits for a degraded cluster: not at the start (its first lists), not for
a new leader's relist; for one that is merely slow, at most `Degradation.patience`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable

from placer.daemon.messages import Message, Recovered
from placer.daemon.state import DaemonConfig
from placer.daemon.targets import Targets
from placer.kube import NO_RETRY, KubeClient, Request
from placer.model.errors import PlacerError, Unreachable

log = logging.getLogger("placer.daemon")

MAX_HOLD = 60.0                 # the longest a cluster that answers again waits to be trusted
REPEAT_WINDOW = 300.0           # degraded again within this of coming back: a repeat
LOOK_EVERY = 0.05               # seconds between two looks at the targets' first lists and usability


def timed_out(e: BaseException) -> bool:
    """A request that got no answer in time (it may still have been carried out)."""
    return isinstance(e, Unreachable) and "timed out" in e.message


def seconds(value: float) -> str:
    return f"{value:.3g}s"


@dataclass
class _State:
    why: str
    since: float                                    # time.monotonic()
    hold: float                                     # trusted again no sooner than since + hold


class TargetHealth:
    """Which target clusters are degraded, and why. `probes` (cluster -> a client bounded by
    the deadline) are filled by the watches; `on_recover` is called from a probe's thread."""

    def __init__(self, deadline: float, stop: threading.Event,
                 on_recover: Callable[[str], None] = lambda _: None, interval: float = 1.0):
        self.deadline = deadline
        self.stop = stop
        self.on_recover = on_recover
        self.interval = interval
        self.probes: dict[str, KubeClient] = {}
        self.waited_out: set[str] = set()           # clusters planning stopped waiting for at the start
        self._state: dict[str, _State] = {}
        self._repeats: dict[str, int] = {}
        self._back_at: dict[str, float] = {}
        self._lock = threading.Lock()

    @property
    def no_answer(self) -> str:
        return f"no answer within the {seconds(self.deadline)} request deadline"

    def degraded(self, cluster: str) -> str | None:
        state = self._state.get(cluster)
        return state.why if state else None

    def degrade(self, cluster: str, why: str | None = None) -> bool:
        """Leave `cluster` out until it answers again; True when it was not degraded already."""
        now = time.monotonic()
        with self._lock:
            if cluster in self._state:
                return False
            repeat = now - self._back_at.get(cluster, -REPEAT_WINDOW) < REPEAT_WINDOW
            self._repeats[cluster] = self._repeats.get(cluster, 0) + 1 if repeat else 0
            hold = min(MAX_HOLD, self.deadline * 2 ** self._repeats[cluster])
            self._state[cluster] = _State(why or self.no_answer, now, hold)
        log.warning("cluster %s is degraded: %s; planning elsewhere until it answers again", cluster,
                    why or self.no_answer)
        if cluster in self.probes:
            threading.Thread(target=self._probe, args=(cluster,), name=f"placer-probe-{cluster}", daemon=True).start()
        return True

    def summary(self) -> str:
        """`degraded: alpha (why, for 12s)`, or "" when every cluster answers."""
        now = time.monotonic()
        with self._lock:
            parts = [f"{c} ({s.why}, for {now - s.since:.0f}s)" for c, s in sorted(self._state.items())]
        return f"degraded: {', '.join(parts)}" if parts else ""

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._state)

    def _probe(self, cluster: str) -> None:
        client = self.probes[cluster]
        while not self.stop.wait(self.interval):
            state = self._state.get(cluster)
            if state is None:
                return
            if time.monotonic() < state.since + state.hold:
                continue
            try:
                client.request("GET", "/version", retry=NO_RETRY)
            except PlacerError:
                continue
            with self._lock:
                self._state.pop(cluster, None)
                self._back_at[cluster] = time.monotonic()
            log.info("cluster %s answers again: planning on it again", cluster)
            try:
                self.on_recover(cluster)
            except Exception:                       # the daemon's side must not kill this thread silently
                log.exception("cluster %s: acting on its recovery failed", cluster)
            return


@dataclass(frozen=True)
class Gate:
    """The hook run before every try of a target's request: none is sent to a degraded
    cluster (it fails at once, so work queued there goes elsewhere)."""

    health: TargetHealth
    cluster: str

    def __call__(self, request: Request) -> None:
        why = self.health.degraded(self.cluster)
        if why is not None:
            raise Unreachable(f"{self.cluster} is degraded ({why})", cluster=self.cluster, obj=request.obj)


class Degradation:
    """The daemon's side of its targets' health: what a failed call and a recovery mean for
    its work, and how long planning waits for a target's first lists."""

    def __init__(self, health: TargetHealth, targets: Targets, config: DaemonConfig,
                 inbox: queue.SimpleQueue[Message], wake: threading.Event, on_capacity: Callable[[], None]):
        self.health = health
        self.targets = targets
        self.config = config
        self.inbox = inbox
        self.wake = wake
        self.on_capacity = on_capacity
        self.started: float | None = None          # when the watches started (time.monotonic)
        self._usable: set[str] = set()             # clusters a round could plan on, last seen
        self._next_look = 0.0                       # watch_first_lists looks at most every LOOK_EVERY s
        health.on_recover = self.recovered

    def target_failed(self, cluster: str, e: PlacerError) -> None:
        """A call to a target failed: no answer within the request deadline makes it degraded
        until it answers again; refused or 5xx: planned around for a while. Either way the
        work queued for it fails fast."""
        if timed_out(e):
            self.health.degrade(cluster)
        elif cluster in self.targets.caches:
            self.targets.caches[cluster].fail(e.message, max(2.0, 2 * self.config.watch_retry + 1.0))

    def recovered(self, cluster: str) -> None:
        """A degraded cluster answers again (a probe's thread): look for late copies there
        (`daemon/sweep.py`), and plan on it again."""
        self.inbox.put(Recovered(cluster))
        self.on_capacity()
        self.wake.set()

    @property
    def patience(self) -> float:
        """How long planning waits for a target's first lists (or a new leader's relist of it)
        that have neither answered nor timed out: lists are not cut at the deadline (a large
        cluster's pods take a while), but a degraded cluster is never waited for."""
        return max(10.0, 3 * self.config.deadline)

    def watch_first_lists(self) -> None:
        """Planning waits for a target's first lists no longer than `patience` (a copy there
        that the daemon could not see yet is reconciled once they answer); a cluster that
        becomes usable later (synced, relisted, answering, out of a failure window) makes the
        unplaced be planned again. Asked every step, it looks every LOOK_EVERY seconds (a burst
        runs thousands of steps)."""
        now = time.monotonic()
        if now < self._next_look:
            return
        self._next_look = now + LOOK_EVERY
        if self.started is None:                     # the first step after the watches started
            self.started = now if self.targets.caches else None
        if self.started is not None and now - self.started > self.patience:
            for name, cache in self.targets.caches.items():
                if name not in self.health.waited_out and not cache.tried:
                    self.health.waited_out.add(name)
                    log.warning("cluster %s: its first lists did not answer within %s; planning without it "
                                "until they do", name, seconds(self.patience))
        usable = {n for n in self.targets.usable() if not self.targets.caches[n].error}
        if usable - self._usable:                   # one came back (or its failure window ended)
            self.on_capacity()
        self._usable = usable
