"""One cluster's requests on the wire: the client library's connection pool (its TLS, proxy and
client certificates, as the kubeconfig configured them) sent a prepared `Request` as JSON bytes.

Why not the generated client's `param_serialize` and `call_api`: per request they walk the body
(`sanitize_for_serialization`) and, with a token in the kubeconfig, run its refresh hook, which
sets the host again and so reads every proxy variable of the environment: together about as
much CPU as the rest of a small request (issue 24, the daemon's burst). Here the body is
serialized once, and the hook runs at most once per `REFRESH` seconds; it only reloads a
token within minutes of its expiry (the library's own margin), so a token is never stale."""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import orjson
import urllib3
from kubernetes import client as k8s_client

from placer.kube.direct import METHODS, Answer, Direct, Unopened
from placer.kube.request import Request

REFRESH = 1.0                   # seconds between runs of the kubeconfig's token refresh hook


def _plain(value: Any) -> Any:
    """What the library's serializer makes of values JSON lacks (dates, decimals)."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def encode_body(body: Any) -> bytes | None:
    """The body as JSON: orjson (several times faster than json), json for what it refuses
    (integers beyond 64 bits, keys that are not strings)."""
    if body is None:
        return None
    try:
        return orjson.dumps(body, default=_plain)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(body, default=_plain, separators=(",", ":")).encode()


def decode_body(data: bytes | str) -> Any:
    """A JSON answer (a response, a watch event's line): orjson, json for what it refuses."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def url_of(host: str, request: Request) -> str:
    """The request's URL; query values quoted as the library quotes them."""
    if not request.query:
        return host + request.path
    return host + request.path + "?" + "&".join(f"{k}={quote(v)}" for k, v in request.query)


class Wire:
    """Sends requests through one ApiClient's pool; the authorization header is remembered
    for `REFRESH` seconds (shared by every thread using the client)."""

    def __init__(self, api: k8s_client.ApiClient, clock: Any = time.monotonic):
        self.api = api
        self._clock = clock
        self._lock = threading.Lock()
        self._auth: str | None = None
        self._checked: float | None = None
        self._direct: Direct | None | bool = False          # False: not looked at yet

    def authorization(self) -> str | None:
        now = self._clock()
        with self._lock:
            if self._checked is None or now - self._checked >= REFRESH:
                # auth_settings runs the kubeconfig's refresh hook (a token near its expiry is reloaded)
                setting = self.api.configuration.auth_settings().get("BearerToken")
                self._auth = setting["value"] if setting else None
                self._checked = now
            return self._auth

    def headers(self, request: Request) -> dict[str, str]:
        headers = {**self.api.default_headers, **request.headers}
        if self.api.cookie:
            headers["Cookie"] = self.api.cookie
        auth = self.authorization()
        if auth:
            headers["authorization"] = auth
        return headers

    def direct(self) -> Direct | None:
        if self._direct is False:
            self._direct = Direct.of(self.api.rest_client.pool_manager, self.api.configuration.host)
        return self._direct  # type: ignore[return-value]

    def send(self, request: Request, timeout: tuple[float, float],
             whole: bool = False) -> k8s_client.rest.RESTResponse | Answer:
        """The response, its body unread (a caller streams it or reads it); `whole`: the caller
        reads it whole, so a POST or PATCH may come back as an `Answer` (placer.kube.direct)."""
        body, headers = encode_body(request.body), self.headers(request)
        retries = None
        direct = self.direct() if whole and request.method in METHODS else None
        if direct is not None:
            target = url_of("", request)
            try:
                return direct.exchange(request.method, target, headers, body, timeout)
            except Unopened as e:                 # the library's path, one connection try counted
                retries = e.retries
        resp = self.api.rest_client.pool_manager.urlopen(
            request.method, url_of(self.api.configuration.host, request), body=body,
            headers=headers, timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
            preload_content=False, **({"retries": retries} if retries is not None else {}))
        return k8s_client.rest.RESTResponse(resp)
