"""The access layer through the real kubernetes client against the test API server (tests/kubeapi)."""

from __future__ import annotations

import threading

import pytest

from placer.kube import Kube, RetryPolicy
from placer.model.errors import Conflict, Forbidden, Invalid, NotFound, ServerError, Unreachable
from tests.kubeapi import bound_pod, custom_object, gpu_node


class Sleeps(list):
    """A fake sleep: records what the client would have slept."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps():
    return Sleeps()


def kube_for(fleet, sleeps, **options) -> Kube:
    options.setdefault("retry", RetryPolicy(attempts=4, base=0.1, jitter=0.0))
    return Kube(str(fleet.kubeconfig), sleep=sleeps, **options)


# --- discovery ---------------------------------------------------------------------

@pytest.mark.parametrize("arg, expected", [
    ("pods", ("", "v1", "Pod")), ("po", ("", "v1", "Pod")), ("Pod", ("", "v1", "Pod")),
    ("pod", ("", "v1", "Pod")), ("deploy", ("apps", "v1", "Deployment")),
    ("deployments.apps", ("apps", "v1", "Deployment")),
    ("Deployment.v1.apps", ("apps", "v1", "Deployment")),
    ("lws", ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet")),
    ("JobSet", ("jobset.x-k8s.io", "v1alpha2", "JobSet")),
    ("rayclusters.ray.io", ("ray.io", "v1", "RayCluster")),
    ("pytorchjob", ("kubeflow.org", "v1", "PyTorchJob")),
    # kinds a group serves only at a version other than its preferred one (kubeflow.org prefers v1)
    ("mpijobs", ("kubeflow.org", "v2beta1", "MPIJob")), ("MPIJob.kubeflow.org", ("kubeflow.org", "v2beta1", "MPIJob")),
    # kubectl's precedence: the core group wins a name two groups share
    ("services", ("", "v1", "Service")), ("ksvc", ("serving.knative.dev", "v1", "Service")),
    ("services.serving.knative.dev", ("serving.knative.dev", "v1", "Service")),
    ("dgd.v1alpha1.nvidia.com", ("nvidia.com", "v1alpha1", "DynamoGraphDeployment")),
])
def test_resolves_kubectl_style_names(kube_fleet, sleeps, arg, expected):
    client = kube_for(kube_fleet, sleeps).client("alpha")
    r = client.resolve(arg)
    assert (r.group, r.version, r.kind) == expected


def test_discovery_is_cached_and_refreshed_on_a_miss(fresh_fleet, sleeps):
    from tests.kubeapi import crd

    c = fresh_fleet["alpha"]
    client = kube_for(fresh_fleet, sleeps).client("alpha")
    client.resolve("pods")
    client.resolve("jobsets")
    before = c.requests.count(verb="discovery")
    client.resolve("deploy")
    client.resolve("po")
    assert c.requests.count(verb="discovery") - before <= 1      # apps/v1 fetched once, core cached
    with pytest.raises(NotFound, match='resource type "widgets"') as e:
        client.resolve("widgets")
    assert e.value.cluster == "alpha"
    c.install_crds([crd("example.com", "Widget", "widgets", short_names=["wg"])])
    assert client.resolve("wg").group == "example.com"           # a miss rediscovers


# --- CRUD and errors ---------------------------------------------------------------

def test_crud_merge_patch_status_delete(kube_fleet, kube_ns, sleeps):
    client = kube_for(kube_fleet, sleeps).client("beta")
    js = custom_object("jobset.x-k8s.io/v1alpha2", "JobSet", "train", kube_ns, {"suspend": True})
    created = client.create("jobsets", js)
    assert created["metadata"]["uid"] and created["metadata"]["namespace"] == kube_ns
    with pytest.raises(Conflict) as e:
        client.create("jobsets", js)
    assert e.value.cluster == "beta" and e.value.obj == f"jobsets.jobset.x-k8s.io/{kube_ns}/train"

    patched = client.patch("jobsets", "train", {"spec": {"suspend": False}}, kube_ns)
    assert patched["spec"]["suspend"] is False
    st = client.patch_status("jobsets", "train", {"terminalState": "Completed"}, kube_ns)
    assert st["status"] == {"terminalState": "Completed"}
    assert client.get("jobsets", "train", kube_ns)["status"]["terminalState"] == "Completed"

    client.delete("jobsets", "train", kube_ns)
    with pytest.raises(NotFound) as e:
        client.get("jobsets", "train", kube_ns)
    assert "train" in str(e.value) and "beta" in str(e.value)
    assert client.delete("jobsets", "train", kube_ns, missing_ok=True) is None


def test_invalid_object_is_invalid(kube_fleet, kube_ns, sleeps):
    client = kube_for(kube_fleet, sleeps).client("alpha")
    with pytest.raises(Invalid, match="RFC 1123") as e:
        client.create("pods", bound_pod("Not_Valid", None, namespace=kube_ns))
    assert e.value.status == 422 and e.value.cluster == "alpha"


def test_list_with_label_and_field_selectors(kube_fleet, kube_ns, sleeps):
    c = kube_fleet["gamma"]
    c.seed([bound_pod("a", "n1", namespace=kube_ns, labels={"team": "x"}),
            bound_pod("b", "n2", namespace=kube_ns, labels={"team": "y"}),
            bound_pod("c", "n1", namespace=kube_ns, labels={"team": "x"}, phase="Succeeded")])
    client = kube_for(kube_fleet, sleeps).client("gamma")
    names = lambda lst: sorted(o["metadata"]["name"] for o in lst.items)
    assert names(client.list("pods", kube_ns, label_selector={"team": "x"})) == ["a", "c"]
    assert names(client.list("pods", kube_ns, field_selector="spec.nodeName=n1,status.phase!=Succeeded")) == ["a"]
    assert names(client.list("pods", kube_ns, label_selector="team in (x,y)", field_selector={"spec.nodeName": "n2"})) == ["b"]


def test_pagination_over_2000_nodes(make_fleet, sleeps):
    fleet = make_fleet(names=("big",), crds=False)
    c = fleet["big"]
    c.seed([gpu_node(f"node-{i:04d}") for i in range(2000)])
    client = kube_for(fleet, sleeps).client("big")
    c.requests.clear()
    lst = client.list("nodes", limit=300)
    assert len(lst.items) == 2000 and len({n["metadata"]["name"] for n in lst.items}) == 2000
    assert lst.requests == 7 == c.requests.count(verb="list", resource="nodes")
    assert int(lst.resource_version) > 0


# --- server-side apply -------------------------------------------------------------

def test_server_side_apply_conflicts_and_force(kube_fleet, kube_ns, sleeps):
    client = kube_for(kube_fleet, sleeps).client("alpha")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": kube_ns},
          "data": {"a": "1"}}
    out = client.apply(cm)
    assert out["data"] == {"a": "1"}
    assert any(m["manager"] == "placer" for m in out["metadata"]["managedFields"])
    assert client.apply(cm)["metadata"]["resourceVersion"] == out["metadata"]["resourceVersion"]  # idempotent

    other = {**cm, "data": {"a": "2"}}
    with pytest.raises(Conflict, match="conflict") as e:
        client.apply(other, field_manager="someone-else")
    assert e.value.cluster == "alpha" and e.value.obj == f"configmaps/{kube_ns}/cfg"
    taken = client.apply(other, field_manager="someone-else", force=True)
    assert taken["data"] == {"a": "2"}
    # now placer's own re-apply conflicts, and force takes it back
    with pytest.raises(Conflict):
        client.apply(cm)
    assert client.apply(cm, force=True)["data"] == {"a": "1"}


# --- retries, timeouts, transport errors -------------------------------------------

def test_retries_5xx_with_exponential_backoff(fresh_fleet, sleeps):
    c = fresh_fleet["alpha"]
    c.seed([gpu_node("n1")])
    client = kube_for(fresh_fleet, sleeps).client("alpha")
    client.resolve("nodes")
    c.faults.fail(500, count=2)
    assert len(client.list("nodes").items) == 1
    assert sleeps == [pytest.approx(0.1), pytest.approx(0.2)]


def test_retry_after_is_honored(fresh_fleet, sleeps):
    c = fresh_fleet["alpha"]
    client = kube_for(fresh_fleet, sleeps).client("alpha")
    client.resolve("nodes")
    c.faults.fail(429, count=1, retry_after=3)
    client.list("nodes")
    assert sleeps == [3.0]


def test_persistent_500_becomes_server_error_after_all_attempts(fresh_fleet, sleeps):
    c = fresh_fleet["alpha"]
    client = kube_for(fresh_fleet, sleeps).client("alpha")
    client.resolve("nodes")
    c.requests.clear()
    c.faults.fail(500)
    with pytest.raises(ServerError, match="injected fault") as e:
        client.list("nodes")
    assert e.value.status == 500 and e.value.cluster == "alpha"
    assert c.requests.count(resource="nodes") == 4 and len(sleeps) == 3
    assert sleeps == sorted(sleeps)


def test_forbidden_is_not_retried(fresh_fleet, sleeps):
    fresh_fleet["beta"].faults.fail(403)
    client = kube_for(fresh_fleet, sleeps).client("beta")
    with pytest.raises(Forbidden) as e:
        client.list("pods")
    assert e.value.cluster == "beta" and sleeps == []


def test_refused_connection_is_unreachable(fresh_fleet, sleeps):
    fresh_fleet["beta"].down()
    client = kube_for(fresh_fleet, sleeps).client("beta")
    with pytest.raises(Unreachable, match=r"unreachable \(connection refused\)") as e:
        client.list("nodes")
    assert e.value.cluster == "beta" and len(sleeps) == 3


def test_every_call_has_a_timeout(fresh_fleet, sleeps):
    c = fresh_fleet["alpha"]
    c.faults.delay = 2.0
    client = kube_for(fresh_fleet, sleeps, timeout=0.2, retry=RetryPolicy(attempts=2, base=0.1)).client("alpha")
    with pytest.raises(Unreachable, match="timed out"):
        client.request("GET", "/api")
    assert len(sleeps) == 1


def test_calls_to_several_clusters_run_concurrently(kube_fleet, sleeps):
    # each call blocks until all three are in flight: sequential calls would break the barrier
    barrier = threading.Barrier(3, timeout=10)
    kube = kube_for(kube_fleet, sleeps)

    def call(client):
        barrier.wait()
        return client.list("nodes").resource_version

    kube_fleet["gamma"].faults.fail(403)
    results = kube.each(call, ["alpha", "beta", "gamma"])
    assert isinstance(results["gamma"], Forbidden)
    assert all(isinstance(results[n], str) for n in ("alpha", "beta"))


# --- watch -------------------------------------------------------------------------

def _pod(name, ns):
    return bound_pod(name, None, namespace=ns)


def test_watch_resumes_after_the_server_ends_it(fresh_fleet, sleeps):
    c = fresh_fleet["alpha"]
    client = kube_for(fresh_fleet, sleeps).client("alpha")
    ns = "w"
    start = client.list("pods", ns).resource_version
    client.create("pods", _pod("p1", ns))
    events = client.watch("pods", ns, resource_version=start, timeout_seconds=30)
    first = next(events)
    assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "p1")
    c.drop_watches()                                  # the stream ends; the client reconnects
    client.create("pods", _pod("p2", ns))
    client.delete("pods", "p1", ns)
    seen = [(e.type, e.object["metadata"]["name"]) for e in (next(events), next(events))]
    assert seen == [("ADDED", "p2"), ("DELETED", "p1")]          # nothing replayed, nothing lost
    watches = [r for r in c.requests.entries if r.verb == "watch"]
    assert len(watches) == 2
    assert int(watches[1].query["resourceVersion"][0] if isinstance(watches[1].query["resourceVersion"], list)
               else watches[1].query["resourceVersion"]) >= int(first.resource_version)
    events.close()


def test_watch_resumes_after_a_cut_connection(fresh_fleet, sleeps):
    c = fresh_fleet["alpha"]
    client = kube_for(fresh_fleet, sleeps).client("alpha")
    start = client.list("pods", "w").resource_version
    client.create("pods", _pod("p1", "w"))
    events = client.watch("pods", "w", resource_version=start, timeout_seconds=30)
    assert next(events).object["metadata"]["name"] == "p1"
    c.drop_watches(abrupt=True)
    client.create("pods", _pod("p2", "w"))
    ev = next(events)
    assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "p2")
    events.close()


def test_watch_relists_on_410_gone(fresh_fleet, sleeps):
    c = fresh_fleet["alpha"]
    client = kube_for(fresh_fleet, sleeps).client("alpha")
    old = client.list("pods", "w").resource_version
    client.create("pods", _pod("p1", "w"))
    client.create("pods", _pod("p2", "w"))
    c.store.compact()                                  # `old` is now too old
    events = client.watch("pods", "w", resource_version=old, timeout_seconds=30)
    relist = next(events)
    assert relist.type == "RELIST" and relist.object is None
    assert sorted(o["metadata"]["name"] for o in relist.items) == ["p1", "p2"]
    client.create("pods", _pod("p3", "w"))
    ev = next(events)                                  # and it keeps watching from the relist
    assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "p3")
    assert c.requests.count(verb="list", resource="pods") == 2
    events.close()


def test_watch_without_version_starts_with_a_list_and_handles_bookmarks(make_fleet, sleeps):
    fleet = make_fleet(names=("alpha",), bookmark_interval=0.2)
    client = kube_for(fleet, sleeps).client("alpha")
    client.create("pods", _pod("p1", "w"))
    events = client.watch("pods", "w", timeout_seconds=30, bookmarks=True)
    first = next(events)
    assert first.type == "RELIST" and [o["metadata"]["name"] for o in first.items] == ["p1"]
    bookmark = next(events)
    assert bookmark.type == "BOOKMARK" and int(bookmark.resource_version) >= int(first.resource_version)
    events.close()
    # without bookmarks=True they only advance the resume point
    quiet = client.watch("pods", "w", timeout_seconds=30, stop=lambda: False)
    assert next(quiet).type == "RELIST"
    client.create("pods", _pod("p2", "w"))
    assert next(quiet).type == "ADDED"
    quiet.close()


def test_gone_on_an_expired_continue_token_restarts_the_list(make_fleet, sleeps):
    fleet = make_fleet(names=("alpha",), crds=False)
    c = fleet["alpha"]
    c.seed([gpu_node(f"n{i}") for i in range(10)])
    client = kube_for(fleet, sleeps).client("alpha")
    client.resolve("nodes")
    pages = []

    def before(request):                               # the transport's hook: before each page is sent
        pages.append(dict(request.query).get("continue"))
        if len(pages) == 2:                            # etcd compacts between two pages
            c.seed([gpu_node("n-late")])
            c.store.compact()

    client = client.through(client.transport.derive(before_attempt=before))
    lst = client.list("nodes", limit=4)
    assert len(lst.items) == 11                        # one consistent list, from the restart
    assert pages[0] is None and pages[1] is not None and pages[2] is None
