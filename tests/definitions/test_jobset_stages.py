"""JobSet dependsOn (issue 12, defect 7): one gang per startup stage, as KAI's JobSet pod
grouper sees a JobSet whose replicated jobs start in sequence, and placement counts only
what must fit at once. Expected values follow KEP-672 (serial job execution): a replicated
job with dependsOn is created only after the named ones are Ready or Complete."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret

runner = CliRunner()


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def rjob(name, gpus, replicas=1, depends=None, cpu="4"):
    res = {"requests": {"cpu": cpu}, **({"limits": {"nvidia.com/gpu": gpus}} if gpus else {})}
    out = {"name": name, "replicas": replicas, "template": {"spec": {"parallelism": 1, "completions": 1, "template": {
        "spec": {"restartPolicy": "Never",
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                 "containers": [{"name": "m", "image": "i", "resources": res}]}}}}}
    if depends:
        out["dependsOn"] = [{"name": n, "status": s} for n, s in depends]
    return out


def jobset(*rjobs, name="pipe"):
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": "ml"}, "spec": {"replicatedJobs": list(rjobs)}}


def test_without_depends_on_the_whole_set_is_one_gang(catalog):
    w = interpret(jobset(rjob("a", 8, 2), rjob("b", 8, 2)), catalog)
    assert [(g.name, g.pods, g.window) for g in w.gangs] == [("pipe", 4, None)]
    assert w.at_once() is w


def test_one_gang_per_stage_and_complete_starts_a_new_window(catalog):
    w = interpret(jobset(rjob("init", 8), rjob("train", 8, 4, [("init", "Complete")]),
                         rjob("eval", 2, 1, [("train", "Ready")])), catalog)
    got = [(g.name, [m[1] for m in g.members], g.pods, g.gpus, g.window) for g in w.gangs]
    assert got == [("pipe-stage-0", ["init"], 1, 8, 0),
                   ("pipe-stage-1", ["train"], 4, 32, 1),
                   ("pipe-stage-2", ["eval"], 1, 2, 1)]          # waits for Ready: runs beside train
    peak = w.at_once()
    assert (peak.pods, peak.gpus) == (5, 34) and (w.pods, w.gpus) == (6, 42)


def test_jobs_without_depends_on_start_at_once_whatever_their_position(catalog):
    w = interpret(jobset(rjob("driver", 1), rjob("workers", 8, 2, [("driver", "Ready")]), rjob("logger", 0)),
                  catalog)
    stages = {g.name: sorted(m[1] for m in g.members) for g in w.gangs}
    assert stages == {"pipe-stage-0": ["driver", "logger"], "pipe-stage-1": ["workers"]}
    assert {g.window for g in w.gangs} == {0}                    # all run together
    assert w.at_once() is w


def test_describe_shows_stage_gangs_and_what_must_fit_at_once(tmp_path):
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump(jobset(rjob("init", 8), rjob("train", 8, 4, [("init", "Complete")]))))
    r = runner.invoke(app, ["describe", "-f", str(path), "-o", "json"])
    assert r.exit_code == 0, r.output
    [d] = json.loads(r.stdout)
    assert [(g["name"], g["minMember"], g["window"]) for g in d["gangs"]] == [("pipe-stage-0", 1, 0),
                                                                            ("pipe-stage-1", 4, 1)]
    assert d["atOnce"] == {"pods": 4, "gpus": 32, "resources": d["atOnce"]["resources"]}
    assert d["gpus"] == 40


def test_a_sequential_jobset_is_placed_where_its_largest_stage_fits(tmp_path, monkeypatch):
    """4 nodes x 8 GPUs: an 8-GPU initializer, then (once it completed) 4 x 8-GPU trainers.
    Counting every pod at once (40 GPUs) never fits; the stages do, one after the other."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(
        "clusters:\n- name: only\n  nodes:\n  - {namePrefix: g-, count: 4, allocatable: "
        "{nvidia.com/gpu: 8, cpu: '64', memory: 512Gi}}\n")
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump(jobset(rjob("init", 8), rjob("train", 8, 4, [("init", "Complete")]))))
    r = runner.invoke(app, ["plan", "-f", str(path), "--clusters", str(tmp_path / "c.yaml"), "-o", "json"])
    assert r.exit_code == 0, r.output
    [p] = json.loads(r.stdout)["placements"]
    assert p["workload"] == "ml/pipe" and p["gpus"] == 32 and p["pods"] == 4
    assert set(p["nodes"]) == {"g-0", "g-1", "g-2", "g-3"}
    # waiting only for Ready, the initializer keeps running: 40 GPUs at once cannot fit
    path.write_text(yaml.safe_dump(jobset(rjob("init", 8), rjob("train", 8, 4, [("init", "Ready")]))))
    r = runner.invoke(app, ["plan", "-f", str(path), "--clusters", str(tmp_path / "c.yaml"), "-o", "json"])
    assert r.exit_code == 3, r.output
