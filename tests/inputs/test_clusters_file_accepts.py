"""Simulated clusters say what they accept (`serves`, `priorityClasses`, `namespaces`): the
plan of the real CLI follows it; bad declarations are one line, exit 2."""
from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from placer.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NODES = "  nodes: [{namePrefix: g-, count: 4, allocatable: {nvidia.com/gpu: 8, cpu: '96', memory: 1Ti, pods: 110}}]\n"


def _fleet(tmp_path, east: str, west: str = "") -> str:
    path = tmp_path / "clusters.yaml"
    path.write_text("clusters:\n- name: east\n" + east + NODES + "- name: west\n" + west + NODES)
    return str(path)


def test_plan_picks_the_simulated_cluster_that_serves_jobset_and_says_why_not_the_other(tmp_path):
    fleet = _fleet(tmp_path, "  serves: [kubeflow.org/v1/PyTorchJob]\n",
                   "  serves: [jobset.x-k8s.io/v1alpha2/JobSet]\n")
    res = CliRunner().invoke(app, ["plan", "-f", str(EXAMPLES / "jobset.yaml"), "--clusters", fleet, "-o", "json"])
    assert res.exit_code == 0, res.output
    assert '"cluster": "west"' in res.stdout and '"cluster": "east"' not in res.stdout
    # neither serves it: unplaced, exit 3, each cluster's reason
    fleet = _fleet(tmp_path, "  serves: []\n", "  serves: []\n")
    res = CliRunner().invoke(app, ["plan", "-f", str(EXAMPLES / "jobset.yaml"), "--clusters", fleet])
    assert res.exit_code == 3, res.output
    text = " ".join(res.stdout.split())
    for c in ("east", "west"):
        assert f"{c}: does not serve JobSet (jobset.x-k8s.io/v1alpha2); install its operator there" in text


def test_undeclared_means_accepting_and_namespaces_to_create_are_said(tmp_path):
    fleet = _fleet(tmp_path, "  namespaces: [default]\n  priorityClasses: []\n")
    res = CliRunner().invoke(app, ["plan", "-f", str(EXAMPLES / "jobset.yaml"), "--clusters", fleet, "-o", "json"])
    assert res.exit_code == 0, res.output
    assert '"creates"' in res.stdout and "Namespace " in res.stdout
    res = CliRunner().invoke(app, ["plan", "-f", str(EXAMPLES / "jobset.yaml"), "--clusters", fleet])
    assert res.exit_code == 0 and "submit creates Namespace " in res.stdout and " on east first" in res.stdout


def test_bad_declarations_are_one_line_exit_2(tmp_path):
    for east, says in (("  serves: [JobSet]\n", "clusters[0].serves: [0]: 'JobSet' is not apiVersion/Kind"),
                       ("  serves: 3\n", "clusters[0].serves")):
        res = CliRunner().invoke(app, ["plan", "-f", str(EXAMPLES / "jobset.yaml"), "--clusters",
                                       _fleet(tmp_path, east)])
        assert res.exit_code == 2 and says in res.stderr and "Traceback" not in res.stderr, res.output
    live = tmp_path / "live.yaml"
    live.write_text("clusters:\n- {name: east, context: east, serves: [jobset.x-k8s.io/v1alpha2/JobSet]}\n")
    res = CliRunner().invoke(app, ["plan", "-f", str(EXAMPLES / "jobset.yaml"), "--clusters", str(live)])
    assert res.exit_code == 2 and "describe a simulated cluster" in res.stderr, res.output
