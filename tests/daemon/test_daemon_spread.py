"""`placer daemon` places spread workloads (issue 21): one copy per share, the shares recorded
on the staging object, an aggregated status, a lost copy re-placed elsewhere, a stale one
deleted when its cluster returns, every copy deleted with the staging object. Judged from
the test API servers' objects and request logs."""

from __future__ import annotations

import json

import pytest

from placer.model.names import ANN_PHASE, PLACED_SHARES, SHARES_STATUS
from tests.daemon.daemon_helpers import STAGING, Env, events_for, gpu_nodes, wait_for

FOUR = ("east", "west", "north", "south")


def deployment(name: str, replicas: int, gpus: int, **annotations: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": STAGING,
                         "annotations": {f"placer.dev/{k.replace('_', '-')}": v for k, v in annotations.items()}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                         {"name": "s", "image": "s:1", "resources": {
                             "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": gpus},
                             "limits": {"nvidia.com/gpu": gpus}}}]}}}}


@pytest.fixture
def four(make_fleet):
    fleet = make_fleet(names=("hub", *FOUR), bookmark_interval=0.5)
    for name in FOUR:
        fleet[name].seed(gpu_nodes(f"{name[0]}", 1))
    e = Env(fleet, clusters=FOUR)
    yield e
    e.stop()


@pytest.fixture
def lopsided(make_fleet):
    """east's one node holds only 7 one-GPU replicas; west has two 8-GPU nodes."""
    fleet = make_fleet(names=("hub", "east", "west"), bookmark_interval=0.5)
    fleet["east"].seed(gpu_nodes("e", 1, gpus=7))
    fleet["west"].seed(gpu_nodes("w", 2))
    e = Env(fleet, clusters=("east", "west"))
    yield e
    e.stop()


def _creates(env: Env, name: str) -> dict[str, int]:
    """cluster -> creates of `name` its server answered 201 to (its request log)."""
    out: dict[str, int] = {}
    for c in env.entries:
        n = sum(1 for r in env.fleet[c.name].requests.created("deployments") if r.name == name)
        if n:
            out[c.name] = n
    return out


def _deletes(env: Env, cluster: str, name: str) -> int:
    return sum(1 for r in env.fleet[cluster].requests.select(verb="delete", resource="deployments") if r.name == name)


def _shares(env: Env, obj: dict) -> dict[str, str]:
    text = env.annotations(obj).get(PLACED_SHARES) or ""
    return dict((item.partition("=")[0], item.partition("=")[2]) for item in text.split(",") if item)


def test_duplicate_on_three_of_four_is_re_placed_when_a_cluster_goes_down(four):
    env = four
    d = env.daemon()
    web = deployment("web", 1, 1, spread="duplicate", spread_clusters="3")
    env.create(web)
    wait_for(lambda: len(env.copies(web)) == 3 and len(_shares(env, web)) == 3, what="three copies")
    first = sorted(env.copies(web))
    assert sorted(_shares(env, web)) == first
    assert all(n == 1 for n in _creates(env, "web").values()) and sorted(_creates(env, "web")) == first
    spare = next(c for c in FOUR if c not in first)
    gone = first[0]
    env.fleet[gone].down()
    try:
        # its copy is placed again on the fourth cluster, the three others stay where they were
        wait_for(lambda: spare in env.copies(web) and sorted(_shares(env, web)) == sorted([*first[1:], spare]),
                 timeout=30, what=f"the copy re-placed on {spare}")
        assert _creates(env, "web") == {c: 1 for c in [*first, spare]}        # no cluster ever got two
        assert not any(_deletes(env, c, "web") for c in first[1:])              # healthy copies never moved
        assert events_for(env.fleet, "web", "ShareLost")
    finally:
        env.fleet[gone].up()
    # back: its stale copy (its share now on the spare cluster) is deleted
    wait_for(lambda: gone not in env.copies(web), timeout=30, what=f"the stale copy on {gone} deleted")
    assert _deletes(env, gone, "web") == 1
    assert sorted(env.copies(web)) == sorted([*first[1:], spare]) == sorted(_shares(env, web))
    assert _creates(env, "web") == {c: 1 for c in [*first, spare]}
    wait_for(lambda: events_for(env.fleet, "web", "StaleCopyDeleted"), what="the StaleCopyDeleted Event")
    assert d.wait_idle(10)
    assert len(env.copies(web)) == 3


