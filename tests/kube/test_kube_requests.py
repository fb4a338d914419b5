"""Requests as values, with no server: the exact method, path, query and body each verb sends,
and the transport's hooks (run before every try, and on a final failure)."""

from __future__ import annotations

import random

import pytest

from placer.daemon.execute import Fence, ReportFailure, fenced_client
from placer.daemon.leadership import NotLeader
from placer.kube import KubeClient, Request, Resource, RetryPolicy, Transport
from placer.kube import request as R
from placer.model.errors import Conflict, ServerError, Unreachable

JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", True, subresources=frozenset({"status"}))
NODES = Resource("", "v1", "Node", "nodes", False)
JS = "/apis/jobset.x-k8s.io/v1alpha2"


def test_get_and_namespaces():
    assert R.get_request(JOBSETS, "a b", "ns") == Request("GET", f"{JS}/namespaces/ns/jobsets/a%20b",
                                                          obj="jobsets.jobset.x-k8s.io/ns/a b")
    assert R.get_request(NODES, "n1", None) == Request("GET", "/api/v1/nodes/n1", obj="nodes/n1")
    assert R.namespace_for(JOBSETS, None, "dflt") == "dflt"
    assert R.namespace_for(JOBSETS, None, "dflt", {"metadata": {"namespace": "own"}}) == "own"
    assert R.namespace_for(JOBSETS, "arg", "dflt", {"metadata": {"namespace": "own"}}) == "arg"
    assert R.namespace_for(NODES, "arg", "dflt") is None
    assert not R.get_request(NODES, "n1", None).write


def test_list_with_selectors_limit_and_continue():
    req = R.list_request(JOBSETS, "ns", label_selector={"a": "1", "b": "x"}, field_selector="status.phase!=Done",
                         limit=500, cont="tok")
    assert req == Request("GET", f"{JS}/namespaces/ns/jobsets",
                          (("labelSelector", "a=1,b=x"), ("fieldSelector", "status.phase!=Done"), ("limit", "500"),
                           ("continue", "tok")), obj="jobsets.jobset.x-k8s.io")
    everywhere = R.list_request(JOBSETS, None, limit=0)
    assert everywhere.path == f"{JS}/jobsets" and everywhere.query == ()
    assert R.list_request(NODES, "ignored").path == "/api/v1/nodes"


def test_watch_resumes_from_a_version_with_bookmarks():
    req = R.watch_request(JOBSETS, "ns", "42", label_selector={"x": "y"}, timeout_seconds=60)
    assert req.method == "GET" and req.path == f"{JS}/namespaces/ns/jobsets"
    assert req.query == (("watch", "true"), ("resourceVersion", "42"), ("allowWatchBookmarks", "true"),
                         ("timeoutSeconds", "60"), ("labelSelector", "x=y"))


def test_create_patch_and_delete():
    body = {"metadata": {"name": "j"}, "spec": {}}
    made = R.create_request(JOBSETS, body, "ns")
    assert made == Request("POST", f"{JS}/namespaces/ns/jobsets", body=body, content_type="application/json",
                           obj="jobsets.jobset.x-k8s.io/ns/j")
    assert made.body is not body and made.write
    patch = R.patch_request(JOBSETS, "j", {"status": {"x": 1}}, "ns", subresource="status")
    assert patch == Request("PATCH", f"{JS}/namespaces/ns/jobsets/j/status", (("fieldManager", "placer"),),
                            {"status": {"x": 1}}, "application/merge-patch+json", "jobsets.jobset.x-k8s.io/ns/j")
    gone = R.delete_request(JOBSETS, "j", "ns")
    assert (gone.method, gone.path, gone.content_type) == ("DELETE", f"{JS}/namespaces/ns/jobsets/j",
                                                           "application/json")
    assert gone.body == {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    assert R.delete_request(JOBSETS, "j", "ns", propagation=None).body is None


def test_server_side_apply_field_manager_force_and_dry_run():
    body = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "j"}}
    plain = R.apply_request(JOBSETS, body, "ns")
    assert plain.method == "PATCH" and plain.content_type == "application/apply-patch+yaml"
    assert plain.path == f"{JS}/namespaces/ns/jobsets/j" and plain.query == (("fieldManager", "placer"),)
    forced = R.apply_request(JOBSETS, body, "ns", force=True, field_manager="me", dry_run=True)
    assert forced.query == (("fieldManager", "me"), ("force", "true"), ("dryRun", "All"))
    assert R.apply_request(JOBSETS, body, "ns", subresource="status").path.endswith("/jobsets/j/status")


