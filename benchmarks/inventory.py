"""Live inventory benchmark: 20 clusters x 500 nodes, 4 bound pods per node, served by the
test API server (tests/kubeapi, seeded directly), inventoried through placer.kube.

    python3 benchmarks/inventory.py [--clusters 20] [--nodes 500] [--pods-per-node 4] [--repeat 3]
    python3 benchmarks/inventory.py --real --clusters 4 --nodes 2500   # real control planes (hack/kube-env)

With --real the clusters are real etcd + kube-apiserver (+ scheduler, controller-manager) started
by hack/kube-env (about 0.5 GiB each, so fewer clusters with more nodes each: the same fleet size),
nodes registered by `hack/kube-env nodes`, pods created bound through the API; the in-repo test
server with the same shape runs in the same invocation, as the ratio's baseline.

Prints wall seconds, requests made, and where the time goes, from one cProfile run split
by module path: placer's own code, the kubernetes client library (+ urllib3/http.client
it drives), the JSON decoder, and the test server (which runs in this process, so it
competes for the same cores and GIL, as a slow remote API server would not). The baseline
in the same run is the same inventory through the client library's typed API
(`CoreV1Api.list_node/list_pod_for_all_namespaces`, model deserialization), which the
raw-JSON path avoids. Target: the whole fleet under 10 s.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from placer.fleetview.inventory import ACTIVE_PODS, live_clusters, snapshot  # noqa: E402
from placer.kube import Kube  # noqa: E402
from tests.kubeapi import start_fleet, synthetic_cluster  # noqa: E402


class Entry:
    def __init__(self, name: str):
        self.name = self.context = name
        self.labels: dict[str, str] = {}


def start(n_clusters: int, nodes: int, pods_per_node: int, directory: str):
    names = [f"c{i:02d}" for i in range(n_clusters)]
    fleet = start_fleet(names, directory, crds=False)
    objs = synthetic_cluster(nodes=nodes, pods_per_node=pods_per_node)
    for c in fleet:
        c.seed(objs)
    return fleet, [Entry(n) for n in names]


class RealFleet:
    """hack/kube-env clusters shaped like synthetic_cluster: `nodes` 8-GPU nodes per cluster, each with
    `pods_per_node` bound 1-GPU pods (created through the API with spec.nodeName, no scheduler)."""

    def __init__(self, names, nodes: int, pods_per_node: int, directory: str):
        from concurrent.futures import ThreadPoolExecutor

        from tests.kubeapi.builders import bound_pod
        from tests.kubeenv import RealKube, require_binaries

        require_binaries()
        self.env = RealKube(Path(directory) / "real", names)
        self.kubeconfig = self.env.kubeconfig
        for name in names:
            self.env.nodes(name, count=nodes, prefix="node", gpus=8,
                           label=["nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"])
            client = self.env.client(name)
            self.env.namespace(name, "bench")
            pods = [bound_pod(f"node-{i}-p{j}", f"node-{i}", gpus=1, namespace="bench", labels={"app": "bench"})
                    for i in range(nodes) for j in range(pods_per_node)]
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda p: client.create("pods", p, "bench"), pods))

    def stop(self):
        self.env.down()


def placer_inventory(fleet, entries, stats=None):
    kube = Kube(str(fleet.kubeconfig))
    result = live_clusters(entries, kube=kube)
    if stats is not None:
        stats.append(kube.stats.requests)
    kube.close()
    return result


def typed_inventory(fleet, entries):
    """Baseline: the client library's models (what a naive implementation would do)."""
    from kubernetes import client, config

    from placer.kube import run_concurrently

    def one(e):
        api = config.new_client_from_config(str(fleet.kubeconfig), context=e.context)
        core = client.CoreV1Api(api)
        nodes, cont = [], None
        while True:
            page = core.list_node(limit=500, _continue=cont)
            nodes += page.items
            cont = page.metadata._continue
            if not cont:
                break
        pods, cont = [], None
        while True:
            page = core.list_pod_for_all_namespaces(limit=500, _continue=cont, field_selector=ACTIVE_PODS)
            pods += page.items
            cont = page.metadata._continue
            if not cont:
                break
        # back to plain dicts for the same snapshot code
        return snapshot(e.name, [api.sanitize_for_serialization(n) for n in nodes],
                        [api.sanitize_for_serialization(p) for p in pods])
    return run_concurrently({e.name: (lambda e=e: one(e)) for e in entries})


