"""`placer submit`: plan files against the live fleet and create each placed group there."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Callable, List, Mapping, Optional, Sequence

import typer
import yaml
from rich.markup import escape
from rich.text import Text

from placer.cli.common import CATALOG_HELP, FILES_HELP, GPU_HELP, app, err, gpu_resources, out, run, warn
from placer.cli.output import OUTPUT_HELP, Output, emit, emit_documents, kind_of_ref, kind_text, parse_output
from placer.cli.targets import all_contexts_option, clusters_option, context_option, kubeconfig_option, open_ctx
from placer.model.plan import Unplaced
from placer.model.words import plural
from placer.ops.checks import DEFAULT_TIME_LIMIT, TIME_LIMIT_HELP, dry_run_mode  # the solver's default, as for plan
from placer.ops.requests import SubmitRequest

if TYPE_CHECKING:                 # placer.ops.submit brings the Kubernetes client and the solver: loaded when used
    from placer.ops.context import Context
    from placer.ops.preview import Preview
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
    time_limit: Optional[float] = typer.Option(DEFAULT_TIME_LIMIT, "--time-limit", help=TIME_LIMIT_HELP),
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
    fmt = run(lambda: parse_output(output))
    mode = run(lambda: dry_run_mode(dry_run))
    request = SubmitRequest(tuple(files), dry_run=mode is not None, cluster=cluster, time_limit=time_limit,
                            skip_unreachable=skip_unreachable, replace=replace, namespace=namespace)
    opener = partial(open_ctx, clusters_file, kubeconfig, context, all_contexts, catalog)
    # a server dry run asks the API servers whatever the output (the table shows their answers)
    preview_mode = mode if not fmt.tabular or mode == "server" else None
    result, shown = run(lambda: _submit(request, opener, gpu, preview_mode,
                                        _progress if fmt.tabular and sys.stderr.isatty() else None))
    if shown is not None and not fmt.tabular:
        raise typer.Exit(run(lambda: show_preview(result, shown, fmt)))
    if fmt.tabular:
        render(result, wide=fmt.wide, shown=shown)
    else:
        emit(result.to_dict(), fmt, names=[_name_of(o) for c in result.created for o in c.objects])
    if result.interrupted:
        err.print(interrupted_line(result), markup=False, highlight=False)
    raise typer.Exit(result.exit_code if shown is None or shown.ok else 1)


def _submit(request: SubmitRequest, opener: Callable[..., Context], gpu: list[str], preview_mode: str | None,
            progress: Callable[[str], None] | None) -> tuple[SubmitResult, Preview | None]:
    """The submit on one Context, and (`preview_mode`) the objects its dry run would create."""
    from placer.ops.preview import preview  # the client and the solver: loaded when the command runs
    from placer.ops.submit import submit as submit_workloads

    request.check()                                    # bad numbers and paths fail before the slow parts
    with opener(gpu=gpu_resources(gpu), check=request.check_clusters) as ctx:
        try:
            result = submit_workloads(ctx, request, progress=progress)
        except KeyboardInterrupt:     # while reading and planning (once creating, submit stops cleanly)
            err.print("interrupted before anything was created: nothing created", markup=False, highlight=False)
            raise
        return result, (preview(ctx, result, preview_mode) if preview_mode else None)


def show_preview(result: SubmitResult, shown: Preview, fmt: Output) -> int:
    """`--dry-run[=client|server] -o yaml|json|name`: the objects per cluster, exactly as they
    would be created (server: as the API server answered the dry run): YAML documents after
    a `# cluster:` line; in JSON, the submit report with `objects: {cluster: [...]}`. The exit code."""
    if fmt.format == "yaml":
        for cluster, objs in shown.objects.items():
            for o in objs:
                sys.stdout.write(f"---\n# cluster: {cluster}\n" + yaml.safe_dump(o, sort_keys=False))
    elif fmt.format in ("json", "jsonpath"):          # the submit report, with the objects per cluster
        emit({**result.to_dict(), "objects": {c: list(objs) for c, objs in shown.objects.items()}}, fmt)
    else:
        emit_documents([o for objs in shown.objects.values() for o in objs], fmt)
    _server_answers(shown)
    for u in result.plan.unplaced if result.plan else ():
        first = next(iter(u.reasons.items()), None)
        warn(f"{u.workload} unplaced" + (f": {first[0]}: {first[1].render()}" if first else ""))
    return 1 if not shown.ok else result.exit_code


def _server_answers(shown: Preview) -> None:
    """On stderr: the clusters a server dry run could not ask, and every object refused."""
    for cluster, why in shown.not_validated.items():
        warn(f"{cluster}: {why}; objects not validated")
    for cluster, refused in shown.refused.items():
        for ref, why in refused.items():
            err.print(f"error: {cluster}: {ref}: {why}", markup=False, highlight=False)


def _name_of(ref: str) -> str:
    """`Kind ns/name` -> kubectl's `kind/name`."""
    kind, _, where = ref.partition(" ")
    return f"{kind.lower()}/{where.rpartition('/')[2]}"


