"""`placer clusters`: what each cluster offers right now (live and simulated)."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..fleet import Cluster
from ..inventory import ClusterSummary, summarize
from .common import app, err, out, run
from .targets import all_contexts_option, clusters_option, context_option, kubeconfig_option, resolve


class ClustersOutput(str, Enum):
    table = "table"
    json = "json"


@app.command()
def clusters(
    clusters_file: Optional[str] = clusters_option(),
    kubeconfig: Optional[str] = kubeconfig_option(),
    context: List[str] = context_option(),
    all_contexts: bool = all_contexts_option(),
    output: ClustersOutput = typer.Option(ClustersOutput.table, "-o", "--output"),
) -> None:
    """Per cluster: reachable or why not, nodes ready/total, GPUs allocatable/free,
    the largest free GPU block on one node, GPU products."""
    summaries = run(lambda: cluster_summaries(clusters_file, kubeconfig, context, all_contexts))
    if output is ClustersOutput.json:
        out.print_json(json.dumps({"clusters": [s.to_json() for s in summaries]}))
    else:
        out.print(render_table(summaries))


def cluster_summaries(clusters_file: str | None, kubeconfig: str | None, contexts: List[str] | None = None,
                      all_contexts: bool = False) -> list[ClusterSummary]:
    """Live clusters inventoried concurrently, simulated ones from the file, in file order."""
    entries = resolve(clusters_file, kubeconfig, contexts, all_contexts).clusters
    live = _live_with_reserved(entries, kubeconfig)
    result = []
    for e in entries:
        if e.context:
            result.append(summarize(live[e.name], "live"))
        else:
            result.append(summarize(_simulated(e), "simulated"))
    return result


def _live_with_reserved(entries: list[Any], kubeconfig: str | None) -> dict[str, Cluster]:
    """Live snapshots with `reserved` filled in: capacity promised to workloads placer
    placed whose pods are not all bound yet (read in the same pass as the inventory)."""
    from ..actuate import read_live
    from ..catalog import load_catalog
    from ..kube import Kube
    from ..registry import with_fleet_definitions

    kube = Kube(kubeconfig)
    try:
        catalog = with_fleet_definitions(load_catalog(), kube, [e.context for e in entries if e.context],
                                         lambda m: err.print(f"warning: {m}", markup=False, highlight=False))
        return dict(read_live(kube, entries, catalog).clusters)
    finally:
        kube.close()


def _simulated(entry: Any) -> Cluster:
    from ..clusters_file import simulated_cluster

    return simulated_cluster(entry)


def render_table(summaries: list[ClusterSummary]) -> Table:
    t = Table(box=None, pad_edge=False)
    for col in ("CLUSTER", "SOURCE", "STATUS", "NODES", "GPUS FREE/ALLOC", "LARGEST BLOCK",
                "RESERVED", "GPU PRODUCTS"):
        t.add_column(col, no_wrap=col != "STATUS")
    for s in summaries:
        if not s.reachable:
            t.add_row(s.name, s.source, f"[red]{escape(s.error or '')}[/red]", "-", "-", "-", "-", "-")
            continue
        t.add_row(s.name, s.source, "[green]ok[/green]", f"{s.nodes_ready}/{s.nodes_total}",
                  f"{s.gpus_free}/{s.gpus_allocatable}", str(s.largest_free_block),
                  str(s.reserved_gpus), escape(", ".join(s.gpu_products)) or "-")
    return t
