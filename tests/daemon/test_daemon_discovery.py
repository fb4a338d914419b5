"""Kinds and definitions that appear while the daemon runs are followed by watches, not polled
(issue 24): in a steady phase the daemon makes no LIST and no discovery request on any
cluster, however short its `discovery_interval`; a CRD installed later (on the hub and a
target) and a Karta registered later are still followed, even with a poll interval the test
would never reach. Judged from the test API servers' request logs (the daemon presents a
token of its own) and the copies they hold; waits are on conditions, and the steady window
is one in which the old poll (every 0.2 s) had many turns."""

from __future__ import annotations

import time

from placer import daemon as D
from tests.daemon.daemon_helpers import STAGING, Env, gpu_nodes, jobset, token_kubeconfig, wait_for
from tests.kubeapi.builders import catalog_crds, crd

TARGETS = ("alpha", "beta")
TOKEN = "discovery-test-daemon"
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
KARTA_CRD = crd("run.ai", "Karta", "kartas", versions=("v1alpha1",), scope="Cluster", status=False)
WIDGET = ("placer-test.dev/v1", "Widget")


def widget_karta() -> dict:
    return {"apiVersion": "run.ai/v1alpha1", "kind": "Karta", "metadata": {"name": "late-widget"},
            "spec": {"structureDefinition": {"rootComponent": {
                "name": "root", "kind": {"group": "placer-test.dev", "version": "v1", "kind": "Widget"},
                "specDefinition": {"podTemplateSpecPath": ".spec.template"},
                "scaleDefinition": {"replicasPath": ".spec.replicas"},
                "statusDefinition": {"conditionsDefinition": {"path": ".status.conditions"},
                                     "statusMappings": {"running": [{"byConditions": [
                                         {"type": "Ready", "status": "True"}]}]}}}}}}


def requests(fleet, since: float) -> dict[str, list]:
    """cluster -> the daemon's LIST and discovery requests since `since`."""
    return {name: [f"{r.verb} {r.path}" for r in fleet[name].requests.select(since=since, token=TOKEN)
                   if r.verb in ("list", "discovery")]
            for name in ("hub", *TARGETS)}


def test_a_steady_daemon_makes_no_list_and_no_discovery_request(make_fleet, tmp_path):
    """Definitions followed (as `placer daemon` does) with a 0.2 s discovery interval: from
    the moment it is idle after its start, while six workloads arrive and are placed one
    after the other (the first Event, the first copy and its namespace among them), and for
    at least ten of the old poll's intervals, no cluster sees a LIST or a discovery request
    from the daemon."""
    fleet = make_fleet(names=("hub", *TARGETS), bookmark_interval=0.5)
    fleet["hub"].install_crds([KARTA_CRD])
    for name in TARGETS:
        fleet[name].seed(gpu_nodes(name[0], 2))
    env = Env(fleet)
    try:
        d = env.daemon(kubeconfig=token_kubeconfig(fleet, tmp_path / "d.kubeconfig", TOKEN), follow="placer",
                       discovery_interval=0.2)
        assert d.wait_idle(30)
        since = time.monotonic()
        for i in range(6):
            job = jobset(f"steady-{i}", pods=1, gpus=1)
            env.create(job)
            wait_for(lambda: env.annotations(job).get(D.PLACED_CLUSTER), timeout=30, what=f"steady-{i} placed")
        while time.monotonic() - since < 10 * 0.2:
            time.sleep(0.1)
        assert d.wait_idle(30)
        assert requests(fleet, since) == {name: [] for name in ("hub", *TARGETS)}
    finally:
        env.stop()


def test_a_crd_and_a_karta_installed_later_are_followed_without_a_poll(make_fleet, tmp_path):
    """No JobSet CRD anywhere and no Karta at the start, and a poll interval of an hour: the
    JobSet CRD installed on the hub and alpha makes a staged JobSet placed on alpha; a Karta
    registered on the hub for a Widget kind served everywhere makes a Widget placed."""
    fleet = make_fleet(names=("hub", *TARGETS), bookmark_interval=0.5, crds=False)
    for name in ("hub", *TARGETS):
        fleet[name].install_crds([crd("placer-test.dev", "Widget", "widgets")])
    fleet["hub"].install_crds([KARTA_CRD])
    fleet["alpha"].seed(gpu_nodes("a", 2))
    env = Env(fleet)
    try:
        d = env.daemon(kubeconfig=token_kubeconfig(fleet, tmp_path / "d.kubeconfig", TOKEN), follow="placer",
                       discovery_interval=3600)
        assert d.wait_idle(30)
        assert JOBSET not in d.view.informers and d.catalog.lookup(*WIDGET) is None
        jobset_crd = [c for c in catalog_crds() if c["spec"]["names"]["kind"] == "JobSet"]
        for name in ("hub", "alpha"):
            fleet[name].install_crds(jobset_crd)
        wait_for(lambda: JOBSET in d.view.informers and JOBSET in d.caches["alpha"].kinds, timeout=30,
                 what="JobSet watched on the hub and alpha")
        job = jobset("late", pods=1, gpus=2)
        env.create(job)
        wait_for(lambda: env.annotations(job).get(D.PLACED_CLUSTER) == "alpha", timeout=30, what="the JobSet placed")
        env.hub.create(env.hub.resource_for("run.ai/v1alpha1", "Karta"), widget_karta(), None)
        wait_for(lambda: WIDGET in d.view.informers, timeout=30, what="the Karta's kind watched on the hub")
        w = {"apiVersion": WIDGET[0], "kind": WIDGET[1], "metadata": {"name": "w1", "namespace": STAGING},
             "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "s", "image": "s:1", "resources": {
                 "requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}}]}}}}
        env.create(w)
        wait_for(lambda: env.annotations(w).get(D.PLACED_CLUSTER) == "alpha", timeout=30, what="the Widget placed")
        assert [o["metadata"]["name"] for o in fleet["alpha"].objects(*JOBSET, STAGING)] == ["late"]
        assert list(env.copies(w)) == ["alpha"]
    finally:
        env.stop()
