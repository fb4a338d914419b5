"""`placer daemon`: place what arrives in the hub's staging namespace, keep it placed,
report back, clean up.

Shape (a controller in the Kueue/kopf mould):
- informers (`placer.daemon_state.Informer`) watch the hub's staging namespace (every
  catalog kind the hub serves, plus ConfigMaps/Secrets), placer's copies on every target
  cluster (label `placer.dev/managed=true`) and the target clusters' nodes; their threads
  only fill caches and report keys;
- one reconcile thread takes keys from a delaying work queue and compares a staging
  object with its remote copy: finalizer, annotations, status back, spec forward,
  deletion, adoption, reschedule;
- staging objects that need a cluster wait for a short batch window, then are planned
  together with everything still unplaced: live inventory with promised capacity
  (`actuate.read_live`) -> `solver.solve` (pure) -> `actuate.prepare_objects` /
  `apply_group` per placed group;
- a Lease on the hub makes exactly one daemon act; the others keep their caches warm.

Restart safety: nothing lives only in memory. Where a workload runs is read back from the
copies on the clusters (labels and annotations), so a daemon killed between creating a copy
and annotating the staging object adopts that copy instead of creating a second one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import queue
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from . import actuate as A
from .handoff_topology import choices_by_workload, choices_of
from .catalog import Catalog
from .clusters_file import as_entry
from .daemon_state import Clock, Informer, ObjKey, WorkQueue, all_synced
from .events import (FAILED, NORMAL, PLACED, RESCHEDULED, UNPLACED, WARNING, Recorder, condition_of,
                     placed_condition, with_condition)
from .errors import Conflict, InputError, KubeError, NotFound, PlacerError
from .fleet import Cluster, Fleet
from .interpret import Interpreter
from .kube import Kube, KubeClient, Resource, run_concurrently
from .leader import LeaderElector, LeaseTiming
from .metrics import Metrics, MetricsServer
from .names import (  # noqa: F401
    ANN_CLUSTER,
    ANN_GROUP,
    ANN_MESSAGE,
    ANN_PHASE,
    ANN_RESCHEDULE,
    ANN_SOURCE_GENERATION,
    CLUSTER_NAME_LABEL,
    FINALIZER,
    PLACED_CLUSTER,
)
from .priority import PriorityClasses, read_classes, with_priorities
from .registry import with_fleet_definitions
from .solve import ANN_SELECTOR, solve
from .workload import Phase, PlacementGroup, Workload

log = logging.getLogger("placer.daemon")

PHASE_INVALID = "Invalid"
COMPANION_KINDS = (("v1", "ConfigMap"), ("v1", "Secret"))
DEFAULT_RESCHEDULE_AFTER = 600.0


@dataclass(frozen=True)
class DaemonConfig:
    staging_namespace: str
    clusters: tuple[Any, ...]                 # clusters-file entries (name, context, labels, hand-off)
    hub_context: str | None = None
    batch_window: float = 0.2                 # seconds arrivals wait to be planned together
    retry_interval: float = 30.0              # unplaced workloads are retried at least this often
    resync_interval: float = 60.0             # every placed workload re-checked this often
    reschedule_after: float | None = None     # for every workload; else only annotated ones
    time_limit: float = 2.0                   # solver time limit per planning round
    lease_name: str = "placer-daemon"
    identity: str = ""
    lease: LeaseTiming = LeaseTiming()
    workers: int = 8                          # concurrent applies per round
    solver_workers: int = 2
    watch_retry: float = 1.0
    secrets: bool = False                     # Secrets follow their groups (hub.secrets: the RBAC must allow it)

    def __post_init__(self):
        if not self.identity:
            object.__setattr__(self, "identity", f"{socket.gethostname()}-{os.getpid()}-{id(self):x}")


@dataclass
class Remote:
    """Where a staging workload's copy lives, as far as this daemon knows."""

    cluster: str
    placed_at: float                          # our clock: when placed or first seen


@dataclass
class Pending:
    since: float                              # our clock: when it started waiting
    message: str = ""


def origin_of(key: ObjKey) -> str:
    return f"hub/{key.namespace}/{key.kind}/{key.name}"


def workload_key_of(key: ObjKey) -> str:
    return str(key.workload)


