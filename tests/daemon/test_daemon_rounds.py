"""The daemon's rounds proportional to what changed (issue 24, item 4): new arrivals are placed
against the committed plan (an `arrivals` round, reusing the last round's node classes and
capacity); something waiting unplaced is planned again, with everything pending, by a `full`
round once capacity changes (a departure) or its retry is due; an arrival that does not fit
hands its round to the full solve, which gives the reason. Higher priority still wins when a
departure and a lower-priority arrival come together. Judged from the test API servers' stores
(copies, annotations) and the daemon's round counters; waits are on conditions only."""

from __future__ import annotations

from placer import daemon as D
from placer.daemon.core import RESYNC_GAP
from placer.model.names import ANN_PRIORITY
from tests.daemon.daemon_helpers import STAGING, Env, gpu_nodes, jobset, wait_for

TARGETS = ("alpha", "beta")


def rounds(d, kind: str) -> float:
    return d.metrics.value("placer_solves_total", {"round": kind})


def placed(env: Env, obj: dict) -> str | None:
    return env.annotations(obj).get(D.PLACED_CLUSTER)


def copies_everywhere(env: Env, objs) -> dict[str, list[str]]:
    return {o["metadata"]["name"]: sorted(env.copies(o)) for o in objs}


def test_arrivals_use_arrival_rounds_and_what_waits_a_full_round_once_capacity_frees(env):
    d = env.daemon()
    fours = []
    for i in range(7):                       # 28 of the 32 GPUs (alpha: 2 x 8, beta: 2 x 8)
        job = jobset(f"four-{i}", pods=1, gpus=4)
        env.create(job)
        wait_for(lambda: placed(env, job), timeout=30, what=f"four-{i} placed")
        fours.append(job)
    assert d.wait_idle(30)
    assert rounds(d, "arrivals") >= 1 and rounds(d, "full") == 0
    big = jobset("big", pods=1, gpus=8)      # no node has 8 free: the full solve says why
    env.create(big)
    wait_for(lambda: env.annotations(big).get(D.ANN_MESSAGE, "").startswith("unplaced"), timeout=30,
             what="big unplaced with its reason")
    assert rounds(d, "full") >= 1
    assert d.wait_idle(30)
    before = rounds(d, "arrivals")
    small = jobset("small", pods=1, gpus=2)  # fits the node with 4 free: an arrivals round
    env.create(small)
    wait_for(lambda: placed(env, small), timeout=30, what="small placed")
    assert rounds(d, "arrivals") == before + 1
    assert d.wait_idle(30)
    assert not placed(env, big)
    # departures: every 4-GPU workload on alpha deleted; the capacity they free goes to big
    on_alpha = [j for j in fours if placed(env, j) == "alpha"]
    jobsets = env.hub.resource_for("jobset.x-k8s.io/v1alpha2", "JobSet")
    for j in on_alpha:
        env.hub.delete(jobsets, j["metadata"]["name"], STAGING)
    wait_for(lambda: placed(env, big) == "alpha", timeout=30, what="big placed once alpha frees")
    assert d.wait_idle(30)
    left = [j for j in fours if j not in on_alpha]
    assert copies_everywhere(env, [*left, small, big]) == {
        **{j["metadata"]["name"]: [placed(env, j)] for j in left}, "small": [placed(env, small)], "big": ["alpha"]}


