"""The daemon's watches: the kinds discovered on the hub, an informer per staging kind,
companion kind and priority-class kind there, and a cache per target cluster (with its
fenced client); the view and the targets they fill. Also the relist of placer's copies a
new leader makes before it plans on a cluster."""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any, Callable, Mapping

from placer.daemon.caches import ClusterCache, served_kinds
from placer.daemon.definitions import CurrentCatalog, FleetDefinitions
from placer.daemon.discovery import Follower
from placer.daemon.execute import fenced_client
from placer.daemon.executor import COMPANION_KINDS
from placer.daemon.health import Gate, TargetHealth
from placer.daemon.informer import Informer
from placer.daemon.leadership import LeaderElector
from placer.daemon.quotas import GVK as QUOTA_GVK
from placer.daemon.state import GVK, DaemonConfig
from placer.daemon.targets import Targets
from placer.daemon.view import StagingView
from placer.kube import Kube, KubeClient, Resource
from placer.model.errors import NotFound, PlacerError

log = logging.getLogger("placer.daemon")

CLASS_KINDS = (("scheduling.k8s.io/v1", "PriorityClass"), ("kueue.x-k8s.io/v1beta1", "WorkloadPriorityClass"))
Handler = Callable[[Informer, tuple[str, str], dict | None], None]


class Callbacks:
    """What the watches report to the daemon (called on informer threads)."""

    def __init__(self, on_staging: Handler, on_copy: Callable[[str, GVK, tuple[str, str]], None],
                 on_capacity: Callable[[], None], on_target_failed: Callable[[str, PlacerError], None],
                 on_error: Callable[[str, Exception], None]):
        self.on_staging = on_staging
        self.on_copy = on_copy
        self.on_capacity = on_capacity
        self.on_target_failed = on_target_failed
        self.on_error = on_error


