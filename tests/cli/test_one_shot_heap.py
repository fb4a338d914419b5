"""`placer plan` in its own process tunes the collector for a run that exits (issue 24: the
imports frozen, the youngest generation collected less often); called in a host's process
(CliRunner, a library) it leaves the host's collector as it was."""

import gc
import os
import subprocess
import sys

from typer.testing import CliRunner

from placer.cli import app
from tests.cli.test_plan_imports import CLUSTERS  # one small fleet for both probes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_plan_in_its_own_process_freezes_its_modules_and_collects_less_often(tmp_path):
    (tmp_path / "clusters.yaml").write_text(CLUSTERS)
    # printed at exit: placer's process ends by os._exit once its atexit handlers ran (placer.cli.ending)
    probe = ("import atexit, gc, sys, runpy\n"
             f"sys.argv = ['placer', 'plan', '--dry-run', '-f', 'examples/', '--clusters', "
             f"{str(tmp_path / 'clusters.yaml')!r}]\n"
             "atexit.register(lambda: print('HEAP', gc.get_threshold()[0], gc.get_freeze_count()))\n"
             "runpy.run_module('placer', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=ROOT)
    line = next(x for x in done.stdout.splitlines() if x.startswith("HEAP"))
    gen0, frozen = map(int, line.split()[1:])
    assert gen0 == 10_000 and frozen > 10_000, done.stderr


def test_plan_called_in_a_host_process_leaves_its_collector_alone(tmp_path):
    (tmp_path / "clusters.yaml").write_text(CLUSTERS)
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    result = CliRunner().invoke(app, ["plan", "--dry-run", "-f", os.path.join(ROOT, "examples"),
                                      "--clusters", str(tmp_path / "clusters.yaml")])
    assert result.exit_code in (0, 3), result.output
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen
