"""What the callgrind scripts (callgrind_laps.py, callgrind_post.py) share: the solver's inputs
as `placer plan` makes them from a DATADIR, the counters' control, and a plan's hash."""
import hashlib
import json
import os
import subprocess
import sys

import placer.ops.plan as OP
import placer.solve as S


def callgrind(command: str) -> None:
    """`callgrind_control COMMAND` on this process (-z: zero the counters, -d: dump them);
    nothing outside valgrind (CALLGRIND=0)."""
    if os.environ.get("CALLGRIND", "1") == "1":
        subprocess.run(["callgrind_control", command, str(os.getpid())], capture_output=True)


def solve_inputs(datadir: str):
    """(fleet, groups, keyword arguments) that `placer plan` of DATADIR's `workloads/` and
    `clusters.yaml` passes to the solver, and the solver itself: every module's `solve` is
    replaced by a catcher that stops the plan there."""
    got: dict = {}
    real = S.solve

    def capture(fleet, groups, **kw):
        got.update(fleet=fleet, groups=groups, kw=kw)
        raise SystemExit

    for mod in list(sys.modules.values()):
        if getattr(mod, "solve", None) is real:
            mod.solve = capture
    try:
        OP.plan_files([datadir + "/workloads"], clusters=datadir + "/clusters.yaml", time_limit=10000.0)
    except SystemExit:
        pass
    return got["fleet"], got["groups"], got["kw"], real


def plan_hash(plan) -> str:
    """The plan's `-o json` document without its timings, hashed."""
    doc = plan.to_dict()
    for k in ("solveSeconds", "timings"):
        doc["summary"].pop(k, None)
    return hashlib.sha1(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:10]
