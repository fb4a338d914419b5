"""`placer delete`: remove placed workloads from whichever cluster holds them."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

import typer

from placer.cli.common import CATALOG_HELP, FILES_HELP, app, err, out, run, warn
from placer.cli.output import Output, kubectl_name, parse_output
from placer.cli.output import emit as emit_as
from placer.cli.targets import all_contexts_option, clusters_option, context_option, kubeconfig_option, open_ctx

if TYPE_CHECKING:                 # placer.ops.delete brings the Kubernetes client: loaded when used
    from placer.ops.delete import DeleteResult


@app.command()
def delete(
    what: Optional[str] = typer.Argument(None, metavar="[TYPE/NAME]", help="kind (or plural, short name)/name"),
    files: List[str] = typer.Option([], "-f", "--filename", help=FILES_HELP),
    namespace: Optional[str] = typer.Option(None, "-n", "--namespace", help="Namespace (default: default)."),
    ignore_not_found: bool = typer.Option(False, "--ignore-not-found", help="Exit 0 when nothing was placed."),
    output: str = typer.Option("table", "-o", "--output", help="table, json, yaml, name or jsonpath=TEMPLATE"),
    clusters_file: Optional[str] = clusters_option(),
    kubeconfig: Optional[str] = kubeconfig_option(),
    context: List[str] = context_option(),
    all_contexts: bool = all_contexts_option(),
    catalog: List[str] = typer.Option([], "--catalog", help=CATALOG_HELP),
) -> None:
    """Delete placed workloads (and their group's companions, with the last of the group)
    from the clusters that hold them. Exit 1 when one was not found (see --ignore-not-found)."""
    def go() -> DeleteResult:
        from placer.ops.delete import DeleteRequest
        from placer.ops.delete import delete as delete_workloads  # brings the Kubernetes client: loaded when run

        request = DeleteRequest(what, tuple(files), namespace)
        request.check()
        with open_ctx(clusters_file, kubeconfig, context, all_contexts, catalog) as ctx:
            return delete_workloads(ctx, request)

    fmt = run(lambda: parse_output(output, ("table", "json", "yaml", "name", "jsonpath")))
    result = run(go)
    render(result, fmt, ignore_not_found=ignore_not_found)
    raise typer.Exit(result.exit_code(ignore_not_found))


def render(result: DeleteResult, fmt: Output, *, ignore_not_found: bool) -> None:
    """What was deleted on stdout (as kubectl: `-o name` gives kind/name); the rest on stderr."""
    for name, why in result.unreachable.items():
        warn(f"{name}: {why} (not checked)")
    if fmt.format in ("json", "yaml", "jsonpath"):
        emit_as(result.to_dict(), fmt)
    elif fmt.format == "name":
        for d in result.deleted:
            out.print(kubectl_name(d.ref), markup=False, highlight=False)
    else:
        for d in result.deleted:
            out.print(f"{d.ref} deleted from {d.cluster}", markup=False, highlight=False)
    for ref, why in result.refused.items():
        err.print(f"error: {ref}: {why}", markup=False, highlight=False)
    for ref in result.not_found:
        err.print(f"{'warning' if ignore_not_found else 'error'}: {ref}: not placed on any reachable cluster",
                  markup=False, highlight=False)
