"""The user surface as kubectl users expect it (issue 12, defects 9 and 10, output formats,
version, kubectl plugin, submit previews): each test first reproduces what was wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from tests.kubeapi.builders import gpu_node

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = str(ROOT / "examples")
runner = CliRunner()

JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: %(name)s%(ns)s}
spec:
  template:
    spec:
      restartPolicy: Never
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - {name: main, image: busybox, resources: {limits: {nvidia.com/gpu: %(gpus)d}}}
"""


def job(name: str, gpus: int = 1, ns: str | None = None) -> str:
    return JOB % {"name": name, "gpus": gpus, "ns": f", namespace: {ns}" if ns else ""}


@pytest.fixture(autouse=True)
def _isolated(unconfigured):
    return unconfigured             # see tests/conftest.py


def invoke(*args):
    return runner.invoke(app, list(args))


# --- defect 9 ------------------------------------------------------------------------------

def test_debug_is_accepted_after_the_subcommand(tmp_path):
    (tmp_path / "bad.yaml").write_text("kind: Job\n")
    before = invoke("--debug", "describe", "-f", str(tmp_path / "bad.yaml"))
    after = invoke("describe", "-f", str(tmp_path / "bad.yaml"), "--debug")
    for r in (before, after):
        assert r.exit_code == 2, r.output
        assert "Traceback" in r.stderr and "has no apiVersion" in r.stderr
    plain = invoke("describe", "-f", str(tmp_path / "bad.yaml"))
    assert plain.exit_code == 2 and "Traceback" not in plain.stderr


def test_namespace_fills_in_and_must_agree_with_the_files(tmp_path):
    (tmp_path / "j.yaml").write_text(job("nons", 1) + "---\n" + job("inml", 1, "ml"))
    r = invoke("describe", "-f", str(tmp_path / "j.yaml"), "-n", "ml", "-o", "json")
    assert r.exit_code == 0, r.output
    assert [(w["namespace"], w["name"]) for w in json.loads(r.stdout)] == [("ml", "nons"), ("ml", "inml")]
    for cmd in (("describe",), ("plan",)):
        r = invoke(*cmd, "-f", str(tmp_path / "j.yaml"), "-n", "other")
        assert r.exit_code == 2, r.output
        line = r.stderr.strip().splitlines()[-1]
        assert "j.yaml:" in line and "namespace from the provided object 'ml' does not match" in line
        assert "'other'" in line
    r = invoke("plan", "-f", str(tmp_path / "j.yaml"), "-n", "ml", "-o", "json")
    assert r.exit_code == 0, r.output
    assert {p["workload"] for p in json.loads(r.stdout)["placements"]} == {"ml/nons", "ml/inml"}


def test_describe_accepts_type_space_name(kube_fleet):
    from placer.kube import Kube
    client = Kube(str(kube_fleet.kubeconfig)).client("alpha")
    obj = yaml.safe_load(job("typed", 2, "surface-typename"))
    client.create(client.resource_for("batch/v1", "Job"), obj)
    args = ("--kubeconfig", str(kube_fleet.kubeconfig), "--context", "alpha", "-n", "surface-typename", "-o", "json")
    slash = invoke("describe", "job/typed", *args)
    spaced = invoke("describe", "job", "typed", *args)
    assert slash.exit_code == 0, slash.output
    assert spaced.exit_code == 0, spaced.output
    assert json.loads(spaced.stdout)[0]["name"] == "typed" and json.loads(spaced.stdout)[0]["gpus"] == 2
    both = invoke("describe", "job/typed", "typed", *args)
    assert both.exit_code == 2 and "not both" in both.stderr


def test_clusters_output_formats():
    r = invoke("clusters", "-o", "yaml")
    assert r.exit_code == 0, r.output
    doc = yaml.safe_load(r.stdout)
    assert [c["name"] for c in doc["clusters"]] == ["east", "west", "eu", "dev", "gb"]
    assert invoke("clusters", "-o", "name").stdout.split() == ["cluster/east", "cluster/west", "cluster/eu",
                                                                 "cluster/dev", "cluster/gb"]
    wide = invoke("clusters", "-o", "wide")
    assert "LABELS" in wide.stdout and "region=us-east" in wide.stdout
    r = invoke("clusters", "-o", "jsonpath={.clusters[*].gpus.free}")
    assert r.stdout.split() == ["88", "98", "48", "16", "288"]


