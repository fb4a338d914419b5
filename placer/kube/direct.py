"""One request and its whole answer on a pooled connection, without http.client's machinery.

The daemon's burst makes ~5,000 small requests (a finalizer patch, an Event, a placed patch on
the hub; a GET and an apply on a target, per workload). Through urllib3 and http.client each
cost ~0.6 ms of client CPU in the burst (~0.3 ms alone): the URL parsed and the pool looked up
again, the request line and each header written by `putheader`, headers and body sent by two
`sendall`s (each releasing and re-taking the interpreter lock, which ~25 busy threads contend
for), the answer's headers parsed by the `email` package. Here the connection still comes from
(and goes back to) the client library's urllib3 pool, which made it as the kubeconfig says
(TLS, client certificates, CA): only the bytes of one HTTP/1.1 exchange are written and read
here, the request in one `sendall`, the answer's bytes fed as they come to httptools' parser
(Node.js's llhttp: status, headers, lengths, chunks, trailers, interim answers, keep-alive).

Used for the requests that make a burst, POST, PATCH and GET, with whole answers (a watch
streams through urllib3), and only with a plain `urllib3.PoolManager` (a proxy, or anything
else, keeps the library's path). Failures are those of the library's path: urllib3's pool
retries a connection it could not open and a GET whose answer did not come (`Retry`, the
pool's own), never a POST or PATCH whose answer did not come (a read error for a method it
does not retry); so those it retries are left to the library's path with one try counted
(`Unopened`), and the others are raised (an `OSError` or urllib3's `HTTPError`, as there).
A connection is used again only after an answer read to its end, with nothing after it, that
keeps it alive; anything else closes it. An answer llhttp refuses is urllib3's `ProtocolError`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Mapping

import httptools
import urllib3
from urllib3.exceptions import ProtocolError

MAX_HEAD = 1 << 16          # bytes of status line and headers an answer may have
READ = 1 << 16              # bytes asked of the socket at once
METHODS = frozenset({"POST", "PATCH", "GET"})
IDEMPOTENT = frozenset({"GET"})


class Unopened(Exception):
    """No connection could be opened, or a GET got no whole answer: the library's path goes
    on with `retries` left, as urllib3's pool would have."""

    def __init__(self, retries: Any):
        super().__init__("connection not opened")
        self.retries = retries


@dataclass(frozen=True)
class Answer:
    """A whole answer: what `Transport` reads of a response."""

    status: int
    data: bytes
    headers: Mapping[str, str]               # names as sent; `get` is case-insensitive (HTTPHeaderDict)

    def read(self) -> bytes:
        return self.data

    @property
    def response(self) -> Answer:            # what a library response's caller releases: nothing held
        return self

    def release_conn(self) -> None:
        pass


class Direct:
    """Exchanges on one host's urllib3 pool (`host`: the configuration's `https://h:p`)."""

    def __init__(self, manager: urllib3.PoolManager, host: str):
        self.manager, self.host = manager, host
        self._pool: Any = None
        self._lock = threading.Lock()
        self.authority = host.split("://", 1)[-1].rstrip("/")

    @staticmethod
    def of(manager: Any, host: str) -> Direct | None:
        """For a plain PoolManager only (not a ProxyManager, not a test's stand-in)."""
        if type(manager) is not urllib3.PoolManager or not host.startswith(("http://", "https://")):
            return None
        return Direct(manager, host)

    def pool(self) -> Any:
        with self._lock:
            if self._pool is None or self._pool.pool is None:      # none yet, or closed by its manager
                self._pool = self.manager.connection_from_url(self.host)
            return self._pool

    def exchange(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None,
                 timeout: tuple[float, float]) -> Answer:
        """One request (`target`: the path and query) and its whole answer."""
        pool = self.pool()
        conn = pool._get_conn()
        reuse = False
        try:
            if conn.sock is None:
                conn.timeout = timeout[0]
                try:
                    conn.connect()
                except (urllib3.exceptions.HTTPError, OSError) as e:     # counted as urllib3 counts it
                    retries = urllib3.Retry.from_int(pool.retries).increment(method, target, error=_as_connect(e))
                    raise Unopened(retries) from e
            conn.sock.settimeout(timeout[1])
            try:
                conn.sock.sendall(request_bytes(method, target, self.authority, headers, body))
                answer, reuse = read_answer(conn.sock)
            except (urllib3.exceptions.HTTPError, OSError) as e:
                if method not in IDEMPOTENT:
                    raise                         # urllib3 tries a POST or PATCH once
                # a GET is tried again by urllib3 (a read error counted): so here
                raise Unopened(urllib3.Retry.from_int(pool.retries).increment(method, target, error=_as_read(e))) from e
            return answer
        finally:
            if not reuse:
                conn.close()
            pool._put_conn(conn)


