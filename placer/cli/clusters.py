"""`placer clusters`: what each cluster offers right now (live and simulated)."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from placer.cli.common import app, err, out, run
from placer.cli.output import OUTPUT_HELP, emit, parse_output
from placer.cli.targets import all_contexts_option, clusters_option, context_option, kubeconfig_option, open_ctx
from placer.fleetview.inventory import ClusterSummary
from placer.model.selectors import format_labels

if TYPE_CHECKING:                 # placer.ops.clusters brings the Kubernetes client: loaded when used
    from placer.ops.clusters import ClustersResult


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
    result = run(lambda: _snapshots(clusters_file, kubeconfig, context, all_contexts))
    summaries = result.summaries
    if fmt.tabular:
        out.print(render_table(summaries, wide=fmt.wide))
    else:
        emit({"clusters": [s.to_json() for s in summaries]}, fmt, names=[f"cluster/{s.name}" for s in summaries])
    if svg:
        from placer.cli.picture import fleet_svg
        run(lambda: fleet_svg(result.fleet, None, svg, title="placer clusters"))
        err.print(f"wrote {escape(svg)}", style="dim")


def _snapshots(clusters_file: str | None, kubeconfig: str | None, contexts: List[str],
               all_contexts: bool) -> ClustersResult:
    from placer.ops.clusters import cluster_snapshots  # brings the Kubernetes client: loaded when run

    with open_ctx(clusters_file, kubeconfig, contexts, all_contexts) as ctx:
        return cluster_snapshots(ctx)


def render_table(summaries: list[ClusterSummary], *, wide: bool = False) -> Table:
    t = Table(box=None, pad_edge=False)
    cols = ["CLUSTER", "SOURCE", "STATUS", "NODES", "GPUS FREE/ALLOC", "LARGEST BLOCK", "RESERVED", "GPU PRODUCTS"]
    wide_cols = ["PODS FREE/ALLOC", "PODS FREE ON GPU NODES", "CONTEXT", "LABELS", "TOPOLOGY"]
    for col in cols + (wide_cols if wide else []):
        t.add_column(col, no_wrap=col != "STATUS")
    for s in summaries:
        slots = [_slots(s.pods_free, s.pods_allocatable), _slots(s.pods_free_where_gpus_free)] if s.reachable \
            else ["-", "-"]
        extra = [*slots, s.context or "-", escape(format_labels(s.labels)) or "-",
                 escape(",".join(s.topology)) or "-"] if wide else []
        if not s.reachable:
            t.add_row(s.name, s.source, f"[red]{escape(s.error or '')}[/red]", "-", "-", "-", "-", "-", *extra)
            continue
        t.add_row(s.name, s.source, "[green]ok[/green]", f"{s.nodes_ready}/{s.nodes_total}",
                  f"{s.gpus_free}/{s.gpus_allocatable}", str(s.largest_free_block),
                  str(s.reserved_gpus), escape(", ".join(s.gpu_products)) or "-", *extra)
    return t


def _slots(free: int | None, allocatable: int | None = None) -> str:
    """Pod slots: `-` when the nodes declare none (no limit)."""
    if free is None:
        return "-"
    return f"{free}/{allocatable}" if allocatable is not None else str(free)
