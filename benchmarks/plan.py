"""Placement benchmark: placer's solver against greedy baselines and the LP bound, and
`placer plan --dry-run -o json` end to end on the same scenario written as YAML.

    python3 benchmarks/plan.py [--scenario NAME ...] [--time-limit S] [--workers N] [--effort E]
                               [--e2e NAME ...] [--runs N]

Per scenario: workloads, nodes, solve seconds, GPUs placed by placer; by an
aggregate-capacity greedy (one workload at a time, in arrival order, onto the cluster
with the most free GPUs, as today's multi-cluster tools do) with how many of its
placements would not fit at node level and the GPUs that really fit; by a node-level
greedy first-fit-decreasing; and the LP relaxation's upper bound.
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

from ortools.linear_solver import pywraplp  # noqa: E402

from generate import (FleetSpec, MixSpec, make_fleet, make_workloads, write_clusters_file,  # noqa: E402
                      write_manifests)
from placer import solve as S  # noqa: E402
from placer.solve import model as M, policy as P, problem as PR  # noqa: E402

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
        if PR.try_place(states[c], g) is None:
            misfits += 1
        else:
            real += g.gpus
    return claimed, misfits, real


def lp_bound(fleet, groups) -> float:
    problem = PR.prepare(fleet, groups)
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


def run(name: str, time_limit: float, workers: int, effort: float) -> dict:
    fspec, mspec = SCENARIOS[name]
    fleet = make_fleet(fspec, seed=1)
    groups = make_workloads(mspec, seed=2)
    t = time.monotonic()
    plan = S.solve(fleet, groups, time_limit=time_limit, workers=workers, effort=effort)
    secs = time.monotonic() - t
    greedy = S.solve(fleet, groups, use_solver=False)
    claimed, misfits, real = aggregate_greedy(fleet, groups)
    bound = lp_bound(fleet, groups)
    nodes = sum(len(c.nodes) for c in fleet.clusters)
    free = sum(n.free("nvidia.com/gpu") for c in fleet.clusters for n in c.nodes)
    return dict(scenario=name, workloads=len(groups), nodes=nodes, free=free,
                demand=plan.summary.gpus_requested, seconds=secs, status=plan.summary.status,
                placer=plan.summary.gpus_placed, agg_claimed=claimed, agg_misfits=misfits, agg_real=real,
                ffd=greedy.summary.gpus_placed, lp=bound, limit=plan.summary.time_limit_hit)


def end_to_end(name: str, runs: int, extra: list[str]) -> None:
    """The real CLI in a subprocess on the scenario as files: wall seconds and phases."""
    from placer.catalog import load_catalog
    from placer.manifests import classify, group, read_documents

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=S.DEFAULT_WORKERS)
    ap.add_argument("--effort", type=float, default=S.DEFAULT_EFFORT)
    ap.add_argument("--e2e", action="append", choices=sorted(SCENARIOS), help="end-to-end CLI runs (default: large)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-e2e", action="store_true")
    args = ap.parse_args()
    names = args.scenario or list(SCENARIOS)
    print(f"# solver: time limit {args.time_limit}s, effort {args.effort}, workers {args.workers}, "
          f"load average {os.getloadavg()[0]:.1f}")
    head = ("scenario", "workloads", "nodes", "free GPUs", "demand", "solve s", "status", "placer",
            "agg-greedy claimed (misfit/real)", "node FFD", "LP bound", "placer/LP")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name in names:
        r = run(name, args.time_limit, args.workers, args.effort)
        print(f"| {r['scenario']} | {r['workloads']} | {r['nodes']} | {r['free']} | {r['demand']} | "
              f"{r['seconds']:.2f} | {r['status']}{' (time limit)' if r['limit'] else ''} | {r['placer']} | "
              f"{r['agg_claimed']} ({r['agg_misfits']} misfit / {r['agg_real']} real) | {r['ffd']} | "
              f"{r['lp']:.0f} | {r['placer'] / r['lp'] if r['lp'] else 1:.3f} |", flush=True)
    if not args.no_e2e:
        for name in args.e2e or ["large"]:
            end_to_end(name, args.runs, [])


if __name__ == "__main__":
    main()
