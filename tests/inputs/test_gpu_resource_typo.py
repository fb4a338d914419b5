"""A clusters-file resource name that is a near miss of a GPU resource name (`nvidia.com/gpus`)
counts no GPUs: it is refused with one line naming the file and the field (issue 25 item
11); other extended resources (MIG slices, shared GPUs, RDMA) stay legitimate."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from placer.cli import app

runner = CliRunner()


@pytest.fixture
def bundled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("name, ok", [
    ("nvidia.com/gpus", False), ("nvidia.com/GPU", False), ("nvidia.con/gpu", False), ("amd.com/gpus", False),
    ("nvidia.com/gpu", True), ("nvidia.com/mig-1g.10gb", True), ("nvidia.com/gpu.shared", True),
    ("example.com/fpga", True), ("rdma/hca_shared_devices_a", True)])
def test_a_gpu_resource_name_typo_in_the_clusters_file_is_refused(bundled, name, ok):
    (bundled / "c.yaml").write_text(f"""clusters:
- name: sim
  nodes:
  - {{name: n0, allocatable: {{"{name}": 8, nvidia.com/gpu: 8, cpu: "8"}}}}
""" if name != "nvidia.com/gpu" else "clusters:\n- name: sim\n  nodes:\n  - {name: n0, allocatable: {nvidia.com/gpu: 8}}\n")
    r = runner.invoke(app, ["clusters", "--clusters", "c.yaml"])
    if ok:
        assert r.exit_code == 0, r.output
        return
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines() == [
        f"error: c.yaml: clusters[0].nodes[0].allocatable.{name}: unknown resource {name!r}: did you mean "
        f"{name.split('/')[0].replace('con', 'com')}/gpu? (a near miss of a GPU resource name would count no GPUs)"]
