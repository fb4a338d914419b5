"""`placer describe`: a workload's tree, pods, GPUs, gangs and phase, from files or live."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence

import typer

from placer.cli.common import CATALOG_HELP, FILES_HELP, GPU_HELP, app, err, gpu_resources, out, run
from placer.cli.output import emit, parse_output, resource_name
from placer.definitions.catalog import load_catalog
from placer.definitions.describe import served_by, workload_json, workload_tree
from placer.model.errors import InputError
from placer.model.workload import Workload


@app.command()
def describe(
    ref: Optional[str] = typer.Argument(None, metavar="[KIND/NAME | KIND NAME]",
                                        help="A live object, as kubectl names it."),
    name: Optional[str] = typer.Argument(None, hidden=True),
    files: List[str] = typer.Option([], "-f", "--filename", help=FILES_HELP),
    output: str = typer.Option("table", "-o", "--output", help="table, json, yaml, name or jsonpath=TEMPLATE"),
    namespace: Optional[str] = typer.Option(None, "-n", "--namespace",
                                            help="Namespace of the live object; with -f, the objects' namespace "
                                                 "(an object in another namespace is an error, as kubectl)."),
    context: Optional[str] = typer.Option(None, "--context", help="kubeconfig context (live describe)"),
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig"),
    catalog: List[str] = typer.Option([], "--catalog", help=CATALOG_HELP),
    gpu: List[str] = typer.Option([], "--gpu-resource", help=GPU_HELP),
) -> None:
    """Describe workloads: components, instances, pods, per-pod requests, GPUs, gangs, phase."""
    def go() -> None:
        # the use case reads clusters: its kubernetes client loads when the command runs, not at CLI start
        from placer.ops.describe import describe_files, describe_ref

        fmt = parse_output(output, ("table", "json", "yaml", "name", "jsonpath"))
        target = live_ref(ref, name)
        if bool(target) == bool(files):
            raise InputError("give either -f FILE... or KIND/NAME (or KIND NAME)")
        items: list[tuple[Workload, Mapping[str, Sequence[Mapping[str, Any]]] | None]]
        if not target:
            items = [(w, None) for w in describe_files(files, catalog_dirs=catalog, namespace=namespace,
                                                              gpu_resources=gpu_resources(gpu))]
        else:
            items = [describe_ref(target, namespace=namespace, context=context, kubeconfig=kubeconfig,
                                       catalog_dirs=catalog, gpu_resources=gpu_resources(gpu))]
        cat = load_catalog(catalog)               # compiled once: the use case's load is remembered
        served = [served_by(cat.lookup(w.api_version, w.kind), w) for w, _ in items]
        for s in served:
            for warning in s.get("warnings", ()):
                err.print(f"warning: {warning}", markup=False, highlight=False)
        if fmt.tabular:
            for w, pods in items:
                out.print(workload_tree(w, pods))
        else:
            emit([workload_json(w, pods, s) for (w, pods), s in zip(items, served)], fmt,
                 names=(resource_name(w.obj or {"apiVersion": w.api_version, "kind": w.kind,
                                                 "metadata": {"name": w.name}}) for w, _ in items))
    run(go)


def live_ref(ref: str | None, name: str | None) -> str | None:
    """kubectl's two spellings of one object: `TYPE/NAME` and `TYPE NAME`."""
    if name is None:
        return ref
    if ref and "/" in ref:
        raise InputError(f"give {ref} or {ref.split('/')[0]} {name}, not both forms at once")
    return f"{ref}/{name}"
