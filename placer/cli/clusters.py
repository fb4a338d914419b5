"""`placer clusters`: what each cluster offers right now (live and simulated)."""

from __future__ import annotations

from typing import Any, List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from placer.cli.common import app, err, out, run
from placer.cli.output import OUTPUT_HELP, emit, parse_output
from placer.cli.targets import all_contexts_option, clusters_option, context_option, kubeconfig_option, resolve
from placer.fleetview.inventory import ClusterSummary, summarize
from placer.model.fleet import Cluster
from placer.model.selectors import format_labels


@app.command()
def clusters(
    clusters_file: Optional[str] = clusters_option(),
    kubeconfig: Optional[str] = kubeconfig_option(),
    context: List[str] = context_option(),
    all_contexts: bool = all_contexts_option(),
    output: str = typer.Option("table", "-o", "--output", help=OUTPUT_HELP),
    svg: Optional[str] = typer.Option(None, "--svg", help="Also draw each cluster's nodes and GPUs as an SVG file."),
) -> None:
    """Per cluster: reachable or why not, nodes ready/total, GPUs allocatable/free,
    the largest free GPU block on one node, GPU products."""
    fmt = run(lambda: parse_output(output))
    snapshots = run(lambda: cluster_snapshots(clusters_file, kubeconfig, context, all_contexts))
    summaries = [summarize(c, source) for c, source in snapshots]
    if fmt.tabular:
        out.print(render_table(summaries, wide=fmt.wide))
    else:
        emit({"clusters": [s.to_json() for s in summaries]}, fmt, names=[f"cluster/{s.name}" for s in summaries])
    if svg:
        from placer.cli.picture import fleet_svg
        from placer.model.fleet import Fleet
        run(lambda: fleet_svg(Fleet(tuple(c for c, _ in snapshots)), None, svg, title="placer clusters"))
        err.print(f"wrote {escape(svg)}", style="dim")


def cluster_summaries(clusters_file: str | None, kubeconfig: str | None, contexts: List[str] | None = None,
                      all_contexts: bool = False) -> list[ClusterSummary]:
    """Live clusters inventoried concurrently, simulated ones from the file, in file order."""
    return [summarize(c, source) for c, source in cluster_snapshots(clusters_file, kubeconfig, contexts, all_contexts)]


def cluster_snapshots(clusters_file: str | None, kubeconfig: str | None, contexts: List[str] | None = None,
                      all_contexts: bool = False) -> list[tuple[Cluster, str]]:
    """Each cluster's snapshot and whether it is live or simulated, in file order."""
    entries = resolve(clusters_file, kubeconfig, contexts, all_contexts).clusters
    live = _live_with_reserved(entries, kubeconfig) if any(e.context for e in entries) else {}
    return [(live[e.name], "live") if e.context else (_simulated(e), "simulated") for e in entries]


def _live_with_reserved(entries: list[Any], kubeconfig: str | None) -> dict[str, Cluster]:
    """Live snapshots with `reserved` filled in: capacity promised to workloads placer
    placed whose pods are not all bound yet (read in the same pass as the inventory)."""
    from placer.actuate import read_live
    from placer.definitions.catalog import load_catalog
    from placer.fleetview.registry import with_fleet_definitions
    from placer.kube import Kube

    kube = Kube(kubeconfig)
    try:
        catalog = with_fleet_definitions(load_catalog(), kube, [e.context for e in entries if e.context],
                                         lambda m: err.print(f"warning: {m}", markup=False, highlight=False))
        return dict(read_live(kube, entries, catalog).clusters)
    finally:
        kube.close()


def _simulated(entry: Any) -> Cluster:
    from placer.inputs.clusters_file import simulated_cluster

    return simulated_cluster(entry)


def render_table(summaries: list[ClusterSummary], *, wide: bool = False) -> Table:
    t = Table(box=None, pad_edge=False)
    cols = ["CLUSTER", "SOURCE", "STATUS", "NODES", "GPUS FREE/ALLOC", "LARGEST BLOCK", "RESERVED", "GPU PRODUCTS"]
    for col in cols + (["CONTEXT", "LABELS", "TOPOLOGY"] if wide else []):
        t.add_column(col, no_wrap=col != "STATUS")
    for s in summaries:
        extra = [s.context or "-", escape(format_labels(s.labels)) or "-",
                 escape(",".join(s.topology)) or "-"] if wide else []
        if not s.reachable:
            t.add_row(s.name, s.source, f"[red]{escape(s.error or '')}[/red]", "-", "-", "-", "-", "-", *extra)
            continue
        t.add_row(s.name, s.source, "[green]ok[/green]", f"{s.nodes_ready}/{s.nodes_total}",
                  f"{s.gpus_free}/{s.gpus_allocatable}", str(s.largest_free_block),
                  str(s.reserved_gpus), escape(", ".join(s.gpu_products)) or "-", *extra)
    return t
