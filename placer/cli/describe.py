"""`placer describe`: a workload's tree, pods, GPUs, gangs and phase, from files or live."""

from __future__ import annotations

from typing import List, Optional

import typer

from .. import api
from ..describe import workload_json, workload_tree
from ..errors import InputError
from .common import CATALOG_HELP, FILES_HELP, GPU_HELP, app, check_output, emit, gpu_resources, out, run


@app.command()
def describe(
    ref: Optional[str] = typer.Argument(None, metavar="[KIND/NAME]", help="A live object, as kubectl names it."),
    files: List[str] = typer.Option([], "-f", "--filename", help=FILES_HELP),
    output: str = typer.Option("table", "-o", "--output", help="table, json or yaml"),
    namespace: Optional[str] = typer.Option(None, "-n", "--namespace"),
    context: Optional[str] = typer.Option(None, "--context", help="kubeconfig context (live describe)"),
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig"),
    catalog: List[str] = typer.Option([], "--catalog", help=CATALOG_HELP),
    gpu: List[str] = typer.Option([], "--gpu-resource", help=GPU_HELP),
) -> None:
    """Describe workloads: components, instances, pods, per-pod requests, GPUs, gangs, phase."""
    def go() -> None:
        check_output(output)
        if bool(ref) == bool(files):
            raise InputError("give either -f FILE... or KIND/NAME")
        if files:
            items = [(w, None) for w in api.describe_files(files, catalog_dirs=catalog,
                                                              gpu_resources=gpu_resources(gpu))]
        else:
            items = [api.describe_live(ref, namespace=namespace, context=context, kubeconfig=kubeconfig,
                                       catalog_dirs=catalog, gpu_resources=gpu_resources(gpu))]
        if output == "table":
            for w, pods in items:
                out.print(workload_tree(w, pods))
        else:
            emit([workload_json(w, pods) for w, pods in items], output)
    run(go)
