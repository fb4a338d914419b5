"""A resuming watch: events from a resourceVersion on, relisting on 410 Gone."""

from __future__ import annotations

import json
from typing import Callable, Iterator, Mapping

import urllib3

from placer.kube.request import Request, watch_request
from placer.kube.resources import ObjectList, Resource, WatchEvent
from placer.kube.sending import Transport
from placer.kube.transport import NO_RETRY, _lines, connection_reason
from placer.kube.wire import decode_body
from placer.model.errors import Gone, ServerError, Unreachable


def watch_events(transport: Transport, resolve: Callable[[Resource | str], Resource],
                 relist: Callable[[Resource], ObjectList], resource: Resource | str,
                 namespace: str | None = None, *, resource_version: str | None = None,
                 label_selector: str | Mapping[str, str] | None = None,
                 field_selector: str | Mapping[str, str] | None = None,
                 timeout_seconds: int = 300, bookmarks: bool = False,
                 stop: Callable[[], bool] | None = None) -> Iterator[WatchEvent]:
    """Events from `resource_version` on, forever (until `stop()` or the caller
    closes the generator). Without a resourceVersion, and whenever the server says
    410 Gone, it lists (`relist`) and yields one RELIST event with every current object.
    Reconnects after the server ends a watch, resuming from the last version seen
    (bookmarks included; they are yielded only when `bookmarks`); connection
    errors and 5xx are retried with the transport's backoff."""
    res = resolve(resource)
    stop = stop or (lambda: False)
    rv = resource_version
    failures = 0
    while not stop():
        if not rv:
            lst = relist(res)
            rv = lst.resource_version
            yield WatchEvent("RELIST", None, rv, lst.items)
            continue
        try:
            request = watch_request(res, namespace, rv, label_selector=label_selector,
                                    field_selector=field_selector, timeout_seconds=timeout_seconds)
            for event in _watch_once(transport, request, timeout_seconds):
                failures = 0
                rv = event.resource_version or rv
                if event.type != "BOOKMARK" or bookmarks:
                    yield event
                if stop():
                    return
        except Gone:
            rv = None
        except (Unreachable, ServerError) as e:
            failures += 1
            if failures >= transport.retry.attempts:
                raise
            transport.sleep(transport.retry.delay(failures, getattr(e, "retry_after", None), transport.rng))


def _watch_once(transport: Transport, request: Request, timeout_seconds: int) -> Iterator[WatchEvent]:
    resp = transport.send(request, timeout=timeout_seconds + 30, stream=True, retry=NO_RETRY)
    raw = resp.response
    try:
        for line in _lines(raw):
            ev = decode_body(line)
            kind, o = ev.get("type"), ev.get("object") or {}
            if kind == "ERROR":
                code = o.get("code") or 500
                raise transport.status_error(code, json.dumps(o).encode(), {}, request.obj)
            yield WatchEvent(kind, o, (o.get("metadata") or {}).get("resourceVersion", ""))
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise Unreachable(f"watch broken ({connection_reason(e)})",
                          cluster=transport.cluster, obj=request.obj) from None
    finally:
        raw.release_conn()