# json/encoder.py: only the server encodes large bodies; json/decoder.py: the client's parse
_BUCKETS = (("server", ("/tests/kubeapi/", "socketserver.py", "http/server.py", "/json/encoder.py")),
            ("placer", ("/placer/",)),
            ("json decode (client)", ("/json/",)),
            ("client library", ("/kubernetes/", "/urllib3/", "http/client.py", "socket.py", "ssl.py")))


# builtins that block rather than compute: waiting on a peer or a lock is not CPU time
_IDLE = ("wait", "acquire", "select", "poll", "recv", "accept", "sleep", "settimeout", "connect")


def _bucket(filename: str) -> str:
    for name, parts in _BUCKETS:
        if any(p in filename for p in parts):
            return name
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins"
    return "other"


def profile_split(fn) -> dict[str, float]:
    """CPU seconds per bucket over all threads: one profiler per thread (installed through
    threading.setprofile), timed with the thread's own CPU clock so that time spent
    waiting for the GIL or a socket is not charged to whatever was on the stack."""
    import threading

    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def per_thread(*_):
        p = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append(p)
        sys.setprofile(None)
        p.enable()

    threading.setprofile(per_thread)
    main = cProfile.Profile(time.thread_time)
    main.enable()
    try:
        fn()
    finally:
        main.disable()
        threading.setprofile(None)
        for p in profiles:
            p.disable()
    split: dict[str, float] = defaultdict(float)
    for p in [main, *profiles]:
        st = pstats.Stats(p)
        for (filename, _, func), (_, _, tottime, _, _) in st.stats.items():
            if filename == "~":        # C builtins: attribute to their caller's bucket below
                continue
            split[_bucket(filename)] += tottime
        # builtins (json C decoder, socket recv, lock waits) by the frame that called them
        for (filename, _, func), (_, _, tottime, _, callers) in st.stats.items():
            if filename != "~" or any(w in func for w in _IDLE):
                continue
            for (cfile, _, _), (_, _, ctt, _) in callers.items():
                split[_bucket(cfile)] += ctt
    return dict(split)


def measure(fleet, entries, args) -> dict:
    times, stats = [], []
    for _ in range(args.repeat):
        t = time.perf_counter()
        result = placer_inventory(fleet, entries, stats)
        times.append(time.perf_counter() - t)
    nodes = sum(len(c.nodes) for c in result.values())
    gpus_used = sum(n.used.get("nvidia.com/gpu", 0) for c in result.values() for n in c.nodes)
    assert all(c.error is None for c in result.values()), [c.error for c in result.values()]
    assert nodes == args.clusters * args.nodes, nodes
    assert gpus_used == args.clusters * args.nodes * args.pods_per_node, gpus_used
    out = {"times": times, "requests": stats[-1], "nodes": nodes, "pods": gpus_used, "result": result}
    if not args.no_baseline:
        t = time.perf_counter()
        typed = typed_inventory(fleet, entries)
        out["baseline"] = time.perf_counter() - t
        assert typed[entries[0].name].nodes == result[entries[0].name].nodes
    return out