def _set_ready(env: Env, cluster: str, name: str, replicas: int, ready: int) -> None:
    client = env.kube.client(cluster)
    res = client.resource_for("apps/v1", "Deployment")
    client.patch_status(res, name, {"replicas": replicas, "readyReplicas": ready}, STAGING)


def test_divide_two_to_one_where_east_holds_seven_and_the_status_sums(lopsided):
    env = lopsided
    env.daemon()
    web = deployment("web", 12, 1, spread="divide", spread_weights="east=2,west=1")
    env.create(web)
    wait_for(lambda: len(env.copies(web)) == 2, what="two copies")
    replicas = {c: o["spec"]["replicas"] for c, o in env.copies(web).items()}
    assert replicas == {"east": 7, "west": 5}
    assert _shares(env, web) == {"east": "7", "west": "5"}
    assert _creates(env, "web") == {"east": 1, "west": 1}
    # the status comes back summed, the phase the worst copy's, one entry per copy
    _set_ready(env, "east", "web", 7, 7)
    _set_ready(env, "west", "web", 5, 3)
    # the sum (status subresource) and the phase (annotations) are two writes: wait for both
    wait_for(lambda: (env.staged(web).get("status") or {}).get("readyReplicas") == 10
             and env.annotations(web).get(ANN_PHASE) == "Initializing",    # west: 3 of 5 ready
             what="ready summed and the worst copy's phase")
    assert env.staged(web)["status"]["replicas"] == 12
    ann = env.annotations(web)
    per = {e["cluster"]: e for e in json.loads(ann[SHARES_STATUS])}
    assert {c: (e["replicas"], e["ready"], e["phase"]) for c, e in per.items()} == {
        "east": (7, 7, "Running"), "west": (5, 3, "Initializing")}
    _set_ready(env, "west", "web", 5, 5)
    wait_for(lambda: env.annotations(web)[ANN_PHASE] == "Running", what="every copy running")
    assert env.staged(web)["status"]["readyReplicas"] == 12


def test_deleting_the_staging_object_deletes_every_copy(lopsided):
    env = lopsided
    d = env.daemon()
    web = deployment("web", 12, 1, spread="divide", spread_weights="east=2,west=1")
    env.create(web)
    wait_for(lambda: len(env.copies(web)) == 2, what="two copies")
    res = env.hub.resource_for("apps/v1", "Deployment")
    env.hub.delete(res, "web", STAGING)
    wait_for(lambda: not env.fleet["hub"].objects("apps/v1", "Deployment", STAGING), timeout=20,
             what="the staging object gone (finalizer released)")
    assert env.copies(web) == {}
    assert {c: _deletes(env, c, "web") for c in ("east", "west")} == {"east": 1, "west": 1}
    assert d.wait_idle(10)


def test_duplicate_copy_deleted_out_of_band_is_made_again_never_twice_on_one_cluster(four):
    env = four
    d = env.daemon()
    web = deployment("web", 1, 1, spread="duplicate", spread_clusters="3")
    env.create(web)
    wait_for(lambda: len(env.copies(web)) == 3 and len(_shares(env, web)) == 3, what="three copies")
    first = sorted(env.copies(web))
    assert d.wait_idle(10)                   # placed and settled: then someone deletes a copy
    client = env.kube.client(first[1])
    client.delete(client.resource_for("apps/v1", "Deployment"), "web", STAGING)
    wait_for(lambda: events_for(env.fleet, "web", "ShareLost"), what="the lost copy noticed")
    # made again on a cluster that holds none (the one it was deleted from may have it again)
    wait_for(lambda: len(env.copies(web)) == 3 and sorted(env.copies(web)) == sorted(_shares(env, web)),
             timeout=30, what="three copies again")
    assert d.wait_idle(10)
    assert len(env.copies(web)) == 3 and {first[0], first[2]} <= set(env.copies(web))
    made = _creates(env, "web")
    assert sum(made.values()) == 4 and all(n <= 1 + (c == first[1]) for c, n in made.items()), made
    assert not any(_deletes(env, c, "web") for c in FOUR if c != first[1])     # the others never moved


