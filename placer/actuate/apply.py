"""Applying a prepared group to one cluster: server-side apply, all or nothing, with
rollback of what the call created; namespaces created with the cluster's Pod Security level."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from placer.actuate.podsecurity import LABEL as PSA_LABEL
from placer.actuate.podsecurity import VERSION_LABEL as PSA_VERSION_LABEL
from placer.actuate.prepare import ref_name
from placer.inputs.clusters_file import DEFAULT_POD_SECURITY
from placer.kube import KubeClient, Resource
from placer.model.errors import KubeError, NotFound, ServerError, Unreachable
from placer.model.names import GROUP, MANAGED, SHARED, WORKLOAD


@dataclass(frozen=True)
class AppliedRef:
    """One object applied to a cluster."""

    cluster: str
    api_version: str
    kind: str
    namespace: str | None
    name: str
    created: bool                     # False when it existed already (placer's own) and was updated
    uid: str = ""
    before: str = ""                  # resourceVersion before the apply ("" when created)
    after: str = ""                   # resourceVersion after it: equal to `before` when unchanged
    # the object as the server answered the apply (what its watch event will carry)
    live: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def changed(self) -> bool:
        return self.created or self.before != self.after

    @property
    def ref(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class NotOurs(KubeError):
    """An object of the same name exists on the target and placer did not create it
    for this workload: placer never takes over someone else's object."""

    status = 409



class Namespaces:
    """The namespaces known to exist on one cluster (ensured there by this process), so that
    a long-lived caller (the daemon) ensures each once, not once per group; one the server
    says is gone is forgotten and ensured again. Shared by the cluster's worker and readers."""

    def __init__(self) -> None:
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._known

    def add(self, name: str) -> None:
        with self._lock:
            self._known.add(name)

    def forget(self, name: str) -> None:
        with self._lock:
            self._known.discard(name)


def ensure_namespace(client: KubeClient, name: str, pod_security: str = DEFAULT_POD_SECURITY) -> bool:
    """Create the namespace when missing, enforcing the cluster's Pod Security level;
    True when placer created it. An existing namespace keeps the labels its owner gave it."""
    try:
        client.get("namespaces", name)
        return False
    except NotFound:
        pass
    body = {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {MANAGED: "true", PSA_LABEL: pod_security,
                                                  PSA_VERSION_LABEL: "latest"}}}
    try:
        client.create("namespaces", body)
        return True
    except KubeError as e:
        if e.status == 409:           # created meanwhile by someone else
            return False
        raise


