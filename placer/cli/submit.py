"""`placer submit`: plan files against the live fleet and create each placed group there."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import InputError
from ..submit import DEFAULT_TIME_LIMIT, SubmitResult
from .targets import all_contexts_option, clusters_option, context_option, kubeconfig_option, resolve
from .common import CATALOG_HELP, FILES_HELP, GPU_HELP, app, check_output, emit, err, gpu_resources, out, run


@app.command()
def submit(
    files: List[str] = typer.Option(..., "-f", "--filename", help=FILES_HELP),
    clusters_file: Optional[str] = clusters_option(),
    kubeconfig: Optional[str] = kubeconfig_option(),
    context: List[str] = context_option(),
    all_contexts: bool = all_contexts_option(),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; create nothing."),
    replace: bool = typer.Option(False, "--replace", help="Move a placed workload whose new version no longer "
                                 "fits where it lives: delete it there and place it anew."),
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
    there), then create each placed group in its cluster. A workload already placed is
    applied where it lives (configured / unchanged). Exit 3 when something is unplaced or
    a new version no longer fits, 1 when an API call failed (nothing of that group is left
    behind), 2 on bad input."""
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
        entries = resolve(clusters_file, kubeconfig, context, all_contexts).clusters
        check_cluster(cluster, entries)
        kube = Kube(kubeconfig)
        try:
            cat = with_fleet_definitions(load_catalog(catalog), kube, [e.context for e in entries if e.context],
                                         _warn)
            return do_submit(files, entries=entries, catalog=cat, kube=kube,
                             dry_run=dry_run, cluster=cluster, time_limit=time_limit, replace=replace,
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
    updated = {u.workload: u for u in result.updated}
    plan = result.plan
    suffix = " (dry run)" if result.dry_run else ""
    for p in plan.placements if plan else ():
        u = updated.get(str(p.ref)) if p.ref else None
        if u is not None:
            continue
        if result.dry_run:
            status = "[cyan]would create[/cyan]"
        elif (p.group, p.cluster) in created:
            status = "[green]created[/green]"
        else:
            f = failed.get(p.group)
            status = f"[red]failed: {escape(f.error) if f else 'not applied'}[/red]"
        nodes = ", ".join(sorted(p.nodes))
        t.add_row(escape(p.workload), p.kind, str(p.gpus), p.cluster, f"{status} [dim]({escape(nodes)})[/dim]")
    for u in result.updated:
        colour = {"unchanged": "dim", "configured": "green", "replaced": "green", "kept": "yellow"}[u.result]
        text = f"[{colour}]{u.result}{suffix}[/{colour}]"
        if u.previous:
            text += f" (from {escape(u.previous)})"
        if u.why:
            text += f": {escape(u.why)}"
        t.add_row(escape(_short(u.workload)), u.kind, "-", u.cluster, text)
    for a in result.already:
        if a.workload not in updated:              # placed before, in a group that gained members
            t.add_row(escape(_short(a.workload)), a.kind, "-", a.cluster,
                      f"[yellow]already placed[/yellow]{' by plan ' + escape(a.plan) if a.plan else ''}")
    for u in plan.unplaced if plan else ():
        if u.ref is not None and str(u.ref) in updated:
            continue
        reasons = "; ".join(f"{c}: {r.render()}" for c, r in u.reasons.items())
        t.add_row(escape(u.workload), u.kind, str(u.gpus), "-", f"[red]unplaced[/red]: {escape(reasons)}")
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
    n_unplaced = sum(1 for u in plan.unplaced if not (u.ref is not None and str(u.ref) in updated)) if plan else 0
    counts = {r: sum(1 for u in result.updated if u.result == r) for r in ("configured", "unchanged", "replaced", "kept")}
    out.print(f"{head}: {len(result.created)} created, {counts['configured']} configured, "
              f"{counts['unchanged']} unchanged, {counts['replaced']} replaced, {n_unplaced + counts['kept']} unplaced, "
              f"{len(result.failed)} failed")


def _short(ref_text: str) -> str:
    """`ns/name` of a WorkloadRef's text `ns/Kind.group/name`."""
    ns, _, rest = ref_text.partition("/")
    return f"{ns}/{rest.partition('/')[2]}"
