"""Shared set-up for the daemon tests and benchmark: a hub plus GPU clusters served by the
test API server, workload builders for the four kinds the issue names, a running Daemon."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping

import pytest
import yaml

import placer.daemon
from placer.daemon import Daemon, DaemonConfig, FakeClock, LeaseTiming
from placer.daemon.definitions import FleetDefinitions
from placer.definitions.catalog import load_catalog
from placer.inputs.clusters_file import ClusterEntry
from placer.kube import Kube, RetryPolicy
from tests.kubeapi.builders import gpu_node

STAGING = "placer-staging"
FAST_RETRY = RetryPolicy(attempts=3, base=0.05, cap=0.5)


def gpu(n: int) -> dict:
    return {"requests": {"nvidia.com/gpu": str(n), "cpu": "1", "memory": "1Gi"},
            "limits": {"nvidia.com/gpu": str(n)}}


def pod_template(gpus: int) -> dict:
    return {"spec": {"containers": [{"name": "main", "image": "trainer:1", "resources": gpu(gpus)}],
                     "restartPolicy": "Never"}}


def jobset(name: str, *, pods: int = 2, gpus: int = 4, suspend: bool | None = None, ns: str = STAGING,
           annotations: Mapping[str, str] | None = None) -> dict:
    spec: dict[str, Any] = {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
        "parallelism": pods, "completions": pods, "template": pod_template(gpus)}}}]}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": ns, "annotations": dict(annotations or {})}, "spec": spec}


def pytorchjob(name: str, *, workers: int = 1, gpus: int = 4, ns: str = STAGING,
               annotations: Mapping[str, str] | None = None) -> dict:
    tpl = {"spec": {"containers": [{"name": "pytorch", "image": "trainer:1", "resources": gpu(gpus)}]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": ns, "annotations": dict(annotations or {})},
            "spec": {"runPolicy": {"suspend": True},
                     "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": tpl},
                                             "Worker": {"replicas": workers, "template": tpl}}}}


def raycluster(name: str, *, workers: int = 2, gpus: int = 2, ns: str = STAGING,
               annotations: Mapping[str, str] | None = None) -> dict:
    head = {"spec": {"containers": [{"name": "ray-head", "image": "ray:2",
                                     "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]}}
    worker = {"spec": {"containers": [{"name": "ray-worker", "image": "ray:2", "resources": gpu(gpus)}]}}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": ns, "annotations": dict(annotations or {})},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": head},
                     "workerGroupSpecs": [{"groupName": "gpu", "replicas": workers, "minReplicas": workers,
                                           "maxReplicas": workers, "rayStartParams": {}, "template": worker}]}}


def leaderworkerset(name: str, *, size: int = 2, gpus: int = 4, ns: str = STAGING,
                    annotations: Mapping[str, str] | None = None) -> dict:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": ns, "annotations": dict(annotations or {})},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": size, "workerTemplate": {"spec": {
                "containers": [{"name": "vllm", "image": "vllm:1", "resources": gpu(gpus)}]}}}}}


# the status an operator would write once every pod runs, per kind
RUNNING_STATUS: dict[str, dict] = {
    "JobSet": {"replicatedJobsStatus": [{"name": "workers", "ready": 1, "active": 1, "succeeded": 0,
                                         "failed": 0, "suspended": 0}]},
    "PyTorchJob": {"conditions": [{"type": "Created", "status": "True", "reason": "PyTorchJobCreated"},
                                  {"type": "Running", "status": "True", "reason": "PyTorchJobRunning",
                                   "message": "job is running"}]},
    "RayCluster": {"state": "ready", "readyWorkerReplicas": 2, "desiredWorkerReplicas": 2},
    "LeaderWorkerSet": {"readyReplicas": 1, "replicas": 1,
                        "conditions": [{"type": "Available", "status": "True", "reason": "AllGroupsReady",
                                        "message": "all replicas are ready"}]},
}


class Env:
    """hub + GPU clusters, a user-side client for the hub, and daemons to start."""

    def __init__(self, fleet, clusters=("alpha", "beta")):
        self.fleet = fleet
        self.kube = Kube(str(fleet.kubeconfig), retry=FAST_RETRY, timeout=10)
        self.hub = self.kube.client("hub")
        self.entries = tuple(ClusterEntry(name=c, context=c) for c in clusters)
        self.catalog = load_catalog()
        self.daemons: list[Daemon] = []

    def config(self, **kw) -> DaemonConfig:
        opts: dict[str, Any] = dict(
            staging_namespace=STAGING, clusters=self.entries, hub_context="hub", batch_window=0.05,
            retry_interval=30.0, resync_interval=60.0, time_limit=1.0, watch_retry=0.1,
            lease=LeaseTiming(duration=3.0, renew_deadline=2.0, retry_period=0.2))
        opts.update(kw)
        return DaemonConfig(**opts)

    def daemon(self, clock: FakeClock | None = None, start: bool = True, kubeconfig: str | Path | None = None,
               retry: RetryPolicy = FAST_RETRY, follow: str | None = None, client_timeout: float = 10,
               **kw) -> Daemon:
        """A daemon (started unless start=False). kubeconfig: e.g. token_kubeconfig(...), so that the
        servers' request logs tell this daemon's requests apart; retry: the client's policy;
        follow: "placer" or "karta" to read (and follow) the definitions the hub and the targets
        register, preferring that format, as `placer daemon --prefer` does; client_timeout: the
        clients' own read timeout (the daemon bounds target requests by its request deadline)."""
        kube = Kube(str(kubeconfig or self.fleet.kubeconfig), retry=retry, timeout=client_timeout, max_workers=48)
        definitions = None if follow is None else FleetDefinitions(
            self.catalog, kube, ["hub", *(e.context for e in self.entries)], prefer=follow)
        d = Daemon(self.config(**kw), kube, self.catalog if definitions is None else definitions.load(),
                   clock=clock or FakeClock(), definitions=definitions)
        self.daemons.append(d)
        if start:
            d.start()
        return d

    def stop(self) -> None:
        for d in self.daemons:
            d.stop()

    # -- staging side --
    def create(self, obj: dict) -> dict:
        return self.hub.create(self.hub.resource_for(obj["apiVersion"], obj["kind"]), obj, obj["metadata"]["namespace"])

    def staged(self, obj: dict) -> dict:
        return self.fleet["hub"].get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], STAGING)

    def annotations(self, obj: dict) -> dict:
        return (self.staged(obj).get("metadata") or {}).get("annotations") or {}

    def copies(self, obj: dict) -> dict[str, dict]:
        """cluster -> the remote copy, read straight from the stores."""
        out = {}
        for e in self.entries:
            for o in self.fleet[e.name].objects(obj["apiVersion"], obj["kind"], STAGING):
                if o["metadata"]["name"] == obj["metadata"]["name"]:
                    out[e.name] = o
        return out


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition",
             interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def wait_progress(count: Callable[[], int], target: int, stall: float = 20.0, what: str = "progress",
                  interval: float = 0.02) -> None:
    """Until `count()` reaches `target`, failing only when it has not moved for `stall`
    seconds: no total budget, so a slow (loaded) machine that keeps making progress passes,
    and a daemon that stopped making it still fails."""
    last, since = count(), time.monotonic()
    while last < target:
        time.sleep(interval)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > stall:
            raise AssertionError(f"no progress for {stall:.0f}s waiting for {what} ({last} of {target})")


