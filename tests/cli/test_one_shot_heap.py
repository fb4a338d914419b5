"""`placer plan` in its own process runs without the cyclic collector, its modules frozen (issue
24: the collections cost 0.06-0.09 s CPU of a 1,000-workload plan, 0.7 s of a 4,000-workload one,
and freed nothing); called in a host's process (CliRunner, a library) it leaves the host's
collector as it was. What makes that safe is judged here: with the collector kept on, a plan's
run leaves it nothing to free, whatever the input's size (so the peak memory is the same
without it: benchmarks/RESULTS.md measures it at 1,000, 4,000 and 10,000 workloads)."""

import gc
import os
import subprocess
import sys

from typer.testing import CliRunner

from placer.cli import app
from tests.cli.test_plan_imports import CLUSTERS  # one small fleet for both probes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from generate import FleetSpec, MixSpec, write_clusters_file, write_manifests  # noqa: E402


def _probe(tmp_path, files: str, before: str, report: str, *extra: str) -> list[str]:
    """`placer plan` of `files` run through its console script, `before` run first in its
    process; `report` (an expression) printed at exit, as a line starting HEAP."""
    clusters = tmp_path / "clusters.yaml"
    if not clusters.exists():
        clusters.write_text(CLUSTERS)
    probe = (f"import atexit, gc, runpy, sys\n{before}\n"
             f"atexit.register(lambda: print('HEAP', {report}))\n"
             f"sys.argv = ['placer', 'plan', '--dry-run', '-f', {files!r}, '--clusters', {str(clusters)!r}, "
             f"*{list(extra)!r}]\nrunpy.run_module('placer', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode in (0, 3), done.stderr
    return next(x for x in done.stdout.splitlines() if x.startswith("HEAP")).split()[1:]


def test_plan_in_its_own_process_runs_without_the_collector_its_modules_frozen(tmp_path):
    enabled, frozen = _probe(tmp_path, "examples/", "", "gc.isenabled(), gc.get_freeze_count()")
    assert enabled == "False" and int(frozen) > 10_000


# the collector kept on in the probe (placer's gc.disable made a no-op), counting what it frees
# once placer froze its modules (the run, not the imports)
COUNTING = ("gc.disable = lambda: None\nfreed = [0]\n"
            "gc.callbacks.append(lambda phase, info: freed.__setitem__(0, freed[0] + info['collected'])\n"
            "                    if phase == 'stop' and gc.get_freeze_count() else None)")
# the probe's control: cyclic garbage made once the modules are frozen, which the count must see
CYCLES = ("import placer.cli.common as common\nfreeze = common.one_shot_heap\n"
          "def cycles():\n    freeze()\n    for _ in range(5000):\n        x = []\n        x.append(x)\n"
          "common.one_shot_heap = cycles")


def test_a_plans_run_leaves_the_collector_nothing_to_free(tmp_path):
    """400 workloads of every kind on 8 x 400 nodes: fewer than 1,000 objects for the collector
    (none today), where a cycle or two per workload would be thousands; the control shows that
    the count sees cycles made during the run."""
    write_manifests(MixSpec(workloads=400, size_weights=(1, 1, 2, 3, 5, 10, 30, 70), priorities=(0, 100),
                            priority_weights=(4, 1)), tmp_path / "w", seed=2)
    write_clusters_file(FleetSpec(clusters=8, nodes=400, fragmentation=0.5), tmp_path / "clusters.yaml", seed=1)
    effort = ("--time-limit", "1000", "--effort", "0.2")
    assert int(_probe(tmp_path, str(tmp_path / "w"), COUNTING, "freed[0]", *effort)[0]) < 1_000
    assert int(_probe(tmp_path, "examples/", f"{COUNTING}\n{CYCLES}", "freed[0]")[0]) >= 5_000


def test_plan_called_in_a_host_process_leaves_its_collector_alone(tmp_path):
    (tmp_path / "clusters.yaml").write_text(CLUSTERS)
    before, frozen, enabled = gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()
    result = CliRunner().invoke(app, ["plan", "--dry-run", "-f", os.path.join(ROOT, "examples"),
                                      "--clusters", str(tmp_path / "clusters.yaml")])
    assert result.exit_code in (0, 3), result.output
    assert (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()) == (before, frozen, enabled)


def test_only_the_plan_goes_without_the_collector():
    """The daemon runs for days and keeps its collector (placer.daemon.heap tunes it); so does
    every command whose run was not measured without it."""
    from placer.cli import COMMANDS
    from placer.cli.common import one_shot_process
    try:
        off = []
        for name in (*COMMANDS, None):
            gc.enable()
            one_shot_process(name)
            off += [] if gc.isenabled() else [name]
    finally:
        gc.enable()
    assert off == ["plan"]
