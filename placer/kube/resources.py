"""Resource types as discovery describes them, and what lists and watches return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote


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


def _obj_name(res: Resource, namespace: str | None, name: str) -> str:
    kind = res.group_resource
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def parse_resource_list(group: str, version: str, doc: Mapping[str, Any]) -> tuple[Resource, ...]:
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
                 subresources=frozenset(subs.get(e["name"], ())))
        for e in entries if "/" not in e.get("name", "/"))

