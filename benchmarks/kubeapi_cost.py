"""The in-repo test API server's own cost per request (tests/kubeapi), not placer's: CPU seconds of
the server's process per request of each kind the daemon benchmark's burst makes, with 0 and with
N open watches on the written type (every write fans out to them).

    python3 benchmarks/kubeapi_cost.py [--requests 500] [--watchers 0 3] [--rounds 3]

The server runs in a child process (as in benchmarks/daemon.py); this process sends the requests
one at a time on one keep-alive connection (http.client) and reads the watches in threads. Each
figure is the best of --rounds of the server process's CPU (time.process_time) over the requests,
divided by their number; the watch events received are counted to check the fan-out happened.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/bench/jobsets"


def serve(directory: str, conn) -> None:
    from tests.kubeapi import start_fleet

    fleet = start_fleet(["hub"], directory)
    conn.send(fleet["hub"].port)
    while (cmd := conn.recv()) != "stop":
        conn.send(time.process_time() if cmd == "cpu" else None)
    fleet.stop()
    conn.send(None)


def jobset(name: str) -> dict:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": "bench", "labels": {"app": "bench"},
                         "annotations": {"placer.dev/priority": "10"}},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "busybox", "resources": {
                    "limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "4", "memory": "16Gi"}}}]}}}}}]}}


def event(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.1", "namespace": "bench"},
            "involvedObject": {"kind": "JobSet", "name": name, "namespace": "bench"},
            "reason": "Placed", "message": f"placed {name} on c01", "type": "Normal"}


class Client:
    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def __call__(self, method: str, path: str, body=None, ctype: str = "application/json") -> int:
        data = None if body is None else json.dumps(body)
        self.conn.request(method, path, body=data, headers={"Content-Type": ctype, "Accept": "application/json",
                                                            "User-Agent": "bench/1"})
        resp = self.conn.getresponse()
        resp.read()
        return resp.status


def requests(kind: str, tag: str, n: int):
    """(method, path, body, content type, expected code) for n requests of one kind."""
    names = [f"{tag}-{i:04d}" for i in range(n)]
    if kind == "create":
        return [("POST", JOBSETS, jobset(m), "application/json", 201) for m in names]
    if kind == "get":
        return [("GET", f"{JOBSETS}/{tag}-{i % 50:04d}", None, "application/json", 200) for i in range(n)]
    if kind == "merge patch":
        return [("PATCH", f"{JOBSETS}/{m}", {"metadata": {"annotations": {"placer.dev/cluster": "c01"}}},
                 "application/merge-patch+json", 200) for m in names]
    if kind == "apply":
        return [("PATCH", f"{JOBSETS}/{m}?fieldManager=placer&force=true", jobset(m), "application/apply-patch+yaml",
                 201) for m in names]
    if kind == "event":
        return [("POST", "/api/v1/namespaces/bench/events", event(m), "application/json", 201) for m in names]
    raise ValueError(kind)


class Watches:
    """count watches of path from its current resourceVersion, read in threads."""

    def __init__(self, port: int, count: int, path: str):
        self.events, self.conns = 0, []
        self.lock = threading.Lock()
        lister = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        lister.request("GET", path)
        rv = json.loads(lister.getresponse().read())["metadata"]["resourceVersion"]
        lister.close()
        for _ in range(count):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("GET", f"{path}?watch=true&timeoutSeconds=120&resourceVersion={rv}")
            resp = conn.getresponse()
            self.conns.append(conn)
            threading.Thread(target=self._read, args=(resp,), daemon=True).start()

    def _read(self, resp) -> None:
        try:
            while resp.readline():
                with self.lock:
                    self.events += 1
        except (OSError, ValueError, AttributeError):    # the connection cut by close()
            pass

    def close(self) -> None:
        for c in self.conns:
            try:
                c.sock.shutdown(2)
            except OSError:
                pass
            c.close()


def measure(port: int, ask, kind: str, watchers: int, n: int, tag: str) -> tuple[float, int]:
    client = Client(port)
    if kind in ("get", "merge patch"):             # their objects first
        for method, path, body, ctype, _ in requests("create", tag, n if kind == "merge patch" else 50):
            client(method, path, body, ctype)
    path = "/api/v1/namespaces/bench/events" if kind == "event" else JOBSETS
    watches = Watches(port, watchers, path)
    time.sleep(0.2)
    todo = requests(kind, tag, n)
    cpu = ask("cpu")
    for method, path, body, ctype, code in todo:
        got = client(method, path, body, ctype)
        if got != code:
            raise SystemExit(f"{kind}: {method} {path} answered {got}, expected {code}")
    writes = kind != "get"
    deadline = time.monotonic() + 10
    while writes and watchers and watches.events < n * watchers and time.monotonic() < deadline:
        time.sleep(0.01)
    used = ask("cpu") - cpu
    events = watches.events
    watches.close()
    client.conn.close()
    return used / n, events


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--watchers", type=int, nargs="+", default=[0, 3])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=serve, args=(tempfile.mkdtemp(), child), daemon=True)
    proc.start()
    port = parent.recv()

    def ask(cmd):
        parent.send(cmd)
        return parent.recv()
    print(f"# tests/kubeapi server CPU per request ({args.requests} requests, best of {args.rounds} rounds)")
    print("| request | open watches | ms CPU per request | watch events received |")
    print("|---|---|---|---|")
    for kind in ("get", "create", "merge patch", "apply", "event"):
        for w in args.watchers:
            runs = [measure(port, ask, kind, w, args.requests, f"{kind[:3]}{w}r{r}") for r in range(args.rounds)]
            best = min(runs)
            print(f"| {kind} | {w} | {best[0] * 1000:.3f} | {best[1]} |")
    ask("stop")
    proc.join(10)


if __name__ == "__main__":
    main()
