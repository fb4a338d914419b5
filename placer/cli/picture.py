"""A picture of the fleet: each cluster's nodes as rows of GPU cells, as an SVG file.

Drawn with rich and exported with `Console(record=True).save_svg`: one cell per GPU,
grey where bound pods used it before the plan, in the colour of the workload the plan puts
there, hollow where it stays free; per cluster the free GPUs and the largest free block on
one node, before and after the plan; unplaced workloads listed with their first reason.
Fragmentation is then seen, not read about.
"""

from __future__ import annotations

import colorsys
import io
import re
from typing import Mapping, Sequence

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from placer.cli.topology_view import topology_lines
from placer.model.fleet import Cluster, Fleet, Node
from placer.model.plan import Plan
from placer.model.podspec import DEFAULT_GPU_RESOURCES
from placer.model.words import plural

USED, FREE = "█", "□"
PALETTE = ("dodger_blue1", "orange1", "medium_purple1", "spring_green2", "deep_pink2", "gold1",
           "turquoise2", "salmon1", "chartreuse2", "orchid1", "steel_blue1", "light_goldenrod1")
GOLDEN_ANGLE = 137.508              # degrees: hues this far apart never repeat, and stay spread out
MAX_NODES = 48                       # per cluster; the rest are summed up in one line
WIDTH = 120


def workload_colour(i: int) -> str:
    """The colour of the i-th workload: the palette's first, then hues a golden angle apart,
    in two lightnesses, so that no two workloads of a picture share a colour."""
    if i < len(PALETTE):
        return PALETTE[i]
    k = i - len(PALETTE)
    hue = (k * GOLDEN_ANGLE + 17.0) % 360 / 360
    r, g, b = colorsys.hls_to_rgb(hue, 0.55 if k % 2 == 0 else 0.72, 0.75)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


# rich's SVG template loads the Fira Code font from a CDN: the picture must not reach the
# network (offline viewers, strict CSPs), so the @font-face rules go and monospace serves
_FONT_FACE = re.compile(r"\s*@font-face \{\{.*?\}\}", re.S)
_GENERATED = re.compile(r"\s*<!-- Generated with Rich[^>]*-->")


def svg_format() -> str:
    from rich._export_format import CONSOLE_SVG_FORMAT

    return _GENERATED.sub("", _FONT_FACE.sub("", CONSOLE_SVG_FORMAT))


def _gpus(values: Mapping[str, int], resources: Sequence[str]) -> int:
    return sum(values.get(r, 0) for r in resources)


def node_cells(node: Node, placed: Sequence[tuple[str, int]], resources: Sequence[str]) -> list[str | None]:
    """One entry per GPU of the node: "" used before the plan, a workload name for GPUs the
    plan gives it, None for free ones."""
    total = _gpus(node.allocatable, resources)
    cells: list[str | None] = [""] * min(total, _gpus(node.used, resources))
    for workload, n in placed:
        cells += [workload] * n
    return (cells + [None] * max(0, total - len(cells)))[:max(total, len(cells))]


def _row(name: str, cells: list[str | None], colours: Mapping[str, str], name_width: int) -> Text:
    row = Text(name.ljust(name_width) + " ", style="bright_black" if not cells else "")
    for c in cells:
        if c is None:
            row.append(FREE, style="green")
        elif c == "":
            row.append(USED, style="grey50")
        else:
            row.append(USED, style=colours[c])
    return row


def _largest(blocks: Sequence[int]) -> int:
    return max(blocks, default=0)


HOST_LABEL = "kubernetes.io/hostname"


def _domain_levels(cluster: Cluster) -> tuple[str, ...]:
    """The levels nodes are grouped by: the cluster's, without the per-node one."""
    return tuple(k for k in cluster.topology if k != HOST_LABEL)


def _domain(node: Node, levels: Sequence[str]) -> tuple[str, ...]:
    return tuple(node.labels.get(k, "-") for k in levels)


def cluster_panel(cluster: Cluster, per_node: Mapping[str, list[tuple[str, int]]], colours: Mapping[str, str],
                  resources: Sequence[str], chosen: Mapping[tuple[str, str], list[str]] | None = None) -> Panel:
    """`chosen`: (key, domain) -> the workloads the plan put inside that domain."""
    if cluster.error:
        return Panel(Text(cluster.error, style="red"), title=cluster.name, title_align="left")
    gpu_nodes = [n for n in cluster.nodes if _gpus(n.allocatable, resources)]
    levels = _domain_levels(cluster)
    if levels:           # nodes grouped by domain, widest level first, so a gang's rack is seen whole
        gpu_nodes.sort(key=lambda n: _domain(n, levels))
    last: tuple[str, ...] | None = None
    rows: list[Text] = []
    before_free, after_free, before_blocks, after_blocks = 0, 0, [], []
    width = max((len(n.name) for n in gpu_nodes[:MAX_NODES]), default=4)
    hidden_free = 0
    for i, node in enumerate(gpu_nodes):
        cells = node_cells(node, per_node.get(node.name, ()), resources)
        free_before = cells.count(None) + sum(1 for c in cells if c)
        free_after = cells.count(None) if node.schedulable else 0
        free_before = free_before if node.schedulable else 0
        before_free, after_free = before_free + free_before, after_free + free_after
        before_blocks.append(free_before)
        after_blocks.append(free_after)
        if i < MAX_NODES and levels and _domain(node, levels) != last:
            last = _domain(node, levels)
            rows.append(_domain_header(levels, last, chosen or {}))
        if i < MAX_NODES:
            rows.append(_row(node.name + ("" if node.schedulable else " (unschedulable)"), cells, colours, width))
        else:
            hidden_free += free_after
    if len(gpu_nodes) > MAX_NODES:
        rows.append(Text(f"... {plural(len(gpu_nodes) - MAX_NODES, 'more node')}, {plural(hidden_free, 'GPU')} "
                         "free on them",
                         style="bright_black"))
    if not gpu_nodes:
        rows.append(Text("no GPU nodes", style="bright_black"))
    total = sum(_gpus(n.allocatable, resources) for n in gpu_nodes)
    head = Text(f"GPUs free {before_free} -> {after_free} of {total}; largest free block "
                f"{_largest(before_blocks)} -> {_largest(after_blocks)}", style="bold")
    return Panel(Group(head, *rows), title=cluster.name, title_align="left")


