"""Ctrl-C in the middle of `placer submit` (issue 25 item 11): it says what was created,
what was not and that nothing is half-applied, and exits 130. Before, it printed nothing.

A real process, a real SIGINT, a test API server counting what it was sent: one cluster
(the case where the apply ran in the main thread, where a KeyboardInterrupt can land in
the middle of a group), each group a ConfigMap and a JobSet. The server answers slowly so
that the signal lands while groups are still being created; the test waits for two
groups to exist before sending it (an event, not a deadline).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from placer.ops.interrupt import uninterrupted
from tests.actuate.test_submit import JOBSET, configmap, jobset, write
from tests.kubeapi.builders import gpu_node

GROUPS = 24


def _sigint_as_a_terminal_gives_it() -> None:
    """SIGINT's default action in the child, whatever this process inherited: a test run started
    in the background by a non-interactive shell has SIGINT ignored, which exec passes on (and
    Python keeps), so Ctrl-C would never reach placer."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_after_the_groups_in_flight_and_says_what_was_done(make_fleet, tmp_path):
    fleet = make_fleet(names=("alpha",))
    alpha = fleet["alpha"]
    alpha.seed([gpu_node(f"n{i}", gpus=8) for i in range(GROUPS)])
    for i in range(GROUPS):                    # one file, one group: a ConfigMap and a JobSet (2 x 4 GPUs)
        write(tmp_path, f"g{i:02d}.yaml", configmap(f"cfg-{i}", "ml"), jobset(f"train-{i}", "ml", replicas=2))
    alpha.faults.delay = 0.05
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen(
        [sys.executable, "-m", "placer", "submit", "-f", str(tmp_path), "--kubeconfig", str(fleet.kubeconfig),
         "--time-limit", "5"],
        env={**os.environ, "PYTHONPATH": root}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_sigint_as_a_terminal_gives_it)
    try:
        while len(alpha.objects(JOBSET, "JobSet", namespace="ml")) < 2:     # creating: some groups are there
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=300)                    # a guard against a hang, not a budget
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (stdout, stderr)
    jobsets = {o["metadata"]["name"].removeprefix("train-") for o in alpha.objects(JOBSET, "JobSet", namespace="ml")}
    configs = {o["metadata"]["name"].removeprefix("cfg-") for o in alpha.objects("v1", "ConfigMap", namespace="ml")}
    assert jobsets == configs, "a group was half applied"
    created = len(jobsets)
    assert 2 <= created < GROUPS, "the interrupt came after everything was created: nothing tested"
    # what was done, on stderr, in one line; the table says it per workload
    line = next(ln for ln in stderr.splitlines() if ln.startswith("interrupted: "))
    assert line.startswith(f"interrupted: {created} groups created, {GROUPS - created} not created; "
                           "nothing is half-applied"), line
    assert line.endswith(", ".join(f"ml/train-{i}" for i in sorted(set(range(GROUPS)) - {int(j) for j in jobsets},
                                                                   key=lambda i: f"{i:02d}"))), line
    rows = [ln for ln in stdout.splitlines() if ln.startswith("ml/train-")]
    assert sum("created" in r and "not created" not in r for r in rows) == created, stdout
    assert sum("not created (interrupted)" in r for r in rows) == GROUPS - created, stdout
    assert "(interrupted)" in stdout.strip().splitlines()[-1], stdout
    # nothing was created after the exit: the process left no thread behind that kept applying
    assert alpha.requests.count(verb="create", since=time.monotonic()) == 0


def test_the_step_in_flight_finishes_and_no_further_one_starts():
    """The guard alone: a Ctrl-C while the worker is in its fourth step (the worker sends it
    and waits to be told to stop, so the order is fixed by events, not by timing)."""
    done: list[int] = []

    def act(stop):
        for step in range(10):
            if stop.is_set():
                break
            if step == 3:
                os.kill(os.getpid(), signal.SIGINT)
                assert stop.wait(60), "the main thread never set stop"
            done.append(step)
        return len(done)

    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)    # see _sigint_as_a_terminal_gives_it
    try:
        assert uninterrupted(act) == (4, True)
        assert done == [0, 1, 2, 3]
        assert uninterrupted(lambda stop: "all") == ("all", False)
    finally:
        signal.signal(signal.SIGINT, inherited)
