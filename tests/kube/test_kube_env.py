"""hack/kube-env's contract: real control planes answer with the pinned release, `up` is idempotent
and brings back what crashed, `down` stops every recorded process and nothing else, bad input is one
line and a non-zero exit."""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess

import pytest
import yaml

from tests.kubeenv import KUBE_ENV, REPO, require_binaries, wait_for

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
    one_line_error(run("crds", "--operators", "jobset,frob"), 2, "unknown operator 'frob'")
    one_line_error(run("up", "--dir", str(tmp_path), "Not_A_Name"), 2, "'Not_A_Name'")
    one_line_error(run("nodes", "--dir", str(tmp_path), "--context", "x", "--count", "1", "--prefix", "n",
                       "--gpus", "1"), 2, "no cluster 'x'")
    one_line_error(run("nodes", "--dir", str(tmp_path), "--context", "x", "--count", "1", "--prefix", "n",
                       "--gpus", "1", "--taint", "k=v:Sometimes"), 2, "--taint")
    # a prefix is checked as the node names it becomes: gpu- gives gpu-0.. (then: no such cluster)
    nodes = ("nodes", "--dir", str(tmp_path), "--context", "x", "--count", "2", "--gpus", "1")
    one_line_error(run(*nodes, "--prefix", "gpu-"), 2, "no cluster 'x'")
    one_line_error(run(*nodes, "--prefix", "GPU_"), 2, "node name 'GPU_-0', which is not a DNS subdomain")
    one_line_error(run(*nodes, "--prefix", "gpu-", "--kwok", "--not-ready"), 2, "--kwok and --not-ready")
    one_line_error(run("up", "--dir", str(tmp_path), "--operators", "jobset,frob", "east"), 2,
                   "unknown operator 'frob'")
    one_line_error(run("up", "--dir", str(tmp_path), "--operators", "kwok", "east"), 2, "unknown operator 'kwok'")


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
    assert len(procs) == 5 and all(running(p) for p in procs)               # with the cluster's KWOK
    assert any(p["cmd"].endswith("/kwok") for p in procs)
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


