"""Issue 23 on live clusters: `placer plan` counts what placer's copies already run against their
quota, their pods bound or not. Before, only what a copy still promised (its pods not yet
bound) counted, so once the target's scheduler bound them the quota looked empty again. The
copies are created by `placer submit`, their pods bound as the JobSet controller and the
scheduler would, and `placer plan -o json` is read from the CLI (test API servers)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from placer.cli import app
from tests.actuate.test_submit import Env, jobset, worker_pod, write
from tests.kubeapi.builders import gpu_node

runner = CliRunner()


def clusters_file(tmp_path) -> str:
    path = tmp_path / "c.yaml"
    path.write_text("""clusters:
- {name: alpha, context: alpha}
- {name: beta, context: beta}
quotas:
- {name: ml-team, members: {namespaces: [ml]}, nominal: {nvidia.com/gpu: 8}}
""")
    return str(path)


def plan_json(fresh_fleet, tmp_path, path: str) -> dict:
    r = runner.invoke(app, ["plan", "-o", "json", "--clusters", clusters_file(tmp_path), "--kubeconfig",
                            str(fresh_fleet.kubeconfig), "--time-limit", "10", "-f", path])
    assert r.exit_code in (0, 3), r.output
    return json.loads(r.stdout)


def test_plan_counts_copies_whose_pods_are_bound_against_their_quota(fresh_fleet, tmp_path):
    from placer.definitions.catalog import load_catalog

    fresh_fleet["alpha"].seed([gpu_node("a0"), gpu_node("a1")])
    fresh_fleet["beta"].seed([gpu_node("b0")])
    env = Env(fresh_fleet, load_catalog())
    first = write(tmp_path, "one.yaml", jobset("one", "ml", replicas=2, gpus=4))     # 8 of ml-team's 8
    result = env.submit([first])
    (created,) = result.created
    nodes = [n["metadata"]["name"] for n in fresh_fleet[created.cluster].objects("v1", "Node")]
    fresh_fleet[created.cluster].seed([worker_pod("one", "ml", i, nodes[0]) for i in range(2)], events=True)
    second = write(tmp_path, "two.yaml", jobset("two", "ml", replicas=1, gpus=4))
    plan = plan_json(fresh_fleet, tmp_path, second)
    assert plan["placements"] == [], plan["placements"]
    (u,) = plan["unplaced"]
    assert any("over quota: ml-team uses 8 of 8 GPUs" in r for r in json.dumps(u["reasons"]).split('"')), u
    (q,) = plan["quotas"]
    assert q["used"] == {"nvidia.com/gpu": 8} and q["pending"] == {"nvidia.com/gpu": 4}
