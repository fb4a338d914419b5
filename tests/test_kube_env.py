"""hack/kube-env's contract: real control planes answer with the pinned release, `up` is idempotent
and brings back what crashed, `down` stops every recorded process and nothing else, bad input is one
line and a non-zero exit."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess

import pytest
import yaml

from tests.kubeenv import KUBE_ENV, REPO, require_binaries

pytestmark = pytest.mark.kube

RELEASE = dict(line.split() for line in (REPO / "hack" / "kube-release").read_text().splitlines()
               if line.strip() and not line.startswith("#"))["kubernetes"]


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(KUBE_ENV), *args], capture_output=True, text=True, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess, code: int, text: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kube-env: ") and text in lines[0], proc.stderr


def test_bad_input_is_one_line_and_non_zero(tmp_path):
    one_line_error(run(), 2, "missing verb")
    one_line_error(run("frobnicate"), 2, "invalid choice: 'frobnicate'")
    one_line_error(run("up", "east"), 2, "--dir")
    one_line_error(run("down"), 2, "--dir")
    one_line_error(run("up", "--dir", str(tmp_path), "Not_A_Name"), 2, "'Not_A_Name'")
    one_line_error(run("nodes", "--dir", str(tmp_path), "--context", "x", "--count", "1", "--prefix", "n",
                       "--gpus", "1"), 2, "no cluster 'x'")
    one_line_error(run("nodes", "--dir", str(tmp_path), "--context", "x", "--count", "1", "--prefix", "n",
                       "--gpus", "1", "--taint", "k=v:Sometimes"), 2, "--taint")


def test_no_go_and_no_binaries_is_one_line(tmp_path):
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PLACER_KUBE_CACHE": str(tmp_path / "empty-cache")}
    proc = subprocess.run(["/usr/bin/env", "python3", str(KUBE_ENV), "up", "--dir", str(tmp_path / "d"), "east"],
                          capture_output=True, text=True, env=env, timeout=60)
    if proc.returncode == 127 or "No such file" in proc.stderr:
        pytest.skip("no python3 in /usr/bin:/bin on this machine")
    one_line_error(proc, 1, "no Go on PATH")


def test_real_version_through_kubectl_of_the_same_release(real_kube):
    for name in real_kube.names:
        version = json.loads(real_kube.kubectl("--context", name, "get", "--raw", "/version").stdout)
        assert version["gitVersion"] == RELEASE and version["major"] == "1"
    client = json.loads(real_kube.kubectl("version", "--client", "-o", "json").stdout)["clientVersion"]
    assert client["gitVersion"] == RELEASE


def recorded(directory) -> list[dict]:
    state = json.loads((directory / "state.json").read_text())
    return [p for c in state["clusters"].values() for p in c.get("procs", {}).values()]


def running(record: dict) -> bool:
    try:
        with open(f"/proc/{record['pid']}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and fields[19] == record["start"]


def test_up_is_idempotent_restarts_what_crashed_and_down_leaves_nothing(tmp_path):
    require_binaries()
    d = tmp_path / "env"
    first = run("up", "--dir", str(d), "solo")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().splitlines()[-1] == str(d / "kubeconfig")
    config = yaml.safe_load((d / "kubeconfig").read_text())
    assert [c["name"] for c in config["contexts"]] == ["solo"]
    procs = recorded(d)
    assert len(procs) == 4 and all(running(p) for p in procs)
    after: list[dict] = []
    try:
        again = run("up", "--dir", str(d), "solo")            # nothing to do: same processes
        assert again.returncode == 0 and again.stdout.strip().splitlines()[-1] == str(d / "kubeconfig")
        assert recorded(d) == procs
        # the apiserver crashes: up brings back that one, on the same port, and keeps the others
        apiserver = next(p for p in procs if p["cmd"].endswith("kube-apiserver"))
        os.killpg(apiserver["pid"], signal.SIGKILL)
        assert run("up", "--dir", str(d), "solo").returncode == 0
        after = recorded(d)
        assert all(running(p) for p in after)
        assert [p for p in after if p["cmd"].endswith("kube-apiserver")] != [apiserver]
        assert [p for p in after if not p["cmd"].endswith("kube-apiserver")] == \
            [p for p in procs if not p["cmd"].endswith("kube-apiserver")]
        # a port taken by someone else while it was down: one line, non-zero
        apiserver = next(p for p in after if p["cmd"].endswith("kube-apiserver"))
        os.killpg(apiserver["pid"], signal.SIGKILL)
        port = json.loads((d / "state.json").read_text())["clusters"]["solo"]["ports"]["api"]
        with socket.socket() as squatter:
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            _wait_port_free(port)
            squatter.bind(("127.0.0.1", port))
            squatter.listen()
            one_line_error(run("up", "--dir", str(d), "solo"), 1, f"port {port} on 127.0.0.1 is in use")
    finally:
        down = run("down", "--dir", str(d))
    assert down.returncode == 0, down.stderr
    assert not any(running(p) for p in procs + recorded(d) + after)
    assert d.exists() and (d / "kubeconfig").exists()          # down removes nothing


def _wait_port_free(port: int) -> None:
    import time
    for _ in range(100):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return
            except OSError:
                time.sleep(0.1)
