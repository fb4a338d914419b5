"""`placer daemon` under faults: dropped hub watches and expired resourceVersions, a crash
between creating a copy and annotating its staging object, a restart past a reschedule
deadline, two daemons at once, a malformed staging object, a burst of 300 arrivals."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from placer import actuate
from placer import daemon as D
from placer.daemon import FakeClock
from tests.daemon.daemon_helpers import STAGING, Env, created_copies, gpu_nodes, jobset, wait_for


def _cluster(env: Env, obj: dict) -> str | None:
    return env.annotations(obj).get(D.PLACED_CLUSTER)


def _all_copies(env: Env) -> list[tuple[str, str]]:
    return sorted((c, o["metadata"]["name"]) for c in ("alpha", "beta")
                  for o in env.fleet[c].objects("jobset.x-k8s.io/v1alpha2", "JobSet", STAGING))


def test_hub_watch_dropped_and_resource_version_expired(env):
    d = env.daemon()
    first = jobset("first", pods=1, gpus=1)
    env.create(first)
    assert d.wait_idle(10) and _cluster(env, first)
    hub = env.fleet["hub"]
    # while the hub is away: two arrivals and a deletion; seeding compacts the watch history,
    # so the daemon's resourceVersion is gone when it reconnects (410 -> relist)
    hub.down()
    hub.seed([jobset("second", pods=1, gpus=1), jobset("third", pods=1, gpus=1)])
    rt = hub.store.type_for("jobset.x-k8s.io/v1alpha2", "JobSet")
    hub.store.delete(rt, STAGING, "first")
    hub.store.compact()
    back = time.monotonic()
    hub.up()
    # the daemon's watch was answered 410 and it listed again (seen on the hub itself)
    wait_for(lambda: hub.requests.count(verb="list", resource="jobsets", since=back), what="relist after 410")
    wait_for(lambda: _cluster(env, jobset("second")) and _cluster(env, jobset("third")), what="placed after gap")
    wait_for(lambda: not hub.objects("jobset.x-k8s.io/v1alpha2", "JobSet", STAGING) or
             [o["metadata"]["name"] for o in hub.objects("jobset.x-k8s.io/v1alpha2", "JobSet", STAGING)]
             == ["second", "third"], what="first finalized")
    wait_for(lambda: [n for _, n in _all_copies(env)] == ["second", "third"], what="first's copy deleted")
    # and dropped watches (stream ended cleanly, then connections cut) resume without loss
    hub.drop_watches()
    env.create(jobset("fourth", pods=1, gpus=1))
    wait_for(lambda: _cluster(env, jobset("fourth")), what="placed after a clean drop")
    hub.drop_watches(abrupt=True)
    env.create(jobset("fifth", pods=1, gpus=1))
    wait_for(lambda: _cluster(env, jobset("fifth")), what="placed after connections were cut")
    assert d.wait_idle(10)
    assert [n for _, n in _all_copies(env)] == sorted(["fifth", "fourth", "second", "third"])
    made = created_copies(env.fleet, ("alpha", "beta"))
    assert all(len(cs) == 1 for cs in made.values()), made       # nothing was ever created twice


class Crash(BaseException):
    """Kills the daemon's thread the way a SIGKILL would: nothing catches it."""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_crash_between_remote_create_and_staging_annotation(env, monkeypatch):
    real = actuate.apply_group

    def apply_then_die(*args, **kwargs):
        real(*args, **kwargs)
        raise Crash()
    monkeypatch.setattr(actuate, "apply_group", apply_then_die)
    first = env.daemon(identity="first")
    job = jobset("job", pods=1, gpus=4)
    env.create(job)
    wait_for(lambda: _all_copies(env), what="the copy created")
    # the apply runs on alpha's or beta's work queue: that thread dies, as the process would
    wait_for(lambda: not all(t.is_alive() for t in first.workers._threads), what="the daemon dead")
    first.stop(release=False)
    assert D.PLACED_CLUSTER not in env.annotations(job)
    monkeypatch.setattr(actuate, "apply_group", real)
    second = env.daemon(identity="second")                  # takes over once the dead one's lease expires
    wait_for(lambda: _cluster(env, job), timeout=15, what="adopted")
    assert second.wait_idle(10)
    assert _all_copies(env) == [(_cluster(env, job), "job")]
    assert second.metrics.value("placer_placements_total") == 0     # adopted, not placed again


def test_a_restarted_daemon_keeps_the_reschedule_deadline(env):
    clock = FakeClock()
    first = env.daemon(clock=clock, identity="first", reschedule_after=120.0)
    job = jobset("stuck", pods=2, gpus=8)                    # fits either cluster; its pods never run
    env.create(job)
    assert first.wait_idle(10)
    where = _cluster(env, job)
    assert where
    first.stop()
    clock.advance(121)                                       # the deadline passes while no daemon runs
    second = env.daemon(clock=clock, identity="second", reschedule_after=120.0)
    other = {"alpha": "beta", "beta": "alpha"}[where]
    # the copy is older than the delay: withdrawn at once, not 120 s after the restart
    wait_for(lambda: _cluster(env, job) == other, timeout=15, what="rescheduled by the new daemon")
    assert second.metrics.value("placer_withdrawals_total") == 1


