"""What the daemon does when the world moves under it (issue 13's contract): a copy deleted by
someone else, a copy edited on its cluster, a staging spec edit that no longer fits, a staging
object deleted while it is being placed, a leader whose renewals stall while it still works
(split brain), a target that refuses connections during a burst. Judged from the API servers'
stores, never from the daemon's own state."""

from __future__ import annotations

from placer import daemon as D
from placer.daemon import FakeClock
from tests.daemon.daemon_helpers import STAGING, Env, jobset, wait_for, wait_progress
from tests.kubeapi.builders import gpu_node

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")


def _placed(env: Env, obj: dict) -> str | None:
    return env.annotations(obj).get(D.PLACED_CLUSTER)


def _events(env: Env, name: str) -> list[tuple[str, str, str]]:
    items = env.hub.list("events", STAGING).items
    return [(e["type"], e["reason"], e["message"]) for e in items if e["involvedObject"]["name"] == name]


def _all_copies(env: Env) -> list[tuple[str, str]]:
    return sorted((c, o["metadata"]["name"]) for c in ("alpha", "beta") for o in env.fleet[c].objects(*JOBSET, STAGING))


def _remote(env: Env, cluster: str):
    client = env.kube.client(cluster)
    return client, client.resource_for(*JOBSET)


def test_a_copy_deleted_by_someone_else_is_placed_again(env):
    d = env.daemon()
    job = jobset("gone", pods=1, gpus=4)
    env.create(job)
    assert d.wait_idle(10)
    where = _placed(env, job)
    client, res = _remote(env, where)
    client.delete(res, "gone", STAGING)
    wait_for(lambda: any(r == D.COPY_DELETED for _, r, _ in _events(env, "gone")), what="CopyDeleted event")
    wait_for(lambda: _placed(env, job) and list(env.copies(job)) == [_placed(env, job)], what="placed again")
    assert d.wait_idle(10)
    [(type_, _, message)] = [e for e in _events(env, "gone") if e[1] == D.COPY_DELETED]
    assert type_ == "Warning" and f"the copy on {where} was deleted" in message
    assert len(env.copies(job)) == 1


