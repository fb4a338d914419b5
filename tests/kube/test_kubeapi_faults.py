"""The harness's fault injection and request counting."""
import http.client
import socket
import time

import pytest

from tests.kubeapi import gpu_node
from tests.kubeapi.http import call


def test_down_refuses_connections_until_up(fresh_fleet):
    alpha, beta = fresh_fleet["alpha"], fresh_fleet["beta"]
    alpha.seed([gpu_node("n1")])
    port = alpha.port
    alpha.down()
    with pytest.raises(ConnectionRefusedError):
        call(alpha, "GET", "/api/v1/nodes")
    assert call(beta, "GET", "/api/v1/nodes")[0] == 200          # the others are unaffected
    alpha.up()
    assert alpha.port == port and call(alpha, "GET", "/api/v1/nodes")[1]["items"][0]["metadata"]["name"] == "n1"


def test_down_cuts_open_keep_alive_connections(fresh_fleet):
    alpha = fresh_fleet["alpha"]
    conn = http.client.HTTPConnection("127.0.0.1", alpha.port, timeout=5)
    conn.request("GET", "/api/v1/nodes")
    assert conn.getresponse().read()
    alpha.down()
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        conn.request("GET", "/api/v1/nodes")
        conn.getresponse().read()


def test_kubernetes_client_sees_refused_and_reset_connections(fresh_fleet):
    import urllib3
    from kubernetes import client, config
    alpha = fresh_fleet["alpha"]
    api = client.CoreV1Api(config.new_client_from_config(str(fresh_fleet.kubeconfig), context="alpha"))
    api.api_client.configuration.retries = 0
    alpha.down()
    with pytest.raises(urllib3.exceptions.HTTPError):
        api.list_node(_request_timeout=2)
    alpha.up()
    alpha.faults.reset = True
    with pytest.raises(urllib3.exceptions.HTTPError):
        api.list_node(_request_timeout=2)
    alpha.faults.reset = False
    assert api.list_node(_request_timeout=2).items == []


def test_errors_for_the_next_n_requests(fresh_fleet):
    alpha = fresh_fleet["alpha"]
    alpha.faults.fail(500, count=2)
    code, status = call(alpha, "GET", "/api/v1/nodes")
    assert code == 500 and status["reason"] == "InternalError" and status["kind"] == "Status"
    assert call(alpha, "GET", "/api/v1/nodes")[0] == 500
    assert call(alpha, "GET", "/api/v1/nodes")[0] == 200
    assert alpha.requests.count(verb="list", resource="nodes") == 3


def test_429_with_retry_after_and_path_filter(fresh_fleet):
    alpha = fresh_fleet["alpha"]
    alpha.faults.fail(429, retry_after=3, match="/pods")
    conn = http.client.HTTPConnection("127.0.0.1", alpha.port, timeout=5)
    conn.request("GET", "/api/v1/pods")
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 429 and resp.getheader("Retry-After") == "3"
    assert call(alpha, "GET", "/api/v1/nodes")[0] == 200
    code, status = call(alpha, "GET", "/api/v1/namespaces/x/pods")
    assert code == 429 and status["reason"] == "TooManyRequests" and status["details"]["retryAfterSeconds"] == 3
    alpha.faults.fail(403)
    assert call(alpha, "GET", "/api/v1/nodes")[1]["reason"] == "Forbidden"
    alpha.faults.clear()
    assert call(alpha, "GET", "/api/v1/nodes")[0] == 200


def test_fraction_of_failures(fresh_fleet):
    alpha = fresh_fleet["alpha"]
    alpha.faults.fail(503, fraction=0.5)
    codes = [call(alpha, "GET", "/api/v1/nodes")[0] for _ in range(40)]
    assert 8 < codes.count(503) < 32 and set(codes) == {200, 503}


def test_delay(fresh_fleet):
    alpha = fresh_fleet["alpha"]
    alpha.faults.delay = 0.5
    start = time.monotonic()
    assert call(alpha, "GET", "/api/v1/nodes")[0] == 200
    assert time.monotonic() - start >= 0.5
    with pytest.raises(socket.timeout):
        call(alpha, "GET", "/api/v1/nodes", timeout=0.2)


def test_hang_holds_requests_until_released_then_processes_them(fresh_fleet):
    import threading

    alpha = fresh_fleet["alpha"]
    alpha.seed([gpu_node("n1")])
    alpha.faults.hang(methods=("POST",), spread=True)         # dark from the first create on
    assert call(alpha, "GET", "/api/v1/nodes")[0] == 200       # not matched: served
    answers: dict[str, int] = {}

    def create() -> None:
        answers["create"] = call(alpha, "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                                   "metadata": {"name": "n2"}})[0]
    t = threading.Thread(target=create)
    t.start()
    deadline = time.monotonic() + 10
    while alpha.faults.held < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert alpha.faults.held == 1 and "n2" not in {n["metadata"]["name"] for n in alpha.objects("v1", "Node")}
    conn = http.client.HTTPConnection("127.0.0.1", alpha.port, timeout=0.5)
    with pytest.raises(OSError):                               # spread: a read is held now too
        conn.request("GET", "/api/v1/nodes")
        conn.getresponse().read()
    alpha.faults.release()                                     # processed, then answered
    t.join(10)
    assert answers == {"create": 201} and "n2" in {n["metadata"]["name"] for n in alpha.objects("v1", "Node")}
    assert not alpha.faults.hanging and call(alpha, "GET", "/api/v1/nodes")[0] == 200


def test_request_log_counts_by_verb_and_resource(fresh_fleet):
    alpha = fresh_fleet["alpha"]
    alpha.requests.clear()
    call(alpha, "GET", "/api")
    call(alpha, "GET", "/api/v1/nodes")
    call(alpha, "POST", "/api/v1/nodes", gpu_node("n9"))
    call(alpha, "GET", "/api/v1/nodes/n9")
    call(alpha, "PATCH", "/api/v1/nodes/n9/status", {"status": {}}, "application/merge-patch+json")
    assert alpha.requests.by_verb() == {"discovery": 1, "list": 1, "create": 1, "get": 1, "patch": 1}
    assert alpha.requests.count(resource="nodes/status") == 1
    assert alpha.requests.count(path="/api/v1/nodes") == 4
    entry = alpha.requests.entries[-1]
    assert (entry.method, entry.verb, entry.name, entry.code) == ("PATCH", "patch", "n9", 200)


def test_shared_fleet_is_reset_between_tests(kube_fleet):
    # the previous tests left no faults on the shared fleet; this one leaves one for the fixture to clear
    assert call(kube_fleet["gamma"], "GET", "/api/v1/nodes")[0] == 200
    kube_fleet["gamma"].faults.fail(500)
    kube_fleet["gamma"].down()
