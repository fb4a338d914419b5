"""The harness's watch fan-out: one encoding of each event serves every watcher, yet each watcher
still gets exactly what its namespace, selectors, resourceVersion and API version admit; watchers
wait on their own type, so other types' traffic neither wakes nor expires them (as the real
server's per-type watch cache); compaction reaches open watches at once."""
import queue
import threading
import time

import pytest

from tests.kubeapi import bound_pod, crd, custom_object
from tests.kubeapi.http import call, watch_lines

MERGE = "application/merge-patch+json"


def background(cluster, path, **params):
    q: queue.Queue = queue.Queue()

    def run():
        for ev in watch_lines(cluster, path, **params):
            q.put(ev)
        q.put(None)
    threading.Thread(target=run, daemon=True).start()
    return q


def drain(q, timeout=5.0):
    """Events until the stream ends (timeoutSeconds)."""
    out = []
    while (ev := q.get(timeout=timeout)) is not None:
        out.append(ev)
    return out


def seen(events):
    return [(e["type"], e["object"]["metadata"]["namespace"], e["object"]["metadata"]["name"],
             e["object"]["metadata"].get("labels", {}).get("app")) for e in events]


@pytest.fixture
def cluster(make_fleet):
    return make_fleet(["alpha"], crds=False, history=20, bookmark_interval=0.2)["alpha"]


def test_each_watcher_gets_what_its_selectors_and_version_admit(cluster):
    rv0 = call(cluster, "GET", "/api/v1/pods")[1]["metadata"]["resourceVersion"]
    default, everywhere = "/api/v1/namespaces/default/pods", "/api/v1/pods"
    watch = dict(resourceVersion=rv0, timeoutSeconds=2)
    queues = {"default": background(cluster, default, **watch),
              "app=x": background(cluster, default, labelSelector="app=x", **watch),
              "on n1": background(cluster, everywhere, fieldSelector="spec.nodeName=n1", **watch)}
    time.sleep(0.2)
    call(cluster, "POST", default, bound_pod("p1", "n1", labels={"app": "x"}))
    rv1 = call(cluster, "GET", everywhere)[1]["metadata"]["resourceVersion"]
    queues["after p1"] = background(cluster, everywhere, resourceVersion=rv1, timeoutSeconds=2)
    time.sleep(0.2)
    call(cluster, "POST", "/api/v1/namespaces/other/pods", bound_pod("p2", "n2", labels={"app": "y"}, namespace="other"))
    call(cluster, "PATCH", default + "/p1", {"metadata": {"labels": {"app": "y"}}}, MERGE)
    call(cluster, "PATCH", "/api/v1/namespaces/other/pods/p2", {"metadata": {"labels": {"app": "x"}}}, MERGE)
    call(cluster, "DELETE", default + "/p1")
    got = {name: drain(q) for name, q in queues.items()}
    assert seen(got["default"]) == [("ADDED", "default", "p1", "x"), ("MODIFIED", "default", "p1", "y"),
                                    ("DELETED", "default", "p1", "y")]
    assert seen(got["app=x"]) == [("ADDED", "default", "p1", "x"), ("DELETED", "default", "p1", "y")]
    assert seen(got["on n1"]) == seen(got["default"])
    assert seen(got["after p1"]) == [("ADDED", "other", "p2", "y"), ("MODIFIED", "default", "p1", "y"),
                                     ("MODIFIED", "other", "p2", "x"), ("DELETED", "default", "p1", "y")]
    # the same event is the same object for every watcher it reaches
    by_rv: dict = {}
    for events in got.values():
        for e in events:
            by_rv.setdefault(e["object"]["metadata"]["resourceVersion"], []).append(e["object"])
    assert len(by_rv) == 5 and all(all(o == objs[0] for o in objs) for objs in by_rv.values())


def test_watchers_of_two_versions_share_an_event_but_see_their_own_api_version(cluster):
    cluster.install_crds([crd("example.com", "Widget", "widgets", versions=("v1", "v2"))])
    path = "/apis/example.com/{}/namespaces/default/widgets"
    rv = call(cluster, "GET", path.format("v1"))[1]["metadata"]["resourceVersion"]
    queues = {v: background(cluster, path.format(v), resourceVersion=rv, timeoutSeconds=1) for v in ("v1", "v2")}
    time.sleep(0.2)
    call(cluster, "POST", path.format("v2"), custom_object("example.com/v2", "Widget", "w", "default", {"size": 1}))
    got = {v: drain(q) for v, q in queues.items()}
    assert [(e["type"], e["object"]["apiVersion"]) for e in got["v1"]] == [("ADDED", "example.com/v1")]
    assert [(e["type"], e["object"]["apiVersion"]) for e in got["v2"]] == [("ADDED", "example.com/v2")]
    assert {**got["v1"][0]["object"], "apiVersion": "example.com/v2"} == got["v2"][0]["object"]


def test_other_types_traffic_does_not_expire_a_watch_that_fell_behind(cluster):
    store = cluster.store
    pods, configmaps = store.type_for("v1", "Pod"), store.type_for("v1", "ConfigMap")
    events = store.watch(pods, "default", str(store.rv), timeout=3)
    store.create(pods, "default", bound_pod("first", "n1"))
    assert next(events)["object"]["metadata"]["name"] == "first"
    for i in range(60):                 # three times the history, none of it pods: the watch reads nothing
        store.create(configmaps, "default", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
    assert store.compacted > int(store.get(pods, "default", "first")["metadata"]["resourceVersion"])
    store.create(pods, "default", bound_pod("second", "n1"))
    ev = next(events)
    assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "second")
    events.close()


def test_a_watch_that_fell_behind_on_its_own_type_expires(cluster):
    store = cluster.store
    pods = store.type_for("v1", "Pod")
    events = store.watch(pods, "default", str(store.rv), timeout=3)
    store.create(pods, "default", bound_pod("first", "n1"))
    assert next(events)["object"]["metadata"]["name"] == "first"
    for i in range(60):                 # pods it has not read are trimmed from the history
        store.create(pods, "default", bound_pod(f"p{i}", "n1"))
    ev = next(events)
    assert ev["type"] == "ERROR" and ev["object"]["code"] == 410
    assert next(events, None) is None


def test_compaction_reaches_an_open_watch_at_once(cluster):
    rv = call(cluster, "GET", "/api/v1/namespaces/default/pods")[1]["metadata"]["resourceVersion"]
    q = background(cluster, "/api/v1/namespaces/default/pods", resourceVersion=rv, timeoutSeconds=30)
    time.sleep(0.2)
    cluster.seed([bound_pod("seeded", "n1")])       # seeding compacts: the watcher must relist
    ev = q.get(timeout=3)
    assert ev["type"] == "ERROR" and ev["object"]["code"] == 410
    assert q.get(timeout=3) is None
