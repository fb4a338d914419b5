"""The first contender baseline computed in a forked child (placer.solve.baselines, issue 24):
the plan is the serial one, whether the child answers, is killed or raises (the parent then
computes the contender itself), ungated (every baseline repaired) or not (the priority-arrival
seed of a large instance); the parent's wait is a lap of its own. Probed in fresh interpreters
(no thread of the test runner's may stop the fork)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from placer.model.forked import SERIAL_ENV

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
    import os, random, signal, sys
    import placer.solve as S
    import placer.solve.baselines as B
    from tests.builders import fleet, groups, wl
    how, gated = sys.argv[1], sys.argv[2] == "gated"
    B.MIN_GROUPS = 0
    parent = os.getpid()
    real = B._contender
    def contender(problem, job, run):
        if os.getpid() != parent:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if how == "raise":
                raise RuntimeError("boom")
        return real(problem, job, run)
    B._contender = contender
    if gated:
        S._every = lambda *a: False
    def plain(plan):
        doc = plan.to_dict()
        doc["summary"].pop("timings", None)
        doc["summary"].pop("solveSeconds", None)
        return doc
    rng = random.Random(11)
    same = waited = 0
    for case in range(6):
        fl = fleet(*(f"c{c}: {rng.randint(2, 6)}x8 used={rng.randint(0, 9)} | {rng.randint(1, 4)}x4"
                     for c in range(3)))
        gs = groups(*(wl(f"ml/w{i:02d}", f"{rng.randint(1, 4)}x{rng.choice([1, 2, 4, 8])}",
                         prio=rng.choice([0, 5, 9])) for i in range(rng.randint(12, 30))))
        two = S.solve(fl, gs, time_limit=1000, effort=0.2, parallel=True)
        one = S.solve(fl, gs, time_limit=1000, effort=0.2)
        same += plain(two) == plain(one)
        waited += "wait-greedy" in two.summary.timings and "wait-greedy" not in one.summary.timings
    print(same, waited)
"""


@pytest.mark.parametrize("how", ["ok", "kill", "raise"])
@pytest.mark.parametrize("gated", ["every", "gated"])
def test_the_plan_is_the_serial_plan_whatever_the_child_does(how, gated):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env[SERIAL_ENV] = "0"                       # fork even on a busy machine
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE), how, gated], capture_output=True,
                          text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["6", "6"]
    assert "Traceback" not in done.stderr


def test_no_child_below_min_groups():
    import placer.solve as S
    from placer.solve.baselines import MIN_GROUPS
    from tests.builders import fleet, groups, wl
    gs = groups(*(wl(f"ml/w{i:02d}", "1x1", prio=i % 2) for i in range(12)))
    assert len(gs) < MIN_GROUPS
    plan = S.solve(fleet("c0: 4x8"), gs, time_limit=1000, parallel=True)
    assert "wait-greedy" not in plan.summary.timings
