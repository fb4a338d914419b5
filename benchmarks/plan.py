"""Placement benchmark: placer's solver against greedy baselines and the LP bound.

    python3 benchmarks/plan.py [--scenario NAME ...] [--time-limit S] [--workers N]

Per scenario: workloads, nodes, solve seconds, GPUs placed by placer; by an
aggregate-capacity greedy (one workload at a time, in arrival order, onto the cluster
with the most free GPUs, as today's multi-cluster tools do) with how many of its
placements would not fit at node level and the GPUs that really fit; by a node-level
greedy first-fit-decreasing; and the LP relaxation's upper bound.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from ortools.linear_solver import pywraplp  # noqa: E402

from generate import FleetSpec, MixSpec, make_fleet, make_workloads  # noqa: E402
from placer import solver as S  # noqa: E402

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
    problem = S.prepare(fleet, groups)
    free = {c: sum(n.free("nvidia.com/gpu") for n in cl.nodes if n.schedulable)
            for c, cl in enumerate(fleet.clusters) if cl.reachable}
    states = problem.state()
    claimed = misfits = real = 0
    names = {x.name: i for i, x in enumerate(fleet.clusters)}
    for g in problem.groups:                      # arrival order
        ok = [c for c, cl in enumerate(fleet.clusters)
              if cl.reachable and S._policy_reason(g, cl, names) is None]
        ok = [c for c in ok if free[c] >= g.gpus]
        if not ok:
            continue
        c = max(ok, key=lambda c: (free[c], -c))
        free[c] -= g.gpus
        claimed += g.gpus
        if S.try_place(states[c], g) is None:
            misfits += 1
        else:
            real += g.gpus
    return claimed, misfits, real


def lp_bound(fleet, groups) -> float:
    problem = S.prepare(fleet, groups)
    cand = [g for g in problem.groups if g.eligible]
    agg = S.build_aggregate(problem, cand)
    lp = pywraplp.Solver.CreateSolver("GLOP")
    vs = [lp.NumVar(lo, hi, "") for lo, hi in zip(agg.lb, agg.ub)]
    for terms, lo, hi in agg.cons:
        ct = lp.Constraint(-lp.infinity() if lo <= -S.INF else lo, hi)
        for a, v in terms:
            ct.SetCoefficient(vs[v], ct.GetCoefficient(vs[v]) + a)
    obj = lp.Objective()
    for sg in agg.sigs:
        for c in sg.rep.eligible:
            obj.SetCoefficient(vs[agg.z[(sg.index, c)]], sg.rep.gpus)
    obj.SetMaximization()
    lp.Solve()
    return obj.Value()


def run(name: str, time_limit: float, workers: int) -> dict:
    fspec, mspec = SCENARIOS[name]
    fleet = make_fleet(fspec, seed=1)
    groups = make_workloads(mspec, seed=2)
    t = time.monotonic()
    plan = S.solve(fleet, groups, time_limit=time_limit, workers=workers)
    secs = time.monotonic() - t
    greedy = S.solve(fleet, groups, use_solver=False)
    claimed, misfits, real = aggregate_greedy(fleet, groups)
    bound = lp_bound(fleet, groups)
    nodes = sum(len(c.nodes) for c in fleet.clusters)
    free = sum(n.free("nvidia.com/gpu") for c in fleet.clusters for n in c.nodes)
    return dict(scenario=name, workloads=len(groups), nodes=nodes, free=free,
                demand=plan.summary.gpus_requested, seconds=secs, status=plan.summary.status,
                placer=plan.summary.gpus_placed, agg_claimed=claimed, agg_misfits=misfits, agg_real=real,
                ffd=greedy.summary.gpus_placed, lp=bound)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    ap.add_argument("--time-limit", type=float, default=8.0)
    ap.add_argument("--workers", type=int, default=S.DEFAULT_WORKERS)
    args = ap.parse_args()
    names = args.scenario or list(SCENARIOS)
    head = ("scenario", "workloads", "nodes", "free GPUs", "demand", "solve s", "status", "placer",
            "agg-greedy claimed (misfit/real)", "node FFD", "LP bound", "placer/LP")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name in names:
        r = run(name, args.time_limit, args.workers)
        print(f"| {r['scenario']} | {r['workloads']} | {r['nodes']} | {r['free']} | {r['demand']} | "
              f"{r['seconds']:.2f} | {r['status']} | {r['placer']} | "
              f"{r['agg_claimed']} ({r['agg_misfits']} misfit / {r['agg_real']} real) | {r['ffd']} | "
              f"{r['lp']:.0f} | {r['placer'] / r['lp'] if r['lp'] else 1:.3f} |", flush=True)


if __name__ == "__main__":
    main()
