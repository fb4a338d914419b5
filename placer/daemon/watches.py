"""The daemon's watches: the kinds discovered on the hub, an informer per staging kind,
companion kind and priority-class kind there, and a cache per target cluster (with its
fenced client); the view and the targets they fill. Also the relist of placer's copies a
new leader makes before it plans on a cluster."""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable, Mapping

from placer.daemon.caches import ClusterCache, served_kinds
from placer.daemon.definitions import CurrentCatalog, FleetDefinitions
from placer.daemon.discovery import Follower
from placer.daemon.execute import fenced_client
from placer.daemon.executor import COMPANION_KINDS
from placer.daemon.informer import Informer
from placer.daemon.leadership import LeaderElector
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
                 stop: threading.Event, calls: Callbacks, definitions: FleetDefinitions | None = None):
        self.config = config
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
             **{n: (self.kube.client(e.context), e.context) for n, e in self.entries.items()}},
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

    def watch_target(self, name: str, entry: Any) -> None:
        base = self.kube.client(entry.context, cluster=name)
        self.targets.clients[name] = fenced_client(base, self.leader, self.config.timeout,
                                                   on_failure=functools.partial(self.calls.on_target_failed, name))
        kinds, why = served_kinds(base, list(self.view.informers), self.view.resources)
        if why:
            self.calls.on_error(name, PlacerError(why))
            log.warning("cluster %s: %s; watching it until it answers", name, why)
        self.targets.caches[name] = ClusterCache(
            name, dict(entry.labels or {}), entry.context, base, kinds, self.stop,
            on_error=functools.partial(self.calls.on_error, name),
            on_copy=functools.partial(self.calls.on_copy, name),
            on_capacity=self.calls.on_capacity, retry_delay=self.config.watch_retry,
            topology=tuple(getattr(entry, "topology", None) or ()), kinds_known=why is None, entry=entry)

    def hub_informer(self, res: Resource, ns: str | None, handler: Handler, gvk: GVK) -> Informer:
        return Informer(self.hub_reader, res, namespace=ns, label_selector=None, handler=handler, cluster="hub",
                        stop=self.stop, on_error=lambda e: self.calls.on_error("hub", e),
                        retry_delay=self.config.watch_retry, gvk=gvk)

    def hub_informers(self) -> list[Informer]:
        return list(self.view.informers.values()) + list(self.view.companions.values()) + self.view.classes

    def informers(self) -> list[Informer]:
        out = self.hub_informers()
        for cache in self.targets.caches.values():
            out += cache.informers()
        return out

    def synced(self) -> bool:
        """The hub's caches must be synced; a target that cannot be read is left out of
        planning, but adoption needs every reachable cluster's copies known first."""
        hub = all(i.synced.is_set() or (i.optional and i.tried.is_set()) for i in self.hub_informers())
        return hub and self.tried()

    def tried(self) -> bool:
        follower = self.follower.informers() if self.follower else []
        return all(i.tried.is_set() for i in self.informers() + follower)


class Relist:
    """A new leader trusts nothing it did not read: it relists placer's copies on every
    synced cluster, one thread per cluster, so that a slow one holds back only itself (a
    cluster is planned on once its relist is done)."""

    def __init__(self, targets: Targets, leader: LeaderElector, on_error: Callable[[str, Exception], None],
                 wake: threading.Event):
        self.targets = targets
        self.leader = leader
        self.on_error = on_error
        self.wake = wake
        self.running: set[str] = set()

    def done(self) -> bool:
        """Every cluster it can read has been relisted (a new leader plans only then)."""
        return all(n in self.targets.resynced for n, c in self.targets.caches.items() if c.synced)

    def start(self) -> None:
        for name, cache in self.targets.caches.items():
            if name in self.targets.resynced or name in self.running or not cache.synced:
                continue
            self.running.add(name)
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
            self.running.discard(name)
            self.wake.set()


def _ignore(inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
    """Companions and priority classes are read from their caches when a round needs them."""
