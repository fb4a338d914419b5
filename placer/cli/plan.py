"""`placer plan`: where would these workloads go, and why not the rest."""

from __future__ import annotations

import sys
import textwrap
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any, List, Optional

import typer
from rich.markup import escape
from rich.text import Text

from placer.cli.common import CATALOG_HELP, FILES_HELP, GPU_HELP, app, check_number, err, gpu_resources, out, run
from placer.cli.output import OUTPUT_HELP, emit, parse_output
from placer.cli.targets import all_contexts_option, clusters_option, context_option, kubeconfig_option
from placer.cli.topology_view import topology_lines
from placer.model.errors import InputError
from placer.model.plan import Placement, Plan, Unplaced
from placer.ops.preview import dry_run_mode

DEFAULT_TIME_LIMIT = 10.0
MIN_SOLVE_SECONDS = 0.1        # even past the limit, a greedy plan is computed and verified
MAX_NODES_SHOWN = 4
OPTIONS_END = 0.97             # the options search ends here, leaving the output its share of --time-limit


@dataclass(frozen=True)
class PlanResult:
    plan: Plan
    clusters_source: str
    fleet: Any = None                    # the snapshot planned against (for the picture)
    gpus_per_pod: Any = None             # (workload ref, component/instance) -> GPUs per pod
    gpu_resources: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return 0 if self.plan.all_placed else 3


def plan_files(files: list[str], *, clusters: str | None = None, kubeconfig: str | None = None,
               contexts: tuple[str, ...] = (), all_contexts: bool = False,
               time_limit: float = DEFAULT_TIME_LIMIT, catalog_dirs: list[str] | None = None,
               gpu: tuple[str, ...] | None = None, workers: int | None = None,
               effort: float | None = None, announce=None, progress=None, notice=None,
               namespace: str | None = None) -> PlanResult:
    """Resolve the clusters (one rule for every command), load the files' placement groups
    (with no files: the pending objects of the hub's staging namespace), and plan them on
    the fleet as `submit` sees it: promised capacity counted, workloads already placed set
    aside (`placer.fleetview.view`)."""
    from placer.definitions.catalog import load_catalog
    from placer.fleetview.view import plan_groups, read_fleet, split_already_placed
    from placer.inputs.targets import resolve_clusters
    from placer.model.podspec import DEFAULT_GPU_RESOURCES
    from placer.solve import DEFAULT_EFFORT, DEFAULT_WORKERS, solve

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
    if not files and namespace:
        raise InputError(f"-n {namespace}: applies to the objects of -f files; the namespace planned without "
                         "files is the hub's stagingNamespace of the clusters file")
    if not files and targets.hub is None:
        raise InputError("nothing to plan: pass -f FILE or -f DIR with the workloads to plan. To plan what waits "
                         "in a hub's staging namespace instead, use a clusters file with a hub: section "
                         f"(context, stagingNamespace). Clusters in use: {targets.description}.")
    if progress:
        progress("reading workloads")
    catalog = load_catalog(catalog_dirs or ())
    kube = None
    if targets.live:
        from placer.fleetview.registry import with_fleet_definitions
        from placer.kube import Kube
        kube = Kube(kubeconfig)
        catalog = with_fleet_definitions(catalog, kube, [e.context for e in targets.live],
                                         announce or (lambda m: None))
    timings["catalog"] = time.monotonic() - t
    t = time.monotonic()
    if files:
        from placer.inputs.manifests import load_groups
        groups = load_groups(files, catalog, gpu_resources=gpu, namespace=namespace,
                             priority_classes=_cluster_priority_classes(targets, kube, kubeconfig))
        for note in dict.fromkeys(n for g in groups for n in g.notes):
            if announce:
                announce(note)
    else:
        from placer.ops.staged import staging_groups
        hub = targets.hub
        assert hub is not None, "no files and no hub was refused above"
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
    if plan.unplaced:
        from placer.ops.options import plan_with_options
        if progress:
            progress("searching what would make the rest fit")
        t = time.monotonic()
        plan = plan_with_options(plan, view, pending, groups, catalog, gpu_resources=gpu,
                                 deadline=started + time_limit * OPTIONS_END)
        timings["options"] = time.monotonic() - t
    summary = replace(plan.summary, timings={**timings, **plan.summary.timings})
    per_pod = {(w.ref, i.key): i.gpus_per_pod for g in groups for w in g.workloads for i in w.instances}
    return PlanResult(replace(plan, summary=summary), targets.description, view.fleet, per_pod, gpu)


