"""What `placer plan` plans with no files: the pending objects of the hub's staging namespace.

Read through `placer.kube` (every catalog kind the hub serves, in the staging namespace),
skipping objects the daemon already placed (annotation `placer.dev/placed-cluster`, or
`placer.dev/placed-shares` for a spread workload; a
user's pin `placer.dev/cluster` does not mean placed); definitions
registered on the hub override the catalog's. Objects sharing `placer.dev/group` form one
placement group (`<namespace>/<group>`, as the daemon keys them); every other object is
its own group.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from placer.definitions.interpret import interpret
from placer.fleetview.registry import with_cluster_definitions
from placer.inputs.grouping import group
from placer.inputs.priority import read_classes, with_priorities
from placer.model.errors import NotFound
from placer.model.names import ANN_GROUP, PLACED_CLUSTER, PLACED_SHARES
from placer.model.workload import PlacementGroup, Workload
from placer.ops.context import Context, Say


def _pending(obj: dict) -> bool:
    meta = obj.get("metadata") or {}
    ann = meta.get("annotations") or {}
    # a spread workload the daemon placed records its shares instead of one cluster
    return not ann.get(PLACED_CLUSTER) and not ann.get(PLACED_SHARES) and not meta.get("deletionTimestamp")


def group_objects(workloads: Sequence[Workload]) -> list[PlacementGroup]:
    """The staged workloads grouped by `inputs.grouping` (no companions: the hub holds
    workloads only, so only `placer.dev/group` ties them). The keys differ on purpose:
    files key a group by its file, staged objects have none, so a group is keyed as the
    daemon keys it (`<namespace>/<group>`, else the workload's `namespace/name`)."""
    return [dataclasses.replace(g, key=_staged_key(g.workloads[0])) for g in group(workloads, ())]


def _staged_key(w: Workload) -> str:
    value = (w.annotations or {}).get(ANN_GROUP)
    return f"{w.namespace}/{value}" if value else w.key


def staging_groups(ctx: Context, context: str, namespace: str, *, warn: Say) -> list[PlacementGroup]:
    """The staging namespace's pending workloads on the hub's `context`, grouped, in
    (kind, name) order; `warn` hears the hub's definitions that could not be used."""
    client = ctx.kube.client(context, cluster="hub")
    catalog = with_cluster_definitions(ctx.catalog, client, warn)
    workloads: list[Workload] = []
    for api_version, kind in catalog.kinds():
        try:
            res = client.resource_for(api_version, kind)
        except NotFound:
            continue                                   # the hub does not serve this kind
        items = sorted(client.list(res, namespace).items, key=lambda o: (o.get("metadata") or {}).get("name", ""))
        for obj in items:
            if _pending(obj):
                name = (obj.get("metadata") or {}).get("name", "?")
                workloads.append(interpret(obj, catalog, gpu_resources=ctx.gpu_resources,
                                           source=f"hub {namespace}/{kind.lower()}/{name}"))
    return with_priorities(group_objects(workloads), read_classes(ctx.kube, [context]))
