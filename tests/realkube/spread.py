"""A spread fidelity scenario (issue 21): one `placer.dev/spread` workload over several real
clusters. placer plans it as `placer submit --dry-run` does against the live clusters; each
share placer chose is then written as `placer submit` writes it (the definition's scale path
set to the share, placer.definitions.scale.share_object) and forced onto its cluster, and the
real kube-scheduler binds what it can. The same workload is then divided by cluster totals, as
Nova and Karmada divide (written here, apart from placer): shares by the weights (largest
remainder), without weights the clusters with the most free GPUs first, a duplicate on the N
clusters with the most free GPUs; a share is sent when its cluster's free GPU total covers it.
Per share: pods planned against pods the scheduler bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from placer.definitions.catalog import Catalog
from placer.definitions.interpret import interpret
from placer.definitions.scale import share_object
from placer.inputs.manifests import load_groups
from placer.kube import Kube
from placer.model.workload import Workload
from placer.ops.context import context_of
from placer.ops.submit import SubmitRequest, submit

from .cluster import BoundPod, Cluster, NodeSpec
from .pods import materialise
from .scenario import observe

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class SpreadScenario:
    name: str
    nodes: Mapping[str, tuple[NodeSpec, ...]]           # context -> its nodes
    workload: Mapping[str, Any]                          # one object with placer.dev/spread
    bound: Mapping[str, tuple[BoundPod, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Share:
    cluster: str
    replicas: int                                        # the share (divide) or the copy's replicas
    pods: int                                            # pods the share's objects create
    bound: int                                           # pods the real scheduler bound
    pending: tuple[str, ...] = ()                        # the scheduler's reasons for the rest

    @property
    def all_bound(self) -> bool:
        return self.pods > 0 and self.bound == self.pods


@dataclass(frozen=True)
class SpreadVerdict:
    scenario: str
    kind: str
    mode: str
    placer: tuple[Share, ...]                            # () when placer leaves it unplaced
    placer_reason: str                                   # why not, per cluster ("" when placed)
    totals: tuple[Share, ...]                            # () when cluster totals refuse it too


def _free_gpus(s: SpreadScenario) -> dict[str, int]:
    out = {}
    for ctx, nodes in s.nodes.items():
        total = sum(int(n.allocatable.get(GPU, "0")) for n in nodes if not n.unschedulable)
        used = sum(int(b.requests.get(GPU, "0")) for b in s.bound.get(ctx, ()) if not b.phase)
        out[ctx] = total - used
    return out


def _largest_remainder(total: int, weights: Mapping[str, int]) -> dict[str, int]:
    W = sum(weights.values())
    base = {c: total * w // W for c, w in weights.items()}
    for c in sorted(weights, key=lambda c: (-(total * weights[c] % W), c))[:total - sum(base.values())]:
        base[c] += 1
    return {c: k for c, k in base.items() if k}


def totals_shares(w: Workload, free: Mapping[str, int]) -> dict[str, int] | None:
    """Cluster -> units (divide) or 1 (duplicate), decided on free GPU totals alone; None when
    the totals refuse it."""
    a = w.annotations
    n = int(a.get("placer.dev/spread-clusters") or len(free))
    by_free = sorted(free, key=lambda c: (-free[c], c))
    if a["placer.dev/spread"] == "duplicate":
        chosen = [c for c in by_free if free[c] >= w.gpus][:n]
        return {c: 1 for c in chosen} if len(chosen) == n else None
    assert w.scaling is not None
    units, per = w.scaling.units, w.scaling.unit.gpus
    text = a.get("placer.dev/spread-weights")
    if text:
        shares = _largest_remainder(units, {k.strip(): int(v) for k, v in (x.split("=") for x in text.split(","))})
    else:
        shares, left = {}, units
        for c in by_free[:n]:
            k = min(left, free[c] // per) if per else left
            if k:
                shares[c], left = k, left - k
        if left:
            return None
    return shares if all(free.get(c, 0) >= k * per for c, k in shares.items()) else None


def _setup(clusters: Mapping[str, Cluster], s: SpreadScenario, namespace: str) -> None:
    for ctx, c in clusters.items():
        c.ensure_namespace(namespace)
        c.bind_pods(namespace, s.bound.get(ctx, ()))


def _force(clusters: Mapping[str, Cluster], catalog: Catalog, namespace: str, w: Workload,
           shares: Mapping[str, int], divide: bool, timeout: float) -> tuple[Share, ...]:
    """Create each share's object on its cluster, let the scheduler bind, count per share."""
    expected = {}
    for ctx, k in sorted(shares.items()):
        obj = share_object(w.obj, w.scaling, k * _per_unit(w)) if divide and w.scaling else dict(w.obj)
        expected[ctx] = materialise(clusters[ctx], namespace, interpret(obj, catalog), catalog)[0]
    out = []
    for ctx, k in sorted(shares.items()):
        o = observe(clusters[ctx], namespace, expected[ctx], timeout=timeout)
        replicas = k * _per_unit(w) if divide else (sum(w.scaling.replicas) if w.scaling else 1)
        out.append(Share(ctx, replicas, expected[ctx], sum(1 for p in o.pods if p.node),
                         tuple(p.unschedulable or "" for p in o.pods if not p.node)))
    return tuple(out)