def test_raw_query_values():
    assert R.query_params({"a": True, "b": False, "c": None, "d": 3}) == (("a", "true"), ("b", "false"), ("d", "3"))


class _Resp:
    def __init__(self, status: int, data: bytes = b"{}"):
        self.status, self.data, self.headers = status, data, {}
        self.response = self

    def read(self) -> bytes:
        return self.data

    def release_conn(self) -> None:
        pass


class _FakeApi:
    """Answers with the given statuses in turn; records what was sent."""

    def __init__(self, *statuses: int):
        self.statuses = list(statuses)
        self.sent: list[tuple] = []

    def send(self, request, timeout, whole=False):   # as placer.kube.wire.Wire sends
        self.sent.append((request.method, request.path, request.query, request.content_type, request.body, timeout))
        return _Resp(self.statuses.pop(0))


def _transport(api, **kw) -> Transport:
    return Transport(api, cluster="c", wire=api, retry=RetryPolicy(attempts=3, jitter=0.0), sleep=lambda s: None,  # type: ignore[arg-type]
                     rng=random.Random(0), **kw)


def test_before_attempt_runs_before_every_try_and_can_stop_the_call():
    api, seen = _FakeApi(503, 503, 200), []
    t = _transport(api, before_attempt=seen.append)
    req = R.patch_request(JOBSETS, "j", {"x": 1}, "ns")
    assert t.call(req) == {}
    assert seen == [req] * 3 and len(api.sent) == 3
    assert t.stats.requests == 3 and t.stats.retries == 2

    def refuse(request: Request) -> None:
        raise NotLeader("no", cluster="hub")
    api = _FakeApi(200)
    with pytest.raises(NotLeader):
        _transport(api, before_attempt=refuse).call(req)
    assert api.sent == []


def test_on_failure_runs_once_when_a_call_fails_for_good():
    api, failed = _FakeApi(503, 503, 503), []
    with pytest.raises(ServerError):
        _transport(api, on_failure=failed.append).call(R.get_request(NODES, "n", None))
    assert len(api.sent) == 3 and [e.status for e in failed] == [503]


class _Leader:
    def __init__(self, held: bool):
        self.held, self.margins = held, []

    def fence(self, margin: float) -> None:
        self.margins.append(margin)
        if not self.held:
            raise NotLeader("lost", cluster="hub")


def test_fence_checks_the_lease_before_writes_only():
    leader = _Leader(held=False)
    fence = Fence(leader, 7.5)                                           # type: ignore[arg-type]
    fence(R.get_request(NODES, "n", None))
    assert leader.margins == []
    with pytest.raises(NotLeader):
        fence(R.delete_request(NODES, "n", None))
    assert leader.margins == [7.5]


def test_failures_reported_are_server_errors_and_unreachable_but_not_429():
    seen: list = []
    report = ReportFailure(seen.append)
    report(ServerError("x", status=429))
    report(Conflict("x", status=409))
    report(ServerError("x", status=500))
    report(Unreachable("x"))
    assert [type(e).__name__ for e in seen] == ["ServerError", "Unreachable"] and seen[0].status == 500


def test_fenced_client_bounds_tries_fences_writes_and_fails_fast():
    base = KubeClient(_transport(_FakeApi(500, 429, 200, 200), connect_timeout=5.0), namespace="ns")
    leader, failed = _Leader(held=True), []
    fenced = fenced_client(base, leader, 2.0, sleep=lambda s: None, on_failure=failed.append)  # type: ignore[arg-type]
    assert fenced.discovery is base.discovery and fenced.namespace == "ns" and fenced.stats is base.stats
    with pytest.raises(ServerError):
        fenced.patch(JOBSETS, "j", {"x": 1})                             # a 500: reported, not retried
    assert [e.status for e in failed] == [500] and leader.margins == [4.0]
    fenced.patch(JOBSETS, "j", {"x": 1})                                 # a 429 is tried again, fenced again
    assert leader.margins == [4.0, 4.0, 4.0] and len(failed) == 1
    assert [s[-1] for s in base.api.sent] == [(2.0, 2.0)] * 3
    fenced.get(JOBSETS, "j")
    assert leader.margins == [4.0] * 3
