"""`placer clusters`: what each cluster offers right now (live and simulated)."""

from __future__ import annotations

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
from .output import OUTPUT_HELP, emit, parse_output


@app.command()
def clusters(
    clusters_file: Optional[str] = typer.Option(
        None, "--clusters", envvar="PLACER_CLUSTERS",
        help="Clusters file. Default: ./clusters.yaml, else every kubeconfig context, "
             "else the bundled example fleet."),
    kubeconfig: Optional[str] = typer.Option(
        None, "--kubeconfig", help="Kubeconfig file(s), ':'-separated. Default: $KUBECONFIG."),
    output: str = typer.Option("table", "-o", "--output", help=OUTPUT_HELP),
    svg: Optional[str] = typer.Option(None, "--svg", help="Also draw each cluster's nodes and GPUs as an SVG file."),
) -> None:
    """Per cluster: reachable or why not, nodes ready/total, GPUs allocatable/free,
    the largest free GPU block on one node, GPU products."""
    fmt = run(lambda: parse_output(output))
    snapshots = run(lambda: cluster_snapshots(clusters_file, kubeconfig))
    summaries = [summarize(c, source) for c, source in snapshots]
    if fmt.tabular:
        out.print(render_table(summaries, wide=fmt.wide))
    else:
        emit({"clusters": [s.to_json() for s in summaries]}, fmt, names=[f"cluster/{s.name}" for s in summaries])
    if svg:
        from ..fleet import Fleet
        from .picture import fleet_svg
        run(lambda: fleet_svg(Fleet(tuple(c for c, _ in snapshots)), None, svg, title="placer clusters"))
        err.print(f"wrote {escape(svg)}", style="dim")


def cluster_summaries(clusters_file: str | None, kubeconfig: str | None) -> list[ClusterSummary]:
    """Live clusters inventoried concurrently, simulated ones from the file, in file order."""
    return [summarize(c, source) for c, source in cluster_snapshots(clusters_file, kubeconfig)]


def cluster_snapshots(clusters_file: str | None, kubeconfig: str | None) -> list[tuple[Cluster, str]]:
    """Each cluster's snapshot and whether it is live or simulated, in file order."""
    entries = _entries(clusters_file, kubeconfig)
    live = _live_with_reserved(entries, kubeconfig) if any(e.context for e in entries) else {}
    return [(live[e.name], "live") if e.context else (_simulated(e), "simulated") for e in entries]


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


def render_table(summaries: list[ClusterSummary], *, wide: bool = False) -> Table:
    t = Table(box=None, pad_edge=False)
    cols = ["CLUSTER", "SOURCE", "STATUS", "NODES", "GPUS FREE/ALLOC", "LARGEST BLOCK", "RESERVED", "GPU PRODUCTS"]
    for col in cols + (["CONTEXT", "LABELS"] if wide else []):
        t.add_column(col, no_wrap=col != "STATUS")
    for s in summaries:
        extra = [s.context or "-", escape(",".join(f"{k}={v}" for k, v in s.labels.items())) or "-"] if wide else []
        if not s.reachable:
            t.add_row(s.name, s.source, f"[red]{escape(s.error or '')}[/red]", "-", "-", "-", "-", "-", *extra)
            continue
        t.add_row(s.name, s.source, "[green]ok[/green]", f"{s.nodes_ready}/{s.nodes_total}",
                  f"{s.gpus_free}/{s.gpus_allocatable}", str(s.largest_free_block),
                  str(s.reserved_gpus), escape(", ".join(s.gpu_products)) or "-", *extra)
    return t
