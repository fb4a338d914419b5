"""Hub writes of different workloads side by side within a pass of the daemon thread
(placer/daemon/overlap.py, issue 24's burst): the writes overlap, one workload's stay in
order, their outcomes come back on the daemon thread when the pass ends, and the daemon
still writes each finalizer before the workload is planned."""

from __future__ import annotations

import threading
import time

import pytest

from placer.daemon.overlap import Overlap
from placer.model.errors import KubeError
from placer.model.names import FINALIZER
from tests.daemon.daemon_helpers import STAGING, jobset


def test_writes_of_different_workloads_overlap_within_a_pass():
    """Two writes that can only end together (a barrier of two) both end: side by side."""
    overlap, barrier, done = Overlap(workers=2), threading.Barrier(2, timeout=5), []
    with overlap.batch():
        for key in ("a", "b"):
            overlap.run(key, barrier.wait, then=lambda _, k=key: done.append(k), failed=pytest.fail)
    assert done == ["a", "b"]
    overlap.stop()


def test_one_workloads_writes_stay_in_order_and_outcomes_come_back_on_the_caller_at_the_end():
    overlap, seen, lock = Overlap(workers=4), [], threading.Lock()
    outcomes: list[tuple[str, int]] = []
    me = threading.get_ident()

    def write(tag: str, pause: float):
        def fn() -> str:
            with lock:
                seen.append(f"{tag} start")
            time.sleep(pause)
            with lock:
                seen.append(f"{tag} end")
            return tag
        return fn
    with overlap.batch():
        overlap.run("w", write("first", 0.2), then=lambda t: outcomes.append((t, threading.get_ident())),
                    failed=pytest.fail)
        overlap.run("w", write("second", 0.0), then=lambda t: outcomes.append((t, threading.get_ident())),
                    failed=pytest.fail)
        assert outcomes == []                       # not before the pass ends
    assert seen.index("first end") < seen.index("second start"), seen
    assert outcomes == [("first", me), ("second", me)]
    overlap.stop()


def test_a_failed_write_is_handed_back_and_the_others_outcomes_are_kept():
    overlap, got = Overlap(workers=2), []

    def refused() -> None:
        raise KubeError("refused", status=500, cluster="hub")
    with overlap.batch():
        overlap.run("a", refused, then=lambda _: got.append("a ok"), failed=lambda e: got.append(f"a {e.status}"))
        overlap.run("b", lambda: "fine", then=lambda v: got.append(f"b {v}"), failed=pytest.fail)
    assert got == ["a 500", "b fine"]
    overlap.stop()


def test_outside_a_pass_a_write_is_made_at_once():
    overlap, got = Overlap(), []
    overlap.run("a", lambda: 7, then=got.append, failed=pytest.fail)
    assert got == [7]
    overlap.run("a", lambda: (_ for _ in ()).throw(KubeError("x", cluster="hub")), failed=got.append)
    assert isinstance(got[-1], KubeError)


def test_a_steps_arrivals_have_their_finalizers_written_side_by_side(env):
    """Eight arrivals reconciled in one step on a hub that takes 0.2 s per answer: their
    finalizer patches are answered side by side (one by one they took 1.6 s), and each is
    planned and copied only after its own finalizer was answered."""
    d = env.daemon()
    assert d.wait_idle(10)
    hub = env.fleet["hub"]
    names = [f"o{i}" for i in range(8)]
    with d._busy:                                     # the daemon thread waits: all eight in one step
        for n in names:
            env.create(jobset(n, pods=1, gpus=1))
        deadline = time.monotonic() + 10
        while any(d.view.staged(d.view.ref_of(("jobset.x-k8s.io/v1alpha2", "JobSet"), STAGING, n)) is None
                  for n in names) and time.monotonic() < deadline:
            time.sleep(0.01)
        hub.faults.delay = 0.2
    try:
        assert d.wait_idle(30)
    finally:
        hub.faults.delay = 0.0
    finals = [r for r in hub.requests.select(verb="patch", resource="jobsets")
              if r.name in names and FINALIZER in str(r.body) and r.code < 300]
    assert sorted(r.name for r in finals) == names
    most = max(sum(1 for o in finals if o.at < r.answered and r.at < o.answered) for r in finals)
    assert most >= 2, [(r.name, r.at, r.answered) for r in finals]
    for n in names:
        fin = next(r.answered for r in finals if r.name == n)
        made = [r.at for c in ("alpha", "beta") for r in env.fleet[c].requests.created("jobsets") if r.name == n]
        assert len(made) == 1 and fin <= made[0], n
