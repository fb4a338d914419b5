"""The dynamic replay of the Alibaba GPU trace v2023 (openb): placer beside Kueue MultiKueue (+TAS)
on the same real clusters and KWOK nodes, tasks arriving over time and completing, counted from the
workers' API servers (issue 22, the scenario benchmarks/peers.py left out).

    python3 benchmarks/peers_replay.py [--system placer multikueue aggregate] [--workers 4] [--fleet-every 80]
        [--start 12689020] [--tasks 200] [--burst 40] [--arrival-factor 400] [--duration-factor 10]
        [--min-run 10] [--max-run 120] [--high-share 0.25] [--seed 1] [--settle 60]
        [--out replay.json] [--svg benchmarks/replay.svg] [--dir DIR] [--keep]

- fleet: every k-th GPU node of the trace (k = --fleet-every, per GPU model in the file's order)
  dealt round-robin per model onto the workers (peers.trace); KWOK nodes with the node's CPU,
  memory, GPUs and `nvidia.com/gpu.product=<model>`;
- arrivals: the --tasks tasks asking GPUs created at or after --start (trace seconds), in creation
  order, each a one-pod Job with the task's CPU, memory and GPU count (a GPU-sharing task asks one
  whole GPU; gpu_spec is empty in this file: no model constraint). The first --burst arrive together
  at t = 0 (the backlog the replay starts with); task i after them arrives at
  (creation_i - creation_0) / arrival-factor seconds. It runs for (deletion - creation) /
  duration-factor seconds, clipped to [--min-run, --max-run]: KWOK completes its pod that long after
  it runs (annotation pod-complete.stage.kwok.x-k8s.io/delay), so its GPUs free again;
- priorities: a seeded --high-share of the tasks name the PriorityClass `replay-high` (value 1000),
  the others `replay-normal` (0), both preemptionPolicy Never (an order, not an eviction: neither
  the worker's scheduler nor Kueue evicts a running task); created on the hub and every worker;
- placer: the daemon on the hub's staging namespace; multikueue: `hack/kube-env multikueue` (Kueue
  takes a Job's priority from its pod template's priorityClassName), queue-name label on the hub;
  aggregate: the cluster-totals greedy (benchmarks/peers_aggregate.py) creating each task straight on
  a worker once some worker's free GPUs, computed again from the workers' pods, cover it.
  Each system from a clean fleet (peers.Run: its own `hack/kube-env up`, torn down after).

Counted from the workers' pods only (polled every 0.5 s): per workload its wait, from its arrival
(the scheduled time, so a slow create is the system's cost) to the first poll that saw all its pods
bound; p50/p95/mean wait over all and per priority; GPUs held (bound pods not yet finished) over
time; pods ever seen unschedulable (PodScheduled=False, reason Unschedulable); workloads never bound
by the end; placements/s in the burst (burst workloads bound / s until the last of them bound); peak
RSS of each system's processes (peers.Run.rss_pids). The run ends once every workload was bound and
every pod finished, or --settle s after the last arrival with nothing bound. The per-system series go to --out (JSON) and
the picture of GPUs held over time to --svg."""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import peers, peers_aggregate  # noqa: E402
from tests.kubeenv import RETRY  # noqa: E402

COMPLETE = "pod-complete.stage.kwok.x-k8s.io/delay"
HIGH, NORMAL = "replay-high", "replay-normal"
PRIORITY_VALUES = {HIGH: 1000, NORMAL: 0}
DEFAULT_START = 12689020            # the first GPU task of day 32 of the trace's dense last 34.5 days


# --- the trace as arrivals (pure) ----------------------------------------------------------------

@dataclass(frozen=True)
class Arrival:
    name: str
    task: str                        # the trace's pod name
    at: float                        # seconds after the replay starts
    run_for: float                   # seconds KWOK lets it run
    gpus: int
    cpu_m: int
    memory_mi: int
    priority: str = NORMAL


