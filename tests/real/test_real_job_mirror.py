"""A batch/v1 Job staged on a real hub, placed by the daemon on a real target (kube-controller-manager's
Job controller, KWOK completing its pod), finishes: its finished status reaches the staging Job. The
real kube-apiserver is the judge: it refuses a finished Job's status whose uncountedTerminatedPods
still holds uids, which a merge patch that nulled only top-level keys left there (seen on every
Job of benchmarks/peers_replay.py)."""
from __future__ import annotations

import pytest

from placer.daemon import Daemon, DaemonConfig, FakeClock, LeaseTiming
from placer.definitions.catalog import load_catalog
from placer.inputs.clusters_file import ClusterEntry
from placer.kube import Kube, RetryPolicy
from placer.model.errors import NotFound
from tests.daemon.daemon_helpers import STAGING
from tests.kubeenv import require_binaries, wait_for
from tests.realkube.operators import COMPLETE

pytestmark = pytest.mark.kube

UID = "5d1c2a9e-0000-4000-8000-000000000001"


@pytest.fixture(scope="module")
def hub_east(tmp_path_factory):
    from tests.kubeenv import RealKube

    require_binaries()
    env = RealKube(tmp_path_factory.mktemp("job-mirror"), ("hub", "east"), hub="hub")
    yield env
    env.down()


def job(name: str) -> dict:
    container = {"name": "train", "image": "registry.example/train:1",
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                               "limits": {"nvidia.com/gpu": "1"}}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": STAGING},
            "spec": {"suspend": True, "parallelism": 1, "completions": 1, "backoffLimit": 0,
                     "template": {"metadata": {"annotations": {COMPLETE: "15s"}},
                                  "spec": {"restartPolicy": "Never", "containers": [container]}}}}


def test_a_finished_jobs_status_is_mirrored_to_the_staging_job(hub_east):
    env = hub_east
    env.namespace("hub", STAGING)
    env.nodes("east", count=1, prefix="e-", gpus=8, kwok=True)
    config = DaemonConfig(staging_namespace=STAGING, clusters=(ClusterEntry(name="east", context="east"),),
                          hub_context="hub", batch_window=0.05, time_limit=2.0, watch_retry=0.2,
                          lease=LeaseTiming(duration=6.0, renew_deadline=4.0, retry_period=0.5))
    kube = Kube(str(env.kubeconfig), retry=RetryPolicy(attempts=3, base=0.05, cap=0.5), timeout=10)
    daemon = Daemon(config, kube, load_catalog(), clock=FakeClock()).start()
    hub, east = env.client("hub"), env.client("east")

    def condition(client, kind: str) -> dict | None:
        try:
            status = client.get("jobs", "train", STAGING).get("status") or {}
        except NotFound:
            return None
        return next((c for c in status.get("conditions") or () if c["type"] == kind and c["status"] == "True"), None)

    try:
        hub.create("jobs", job("train"), STAGING)
        wait_for(lambda: [p for p in env.pods("east", STAGING) if (p.get("status") or {}).get("phase") == "Running"]
                 or None, 120, "the copy's pod runs on east")
        # what the mirror wrote when the copy's status was caught between the pod's success and the
        # Job's count of it (the Job controller's uncountedTerminatedPods), as on the replay's Jobs
        hub.patch_status("jobs", "train", {"uncountedTerminatedPods": {"Succeeded": [UID]}}, STAGING)
        wait_for(lambda: condition(east, "Complete"), 120, "the copy completes on east")
        wait_for(lambda: condition(hub, "Complete"), 60, "the finished status mirrored to the hub")
        status = hub.get("jobs", "train", STAGING)["status"]
        assert status.get("succeeded") == 1
        assert not (status.get("uncountedTerminatedPods") or {}).get("Succeeded")
    finally:
        daemon.stop()