def _is_ours(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    have = (existing.get("metadata") or {}).get("labels") or {}
    want = (desired.get("metadata") or {}).get("labels") or {}
    if have.get(MANAGED) != "true":
        return False
    if WORKLOAD in want:
        return have.get(WORKLOAD) == want[WORKLOAD]
    if ((desired.get("metadata") or {}).get("annotations") or {}).get(SHARED) == "true":
        return True                   # a companion several groups bring along: any of them may apply it
    return have.get(GROUP) == want.get(GROUP)


def apply_group(client: KubeClient, objects: Sequence[Mapping[str, Any]], *, group_key: str,
                force: bool = False, pod_security: str = DEFAULT_POD_SECURITY,
                namespaces: Namespaces | None = None) -> list[AppliedRef]:
    """Server-side apply (field manager `placer`) of one group's objects, in order, after
    creating their namespaces when missing. All or nothing: when any object fails, every
    object this call created is deleted again (objects that existed before are left as
    they were) and the error is raised, naming the cluster, the object and the group.
    An object of the same name that placer did not create for this workload is refused
    (NotOurs) rather than taken over. `namespaces`: those known to exist on this cluster,
    not asked about again (one gone meanwhile is created again when an apply says so)."""
    cluster = client.cluster
    resources: list[Resource] = []
    try:
        for obj in objects:
            resources.append(client.resource_for(obj["apiVersion"], obj["kind"]))
        remembered = _ensure_namespaces(client, objects, resources, pod_security, namespaces)
    except KubeError as e:
        raise _group_error(e, group_key, [], client) from None
    applied: list[AppliedRef] = []
    for obj, res in zip(objects, resources):
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") if res.namespaced else None
        created = False
        try:
            try:
                existing = client.get(res, meta["name"], ns)
            except NotFound:
                existing = None
            if existing is not None and not _is_ours(existing, obj):
                raise NotOurs(f"{ref_name(obj)} already exists and was not created by placer for this "
                              f"workload; not taking it over", cluster=cluster, obj=ref_name(obj))
            created = existing is None
            again = partial(_ensure_again, client, ns, pod_security, namespaces) \
                if ns in remembered and namespaces is not None else None
            result = _apply(client, obj, res, ns, force, again)
        except KubeError as e:
            # a create whose answer was lost (5xx, connection) may still have happened: remove it too
            maybe = AppliedRef(cluster, obj["apiVersion"], obj["kind"], ns, meta["name"], True) \
                if created and isinstance(e, (ServerError, Unreachable)) else None
            raise _group_error(e, group_key, applied, client, maybe) from None
        after = (result or {}).get("metadata") or {}
        before = ((existing or {}).get("metadata") or {}).get("resourceVersion", "")
        applied.append(AppliedRef(cluster, obj["apiVersion"], obj["kind"], ns, meta["name"], created,
                                  after.get("uid", ""), before, after.get("resourceVersion", ""),
                                  result if isinstance(result, dict) else None))
    return applied


def _ensure_namespaces(client: KubeClient, objects: Sequence[Mapping[str, Any]], resources: Sequence[Resource],
                       pod_security: str, namespaces: Namespaces | None) -> set[str]:
    """Ensure the namespaces the objects go to; those known to exist are not asked about
    (returned: the apply into one of them may find it gone)."""
    remembered: set[str] = set()
    for ns in dict.fromkeys((o.get("metadata") or {}).get("namespace") for o, r in zip(objects, resources)
                            if r.namespaced):
        if not ns:
            continue
        if namespaces is not None and ns in namespaces:
            remembered.add(ns)
            continue
        ensure_namespace(client, ns, pod_security)
        if namespaces is not None:
            namespaces.add(ns)
    return remembered


def _ensure_again(client: KubeClient, ns: str, pod_security: str, namespaces: Namespaces) -> None:
    """A namespace remembered but deleted since: forgotten, then ensured as without memory."""
    namespaces.forget(ns)
    ensure_namespace(client, ns, pod_security)
    namespaces.add(ns)


def _apply(client: KubeClient, obj: Mapping[str, Any], res: Resource, ns: str | None, force: bool,
           again: Callable[[], None] | None) -> Any:
    """The server-side apply; when its namespace came from memory and the server says
    NotFound, the namespace is ensured `again` and the apply tried once more."""
    try:
        return client.apply(obj, res, ns, force=force)
    except NotFound:
        if again is None:
            raise
        again()
        return client.apply(obj, res, ns, force=force)


def _group_error(e: KubeError, group_key: str, applied: Sequence[AppliedRef], client: KubeClient,
                 maybe: AppliedRef | None = None) -> KubeError:
    left_applied = rollback(client, applied)
    removed = sum(1 for a in applied if a.created) - len(left_applied)
    leftovers = rollback(client, [maybe] if maybe else []) + left_applied
    note = f"group {group_key} not applied"
    if removed:
        note += f"; removed the {removed} object(s) it had created"
    if leftovers:
        note += f"; could not remove {', '.join(leftovers)}"
    err = type(e)(f"{e.message} ({note})", cluster=e.cluster or client.cluster, obj=e.obj,
                  status=e.status, reason=getattr(e, "reason", None))
    err.rolled_back = removed
    err.leftovers = leftovers
    return err


def rollback(client: KubeClient, applied: Sequence[AppliedRef]) -> list[str]:
    """Delete, newest first, what an apply created; the refs that could not be deleted."""
    left = []
    for a in reversed(applied):
        if not a.created:
            continue
        try:
            res = client.resource_for(a.api_version, a.kind)
            client.delete(res, a.name, a.namespace, missing_ok=True)
        except KubeError:
            left.append(a.ref)
    return left

