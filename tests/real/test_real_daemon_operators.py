"""`placer daemon` end to end with a real operator (issue 20): `hack/kube-env up --hub hub --operators
jobset hub east` starts a hub (the JobSet CRD only, no workload controller, no scheduler) and a target
east running the real JobSet controller and KWOK. A JobSet staged on the hub is placed once on east;
the controller's pods run there on KWOK nodes; the daemon mirrors the controller's real status to
the staging object, Running and then Completed once KWOK completes the pods; deleting the staging
object removes the copy and, through east's real garbage collector (kube-controller-manager), the
copy's Jobs and pods. Every wait is on a condition."""
from __future__ import annotations

import pytest

from placer import daemon as D
from placer.daemon import Daemon, DaemonConfig, FakeClock, LeaseTiming
from placer.definitions.catalog import load_catalog
from placer.inputs.clusters_file import ClusterEntry
from placer.kube import Kube, RetryPolicy
from placer.model.errors import NotFound
from tests.daemon.daemon_helpers import STAGING, jobset
from tests.kubeenv import require_binaries, wait_for
from tests.realkube.operators import COMPLETE

pytestmark = pytest.mark.kube

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"


@pytest.fixture(scope="module")
def hub_east(tmp_path_factory):
    from tests.kubeenv import RealKube

    require_binaries()
    env = RealKube(tmp_path_factory.mktemp("daemon-operators"), ("hub", "east"), operators="jobset", hub="hub")
    yield env
    env.down()


@pytest.fixture
def daemon(hub_east):
    hub_east.namespace("hub", STAGING)
    hub_east.nodes("east", count=2, prefix="e-", gpus=8, kwok=True)
    config = DaemonConfig(staging_namespace=STAGING, clusters=(ClusterEntry(name="east", context="east"),),
                          hub_context="hub", batch_window=0.05, time_limit=2.0, watch_retry=0.2,
                          lease=LeaseTiming(duration=6.0, renew_deadline=4.0, retry_period=0.5))
    kube = Kube(str(hub_east.kubeconfig), retry=RetryPolicy(attempts=3, base=0.05, cap=0.5), timeout=10)
    d = Daemon(config, kube, load_catalog(), clock=FakeClock()).start()
    yield d
    d.stop()


def annotations(obj: dict | None) -> dict:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def test_a_staged_jobset_runs_on_the_real_operator_and_its_status_and_deletion_follow(hub_east, daemon):
    env = hub_east
    hub, east = env.client("hub"), env.client("east")
    res, remote = hub.resource_for(*JOBSET), east.resource_for(*JOBSET)

    def staged():
        try:
            return hub.get(res, "train", STAGING)
        except NotFound:
            return None

    def copy():
        try:
            return east.get(remote, "train", STAGING)
        except NotFound:
            return None

    hub.create(res, jobset("train", pods=2, gpus=4, suspend=True), STAGING)
    assert wait_for(lambda: annotations(staged()).get(D.PLACED_CLUSTER), 60, "train placed") == "east"
    assert D.FINALIZER in staged()["metadata"]["finalizers"]
    assert copy()["spec"]["suspend"] is False

    # the real controller's pods (one Job of two), bound on east's KWOK nodes and Running
    selector = f"{JOBSET_NAME}=train"
    pods = env.wait_bound("east", STAGING, 2, selector, timeout=120)
    assert len(pods) == 2 and {p["spec"]["nodeName"] for p in pods} <= {"e-0", "e-1"}
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "Job" for p in pods)
    wait_for(lambda: all((p.get("status") or {}).get("phase") == "Running" for p in env.pods("east", STAGING, selector))
             or None, 90, "KWOK runs the pods")

    # the controller's own status, mirrored to the staging object
    wait_for(lambda: annotations(staged()).get(D.ANN_PHASE) == "Running" or None, 90, "Running mirrored to the hub")
    ready = [s for s in staged()["status"]["replicatedJobsStatus"] if s["name"] == "workers"]
    assert ready and ready[0]["ready"] == 1, staged()["status"]
    assert not hub.list("pods", STAGING).items                 # nothing runs on the hub

    # KWOK completes the pods once annotated; the controller says Completed; the daemon mirrors it
    for p in env.pods("east", STAGING, selector):
        east.patch("pods", p["metadata"]["name"], {"metadata": {"annotations": {COMPLETE: "1s"}}}, STAGING)
    wait_for(lambda: annotations(staged()).get(D.ANN_PHASE) == "Completed" or None, 120, "Completed mirrored")
    assert copy()["status"].get("terminalState") == "Completed"
    assert staged()["status"].get("terminalState") == "Completed"
    assert all((p.get("status") or {}).get("phase") == "Succeeded" for p in env.pods("east", STAGING, selector))
    assert daemon.metrics.value("placer_placements_total") == 1

    # deleting the staging object: the copy goes, and east's garbage collector takes its Jobs and pods
    assert east.list("jobs", STAGING).items
    hub.delete(res, "train", STAGING)
    wait_for(lambda: staged() is None, 60, "staging object finalized")
    assert copy() is None
    wait_for(lambda: not east.list("jobs", STAGING).items or None, 120, "the copy's Jobs collected")
    wait_for(lambda: not env.pods("east", STAGING, selector) or None, 120, "the copy's pods collected")
