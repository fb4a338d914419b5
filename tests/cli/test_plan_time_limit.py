"""`--time-limit` of `placer plan` counts from the solve's start, once the inputs are read
(issue 24, item 3): reading the files, the clusters file and the catalog takes what the
input's size costs, and how long that took (the machine's load) never shortens the search.

The clock is a fake one that jumps while the manifests are read, so no test here waits on
the wall clock: the judge is what the solver and the options search were handed."""

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import placer.ops.plan as plan_op
from placer.cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = str(ROOT / "examples")
runner = CliRunner()
READING = 50.0          # seconds the fake clock jumps while the manifests are read

BIG = """apiVersion: batch/v1
kind: Job
metadata: {name: huge, namespace: ml}
spec:
  parallelism: 40
  completions: 40
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {limits: {nvidia.com/gpu: 8}}
"""


@pytest.fixture(autouse=True)
def _isolated(unconfigured):
    return unconfigured             # see tests/conftest.py


@pytest.fixture
def slow_reading(monkeypatch):
    """The clock jumps READING seconds while the manifests are read; what the solver and the
    options search are handed (their time limit, their deadline, the clock when called) is
    recorded."""
    offset = [0.0]
    real = time.monotonic
    monkeypatch.setattr(time, "monotonic", lambda: real() + offset[0])
    seen: dict = {}
    load = plan_op.load_groups

    def slow_load(*args, **kwargs):
        groups = load(*args, **kwargs)
        offset[0] += READING
        return groups

    solve = plan_op.solve

    def spy_solve(*args, **kwargs):
        seen["time_limit"], seen["solve_called"] = kwargs["time_limit"], time.monotonic()
        return solve(*args, **kwargs)

    # loaded by the plan only with --explain, from its own module
    import placer.ops.options as options_op
    options = options_op.plan_with_options

    def spy_options(*args, **kwargs):
        seen["deadline"] = kwargs["deadline"]
        return options(*args, **kwargs)

    monkeypatch.setattr(plan_op, "load_groups", slow_load)
    monkeypatch.setattr(plan_op, "solve", spy_solve)
    monkeypatch.setattr(options_op, "plan_with_options", spy_options)
    return seen


def test_reading_does_not_eat_the_solves_time_limit(slow_reading):
    r = runner.invoke(app, ["plan", "--dry-run", "--time-limit", "7", "-f", EXAMPLES, "-o", "json",
                            "--timings"])
    assert r.exit_code == 0, r.output
    assert slow_reading["time_limit"] == 7.0            # the whole limit, not 7 - 50 s of reading
    summary = json.loads(r.stdout)["summary"]
    assert summary["timeLimitHit"] is False
    assert summary["timings"]["load"] >= READING        # the reading did take the fake 50 s


def test_the_options_search_ends_at_its_share_of_the_limit_from_the_solves_start(slow_reading, tmp_path):
    (tmp_path / "big.yaml").write_text(BIG)
    r = runner.invoke(app, ["plan", "--dry-run", "--time-limit", "4", "-f", str(tmp_path / "big.yaml"),
                            "--explain", "-o", "json"])
    assert r.exit_code == 3, r.output
    # the deadline is 97% of the limit after the solve began, not 97% after reading began
    assert slow_reading["deadline"] - slow_reading["solve_called"] == pytest.approx(4 * plan_op.OPTIONS_END, abs=1.0)
    assert json.loads(r.stdout)["unplaced"][0]["options"]          # the search had its time


def test_the_limit_given_is_the_limit_the_solver_gets(slow_reading):
    r = runner.invoke(app, ["plan", "--dry-run", "--time-limit", "0.25", "-f", EXAMPLES, "-o", "json"])
    assert r.exit_code in (0, 3), r.output
    assert slow_reading["time_limit"] == 0.25
