"""Fleet-wide quotas in the daemon (issue 23 item 1): FleetQuota objects on the hub, watched and
applied in every round, live; what each quota's copies already run counted (pods bound or
not), also by a restarted daemon; each object's status written. Judged from the test API
servers: the copies the targets' request logs say were created, the staging objects'
annotations, the FleetQuota objects' status; waits are on conditions only."""

from __future__ import annotations

from pathlib import Path

import yaml

from placer import actuate as A
from placer import daemon as D
from placer.daemon import LeaseTiming
from placer.model.workload import WorkloadRef
from tests.daemon.daemon_helpers import STAGING, Env, created_copies, jobset, token_kubeconfig, wait_for
from tests.kubeapi.builders import bound_pod

TARGETS = ("alpha", "beta")
CRD = yaml.safe_load((Path(__file__).parents[2] / "catalog" / "crd" / "fleetquotas.placer.dev.yaml").read_text())
API = "placer.dev/v1alpha1"


def quota(name: str, team: str, gpus: int, **spec) -> dict:
    return {"apiVersion": API, "kind": "FleetQuota", "metadata": {"name": name},
            "spec": {"members": {"selector": f"team={team}"}, "nominal": {"nvidia.com/gpu": gpus}, **spec}}


def job(name: str, team: str, gpus: int = 4) -> dict:
    obj = jobset(name, pods=1, gpus=gpus)
    obj["metadata"]["labels"] = {"team": team}
    return obj


def with_quota_crd(env: Env) -> None:
    env.fleet["hub"].install_crds([CRD])


def apply_quota(env: Env, obj: dict) -> dict:
    return env.hub.apply(obj, env.hub.resource_for(API, "FleetQuota"), force=True)


def status(env: Env, name: str) -> dict:
    return env.fleet["hub"].get(API, "FleetQuota", name).get("status") or {}


def placed(env: Env, obj: dict) -> str | None:
    return env.annotations(obj).get(D.PLACED_CLUSTER)


def message(env: Env, obj: dict) -> str:
    return env.annotations(obj).get(D.ANN_MESSAGE, "")


def created(env: Env) -> dict[str, list[str]]:
    return created_copies(env.fleet, TARGETS)