def _as_connect(e: Exception) -> Exception:
    """The error as urllib3's pool sees a connection it could not open."""
    if isinstance(e, urllib3.exceptions.HTTPError):
        return e
    return urllib3.exceptions.NewConnectionError(None, f"Failed to establish a new connection: {e}")  # type: ignore[arg-type]


def _as_read(e: Exception) -> Exception:
    """The error as urllib3's pool sees an answer that did not come."""
    if isinstance(e, urllib3.exceptions.HTTPError):
        return e
    if isinstance(e, TimeoutError):
        return urllib3.exceptions.ReadTimeoutError(None, "", f"Read timed out. ({e})")  # type: ignore[arg-type]
    return ProtocolError("Connection aborted.", e)


def request_bytes(method: str, target: str, authority: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
    """The request as sent: what http.client writes for it, in one piece."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}", "Accept-Encoding: identity"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if any("\r" in line or "\n" in line for line in lines):
        raise ValueError("a line break in the request line or a header")       # as http.client refuses it
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body or b'')}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if body else head


def read_answer(sock: Any) -> tuple[Answer, bool]:
    """The answer's status, headers and body; whether the connection may be used again."""
    reader = _Reader()
    try:
        return reader.read(sock)
    finally:
        reader.parser = None                 # it holds the reader's callbacks: no cycle left to the GC


class _Reader:
    """httptools' callbacks for one exchange: the final answer's status, headers and body (an
    interim 1xx answer is dropped; trailers are not headers, as in http.client)."""

    def __init__(self) -> None:
        self.parser: Any = httptools.HttpResponseParser(self)
        self.headers = urllib3.HTTPHeaderDict()
        self.body: list[bytes] = []
        self.head = False                    # this answer's headers are whole
        self.status = 0                      # set once the final answer is whole
        self.keep = False

    def on_message_begin(self) -> None:
        if self.status:                      # bytes after the answer: it stops here, not used again
            raise ProtocolError("bytes after the answer")
        self.headers, self.body, self.head = urllib3.HTTPHeaderDict(), [], False

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.head:
            self.headers.add(name.decode("latin-1"), value.decode("latin-1").strip())

    def on_headers_complete(self) -> None:
        self.head = True

    def on_body(self, data: bytes) -> None:
        self.body.append(data)

    def on_message_complete(self) -> None:
        status = self.parser.get_status_code()
        if status >= 200:                    # keep-alive as llhttp reads it (version, Connection, framing)
            self.status, self.keep = status, self.parser.should_keep_alive()
        else:                                # an interim answer (never asked for): the real one follows
            self.head = False

    def read(self, sock: Any) -> tuple[Answer, bool]:
        seen = 0
        while not self.status:
            data = sock.recv(READ)
            if not data:
                return self._at_end(), False
            seen += len(data)
            try:
                self.parser.feed_data(data)
            except (httptools.HttpParserError, httptools.HttpParserUpgrade) as e:
                if not self.status:
                    raise ProtocolError(f"bad answer: {e}") from e
                self.keep = False             # bytes after the whole answer (on_message_begin)
            if not self.head and seen > MAX_HEAD:
                raise ProtocolError("answer headers too long")
        return Answer(self.status, b"".join(self.body), self.headers), self.keep

    def _at_end(self) -> Answer:
        """The connection closed: the answer's end only if it had neither a length nor chunks
        (httptools does not expose llhttp's own end of input)."""
        chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        if not self.head or chunked or "Content-Length" in self.headers:
            raise ProtocolError("connection closed before the answer's end")
        return Answer(self.parser.get_status_code(), b"".join(self.body), self.headers)
