"""The one door to Kubernetes: every cluster call placer makes goes through here.

This is the only module that imports the `kubernetes` client. It uses the client's
ApiClient for configuration, auth and HTTP (so kubeconfig handling is exactly the
library's), but keeps objects as plain dicts parsed from the raw JSON body: the
library's model deserialization costs far more than the request itself on large lists.

- `Kube`: the kubeconfig (one or several files, as `KUBECONFIG` allows) and a cached
  `KubeClient` per context; `Kube.each()` runs a call on several clusters concurrently.
- `KubeClient`: one cluster. Discovery (cached) resolves kubectl-style resource names;
  list (paginated), get, create, server-side apply, merge patch, status patch, delete,
  and a resuming watch that relists on 410 Gone.
- Every call has a timeout, and is retried with exponential backoff and jitter on
  429/5xx/connection errors, honoring Retry-After. Failures become placer's own errors
  (`placer.errors`) naming the cluster and the object.
"""

from __future__ import annotations

import json
import os
import random
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar
from urllib.parse import quote

import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from kubernetes.config import kube_config as k8s_kube_config
from kubernetes.config.config_exception import ConfigException

from .errors import (
    Conflict,
    Forbidden,
    Gone,
    InputError,
    Invalid,
    KubeError,
    NotFound,
    PlacerError,
    ServerError,
    Unreachable,
)

FIELD_MANAGER = "placer"
DEFAULT_PAGE = 500
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"

T = TypeVar("T")


# --- kubeconfig --------------------------------------------------------------------

def kubeconfig_paths(kubeconfig: str | None = None) -> str:
    """The kubeconfig location as the client library takes it: `--kubeconfig`, else
    `KUBECONFIG` (several files separated by `:`, merged), else ~/.kube/config."""
    return kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def list_contexts(kubeconfig: str | None = None) -> tuple[list[str], str | None]:
    """All context names and the current one."""
    return KubeConfig(kubeconfig).contexts()


class KubeConfig:
    """The merged kubeconfig, read once (parsing YAML per client is costly with many
    contexts); builds the library's client configuration for any of its contexts."""

    def __init__(self, kubeconfig: str | None = None):
        self.path = kubeconfig_paths(kubeconfig)
        try:
            self._merged = k8s_kube_config.KubeConfigMerger(self.path)
            if self._merged.config is None:
                raise ConfigException("no kubeconfig file found")
            loader = self._loader(None)
            self._contexts = [c["name"] for c in loader.list_contexts()]
            current = loader.current_context
        except (ConfigException, OSError, ValueError, yaml.YAMLError) as e:
            text = " ".join(str(e).split())          # YAML errors span lines: one line for the user
            raise InputError(f"cannot read kubeconfig: {text}", source=self.path) from None
        self._current = _first_current_context(self.path) or (current or {}).get("name")

    def _loader(self, context: str | None):
        return k8s_kube_config.KubeConfigLoader(config_dict=self._merged.config, config_base_path=None,
                                                active_context=context)

    def contexts(self) -> tuple[list[str], str | None]:
        return list(self._contexts), self._current

    def configure(self, context: str) -> tuple[k8s_client.Configuration, str]:
        """The client configuration for `context`, and the context's default namespace."""
        if context not in self._contexts:
            raise InputError(f"context {context!r} not found (known: {', '.join(self._contexts) or 'none'})",
                             source=self.path)
        configuration = type.__call__(k8s_client.Configuration)
        try:
            loader = self._loader(context)
            loader.load_and_set(configuration)
        except (ConfigException, OSError, ValueError) as e:
            raise InputError(f"context {context}: {e}", source=self.path) from None
        namespace = (loader.current_context.get("context") or {}).get("namespace") or "default"
        return configuration, namespace


def _first_current_context(paths: str) -> str | None:
    """kubectl's rule: the first file that sets current-context wins (the client
    library lets the last one win)."""
    for path in paths.split(os.pathsep):
        path = os.path.expanduser(path)
        if not path or not os.path.exists(path):
            continue
        try:
            with open(path) as f:
                current = (yaml.safe_load(f) or {}).get("current-context")
        except (OSError, yaml.YAMLError):
            continue
        if current:
            return current
    return None


# --- resources ---------------------------------------------------------------------

