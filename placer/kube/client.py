"""One cluster: discovery (cached) resolving kubectl-style resource names, list (paginated),
get, create, server-side apply, merge patch, status patch, delete, and a resuming watch.

Each verb prepares a `Request` (pure, `placer.kube.request`) and hands it to the client's
`Transport` (`placer.kube.sending`), which owns timeouts, retries and the hooks."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

from kubernetes import client as k8s_client

from placer.kube import request as R
from placer.kube.discovery import Discovery
from placer.kube.resources import ObjectList, Resource, WatchEvent
from placer.kube.sending import Transport
from placer.kube.transport import FIELD_MANAGER, RetryPolicy, Stats
from placer.kube.watch import watch_events
from placer.model.errors import Gone, NotFound

DEFAULT_PAGE = 500


class KubeClient:
    """Talks to one cluster (one kubeconfig context)."""

    def __init__(self, transport: Transport, *, namespace: str = "default", discovery: Discovery | None = None):
        self.transport = transport
        self.namespace = namespace
        self.discovery = discovery or Discovery(transport)

    def through(self, transport: Transport) -> KubeClient:
        """The same cluster, namespace and discovery cache, sending through `transport`."""
        return KubeClient(transport, namespace=self.namespace, discovery=self.discovery)

    def discovering_through(self, transport: Transport) -> KubeClient:
        """The same cluster and namespace, sending through this client's transport, with a
        discovery cache of its own that asks through `transport` (e.g. one with a shorter
        timeout: discovery answers are small, lists and watches may take long)."""
        return KubeClient(self.transport, namespace=self.namespace, discovery=Discovery(transport))

    @property
    def api(self) -> k8s_client.ApiClient:
        return self.transport.api

    @property
    def cluster(self) -> str:
        return self.transport.cluster

    @property
    def stats(self) -> Stats:
        return self.transport.stats

    # -- raw requests ---------------------------------------------------------------

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, content_type: str | None = None, obj: str | None = None,
                timeout: float | None = None, retry: RetryPolicy | None = None) -> Any:
        """One API call, retried; the parsed JSON body (None when empty)."""
        req = R.raw_request(method, path, query=query, body=body, content_type=content_type, obj=obj)
        return self.transport.call(req, timeout=timeout, retry=retry)

    # -- discovery ------------------------------------------------------------------

    def group_version(self, group_version: str) -> tuple[Resource, ...]:
        """The resources served at one group version (cached)."""
        return self.discovery.group_version(group_version)

    def invalidate(self) -> None:
        """Forget discovery (after installing a CRD, or when a lookup misses)."""
        self.discovery.invalidate()

    def resource_for(self, api_version: str, kind: str) -> Resource:
        """The resource serving apiVersion/kind; rediscovers once on a miss."""
        return self.discovery.resource_for(api_version, kind)

    def resolve(self, arg: str) -> Resource:
        """A kubectl-style resource argument (see `Discovery.resolve`)."""
        return self.discovery.resolve(arg)

    def _ns(self, res: Resource, namespace: str | None, body: Mapping | None = None) -> str | None:
        return R.namespace_for(res, namespace, self.namespace, body)

    # -- reads ----------------------------------------------------------------------

    def list(self, resource: Resource | str, namespace: str | None = None, *,
             label_selector: str | Mapping[str, str] | None = None,
             field_selector: str | Mapping[str, str] | None = None,
             limit: int = DEFAULT_PAGE) -> ObjectList:
        """All objects (all namespaces when `namespace` is None), fetched in pages.
        An expired continue token (410) restarts the list once."""
        res = self.discovery.resource(resource)
        for restart in (False, True):
            items: list[dict] = []
            pages, cont = 0, None
            try:
                while True:
                    page = self.transport.call(R.list_request(res, namespace, label_selector=label_selector,
                                                              field_selector=field_selector, limit=limit, cont=cont))
                    pages += 1
                    items.extend(page.get("items") or ())
                    meta = page.get("metadata") or {}
                    cont = meta.get("continue")
                    if not cont:
                        return ObjectList(tuple(items), meta.get("resourceVersion", ""), pages)
            except Gone:
                if restart or not cont:
                    raise
        raise AssertionError("unreachable")

    def get(self, resource: Resource | str, name: str, namespace: str | None = None) -> dict:
        res = self.discovery.resource(resource)
        return self.transport.call(R.get_request(res, name, self._ns(res, namespace)))

    # -- writes ---------------------------------------------------------------------

    def create(self, resource: Resource | str, body: Mapping[str, Any],
               namespace: str | None = None) -> dict:
        res = self.discovery.resource(resource)
        return self.transport.call(R.create_request(res, body, self._ns(res, namespace, body)))

    def apply(self, body: Mapping[str, Any], resource: Resource | str | None = None,
              namespace: str | None = None, *, force: bool = False,
              field_manager: str = FIELD_MANAGER, subresource: str | None = None,
              dry_run: bool = False) -> dict:
        """Server-side apply. A field owned by another manager is a Conflict unless
        `force` (then placer takes ownership). `dry_run`: the server validates and answers,
        stores nothing (dryRun=All)."""
        res = self.discovery.resource(resource) if resource else self.resource_for(body["apiVersion"], body["kind"])
        return self.transport.call(R.apply_request(res, body, self._ns(res, namespace, body), force=force,
                                                   field_manager=field_manager, subresource=subresource,
                                                   dry_run=dry_run))

    def patch(self, resource: Resource | str, name: str, patch: Mapping[str, Any],
              namespace: str | None = None, *, subresource: str | None = None,
              field_manager: str = FIELD_MANAGER) -> dict:
        """JSON merge patch (RFC 7386) of the object or of a subresource."""
        res = self.discovery.resource(resource)
        return self.transport.call(R.patch_request(res, name, patch, self._ns(res, namespace),
                                                   subresource=subresource, field_manager=field_manager))

    def patch_status(self, resource: Resource | str, name: str, status: Mapping[str, Any],
                     namespace: str | None = None) -> dict:
        """Merge `status` into the status subresource."""
        return self.patch(resource, name, {"status": dict(status)}, namespace, subresource="status")

    def delete(self, resource: Resource | str, name: str, namespace: str | None = None, *,
               propagation: str | None = "Background", missing_ok: bool = False) -> dict | None:
        res = self.discovery.resource(resource)
        try:
            return self.transport.call(R.delete_request(res, name, self._ns(res, namespace),
                                                        propagation=propagation))
        except NotFound:
            if missing_ok:
                return None
            raise

    # -- watch ----------------------------------------------------------------------

    def watch(self, resource: Resource | str, namespace: str | None = None, *,
              resource_version: str | None = None,
              label_selector: str | Mapping[str, str] | None = None,
              field_selector: str | Mapping[str, str] | None = None,
              timeout_seconds: int = 300, bookmarks: bool = False,
              stop: Callable[[], bool] | None = None) -> Iterator[WatchEvent]:
        """Events from `resource_version` on, forever (until `stop()` or the caller
        closes the generator); see `placer.kube.watch.watch_events`."""
        def relist(res: Resource) -> ObjectList:
            return self.list(res, namespace, label_selector=label_selector, field_selector=field_selector)
        return watch_events(self.transport, self.discovery.resource, relist, resource, namespace,
                            resource_version=resource_version, label_selector=label_selector,
                            field_selector=field_selector, timeout_seconds=timeout_seconds, bookmarks=bookmarks,
                            stop=stop)
