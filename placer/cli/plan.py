"""`placer plan`: where would these workloads go, and why not the rest."""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import InputError
from ..plan import Plan
from .common import (CATALOG_HELP, FILES_HELP, GPU_HELP, app, check_number, check_output, emit, err, gpu_resources,
                     out, run)
from .targets import all_contexts_option, clusters_option, context_option, kubeconfig_option

DEFAULT_TIME_LIMIT = 10.0
MIN_SOLVE_SECONDS = 0.1        # even past the limit, a greedy plan is computed and verified
MAX_NODES_SHOWN = 4


@dataclass(frozen=True)
class PlanResult:
    plan: Plan
    clusters_source: str

    @property
    def exit_code(self) -> int:
        return 0 if self.plan.all_placed else 3


def plan_files(files: list[str], *, clusters: str | None = None, kubeconfig: str | None = None,
               contexts: tuple[str, ...] = (), all_contexts: bool = False,
               time_limit: float = DEFAULT_TIME_LIMIT, catalog_dirs: list[str] | None = None,
               gpu: tuple[str, ...] | None = None, workers: int | None = None,
               effort: float | None = None, announce=None, progress=None, notice=None) -> PlanResult:
    """Resolve the clusters (one rule for every command), load the files' placement groups
    (with no files: the pending objects of the hub's staging namespace), and plan them on
    the fleet as `submit` sees it: promised capacity counted, workloads already placed set
    aside (`placer.fleetview`)."""
    from ..catalog import load_catalog
    from ..fleetview import plan_groups, read_fleet, split_already_placed
    from ..podspec import DEFAULT_GPU_RESOURCES
    from ..solve import DEFAULT_EFFORT, DEFAULT_WORKERS, solve
    from ..targets import resolve_clusters

    check_number("--time-limit", time_limit)
    check_number("--effort", effort)
    check_number("--workers", workers, minimum=1, inclusive=True)
    gpu = tuple(gpu or DEFAULT_GPU_RESOURCES)
    timings: dict[str, float] = {}
    t = started = time.monotonic()
    targets = resolve_clusters(clusters, kubeconfig=kubeconfig, contexts=contexts, all_contexts=all_contexts)
    timings["clusters"] = time.monotonic() - t
    t = time.monotonic()
    if targets.notice and notice:
        notice(targets.notice)
    if not files and targets.hub is None:
        raise InputError(f"nothing to plan: pass -f FILE, or give the clusters file ({targets.description}) "
                         "a hub: {context, stagingNamespace} to plan the pending objects of its staging namespace")
    if progress:
        progress("reading workloads")
    catalog = load_catalog(catalog_dirs or ())
    kube = None
    if targets.live:
        from ..kube import Kube
        from ..registry import with_fleet_definitions
        kube = Kube(kubeconfig)
        catalog = with_fleet_definitions(catalog, kube, [e.context for e in targets.live],
                                         announce or (lambda m: None))
    timings["catalog"] = time.monotonic() - t
    t = time.monotonic()
    if files:
        from ..manifests import load_groups
        groups = load_groups(files, catalog, gpu_resources=gpu)
    else:
        from ..hub import staging_groups
        hub = targets.hub
        if announce:
            announce(f"planning the pending objects of namespace {hub.stagingNamespace} on hub context {hub.context}")
        groups = staging_groups(hub.context, hub.stagingNamespace, catalog, kubeconfig=kubeconfig,
                                gpu_resources=gpu, warn=announce or (lambda m: None))
    timings["load"] = time.monotonic() - t
    t = time.monotonic()
    if progress:
        progress(f"inventorying {len(targets.clusters)} clusters")
    try:
        view = read_fleet(targets.clusters, kube, catalog, gpu_resources=gpu)
    finally:
        if kube is not None:
            kube.close()
    timings["fleet"] = time.monotonic() - t
    for c in view.fleet.clusters:
        if c.error and announce:                  # said even when everything fits elsewhere
            announce(f"{c.name}: {c.error}; planning without it")
    pending, already, split = split_already_placed(groups, view.placed)
    if announce:
        for a in already:
            announce(f"{a.workload}: already placed on {a.cluster}" + (f" by plan {a.plan}" if a.plan else ""))
        for key, why in split.items():
            announce(f"group {key}: {why}; left out")
    # --time-limit bounds the whole plan: reading files and clusters comes out of it
    left = max(MIN_SOLVE_SECONDS, time_limit - (time.monotonic() - started))
    plan = plan_groups(view, pending, catalog, solve=solve, gpu_resources=gpu, time_limit=left,
                       workers=workers or DEFAULT_WORKERS, effort=effort or DEFAULT_EFFORT, progress=progress)
    summary = replace(plan.summary, timings={**timings, **plan.summary.timings})
    return PlanResult(replace(plan, summary=summary), targets.description)


