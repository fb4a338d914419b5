"""A hub on which staged work never runs (issue 25, "Must show"), on real control planes:
`hack/kube-env up --hub hub --operators jobset,lws hub east west` starts the hub in the
recommended shape (etcd, kube-apiserver, a kube-controller-manager without workload
controllers; no scheduler, no KWOK; the JobSet and LWS CRDs only) and east and west with
their real schedulers, KWOK GPU nodes and the real JobSet and LeaderWorkerSet operators.

A Job, a Deployment, a StatefulSet, a JobSet and a LeaderWorkerSet are staged on the hub;
each is placed exactly once, on a target whose real scheduler binds every one of its pods,
and a `kubectl get pods --all-namespaces --watch` on the hub, running through the whole
test, sees no pod but the sentinel the test creates to know the watch is live. The Job is
staged as a user writes it: the hub's API server still generates its selector and
`controller-uid` labels, and east or west accept the copy only without them."""
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
from placer.model.errors import NotFound
from placer.model.workload import WorkloadRef
from tests.daemon.daemon_helpers import STAGING, gpu, pod_template
from tests.kubeenv import bindir, require_binaries, wait_for

pytestmark = pytest.mark.kube

TARGETS = ("east", "west")
SENTINEL_NS = "hub-watch-check"


@pytest.fixture(scope="module")
def hub_env(tmp_path_factory):
    from tests.kubeenv import RealKube

    require_binaries()
    env = RealKube(tmp_path_factory.mktemp("hub"), ("hub", *TARGETS), operators="jobset,lws", hub="hub")
    yield env
    env.down()


class HubPods:
    """The real kubectl watching every pod on the hub, from before anything is staged."""

    def __init__(self, env):
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [str(bindir() / "kubectl"), "--kubeconfig", str(env.kubeconfig), "--context", "hub", "get", "pods",
             "--all-namespaces", "--watch", "--output-watch-events", "-o", "name"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def others(self) -> list[str]:
        return [line for line in self.lines if "pod/sentinel" not in line]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def workloads() -> list[dict]:
    def meta(name):
        return {"name": name, "namespace": STAGING}
    one = pod_template(1)
    return [
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("finetune-7b"),
         "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed", "template": one}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("embed-svc"),
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "embed"}},
                  "template": {"metadata": {"labels": {"app": "embed"}}, "spec": {"containers": [
                      {"name": "m", "image": "m:1", "resources": gpu(2)}]}}}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("shards"),
         "spec": {"replicas": 2, "serviceName": "shards", "selector": {"matchLabels": {"app": "shards"}},
                  "template": {"metadata": {"labels": {"app": "shards"}}, "spec": {"containers": [
                      {"name": "s", "image": "s:1", "resources": gpu(1)}]}}}},
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta("pretrain"),
         "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
             "parallelism": 2, "completions": 2, "template": pod_template(2)}}}]}},
        {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta("vllm"),
         "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
             "containers": [{"name": "vllm", "image": "vllm:1", "resources": gpu(1)}]}}}}},
    ]


PODS = {"Job": 2, "Deployment": 1, "StatefulSet": 2, "JobSet": 2, "LeaderWorkerSet": 2}


def test_staged_work_runs_once_on_a_target_and_never_on_the_hub(hub_env):
    env = hub_env
    hub = env.client("hub")
    env.namespace("hub", STAGING)
    env.namespace("hub", SENTINEL_NS)
    for c in TARGETS:
        env.nodes(c, count=2, prefix=f"{c[0]}gpu-", gpus=8, kwok=True)
    pods = HubPods(env)
    daemon = None
    try:
        # the watch is live once it reports a pod the test made (on this hub nothing binds or runs it)
        hub.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sentinel"},
                            "spec": {"containers": [{"name": "c", "image": "pause"}]}}, SENTINEL_NS)
        wait_for(lambda: any("pod/sentinel" in line for line in pods.lines), 60, "the hub pod watch live")

        config = DaemonConfig(staging_namespace=STAGING, clusters=tuple(ClusterEntry(name=c, context=c) for c in TARGETS),
                              hub_context="hub", batch_window=0.05, time_limit=2.0, watch_retry=0.2,
                              lease=LeaseTiming(duration=6.0, renew_deadline=4.0, retry_period=0.5))
        kube = Kube(str(env.kubeconfig), retry=RetryPolicy(attempts=3, base=0.05, cap=0.5), timeout=10)
        daemon = Daemon(config, kube, load_catalog(), clock=FakeClock()).start()

        staged = workloads()
        for obj in staged:
            hub.create(hub.resource_for(obj["apiVersion"], obj["kind"]), obj, STAGING)
        job = hub.get("jobs", "finetune-7b", STAGING)
        assert "controller-uid" in str(job["spec"]["selector"])     # the hub's API server generated it

        for obj in staged:
            res = hub.resource_for(obj["apiVersion"], obj["kind"])
            name = obj["metadata"]["name"]

            def placed(res=res, name=name):
                ann = hub.get(res, name, STAGING)["metadata"].get("annotations") or {}
                return ann.get(D.PLACED_CLUSTER)
            where = wait_for(placed, 120, f"{obj['kind']} {name} placed")
            copies = []
            for c in TARGETS:
                client = env.client(c)
                try:
                    copies.append((c, client.get(client.resource_for(obj["apiVersion"], obj["kind"]), name, STAGING)))
                except NotFound:
                    pass
            assert [c for c, _ in copies] == [where], (obj["kind"], [c for c, _ in copies])
            selector = f"{A.WORKLOAD}={A.workload_label(WorkloadRef.of(obj))}"
            bound = env.wait_bound(where, STAGING, PODS[obj["kind"]], selector, timeout=180)
            assert len(bound) == PODS[obj["kind"]], (obj["kind"], [p["metadata"]["name"] for p in bound])

        assert daemon.wait_idle(60)
        assert daemon.metrics.value("placer_placements_total") == len(staged)
        assert pods.others() == [], pods.others()
        assert not daemon.notices.said("controlled")      # nothing on this hub made anything
        assert hub.list("pods", None).items and all(
            p["metadata"]["name"] == "sentinel" for p in hub.list("pods", None).items)
    finally:
        if daemon is not None:
            daemon.stop()
        pods.stop()