@dataclass(frozen=True)
class Resource:
    """One resource type as discovery describes it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base

    def names(self) -> set[str]:
        """Every lower-case name kubectl accepts for this resource."""
        return {self.plural, self.singular or self.kind.lower(), self.kind.lower(), *self.short_names}


@dataclass(frozen=True)
class ObjectList:
    items: tuple[dict, ...]
    resource_version: str
    requests: int = 1                       # pages fetched


@dataclass(frozen=True)
class WatchEvent:
    """ADDED, MODIFIED, DELETED, BOOKMARK; or RELIST with the whole current list in
    `items` (at the start without a resourceVersion, and after 410 Gone): replace
    your cache with it, deletions during the gap are not reported otherwise."""

    type: str
    object: dict | None
    resource_version: str
    items: tuple[dict, ...] = ()


# --- retries -----------------------------------------------------------------------

@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4                       # total tries per call
    base: float = 0.25                      # first backoff, doubled each retry
    cap: float = 8.0
    jitter: float = 0.5                     # +- this fraction of the backoff
    max_retry_after: float = 30.0           # never sleep longer than this for a server's hint

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before try `attempt + 1` (attempt counts from 1)."""
        backoff = min(self.cap, self.base * 2 ** (attempt - 1))
        backoff *= 1 + self.jitter * (2 * rng.random() - 1)
        if retry_after is not None:
            return max(backoff, min(retry_after, self.max_retry_after))
        return backoff


NO_RETRY = RetryPolicy(attempts=1)
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


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


