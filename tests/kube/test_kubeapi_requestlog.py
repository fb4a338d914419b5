"""The test server's request log as tests and benchmarks use it to judge clients: who sent a
request (bearer token), when (time.monotonic), what a write carried, and every object ever
created, by a create or by a server-side apply."""

from __future__ import annotations

import time

from tests.kubeapi.http import call

CM = "/api/v1/namespaces/ns1/configmaps"


def test_requests_say_who_when_and_what(fresh_fleet):
    c = fresh_fleet["alpha"]
    before = time.monotonic()
    code, _ = call(c, "POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
                   token="client-1")
    assert code == 201
    code, _ = call(c, "POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}},
                   token="client-1", dryRun="All")
    assert code == 201
    code, _ = call(c, "PATCH", f"{CM}/b", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}},
                   "application/apply-patch+yaml", token="client-2", fieldManager="m")
    assert code == 201
    code, _ = call(c, "PATCH", f"{CM}/b", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"},
                                           "data": {"k": "v"}}, "application/apply-patch+yaml", fieldManager="m")
    assert code == 200
    code, _ = call(c, "POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    assert code == 409
    call(c, "GET", CM, token="client-2")
    log = c.requests
    # every object really created, once each: not the dry run, not the update, not the conflict
    assert sorted(r.name for r in log.created("configmaps")) == ["a", "b"]
    assert [r.token for r in log.created("configmaps")] == ["client-1", "client-2"]
    assert log.count(verb="list", token="client-2") == 1 and log.count(verb="list", token="client-1") == 0
    assert log.count(since=before) == len(log.entries) == 6
    assert log.count(since=time.monotonic()) == 0
    first = log.select(verb="create")[0]
    assert first.body == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    assert first.namespace == "ns1" and first.code == 201
    assert log.by_verb_resource() == {("create", "configmaps"): 3, ("patch", "configmaps"): 2,
                                      ("list", "configmaps"): 1}