def read_tasks(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def arrivals(rows: list[dict], *, start: int, count: int, burst: int, arrival_factor: float,
             duration_factor: float, min_run: float, max_run: float, high_share: float,
             seed: int) -> list[Arrival]:
    """The first `count` GPU tasks created at or after `start`, in creation order, as arrivals: the
    first `burst` at 0, the others at their creation time after the first task's, divided by
    `arrival_factor`; each running its lifetime divided by `duration_factor`, clipped; a seeded
    `high_share` of them at the high priority."""
    tasks = sorted((r for r in rows if int(r["num_gpu"]) > 0 and int(r["creation_time"]) >= start),
                   key=lambda r: (int(r["creation_time"]), r["name"]))[:count]
    if not tasks:
        return []
    rng = random.Random(seed)
    first = int(tasks[0]["creation_time"])
    out = []
    for i, r in enumerate(tasks):
        created = int(r["creation_time"])
        lifetime = int(r["deletion_time"]) - created
        at = 0.0 if i < burst else (created - first) / arrival_factor
        run_for = min(max_run, max(min_run, lifetime / duration_factor))
        out.append(Arrival(f"t{i:04d}", r["name"], round(at, 3), round(run_for, 3), int(r["num_gpu"]),
                           int(r["cpu_milli"]), int(r["memory_mib"]),
                           HIGH if rng.random() < high_share else NORMAL))
    return out


# --- the counting (pure) -------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float | None:
    """Nearest rank: the smallest value with at least q% of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def waits(arrived: list[Arrival], bound_at: dict[str, float]) -> dict[str, float]:
    """Seconds from each arrival to the moment it was seen all bound (workloads never bound left out)."""
    return {a.name: max(0.0, bound_at[a.name] - a.at) for a in arrived if a.name in bound_at}


@dataclass
class Stats:
    workloads: int
    bound: int
    p50: float | None
    p95: float | None
    mean: float | None


def stats(arrived: list[Arrival], bound_at: dict[str, float], priority: str | None = None) -> Stats:
    chosen = [a for a in arrived if priority in (None, a.priority)]
    w = list(waits(chosen, bound_at).values())
    return Stats(len(chosen), len(w), percentile(w, 50), percentile(w, 95), sum(w) / len(w) if w else None)


def burst_rate(arrived: list[Arrival], bound_at: dict[str, float], burst: int) -> float | None:
    """Workloads of the burst bound / seconds until the last of them was bound."""
    times = [bound_at[a.name] for a in arrived[:burst] if a.name in bound_at]
    return len(times) / max(times) if times and max(times) > 0 else None


def held_gpus(pods: list[dict]) -> int:
    """GPUs of the pods bound to a node and not finished."""
    total = 0
    for p in pods:
        if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            for c in p["spec"].get("containers") or ():
                total += int(((c.get("resources") or {}).get("requests") or {}).get(peers.GPU, 0))
    return total


def unschedulable(pod: dict) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or ())


# --- one run ---------------------------------------------------------------------------------------

@dataclass
class Observed:
    bound_at: dict[str, float] = field(default_factory=dict)
    series: list[tuple[float, int]] = field(default_factory=list)       # (s, GPUs held)
    unschedulable: set[str] = field(default_factory=set)
    created_late: list[float] = field(default_factory=list)            # create done - scheduled arrival
    rss_mib: float | None = None
    end: float = 0.0


def load_of(a: Arrival) -> peers.Load:
    return peers.Load(a.name, "Job", 1, a.gpus, cpu_m=a.cpu_m, memory_mi=a.memory_mi)


def replay_manifest(a: Arrival, ns: str, labels: dict[str, str]) -> dict:
    m = peers.manifest(load_of(a), ns, labels)
    template = m["spec"]["template"]
    template["metadata"] = {"annotations": {COMPLETE: f"{a.run_for:g}s"}}
    template["spec"]["priorityClassName"] = a.priority
    return m


def priority_classes(env: peers.RealKube, clusters: list[str]) -> None:
    for c in clusters:
        for name, value in PRIORITY_VALUES.items():
            env.client(c).apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": name}, "value": value, "preemptionPolicy": "Never",
                                 "description": "benchmarks/peers_replay.py"})


def submit(run: peers.Run, arrived: list[Arrival], t0: float, obs: Observed, stop: threading.Event) -> None:
    """Creates each workload on the hub at t0 + its arrival (its own client: the observer polls)."""
    from placer.kube import Kube

    kube = Kube(str(run.env.kubeconfig), retry=RETRY, timeout=30)
    hub = kube.client(peers.HUB)
    labels = {peers.QUEUE_LABEL: "kube-env"} if run.system.startswith("multikueue") else {}
    try:
        for a in arrived:
            delay = t0 + a.at - time.monotonic()
            if delay > 0 and stop.wait(delay):
                return
            hub.create("jobs", replay_manifest(a, run.ns, labels), run.ns)
            obs.created_late.append(time.monotonic() - t0 - a.at)
    finally:
        kube.close()


def submit_aggregate(run: peers.Run, arrived: list[Arrival], t0: float, obs: Observed,
                     stop: threading.Event) -> None:
    """The aggregate greedy: arrived tasks queue in arrival order; every 0.5 s while any waits (and
    at each arrival) it lists the workers' pods, computes each pool's free GPUs from them
    (peers_aggregate.free_now) and creates, straight on the chosen worker and un-suspended, every
    queued task peers_aggregate.round_of places; the worker's kube-scheduler binds its pod."""
    from placer.kube import Kube

    kube = Kube(str(run.env.kubeconfig), retry=RETRY, timeout=30)
    clients = {w: kube.client(w) for w in run.workers}
    upcoming, queue = list(arrived), []
    created: dict[str, tuple[str, int]] = {}
    try:
        while upcoming or queue:
            now = time.monotonic() - t0
            while upcoming and upcoming[0].at <= now:
                queue.append(upcoming.pop(0))
            if queue:
                pods = {w: list(c.list("pods", run.ns).items) for w, c in clients.items()}
                free = peers_aggregate.free_now(run.scenario.pools, pods, created)
                for a, worker in peers_aggregate.round_of(queue, free, run.workers, load_of):
                    m = replay_manifest(a, run.ns, {})
                    m["spec"]["suspend"] = False
                    clients[worker].create("jobs", m, run.ns)
                    created[a.name] = (worker, a.gpus)
                    obs.created_late.append(time.monotonic() - t0 - a.at)
                    queue.remove(a)
            to_next = upcoming[0].at - (time.monotonic() - t0) if upcoming else 0.5
            pause = min(0.5, to_next) if queue else to_next
            if stop.wait(max(0.0, pause)):
                return
    finally:
        kube.close()


def over(now: float, arrived: list[Arrival], bound_at: dict[str, float], held: int, last_bound: float,
         settle: float) -> bool:
    """The run is over: every workload was bound and no GPU is held any more (every pod finished;
    or `settle` s after the last of them should have finished: a pod KWOK never completed); or
    some workload is not bound and nothing was bound for `settle` s after the last arrival."""
    if len(bound_at) == len(arrived):
        return held == 0 or now > max(bound_at[a.name] + a.run_for for a in arrived) + settle
    return now > max(max(a.at for a in arrived), last_bound) + settle


def observe(run: peers.Run, arrived: list[Arrival], t0: float, settle: float, obs: Observed) -> None:
    names = {a.name for a in arrived}
    last_bound = 0.0
    while True:
        pods = [p for w in run.workers for p in run.env.pods(w, run.ns)]
        now = time.monotonic() - t0
        for p in pods:
            name = peers.owner(p)
            if name in names and p["spec"].get("nodeName") and name not in obs.bound_at:
                obs.bound_at[name], last_bound = now, now
            if unschedulable(p):
                obs.unschedulable.add(p["metadata"]["name"])
        held = held_gpus(pods)
        obs.series.append((round(now, 2), held))
        if over(now, arrived, obs.bound_at, held, last_bound, settle):
            obs.end = now
            return
        time.sleep(0.5)


def run_system(system: str, arrived: list[Arrival], scenario: peers.Scenario, workers: list[str],
               base: Path, settle: float, keep: bool) -> Observed:
    run = peers.Run(scenario, system, workers, base / f"replay-{system}", settle)
    obs, stop = Observed(), threading.Event()
    try:
        run.fleet()
        priority_classes(run.env, [peers.HUB, *workers])
        run.start_system()
        if system == "placer":      # as `kube-env multikueue` waits for Kueue: arrivals start once it leads
            peers.wait_until(lambda: "became leader" in (run.dir / "daemon.log").read_text(), 300,
                             "the daemon leads")
        if system == "aggregate":   # it creates straight on the workers
            for w in workers:
                run.env.namespace(w, run.ns)
        t0 = time.monotonic()
        target = submit_aggregate if system == "aggregate" else submit
        thread = threading.Thread(target=target, args=(run, arrived, t0, obs, stop), daemon=True)
        thread.start()
        try:
            observe(run, arrived, t0, settle, obs)
        finally:
            stop.set()
            thread.join(60)
        pids = run.rss_pids()
        obs.rss_mib = sum(peers.vm_hwm(p) for p in pids) / 1024 if pids else None
    finally:
        run.close(keep)
    return obs


# --- the report ------------------------------------------------------------------------------------

def fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def report(arrived: list[Arrival], results: dict[str, Observed], burst: int, capacity: int) -> str:
    systems = list(results)
    rows: list[tuple[str, list[str]]] = []
    for level in (None, HIGH, NORMAL):
        tag = "" if level is None else f" ({level})"
        s = {k: stats(arrived, o.bound_at, level) for k, o in results.items()}
        rows += [(f"p50 wait, s{tag}", [fmt(s[k].p50) for k in systems]),
                 (f"p95 wait, s{tag}", [fmt(s[k].p95) for k in systems]),
                 (f"mean wait, s{tag}", [fmt(s[k].mean) for k in systems]),
                 (f"workloads bound{tag}", [f"{s[k].bound} of {s[k].workloads}" for k in systems])]
    rows += [("peak GPUs held", [str(max((g for _, g in o.series), default=0)) for o in results.values()]),
             ("GPU-seconds held", [fmt(gpu_seconds(o.series), 0) for o in results.values()]),
             ("pods ever unschedulable", [str(len(o.unschedulable)) for o in results.values()]),
             ("workloads left waiting at the end", [str(len(arrived) - len(o.bound_at)) for o in results.values()]),
             ("placements/s in the burst", [fmt(burst_rate(arrived, o.bound_at, burst), 2) for o in results.values()]),
             ("s until the last placement", [fmt(max(o.bound_at.values(), default=None)) for o in results.values()]),
             ("p95 create lag after arrival, s", [fmt(percentile(o.created_late, 95), 2) for o in results.values()]),
             ("peak RSS, MiB", [fmt(o.rss_mib, 0) for o in results.values()])]
    both = {"placer", "multikueue"} <= set(systems)
    head = f"| {len(arrived)} workloads, fleet {capacity} GPUs | " + " | ".join(systems) + \
        (" | placer / multikueue |" if both else " |")
    lines = [head, "|---" * (len(systems) + 1 + both) + "|"]
    for label, cells in rows:
        ratio = [quotient(cells[systems.index("placer")], cells[systems.index("multikueue")])] if both else []
        lines.append(f"| {label} | " + " | ".join(cells + ratio) + " |")
    return "\n".join(lines)


def quotient(a: str, b: str) -> str:
    """a / b of two cells of the table when both are numbers (the ratio column), else empty."""
    try:
        x, y = float(a.replace(",", "")), float(b.replace(",", ""))
    except ValueError:
        return ""
    return f"{x / y:.2f}" if y else "-"


def offered(arrived: list[Arrival], step: float = 1.0) -> list[tuple[float, int]]:
    """GPUs the tasks would hold if each ran from its arrival, no wait: the demand over time."""
    end = max((a.at + a.run_for for a in arrived), default=0.0)
    return [(t * step, sum(a.gpus for a in arrived if a.at <= t * step < a.at + a.run_for))
            for t in range(int(end / step) + 2)]


def gpu_seconds(series: list[tuple[float, int]]) -> float:
    return sum((t1 - t0) * g for (t0, g), (t1, _) in zip(series, series[1:]))


COLOURS = {"placer": "#1f77b4", "multikueue": "#d62728", "multikueue-open": "#ff7f0e", "aggregate": "#2ca02c",
           "demand (no wait)": "#9a9a9a"}


def svg(results: dict[str, list[tuple[float, int]]], capacity: int, title: str) -> str:
    """GPUs held over time per system, beside the fleet's capacity: a plain SVG (no plotting library)."""
    w, h, left, bottom, top, right = 760, 380, 60, 40, 40, 130
    t_max = max((t for s in results.values() for t, _ in s), default=1.0) or 1.0
    g_max = max([capacity, *(g for s in results.values() for _, g in s)]) * 1.1

    def x(t: float) -> float:
        return left + (w - left - right) * t / t_max

    def y(g: float) -> float:
        return h - bottom - (h - bottom - top) * g / g_max

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
           f'font-size="12"><rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="20" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
           f'<text x="{(left + w - right) / 2}" y="{h - 8}" text-anchor="middle">seconds since the replay started</text>',
           f'<text x="14" y="{(top + h - bottom) / 2}" transform="rotate(-90 14 {(top + h - bottom) / 2})" '
           f'text-anchor="middle">GPUs held (bound, not finished)</text>']
    for i in range(6):
        t, g = t_max * i / 5, g_max * i / 5
        out.append(f'<text x="{x(t):.1f}" y="{h - bottom + 15}" text-anchor="middle">{t:.0f}</text>')
        out.append(f'<text x="{left - 6}" y="{y(g) + 4:.1f}" text-anchor="end">{g:.0f}</text>')
    out.append(f'<line x1="{left}" y1="{y(capacity):.1f}" x2="{w - right}" y2="{y(capacity):.1f}" stroke="gray" '
               f'stroke-dasharray="6,4"/><text x="{w - right + 6}" y="{y(capacity) + 4:.1f}">fleet {capacity}</text>')
    for k, (name, series) in enumerate(results.items()):
        colour = COLOURS.get(name, "black")
        points = " ".join(f"{x(t):.1f},{y(g):.1f}" for t, g in series)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>')
        out.append(f'<text x="{w - right + 6}" y="{top + 16 * k + 10}" fill="{colour}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def redraw(source: Path, target: Path) -> int:
    data = json.loads(source.read_text())
    arrived = [Arrival(**a) for a in data["arrivals"]]
    lines = {k: [tuple(p) for p in o["series"]] for k, o in data["systems"].items()}
    target.write_text(svg(lines | {"demand (no wait)": offered(arrived)}, data["capacity"],
                          f"GPUs held over time: {len(arrived)} trace tasks on {data['capacity']} GPUs"))
    return 0


# --- driver ------------------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--system", nargs="+", default=["placer", "multikueue", "aggregate"],
                    choices=["placer", "multikueue", "multikueue-open", "aggregate"])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--fleet-every", type=int, default=80, help="every k-th GPU node of the trace, per model")
    ap.add_argument("--start", type=int, default=DEFAULT_START, help="trace second of the first task")
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--burst", type=int, default=40, help="the first N tasks arrive together at t = 0")
    ap.add_argument("--arrival-factor", type=float, default=400.0)
    ap.add_argument("--duration-factor", type=float, default=10.0)
    ap.add_argument("--min-run", type=float, default=10.0)
    ap.add_argument("--max-run", type=float, default=120.0)
    ap.add_argument("--high-share", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--settle", type=float, default=60.0, help="s after the last arrival and placement: end")
    ap.add_argument("--out", help="JSON of every system's series and waits")
    ap.add_argument("--svg", help="the picture of GPUs held over time")
    ap.add_argument("--dir", help="where the environments go (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--redraw", metavar="JSON", help="only draw --svg again from a run's --out file")
    args = ap.parse_args(argv)
    if args.redraw:
        return redraw(Path(args.redraw), Path(args.svg or "replay.svg"))
    workers = [f"w{i}" for i in range(args.workers)]
    scenario = peers.trace(workers, random.Random(args.seed), 1 / args.fleet_every)
    scenario.name = "replay"
    arrived = arrivals(read_tasks(peers.TRACE / "openb_pod_list_default.csv"), start=args.start, count=args.tasks,
                       burst=args.burst, arrival_factor=args.arrival_factor, duration_factor=args.duration_factor,
                       min_run=args.min_run, max_run=args.max_run, high_share=args.high_share, seed=args.seed)
    scenario.loads = [load_of(a) for a in arrived]
    capacity = sum(p.count * p.gpus for p in scenario.pools)
    base = Path(args.dir or tempfile.mkdtemp(prefix="replay-"))
    print(f"# replay: {len(arrived)} tasks ({sum(a.gpus for a in arrived)} GPUs, "
          f"{sum(a.gpus * a.run_for for a in arrived):,.0f} GPU-s, "
          f"{sum(a.priority == HIGH for a in arrived)} high) from trace second {args.start}, "
          f"{sum(p.count for p in scenario.pools)} nodes / {capacity} GPUs on {args.workers} workers, arrivals "
          f"/{args.arrival_factor:g} over {max(a.at for a in arrived):.0f} s, runs /{args.duration_factor:g} in "
          f"[{args.min_run:g}, {args.max_run:g}] s, burst {args.burst}, seed {args.seed}, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    results: dict[str, Observed] = {}
    for system in args.system:
        try:
            started = time.monotonic()
            results[system] = run_system(system, arrived, scenario, workers, base, args.settle, args.keep)
            print(f"  {system}: {len(results[system].bound_at)}/{len(arrived)} bound, run "
                  f"{time.monotonic() - started:.0f} s, load average {os.getloadavg()[0]:.1f}", file=sys.stderr,
                  flush=True)
        except (RuntimeError, OSError) as e:
            print(f"  {system} failed: {str(e)[-400:]}", file=sys.stderr, flush=True)
    if not results:
        return 1
    print(report(arrived, results, args.burst, capacity), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"capacity": capacity, "arrivals": [a.__dict__ for a in arrived],
             "systems": {k: {"bound_at": o.bound_at, "series": o.series, "unschedulable": sorted(o.unschedulable),
                             "created_late": o.created_late, "rss_mib": o.rss_mib, "end": o.end}
                         for k, o in results.items()}}, indent=1) + "\n")
    if args.svg:
        lines = {k: o.series for k, o in results.items()} | {"demand (no wait)": offered(arrived)}
        Path(args.svg).write_text(svg(lines, capacity,
                                      f"GPUs held over time: {len(arrived)} trace tasks on {capacity} GPUs"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
