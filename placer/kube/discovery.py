"""Discovery, cached: which resources a cluster serves, and kubectl-style resource names
resolved to them. One cache per cluster, shared by every client of that cluster."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from placer.kube.request import Request
from placer.kube.resources import Resource, parse_resource_list
from placer.model.errors import NotFound

if TYPE_CHECKING:
    from placer.kube.sending import Transport  # imports the client library


class Discovery:
    """What one cluster serves; its requests go through `transport`."""

    def __init__(self, transport: Transport):
        self.transport = transport
        self.cluster = transport.cluster
        self._lock = threading.Lock()
        self._group_versions: dict[str, tuple[Resource, ...]] = {}
        self._preferred: list[str] | None = None    # group versions, core first, in server order
        self._all_versions: list[str] | None = None

    def _discover_versions(self) -> None:
        core = self.transport.call(Request("GET", "/api", obj="discovery")) or {}
        groups = self.transport.call(Request("GET", "/apis", obj="discovery")) or {}
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
            doc = self.transport.call(Request("GET", path, obj=f"discovery {group_version}")) or {}
        except NotFound:
            doc = {}
        group, _, version = group_version.rpartition("/")
        resources = parse_resource_list(group, version, doc)
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

    def resource(self, resource: Resource | str) -> Resource:
        return resource if isinstance(resource, Resource) else self.resolve(resource)
