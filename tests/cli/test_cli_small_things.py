"""The small things of issue 25 item 11, through the CLI: counts in the singular, `kept`
not counted as unplaced, the GPUs of placed workloads on their update rows, a Knative
Service told from a core Service, the submit table wrapped to the terminal like plan's,
and a self-contained SVG with a colour per workload (the GPU resource name typo:
tests/inputs/test_gpu_resource_typo.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from placer.cli import app
from placer.cli import submit as submit_cli
from tests.actuate.test_submit import catalog, env, fleet, jobset, write  # noqa: F401 (fixtures)

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def bundled(tmp_path, monkeypatch):
    """No clusters file, no kubeconfig: the bundled example fleet."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def cli(env, *args):
    return runner.invoke(app, [*args, "--kubeconfig", str(env.fleet.kubeconfig), "--all-contexts"])


def test_one_gpu_one_pod_one_workload_in_the_singular(bundled):
    r = runner.invoke(app, ["plan", "-f", str(EXAMPLES / "knative-service.yaml")])
    assert r.exit_code == 0, r.output
    assert "placed 1/1 workload, 1/1 GPU in" in r.stdout, r.stdout
    r = runner.invoke(app, ["describe", "-f", str(EXAMPLES / "knative-service.yaml")])
    assert r.exit_code == 0, r.output
    assert "= 1 pod," in r.stdout and "1 pods" not in r.stdout, r.stdout
    svg = bundled / "p.svg"
    r = runner.invoke(app, ["plan", "-f", str(EXAMPLES / "knative-service.yaml"), "--svg", str(svg)])
    assert r.exit_code == 0, r.output
    text = re.sub(r"&#160;|\s", " ", svg.read_text())
    assert "1 GPU on" in text and "1 GPUs" not in text


def test_a_knative_service_shows_its_group_a_core_service_does_not(bundled):
    r = runner.invoke(app, ["plan", "-f", str(EXAMPLES / "knative-service.yaml"), "-f", str(EXAMPLES / "job.yaml")])
    assert r.exit_code == 0, r.output
    rows = {line.split()[0]: line.split()[1] for line in r.stdout.splitlines()[1:]
            if line.strip() and "/" in line.split()[0]}
    assert rows["inference/bge-embed"] == "Service.serving.knative.dev", r.stdout
    assert "Job" in rows.values()                                  # a built-in kind stays bare


def test_kept_is_counted_as_kept_and_updates_show_their_gpus(env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "w.yaml", jobset("w", "ml", replicas=1, gpus=8))
    r = cli(env, "submit", "-f", path, "--cluster", "beta", "--time-limit", "2")
    assert r.exit_code == 0, r.output
    r = cli(env, "submit", "-f", path, "--time-limit", "2")        # unchanged
    assert r.exit_code == 0, r.output
    (row,) = [line for line in r.stdout.splitlines() if line.startswith("ml/w ")]
    assert row.split()[1:4] == ["JobSet", "8", "beta"] and "unchanged" in row, r.stdout
    write(tmp_path, "w.yaml", jobset("w", "ml", replicas=2, gpus=8))   # no longer fits on beta
    r = cli(env, "submit", "-f", path, "--time-limit", "2")
    assert r.exit_code == 3, r.output
    (row,) = [line for line in r.stdout.splitlines() if line.startswith("ml/w ")]
    assert row.split()[1:4] == ["JobSet", "16", "beta"] and "kept" in row, r.stdout
    summary = r.stdout.strip().splitlines()[-1]
    assert "1 kept, 0 unplaced" in summary, summary


def test_the_submit_table_wraps_to_the_terminal_like_plans(env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    big = [jobset(f"big-{i}", "ml", replicas=4, gpus=8) for i in range(2)]     # 32 GPUs each: unplaced
    path = write(tmp_path, "w.yaml", jobset("fits", "ml", replicas=2, gpus=4), *big)
    monkeypatch.setattr(submit_cli, "out", Console(width=72, soft_wrap=True, force_terminal=False))
    r = cli(env, "submit", "-f", path, "--time-limit", "2")
    assert r.exit_code == 3, r.output
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["WORKLOAD", "KIND", "GPUS", "CLUSTER", "RESULT"], r.stdout
    assert max(len(line) for line in lines[:-1]) <= 72, "\n".join(lines)   # the counts line is one line
    assert any(line.startswith("    alpha: ") for line in lines), r.stdout  # reasons: their own lines


def test_the_svg_is_self_contained_and_gives_every_workload_its_colour(bundled):
    from placer.cli.picture import workload_colour

    docs = [f"""apiVersion: batch/v1
kind: Job
metadata: {{name: j{i}, namespace: ml}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: c, image: x, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]
""" for i in range(20)]
    (bundled / "jobs.yaml").write_text("---\n".join(docs))
    (bundled / "c.yaml").write_text("clusters:\n- name: sim\n  nodes:\n"
                                    "  - {namePrefix: n, count: 3, allocatable: {nvidia.com/gpu: 8}}\n")
    svg = bundled / "p.svg"
    r = runner.invoke(app, ["plan", "-f", "jobs.yaml", "--clusters", "c.yaml", "--svg", str(svg), "-o", "json"])
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["placements"]) == 20
    text = svg.read_text()
    assert "@font-face" not in text, "the picture loads a font from the network"
    assert not re.search(r"url\(\s*[\"']?(https?:|//)", text)           # url(#id) clip paths are its own
    assert re.findall(r"https?://[^\"' )]+", text) == ["http://www.w3.org/2000/svg"]   # the namespace only
    colours = [workload_colour(i) for i in range(20)]
    assert len(set(colours)) == 20
    for c in colours[12:]:                                     # past the palette: drawn, each its own
        assert c in text, c
