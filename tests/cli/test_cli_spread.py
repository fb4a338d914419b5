"""`placer plan -o json` and `placer submit --dry-run` for placer.dev/spread (issue 21 Must show):
cluster totals would accept a 12-replica Deployment divided 2:1, but one cluster's nodes hold
only 7 of its pods; the plan's shares fit, and submit writes each copy with its share."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app

runner = CliRunner()

FLEET = {"clusters": [
    {"name": "east", "nodes": [{"namePrefix": "e-", "count": 7, "used": {"nvidia.com/gpu": 5},
                                "allocatable": {"nvidia.com/gpu": 8, "cpu": "64", "memory": "512Gi", "pods": 110}}]},
    {"name": "west", "nodes": [{"namePrefix": "w-", "count": 2,
                                "allocatable": {"nvidia.com/gpu": 8, "cpu": "64", "memory": "512Gi", "pods": 110}}]}]}


def web(**ann):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "serve", "annotations": ann},
            "spec": {"replicas": 12, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                         {"name": "s", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}}


@pytest.fixture(autouse=True)
def _isolated(unconfigured):
    return unconfigured             # see tests/conftest.py


def files(tmp_path, **ann):
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(FLEET))
    (tmp_path / "web.yaml").write_text(yaml.safe_dump(web(**ann)))
    return ["-f", str(tmp_path / "web.yaml"), "--clusters", str(tmp_path / "fleet.yaml")]


def test_plan_json_gives_shares_that_fit(tmp_path):
    res = runner.invoke(app, ["plan", "-o", "json", *files(tmp_path, **{
        "placer.dev/spread": "divide", "placer.dev/spread-weights": "east=2,west=1"})])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    got = {p["cluster"]: p for p in out["placements"]}
    assert {c: p["replicas"] for c, p in got.items()} == {"east": 7, "west": 5}
    assert all(p["workload"] == "serve/web" and p["spread"] == {"mode": "divide", "shares": {"east": 7, "west": 5}}
               for p in got.values())
    # every east pod on its own node: 3 GPUs free per node hold one 2-GPU pod each
    assert sorted(got["east"]["nodes"]) == [f"e-{i}" for i in range(7)]
    assert got["east"]["gpus"] == 14 and got["west"]["gpus"] == 10


def test_submit_dry_run_writes_each_copy_with_its_share(tmp_path):
    res = runner.invoke(app, ["submit", "--dry-run", "-o", "json", *files(tmp_path, **{
        "placer.dev/spread": "divide", "placer.dev/spread-weights": "east=2,west=1"})])
    assert res.exit_code == 0, res.output
    objects = json.loads(res.stdout)["objects"]
    replicas = {c: [o["spec"]["replicas"] for o in objs if o["kind"] == "Deployment"] for c, objs in objects.items()}
    assert replicas == {"east": [7], "west": [5]}


@pytest.mark.parametrize("ann, needle", [
    ({"placer.dev/spread": "halves"}, "annotation placer.dev/spread: 'halves' is not duplicate or divide"),
    ({"placer.dev/spread": "divide", "placer.dev/spread-weights": "north=1"}, "cluster 'north' is not in the fleet"),
])
def test_bad_spread_is_one_line_exit_2(tmp_path, ann, needle):
    res = runner.invoke(app, ["plan", "-o", "json", *files(tmp_path, **ann)])
    assert res.exit_code == 2, res.output
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_plan_table_names_each_share(tmp_path):
    res = runner.invoke(app, ["plan", *files(tmp_path, **{
        "placer.dev/spread": "divide", "placer.dev/spread-weights": "east=2,west=1"})])
    assert res.exit_code == 0, res.output
    assert "divide: 7 of 12 replicas here (east=7, west=5)" in res.stdout
    assert "divide: 5 of 12 replicas here (east=7, west=5)" in res.stdout


def test_duplicate_on_three_of_four_clusters(tmp_path):
    node = {"allocatable": {"nvidia.com/gpu": 8, "cpu": "64", "memory": "512Gi", "pods": 110}}
    fleet = {"clusters": [{"name": n, "nodes": [{"namePrefix": f"{n}-", "count": 1, **node}]}
                          for n in ("a", "b", "c", "d")]}
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    obj = web(**{"placer.dev/spread": "duplicate", "placer.dev/spread-clusters": "3"})
    obj["spec"]["replicas"] = 2
    (tmp_path / "web.yaml").write_text(yaml.safe_dump(obj))
    args = ["-f", str(tmp_path / "web.yaml"), "--clusters", str(tmp_path / "fleet.yaml")]
    res = runner.invoke(app, ["submit", "--dry-run", "-o", "json", *args])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    clusters = [p["cluster"] for p in out["placements"]]
    assert len(clusters) == 3 and len(set(clusters)) == 3 and set(clusters) < {"a", "b", "c", "d"}
    assert all(p["spread"] == {"mode": "duplicate", "shares": {c: 1 for c in sorted(clusters)}} and p["gpus"] == 4
               for p in out["placements"])
    # each copy is the whole workload
    assert {c: [o["spec"]["replicas"] for o in objs if o["kind"] == "Deployment"]
            for c, objs in out["objects"].items()} == {c: [2] for c in clusters}


def test_a_divide_placed_in_part_says_why_per_cluster(tmp_path):
    """20 replicas, at least 6: east's nodes hold 7, west's 8; 15 placed (exit 0, the policy is
    met), the 5 left out said in the JSON and under the table, per cluster."""
    obj = web(**{"placer.dev/spread": "divide", "placer.dev/spread-min-replicas": "6"})
    obj["spec"]["replicas"] = 20
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(FLEET))
    (tmp_path / "web.yaml").write_text(yaml.safe_dump(obj))
    args = ["-f", str(tmp_path / "web.yaml"), "--clusters", str(tmp_path / "fleet.yaml")]
    res = runner.invoke(app, ["plan", "-o", "json", *args])
    assert res.exit_code == 0, res.output
    (first, *_) = json.loads(res.stdout)["placements"]
    spread = first["spread"]
    assert spread["shares"] == {"east": 7, "west": 8} and spread["unplaced"] == 5
    assert spread["reasonCodes"] == {"east": "ShareShort", "west": "ShareShort"}
    res = runner.invoke(app, ["plan", *args], terminal_width=200)
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "5 replicas not placed" in text and text.count("5 replicas not placed") == 1, res.stdout
    assert "east: divide: its share of 7 replicas is all its nodes hold of it at node level" in text, res.stdout