class Daemon:
    """The daemon. `start()` runs it in threads; `stop()` ends it. Tests may instead call
    `step()` themselves, and `wait_idle()` waits until nothing is left to do."""

    def __init__(self, config: DaemonConfig, kube: Kube, catalog: Catalog, *,
                 clock: Clock | None = None, metrics: Metrics | None = None):
        self.config = config
        self.kube = kube
        self.catalog = catalog
        # every planning round re-reads each placed object; most have not changed
        self.interpret = Interpreter(catalog)
        self.clock = clock or Clock()
        self.metrics = metrics or Metrics()
        self.entries = {e.name: e for e in map(as_entry, config.clusters) if e.context}
        self.hub = kube.client(config.hub_context, cluster="hub")
        # Events on staging objects: what `kubectl describe` shows users on the hub
        self.events = Recorder(self.hub, lambda: datetime.fromtimestamp(self.clock.wall(), timezone.utc),
                               config.identity)
        self.leader = LeaderElector(self.hub, config.staging_namespace, config.lease_name, config.identity,
                                    clock=self.clock.now, timing=config.lease,
                                    on_error=lambda e: self._api_error("hub", e))
        self.queue = WorkQueue()
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._busy = threading.Lock()
        self._thread: threading.Thread | None = None
        self._last_loop = self.clock.now()
        self._was_leader = False
        # informers
        self.staging: dict[tuple[str, str], Informer] = {}          # (apiVersion, kind) -> hub informer
        self.companions: dict[tuple[str, str], Informer] = {}
        self.remote: dict[str, dict[tuple[str, str], Informer]] = {}  # cluster -> (api, kind) -> informer
        self.nodes: dict[str, Informer] = {}
        self._resources: dict[tuple[str, str], Resource] = {}        # hub resources
        # decisions (rebuilt from the clusters after a restart)
        self.placed: dict[ObjKey, Remote] = {}
        self.pending: dict[ObjKey, Pending] = {}
        self.excluded: dict[ObjKey, set[str]] = {}
        self._window_opened: float | None = None
        self._retry_at: float | None = None
        self._fleet_changed: float | None = None     # when a capacity-relevant node change was seen
        self._next_resync = 0.0
        self._failed: dict[ObjKey, float] = {}
        self._node_sigs: dict[tuple[str, tuple[str, str]], tuple | None] = {}

    # --- lifecycle --------------------------------------------------------------------

    def start_watches(self) -> None:
        """Discover the kinds and start every informer (idempotent)."""
        if self.staging:
            return
        ns = self.config.staging_namespace
        for api_version, kind in self.catalog.kinds():
            try:
                res = self.hub.resource_for(api_version, kind)
            except NotFound:
                continue
            except PlacerError as e:
                self._api_error("hub", e)
                raise
            self._resources[(api_version, kind)] = res
            self.staging[(api_version, kind)] = self._informer(self.hub, res, ns, None, "hub", self._on_staging,
                                                               (api_version, kind))
        for api_version, kind in COMPANION_KINDS:
            if kind == "Secret" and not self.config.secrets:
                continue                    # no read access to Secrets unless groups need them
            res = self.hub.resource_for(api_version, kind)
            self.companions[(api_version, kind)] = self._informer(self.hub, res, ns, None, "hub", self._on_companion)
        for name, entry in self.entries.items():
            client = self._client(name)
            per: dict[tuple[str, str], Informer] = {}
            reachable = True
            for gvk in self.staging:
                res = self._resources[gvk]          # unreachable now: watch with the hub's shape
                if reachable:
                    try:
                        res = client.resource_for(*gvk)
                    except NotFound:
                        continue
                    except PlacerError as e:
                        self._api_error(name, e)
                        log.warning("cluster %s: %s; watching it until it answers", name, e)
                        reachable = False
                per[gvk] = self._informer(client, res, None, A.MANAGED_SELECTOR, name, self._on_remote, gvk)
            self.remote[name] = per
            node_res = Resource("", "v1", "Node", "nodes", False)
            self.nodes[name] = self._informer(client, node_res, None, None, name, self._on_node)
        for inf in self._informers():
            inf.start()

    def _informer(self, client: KubeClient, res: Resource, ns: str | None, selector: str | None,
                  cluster: str, handler, gvk: tuple[str, str] | None = None) -> Informer:
        inf = Informer(client, res, namespace=ns, label_selector=selector, handler=handler, cluster=cluster,
                       stop=self._stop, on_error=lambda e, c=cluster: self._api_error(c, e),
                       retry_delay=self.config.watch_retry)
        inf.gvk = gvk or (res.api_version, res.kind)
        return inf

    def _informers(self) -> list[Informer]:
        out = list(self.staging.values()) + list(self.companions.values())
        for per in self.remote.values():
            out += per.values()
        return out + list(self.nodes.values())

    def start(self, metrics_addr: str | None = None) -> "Daemon":
        if metrics_addr:        # first: a busy port is an input error, before any watch starts
            self.server = MetricsServer(self.metrics, metrics_addr, self.healthy).start()
            log.info("serving /metrics and /healthz on %s", self.server.address)
        self.start_watches()
        self._thread = threading.Thread(target=self._run, name="placer-daemon", daemon=True)
        self._thread.start()
        return self

    def stop(self, release: bool = True) -> None:
        """Stop acting; give the lease up (`release=False` simulates a crash)."""
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=10)
        if release:
            self.leader.release()
        server = getattr(self, "server", None)
        if server:
            server.stop()

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
        due = [t for t in (self.queue.next_due(), self._plan_due(), self.leader.next_due(), self._next_resync)
               if t is not None]
        return min(0.25, max(0.005, min(due, default=now + 0.25) - now))

    def healthy(self) -> tuple[bool, str]:
        if self._thread is not None and not self._thread.is_alive():
            return False, "reconcile loop stopped"
        stale = self.clock.now() - self._last_loop
        if stale > 60:
            return False, f"reconcile loop stuck for {stale:.0f}s"
        role = "leader" if self.leader.is_leader else "standby"
        return True, f"ok ({role})"

    # --- informer callbacks (informer threads) ----------------------------------------

    def _on_staging(self, inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
        self.inbox.put(ObjKey(inf.gvk[0], inf.gvk[1], key[0], key[1]))
        self._wake.set()

    def _on_companion(self, inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
        pass                                         # read from the cache when a group is placed

    def _on_remote(self, inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
        if key[0] == self.config.staging_namespace:
            self.inbox.put(ObjKey(inf.gvk[0], inf.gvk[1], key[0], key[1]))
            self._wake.set()

    def _on_node(self, inf: Informer, key: tuple[str, str], obj: dict | None) -> None:
        # Nodes change all the time (heartbeats); only capacity-relevant changes matter, and
        # a replan is cheap enough that coalescing them into one flag suffices.
        sig = None if obj is None else _node_signature(obj)
        if self._node_sigs.get((inf.cluster, key)) != sig:
            self._node_sigs[(inf.cluster, key)] = sig
            if inf.synced.is_set():
                self.inbox.put("fleet")
                self._wake.set()

    # --- the loop ---------------------------------------------------------------------

    def step(self) -> bool:
        """One pass: leader election, events, due keys, planning. True when it did work."""
        with self._busy:
            now = self.clock.now()
            leader = self.leader.tick()
            self.metrics.set("placer_leader", 1 if leader else 0)
            did = self._drain_inbox(now)
            if not leader:
                self._was_leader = False
                return did
            if not self._was_leader:
                # a new leader trusts nothing it did not read: recheck every object
                self._was_leader = True
                self._enqueue_all(now)
            if not self._caches_synced():
                return did
            if now >= self._next_resync:
                self._next_resync = now + self.config.resync_interval
                self._enqueue_all(now)
                self.interpret.sweep()           # bounded even when no round reads the fleet
            keys = self.queue.pop_due(now)
            for key in keys:
                self._reconcile_safely(key)
            did = did or bool(keys)
            due = self._plan_due()
            if due is not None and self.clock.now() >= due:
                self._plan_round()
                did = True
            self._update_gauges()
            return did

    def _drain_inbox(self, now: float) -> bool:
        did = False
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return did
            did = True
            if item == "fleet":
                if self._fleet_changed is None:
                    self._fleet_changed = now
            else:
                self.queue.add(item, now)

    def _enqueue_all(self, now: float) -> None:
        for (api, kind), inf in self.staging.items():
            for obj in inf.items():
                self.queue.add(ObjKey.of({**obj, "apiVersion": api, "kind": kind}), now)
        for cluster, per in self.remote.items():
            for (api, kind), inf in per.items():
                for obj in inf.items():
                    meta = obj.get("metadata") or {}
                    if meta.get("namespace") == self.config.staging_namespace:
                        self.queue.add(ObjKey(api, kind, meta["namespace"], meta["name"]), now)

    def _caches_synced(self) -> bool:
        """Staging caches must be synced; a target cluster that cannot be read is left out
        of planning, but adoption needs every reachable cluster's copies known first."""
        hub = list(self.staging.values()) + list(self.companions.values())
        return all_synced(hub) and all(i.tried.is_set() for i in self._informers())

    def _synced_clusters(self) -> set[str]:
        return {c for c, per in self.remote.items() if all_synced(per.values()) and self.nodes[c].synced.is_set()}

    def _plan_due(self) -> float | None:
        due = []
        if self._window_opened is not None:
            due.append(self._window_opened + self.config.batch_window)
        if any(not self._is_new(p) for p in self.pending.values()):
            if self._fleet_changed is not None:
                due.append(self._fleet_changed)
            if self._retry_at is not None:
                due.append(self._retry_at)
        return min(due) if due else None

    @staticmethod
    def _is_new(p: Pending) -> bool:
        return not p.message

    def wait_idle(self, timeout: float = 30.0, settle: float = 0.05) -> bool:
        """Until every informer has synced, the inbox is empty, nothing is due and no planning
        window is open (delayed retries do not count). For tests and benchmarks."""
        deadline = time.monotonic() + timeout
        quiet_since = None
        while time.monotonic() < deadline:
            idle = self._idle_now()
            if idle:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= settle:
                    return True
            else:
                quiet_since = None
            time.sleep(0.01)
        return False

    def _idle_now(self) -> bool:
        if not all(i.tried.is_set() for i in self._informers()) or not self.inbox.empty():
            return False
        with self._busy:
            if not self.inbox.empty():
                return False
            if not self.leader.is_leader:
                return True
            now = self.clock.now()
            if self.queue.due_count(now):
                return False
            due = self._plan_due()
            return due is None or due > now + 0.5

    # --- reconcile one staging workload ---------------------------------------------------

    def _reconcile_safely(self, key: ObjKey) -> None:
        try:
            self.reconcile(key)
            self._failed.pop(key, None)
        except PlacerError as e:
            self._api_error(e.cluster or "hub", e)
            delay = min(30.0, 2 * self._failed.get(key, 0.25))
            self._failed[key] = delay
            log.warning("%s: %s; retrying in %.1fs", key, e, delay)
            self.queue.add(key, self.clock.now() + delay)

    def reconcile(self, key: ObjKey) -> None:
        staging = self._staging(key)
        copies = self._copies(key)
        if staging is None:
            # gone from the hub without our finalizer's consent (or never finalized)
            for cluster, obj in copies:
                self._delete_remote(cluster, key, obj, "its staging object is gone")
            self.placed.pop(key, None)
            self.pending.pop(key, None)
            self.excluded.pop(key, None)
            return
        meta = staging.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            self._finalize(key, staging, copies)
            return
        workload = self._interpret_staging(key, staging)
        if workload is None:
            return
        if len(copies) > 1:
            copies = self._dedupe(key, staging, copies)
        if copies:
            cluster, remote = copies[0]
            self._sync_placed(key, staging, workload, cluster, remote)
            return
        known = self.placed.get(key)
        where = known.cluster if known else (meta.get("annotations") or {}).get(PLACED_CLUSTER)
        if where and where in self.entries:
            # believed placed but no copy in our cache: confirm with the cluster itself
            found = self._get_remote(where, key)
            if found is _UNKNOWN:
                self.queue.add(key, self.clock.now() + 2.0)
                return
            if found is not None:
                self._remote_informer(where, key).assume(found)
                self._sync_placed(key, staging, workload, where, found)
                return
            if known:
                log.info("%s: copy on %s is gone; placing again", key, where)
            self.placed.pop(key, None)
        self._ensure_finalizer(key, staging)
        if key not in self.pending:
            now = self.clock.now()
            self.pending[key] = Pending(now)
            if self._window_opened is None:
                self._window_opened = now

    def _staging(self, key: ObjKey) -> dict | None:
        inf = self.staging.get((key.api_version, key.kind))
        obj = inf.get(key.namespace, key.name) if inf else None
        if obj is not None:
            obj = {**obj, "apiVersion": key.api_version, "kind": key.kind}
        return obj

    def _remote_informer(self, cluster: str, key: ObjKey) -> Informer:
        return self.remote[cluster][(key.api_version, key.kind)]

    def _copies(self, key: ObjKey) -> list[tuple[str, dict]]:
        """The daemon-made copies of `key` on every cluster, in clusters-file order."""
        want = {A.workload_label(workload_key_of(key)), A.workload_label(A.legacy_key(key.workload))}
        out = []
        for cluster, per in self.remote.items():
            inf = per.get((key.api_version, key.kind))
            obj = inf.get(key.namespace, key.name) if inf else None
            if obj is None:
                continue
            meta = obj.get("metadata") or {}
            if (meta.get("labels") or {}).get(A.WORKLOAD) in want and \
                    (meta.get("annotations") or {}).get(A.ORIGIN) == origin_of(key):
                out.append((cluster, {**obj, "apiVersion": key.api_version, "kind": key.kind}))
        return out

    def _get_remote(self, cluster: str, key: ObjKey):
        try:
            obj = self._client(cluster).get(self._remote_informer(cluster, key).resource, key.name, key.namespace)
        except NotFound:
            return None
        except PlacerError as e:
            self._api_error(cluster, e)
            return _UNKNOWN
        ann = (obj.get("metadata") or {}).get("annotations") or {}
        return obj if ann.get(A.ORIGIN) == origin_of(key) else None

    def _dedupe(self, key: ObjKey, staging: dict, copies: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
        """Two copies must never exist; if they do (a copy made by hand, a split brain),
        keep the one the staging object names, else the oldest, and delete the rest."""
        named = ((staging.get("metadata") or {}).get("annotations") or {}).get(PLACED_CLUSTER)
        keep = next((c for c in copies if c[0] == named), None) or \
            min(copies, key=lambda c: (c[1].get("metadata") or {}).get("creationTimestamp") or "")
        for cluster, obj in copies:
            if cluster != keep[0]:
                self._delete_remote(cluster, key, obj, f"duplicate of the copy on {keep[0]}")
        return [keep]

    # --- placed: status back, spec forward, reschedule --------------------------------------

    def _sync_placed(self, key: ObjKey, staging: dict, workload: Workload, cluster: str, remote: dict) -> None:
        now = self.clock.now()
        known = self.placed.get(key)
        if known is None or known.cluster != cluster:
            if known is None and key not in self.pending:
                log.info("%s: adopting the copy on %s", key, cluster)
            # the copy's age, not the moment we first saw it: a restarted daemon keeps the
            # reschedule deadline the previous one was counting towards
            self.placed[key] = Remote(cluster, now - self._age(remote))
            self.pending.pop(key, None)
        try:
            phase = self.interpret(remote, source=f"{cluster}/{key}")
            phase_text, detail = phase.phase.value, _phase_detail(phase)
        except PlacerError as e:
            phase_text, detail = Phase.UNKNOWN.value, f"cannot read the copy's status: {e.message}"
        ann = (staging.get("metadata") or {}).get("annotations") or {}
        message = ann.get(ANN_MESSAGE) if ann.get(PLACED_CLUSTER) == cluster else None
        if not message or not message.startswith(f"placed on {cluster}"):
            message = f"placed on {cluster}"
        message = _with_detail(message, detail)
        # status first: whoever sees the new phase annotation finds the status that explains it
        self._mirror_status(key, staging, remote)
        self._annotate(key, self._staging(key) or staging,
                       {PLACED_CLUSTER: cluster, ANN_PHASE: phase_text, ANN_MESSAGE: message}, finalizer=True)
        self._forward_spec(key, staging, workload, cluster, remote)
        self._check_reschedule(key, staging, workload, cluster, phase_text)

    def _age(self, remote: dict) -> float:
        """Seconds since the copy was created, by its creationTimestamp (second precision,
        the cluster's clock: skew shifts it; a timestamp in the future counts as now)."""
        created = (remote.get("metadata") or {}).get("creationTimestamp")
        try:
            at = datetime.fromisoformat(created).timestamp()
        except (TypeError, ValueError):
            return 0.0
        return max(0.0, self.clock.wall() - at)

    def _mirror_status(self, key: ObjKey, staging: dict, remote: dict) -> None:
        want = remote.get("status")
        have = staging.get("status")
        cluster = (self.placed.get(key) or Remote("", 0.0)).cluster
        if cluster:                          # the copy's status, plus placer's Placed condition where it fits
            cond = placed_condition(True, PLACED, f"placed on {cluster}", self._wall(), condition_of(have))
            want = with_condition(want, cond) or want
        if want == have or (not want and not have):
            return
        res = self._resources[(key.api_version, key.kind)]
        # a merge patch only adds: null out what the copy no longer reports
        status = dict(want or {})
        for k in (have or {}):
            status.setdefault(k, None)
        if "status" in res.subresources:
            updated = self.hub.patch_status(res, key.name, status, key.namespace)
        else:
            updated = self.hub.patch(res, key.name, {"status": status}, key.namespace)
        self.staging[(key.api_version, key.kind)].assume(updated)

    def _forward_spec(self, key: ObjKey, staging: dict, workload: Workload, cluster: str, remote: dict) -> None:
        generation = (staging.get("metadata") or {}).get("generation")
        made_from = ((remote.get("metadata") or {}).get("annotations") or {}).get(ANN_SOURCE_GENERATION)
        if generation is None or str(generation) == made_from:
            return
        group = PlacementGroup(self._group_key(key, staging), (workload,))
        objects = self._prepare(group, cluster, plan_id=((remote.get("metadata") or {}).get("annotations")
                                                        or {}).get(A.PLAN) or "spec-update",
                                topology={workload.ref: choices_of(remote)})
        obj = objects[-1]
        applied = self._client(cluster).apply(obj, self._remote_informer(cluster, key).resource, key.namespace,
                                              force=True)
        self._remote_informer(cluster, key).assume(applied)
        log.info("%s: spec change (generation %s) applied to the copy on %s", key, generation, cluster)

    def _reschedule_after(self, staging: dict) -> float | None:
        ann = (staging.get("metadata") or {}).get("annotations") or {}
        flag = str(ann.get(ANN_RESCHEDULE, "")).strip().lower()
        if flag == "false":
            return None
        if flag == "true":
            return self.config.reschedule_after or DEFAULT_RESCHEDULE_AFTER
        return self.config.reschedule_after

    def _check_reschedule(self, key: ObjKey, staging: dict, workload: Workload, cluster: str, phase: str) -> None:
        after = self._reschedule_after(staging)
        if after is None or phase in (Phase.RUNNING.value, Phase.COMPLETED.value, Phase.FAILED.value):
            return
        since = self.placed[key].placed_at
        now = self.clock.now()
        if now - since < after:
            self.queue.add(key, since + after)
            return
        running = self._running_pods(cluster, workload)
        if running is None:
            self.queue.add(key, now + 5.0)
            return
        if running >= workload.pods:
            return
        self._withdraw(key, staging, cluster,
                       f"{workload.pods - running} of {workload.pods} pods not running after {after:.0f}s")

    def _running_pods(self, cluster: str, workload: Workload) -> int | None:
        """Pods of the workload that are Running or Succeeded on the cluster (by the
        definition's pod selectors, else by placer's workload label)."""
        client = self._client(cluster)
        try:
            pods = client.list("pods", workload.namespace).items
        except PlacerError as e:
            self._api_error(cluster, e)
            return None
        tag = A.workload_label(A.key_of(workload))
        count = 0
        for p in pods:
            labels = (p.get("metadata") or {}).get("labels") or {}
            mine = labels.get(A.WORKLOAD) == tag or any(
                i.has_selector and i.selects(labels) for i in workload.instances)
            if mine and (p.get("status") or {}).get("phase") in ("Running", "Succeeded"):
                count += 1
        return count

    def _exclude(self, key: ObjKey, cluster: str) -> None:
        excluded = self.excluded.setdefault(key, set())
        excluded.add(cluster)
        if excluded >= set(self.entries):
            excluded.clear()                    # excluded everywhere: let every cluster compete again

    def _withdraw(self, key: ObjKey, staging: dict, cluster: str, why: str) -> None:
        """Take a stuck group off its cluster and plan it again elsewhere."""
        members = self._group_members(key, staging)
        for member, obj in members:
            for c, copy_ in self._copies(member):
                if c == cluster:
                    self._delete_remote(c, member, copy_, f"rescheduling: {why}")
            self.placed.pop(member, None)
            self._exclude(member, cluster)
            message = f"withdrawn from {cluster}: {why}; placing elsewhere"
            self._event(member, obj, WARNING, RESCHEDULED, message)
            self._annotate(member, obj, {PLACED_CLUSTER: None, ANN_PHASE: Phase.PENDING.value, ANN_MESSAGE: message})
            self.pending[member] = Pending(self.clock.now())
            self.metrics.inc("placer_withdrawals_total")
            log.info("%s: %s", member, message)
        if self._window_opened is None:
            self._window_opened = self.clock.now()

    # --- deletion ------------------------------------------------------------------------

    def _finalize(self, key: ObjKey, staging: dict, copies: list[tuple[str, dict]]) -> None:
        meta = staging.get("metadata") or {}
        if FINALIZER not in (meta.get("finalizers") or ()):
            return
        known = self.placed.get(key)
        where = known.cluster if known else (meta.get("annotations") or {}).get(PLACED_CLUSTER)
        if not copies and where in self.entries:
            found = self._get_remote(where, key)
            if found is _UNKNOWN:
                raise KubeError("cannot confirm the copy is gone", cluster=where, obj=str(key))
            if found is not None:
                copies = [(where, found)]
        for cluster, obj in copies:
            self._delete_remote(cluster, key, obj, "its staging object is being deleted")
        self._delete_orphan_companions(key, staging, copies)
        self.placed.pop(key, None)
        self.pending.pop(key, None)
        self.excluded.pop(key, None)
        res = self._resources[(key.api_version, key.kind)]
        rest = [f for f in meta.get("finalizers") or () if f != FINALIZER]
        try:
            self.hub.patch(res, key.name, {"metadata": {"finalizers": rest or None,
                                                        "resourceVersion": meta.get("resourceVersion")}},
                           key.namespace)
        except NotFound:
            return
        except Conflict:
            self.queue.add(key, self.clock.now() + 0.1)
            return
        log.info("%s: deleted from %s; finalizer removed", key, ", ".join(c for c, _ in copies) or "nowhere")

    def _delete_remote(self, cluster: str, key: ObjKey, obj: dict, why: str) -> None:
        inf = self._remote_informer(cluster, key)
        self._client(cluster).delete(inf.resource, key.name, key.namespace, missing_ok=True)
        inf.forget(key.namespace, key.name)
        log.info("%s: deleted the copy on %s (%s)", key, cluster, why)

    def _delete_orphan_companions(self, key: ObjKey, staging: dict, copies: list[tuple[str, dict]]) -> None:
        """Companions placed with a group go when the group's last workload goes."""
        group = self._group_key(key, staging)
        if any(m != key for m, _ in self._group_members(key, staging)):
            return
        for cluster, _ in copies:
            client = self._client(cluster)
            for api, kind in COMPANION_KINDS:
                try:
                    res = client.resource_for(api, kind)
                    items = client.list(res, key.namespace,
                                        label_selector=f"{A.MANAGED}=true,{A.GROUP}={A.label_value(group)}").items
                    for item in items:
                        client.delete(res, item["metadata"]["name"], key.namespace, missing_ok=True)
                except PlacerError as e:
                    self._api_error(cluster, e)

    # --- staging object bookkeeping ----------------------------------------------------------

    def _interpret_staging(self, key: ObjKey, staging: dict) -> Workload | None:
        """The staging object's workload; a malformed one is annotated with why, and None."""
        try:
            return self.interpret(staging, source=str(key))
        except InputError as e:
            self._mark_invalid(key, staging, e)
            return None

    def _mark_invalid(self, key: ObjKey, staging: dict, e: PlacerError) -> None:
        self.pending.pop(key, None)
        message = f"invalid: {e.message}"
        log.warning("%s: %s", key, message)
        self._event(key, staging, WARNING, FAILED, message)
        self._annotate(key, staging, {ANN_PHASE: PHASE_INVALID, ANN_MESSAGE: message[:1000]}, finalizer=True)

    def _ensure_finalizer(self, key: ObjKey, staging: dict) -> None:
        self._annotate(key, staging, {}, finalizer=True)

    def _annotate(self, key: ObjKey, staging: dict, values: Mapping[str, str | None], *,
                  finalizer: bool = False) -> dict:
        """Set (None: remove) annotations, and add our finalizer, in one patch when needed.
        The placed cluster is also kept as a label, so that `kubectl get -l` finds it on the hub."""
        meta = staging.get("metadata") or {}
        have = meta.get("annotations") or {}
        changes = {k: v for k, v in values.items() if have.get(k) != v}
        labels = {}
        if PLACED_CLUSTER in values:
            want = A.cluster_label(values[PLACED_CLUSTER]) if values[PLACED_CLUSTER] else None
            if (meta.get("labels") or {}).get(PLACED_CLUSTER) != want:
                labels[PLACED_CLUSTER] = want
        finalizers = list(meta.get("finalizers") or ())
        add_finalizer = finalizer and FINALIZER not in finalizers
        if not changes and not labels and not add_finalizer:
            return staging
        patch: dict[str, Any] = {"metadata": {}}
        if changes:
            patch["metadata"]["annotations"] = changes
        if labels:
            patch["metadata"]["labels"] = labels
        if add_finalizer:
            # a merge patch replaces the list: guard it with the version we read
            patch["metadata"]["finalizers"] = finalizers + [FINALIZER]
            patch["metadata"]["resourceVersion"] = meta.get("resourceVersion")
        res = self._resources[(key.api_version, key.kind)]
        try:
            updated = self.hub.patch(res, key.name, patch, key.namespace)
        except Conflict:
            fresh = self.hub.get(res, key.name, key.namespace)
            self.staging[(key.api_version, key.kind)].assume(fresh)
            return self._annotate(key, {**fresh, "apiVersion": key.api_version, "kind": key.kind}, values,
                                  finalizer=finalizer)
        self.staging[(key.api_version, key.kind)].assume(updated)
        return updated

    def _group_key(self, key: ObjKey, staging: dict) -> str:
        group = ((staging.get("metadata") or {}).get("annotations") or {}).get(ANN_GROUP)
        return f"{key.namespace}/{group}" if group else workload_key_of(key)

    def _group_members(self, key: ObjKey, staging: dict) -> list[tuple[ObjKey, dict]]:
        group = ((staging.get("metadata") or {}).get("annotations") or {}).get(ANN_GROUP)
        if not group:
            return [(key, staging)]
        out = []
        for (api, kind), inf in self.staging.items():
            for obj in inf.items():
                meta = obj.get("metadata") or {}
                if (meta.get("annotations") or {}).get(ANN_GROUP) == group and not meta.get("deletionTimestamp"):
                    out.append((ObjKey(api, kind, meta.get("namespace") or "", meta["name"]),
                                {**obj, "apiVersion": api, "kind": kind}))
        return sorted(out, key=lambda m: m[0])

    # --- planning ----------------------------------------------------------------------------

    def _plan_round(self) -> None:
        now = self.clock.now()
        self._window_opened = None
        self._fleet_changed = None
        self._retry_at = now + self.config.retry_interval
        groups, members, pins = self._pending_groups()
        if not groups:
            return
        synced = self._synced_clusters()
        entries = [e for n, e in self.entries.items() if n in synced]
        live = A.read_live(self.kube, entries, self.catalog, interpreter=self.interpret)
        self.interpret.sweep()
        for name, c in live.clusters.items():
            if c.error:
                self.metrics.inc("placer_api_errors_total", labels={"cluster": name})
        fleet = Fleet(tuple(_with_name_label(live.clusters[e.name]) for e in entries))
        planned = [self._with_policy(g, members[g.key], pins.get(g.key)) for g in groups]
        t0 = time.perf_counter()
        try:
            plan = solve(fleet, planned, time_limit=self.config.time_limit, workers=self.config.solver_workers,
                         seed=0, committed=live.promised)
        except Exception as e:                       # a solver bug must not wedge the queue
            log.error("planning failed: %s", e, exc_info=not isinstance(e, PlacerError))
            for g in groups:
                for k in members[g.key]:
                    self._set_unplaced(k, f"planning failed: {e}")
            return
        finally:
            seconds = time.perf_counter() - t0
            self.metrics.observe("placer_solve_seconds", seconds)
            self.metrics.inc("placer_solves_total")
        plan_id = A.new_plan_id()
        by_group = {g.key: g for g in groups}
        placed_groups: dict[str, str] = {}
        for p in plan.placements:
            placed_groups[p.group] = p.cluster
        log.info("plan %s: %d of %d groups placed in %.2fs (%s)", plan_id, len(placed_groups), len(groups),
                 seconds, plan.summary.status)
        calls = {gk: (lambda gk=gk, c=c: self._create_group(by_group[gk], c, plan_id, plan))
                 for gk, c in placed_groups.items()}
        results = run_concurrently(calls, max_workers=self.config.workers) if calls else {}
        for gk, err in results.items():
            if err is not None:
                for k in members[gk]:
                    self._set_unplaced(k, f"placing on {placed_groups[gk]} failed: {err}")
                self._retry_at = min(self._retry_at, now + 2.0)
        unplaced_by_group: dict[str, dict[str, str]] = {}
        for u in plan.unplaced:
            unplaced_by_group.setdefault(u.group, {c: r.render() for c, r in u.reasons.items()})
        for gk, reasons in unplaced_by_group.items():
            text = "; ".join(f"{c}: {r}" for c, r in reasons.items()) or "no reachable cluster"
            for k in members[gk]:
                self._set_unplaced(k, f"unplaced: {text}")

    def _pending_groups(self) -> tuple[list[PlacementGroup], dict[str, list[ObjKey]], dict[str, str]]:
        """Pending workloads as placement groups (by `placer.dev/group`), with their
        companions; a newcomer to a group already placed is pinned to the group's cluster."""
        by_group: dict[str, list[tuple[ObjKey, Workload]]] = {}
        pins: dict[str, str] = {}
        for key in sorted(self.pending):
            staging = self._staging(key)
            if staging is None or (staging.get("metadata") or {}).get("deletionTimestamp") or key in self.placed:
                self.pending.pop(key, None)
                continue
            w = self._interpret_staging(key, staging)
            if w is None:
                continue
            gk = self._group_key(key, staging)
            by_group.setdefault(gk, []).append((key, w))
            for member, _ in self._group_members(key, staging):
                if member in self.placed:
                    pins[gk] = self.placed[member].cluster
        groups, members = [], {}
        classes = self._priority_classes() if by_group else None
        for gk, items in by_group.items():
            companions = self._companions_of(gk)
            g = PlacementGroup(gk, tuple(w for _, w in items), tuple(companions))
            try:
                [g] = with_priorities([g], classes)
            except InputError as e:                 # an unknown class: unplaced, retried (it may be created)
                for k, _ in items:
                    self._set_unplaced(k, f"unplaced: {e.message}")
                continue
            groups.append(A.planning_view(g, self.catalog))
            members[gk] = [k for k, _ in items]
        return groups, members, pins

    def _priority_classes(self) -> PriorityClasses:
        """The hub's PriorityClasses and WorkloadPriorityClasses, re-read at most every 30 s."""
        now = self.clock.now()
        cached = getattr(self, "_classes", None)
        if cached is None or now - cached[0] > 30.0:
            self._classes = (now, read_classes(self.kube, [self.config.hub_context]))
        return self._classes[1]

    def _companions_of(self, group_key: str) -> list[dict]:
        ns, _, name = group_key.partition("/")
        out = []
        for (api, kind), inf in self.companions.items():
            for obj in inf.items():
                meta = obj.get("metadata") or {}
                if (meta.get("annotations") or {}).get(ANN_GROUP) == name and meta.get("namespace") == ns:
                    out.append({**obj, "apiVersion": api, "kind": kind})
        return sorted(out, key=lambda o: (o["kind"], o["metadata"]["name"]))

    def _with_policy(self, group: PlacementGroup, keys: Sequence[ObjKey], pin: str | None) -> PlacementGroup:
        """Exclusions (clusters a workload was withdrawn from) and group pins, as the
        solver's own annotations on the planning copies."""
        excluded = sorted(set().union(*(self.excluded.get(k, set()) for k in keys)))
        if not excluded and not pin:
            return group
        workloads = []
        for w in group.workloads:
            ann = dict(w.annotations)
            if excluded:
                rule = f"{CLUSTER_NAME_LABEL} notin ({','.join(excluded)})"
                ann[ANN_SELECTOR] = f"{ann[ANN_SELECTOR]},{rule}" if ann.get(ANN_SELECTOR) else rule
            if pin:
                ann[ANN_CLUSTER] = pin
            workloads.append(dataclasses.replace(w, annotations=ann))
        return dataclasses.replace(group, workloads=tuple(workloads))

    def _prepare(self, group: PlacementGroup, cluster: str, plan_id: str, topology=None) -> list[dict]:
        objects = A.prepare_objects(group, self.entries[cluster], self.catalog, plan_id=plan_id,
                                    origin=lambda obj: origin_of(ObjKey.of(obj)), cluster=cluster,
                                    topology=topology)
        by_name = {(w.kind, w.name): w for w in group.workloads}
        for obj in objects:
            # finalizers on the hub belong to hub-side controllers (ours among them): a copy
            # carrying them could never be deleted on its cluster
            obj["metadata"].pop("finalizers", None)
            w = by_name.get((obj.get("kind"), obj["metadata"].get("name")))
            gen = (w.obj.get("metadata") or {}).get("generation") if w else None
            if gen is not None:
                obj["metadata"]["annotations"][ANN_SOURCE_GENERATION] = str(gen)
        return objects

    def _create_group(self, group: PlacementGroup, cluster: str, plan_id: str, plan) -> str | None:
        """Create the group's copies on `cluster`, then annotate its staging objects.
        Returns an error text, or None. Runs on the apply pool: touches only its keys."""
        # the planning view may differ (un-suspended); copies are made from the staging objects
        keys = [ObjKey(w.api_version, w.kind, w.namespace, w.name) for w in group.workloads]
        for k in keys:
            if self._copies(k):
                return None                          # placed meanwhile (adopted): never a second copy
        sources = []
        for k in keys:
            staging = self._staging(k)
            if staging is None:
                return "deleted meanwhile"
            sources.append(self.interpret(staging, source=str(k)))
        original = dataclasses.replace(group, workloads=tuple(sources))
        client = self._client(cluster)
        try:
            objects = self._prepare(original, cluster, plan_id,
                                    topology=choices_by_workload(plan.placements) if plan is not None else None)
            A.apply_group(client, objects, group_key=group.key,
                          pod_security=A.handoff_of(self.entries[cluster]).pod_security)
        except PlacerError as e:
            self._api_error(cluster, e)
            log.warning("group %s: placing on %s failed: %s", group.key, cluster, e)
            for k in keys:
                staging = self._staging(k)
                if staging is not None:
                    self._event(k, staging, WARNING, FAILED, f"placing on {cluster} failed: {e.message}")
            if _refused(e):         # the same cluster would refuse again: let the next round go elsewhere
                for k in keys:
                    self._exclude(k, cluster)
                return f"{e.message}; {cluster} is excluded for it, placing elsewhere"
            return e.message
        now = self.clock.now()
        for k, obj in zip(keys, objects[-len(keys):]):
            self._remote_informer(cluster, k).assume({**obj, "metadata": {**obj["metadata"], "resourceVersion": "0"}})
            self.placed[k] = Remote(cluster, now)
            self.pending.pop(k, None)
            self.metrics.inc("placer_placements_total")
            p = plan.placement(k.workload)
            nodes = len(p.nodes) if p else 0
            message = f"placed on {cluster} by plan {plan_id}" + (
                f": {p.pods} pods on {nodes} node{'s' if nodes != 1 else ''}" if p else "")
            staging = self._staging(k)
            if staging is not None:
                self._event(k, staging, NORMAL, PLACED, message + (f" (group {group.key})" if len(keys) > 1 else ""))
                try:
                    self._annotate(k, staging, {PLACED_CLUSTER: cluster, ANN_PHASE: Phase.PENDING.value,
                                                ANN_MESSAGE: message}, finalizer=True)
                except PlacerError as e:
                    self._api_error("hub", e)
                    self.queue.add(k, now + 1.0)      # the copy exists: the next pass annotates it
            log.info("%s: %s", k, message)
        return None

    def _set_unplaced(self, key: ObjKey, message: str) -> None:
        p = self.pending.get(key)
        if p is None:
            return
        p.message = message
        staging = self._staging(key)
        if staging is None:
            return
        self._event(key, staging, WARNING, UNPLACED, message)
        self._condition(key, staging, placed=False, reason=UNPLACED, message=message)
        try:
            self._annotate(key, staging, {ANN_PHASE: Phase.PENDING.value, ANN_MESSAGE: message[:1000],
                                          PLACED_CLUSTER: None}, finalizer=True)
        except PlacerError as e:
            self._api_error("hub", e)

    # --- helpers ----------------------------------------------------------------------------

    def _wall(self) -> datetime:
        return datetime.fromtimestamp(self.clock.wall(), timezone.utc)

    def _event(self, key: ObjKey, staging: dict, type_: str, reason: str, message: str) -> None:
        self.events.record({**staging, "apiVersion": key.api_version, "kind": key.kind}, type_, reason, message)

    def _condition(self, key: ObjKey, staging: dict, *, placed: bool, reason: str, message: str) -> None:
        """Set the Placed condition on a staging object whose status keeps conditions."""
        have = staging.get("status")
        cond = placed_condition(placed, reason, message, self._wall(), condition_of(have))
        old = condition_of(have)
        if old and all(old.get(k) == cond[k] for k in ("status", "reason", "message")):
            return
        status = with_condition(have, cond)
        if status is None:
            return
        res = self._resources[(key.api_version, key.kind)]
        try:
            if "status" in res.subresources:
                updated = self.hub.patch_status(res, key.name, {"conditions": status["conditions"]}, key.namespace)
            else:
                updated = self.hub.patch(res, key.name, {"status": {"conditions": status["conditions"]}},
                                         key.namespace)
            self.staging[(key.api_version, key.kind)].assume(updated)
        except PlacerError as e:
            self._api_error("hub", e)

    def _client(self, cluster: str) -> KubeClient:
        entry = self.entries[cluster]
        return self.kube.client(entry.context, cluster=cluster)

    def _api_error(self, cluster: str, e: PlacerError) -> None:
        self.metrics.inc("placer_api_errors_total", labels={"cluster": cluster})

    def _update_gauges(self) -> None:
        self.metrics.set("placer_queue_depth", len(self.queue) + len(self.pending))
        self.metrics.set("placer_unplaced", sum(1 for p in self.pending.values() if p.message))
        self.metrics.set("placer_placed", len(self.placed))
        self.metrics.set("placer_interpretations_total", self.interpret.misses, labels={"result": "computed"})
        self.metrics.set("placer_interpretations_total", self.interpret.hits, labels={"result": "remembered"})


def _refused(e: PlacerError) -> bool:
    """An apply that the cluster refused for this workload and would refuse again (someone
    else's object of the same name, a Pod Security level, a forbidden or invalid object),
    as opposed to a transient failure worth retrying there."""
    if isinstance(e, (A.NotOurs, InputError)):
        return True
    return isinstance(e, KubeError) and e.status in (400, 403, 404, 409, 422)


class _Unknown:
    pass


_UNKNOWN = _Unknown()


def _phase_detail(w: Workload) -> str:
    parts = [p for p in (w.reason, w.message) if p]
    return ": ".join(parts)


def _with_detail(message: str, detail: str) -> str:
    base = message.split(" | ", 1)[0]
    return f"{base} | {detail}"[:1000] if detail else base


def _with_name_label(c: Cluster) -> Cluster:
    return dataclasses.replace(c, labels={**c.labels, CLUSTER_NAME_LABEL: c.name})


def _node_signature(obj: Mapping[str, Any]) -> tuple:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    return (json.dumps(status.get("allocatable"), sort_keys=True), json.dumps(spec.get("taints"), sort_keys=True),
            bool(spec.get("unschedulable")), ready,
            json.dumps((obj.get("metadata") or {}).get("labels"), sort_keys=True))


# --- logging -------------------------------------------------------------------------------

class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
               "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out)


def setup_logging(fmt: str = "text", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    elif fmt == "text":
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    else:
        raise InputError(f"--log-format {fmt!r}: expected text or json")
    root = logging.getLogger("placer")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


# --- running it from the command line ----------------------------------------------------

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, option: str = "--reschedule-after") -> float:
    """`90`, `90s`, `15m`, `1h30m`, `500ms` -> seconds."""
    import re

    s = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s)
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", s)
    if not parts or "".join(n + u for n, u in parts) != s:
        raise InputError(f"{option} {text!r}: expected a duration such as 90s, 15m or 1h30m")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def config_from_file(clusters_file: str | None, *, batch_window: float, reschedule_after: float | None,
                     time_limit: float, kubeconfig: str | None = None) -> DaemonConfig:
    """The daemon's configuration from the clusters file's `hub:` section and live entries."""
    from .targets import FROM_FILE, resolve_clusters

    loaded = resolve_clusters(clusters_file, kubeconfig=kubeconfig)
    hub = loaded.hub
    if loaded.source != FROM_FILE:
        raise InputError(f"the daemon needs a clusters file with a `hub:` section (hub.context, "
                         f"hub.stagingNamespace); found {loaded.description}: pass --clusters FILE")
    if hub is None:
        raise InputError("the clusters file has no `hub:` section (hub.context, hub.stagingNamespace): "
                         "the daemon needs to know where to watch", source=loaded.description)
    live = tuple(c for c in loaded.clusters if c.context)
    if not live:
        raise InputError("no cluster entry names a context: the daemon only places on live clusters",
                         source=loaded.description)
    if batch_window < 0:
        raise InputError(f"--batch-window {batch_window}: must not be negative")
    return DaemonConfig(staging_namespace=hub.stagingNamespace, clusters=live, hub_context=hub.context,
                        secrets=hub.secrets,
                        batch_window=batch_window, reschedule_after=reschedule_after, time_limit=time_limit)


def run_daemon(config: DaemonConfig, *, kubeconfig: str | None, catalog: Catalog,
               metrics_addr: str | None) -> None:
    """Run until SIGTERM or SIGINT, then stop cleanly (giving the lease up)."""
    import signal

    kube = Kube(kubeconfig, max_workers=64)
    # definitions registered on the hub (first: they win) and the target clusters
    catalog = with_fleet_definitions(catalog, kube, [config.hub_context, *(e.context for e in config.clusters)],
                                     lambda m: log.warning("%s", m))
    daemon = Daemon(config, kube, catalog)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    log.info("watching %s on %s; placing on %s", config.staging_namespace, config.hub_context or "(current)",
             ", ".join(daemon.entries))
    daemon.start(metrics_addr=metrics_addr)
    try:
        while not done.wait(1.0):
            pass
    finally:
        log.info("stopping")
        daemon.stop()
        kube.close()
