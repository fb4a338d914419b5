"""placer.kube.direct: a POST or PATCH and its whole answer on a pooled connection. The same
answers and errors as the library's path (urllib3 and http.client) on the in-repo API server;
the answer's framing read exactly (lengths, chunks, trailers, interim answers, a connection
closed early); a connection used again only after a whole answer; a connection not opened
left to the library's path with one try counted."""

from __future__ import annotations

import json
import socket

import pytest
import urllib3
from urllib3.exceptions import ProtocolError

from placer.kube import Kube
from placer.kube import direct as D
from placer.model.errors import Conflict, Invalid, NotFound, Unreachable


class _Sock:
    """A socket that answers with `parts`, one per recv, then the end of the stream."""

    def __init__(self, *parts: bytes):
        self.parts = list(parts)

    def recv(self, n: int) -> bytes:
        return self.parts.pop(0) if self.parts else b""


def _answer(*parts: bytes):
    return D.read_answer(_Sock(*parts))


def test_a_length_split_over_reads_and_the_connection_kept():
    a, reuse = _answer(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-", b"Length: 10\r\n\r\n{\"a\"", b": [1]}")
    assert (a.status, a.data, a.headers.get("content-type"), reuse) == (200, b'{"a": [1]}', "application/json", True)
    assert a.read() == a.data and a.response is a


def test_chunks_with_extensions_and_trailers():
    a, reuse = _answer(b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\n{\"a\"\r\n",
                       b"3\r\n: 1\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n")
    assert (a.status, a.data, reuse) == (201, b'{"a": 1}', True)


def test_an_interim_answer_is_skipped():
    a, _ = _answer(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    assert (a.status, a.data) == (200, b"{}")


def test_an_interim_answer_split_from_the_real_one_and_its_headers_not_kept():
    a, reuse = _answer(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 2",
                       b"01 Created\r\nX-A:  a b  \r\nContent-Length: 2\r\n\r\n{}")
    assert (a.status, a.data, dict(a.headers), reuse) == (201, b"{}", {"X-A": "a b", "Content-Length": "2"}, True)


def test_trailers_are_not_headers():
    a, _ = _answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Trailer: t\r\n\r\n")
    assert (a.data, a.headers.get("x-trailer")) == (b"{}", None)


@pytest.mark.parametrize("after", [b"junk", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"])
def test_bytes_after_the_answer_keep_the_answer_not_the_connection(after):
    a, reuse = _answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}" + after)
    assert (a.status, a.data, reuse) == (200, b"{}", False)


@pytest.mark.parametrize("head, reuse", [
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n", False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n", False),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n", True),
])
def test_the_connection_is_kept_only_when_the_answer_says_so(head, reuse):
    assert _answer(head + b"{}")[1] is reuse


def test_no_length_reads_to_the_end_and_closes():
    a, reuse = _answer(b"HTTP/1.1 200 OK\r\n\r\n{\"a\"", b": 1}")
    assert (a.data, reuse) == (b'{"a": 1}', False)


def test_no_body_for_204_and_the_error_body_kept():
    assert _answer(b"HTTP/1.1 204 No Content\r\n\r\n")[0].data == b""
    a, _ = _answer(b"HTTP/1.1 409 Conflict\r\nRetry-After: 3\r\nContent-Length: 2\r\n\r\n{}")
    assert (a.status, a.headers.get("retry-after")) == (409, "3")


@pytest.mark.parametrize("parts", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",),          # closed before the end
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",),
    (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",),
    (b"SSH-2.0 hello\r\n\r\n",),
    (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",),
    (b"",),
    (b"HTTP/1.1 100 Continue\r\n\r\n",),                        # closed after an interim answer
    (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",),
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * D.MAX_HEAD, b"\r\nContent-Length: 0\r\n\r\n"),   # headers too long
])
def test_a_broken_answer_is_a_protocol_error(parts):
    with pytest.raises(ProtocolError):
        _answer(*parts)


def test_the_request_in_one_piece_as_http_client_writes_it():
    raw = D.request_bytes("PATCH", "/a/b?fieldManager=placer", "h:1", {"Content-Type": "x"}, b"{}")
    assert raw == (b"PATCH /a/b?fieldManager=placer HTTP/1.1\r\nHost: h:1\r\nAccept-Encoding: identity\r\n"
                   b"Content-Type: x\r\nContent-Length: 2\r\n\r\n{}")
    with pytest.raises(ValueError):
        D.request_bytes("POST", "/a", "h:1", {"authorization": "Bearer t\r\nX-Evil: 1"}, b"{}")


def test_only_a_plain_pool_manager_and_only_posts_patches_and_gets():
    assert D.Direct.of(urllib3.PoolManager(), "https://h:1") is not None
    assert D.Direct.of(urllib3.ProxyManager("http://proxy:3128"), "https://h:1") is None
    assert D.Direct.of(object(), "https://h:1") is None
    assert D.METHODS == {"POST", "PATCH", "GET"} and D.IDEMPOTENT == {"GET"}


def _clients(fleet, cluster="alpha"):
    """A client whose POSTs and PATCHes go direct, and one whose go through the library."""
    fast = Kube(str(fleet.kubeconfig)).client(cluster)
    slow = Kube(str(fleet.kubeconfig)).client(cluster)
    slow.transport.wire._direct = None                    # the library's path only
    assert fast.transport.wire.direct() is not None
    return fast, slow


def _strip(obj):
    meta = dict(obj["metadata"])
    for k in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "name", "generation"):
        meta.pop(k, None)
    return {**obj, "metadata": meta}


def test_the_same_answers_and_errors_as_the_library(fresh_fleet):
    fast, slow = _clients(fresh_fleet)
    cm = fast.resource_for("v1", "ConfigMap")
    out = {}
    for name, c in (("fast", fast), ("slow", slow)):
        made = c.create(cm, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                             "data": {"k": "é" * 3000}}, "default")          # a body larger than one read
        patched = c.patch(cm, name, {"metadata": {"annotations": {"a": "1"}}, "data": {"k": None, "j": "2"}},
                          "default")
        applied = c.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
                           "data": {"z": "3"}}, cm)
        errors = []
        for call in (lambda: c.patch(cm, "missing", {"data": {}}, "default"),
                     lambda: c.create(cm, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}},
                                      "default"),
                     lambda: c.patch(cm, name, {"metadata": {"resourceVersion": "1"}, "data": {"x": "y"}},
                                     "default")):
            with pytest.raises((NotFound, Conflict, Invalid)) as e:
                call()
            errors.append((type(e.value), e.value.status, e.value.message.replace(name, "N")))
        with pytest.raises(NotFound) as e:
            c.get(cm, "missing", "default")
        errors.append((type(e.value), e.value.status, e.value.message))
        out[name] = ([_strip(made), _strip(patched), _strip(applied), _strip(c.get(cm, name, "default"))], errors)
    assert json.dumps(out["fast"][0], sort_keys=True) == json.dumps(out["slow"][0], sort_keys=True)
    assert out["fast"][1] == out["slow"][1]


