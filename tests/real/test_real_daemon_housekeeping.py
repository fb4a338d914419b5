"""The daemon's housekeeping (issue 25, item 9) as a user meets it: `placer daemon` in a
subprocess against the session's real hub, east and west. The staging namespace does not
exist at start: said once, with what to do, while the daemon keeps trying (counted on its
own /metrics), then it leads once the namespace is created. The LeaderWorkerSet CRD is
installed on the hub only after the start: a LeaderWorkerSet then staged is placed without
a restart. Ctrl-C (SIGINT) gives the real Lease back and prints the shutdown line."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from placer import daemon as D
from placer.model.errors import NotFound
from tests.daemon.daemon_helpers import gpu
from tests.kubeenv import wait_for

pytestmark = pytest.mark.kube

LWS_CRD = "leaderworkersets.leaderworkerset.x-k8s.io"
LWS = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")


def lws_crd_file(tmp_path: Path) -> Path:
    cache = Path(os.environ.get("PLACER_KUBE_CACHE") or Path.home() / ".cache" / "placer-kube") / "operators"
    found = sorted(cache.glob("lws-*/crds.json"))
    if not found:
        pytest.skip("the LeaderWorkerSet CRD is not built here (hack/kube-env build --operators lws)")
    path = tmp_path / "lws-crd.yaml"
    path.write_text(yaml.safe_dump_all(yaml.safe_load(found[-1].read_text())))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hub_errors(port: int) -> float:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return 0.0
    m = re.search(r'^placer_api_errors_total\{cluster="hub"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def test_missing_namespace_late_crd_and_ctrl_c_on_real_control_planes(real, tmp_path):
    hub = real.client("hub")
    crd_file = lws_crd_file(tmp_path)
    hub.delete("customresourcedefinitions", LWS_CRD, missing_ok=True)      # a kind the hub does not serve yet
    wait_for(lambda: not _served(hub), 60, "the LWS CRD gone from the hub")
    for c in ("east", "west"):
        real.nodes(c, count=1, prefix=f"{c[0]}h", gpus=8)
        real.install_crds(c, [crd_file])
    ns = real.unique("stage-hk")
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(yaml.safe_dump({"hub": {"context": "hub", "stagingNamespace": ns},
                                        "clusters": [{"name": c, "context": c} for c in ("east", "west")]}))
    port = free_port()
    log_path = tmp_path / "daemon.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "placer", "daemon", "--clusters", str(clusters), "--kubeconfig",
                                 str(real.kubeconfig), "--metrics-addr", f"127.0.0.1:{port}", "--batch-window", "0.05"],
                                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        def lines(part: str) -> list[str]:
            return [line for line in log_path.read_text().splitlines() if part in line]

        wait_for(lambda: lines("does not exist") or proc.poll() is not None, 60, "the missing namespace said")
        wait_for(lambda: hub_errors(port) >= 4, 60, "the daemon trying the Lease again and again")
        [said] = lines("does not exist")
        assert f"the staging namespace {ns} does not exist on the hub" in said
        assert f"kubectl create namespace {ns}" in said

        real.namespace("hub", ns)
        wait_for(lambda: _holder(hub, ns), 60, "the Lease taken once the namespace exists")
        assert len(lines("does not exist")) == 1

        real.install_crds("hub", [crd_file])
        staged = {"apiVersion": LWS[0], "kind": LWS[1], "metadata": {"name": "vllm", "namespace": ns},
                  "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
                      "containers": [{"name": "vllm", "image": "vllm:1", "resources": gpu(1)}]}}}}}
        # the test's own client too: discovery can lag the CRD's Established condition on a loaded machine
        res = wait_for(lambda: _resource(hub), 60, "the hub serving LeaderWorkerSet")
        hub.create(res, staged, ns)
        where = wait_for(lambda: (hub.get(res, "vllm", ns)["metadata"].get("annotations") or {})
                         .get(D.PLACED_CLUSTER), 90, "the late kind's workload placed")
        target = real.client(where)
        assert target.get(target.resource_for(*LWS), "vllm", ns)["metadata"]["labels"]["placer.dev/managed"] == "true"
        assert lines("the hub serves LeaderWorkerSet")

        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, log_path.read_text()[-2000:]
        assert _holder(hub, ns) == ""
        [stopped] = lines("stopped:")
        assert f"lease {ns}/placer-daemon released" in stopped and lines("stopping (SIGINT)")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        real.install_crds("hub", [crd_file])      # as the session had it


def _resource(hub):
    try:
        return hub.resource_for(*LWS)
    except NotFound:
        return None


def _served(hub) -> bool:
    try:
        hub.get("customresourcedefinitions", LWS_CRD)
        return True
    except NotFound:
        return False


def _holder(hub, ns: str) -> str | None:
    try:
        return (hub.get("leases", "placer-daemon", ns).get("spec") or {}).get("holderIdentity") or ""
    except NotFound:
        return None
