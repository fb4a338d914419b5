"""`placer catalog validate` (issue 12, defect 8): companions.yaml, a directory and the
WorkloadDefinition object form all validate; jq errors quote the user's own expression."""

from __future__ import annotations

import re
from pathlib import Path

import jq
import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

DEFINITION = {
    "name": "widget",
    "matches": [{"apiVersion": "example.com/v1", "kind": "Widget"}],
    "components": [{"name": "worker", "pod": {"template": ".spec.template"}, "replicas": ".spec.replicas // 1"}],
}


def wrapped(defn: dict) -> dict:
    return {"apiVersion": "placer.dev/v1alpha1", "kind": "WorkloadDefinition",
            "metadata": {"name": defn["name"]}, "spec": {k: v for k, v in defn.items() if k != "name"}}


def validate(*paths):
    return runner.invoke(app, ["catalog", "validate", *map(str, paths)])


def test_companions_file_validates():
    r = validate(ROOT / "catalog" / "companions.yaml")
    assert r.exit_code == 0, r.output
    assert "companion kinds: " in r.stdout


def test_a_directory_validates_every_file_in_it():
    r = validate(ROOT / "catalog")
    assert r.exit_code == 0, r.output
    files = sorted(p.name for p in (ROOT / "catalog").glob("*.yaml"))
    assert sorted(Path(line.split(":")[0]).name for line in r.stdout.splitlines()) == files


def test_a_directory_with_two_files_claiming_one_kind_is_an_error(tmp_path):
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(DEFINITION))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump({**DEFINITION, "name": "widget2"}))
    r = validate(tmp_path)
    assert r.exit_code == 2 and "example.com/v1/Widget is also defined in" in r.stderr


def test_workload_definition_object_validates_and_errors_point_into_spec(tmp_path):
    good = tmp_path / "wd.yaml"
    good.write_text(yaml.safe_dump(wrapped(DEFINITION)))
    r = validate(good)
    assert r.exit_code == 0, r.output
    assert "ok (widget)" in r.stdout
    bad = dict(DEFINITION, components=[{**DEFINITION["components"][0], "replicas": ".spec.replicas // (1"}])
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(wrapped(bad)))
    r = validate(tmp_path / "bad.yaml")
    assert r.exit_code == 2
    line = r.stderr.strip()
    assert "spec.components[0].replicas: jq does not compile '.spec.replicas // (1'" in line
    assert "_e0" not in line and "$root" not in line            # none of placer's wrapper program


def test_jq_error_position_is_in_the_users_expression(tmp_path):
    expr = ".spec.replicas\n| foo(1)"
    bad = dict(DEFINITION, components=[{**DEFINITION["components"][0], "replicas": expr}])
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    r = validate(tmp_path / "bad.yaml")
    assert r.exit_code == 2
    # jq itself, given only the user's text, says where: placer must say the same
    with pytest.raises(ValueError) as raised:
        jq.compile(expr)
    where = re.search(r"line \d+, column \d+", str(raised.value)).group(0)
    assert where.startswith("line 2,")
    assert f"foo/1 is not defined at {where}" in r.stderr


def test_a_trailing_jq_comment_does_not_break_the_fused_program(tmp_path):
    commented = dict(DEFINITION, components=[{**DEFINITION["components"][0],
                                              "replicas": ".spec.replicas // 1  # one by default"}])
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(commented))
    r = validate(tmp_path / "c.yaml")
    assert r.exit_code == 0, r.output
    assert "fused program" not in r.output
    from placer.definitions.catalog import load_catalog
    from placer.definitions.interpret import interpret
    catalog = load_catalog([tmp_path])
    w = interpret({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                   "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}},
                  catalog)
    assert w.pods == 3


def test_catalog_apply_takes_the_workload_definition_form(kube_fleet, tmp_path):
    from placer.kube import Kube
    (tmp_path / "wd.yaml").write_text(yaml.safe_dump(wrapped(DEFINITION)))
    r = runner.invoke(app, ["catalog", "apply", "--kubeconfig", str(kube_fleet.kubeconfig), "--context", "gamma",
                            str(tmp_path / "wd.yaml")])
    assert r.exit_code == 0, r.output
    obj = Kube(str(kube_fleet.kubeconfig)).client("gamma").get("workloaddefinitions.placer.dev", "widget")
    assert obj["spec"]["name"] == "widget" and obj["spec"]["components"][0]["name"] == "worker"