def test_a_restarted_daemon_keeps_the_shares_it_finds(lopsided):
    env = lopsided
    d = env.daemon()
    web = deployment("web", 12, 1, spread="divide", spread_weights="east=2,west=1")
    env.create(web)
    wait_for(lambda: len(env.copies(web)) == 2, what="two copies")
    assert d.wait_idle(10)
    d.stop()
    again = env.daemon()
    assert again.wait_idle(20)
    wait_for(lambda: again.leader.is_leader, what="the new daemon leads")
    assert again.wait_idle(20)
    assert _creates(env, "web") == {"east": 1, "west": 1}
    assert not any(_deletes(env, c, "web") for c in ("east", "west"))
    assert {c: o["spec"]["replicas"] for c, o in env.copies(web).items()} == {"east": 7, "west": 5}
    assert _shares(env, web) == {"east": "7", "west": "5"}


def test_shares_recorded_but_never_made_are_made_by_the_next_daemon(lopsided):
    """A daemon stopped after recording a round's shares and before their creates: the next
    one finds every share lost on clusters that answer, and places the whole spread again."""
    env = lopsided
    web = deployment("web", 12, 1, spread="divide", spread_weights="east=2,west=1")
    web["metadata"]["annotations"][PLACED_SHARES] = "east=7,west=5"
    env.create(web)
    d = env.daemon()
    wait_for(lambda: len(env.copies(web)) == 2, what="two copies")
    assert d.wait_idle(10)
    assert {c: o["spec"]["replicas"] for c, o in env.copies(web).items()} == {"east": 7, "west": 5}
    assert _creates(env, "web") == {"east": 1, "west": 1}


@pytest.fixture
def roomy_east(make_fleet):
    """east: two 8-GPU nodes; west: one."""
    fleet = make_fleet(names=("hub", "east", "west"), bookmark_interval=0.5)
    fleet["east"].seed(gpu_nodes("e", 2))
    fleet["west"].seed(gpu_nodes("w", 1))
    e = Env(fleet, clusters=("east", "west"))
    yield e
    e.stop()


def test_divide_share_lost_with_its_cluster_grows_the_share_left(roomy_east):
    env = roomy_east
    d = env.daemon()
    web = deployment("web", 12, 1, spread="divide", spread_weights="east=1,west=1")
    env.create(web)
    wait_for(lambda: len(env.copies(web)) == 2, what="two copies")
    shares = {c: o["spec"]["replicas"] for c, o in env.copies(web).items()}
    assert sum(shares.values()) == 12 and abs(shares["east"] - shares["west"]) <= 2     # within one of 1:1
    env.fleet["west"].down()
    try:
        # west's 6 replicas are planned again on what is left: east's share grows to 12 in place
        wait_for(lambda: env.copies(web)["east"]["spec"]["replicas"] == 12 and _shares(env, web) == {"east": "12"},
                 timeout=30, what="east's share grown to 12")
        assert _creates(env, "web") == {"east": 1, "west": 1}         # grown in place, not made again
        assert _deletes(env, "east", "web") == 0
    finally:
        env.fleet["west"].up()
    wait_for(lambda: "west" not in env.copies(web), timeout=30, what="west's stale share deleted")
    assert _deletes(env, "west", "web") == 1
    assert d.wait_idle(10)
    assert {c: o["spec"]["replicas"] for c, o in env.copies(web).items()} == {"east": 12}
