"""The plan verified in a forked child while the parent works out the reasons (placer.solve.verify
`Beside`, issue 24): the plan is the serial one, and a plan the verifier rejects raises the
serial run's error, whether the child answers, is killed, raises, or rejects it (the parent then
verifies it itself); the parent's wait is a lap of its own. Probed in fresh interpreters (no
thread of the test runner's may stop the fork)."""

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
    from dataclasses import replace
    import placer.solve as S
    V = sys.modules["placer.solve.verify"]       # `placer.solve.verify` is also the function's name
    from placer.model.errors import VerificationError
    from tests.builders import fleet, groups, wl
    how = sys.argv[1]
    S.VERIFY_BESIDE_MIN_GROUPS = 0
    parent = os.getpid()
    real, verified = V.verify, []
    def verify(*a, **k):
        if os.getpid() != parent:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if how == "raise":
                raise RuntimeError("boom")
            if how == "reject":
                raise VerificationError("the child's own verdict")
        else:
            verified.append(1)
        return real(*a, **k)
    V.verify = verify
    S.verify = verify
    def plain(plan):
        doc = plan.to_dict()
        doc["summary"].pop("timings", None)
        doc["summary"].pop("solveSeconds", None)
        return doc
    rng = random.Random(7)
    same = waited = here = 0
    for case in range(5):
        fl = fleet(*(f"c{c}: {rng.randint(2, 6)}x8 used={rng.randint(0, 9)} | {rng.randint(1, 4)}x4"
                     for c in range(3)))
        gs = groups(*(wl(f"ml/w{i:02d}", f"{rng.randint(1, 4)}x{rng.choice([1, 2, 4, 8])}",
                         prio=rng.choice([0, 5, 9])) for i in range(rng.randint(12, 30))))
        verified.clear()
        two = S.solve(fl, gs, time_limit=1000, effort=0.2, parallel=True)
        here += bool(verified)
        one = S.solve(fl, gs, time_limit=1000, effort=0.2)
        same += plain(two) == plain(one) and bool(two.unplaced)
        waited += "wait-verify" in two.summary.timings and "wait-verify" not in one.summary.timings
        # a plan the verifier rejects: the serial run's error, wherever it was found
        bad = replace(two.placements[0], nodes={"no-such-node": dict(next(iter(two.placements[0].nodes.values())))})
        wrong = replace(two, placements=(bad,) + two.placements[1:])
        try:
            real(fl, gs, wrong)
        except VerificationError as e:
            serial = str(e)
        try:
            V.Beside(fl, gs, wrong).wait()
        except VerificationError as e:
            assert str(e) == serial and "node no-such-node does not exist" in serial, (e, serial)
        else:
            raise AssertionError("not rejected")
    print(same, waited, here)
"""


@pytest.mark.parametrize("how", ["ok", "kill", "raise", "reject"])
def test_the_plan_and_its_errors_are_the_serial_ones_whatever_the_child_does(how):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env[SERIAL_ENV] = "0"                       # fork even on a busy machine
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE), how], capture_output=True,
                          text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    # the same plans; the parent waited for a child each time; it verified itself only when
    # the child gave no verdict or rejected the plan
    assert done.stdout.split() == ["5", "5", "0" if how == "ok" else "5"]
    assert "Traceback" not in done.stderr


def test_no_child_when_serial_or_below_min_groups(monkeypatch):
    import placer.solve as S
    from tests.builders import fleet, groups, wl
    gs = groups(*(wl(f"ml/w{i:02d}", "1x8", prio=i % 2) for i in range(12)))
    assert len(gs) < S.VERIFY_BESIDE_MIN_GROUPS
    plan = S.solve(fleet("c0: 4x8"), gs, time_limit=1000, parallel=True)
    assert "wait-verify" not in plan.summary.timings and plan.unplaced
    monkeypatch.setattr(S, "VERIFY_BESIDE_MIN_GROUPS", 0)
    monkeypatch.setenv(SERIAL_ENV, "1")
    plan = S.solve(fleet("c0: 4x8"), gs, time_limit=1000, parallel=True)
    assert "wait-verify" not in plan.summary.timings
