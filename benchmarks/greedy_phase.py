"""CPU seconds of `solve`'s greedy phase alone, in process: prepare, then the seed greedy,
`_best_baseline` and `legalize` as `placer.solve.solve` runs them, without a deadline, N times on
the same input (read once), with a hash of the result (the same hash: the same greedy plan).
DATADIR holds `workloads/` and `clusters.yaml` (as for benchmarks/plan_cpu.py). With a third
argument, one run under cProfile sorted by it (e.g. tottime).

With --solve: the whole `solve` instead, without a deadline, N times: CPU seconds per phase
(best of the runs), the total's best and median, and a hash of the plan without its timings
(the same hash: the same plan and reasons).

usage: PYTHONPATH=TREE python benchmarks/greedy_phase.py DATADIR N [SORT] [--solve]"""
import cProfile
import hashlib
import json
import pstats
import sys
import time

from callgrind_common import solve_inputs
from cpu_laps import cpu_clock

import placer.solve as S
from placer.solve.greedy import greedy
from placer.solve.problem import prepare

whole = "--solve" in sys.argv
argv = [a for a in sys.argv if a != "--solve"]
d, n = argv[1], int(argv[2])
fleet, groups, kw, real = solve_inputs(d)
P = time.process_time


def once() -> tuple[float, float, str]:
    t = P()
    gs, families = S.spread_expand(fleet, groups)
    problem = prepare(fleet, gs, kw.get("committed", ()), kw.get("gpu_resources", S.GPU_RESOURCES))
    problem, _, _ = S._take_committed(problem)
    S.spread_tag(problem, families)
    t1 = P()
    rank = S._Rank(problem, {g.index: g for g in problem.groups}, len(problem.groups) + 1, tuple(families))
    far = time.monotonic() + 1e6
    run = S._Run(far, far, 1, 0, S.DEFAULT_EFFORT, None, False)
    work = problem.state()
    seed_plan = greedy(problem, work)
    candidates = [g for g in problem.groups if g.eligible]
    searched = S._model_size(problem, candidates, S.MODEL_MAX_VARS) <= S.MODEL_MAX_VARS
    result = S.legalize(problem, S._best_baseline(problem, seed_plan, work, rank, run, searched), families)
    t2 = P()
    seen = repr(sorted(result.items())) + repr(sorted((c, st.free_gpus, st.gpu) for c, st in work.items()))
    return t1 - t, t2 - t1, hashlib.sha256(seen.encode()).hexdigest()[:12]


cpu: dict[str, float] = {}


Clock = cpu_clock(S._Clock, cpu)


def whole_solve() -> tuple[float, float, str]:
    cpu.clear()
    t = P()
    plan = real(fleet, groups, **{**kw, "time_limit": 10000.0})
    spent = P() - t
    doc = plan.to_dict()
    for k in ("solveSeconds", "timings"):
        doc["summary"].pop(k, None)
    return 0.0, spent, hashlib.sha1(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:10]


if whole:
    S._Clock = Clock
    once = whole_solve      # noqa: F811
if len(argv) > 3:
    prof = cProfile.Profile()
    prof.enable()
    once()
    prof.disable()
    pstats.Stats(prof).sort_stats(argv[3]).print_stats(40)
    sys.exit()
res, phases = [], []
for _ in range(n):
    res.append(once())
    phases.append(dict(cpu))
greedy_s = sorted(r[1] for r in res)
what = "solve" if whole else "greedy"
print({"prepare": round(min(r[0] for r in res), 3), f"{what}_best": round(greedy_s[0], 3),
       f"{what}_median": round(greedy_s[len(greedy_s) // 2], 3), "all": [round(r[1], 3) for r in res],
       "hash": res[0][2], "same": len({r[2] for r in res}) == 1})
if whole:
    print({"phases_best": {k: round(min(p.get(k, 0.0) for p in phases), 3) for k in phases[0]}})
