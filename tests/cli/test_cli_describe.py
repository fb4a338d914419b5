"""`placer describe -f` and `placer catalog`: outputs, file handling, and every bad-input path."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app

runner = CliRunner()

DEFINITION = textwrap.dedent("""
    name: widget
    matches: [{apiVersion: example.com/v1, kind: Widget}]
    components:
    - name: main
      pod: {template: .spec.template}
      replicas: .spec.replicas // 1
    gangs: '[{name: $root.metadata.name, members: [$instances[] | {component, instance}]}]'
""")


def widget(name="w1", replicas=2, gpus=4, ns="ml", annotations=None):
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": ns, **({"annotations": annotations} if annotations else {})},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"cpu": "500m"}}}]}}}}


@pytest.fixture()
def catdir(tmp_path: Path) -> Path:
    d = tmp_path / "defs"
    d.mkdir()
    (d / "widget.yaml").write_text(DEFINITION)
    return d


def invoke(*args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def test_json_contract(tmp_path, catdir):
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump_all([widget(), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}]))
    r = invoke("describe", "-f", f, "--catalog", catdir, "-o", "json")
    assert r.exit_code == 0, r.output
    (w,) = json.loads(r.stdout)
    assert {k: w[k] for k in ("apiVersion", "kind", "namespace", "name", "definition", "phase", "pods", "gpus")} == {
        "apiVersion": "example.com/v1", "kind": "Widget", "namespace": "ml", "name": "w1",
        "definition": "widget", "phase": "Pending", "pods": 2, "gpus": 8}
    assert w["resources"] == {"cpu": 1, "nvidia.com/gpu": 8}
    assert w["components"] == [{"component": "main", "instance": "0", "replicas": 2, "podsPerReplica": 1,
                                "pods": 2, "podResources": {"cpu": 0.5, "nvidia.com/gpu": 4}, "gpusPerPod": 4,
                                "gpus": 8, "selector": ""}]
    assert w["gangs"] == [{"name": "w1", "members": [{"component": "main", "instance": "0", "pods": 2}],
                           "pods": 2, "minMember": 2, "gpus": 8}]


def test_directories_recurse_in_sorted_order_and_stdin_works(tmp_path, catdir):
    (tmp_path / "in" / "sub").mkdir(parents=True)
    (tmp_path / "in" / "b.yaml").write_text(yaml.safe_dump(widget("b")))
    (tmp_path / "in" / "sub" / "a.yml").write_text(yaml.safe_dump(widget("c")))
    (tmp_path / "in" / "a.json").write_text(json.dumps(widget("a")))
    (tmp_path / "in" / "notes.txt").write_text("ignored")
    r = invoke("describe", "-f", tmp_path / "in", "--catalog", catdir, "-o", "json")
    assert r.exit_code == 0, r.output
    assert [w["name"] for w in json.loads(r.stdout)] == ["a", "b", "c"]
    r = invoke("describe", "-f", "-", "--catalog", catdir, "-o", "yaml", input=yaml.safe_dump(widget("s")))
    assert r.exit_code == 0 and yaml.safe_load(r.stdout)[0]["name"] == "s"


def test_table_shows_tree_gangs_and_phase(tmp_path, catdir):
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(widget()))
    r = invoke("describe", "-f", f, "--catalog", catdir)
    assert r.exit_code == 0
    assert "Widget ml/w1" in r.stdout and "2 x 1 = 2 pods" in r.stdout and "nvidia.com/gpu=4" in r.stdout
    assert "minMember=2" in r.stdout and "phase=Pending" in r.stdout


def test_gpu_resource_names_are_configurable(tmp_path, catdir, monkeypatch):
    w = widget()
    w["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"amd.com/gpu": 2}
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(w))
    r = invoke("describe", "-f", f, "--catalog", catdir, "-o", "json", "--gpu-resource", "amd.com/gpu")
    assert json.loads(r.stdout)[0]["gpus"] == 4
    monkeypatch.setenv("PLACER_GPU_RESOURCES", "amd.com/gpu,nvidia.com/mig-1g.10gb")
    assert json.loads(invoke("describe", "-f", f, "--catalog", catdir, "-o", "json").stdout)[0]["gpus"] == 4


def _with_spec(**fields):
    w = widget()
    w["spec"]["template"]["spec"].update(fields)
    return w


BAD_INPUTS = [
    ("malformed.yaml", "apiVersion: v1\nkind: Widget\nmetadata: {name: [unclosed\n",
     r"malformed.yaml: malformed YAML \(line \d+\)"),
    ("nokind.yaml", "apiVersion: example.com/v1\nmetadata: {name: x}\n", r"nokind.yaml: document at line 1 has no kind"),
    ("scalar.yaml", "just a string\n", r"scalar.yaml: document at line 1 is not a mapping"),
    ("unknown.yaml", "apiVersion: acme.io/v1\nkind: Gizmo\nmetadata: {name: g}\n",
     r"unknown.yaml:1: no workload definition for acme.io/v1/Gizmo .*add a definition"),
    ("quantity.yaml", yaml.safe_dump(widget()).replace("500m", "5 hundred"),
     r"quantity.yaml:1: Widget ml/w1: main/0: invalid quantity '5 hundred'"),
    ("badexpr.yaml", yaml.safe_dump(widget()).replace("replicas: 2", "replicas: two"),
     r"badexpr.yaml:1: Widget ml/w1: definition widget: components\[0\].replicas: expression "
     r"'.spec.replicas // 1' failed: expected a non-negative integer up to 2147483647 \(an int32\), got 'two'"),
    ("second.yaml", "---\n" + yaml.safe_dump(widget()) + "---\napiVersion: v1\n",
     r"second.yaml: document at line \d+ has no kind"),
    # pod fields of the wrong type: named, never a traceback nor silently misread
    ("selector.yaml", yaml.safe_dump(_with_spec(nodeSelector="gpu")),
     r"selector.yaml:1: Widget ml/w1: main/0: pod spec.nodeSelector: expected a map, got a string 'gpu'"),
    ("tolerations.yaml", yaml.safe_dump(_with_spec(tolerations="abc")),
     r"pod spec.tolerations: expected a list, got a string 'abc'"),
    ("containers.yaml", yaml.safe_dump(_with_spec(containers={"name": "c"})),
     r"main/0: pod spec.containers: expected a list, got a map"),
    ("limits.yaml", yaml.safe_dump(_with_spec(containers=[{"name": "c", "resources": {"limits": 3}}])),
     r"main/0: pod spec.containers\[0\].resources.limits: expected a map, got a number '3'"),
    ("scheduler.yaml", yaml.safe_dump(_with_spec(schedulerName=5)),
     r"main/0: pod spec.schedulerName: expected a string, got a number '5'"),
    ("labels.yaml", yaml.safe_dump({**widget(), "metadata": {"name": "w1", "namespace": "ml", "labels": ["a"]}}),
     r"labels.yaml:1: Widget ml/w1: metadata.labels: expected a map, got a list \"\['a'\]\""),
]


@pytest.mark.parametrize("name,content,pattern", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_one_line_exit_2(tmp_path, catdir, name, content, pattern):
    f = tmp_path / name
    f.write_text(content)
    r = invoke("describe", "-f", f, "--catalog", catdir, "-o", "json")
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    import re
    assert re.search(pattern, lines[0]), lines[0]
    assert r.stdout == ""


def test_missing_file_and_bad_options(tmp_path, catdir):
    r = invoke("describe", "-f", tmp_path / "nope.yaml", "--catalog", catdir)
    assert r.exit_code == 2 and "nope.yaml: no such file or directory" in r.stderr
    r = invoke("describe", "-f", tmp_path, "--catalog", catdir, "-o", "xml")
    assert r.exit_code == 2 and "-o xml" in r.stderr
    r = invoke("describe", "-f", tmp_path, "--catalog", tmp_path / "missing")
    assert r.exit_code == 2 and "catalog directory not found" in r.stderr


def test_bad_definition_in_user_catalog(tmp_path):
    d = tmp_path / "defs"
    d.mkdir()
    (d / "broken.yaml").write_text(DEFINITION.replace("replicas: .spec.replicas // 1", "replicas: .spec.replicas //"))
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(widget()))
    r = invoke("describe", "-f", f, "--catalog", d)
    assert r.exit_code == 2
    assert "broken.yaml: components[0].replicas: jq does not compile" in r.stderr


def test_real_process_exit_code_and_traceback_only_with_debug(tmp_path, catdir):
    f = tmp_path / "unknown.yaml"
    f.write_text("apiVersion: acme.io/v1\nkind: Gizmo\nmetadata: {name: g}\n")
    cmd = [sys.executable, "-m", "placer", "describe", "-f", str(f), "--catalog", str(catdir)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr and p.stderr.count("\n") == 1
    p = subprocess.run([cmd[0], "-m", "placer", "--debug", *cmd[3:]], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "Traceback" in p.stderr


def test_catalog_validate_and_list(tmp_path, catdir):
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEFINITION.replace("pod:", "pdo:"))
    r = invoke("catalog", "validate", catdir / "widget.yaml", bad)
    assert r.exit_code == 2
    assert "widget.yaml: ok (widget)" in r.stdout
    assert "bad.yaml: components[0].pdo: Extra inputs are not permitted" in r.stderr
    r = invoke("catalog", "list", "--catalog", catdir, "-o", "json")
    assert r.exit_code == 0
    assert {"apiVersion": "example.com/v1", "kind": "Widget", "definition": "widget",
            "source": str(catdir / "widget.yaml"), "format": "placer"} in json.loads(r.stdout)