def _progress(message: str) -> None:
    err.print(f"[dim]{escape(message)}[/dim]")


def render(result: SubmitResult, *, wide: bool = False, shown: Preview | None = None) -> None:
    """The table of what happened to each workload, the warnings, and the counts line;
    `shown`: a server dry run's answers (a workload the server refused says so)."""
    out.print(render_table(result, width=out.width, wide=wide, refused=shown.refused if shown is not None else None))
    plan = result.plan
    for key, why in (plan.overcommitted if plan else {}).items():
        err.print(f"warning: promised {escape(key)} {escape(why)}")
    for name, why in result.unreachable.items():
        err.print(f"warning: {name}: {escape(why)} (left out)")
    out.print(summary_line(result, {u.workload for u in result.updated}))
    if shown is not None:
        _server_answers(shown)


@dataclass(frozen=True)
class Row:
    """One workload's line: the short RESULT in its colour, the details (nodes, reasons,
    errors) on their own indented lines under it, wrapped to the terminal as plan's are."""

    workload: str
    kind: str
    gpus: str
    cluster: str
    result: str
    style: str
    details: tuple[str, ...] = ()


HEAD = ("WORKLOAD", "KIND", "GPUS", "CLUSTER", "RESULT")


def render_table(result: SubmitResult, *, width: int | None = None, wide: bool = False,
                 refused: Mapping[str, Mapping[str, str]] | None = None) -> Text:
    """`wide`: also the nodes each placed workload's pods go to; `refused`: per cluster, the
    objects a server dry run refused (`Kind ns/name` -> why)."""
    updated = {u.workload for u in result.updated}
    rows = [*_placement_rows(result, updated, wide, refused), *_updated_rows(result), *_already_rows(result, updated),
            *_unplaced_rows(result, updated), *_refused_rows(result)]
    cells = [HEAD] + [(r.workload, r.kind, r.gpus, r.cluster) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    width = max(width or 200, 40)
    text = Text(no_wrap=False)
    text.append(_line(HEAD[:4], widths) + "   " + HEAD[4] + "\n", style="bold")
    for r in rows:
        text.append(_line((r.workload, r.kind, r.gpus, r.cluster), widths) + "   ")
        text.append(r.result + "\n", style=r.style)
        for line in r.details:
            text.append(textwrap.fill(line, width=width, initial_indent="    ", subsequent_indent="      ",
                                      break_on_hyphens=False) + "\n", style="dim" if line.startswith("on ") else None)
    return text


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "   ".join(c.ljust(w) for c, w in zip(cells, widths))


def _placement_rows(result: SubmitResult, updated: set[str], wide: bool = False,
                    refused: Mapping[str, Mapping[str, str]] | None = None) -> list[Row]:
    """Workloads placed by this submit (new ones: those placed before have their own rows)."""
    created = {(c.group, c.cluster) for c in result.created}
    failed = {f.group: f for f in result.failed}
    rows = []
    for p in result.plan.placements if result.plan else ():
        if p.ref and str(p.ref) in updated:
            continue
        details = [f"on {', '.join(sorted(p.nodes))}"] if wide else []
        why = (refused or {}).get(p.cluster, {}).get(f"{p.kind} {p.workload}")
        if result.dry_run and why:
            status, style = "refused by the API server", "red"
            details.insert(0, why)
        elif result.dry_run:
            status, style = "would create", "cyan"
        elif (p.group, p.cluster) in created:
            status, style = "created", "green"
        elif p.group not in failed and result.interrupted:
            status, style = "not created (interrupted)", "yellow"
        else:
            f = failed.get(p.group)
            status, style = "failed", "red"
            details.insert(0, f.error if f else "not applied")
        rows.append(Row(p.workload, kind_text(p.kind, p.ref.group if p.ref else None), str(p.gpus), p.cluster,
                        status, style, tuple(details)))
    return rows


UPDATE_COLOURS = {"unchanged": "dim", "configured": "green", "replaced": "green", "kept": "yellow"}


def _updated_rows(result: SubmitResult) -> list[Row]:
    suffix = " (dry run)" if result.dry_run else ""
    rows = []
    for u in result.updated:
        text = u.result + suffix + (f" (from {u.previous})" if u.previous else "")
        rows.append(Row(_short(u.workload), kind_of_ref(u.kind, u.workload), str(u.gpus), u.cluster, text,
                        UPDATE_COLOURS[u.result], (u.why,) if u.why else ()))
    return rows


def _already_rows(result: SubmitResult, updated: set[str]) -> list[Row]:
    """Placed before, in a group that gained members (so not applied again)."""
    return [Row(_short(a.workload), kind_of_ref(a.kind, a.workload), "-", a.cluster,
                f"already placed{' by plan ' + a.plan if a.plan else ''}", "yellow")
            for a in result.already if a.workload not in updated]


def _unplaced_rows(result: SubmitResult, updated: set[str]) -> list[Row]:
    return [Row(un.workload, kind_text(un.kind, un.ref.group if un.ref else None), str(un.gpus), "-", "unplaced",
                "red", tuple(f"{c}: {r.render()}" for c, r in un.reasons.items()))
            for un in _unplaced(result, updated)]


def _unplaced(result: SubmitResult, updated: set[str]) -> list[Unplaced]:
    """The plan's unplaced workloads, but for new versions of placed ones (kept: their own rows)."""
    return [u for u in (result.plan.unplaced if result.plan else ())
            if not (u.ref is not None and str(u.ref) in updated)]


def _refused_rows(result: SubmitResult) -> list[Row]:
    return [Row(", ".join(f.workloads), "-", "-", "-", "refused", "red", (f.error,))
            for f in result.failed if f.cluster == "-"]


def summary_line(result: SubmitResult, updated: set[str]) -> str:
    """The counts; a `kept` workload (its new version no longer fits where it lives) is
    counted as kept, not as unplaced: it stays placed and running."""
    head = "dry run, nothing created" if result.dry_run else f"plan {result.plan_id}"
    if result.interrupted:
        head += " (interrupted)"
    counts = {r: sum(1 for u in result.updated if u.result == r) for r in UPDATE_COLOURS}
    return (f"{head}: {len(result.created)} created, {counts['configured']} configured, "
            f"{counts['unchanged']} unchanged, {counts['replaced']} replaced, {counts['kept']} kept, "
            f"{len(_unplaced(result, updated))} unplaced, {len(result.failed)} failed")


def interrupted_line(result: SubmitResult) -> str:
    """What a Ctrl-C left: the groups created, those not, and that none is half applied."""
    placements = result.plan.placements if result.plan else ()
    created = {c.group for c in result.created}
    failed = {f.group for f in result.failed}
    left = {p.group for p in placements} - created - failed
    line = (f"interrupted: {plural(len(created), 'group')} created, {len(left)} not created"
            f"{', ' + str(len(failed)) + ' failed' if failed else ''}; nothing is half-applied (the groups in "
            "flight were finished or removed)")
    names = [p.workload for p in placements if p.group in left]
    return line + (f"; not created: {', '.join(names)}" if names else "")


def _short(ref_text: str) -> str:
    """`ns/name` of a WorkloadRef's text `ns/Kind.group/name`."""
    ns, _, rest = ref_text.partition("/")
    return f"{ns}/{rest.partition('/')[2]}"
