"""A resuming watch: events from a resourceVersion on, relisting on 410 Gone."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Callable, Iterator, Mapping

import urllib3

from placer.kube.resources import Resource, WatchEvent
from placer.kube.transport import NO_RETRY, _connection_reason, _lines
from placer.model.errors import Gone, ServerError, Unreachable
from placer.model.selectors import selector_query

if TYPE_CHECKING:
    from placer.kube.client import KubeClient


def watch_events(client: KubeClient, resource: Resource | str, namespace: str | None = None, *,
                 resource_version: str | None = None,
                 label_selector: str | Mapping[str, str] | None = None,
                 field_selector: str | Mapping[str, str] | None = None,
                 timeout_seconds: int = 300, bookmarks: bool = False,
                 stop: Callable[[], bool] | None = None) -> Iterator[WatchEvent]:
    """Events from `resource_version` on, forever (until `stop()` or the caller
    closes the generator). Without a resourceVersion, and whenever the server says
    410 Gone, it lists and yields one RELIST event with every current object.
    Reconnects after the server ends a watch, resuming from the last version seen
    (bookmarks included; they are yielded only when `bookmarks`); connection
    errors and 5xx are retried with backoff."""
    res = client._res(resource)
    stop = stop or (lambda: False)
    rv = resource_version
    failures = 0
    while not stop():
        if not rv:
            lst = client.list(res, namespace, label_selector=label_selector, field_selector=field_selector)
            rv = lst.resource_version
            yield WatchEvent("RELIST", None, rv, lst.items)
            continue
        try:
            for event in _watch_once(client, res, namespace, rv, label_selector, field_selector,
                                     timeout_seconds):
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
            if failures >= client.retry.attempts:
                raise
            client.sleep(client.retry.delay(failures, getattr(e, "retry_after", None), client.rng))


def _watch_once(client: KubeClient, res: Resource, namespace: str | None, rv: str,
                label_selector, field_selector, timeout_seconds: int) -> Iterator[WatchEvent]:
    query = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true",
             "timeoutSeconds": timeout_seconds, "labelSelector": selector_query(label_selector),
             "fieldSelector": selector_query(field_selector)}
    obj = res.group_resource
    resp = client._send("GET", res.path(namespace if res.namespaced else None), query=query,
                        obj=obj, timeout=timeout_seconds + 30, stream=True, retry=NO_RETRY)
    raw = resp.response
    try:
        for line in _lines(raw):
            ev = json.loads(line)
            kind, o = ev.get("type"), ev.get("object") or {}
            if kind == "ERROR":
                code = o.get("code") or 500
                raise client._status_error(code, json.dumps(o).encode(), {}, obj)
            yield WatchEvent(kind, o, (o.get("metadata") or {}).get("resourceVersion", ""))
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise Unreachable(f"watch broken ({_connection_reason(e)})",
                          cluster=client.cluster, obj=obj) from None
    finally:
        raw.release_conn()

