"""`placer clusters`: what each cluster offers right now (live and simulated)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import InputError
from ..fleet import Cluster
from ..inventory import ClusterSummary, summarize
from ..kube import list_contexts
from .common import app, err, out, run


class ClustersOutput(str, Enum):
    table = "table"
    json = "json"


@app.command()
def clusters(
    clusters_file: Optional[str] = typer.Option(
        None, "--clusters", envvar="PLACER_CLUSTERS",
        help="Clusters file. Default: ./clusters.yaml, else every kubeconfig context, "
             "else the bundled example fleet."),
    kubeconfig: Optional[str] = typer.Option(
        None, "--kubeconfig", help="Kubeconfig file(s), ':'-separated. Default: $KUBECONFIG."),
    output: ClustersOutput = typer.Option(ClustersOutput.table, "-o", "--output"),
) -> None:
    """Per cluster: reachable or why not, nodes ready/total, GPUs allocatable/free,
    the largest free GPU block on one node, GPU products."""
    summaries = run(lambda: cluster_summaries(clusters_file, kubeconfig))
    if output is ClustersOutput.json:
        out.print_json(json.dumps({"clusters": [s.to_json() for s in summaries]}))
    else:
        out.print(render_table(summaries))


def cluster_summaries(clusters_file: str | None, kubeconfig: str | None) -> list[ClusterSummary]:
    """Live clusters inventoried concurrently, simulated ones from the file, in file order."""
    entries = _entries(clusters_file, kubeconfig)
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


def _entries(clusters_file: str | None, kubeconfig: str | None) -> list[Any]:
    """The clusters file (--clusters, $PLACER_CLUSTERS, ./clusters.yaml); else every
    kubeconfig context; with neither, the bundled example fleet, as `placer plan` does."""
    from ..clusters_file import DEFAULT_NAME, context_entry, load_clusters

    if clusters_file or (Path.cwd() / DEFAULT_NAME).is_file():
        return list(load_clusters(clusters_file).clusters)
    try:
        names, _ = list_contexts(kubeconfig)
    except InputError:
        if kubeconfig:                           # asked for explicitly: its error stands
            raise
        names = []
    if names:
        return [context_entry(n) for n in names]
    loaded = load_clusters(None)
    err.print(f"no kubeconfig contexts; using {loaded.description}", markup=False, highlight=False)
    return list(loaded.clusters)


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
