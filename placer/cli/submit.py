"""`placer submit`: plan files against the live fleet and create each placed group there."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, List, Optional

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from placer.cli.common import CATALOG_HELP, FILES_HELP, GPU_HELP, app, err, gpu_resources, out, run
from placer.cli.output import OUTPUT_HELP, Output, emit, emit_documents, parse_output
from placer.cli.targets import all_contexts_option, clusters_option, context_option, kubeconfig_option, resolve
from placer.model.errors import InputError
from placer.ops.checks import DEFAULT_TIME_LIMIT  # the solver's default, as for plan
from placer.ops.preview import dry_run_mode

if TYPE_CHECKING:                 # placer.ops.submit brings the Kubernetes client and the solver: loaded when used
    from placer.ops.submit import SubmitResult


@app.command()
def submit(
    files: List[str] = typer.Option(..., "-f", "--filename", help=FILES_HELP),
    clusters_file: Optional[str] = clusters_option(),
    kubeconfig: Optional[str] = kubeconfig_option(),
    context: List[str] = context_option(),
    all_contexts: bool = all_contexts_option(),
    dry_run: Optional[str] = typer.Option(
        None, "--dry-run", metavar="[=client|server]",
        help="Create nothing. client (default): show the plan, or with -o yaml|json the exact objects per "
             "cluster; server: also have each target API server validate them (server-side dry run)."),
    namespace: Optional[str] = typer.Option(None, "-n", "--namespace",
                                            help="Namespace for objects of the files that name none "
                                                 "(an object in another namespace is an error, as kubectl)."),
    replace: bool = typer.Option(False, "--replace", help="Move a placed workload whose new version no longer "
                                 "fits where it lives: delete it there and place it anew."),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Place everything on this cluster."),
    time_limit: float = typer.Option(DEFAULT_TIME_LIMIT, "--time-limit", help="Solver time limit, seconds."),
    skip_unreachable: bool = typer.Option(
        False, "--skip-unreachable",
        help="Place on the reachable clusters even when some cannot be checked for copies already placed."),
    output: str = typer.Option("table", "-o", "--output", help=OUTPUT_HELP),
    catalog: List[str] = typer.Option([], "--catalog", help=CATALOG_HELP),
    gpu: List[str] = typer.Option([], "--gpu-resource", help=GPU_HELP),
) -> None:
    """Plan the files' workloads against the live clusters (and what is already promised
    there), then create each placed group in its cluster. A workload already placed is
    applied where it lives (configured / unchanged). Exit 3 when something is unplaced or
    a new version no longer fits, 1 when an API call failed (nothing of that group is left
    behind), 2 on bad input."""
    def go() -> SubmitResult:
        from placer.definitions.catalog import load_catalog
        from placer.fleetview.registry import with_fleet_definitions
        from placer.inputs.manifests import expand_paths
        from placer.kube import Kube
        from placer.ops.submit import check_cluster
        from placer.ops.submit import submit as do_submit

        if time_limit <= 0:
            raise InputError(f"--time-limit {time_limit}: must be positive")
        expand_paths(files)                                # bad paths fail before the slow parts
        entries = seen["entries"] = resolve(clusters_file, kubeconfig, context, all_contexts).clusters
        check_cluster(cluster, entries, dry_run=mode is not None)
        kube = Kube(kubeconfig)
        try:
            cat = with_fleet_definitions(load_catalog(catalog), kube, [e.context for e in entries if e.context],
                                         _warn)
            return do_submit(files, entries=entries, catalog=cat, kube=kube,
                             dry_run=mode is not None, cluster=cluster, time_limit=time_limit, replace=replace,
                             namespace=namespace,
                             skip_unreachable=skip_unreachable, gpu_resources=gpu_resources(gpu),
                             progress=_progress if fmt.tabular and sys.stderr.isatty() else None)
        finally:
            kube.close()
    fmt = run(lambda: parse_output(output))
    mode = run(lambda: dry_run_mode(dry_run))
    seen: dict[str, Any] = {}                       # the clusters resolved once, for the preview too
    result = run(go)
    if mode is not None and not fmt.tabular:
        raise typer.Exit(run(lambda: show_preview(result, mode, fmt, seen["entries"], kubeconfig, catalog)))
    if fmt.tabular:
        render(result)
    else:
        emit(result.to_dict(), fmt, names=[_name_of(o) for c in result.created for o in c.objects])
    raise typer.Exit(result.exit_code)


def show_preview(result: SubmitResult, mode: str, fmt: Output, entries: list[Any],
                 kubeconfig: str | None, catalog: list[str]) -> int:
    """`--dry-run[=client|server] -o yaml|json|name`: the objects per cluster, exactly as they
    would be created (server: as the API server answered the dry run): YAML documents after
    a `# cluster:` line; in JSON, the submit report with `objects: {cluster: [...]}`. The exit code."""
    from placer.definitions.catalog import load_catalog
    from placer.kube import Kube
    from placer.ops.preview import Preview, preview_objects, server_dry_run

    objects = preview_objects(result.plan, result.groups, entries, load_catalog(catalog),
                              result.plan_id) if result.plan else {}
    preview = Preview(objects)
    if mode == "server" and objects:
        kube = Kube(kubeconfig)
        try:
            preview = server_dry_run(kube, entries, objects)
        finally:
            kube.close()
    items = [o for objs in preview.objects.values() for o in objs]
    if fmt.format == "yaml":
        for cluster, objs in preview.objects.items():
            for o in objs:
                sys.stdout.write(f"---\n# cluster: {cluster}\n" + yaml.safe_dump(o, sort_keys=False))
    elif fmt.format in ("json", "jsonpath"):          # the submit report, with the objects per cluster
        emit({**result.to_dict(), "objects": {c: list(objs) for c, objs in preview.objects.items()}}, fmt)
    else:
        emit_documents(items, fmt)
    for cluster, why in preview.not_validated.items():
        _warn(f"{cluster}: {why}; objects not validated")
    for cluster, refused in preview.refused.items():
        for ref, why in refused.items():
            err.print(f"error: {cluster}: {ref}: {why}", markup=False, highlight=False)
    for u in result.plan.unplaced if result.plan else ():
        first = next(iter(u.reasons.items()), None)
        _warn(f"{u.workload} unplaced" + (f": {first[0]}: {first[1].render()}" if first else ""))
    return 1 if not preview.ok else result.exit_code


def _name_of(ref: str) -> str:
    """`Kind ns/name` -> kubectl's `kind/name`."""
    kind, _, where = ref.partition(" ")
    return f"{kind.lower()}/{where.rpartition('/')[2]}"


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
    for un in plan.unplaced if plan else ():
        if un.ref is not None and str(un.ref) in updated:
            continue
        reasons = "; ".join(f"{c}: {r.render()}" for c, r in un.reasons.items())
        t.add_row(escape(un.workload), un.kind, str(un.gpus), "-", f"[red]unplaced[/red]: {escape(reasons)}")
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
