"""Preemption carried out by the daemon (issue 23 item 4, Must-show 2), on the test API
servers. Judged from the servers: the targets' request logs (every copy created and
deleted, when), the objects on the hub (annotations, conditions, Events) and the pods on
the targets. The victims' pods are removed by the test once their copy is deleted (the
target's garbage collector would), so that the preemptor is seen waiting for them."""

from __future__ import annotations

import itertools
import json

from placer import actuate as A
from placer import daemon as D
from placer.daemon import LeaseTiming
from placer.model.workload import WorkloadRef
from tests.daemon.daemon_helpers import STAGING, Env, events_for, jobset, token_kubeconfig, wait_for, writes_by
from tests.daemon.test_daemon_quotas import apply_quota, quota, with_quota_crd
from tests.kubeapi.builders import bound_pod, gpu_node

TARGETS = ("alpha", "beta")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
PRIORITY = "placer.dev/priority"
LONG = LeaseTiming(duration=600.0, renew_deadline=400.0, retry_period=0.2)   # the tests move the clock by minutes


def job(name: str, team: str | None = None, gpus: int = 4, prio: int = 0) -> dict:
    obj = jobset(name, pods=1, gpus=gpus, annotations={PRIORITY: str(prio)})
    if team:
        obj["metadata"]["labels"] = {"team": team}
    return obj


def placed(env: Env, obj: dict) -> str | None:
    return env.annotations(obj).get(D.PLACED_CLUSTER)


def message(env: Env, obj: dict) -> str:
    return env.annotations(obj).get(D.ANN_MESSAGE, "")


