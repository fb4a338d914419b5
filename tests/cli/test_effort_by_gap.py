"""`placer plan --effort-by-gap` reaches the solver; without it the solver is asked for nothing
of the kind (issue 24, item 2: an option, since it may change the plan)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import placer.ops.plan as OP
from placer.cli import app

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("flag, wanted", [(["--effort-by-gap"], True), ([], False)])
def test_the_flag_reaches_the_solver(monkeypatch, tmp_path, flag, wanted):
    clusters = tmp_path / "c.yaml"
    clusters.write_text("clusters:\n- name: c0\n  nodes:\n  - namePrefix: n-\n    count: 2\n"
                        "    allocatable: {nvidia.com/gpu: 8, cpu: '96', memory: 1024Gi, pods: 110}\n")
    seen: list[bool] = []
    real = OP.solve
    monkeypatch.setattr(OP, "solve", lambda *a, **k: seen.append(k.get("effort_by_gap")) or real(*a, **k))
    r = CliRunner().invoke(app, ["plan", "--dry-run", "-f", str(ROOT / "examples" / "job.yaml"),
                                 "--clusters", str(clusters), "-o", "json", *flag])
    assert r.exit_code == 0, r.output
    assert seen == [wanted]
