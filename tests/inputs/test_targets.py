"""One cluster-resolution rule for every command (issue 12, defect 3): --clusters,
$PLACER_CLUSTERS, ./clusters.yaml, then the kubeconfig (current context by default,
--context / --all-contexts), and the bundled example fleet only without any kubeconfig."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from placer.cli import app
from placer.inputs.targets import resolve_clusters
from placer.model.errors import InputError
from tests.kubeapi.builders import gpu_node

runner = CliRunner()

JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: one, namespace: ml}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}
"""


@pytest.fixture
def isolated(unconfigured):
    (unconfigured / "job.yaml").write_text(JOB)
    return unconfigured


def test_plan_with_a_kubeconfig_uses_its_current_context_not_the_bundled_fleet(isolated, make_fleet, monkeypatch):
    # the defect: with a kubeconfig and no clusters file, plan used the simulated fleet
    kf = make_fleet(names=("alpha", "beta"), crds=False)
    kf["alpha"].seed([gpu_node("a0", gpus=8)])
    kf["beta"].seed([gpu_node("b0", gpus=8)])
    monkeypatch.setenv("KUBECONFIG", str(kf.kubeconfig))           # current context: alpha
    r = runner.invoke(app, ["plan", "-f", "job.yaml", "-o", "json", "--time-limit", "3"])
    assert r.exit_code == 0, r.output
    assert [p["cluster"] for p in json.loads(r.stdout)["placements"]] == ["alpha"]
    assert "bundled" not in r.stderr
    # every command resolves alike: clusters shows the current context only, or what is asked for
    r = runner.invoke(app, ["clusters", "-o", "json"])
    assert [c["name"] for c in json.loads(r.stdout)["clusters"]] == ["alpha"]
    r = runner.invoke(app, ["clusters", "-o", "json", "--context", "beta"])
    assert [c["name"] for c in json.loads(r.stdout)["clusters"]] == ["beta"]
    r = runner.invoke(app, ["clusters", "-o", "json", "--all-contexts"])
    assert [c["name"] for c in json.loads(r.stdout)["clusters"]] == ["alpha", "beta"]
    r = runner.invoke(app, ["plan", "-f", "job.yaml", "--context", "nowhere"])
    assert r.exit_code == 2 and "--context nowhere: no such context" in r.stderr


def test_no_kubeconfig_at_all_uses_the_bundled_fleet_and_says_so_plainly(isolated):
    r = runner.invoke(app, ["plan", "-f", "job.yaml", "-o", "json", "--time-limit", "3"])
    assert r.exit_code == 0, r.output
    assert "note: no clusters file and no kubeconfig: using the bundled example fleet" in r.stderr
    r = runner.invoke(app, ["submit", "-f", "job.yaml"])
    assert r.exit_code == 2 and "no live clusters to submit to" in r.stderr


def test_order_clusters_option_env_then_local_file(isolated, monkeypatch):
    sim = "clusters:\n- name: {n}\n  nodes: [{{name: x, allocatable: {{nvidia.com/gpu: 8}}}}]\n"
    for name in ("opt", "env", "local"):
        (isolated / f"{name}.yaml").write_text(sim.format(n=name))
    (isolated / "clusters.yaml").write_text(sim.format(n="local"))
    assert [c.name for c in resolve_clusters().clusters] == ["local"]
    monkeypatch.setenv("PLACER_CLUSTERS", str(isolated / "env.yaml"))
    assert [c.name for c in resolve_clusters().clusters] == ["env"]
    assert [c.name for c in resolve_clusters(str(isolated / "opt.yaml")).clusters] == ["opt"]
    with pytest.raises(InputError, match="not both"):
        resolve_clusters(contexts=["a"], all_contexts=True)
