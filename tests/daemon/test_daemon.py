"""`placer daemon` end to end through the real client against the test API server: a hub
with a staging namespace plus GPU clusters alpha and beta."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import urllib.request

from placer import daemon as D
from placer.daemon import FakeClock
from tests.daemon.daemon_helpers import (
    RUNNING_STATUS,
    STAGING,
    Env,
    jobset,
    leaderworkerset,
    pytorchjob,
    raycluster,
    wait_for,
)
from tests.kubeapi.builders import bound_pod, gpu_node


def _placed(env: Env, obj: dict) -> str | None:
    return env.annotations(obj).get(D.PLACED_CLUSTER)


def test_end_to_end_four_kinds(env):
    d = env.daemon()
    objs = [jobset("train", pods=2, gpus=4, suspend=True), pytorchjob("ptj", workers=1, gpus=4),
            raycluster("ray", workers=2, gpus=2), leaderworkerset("lws", size=2, gpus=2)]
    for o in objs:
        env.create(o)
    assert d.wait_idle(20)
    for o in objs:
        copies = env.copies(o)
        assert list(copies) == [_placed(env, o)], o["kind"]          # exactly one copy, where it says
        staged = env.staged(o)
        assert D.FINALIZER in staged["metadata"]["finalizers"]
        assert staged["metadata"]["annotations"][D.ANN_PHASE] == "Pending"
        assert staged["metadata"]["annotations"][D.ANN_MESSAGE].startswith(f"placed on {_placed(env, o)}")
        remote = next(iter(copies.values()))
        assert "uid" not in remote["metadata"].get("annotations", {})
        assert remote["metadata"]["labels"]["placer.dev/managed"] == "true"
    # suspended staging objects are created running
    assert next(iter(env.copies(objs[0]).values()))["spec"]["suspend"] is False
    assert next(iter(env.copies(objs[1]).values()))["spec"]["runPolicy"]["suspend"] is False

    # the test plays each operator: status on the copy comes back to the staging object
    for o in objs:
        cluster = _placed(env, o)
        client = env.kube.client(cluster)
        res = client.resource_for(o["apiVersion"], o["kind"])
        client.patch_status(res, o["metadata"]["name"], RUNNING_STATUS[o["kind"]], STAGING)
    for o in objs:
        wait_for(lambda o=o: env.annotations(o).get(D.ANN_PHASE) == "Running", what=f"{o['kind']} Running")
        # the copy's status, plus placer's Placed condition where the status keeps conditions
        status = env.staged(o)["status"]
        placed = [c for c in status.get("conditions", ()) if c["type"] == "Placed"]
        mirrored = {**status, "conditions": [c for c in status["conditions"] if c["type"] != "Placed"]} \
            if "conditions" in status else status
        assert mirrored == RUNNING_STATUS[o["kind"]]
        if "conditions" in RUNNING_STATUS[o["kind"]]:
            assert [(c["status"], c["reason"], c["message"]) for c in placed] == [
                ("True", "Placed", f"placed on {_placed(env, o)}")]

    # a field the operator drops from its status is dropped on the hub too
    lws = objs[3]
    client = env.kube.client(_placed(env, lws))
    res = client.resource_for(lws["apiVersion"], lws["kind"])
    client.patch_status(res, "lws", {"readyReplicas": None, "conditions": [
        {"type": "Progressing", "status": "True", "reason": "GroupsProgressing", "message": "starting"}]}, STAGING)
    wait_for(lambda: env.annotations(lws).get(D.ANN_PHASE) == "Initializing", what="LWS Initializing")
    wait_for(lambda: "readyReplicas" not in env.staged(lws)["status"], what="readyReplicas dropped")

    # spec change on the staging object reaches the copy
    ray = objs[2]
    res = env.hub.resource_for(ray["apiVersion"], ray["kind"])
    env.hub.patch(res, "ray", {"spec": {"workerGroupSpecs": [{**ray["spec"]["workerGroupSpecs"][0],
                                                              "replicas": 1, "minReplicas": 1}]}}, STAGING)
    wait_for(lambda: next(iter(env.copies(ray).values()))["spec"]["workerGroupSpecs"][0]["replicas"] == 1,
             what="spec propagated")
    assert len(env.copies(ray)) == 1
    # ... and for the other kinds, a spec field each of them really has
    changes = {"JobSet": {"spec": {"ttlSecondsAfterFinished": 600}},
               "PyTorchJob": {"spec": {"runPolicy": {"ttlSecondsAfterFinished": 600}}},
               "LeaderWorkerSet": {"spec": {"startupPolicy": "LeaderReady"}}}
    for o in (objs[0], objs[1], objs[3]):
        env.hub.patch(env.hub.resource_for(o["apiVersion"], o["kind"]), o["metadata"]["name"], changes[o["kind"]],
                      STAGING)
    wait_for(lambda: next(iter(env.copies(objs[0]).values()))["spec"].get("ttlSecondsAfterFinished") == 600,
             what="JobSet spec propagated")
    wait_for(lambda: next(iter(env.copies(objs[1]).values()))["spec"]["runPolicy"].get("ttlSecondsAfterFinished")
             == 600, what="PyTorchJob spec propagated")
    wait_for(lambda: next(iter(env.copies(objs[3]).values()))["spec"].get("startupPolicy") == "LeaderReady",
             what="LeaderWorkerSet spec propagated")
    assert all(len(env.copies(o)) == 1 for o in objs)
    # the copy stays running: a spec change does not re-suspend it
    assert next(iter(env.copies(objs[1]).values()))["spec"]["runPolicy"]["suspend"] is False

    # delete: the copy goes, then the finalizer, then the staging object itself; each kind
    for i, o in enumerate(objs):
        env.hub.delete(env.hub.resource_for(o["apiVersion"], o["kind"]), o["metadata"]["name"], STAGING)
        wait_for(lambda o=o: not [x for x in env.fleet["hub"].objects(o["apiVersion"], o["kind"], STAGING)
                                  if x["metadata"]["name"] == o["metadata"]["name"]],
                 what=f"staging {o['kind']} gone")
        assert env.copies(o) == {}, o["kind"]
        assert all(len(env.copies(rest)) == 1 for rest in objs[i + 1:])
    assert d.wait_idle(10)
    assert d.metrics.value("placer_placements_total") == 4


def test_unplaced_then_placed_when_capacity_appears(env):
    d = env.daemon()
    big = jobset("big", pods=3, gpus=8)                      # 3 whole nodes; each cluster has 2
    env.create(big)
    assert d.wait_idle(10)
    msg = env.annotations(big)[D.ANN_MESSAGE]
    assert msg.startswith("unplaced: ") and "alpha: " in msg and "beta: " in msg, msg
    assert env.annotations(big)[D.ANN_PHASE] == "Pending" and env.copies(big) == {}
    assert d.metrics.value("placer_unplaced") == 1
    env.kube.client("beta").create("nodes", gpu_node("b-new", gpus=8))
    wait_for(lambda: _placed(env, big) == "beta", what="placed once capacity appears")
    assert list(env.copies(big)) == ["beta"]


def test_unplaced_placed_when_a_pod_goes_without_listing(env):
    # a third alpha node whose GPUs a running pod holds; pods are watched, so the daemon sees
    # the pod go and places the waiting workload at once, without listing anything again
    env.fleet["alpha"].seed([gpu_node("a-extra", gpus=8), bound_pod("hog", "a-extra", gpus=8)])
    clock = FakeClock()
    d = env.daemon(clock=clock)
    big = jobset("big", pods=3, gpus=8)
    env.create(big)
    assert d.wait_idle(10)
    assert env.annotations(big)[D.ANN_MESSAGE].startswith("unplaced: ")
    lists = {c: {r: env.fleet[c].requests.count(verb="list", resource=r) for r in ("pods", "nodes", "jobsets")}
             for c in ("alpha", "beta")}
    env.kube.client("alpha").delete("pods", "hog", "default")
    wait_for(lambda: _placed(env, big) == "alpha", what="placed once the pod is gone")
    assert d.wait_idle(5)
    assert lists == {c: {r: env.fleet[c].requests.count(verb="list", resource=r) for r in ("pods", "nodes", "jobsets")}
                     for c in ("alpha", "beta")}                     # no LIST on the steady path


def test_reschedule_after_pending_too_long(env):
    clock = FakeClock()
    d = env.daemon(clock=clock, reschedule_after=120.0)
    job = jobset("stuck", pods=2, gpus=8)                    # fits either cluster
    env.create(job)
    assert d.wait_idle(10)
    first = _placed(env, job)
    assert first in ("alpha", "beta")
    # one pod runs, one stays Pending: still not all running when the delay expires
    env.fleet[first].seed([bound_pod("stuck-0", f"{first[0]}0", gpus=8, namespace=STAGING, phase="Running",
                                     labels={"jobset.sigs.k8s.io/jobset-name": "stuck",
                                             "jobset.sigs.k8s.io/replicatedjob-name": "workers"})])
    clock.advance(60)
    assert d.wait_idle(5)
    assert _placed(env, job) == first                       # not yet
    clock.advance(61)
    other = {"alpha": "beta", "beta": "alpha"}[first]
    wait_for(lambda: _placed(env, job) == other, what="rescheduled")
    assert list(env.copies(job)) == [other]
    assert d.metrics.value("placer_withdrawals_total") == 1


def test_reschedule_annotation_and_running_workloads_stay(env):
    clock = FakeClock()
    d = env.daemon(clock=clock)
    opted = jobset("opted", pods=1, gpus=8, annotations={D.ANN_RESCHEDULE: "true"})
    running = jobset("running", pods=1, gpus=8, annotations={D.ANN_RESCHEDULE: "true"})
    plain = jobset("plain", pods=1, gpus=8)
    for o in (opted, running, plain):
        env.create(o)
    assert d.wait_idle(10)
    where = {o["metadata"]["name"]: _placed(env, o) for o in (opted, running, plain)}
    client = env.kube.client(where["running"])
    client.patch_status(client.resource_for("jobset.x-k8s.io/v1alpha2", "JobSet"), "running",
                        RUNNING_STATUS["JobSet"], STAGING)
    wait_for(lambda: env.annotations(running).get(D.ANN_PHASE) == "Running", what="running")
    clock.advance(D.DEFAULT_RESCHEDULE_AFTER + 1)
    wait_for(lambda: _placed(env, opted) not in (None, where["opted"]), what="opted rescheduled")
    assert d.wait_idle(10)
    assert _placed(env, running) == where["running"] and _placed(env, plain) == where["plain"]


def test_group_placed_together_with_companions(env):
    d = env.daemon()
    ann = {D.ANN_GROUP: "llm"}
    a, b = jobset("prefill", pods=1, gpus=4, annotations=ann), leaderworkerset("decode", size=1, gpus=4,
                                                                                annotations=ann)
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "llm-config", "namespace": STAGING, "annotations": ann}, "data": {"k": "v"}}
    env.create(cm)
    env.create(a)
    env.create(b)
    assert d.wait_idle(10)
    cluster = _placed(env, a)
    assert cluster and _placed(env, b) == cluster
    assert [c["metadata"]["name"] for c in env.fleet[cluster].objects("v1", "ConfigMap", STAGING)] == ["llm-config"]
    # the group's companion goes with its last workload
    for o in (a, b):
        env.hub.delete(env.hub.resource_for(o["apiVersion"], o["kind"]), o["metadata"]["name"], STAGING)
    assert d.wait_idle(10)
    wait_for(lambda: not env.fleet[cluster].objects("v1", "ConfigMap", STAGING), what="companion removed")


def test_secrets_follow_their_group_only_when_the_hub_allows_it(env):
    ann = {D.ANN_GROUP: "secret-llm"}
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": "token", "namespace": STAGING, "annotations": ann}, "data": {"t": "eA=="}}
    env.create(secret)
    d = env.daemon()                        # default: Secrets are neither read nor copied
    job = jobset("with-secret", pods=1, gpus=1, annotations=ann)
    env.create(job)
    assert d.wait_idle(10)
    cluster = _placed(env, job)
    assert cluster and env.fleet[cluster].objects("v1", "Secret", STAGING) == []
    reads = lambda: sum(env.fleet["hub"].requests.count(verb=v, resource="secrets") for v in ("get", "list", "watch"))
    assert reads() == 0
    d.stop()
    d2 = env.daemon(secrets=True)
    other = jobset("with-secret-2", pods=1, gpus=1, annotations=ann)
    env.create(other)
    assert d2.wait_idle(10)
    assert reads() > 0
    wait_for(lambda: [s["metadata"]["name"] for s in env.fleet[_placed(env, other)].objects("v1", "Secret", STAGING)]
             == ["token"], what="secret copied")


def test_metrics_healthz_and_json_logs(env, capsys):
    D.setup_logging("json")
    try:
        d = env.daemon(start=False)
        d.start(metrics_addr="127.0.0.1:0")
        env.create(jobset("m1", pods=1, gpus=1))
        env.create(jobset("m2", pods=9, gpus=8))             # never fits
        assert d.wait_idle(10)
        base = f"http://{d.server.address}"
        text = urllib.request.urlopen(f"{base}/metrics").read().decode()
        assert "placer_placements_total 1" in text
        assert "placer_unplaced 1" in text
        assert "placer_leader 1" in text
        assert "placer_solve_seconds_count" in text and "placer_queue_depth" in text
        assert re.search(r'placer_interpretations_total\{result="computed"\} [1-9]', text)
        # the standard series and the build info, from prometheus_client on the daemon's own registry
        assert "process_resident_memory_bytes" in text and 'placer_build_info{jq="' in text
        assert "# TYPE placer_withdrawals_total counter" in text and "placer_withdrawals_total 0.0" in text
        health = urllib.request.urlopen(f"{base}/healthz")
        assert health.status == 200 and health.read().startswith(b"ok")
    finally:
        logging.getLogger("placer").handlers[:] = []
        logging.getLogger("placer").propagate = True
    lines = [json.loads(l) for l in capsys.readouterr().err.splitlines() if l.startswith("{")]
    assert any("placed on" in l["msg"] for l in lines) and all("level" in l for l in lines)


def test_cli_bad_input_exits_2(tmp_path):
    from typer.testing import CliRunner

    from placer.cli import app

    no_hub = tmp_path / "clusters.yaml"
    no_hub.write_text("clusters:\n- {name: east, context: east}\n")
    kubeconfig = tmp_path / "kubeconfig"            # the context is there: the file's own fault is what is said
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
                          "users: [{name: u, user: {}}]\ncontexts: [{name: east, context: {cluster: c, user: u}}]\n"
                          "current-context: east\n")
    runner = CliRunner()
    r = runner.invoke(app, ["daemon", "--clusters", str(no_hub), "--kubeconfig", str(kubeconfig)])
    assert r.exit_code == 2 and "no `hub:` section" in r.output
    r = runner.invoke(app, ["daemon", "--clusters", str(no_hub), "--reschedule-after", "soon"])
    assert r.exit_code == 2 and "--reschedule-after" in r.output
    assert D.parse_duration("1h30m") == 5400 and D.parse_duration("90") == 90 and D.parse_duration("500ms") == 0.5


# --- Events and the Placed condition (issue 12): what `kubectl describe` shows on the hub ---------

def _events(env: Env, obj: dict) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the core/v1 Events about a staging object, oldest first."""
    items = env.hub.list("events", STAGING).items
    mine = [e for e in items if e["involvedObject"]["name"] == obj["metadata"]["name"]
            and e["involvedObject"]["kind"] == obj["kind"]]
    # timestamps have second precision: the order of creation is the resourceVersion's (the harness's counter)
    return [(e["type"], e["reason"], e["message"])
            for e in sorted(mine, key=lambda e: int(e["metadata"]["resourceVersion"]))]