def test_a_finished_copy_deleted_is_not_run_again(env):
    d = env.daemon()
    job = jobset("done", pods=1, gpus=4)
    env.create(job)
    assert d.wait_idle(10)
    where = _placed(env, job)
    client, res = _remote(env, where)
    client.patch_status(res, "done", {"conditions": [
        {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}, STAGING)
    wait_for(lambda: env.annotations(job).get(D.ANN_PHASE) == "Completed", what="Completed mirrored")
    client.delete(res, "done", STAGING)
    wait_for(lambda: "not run again" in env.annotations(job).get(D.ANN_MESSAGE, ""), what="told not run again")
    assert d.wait_idle(10)
    assert env.copies(job) == {} and _placed(env, job) == where
    assert env.annotations(job)[D.ANN_PHASE] == "Completed"
    assert any(c["type"] == "Completed" for c in env.staged(job)["status"]["conditions"])   # status kept
    assert not [e for e in _events(env, "done") if e[1] == D.COPY_DELETED]


def test_drift_on_a_copy_is_put_back_and_other_fields_are_left_alone(env):
    d = env.daemon()
    job = jobset("drift", pods=1, gpus=4)
    env.create(job)
    assert d.wait_idle(10)
    where = _placed(env, job)
    client, res = _remote(env, where)
    copy_ = client.get(res, "drift", STAGING)
    rjob = {**copy_["spec"]["replicatedJobs"][0], "replicas": 3}
    # someone edits a field placer set (replicas) and adds one placer never sets (network)
    client.patch(res, "drift", {"spec": {"replicatedJobs": [rjob], "network": {"enableDNSHostnames": True}}},
                 STAGING, field_manager="kubectl-edit")
    wait_for(lambda: client.get(res, "drift", STAGING)["spec"]["replicatedJobs"][0]["replicas"] == 1,
             what="replicas put back")
    wait_for(lambda: any(r == D.DRIFT_CORRECTED for _, r, _ in _events(env, "drift")), what="DriftCorrected event")
    [(type_, _, message)] = [e for e in _events(env, "drift") if e[1] == D.DRIFT_CORRECTED]
    assert type_ == "Normal" and "spec.replicatedJobs" in message and where in message
    assert client.get(res, "drift", STAGING)["spec"].get("network") == {"enableDNSHostnames": True}
    assert d.wait_idle(10)
    assert list(env.copies(job)) == [where]


def test_a_spec_edit_that_does_not_fit_is_held_until_it_does(env):
    clock = FakeClock()
    d = env.daemon(clock=clock)
    job = jobset("grow", pods=1, gpus=8)
    env.create(job)
    assert d.wait_idle(10)
    where = _placed(env, job)
    res = env.hub.resource_for(*JOBSET)
    rjob = env.staged(job)["spec"]["replicatedJobs"][0]
    tpl = rjob["template"]
    env.hub.patch(res, "grow", {"spec": {"replicatedJobs": [
        {**rjob, "template": {**tpl, "spec": {**tpl["spec"], "parallelism": 3, "completions": 3}}}]}}, STAGING)
    wait_for(lambda: env.annotations(job).get(D.ANN_MESSAGE, "").find("spec edit not forwarded: ") >= 0,
             what="edit held")
    assert d.wait_idle(10)
    copy_ = env.copies(job)[where]
    assert copy_["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 1       # not forwarded
    [(type_, _, message)] = [e for e in _events(env, "grow") if e[1] == D.EDIT_DOES_NOT_FIT]
    assert type_ == "Warning" and message.startswith("spec edit not forwarded: ")
    # a third node on its cluster: the edit now fits and is forwarded there
    env.kube.client(where).create("nodes", gpu_node(f"{where[0]}-new", gpus=8))
    clock.advance(6)
    wait_for(lambda: env.copies(job)[where]["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 3,
             what="edit forwarded once it fits")
    assert list(env.copies(job)) == [where]
    wait_for(lambda: "not forwarded" not in env.annotations(job).get(D.ANN_MESSAGE, ""), what="message cleared")


def test_a_staging_object_deleted_while_being_placed_leaves_no_copy(env):
    d = env.daemon()
    env.fleet["alpha"].faults.delay = 0.3
    env.fleet["beta"].faults.delay = 0.3
    job = jobset("brief", pods=1, gpus=1)
    env.create(job)
    wait_for(lambda: d.creating or _all_copies(env), what="the create under way")
    env.hub.delete(env.hub.resource_for(*JOBSET), "brief", STAGING)
    wait_for(lambda: not env.fleet["hub"].objects(*JOBSET, STAGING), timeout=20, what="staging object gone")
    env.fleet["alpha"].faults.delay = env.fleet["beta"].faults.delay = 0.0
    assert d.wait_idle(10)
    assert _all_copies(env) == []


def test_a_leader_whose_renewals_stall_stops_writing_before_the_standby_acts(env):
    """Split brain: the leader's renewal thread stalls (a long pause) while its work goes on
    against slow targets; the standby takes over once the lease expires. The fence keeps every
    write of the old leader inside its lease: no workload ends up on two clusters."""
    for c in ("alpha", "beta"):
        env.fleet[c].seed([gpu_node(f"{c[0]}{i}", gpus=8) for i in range(2, 6)])
    a = env.daemon(identity="a")
    b = env.daemon(identity="b")
    wait_for(lambda: a.leader.is_leader or b.leader.is_leader, what="a leader")
    old, new = (a, b) if a.leader.is_leader else (b, a)
    for c in ("alpha", "beta"):
        env.fleet[c].faults.delay = 0.15
    names = [f"s{i:02d}" for i in range(24)]
    for n in names[:12]:
        env.create(jobset(n, pods=1, gpus=2))
    wait_for(lambda: old.creating or _all_copies(env), what="the old leader at work")
    old.leader._stop.set()                                   # its renewals stall; its work goes on
    for n in names[12:]:
        env.create(jobset(n, pods=1, gpus=2))
    wait_for(lambda: new.leader.is_leader, timeout=15, what="the standby took over")
    assert not old.leader.is_leader
    wait_for(lambda: all(_placed(env, jobset(n)) for n in names), timeout=60, what="all placed")
    for c in ("alpha", "beta"):
        env.fleet[c].faults.delay = 0.0
    assert new.wait_idle(20)
    copies = [n for _, n in _all_copies(env)]
    assert sorted(copies) == names                           # each exactly once: none on two clusters
    assert new.metrics.value("placer_withdrawals_total") == 0


def test_a_refusing_target_does_not_stall_the_healthy_one(env):
    d = env.daemon()
    assert d.wait_idle(10)
    env.fleet["beta"].down()
    try:
        names = [f"r{i:02d}" for i in range(20)]
        for n in names:
            env.create(jobset(n, pods=1, gpus=1))
        # alpha has 16 GPUs: it keeps placing while beta refuses every connection
        # judged by progress (one more placed on alpha), not by a total budget
        wait_progress(lambda: sum(1 for n in names if _placed(env, jobset(n)) == "alpha"), 16,
                      what="the healthy cluster filled")
        assert not [n for c, n in _all_copies(env) if c == "beta"]
    finally:
        env.fleet["beta"].up()
    wait_progress(lambda: sum(1 for n in names if _placed(env, jobset(n))), len(names), stall=30,
                  what="the rest placed on beta")
    assert d.wait_idle(10)
    copies = [n for _, n in _all_copies(env)]
    assert sorted(copies) == names
