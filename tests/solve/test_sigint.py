"""Ctrl-C stays Python's through a solve (issue 25 items 9 and 11). CP-SAT's default catches
SIGINT: during a solve it only ended the search early, so `placer submit` went on to
create what the shortened plan placed; and its handler stayed installed after the solve,
so the next Ctrl-C killed placer outright, wherever it was (a group half sent, a daemon's
Lease not given up). A fresh process plans the bundled examples, then signals itself: it
must get a KeyboardInterrupt, not die of the signal."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, signal, time
from placer import api
result = api.plan_files(["examples"])              # no kubeconfig: the bundled example fleet
assert result.plan.placements, "nothing solved"
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
    print("no interrupt")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
"""


def test_ctrl_c_after_a_solve_is_a_keyboard_interrupt_not_death(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PLACER_CLUSTERS")}
    p = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True,
                       env={**env, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}, preexec_fn=_sigint_default)
    assert p.returncode == 0 and p.stdout.strip() == "KeyboardInterrupt", (p.returncode, p.stdout, p.stderr)


def _sigint_default() -> None:
    """SIGINT's default action in the child whatever this process inherited: an xdist worker
    and a background job of a non-interactive shell both ignore SIGINT, which exec passes on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
