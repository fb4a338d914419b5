"""`placer daemon`'s contract with users and with the clusters, observed through the API
servers only (issue 13, "Faults, each a test"): a remote copy deleted by someone else, drift
on a copy, a staging spec edited right after placement (fitting or not), a staging object
deleted while it is being placed, and what a copy may carry and where it may go."""

from __future__ import annotations

import copy
import time

from placer import daemon as D
from tests.daemon.daemon_helpers import (
    RUNNING_STATUS,
    STAGING,
    Env,
    created_copies,
    events_for,
    fails_on_old_daemon,
    gpu_nodes,
    jobset,
    wait_for,
)
from tests.kubeapi.http import call

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
PIN = "placer.dev/cluster"
PHASE = "placer.dev/phase"                # the remote copy's phase, mirrored (docs/daemon.md)
COMPLETED_STATUS = {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                                    "message": "jobset completed successfully",
                                    "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                    "terminalState": "Completed"}


def _cluster(env: Env, obj: dict) -> str | None:
    return env.annotations(obj).get(D.PLACED_CLUSTER)


def _res(env: Env, cluster: str):
    client = env.kube.client(cluster)
    return client, client.resource_for(*JOBSET)


def _placed(env: Env, obj: dict, timeout: float = 15) -> str:
    return wait_for(lambda: _cluster(env, obj) in env.copies(obj) and _cluster(env, obj), timeout=timeout,
                    what=f"{obj['metadata']['name']} placed")


def _set_copy_status(env: Env, cluster: str, name: str, status: dict) -> None:
    client, res = _res(env, cluster)
    client.patch_status(res, name, status, STAGING)


def _delete_copy(env: Env, cluster: str, name: str) -> None:
    """Someone else (not placer) deletes the copy on its cluster."""
    code, body = call(env.fleet[cluster], "DELETE", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{STAGING}"
                                                    f"/jobsets/{name}")
    assert code == 200, body


# -- the remote copy deleted by someone else -----------------------------------------------------

@fails_on_old_daemon("a finished copy deleted by someone else is placed again")
def test_a_finished_copy_deleted_by_someone_else_is_left_alone(env):
    """Its work is done (the last phase mirrored to the hub was Completed): deleting the copy is
    cleaning up, not a loss. The daemon neither places it again nor complains."""
    d = env.daemon()
    job = jobset("done", pods=1, gpus=2)
    env.create(job)
    where = _placed(env, job)
    _set_copy_status(env, where, "done", COMPLETED_STATUS)
    wait_for(lambda: env.annotations(job).get(PHASE) == "Completed", what="Completed mirrored")
    _delete_copy(env, where, "done")
    assert d.wait_idle(10)
    time.sleep(1.5)                           # a re-placement would have happened by now
    assert d.wait_idle(10)
    assert env.copies(job) == {}, "a completed workload was placed again after its copy was deleted"
    assert created_copies(env.fleet, ("alpha", "beta"))["done"] == [where]      # made once, ever
    assert events_for(env.fleet, "done", "CopyDeleted") == []
    assert env.staged(job)["metadata"].get("deletionTimestamp") is None           # the staging object stays


@fails_on_old_daemon("no CopyDeleted event")
def test_a_running_copy_deleted_by_someone_else_is_placed_again_with_a_warning(env):
    """Not finished: the workload was lost, so the daemon says so (Warning Event CopyDeleted on
    the staging object) and places it again (on some cluster)."""
    d = env.daemon()
    job = jobset("lost", pods=1, gpus=2)
    env.create(job)
    where = _placed(env, job)
    _set_copy_status(env, where, "lost", RUNNING_STATUS["JobSet"])
    wait_for(lambda: env.annotations(job).get(PHASE) == "Running", what="Running mirrored")
    _delete_copy(env, where, "lost")
    wait_for(lambda: len(created_copies(env.fleet, ("alpha", "beta")).get("lost", ())) == 2,
             what="a second copy created")
    assert d.wait_idle(10)
    copies = env.copies(job)
    assert len(copies) == 1 and list(copies) == [_cluster(env, job)]
    warned = wait_for(lambda: events_for(env.fleet, "lost", "CopyDeleted"), what="CopyDeleted event")
    assert [e["type"] for e in warned] == ["Warning"]


# -- drift on a copy -----------------------------------------------------------------------------

@fails_on_old_daemon("drift on a copy is not put back")
def test_drift_on_a_copy_is_put_back(env):
    """Another field manager changes a spec field placer set on the copy: the daemon puts it
    back and records a Normal Event DriftCorrected."""
    d = env.daemon()
    job = jobset("drifty", pods=1, gpus=2)
    env.create(job)
    where = _placed(env, job)
    assert d.wait_idle(10)
    before = env.copies(job)[where]["spec"]
    changed = copy.deepcopy(before["replicatedJobs"])
    changed[0]["template"]["spec"]["template"]["spec"]["containers"][0]["image"] = "someone-elses:2"
    code, body = call(env.fleet[where], "PATCH", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{STAGING}/jobsets/drifty",
                      {"spec": {"replicatedJobs": changed}}, "application/merge-patch+json",
                      fieldManager="someone-else")
    assert code == 200 and body, body
    assert body["spec"]["replicatedJobs"] == changed          # it landed (the daemon may put it back at once)
    wait_for(lambda: env.copies(job).get(where, {}).get("spec", {}).get("replicatedJobs") == before["replicatedJobs"],
             what="the drift put back")
    events = wait_for(lambda: events_for(env.fleet, "drifty", "DriftCorrected"), what="DriftCorrected event")
    assert events[0]["type"] == "Normal"
    assert list(env.copies(job)) == [where]
    assert created_copies(env.fleet, ("alpha", "beta"))["drifty"] == [where]       # corrected, not re-created


# -- the staging spec edited right after placement -------------------------------------------------

def _edit_gpus(env: Env, name: str, pods: int, gpus: int) -> None:
    res = env.hub.resource_for(*JOBSET)
    env.hub.patch(res, name, {"spec": jobset(name, pods=pods, gpus=gpus)["spec"]}, STAGING)


def _copy_gpus(env: Env, job: dict, cluster: str) -> str:
    spec = env.copies(job)[cluster]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"]


def test_a_spec_edit_that_fits_is_forwarded(env):
    d = env.daemon()
    job = jobset("grow", pods=2, gpus=2)
    env.create(job)
    where = _placed(env, job)
    _edit_gpus(env, "grow", pods=2, gpus=4)                   # fits even beside the old pods' GPUs
    wait_for(lambda: _copy_gpus(env, job, where) == "4", what="the edit forwarded")
    assert d.wait_idle(10)
    assert list(env.copies(job)) == [where]
    assert not env.annotations(job).get(D.ANN_MESSAGE, "").startswith("spec edit not forwarded")
    assert events_for(env.fleet, "grow", "EditDoesNotFit") == []


@fails_on_old_daemon("spec edits are forwarded without a fit check")
def test_a_spec_edit_that_does_not_fit_is_not_forwarded(env):
    """GPUs multiplied beyond what the cluster has: the copy keeps its spec, the staging
    object says why, and a Warning Event EditDoesNotFit is recorded."""
    d = env.daemon()
    job = jobset("greedy", pods=2, gpus=4)
    env.create(job)
    where = _placed(env, job)
    _edit_gpus(env, "greedy", pods=4, gpus=16)                # no node anywhere has 16 GPUs
    events = wait_for(lambda: events_for(env.fleet, "greedy", "EditDoesNotFit"), what="EditDoesNotFit event")
    assert events[0]["type"] == "Warning"
    assert d.wait_idle(10)
    assert env.annotations(job)[D.ANN_MESSAGE].startswith("spec edit not forwarded:"), env.annotations(job)
    assert _copy_gpus(env, job, where) == "4"
    assert list(env.copies(job)) == [where] and _cluster(env, job) == where


# -- the staging object deleted while it is being placed -------------------------------------------

def test_a_staging_object_deleted_while_being_placed_leaves_no_copy(env):
    """Deleted at every stage of its placement (right after its creation, once the daemon has
    taken it, while the copy's create is in flight, once placed): no copy survives anywhere,
    and every staging object really goes (the finalizer is released)."""
    for c in ("alpha", "beta"):
        env.fleet[c].faults.delay = 0.3       # slow targets: the deletions land mid-placement
    d = env.daemon()
    res = env.hub.resource_for(*JOBSET)

    def copy_write_sent(name: str) -> bool:   # logged on arrival, before the (slow) answer
        return any(r.name == name or ((r.body or {}).get("metadata") or {}).get("name") == name
                   for c in ("alpha", "beta") for r in env.fleet[c].requests.select(resource="jobsets")
                   if r.verb in ("create", "update", "patch"))
    stages = {
        "at-once": lambda name: True,
        # the daemon has taken it: its finalizer is on (or, for a daemon that sets it later, it is
        # already further along)
        "taken": lambda name: "placer.dev/cleanup" in (env.staged(jobset(name))["metadata"].get("finalizers") or ())
        or copy_write_sent(name),
        "in-flight": copy_write_sent,
        "placed": lambda name: _cluster(env, jobset(name)),
    }
    for stage, reached in stages.items():
        name = f"gone-{stage}"
        env.create(jobset(name, pods=1, gpus=1))
        wait_for(lambda: reached(name), what=f"{name}: {stage}", interval=0.005)
        env.hub.delete(res, name, STAGING)
    wait_for(lambda: not env.fleet["hub"].objects(*JOBSET, STAGING), timeout=20, what="staging objects gone")
    assert d.wait_idle(10)
    time.sleep(1.0)                           # a late create would show by now
    left = [(c, o["metadata"]["name"]) for c in ("alpha", "beta") for o in env.fleet[c].objects(*JOBSET, STAGING)]
    assert left == [], f"copies survived their staging objects: {left}"


# -- what a copy carries, and where it may go ------------------------------------------------------

FORBIDDEN_META = ("ownerReferences", "managedFields", "resourceVersion", "uid", "finalizers")


def test_copies_carry_nothing_of_the_hub_and_go_only_to_configured_clusters(make_fleet):
    """A staging object with an owner, a user's finalizer and the hub's managedFields, uid and
    resourceVersion: what the daemon sends to a target carries none of them, names the staging
    object's own namespace, and never goes to a cluster the config does not name (gamma is in
    the kubeconfig, not in the config; pinning a workload there leaves it unplaced)."""
    fleet = make_fleet(names=("hub", "alpha", "beta", "gamma"), bookmark_interval=0.5)
    for c in ("alpha", "beta", "gamma"):
        fleet[c].seed(gpu_nodes(c[0], 2))
    env = Env(fleet)                                          # entries: alpha and beta only
    try:
        d = env.daemon()
        owned = jobset("owned", pods=1, gpus=1)
        owned["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                                 "uid": "0e1b1c2d-0000-4000-8000-000000000001"}]
        owned["metadata"]["finalizers"] = ["example.com/keep"]
        owned["metadata"]["labels"] = {"team": "research"}
        env.create(owned)
        pinned = jobset("to-gamma", pods=1, gpus=1, annotations={PIN: "gamma"})
        env.create(pinned)
        where = _placed(env, owned)
        assert d.wait_idle(10)
        staged = env.staged(owned)
        assert staged["metadata"]["managedFields"] and staged["metadata"]["uid"]    # the hub's: there to leak
        writes = [r for c in ("alpha", "beta") for r in fleet[c].requests.select()
                  if r.verb in ("create", "update", "patch") and r.resource == "jobsets"]
        assert writes
        for r in writes:
            assert r.namespace == STAGING, (r.method, r.path)
            meta = (r.body.get("metadata") if isinstance(r.body, dict) else None) or {}
            assert meta.get("namespace", STAGING) == STAGING, meta
            # a create or an apply sends the whole object: none of these at all
            whole = r.verb == "create" or (r.verb == "patch" and isinstance(r.body, dict) and "kind" in r.body)
            for field in FORBIDDEN_META if whole else ("ownerReferences", "managedFields", "finalizers"):
                assert field not in meta, (field, r.path, meta.get(field))
            # an update may name the copy's own version and uid, never the staging object's
            assert meta.get("uid") != staged["metadata"]["uid"]
        made = env.copies(owned)[where]["metadata"]
        assert not made.get("ownerReferences") and not made.get("finalizers")
        assert made["uid"] != staged["metadata"]["uid"]
        # nothing at all was written to the cluster outside the config
        reads = ("get", "list", "watch", "discovery")
        assert [r for r in fleet["gamma"].requests.select() if r.verb not in reads] == []
        assert fleet["gamma"].objects(*JOBSET, STAGING) == []
        assert _cluster(env, pinned) is None and env.copies(pinned) == {}
        assert env.annotations(pinned).get(D.ANN_MESSAGE, "").startswith("unplaced"), env.annotations(pinned)
    finally:
        env.stop()
