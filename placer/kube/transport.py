"""Requests on the wire: retry policy and backoff, request statistics, HTTP statuses
mapped to placer's own errors by type, and short reasons for transport failures."""

from __future__ import annotations

import json
import random
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from placer.model.errors import Conflict, Forbidden, Gone, Invalid, KubeError, NotFound, ServerError, Unreachable

FIELD_MANAGER = "placer"
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4                       # total tries per call
    base: float = 0.25                      # first backoff, doubled each retry
    cap: float = 8.0
    jitter: float = 0.5                     # +- this fraction of the backoff
    max_retry_after: float = 30.0           # never sleep longer than this for a server's hint
    statuses: frozenset[int] = frozenset({429, 500, 502, 503, 504})   # HTTP statuses tried again
    connection_errors: bool = True          # and failures without a status (refused, reset, timed out)

    def retries(self, e: KubeError) -> bool:
        """Whether a failed try may be tried again (the number of attempts aside)."""
        if not isinstance(e, (ServerError, Unreachable)):
            return False
        return self.connection_errors if e.status is None else e.status in self.statuses

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before try `attempt + 1` (attempt counts from 1)."""
        backoff = min(self.cap, self.base * 2 ** (attempt - 1))
        backoff *= 1 + self.jitter * (2 * rng.random() - 1)
        if retry_after is not None:
            return max(backoff, min(retry_after, self.max_retry_after))
        return backoff


NO_RETRY = RetryPolicy(attempts=1)


@dataclass
class Stats:
    """Requests made and time spent waiting on them (for benchmarks and tests)."""

    requests: int = 0
    retries: int = 0
    seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, seconds: float, retry: bool) -> None:
        with self._lock:
            self.requests += 1
            self.retries += retry
            self.seconds += seconds


_ERRORS: dict[int, type[KubeError]] = {
    401: Forbidden, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone, 422: Invalid,
    400: Invalid,
}


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    value = (headers or {}).get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None                         # an HTTP date: fall back to our own backoff



def status_error(status: int, data: bytes | None, headers: Mapping[str, str], *, cluster: str,
                 obj: str | None) -> KubeError:
    """An HTTP error status (and its Status body) as placer's error of that type."""
    message, reason = f"HTTP {status}", None
    try:
        st = json.loads(data) if data else {}
        if isinstance(st, dict):
            message = st.get("message") or message
            reason = st.get("reason")
    except ValueError:
        text = (data or b"").decode("utf-8", "replace").strip()
        message = text[:200] or message
    cls = _ERRORS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 or status == 429 else KubeError
    err = cls(message, cluster=cluster, obj=obj, status=status, reason=reason)
    err.retry_after = parse_retry_after(headers)
    return err


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)



def _lines(raw) -> Iterator[bytes]:
    """Newline-delimited JSON from a streaming urllib3 response."""
    buf = b""
    for chunk in raw.stream(amt=65536, decode_content=True):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line
    if buf.strip():
        yield buf


def connection_reason(e: BaseException) -> str:
    """A short human reason for a transport failure."""
    # loaded with the client, whose failure this names (issue 24: `placer plan` on simulated
    # clusters never loads them, ~0.07 s)
    import ssl

    import urllib3

    seen = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError) or "Connection refused" in str(cur):
            return "connection refused"
        if isinstance(cur, (socket.timeout, TimeoutError, urllib3.exceptions.TimeoutError)):
            return "timed out"
        if isinstance(cur, socket.gaierror) or "Name or service not known" in str(cur):
            return "name resolution failed"
        if isinstance(cur, (ssl.SSLError, urllib3.exceptions.SSLError)):
            return f"TLS error: {cur}"
        if isinstance(cur, ConnectionResetError) or "Connection reset" in str(cur):
            return "connection reset"
        if isinstance(cur, urllib3.exceptions.ProtocolError):
            return "connection broken"
        cur = getattr(cur, "reason", None) if isinstance(getattr(cur, "reason", None), BaseException) \
            else (cur.__cause__ or cur.__context__)
    return str(e)[:200] or type(e).__name__
