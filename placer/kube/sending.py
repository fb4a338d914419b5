"""Sending a prepared `Request`: one cluster's connection, timeouts and retries, with hooks so
that policy (the daemon's fencing, its failure reports) is composed in, not wrapped around."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import urllib3
from kubernetes import client as k8s_client

from placer.kube.request import Request
from placer.kube.transport import RetryPolicy, Stats, connection_reason, status_error
from placer.kube.wire import Wire, decode_body
from placer.model.errors import KubeError, Unreachable


@dataclass(frozen=True)
class Transport:
    """Sends requests to one cluster. `before_attempt(request)` runs before every try, retries
    included (raising stops the call: that is how writes are fenced); `on_failure(error)` runs
    once when a call fails for good."""

    api: k8s_client.ApiClient
    cluster: str
    timeout: float = 30.0                   # read timeout of one try
    connect_timeout: float = 5.0
    retry: RetryPolicy = RetryPolicy()
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    stats: Stats = field(default_factory=Stats)
    before_attempt: Callable[[Request], None] | None = None
    on_failure: Callable[[KubeError], None] | None = None
    # the requests' way onto the wire (placer.kube.wire); derived transports share it
    wire: Wire = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.wire is None:
            object.__setattr__(self, "wire", Wire(self.api))

    def derive(self, **changes: Any) -> Transport:
        """The same connection pool and statistics, other settings or hooks."""
        if "api" in changes and "wire" not in changes:
            changes["wire"] = None                # another client's pool: a wire of its own
        return replace(self, **changes)

    def call(self, request: Request, *, timeout: float | None = None, retry: RetryPolicy | None = None) -> Any:
        """The parsed JSON body of the answer (None when empty)."""
        data = self.send(request, timeout=timeout, retry=retry).read()
        return decode_body(data) if data else None

    def send(self, request: Request, *, timeout: float | None = None, retry: RetryPolicy | None = None,
             stream: bool = False) -> Any:
        """The response to `request`, tried again with backoff while `retry` allows; a
        streaming response is returned unread."""
        policy = retry or self.retry
        attempt = 0
        while True:
            attempt += 1
            if self.before_attempt is not None:
                self.before_attempt(request)
            try:
                return self._attempt(request, timeout or self.timeout, stream, attempt > 1)
            except KubeError as e:
                if not policy.retries(e) or attempt >= policy.attempts:
                    if self.on_failure is not None:
                        self.on_failure(e)
                    raise
                retry_after = getattr(e, "retry_after", None)
            self.sleep(policy.delay(attempt, retry_after, self.rng))

    def _attempt(self, request: Request, read_timeout: float, stream: bool, retried: bool) -> Any:
        started = time.perf_counter()
        try:
            try:
                resp = self.wire.send(request, (self.connect_timeout, read_timeout), whole=not stream)
                if not 200 <= resp.status <= 299:
                    resp.read()
                    resp.response.release_conn()
                elif not stream:
                    resp.read()
            except (urllib3.exceptions.HTTPError, OSError) as e:
                raise Unreachable(f"unreachable ({connection_reason(e)})", cluster=self.cluster,
                                  obj=request.obj) from None
            if not 200 <= resp.status <= 299:
                raise self.status_error(resp.status, resp.data, resp.headers, request.obj)
            return resp
        finally:
            self.stats.record(time.perf_counter() - started, retried)

    def status_error(self, status: int, data: bytes | None, headers: Any, obj: str | None) -> KubeError:
        return status_error(status, data, headers, cluster=self.cluster, obj=obj)
