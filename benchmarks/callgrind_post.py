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
import hashlib
import json
import os
import subprocess
import sys
import time

import placer.ops.plan as OP
import placer.solve as S
from placer.cli.output import json_text

got: dict = {}
real = S.solve
armed = [False]
cpu: dict[str, float] = {}


def capture(fleet, groups, **kw):
    got.update(fleet=fleet, groups=groups, kw=kw)
    raise SystemExit


def callgrind(command: str) -> None:
    if os.environ.get("CALLGRIND", "1") == "1":
        subprocess.run(["callgrind_control", command, str(os.getpid())], capture_output=True)


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


for mod in list(sys.modules.values()):
    if getattr(mod, "solve", None) is real:
        mod.solve = capture
d = sys.argv[1]
try:
    OP.plan_files([d + "/workloads"], clusters=d + "/clusters.yaml", time_limit=10000.0)
except SystemExit:
    pass
fleet, groups, kw = got["fleet"], got["groups"], got["kw"]
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
doc = plan.to_dict()
for k in ("solveSeconds", "timings"):
    doc["summary"].pop(k, None)
print({"hash": hashlib.sha1(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:10],
       "cpu": {k: round(v, 4) for k, v in cpu.items()}})
