"""Placement benchmark: placer's solver against greedy baselines and the LP bound, and
`placer plan --dry-run -o json` end to end on the same scenario written as YAML.

    python3 benchmarks/plan.py [--scenario NAME ...]   (--scenario topology|preference: benchmarks/topology.py, preference.py) [--time-limit S] [--workers N] [--effort E]
                               [--e2e NAME ...] [--runs N] [--no-e2e] [--levels NAME ...]
                               [--check-reasons NAME ...] [--scale NAME ...]

Per scenario: workloads, nodes, solve seconds, GPUs placed by placer; by an
aggregate-capacity greedy (one workload at a time, in arrival order, onto the cluster
with the most free GPUs, as today's multi-cluster tools do) with how many of its
placements would not fit at node level and the GPUs that really fit; by a node-level
greedy first-fit-decreasing; and the LP relaxation's upper bound. Then, per scenario,
placer against the three node-level greedy baselines (arrival order, first-fit
decreasing, priority-then-size) lexicographically by priority; per priority level for
`--levels` scenarios; every reason checked by the test suite's independent judge
(tests/solve/oracle.py) for `--check-reasons` scenarios; and end to end at scale (`--scale`):
wall seconds and peak memory of `placer plan -o json`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from generate import GPU, MIG, FleetSpec, MixSpec, make_fleet, make_workloads, write_clusters_file, write_manifests  # noqa: E402
from ortools.linear_solver import pywraplp  # noqa: E402

from placer import solve as S  # noqa: E402
from placer.solve import model as M  # noqa: E402
from placer.solve import policy as P
from placer.solve import problem as PR
from placer.solve.greedy import BASELINES  # noqa: E402
from placer.solve.greedy import greedy as greedy_plan
from placer.solve.state import try_place  # noqa: E402

SCENARIOS = {
    # <= 50 workloads, <= 200 nodes: must be proven optimal
    "small-exact": (FleetSpec(clusters=3, nodes=40, fragmentation=0.4),
                    MixSpec(workloads=45, max_size=64, size_weights=(6, 6, 8, 10, 10, 8, 6))),
    # most nodes partly used: aggregate free GPUs look plentiful, blocks are small
    "fragmented": (FleetSpec(clusters=4, nodes=100, fragmentation=0.85),
                   MixSpec(workloads=150, size_weights=(2, 3, 8, 15, 20, 20, 12, 5))),
    # three priority levels, demand ~2x supply
    "priority-contention": (FleetSpec(clusters=3, nodes=64, fragmentation=0.3),
                            MixSpec(workloads=120, priorities=(0, 100, 1000), priority_weights=(5, 3, 2))),
    # 1,000 workloads; 20 clusters x 500 nodes x 8 GPUs; demand above supply
    "large": (FleetSpec(clusters=20, nodes=500, fragmentation=0.5),
              MixSpec(workloads=1000, size_weights=(1, 1, 2, 3, 5, 10, 30, 70),
                      priorities=(0, 100), priority_weights=(4, 1))),
    # H100/A100/L40S pools, MIG pools (counted through --gpu-resource), tainted clusters,
    # product selectors, 12 priority levels, pins and cluster selectors
    "heterogeneous": (FleetSpec(clusters=8, nodes=120, fragmentation=0.4, products=3, tainted=0.3, mig=0.5),
                      MixSpec(workloads=400, priorities=tuple(range(0, 120, 10)), priority_weights=(1,) * 12,
                              products=3, product_pinned=0.3, tolerating=0.4, selector_share=0.1,
                              mig=0.1, pinned=0.05, clusters=8)),
    # CPU binds before GPUs: 64-CPU 8-GPU nodes, 20 CPU per GPU, a third of the work CPU-only
    "cpu-bound": (FleetSpec(clusters=4, nodes=60, fragmentation=0.3, cpu=64),
                  MixSpec(workloads=200, size_weights=(5, 5, 8, 6, 3, 1, 0, 0), cpu_per_gpu=20, cpu_only=0.3,
                          cpu_zero=16, priorities=(0, 50, 100), priority_weights=(3, 2, 1))),
}
GPU_NAMES = {"heterogeneous": (GPU, MIG)}
ORDERS = ("arrival", "ffd", "priority")          # the baselines' columns, in this order
LARGE_MIX = MixSpec(workloads=1000, size_weights=(1, 1, 2, 3, 5, 10, 30, 70), priorities=(0, 100),
                    priority_weights=(4, 1))
# the scale targets, end to end: (fleet, mix, target seconds)
SCALE = {
    "4000-on-50000-node-groups": (FleetSpec(clusters=50, nodes=1000, fragmentation=0.5),
                                  MixSpec(workloads=4000, size_weights=(1, 1, 2, 3, 5, 10, 30, 70),
                                          priorities=(0, 100), priority_weights=(4, 1)), 10.0),
    "1000-on-10000-one-class-per-node": (FleetSpec(clusters=20, nodes=490, fragmentation=0.5, distinct=True),
                                         LARGE_MIX, 10.0),
    "1000-on-10000-node-groups": (FleetSpec(clusters=20, nodes=490, fragmentation=0.5), LARGE_MIX, 2.0),
    # issue 24 item 3: 100 clusters x ~1,000 nodes (node groups), 10,000 workloads of every kind
    "10000-on-100000-node-groups": (FleetSpec(clusters=100, nodes=980, fragmentation=0.5),
                                    MixSpec(workloads=10000, size_weights=(1, 1, 2, 3, 5, 10, 30, 70),
                                            priorities=(0, 100), priority_weights=(4, 1)), 30.0),
}


def aggregate_greedy(fleet, groups) -> tuple[int, int, int]:
    """(GPUs claimed, placements that do not fit at node level, GPUs that really fit)."""
    problem = PR.prepare(fleet, groups)
    free = {c: sum(n.free("nvidia.com/gpu") for n in cl.nodes if n.schedulable)
            for c, cl in enumerate(fleet.clusters) if cl.reachable}
    states = problem.state()
    claimed = misfits = real = 0
    names = {x.name: i for i, x in enumerate(fleet.clusters)}
    for g in problem.groups:                      # arrival order
        ok = [c for c, cl in enumerate(fleet.clusters)
              if cl.reachable and P.policy_reason(g, cl, names) is None]
        ok = [c for c in ok if free[c] >= g.gpus]
        if not ok:
            continue
        c = max(ok, key=lambda c: (free[c], -c))
        free[c] -= g.gpus
        claimed += g.gpus
        if try_place(states[c], g) is None:
            misfits += 1
        else:
            real += g.gpus
    return claimed, misfits, real


def lp_bound(fleet, groups, gpu_names=(GPU,)) -> float:
    problem = PR.prepare(fleet, groups, gpu_resources=gpu_names, node_exact=False)
    cand = [g for g in problem.groups if g.eligible]
    agg = M.build_aggregate(problem, cand)
    lp = pywraplp.Solver.CreateSolver("GLOP")
    vs = [lp.NumVar(lo, hi, "") for lo, hi in zip(agg.lb, agg.ub)]
    for terms, lo, hi in agg.cons:
        ct = lp.Constraint(-lp.infinity() if lo <= -M.INF else lo, hi)
        for a, v in terms:
            ct.SetCoefficient(vs[v], ct.GetCoefficient(vs[v]) + a)
    obj = lp.Objective()
    for sg in agg.sigs:
        for c in sg.rep.eligible:
            obj.SetCoefficient(vs[agg.z[(sg.index, c)]], sg.rep.gpus)
    obj.SetMaximization()
    lp.Solve()
    return obj.Value()


def by_level(problem, placed) -> dict[int, tuple[int, int]]:
    """Priority -> (GPUs placed, groups placed)."""
    out: dict[int, tuple[int, int]] = {g.priority: (0, 0) for g in problem.groups}
    for g in problem.groups:
        if g.index in placed:
            a, b = out[g.priority]
            out[g.priority] = (a + g.gpus, b + 1)
    return out


def lex(levels: dict[int, tuple[int, int]]) -> tuple:
    return tuple(levels[p] for p in sorted(levels, reverse=True))


def baselines(fleet, groups, gpu_names) -> dict[str, dict[int, tuple[int, int]]]:
    """Node-level greedy plans as placer computes them, unrepaired: per priority level."""
    problem = PR.prepare(fleet, groups, gpu_resources=gpu_names, node_exact=False)
    return {name: by_level(problem, greedy_plan(problem, problem.state(), order=order))
            for name, order in BASELINES.items()}


def plan_levels(fleet, groups, plan, gpu_names) -> dict[int, tuple[int, int]]:
    problem = PR.prepare(fleet, groups, gpu_resources=gpu_names, node_exact=False)
    placed_groups = {p.group for p in plan.placements}
    return by_level(problem, {g.index for g in problem.groups if g.key in placed_groups})


def run(name: str, time_limit: float, workers: int, effort: float) -> dict:
    fspec, mspec = SCENARIOS[name]
    gpu_names = GPU_NAMES.get(name, (GPU,))
    fleet = make_fleet(fspec, seed=1)
    groups = make_workloads(mspec, seed=2)
    t = time.monotonic()
    plan = S.solve(fleet, groups, time_limit=time_limit, workers=workers, effort=effort, gpu_resources=gpu_names)
    secs = time.monotonic() - t
    greedy = S.solve(fleet, groups, use_solver=False, gpu_resources=gpu_names)
    claimed, misfits, real = aggregate_greedy(fleet, groups)
    bound = lp_bound(fleet, groups, gpu_names)
    nodes = sum(len(c.nodes) for c in fleet.clusters)
    free = sum(n.free("nvidia.com/gpu") for c in fleet.clusters for n in c.nodes)
    return dict(scenario=name, workloads=len(groups), nodes=nodes, free=free,
                demand=plan.summary.gpus_requested, seconds=secs, status=plan.summary.status,
                placer=plan.summary.gpus_placed, agg_claimed=claimed, agg_misfits=misfits, agg_real=real,
                ffd=greedy.summary.gpus_placed, lp=bound, limit=plan.summary.time_limit_hit,
                levels=plan_levels(fleet, groups, plan, gpu_names), base=baselines(fleet, groups, gpu_names),
                plan=plan, fleet=fleet, groups=groups)


def end_to_end(name: str, runs: int, extra: list[str]) -> None:
    """The real CLI in a subprocess on the scenario as files: wall seconds and phases."""
    from placer.definitions.catalog import load_catalog
    from placer.inputs.manifests import classify, group, read_documents

    fspec, mspec = SCENARIOS[name]
    with tempfile.TemporaryDirectory() as tmp:
        wdir, cfile = os.path.join(tmp, "workloads"), os.path.join(tmp, "clusters.yaml")
        files = write_manifests(mspec, wdir, seed=2)
        write_clusters_file(fspec, cfile, seed=1)
        # in-process split of loading: YAML parsing vs interpretation (jq)
        t0 = time.monotonic()
        catalog = load_catalog()
        t1 = time.monotonic()
        docs = read_documents([wdir])
        t2 = time.monotonic()
        groups = group(classify(docs, catalog))
        t3 = time.monotonic()
        bound = lp_bound(make_fleet(fspec, seed=1), groups)
        print(f"\n# end to end: {name} as {len(files)} files (every catalog kind), "
              f"{sum(len(c.nodes) for c in make_fleet(fspec, seed=1).clusters)} simulated nodes")
        print(f"in-process loading: catalog {t1 - t0:.3f}s; parse {len(docs)} documents {t2 - t1:.3f}s; "
              f"interpret + group {t3 - t2:.3f}s ({(t3 - t2) / max(1, len(groups)) * 1000:.2f} ms/workload); "
              f"LP bound on these workloads {bound:.0f}")
        cmd = [sys.executable, "-m", "placer", "plan", "--dry-run", "-f", wdir, "--clusters", cfile,
               "-o", "json", "--timings", *extra]
        print("command: placer plan --dry-run -f DIR --clusters FILE -o json --timings " + " ".join(extra))
        phases = ("clusters", "catalog", "load", "fleet", "prepare", "greedy", "model", "cpsat", "decode",
                  "explain", "verify", "render")
        print("| run | wall s | exit | " + " | ".join(phases) + " | placed GPUs | placer/LP | status | limit hit |")
        print("|" + "---|" * (len(phases) + 8))
        results = []
        for i in range(runs):
            t = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.monotonic() - t
            doc = json.loads(proc.stdout)
            line = next(x for x in proc.stderr.splitlines() if x.startswith("timings:"))
            tm = dict(kv.split("=") for kv in line.removeprefix("timings: ").split())
            sm = doc["summary"]
            results.append((wall, sm["gpusPlaced"], json.dumps(doc["placements"], sort_keys=True)))
            print(f"| {i + 1} | {wall:.2f} | {proc.returncode} | "
                  + " | ".join(tm.get(p, "-").rstrip("s") for p in phases)
                  + f" | {sm['gpusPlaced']} | {sm['gpusPlaced'] / bound:.3f} | {sm['status']} | {sm['timeLimitHit']} |",
                  flush=True)
        walls = sorted(r[0] for r in results)
        print(f"wall: min {walls[0]:.2f}s median {walls[len(walls) // 2]:.2f}s max {walls[-1]:.2f}s; "
              f"identical plans across runs: {len({r[2] for r in results}) == 1}; "
              f"load average {os.getloadavg()[0]:.1f}")


def compare(results: list[dict]) -> None:
    print("\n# placer against the node-level greedy baselines, lexicographically by priority "
          "(per level, highest first: GPUs, then groups placed)")
    print("| scenario | levels | placer >= arrival | placer >= ffd | placer >= priority-then-size | "
          "levels where a baseline places more GPUs |")
    print("|---|---|---|---|---|---|")
    for r in results:
        mine = r["levels"]
        cells = ["yes" if lex(mine) >= lex(r["base"][n]) else "**no**" for n in ORDERS]
        worse = sorted({p for b in r["base"].values() for p in mine if b[p][0] > mine[p][0]}, reverse=True)
        print(f"| {r['scenario']} | {len(mine)} | " + " | ".join(cells) +
              f" | {', '.join(map(str, worse)) or 'none'} |")


def per_level(r: dict) -> None:
    print(f"\n# {r['scenario']}: GPUs placed per priority level (groups placed)")
    print("| priority | demand | placer | arrival | ffd | priority-then-size |")
    print("|---|---|---|---|---|---|")
    demand: dict[int, int] = {}
    problem = PR.prepare(r["fleet"], r["groups"], gpu_resources=GPU_NAMES.get(r["scenario"], (GPU,)),
                         node_exact=False)
    for g in problem.groups:
        demand[g.priority] = demand.get(g.priority, 0) + g.gpus
    for p in sorted(r["levels"], reverse=True):
        row = [r["levels"][p]] + [r["base"][n][p] for n in ORDERS]
        print(f"| {p} | {demand[p]} | " + " | ".join(f"{a} ({b})" for a, b in row) + " |")


def check_reasons(r: dict) -> None:
    """Every per-cluster reason of the plan, judged by tests/solve/oracle.py (exact, independent)."""
    from tests.solve import oracle as O
    O.GPUS = GPU_NAMES.get(r["scenario"], (GPU,))
    t = time.monotonic()
    bad = O.false_reasons(r["fleet"], r["groups"], r["plan"])
    strict = O.strict_priority_violations(r["fleet"], r["groups"], r["plan"])
    total = sum(len(u.reasons) for u in r["plan"].unplaced)
    print(f"\n# {r['scenario']}: reasons judged by tests/solve/oracle.py: {total} per-cluster reasons for "
          f"{len(r['plan'].unplaced)} unplaced workloads, {len(bad)} false; strict-priority violations: "
          f"{len(strict)} ({time.monotonic() - t:.0f}s)")
    for line in (bad + strict)[:10]:
        print("  " + line)


def scale(name: str, runs: int, extra: list[str]) -> None:
    """`placer plan -o json` in a subprocess on a scale scenario: wall seconds, peak memory."""
    fspec, mspec, target = SCALE[name]
    with tempfile.TemporaryDirectory() as tmp:
        wdir, cfile = os.path.join(tmp, "workloads"), os.path.join(tmp, "clusters.yaml")
        write_manifests(mspec, wdir, seed=2)
        write_clusters_file(fspec, cfile, seed=1)
        nodes = sum(len(c["nodes"]) if fspec.distinct else sum(g["count"] for g in c["nodes"])
                    for c in __import__("yaml").load(open(cfile), Loader=__import__("yaml").CSafeLoader)["clusters"])
        # printed at exit (placer's process ends by os._exit once its atexit handlers ran: no finally)
        wrapper = ("import atexit, resource, runpy, sys\nsys.argv = ['placer'] + sys.argv[1:]\n"
                   "atexit.register(lambda: print('maxrss_kb=%d' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,"
                   " file=sys.stderr))\nrunpy.run_module('placer', run_name='__main__')")
        cmd = [sys.executable, "-c", wrapper, "plan", "--dry-run", "-f", wdir, "--clusters", cfile, "-o", "json",
               "--timings", *extra]
        print(f"\n# scale: {name}: {mspec.workloads} workloads on {nodes} nodes, target <= {target:.0f} s end to end"
              f"{' (' + ' '.join(extra) + ')' if extra else ''}")
        print("| run | wall s | CPU s | exit | timings | placed GPUs | status | limit hit | peak MiB |")
        print("|---|---|---|---|---|---|---|---|---|")
        for i in range(runs):
            t, cpu = time.monotonic(), _child_cpu()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            wall, cpu = time.monotonic() - t, _child_cpu() - cpu
            try:
                sm = json.loads(proc.stdout)["summary"]
            except ValueError:
                print(proc.stderr[-2000:])
                raise
            tm = next((x for x in proc.stderr.splitlines() if x.startswith("timings:")), "")
            rss = next((int(x.split("=")[1]) for x in proc.stderr.splitlines() if x.startswith("maxrss_kb=")), 0)
            print(f"| {i + 1} | {wall:.2f} | {cpu:.2f} | {proc.returncode} | {tm.removeprefix('timings: ')} | "
                  f"{sm['gpusPlaced']} | {sm['status']} | {sm['timeLimitHit']} | {rss // 1024} |", flush=True)
        print(f"load average {os.getloadavg()[0]:.1f}")


def _child_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes: on a shared, loaded
    machine the wall clock measures the load as much as placer."""
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bytecode(compile_first: bool) -> str:
    """With `compile_first`, placer's modules compiled to bytecode first, as installing the
    wheel does (pip compiles by default): with PYTHONDONTWRITEBYTECODE set and no cache, every
    run compiles placer's ~25,000 lines again (about 0.25 s CPU; issue 24). Says which."""
    import compileall
    import importlib.util

    root = os.path.join(os.path.dirname(__file__), "..", "placer")
    if compile_first:
        compileall.compile_dir(root, quiet=1)
    cached = os.path.exists(importlib.util.cache_from_source(os.path.join(root, "solve", "__init__.py")))
    return ("bytecode: placer's modules compiled (as installed)" if cached else
            f"bytecode: none cached, compiled by every run (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})")


