"""The daemon follows the definitions registered on the hub while it runs (issue 19): a Workload
Map Karta applied after the start makes its kind placeable without a restart; a Karta deleted
leaves the copies already placed alone, and a new object of its kind is told its kind is unknown;
`prefer="karta"` lets a registered Karta win a kind a built-in definition also serves. The judge
is the test API server: the copies it holds and the annotations on the staging objects."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from placer import daemon as D
from placer.cli import app
from placer.daemon.definitions import CurrentCatalog, FleetDefinitions
from tests.daemon.daemon_helpers import STAGING, Env, gpu_nodes, wait_for
from tests.kubeapi.builders import crd

TARGETS = ("alpha", "beta")
GROUP = "placer-test.dev"
WIDGET = (f"{GROUP}/v1", "Widget")
KARTA_CRD = crd("run.ai", "Karta", "kartas", versions=("v1alpha1",), scope="Cluster", status=False)


def widget_karta(name: str = "test-widget", group: str = GROUP, kind: str = "Widget",
                 replicas: str = ".spec.replicas", template: str = ".spec.template") -> dict:
    """Written for these tests: a root component whose pods come from `template`, `replicas` of them."""
    return {"apiVersion": "run.ai/v1alpha1", "kind": "Karta", "metadata": {"name": name},
            "spec": {"structureDefinition": {"rootComponent": {
                "name": "root",
                "kind": {"group": group, "version": "v1", "kind": kind},
                "specDefinition": {"podTemplateSpecPath": template},
                "scaleDefinition": {"replicasPath": replicas},
                "statusDefinition": {"conditionsDefinition": {"path": ".status.conditions"},
                                     "statusMappings": {"running": [{"byConditions": [
                                         {"type": "Ready", "status": "True"}]}]}}}}}}


def widget(name: str, replicas: int, gpus: int) -> dict:
    resources = {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": WIDGET[0], "kind": WIDGET[1], "metadata": {"name": name, "namespace": STAGING},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "serve", "image": "registry.example/serve:1", "resources": resources}]}}}}


@pytest.fixture
def karta_env(make_fleet):
    """Widget served by the hub and both targets, the kartas.run.ai CRD on the hub, no Karta yet;
    alpha has two 8-GPU nodes, beta none."""
    fleet = make_fleet(names=("hub", *TARGETS), bookmark_interval=0.5)
    for name in ("hub", *TARGETS):
        fleet[name].install_crds([crd(GROUP, "Widget", "widgets")])
    fleet["hub"].install_crds([KARTA_CRD])
    fleet["alpha"].seed(gpu_nodes("a", 2))
    env = Env(fleet)
    yield env
    env.stop()


def apply_karta(env: Env, karta: dict) -> None:
    env.hub.create(env.hub.resource_for("run.ai/v1alpha1", "Karta"), karta, None)


def test_a_karta_applied_after_the_start_makes_its_kind_placed(karta_env):
    env = karta_env
    d = env.daemon(follow="placer", discovery_interval=0.2)
    assert d.wait_idle(20)
    assert WIDGET not in d.view.informers and d.catalog.lookup(*WIDGET) is None
    apply_karta(env, widget_karta())
    wait_for(lambda: WIDGET in d.view.informers, timeout=30, what="the Karta's kind watched on the hub")
    wait_for(lambda: WIDGET in d.caches["alpha"].kinds, timeout=30, what="its copies watched on alpha")
    w = widget("w1", replicas=3, gpus=4)
    env.create(w)
    wait_for(lambda: env.annotations(w).get(D.PLACED_CLUSTER) == "alpha", timeout=30, what="the Widget placed")
    (copy,) = env.copies(w).values()
    assert copy["spec"]["replicas"] == 3
    assert list(env.copies(w)) == ["alpha"]


def test_a_karta_deleted_keeps_placed_copies_and_new_arrivals_are_told_the_kind_is_unknown(karta_env):
    env = karta_env
    apply_karta(env, widget_karta())
    d = env.daemon(follow="placer", discovery_interval=0.2)
    first = widget("w1", replicas=1, gpus=2)
    env.create(first)
    wait_for(lambda: env.annotations(first).get(D.PLACED_CLUSTER) == "alpha", timeout=30, what="placed")
    env.hub.delete(env.hub.resource_for("run.ai/v1alpha1", "Karta"), "test-widget", None)
    wait_for(lambda: d.catalog.lookup(*WIDGET) is None, timeout=30, what="the definition gone from the catalog")
    late = widget("w2", replicas=1, gpus=2)
    env.create(late)
    wait_for(lambda: env.annotations(late).get(D.ANN_PHASE) == D.PHASE_INVALID, timeout=30, what="w2 refused")
    assert "no workload definition for placer-test.dev/v1/Widget" in env.annotations(late)[D.ANN_MESSAGE]
    assert d.wait_idle(20)
    assert list(env.copies(first)) == ["alpha"] and env.copies(late) == {}
    assert env.annotations(first).get(D.PLACED_CLUSTER) == "alpha"
    # the placed one read again (a label edited): its copy stays, its status can no longer be read
    widgets = env.hub.resource_for(*WIDGET)
    env.hub.patch(widgets, "w1", {"metadata": {"labels": {"edited": "yes"}}}, STAGING)
    wait_for(lambda: env.annotations(first).get(D.ANN_PHASE) == D.PHASE_INVALID, timeout=30, what="w1 re-read")
    assert d.wait_idle(20)
    assert list(env.copies(first)) == ["alpha"]
    # deleting it still deletes its copy (the finalizer is served before any definition is needed)
    env.hub.delete(widgets, "w1", STAGING)
    wait_for(lambda: env.copies(first) == {}, timeout=30, what="w1's copy deleted")


def test_with_karta_preferred_a_registered_karta_takes_a_kind_a_builtin_serves(karta_env):
    """A Karta on the hub claims batch/v1 Job and counts one pod per Job; the built-in Job
    definition counts `parallelism`. Three pods of 8 GPUs do not fit alpha's two 8-GPU nodes, one
    does: preferring placer's definition the Job stays unplaced, preferring Kartas it is placed."""
    env = karta_env
    apply_karta(env, widget_karta("one-pod-job", group="batch", kind="Job", replicas="1"))
    jobs = {}
    for prefer in ("placer", "karta"):
        d = env.daemon(follow=prefer, identity=f"placer-{prefer}")
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"j-{prefer}", "namespace": STAGING},
               "spec": {"parallelism": 3, "completions": 3, "template": {"spec": {
                   "restartPolicy": "Never", "containers": [{"name": "c", "image": "x", "resources": {
                       "requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}}}
        env.create(job)
        wait_for(lambda: env.annotations(job).get(D.ANN_MESSAGE) or env.annotations(job).get(D.PLACED_CLUSTER),
                 timeout=30, what=f"{job['metadata']['name']} planned")
        jobs[prefer] = (env.annotations(job).get(D.PLACED_CLUSTER), list(env.copies(job)))
        env.hub.delete(env.hub.resource_for("batch/v1", "Job"), job["metadata"]["name"], STAGING)
        assert d.wait_idle(20)
        d.stop()
    assert jobs == {"placer": (None, []), "karta": ("alpha", ["alpha"])}


def test_a_bad_prefer_is_one_line_and_exit_2():
    res = CliRunner().invoke(app, ["daemon", "--prefer", "kai"])
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: --prefer 'kai': expected one of placer, karta"


def test_a_hub_that_does_not_answer_a_poll_keeps_its_definitions(karta_env):
    """The hub answers 500 to the Karta listing for one poll: what it registered before still
    serves (a transient error must not make every registered kind unknown); once it answers
    again without the Karta, the kind is gone."""
    env = karta_env
    apply_karta(env, widget_karta())
    fleet = FleetDefinitions(env.catalog, env.kube, ["hub", "alpha", "beta"], warn=lambda m: None)
    holder = CurrentCatalog(fleet.load())
    assert holder.current.lookup(*WIDGET) is not None
    assert fleet.refresh(holder) is False                  # the same objects: nothing changed
    env.hub.delete(env.hub.resource_for("run.ai/v1alpha1", "Karta"), "test-widget", None)
    env.fleet["hub"].faults.fail(500, match="kartas")
    assert fleet.refresh(holder) is False and holder.current.lookup(*WIDGET) is not None
    env.fleet["hub"].faults.clear()
    assert fleet.refresh(holder) is True and holder.current.lookup(*WIDGET) is None