def main_real(args) -> None:
    """The same fleet on real control planes and on the in-repo test server, one table."""
    names = [f"c{i:02d}" for i in range(args.clusters)]
    entries = [Entry(n) for n in names]
    rows = {}
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        fleet, _ = start(args.clusters, args.nodes, args.pods_per_node, d)
        setup = time.perf_counter() - t0
        try:
            rows["in-repo test server"] = (measure(fleet, entries, args), setup)
        finally:
            fleet.stop()
        t0 = time.perf_counter()
        real = RealFleet(names, args.nodes, args.pods_per_node, d)
        setup = time.perf_counter() - t0
        try:
            rows["real kube-apiserver v1.37.2"] = (measure(real, entries, args), setup)
        finally:
            real.stop()
    print(f"fleet: {args.clusters} clusters x {args.nodes} nodes x {args.pods_per_node} pods/node")
    print("\n| server | set-up (s) | placer inventory, best of %d (s) | runs (s) | requests/run | "
          "baseline: client models (s) | baseline / placer |" % args.repeat)
    print("|---|---|---|---|---|---|---|")
    base = None
    for name, (m, setup) in rows.items():
        best = min(m["times"])
        base = base or best
        b = m.get("baseline")
        print(f"| {name} | {setup:.0f} | {best:.2f} | {', '.join(f'{t:.2f}' for t in m['times'])} | "
              f"{m['requests']} | {f'{b:.2f}' if b else '-'} | {f'{b / best:.1f}x' if b else '-'} |")
    real_best = min(rows["real kube-apiserver v1.37.2"][0]["times"])
    print(f"\nreal / in-repo server: {real_best / base:.2f}x; target < 10 s: {'met' if real_best < 10 else 'NOT met'}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods-per-node", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--real", action="store_true", help="also real control planes (hack/kube-env)")
    args = ap.parse_args()
    if args.real:
        return main_real(args)

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        fleet, entries = start(args.clusters, args.nodes, args.pods_per_node, d)
        print(f"fleet: {args.clusters} clusters x {args.nodes} nodes x {args.pods_per_node} pods/node "
              f"(seeded in {time.perf_counter() - t0:.1f}s)")
        try:
            times = []
            for _ in range(args.repeat):
                for c in fleet:
                    c.requests.clear()
                t = time.perf_counter()
                result = placer_inventory(fleet, entries)
                times.append(time.perf_counter() - t)
            requests = sum(len(c.requests) for c in fleet)
            nodes = sum(len(c.nodes) for c in result.values())
            gpus_used = sum(n.used.get("nvidia.com/gpu", 0) for c in result.values() for n in c.nodes)
            assert all(c.error is None for c in result.values()), [c.error for c in result.values()]
            assert nodes == args.clusters * args.nodes
            assert gpus_used == args.clusters * args.nodes * args.pods_per_node

            split = profile_split(lambda: placer_inventory(fleet, entries))
            total = sum(split.values()) or 1.0

            baseline = None
            if not args.no_baseline:
                t = time.perf_counter()
                typed = typed_inventory(fleet, entries)
                baseline = time.perf_counter() - t
                assert typed["c00"].nodes == result["c00"].nodes

            best = min(times)
            print("\n| measure | value |\n|---|---|")
            print(f"| placer inventory, wall (best of {args.repeat}) | {best:.2f} s |")
            print(f"| runs | {', '.join(f'{t:.2f}' for t in times)} s |")
            print(f"| requests (per run) | {requests} ({requests // args.clusters} per cluster) |")
            print(f"| nodes / bound pods | {nodes} / {gpus_used} |")
            if baseline is not None:
                print(f"| baseline: client library models, wall | {baseline:.2f} s ({baseline / best:.1f}x placer) |")
            print(f"| target | < 10 s: {'met' if best < 10 else 'NOT met'} |")
            print("\nCPU time by module (cProfile self time, all threads, one run):\n")
            print("| part | seconds | share |\n|---|---|---|")
            for name in ("placer", "json decode (client)", "client library", "server", "builtins", "other"):
                if name in split:
                    print(f"| {name} | {split[name]:.2f} | {100 * split[name] / total:.0f}% |")
        finally:
            fleet.stop()


if __name__ == "__main__":
    main()
