"""Removing what placer placed: `placer delete` and `placer submit --replace`.

A workload is found on whichever cluster holds it (by its identity, `actuate.find_placed`);
only objects placer created are deleted (label `placer.dev/managed=true` and the
workload's or group's label), never someone else's object of the same name. The
companions of a group go with its last workload on that cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from placer import actuate as A
from placer.inputs.manifests import expand_paths, read_documents
from placer.kube import KubeClient
from placer.model.errors import InputError, NotFound
from placer.model.workload import WorkloadRef
from placer.ops.context import Context
from placer.ops.get import Query

# companions looked up by label when deleting by TYPE/NAME (the file is not at hand)
CORE_COMPANIONS = ("ConfigMap", "Secret", "Service", "ServiceAccount", "PersistentVolumeClaim")


@dataclass(frozen=True)
class Deleted:
    cluster: str
    ref: str                                      # "Kind ns/name"

    def to_dict(self) -> dict[str, str]:
        return {"cluster": self.cluster, "object": self.ref}


def _ours(obj: Mapping[str, Any], group_label: str | None, workload_label: str | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(A.MANAGED) != "true":
        return False
    if workload_label and labels.get(A.WORKLOAD) == workload_label:
        return True
    return bool(group_label) and labels.get(A.GROUP) == group_label and A.WORKLOAD not in labels


def remove_objects(client: KubeClient, objects: Sequence[Mapping[str, Any]], *, group_key: str) -> list[Deleted]:
    """Delete these objects (as prepared for the cluster) where placer created them:
    workloads first, then their companions. Objects absent or not placer's are skipped."""
    group_label = A.label_value(group_key)
    out = []
    for obj in sorted(objects, key=lambda o: A.WORKLOAD not in ((o.get("metadata") or {}).get("labels") or {})):
        meta = obj.get("metadata") or {}
        wl = (meta.get("labels") or {}).get(A.WORKLOAD)
        try:
            res = client.resource_for(obj["apiVersion"], obj["kind"])
            ns = meta.get("namespace") if res.namespaced else None
            have = client.get(res, meta["name"], ns)
        except NotFound:
            continue
        if not _ours(have, group_label, wl):
            continue
        client.delete(res, meta["name"], ns, missing_ok=True)
        out.append(Deleted(client.cluster, A.ref_name({**obj, "metadata": {**meta, "namespace": ns}})))
    return out


def remove_placed(client: KubeClient, placed: A.PlacedRef, *, last_of_group: bool) -> list[Deleted]:
    """Delete one placed workload and, when it is the last of its group on that cluster
    (`last_of_group`), the group's companions in its namespace (core kinds, by label)."""
    obj = placed.object
    meta = placed.meta
    res = client.resource_for(obj["apiVersion"], obj["kind"])
    ns = meta.get("namespace")
    client.delete(res, meta["name"], ns, missing_ok=True)
    out = [Deleted(client.cluster, f"{obj['kind']} {ns}/{meta['name']}")]
    group = placed.group
    if not group or not last_of_group:
        return out
    selector = f"{A.MANAGED}=true,{A.GROUP}={A.label_value(group)}"
    for kind in CORE_COMPANIONS:
        try:
            items = client.list(client.resource_for("v1", kind), ns, label_selector=selector).items
        except NotFound:
            continue
        for item in items:
            client.delete(client.resource_for("v1", kind), item["metadata"]["name"], ns, missing_ok=True)
            out.append(Deleted(client.cluster, f"{kind} {ns}/{item['metadata']['name']}"))
    return out


def group_remains(placed: Iterable[A.PlacedRef], cluster: str, group: str | None, leaving: set[WorkloadRef],
                  namespace: str | None = None) -> bool:
    """Whether another workload of `group` stays on `cluster` in `namespace` (when given).
    A group is its key and its namespace: one file submitted into `-n team-a` and `-n team-b`
    gives two groups of the same key, each with its own companions in its namespace."""
    return any(p.cluster == cluster and p.group == group and p.ref not in leaving
               and (namespace is None or p.ref.namespace == namespace) for p in placed)


# --- `placer delete` ---------------------------------------------------------------------

