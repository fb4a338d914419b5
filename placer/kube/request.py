"""Requests as values (lightkube's split): what one API call puts on the wire, built by pure
functions, one per verb, from a resolved `Resource`. Sending is `placer.kube.sending`'s job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from placer.kube.resources import Resource, _obj_name
from placer.kube.transport import APPLY_PATCH, FIELD_MANAGER, MERGE_PATCH, _query_value
from placer.model.selectors import selector_query

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
Selector = str | Mapping[str, str] | None


@dataclass(frozen=True)
class Request:
    """One API call: method, path, query parameters (strings, in order), JSON body and its
    content type; `obj` is what errors name (an object, a resource or "discovery")."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()
    body: Any = None
    content_type: str | None = None
    obj: str | None = None

    @property
    def write(self) -> bool:
        return self.method in WRITE_METHODS

    @property
    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.content_type:
            headers["Content-Type"] = self.content_type
        return headers


def query_params(query: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """Query parameters as sent: None left out, booleans as true/false."""
    return tuple((k, _query_value(v)) for k, v in (query or {}).items() if v is not None)


def raw_request(method: str, path: str, *, query: Mapping[str, Any] | None = None, body: Any = None,
                content_type: str | None = None, obj: str | None = None) -> Request:
    return Request(method, path, query_params(query), body, content_type, obj)


def namespace_for(res: Resource, namespace: str | None, default: str,
                  body: Mapping[str, Any] | None = None) -> str | None:
    """The namespace a call on one object uses: none for cluster-scoped resources, else the
    argument, the body's own, or the client's default."""
    if not res.namespaced:
        return None
    if namespace:
        return namespace
    meta = (body or {}).get("metadata") or {}
    return meta.get("namespace") or default


def get_request(res: Resource, name: str, namespace: str | None) -> Request:
    return Request("GET", res.path(namespace, name), obj=_obj_name(res, namespace, name))


def list_request(res: Resource, namespace: str | None, *, label_selector: Selector = None,
                 field_selector: Selector = None, limit: int | None = None,
                 cont: str | None = None) -> Request:
    """One page of a list (all namespaces when `namespace` is None)."""
    return raw_request("GET", res.path(namespace if res.namespaced else None),
                       query={"labelSelector": selector_query(label_selector),
                              "fieldSelector": selector_query(field_selector), "limit": limit or None,
                              "continue": cont},
                       obj=res.group_resource)


def watch_request(res: Resource, namespace: str | None, resource_version: str, *,
                  label_selector: Selector = None, field_selector: Selector = None,
                  timeout_seconds: int = 300) -> Request:
    return raw_request("GET", res.path(namespace if res.namespaced else None),
                       query={"watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                              "timeoutSeconds": timeout_seconds, "labelSelector": selector_query(label_selector),
                              "fieldSelector": selector_query(field_selector)},
                       obj=res.group_resource)


def create_request(res: Resource, body: Mapping[str, Any], namespace: str | None) -> Request:
    name = (body.get("metadata") or {}).get("name") or ""
    return Request("POST", res.path(namespace), body=dict(body), content_type="application/json",
                   obj=_obj_name(res, namespace, name))


def apply_request(res: Resource, body: Mapping[str, Any], namespace: str | None, *, force: bool = False,
                  field_manager: str = FIELD_MANAGER, subresource: str | None = None,
                  dry_run: bool = False) -> Request:
    """Server-side apply; `dry_run`: the server validates and answers, stores nothing."""
    name = body["metadata"]["name"]
    return raw_request("PATCH", res.path(namespace, name, subresource), body=dict(body), content_type=APPLY_PATCH,
                       query={"fieldManager": field_manager, "force": "true" if force else None,
                              "dryRun": "All" if dry_run else None},
                       obj=_obj_name(res, namespace, name))


def patch_request(res: Resource, name: str, patch: Mapping[str, Any], namespace: str | None, *,
                  subresource: str | None = None, field_manager: str = FIELD_MANAGER) -> Request:
    """JSON merge patch (RFC 7386) of the object or of a subresource."""
    return raw_request("PATCH", res.path(namespace, name, subresource), body=dict(patch),
                       content_type=MERGE_PATCH, query={"fieldManager": field_manager},
                       obj=_obj_name(res, namespace, name))


def delete_request(res: Resource, name: str, namespace: str | None, *,
                   propagation: str | None = "Background") -> Request:
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation} \
        if propagation else None
    return Request("DELETE", res.path(namespace, name), body=body, content_type="application/json",
                   obj=_obj_name(res, namespace, name))
