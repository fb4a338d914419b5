"""The collector tuned for the daemon's own process (placer/daemon/heap.py): with
`settle_heap` (what `placer daemon` runs with), the daemon collects and freezes what survives
once it is idle with its node classes built, so that later full collections walk only what
was made since; again every ten seconds, in idle time (and, once an hour, with everything
unfrozen first, so that a cycle frozen and dropped since is collected); and it hands the
frozen objects back to the collector when it stops. Without it, the collector is left as it is."""

from __future__ import annotations

import gc
import weakref

import yaml

from placer.daemon.config import config_from_file
from placer.daemon.heap import YOUNG, Heap
from tests.daemon.daemon_helpers import Env


def test_a_daemon_settles_its_heap_once_idle_and_releases_it_when_it_stops(env: Env):
    gc.unfreeze()
    before = gc.get_threshold()
    d = env.daemon(settle_heap=True)
    assert d.wait_idle(30)
    assert d.planner.heap is not None and d.planner.heap.term == d.leader.acquired
    assert gc.get_freeze_count() > 0            # the caches, the classes: skipped by later collections
    assert gc.get_threshold() == (YOUNG, *before[1:])     # the youngest generation collected less often
    d.stop()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


def test_without_it_the_collector_is_left_as_it_is(env: Env):
    gc.unfreeze()
    before = gc.get_threshold()
    d = env.daemon()
    assert d.wait_idle(30)
    assert d.planner.heap is None and gc.get_freeze_count() == 0 and gc.get_threshold() == before


def test_the_young_threshold_is_set_at_the_first_settle_and_given_back_at_release():
    before = gc.get_threshold()
    heap = Heap(interval=10.0)
    try:
        assert gc.get_threshold() == before      # nothing until the first settle
        assert heap.step(0.0, term=1) and gc.get_threshold() == (YOUNG, *before[1:])
        assert heap.step(10.0, term=1) and gc.get_threshold() == (YOUNG, *before[1:])
    finally:
        heap.release()
    assert gc.get_threshold() == before
    heap.release()                               # twice: still the collector's own
    assert gc.get_threshold() == before


def test_it_settles_once_per_term_and_then_every_interval():
    heap = Heap(interval=10.0)
    try:
        assert heap.step(100.0, term=1) and gc.get_freeze_count() > 0
        assert not heap.step(109.0, term=1)
        assert heap.step(110.0, term=1)
        assert heap.step(111.0, term=2)          # a new term of leadership: settled again
        assert not heap.step(115.0, term=2)
    finally:
        heap.release()


class Cycle:
    def __init__(self):
        self.me = self


def test_a_cycle_frozen_then_dropped_is_collected_at_the_next_renewal():
    heap = Heap(interval=10.0, renew=3600.0)
    try:
        cycle = Cycle()
        gone = weakref.ref(cycle)
        assert heap.step(0.0, term=1)            # frozen while it lives
        del cycle
        assert heap.step(10.0, term=1) and gone() is not None     # frozen: the collector skips it
        assert heap.step(3600.0, term=1) and gone() is None       # the renewal unfroze it first
    finally:
        heap.release()


def test_placer_daemon_runs_with_it(tmp_path):
    clusters = tmp_path / "c.yaml"
    clusters.write_text("hub: {context: hub, stagingNamespace: placer-staging}\nclusters:\n- {name: alpha, context: alpha}\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "hub",
        "clusters": [{"name": n, "cluster": {"server": "https://127.0.0.1:1"}} for n in ("hub", "alpha")],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in ("hub", "alpha")]}))
    config = config_from_file(str(clusters), batch_window=0.2, reschedule_after=None, time_limit=1.0,
                              kubeconfig=str(kubeconfig))
    assert config.settle_heap
