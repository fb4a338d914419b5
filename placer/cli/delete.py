"""`placer delete`: remove placed workloads from whichever cluster holds them."""

from __future__ import annotations

from typing import List, Optional

import typer

from placer.cli.common import CATALOG_HELP, FILES_HELP, app, err, out, run
from placer.cli.output import emit as emit_as
from placer.cli.output import parse_output
from placer.cli.targets import all_contexts_option, clusters_option, context_option, kubeconfig_option, resolve
from placer.model.errors import InputError


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
    def go():
        from placer.actuate import client_for, find_placed
        from placer.definitions.catalog import load_catalog
        from placer.fleetview.registry import with_fleet_definitions
        from placer.inputs.manifests import expand_paths
        from placer.kube import Kube
        from placer.ops.delete import delete_placed, refs_in_files
        from placer.ops.get import Query

        if bool(what) == bool(files):
            raise InputError("give either -f FILE|DIR or TYPE/NAME")
        if files:
            expand_paths(files)
        else:
            query = Query.parse(what)
            if not query.name:
                raise InputError(f"{what}: expected TYPE/NAME (e.g. jobset/train)")
        targets = resolve(clusters_file, kubeconfig, context, all_contexts)
        kube = Kube(kubeconfig)
        try:
            cat = with_fleet_definitions(load_catalog(catalog), kube, [e.context for e in targets.live],
                                         lambda m: err.print(f"warning: {m}", markup=False, highlight=False))
            placed = find_placed(kube, targets.clusters, cat)
            if files:
                refs = refs_in_files(files, cat, namespace)
            else:
                ns = namespace or "default"
                refs = [r for r in placed if r.namespace == ns and r.name == query.name and
                        any(query.matches(client_for(kube, e).resolve(r.kind)) for e in targets.live
                            if e.name == placed[r].cluster)]
                if not refs:
                    from placer.model.workload import WorkloadRef
                    refs = [WorkloadRef("", query.type or "", ns, query.name or "")]
            clients = {e.name: client_for(kube, e) for e in targets.live}
            return delete_placed(refs, placed, clients)
        finally:
            kube.close()

    fmt = run(lambda: parse_output(output, ("table", "json", "yaml", "name", "jsonpath")))
    result = run(go)
    for name, why in result.unreachable.items():
        err.print(f"warning: {name}: {why} (not checked)", markup=False, highlight=False)
    if fmt.format in ("json", "yaml", "jsonpath"):
        emit_as(result.to_dict(), fmt)
    elif fmt.format == "name":                     # kubectl's kind/name ("Kind ns/name" -> "kind/name")
        for d in result.deleted:
            kind, _, where = d.ref.partition(" ")
            out.print(f"{kind.lower()}/{where.rpartition('/')[2]}", markup=False, highlight=False)
    else:
        for d in result.deleted:
            out.print(f"{d.ref} deleted from {d.cluster}", markup=False, highlight=False)
    for ref, why in result.refused.items():
        err.print(f"error: {ref}: {why}", markup=False, highlight=False)
    for ref in result.not_found:
        err.print(f"{'warning' if ignore_not_found else 'error'}: {ref}: not placed on any reachable cluster",
                  markup=False, highlight=False)
    raise typer.Exit(result.exit_code(ignore_not_found))
