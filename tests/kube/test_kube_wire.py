"""placer.kube.wire sends what the client library's own serializer would (URL, query quoting,
headers, authorization, body), and runs the kubeconfig's token refresh hook at most once per
REFRESH seconds, and again after."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from kubernetes import client as k8s_client

from placer.kube import request as R
from placer.kube.resources import Resource
from placer.kube.wire import REFRESH, Wire

JOBSETS = Resource(group="jobset.x-k8s.io", version="v1alpha2", kind="JobSet", plural="jobsets", namespaced=True)
NODES = Resource(group="", version="v1", kind="Node", plural="nodes", namespaced=False)


class _Pool:
    def __init__(self):
        self.sent: list[dict] = []

    def urlopen(self, method, url, **kw):
        self.sent.append({"method": method, "url": url, **kw})
        return type("R", (), {"status": 200, "reason": "OK", "data": b"{}", "headers": {}})()


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _api(token: str | None = "t0") -> tuple[k8s_client.ApiClient, list[int]]:
    cfg = k8s_client.Configuration()
    cfg.host = "https://example:6443"
    refreshed: list[int] = []
    if token:
        cfg.api_key["BearerToken"] = token
        cfg.api_key_prefix["BearerToken"] = "Bearer"

        def hook(c):                               # what the kubeconfig loader installs: may renew the token
            refreshed.append(1)
            c.api_key["BearerToken"] = f"t{len(refreshed)}"
        cfg.refresh_api_key_hook = hook
    api = k8s_client.ApiClient(cfg)
    api.rest_client.pool_manager = _Pool()
    return api, refreshed


REQUESTS = [
    R.get_request(JOBSETS, "a b", "ns"),
    R.list_request(JOBSETS, None, label_selector="app in (x, y),tier!=db", limit=5, cont="tok/+="),
    R.apply_request(JOBSETS, {"apiVersion": "v1", "kind": "JobSet", "metadata": {"name": "j"},
                              "spec": {"l": [1, 2.5, None, True], "s": "é"}}, "ns", force=True),
    R.patch_request(JOBSETS, "j", {"metadata": {"annotations": {"a": None}}}, "ns", subresource="status"),
    R.delete_request(NODES, "n", None),
    R.watch_request(NODES, None, "12", field_selector={"metadata.name": "n"}),
]


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: f"{r.method} {r.path}")
def test_the_wire_sends_what_the_library_serializer_sends(req):
    api, _ = _api()
    method, url, headers, body, _ = api.param_serialize(req.method, req.path, query_params=list(req.query),
                                                        header_params=req.headers, body=req.body,
                                                        auth_settings=["BearerToken"])
    Wire(api).send(req, (5.0, 30.0))
    sent = api.rest_client.pool_manager.sent[0]
    assert (sent["method"], sent["url"]) == (method, url)
    # the same headers; the token itself is renewed by each run of the (test's) hook
    assert sent["headers"].keys() == headers.keys() and sent["headers"]["authorization"].startswith("Bearer t")
    assert {k: v for k, v in sent["headers"].items() if k != "authorization"} == \
        {k: v for k, v in headers.items() if k != "authorization"}
    assert (sent["body"] is None) == (body is None)
    if body is not None:
        assert json.loads(sent["body"]) == json.loads(json.dumps(body))
    assert (sent["timeout"].connect_timeout, sent["timeout"].read_timeout) == (5.0, 30.0)
    assert sent["preload_content"] is False


def test_dates_in_a_body_are_sent_as_the_library_sends_them():
    api, _ = _api()
    at = datetime(2026, 12, 6, 10, 0, tzinfo=timezone.utc)
    req = R.raw_request("POST", "/api/v1/namespaces/ns/events", body={"eventTime": at}, content_type="application/json")
    Wire(api).send(req, (1.0, 1.0))
    assert json.loads(api.rest_client.pool_manager.sent[0]["body"]) == api.sanitize_for_serialization({"eventTime": at})


def test_the_token_refresh_hook_runs_at_most_once_per_refresh_interval():
    api, refreshed = _api()
    clock = _Clock()
    wire = Wire(api, clock=clock)
    req = R.get_request(NODES, "n", None)
    for _ in range(5):
        wire.send(req, (1.0, 1.0))
    assert len(refreshed) == 1
    clock.now += REFRESH                           # a second later the hook runs again: a renewed token is used
    wire.send(req, (1.0, 1.0))
    assert len(refreshed) == 2
    assert [s["headers"]["authorization"] for s in api.rest_client.pool_manager.sent] == ["Bearer t1"] * 5 + ["Bearer t2"]


def test_no_authorization_header_without_a_token():
    api, _ = _api(token=None)
    Wire(api).send(R.get_request(NODES, "n", None), (1.0, 1.0))
    assert "authorization" not in api.rest_client.pool_manager.sent[0]["headers"]


@pytest.mark.parametrize("value", [
    {"metadata": {"name": "é", "labels": {"a": "b"}}, "spec": {"replicas": 3, "f": 0.1, "n": None, "t": True}},
    {"big": 2 ** 70, "neg": -(2 ** 65)},                # beyond orjson's 64 bits: json's way
    [1, "x", {"y": [2.5e-7, 1e300]}],
])
def test_bodies_and_answers_mean_what_json_says(value):
    from placer.kube.wire import decode_body, encode_body
    assert json.loads(encode_body(value)) == value
    assert decode_body(json.dumps(value)) == value and decode_body(json.dumps(value).encode()) == value


def test_bodies_json_lacks_are_sent_as_the_library_sends_them():
    from decimal import Decimal

    from placer.kube.wire import encode_body
    api, _ = _api()
    value = {"d": Decimal("1.5"), "t": (1, 2), 3: "int key"}
    assert json.loads(encode_body(value)) == json.loads(json.dumps(api.sanitize_for_serialization(value)))
