"""The harness's watch: events, resume from a resourceVersion, 410 Gone, bookmarks, timeouts, drops."""
import queue
import socket
import threading
import time

import pytest

from tests.kubeapi import bound_pod
from tests.kubeapi.http import call, watch_lines

PODS = "/api/v1/namespaces/default/pods"


def background_watch(cluster, path, **params):
    """Collect a watch's events in a thread; returns (queue, thread). None is queued at stream end."""
    q: queue.Queue = queue.Queue()

    def run():
        try:
            for ev in watch_lines(cluster, path, **params):
                q.put(ev)
        except OSError as e:
            q.put(e)
        q.put(None)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return q


def take(q, n=1, timeout=5):
    return [q.get(timeout=timeout) for _ in range(n)]


@pytest.fixture
def cluster(make_fleet):
    return make_fleet(["alpha"], crds=False, history=20, bookmark_interval=0.2)["alpha"]


def test_events_and_resume_from_resource_version(cluster):
    rv = call(cluster, "GET", PODS)[1]["metadata"]["resourceVersion"]
    q = background_watch(cluster, PODS, resourceVersion=rv, timeoutSeconds=5)
    call(cluster, "POST", PODS, bound_pod("a", None))
    call(cluster, "PATCH", PODS + "/a", {"metadata": {"labels": {"x": "1"}}}, "application/merge-patch+json")
    call(cluster, "DELETE", PODS + "/a")
    events = take(q, 3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert all(e["object"]["metadata"]["name"] == "a" for e in events)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs)
    # resuming after the first event replays only what came later
    resumed = list(watch_lines(cluster, PODS, resourceVersion=str(rvs[0]), timeoutSeconds=1))
    assert [e["type"] for e in resumed] == ["MODIFIED", "DELETED"]


def test_watch_without_version_starts_with_current_objects(cluster):
    cluster.seed([bound_pod("old", "n1")])
    events = list(watch_lines(cluster, "/api/v1/watch/namespaces/default/pods", timeoutSeconds=1))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "old")]


def test_too_old_resource_version_is_410_in_stream(cluster):
    rv = call(cluster, "GET", PODS)[1]["metadata"]["resourceVersion"]
    for i in range(60):                     # overflow the 20-event history window
        call(cluster, "POST", "/api/v1/namespaces/default/configmaps",
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
    events = list(watch_lines(cluster, PODS, resourceVersion=rv, timeoutSeconds=2))
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
    assert "too old resource version" in status["message"]
    # relist, then watching from the list's version works
    fresh = call(cluster, "GET", PODS)[1]["metadata"]["resourceVersion"]
    assert list(watch_lines(cluster, PODS, resourceVersion=fresh, timeoutSeconds=0.5)) == []


def test_410_through_the_kubernetes_client(cluster, make_fleet):
    import pathlib
    import tempfile

    from kubernetes import client, config, watch

    from tests.kubeapi import write_kubeconfig
    path = write_kubeconfig([cluster], pathlib.Path(tempfile.mkdtemp()) / "kubeconfig")
    api = client.CoreV1Api(config.new_client_from_config(str(path)))
    rv = api.list_namespaced_pod("default").metadata.resource_version
    cluster.seed([bound_pod("x", "n1")])          # seeding compacts the history
    with pytest.raises(client.ApiException) as err:
        for _ in watch.Watch().stream(api.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=2):
            pass
    assert err.value.status == 410


def test_bookmarks_and_timeout(cluster):
    start = time.monotonic()
    events = list(watch_lines(cluster, PODS, resourceVersion=call(cluster, "GET", PODS)[1]["metadata"]["resourceVersion"],
                              allowWatchBookmarks="true", timeoutSeconds=1))
    assert 0.9 < time.monotonic() - start < 3
    assert len(events) >= 3 and {e["type"] for e in events} == {"BOOKMARK"}
    assert events[0]["object"]["kind"] == "Pod" and events[0]["object"]["metadata"]["resourceVersion"]
    assert not list(e for e in watch_lines(cluster, PODS, timeoutSeconds=0.5) if e["type"] == "BOOKMARK")


def test_selector_transitions(cluster):
    call(cluster, "POST", PODS, bound_pod("s", None, labels={"app": "x"}))
    rv = call(cluster, "GET", PODS)[1]["metadata"]["resourceVersion"]
    q = background_watch(cluster, PODS, resourceVersion=rv, labelSelector="app=x", timeoutSeconds=5)
    call(cluster, "PATCH", PODS + "/s", {"metadata": {"labels": {"app": "y"}}}, "application/merge-patch+json")
    call(cluster, "PATCH", PODS + "/s", {"metadata": {"labels": {"app": "x"}}}, "application/merge-patch+json")
    assert [e["type"] for e in take(q, 2)] == ["DELETED", "ADDED"]


def raw_watch(cluster, out: list):
    """Read a whole watch response from a raw socket (Connection: close): out gets the bytes."""
    sock = socket.create_connection(("127.0.0.1", cluster.port), timeout=10)
    sock.sendall(f"GET {PODS}?watch=true&timeoutSeconds=30 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except OSError:
        pass
    out.append(data)


@pytest.mark.parametrize("abrupt", [False, True])
def test_dropped_watches_end(cluster, abrupt):
    out: list = []
    t = threading.Thread(target=raw_watch, args=(cluster, out))
    t.start()
    time.sleep(0.3)
    cluster.drop_watches(abrupt=abrupt)
    t.join(5)
    assert out and out[0].startswith(b"HTTP/1.1 200")
    assert out[0].endswith(b"0\r\n\r\n") is not abrupt     # clean end: the terminal chunk
    assert cluster.requests.count(verb="watch", resource="pods") == 1


def test_send_initial_events_ends_with_a_marked_bookmark(cluster):
    cluster.seed([bound_pod("a", "n1"), bound_pod("b", "n1")])
    events = list(watch_lines(cluster, PODS, sendInitialEvents="true", allowWatchBookmarks="true",
                              resourceVersionMatch="NotOlderThan", resourceVersion="", timeoutSeconds=0.1))
    assert [e["type"] for e in events[:3]] == ["ADDED", "ADDED", "BOOKMARK"]
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
