"""Pure parts of the access layer: backoff, discovery parsing, selectors, error reasons."""

import random

import pytest

from placer import kube
from placer.kube import Resource, RetryPolicy
from placer.kube.resources import parse_resource_list
from placer.kube.transport import connection_reason, parse_retry_after
from placer.model.errors import InputError
from placer.model.selectors import selector_query


def test_backoff_doubles_with_bounded_jitter_and_cap():
    policy = RetryPolicy(base=0.5, cap=3.0, jitter=0.2)
    rng = random.Random(1)
    for attempt, nominal in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (9, 3.0)]:
        for _ in range(50):
            d = policy.delay(attempt, None, rng)
            assert nominal * 0.8 <= d <= nominal * 1.2


def test_retry_after_wins_over_shorter_backoff_and_is_capped():
    policy = RetryPolicy(base=0.1, jitter=0.0, max_retry_after=5.0)
    rng = random.Random(0)
    assert policy.delay(1, 2.0, rng) == 2.0
    assert policy.delay(1, 60.0, rng) == 5.0
    assert policy.delay(1, 0.0, rng) == pytest.approx(0.1)


def test_retry_after_header_parsing():
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None
    assert parse_retry_after({}) is None


def test_resource_list_parsing_and_paths():
    doc = {"resources": [
        {"name": "jobsets", "singularName": "jobset", "namespaced": True, "kind": "JobSet",
         "verbs": ["get", "list"], "shortNames": ["js"]},
        {"name": "jobsets/status", "namespaced": True, "kind": "JobSet", "verbs": ["get", "patch"]},
        {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node", "verbs": []},
    ]}
    jobsets, nodes = parse_resource_list("jobset.x-k8s.io", "v1alpha2", doc)
    assert jobsets.subresources == {"status"} and jobsets.short_names == ("js",)
    assert jobsets.names() == {"jobsets", "jobset", "js"}
    assert jobsets.api_version == "jobset.x-k8s.io/v1alpha2"
    assert jobsets.path("ns", "a b", "status") == "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/a%20b/status"
    assert jobsets.path() == "/apis/jobset.x-k8s.io/v1alpha2/jobsets"
    assert nodes.path("ignored", "n1") == "/apis/jobset.x-k8s.io/v1alpha2/nodes/n1"
    core = Resource("", "v1", "Pod", "pods", True)
    assert core.path("default") == "/api/v1/namespaces/default/pods" and core.api_version == "v1"


def test_selectors_from_maps_and_strings():
    assert selector_query({"a": "1", "b": "x"}) == "a=1,b=x"
    assert selector_query("a!=1") == "a!=1"
    assert selector_query({}) is None and selector_query(None) is None


def test_connection_reasons():
    import urllib3

    refused = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")
    assert connection_reason(refused) == "connection refused"
    wrapped = urllib3.exceptions.MaxRetryError(None, "/api", reason=refused)
    assert connection_reason(wrapped) == "connection refused"
    assert connection_reason(urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out")) == "timed out"


def test_missing_kubeconfig_is_input_error(tmp_path):
    with pytest.raises(InputError) as e:
        kube.list_contexts(str(tmp_path / "nope"))
    assert "nope" in str(e.value)


def test_kubeconfig_from_env_with_several_files(tmp_path, monkeypatch):
    def cfg(name, port):
        return f"""apiVersion: v1
kind: Config
clusters: [{{name: {name}, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u-{name}, user: {{token: t}}}}]
contexts: [{{name: {name}, context: {{cluster: {name}, user: u-{name}, namespace: team-{name}}}}}]
current-context: {name}
"""
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text(cfg("east", 1))
    b.write_text(cfg("west", 2))
    monkeypatch.setenv("KUBECONFIG", f"{a}:{b}")
    k = kube.Kube()
    names, current = k.contexts()
    assert set(names) == {"east", "west"} and current == "east"
    west = k.client("west")
    assert west.cluster == "west" and west.namespace == "team-west"
    assert west.api.configuration.host == "http://127.0.0.1:2"
    assert k.client() .cluster == "east"
    with pytest.raises(InputError, match="context 'north' not found"):
        k.client("north")
