"""One cluster: raw requests with retries, discovery (cached) resolving kubectl-style
resource names, list (paginated), get, create, server-side apply, merge patch, status
patch, delete, and a resuming watch (`placer.kube.watch`)."""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any, Callable, Iterator, Mapping

import urllib3
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from placer.kube.resources import ObjectList, Resource, WatchEvent, _obj_name, _parse_resource_list
from placer.kube.transport import (
    APPLY_PATCH,
    FIELD_MANAGER,
    MERGE_PATCH,
    RetryPolicy,
    Stats,
    _connection_reason,
    _query_value,
    _retryable,
    status_error,
)
from placer.kube.watch import watch_events
from placer.model.errors import Gone, KubeError, NotFound, Unreachable
from placer.model.selectors import selector_query

DEFAULT_PAGE = 500


class KubeClient:
    """Talks to one cluster (one kubeconfig context)."""

    def __init__(self, api: k8s_client.ApiClient, *, cluster: str, namespace: str = "default",
                 timeout: float = 30.0, connect_timeout: float = 5.0,
                 retry: RetryPolicy = RetryPolicy(),
                 sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None, stats: Stats | None = None):
        self.api = api
        self.cluster = cluster
        self.namespace = namespace
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry = retry
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.stats = stats or Stats()
        self._lock = threading.Lock()
        self._group_versions: dict[str, tuple[Resource, ...]] = {}
        self._preferred: list[str] | None = None    # group versions, core first, in server order
        self._all_versions: list[str] | None = None

    # -- raw requests ---------------------------------------------------------------

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, content_type: str | None = None, obj: str | None = None,
                timeout: float | None = None, retry: RetryPolicy | None = None) -> Any:
        """One API call, retried; the parsed JSON body (None when empty)."""
        resp = self._send(method, path, query=query, body=body, content_type=content_type,
                          obj=obj, timeout=timeout, retry=retry)
        data = resp.read()
        return json.loads(data) if data else None

    def _send(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
              body: Any = None, content_type: str | None = None, obj: str | None = None,
              timeout: float | None = None, retry: RetryPolicy | None = None,
              stream: bool = False):
        policy = retry or self.retry
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        read_timeout = timeout or self.timeout
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                req = self.api.param_serialize(method, path, query_params=list(params),
                                               header_params=dict(headers), body=body,
                                               auth_settings=["BearerToken"])
                resp = self.api.call_api(*req, _request_timeout=(self.connect_timeout, read_timeout))
                if stream and 200 <= resp.status <= 299:
                    self.stats.record(time.perf_counter() - started, attempt > 1)
                    return resp
                if not 200 <= resp.status <= 299:
                    resp.read()
                    resp.response.release_conn()
                    raise self._status_error(resp.status, resp.data, resp.headers, obj)
                resp.read()
                self.stats.record(time.perf_counter() - started, attempt > 1)
                return resp
            except KubeError as e:
                self.stats.record(time.perf_counter() - started, attempt > 1)
                retry_after = getattr(e, "retry_after", None)
                if not _retryable(e) or attempt >= policy.attempts:
                    raise
            except (urllib3.exceptions.HTTPError, ApiException, OSError) as e:
                self.stats.record(time.perf_counter() - started, attempt > 1)
                if attempt >= policy.attempts:
                    raise Unreachable(f"unreachable ({_connection_reason(e)})",
                                      cluster=self.cluster, obj=obj) from None
                retry_after = None
            self.sleep(policy.delay(attempt, retry_after, self.rng))

    def _status_error(self, status: int, data: bytes | None, headers: Mapping[str, str],
                      obj: str | None) -> KubeError:
        return status_error(status, data, headers, cluster=self.cluster, obj=obj)

    # -- discovery ------------------------------------------------------------------

    def _discover_versions(self) -> None:
        core = self.request("GET", "/api", obj="discovery") or {}
        groups = self.request("GET", "/apis", obj="discovery") or {}
        preferred = [v for v in core.get("versions", ())][:1]
        every = list(core.get("versions", ()))
        for g in groups.get("groups", ()):
            pv = (g.get("preferredVersion") or {}).get("groupVersion")
            versions = [v["groupVersion"] for v in g.get("versions", ())]
            preferred.append(pv or versions[0])
            every.extend(versions)
        self._preferred, self._all_versions = preferred, every

    def group_version(self, group_version: str) -> tuple[Resource, ...]:
        """The resources served at one group version (cached)."""
        cached = self._group_versions.get(group_version)
        if cached is not None:
            return cached
        path = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
        try:
            doc = self.request("GET", path, obj=f"discovery {group_version}") or {}
        except NotFound:
            doc = {}
        group, _, version = group_version.rpartition("/")
        resources = _parse_resource_list(group, version, doc)
        with self._lock:
            self._group_versions[group_version] = resources
        return resources

    def invalidate(self) -> None:
        """Forget discovery (after installing a CRD, or when a lookup misses)."""
        with self._lock:
            self._group_versions.clear()
            self._preferred = self._all_versions = None

    def resource_for(self, api_version: str, kind: str) -> Resource:
        """The resource serving apiVersion/kind; rediscovers once on a miss."""
        for fresh in (False, True):
            if fresh:
                with self._lock:
                    self._group_versions.pop(api_version, None)
            for r in self.group_version(api_version):
                if r.kind == kind:
                    return r
        raise NotFound(f"the server does not serve {kind} in {api_version}",
                       cluster=self.cluster, obj=f"{api_version}/{kind}")

    def resolve(self, arg: str) -> Resource:
        """A kubectl-style resource argument: kind, plural, singular or short name,
        optionally qualified as `plural.group` or `name.version.group`."""
        for fresh in (False, True):
            if fresh:
                self.invalidate()
            found = self._resolve(arg)
            if found is not None:
                return found
        raise NotFound(f'the server doesn\'t have a resource type "{arg}"',
                       cluster=self.cluster)

    def _resolve(self, arg: str) -> Resource | None:
        if self._preferred is None:
            self._discover_versions()
        name, _, qualifier = arg.partition(".")
        name = name.lower()
        # preferred versions first, then the group's other versions: a group's kinds need not all be
        # served at its preferred version (kubeflow.org: PyTorchJob at v1, MPIJob only at v2beta1)
        preferred = list(self._preferred or ())
        every = preferred + [gv for gv in self._all_versions or () if gv not in preferred]
        candidates: list[str] = []
        if qualifier:
            # `name.version.group` names one group version; else `name.group`
            version, _, group = qualifier.partition(".")
            if group and f"{group}/{version}" in every:
                candidates = [f"{group}/{version}"]
            else:
                candidates = [gv for gv in every if gv.rpartition("/")[0] == qualifier]
        else:
            candidates = every
        # group versions in server order, core first (kubectl's precedence), fetched lazily
        for gv in candidates:
            for r in self.group_version(gv):
                if name in r.names():
                    return r
        return None

    def _res(self, resource: Resource | str) -> Resource:
        return resource if isinstance(resource, Resource) else self.resolve(resource)

    def _ns(self, res: Resource, namespace: str | None, body: Mapping | None = None) -> str | None:
        if not res.namespaced:
            return None
        if namespace:
            return namespace
        meta = (body or {}).get("metadata") or {}
        return meta.get("namespace") or self.namespace

    # -- reads ----------------------------------------------------------------------

    def list(self, resource: Resource | str, namespace: str | None = None, *,
             label_selector: str | Mapping[str, str] | None = None,
             field_selector: str | Mapping[str, str] | None = None,
             limit: int = DEFAULT_PAGE) -> ObjectList:
        """All objects (all namespaces when `namespace` is None), fetched in pages.
        An expired continue token (410) restarts the list once."""
        res = self._res(resource)
        path = res.path(namespace if res.namespaced else None)
        query = {"labelSelector": selector_query(label_selector),
                 "fieldSelector": selector_query(field_selector), "limit": limit or None}
        for restart in (False, True):
            items: list[dict] = []
            pages, cont = 0, None
            try:
                while True:
                    page = self.request("GET", path, query={**query, "continue": cont},
                                        obj=res.group_resource)
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
        res = self._res(resource)
        ns = self._ns(res, namespace)
        return self.request("GET", res.path(ns, name), obj=_obj_name(res, ns, name))

    # -- writes ---------------------------------------------------------------------

    def create(self, resource: Resource | str, body: Mapping[str, Any],
               namespace: str | None = None) -> dict:
        res = self._res(resource)
        ns = self._ns(res, namespace, body)
        name = (body.get("metadata") or {}).get("name") or ""
        return self.request("POST", res.path(ns), body=dict(body), content_type="application/json",
                            obj=_obj_name(res, ns, name))

    def apply(self, body: Mapping[str, Any], resource: Resource | str | None = None,
              namespace: str | None = None, *, force: bool = False,
              field_manager: str = FIELD_MANAGER, subresource: str | None = None,
              dry_run: bool = False) -> dict:
        """Server-side apply. A field owned by another manager is a Conflict unless
        `force` (then placer takes ownership). `dry_run`: the server validates and answers,
        stores nothing (dryRun=All)."""
        res = self._res(resource) if resource else self.resource_for(body["apiVersion"], body["kind"])
        ns = self._ns(res, namespace, body)
        name = body["metadata"]["name"]
        return self.request("PATCH", res.path(ns, name, subresource), body=dict(body),
                            content_type=APPLY_PATCH,
                            query={"fieldManager": field_manager, "force": "true" if force else None,
                                   "dryRun": "All" if dry_run else None},
                            obj=_obj_name(res, ns, name))

    def patch(self, resource: Resource | str, name: str, patch: Mapping[str, Any],
              namespace: str | None = None, *, subresource: str | None = None,
              field_manager: str = FIELD_MANAGER) -> dict:
        """JSON merge patch (RFC 7386) of the object or of a subresource."""
        res = self._res(resource)
        ns = self._ns(res, namespace)
        return self.request("PATCH", res.path(ns, name, subresource), body=dict(patch),
                            content_type=MERGE_PATCH, query={"fieldManager": field_manager},
                            obj=_obj_name(res, ns, name))

    def patch_status(self, resource: Resource | str, name: str, status: Mapping[str, Any],
                     namespace: str | None = None) -> dict:
        """Merge `status` into the status subresource."""
        return self.patch(resource, name, {"status": dict(status)}, namespace, subresource="status")

    def delete(self, resource: Resource | str, name: str, namespace: str | None = None, *,
               propagation: str | None = "Background", missing_ok: bool = False) -> dict | None:
        res = self._res(resource)
        ns = self._ns(res, namespace)
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation} \
            if propagation else None
        try:
            return self.request("DELETE", res.path(ns, name), body=body,
                                content_type="application/json", obj=_obj_name(res, ns, name))
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
        return watch_events(self, resource, namespace, resource_version=resource_version,
                            label_selector=label_selector, field_selector=field_selector,
                            timeout_seconds=timeout_seconds, bookmarks=bookmarks, stop=stop)
