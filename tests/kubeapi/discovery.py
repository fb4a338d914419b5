"""Resource types the test API server knows, and the discovery documents that describe them."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

READ = ("get", "list", "watch")
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")

# Field selectors the real API server accepts per resource (beyond metadata.name/namespace);
# anything else is a 400, as in a real cluster, so a client relying on an unsupported one fails here too.
_POD_FIELDS = ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
               "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName")
_EVENT_FIELDS = ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                 "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                 "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type")


@dataclass(frozen=True)
class ResourceType:
    group: str              # "" for core
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    status: bool = False    # has the /status subresource
    crd: bool = False       # served for a CustomResourceDefinition (no strategic merge patch)
    # what a create does with .status: "keep", "drop", or a dict that replaces it (pods start Pending)
    create_status: object = "drop"
    field_selectors: tuple[str, ...] = ()
    versions: tuple[str, ...] = field(default=())   # all served versions (CRDs); storage shared

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """Storage key: one store per group+resource, shared by all served versions."""
        return f"{self.group}/{self.plural}"

    def selectable(self, path: str) -> bool:
        return path in ("metadata.name", "metadata.namespace") or path in self.field_selectors

    def api_resources(self) -> list[dict]:
        main = {"name": self.plural, "singularName": self.singular or self.kind.lower(),
                "namespaced": self.namespaced, "kind": self.kind, "verbs": list(self.verbs)}
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        out = [main]
        if self.status:
            out.append({"name": f"{self.plural}/status", "singularName": "", "namespaced": self.namespaced,
                        "kind": self.kind, "verbs": list(STATUS_VERBS)})
        return out


def _rt(group, version, plural, kind, namespaced=True, **kw) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, singular=kind.lower(), **kw)


BUILTINS: tuple[ResourceType, ...] = (
    _rt("", "v1", "namespaces", "Namespace", False, short_names=("ns",), status=True,
        create_status={"phase": "Active"}, field_selectors=("status.phase",)),
    _rt("", "v1", "nodes", "Node", False, short_names=("no",), status=True, create_status="keep",
        field_selectors=("spec.unschedulable",)),
    _rt("", "v1", "pods", "Pod", short_names=("po",), categories=("all",), status=True,
        create_status={"phase": "Pending"}, field_selectors=_POD_FIELDS),
    _rt("", "v1", "configmaps", "ConfigMap", short_names=("cm",), create_status="keep"),
    _rt("", "v1", "secrets", "Secret", create_status="keep", field_selectors=("type",)),
    _rt("", "v1", "services", "Service", short_names=("svc",), categories=("all",), status=True),
    _rt("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",), create_status="keep"),
    _rt("", "v1", "events", "Event", short_names=("ev",), create_status="keep", field_selectors=_EVENT_FIELDS),
    _rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",), status=True,
        create_status={"phase": "Pending"}),
    _rt("apps", "v1", "deployments", "Deployment", short_names=("deploy",), categories=("all",), status=True),
    _rt("apps", "v1", "statefulsets", "StatefulSet", short_names=("sts",), categories=("all",), status=True),
    _rt("apps", "v1", "replicasets", "ReplicaSet", short_names=("rs",), categories=("all",), status=True),
    _rt("apps", "v1", "daemonsets", "DaemonSet", short_names=("ds",), categories=("all",), status=True),
    _rt("batch", "v1", "jobs", "Job", categories=("all",), status=True, field_selectors=("status.successful",)),
    _rt("events.k8s.io", "v1", "events", "Event", short_names=("ev",), create_status="keep"),
    _rt("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short_names=("pc",),
        create_status="keep"),
    _rt("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False, create_status="keep"),
    _rt("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short_names=("sc",), create_status="keep"),
    _rt("coordination.k8s.io", "v1", "leases", "Lease", create_status="keep"),
    _rt("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
        short_names=("crd", "crds"), categories=("api-extensions",), status=True),
    _rt("rbac.authorization.k8s.io", "v1", "roles", "Role", create_status="keep"),
    _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", create_status="keep"),
    _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, create_status="keep"),
    _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False,
        create_status="keep"),
)


def crd_resource_types(crd: dict) -> list[ResourceType]:
    """The resource types a CustomResourceDefinition serves (one per served version)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    served = [v for v in spec.get("versions") or () if v.get("served", True)]
    all_versions = tuple(v["name"] for v in served)
    return [ResourceType(
        group=spec["group"], version=v["name"], plural=names["plural"], kind=names["kind"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        singular=names.get("singular") or names["kind"].lower(),
        short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
        status="status" in ((v.get("subresources") or {})), crd=True, versions=all_versions,
    ) for v in served]


def validate_crd(crd: dict) -> list[tuple[str, str]]:
    """(field, message) problems that make the API server reject a CRD with 422."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    problems = []
    for f in ("group",):
        if not spec.get(f):
            problems.append((f"spec.{f}", "Required value"))
    for f in ("plural", "kind"):
        if not names.get(f):
            problems.append((f"spec.names.{f}", "Required value"))
    if not spec.get("versions"):
        problems.append(("spec.versions", "Required value: must have exactly one version marked as storage version"))
    elif sum(1 for v in spec["versions"] if v.get("storage")) != 1:
        problems.append(("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
    name = (crd.get("metadata") or {}).get("name")
    if names.get("plural") and spec.get("group") and name != f"{names['plural']}.{spec['group']}":
        problems.append(("metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    return problems


def group_versions(types) -> dict[str, list[str]]:
    """group -> served versions, preferred (first registered) first."""
    out: dict[str, list[str]] = {}
    for t in types:
        vs = out.setdefault(t.group, [])
        if t.version not in vs:
            vs.append(t.version)
    return out


def _preferred(group: str, versions: list[str]) -> str:
    # Kubernetes prefers GA > beta > alpha, higher numbers first; good enough ordering for discovery.
    def rank(v):
        m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", v)
        if not m:
            return (0, 0, 0)
        stage = {"alpha": 1, "beta": 2, None: 3}[m.group(2)]
        return (stage, int(m.group(1)), int(m.group(3) or 0))
    return max(versions, key=rank)


def api_versions(host: str) -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]}


def api_group(group: str, versions: list[str]) -> dict:
    pref = _preferred(group, versions)
    ordered = [pref] + [v for v in versions if v != pref]
    return {"name": group,
            "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in ordered],
            "preferredVersion": {"groupVersion": f"{group}/{pref}", "version": pref}}


def api_group_list(types) -> dict:
    groups = [api_group(g, vs) for g, vs in group_versions(types).items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_resource_list(group_version: str, types) -> dict:
    resources = [r for t in types if t.group_version == group_version for r in t.api_resources()]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


VERSION_INFO = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-placer-test", "gitCommit": "0" * 40,
                "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.23",
                "compiler": "gc", "platform": "linux/amd64"}


# ----- OpenAPI v3 -------------------------------------------------------------------------------
# kubectl (1.27+) downloads /openapi/v3 to learn whether the server validates fields itself (the
# `fieldValidation` query parameter on each kind's PATCH operation); without it, `kubectl apply` fails
# unless --validate=false. Only that much is served: paths with their PATCH parameters, no schemas.

_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")


def _gv_path(group_version: str) -> str:
    return f"apis/{group_version}" if "/" in group_version else f"api/{group_version}"


def openapi_v3_root(types) -> dict:
    gvs = sorted({t.group_version for t in types})
    return {"paths": {_gv_path(gv): {"serverRelativeURL": f"/openapi/v3/{_gv_path(gv)}?hash={_hash(gv, types)}"}
                      for gv in gvs}}


def _hash(group_version: str, types) -> str:
    key = repr(sorted(repr(t) for t in types if t.group_version == group_version))
    return hashlib.sha256(key.encode()).hexdigest()[:32].upper()


def openapi_v3_group_version(group_version: str, types) -> dict | None:
    selected = [t for t in types if t.group_version == group_version]
    if not selected:
        return None
    paths = {}
    for t in selected:
        base = "/" + _gv_path(group_version) + ("/namespaces/{namespace}/" if t.namespaced else "/") + t.plural
        gvk = {"group": t.group, "version": t.version, "kind": t.kind}
        params = [{"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                  for p in _WRITE_PARAMS]
        for suffix in ("/{name}",) + (("/{name}/status",) if t.status else ()):
            paths[base + suffix] = {"patch": {
                "operationId": f"patch{t.kind}{'Status' if suffix.endswith('status') else ''}",
                "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk,
                "parameters": params, "responses": {"200": {"description": "OK"}}}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
            "paths": paths, "components": {"schemas": {}}}