def test_a_connection_is_used_again(fresh_fleet):
    fast, _ = _clients(fresh_fleet)
    cm = fast.resource_for("v1", "ConfigMap")
    fast.create(cm, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, "default")
    pool = fast.transport.wire.direct().pool()
    before = pool.num_connections
    for i in range(20):
        fast.patch(cm, "c", {"data": {"i": str(i)}}, "default")
    assert pool.num_connections == before        # every PATCH on the same kept connection
    assert fast.get(cm, "c", "default")["data"] == {"i": "19"}


def test_a_reset_connection_fails_as_through_the_library(fresh_fleet):
    fast, slow = _clients(fresh_fleet)
    cm = fast.resource_for("v1", "ConfigMap")
    fresh_fleet["alpha"].faults.reset = True
    seen = []
    for c in (fast, slow):
        with pytest.raises(Unreachable) as e:
            c.patch(cm, "c", {"data": {}}, "default")
        seen.append(type(e.value))
    assert seen[0] is seen[1]


def test_a_connection_not_opened_goes_on_through_the_library_with_one_try_counted():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                     # nothing listens there: refused
    manager = urllib3.PoolManager()
    d = D.Direct(manager, f"http://127.0.0.1:{port}")
    with pytest.raises(D.Unopened) as e:
        d.exchange("POST", "/x", {}, b"{}", (1.0, 1.0))
    default = urllib3.Retry.from_int(d.pool().retries)
    assert e.value.retries.total == default.total - 1


def _closing_server(answers: int = 100):
    """A port that accepts connections and closes each one without an answer."""
    import threading
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)

    def serve():
        for _ in range(answers):
            try:
                c, _ = s.accept()
            except OSError:
                return
            c.recv(65536)
            c.close()
    threading.Thread(target=serve, daemon=True).start()
    return s


def test_a_get_without_an_answer_goes_on_through_the_library_a_post_fails_at_once():
    s = _closing_server()
    try:
        d = D.Direct(urllib3.PoolManager(), f"http://127.0.0.1:{s.getsockname()[1]}")
        default = urllib3.Retry.from_int(d.pool().retries)
        with pytest.raises(D.Unopened) as e:
            d.exchange("GET", "/x", {}, None, (1.0, 1.0))
        assert e.value.retries.total == default.total - 1
        with pytest.raises(ProtocolError):
            d.exchange("POST", "/x", {}, b"{}", (1.0, 1.0))
    finally:
        s.close()
