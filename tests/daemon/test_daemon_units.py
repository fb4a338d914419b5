"""The daemon's parts on their own, no API server: the fence's arithmetic, informers
ignoring lagging events and keeping what was just written across a relist, and the
per-cluster cache's incrementally kept usage checked against a rebuild from the same
objects (`placer.fleetview.inventory.snapshot`, the path every round used to take), and a
degraded target's health: gated, probed, trusted again later each time it repeats."""

from __future__ import annotations

import random
import threading
import time

import pytest

from placer.daemon import LeaseTiming, NotLeader
from placer.daemon.caches import ClusterCache
from placer.daemon.informer import Informer
from placer.daemon.leadership import LeaderElector
from placer.fleetview.inventory import snapshot
from placer.kube import Resource
from placer.model.errors import Unreachable
from tests.kubeapi.builders import bound_pod, gpu_node


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_fence_lets_a_write_through_only_if_it_ends_before_a_takeover():
    clock = Clock()
    timing = LeaseTiming(duration=15.0, renew_deadline=10.0, retry_period=2.0)
    e = LeaderElector(None, "ns", "lease", "me", clock=clock, timing=timing)  # type: ignore[arg-type]
    with pytest.raises(NotLeader):
        e.fence(0.1)                                     # never renewed
    e._renewed_at = 100.0
    # another daemon could take over 15 s after our renewal; 2.5 s are kept back for clock rates
    assert e.safe_until() == 112.5
    e.fence(12.0)
    with pytest.raises(NotLeader):
        e.fence(12.5)
    clock.t = 109.0
    assert e.is_leader
    e.fence(3.0)
    with pytest.raises(NotLeader):
        e.fence(3.5)
    clock.t = 110.0                                      # renew deadline passed: steps down, writes nothing
    assert not e.is_leader and e.safe_until() is None
    with pytest.raises(NotLeader):
        e.fence(0.0)


class _Ev:
    def __init__(self, type_: str, obj: dict):
        self.type, self.object, self.items = type_, obj, ()
        self.resource_version = obj["metadata"]["resourceVersion"]


def _obj(name: str, rv: int, **spec) -> dict:
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": str(rv)}, "spec": spec}


def _informer(seen: list) -> Informer:
    res = Resource("", "v1", "ConfigMap", "configmaps", True)
    return Informer(None, res, namespace=None, label_selector=None,  # type: ignore[arg-type]
                    handler=lambda inf, key, obj: seen.append((key[1], obj and obj["spec"])),
                    cluster="c", stop=threading.Event(), on_error=lambda e: None)


def test_an_informer_ignores_events_older_than_what_it_holds():
    seen: list = []
    inf = _informer(seen)
    inf._apply(_Ev("ADDED", _obj("a", 5, v=1)))
    inf.assume(_obj("a", 9, v=2))                       # what we just wrote
    inf._apply(_Ev("MODIFIED", _obj("a", 7, v=1)))     # a lagging stream
    inf._apply(_Ev("DELETED", _obj("a", 8)))
    assert inf.get("ns", "a")["spec"] == {"v": 2}
    inf._apply(_Ev("MODIFIED", _obj("a", 10, v=3)))
    assert inf.get("ns", "a")["spec"] == {"v": 3}
    assert seen == [("a", {"v": 1}), ("a", {"v": 2}), ("a", {"v": 3})]


def test_a_relist_keeps_what_was_written_after_the_list_and_drops_the_rest():
    seen: list = []
    inf = _informer(seen)
    inf._relist([_obj("old", 3), _obj("kept", 4)], "10")
    inf.assume(_obj("mine", 12))                        # created after the next list was taken
    inf._relist([_obj("kept", 4)], "11")                # "old" is gone; "mine" is newer than the list
    assert sorted(o["metadata"]["name"] for o in inf.items()) == ["kept", "mine"]
    assert ("old", None) in seen and inf.relists == 2 and inf.synced.is_set()


class NoServer:
    cluster = "c"

    def resource_for(self, api_version: str, kind: str):
        raise Unreachable("no server here")


