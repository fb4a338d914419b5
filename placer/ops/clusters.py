"""`placer clusters`: what each cluster offers right now, live and simulated.

The fleet is read by `fleetview.read_fleet`, the one Fleet builder `plan` and `submit`
use too (live snapshots with the capacity promised to placer's workloads, simulated
clusters from the file).
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.fleetview.inventory import ClusterSummary, summarize
from placer.fleetview.view import read_fleet
from placer.model.fleet import Cluster, Fleet
from placer.ops.context import Context

LIVE, SIMULATED_SOURCE = "live", "simulated"


@dataclass(frozen=True)
class ClustersResult:
    fleet: Fleet
    sources: tuple[str, ...]                     # per cluster of `fleet`: live | simulated

    @property
    def snapshots(self) -> list[tuple[Cluster, str]]:
        return list(zip(self.fleet.clusters, self.sources))

    @property
    def summaries(self) -> list[ClusterSummary]:
        return [summarize(c, source) for c, source in self.snapshots]


def cluster_snapshots(ctx: Context) -> ClustersResult:
    """Each cluster's snapshot and whether it is live or simulated, in file order."""
    view = read_fleet(ctx.entries, ctx.kube, ctx.catalog, gpu_resources=ctx.gpu_resources)
    return ClustersResult(view.fleet, tuple(LIVE if e.context else SIMULATED_SOURCE for e in ctx.entries))
