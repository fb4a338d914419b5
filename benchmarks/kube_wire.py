"""Client-side CPU of one request: the kubernetes library's `param_serialize` + `call_api` (what
placer.kube.sending used until issue 24's burst work) against `placer.kube.wire.Wire`, with a
token in the kubeconfig (its refresh hook) and a connection pool that answers at once, so
that only the client's own work is timed (thread CPU, time.thread_time).

    PYTHONPATH=. python benchmarks/kube_wire.py [--requests 2000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client as k8s_client  # noqa: E402

from placer.kube import request as R  # noqa: E402
from placer.kube.config import KubeConfig  # noqa: E402
from placer.kube.resources import Resource  # noqa: E402
from placer.kube.wire import Wire, decode_body  # noqa: E402
from tests.daemon.daemon_helpers import jobset  # noqa: E402

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", True)


class _Answer:
    status, reason, headers = 200, "OK", {}

    def __init__(self, data: bytes):
        self.data = data

    def read(self, *a, **k) -> bytes:
        return self.data

    def release_conn(self) -> None:
        pass


class _Pool:
    """Answers every request at once with `data`."""

    def __init__(self, data: bytes):
        self.data = data

    def request(self, *a, **k) -> _Answer:
        return _Answer(self.data)

    def urlopen(self, *a, **k) -> _Answer:
        return _Answer(self.data)


def api_with_token(answer: bytes) -> k8s_client.ApiClient:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(KUBECONFIG)
    cfg, _ = KubeConfig(f.name).configure("x")
    Path(f.name).unlink()
    api = k8s_client.ApiClient(cfg)
    api.rest_client.pool_manager = _Pool(answer)
    return api


def main() -> None:
    import json
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    body = jobset("j", pods=1, gpus=1, ns="ns")
    answer = json.dumps({**body, "metadata": {**body["metadata"], "uid": "u" * 36, "resourceVersion": "1"}}).encode()
    api = api_with_token(answer)
    # the daemon's mix per workload on a target: a GET, then the apply; on the hub a merge patch
    reqs = [R.get_request(JOBSETS, "j", "ns"), R.apply_request(JOBSETS, body, "ns"),
            R.patch_request(JOBSETS, "j", {"metadata": {"annotations": {"a": "b"}}}, "ns")]
    wire = Wire(api)

    def library(r: R.Request) -> None:
        p = api.param_serialize(r.method, r.path, query_params=list(r.query), header_params=r.headers, body=r.body,
                                auth_settings=["BearerToken"])
        json.loads(api.call_api(*p, _request_timeout=(5.0, 30.0)).read())

    def placer_wire(r: R.Request) -> None:
        decode_body(wire.send(r, (5.0, 30.0)).read())
    print("| round | path | client CPU per request (us), GET/apply/patch mix, answer decoded |")
    print("|---|---|---|")
    for i in range(args.rounds):
        for name, send in (("library", library), ("placer.kube.wire", placer_wire)):
            t = time.thread_time()
            for _ in range(args.requests):
                for r in reqs:
                    send(r)
            print(f"| {i + 1} | {name} | {(time.thread_time() - t) / (args.requests * len(reqs)) * 1e6:.0f} |")


if __name__ == "__main__":
    main()
