"""`placer submit` through the real client against the test API server (tests/kubeapi):
places and creates, idempotent resubmit, capacity already promised, all-or-nothing groups,
dry run, faults (500s, refused connections), and the CLI boundary."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from placer import actuate as A
from placer.cli import app
from placer.definitions.catalog import load_catalog
from placer.kube import Kube, RetryPolicy
from placer.model.errors import InputError
from placer.ops.context import context_of
from placer.ops.submit import SubmitRequest, submit
from tests.kubeapi.builders import bound_pod, gpu_node

JOBSET = "jobset.x-k8s.io/v1alpha2"
FAST = RetryPolicy(attempts=4, base=0.001, cap=0.002)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def jobset(name: str, ns: str, *, replicas: int = 2, gpus: int = 4, suspend: bool | None = None,
           annotations: dict | None = None) -> str:
    """A JobSet of `replicas` single-pod Jobs of `gpus` GPUs each, as YAML."""
    meta = {"name": name, "namespace": ns, **({"annotations": annotations} if annotations else {})}
    spec = {"replicatedJobs": [{"name": "worker", "replicas": replicas, "template": {"spec": {
        "parallelism": 1, "completions": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "train", "image": "train:1", "resources": {
                "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": gpus},
                "limits": {"nvidia.com/gpu": gpus}}}]}}}}}]}
    if suspend is not None:
        spec["suspend"] = suspend
    return json.dumps({"apiVersion": JOBSET, "kind": "JobSet", "metadata": meta, "spec": spec})


def configmap(name: str, ns: str | None = None) -> str:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}})


def write(tmp_path: Path, name: str, *docs: str) -> str:
    path = tmp_path / name
    path.write_text("\n---\n".join(docs) + "\n")
    return str(path)


def worker_pod(js: str, ns: str, index: int, node: str | None, gpus: int = 4, phase: str = "Running") -> dict:
    """A pod as the JobSet controller would make it (operator labels from FACTS.md)."""
    labels = {"jobset.sigs.k8s.io/jobset-name": js, "jobset.sigs.k8s.io/replicatedjob-name": "worker",
              "jobset.sigs.k8s.io/job-index": str(index)}
    return bound_pod(f"{js}-worker-{index}-0", node, gpus=gpus, cpu="4", memory="16Gi", namespace=ns,
                     labels=labels, phase=phase)


@pytest.fixture
def fleet(fresh_fleet):
    """alpha: 2 nodes x 8 GPUs; beta: 1 node x 8 GPUs."""
    fresh_fleet["alpha"].seed([gpu_node("a0"), gpu_node("a1")])
    fresh_fleet["beta"].seed([gpu_node("b0")])
    return fresh_fleet


ENTRIES = [{"name": "alpha", "context": "alpha", "labels": {"region": "east"}},
           {"name": "beta", "context": "beta", "labels": {"region": "west"}}]


class Env:
    def __init__(self, fleet, catalog, entries=ENTRIES):
        self.fleet, self.catalog, self.entries = fleet, catalog, entries
        self.sleeps: list[float] = []

    def kube(self) -> Kube:
        return Kube(str(self.fleet.kubeconfig), retry=FAST, sleep=self.sleeps.append, connect_timeout=1.0)

    def submit(self, paths, **kw):
        kube = self.kube()
        try:
            return submit(context_of(self.entries, self.catalog, kube),
                          SubmitRequest(tuple(paths), time_limit=5, workers=1, **kw))
        finally:
            kube.close()

    def writes(self, cluster: str) -> int:
        log = self.fleet[cluster].requests
        return sum(log.count(verb=v) for v in ("create", "patch", "update", "delete"))


@pytest.fixture
def env(fleet, catalog):
    return Env(fleet, catalog)


# --- places and creates ----------------------------------------------------------------------

def test_submit_places_and_creates_with_labels_annotations_and_namespace(env, tmp_path):
    path = write(tmp_path, "train.yaml", configmap("train-config"), jobset("train", "ml", replicas=3, gpus=4))
    result = env.submit([path], plan_id="p-1")
    assert result.exit_code == 0 and not result.failed
    assert [(c.workload, c.cluster) for c in result.created] == [("ml/JobSet.jobset.x-k8s.io/train", "alpha")]
    alpha = env.fleet["alpha"]
    js = alpha.get(JOBSET, "JobSet", "train", "ml")
    labels, ann = js["metadata"]["labels"], js["metadata"]["annotations"]
    assert labels[A.MANAGED] == "true" and labels[A.WORKLOAD] == A.workload_label("ml/JobSet.jobset.x-k8s.io/train")
    assert ann[A.WORKLOAD] == "ml/JobSet.jobset.x-k8s.io/train" and ann[A.PLAN] == "p-1" and ann[A.PLACED_CLUSTER] == "alpha"
    assert ann[A.ORIGIN] == path and ann[A.GROUP] == path
    assert [m["manager"] for m in js["metadata"]["managedFields"]] == ["placer"]
    assert js["metadata"]["managedFields"][0]["operation"] == "Apply"
    # the companion follows into the same namespace, and the namespace was created
    cm = alpha.get("v1", "ConfigMap", "train-config", "ml")
    assert cm["metadata"]["labels"][A.MANAGED] == "true"
    assert alpha.get("v1", "Namespace", "ml")["metadata"]["name"] == "ml"
    assert env.fleet["beta"].objects(JOBSET, "JobSet") == []


def test_resubmit_is_idempotent(env, tmp_path):
    path = write(tmp_path, "train.yaml", jobset("train", "ml"))
    first = env.submit([path])
    assert [c.cluster for c in first.created] == ["alpha"]
    for c in env.fleet:
        c.requests.clear()
    again = env.submit([path])
    assert again.created == () and again.exit_code == 0
    assert [(a.workload, a.cluster, a.plan) for a in again.already] == [("ml/JobSet.jobset.x-k8s.io/train", "alpha",
                                                                          first.plan_id)]
    assert env.writes("alpha") == 0 and env.writes("beta") == 0
    assert len(env.fleet["alpha"].objects(JOBSET, "JobSet")) == 1


def test_cluster_pin_and_dry_run_applies_nothing(env, tmp_path):
    path = write(tmp_path, "train.yaml", jobset("train", "ml", replicas=1))
    for c in env.fleet:
        c.requests.clear()
    result = env.submit([path], dry_run=True, cluster="beta")
    assert result.dry_run and result.created == ()
    assert [(p.workload, p.cluster) for p in result.plan.placements] == [("ml/train", "beta")]
    assert env.writes("alpha") == 0 and env.writes("beta") == 0
    assert all(c.requests.count() > 0 for c in env.fleet)          # it did read both clusters
    result = env.submit([path], cluster="beta")
    assert [c.cluster for c in result.created] == ["beta"]


# --- capacity already promised ----------------------------------------------------------------

def test_second_submit_refused_while_first_pods_are_not_running(env, tmp_path, catalog):
    # 4 pods x 4 GPUs fill alpha (2 x 8); beta has 8 GPUs
    first = env.submit([write(tmp_path, "a.yaml", jobset("big", "ml", replicas=4))])
    assert [c.cluster for c in first.created] == ["alpha"]
    # no pod exists yet: alpha looks empty to the inventory, but its GPUs are promised
    second = env.submit([write(tmp_path, "b.yaml", jobset("next", "ml", replicas=4))])
    assert second.exit_code == 3 and second.created == ()
    u = second.plan.unplaced[0]
    assert u.workload == "ml/next"
    assert "16 GPUs" in u.reasons["alpha"].render() or "GPU" in u.reasons["alpha"].render()
    assert second.reserved["alpha"]["nvidia.com/gpu"] == 16
    # pods bound for half of it: reserved shrinks, and their usage is counted instead
    env.fleet["alpha"].seed([worker_pod("big", "ml", 0, "a0"), worker_pod("big", "ml", 1, "a0"),
                             worker_pod("big", "ml", 2, None, phase="Pending")])
    third = env.submit([write(tmp_path, "b.yaml", jobset("next", "ml", replicas=4))])
    assert third.exit_code == 3 and third.reserved["alpha"]["nvidia.com/gpu"] == 8
    # the first one finished (pods Succeeded, JobSet Completed): nothing promised or used: the second fits
    big = env.fleet["alpha"].get(JOBSET, "JobSet", "big", "ml")
    big["status"] = {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}]}
    env.fleet["alpha"].seed([big] + [worker_pod("big", "ml", i, f"a{i // 2}", phase="Succeeded")
                                     for i in range(4)])
    done = env.submit([write(tmp_path, "b.yaml", jobset("next", "ml", replicas=4))])
    assert [c.cluster for c in done.created] == ["alpha"] and done.reserved == {}


def test_a_smaller_second_submit_goes_where_capacity_is_not_promised(env, tmp_path):
    env.submit([write(tmp_path, "a.yaml", jobset("big", "ml", replicas=4))])
    second = env.submit([write(tmp_path, "b.yaml", jobset("small", "ml", replicas=2))])
    assert [c.cluster for c in second.created] == ["beta"]


# --- all or nothing ------------------------------------------------------------------------------

def test_group_is_all_or_nothing_when_the_server_rejects_an_object(env, tmp_path):
    # the API server rejects the second object of the group (422)
    path = write(tmp_path, "bad.yaml", configmap("good-config"), configmap("rejected"),
                 jobset("train", "ml", replicas=1))
    env.fleet["alpha"].faults.fail(422, match="/configmaps/rejected")
    result = env.submit([path])
    env.fleet["alpha"].faults.clear()
    assert result.exit_code == 1 and result.created == ()
    (f,) = result.failed
    assert f.cluster == "alpha" and "rejected" in f.error and "removed the 1 object" in f.error
    alpha = env.fleet["alpha"]
    assert alpha.objects("v1", "ConfigMap", "ml") == [] and alpha.objects(JOBSET, "JobSet") == []
    assert alpha.requests.count(verb="delete", resource="configmaps") == 1


def test_a_name_the_api_server_would_reject_is_refused_before_anything_is_sent(env, tmp_path):
    path = write(tmp_path, "bad.yaml", configmap("good-config"), configmap("Bad_Name"),
                 jobset("train", "ml", replicas=1))
    with pytest.raises(InputError, match=r"bad.yaml: document at line \d+ \(ConfigMap\): metadata.name 'Bad_Name'"):
        env.submit([path])
    assert env.fleet["alpha"].requests.count(verb="create") == 0
    assert env.fleet["alpha"].requests.count(verb="patch") == 0


def test_persistent_500s_on_a_workload_roll_back_the_group_and_a_retry_creates_once(env, tmp_path):
    path = write(tmp_path, "g.yaml", configmap("cfg"), jobset("train", "ml", replicas=1))
    env.fleet["alpha"].faults.fail(500, match="/jobsets/train")
    result = env.submit([path])
    assert result.exit_code == 1
    (f,) = result.failed
    assert "injected fault" in f.error and f.cluster == "alpha"
    assert env.fleet["alpha"].requests.count(path="/jobsets/train") == FAST.attempts    # retried
    assert len(env.sleeps) >= FAST.attempts - 1
    assert env.fleet["alpha"].objects("v1", "ConfigMap", "ml") == []
    env.fleet["alpha"].faults.clear()
    again = env.submit([path])
    assert [c.cluster for c in again.created] == ["alpha"]
    assert len(env.fleet["alpha"].objects(JOBSET, "JobSet", "ml")) == 1
    assert len(env.fleet["alpha"].objects("v1", "ConfigMap", "ml")) == 1


def test_transient_500s_are_retried_and_nothing_is_created_twice(env, tmp_path):
    path = write(tmp_path, "g.yaml", jobset("train", "ml", replicas=1))
    env.fleet["alpha"].faults.fail(500, count=2)             # the next two requests, whatever they are
    result = env.submit([path])
    assert result.exit_code == 0 and [c.cluster for c in result.created] == ["alpha"]
    assert len(env.sleeps) >= 2
    assert len(env.fleet["alpha"].objects(JOBSET, "JobSet", "ml")) == 1
    assert env.fleet["beta"].objects(JOBSET, "JobSet", "ml") == []


def test_a_refusing_cluster_stops_submit_unless_skipped(env, tmp_path):
    path = write(tmp_path, "g.yaml", jobset("train", "ml", replicas=1))
    env.fleet["alpha"].down()
    from placer.model.errors import KubeError
    with pytest.raises(KubeError, match="cannot check alpha .*connection refused"):
        env.submit([path])
    assert env.fleet["beta"].objects(JOBSET, "JobSet") == []
    result = env.submit([path], skip_unreachable=True)
    assert [c.cluster for c in result.created] == ["beta"]
    assert "connection refused" in result.unreachable["alpha"]
    env.fleet["alpha"].up()
    # back up: the workload is found on beta, not placed again on alpha
    again = env.submit([path])
    assert [a.cluster for a in again.already] == ["beta"] and again.created == ()
    assert env.fleet["alpha"].objects(JOBSET, "JobSet") == []


def test_cluster_refusing_connections_while_applying_is_reported(env, tmp_path):
    path = write(tmp_path, "g.yaml", jobset("train", "ml", replicas=1))
    env.fleet["alpha"].faults.reset = False
    # alpha answers the reads, then goes away before the write
    kube = env.kube()
    from placer.ops import submit as S
    real = A.apply_group

    def down_then_apply(client, objects, **kw):
        env.fleet["alpha"].down()
        return real(client, objects, **kw)
    S.A.apply_group = down_then_apply
    try:
        result = submit(context_of(ENTRIES, env.catalog, kube), SubmitRequest((path,), time_limit=5, workers=1))
    finally:
        S.A.apply_group = real
        kube.close()
        env.fleet["alpha"].up()
    assert result.exit_code == 1 and "connection refused" in result.failed[0].error
    assert env.fleet["alpha"].objects(JOBSET, "JobSet") == []


# --- hand-off and suspend -----------------------------------------------------------------------

def test_handoff_patch_and_unsuspend(fleet, catalog, tmp_path):
    entries = [{"name": "alpha", "context": "alpha",
                "podTemplatePatch": {"schedulerName": "kai-scheduler", "labels": {"kai.scheduler/queue": "team-a"}},
                "objectPatch": {"labels": {"kai.scheduler/queue": "team-a"}}},
               {"name": "beta", "context": "beta", "suspend": "omit",
                "objectPatch": {"labels": {"kueue.x-k8s.io/queue-name": "user-queue"}}}]
    env = Env(fleet, catalog, entries)
    env.submit([write(tmp_path, "a.yaml", jobset("kai", "ml", replicas=1, suspend=True))], cluster="alpha")
    js = fleet["alpha"].get(JOBSET, "JobSet", "kai", "ml")
    assert js["spec"]["suspend"] is False
    assert js["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
    assert pod["metadata"]["labels"][A.WORKLOAD] == A.workload_label("ml/JobSet.jobset.x-k8s.io/kai")
    r = env.submit([write(tmp_path, "b.yaml", jobset("kq", "ml", replicas=1, suspend=True))], cluster="beta")
    assert r.exit_code == 0 and r.created, (r.failed, r.already, r.plan and r.plan.to_dict())
    js = fleet["beta"].get(JOBSET, "JobSet", "kq", "ml")
    assert "suspend" not in js["spec"]                       # Kueue's admission owns it
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"


def test_someone_elses_object_of_the_same_name_is_not_taken_over(env, tmp_path):
    env.fleet["alpha"].seed([{"apiVersion": JOBSET, "kind": "JobSet",
                              "metadata": {"name": "train", "namespace": "ml", "labels": {"team": "x"}},
                              "spec": {"replicatedJobs": []}}])
    result = env.submit([write(tmp_path, "g.yaml", jobset("train", "ml", replicas=1))], cluster="alpha")
    assert result.exit_code == 1 and "not created by placer" in result.failed[0].error
    js = env.fleet["alpha"].get(JOBSET, "JobSet", "train", "ml")
    assert A.MANAGED not in js["metadata"]["labels"]


# --- the CLI boundary ----------------------------------------------------------------------------

def clusters_yaml(tmp_path: Path) -> str:
    path = tmp_path / "clusters.yaml"
    path.write_text(textwrap.dedent("""\
        clusters:
        - {name: alpha, context: alpha}
        - {name: beta, context: beta}
        """))
    return str(path)


def test_cli_submit_json_then_unplaced_exit_3_and_bad_input_exit_2(env, tmp_path):
    runner = CliRunner()
    kubeconfig = str(env.fleet.kubeconfig)
    a = write(tmp_path, "a.yaml", jobset("big", "ml", replicas=4))
    res = runner.invoke(app, ["submit", "-f", a, "--kubeconfig", kubeconfig, "-o", "json", "--time-limit", "2"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["placements"][0]["status"] == "created" and data["placements"][0]["cluster"] == "alpha"
    b = write(tmp_path, "b.yaml", jobset("next", "ml", replicas=4))
    res = runner.invoke(app, ["submit", "-f", b, "--kubeconfig", kubeconfig, "--time-limit", "2"])
    assert res.exit_code == 3, res.output
    assert "unplaced" in res.stdout and "ml/next" in res.stdout
    res = runner.invoke(app, ["submit", "-f", str(tmp_path / "missing.yaml"), "--kubeconfig", kubeconfig])
    assert res.exit_code == 2 and "no such file" in res.stderr
    res = runner.invoke(app, ["submit", "-f", a, "--kubeconfig", kubeconfig, "--cluster", "nowhere"])
    assert res.exit_code == 2 and "--cluster nowhere" in res.stderr