@pytest.mark.parametrize("cmd", [("clusters",), ("plan", "-f", EXAMPLES), ("describe", "-f", EXAMPLES),
                                 ("catalog", "list"), ("version",), ("submit", "-f", EXAMPLES), ("get",),
                                 ("delete", "job/x")])
def test_one_error_text_for_an_unknown_output_format(cmd):
    r = invoke(*cmd, "-o", "xml")
    assert r.exit_code == 2, r.output
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("error: -o xml: unknown output format; this command offers table"), line
    assert "pydantic" not in r.stderr and "Invalid value" not in r.stderr


def test_plan_without_arguments_explains_itself_plainly():
    r = invoke("plan")
    assert r.exit_code == 2
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("error: nothing to plan: pass -f FILE or -f DIR")
    assert "((" not in line and "(the bundled" not in line        # no nested parentheses
    assert "hub:" in line and "Clusters in use: the bundled example fleet" in line


def test_jsonpath_and_name_outputs_of_plan():
    r = invoke("plan", "-f", str(ROOT / "examples" / "job.yaml"), "-o", "jsonpath={.placements[*].workload}")
    assert r.exit_code == 0, r.output
    assert r.stdout.split() == ["research/eval-mmlu"]
    r = invoke("plan", "-f", str(ROOT / "examples" / "job.yaml"), "-o", "name")
    assert r.stdout.split() == ["job/eval-mmlu"]
    bad = invoke("plan", "-f", EXAMPLES, "-o", "jsonpath={.a[}")
    assert bad.exit_code == 2 and "cannot parse" in bad.stderr


# --- defect 10 -----------------------------------------------------------------------------

def test_plan_table_reads_at_80_columns(tmp_path):
    from placer.cli.plan import render_table
    from placer.ops.plan import plan_files

    (tmp_path / "big.yaml").write_text(job("huge-training-run", 64, "research-team"))
    (tmp_path / "small.yaml").write_text(job("small", 1, "ml"))
    result = plan_files([str(tmp_path / "big.yaml"), str(tmp_path / "small.yaml")])
    text = render_table(result.plan, width=80).plain
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    row = next(i for i, line in enumerate(lines) if line.startswith("research-team/huge-training-run"))
    assert lines[row].split()[-1] == "unplaced" and lines[row].split()[2] == "64"
    reasons = [line for line in lines[row + 1:] if line.startswith("    ") and not line.startswith("      ")]
    assert {r.split(":")[0].strip() for r in reasons} == {"east", "west", "eu", "dev", "gb"}
    # every reason is whole: joined back, it equals what the plan says
    joined = " ".join(line.strip() for line in lines[row + 1:])
    for cluster, reason in result.plan.unplaced[0].reasons.items():
        assert f"{cluster}: {reason.render()}" in joined
    # the placed row carries no nodes in the default table; -o wide adds them
    assert "NODES" not in lines[0]
    wide = render_table(result.plan, wide=True, width=80).plain
    node = next(iter(result.plan.placements[0].nodes))
    assert "NODES" in wide.splitlines()[0] and node in wide


# --- version, kubectl plugin, completion ----------------------------------------------------

def test_version_and_dash_dash_version():
    import ortools

    r = invoke("version", "-o", "json")
    assert r.exit_code == 0
    v = json.loads(r.stdout)
    assert v["ortools"] == ortools.__version__ and v["jq"] and v["placer"]
    r = invoke("--version")
    assert r.exit_code == 0 and f"OR-Tools {ortools.__version__}" in r.stdout and "jq " in r.stdout
    assert "--install-completion" in invoke("--help").stdout


