"""`placer get`: what placer placed across the fleet, one row per workload."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from placer.cli.common import CATALOG_HELP, FILES_HELP, app, err, out, run, warn
from placer.cli.output import OUTPUT_HELP, parse_output
from placer.cli.output import emit as emit_as
from placer.cli.quotas import get_quotas, is_quotas
from placer.cli.targets import all_contexts_option, clusters_option, context_option, kubeconfig_option, open_ctx
from placer.model.errors import InputError
from placer.ops.checks import DEFAULT_TIME_LIMIT

if TYPE_CHECKING:                 # placer.ops.get brings the Kubernetes client: loaded when used
    from placer.ops.get import Row

OUTPUTS = ("table", "wide", "json", "yaml", "name", "jsonpath")


@app.command()
def get(
    what: Optional[str] = typer.Argument(None, metavar="[TYPE[/NAME]]",
                                         help="A kind, plural or short name (optionally .group), and a name."),
    namespace: Optional[str] = typer.Option(None, "-n", "--namespace", help="Namespace (default: default)."),
    all_namespaces: bool = typer.Option(False, "-A", "--all-namespaces", help="Every namespace."),
    selector: Optional[str] = typer.Option(None, "-l", "--selector", help="Label selector on the workloads."),
    output: str = typer.Option("table", "-o", "--output", help=OUTPUT_HELP),
    clusters_file: Optional[str] = clusters_option(),
    kubeconfig: Optional[str] = kubeconfig_option(),
    context: List[str] = context_option(),
    all_contexts: bool = all_contexts_option(),
    catalog: List[str] = typer.Option([], "--catalog", help=CATALOG_HELP),
    files: List[str] = typer.Option([], "-f", "--filename", help="quotas: the workloads planned. " + FILES_HELP),
    time_limit: Optional[float] = typer.Option(DEFAULT_TIME_LIMIT, "--time-limit",
                                               help="quotas: seconds for the plan (default: as for plan)."),
) -> None:
    """What placer placed, on every cluster at once: namespace, name, kind, cluster, GPUs,
    phase, age (wide: nodes and plan). An unreachable cluster is a warning row.
    `placer get quotas -f FILES`: per fleet-wide quota of the clusters file, what it holds
    once the plan of FILES is carried out (nominal, used, borrowed, lent, pending, fair share)."""
    fmt = run(lambda: parse_output(output, OUTPUTS))     # one parser, one error text for every command
    if is_quotas(what):
        get_quotas(files, fmt, namespace=namespace, all_namespaces=all_namespaces, clusters=clusters_file,
                   kubeconfig=kubeconfig, contexts=context, all_contexts=all_contexts, catalog=catalog,
                   time_limit=time_limit)
        return
    if files:
        run(lambda: _refuse("-f applies to `placer get quotas`; `placer get` reads what placer placed"))

    def go() -> list[Row]:
        from placer.ops.get import Query, get_placed  # brings the Kubernetes client: loaded when run

        if namespace and all_namespaces:
            raise InputError("give -n NAMESPACE or -A, not both")
        query = Query.parse(what, namespace=None if all_namespaces else (namespace or "default"),
                            selector=selector, wide=fmt.format in ("wide", "json", "yaml", "jsonpath"))
        with open_ctx(clusters_file, kubeconfig, context, all_contexts, catalog) as ctx:
            return get_placed(ctx, query)

    rows = run(go)
    warnings = [r for r in rows if r.error is not None]
    placed = [r for r in rows if r.error is None]
    for r in warnings:
        warn(f"{r.cluster}: {r.error}")
    if fmt.format in ("json", "yaml", "jsonpath"):
        emit_as({"items": [r.to_dict() for r in placed], "unreachable": {r.cluster: r.error for r in warnings}},
                fmt)
        return
    if fmt.format == "name":
        for r in placed:
            print(r.name_ref)
        return
    render(placed, warnings, all_namespaces=all_namespaces, wide=fmt.wide)
    if not placed and not warnings:
        err.print("No placed workloads found" + ("" if all_namespaces else f" in {namespace or 'default'} namespace")
                  + ".", markup=False, highlight=False)


def _refuse(message: str) -> None:
    raise InputError(message)


def render(rows, warnings, *, all_namespaces: bool, wide: bool) -> None:
    now = datetime.now(timezone.utc)
    cols = (["NAMESPACE"] if all_namespaces else []) + ["NAME", "KIND", "CLUSTER", "GPUS", "PHASE", "AGE"] + \
        (["NODES", "PLAN"] if wide else [])
    t = Table(*cols, box=None, pad_edge=False)
    for r in rows:
        cells = ([r.ref.namespace] if all_namespaces else []) + [
            r.ref.name, r.ref.kind_group, r.cluster, str(r.gpus), r.phase, r.age(now)]
        if wide:
            cells += [",".join(r.nodes) or "<none>", r.plan or "<none>"]
        t.add_row(*(escape(c) for c in cells))
    for r in warnings:
        cells = (["-"] if all_namespaces else []) + ["-", "-", r.cluster, "-",
                                                     f"[yellow]{escape(r.error or '')}[/yellow]", "-"]
        if wide:
            cells += ["-", "-"]
        t.add_row(*cells)
    if rows or warnings:
        out.print(t)
