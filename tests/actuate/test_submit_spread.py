"""`placer submit` of a divided workload through the real client against the test API server
(tests/kubeapi): one copy per cluster with its share of the replicas, and a resubmit that
writes nothing."""
from __future__ import annotations

import json

import pytest

from tests.actuate.test_submit import Env, catalog, fleet, write  # noqa: F401 (fixtures)


@pytest.fixture
def env(fleet, catalog):  # noqa: F811
    return Env(fleet, catalog)


def deployment(name: str, ns: str, replicas: int, gpus: int) -> str:
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": name, "namespace": ns, "annotations": {"placer.dev/spread": "divide"}},
                       "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                                    {"name": "s", "image": "s:1", "resources": {
                                        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": gpus},
                                        "limits": {"nvidia.com/gpu": gpus}}}]}}}})


def test_divided_deployment_one_copy_per_cluster_with_its_share(env, tmp_path):
    # alpha: 2 nodes x 8 GPUs, beta: 1: three 8-GPU replicas need both
    path = write(tmp_path, "web.yaml", deployment("web", "serve", 3, 8))
    result = env.submit([path])
    assert result.exit_code == 0 and not result.failed, result.failed
    assert sorted(c.cluster for c in result.created) == ["alpha", "beta"]
    got = {c: env.fleet[c].get("apps/v1", "Deployment", "web", "serve")["spec"]["replicas"] for c in ("alpha", "beta")}
    assert got == {"alpha": 2, "beta": 1}
    for c in env.fleet:
        c.requests.clear()
    again = env.submit([path])
    assert again.created == () and again.exit_code == 0, (again.created, again.failed)
    # each share stays as placed: nothing written (the file's 3 replicas are not applied on a copy)
    assert env.writes("alpha") == 0 and env.writes("beta") == 0
    assert {a.cluster for a in again.already} <= {"alpha", "beta"}