@app.command()
def plan(
    files: List[str] = typer.Option([], "-f", "--filename", help=FILES_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only plan (placer plan never changes a cluster)."),
    clusters: Optional[str] = clusters_option(),
    kubeconfig: Optional[str] = kubeconfig_option(),
    context: List[str] = context_option(),
    all_contexts: bool = all_contexts_option(),
    time_limit: float = typer.Option(DEFAULT_TIME_LIMIT, "--time-limit", help="Wall-clock bound on the whole plan, seconds: reading, solving and explaining (a search it cuts short is flagged timeLimitHit)."),
    output: str = typer.Option("table", "-o", "--output", help="table, json or yaml"),
    catalog: List[str] = typer.Option([], "--catalog", help=CATALOG_HELP),
    gpu: List[str] = typer.Option([], "--gpu-resource", help=GPU_HELP),
    workers: Optional[int] = typer.Option(None, "--workers", help="Solver threads (the plan does not depend on it)."),
    effort: Optional[float] = typer.Option(None, "--effort", help="Search effort in CP-SAT deterministic seconds "
                                           "(default 1.0): the same input gives the same plan."),
    timings: bool = typer.Option(False, "--timings", help="Print per-phase seconds on stderr."),
) -> None:
    """Plan where each workload of the files would go; print the placements, and for what
    cannot be placed the reason per cluster. Exit 0 when everything is placed, 3 when
    something is unplaced, 2 on bad input."""
    del dry_run  # planning never acts; the flag reads well in scripts and the README
    tty = sys.stderr.isatty()

    def go() -> PlanResult:
        check_output(output)
        status = err.status("planning...") if tty else nullcontext()
        with status as st:
            update = (lambda msg: st.update(escape(msg))) if st is not None else None
            return plan_files(files, clusters=clusters, kubeconfig=kubeconfig, contexts=tuple(context),
                              all_contexts=all_contexts, time_limit=time_limit,
                              notice=lambda m: err.print(f"note: {m}", markup=False, highlight=False),
                              catalog_dirs=catalog, gpu=gpu_resources(gpu),
                              workers=workers, effort=effort,
                              announce=lambda m: err.print(escape(m), style="dim"), progress=update)

    result = run(go)
    t = time.monotonic()
    if output == "table":
        out.print(render_table(result.plan))
        out.print(summary_line(result.plan))
    else:
        emit(result.plan.to_dict(), output)
    if timings:
        phases = {**result.plan.summary.timings, "render": time.monotonic() - t}
        print("timings: " + " ".join(f"{k}={v:.3f}s" for k, v in phases.items()), file=sys.stderr)
    raise typer.Exit(result.exit_code)


def _nodes_text(nodes) -> str:
    names = list(nodes)
    shown = ", ".join(f"{n}({sum(nodes[n].values())})" for n in names[:MAX_NODES_SHOWN])
    return shown + (f" +{len(names) - MAX_NODES_SHOWN} more" if len(names) > MAX_NODES_SHOWN else "")


def render_table(p: Plan) -> Table:
    t = Table(box=None, pad_edge=False)
    for col in ("WORKLOAD", "KIND", "GPUS", "CLUSTER", "NODES (pods) / WHY NOT"):
        t.add_column(col, no_wrap=col != "NODES (pods) / WHY NOT")
    for pl in p.placements:
        t.add_row(escape(pl.workload), pl.kind, str(pl.gpus), f"[green]{escape(pl.cluster)}[/green]",
                  escape(_nodes_text(pl.nodes)))
    for u in p.unplaced:
        why = "\n".join(f"{c}: {r.render()}" for c, r in u.reasons.items()) or "no clusters"
        t.add_row(escape(u.workload), u.kind, str(u.gpus), "[red]unplaced[/red]", escape(why))
    return t


def summary_line(p: Plan) -> str:
    s = p.summary
    return (f"placed {s.placed}/{s.workloads} workloads, {s.gpus_placed}/{s.gpus_requested} GPUs "
            f"in {s.solve_seconds:.2f}s ({s.status})")