def test_events_tell_the_story_placed_unplaced_rescheduled_failed(env, kubectl):
    import subprocess

    clock = FakeClock()
    d = env.daemon(clock=clock, reschedule_after=120.0)
    big = jobset("ev-big", pods=3, gpus=8)                      # fits nowhere yet
    fits = jobset("ev-fits", pods=2, gpus=8)
    env.create(fits)                                            # placed first: the fleet then stays as it is
    assert d.wait_idle(10)
    env.create(big)
    assert d.wait_idle(10)
    unplaced = [e for e in _events(env, big) if e[1] == "Unplaced"]
    assert len(unplaced) == 1 and unplaced[0][0] == "Warning"
    assert unplaced[0][2] == env.annotations(big)[D.ANN_MESSAGE]          # the reason, as annotated
    first = _placed(env, fits)
    [(kind, reason, message)] = [e for e in _events(env, fits) if e[1] == "Placed"]
    assert kind == "Normal" and message.startswith(f"placed on {first} by plan ")
    # the same unplaced reason on the next round is not repeated
    clock.advance(31)
    assert d.wait_idle(5)
    assert len([e for e in _events(env, big) if e[1] == "Unplaced"]) == 1
    # stuck Pending past the delay: withdrawn and placed elsewhere
    clock.advance(121)
    other = {"alpha": "beta", "beta": "alpha"}[first]
    wait_for(lambda: _placed(env, fits) == other, what="rescheduled")
    reasons = [e[1] for e in _events(env, fits)]
    assert reasons[:2] == ["Placed", "Rescheduled"] and reasons.count("Placed") == 2
    assert [e for e in _events(env, fits) if e[1] == "Rescheduled"][0][2].startswith(f"withdrawn from {first}")
    # an object placer cannot read: Failed
    bad = jobset("ev-bad", pods=1, gpus=8)
    bad["spec"]["replicatedJobs"][0]["replicas"] = "many"
    env.create(bad)
    wait_for(lambda: any(e[1] == "Failed" for e in _events(env, bad)), what="Failed event")
    assert [e for e in _events(env, bad) if e[1] == "Failed"][0][2].startswith("invalid: ")
    # real kubectl describe on the hub tells it
    out = subprocess.run([kubectl, "--kubeconfig", str(env.fleet.kubeconfig), "--context", "hub", "-n", STAGING,
                          "describe", "jobsets.jobset.x-k8s.io", "ev-fits"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Placed" in out.stdout and "Rescheduled" in out.stdout and f"withdrawn from {first}" in out.stdout


def test_placed_condition_on_an_unplaced_object_whose_status_keeps_conditions(env):
    d = env.daemon()
    big = jobset("cond-big", pods=3, gpus=8)
    env.create(big)
    res = env.hub.resource_for(big["apiVersion"], big["kind"])
    env.hub.patch_status(res, "cond-big", {"conditions": [
        {"type": "Suspended", "status": "True", "reason": "JobSetSuspended", "message": "suspended",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}, STAGING)
    assert d.wait_idle(10)
    wait_for(lambda: any(c["type"] == "Placed" for c in env.staged(big).get("status", {}).get("conditions", ())),
             what="Placed condition")
    [c] = [c for c in env.staged(big)["status"]["conditions"] if c["type"] == "Placed"]
    assert (c["status"], c["reason"]) == ("False", "Unplaced") and c["message"].startswith("unplaced: ")
    assert [c["type"] for c in env.staged(big)["status"]["conditions"]] == ["Suspended", "Placed"]


def test_priority_class_read_from_the_hub(env):
    """A staging workload naming a PriorityClass the hub does not have stays unplaced with
    that reason; once the class exists, it is placed with the class's value."""
    clock = FakeClock()
    d = env.daemon(clock=clock)
    job = jobset("prio", pods=1, gpus=8)
    job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["priorityClassName"] = "team-high"
    env.create(job)
    assert d.wait_idle(10)
    msg = env.annotations(job)[D.ANN_MESSAGE]
    assert "priorityClassName 'team-high': no such PriorityClass" in msg and _placed(env, job) is None
    team_high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "team-high"},
                 "value": 500}
    env.hub.create("priorityclasses.scheduling.k8s.io", team_high)
    # the target must have it too, or its API server refuses every pod (issue 25): only alpha does
    env.kube.client("alpha").create("priorityclasses.scheduling.k8s.io", team_high)
    clock.advance(31)
    wait_for(lambda: _placed(env, job) == "alpha", what="placed once the class exists, where it exists")


def test_a_pin_survives_an_unplaced_round_and_is_never_moved(env):
    # issue 12, defect 2: an unplaceable pinned workload had its pin erased (placer.dev/cluster: null)
    # and a later round placed it elsewhere
    d = env.daemon()
    pinned = jobset("pinned", pods=3, gpus=8, annotations={D.ANN_PIN: "alpha"})   # alpha has 2 nodes
    env.create(pinned)
    assert d.wait_idle(10)
    ann = env.annotations(pinned)
    assert ann[D.ANN_PIN] == "alpha" and D.PLACED_CLUSTER not in ann
    assert ann[D.ANN_MESSAGE].startswith("unplaced: ") and "pinned to alpha" in ann[D.ANN_MESSAGE]
    env.kube.client("beta").create("nodes", gpu_node("b-new", gpus=8))      # beta now fits it
    assert d.wait_idle(10)
    env.kube.client("alpha").create("nodes", gpu_node("a-new", gpus=8))     # and then alpha does
    wait_for(lambda: _placed(env, pinned) == "alpha", what="placed where pinned")
    assert list(env.copies(pinned)) == ["alpha"]
    ann = env.annotations(pinned)
    assert ann[D.ANN_PIN] == "alpha" and ann[D.PLACED_CLUSTER] == "alpha"
    assert env.staged(pinned)["metadata"]["labels"][D.PLACED_CLUSTER] == "alpha"     # kubectl get -l on the hub
    copy_ = env.copies(pinned)["alpha"]["metadata"]
    assert copy_["labels"][D.PLACED_CLUSTER] == "alpha" and copy_["annotations"][D.ANN_PIN] == "alpha"


def test_placer_delete_leaves_daemon_copies_to_their_staging_object(env):
    from typer.testing import CliRunner

    from placer.cli import app

    d = env.daemon()
    job = jobset("kept", pods=1, gpus=4)
    env.create(job)
    assert d.wait_idle(10)
    where = _placed(env, job)
    r = CliRunner().invoke(app, ["delete", "jobset/kept", "-n", STAGING, "--kubeconfig", str(env.fleet.kubeconfig),
                                 "--context", "alpha", "--context", "beta"])
    assert r.exit_code == 1 and "delete that object on the hub instead" in r.stderr
    assert list(env.copies(job)) == [where]


def test_claims_go_only_where_they_can_bind(env):
    """Issue 25, item 8: a staged StatefulSet whose volumeClaimTemplate names no class is
    placed where a default StorageClass exists (beta), not on alpha (none), although alpha
    comes first and has the room; the staging object says why not alpha."""
    env.fleet["beta"].seed([{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "x.example/csi",
                             "metadata": {"name": "standard",
                                          "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}])
    d = env.daemon()
    res = {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": STAGING},
           "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [
                        {"name": "db", "image": "registry.example/db:1", "resources": res}]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}
    env.create(sts)
    assert d.wait_idle(20)
    assert list(env.copies(sts)) == ["beta"]


def test_the_daemons_log_follows_stderr_after_the_one_it_started_with_is_closed(monkeypatch):
    # a CLI harness's stderr, closed once the command returns (issue 24: CI's "Logging error")
    first, later = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    D.setup_logging("text")
    try:
        first.close()
        monkeypatch.setattr(sys, "stderr", later)
        logging.getLogger("placer.daemon").info("placed after the swap")
    finally:
        logging.getLogger("placer").handlers[:] = []
        logging.getLogger("placer").propagate = True
    assert later.getvalue().endswith(" INFO placed after the swap\n") and "Logging error" not in later.getvalue()
