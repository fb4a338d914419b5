"""Apply semantics, fleet-wide get and delete, and plan = submit --dry-run (issue 12,
defects 4 and 5, `placer get`, `placer delete`), through the CLI against the test API servers."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from placer.cli import app
from tests.actuate.test_submit import JOBSET, catalog, env, fleet, jobset, worker_pod, write  # noqa: F401 (fixtures)

runner = CliRunner()


def cli(env, *args):
    return runner.invoke(app, [*args, "--kubeconfig", str(env.fleet.kubeconfig), "--all-contexts"])


def test_edited_resubmit_updates_the_remote_object_then_is_unchanged(env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "train.yaml", jobset("train", "ml", replicas=1, gpus=4))
    r = cli(env, "submit", "-f", path, "-o", "json", "--time-limit", "2")
    assert r.exit_code == 0, r.output
    # the defect: an edited file resubmitted was reported "already placed" and not applied
    edited = jobset("train", "ml", replicas=1, gpus=4).replace('"train:1"', '"train:2"')
    write(tmp_path, "train.yaml", edited)
    for c in env.fleet:
        c.requests.clear()
    r = cli(env, "submit", "-f", path, "--dry-run", "-o", "json", "--time-limit", "2")
    assert [u["result"] for u in json.loads(r.stdout)["updated"]] == ["configured"]
    assert env.writes("alpha") == 0                                     # a dry run writes nothing
    r = cli(env, "submit", "-f", path, "--time-limit", "2")
    assert r.exit_code == 0, r.output
    assert "configured" in r.stdout
    js = env.fleet["alpha"].get(JOBSET, "JobSet", "train", "ml")
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "train:2"
    for c in env.fleet:
        c.requests.clear()
    r = cli(env, "submit", "-f", path, "-o", "json", "--time-limit", "2")
    assert r.exit_code == 0, r.output
    assert [u["result"] for u in json.loads(r.stdout)["updated"]] == ["unchanged"]
    assert env.writes("alpha") == 0 and env.writes("beta") == 0


def test_a_new_version_that_no_longer_fits_changes_nothing_unless_replace(env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # beta has one 8-GPU node, alpha two
    path = write(tmp_path, "w.yaml", jobset("w", "ml", replicas=1, gpus=8))
    assert env.submit([path], cluster="beta").created
    write(tmp_path, "w.yaml", jobset("w", "ml", replicas=2, gpus=8))
    kept = env.submit([path])
    assert kept.exit_code == 3
    (u,) = kept.updated
    assert u.result == "kept" and u.cluster == "beta" and "no longer fits on beta" in u.why
    assert "--replace" in u.why
    js = env.fleet["beta"].get(JOBSET, "JobSet", "w", "ml")
    assert js["spec"]["replicatedJobs"][0]["replicas"] == 1            # nothing changed
    moved = env.submit([path], replace=True)
    assert moved.exit_code == 0, moved.to_dict()
    assert [(u.result, u.previous, u.cluster) for u in moved.updated] == [("replaced", "beta", "alpha")]
    assert env.fleet["beta"].objects(JOBSET, "JobSet", "ml") == []
    assert env.fleet["alpha"].get(JOBSET, "JobSet", "w", "ml")["spec"]["replicatedJobs"][0]["replicas"] == 2


def test_a_bigger_version_fits_in_the_room_its_running_pods_leave(env, tmp_path):
    path = write(tmp_path, "big.yaml", jobset("big", "ml", replicas=4, gpus=4))      # all of alpha
    assert [c.cluster for c in env.submit([path]).created] == ["alpha"]
    env.fleet["alpha"].seed([worker_pod("big", "ml", i, f"a{i // 2}") for i in range(4)])
    # more CPU per pod: alpha is full of this workload's own pods, which the new version replaces
    write(tmp_path, "big.yaml", jobset("big", "ml", replicas=4, gpus=4).replace('"cpu": "4"', '"cpu": "8"'))
    r = env.submit([path])
    assert r.exit_code == 0 and [(u.result, u.cluster) for u in r.updated] == [("configured", "alpha")]


def test_delete_f_removes_the_workload_from_the_cluster_that_holds_it(env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cm = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "v"}})
    path = write(tmp_path, "t.yaml", cm, jobset("t", "ml", replicas=1, gpus=4))
    assert env.submit([path], cluster="beta").created
    r = cli(env, "delete", "-f", path)
    assert r.exit_code == 0, r.output
    assert "JobSet ml/t deleted from beta" in r.stdout and "ConfigMap ml/cfg deleted from beta" in r.stdout
    assert env.fleet["beta"].objects(JOBSET, "JobSet", "ml") == []
    assert env.fleet["beta"].objects("v1", "ConfigMap", "ml") == []
    r = cli(env, "delete", "-f", path)
    assert r.exit_code == 1 and "not placed on any reachable cluster" in r.stderr
    assert cli(env, "delete", "-f", path, "--ignore-not-found").exit_code == 0
    # TYPE/NAME, kubectl's form
    assert env.submit([path]).created
    r = cli(env, "delete", "jobset/t", "-n", "ml")
    assert r.exit_code == 0, r.output
    assert all(c.objects(JOBSET, "JobSet", "ml") == [] for c in env.fleet)


def test_get_lists_workloads_placed_on_two_clusters(env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert env.submit([write(tmp_path, "a.yaml", jobset("a", "ml", replicas=1, gpus=4))], cluster="alpha").created
    assert env.submit([write(tmp_path, "b.yaml", jobset("b", "team", replicas=1, gpus=8))], cluster="beta").created
    env.fleet["alpha"].seed([worker_pod("a", "ml", 0, "a0")])
    a = env.fleet["alpha"].get(JOBSET, "JobSet", "a", "ml")
    a["status"] = {"replicatedJobsStatus": [{"name": "worker", "ready": 1, "active": 1, "succeeded": 0,
                                             "failed": 0, "suspended": 0}]}
    env.fleet["alpha"].seed([a])
    r = cli(env, "get", "-A", "-o", "json")
    assert r.exit_code == 0, r.output
    items = {i["name"]: i for i in json.loads(r.stdout)["items"]}
    assert {n: (i["namespace"], i["kind"], i["cluster"], i["gpus"]) for n, i in items.items()} == {
        "a": ("ml", "JobSet", "alpha", 4), "b": ("team", "JobSet", "beta", 8)}
    assert items["a"]["phase"] == "Running" and items["b"]["phase"] == "Pending"
    assert items["a"]["nodes"] == ["a0"]
    # -n, TYPE/NAME, -o name; placed objects carry the cluster as a label
    r = cli(env, "get", "jobsets", "-n", "team", "-o", "name")
    assert r.stdout.split() == ["jobset.jobset.x-k8s.io/b"]
    r = cli(env, "get", "-A", "-l", "placer.dev/placed-cluster=alpha", "-o", "name")
    assert r.stdout.split() == ["jobset.jobset.x-k8s.io/a"]
    r = cli(env, "get", "-A", "-o", "jsonpath={.items[*].cluster}")       # kubectl's template form
    assert sorted(r.stdout.split()) == ["alpha", "beta"]
    r = cli(env, "get", "widgets")
    assert r.exit_code == 2 and 'unknown type "widgets"' in r.stderr
    # an unreachable cluster is a warning row, not a failure
    env.fleet["beta"].down()
    r = cli(env, "get", "-A")
    assert r.exit_code == 0, r.output
    assert "warning: beta: unreachable" in r.stderr and "alpha" in r.stdout


def test_plan_and_submit_dry_run_agree_when_capacity_is_promised(env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # alpha is promised to big (no pod bound yet): only beta has room
    assert [c.cluster for c in env.submit([write(tmp_path, "a.yaml", jobset("big", "ml", replicas=4))]).created] \
        == ["alpha"]
    (tmp_path / "new").mkdir()                       # two files: two groups of 8 GPUs each
    write(tmp_path, "new/n.yaml", jobset("next", "ml", replicas=2))
    write(tmp_path, "new/m.yaml", jobset("more", "ml", replicas=2))
    path = str(tmp_path / "new")
    r = cli(env, "plan", "-f", path, "-o", "json", "--time-limit", "3")
    planned = json.loads(r.stdout)
    r = cli(env, "submit", "-f", path, "--dry-run", "-o", "json", "--time-limit", "3")
    dry = json.loads(r.stdout)
    where = lambda doc: sorted((p["workload"], p["cluster"], json.dumps(p["nodes"], sort_keys=True))  # noqa: E731
                               for p in doc["placements"])
    assert where(planned) == where(dry)
    assert sorted(u["workload"] for u in planned["unplaced"]) == sorted(u["workload"] for u in dry["unplaced"])
    assert [p["cluster"] for p in planned["placements"]] == ["beta"]          # not on promised alpha
    assert len(planned["unplaced"]) == 1
