"""CPU seconds of `solve`'s greedy phase alone, in process: prepare, then the seed greedy,
`_best_baseline` and `legalize` as `placer.solve.solve` runs them, without a deadline, N times on
the same input (read once), with a hash of the result (the same hash: the same greedy plan).
DATADIR holds `workloads/` and `clusters.yaml` (as for benchmarks/plan_cpu.py). With a third
argument, one run under cProfile sorted by it (e.g. tottime).

usage: PYTHONPATH=TREE python benchmarks/greedy_phase.py DATADIR N [SORT]"""
import cProfile
import hashlib
import pstats
import sys
import time

import placer.ops.plan as OP
import placer.solve as S
from placer.solve.greedy import greedy
from placer.solve.problem import prepare

got: dict = {}
real = S.solve


def capture(fleet, groups, **kw):
    got.update(fleet=fleet, groups=groups, kw=kw)
    raise SystemExit


for mod in list(sys.modules.values()):
    if getattr(mod, "solve", None) is real:
        mod.solve = capture
d, n = sys.argv[1], int(sys.argv[2])
try:
    OP.plan_files([d + "/workloads"], clusters=d + "/clusters.yaml", time_limit=10000.0)
except SystemExit:
    pass
fleet, groups, kw = got["fleet"], got["groups"], got["kw"]
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


if len(sys.argv) > 3:
    prof = cProfile.Profile()
    prof.enable()
    once()
    prof.disable()
    pstats.Stats(prof).sort_stats(sys.argv[3]).print_stats(40)
    sys.exit()
res = [once() for _ in range(n)]
greedy_s = sorted(r[1] for r in res)
print({"prepare": round(min(r[0] for r in res), 3), "greedy_best": round(greedy_s[0], 3),
       "greedy_median": round(greedy_s[len(greedy_s) // 2], 3), "all": [round(r[1], 3) for r in res],
       "hash": res[0][2], "same": len({r[2] for r in res}) == 1})
