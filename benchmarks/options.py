"""What would make it fit: the cost of the options search beside the plan it explains.

    python3 benchmarks/options.py [--scenario NAME ...] [--time-limit S]

Per scenario of benchmarks/plan.py, and a "live" variant where every other workload already
runs where a first plan put it (running workloads of their priority, so that preempt and wait
options exist) and the rest is planned:
unplaced groups, seconds of the plan (the baseline, measured in the same run), seconds of the
options search with the rest of the time limit as its deadline, their ratio, re-solves made,
options offered per kind, and groups whose search the time limit or the budget cut short.
Whether plan + options stayed within the time limit is the last column.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from generate import GPU, make_fleet, make_workloads  # noqa: E402
from plan import GPU_NAMES, SCENARIOS  # noqa: E402

from placer import solve as S  # noqa: E402
from placer.ops.plan import OPTIONS_END  # noqa: E402
from placer.solve.options import Running, what_would_fit  # noqa: E402


def half_running(fleet, groups, gpu_names):
    """The fleet after every other group of a first plan started running: their pods' demand
    on the plan's nodes, as running workloads of their priority; the rest still to plan."""
    from dataclasses import replace

    from placer.model.fleet import Fleet
    from placer.solve.scheduling import pod_demand
    first = S.solve(fleet, groups, time_limit=10, gpu_resources=gpu_names)
    by_key = {g.key: g for g in groups}
    started = {g.key for i, g in enumerate(groups) if i % 2 == 0}
    used: dict = {}
    running = []
    for p in first.placements:
        if p.group not in started:
            continue
        w = next(w for w in by_key[p.group].workloads if w.key == p.workload)
        insts = {i.key: i for i in w.instances}
        usage: dict = {}
        for node, counts in p.nodes.items():
            for ikey, n in counts.items():
                for r, v in pod_demand(insts[ikey].pod).items():
                    usage.setdefault(node, {})[r] = usage.get(node, {}).get(r, 0) + v * n
                    used.setdefault((p.cluster, node), {})[r] = used.get((p.cluster, node), {}).get(r, 0) + v * n
        running.append(Running(p.workload, p.kind, p.cluster, p.priority, usage))
    clusters = []
    for c in fleet.clusters:
        nodes = []
        for n in c.nodes:
            extra = used.get((c.name, n.name), {})
            nodes.append(replace(n, used={r: n.used.get(r, 0) + extra.get(r, 0) for r in {*n.used, *extra}}))
        clusters.append(replace(c, nodes=tuple(nodes)))
    return Fleet(tuple(clusters), fleet.taken_at), [g for g in groups if g.key not in started], running


def run(name: str, live: bool, time_limit: float) -> dict:
    fspec, mspec = SCENARIOS[name]
    gpu_names = GPU_NAMES.get(name, (GPU,))
    fleet, groups = make_fleet(fspec, seed=1), make_workloads(mspec, seed=2)
    running: list[Running] = []
    if live:
        fleet, groups, running = half_running(fleet, groups, gpu_names)
    started = time.monotonic()
    plan = S.solve(fleet, groups, time_limit=time_limit, gpu_resources=gpu_names)
    plan_s = time.monotonic() - started
    solves = [0]

    def counting(*a, **kw):
        solves[0] += 1
        return S.solve(*a, **kw)
    t = time.monotonic()
    found = what_would_fit(fleet, groups, plan, running=running, gpu_resources=gpu_names,
                           deadline=started + time_limit * OPTIONS_END, solve=counting)
    opt_s = time.monotonic() - t
    kinds = Counter(o.kind for v in found.values() for o in v.options)
    cut = Counter(v.incomplete for v in found.values() if v.incomplete)
    return dict(scenario=name + (" (live)" if live else ""), unplaced=len(found), plan=plan_s, options=opt_s,
                solves=solves[0], kinds=kinds, cut=cut, within=plan_s + opt_s <= time_limit)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    names = args.scenario or ["small-exact", "fragmented", "priority-contention", "heterogeneous", "large"]
    head = ("scenario", "unplaced", "plan s", "options s", "x plan", "re-solves", "preempt", "wait", "add-nodes",
            "relax", "cut short", "within limit")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name in names:
        for live in (False, True):
            r = run(name, live, args.time_limit)
            k = r["kinds"]
            cut = ", ".join(f"{n} ({why})" for why, n in sorted(r["cut"].items())) or "0"
            row = (r["scenario"], r["unplaced"], f"{r['plan']:.2f}", f"{r['options']:.2f}",
                   f"{r['options'] / max(r['plan'], 1e-3):.1f}", r["solves"], k["preempt"], k["wait"],
                   k["add-nodes"], k["relax"], cut, "yes" if r["within"] else "no")
            print("| " + " | ".join(map(str, row)) + " |", flush=True)


if __name__ == "__main__":
    main()
