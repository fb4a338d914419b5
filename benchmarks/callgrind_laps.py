"""Instructions (callgrind's Ir) of one solver phase on the 1k files, a count that the other
processes on a shared 2-core machine do not change (CPU seconds there vary by 30%). Run under
callgrind with the interpreter's own binary (not a pyenv shim):

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p $(python -c 'import sys; print(sys.executable)') \
        benchmarks/callgrind_laps.py DATADIR greedy|exchange
    grep summary /tmp/cg.<pid>.1          # the phase's Ir (the dump taken right after it)

`greedy`: the seed greedy, `_best_baseline` and `legalize` as benchmarks/greedy_phase.py runs them
(after one warm run); `exchange`: `placer.solve._exchange` (the exchange and its repair) in the
second of two solves without a deadline. Counters are zeroed before the phase and dumped after it
(`callgrind_control`); outside valgrind the script only runs the phase. Prints the phase's result
hash (the same as greedy_phase.py's for `greedy`; the plan's for `exchange`).

usage: PYTHONPATH=TREE python benchmarks/callgrind_laps.py DATADIR greedy|exchange"""
import hashlib
import sys
import time

from callgrind_common import callgrind, plan_hash, solve_inputs

import placer.solve as S
from placer.solve.greedy import greedy
from placer.solve.problem import prepare

d, phase = sys.argv[1], sys.argv[2]
fleet, groups, kw, real = solve_inputs(d)


def greedy_once(measured: bool) -> str:
    gs, families = S.spread_expand(fleet, groups)
    problem = prepare(fleet, gs, kw.get("committed", ()), kw.get("gpu_resources", S.GPU_RESOURCES))
    problem, _, _ = S._take_committed(problem)
    S.spread_tag(problem, families)
    rank = S._Rank(problem, {g.index: g for g in problem.groups}, len(problem.groups) + 1, tuple(families))
    far = time.monotonic() + 1e6
    run = S._Run(far, far, 1, 0, S.DEFAULT_EFFORT, None, False)
    if measured:
        callgrind("-z")
    work = problem.state()
    seed_plan = greedy(problem, work)
    candidates = [g for g in problem.groups if g.eligible]
    searched = S._model_size(problem, candidates, S.MODEL_MAX_VARS) <= S.MODEL_MAX_VARS
    result = S.legalize(problem, S._best_baseline(problem, seed_plan, work, rank, run, searched), families)
    if measured:
        callgrind("-d")
    seen = repr(sorted(result.items())) + repr(sorted((c, st.free_gpus, st.gpu) for c, st in work.items()))
    return hashlib.sha256(seen.encode()).hexdigest()[:12]


if phase == "greedy":
    greedy_once(False)
    print({"phase": phase, "hash": greedy_once(True)})
else:
    exchange, armed = S._exchange, [False]

    def measured(*a, **k):
        if armed[0]:
            callgrind("-z")
        out = exchange(*a, **k)
        if armed[0]:
            callgrind("-d")
        return out

    S._exchange = measured
    for n in range(2):
        armed[0] = n == 1
        plan = real(fleet, groups, **{**kw, "time_limit": 10000.0})
    print({"phase": phase, "hash": plan_hash(plan)})