class Watches:
    """Given the hub's reading client, the lease (to fence the targets' clients) and the
    view and targets to fill."""

    def __init__(self, config: DaemonConfig, kube: Kube, catalogs: CurrentCatalog, entries: Mapping[str, Any],
                 hub_reader: KubeClient, leader: LeaderElector, view: StagingView, targets: Targets,
                 stop: threading.Event, calls: Callbacks, definitions: FleetDefinitions | None = None,
                 health: TargetHealth | None = None):
        self.config = config
        self.health = health or TargetHealth(config.deadline, stop, lambda _: None)
        self.kube = kube
        self.catalogs = catalogs
        self.definitions = definitions
        self.entries = entries
        self.hub_reader = hub_reader
        self.leader = leader
        self.view = view
        self.targets = targets
        self.stop = stop
        self.calls = calls
        self.follower: Follower | None = None
        self._quota_generations: dict[tuple[str, str], Any] = {}

    def start(self) -> bool:
        """Discover the kinds and start every informer (idempotent: False when already started)."""
        if self.view.informers:
            return False
        self.watch_hub()
        for name, entry in self.entries.items():
            self.watch_target(name, entry)
        self.name_resources()
        for inf in self.informers():
            inf.start()
        self.follower = Follower(
            {"hub": (self.kube.client(self.config.hub_context), self.config.hub_context),
             # targets through their caches' clients: discovery bounded by the request deadline
             **{n: (self.targets.caches[n].client, e.context) for n, e in self.entries.items()}},
            follow=self.definitions is not None, stop=self.stop, on_change=self.follow_change,
            on_error=self.calls.on_error, poll=self.config.discovery_interval or 10.0,
            retry_delay=self.config.watch_retry)
        self.follower.start()
        return True

    def name_resources(self) -> None:
        """Resolve now the resource names later writes use by name (Events on the hub, a
        copy's namespace on the targets): discovery once at the start, not in the first
        busy moment. A cluster that does not answer now resolves them when first used."""
        for client, name in ((self.hub_reader, "events"),
                             *((c.client, "namespaces") for c in self.targets.caches.values())):
            try:
                client.resolve(name)
            except PlacerError:
                continue

    def quiet(self) -> bool:
        """No change to kinds or definitions waiting to be followed."""
        return self.follower is None or self.follower.quiet()

    # --- kinds and definitions that appear after the start (a CRD installed later) ------------

    def follow_change(self, clusters: set[str], definitions: bool) -> None:
        """Called by the follower when CRDs changed on `clusters` or registered definitions
        changed somewhere: a changed catalog serves every later round, and the kinds the
        hub and the targets serve now and did not before are watched."""
        changed = definitions and self.definitions is not None and self.definitions.refresh(
            self.catalogs, self.follower.registered(self.definitions.warn) if self.follower else None)
        self.discover_new(None if changed else clusters)

    def discover_new(self, clusters: set[str] | None = None) -> list[GVK]:
        """Catalog kinds the hub serves now and did not before (a CRD installed after the
        start): watched in the staging namespace from now on, and their copies on every
        target that serves them. `clusters`: ask only these ("hub" and target names; None:
        all). Returns the kinds added."""
        added = []
        if (clusters is None or "hub" in clusters) and self.watch_quotas() and self.view.quotas is not None:
            self.view.quotas.start()
            log.info("the hub serves FleetQuota now: applying its quotas")
        for gvk in self.catalogs.current.kinds() if clusters is None or "hub" in clusters else ():
            if gvk in self.view.informers:
                continue
            try:
                res = self.hub_reader.resource_for(*gvk)
            except PlacerError:
                continue                         # not served (yet), or the hub does not answer now
            inf = self.hub_informer(res, self.config.staging_namespace, self.calls.on_staging, gvk)
            # copy-on-write: other threads iterate these maps without a lock
            self.view.resources = {**self.view.resources, gvk: res}
            self.view.gvks = {**self.view.gvks, (res.group, gvk[1]): gvk}
            self.view.informers = {**self.view.informers, gvk: inf}
            inf.start()
            added.append(gvk)
            log.info("the hub serves %s (%s) now: watching it in %s", gvk[1], gvk[0], self.config.staging_namespace)
        for name, cache in self.targets.caches.items():
            if clusters is not None and name not in clusters and not added:
                continue
            for gvk in self.view.informers:
                if gvk not in cache.kinds:
                    try:
                        cache.add_kind(gvk, cache.client.resource_for(*gvk))
                    except PlacerError:
                        continue                 # not served there (yet)
        return added

    def watch_hub(self) -> None:
        ns = self.config.staging_namespace
        for gvk in self.catalogs.current.kinds():
            try:
                res = self.hub_reader.resource_for(*gvk)
            except NotFound:
                continue
            except PlacerError as e:
                self.calls.on_error("hub", e)
                raise
            self.view.resources[gvk] = res
            self.view.gvks[(res.group, gvk[1])] = gvk
            self.view.informers[gvk] = self.hub_informer(res, ns, self.calls.on_staging, gvk)
        for gvk in COMPANION_KINDS:
            if gvk[1] == "Secret" and not self.config.secrets:
                continue                    # no read access to Secrets unless groups need them
            self.view.companions[gvk] = self.hub_informer(self.hub_reader.resource_for(*gvk), ns, _ignore, gvk)
        for gvk in CLASS_KINDS:
            try:
                self.view.classes.append(self.hub_informer(self.hub_reader.resource_for(*gvk), None, _ignore, gvk))
                self.view.classes[-1].optional = True   # not readable: built-ins and the pods' own classes only
            except PlacerError:
                continue                    # no Kueue on the hub, or not readable: built-ins only
        self.watch_quotas()

    def watch_quotas(self) -> bool:
        """FleetQuota objects on the hub (issue 23), watched when served (the CRD may come later:
        `discover_new` asks again when the hub's CRDs change). True when the watch is new."""
        if self.view.quotas is not None:
            return False
        try:
            res = self.hub_reader.resource_for(*QUOTA_GVK)
        except PlacerError:
            return False                    # not installed (yet), or the hub does not answer now
        inf = self.hub_informer(res, None, self._quota_changed, QUOTA_GVK)
        inf.optional = True                 # not readable: the clusters file's quotas only
        self.view.quotas = inf
        return True

    def _quota_changed(self, inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
        """A FleetQuota added, deleted or its spec changed (its generation; not the status the
        daemon writes): what waits is planned again, as when capacity frees up."""
        generation = ((obj or {}).get("metadata") or {}).get("generation")
        if obj is None or self._quota_generations.get(key) != generation:
            self._quota_generations[key] = generation
            self.calls.on_capacity()

    def watch_target(self, name: str, entry: Any) -> None:
        raw = self.kube.client(entry.context, cluster=name)
        failed = functools.partial(self.calls.on_target_failed, name)
        deadline = self.config.deadline
        # every request but the watches' bounded by the request deadline, discovery included:
        # one that hangs marks the cluster degraded (daemon/health.py), and none is sent to it
        # while it is
        bounded = fenced_client(raw, None, deadline, on_failure=failed)
        base = raw.discovering_through(bounded.transport)
        bounded = base.through(bounded.transport)
        self.targets.clients[name] = fenced_client(base, self.leader, deadline, on_failure=failed,
                                                   gate=Gate(self.health, name))
        self.health.probes[name] = bounded
        kinds, why = served_kinds(bounded, list(self.view.informers), self.view.resources)
        if why:
            self.calls.on_error(name, PlacerError(why))
            log.warning("cluster %s: %s; watching it until it answers", name, why)
        self.targets.caches[name] = ClusterCache(
            name, dict(entry.labels or {}), entry.context, base, kinds, self.stop,
            on_error=functools.partial(self.calls.on_error, name),
            on_copy=functools.partial(self.calls.on_copy, name),
            on_capacity=self.calls.on_capacity, retry_delay=self.config.watch_retry,
            topology=tuple(getattr(entry, "topology", None) or ()), kinds_known=why is None, entry=entry,
            degraded=functools.partial(self.health.degraded, name))

    def hub_informer(self, res: Resource, ns: str | None, handler: Handler, gvk: GVK) -> Informer:
        return Informer(self.hub_reader, res, namespace=ns, label_selector=None, handler=handler, cluster="hub",
                        stop=self.stop, on_error=lambda e: self.calls.on_error("hub", e),
                        retry_delay=self.config.watch_retry, gvk=gvk)

    def hub_informers(self) -> list[Informer]:
        quotas = [self.view.quotas] if self.view.quotas is not None else []
        return list(self.view.informers.values()) + list(self.view.companions.values()) + self.view.classes + quotas

    def informers(self) -> list[Informer]:
        out = self.hub_informers()
        for cache in self.targets.caches.values():
            out += cache.informers()
        return out

    def synced(self) -> bool:
        """The hub's caches must be synced; a target that cannot be read is left out of
        planning, but adoption needs every reachable cluster's copies known first (a
        degraded target is not waited for, a slow one at most `Degradation.patience`: its
        copies are reconciled when it answers)."""
        hub = all(i.synced.is_set() or (i.optional and i.tried.is_set()) for i in self.hub_informers())
        return hub and self.tried()

    def tried(self) -> bool:
        def counted(n: str) -> bool:             # a silent target's watches are not waited for
            return n == "hub" or not (n in self.health.waited_out or self.health.degraded(n))
        follower = [i for i in (self.follower.informers() if self.follower else []) if counted(i.cluster)]
        return all(i.tried.is_set() for i in self.hub_informers() + follower) and \
            all(c.tried or not counted(n) for n, c in self.targets.caches.items())


class Relist:
    """A new leader trusts nothing it did not read: it relists placer's copies on every
    synced cluster, one thread per cluster, so that a slow one holds back only itself (a
    cluster is planned on once its relist is done)."""

    def __init__(self, targets: Targets, leader: LeaderElector, on_error: Callable[[str, Exception], None],
                 wake: threading.Event, degraded: Callable[[str], str | None] = lambda _: None,
                 patience: float = float("inf")):
        self.targets = targets
        self.leader = leader
        self.on_error = on_error
        self.wake = wake
        self.degraded = degraded
        self.patience = patience                     # how long a relist is waited for (daemon/health.py)
        self.running: dict[str, float] = {}          # cluster -> when its relist started (time.monotonic)

    def done(self) -> bool:
        """Every cluster it can read has been relisted (a new leader plans only then). A
        degraded cluster, or one whose relist has not answered within `patience`, is not
        waited for: it is planned on once its relist is done."""
        now = time.monotonic()
        return all(n in self.targets.resynced for n, c in self.targets.caches.items()
                   if c.synced and not self.degraded(n) and now - self.running.get(n, now) <= self.patience)

    def start(self) -> None:
        for name, cache in self.targets.caches.items():
            if name in self.targets.resynced or name in self.running or not cache.synced:
                continue
            self.running[name] = time.monotonic()
            epoch = self.leader.acquired
            threading.Thread(target=self.one, args=(name, epoch), name=f"placer-resync-{name}",
                             daemon=True).start()

    def one(self, name: str, epoch: int) -> None:
        try:
            self.targets.caches[name].resync_copies()
            if epoch == self.leader.acquired:        # still the same term of leadership
                self.targets.resynced.add(name)
        except PlacerError as e:
            self.on_error(name, e)
            log.warning("cluster %s: cannot relist placer's copies: %s; not planning on it yet", name, e)
        finally:
            self.running.pop(name, None)
            self.wake.set()


def _ignore(inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
    """Companions and priority classes are read from their caches when a round needs them."""