def run(env: Env, obj: dict, gpus: int = 4) -> None:
    """The copy's pod bound on the node the plan chose and running, and the copy's status
    with a conditions list (as the JobSet controller writes it), mirrored to the hub."""
    name = obj["metadata"]["name"]
    cluster = placed(env, obj)
    copy = env.copies(obj)[cluster]
    nodes = json.loads(copy["metadata"]["annotations"]["placer.dev/nodes"])["templates"]
    node = next(iter(nodes.values()))[0]
    ref = WorkloadRef.of(obj)
    env.fleet[cluster].seed([bound_pod(f"{name}-workers-0-0", node, gpus=gpus, namespace=STAGING, phase="Running",
                                       labels={"jobset.sigs.k8s.io/jobset-name": name,
                                               "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                                               A.WORKLOAD: A.workload_label(ref)})],
                            events=True)
    store = env.fleet[cluster].store
    rt = store.type_for(*JOBSET)
    current = store.get(rt, STAGING, name)
    store.update(rt, STAGING, name, {**current, "status": {"conditions": [], "replicatedJobsStatus": [
        {"name": "workers", "ready": 1, "active": 1, "succeeded": 0, "failed": 0, "suspended": 0}]}},
        subresource="status" if rt.status else None)


def reap(env: Env) -> list[str]:
    """The targets' garbage collector: pods whose copy is gone are deleted. Returns their names."""
    out = []
    for c in TARGETS:
        srv = env.fleet[c]
        copies = {o["metadata"]["name"] for o in srv.objects(*JOBSET, STAGING)}
        rt = srv.store.type_for("v1", "Pod")
        for p in srv.objects("v1", "Pod", STAGING):
            owner = p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name")
            if owner not in copies:
                srv.store.delete(rt, STAGING, p["metadata"]["name"])
                out.append(owner)
    return out


def timeline(env: Env) -> list[tuple[float, int, str, str]]:
    """(when, +1 created / -1 deleted, name, cluster) for every JobSet copy, from the request logs."""
    out = []
    for c in TARGETS:
        out += [(r.at, 1, r.name, c) for r in env.fleet[c].requests.created("jobsets")]
        out += [(r.at, -1, r.name, c) for r in env.fleet[c].requests.select(verb="delete", resource="jobsets")
                if r.code in (200, 202)]
    return sorted(out)


def deleted(env: Env) -> list[str]:
    return [n for _, s, n, _ in timeline(env) if s < 0]


def created(env: Env) -> list[str]:
    return [n for _, s, n, _ in timeline(env) if s > 0]


def never_two(env: Env) -> dict[str, int]:
    """Workloads that at some moment had two copies (zero duplicates: empty)."""
    live: dict[str, int] = {}
    worst: dict[str, int] = {}
    for _, s, n, _ in timeline(env):
        live[n] = live.get(n, 0) + s
        worst[n] = max(worst.get(n, 0), live[n])
    return {n: v for n, v in worst.items() if v > 1}


def fewest_victims(free: dict[str, int], running: dict[str, tuple[str, int, str]], need: int, team: str,
                   nominal: dict[str, int], capacity: int) -> int:
    """Brute force, written apart from placer: the fewest running jobs (node, GPUs, team) of
    other teams whose removal lets a one-pod job of `need` GPUs of `team` fit a node, with
    `team` within its nominal amount afterwards and the cohort within the fleet."""
    names = sorted(running)
    used = {t: sum(g for _, g, tt in running.values() if tt == t) for t in nominal}
    for k in range(0, len(names) + 1):
        for subset in itertools.combinations(names, k):
            if any(running[n][2] == team for n in subset):
                continue
            room = dict(free)
            left = dict(used)
            for n in subset:
                node, g, t = running[n]
                room[node] += g
                left[t] -= g
            if left[team] + need > nominal[team] or sum(left.values()) + need > capacity:
                continue
            if any(v >= need for v in room.values()):
                return k
    return -1


def test_reclaim_must_show(env):
    """Must-show 2: quotas a and b (16 GPUs each, cohort lab) on 32 GPUs; a's eight 4-GPU jobs
    borrow all of b's idle nominal and run; two of b's jobs arrive. The daemon preempts exactly
    the fewest of a's borrowed jobs (a brute force says one per b job), creates each b job only
    once its victim's pods are gone, and re-places a's victims when capacity returns; Events
    and conditions say so; never two copies of one workload, none lost."""
    with_quota_crd(env)
    apply_quota(env, quota("a", "a", 16, cohort="lab"))
    apply_quota(env, quota("b", "b", 16, cohort="lab"))
    d = env.daemon(preemption="reclaim", min_run_time=0.0, retry_interval=2.0, lease=LONG)
    a = [job(f"a-{i}", "a") for i in range(8)]
    for obj in a:
        env.create(obj)
    wait_for(lambda: all(placed(env, o) for o in a), timeout=60, what="a's eight jobs placed")
    assert d.wait_idle(30)
    for obj in a:
        run(env, obj)
    wait_for(lambda: all(any(c.get("type") == "Placed" for c in (env.staged(o).get("status") or {}).get("conditions")
                             or ()) for o in a), timeout=30, what="a's status mirrored")
    assert d.wait_idle(30)
    # the brute force, on the fleet as it is: every node full, every job of a borrowing
    running = {o["metadata"]["name"]: (_node_of(env, o), 4, "a") for o in a}
    free = {n["metadata"]["name"]: 0 for c in TARGETS for n in env.fleet[c].objects("v1", "Node")}
    assert fewest_victims(free, running, 4, "b", {"a": 16, "b": 16}, 32) == 1
    b = [job(f"b-{i}", "b", prio=10) for i in range(2)]
    for obj in b:
        env.create(obj)
    wait_for(lambda: deleted(env), timeout=60, what="the first preemption")
    d.clock.advance(5)                            # rounds again while the victim's pods still run
    d.wait_idle(10)
    assert not [n for n in created(env) if n.startswith("b-")], "created before its victim's pods went"
    waiting = [message(env, o) for o in b if message(env, o).startswith("preempting ")]
    assert len(waiting) == 1 and "created once their pods are gone" in waiting[0], [message(env, o) for o in b]
    reaped: set[str] = set()

    def progress() -> bool:
        # every preemptor is created only once its victim's pods are gone
        assert sum(n.startswith("b-") for n in created(env)) <= len(reaped), (deleted(env), reaped)
        reaped.update(reap(env))
        return all(placed(env, o) for o in b)
    wait_for(progress, timeout=120, what="b's two jobs placed by preemption")
    assert d.wait_idle(30)
    victims = deleted(env)
    assert len(victims) == 2 and all(v.startswith("a-") for v in victims), victims
    for name in victims:
        obj = next(o for o in a if o["metadata"]["name"] == name)
        ev = events_for(env.fleet, name, "Preempted")
        assert ev and "preempted by" in ev[0]["message"] and "reclaim" in ev[0]["message"], ev
        cond = [c for c in (env.staged(obj).get("status") or {}).get("conditions") or () if c["type"] == "Preempted"]
        assert cond and cond[0]["status"] == "True" and cond[0]["reason"] == "Reclaim", cond
        assert "preempted by" in cond[0]["message"] and "/b-" in cond[0]["message"], cond
        assert not placed(env, obj) and env.annotations(obj)[D.ANN_PHASE] == "Pending"
    for obj in b:
        assert events_for(env.fleet, obj["metadata"]["name"], "Preempting")
    # capacity returns: a new 8-GPU node; the pool grows by 8 and a's two victims are placed again
    env.fleet["beta"].seed([gpu_node("b9", gpus=8)], events=True)
    wait_for(lambda: all(placed(env, o) for o in a), timeout=120, what="a's victims placed again")
    assert d.wait_idle(30)
    assert never_two(env) == {}
    for obj in [*a, *b]:                          # zero lost: each placed, with exactly one copy
        assert list(env.copies(obj)) == [placed(env, obj)], obj["metadata"]["name"]
    assert d.metrics.value("placer_preemptions_total", {"policy": "reclaim"}) == 2


def _node_of(env: Env, obj: dict) -> str:
    name = obj["metadata"]["name"]
    pods = env.fleet[placed(env, obj)].objects("v1", "Pod", STAGING)
    return next(p["spec"]["nodeName"] for p in pods if p["metadata"]["labels"].get(
        "jobset.sigs.k8s.io/jobset-name") == name)


def _fill(env: Env, d, prios: list[int]) -> list[dict]:
    """Fill the fleet's four 8-GPU nodes with 8-GPU jobs of these priorities, running."""
    jobs = [job(f"run-{i}", gpus=8, prio=p) for i, p in enumerate(prios)]
    for obj in jobs:
        env.create(obj)
    wait_for(lambda: all(placed(env, o) for o in jobs), timeout=60, what="the fleet filled")
    assert d.wait_idle(30)
    for obj in jobs:
        run(env, obj, gpus=8)
    assert d.wait_idle(30)
    return jobs


def test_off_deletes_nothing(env):
    d = env.daemon(retry_interval=1.0, lease=LONG)
    _fill(env, d, [0, 0, 0, 0])
    high = job("high", gpus=8, prio=100)
    env.create(high)
    wait_for(lambda: message(env, high).startswith("unplaced"), timeout=60, what="high unplaced")
    d.clock.advance(5)                            # retried: still no preemption
    assert d.wait_idle(30)
    assert deleted(env) == [] and d.metrics.value("placer_preemptions_total", {"policy": "off"}) == 0


def test_within_quota_priority_min_run_time_and_rate(env):
    """Priorities 0, 0, 5, 5 fill the fleet. An arrival of priority 0 preempts nothing (never
    an equal priority); one of priority 5 waits while every copy is younger than the minimum
    run time, then takes one of the priority-0 jobs (never the 5s). With a rate of one per
    minute, a second arrival (priority 10) waits for the minute to pass."""
    d = env.daemon(preemption="within-quota", min_run_time=30.0, preemption_rate=1, retry_interval=1.0, lease=LONG)
    jobs = _fill(env, d, [0, 0, 5, 5])
    equal = job("equal", gpus=8, prio=0)
    env.create(equal)
    wait_for(lambda: message(env, equal).startswith("unplaced"), timeout=60, what="equal unplaced")
    five = job("five", gpus=8, prio=5)
    env.create(five)
    wait_for(lambda: message(env, five).startswith("unplaced"), timeout=60, what="five unplaced")
    d.clock.advance(5)                            # rounds again, every copy still too young
    assert d.wait_idle(30)
    assert deleted(env) == []
    d.clock.advance(30)                           # now old enough
    wait_for(lambda: deleted(env), timeout=60, what="a preemption")
    victim = deleted(env)[0]
    assert victim in ("run-0", "run-1"), victim   # a priority-0 job, never a 5
    assert not any(n == "five" for n in created(env))
    wait_for(lambda: reap(env) or placed(env, five), timeout=60, what="five placed once the victim's pods are gone")
    assert d.wait_idle(30)
    assert not placed(env, equal)
    ten = job("ten", gpus=8, prio=10)
    env.create(ten)
    wait_for(lambda: message(env, ten).startswith("unplaced"), timeout=60, what="ten unplaced")
    d.clock.advance(5)                            # retried within the minute: the rate holds it
    assert d.wait_idle(30)
    assert len(deleted(env)) == 1
    d.clock.advance(60)
    wait_for(lambda: len(deleted(env)) == 2, timeout=60, what="the second preemption after the minute")
    assert deleted(env)[1] in [o["metadata"]["name"] for o in jobs] + ["five", "equal"]
    wait_for(lambda: reap(env) or placed(env, ten), timeout=60, what="ten placed")
    assert never_two(env) == {}
    assert d.metrics.value("placer_preemptions_total", {"policy": "within-quota"}) == 2


def test_two_daemons_preempt_once_and_a_crash_mid_way_preempts_no_more(env, tmp_path):
    """Two daemons; the leader preempts one job for a higher-priority arrival, then dies
    (its lease kept) before the victim's pods are gone. The other takes over and places the
    arrival once they are: one delete in all, by either daemon, and no second victim."""
    first = env.daemon(kubeconfig=token_kubeconfig(env.fleet, tmp_path / "one", "one"), preemption="within-quota",
                       min_run_time=0.0, retry_interval=1.0)
    second = env.daemon(kubeconfig=token_kubeconfig(env.fleet, tmp_path / "two", "two"), preemption="within-quota",
                        min_run_time=0.0, retry_interval=1.0)
    wait_for(lambda: first.leader.is_leader or second.leader.is_leader, timeout=30, what="a leader")
    leader, standby = (first, second) if first.leader.is_leader else (second, first)
    _fill(env, leader, [0, 0, 0, 0])
    high = job("high", gpus=8, prio=10)
    env.create(high)
    wait_for(lambda: deleted(env), timeout=60, what="a preemption")
    leader.stop(release=False)                    # dies mid-way: the victim's pods still run
    wait_for(lambda: standby.leader.is_leader, timeout=30, what="the standby takes over")
    assert standby.wait_idle(30)
    standby.clock.advance(3)                      # its rounds see the victim's pods still there
    assert standby.wait_idle(30)
    assert len(deleted(env)) == 1 and "high" not in created(env)
    reap(env)
    wait_for(lambda: placed(env, high), timeout=60, what="high placed by the new leader")
    assert standby.wait_idle(30)
    assert len(deleted(env)) == 1 and never_two(env) == {}
    deletes = [r for tok in ("one", "two") for r in writes_by(env.fleet, tok, TARGETS) if r.verb == "delete"]
    assert len(deletes) == 1
    victim = deleted(env)[0]
    obj = job(victim, gpus=8)
    assert not placed(env, obj) and env.annotations(obj)[D.ANN_PHASE] == "Pending"


def test_sigkill_mid_preemption_leaves_a_consistent_fleet(make_fleet, tmp_path):
    """`placer daemon --preemption within-quota` (the real CLI in a subprocess) is killed with
    SIGKILL right after each of two preemptions starts deleting, and restarted: in the end both
    arrivals run, each of the two victims is pending with no copy (nothing lost), no workload
    ever had two copies, and no third job was preempted."""
    import os
    import random
    import signal
    import subprocess
    import sys
    import time

    from tests.daemon.daemon_helpers import gpu_nodes
    from tests.daemon.test_daemon_sigkill import _clusters_file, _expire_leases

    fleet = make_fleet(names=("hub", *TARGETS), bookmark_interval=0.5)
    fleet["alpha"].seed(gpu_nodes("a", 2))
    fleet["beta"].seed(gpu_nodes("b", 2))
    env = Env(fleet)
    clusters = _clusters_file(tmp_path / "clusters.yaml")
    rng = random.Random(23)
    procs: list[subprocess.Popen] = []

    def start(run_: int) -> subprocess.Popen:
        kubeconfig = token_kubeconfig(fleet, tmp_path / f"run{run_}.kubeconfig", f"run-{run_}")
        log = open(tmp_path / f"run{run_}.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "placer", "daemon", "--clusters", clusters,
                                 "--kubeconfig", str(kubeconfig), "--batch-window", "0.1", "--time-limit", "1",
                                 "--preemption", "within-quota", "--min-run-time", "0s"],
                                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        procs.append(proc)
        return proc

    try:
        proc = start(0)
        low = [job(f"low-{i}", gpus=8, prio=0) for i in range(4)]
        for obj in low:
            env.create(obj)
        wait_for(lambda: all(placed(env, o) for o in low), timeout=120, what="the fleet filled")
        for obj in low:
            run(env, obj, gpus=8)
        high = [job(f"high-{i}", gpus=8, prio=10) for i in range(2)]
        for obj in high:
            env.create(obj)
        for kill in range(2):
            wait_for(lambda: len(deleted(env)) > kill or proc.poll() is not None, timeout=120,
                     what=f"preemption {kill} under way", interval=0.01)
            assert proc.poll() is None, (tmp_path / f"run{kill}.log").read_text()[-2000:]
            time.sleep(rng.uniform(0.0, 0.2))
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            _expire_leases(fleet)
            proc = start(kill + 1)
            wait_for(lambda: reap(env) or placed(env, high[kill]) or proc.poll() is not None, timeout=120,
                     what=f"high-{kill} placed after the restart", interval=0.05)
        wait_for(lambda: reap(env) or all(placed(env, o) for o in high), timeout=120, what="both arrivals placed")
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        victims = deleted(env)
        assert len(victims) == 2 and all(v.startswith("low-") for v in victims), victims
        assert never_two(env) == {}
        for obj in [*low, *high]:                 # nothing lost: placed with its one copy, or pending with none
            name = obj["metadata"]["name"]
            where = placed(env, obj)
            if name in victims:
                assert where is None and env.copies(obj) == {}, name
                assert env.annotations(obj)[D.ANN_PHASE] == "Pending", name
            else:
                assert list(env.copies(obj)) == [where], name
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        env.stop()
