"""Issue 25, item 2, on real control planes: a Deployment staged on a hub whose real
kube-controller-manager runs every workload controller (the session's `hub`). The hub's
ReplicaSet controller makes a pod in the staging namespace; the daemon places the Deployment
once and never that pod (before, it placed both: 4 GPUs bound for 2), and says once that the
hub runs workload controllers."""
from __future__ import annotations

import subprocess
import threading

import pytest

from placer import actuate as A
from placer import daemon as D
from placer.daemon import Daemon, DaemonConfig, FakeClock, LeaseTiming
from placer.definitions.catalog import load_catalog
from placer.inputs.clusters_file import ClusterEntry
from placer.kube import Kube, RetryPolicy
from placer.model.workload import WorkloadRef
from tests.daemon.daemon_helpers import gpu
from tests.kubeenv import bindir, wait_for

pytestmark = pytest.mark.kube

TARGETS = ("east", "west")


def test_a_pod_the_hubs_replicaset_made_is_never_placed(real):
    for c in TARGETS:
        real.nodes(c, count=1, prefix=f"{c[0]}n", gpus=8)
    ns = real.namespace("hub", real.unique("staging-ctl"))
    hub = real.client("hub")
    config = DaemonConfig(staging_namespace=ns, clusters=tuple(ClusterEntry(name=c, context=c) for c in TARGETS),
                          hub_context="hub", batch_window=0.05, time_limit=2.0, watch_retry=0.2,
                          lease=LeaseTiming(duration=6.0, renew_deadline=4.0, retry_period=0.5))
    kube = Kube(str(real.kubeconfig), retry=RetryPolicy(attempts=3, base=0.05, cap=0.5), timeout=10)
    daemon = Daemon(config, kube, load_catalog(), clock=FakeClock()).start()
    try:
        dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "embed-svc", "namespace": ns},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "embed"}},
                        "template": {"metadata": {"labels": {"app": "embed"}}, "spec": {"containers": [
                            {"name": "m", "image": "m:1", "resources": gpu(2)}]}}}}
        hub.create("deployments", dep, ns)
        (hub_pod,) = wait_for(lambda: [p for p in hub.list("pods", ns).items if any(
            o.get("kind") == "ReplicaSet" for o in p["metadata"].get("ownerReferences") or ())], 90,
            "the hub's ReplicaSet controller making a pod")
        where = wait_for(lambda: (hub.get("deployments", "embed-svc", ns)["metadata"].get("annotations") or {})
                         .get(D.PLACED_CLUSTER), 90, "the Deployment placed")
        wait_for(lambda: daemon.notices.said("controlled"), 60, "the hub's controllers noticed")
        assert daemon.wait_idle(60)
        real.wait_bound(where, ns, 1)
        for c in TARGETS:
            pods = real.pods(c, ns)
            assert len(pods) == (1 if c == where else 0), (c, [p["metadata"]["name"] for p in pods])
            assert all(p["metadata"]["name"].startswith("embed-svc-") and p["metadata"]["name"] !=
                       hub_pod["metadata"]["name"] for p in pods)
        meta = hub.get("pods", hub_pod["metadata"]["name"], ns)["metadata"]
        assert D.PLACED_CLUSTER not in (meta.get("annotations") or {})
        assert D.FINALIZER not in (meta.get("finalizers") or ())
        assert daemon.metrics.value("placer_placements_total") == 1
    finally:
        daemon.stop()


def test_a_job_staged_with_placers_managed_by_runs_on_its_target_only(real):
    """deploy.md's way to stage a Job on a hub whose Job controller runs: `spec.managedBy:
    placer.dev/daemon` (not suspended). The hub's Job controller leaves it alone (no pod on the
    hub, judged by the real kubectl watching the hub's pods from before the Job is created);
    the copy drops the marker, so the target's Job controller runs it and its scheduler binds
    both pods."""
    for c in TARGETS:
        real.nodes(c, count=1, prefix=f"{c[0]}m", gpus=8)
    ns = real.namespace("hub", real.unique("staging-mb"))
    hub = real.client("hub")
    watch = subprocess.Popen([str(bindir() / "kubectl"), "--kubeconfig", str(real.kubeconfig), "--context", "hub",
                              "get", "pods", "-n", ns, "--watch", "--output-watch-events", "-o", "name"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen: list[str] = []
    threading.Thread(target=lambda: seen.extend(line.strip() for line in watch.stdout), daemon=True).start()
    config = DaemonConfig(staging_namespace=ns, clusters=tuple(ClusterEntry(name=c, context=c) for c in TARGETS),
                          hub_context="hub", batch_window=0.05, time_limit=2.0, watch_retry=0.2,
                          lease=LeaseTiming(duration=6.0, renew_deadline=4.0, retry_period=0.5))
    kube = Kube(str(real.kubeconfig), retry=RetryPolicy(attempts=3, base=0.05, cap=0.5), timeout=10)
    daemon = Daemon(config, kube, load_catalog(), clock=FakeClock()).start()
    try:
        # the watch is live: a sentinel pod (the hub has no nodes: it stays Pending)
        hub.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sentinel"},
                            "spec": {"containers": [{"name": "c", "image": "pause"}]}}, ns)
        wait_for(lambda: any("pod/sentinel" in s for s in seen), 60, "the hub pod watch live")
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ft", "namespace": ns},
               "spec": {"managedBy": A.MANAGED_BY, "parallelism": 2, "completions": 2,
                        "template": {"spec": {"restartPolicy": "Never", "containers": [
                            {"name": "t", "image": "t:1", "resources": gpu(1)}]}}}}
        hub.create("jobs", job, ns)
        where = wait_for(lambda: (hub.get("jobs", "ft", ns)["metadata"].get("annotations") or {})
                         .get(D.PLACED_CLUSTER), 90, "the Job placed")
        copy = real.client(where).get("jobs", "ft", ns)
        assert "managedBy" not in copy["spec"] or copy["spec"]["managedBy"] == "kubernetes.io/job-controller"
        real.wait_bound(where, ns, 2, f"{A.WORKLOAD}={A.workload_label(WorkloadRef.of(job))}")
        assert [s for s in seen if "sentinel" not in s] == []
    finally:
        daemon.stop()
        watch.terminate()
        watch.wait(30)