@dataclass(frozen=True)
class DeleteResult:
    deleted: tuple[Deleted, ...]
    not_found: tuple[str, ...]                    # asked for, placed nowhere reachable
    unreachable: Mapping[str, str]
    refused: Mapping[str, str] = field(default_factory=dict)    # ref -> why it was left alone

    def exit_code(self, ignore_not_found: bool = False) -> int:
        return 1 if self.refused or (self.not_found and not ignore_not_found) else 0

    def to_dict(self) -> dict[str, Any]:
        return {"deleted": [d.to_dict() for d in self.deleted], "notFound": list(self.not_found),
                "refused": dict(self.refused), "unreachable": dict(self.unreachable)}


@dataclass(frozen=True)
class DeleteRequest:
    """What to delete: the workloads of `files`, or the one named `what` (TYPE/NAME)."""

    what: str | None = None
    files: tuple[str, ...] = ()
    namespace: str | None = None

    def check(self) -> None:
        """Bad input fails before any cluster is read."""
        if bool(self.what) == bool(self.files):
            raise InputError("give either -f FILE|DIR or TYPE/NAME")
        if self.files:
            expand_paths(list(self.files))
        elif not Query.parse(self.what).name:
            raise InputError(f"{self.what}: expected TYPE/NAME (e.g. jobset/train)")


def delete(ctx: Context, request: DeleteRequest) -> DeleteResult:
    """The use case of `placer delete`: find where each workload is placed and remove it."""
    placed = A.find_placed(ctx.kube, ctx.entries, ctx.catalog)
    if request.files:
        refs = refs_in_files(request.files, ctx.catalog, request.namespace)
    else:
        refs = _named(ctx, Query.parse(request.what), request.namespace or "default", placed)
    clients = {e.name: A.client_for(ctx.kube, e) for e in ctx.live}
    return delete_placed(refs, placed, clients)


def _named(ctx: Context, query: Query, namespace: str, placed: A.Placed) -> list[WorkloadRef]:
    """The placed workloads of that name whose kind the TYPE names (on the cluster holding
    them); none: the name as asked, to be reported not found."""
    refs = [r for r in placed if r.namespace == namespace and r.name == query.name and
            any(query.matches(A.client_for(ctx.kube, e).resolve(r.kind)) for e in ctx.live
                if e.name == placed[r].cluster)]
    return refs or [WorkloadRef("", query.type or "", namespace, query.name or "")]


def refs_in_files(paths: Sequence[str], catalog: Any, namespace: str | None = None) -> list[WorkloadRef]:
    """The workloads of these files (companions follow their workloads)."""
    refs = []
    for d in read_documents(paths):
        obj = d.obj
        if catalog.is_companion(str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")):
            continue
        ref = WorkloadRef.of(obj)
        if namespace and not (obj.get("metadata") or {}).get("namespace"):
            ref = WorkloadRef(ref.group, ref.kind, namespace, ref.name)
        refs.append(ref)
    return list(dict.fromkeys(refs))


def delete_placed(refs: Sequence[WorkloadRef], placed: A.Placed, clients: Mapping[str, KubeClient]) -> DeleteResult:
    """Delete each placed workload of `refs` from the cluster that holds it (and any
    duplicate copies), with its group's companions when it is the last of its group there."""
    deleted: list[Deleted] = []
    missing, refused = [], {}
    leaving = set(refs)
    for ref in refs:
        copies = [placed[ref], *placed.duplicates.get(ref, [])[1:]] if ref in placed else []
        if not copies:
            missing.append(str(ref))
            continue
        hub = next((p.origin for p in copies if (p.origin or "").startswith("hub/")), None)
        if hub:
            # the daemon would place it again: its staging object is what to delete
            refused[str(ref)] = (f"placed by the daemon from the hub's staging object {hub.removeprefix('hub/')}; "
                                 "delete that object on the hub instead")
            continue
        for p in copies:
            last = not group_remains(placed.values(), p.cluster, p.group, leaving, p.ref.namespace)
            deleted += remove_placed(clients[p.cluster], p, last_of_group=last)
    return DeleteResult(tuple(deleted), tuple(missing), dict(placed.unreachable), refused)
