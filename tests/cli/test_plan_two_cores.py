"""`placer plan` on two cores (issue 24): the later files and one contender baseline in a forked
child. The output is the serial run's (PLACER_SERIAL=1) byte for byte but the timings, on
success and on a bad file in either part (the first error in reading order, as serial); the
parent's waits show in --timings; small inputs (examples/) stay serial. Fresh interpreters,
as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from placer.model.forked import SERIAL_ENV

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from generate import FleetSpec, MixSpec, write_clusters_file, write_manifests  # noqa: E402


@pytest.fixture(scope="module")
def fleet400(tmp_path_factory) -> tuple[Path, Path]:
    """400 workloads of every kind (about 350 KiB of files) at two priorities on 8 x 400 nodes."""
    d = tmp_path_factory.mktemp("two-cores")
    write_manifests(MixSpec(workloads=400, size_weights=(1, 1, 2, 3, 5, 10, 30, 70), priorities=(0, 100),
                            priority_weights=(4, 1)), d / "w", seed=2)
    return d / "w", write_clusters_file(FleetSpec(clusters=8, nodes=400, fragmentation=0.5), d / "c.yaml", seed=1)


# no wall clock cuts the plan on a loaded machine (a cut plan may differ between runs); a small
# deterministic effort keeps the search short
NO_CLOCK = ("--time-limit", "1000", "--effort", "0.2")


def _plan(files: Path, clusters: Path, *, serial: bool, extra: tuple[str, ...] = ("-o", "json", "--timings")
          ) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env[SERIAL_ENV] = "1" if serial else "0"          # "0": fork even on a busy machine
    return subprocess.run([sys.executable, "-m", "placer", "plan", "--dry-run", "-f", str(files),
                           "--clusters", str(clusters), *NO_CLOCK, *extra], capture_output=True, text=True, env=env,
                          timeout=300)


def _timings(done: subprocess.CompletedProcess) -> str:
    return next(x for x in done.stderr.splitlines() if x.startswith("timings: "))


def _without_clock(stdout: str) -> dict:
    out = json.loads(stdout)
    out["summary"].pop("timings", None)
    out["summary"].pop("solveSeconds", None)
    return out


def test_the_plan_on_two_cores_is_the_serial_plan(fleet400):
    files, clusters = fleet400
    serial, two = _plan(files, clusters, serial=True), _plan(files, clusters, serial=False)
    assert serial.returncode in (0, 3) and two.returncode == serial.returncode, two.stderr
    assert _without_clock(two.stdout) == _without_clock(serial.stdout)
    assert _without_clock(serial.stdout)["summary"]["placed"] > 0
    # the parent said where it waited for the child; the serial run has no child
    assert "wait-load=" in _timings(two) and "wait-greedy=" in _timings(two)
    assert "wait-" not in _timings(serial)
    assert [x for x in two.stderr.splitlines() if not x.startswith("timings: ")] == \
        [x for x in serial.stderr.splitlines() if not x.startswith("timings: ")]


def test_the_table_is_the_serial_table(fleet400):
    files, clusters = fleet400
    serial, two = (_plan(files, clusters, serial=s, extra=("-o", "wide")) for s in (True, False))
    strip = lambda out: [x for x in out.splitlines() if not x.startswith("placed ")]   # its seconds
    assert two.returncode == serial.returncode and strip(two.stdout) == strip(serial.stdout)


BAD_YAML = "apiVersion: v1\nkind: [unclosed\n"
UNKNOWN = "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: g, namespace: ml}\n"


@pytest.mark.parametrize("first, last, named", [
    (None, BAD_YAML, "last"),               # in the child's part
    (BAD_YAML, None, "first"),              # in the parent's
    (BAD_YAML, BAD_YAML, "first"),          # both: the first in reading order
    (None, UNKNOWN, "last"),
    (UNKNOWN, UNKNOWN, "first"),
    (UNKNOWN, BAD_YAML, "last"),            # serial parses every file before it interprets one
])
def test_a_bad_file_in_either_part_is_the_serial_error(fleet400, tmp_path, first, last, named):
    files, clusters = fleet400
    copy = tmp_path / "w"
    shutil.copytree(files, copy)
    names = sorted(copy.iterdir())
    for path, text in ((names[0], first), (names[-1], last)):
        if text is not None:
            path.write_text(text)
    serial, two = (_plan(copy, clusters, serial=s) for s in (True, False))
    assert (two.returncode, two.stdout, two.stderr) == (serial.returncode, serial.stdout, serial.stderr)
    assert two.returncode == 2 and len(two.stderr.strip().splitlines()) == 1
    assert (names[0] if named == "first" else names[-1]).name in two.stderr


def test_a_busy_machine_stays_serial_by_default(fleet400, monkeypatch):
    from placer.model import forked as F
    monkeypatch.delenv(SERIAL_ENV, raising=False)
    monkeypatch.setattr(F, "_threads", lambda: 1)
    monkeypatch.setattr(F.threading, "active_count", lambda: 1)   # the test runner's own threads aside
    monkeypatch.setattr(F.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(F, "_running", lambda: 2)          # this process and one other (a busy loop)
    assert F.why_serial() == "the CPUs are busy"
    monkeypatch.setattr(F, "_running", lambda: 1)          # this process alone: a CPU for the child
    assert F.why_serial() is None
    monkeypatch.setattr(F, "_running", lambda: 9)
    monkeypatch.setenv(SERIAL_ENV, "0")
    assert F.why_serial() is None


def test_examples_stay_serial(fleet400):
    done = _plan(ROOT / "examples", fleet400[1], serial=False)
    assert done.returncode in (0, 3), done.stderr
    assert "wait-" not in _timings(done)


def test_one_object_in_both_parts_is_bad_input(fleet400, tmp_path):
    """The same workload in the parent's part and the child's: one line naming both places,
    exit 2, as serially (before, the plan failed verification: exit 1)."""
    files, clusters = fleet400
    copy = tmp_path / "w"
    shutil.copytree(files, copy)
    names = sorted(copy.iterdir())
    names[-1].write_text(names[0].read_text())
    serial, two = (_plan(copy, clusters, serial=s) for s in (True, False))
    assert (two.returncode, two.stdout, two.stderr) == (serial.returncode, serial.stdout, serial.stderr)
    assert two.returncode == 2 and len(two.stderr.strip().splitlines()) == 1
    assert "is given twice (first at" in two.stderr
    assert names[0].name in two.stderr and names[-1].name in two.stderr
