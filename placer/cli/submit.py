"""`placer submit`: plan files against the live fleet and create each placed group there."""

from __future__ import annotations

import sys
from typing import Any, List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import InputError
from ..submit import DEFAULT_TIME_LIMIT, SubmitResult
from .common import CATALOG_HELP, FILES_HELP, GPU_HELP, app, check_output, emit, err, gpu_resources, out, run


@app.command()
def submit(
    files: List[str] = typer.Option(..., "-f", "--filename", help=FILES_HELP),
    clusters_file: Optional[str] = typer.Option(
        None, "--clusters", envvar="PLACER_CLUSTERS",
        help="Clusters file. Default: every context of the kubeconfig."),
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help="Kubeconfig file(s), ':'-separated."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; create nothing."),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Place everything on this cluster."),
    time_limit: float = typer.Option(DEFAULT_TIME_LIMIT, "--time-limit", help="Solver time limit, seconds."),
    skip_unreachable: bool = typer.Option(
        False, "--skip-unreachable",
        help="Place on the reachable clusters even when some cannot be checked for copies already placed."),
    output: str = typer.Option("table", "-o", "--output", help="table or json"),
    catalog: List[str] = typer.Option([], "--catalog", help=CATALOG_HELP),
    gpu: List[str] = typer.Option([], "--gpu-resource", help=GPU_HELP),
) -> None:
    """Plan the files' workloads against the live clusters (and what is already promised
    there), then create each placed group in its cluster. Exit 3 when something is unplaced,
    1 when an API call failed (nothing of that group is left behind), 2 on bad input."""
    def go() -> SubmitResult:
        from ..catalog import load_catalog
        from ..kube import Kube
        from ..manifests import expand_paths
        from ..registry import with_fleet_definitions
        from ..submit import check_cluster
        from ..submit import submit as do_submit

        check_output(output, ("table", "json"))
        if time_limit <= 0:
            raise InputError(f"--time-limit {time_limit}: must be positive")
        expand_paths(files)                                # bad paths fail before the slow parts
        entries = cluster_entries(clusters_file, kubeconfig)
        check_cluster(cluster, entries)
        kube = Kube(kubeconfig)
        try:
            cat = with_fleet_definitions(load_catalog(catalog), kube, [e.context for e in entries if e.context],
                                         _warn)
            return do_submit(files, entries=entries, catalog=cat, kube=kube,
                             dry_run=dry_run, cluster=cluster, time_limit=time_limit,
                             skip_unreachable=skip_unreachable, gpu_resources=gpu_resources(gpu),
                             progress=_progress if output == "table" and sys.stderr.isatty() else None)
        finally:
            kube.close()
    result = run(go)
    if output == "json":
        emit(result.to_dict(), "json")
    else:
        render(result)
    raise typer.Exit(result.exit_code)


def cluster_entries(clusters_file: str | None, kubeconfig: str | None) -> list[Any]:
    """Entries of the clusters file (--clusters, $PLACER_CLUSTERS, ./clusters.yaml), else
    one per kubeconfig context (the bundled simulated fleet has nothing to create into)."""
    from pathlib import Path

    from ..clusters_file import DEFAULT_NAME, context_entry, load_clusters
    from ..kube import list_contexts

    if clusters_file or (Path.cwd() / DEFAULT_NAME).is_file():
        return list(load_clusters(clusters_file).clusters)

    names, _ = list_contexts(kubeconfig)
    return [context_entry(n) for n in names]


def _warn(message: str) -> None:
    err.print(f"warning: {message}", markup=False, highlight=False)


def _progress(message: str) -> None:
    err.print(f"[dim]{escape(message)}[/dim]")


def render(result: SubmitResult) -> None:
    t = Table(box=None, pad_edge=False)
    for col in ("WORKLOAD", "KIND", "GPUS", "CLUSTER", "RESULT"):
        t.add_column(col, no_wrap=col != "RESULT")
    created = {(c.group, c.cluster) for c in result.created}
    failed = {f.group: f for f in result.failed}
    plan = result.plan
    for p in plan.placements if plan else ():
        if result.dry_run:
            status = "[cyan]would create[/cyan]"
        elif (p.group, p.cluster) in created:
            status = "[green]created[/green]"
        else:
            f = failed.get(p.group)
            status = f"[red]failed: {escape(f.error) if f else 'not applied'}[/red]"
        nodes = ", ".join(sorted(p.nodes))
        t.add_row(p.workload, p.kind, str(p.gpus), p.cluster, f"{status} [dim]({escape(nodes)})[/dim]")
    for a in result.already:
        t.add_row(a.workload.split("/", 2)[0] + "/" + a.workload.split("/", 2)[-1], a.kind, "-", a.cluster,
                  f"[yellow]already placed[/yellow]{' by plan ' + escape(a.plan) if a.plan else ''}")
    for u in plan.unplaced if plan else ():
        reasons = "; ".join(f"{c}: {r.render()}" for c, r in u.reasons.items())
        t.add_row(u.workload, u.kind, str(u.gpus), "-", f"[red]unplaced[/red]: {escape(reasons)}")
    for f in result.failed:
        if f.cluster == "-":
            t.add_row(", ".join(f.workloads), "-", "-", "-", f"[red]refused: {escape(f.error)}[/red]")
    out.print(t)
    if plan and plan.overcommitted:
        for key, why in plan.overcommitted.items():
            err.print(f"warning: promised {escape(key)} {escape(why)}")
    for name, why in result.unreachable.items():
        err.print(f"warning: {name}: {escape(why)} (left out)")
    head = "dry run, nothing created" if result.dry_run else f"plan {result.plan_id}"
    n_created = len(result.created)
    n_unplaced = len(plan.unplaced) if plan else 0
    out.print(f"{head}: {n_created} created, {len(result.already)} already placed, "
              f"{n_unplaced} unplaced, {len(result.failed)} failed")
