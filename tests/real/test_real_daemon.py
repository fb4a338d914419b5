"""`placer daemon` end to end on real control planes (hack/kube-env): a hub with a staging namespace and
the upstream JobSet CRD (with its real status subresource and schema), GPU clusters east and west, two
daemons electing a leader through a real coordination.k8s.io Lease, status mirrored back through the
hub's status subresource, finalizer cleanup, a restarted daemon adopting what was placed."""
from __future__ import annotations

import pytest

from placer import daemon as D
from placer.daemon import Daemon, DaemonConfig, FakeClock, LeaseTiming
from placer.definitions.catalog import load_catalog
from placer.inputs.clusters_file import ClusterEntry
from placer.kube import Kube, RetryPolicy
from placer.model.errors import NotFound
from tests.daemon.daemon_helpers import RUNNING_STATUS, STAGING, jobset
from tests.kubeenv import module_crds, wait_for

pytestmark = pytest.mark.kube

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
CLUSTERS = ("east", "west")


class Daemons:
    def __init__(self, real):
        self.real = real
        self.hub = real.client("hub")
        self.res = self.hub.resource_for(*JOBSET)
        self.catalog = load_catalog()
        self.running: list[Daemon] = []

    def start(self, identity: str) -> Daemon:
        config = DaemonConfig(staging_namespace=STAGING, clusters=tuple(ClusterEntry(name=c, context=c) for c in CLUSTERS),
                              hub_context="hub", batch_window=0.05, retry_interval=30.0, resync_interval=60.0,
                              time_limit=1.0, watch_retry=0.2, identity=identity,
                              lease=LeaseTiming(duration=4.0, renew_deadline=3.0, retry_period=0.3))
        kube = Kube(str(self.real.kubeconfig), retry=RetryPolicy(attempts=3, base=0.05, cap=0.5), timeout=10)
        d = Daemon(config, kube, self.catalog, clock=FakeClock())
        self.running.append(d)
        return d.start()

    def stop(self) -> None:
        for d in self.running:
            d.stop()

    def staged(self, name: str) -> dict | None:
        try:
            return self.hub.get(self.res, name, STAGING)
        except NotFound:
            return None

    def cluster(self, name: str) -> str | None:
        return ((self.staged(name) or {}).get("metadata", {}).get("annotations") or {}).get(D.PLACED_CLUSTER)

    def copies(self, name: str) -> dict[str, dict]:
        out = {}
        for c in CLUSTERS:
            client = self.real.client(c)
            try:
                out[c] = client.get(client.resource_for(*JOBSET), name, STAGING)
            except NotFound:
                pass
        return out


@pytest.fixture
def daemons(real):
    crds = module_crds("jobset")       # sigs.k8s.io/jobset's own CRD, pinned in hack/operators-release
    for c in ("hub", *CLUSTERS):
        real.install_crds(c, crds)
    real.nodes("east", count=2, prefix="e", gpus=8)
    real.nodes("west", count=2, prefix="w", gpus=8)
    real.namespace("hub", STAGING)
    for o in real.client("hub").list(real.client("hub").resource_for(*JOBSET), STAGING).items:
        real.client("hub").patch(real.client("hub").resource_for(*JOBSET), o["metadata"]["name"],
                                 {"metadata": {"finalizers": None}}, STAGING)
        real.client("hub").delete(real.client("hub").resource_for(*JOBSET), o["metadata"]["name"], STAGING,
                                  missing_ok=True)
    ds = Daemons(real)
    yield ds
    ds.stop()


def test_daemon_end_to_end_with_leader_election_status_finalizer_and_adoption(daemons):
    a, b = daemons.start("a"), daemons.start("b")
    wait_for(lambda: a.leader.is_leader or b.leader.is_leader, 30, "a leader through the real Lease")
    leader, standby = (a, b) if a.leader.is_leader else (b, a)
    lease = daemons.hub.get("leases", "placer-daemon", STAGING)
    assert lease["spec"]["holderIdentity"] == leader.config.identity

    daemons.hub.create(daemons.res, jobset("train", pods=2, gpus=4, suspend=True), STAGING)
    where = wait_for(lambda: daemons.cluster("train"), 30, "train placed")
    staged = daemons.staged("train")
    assert D.FINALIZER in staged["metadata"]["finalizers"]
    (copy,) = daemons.copies("train").values()
    assert list(daemons.copies("train")) == [where] and copy["spec"]["suspend"] is False
    assert copy["metadata"]["labels"]["placer.dev/managed"] == "true"
    assert standby.metrics.value("placer_placements_total") == 0

    # the test plays the JobSet operator on the copy: the real status subresource, then the hub's
    remote = daemons.real.client(where)
    remote.patch_status(remote.resource_for(*JOBSET), "train", RUNNING_STATUS["JobSet"], STAGING)
    wait_for(lambda: (daemons.staged("train")["metadata"].get("annotations") or {}).get(D.ANN_PHASE) == "Running",
             30, "Running mirrored to the hub")
    assert daemons.staged("train")["status"]["replicatedJobsStatus"] == RUNNING_STATUS["JobSet"]["replicatedJobsStatus"]

    # the leader goes away: the standby takes the Lease and places new arrivals
    leader.stop()
    daemons.hub.create(daemons.res, jobset("after", pods=1, gpus=2, suspend=True), STAGING)
    wait_for(lambda: daemons.cluster("after"), 30, "the standby took over")
    assert standby.leader.is_leader

    # restart: the standby dies without releasing; a new daemon adopts both, placing nothing again
    standby.stop(release=False)
    c = daemons.start("c")
    wait_for(lambda: c.leader.is_leader, 30, "the new daemon leads once the old Lease expires")
    assert c.wait_idle(20)
    assert c.metrics.value("placer_placements_total") == 0
    assert len(daemons.copies("train")) == 1 and len(daemons.copies("after")) == 1

    # delete: the copy goes, then the finalizer, then the staging object
    daemons.hub.delete(daemons.res, "train", STAGING)
    wait_for(lambda: daemons.staged("train") is None, 30, "staging object finalized")
    assert daemons.copies("train") == {} and len(daemons.copies("after")) == 1
