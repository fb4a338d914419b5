"""A tiny raw HTTP client for the harness's own tests (exact status codes and bodies, no client library)."""
from __future__ import annotations

import http.client
import json
from urllib.parse import urlencode


def call(cluster, method: str, path: str, body=None, ctype: str = "application/json", timeout: float = 10,
         token: str | None = None, **params) -> tuple[int, dict | None]:
    """One request; returns (status code, decoded JSON body or None)."""
    conn = http.client.HTTPConnection("127.0.0.1", cluster.port, timeout=timeout)
    try:
        query = urlencode({k: v for k, v in params.items() if v is not None})
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        headers = {"Content-Type": ctype, "Accept": "application/json"}
        if token or cluster.token:
            headers["Authorization"] = f"Bearer {token or cluster.token}"
        conn.request(method, path + (f"?{query}" if query else ""), body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw) if raw else None
        except ValueError:
            return resp.status, None
    finally:
        conn.close()


def watch_lines(cluster, path: str, timeout: float = 10, **params):
    """Open a watch and yield decoded events until the stream ends."""
    conn = http.client.HTTPConnection("127.0.0.1", cluster.port, timeout=timeout)
    try:
        conn.request("GET", path + "?" + urlencode({"watch": "true", **params}),
                     headers={"Authorization": f"Bearer {cluster.token}"} if cluster.token else {})
        resp = conn.getresponse()
        if resp.status != 200:
            raise AssertionError(f"watch answered {resp.status}: {resp.read()!r}")
        while line := resp.readline():
            yield json.loads(line)
    finally:
        conn.close()
