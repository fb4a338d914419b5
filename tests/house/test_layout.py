"""The house's layout, as far as it shows at run time: starting the CLI loads none of the heavy
libraries that only some commands need (the import contracts themselves are checked by
lint-imports in .ci/run, the types by mypy)."""

import subprocess
import sys

HEAVY = ("kubernetes", "ortools", "networkx")


def test_cli_start_loads_no_kubernetes_client_solver_or_graph_library():
    probe = ("import sys; from placer.cli import app; "
             f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def test_the_probe_sees_a_heavy_import():
    """The check above can fail: a module that does import the client shows up (placer.kube
    itself loads it with the first client, issue 24)."""
    probe = ("import sys, placer.kube.client; "
             f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["kubernetes"]