def test_two_daemons_only_the_leader_acts(env):
    a = env.daemon(identity="a")
    b = env.daemon(identity="b")
    wait_for(lambda: a.leader.is_leader or b.leader.is_leader, what="a leader")
    leader, standby = (a, b) if a.leader.is_leader else (b, a)
    for i in range(4):
        env.create(jobset(f"j{i}", pods=1, gpus=2))
    assert leader.wait_idle(10)
    assert len(_all_copies(env)) == 4
    assert leader.metrics.value("placer_placements_total") == 4
    assert standby.metrics.value("placer_placements_total") == 0 and not standby.leader.is_leader
    assert standby.metrics.value("placer_leader") == 0
    # the leader goes away cleanly: the standby takes over and places new arrivals
    leader.stop()
    env.create(jobset("after", pods=1, gpus=2))
    wait_for(lambda: _cluster(env, jobset("after")), timeout=15, what="standby took over")
    assert standby.wait_idle(10)
    assert len(_all_copies(env)) == 5 and len(set(n for _, n in _all_copies(env))) == 5


def test_malformed_object_is_annotated_and_the_daemon_keeps_going(env):
    d = env.daemon()
    bad = jobset("bad")
    bad["spec"]["replicatedJobs"][0]["replicas"] = "two"
    env.create(bad)
    good = jobset("good", pods=1, gpus=1)
    env.create(good)
    assert d.wait_idle(10)
    ann = env.annotations(bad)
    assert ann[D.ANN_PHASE] == D.PHASE_INVALID
    assert ann[D.ANN_MESSAGE].startswith("invalid: ") and "replicas" in ann[D.ANN_MESSAGE]
    assert _cluster(env, good) and [n for _, n in _all_copies(env)] == ["good"]
    # fixing it places it
    res = env.hub.resource_for(bad["apiVersion"], bad["kind"])
    env.hub.patch(res, "bad", {"spec": {"replicatedJobs": [{**bad["spec"]["replicatedJobs"][0], "replicas": 1}]}},
                  STAGING)
    wait_for(lambda: _cluster(env, bad), what="fixed object placed")


def test_burst_of_300(make_fleet):
    fleet = make_fleet(names=("hub", "alpha", "beta"), bookmark_interval=0.5)
    fleet["alpha"].seed(gpu_nodes("a", 10))
    fleet["beta"].seed(gpu_nodes("b", 10))                  # 160 GPUs for 300 one-GPU workloads
    env = Env(fleet)
    try:
        d = env.daemon(batch_window=0.2)
        objs = [jobset(f"w{i:03d}", pods=1, gpus=1) for i in range(300)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(env.create, objs))
        assert d.wait_idle(60)
        staged = {o["metadata"]["name"]: o for o in fleet["hub"].objects("jobset.x-k8s.io/v1alpha2", "JobSet",
                                                                         STAGING)}
        assert len(staged) == 300
        copies = _all_copies(env)
        names = [n for _, n in copies]
        assert len(names) == len(set(names)) == 160            # zero duplicates, capacity filled
        for name, o in staged.items():
            ann = o["metadata"].get("annotations") or {}
            if name in names:
                assert ann.get(D.PLACED_CLUSTER) == next(c for c, n in copies if n == name)
            else:                                               # explained, never lost
                assert ann.get(D.ANN_MESSAGE, "").startswith("unplaced: "), (name, ann)
    finally:
        env.stop()


def test_a_name_taken_by_someone_else_sends_the_workload_to_another_cluster(env):
    """A JobSet placer did not create already holds the name on the cluster the plan
    chooses: placer leaves it alone, excludes that cluster for the workload and places
    it on the other one, instead of re-planning onto the same cluster forever."""
    foreign = jobset("taken", pods=1, gpus=1)
    d = env.daemon()
    env.create(jobset("probe", pods=1, gpus=1))
    assert d.wait_idle(10)
    first_choice = _cluster(env, jobset("probe"))        # where an equal workload goes first
    other = "beta" if first_choice == "alpha" else "alpha"
    client = env.kube.client(first_choice)
    client.create(client.resource_for(foreign["apiVersion"], foreign["kind"]), foreign, STAGING)
    env.create(jobset("taken", pods=1, gpus=1))
    wait_for(lambda: _cluster(env, jobset("taken")) == other, what="placed on the other cluster", timeout=15)
    mine = env.fleet[first_choice].get("jobset.x-k8s.io/v1alpha2", "JobSet", "taken", STAGING)
    assert "placer.dev/managed" not in (mine["metadata"].get("labels") or {})     # left as it was
    assert [n for c, n in _all_copies(env) if n == "taken"] == ["taken", "taken"]  # theirs + ours


def test_bad_spread_is_refused_not_copied_whole(env):
    """A spread the workload cannot have (an unknown mode; divide on a kind without scalable
    replicas) is refused with why, never copied whole (issue 21: the daemon places good ones)."""
    d = env.daemon()
    unknown = jobset("unknown", pods=1, gpus=1)
    unknown["metadata"].setdefault("annotations", {})["placer.dev/spread"] = "triplicate"
    divide = jobset("divide", pods=1, gpus=1)
    divide["metadata"].setdefault("annotations", {})["placer.dev/spread"] = "divide"
    env.create(unknown)
    env.create(divide)
    assert d.wait_idle(10)
    for obj, words in ((unknown, "is not duplicate or divide"), (divide, "has no scalable replicas")):
        ann = env.annotations(obj)
        assert ann[D.ANN_PHASE] == D.PHASE_INVALID and words in ann[D.ANN_MESSAGE], ann
    assert _all_copies(env) == []
