"""Plan and submit know what each target serves (issue 25, items 3 to 6), judged by the test
API server (tests/kubeapi), which serves only the CRDs installed on each cluster: a kind one
target does not serve goes to the other (or nowhere: exit 3, not 1); a PriorityClass the files
bring is created where missing; `--dry-run=server` asks the servers in table output too;
`delete -f -n NS` removes that namespace's companions only."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from placer.cli import app
from placer.definitions.catalog import load_catalog
from placer.kube import Kube
from placer.ops.context import context_of
from placer.ops.delete import DeleteRequest, delete
from placer.ops.submit import SubmitRequest, submit
from tests.actuate.test_submit import FAST, JOBSET, configmap, jobset, write
from tests.kubeapi.builders import catalog_crds, gpu_node

ENTRIES = [{"name": "alpha", "context": "alpha"}, {"name": "beta", "context": "beta"}]
NOT_SERVED = "does not serve JobSet (jobset.x-k8s.io/v1alpha2); install its operator there"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def _fleet(make_fleet, jobset_on: tuple[str, ...]):
    """alpha and beta, 2 x 8 GPUs each; the JobSet CRD only on `jobset_on` (every other catalog CRD on both)."""
    fleet = make_fleet(("alpha", "beta"), crds=False)
    for name in ("alpha", "beta"):
        fleet[name].install_crds([c for c in catalog_crds()
                                  if c["spec"]["names"]["kind"] != "JobSet" or name in jobset_on])
        fleet[name].seed([gpu_node(f"{name[0]}0"), gpu_node(f"{name[0]}1")])
    return fleet


def _run(fleet, catalog, fn, request):
    kube = Kube(str(fleet.kubeconfig), retry=FAST, sleep=lambda s: None, connect_timeout=1.0)
    try:
        return fn(context_of(ENTRIES, catalog, kube), request)
    finally:
        kube.close()


def _submit(fleet, catalog, paths, **kw):
    return _run(fleet, catalog, submit, SubmitRequest(tuple(paths), time_limit=5, workers=1, **kw))


def test_submit_places_on_the_target_that_serves_the_kind(make_fleet, catalog, tmp_path):
    fleet = _fleet(make_fleet, jobset_on=("beta",))
    path = write(tmp_path, "train.yaml", jobset("train", "ml"))
    plan = _submit(fleet, catalog, [path], dry_run=True).plan
    assert [(p.workload, p.cluster) for p in plan.placements] == [("ml/train", "beta")]
    result = _submit(fleet, catalog, [path])
    assert result.exit_code == 0 and not result.failed
    assert [c.cluster for c in result.created] == ["beta"]
    assert [o["metadata"]["name"] for o in fleet["beta"].objects(JOBSET, "JobSet", "ml")] == ["train"]
    assert fleet["alpha"].requests.count(verb="patch") == 0          # never tried where it is not served


def test_no_target_serving_the_kind_is_unplaced_exit_3_with_each_reason(make_fleet, catalog, tmp_path):
    fleet = _fleet(make_fleet, jobset_on=())
    path = write(tmp_path, "train.yaml", jobset("train", "ml"))
    result = _submit(fleet, catalog, [path])
    assert result.exit_code == 3 and not result.failed and not result.created
    (u,) = result.plan.unplaced
    assert {c: r.render() for c, r in u.reasons.items()} == {"alpha": NOT_SERVED, "beta": NOT_SERVED}
    res = CliRunner().invoke(app, ["plan", "-f", path, "--kubeconfig", str(fleet.kubeconfig), "--all-contexts"])
    assert res.exit_code == 3 and f"alpha: {NOT_SERVED}" in res.stdout and f"beta: {NOT_SERVED}" in res.stdout


PRIORITY_CLASS = json.dumps({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                             "metadata": {"name": "prod-high"}, "value": 100000})


def _deployment(name: str, ns: str, priority_class: str) -> str:
    pod = {"priorityClassName": priority_class, "containers": [{"name": "s", "image": "s:1", "resources": {
        "requests": {"cpu": "1", "nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}}}]}
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                                "template": {"metadata": {"labels": {"app": name}}, "spec": pod}}})


def test_a_priority_class_the_files_bring_is_created_where_missing_and_the_plan_says_so(make_fleet, catalog,
                                                                                      tmp_path):
    fleet = _fleet(make_fleet, jobset_on=("alpha", "beta"))
    path = write(tmp_path, "serve.yaml", PRIORITY_CLASS, _deployment("embed", "svc", "prod-high"))
    plan = _submit(fleet, catalog, [path], dry_run=True).plan
    assert [(p.cluster, p.creates) for p in plan.placements] == [("alpha", ("Namespace svc", "PriorityClass prod-high"))]
    result = _submit(fleet, catalog, [path])
    assert result.exit_code == 0 and [c.cluster for c in result.created] == ["alpha"]
    pc = fleet["alpha"].get("scheduling.k8s.io/v1", "PriorityClass", "prod-high")
    assert pc["value"] == 100000
    assert fleet["alpha"].get("apps/v1", "Deployment", "embed", "svc")


def test_a_priority_class_only_one_target_has_excludes_the_other(make_fleet, catalog, tmp_path):
    fleet = _fleet(make_fleet, jobset_on=("alpha", "beta"))
    fleet["beta"].seed([json.loads(PRIORITY_CLASS)])
    path = write(tmp_path, "serve.yaml", _deployment("embed", "svc", "prod-high"))
    result = _submit(fleet, catalog, [path], dry_run=True)
    assert [p.cluster for p in result.plan.placements] == ["beta"]
    # nothing fits on beta any more: alpha's reason names the class
    fleet["beta"].seed([gpu_node("b0", unschedulable=True), gpu_node("b1", unschedulable=True)])
    result = _submit(fleet, catalog, [path])
    assert result.exit_code == 3 and not result.created
    assert result.plan.unplaced[0].reasons["alpha"].render().startswith("has no PriorityClass prod-high")


def test_server_dry_run_asks_the_servers_in_table_output(make_fleet, catalog, tmp_path):
    fleet = _fleet(make_fleet, jobset_on=("alpha", "beta"))
    path = write(tmp_path, "train.yaml", jobset("train", "ml"))
    args = ["submit", "--dry-run=server", "-f", path, "--kubeconfig", str(fleet.kubeconfig), "--all-contexts"]
    for fmt in ("table", "wide"):
        fleet["alpha"].requests.clear()
        res = CliRunner().invoke(app, [*args, "-o", fmt])
        assert res.exit_code == 0, res.output
        asked = [r for r in fleet["alpha"].requests.select(verb="patch") if r.dry]
        assert len(asked) == 1 and "would create" in res.stdout
    # the server refuses it: the table says so and the exit code is 1
    fleet["alpha"].faults.fail(422, match="/jobsets/train")
    res = CliRunner().invoke(app, [*args, "-o", "table"])
    assert res.exit_code == 1, res.output
    assert "refused by the API server" in res.stdout and "injected fault 422" in res.stdout
    assert fleet["alpha"].objects(JOBSET, "JobSet", "ml") == []


def test_delete_f_from_one_namespace_leaves_the_other_namespaces_companions(make_fleet, catalog, tmp_path):
    fleet = _fleet(make_fleet, jobset_on=("alpha", "beta"))
    js = json.loads(jobset("train", "team-x", replicas=1))
    del js["metadata"]["namespace"]                       # -n gives it
    path = write(tmp_path, "app.yaml", configmap("app-config"), json.dumps(js))
    for ns in ("team-a", "team-b"):
        result = _submit(fleet, catalog, [path], namespace=ns)
        assert [c.cluster for c in result.created] == ["alpha"], result
    alpha = fleet["alpha"]
    assert {o["metadata"]["namespace"] for o in alpha.objects("v1", "ConfigMap")} >= {"team-a", "team-b"}
    gone = _run(fleet, catalog, delete, DeleteRequest(files=(path,), namespace="team-a"))
    assert sorted(d.ref for d in gone.deleted) == ["ConfigMap team-a/app-config", "JobSet team-a/train"]
    assert alpha.objects("v1", "ConfigMap", "team-a") == []
    assert [o["metadata"]["name"] for o in alpha.objects("v1", "ConfigMap", "team-b")] == ["app-config"]
    assert [o["metadata"]["name"] for o in alpha.objects(JOBSET, "JobSet", "team-b")] == ["train"]
