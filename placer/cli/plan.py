"""`placer plan`: where would these workloads go, and why not the rest."""

from __future__ import annotations

import sys
import textwrap
import time
from contextlib import nullcontext
from typing import TYPE_CHECKING, List, Optional

import typer

from placer.cli.common import CATALOG_HELP, FILES_HELP, GPU_HELP, app, err, gpu_resources, one_shot_heap, out, run
from placer.cli.output import OUTPUT_HELP, emit, kind_text, parse_output, print_text
from placer.cli.targets import all_contexts_option, clusters_option, context_option, kubeconfig_option
from placer.cli.topology_view import topology_lines
from placer.model.plan import Placement, Plan, Unplaced, number
from placer.model.words import noun
from placer.ops.checks import DEFAULT_TIME_LIMIT, TIME_LIMIT_HELP, dry_run_mode

if TYPE_CHECKING:                 # placer.ops.plan brings the Kubernetes client and the solver: loaded when used
    from rich.text import Text  # rich: loaded by the table and messages only, not for `-o json`

    from placer.ops.plan import PlanResult

MAX_NODES_SHOWN = 4
GAP_HELP = ("The older effort rule: each contested priority level's effort by its gap to the LP bound relative "
            "to its whole value (by default the gap is counted in GPUs, then groups): less CPU, and possibly a plan "
            "with fewer groups (docs/planning.md).")


@app.command()
def plan(
    files: List[str] = typer.Option([], "-f", "--filename", help=FILES_HELP),
    dry_run: Optional[str] = typer.Option(None, "--dry-run", metavar="[=client|server]",
                                          help="Only plan (placer plan never changes a cluster)."),
    clusters: Optional[str] = clusters_option(),
    kubeconfig: Optional[str] = kubeconfig_option(),
    context: List[str] = context_option(),
    all_contexts: bool = all_contexts_option(),
    time_limit: Optional[float] = typer.Option(DEFAULT_TIME_LIMIT, "--time-limit", help=TIME_LIMIT_HELP),
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
    effort_by_gap: bool = typer.Option(False, "--effort-by-gap", help=GAP_HELP),
    timings: bool = typer.Option(False, "--timings", help="Print per-phase seconds on stderr."),
    explain: bool = typer.Option(False, "--explain", help="Also search what would make each unplaced workload "
                                 "fit (preempt, wait, add nodes, relax), each proven by re-solving; JSON: options."),
) -> None:
    """Plan where each workload of the files would go; print the placements, and for what
    cannot be placed the reason per cluster. Exit 0 when everything is placed, 3 when
    something is unplaced, 2 on bad input."""
    run(lambda: dry_run_mode(dry_run))   # planning never acts; the flag reads well in scripts and the README
    tty = sys.stderr.isatty()
    fmt = run(lambda: parse_output(output))

    def go() -> PlanResult:
        from placer.ops.plan import plan_files  # heavy (client, solver): loaded when the command runs
        one_shot_heap()                          # now that the plan's modules are loaded
        status = err.status("planning...") if tty else nullcontext()
        with status as st:
            update = (lambda msg: st.update(_escape(msg))) if st is not None else None
            return plan_files(files, clusters=clusters, kubeconfig=kubeconfig, contexts=tuple(context),
                              all_contexts=all_contexts, time_limit=time_limit,
                              notice=lambda m: err.print(f"note: {m}", markup=False, highlight=False),
                              catalog_dirs=catalog, gpu=gpu_resources(gpu),
                              workers=workers, effort=effort, effort_by_gap=effort_by_gap, namespace=namespace,
                              explain=explain, announce=lambda m: err.print(_escape(m), style="dim"), progress=update)

    result = run(go)
    t = time.monotonic()
    if fmt.tabular:
        print_text(out, render_table(result.plan, wide=fmt.wide, width=out.width, explain=explain))
        out.print(summary_line(result.plan))
    else:
        emit(result.plan.to_dict(), fmt, names=plan_names(result.plan))
    if svg:
        run(lambda: write_plan_svg(result, svg))
        err.print(f"wrote {_escape(svg)}", style="dim")
    if timings:
        phases = {**result.plan.summary.timings, "render": time.monotonic() - t}
        print("timings: " + " ".join(f"{k}={v:.3f}s" for k, v in phases.items()), file=sys.stderr)
    raise typer.Exit(result.exit_code)