def _cluster_priority_classes(targets, kube, kubeconfig: str | None):
    """PriorityClasses and WorkloadPriorityClasses of the hub and the live clusters, when
    there are any (a simulated fleet has none: classes then come from the files)."""
    contexts = ([targets.hub.context] if targets.hub else []) + [e.context for e in targets.live]
    if not contexts:
        return None
    from placer.inputs.priority import read_classes
    from placer.kube import Kube

    own = kube is None
    kube = kube or Kube(kubeconfig)
    try:
        return read_classes(kube, contexts)
    finally:
        if own:
            kube.close()


@app.command()
def plan(
    files: List[str] = typer.Option([], "-f", "--filename", help=FILES_HELP),
    dry_run: Optional[str] = typer.Option(None, "--dry-run", metavar="[=client|server]",
                                          help="Only plan (placer plan never changes a cluster)."),
    clusters: Optional[str] = clusters_option(),
    kubeconfig: Optional[str] = kubeconfig_option(),
    context: List[str] = context_option(),
    all_contexts: bool = all_contexts_option(),
    time_limit: float = typer.Option(DEFAULT_TIME_LIMIT, "--time-limit", help="Wall-clock bound on the whole plan, seconds: reading, solving and explaining (a search it cuts short is flagged timeLimitHit)."),
    output: str = typer.Option("table", "-o", "--output", help=OUTPUT_HELP),
    namespace: Optional[str] = typer.Option(None, "-n", "--namespace",
                                            help="Namespace for objects of the files that name none "
                                                 "(an object in another namespace is an error, as kubectl)."),
    svg: Optional[str] = typer.Option(None, "--svg", help="Also draw the plan as an SVG picture in this file."),
    catalog: List[str] = typer.Option([], "--catalog", help=CATALOG_HELP),
    gpu: List[str] = typer.Option([], "--gpu-resource", help=GPU_HELP),
    workers: Optional[int] = typer.Option(None, "--workers", help="Solver threads (the plan does not depend on it)."),
    effort: Optional[float] = typer.Option(None, "--effort", help="Search effort in CP-SAT deterministic seconds "
                                           "(default 1.0): the same input gives the same plan."),
    timings: bool = typer.Option(False, "--timings", help="Print per-phase seconds on stderr."),
    explain: bool = typer.Option(False, "--explain", help="Under each unplaced workload, also list what would "
                                 "make it fit (preempt, wait, add nodes, relax a constraint), each checked by "
                                 "re-solving, best first (JSON always has them: unplaced[].options)."),
) -> None:
    """Plan where each workload of the files would go; print the placements, and for what
    cannot be placed the reason per cluster. Exit 0 when everything is placed, 3 when
    something is unplaced, 2 on bad input."""
    run(lambda: dry_run_mode(dry_run))   # planning never acts; the flag reads well in scripts and the README
    tty = sys.stderr.isatty()
    fmt = run(lambda: parse_output(output))

    def go() -> PlanResult:
        status = err.status("planning...") if tty else nullcontext()
        with status as st:
            update = (lambda msg: st.update(escape(msg))) if st is not None else None
            return plan_files(files, clusters=clusters, kubeconfig=kubeconfig, contexts=tuple(context),
                              all_contexts=all_contexts, time_limit=time_limit,
                              notice=lambda m: err.print(f"note: {m}", markup=False, highlight=False),
                              catalog_dirs=catalog, gpu=gpu_resources(gpu),
                              workers=workers, effort=effort, namespace=namespace,
                              announce=lambda m: err.print(escape(m), style="dim"), progress=update)

    result = run(go)
    t = time.monotonic()
    if fmt.tabular:
        out.print(render_table(result.plan, wide=fmt.wide, width=out.width, explain=explain))
        out.print(summary_line(result.plan))
    else:
        emit(result.plan.to_dict(), fmt, names=plan_names(result.plan))
    if svg:
        run(lambda: write_plan_svg(result, svg))
        err.print(f"wrote {escape(svg)}", style="dim")
    if timings:
        phases = {**result.plan.summary.timings, "render": time.monotonic() - t}
        print("timings: " + " ".join(f"{k}={v:.3f}s" for k, v in phases.items()), file=sys.stderr)
    raise typer.Exit(result.exit_code)


def _nodes_text(nodes) -> str:
    names = list(nodes)
    shown = ", ".join(f"{n}({sum(nodes[n].values())})" for n in names[:MAX_NODES_SHOWN])
    return shown + (f" +{len(names) - MAX_NODES_SHOWN} more" if len(names) > MAX_NODES_SHOWN else "")