def gpu_nodes(prefix: str, count: int, gpus: int = 8) -> list[dict]:
    return [gpu_node(f"{prefix}{i}", gpus=gpus) for i in range(count)]


WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def token_kubeconfig(fleet, path: str | Path, token: str) -> Path:
    """A kubeconfig for every cluster of `fleet` whose users present `token` (the test servers
    accept any token unless started with tokens=True): each request log then says which
    client made a request (Request.token)."""
    doc = yaml.safe_load(Path(fleet.kubeconfig).read_text())
    for user in doc["users"]:
        user["user"] = {"token": token}
    path = Path(path)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def writes_by(fleet, token: str, clusters, exclude: tuple[str, ...] = ("leases",)) -> list:
    """Write requests that the client presenting `token` made to `clusters` (Lease traffic aside)."""
    return [r for c in clusters for r in fleet[c].requests.select(token=token)
            if r.verb in WRITE_VERBS and r.resource not in exclude]


def created_copies(fleet, clusters, resource: str = "jobsets") -> dict[str, list[str]]:
    """name -> every cluster where an object of that name was ever created, from the servers'
    request logs (each 201 of a create or an apply): what existed at any moment, not only now."""
    out: dict[str, list[str]] = {}
    for c in clusters:
        for r in fleet[c].requests.created(resource):
            out.setdefault(r.name, []).append(c)
    return out


def on_two_clusters(fleet, clusters, resource: str = "jobsets") -> dict[str, list[str]]:
    """Workloads that ever had copies on more than one cluster (split brain)."""
    return {n: cs for n, cs in created_copies(fleet, clusters, resource).items() if len(set(cs)) > 1}


def events_for(fleet, name: str, reason: str | None = None, namespace: str = STAGING) -> list[dict]:
    """Events on the hub about the staging object `name` (optionally one reason), core/v1 or
    events.k8s.io/v1 (the latter's `regarding` and `note` read as `involvedObject` and `message`)."""
    out = []
    for api in ("v1", "events.k8s.io/v1"):
        for e in fleet["hub"].objects(api, "Event", namespace):
            about = e.get("involvedObject") or e.get("regarding") or {}
            if about.get("name") == name and (reason is None or e.get("reason") == reason):
                out.append({**e, "message": e.get("message") or e.get("note") or ""})
    return out


# Today's daemon is the single module placer/daemon.py; issue 13 rewrites it as the package
# placer/daemon/. Tests of behaviours the old module is known to violate are expected failures
# there only (strict: they must fail, for the reason given), and plain tests against the package.
OLD_DAEMON = not hasattr(placer.daemon, "__path__")


def fails_on_old_daemon(reason: str, strict: bool = True):
    return pytest.mark.xfail(OLD_DAEMON, reason=f"today's placer/daemon.py: {reason}", strict=strict,
                             raises=AssertionError)