def _per_unit(w: Workload) -> int:
    s = w.scaling
    return sum(s.replicas) // s.units if s and s.units else 1


def run_spread(s: SpreadScenario, *, clusters: Mapping[str, Cluster], kube: Kube, catalog: Catalog,
               namespace: str, workdir: Path, timeout: float = 30.0) -> SpreadVerdict:
    """placer's shares, then the cluster-totals shares, each on the scenario's clusters as set up
    (nodes, bound pods), every share counted; the clusters are left empty."""
    ctxs = list(s.nodes)
    mine = {c: clusters[c] for c in ctxs}
    obj = {**s.workload, "metadata": {**s.workload["metadata"], "namespace": namespace}}
    path = workdir / f"{s.name}.yaml"
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    w = next(x for g in load_groups([str(path)], catalog) for x in g.workloads)
    divide = w.annotations["placer.dev/spread"] == "divide"
    try:
        for ctx, c in mine.items():
            c.add_nodes(s.nodes[ctx])
        _setup(mine, s, namespace)
        result = submit(context_of([{"name": c, "context": c} for c in ctxs], catalog, kube),
                        SubmitRequest((str(path),), dry_run=True))
        plan = result.plan
        assert plan is not None
        reason = "; ".join(f"{c}: {r.render()}" for u in plan.unplaced for c, r in u.reasons.items())
        placed = {p.cluster: (p.replicas or 0) // _per_unit(w) if divide else 1
                  for p in plan.placements if p.ref == w.ref}
        ours = _force(mine, catalog, namespace, w, placed, divide, timeout) if placed else ()
        for c in mine.values():
            c.clear_namespace(namespace)
        _setup(mine, s, namespace)
        theirs_shares = totals_shares(w, _free_gpus(s))
        theirs = _force(mine, catalog, namespace, w, theirs_shares, divide, timeout) if theirs_shares else ()
        return SpreadVerdict(s.name, w.kind, "divide" if divide else "duplicate", ours, reason, theirs)
    finally:
        for ctx, c in mine.items():
            c.clear_namespace(namespace)
            c.delete_nodes([n.name for n in s.nodes[ctx]])


def run_all(scenarios: Sequence[SpreadScenario], *, clusters: Mapping[str, Cluster], kube: Kube,
            catalog: Catalog, namespace: str, workdir: Path, timeout: float = 30.0,
            done: Any = None) -> list[SpreadVerdict | BaseException]:
    """One scenario at a time (each uses several of the clusters); errors stand as results."""
    out: list[SpreadVerdict | BaseException] = []
    for s in scenarios:
        try:
            v: SpreadVerdict | BaseException = run_spread(s, clusters=clusters, kube=kube, catalog=catalog,
                                                          namespace=namespace, workdir=workdir, timeout=timeout)
        except Exception as e:                       # reported with the scenario, the others go on
            v = e
        out.append(v)
        if done is not None:
            done(s, v)
    return out
