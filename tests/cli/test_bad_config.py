"""No silent fallback (issue 24 item 6, issue 25 item 10): a kubeconfig that is asked for
but missing or unreadable, and a clusters file naming a context the kubeconfig lacks, are
bad input on every command: exit 2 and one stderr line naming the file or the context
(and the clusters file), no traceback, nothing read from a cluster. Before, they fell back
to the bundled simulated fleet (also named east and west) or were reported per cluster
("config error" in the table, exit 0, 3 or 1).

Every command x every bad-config shape, through the real CLI entry point. The kubeconfig's
server is a port where nothing listens: a command that got as far as talking to a cluster
would report an outage (exit 0, 1 or 3), never exit 2.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from placer.cli import app

runner = CliRunner()

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts:
- {name: east, context: {cluster: c, user: u}}
- {name: west, context: {cluster: c, user: u}}
current-context: east
"""
JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: one, namespace: ml}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}
"""
LIVE = "clusters:\n- {name: east, context: east}\n- {name: west, context: west}\n"
HUB = "hub: {context: east}\nclusters:\n- {name: east, context: east}\n- {name: west, context: west}\n"
WRONG_CONTEXT = "hub: {context: east}\nclusters:\n- {name: east, context: east}\n- {name: west, context: wset}\n"
WRONG_HUB = "hub: {context: hubb}\nclusters:\n- {name: east, context: east}\n"

# (case, KUBECONFIG env or None, --kubeconfig or None, clusters file text or None, what the line names);
# a --context case is in CONTEXT_CASE (the daemon has no --context)
CASES = [
    ("KUBECONFIG=/nonexistent", "{d}/nonexistent", None, None, ["{d}/nonexistent", "$KUBECONFIG"]),
    ("--kubeconfig /nonexistent", None, "{d}/nonexistent", None, ["{d}/nonexistent", "--kubeconfig"]),
    ("a typo in one KUBECONFIG entry", "{d}/kubeconfig:{d}/kubeconfg", None, None, ["{d}/kubeconfg"]),
    ("KUBECONFIG names a directory", "{d}", None, None, ["{d}: cannot read kubeconfig: is a directory"]),
    ("KUBECONFIG is not YAML", "{d}/broken", None, None, ["{d}/broken"]),
    ("clusters file, KUBECONFIG=/nonexistent", "{d}/nonexistent", None, LIVE, ["{d}/c.yaml", "{d}/nonexistent"]),
    ("clusters file, --kubeconfig typo", None, "{d}/kubeconfg", HUB, ["{d}/c.yaml", "{d}/kubeconfg"]),
    ("clusters file, no kubeconfig at all", None, None, LIVE, ["{d}/c.yaml", "clusters[0].context east"]),
    ("clusters file, KUBECONFIG unreadable", "{d}/broken", None, LIVE, ["{d}/c.yaml", "{d}/broken"]),
    ("clusters file names a context the kubeconfig lacks", "{d}/kubeconfig", None, WRONG_CONTEXT,
     ["{d}/c.yaml", "clusters[1].context", "'wset'", "{d}/kubeconfig"]),
    ("clusters file's hub names a context the kubeconfig lacks", "{d}/kubeconfig", None, WRONG_HUB,
     ["{d}/c.yaml", "hub.context", "'hubb'"]),
]

CONTEXT_CASE = ("--context the kubeconfig lacks", "{d}/kubeconfig", None, None, ["nope"])

# every command that reads a kubeconfig; `clusters_file`: whether it takes --clusters
COMMANDS = [
    ("plan", ["plan", "--dry-run", "-f", "{d}/job.yaml"], True),
    ("plan (hub staging)", ["plan"], True),
    ("clusters", ["clusters"], True),
    ("submit", ["submit", "-f", "{d}/job.yaml"], True),
    ("submit --dry-run", ["submit", "--dry-run", "-f", "{d}/job.yaml"], True),
    ("submit --dry-run=server", ["submit", "--dry-run=server", "-o", "yaml", "-f", "{d}/job.yaml"], True),
    ("get", ["get", "-A"], True),
    ("delete", ["delete", "-f", "{d}/job.yaml"], True),
    ("daemon", ["daemon"], True),
    ("describe", ["describe", "job/one", "-n", "ml"], False),
    ("catalog apply", ["catalog", "apply"], False),
]


def _table():
    for cname, command, takes_clusters in COMMANDS:
        for case, env, flag, clusters, names in CASES:
            if clusters is not None and not takes_clusters:
                continue
            if clusters is None and cname in ("daemon", "plan (hub staging)"):
                continue          # without a clusters file these need one (exit 2 whatever the kubeconfig)
            yield pytest.param(command, env, flag, clusters, names, id=f"{cname}: {case}")
        if cname not in ("daemon", "plan (hub staging)"):
            case, env, flag, clusters, names = CONTEXT_CASE
            yield pytest.param(command + ["--context", "nope"], env, flag, clusters, names, id=f"{cname}: {case}")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))                    # no ~/.kube/config
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    (tmp_path / "broken").write_text("apiVersion: v1\nclusters: [unclosed\n")
    (tmp_path / "job.yaml").write_text(JOB)
    return tmp_path


@pytest.mark.parametrize("command, env, flag, clusters, names", list(_table()))
def test_bad_kubeconfig_or_context_is_bad_input_on_every_command(home, monkeypatch, command, env, flag,
                                                                 clusters, names):
    d = str(home)
    args = [a.replace("{d}", d) for a in command]
    if env is not None:
        monkeypatch.setenv("KUBECONFIG", env.replace("{d}", d))
    if clusters is not None:
        (home / "c.yaml").write_text(clusters)
        args += ["--clusters", f"{d}/c.yaml"]
    if flag is not None:
        args += ["--kubeconfig", flag.replace("{d}", d)]
    r = runner.invoke(app, args)
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for name in names:
        assert name.replace("{d}", d) in lines[0], (name, lines[0])
    assert "Traceback" not in r.stderr and "bundled" not in r.stderr
    assert r.stdout == ""


def test_the_bundled_fleet_only_without_any_kubeconfig_or_clusters_file(home):
    r = runner.invoke(app, ["plan", "--dry-run", "-f", "job.yaml", "-o", "name"])
    assert r.exit_code == 0, r.output
    assert r.stderr.startswith("note: no clusters file and no kubeconfig: using the bundled example fleet")
    # an all-simulated clusters file reads no kubeconfig: a broken one does not matter to it
    (home / "c.yaml").write_text("clusters:\n- name: sim\n  nodes: [{name: n0, allocatable: {nvidia.com/gpu: 8}}]\n")
    r = runner.invoke(app, ["plan", "-f", "job.yaml", "--clusters", "c.yaml", "--kubeconfig", "nonexistent"])
    assert r.exit_code == 0 and "sim" in r.stdout, r.output


def test_an_unreachable_cluster_stays_an_outage_not_bad_input(home, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(home / "kubeconfig"))     # readable; its server does not answer
    r = runner.invoke(app, ["plan", "-f", "job.yaml"])
    assert r.exit_code == 3 and "east: unreachable" in r.output, r.output
    r = runner.invoke(app, ["submit", "-f", "job.yaml"])
    assert r.exit_code == 1 and "unreachable" in r.stderr, r.output


def test_through_the_installed_entry_point(home):
    """The shape the issue found first, as a user types it (a fresh process, real argv)."""
    (home / "c.yaml").write_text(LIVE)
    root = str(Path(__file__).resolve().parents[2])              # this checkout's placer, not an installed one
    env = {**os.environ, "KUBECONFIG": "/nonexistent", "PYTHONPATH": root}
    p = subprocess.run([sys.executable, "-m", "placer", "clusters", "--clusters", "c.yaml"], env=env,
                       capture_output=True, text=True, cwd=home)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.splitlines() == [
        "error: c.yaml: clusters[0].context east: /nonexistent: cannot read kubeconfig: "
        "no such file or directory (from $KUBECONFIG)"]