def test_a_departure_and_a_lower_priority_arrival_together_go_to_the_higher_priority(make_fleet):
    """alpha has one 8-GPU node, held by `low-old`; `high` (priority 100) waits unplaced. Then
    `low-old` is deleted and `low-new` (priority 0, 8 GPUs) staged at once: whichever round sees
    them, `high` ends on alpha and `low-new` unplaced, never the other way round."""
    fleet = make_fleet(names=("hub", *TARGETS), bookmark_interval=0.5)
    fleet["alpha"].seed(gpu_nodes("a", 1))
    env = Env(fleet)
    try:
        d = env.daemon()
        old = jobset("low-old", pods=1, gpus=8, annotations={ANN_PRIORITY: "0"})
        env.create(old)
        wait_for(lambda: placed(env, old) == "alpha", timeout=30, what="low-old placed")
        high = jobset("high", pods=1, gpus=8, annotations={ANN_PRIORITY: "100"})
        env.create(high)
        wait_for(lambda: env.annotations(high).get(D.ANN_MESSAGE, "").startswith("unplaced"), timeout=30,
                 what="high unplaced")
        assert d.wait_idle(30)
        env.hub.delete(env.hub.resource_for("jobset.x-k8s.io/v1alpha2", "JobSet"), "low-old", STAGING)
        new = jobset("low-new", pods=1, gpus=8, annotations={ANN_PRIORITY: "0"})
        env.create(new)
        wait_for(lambda: placed(env, high) == "alpha", timeout=30, what="high placed")
        wait_for(lambda: env.annotations(new).get(D.ANN_MESSAGE, "").startswith("unplaced"), timeout=30,
                 what="low-new unplaced")
        assert d.wait_idle(30)
        assert env.copies(high) and list(env.copies(high)) == ["alpha"] and env.copies(new) == {}
        assert not placed(env, new)
    finally:
        env.stop()


def test_the_first_steered_copy_committed_rebuilds_no_cluster(make_fleet):
    """Copies are steered to their nodes by name (the default `steer: required`), so a
    committed copy needs each node its own class: the daemon builds them so in its idle
    time, and the round after the first copy (beyond NODE_EXACT_MAX_NODES, where classes
    are the default) reuses every cluster instead of building all of them again."""
    fleet = make_fleet(names=("hub", *TARGETS), bookmark_interval=0.5)
    fleet["alpha"].seed(gpu_nodes("a", 60))
    fleet["beta"].seed(gpu_nodes("b", 60))
    env = Env(fleet)
    try:
        d = env.daemon()
        assert d.wait_idle(30)
        built = d.planner.memory.reuse.rebuilt
        assert built == 2
        for name in ("first", "second", "third"):
            job = jobset(name, pods=1, gpus=1)
            env.create(job)
            wait_for(lambda: placed(env, job), timeout=30, what=f"{name} placed")
            assert d.wait_idle(30)
        assert rounds(d, "arrivals") >= 2 and rounds(d, "full") == 0
        assert d.planner.memory.reuse.rebuilt == built
    finally:
        env.stop()


def test_the_periodic_resync_is_spread_so_an_arrival_waits_behind_a_few_keys(env):
    """Every resync interval each placed workload is checked again. The keys are due
    RESYNC_GAP apart (within half the interval), not all at once: one pass over 1,200
    placed workloads took 0.76 s CPU, and an arrival's key and round waited behind it."""
    d = env.daemon(resync_interval=2.0)
    jobs = [jobset(f"r{i}", pods=1, gpus=1) for i in range(6)]
    for job in jobs:
        env.create(job)
    wait_for(lambda: all(placed(env, j) for j in jobs), timeout=30, what="all placed")
    assert d.wait_idle(30)
    batches: list = []
    inner, add = d._enqueue_all, d.queue.add

    def enqueue_all(*a, **k):                    # the due times of one resync's keys
        got: list = []
        d.queue.add = lambda key, at: (got.append(at), add(key, at))
        try:
            inner(*a, **k)
        finally:
            d.queue.add = add
            batches.append(got)
    d._enqueue_all = enqueue_all
    wait_for(lambda: batches, timeout=30, what="a resync")
    due = batches[0]
    assert len(due) == len(jobs)
    assert all(b - a >= RESYNC_GAP / 2 for a, b in zip(due, due[1:])), due
    assert due[-1] - due[0] <= d.config.resync_interval / 2
    assert d.wait_idle(30)
    assert copies_everywhere(env, jobs) == {j["metadata"]["name"]: [placed(env, j)] for j in jobs}