def test_only_capacity_freed_wakes_the_unplaced_and_an_unchanged_cluster_keeps_its_nodes():
    """Issue 24: a pod that binds (a promise turning into usage) or a running pod's status
    update frees nothing and leaves the cluster's frozen nodes the same objects (so the next
    arrivals round reuses its node classes); a pod that finishes or goes away frees capacity
    and says so, once."""
    freed: list[int] = []
    cache = ClusterCache("c", {}, None, NoServer(), {}, threading.Event(),  # type: ignore[arg-type]
                         on_error=lambda e: None, on_copy=lambda *a: None, on_capacity=lambda: freed.append(1))
    for i in range(2):
        n = gpu_node(f"n{i}", gpus=8)
        n["metadata"]["resourceVersion"] = str(i + 1)
        cache.nodes._apply(_Ev("ADDED", n))
    cache.nodes.synced.set()
    cache.pods.synced.set()
    rv = iter(range(100, 200))

    def pod(name: str, node: str | None, phase: str, type_: str = "MODIFIED", **labels: str) -> None:
        p = bound_pod(name, node, gpus=2, phase=phase, labels=labels or None)
        p["metadata"]["resourceVersion"] = str(next(rv))
        cache.pods._apply(_Ev(type_, p))

    pod("a", "n0", "Running", "ADDED")
    pod("b", "n1", "Running", "ADDED")
    pod("waiting", None, "Pending", "ADDED")
    before = cache.cluster().nodes
    assert freed == [] and before[0].used["nvidia.com/gpu"] == 2
    pod("a", "n0", "Running", step="2")                 # a status or label update of a running pod
    assert freed == [] and cache.cluster().nodes is before
    pod("a", "n0", "Succeeded")                         # finished: its GPUs are free again
    assert freed == [1] and "nvidia.com/gpu" not in cache.cluster().nodes[0].used
    gone = bound_pod("b", "n1", gpus=2, phase="Running")
    gone["metadata"]["resourceVersion"] = str(next(rv))
    cache.pods._apply(_Ev("DELETED", gone))
    gone = bound_pod("waiting", None, gpus=2, phase="Pending")
    gone["metadata"]["resourceVersion"] = str(next(rv))
    cache.pods._apply(_Ev("DELETED", gone))             # never bound: frees nothing
    assert freed == [1, 1]


def test_used_capacity_kept_incrementally_matches_a_rebuild_from_the_same_objects():
    rng = random.Random(7)
    cache = ClusterCache("c", {}, None, NoServer(), {}, threading.Event(),  # type: ignore[arg-type]
                         on_error=lambda e: None, on_copy=lambda *a: None, on_capacity=lambda: None)
    nodes = [gpu_node(f"n{i}", gpus=8) for i in range(6)]
    for i, n in enumerate(nodes):
        n["metadata"]["resourceVersion"] = str(i + 1)
        cache.nodes._apply(_Ev("ADDED", n))
    pods: dict[str, dict] = {}
    rv = 100
    for step in range(400):
        rv += 1
        name = f"p{rng.randrange(40)}"
        if name in pods and rng.random() < 0.3:
            gone = pods.pop(name)
            gone["metadata"]["resourceVersion"] = str(rv)
            cache.pods._apply(_Ev("DELETED", gone))
            continue
        node = rng.choice([None, *(f"n{i}" for i in range(6))])
        phase = rng.choice(["Pending", "Running", "Running", "Succeeded", "Failed"])
        p = bound_pod(name, node, gpus=rng.choice([0, 1, 2, 4]), cpu=str(rng.randint(1, 8)), phase=phase)
        p["metadata"]["resourceVersion"] = str(rv)
        cache.pods._apply(_Ev("MODIFIED" if name in pods else "ADDED", p))
        pods[name] = p
        if step % 50 == 0 or step == 399:
            want = snapshot("c", nodes, list(pods.values()))
            got = cache.cluster()
            assert [(n.name, dict(n.used)) for n in got.nodes] == \
                   [(n.name, {r: q for r, q in n.used.items() if q}) for n in want.nodes], step


# --- a target that does not answer (issue 24, item 5) ----------------------------------------

class _Probe:
    """Answers GET /version only once told to (a degraded cluster coming back)."""

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.asked = 0

    def request(self, method: str, path: str, **kw) -> dict:
        self.asked += 1
        if not self.answer.is_set():
            raise Unreachable("unreachable (timed out)", cluster="alpha")
        return {"gitVersion": "v1.37.2"}


def test_a_degraded_target_is_gated_probed_and_trusted_again_later_each_time():
    from placer.daemon.health import Gate, TargetHealth, timed_out
    from placer.kube import Request

    assert timed_out(Unreachable("unreachable (timed out)")) and not timed_out(Unreachable("connection refused"))
    back = threading.Event()
    stop = threading.Event()
    health = TargetHealth(0.05, stop, on_recover=lambda c: back.set(), interval=0.01)
    probe = _Probe()
    health.probes["alpha"] = probe                              # type: ignore[assignment]
    try:
        assert health.degrade("alpha") and not health.degrade("alpha")      # once
        assert health.degraded("alpha") == "no answer within the 0.05s request deadline"
        assert health.summary().startswith("degraded: alpha (no answer within the 0.05s request deadline, for ")
        with pytest.raises(Unreachable, match=r"alpha is degraded \(no answer"):
            Gate(health, "alpha")(Request("GET", "/api/v1/nodes"))        # nothing is sent to it
        Gate(health, "beta")(Request("GET", "/api/v1/nodes"))             # the others are untouched
        for _ in range(1000):                                              # until it has been asked twice
            if probe.asked >= 2:
                break
            time.sleep(0.01)
        assert probe.asked >= 2 and not back.is_set() and health.degraded("alpha")   # not answering: still out
        probe.answer.set()
        assert back.wait(10) and health.degraded("alpha") is None and health.summary() == ""
        # degraded again soon after it came back: trusted again only after twice as long
        health.degrade("alpha")
        assert health._state["alpha"].hold == pytest.approx(0.1)
        health.degrade("beta")
        assert health._state["beta"].hold == pytest.approx(0.05) and health.names() == ["alpha", "beta"]
    finally:
        stop.set()