def render_table(p: Plan, *, wide: bool = False, width: int | None = None, explain: bool = False) -> Text:
    """One row per workload (`wide`: its group and nodes too); the reasons of an unplaced
    workload each on their own indented lines under its row, wrapped to `width`, so that
    an 80-column terminal reads as well as a wide one; `explain`: then what would make it
    fit, numbered best first."""
    members: dict[str, list[str]] = {}
    for r in _entries(p):
        members.setdefault(r.group, []).append(r.workload)
    head = ["WORKLOAD", "KIND", "GPUS", "CLUSTER"] + (["GROUP", "NODES (pods)"] if wide else [])
    rows = [[pl.workload, pl.kind, str(pl.gpus), pl.cluster]
            + ([pl.group, _nodes_text(pl.nodes)] if wide else []) for pl in p.placements]
    rows += [[u.workload, u.kind, str(u.gpus), "unplaced"] + ([u.group, "-"] if wide else []) for u in p.unplaced]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    width = width or 200
    text = Text(no_wrap=False)
    text.append(_line(head, widths).rstrip() + "\n", style="bold")
    for pl, row in zip(p.placements, rows):
        text.append(_line(row[:3], widths) + "   ")
        text.append(row[3].ljust(widths[3]) if wide else row[3], style="green")
        text.append(("   " + _line(row[4:], widths[4:]) if wide else "").rstrip() + "\n")
        for line in topology_lines(pl.topology):
            text.append(textwrap.fill(line, width=max(width, 40), initial_indent="    ",
                                      subsequent_indent="      ", break_on_hyphens=False) + "\n", style="cyan")
    for u, row in zip(p.unplaced, rows[len(p.placements):]):
        text.append(_line(row[:3], widths) + "   ")
        text.append(row[3], style="red")
        text.append(("   " + " " * (widths[3] - len(row[3])) + _line(row[4:], widths[4:]) if wide else "").rstrip()
                    + "\n")
        why = [f"{c}: {r.render()}" for c, r in u.reasons.items()] or ["no clusters to place on"]
        others = [w for w in members.get(u.group, ()) if w != u.workload]
        if others:
            why.insert(0, f"group {u.group}, placed all or nothing with {', '.join(others)}")
        for line in why:
            text.append(textwrap.fill(line, width=max(width, 40), initial_indent="    ",
                                      subsequent_indent="      ", break_on_hyphens=False) + "\n", style="dim"
                        if line.startswith("group ") else None)
        if explain:
            text.append(_options_text(u, max(width, 40)))
    return text


def _options_text(u, width: int) -> Text:
    """What would make an unplaced workload fit, one numbered line each (wrapped)."""
    text = Text()
    if u.options is None:
        return text
    lines = [f"{i}. {o.render()}" for i, o in enumerate(u.options, 1)]
    head = "would fit after any one of:" if lines else "no single change found that would make it fit"
    if u.options_incomplete:
        head += f" (search cut short: {u.options_incomplete})"
    text.append(textwrap.fill(head, width=width, initial_indent="    ", subsequent_indent="      ") + "\n",
                style="bold" if lines else "dim")
    for line in lines:
        text.append(textwrap.fill(line, width=width, initial_indent="      ", subsequent_indent="         ",
                                  break_on_hyphens=False) + "\n")
    return text


def _line(cells: list[str], widths: list[int]) -> str:
    return "   ".join(c.ljust(w) for c, w in zip(cells, widths))


def plan_names(p: Plan) -> list[str]:
    """`-o name`: each planned workload as kind/name, as kubectl names objects."""
    return [f"{r.kind.lower()}/{r.workload.rpartition('/')[2]}" for r in _entries(p)]


def _entries(p: Plan) -> tuple[Placement | Unplaced, ...]:
    return (*p.placements, *p.unplaced)


def write_plan_svg(result: PlanResult, path: str) -> None:
    from placer.cli.picture import fleet_svg
    fleet_svg(result.fleet, result.plan, path, title=f"placer plan, on {result.clusters_source}",
              gpus_per_pod=result.gpus_per_pod, resources=result.gpu_resources)


def summary_line(p: Plan) -> str:
    s = p.summary
    return (f"placed {s.placed}/{s.workloads} workloads, {s.gpus_placed}/{s.gpus_requested} GPUs "
            f"in {s.solve_seconds:.2f}s ({s.status})")
