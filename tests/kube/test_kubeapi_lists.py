"""The harness's lists: resourceVersion, pagination with consistent continue tokens, selectors."""
import pytest

from tests.kubeapi import bound_pod, gpu_node
from tests.kubeapi.http import call
from tests.kubeapi.selectors import SelectorError, label_selector


@pytest.fixture
def cluster(fresh_fleet):
    c = fresh_fleet["alpha"]
    objs = [gpu_node(f"n{i:02d}", gpus=8 if i % 2 else 0, labels={"zone": f"z{i % 3}"}, unschedulable=i == 4)
            for i in range(10)]
    objs += [bound_pod(f"p{i:02d}", f"n{i % 10:02d}", gpus=1, namespace=("a", "b")[i % 2],
                       phase="Running" if i % 4 else "Succeeded", labels={"app": f"a{i % 3}", **({"tier": "x"} if i < 5 else {})})
             for i in range(20)]
    c.seed(objs)
    return c


def names(listing):
    return [o["metadata"]["name"] for o in listing["items"]]


def test_list_carries_resource_version_and_kind(cluster):
    code, listing = call(cluster, "GET", "/api/v1/nodes")
    assert code == 200 and listing["kind"] == "NodeList" and listing["apiVersion"] == "v1"
    assert int(listing["metadata"]["resourceVersion"]) >= max(int(o["metadata"]["resourceVersion"]) for o in listing["items"])
    assert names(listing) == sorted(names(listing)) and len(listing["items"]) == 10
    assert len(call(cluster, "GET", "/api/v1/namespaces/a/pods")[1]["items"]) == 10


def test_pagination_is_consistent_across_writes(cluster):
    _, first = call(cluster, "GET", "/api/v1/pods", limit=7)
    assert len(first["items"]) == 7 and first["metadata"]["remainingItemCount"] == 13
    token, rv = first["metadata"]["continue"], first["metadata"]["resourceVersion"]
    # writes between pages do not show up in the continued list (served at the first page's version)
    call(cluster, "DELETE", "/api/v1/namespaces/b/pods/p19")
    call(cluster, "POST", "/api/v1/namespaces/b/pods", bound_pod("p99", "n01", namespace="b"))
    seen = names(first)
    while token:
        code, page = call(cluster, "GET", "/api/v1/pods", limit=7, **{"continue": token})
        assert code == 200 and page["metadata"]["resourceVersion"] == rv
        seen += names(page)
        token = page["metadata"].get("continue")
    assert sorted(seen) == sorted(f"p{i:02d}" for i in range(20))
    assert "p99" in names(call(cluster, "GET", "/api/v1/pods")[1])


def test_expired_continue_token_is_410(cluster):
    _, first = call(cluster, "GET", "/api/v1/nodes", limit=3)
    cluster.seed([gpu_node("late")])        # a write, then compaction past the token's version
    code, status = call(cluster, "GET", "/api/v1/nodes", limit=3, **{"continue": first["metadata"]["continue"]})
    assert code == 410 and status["reason"] == "Expired" and status["kind"] == "Status"
    assert call(cluster, "GET", "/api/v1/nodes", limit=3, **{"continue": "garbage"})[0] == 400


def test_pagination_through_the_kubernetes_client(cluster, fresh_fleet):
    from kubernetes import client, config
    api = client.CoreV1Api(config.new_client_from_config(str(fresh_fleet.kubeconfig), context="alpha"))
    got, token = [], None
    while True:
        page = api.list_node(limit=4, _continue=token)
        got += [n.metadata.name for n in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert got == [f"n{i:02d}" for i in range(10)]
    assert cluster.requests.count(verb="list", resource="nodes") == 3




@pytest.mark.parametrize("selector, expected", [
    ("app=a0", {0, 3, 6, 9, 12, 15, 18}),
    ("app==a0", {0, 3, 6, 9, 12, 15, 18}),
    ("app!=a0,tier", {1, 2, 4}),
    ("app in (a1, a2),!tier", {5, 7, 8, 10, 11, 13, 14, 16, 17, 19}),
    ("app notin (a0,a1)", {2, 5, 8, 11, 14, 17}),
    ("tier", {0, 1, 2, 3, 4}),
    ("!tier,app=a0", {6, 9, 12, 15, 18}),
    ("missing=x", set()),
])
def test_label_selectors(cluster, selector, expected):
    _, listing = call(cluster, "GET", "/api/v1/pods", labelSelector=selector)
    assert set(names(listing)) == {f"p{i:02d}" for i in expected}


@pytest.mark.parametrize("selector, expected", [
    ("spec.nodeName=n03", {3, 13}),
    ("spec.nodeName==n03,status.phase=Running", {3, 13}),
    ("status.phase!=Running", {0, 4, 8, 12, 16}),
    ("metadata.name=p07", {7}),
    ("metadata.namespace=b,status.phase=Succeeded", set()),
    ("metadata.namespace!=b,spec.nodeName=n04", {4, 14}),
])
def test_field_selectors(cluster, selector, expected):
    _, listing = call(cluster, "GET", "/api/v1/pods", fieldSelector=selector)
    assert set(names(listing)) == {f"p{i:02d}" for i in expected}


def test_unsupported_selectors_are_400(cluster):
    code, status = call(cluster, "GET", "/api/v1/pods", fieldSelector="spec.priority=3")
    assert code == 400 and "field label not supported" in status["message"]
    code, _ = call(cluster, "GET", "/apis/jobset.x-k8s.io/v1alpha2/jobsets", fieldSelector="spec.x=1")
    assert code == 400
    assert call(cluster, "GET", "/api/v1/nodes", fieldSelector="spec.unschedulable=true")[1]["items"][0]["metadata"]["name"] == "n04"
    assert call(cluster, "GET", "/api/v1/pods", labelSelector="a in b")[0] == 400
    with pytest.raises(SelectorError):
        label_selector("=x")


def test_limit_larger_than_list_has_no_continue(cluster):
    _, listing = call(cluster, "GET", "/api/v1/nodes", limit=100)
    assert len(listing["items"]) == 10 and "continue" not in listing["metadata"]


def test_lists_reflect_modifications_after_being_served(cluster):
    call(cluster, "GET", "/api/v1/pods")               # warms the per-object JSON cache
    call(cluster, "PATCH", "/api/v1/namespaces/b/pods/p01", {"metadata": {"labels": {"new": "1"}}},
         "application/merge-patch+json")
    _, listing = call(cluster, "GET", "/api/v1/pods", labelSelector="new=1")
    assert names(listing) == ["p01"]
    p01 = next(o for o in call(cluster, "GET", "/api/v1/pods")[1]["items"] if o["metadata"]["name"] == "p01")
    assert p01["metadata"]["labels"]["new"] == "1"
    # a continued list still shows the object as it was when the first page was served
    _, first = call(cluster, "GET", "/api/v1/namespaces/b/pods", limit=1)
    call(cluster, "PATCH", "/api/v1/namespaces/b/pods/p03", {"metadata": {"labels": {"later": "1"}}},
         "application/merge-patch+json")
    _, rest = call(cluster, "GET", "/api/v1/namespaces/b/pods", **{"continue": first["metadata"]["continue"]})
    p03 = next(o for o in rest["items"] if o["metadata"]["name"] == "p03")
    assert "later" not in p03["metadata"]["labels"]
