"""The daemon places a staged workload only on a target that serves its kind (issue 25,
item 3), judged by the test API servers, each serving only the CRDs installed on it."""
from __future__ import annotations

from placer import daemon as D
from tests.daemon.daemon_helpers import STAGING, Env, gpu_nodes, jobset, wait_for
from tests.kubeapi.builders import catalog_crds


def test_a_staged_jobset_goes_to_the_target_that_serves_jobset(make_fleet, caplog):
    fleet = make_fleet(names=("hub", "alpha", "beta"), crds=False, bookmark_interval=0.5)
    fleet["hub"].install_crds()
    fleet["beta"].install_crds()
    fleet["alpha"].install_crds([c for c in catalog_crds() if c["spec"]["names"]["kind"] != "JobSet"])
    fleet["alpha"].seed(gpu_nodes("a", 2))               # alpha comes first and has room
    fleet["beta"].seed(gpu_nodes("b", 2))
    env = Env(fleet)
    try:
        d = env.daemon()
        train = jobset("train", pods=2, gpus=4)
        env.create(train)
        wait_for(lambda: env.annotations(train).get(D.PLACED_CLUSTER) == "beta", what="placed on beta")
        assert [o["metadata"]["name"] for o in fleet["beta"].objects(train["apiVersion"], "JobSet")] == ["train"]
        assert fleet["alpha"].requests.select(resource="jobsets") == []      # never tried on alpha
        assert not [r for r in caplog.records if "placing on alpha failed" in r.getMessage()]
        # too big for beta: unplaced, and alpha's reason is that it does not serve JobSet
        big = jobset("big", pods=3, gpus=8)
        env.create(big)
        assert d.wait_idle(10)
        msg = env.annotations(big)[D.ANN_MESSAGE]
        assert "alpha: does not serve JobSet (jobset.x-k8s.io/v1alpha2); install its operator there" in msg, msg
    finally:
        env.stop()


def _deployment(name: str, priority_class: str) -> dict:
    pod = {"priorityClassName": priority_class, "containers": [{"name": "s", "image": "s:1", "resources": {
        "requests": {"cpu": "1", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": STAGING},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod}}}


def test_a_staged_deployment_goes_where_its_priority_class_exists(env):
    # the hub defines prod-high (so its priority is known); only beta has it among the targets
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "prod-high"},
          "value": 1000}
    env.fleet["hub"].seed([pc])
    env.fleet["beta"].seed([pc])
    d = env.daemon()
    wait_for(lambda: all(getattr(c, "priority_classes", None) is None or c.priority_classes.synced.is_set()
                         for c in d.caches.values()), what="target PriorityClasses listed")
    embed = _deployment("embed", "prod-high")
    env.create(embed)
    wait_for(lambda: env.annotations(embed).get(D.PLACED_CLUSTER) == "beta", what="placed on beta")
    assert env.fleet["alpha"].objects("apps/v1", "Deployment", STAGING) == []