def test_an_operator_module_not_served_is_one_line(tmp_path):
    require_binaries()
    if shutil.which("go") is None:
        pytest.skip("no Go on this machine: operators are built from the Go module proxy")
    pins = re.sub(r"^(jobset\s+\S+\s+)\S+", r"\1v0.0.0-placer-unserved",
                  (REPO / "hack" / "operators-release").read_text(), flags=re.M)
    (tmp_path / "pins").write_text(pins)
    proc = subprocess.run([str(KUBE_ENV), "up", "--dir", str(tmp_path / "d"), "--operators", "jobset", "east"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KUBE_ENV_OPERATORS_RELEASE": str(tmp_path / "pins")})
    one_line_error(proc, 1, "module sigs.k8s.io/jobset@v0.0.0-placer-unserved is not served")


def phase_of(real, ns: str, name: str):
    pod = real.client("east").get("pods", name, ns)
    return pod if (pod.get("status") or {}).get("phase") else None


def test_kwok_runs_bound_pods_and_completes_annotated_ones(real):
    """Nodes registered --kwok: the cluster's KWOK makes a bound pod Running with a pod IP, and one
    annotated with a delay Succeeded (or Failed) after it; the node names are what the prefix gives."""
    real.nodes("east", count=2, prefix="gpu-", gpus=8, kwok=True)
    assert sorted(n["metadata"]["name"] for n in real.client("east").list("nodes").items) == ["gpu-0", "gpu-1"]
    ns = real.namespace("east", real.unique("kwok"))
    c = real.client("east")
    for name, notes in (("runs", {}), ("done", {"pod-complete.stage.kwok.x-k8s.io/delay": "3s"}),
                        ("fails", {"pod-fail.stage.kwok.x-k8s.io/delay": "3s"})):
        c.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "annotations": notes},
                 "spec": {"restartPolicy": "Never", "containers": [{
                     "name": "c", "image": "registry.k8s.io/pause:3.10",
                     "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}})
    want = {"runs": "Running", "done": "Succeeded", "fails": "Failed"}
    pods = {name: wait_for(lambda n=name, p=phase: (lambda pod: pod if pod and pod["status"]["phase"] == p else None)(
        phase_of(real, ns, n)), 60, f"{name} {phase}") for name, phase in want.items()}
    running = pods["runs"]
    assert running["spec"]["nodeName"] in ("gpu-0", "gpu-1") and running["status"]["podIP"].startswith("10.244.")
    assert all(cs["state"].get("running") for cs in running["status"]["containerStatuses"])
    assert pods["done"]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert pods["fails"]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1


def test_an_operator_port_in_use_is_one_line(real_operators):
    """The session's operators: one is killed and its webhook port taken by someone else; up says so
    in one line, then brings it back once the port is free."""
    d = real_operators.dir
    state = json.loads((d / "state.json").read_text())["clusters"]["east"]
    record, port = state["procs"]["operator-jobset"], state["ports"]["operator-jobset-webhook"]
    os.killpg(record["pid"], signal.SIGKILL)
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        _wait_port_free(port)
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        one_line_error(run("up", "--dir", str(d), "east"), 1,
                       f"port {port} on 127.0.0.1 is in use: cannot start operator-jobset of east")
    back = run("up", "--dir", str(d), "east")
    assert back.returncode == 0, back.stderr
    assert running(json.loads((d / "state.json").read_text())["clusters"]["east"]["procs"]["operator-jobset"])


KUBEFLOW_CRDS = {"tfjobs", "pytorchjobs", "xgboostjobs", "paddlejobs", "jaxjobs"}


def test_all_operators_install_their_modules_crds_and_webhooks(real_operators):
    """`up --operators all`: the CRDs of JobSet, LWS, Ray, the Kubeflow training operator and the
    MPI operator from their pinned modules (MPIJob at v2beta1 only: the MPI operator's, not the
    training operator's v1), every operator running, and the webhooks registered against
    127.0.0.1 with kube-env's CA."""
    crds = {c["metadata"]["name"]: c for c in real_operators.client("east").list("customresourcedefinitions").items}
    want = {"jobsets.jobset.x-k8s.io", "leaderworkersets.leaderworkerset.x-k8s.io", "rayclusters.ray.io",
            "rayjobs.ray.io", "mpijobs.kubeflow.org", *(f"{k}.kubeflow.org" for k in KUBEFLOW_CRDS)}
    assert want <= set(crds), want - set(crds)
    assert [v["name"] for v in crds["mpijobs.kubeflow.org"]["spec"]["versions"]] == ["v2beta1"]
    assert crds["pytorchjobs.kubeflow.org"]["metadata"]["annotations"]["kube-env.placer.dev/source"] == \
        "github.com/kubeflow/training-operator@v1.9.3"
    procs = json.loads((real_operators.dir / "state.json").read_text())["clusters"]["east"]["procs"]
    assert {f"operator-{o}" for o in ("jobset", "lws", "kuberay", "training-operator", "mpi-operator")} <= set(procs)
    assert all(running(p) for p in procs.values())
    ca = (real_operators.dir / "pki" / "ca.crt").read_bytes()
    config = real_operators.client("east").get(
        "validatingwebhookconfigurations", "kube-env-training-operator-validator.training-operator.kubeflow.org")
    hooks = {h["name"]: h["clientConfig"] for h in config["webhooks"]}
    assert set(hooks) == {f"validator.{k[:-1]}.training-operator.kubeflow.org" for k in KUBEFLOW_CRDS}
    assert all(c["url"].startswith("https://127.0.0.1:") and c["caBundle"] == base64.b64encode(ca).decode()
               for c in hooks.values())


def test_kubeflow_operators_run_beside_others_and_down_leaves_nothing(tmp_path, real_operators):
    """A third training and MPI operator on this machine while the session's east and west run
    theirs (the MPI operator's health port, 8080 upstream, comes from kube-env): all ready; `down`
    stops them and every process of the directory."""
    d = tmp_path / "env"
    up = run("up", "--dir", str(d), "--operators", "training-operator,mpi-operator", "solo", timeout=600)
    procs = recorded(d)
    try:
        assert up.returncode == 0, up.stderr
        assert {p["cmd"].rsplit("/", 1)[-1] for p in procs} >= {"training-operator", "mpi-operator"}
        assert all(running(p) for p in procs)
    finally:
        down = run("down", "--dir", str(d))
    assert down.returncode == 0, down.stderr
    assert not any(running(p) for p in procs)
    left = [p for p in os.listdir("/proc") if p.isdigit() and str(d) in _cmdline(int(p))]
    assert left == [], left


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
    except OSError:
        return ""