def _escape(text: str) -> str:
    from rich.markup import escape
    return escape(text)


def _nodes_text(nodes) -> str:
    names = list(nodes)
    shown = ", ".join(f"{n}({sum(nodes[n].values())})" for n in names[:MAX_NODES_SHOWN])
    return shown + (f" +{len(names) - MAX_NODES_SHOWN} more" if len(names) > MAX_NODES_SHOWN else "")


def render_table(p: Plan, *, wide: bool = False, width: int | None = None, explain: bool = False) -> Text:
    """One row per workload (`wide`: its group and nodes too); the reasons of an unplaced
    workload each on their own indented lines under its row, wrapped to `width`, so that
    an 80-column terminal reads as well as a wide one; `explain`: then what would make it
    fit, numbered best first."""
    from rich.text import Text
    members: dict[str, list[str]] = {}
    for r in _entries(p):
        members.setdefault(r.group, []).append(r.workload)
    head = ["WORKLOAD", "KIND", "GPUS", "CLUSTER"] + (["GROUP", "NODES (pods)"] if wide else [])
    rows = [[pl.workload, _kind(pl), str(pl.gpus), pl.cluster]
            + ([pl.group, _nodes_text(pl.nodes)] if wide else []) for pl in p.placements]
    rows += [[u.workload, _kind(u), str(u.gpus), "unplaced"] + ([u.group, "-"] if wide else []) for u in p.unplaced]
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
        for c, passed in pl.passed_over.items() if wide else ():     # issue 21: why not a better-ranked one
            text.append(textwrap.fill(f"not {c}: {passed.render()}", width=max(width, 40), initial_indent="    ",
                                      subsequent_indent="      ", break_on_hyphens=False) + "\n", style="dim")
        if pl.spread:
            shares = pl.spread["shares"]
            line = (f"divide: {pl.replicas} of {sum(shares.values())} replicas here ("
                    + ", ".join(f"{c}={n}" for c, n in shares.items()) + ")" if pl.spread["mode"] == "divide"
                    else f"duplicate: a copy on each of {', '.join(shares)}")
            text.append(textwrap.fill(line, width=max(width, 40), initial_indent="    ",
                                      subsequent_indent="      ", break_on_hyphens=False) + "\n", style="cyan")
            for line in _short_lines(pl, p.placements):
                text.append(textwrap.fill(line, width=max(width, 40), initial_indent="    ",
                                          subsequent_indent="      ", break_on_hyphens=False) + "\n", style="dim")
        if pl.creates:
            line = f"submit creates {', '.join(pl.creates)} on {pl.cluster} first"
            text.append(textwrap.fill(line, width=max(width, 40), initial_indent="    ",
                                      subsequent_indent="      ", break_on_hyphens=False) + "\n", style="dim")
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


def _kind(entry: Placement | Unplaced) -> str:
    return kind_text(entry.kind, entry.ref.group if entry.ref else None)


def _options_text(u, width: int) -> Text:
    """What would make an unplaced workload fit, one numbered line each (wrapped)."""
    from rich.text import Text
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
    return (f"placed {s.placed}/{s.workloads} {noun(s.workloads, 'workload')}, "
            f"{s.gpus_placed}/{s.gpus_requested} {noun(s.gpus_requested, 'GPU')} "
            f"in {s.solve_seconds:.2f}s ({s.status})"
            + (f", cost {number(s.cost)} per hour" if s.cost is not None else ""))


def _short_lines(pl, placements) -> list[str]:
    """A divide placed in part: the replicas left out and why per cluster, under its first share."""
    why = (pl.spread or {}).get("reasons")
    if not why or next(p for p in placements if p.ref == pl.ref) is not pl:
        return []
    return [f"{pl.spread['unplaced']} replicas not placed"] + [f"{c}: {r.render()}" for c, r in why.items()]