def _domain_header(levels: Sequence[str], values: Sequence[str], chosen: Mapping[tuple[str, str], list[str]]) -> Text:
    head = Text("  ".join(f"{k}={v}" for k, v in zip(levels, values)), style="bold cyan")
    inside = list(dict.fromkeys(w for kv in zip(levels, values) for w in chosen.get(kv, ())))
    if inside:
        head.append(f"  <- {', '.join(inside)}", style="cyan")
    return head


def chosen_domains(plan: Plan | None) -> dict[str, dict[tuple[str, str], list[str]]]:
    """cluster -> (key, domain) -> workloads whose required choice is that domain."""
    out: dict[str, dict[tuple[str, str], list[str]]] = {}
    for pl in plan.placements if plan else ():
        for c in pl.topology:
            if c.required and c.domains:
                found = out.setdefault(pl.cluster, {}).setdefault((c.key, c.domains[0]), [])
                if pl.workload not in found:
                    found.append(pl.workload)
    return out


def placements_by_node(plan: Plan | None, gpus_per_pod: Mapping[tuple[str, str], int]
                       ) -> dict[str, dict[str, list[tuple[str, int]]]]:
    """cluster -> node -> [(workload, GPUs the plan puts there)]."""
    out: dict[str, dict[str, list[tuple[str, int]]]] = {}
    for pl in plan.placements if plan else ():
        fallback = pl.gpus // pl.pods if pl.pods else 0
        for node, per in pl.nodes.items():
            ident = getattr(pl, "ref", None) or pl.workload
            n = sum(count * gpus_per_pod.get((ident, inst), fallback) for inst, count in per.items())
            if n:
                out.setdefault(pl.cluster, {}).setdefault(node, []).append((pl.workload, n))
    return out


def render(fleet: Fleet, plan: Plan | None, *, title: str,
           gpus_per_pod: Mapping[tuple[str, str], int] | None = None,
           resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> Console:
    """The picture on a recording console (call save_svg or export_svg on it)."""
    console = Console(record=True, width=WIDTH, file=io.StringIO(), force_terminal=True, color_system="truecolor")
    placed = placements_by_node(plan, gpus_per_pod or {})
    names = list(dict.fromkeys(p.workload for p in plan.placements)) if plan else []
    colours = {w: workload_colour(i) for i, w in enumerate(names)}
    console.print(Text(title, style="bold"))
    legend = Text()
    legend.append(USED, style="grey50")
    legend.append(" in use before  ")
    legend.append(FREE, style="green")
    legend.append(" free")
    console.print(legend)
    for pl in plan.placements if plan else ():
        line = Text("  ")
        line.append(USED * 2, style=colours[pl.workload])
        line.append(f" {pl.workload} ({pl.kind}, {plural(pl.gpus, 'GPU')} on {pl.cluster}, group {pl.group})")
        if pl.topology:
            line.append("  " + "; ".join(topology_lines(pl.topology)), style="cyan")
        console.print(line, no_wrap=True, overflow="ellipsis")
    chosen = chosen_domains(plan)
    for cluster in fleet.clusters:
        console.print(cluster_panel(cluster, placed.get(cluster.name, {}), colours, resources,
                                    chosen.get(cluster.name)))
    if plan and plan.unplaced:
        table = Table("UNPLACED", "GPUS", "FIRST REASON", box=None, title_justify="left")
        for u in plan.unplaced:
            first = next(iter(u.reasons.items()), None)
            table.add_row(u.workload, str(u.gpus), f"{first[0]}: {first[1].render()}" if first else "no clusters")
        console.print(table)
    return console


def fleet_svg(fleet: Fleet, plan: Plan | None, path: str, *, title: str,
              gpus_per_pod: Mapping[tuple[str, str], int] | None = None,
              resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> None:
    from placer.model.errors import InputError

    console = render(fleet, plan, title=title, gpus_per_pod=gpus_per_pod, resources=resources)
    try:
        console.save_svg(path, title=title, code_format=svg_format())
    except OSError as e:
        raise InputError(f"--svg {path}: cannot write: {e.strerror or e}") from None
