"""`submit --dry-run`: the exact objects a submit would create, per cluster.

`client` (the default) builds them as `submit` would (clean copies, placer's labels and
annotations, each cluster's hand-off patches and suspend policy) and creates nothing.
`server` also sends each one to its cluster's API server as a server-side-apply dry run
(`dryRun=All`): the server validates and defaults it, stores nothing, and what it answers
is what is shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Mapping, Sequence

from placer.actuate import prepare_objects, shares_on
from placer.actuate.steer import nodes_by_workload
from placer.actuate.topology import choices_by_workload
from placer.kube import run_concurrently
from placer.model.errors import KubeError, PlacerError
from placer.model.plan import Plan
from placer.model.workload import PlacementGroup
from placer.ops.context import Context
from placer.ops.submit import SubmitResult


@dataclass(frozen=True)
class Preview:
    """Per cluster, the objects as they would be created (in order), and for a server dry
    run the objects the server refused (ref -> why) or could not be asked (simulated)."""

    objects: Mapping[str, Sequence[Mapping[str, Any]]]
    refused: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    not_validated: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.refused.values())


def preview(ctx: Context, result: SubmitResult, mode: str) -> Preview:
    """The use case of `submit --dry-run[=client|server] -o yaml|json|name`: the objects
    of a dry run's `result` per cluster, as they would be created (`server`: as each API
    server answered its dry run)."""
    if result.plan is None:
        return Preview({})
    objects = preview_objects(ctx, result.plan, result.groups, result.plan_id)
    if mode == "server" and objects:
        return server_dry_run(ctx, objects)
    return Preview(objects)


def preview_objects(ctx: Context, plan: Plan, groups: Sequence[PlacementGroup], plan_id: str
                    ) -> dict[str, list[dict[str, Any]]]:
    """cluster -> the objects of every group placed there, as `submit` would apply them."""
    by_key = {g.key: g for g in groups}
    by_name = {e.name: e for e in ctx.entries}
    out: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    for p in plan.placements:
        if (p.group, p.cluster) in seen or p.group not in by_key:
            continue
        seen.add((p.group, p.cluster))
        out.setdefault(p.cluster, []).extend(
            prepare_objects(by_key[p.group], by_name[p.cluster], ctx.catalog, plan_id=plan_id, cluster=p.cluster,
                            topology=choices_by_workload(plan.placements, p.cluster),
                            shares=shares_on(plan.placements, p.cluster),
                            nodes=nodes_by_workload(plan.placements, p.cluster)))
    return out


def server_dry_run(ctx: Context, objects: Mapping[str, Sequence[Mapping[str, Any]]]) -> Preview:
    """Ask each cluster's API server to apply its objects with dryRun=All, concurrently."""
    kube, by_name = ctx.kube, {e.name: e for e in ctx.entries}
    simulated = {c: "simulated cluster: no API server to ask" for c in objects if not by_name[c].context}

    def one(cluster: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
        answered, refused = [], {}
        try:
            client = kube.client(by_name[cluster].context, cluster=cluster)
        except PlacerError as e:
            return [dict(o) for o in objects[cluster]], {"*": str(e)}
        for obj in objects[cluster]:
            meta = obj.get("metadata") or {}
            ref = f"{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}".replace(" /", " ")
            try:
                answered.append(client.apply(obj, dry_run=True))
            except KubeError as e:
                refused[ref] = e.message
                answered.append(dict(obj))
        return answered, refused

    live = [c for c in objects if c not in simulated]
    results = run_concurrently({c: partial(one, c) for c in live}, max_workers=kube.max_workers)
    shown = {c: (results[c][0] if c in results else list(objs)) for c, objs in objects.items()}
    return Preview(shown, {c: r[1] for c, r in results.items() if r[1]}, simulated)