# --- one cluster -------------------------------------------------------------------

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
        err = cls(message, cluster=self.cluster, obj=obj, status=status, reason=reason)
        err.retry_after = _retry_after(headers)
        return err

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
        query = {"labelSelector": _selector(label_selector),
                 "fieldSelector": _selector(field_selector), "limit": limit or None}
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
        closes the generator). Without a resourceVersion, and whenever the server says
        410 Gone, it lists and yields one RELIST event with every current object.
        Reconnects after the server ends a watch, resuming from the last version seen
        (bookmarks included; they are yielded only when `bookmarks`); connection
        errors and 5xx are retried with backoff."""
        res = self._res(resource)
        stop = stop or (lambda: False)
        selectors = {"label_selector": label_selector, "field_selector": field_selector}
        rv = resource_version
        failures = 0
        while not stop():
            if not rv:
                lst = self.list(res, namespace, **selectors)
                rv = lst.resource_version
                yield WatchEvent("RELIST", None, rv, lst.items)
                continue
            try:
                for event in self._watch_once(res, namespace, rv, label_selector, field_selector,
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
                if failures >= self.retry.attempts:
                    raise
                self.sleep(self.retry.delay(failures, getattr(e, "retry_after", None), self.rng))

    def _watch_once(self, res: Resource, namespace: str | None, rv: str,
                    label_selector, field_selector, timeout_seconds: int) -> Iterator[WatchEvent]:
        query = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true",
                 "timeoutSeconds": timeout_seconds, "labelSelector": _selector(label_selector),
                 "fieldSelector": _selector(field_selector)}
        obj = res.group_resource
        resp = self._send("GET", res.path(namespace if res.namespaced else None), query=query,
                          obj=obj, timeout=timeout_seconds + 30, stream=True, retry=NO_RETRY)
        raw = resp.response
        try:
            for line in _lines(raw):
                ev = json.loads(line)
                kind, o = ev.get("type"), ev.get("object") or {}
                if kind == "ERROR":
                    code = o.get("code") or 500
                    raise self._status_error(code, json.dumps(o).encode(), {}, obj)
                yield WatchEvent(kind, o, (o.get("metadata") or {}).get("resourceVersion", ""))
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise Unreachable(f"watch broken ({_connection_reason(e)})",
                              cluster=self.cluster, obj=obj) from None
        finally:
            raw.release_conn()


# --- many clusters -----------------------------------------------------------------

class Kube:
    """A kubeconfig (one or several files) and one cached client per context."""

    def __init__(self, kubeconfig: str | None = None, *, timeout: float = 30.0,
                 connect_timeout: float = 5.0, retry: RetryPolicy = RetryPolicy(),
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                 max_workers: int = 16):
        self.kubeconfig = kubeconfig_paths(kubeconfig)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry = retry
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.max_workers = max_workers
        self.stats = Stats()
        self._clients: dict[str | None, KubeClient] = {}
        self._config: KubeConfig | None = None
        self._lock = threading.Lock()

    @property
    def config(self) -> KubeConfig:
        with self._lock:
            if self._config is None:
                self._config = KubeConfig(self.kubeconfig)
            return self._config

    def contexts(self) -> tuple[list[str], str | None]:
        return self.config.contexts()

    def client(self, context: str | None = None, *, cluster: str | None = None) -> KubeClient:
        """The client for `context` (the current context when None)."""
        config = self.config
        with self._lock:
            cached = self._clients.get(context)
            if cached is None:
                cached = self._clients[context] = self._new_client(config, context, cluster)
            return cached

    def _new_client(self, config: KubeConfig, context: str | None, cluster: str | None) -> KubeClient:
        ctx = context or config.contexts()[1]
        if ctx is None:
            raise InputError("kubeconfig has no current context; pass --context", source=config.path)
        configuration, namespace = config.configure(ctx)
        # placer retries itself (with backoff and Retry-After); urllib3 must not retry too
        configuration.retries = False
        configuration.connection_pool_maxsize = max(4, self.max_workers)
        api = k8s_client.ApiClient(configuration)
        return KubeClient(api, cluster=cluster or ctx, namespace=namespace, timeout=self.timeout,
                          connect_timeout=self.connect_timeout, retry=self.retry, sleep=self.sleep,
                          rng=self.rng, stats=self.stats)

    def each(self, fn: Callable[[KubeClient], T], contexts: Iterable[str | None]
             ) -> dict[str | None, T | PlacerError]:
        """fn(client) for every context, concurrently. A placer error for one context is
        returned in its slot, never raised: one bad cluster must not stop the others."""
        def call(ctx):
            try:
                return fn(self.client(ctx))
            except PlacerError as e:
                return e
        return run_concurrently({ctx: (lambda ctx=ctx: call(ctx)) for ctx in contexts},
                                max_workers=self.max_workers)

    def close(self) -> None:
        with self._lock:
            for c in self._clients.values():
                c.api.close()
            self._clients.clear()


def run_concurrently(calls: Mapping[Any, Callable[[], T]], max_workers: int = 16) -> dict[Any, T]:
    """Run the calls on a thread pool; results by key (exceptions propagate)."""
    if len(calls) <= 1:
        return {k: fn() for k, fn in calls.items()}
    with ThreadPoolExecutor(max_workers=min(max_workers, len(calls))) as pool:
        futures = {k: pool.submit(fn) for k, fn in calls.items()}
        return {k: f.result() for k, f in futures.items()}


# --- helpers -----------------------------------------------------------------------

_ERRORS: dict[int, type[KubeError]] = {
    401: Forbidden, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone, 422: Invalid,
    400: Invalid,
}


def _retryable(e: KubeError) -> bool:
    return isinstance(e, (ServerError, Unreachable)) and (e.status in _RETRY_STATUS or e.status is None)


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    value = (headers or {}).get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None                         # an HTTP date: fall back to our own backoff


def _selector(sel: str | Mapping[str, str] | None) -> str | None:
    if sel is None or isinstance(sel, str):
        return sel or None
    return ",".join(f"{k}={v}" for k, v in sel.items()) or None


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _obj_name(res: Resource, namespace: str | None, name: str) -> str:
    kind = res.group_resource
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def _parse_resource_list(group: str, version: str, doc: Mapping[str, Any]) -> tuple[Resource, ...]:
    entries = doc.get("resources") or ()
    subs: dict[str, set[str]] = {}
    for e in entries:
        base, _, sub = e.get("name", "").partition("/")
        if sub:
            subs.setdefault(base, set()).add(sub)
    return tuple(
        Resource(group=e.get("group") or group, version=e.get("version") or version,
                 kind=e["kind"], plural=e["name"], namespaced=bool(e.get("namespaced")),
                 singular=e.get("singularName") or "", short_names=tuple(e.get("shortNames") or ()),
                 verbs=tuple(e.get("verbs") or ()), subresources=frozenset(subs.get(e["name"], ())))
        for e in entries if "/" not in e.get("name", "/"))


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


def _connection_reason(e: BaseException) -> str:
    """A short human reason for a transport failure."""
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
