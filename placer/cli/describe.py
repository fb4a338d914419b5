"""`placer describe`: a workload's tree, pods, GPUs, gangs and phase, from files or live."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

import typer

from placer.cli.common import CATALOG_HELP, FILES_HELP, GPU_HELP, app, gpu_resources, out, run, warn
from placer.cli.output import emit, parse_output, resource_name
from placer.definitions.describe import workload_json, workload_tree
from placer.model.errors import InputError
from placer.ops.requests import DescribeRequest

if TYPE_CHECKING:                 # placer.ops.describe brings the Kubernetes client: loaded when used
    from placer.ops.describe import Described


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
    fmt = run(lambda: parse_output(output, ("table", "json", "yaml", "name", "jsonpath")))
    request = run(lambda: DescribeRequest(live_ref(ref, name), tuple(files), namespace, context))
    found = run(lambda: _describe(request, kubeconfig, catalog, gpu))
    for warning in (w for d in found for w in d.served.get("warnings", ())):
        warn(warning)
    if fmt.tabular:
        for d in found:
            out.print(workload_tree(d.workload, d.pod_dicts))
    else:
        emit([workload_json(d.workload, d.pod_dicts, d.served) for d in found], fmt,
             names=(resource_name(w.obj or {"apiVersion": w.api_version, "kind": w.kind,
                                             "metadata": {"name": w.name}}) for w in (d.workload for d in found)))


def _describe(request: DescribeRequest, kubeconfig: str | None, catalog: list[str], gpu: list[str]
              ) -> tuple[Described, ...]:
    """The describe on a Context of no clusters (a live object names its own context)."""
    # the use case reads clusters: its kubernetes client loads when the command runs, not at CLI start
    from placer.ops.context import Scope, local_context
    from placer.ops.describe import describe as describe_workloads

    request.check()
    scope = Scope(kubeconfig=kubeconfig, catalog_dirs=tuple(catalog), gpu_resources=gpu_resources(gpu))
    with local_context(scope, warn=warn) as ctx:
        return describe_workloads(ctx, request)


def live_ref(ref: str | None, name: str | None) -> str | None:
    """kubectl's two spellings of one object: `TYPE/NAME` and `TYPE NAME`."""
    if name is None:
        return ref
    if ref and "/" in ref:
        raise InputError(f"give {ref} or {ref.split('/')[0]} {name}, not both forms at once")
    return f"{ref}/{name}"
