"""Issue 21 end to end: `preference` and `cost` in the clusters file and
`placer.dev/cluster-order` on workloads, through `placer plan`; bad values one line, exit 2."""

import json

import pytest
from typer.testing import CliRunner

from placer.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _isolated(unconfigured):
    return unconfigured             # see tests/conftest.py


def plan(*args):
    return runner.invoke(app, ["plan", "--dry-run", "--time-limit", "10", *args])


def _clusters(tmp_path, east: str = "", west: str = "", onprem: str = "") -> str:
    node = "  nodes: [{namePrefix: %s-, count: %d, allocatable: {nvidia.com/gpu: 8, cpu: '96', memory: 1Ti}}]\n"
    text = ("clusters:\n"
            "- name: east\n" + node % ("east", 2) + east +
            "- name: west\n" + node % ("west", 2) + west +
            "- name: onprem\n" + node % ("onprem", 3) + onprem)
    path = tmp_path / "clusters.yaml"
    path.write_text(text)
    return str(path)


def _jobs(tmp_path, n: int, gpus: int, order: str | None = None) -> str:
    ann = f"  annotations: {{placer.dev/cluster-order: \"{order}\"}}\n" if order is not None else ""
    docs = []
    for i in range(n):
        docs.append(f"""apiVersion: batch/v1
kind: Job
metadata:
  name: train-{i}
  namespace: ml
{ann}spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}
""")
    path = tmp_path / "jobs.yaml"
    path.write_text("---\n".join(docs))
    return str(path)


def test_cluster_order_fills_the_first_cluster_then_spills(tmp_path):
    r = plan("--clusters", _clusters(tmp_path), "-f", _jobs(tmp_path, 8, 4, "onprem,west"), "-o", "json")
    assert r.exit_code == 0, r.output
    on = [p["cluster"] for p in json.loads(r.stdout)["placements"]]
    assert on.count("onprem") == 6 and on.count("west") == 2 and "east" not in on


def test_cost_picks_the_cheaper_cluster_and_the_json_gives_it(tmp_path):
    clusters = _clusters(tmp_path, east="  cost: 4.2\n", west="  cost: 2.5\n", onprem="  cost: 3\n")
    r = plan("--clusters", clusters, "-f", _jobs(tmp_path, 3, 8), "-o", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [(p["cluster"], p["cost"]) for p in doc["placements"]] == [("west", 20), ("west", 20), ("onprem", 24)]
    assert doc["summary"]["cost"] == 64 and doc["summary"]["optimal"]
    table = plan("--clusters", clusters, "-f", _jobs(tmp_path, 3, 8), "-o", "wide")
    assert "cost 64 per hour" in table.stdout
    assert "not west: fits alone, but its capacity went to" in table.stdout


def test_clusters_shows_what_it_read(tmp_path):
    r = runner.invoke(app, ["clusters", "--clusters", _clusters(tmp_path, east="  cost: 4.2\n  preference: 2\n"),
                            "-o", "json"])
    assert r.exit_code == 0, r.output
    got = {c["name"]: (c.get("preference"), c.get("cost")) for c in json.loads(r.stdout)["clusters"]}
    assert got == {"east": (2, 4.2), "west": (None, None), "onprem": (None, None)}


def test_preference_fills_the_preferred_cluster_first(tmp_path):
    clusters = _clusters(tmp_path, west="  preference: 10\n")
    r = plan("--clusters", clusters, "-f", _jobs(tmp_path, 3, 8), "-o", "json")
    on = [p["cluster"] for p in json.loads(r.stdout)["placements"]]
    assert on.count("west") == 2 and on.count("east") == 1


def test_an_order_naming_a_missing_cluster_is_said_and_the_rest_ordered(tmp_path):
    r = plan("--clusters", _clusters(tmp_path), "-f", _jobs(tmp_path, 1, 8, "gone,west"), "-o", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["placements"][0]["cluster"] == "west"
    assert "placer.dev/cluster-order names gone, not in the fleet" in r.stderr
    r = runner.invoke(app, ["submit", "--dry-run", "--clusters", _clusters(tmp_path), "-f",
                            _jobs(tmp_path, 1, 8, "gone,west")])
    assert r.exit_code == 0 and "placer.dev/cluster-order names gone, not in the fleet" in r.stderr, r.output


@pytest.mark.parametrize("field,says", [
    ("  cost: -2\n", "clusters[1]: cluster west: cost: -2 must be a number from 0"),
    ("  cost: cheap\n", "clusters[1]: cluster west: cost: 'cheap' is not a number"),
    ("  cost: 0.1234567\n", "clusters[1]: cluster west: cost: 0.1234567 has more than 6 decimal places"),
    ("  preference: high\n", "clusters[1]: cluster west: preference: 'high' is not an integer"),
    ("  preference: 2.5\n", "clusters[1]: cluster west: preference: 2.5 is not an integer"),
])
def test_bad_preference_or_cost_exits_2_naming_file_and_cluster(tmp_path, field, says):
    r = plan("--clusters", _clusters(tmp_path, west=field), "-f", _jobs(tmp_path, 1, 8))
    assert r.exit_code == 2
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith("error: ") and "clusters.yaml: " + says in line, line


def test_an_empty_order_or_a_group_that_disagrees_exits_2(tmp_path):
    r = plan("--clusters", _clusters(tmp_path), "-f", _jobs(tmp_path, 1, 8, " , "))
    assert r.exit_code == 2 and "placer.dev/cluster-order: ' , ' names no cluster" in r.stderr
    jobs = tmp_path / "two.yaml"
    jobs.write_text(open(_jobs(tmp_path, 1, 8, "east")).read().replace("train-0", "a")
                    .replace("  annotations: {", "  annotations: {placer.dev/group: g, ") + "---\n"
                    + open(_jobs(tmp_path, 1, 8, "west")).read().replace("train-0", "b")
                    .replace("  annotations: {", "  annotations: {placer.dev/group: g, "))
    r = plan("--clusters", _clusters(tmp_path), "-f", str(jobs))
    assert r.exit_code == 2 and "differs from 'east'" in r.stderr and "\n" not in r.stderr.strip()
