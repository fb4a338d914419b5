"""One request and its whole answer on a pooled connection, without http.client's machinery.

The daemon's burst makes ~5,000 small requests (a finalizer patch, an Event, a placed patch on
the hub; a GET and an apply on a target, per workload). Through urllib3 and http.client each
cost ~0.6 ms of client CPU in the burst (~0.3 ms alone): the URL parsed and the pool looked up
again, the request line and each header written by `putheader`, headers and body sent by two
`sendall`s (each releasing and re-taking the interpreter lock, which ~25 busy threads contend
for), the answer's headers parsed by the `email` package. Here the connection still comes from
(and goes back to) the client library's urllib3 pool, which made it as the kubeconfig says
(TLS, client certificates, CA): only the bytes of one HTTP/1.1 exchange are written and read
here, the request in one `sendall`, the answer read into one buffer.

Used for the requests that make a burst, POST, PATCH and GET, with whole answers (a watch
streams through urllib3), and only with a plain `urllib3.PoolManager` (a proxy, or anything
else, keeps the library's path). Failures are those of the library's path: urllib3's pool
retries a connection it could not open and a GET whose answer did not come (`Retry`, the
pool's own), never a POST or PATCH whose answer did not come (a read error for a method it
does not retry); so those it retries are left to the library's path with one try counted
(`Unopened`), and the others are raised (an `OSError` or urllib3's `HTTPError`, as there).
A connection is used again only after an answer read to its end; anything else closes it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Mapping

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
                answer, reuse = read_answer(conn.sock, method)
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


def read_answer(sock: Any, method: str) -> tuple[Answer, bool]:
    """The answer's status, headers and body; whether the connection may be used again."""
    buf = bytearray()
    while (end := buf.find(b"\r\n\r\n")) < 0:
        if len(buf) > MAX_HEAD:
            raise ProtocolError("answer headers too long")
        _more(sock, buf)
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    del buf[:end + 4]
    version, status = _status_line(lines[0])
    if 100 <= status < 200:                  # an interim answer (never asked for): the real one follows
        answer, reuse = read_answer_rest(sock, buf, method)
        return answer, reuse
    headers = urllib3.HTTPHeaderDict()
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ProtocolError(f"bad header line {line[:80]!r}")
        headers.add(name.strip(), value.strip())
    data, reuse = _body(sock, buf, headers, method, status)
    connection = (headers.get("Connection") or "").lower()
    reuse = reuse and (version == "HTTP/1.1" and "close" not in connection or "keep-alive" in connection)
    return Answer(status, data, headers), reuse


def read_answer_rest(sock: Any, buf: bytearray, method: str) -> tuple[Answer, bool]:
    """After an interim answer: the next one, starting with what was already read."""
    return read_answer(_Prefixed(sock, bytes(buf)), method)


def _status_line(line: str) -> tuple[str, int]:
    version, _, rest = line.partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ProtocolError(f"bad status line {line[:80]!r}")
    return version, int(code)


def _body(sock: Any, buf: bytearray, headers: Mapping[str, str], method: str, status: int) -> tuple[bytes, bool]:
    if method == "HEAD" or status in (204, 304):
        return b"", not buf
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        return _chunked(sock, buf), True
    length = headers.get("Content-Length")
    if length is None:                       # to the end of the connection
        while _more(sock, buf, eof_ok=True):
            pass
        return bytes(buf), False
    n = _number(length.encode(), 10)
    while len(buf) < n:
        _more(sock, buf)
    return bytes(buf[:n]), len(buf) == n


def _chunked(sock: Any, buf: bytearray) -> bytes:
    out = bytearray()
    while True:
        while (eol := buf.find(b"\r\n")) < 0:
            _more(sock, buf)
        size = _number(bytes(buf[:eol]).split(b";", 1)[0].strip(), 16)
        del buf[:eol + 2]
        if size == 0:                         # trailers, up to an empty line
            while (eol := buf.find(b"\r\n")) != 0:
                if eol < 0:
                    _more(sock, buf)
                else:
                    del buf[:eol + 2]
            del buf[:2]
            return bytes(out)
        while len(buf) < size + 2:
            _more(sock, buf)
        out += buf[:size]
        del buf[:size + 2]


def _number(text: bytes, base: int) -> int:
    try:
        n = int(text, base)
    except ValueError:
        raise ProtocolError(f"bad length {text[:40]!r}") from None
    if n < 0:
        raise ProtocolError(f"bad length {text[:40]!r}")
    return n


def _more(sock: Any, buf: bytearray, eof_ok: bool = False) -> bool:
    chunk = sock.recv(READ)
    if not chunk:
        if eof_ok:
            return False
        raise ProtocolError("connection closed before the answer's end")
    buf += chunk
    return True


class _Prefixed:
    """A socket whose next bytes are `head`, then its own."""

    def __init__(self, sock: Any, head: bytes):
        self.sock, self.head = sock, head

    def recv(self, n: int) -> bytes:
        if self.head:
            out, self.head = self.head, b""
            return out
        return self.sock.recv(n)