def test_kubectl_runs_placer_as_a_plugin(kubectl, tmp_path):
    bindir = Path(sys.executable).parent
    plugin = bindir / "kubectl-placer"
    if not plugin.exists():
        pytest.skip("placer is not installed with its console scripts in this environment")
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run([kubectl, "placer", "version"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("placer ") and "OR-Tools" in r.stdout
    listed = subprocess.run([kubectl, "plugin", "list"], capture_output=True, text=True, env=env, timeout=60)
    assert "kubectl-placer" in listed.stdout


# --- the picture ----------------------------------------------------------------------------

def _svg_text(path: Path) -> str:
    import html
    return html.unescape(path.read_text()).replace("\u00a0", " ")


def test_plan_svg_names_every_cluster_and_workload(tmp_path):
    (tmp_path / "big.yaml").write_text(job("huge", 64, "ml"))
    out = tmp_path / "out.svg"
    r = invoke("plan", "-f", EXAMPLES, "-f", str(tmp_path / "big.yaml"), "--svg", str(out), "-o", "json")
    assert r.exit_code == 3, r.output
    plan = json.loads(r.stdout)
    text = _svg_text(out)
    assert text.lstrip().startswith("<svg")
    for cluster in ("east", "west", "eu", "dev"):
        assert cluster in text
    for p in plan["placements"]:
        assert p["workload"] in text
    assert "ml/huge" in text                                   # the unplaced one, with its first reason
    first = next(iter(plan["unplaced"][0]["reasons"].items()))
    assert f"{first[0]}: {first[1]}"[:60] in text
    # free GPUs and the largest free block per cluster, before -> after
    assert "GPUs free 88 -> " in text and "largest free block" in text


def test_svg_cells_follow_the_plan(tmp_path):
    """On a one-node cluster the cells are exactly: used before, the workload's, free."""
    from placer.cli.picture import render
    from placer.ops.plan import plan_files

    (tmp_path / "c.yaml").write_text(
        "clusters:\n- name: solo\n  nodes:\n  - {name: n0, allocatable: {nvidia.com/gpu: 8, cpu: '64', "
        "memory: 512Gi}, used: {nvidia.com/gpu: 2}}\n")
    (tmp_path / "j.yaml").write_text(job("three", 3, "ml"))
    result = plan_files([str(tmp_path / "j.yaml")], clusters=str(tmp_path / "c.yaml"))
    text = render(result.fleet, result.plan, title="t", gpus_per_pod=result.gpus_per_pod).export_text()
    row = next(line for line in text.splitlines() if line.strip("│ ").startswith("n0 "))
    assert row.split("n0")[1].strip(" │") == "█" * 5 + "□" * 3
    assert "GPUs free 6 -> 3 of 8; largest free block 6 -> 3" in text


def test_clusters_svg(tmp_path):
    out = tmp_path / "fleet.svg"
    r = invoke("clusters", "--svg", str(out))
    assert r.exit_code == 0, r.output
    text = _svg_text(out)
    for cluster in ("east", "west", "eu", "dev"):
        assert cluster in text
    assert "h100-busy-0" in text and "a100-maint-0 (unschedulable)" in text


def test_svg_to_an_unwritable_path_is_an_input_error(tmp_path):
    r = invoke("clusters", "--svg", str(tmp_path / "missing-dir" / "x.svg"))
    assert r.exit_code == 2 and "--svg" in r.stderr and "Traceback" not in r.stderr


# --- submit --dry-run[=client|server] -o yaml -----------------------------------------------

def _example_fleet(tmp_path: Path) -> str:
    """The bundled example fleet as a given clusters file (its live `lab` entry and hub left out)."""
    doc = yaml.safe_load((ROOT / "clusters.example.yaml").read_text())
    doc = {"clusters": [c for c in doc["clusters"] if "context" not in c]}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_submit_dry_run_yaml_prints_the_objects_per_cluster_with_handoff(tmp_path):
    r = invoke("submit", "--dry-run", "-o", "yaml", "-f", EXAMPLES, "--clusters", _example_fleet(tmp_path))
    assert r.exit_code == 0, r.output
    docs = list(yaml.safe_load_all(r.stdout))
    assert docs and all(d["metadata"]["labels"]["placer.dev/managed"] == "true" for d in docs)
    plan = json.loads(invoke("plan", "-f", EXAMPLES, "--clusters", _example_fleet(tmp_path), "-o", "json").stdout)
    clusters = {p["workload"]: p["cluster"] for p in plan["placements"]}
    # each document follows a `# cluster: NAME` line; the hand-off of that cluster is in it
    blocks = r.stdout.split("---\n")[1:]
    seen = set()
    for block in blocks:
        cluster = block.splitlines()[0].removeprefix("# cluster: ")
        d = yaml.safe_load(block)
        if "placer.dev/workload" not in d["metadata"]["labels"]:
            continue                                        # a companion: no object patch
        key = f"{d['metadata']['namespace']}/{d['metadata']['name']}"
        assert clusters[key] == cluster
        seen.add(key)
        if cluster == "east":
            assert d["metadata"]["labels"]["kai.scheduler/queue"] == "research"
            assert "schedulerName: kai-scheduler" in block
        if cluster == "west":
            assert d["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    assert seen == set(clusters)
    names = invoke("submit", "--dry-run=client", "-o", "name", "-f", str(ROOT / "examples" / "job.yaml"),
                   "--clusters", _example_fleet(tmp_path))
    assert names.stdout.split() == ["job.batch/eval-mmlu"]


def test_submit_dry_run_values(tmp_path):
    r = invoke("submit", "--dry-run=maybe", "-f", EXAMPLES, "--clusters", _example_fleet(tmp_path))
    assert r.exit_code == 2 and "--dry-run=maybe: expected one of none, client, server" in r.stderr


def test_submit_dry_run_server_validates_on_the_target_and_creates_nothing(fresh_fleet, tmp_path):
    fresh_fleet["alpha"].seed([gpu_node("a0")])
    fresh_fleet["beta"].seed([gpu_node("b0")])
    (tmp_path / "c.yaml").write_text(
        "clusters:\n- name: alpha\n  context: alpha\n  podTemplatePatch: {schedulerName: kai-scheduler}\n"
        "- name: beta\n  context: beta\n")
    (tmp_path / "j.yaml").write_text(job("checked", 2, "dry"))
    args = ("--clusters", str(tmp_path / "c.yaml"), "--kubeconfig", str(fresh_fleet.kubeconfig),
            "-f", str(tmp_path / "j.yaml"), "-o", "yaml")
    r = invoke("submit", "--dry-run=server", *args)
    assert r.exit_code == 0, r.output
    [d] = list(yaml.safe_load_all(r.stdout))
    # the server answered: it set what only a server sets
    assert d["metadata"].get("uid") and d["metadata"].get("creationTimestamp")
    assert d["spec"]["template"]["spec"]["schedulerName"] == "kai-scheduler"
    from placer.kube import Kube
    from placer.model.errors import NotFound
    kube = Kube(str(fresh_fleet.kubeconfig))
    for name in ("alpha", "beta"):
        with pytest.raises(NotFound):
            kube.client(name).get("jobs", "checked", "dry")


def test_must_show_submit_dry_run_yaml_of_the_examples_without_any_kubeconfig():
    """`placer submit --dry-run -o yaml -f examples/` as a new user types it: the bundled fleet
    (said on stderr), objects labelled placer.dev/managed, each cluster's hand-off in them."""
    r = invoke("submit", "--dry-run", "-o", "yaml", "-f", EXAMPLES)
    assert r.exit_code == 0, r.output
    assert "bundled example fleet" in r.stderr
    blocks = [b for b in r.stdout.split("---\n") if b.strip()]
    assert len(blocks) >= 18
    handed = {"east": 0, "west": 0}
    for block in blocks:
        cluster = block.splitlines()[0].removeprefix("# cluster: ")
        d = yaml.safe_load(block)
        assert d["metadata"]["labels"]["placer.dev/managed"] == "true"
        if "placer.dev/workload" in d["metadata"]["labels"] and cluster in handed:
            handed[cluster] += 1
            label = {"east": "kai.scheduler/queue", "west": "kueue.x-k8s.io/queue-name"}[cluster]
            assert d["metadata"]["labels"][label] == "research"
    assert all(handed.values()), handed
    # a real submit cannot create on simulated clusters: an input error saying so
    real = invoke("submit", "-f", str(ROOT / "examples" / "job.yaml"), "-o", "json")
    assert real.exit_code == 2 and "every cluster is simulated" in real.stderr


def test_namespace_without_files_is_not_silently_ignored():
    r = invoke("plan", "-n", "team")
    assert r.exit_code == 2 and "-n team: applies to the objects of -f files" in r.stderr


def test_bad_namespace_value_is_an_input_error(tmp_path):
    (tmp_path / "j.yaml").write_text(job("x", 1))
    r = invoke("plan", "-f", str(tmp_path / "j.yaml"), "-n", "Not_A_Namespace")
    assert r.exit_code == 2 and "-n 'Not_A_Namespace'" in r.stderr


def test_help_names_the_kubectl_plugin_when_run_as_one(tmp_path):
    bindir = Path(sys.executable).parent
    plugin = bindir / "kubectl-placer"
    if not plugin.exists():
        pytest.skip("placer is not installed with its console scripts in this environment")
    r = subprocess.run([str(plugin), "--help"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "COLUMNS": "100"})
    assert r.returncode == 0 and "Usage: kubectl placer" in r.stdout


def test_submit_dry_run_json_is_the_report_with_the_objects_per_cluster(tmp_path):
    r = invoke("submit", "--dry-run", "-o", "json", "-f", str(ROOT / "examples" / "job.yaml"),
               "--clusters", _example_fleet(tmp_path))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    [p] = doc["placements"]
    [obj] = doc["objects"][p["cluster"]]
    assert obj["metadata"]["name"] == "eval-mmlu" and obj["metadata"]["labels"]["placer.dev/managed"] == "true"
