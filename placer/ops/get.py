"""`placer get`: what placer placed across the fleet, one row per workload.

Every live cluster is read concurrently (placer's own objects of every catalog kind the
cluster serves, by the label `placer.dev/managed=true` plus the user's selector); a
cluster that cannot be read becomes a warning row, never a failure. Each object is
interpreted for its GPUs and phase; `wide` also finds its pods' nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import Any, Mapping

from placer import actuate as A
from placer.definitions.interpret import interpret
from placer.fleetview.inventory import error_reason
from placer.inputs.clusters_file import ClusterEntry
from placer.kube import KubeClient, Resource, run_concurrently
from placer.model.errors import InputError, NotFound, PlacerError
from placer.model.selectors import and_selectors
from placer.model.workload import WorkloadRef
from placer.ops.context import Context


@dataclass(frozen=True)
class Row:
    """One placed workload, or (with `error`) a cluster that could not be read."""

    cluster: str
    ref: WorkloadRef | None = None
    gpus: int = 0
    phase: str = ""
    created: str = ""                          # creationTimestamp
    plan: str = ""
    nodes: tuple[str, ...] = ()
    error: str | None = None

    def age(self, now: datetime) -> str:
        return kube_age(self.created, now)

    def to_dict(self) -> dict[str, Any]:
        if self.error is not None:
            return {"cluster": self.cluster, "error": self.error}
        r = self.ref
        assert r is not None, "a row without an error has a ref"
        return {"namespace": r.namespace, "name": r.name, "kind": r.kind, "apiGroup": r.group,
                "ref": r.to_dict(), "cluster": self.cluster, "gpus": self.gpus, "phase": self.phase,
                "creationTimestamp": self.created, "plan": self.plan, "nodes": list(self.nodes)}

    @property
    def name_ref(self) -> str:
        """kubectl's `-o name`: `kind.group/name`."""
        r = self.ref
        assert r is not None, "a row without an error has a ref"
        return f"{r.kind.lower()}{'.' + r.group if r.group else ''}/{r.name}"


@dataclass(frozen=True)
class Query:
    """What to list: a TYPE (kind, plural or short name, optionally `.group`), a NAME, a
    namespace (None: all), a label selector."""

    type: str | None = None
    name: str | None = None
    namespace: str | None = "default"
    selector: str | None = None
    wide: bool = False

    @classmethod
    def parse(cls, arg: str | None, **kw: Any) -> "Query":
        if not arg:
            return cls(**kw)
        kind, sep, name = arg.partition("/")
        if not kind or (sep and (not name or "/" in name)):
            raise InputError(f"expected TYPE or TYPE/NAME (e.g. jobsets or jobset/train), got {arg!r}")
        return cls(type=kind, name=name or None, **kw)

    def matches(self, res: Resource) -> bool:
        if not self.type:
            return True
        name, _, group = self.type.partition(".")
        return name.lower() in res.names() and (not group or res.group == group)


def get_placed(ctx: Context, query: Query) -> list[Row]:
    """The use case of `placer get`: the query's rows for every live cluster of the
    Context, in entry order; warning rows for the clusters that could not be read."""
    live = ctx.live

    def one(entry: ClusterEntry) -> tuple[list[Row], bool]:
        try:
            return _cluster_rows(ctx, ctx.kube.client(entry.context, cluster=entry.name), entry.name, query)
        except PlacerError as e:
            return [Row(entry.name, error=error_reason(e))], True
    results = run_concurrently({e.name: partial(one, e) for e in live}, max_workers=ctx.kube.max_workers)
    if query.type and live and not any(known for _, known in results.values()):
        raise InputError(f'unknown type "{query.type}": no cluster serves a workload kind of that name that '
                         "placer places (see placer catalog list)")
    rows = [r for e in live for r in results[e.name][0]]
    return sorted(rows, key=lambda r: (r.error is None, r.ref.namespace if r.ref else "",
                                       r.ref.name if r.ref else "", r.ref.kind if r.ref else "", r.cluster))


def _cluster_rows(ctx: Context, client: KubeClient, cluster: str, query: Query) -> tuple[list[Row], bool]:
    """The cluster's rows, and whether it serves a kind that `query.type` names."""
    selector = and_selectors(A.MANAGED_SELECTOR, query.selector)
    seen: set[tuple[str, str]] = set()
    objects = []
    for api_version, kind in ctx.catalog.kinds():
        try:
            res = client.resource_for(api_version, kind)
        except NotFound:
            continue
        if (res.group, res.plural) in seen or not query.matches(res):
            continue
        seen.add((res.group, res.plural))
        for item in client.list(res, query.namespace, label_selector=selector).items:
            labels = (item.get("metadata") or {}).get("labels") or {}
            if A.WORKLOAD not in labels:
                continue                                      # a companion
            if query.name and item["metadata"]["name"] != query.name:
                continue
            objects.append({**item, "apiVersion": item.get("apiVersion") or api_version,
                            "kind": item.get("kind") or kind})
    pods: dict[str, list] = {}
    if query.wide:
        for ns in sorted({o["metadata"].get("namespace") or "default" for o in objects}):
            pods[ns] = list(client.list("pods", ns).items)
    return [_row(ctx, cluster, o, query, pods) for o in objects], bool(seen)


def _row(ctx: Context, cluster: str, obj: Mapping[str, Any], query: Query, pods: Mapping[str, list]) -> Row:
    meta = obj.get("metadata") or {}
    ann = meta.get("annotations") or {}
    ref = WorkloadRef.of(obj)
    try:
        w = interpret(obj, ctx.catalog, gpu_resources=ctx.gpu_resources, source=f"{cluster}/{ref}")
    except PlacerError as e:
        return Row(cluster, ref, phase=f"Unknown ({e.message})", created=meta.get("creationTimestamp") or "",
                   plan=ann.get(A.PLAN) or "")
    nodes: tuple[str, ...] = ()
    if query.wide:
        cache: dict = {}
        found = {(p.get("spec") or {}).get("nodeName") for inst in w.instances
                 for p in A.instance_pods(inst, w, pods.get(ref.namespace, []), len(w.instances) > 1, cache)}
        nodes = tuple(sorted(n for n in found if n))
    return Row(cluster, ref, w.gpus, w.phase.value, meta.get("creationTimestamp") or "", ann.get(A.PLAN) or "",
               nodes)


def kube_age(created: str, now: datetime | None = None) -> str:
    """kubectl's AGE: 45s, 12m, 5h, 3d (the two largest units under a day and a half: 1h30m)."""
    try:
        at = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return "<unknown>"
    seconds = int(((now or datetime.now(timezone.utc)) - at).total_seconds())
    seconds = max(0, seconds)
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 36:
        rest = minutes % 60
        return f"{hours}h{rest}m" if hours < 8 and rest else f"{hours}h"
    return f"{hours // 24}d"