def bind_pods(env: Env, obj: dict) -> None:
    """The copy's pod bound and running on its cluster, as the target's scheduler and kubelet
    would make it: its demand is then in the node's usage, and nothing is promised any more."""
    name = obj["metadata"]["name"]
    cluster = placed(env, obj)
    ref = WorkloadRef.of(obj)
    node = env.fleet[cluster].objects("v1", "Node")[0]["metadata"]["name"]
    env.fleet[cluster].seed([bound_pod(f"{name}-workers-0-0", node, gpus=4, namespace=STAGING, phase="Running",
                                     labels={"jobset.sigs.k8s.io/jobset-name": name,
                                             "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                                             A.WORKLOAD: A.workload_label(ref)})], events=True)


def test_fleetquotas_bound_what_the_daemon_places_and_a_raise_places_the_rest_live(env):
    with_quota_crd(env)
    apply_quota(env, quota("team-a", "a", 8))
    apply_quota(env, quota("team-b", "b", 4))
    d = env.daemon()
    a = [job(f"a-{i}", "a") for i in range(3)]
    b = [job(f"b-{i}", "b") for i in range(2)]
    free = job("free", "c", gpus=8)                     # in no quota: unrestricted
    for obj in [*a, *b, free]:
        env.create(obj)
    wait_for(lambda: sum(bool(placed(env, o)) for o in [*a, *b, free]) == 4 and
             sum(message(env, o).startswith("unplaced") for o in [*a, *b]) == 2, timeout=60,
             what="two of team a, one of team b and the free one placed, the rest unplaced")
    assert d.wait_idle(30)
    copies = created(env)
    assert sorted(n for n in copies if n.startswith("a-")) == [o["metadata"]["name"] for o in a if placed(env, o)]
    assert len([n for n in copies if n.startswith("a-")]) == 2
    assert len([n for n in copies if n.startswith("b-")]) == 1 and "free" in copies
    waiting_a = next(o for o in a if not placed(env, o))
    waiting_b = next(o for o in b if not placed(env, o))
    assert "over quota: team-a uses 8 of 8 GPUs" in message(env, waiting_a), message(env, waiting_a)
    assert "over quota: team-b uses 4 of 4 GPUs" in message(env, waiting_b), message(env, waiting_b)
    wait_for(lambda: status(env, "team-a").get("used") == {"nvidia.com/gpu": "8"} and
             status(env, "team-a").get("pending") == {"nvidia.com/gpu": "4"}, timeout=30, what="team-a status")
    assert status(env, "team-b")["used"] == {"nvidia.com/gpu": "4"}
    assert status(env, "team-a")["conditions"][0]["status"] == "True"
    # an update to the object: team-a's nominal raised to 12; the next round places the waiting one,
    # told by the watch (no LIST of FleetQuotas after the start)
    lists = len(env.fleet["hub"].requests.select(verb="list", resource="fleetquotas"))
    assert lists >= 1
    apply_quota(env, quota("team-a", "a", 12))
    wait_for(lambda: placed(env, waiting_a), timeout=60, what="the waiting team-a workload placed after the raise")
    assert d.wait_idle(30)
    assert not placed(env, waiting_b)                   # team-b's quota did not change
    assert "over quota: team-b" in message(env, waiting_b)
    copies = created(env)
    assert len([n for n in copies if n.startswith("a-")]) == 3 and len([n for n in copies if n.startswith("b-")]) == 1
    assert all(len(cs) == 1 for cs in copies.values())   # each copy created once, on one cluster
    assert len(env.fleet["hub"].requests.select(verb="list", resource="fleetquotas")) == lists
    wait_for(lambda: status(env, "team-a").get("used") == {"nvidia.com/gpu": "12"} and
             status(env, "team-a").get("pending") == {"nvidia.com/gpu": "0"}, timeout=30, what="status after")


def test_a_restarted_daemon_counts_running_copies_and_does_not_over_admit(env):
    """team-a (8 GPUs) runs two 4-GPU copies whose pods are bound and running (nothing of them is
    promised any more); a new daemon after a restart keeps a third one pending."""
    with_quota_crd(env)
    apply_quota(env, quota("team-a", "a", 8))
    first = env.daemon()
    a = [job(f"a-{i}", "a") for i in range(2)]
    for obj in a:
        env.create(obj)
    wait_for(lambda: all(placed(env, o) for o in a), timeout=60, what="team a's two placed")
    assert first.wait_idle(30)
    for obj in a:
        bind_pods(env, obj)
    assert first.wait_idle(30)
    first.stop()
    late = job("a-late", "a")
    env.create(late)
    second = env.daemon()
    wait_for(lambda: message(env, late).startswith("unplaced"), timeout=60, what="the late one unplaced")
    assert second.wait_idle(30)
    assert "over quota: team-a uses 8 of 8 GPUs" in message(env, late), message(env, late)
    assert "a-late" not in created(env)
    wait_for(lambda: status(env, "team-a").get("used") == {"nvidia.com/gpu": "8"}, timeout=30, what="status")


def test_clusters_file_quotas_apply_and_a_fleetquota_of_the_same_name_wins(env):
    from placer.model.quota import Quota, Quotas
    from placer.model.selectors import parse_label_selector

    with_quota_crd(env)
    file = Quotas((Quota("team-a", {"nvidia.com/gpu": 4}, selector=parse_label_selector("team=a"),
                         selector_text="team=a"),
                   Quota("team-b", {"nvidia.com/gpu": 4}, selector=parse_label_selector("team=b"),
                         selector_text="team=b")))
    apply_quota(env, quota("team-b", "b", 8))           # the object takes team-b's place
    d = env.daemon(quotas=file)
    objs = [job("a-0", "a"), job("a-1", "a"), job("b-0", "b"), job("b-1", "b")]
    for obj in objs:
        env.create(obj)
    wait_for(lambda: sum(bool(placed(env, o)) for o in objs) == 3 and message(env, objs[1]).startswith("unplaced"),
             timeout=60, what="a-1 over the file's quota, both of team-b placed by the object's")
    assert d.wait_idle(30)
    assert "over quota: team-a uses 4 of 4 GPUs" in message(env, objs[1])
    assert sorted(created(env)) == ["a-0", "b-0", "b-1"]


def test_a_malformed_fleetquota_is_reported_on_it_and_the_valid_ones_still_apply(env):
    with_quota_crd(env)
    apply_quota(env, quota("team-a", "a", 4))
    bad = quota("broken", "b", 4, borrowingLimit={"nvidia.com/gpu": 2})   # no cohort: the test server lets it in
    apply_quota(env, bad)
    d = env.daemon()
    objs = [job("a-0", "a"), job("a-1", "a"), job("b-0", "b")]
    for obj in objs:
        env.create(obj)
    wait_for(lambda: status(env, "broken").get("conditions"), timeout=60, what="the broken one's condition")
    cond = status(env, "broken")["conditions"][0]
    assert cond["status"] == "False" and "borrowingLimit" in cond["message"], cond
    wait_for(lambda: placed(env, objs[0]) and placed(env, objs[2]) and message(env, objs[1]).startswith("unplaced"),
             timeout=60, what="team-a bounded, team b unrestricted")
    assert d.wait_idle(30)
    assert sorted(created(env)) == ["a-0", "b-0"]
    assert d.healthy()[0]


def test_a_fleetquota_crd_installed_while_the_daemon_runs_is_followed_and_counts_what_runs(env):
    d = env.daemon()
    early = [job(f"a-{i}", "a") for i in range(2)]             # no quota yet: both placed
    for obj in early:
        env.create(obj)
    wait_for(lambda: all(placed(env, o) for o in early), timeout=60, what="the early ones placed")
    assert d.wait_idle(30)
    with_quota_crd(env)                                          # found by the daemon's CRD watch
    wait_for(lambda: d.view.quotas is not None and d.view.quotas.synced.is_set(), timeout=60,
             what="FleetQuota watched")
    apply_quota(env, quota("team-a", "a", 8))
    wait_for(lambda: status(env, "team-a").get("used") == {"nvidia.com/gpu": "8"}, timeout=60,
             what="the early ones counted in its status")
    late = job("a-late", "a")
    env.create(late)
    wait_for(lambda: message(env, late).startswith("unplaced"), timeout=60, what="the late one unplaced")
    assert "over quota: team-a uses 8 of 8 GPUs" in message(env, late)
    assert d.wait_idle(30)
    assert sorted(created(env)) == ["a-0", "a-1"]


def test_a_copy_that_finishes_frees_its_quota_for_what_waits(env):
    """team-a's 8 GPUs held by two copies; one completes (the operator's status on the copy):
    the waiting third is placed at once, not at the retry interval (set far beyond the wait)."""
    with_quota_crd(env)
    apply_quota(env, quota("team-a", "a", 8))
    d = env.daemon(retry_interval=3600.0)
    a = [job(f"a-{i}", "a") for i in range(3)]
    for obj in a:
        env.create(obj)
    wait_for(lambda: sum(bool(placed(env, o)) for o in a) == 2 and
             sum(message(env, o).startswith("unplaced") for o in a) == 1, timeout=60, what="two placed, one waits")
    assert d.wait_idle(30)
    waiting = next(o for o in a if not placed(env, o))
    done = next(o for o in a if placed(env, o))
    cluster = placed(env, done)
    client = env.kube.client(cluster)
    client.patch_status(client.resource_for("jobset.x-k8s.io/v1alpha2", "JobSet"), done["metadata"]["name"], {
        "conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                        "message": "jobset completed", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}, STAGING)
    wait_for(lambda: placed(env, waiting), timeout=60, what="the waiting one placed once a copy finished")
    assert d.wait_idle(30)
    assert len(created(env)) == 3 and all(len(cs) == 1 for cs in created(env).values())
    wait_for(lambda: status(env, "team-a").get("used") == {"nvidia.com/gpu": "8"}, timeout=30,
             what=f"used 4 + 4: {status(env, 'team-a')}")


def quota_events(env: Env) -> list[dict]:
    """The Events regarding FleetQuota objects, where the API server keeps a cluster-scoped
    object's Events (namespace `default`)."""
    return [e for e in env.fleet["hub"].objects("v1", "Event", "default")
            if (e.get("involvedObject") or {}).get("kind") == "FleetQuota"]


def test_a_malformed_fleetquota_gets_one_warning_event_per_generation_not_per_round(env):
    """A malformed FleetQuota: one Warning Event `InvalidQuota` regarding it, naming the field;
    rounds and status refreshes go by (team-a's status follows each placement) without another;
    a changed spec that is still malformed gets one more; made valid, none."""
    with_quota_crd(env)
    apply_quota(env, quota("team-a", "a", 16))
    bad = apply_quota(env, quota("broken", "b", 4, borrowingLimit={"nvidia.com/gpu": 2}))   # no cohort
    d = env.daemon()
    wait_for(lambda: quota_events(env), timeout=60, what="the Warning Event on the broken FleetQuota")
    [e] = quota_events(env)
    assert (e["type"], e["reason"]) == ("Warning", "InvalidQuota"), e
    assert "borrowingLimit" in e["message"] and "generation 1" in e["message"], e["message"]
    assert e["involvedObject"]["name"] == "broken" and e["involvedObject"]["uid"] == bad["metadata"]["uid"]
    for i in range(3):                                 # rounds go by, each refreshing the quotas' status
        obj = job(f"a-{i}", "a")
        env.create(obj)
        wait_for(lambda: placed(env, obj), timeout=60, what=f"a-{i} placed")
        wait_for(lambda: status(env, "team-a").get("used") == {"nvidia.com/gpu": str(4 * (i + 1))}, timeout=60,
                 what=f"team-a's status counts {i + 1} copies")
    assert d.wait_idle(30)
    hub = env.fleet["hub"].requests
    assert len([r for r in hub.created("events") if r.namespace == "default"]) == 1
    assert hub.count(verb="patch", resource="events") == 0        # not counted again on the Event either
    assert [x.get("count") for x in quota_events(env)] == [1]
    apply_quota(env, quota("broken", "b", 4, borrowingLimit={"nvidia.com/gpu": 3}))     # generation 2, still bad
    wait_for(lambda: len(quota_events(env)) == 2, timeout=60, what="a second Event for the changed spec")
    assert any("generation 2" in x["message"] for x in quota_events(env))
    apply_quota(env, quota("broken", "b", 4, cohort="lab", borrowingLimit={"nvidia.com/gpu": 3}))   # made valid
    wait_for(lambda: (status(env, "broken").get("conditions") or [{}])[0].get("status") == "True", timeout=60,
             what="the fixed FleetQuota applied")
    assert d.wait_idle(30)
    assert len(quota_events(env)) == 2 and hub.count(verb="patch", resource="events") == 0


def test_only_the_leader_tells_a_malformed_fleetquota_and_a_new_leader_counts_on_the_same_event(env, tmp_path):
    """Two daemons (each its own token, so the hub's request log tells them apart): the Event is
    created once, by the one holding the Lease; when it stops, the other takes over and tells it
    once more, counted on the same Event (count 2), never a second object."""
    with_quota_crd(env)
    apply_quota(env, quota("broken", "b", 4, borrowingLimit={"nvidia.com/gpu": 2}))
    lease = LeaseTiming(duration=3.0, renew_deadline=2.0, retry_period=0.2)
    a = env.daemon(kubeconfig=token_kubeconfig(env.fleet, tmp_path / "a.kubeconfig", "daemon-a"), identity="a",
                   lease=lease)
    b = env.daemon(kubeconfig=token_kubeconfig(env.fleet, tmp_path / "b.kubeconfig", "daemon-b"), identity="b",
                   lease=lease)
    wait_for(lambda: quota_events(env), timeout=60, what="the Warning Event")
    assert a.wait_idle(30) and b.wait_idle(30)
    hub = env.fleet["hub"].requests
    writers = {r.token for r in hub.select(resource="events") if r.verb in ("create", "patch")}
    assert len(writers) == 1, writers
    leader_token = writers.pop()
    leader, standby = (a, b) if leader_token == "daemon-a" else (b, a)
    leader.stop(release=True)
    wait_for(lambda: [e.get("count") for e in quota_events(env)] == [2], timeout=60,
             what="the new leader's word counted on the same Event")
    assert standby.wait_idle(30)
    assert len([r for r in hub.created("events") if r.namespace == "default"]) == 1
    assert {r.token for r in hub.select(resource="events", verb="patch")} == {"daemon-b" if leader is a else "daemon-a"}
