"""The hub as the daemon's watches hold it: staging objects, their companions and the
priority classes, and the lookups every part makes on them (a workload's kind, its group,
its companions). Read only: writes go through `staging.HubWriter`."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from placer import actuate as A
from placer.daemon.informer import Informer
from placer.daemon.state import GVK, ann_of
from placer.inputs.priority import PriorityClasses, from_objects
from placer.kube import Resource
from placer.model.names import ANN_GROUP
from placer.model.workload import WorkloadRef


class StagingView:
    """Filled by the daemon's watches (`watches.start_watches`) once it starts."""

    def __init__(self, hub_context: str | None = None):
        self.hub_context = hub_context
        self.informers: dict[GVK, Informer] = {}           # (apiVersion, kind) -> staging informer
        self.companions: dict[GVK, Informer] = {}
        self.classes: list[Informer] = []
        self.quotas: Informer | None = None                # FleetQuota objects (issue 23), when served
        self.resources: dict[GVK, Resource] = {}
        self.gvks: dict[tuple[str, str], GVK] = {}         # (group, kind) -> (apiVersion, kind)

    def gvk_of(self, ref: WorkloadRef) -> GVK | None:
        return self.gvks.get((ref.group, ref.kind))

    @staticmethod
    def ref_of(gvk: GVK, namespace: str, name: str) -> WorkloadRef:
        return WorkloadRef.of({"apiVersion": gvk[0], "kind": gvk[1], "metadata": {"namespace": namespace,
                                                                                   "name": name}})

    def staged(self, ref: WorkloadRef) -> dict | None:
        """The staging object as the hub's cache holds it (with apiVersion and kind)."""
        gvk = self.gvk_of(ref)
        inf = self.informers.get(gvk) if gvk else None
        obj = inf.get(ref.namespace, ref.name) if inf else None
        if obj is not None and gvk:
            obj = {**obj, "apiVersion": gvk[0], "kind": gvk[1]}
        return obj

    def refs(self) -> Iterator[WorkloadRef]:
        """Every staging object's ref."""
        for gvk, inf in self.informers.items():
            for obj in inf.items():
                meta = obj.get("metadata") or {}
                yield self.ref_of(gvk, meta.get("namespace") or "", meta.get("name") or "")

    def assume(self, gvk: GVK, obj: dict) -> dict:
        """What a write returned, into the cache at once (its watch event follows); the
        object with its apiVersion and kind."""
        self.informers[gvk].assume(obj, notify=False)
        return {**obj, "apiVersion": gvk[0], "kind": gvk[1]}

    @staticmethod
    def group_key(ref: WorkloadRef, staging: Mapping[str, Any]) -> str:
        # Deliberately not inputs/grouping's key (files, the bare annotation, namespace/name):
        # the daemon's groups are `namespace/annotation` (companions_of splits it back) and a
        # lone workload is its full ref, so a Job and a JobSet of one name stay apart; the key
        # is written on the copies (the group label), so changing it would orphan companions.
        group = ann_of(staging).get(ANN_GROUP)
        return f"{ref.namespace}/{group}" if group else str(ref)

    def group_members(self, ref: WorkloadRef, staging: Mapping[str, Any]) -> list[tuple[WorkloadRef, dict]]:
        group = ann_of(staging).get(ANN_GROUP)
        if not group:
            return [(ref, dict(staging))]
        out = []
        for gvk, inf in self.informers.items():
            for obj in inf.items():
                meta = obj.get("metadata") or {}
                if ann_of(obj).get(ANN_GROUP) == group and not meta.get("deletionTimestamp") and \
                        (meta.get("namespace") or "") == ref.namespace:
                    out.append((self.ref_of(gvk, meta.get("namespace") or "", meta["name"]),
                                {**obj, "apiVersion": gvk[0], "kind": gvk[1]}))
        return sorted(out, key=lambda m: m[0])

    def companions_of(self, group_key: str) -> list[dict]:
        ns, _, name = group_key.partition("/")
        out = []
        for (api, kind), inf in self.companions.items():
            for obj in inf.items():
                meta = obj.get("metadata") or {}
                if ann_of(obj).get(A.GROUP) == name and meta.get("namespace") == ns:
                    out.append({**obj, "apiVersion": api, "kind": kind})
        return sorted(out, key=lambda o: (o["kind"], o["metadata"]["name"]))

    def priority_classes(self) -> PriorityClasses:
        """The hub's PriorityClasses and WorkloadPriorityClasses, from its watches."""
        objs = [{**o, "apiVersion": inf.gvk[0], "kind": inf.gvk[1]} for inf in self.classes for o in inf.items()]
        return from_objects(objs, f"context {self.hub_context or '(current)'}")