def import_floor() -> tuple[float, float]:
    """Wall and CPU seconds of `python -c "import placer.cli"`, the least any command costs (best of 3)."""
    walls, cpus = [], []
    for _ in range(3):
        t, cpu = time.monotonic(), _child_cpu()
        subprocess.run([sys.executable, "-c", "import placer.cli"], check=True)
        walls.append(time.monotonic() - t)
        cpus.append(_child_cpu() - cpu)
    return min(walls), min(cpus)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", action="append",
                    choices=sorted(SCENARIOS) + ["topology", "preference", "spread"],
                    help="`topology`: racks and NVLink cliques (benchmarks/topology.py); `preference`: "
                         "cluster cost and cluster-order (benchmarks/preference.py); `spread`: divided "
                         "and duplicated serving workloads (benchmarks/spread.py)")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=S.DEFAULT_WORKERS)
    ap.add_argument("--effort", type=float, default=S.DEFAULT_EFFORT)
    ap.add_argument("--e2e", action="append", choices=sorted(SCENARIOS), help="end-to-end CLI runs (default: large)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-e2e", action="store_true")
    ap.add_argument("--levels", action="append", choices=sorted(SCENARIOS), default=None,
                    help="per-priority table (default: heterogeneous when run)")
    ap.add_argument("--check-reasons", action="append", choices=sorted(SCENARIOS), default=[])
    ap.add_argument("--scale", action="append", choices=sorted(SCALE), default=[])
    ap.add_argument("--scale-at-target", action="store_true",
                    help="run each scale scenario with --time-limit set to its target")
    ap.add_argument("--compiled", action="store_true",
                    help="compile placer's modules to bytecode before the scale runs, as an installed wheel has them")
    args = ap.parse_args()
    names = args.scenario or list(SCENARIOS)
    print(f"# solver: time limit {args.time_limit}s, effort {args.effort}, workers {args.workers}, "
          f"load average {os.getloadavg()[0]:.1f}")
    if "topology" in names:
        import topology
        topology.run(args.time_limit, args.workers, args.effort)
        names = [n for n in names if n != "topology"]
        if not names:
            return
    if "preference" in names:
        import preference
        preference.run(args.time_limit, args.workers, args.effort)
        names = [n for n in names if n != "preference"]
        if not names:
            return
    if "spread" in names:
        import spread
        spread.run(args.time_limit, args.workers, args.effort)
        names = [n for n in names if n != "spread"]
        if not names:
            return
    head = ("scenario", "workloads", "nodes", "free GPUs", "demand", "solve s", "status", "placer",
            "agg-greedy claimed (misfit/real)", "node FFD", "LP bound", "placer/LP")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    results = []
    for name in names:
        r = run(name, args.time_limit, args.workers, args.effort)
        results.append(r)
        print(f"| {r['scenario']} | {r['workloads']} | {r['nodes']} | {r['free']} | {r['demand']} | "
              f"{r['seconds']:.2f} | {r['status']}{' (time limit)' if r['limit'] else ''} | {r['placer']} | "
              f"{r['agg_claimed']} ({r['agg_misfits']} misfit / {r['agg_real']} real) | {r['ffd']} | "
              f"{r['lp']:.0f} | {r['placer'] / r['lp'] if r['lp'] else 1:.4f} |", flush=True)
    compare(results)
    for r in results:
        if r["scenario"] in (args.levels if args.levels is not None else ["heterogeneous"]):
            per_level(r)
        if r["scenario"] in args.check_reasons:
            check_reasons(r)
    if not args.no_e2e:
        for name in args.e2e or ["large"]:
            end_to_end(name, args.runs, [])
    if args.scale:
        print("\n" + bytecode(args.compiled))
        wall, cpu = import_floor()
        print(f"import floor (python -c 'import placer.cli'): {wall:.2f} s wall, {cpu:.2f} s CPU")
    for name in args.scale:
        scale(name, args.runs, ["--time-limit", str(SCALE[name][2])] if args.scale_at_target else [])


if __name__ == "__main__":
    main()
