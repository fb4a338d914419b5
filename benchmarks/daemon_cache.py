"""The daemon's per-cluster caches at fleet scale, without any API server: watch events for
N clusters x M nodes and P pods fed straight into `placer.daemon.caches.ClusterCache`, then
what a planning round pays to take its snapshot, and the memory the caches hold.

    python3 benchmarks/daemon_cache.py [--clusters 20] [--nodes-per-cluster 500] [--pods 50000]

Baseline in the same run: `placer.fleetview.inventory.snapshot` built from the same node and pod
objects (what every round paid before the caches: a rebuild from raw objects, network
not counted)."""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placer.daemon.caches import ClusterCache  # noqa: E402
from placer.fleetview.inventory import snapshot  # noqa: E402
from placer.model.errors import Unreachable  # noqa: E402
from tests.kubeapi.builders import bound_pod, gpu_node  # noqa: E402


class NoServer:
    """Stands in for a KubeClient: the caches are fed by hand here, nothing is asked."""

    cluster = "bench"

    def resource_for(self, api_version: str, kind: str):
        raise Unreachable("no server in this benchmark")


def feed(cache: ClusterCache, nodes: list[dict], pods: list[dict]) -> None:
    for i, n in enumerate(nodes):
        n["metadata"]["resourceVersion"] = str(i + 1)
        cache.nodes._apply(_Event("ADDED", n))
    for i, p in enumerate(pods):
        p["metadata"]["resourceVersion"] = str(i + 1)
        cache.pods._apply(_Event("ADDED", p))


class _Event:
    def __init__(self, type_: str, obj: dict):
        self.type, self.object, self.items = type_, obj, ()
        self.resource_version = obj["metadata"]["resourceVersion"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--nodes-per-cluster", type=int, default=500)
    ap.add_argument("--pods", type=int, default=50_000, help="in all, spread over the clusters")
    args = ap.parse_args()
    per = args.pods // args.clusters
    stop = threading.Event()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    caches = []
    t0 = time.perf_counter()
    for c in range(args.clusters):
        nodes = [gpu_node(f"c{c}-n{i}", gpus=8) for i in range(args.nodes_per_cluster)]
        pods = [bound_pod(f"c{c}-p{i}", f"c{c}-n{i % args.nodes_per_cluster}", gpus=1, phase="Running",
                          labels={"app": f"w{i // 8}"}) for i in range(per)]
        cache = ClusterCache(f"c{c}", {}, None, NoServer(), {}, stop, on_error=lambda e: None,  # type: ignore[arg-type]
                             on_copy=lambda *a: None, on_capacity=lambda: None)
        feed(cache, nodes, pods)
        caches.append(cache)
        del nodes, pods
    ingest = time.perf_counter() - t0
    gc.collect()
    held = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024     # peak growth, ingest included
    t0 = time.perf_counter()
    for cache in caches:
        cache.cluster()
    first = time.perf_counter() - t0
    # steady state: one pod changes per cluster between rounds
    rounds = 20
    t0 = time.perf_counter()
    for r in range(rounds):
        for c, cache in enumerate(caches):
            p = bound_pod(f"c{c}-x{r}", f"c{c}-n{r}", gpus=1, phase="Running")
            p["metadata"]["resourceVersion"] = str(10_000_000 + r)
            cache.pods._apply(_Event("ADDED", p))
            cache.cluster()
    steady = (time.perf_counter() - t0) / rounds
    nodes = [gpu_node(f"c0-n{i}", gpus=8) for i in range(args.nodes_per_cluster)]
    pods = [bound_pod(f"c0-p{i}", f"c0-n{i % args.nodes_per_cluster}", gpus=1, phase="Running")
            for i in range(per)]
    t0 = time.perf_counter()
    snapshot("c0", nodes, pods)
    baseline = (time.perf_counter() - t0) * args.clusters
    print(f"# daemon caches: {args.clusters} clusters x {args.nodes_per_cluster} nodes, "
          f"{per * args.clusters} pods (no API server)")
    print("| measure | value |")
    print("|---|---|")
    print(f"| ingest (watch events -> caches) | {ingest:.1f} s |")
    print(f"| memory: peak RSS growth while filling the caches | {held / 2**20:.0f} MiB (target <= 1024) |")
    print(f"| first snapshot, all clusters | {first * 1000:.0f} ms |")
    print(f"| snapshot per round, one pod changed per cluster | {steady * 1000:.1f} ms |")
    print(f"| baseline: rebuild from raw objects per round | {baseline * 1000:.0f} ms "
          f"({baseline / max(steady, 1e-9):.0f}x the cached snapshot) |")


if __name__ == "__main__":
    main()
