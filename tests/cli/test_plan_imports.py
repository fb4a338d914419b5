"""`placer plan` of files loads nothing the command did not ask for (issue 24, item 2): not the
options search nor its CP-SAT layer (which imports pandas) without --explain, no graph library for
grouping, no Kubernetes client library (nor urllib3) on simulated clusters, no Karta schema when
the catalog holds no Karta, nor the definitions' schema for the built-in catalog; nor CP-SAT's native
layer when no CP-SAT model is built. A probe in a fresh interpreter; with --explain the probe sees
the options search, with a Karta in --catalog both schemas (tests/house: and placer.kube.client the client), on examples/ CP-SAT (its stages
are searched there), so it can fail."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEAVY = ("placer.solve.options", "pandas", "networkx", "kubernetes", "urllib3", "placer.definitions.karta.schema",
         "placer.definitions.schema")
CP_SAT = ("ortools.sat",)
KARTAS = os.path.join(ROOT, "tests", "fixtures", "karta")


TOO_BIG = """apiVersion: batch/v1
kind: Job
metadata: {name: too-big, namespace: ml}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {limits: {nvidia.com/gpu: 64}}
"""


CLUSTERS = """clusters:
- name: east
  nodes:
  - namePrefix: gpu-
    count: 4
    allocatable: {nvidia.com/gpu: 8, cpu: '96', memory: 1024Gi, pods: 110}
"""


def _loaded_after_plan(tmp_path, files: str, *extra: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    (tmp_path / "clusters.yaml").write_text(CLUSTERS)
    # printed at exit: placer's process ends by os._exit once its atexit handlers ran (placer.cli.ending)
    probe = ("import atexit, sys, runpy\n"
             f"sys.argv = ['placer', 'plan', '--dry-run', '-f', {files!r}, '--clusters', {str(tmp_path / 'clusters.yaml')!r}, "
             f"*{list(extra)!r}]\n"
             f"atexit.register(lambda: print('LOADED', ' '.join(sorted(h for h in {heavy!r} if any(m == h or "
             "m.startswith(h + '.') for m in sys.modules)))))\n"
             "runpy.run_module('placer', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert "placed" in done.stdout + done.stderr, done.stderr       # the plan was made
    line = next(x for x in done.stdout.splitlines() if x.startswith("LOADED"))
    return line.split()[1:]


@pytest.mark.parametrize("files", ["examples/", "too-big"])
def test_a_plan_without_explain_loads_no_pandas_graph_library_nor_client(files, tmp_path):
    if files == "too-big":
        (tmp_path / "job.yaml").write_text(TOO_BIG)
        files = str(tmp_path / "job.yaml")
    assert _loaded_after_plan(tmp_path, files) == []


def test_the_probe_sees_the_options_search_when_asked(tmp_path):
    (tmp_path / "job.yaml").write_text(TOO_BIG)
    # (not pandas: CP-SAT's model layer is imported only once a removal set is searched, and
    # nothing taken out of this cluster makes room for 64 GPUs on one node)
    assert "placer.solve.options" in _loaded_after_plan(tmp_path, str(tmp_path / "job.yaml"), "--explain")


def test_the_probe_sees_the_karta_schema_with_a_karta_in_the_catalog(tmp_path):
    # (and the definitions' schema: a user's catalog directory is validated; the built-ins are not, issue 24)
    assert _loaded_after_plan(tmp_path, "examples/", "--catalog", KARTAS) == ["placer.definitions.karta.schema",
                                                                              "placer.definitions.schema"]


def test_a_plan_that_builds_no_cp_sat_model_does_not_load_cp_sat(tmp_path):
    """The job fits no node, so no CP-SAT model is built for it (issue 24: importing CP-SAT's
    native layer cost every plan about 0.05 s of CPU, 1,000 workloads on 10,000 nodes included)."""
    (tmp_path / "job.yaml").write_text(TOO_BIG)
    assert _loaded_after_plan(tmp_path, str(tmp_path / "job.yaml"), heavy=CP_SAT) == []


def test_the_probe_sees_cp_sat_where_a_model_is_searched(tmp_path):
    assert _loaded_after_plan(tmp_path, "examples/", heavy=CP_SAT) == ["ortools.sat"]


OTHER_COMMANDS = ("placer.cli.catalog", "placer.cli.clusters", "placer.cli.daemon", "placer.cli.delete",
                  "placer.cli.describe", "placer.cli.get", "placer.cli.submit", "placer.cli.version",
                  "rich.table", "rich.tree")


def test_a_plan_loads_no_other_command_module(tmp_path):
    """`placer plan` imports its own command module only, not the other commands' nor the rich
    tables and trees they draw with (issue 24: 0.01 s CPU of every plan). The probe sees the
    plan's own module, so it can fail; `from placer.cli import app` (hosts, tests) loads all."""
    (tmp_path / "job.yaml").write_text(TOO_BIG)
    loaded = _loaded_after_plan(tmp_path, str(tmp_path / "job.yaml"), heavy=("placer.cli.plan", *OTHER_COMMANDS))
    assert loaded == ["placer.cli.plan"]


def test_the_app_of_a_host_has_every_command():
    probe = "from placer.cli import app; import typer.main; print(' '.join(typer.main.get_command(app).commands))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert sorted(done.stdout.split()) == ["catalog", "clusters", "daemon", "delete", "describe", "get", "plan",
                                           "submit", "version"], done.stderr


def test_a_plan_printed_as_data_loads_no_rich(tmp_path):
    """`-o json` prints data and plain lines: rich's console is made on first use only (issue 24:
    about 0.02 s CPU); the table loads it, so the probe can fail."""
    (tmp_path / "job.yaml").write_text(TOO_BIG)
    job = str(tmp_path / "job.yaml")
    assert _loaded_after_plan(tmp_path, job, "-o", "json", heavy=("rich",)) == []
    assert _loaded_after_plan(tmp_path, job, heavy=("rich",)) == ["rich"]
