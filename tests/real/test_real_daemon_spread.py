"""`placer daemon` keeps a `duplicate` spread on real control planes (hack/kube-env, issue 21):
its copy on a cluster that goes away (the daemon's connections to east refused, through a TCP
relay the test closes) is placed again on the other cluster, and deleted from east once east
answers again; the real API servers hold at most one copy each throughout."""
from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
import yaml

from placer.daemon import Daemon, DaemonConfig, FakeClock, LeaseTiming
from placer.definitions.catalog import load_catalog
from placer.inputs.clusters_file import ClusterEntry
from placer.kube import Kube, RetryPolicy
from placer.model.errors import NotFound
from placer.model.names import PLACED_SHARES
from tests.daemon.daemon_helpers import STAGING, jobset
from tests.kubeenv import module_crds, wait_for

pytestmark = pytest.mark.kube

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
CLUSTERS = ("east", "west")


class Relay:
    """A TCP relay to one API server: `close()` refuses new connections and cuts open ones
    (the server itself keeps running), `open()` listens again on the same port."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.port = 0
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.server: socket.socket | None = None
        self.open()

    def open(self) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self.port, self.server = s.getsockname()[1], s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def _accept(self, s: socket.socket) -> None:
        while True:
            try:
                client, _ = s.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        with self.lock:
            conns, self.conns = self.conns, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass


def relayed_kubeconfig(real, path: Path, clusters: tuple[str, ...]) -> tuple[Path, dict[str, Relay]]:
    """A copy of the session's kubeconfig whose `clusters` each go through a Relay (TLS passes
    through untouched: the server name stays the one its certificate names)."""
    doc = yaml.safe_load(Path(real.kubeconfig).read_text())
    relays = {}
    for cluster in clusters:
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == cluster)
        entry = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        scheme, _, rest = entry["server"].partition("://")
        host, _, port = rest.split("/")[0].rpartition(":")
        relays[cluster] = Relay(host.strip("[]"), int(port))
        entry["server"] = f"{scheme}://{host}:{relays[cluster].port}"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, relays


def _copies(real, name: str) -> dict[str, dict]:
    out = {}
    for c in CLUSTERS:
        client = real.client(c)
        try:
            out[c] = client.get(client.resource_for(*JOBSET), name, STAGING)
        except NotFound:
            pass
    return out


@pytest.fixture
def setup(real, tmp_path):
    crds = module_crds("jobset")
    for c in ("hub", *CLUSTERS):
        real.install_crds(c, crds)
        real.namespace(c, STAGING)
    real.nodes("east", count=1, prefix="e", gpus=8)
    real.nodes("west", count=1, prefix="w", gpus=8)
    real.purge("hub", JOBSET, STAGING)
    kubeconfig, relays = relayed_kubeconfig(real, tmp_path / "kubeconfig", CLUSTERS)
    config = DaemonConfig(staging_namespace=STAGING, clusters=tuple(ClusterEntry(name=c, context=c) for c in CLUSTERS),
                          hub_context="hub", batch_window=0.05, retry_interval=30.0, resync_interval=60.0,
                          time_limit=1.0, watch_retry=0.2,
                          lease=LeaseTiming(duration=4.0, renew_deadline=3.0, retry_period=0.3))
    kube = Kube(str(kubeconfig), retry=RetryPolicy(attempts=3, base=0.05, cap=0.5), timeout=10)
    d = Daemon(config, kube, load_catalog(), clock=FakeClock()).start()
    yield d, relays
    for relay in relays.values():
        if relay.server is None:
            relay.open()
    d.stop()
    for relay in relays.values():
        relay.close()
    real.purge("hub", JOBSET, STAGING)         # the hub is never wiped: leave no staged work behind


def test_duplicate_copy_is_re_placed_when_its_cluster_goes_away_and_deleted_when_it_returns(real, setup):
    d, relays = setup
    hub = real.client("hub")
    res = hub.resource_for(*JOBSET)
    one = jobset("dup", pods=1, gpus=1)
    one["metadata"]["annotations"] = {"placer.dev/spread": "duplicate", "placer.dev/spread-clusters": "1"}
    hub.create(res, one, STAGING)

    def shares() -> str:
        return ((hub.get(res, "dup", STAGING).get("metadata") or {}).get("annotations") or {}).get(PLACED_SHARES, "")
    wait_for(lambda: len(_copies(real, "dup")) == 1 and shares() in CLUSTERS, timeout=60, what="one copy")
    first = shares()
    [other] = [c for c in CLUSTERS if c != first]
    assert list(_copies(real, "dup")) == [first]
    relays[first].close()                        # the copy's cluster goes away, for the daemon only
    wait_for(lambda: shares() == other and other in _copies(real, "dup"), timeout=90,
             what=f"the copy placed again on {other}")
    assert first in _copies(real, "dup")         # still there: the daemon could not reach it to delete it
    relays[first].open()
    wait_for(lambda: list(_copies(real, "dup")) == [other], timeout=90, what=f"{first}'s stale copy deleted")
    events = [e for e in real.client("hub").list("events", STAGING).items
              if (e.get("involvedObject") or {}).get("name") == "dup"]
    reasons = {e.get("reason") for e in events}
    assert {"ShareLost", "StaleCopyDeleted"} <= reasons, reasons
