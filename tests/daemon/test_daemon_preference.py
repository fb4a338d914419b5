"""Issue 21 in the daemon: the clusters file's `cost` and `preference` reach the fleet each
planning round sees (the cluster caches carry their entries), and `placer.dev/cluster-order`
on a staged object orders its clusters."""

from __future__ import annotations

from placer import daemon as D
from placer.inputs.clusters_file import ClusterEntry
from tests.daemon.daemon_helpers import jobset


def _placed(env, obj: dict) -> str | None:
    return env.annotations(obj).get(D.PLACED_CLUSTER)


def test_daemon_places_on_the_cheaper_cluster_and_follows_an_order(env):
    # alpha comes first in the file; beta is cheaper
    env.entries = (ClusterEntry(name="alpha", context="alpha", cost=4),
                   ClusterEntry(name="beta", context="beta", cost=1))
    d = env.daemon()
    cheap = jobset("cheap", pods=1, gpus=8)
    env.create(cheap)
    assert d.wait_idle(20)
    assert _placed(env, cheap) == "beta" and list(env.copies(cheap)) == ["beta"]
    ordered = jobset("ordered", pods=1, gpus=8, annotations={"placer.dev/cluster-order": "alpha,beta"})
    env.create(ordered)
    assert d.wait_idle(20)
    assert _placed(env, ordered) == "alpha" and list(env.copies(ordered)) == ["alpha"]
