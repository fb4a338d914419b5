"""A target that accepts connections and answers nothing (a black-holed or overloaded API
server, the test API server's `hang` fault) holds no work hostage (issue 24, item 5): new
arrivals go to the healthy cluster while it hangs, creates that timed out there are moved,
a copy such a create committed after all is deleted once it answers again, the staging
objects say so, and /healthz names it degraded. Judged from the servers' request logs and
stores; every wait is on a condition (the hang ends when the test releases it)."""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.request

from placer import daemon as D
from tests.daemon.daemon_helpers import Env, created_copies, events_for, gpu_nodes, jobset, wait_for

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
TARGETS = ("alpha", "beta")
DEADLINE_WORDS = re.compile(r"within the \d+(\.\d+)?s request deadline")


def _healthz(d) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{d.server.address}/healthz", timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _fleet(make_fleet):
    fleet = make_fleet(names=("hub", *TARGETS), bookmark_interval=0.5)
    fleet["alpha"].seed(gpu_nodes("a", 2))          # room for all eight arrivals on either cluster
    fleet["beta"].seed(gpu_nodes("b", 2))
    return fleet


def _created_on(fleet, cluster: str) -> set[str]:
    return {r.name for r in fleet[cluster].requests.created("jobsets")}


def _names_on(fleet, cluster: str) -> set[str]:
    return {o["metadata"]["name"] for o in fleet[cluster].objects(*JOBSET, "placer-staging")}


def test_a_cluster_hung_from_the_start_holds_no_arrival_hostage(make_fleet):
    """alpha accepts connections and answers nothing from before the daemon starts: the
    daemon starts anyway, places all eight arrivals on beta while alpha hangs, and /healthz
    (still 200) names alpha as degraded until it answers again."""
    fleet = _fleet(make_fleet)
    env = Env(fleet)
    fleet["alpha"].faults.hang()
    try:
        d = env.daemon(start=False, client_timeout=120)     # the clients alone would wait two minutes
        # started on a thread of its own: the start is judged by the arrivals, like the rest
        starting = threading.Thread(target=d.start, kwargs={"metrics_addr": "127.0.0.1:0"}, daemon=True)
        starting.start()
        names = [f"w{i}" for i in range(8)]
        for n in names:
            env.create(jobset(n, pods=1, gpus=1))
        wait_for(lambda: set(names) <= _created_on(fleet, "beta"), timeout=60,
                 what="all eight created on beta while alpha hangs")
        starting.join(30)
        assert not starting.is_alive() and fleet["alpha"].faults.hanging and fleet["alpha"].faults.held > 0
        wait_for(lambda: all(env.annotations(jobset(n)).get(D.PLACED_CLUSTER) == "beta" for n in names),
                 timeout=30, what="the staging objects annotated")
        code, body = _healthz(d)
        assert code == 200 and body.startswith("ok (leader)"), body
        assert "degraded: alpha" in body, body
        wait_for(lambda: d.metrics.value("placer_degraded_clusters") == 1, what="the degraded gauge")
        fleet["alpha"].faults.release()
        wait_for(lambda: "degraded" not in _healthz(d)[1], timeout=60, what="alpha answering again")
        wait_for(lambda: d.metrics.value("placer_degraded_clusters") == 0, what="the degraded gauge back to 0")
        wait_for(lambda: d.caches["alpha"].synced, timeout=60, what="alpha's caches synced")
        assert d.wait_idle(30)
        assert _names_on(fleet, "alpha") == set() and _names_on(fleet, "beta") == set(names)
        made = created_copies(fleet, TARGETS)
        assert all(made[n] == ["beta"] for n in names), made       # never a copy on two clusters
    finally:
        fleet["alpha"].faults.release()
        env.stop()


def test_creates_that_time_out_move_and_a_copy_they_committed_is_deleted(make_fleet):
    """The cluster the plan prefers goes dark at the first apply of a copy (that apply, and
    every request after it, answered only when the test releases the hang; released, the
    held apply commits). The timed-out creates move to the other cluster, the staging
    objects name the cluster and the deadline, /healthz names it degraded, and once it
    answers the daemon looks for the copy by placer's labels and deletes it: no workload
    is left on two clusters."""
    fleet = _fleet(make_fleet)
    env = Env(fleet)
    try:
        d = env.daemon(start=False)
        d.start(metrics_addr="127.0.0.1:0")
        env.create(jobset("probe", pods=1, gpus=1))     # where equal work goes first
        first = wait_for(lambda: env.annotations(jobset("probe")).get(D.PLACED_CLUSTER), what="probe placed")
        other = next(c for c in TARGETS if c != first)
        assert d.wait_idle(10)
        hung = fleet[first]
        hung.faults.hang(match="/jobsets/", methods=("PATCH",), spread=True)
        names = [f"w{i}" for i in range(8)]
        for n in names:
            env.create(jobset(n, pods=1, gpus=1))
        wait_for(lambda: set(names) <= _created_on(fleet, other), timeout=60,
                 what=f"all eight created on {other} while {first} hangs")
        assert hung.faults.hanging
        tried = {r.name for r in hung.requests.select(resource="jobsets", method="PATCH")} & set(names)
        assert tried, f"no create was tried on {first}"
        for n in tried:                                 # the staging object says what happened
            said = [e["message"] for e in events_for(fleet, n) if e.get("type") == "Warning"]
            assert any(first in m and DEADLINE_WORDS.search(m) for m in said), (n, said)
        code, body = _healthz(d)
        assert code == 200 and f"degraded: {first}" in body, body
        released = time.monotonic()
        hung.faults.release()                           # the held apply commits now
        wait_for(lambda: tried <= _created_on(fleet, first), timeout=30, what="the held apply committed")
        wait_for(lambda: _names_on(fleet, first) == {"probe"}, timeout=60, what=f"the late copy deleted on {first}")
        wait_for(lambda: "degraded" not in _healthz(d)[1], timeout=60, what=f"{first} answering again")
        assert d.wait_idle(30)
        # judged from the servers: each copy committed on the hung cluster was deleted there
        # after it answered again, found by placer's labels, and every arrival runs on `other`
        late = _created_on(fleet, first) & set(names)
        deleted = {r.name for r in hung.requests.select(verb="delete", resource="jobsets", since=released)
                   if r.code == 200}
        assert late and late <= deleted, (late, deleted)
        looked = [r.query.get("labelSelector", "") for r in hung.requests.select(verb="list", resource="jobsets",
                                                                                 since=released)]
        assert any("placer.dev/workload=" in s for s in looked), looked
        assert _names_on(fleet, other) == set(names) and _names_on(fleet, first) == {"probe"}
        assert all(env.annotations(jobset(n)).get(D.PLACED_CLUSTER) == other for n in names)
        assert not set(names) & _names_on(fleet, first)        # none on two clusters once it answers
    finally:
        for c in TARGETS:
            fleet[c].faults.release()
        env.stop()
