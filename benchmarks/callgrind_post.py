"""Instructions (callgrind's Ir) of each phase of `placer plan` after the search, on a DATADIR
of `workloads/` and `clusters.yaml`, a count that the other processes on a shared 2-core machine
do not change. Run under callgrind with the interpreter's own binary (not a pyenv shim):

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p $(python -c 'import sys; print(sys.executable)') \\
        benchmarks/callgrind_post.py DATADIR
    grep summary /tmp/cg.<pid>.[1-5]      # decode, exchange, explain, verify, render: one dump each

The second of two solves without a deadline is measured: counters zeroed before each phase
and dumped after it (`callgrind_control`), in the order above: `decode` (placer.solve._decoded:
the decoder and its repair), `exchange` (placer.solve._exchange and its repair), `explain`
(placer.solve._build_plan: the reasons and the placements), `verify` (placer.solve.verify),
`render` (`Plan.to_dict` and the `-o json` text). Outside valgrind (CALLGRIND=0) it only runs the
phases. Prints the plan's hash (without its timings) and each phase's CPU seconds.

usage: PYTHONPATH=TREE python benchmarks/callgrind_post.py DATADIR"""
import sys
import time

from callgrind_common import callgrind, plan_hash, solve_inputs

import placer.solve as S
from placer.cli.output import json_text

armed = [False]
cpu: dict[str, float] = {}


def measured(name: str, f):
    def phase(*a, **k):
        if not armed[0]:
            return f(*a, **k)
        callgrind("-z")
        t = time.process_time()
        out = f(*a, **k)
        cpu[name] = time.process_time() - t
        callgrind("-d")
        return out
    return phase


fleet, groups, kw, real = solve_inputs(sys.argv[1])
kw = {**kw, "time_limit": 10000.0}
kw.pop("parallel", None)
for name, attr in (("decode", "_decoded"), ("exchange", "_exchange"), ("explain", "_build_plan"), ("verify", "verify")):
    setattr(S, attr, measured(name, getattr(S, attr)))


def render(plan):
    return json_text(plan.to_dict())


render_measured = measured("render", render)
for n in range(2):
    armed[0] = n == 1
    plan = real(fleet, groups, **kw)
    render_measured(plan)
print({"hash": plan_hash(plan),
       "cpu": {k: round(v, 4) for k, v in cpu.items()}})
