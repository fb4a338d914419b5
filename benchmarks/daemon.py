"""placer daemon against the test API server: latency from staging create to remote create
at a steady arrival rate, and throughput for a burst.

    python3 benchmarks/daemon.py [--rate 20] [--steady 200] [--burst 1000] [--window 0.1] [--real]

--real: hub, alpha and beta are real control planes from hack/kube-env (etcd, kube-apiserver,
scheduler, controller-manager; the upstream JobSet CRD from ../shared/corpus/upstream installed on
each, 80 registered 8-GPU nodes per GPU cluster) instead of the in-repo test server.

The hub and two GPU clusters run in this process (tests/kubeapi), as does the daemon; the
arrivals are created through the real client from a separate thread pool. Latency is
measured from the moment the create call returns to the moment a watch on the target
cluster sees the copy (the stores' creationTimestamps have one-second resolution).
Baseline in the same run: a bare create round trip on the hub (what one API call costs here).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placer.kube import Kube  # noqa: E402
from tests.daemon_helpers import STAGING, Env, gpu_nodes, jobset  # noqa: E402
from tests.kubeapi import start_fleet  # noqa: E402


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Arrivals:
    """When each remote copy appeared, from watches on the target clusters."""

    def __init__(self, kube: Kube, clusters: list[str]):
        self.seen: dict[str, float] = {}
        self.dups: list[str] = []
        self.stop = threading.Event()
        self.cond = threading.Condition()
        for c in clusters:
            client = kube.client(c)
            res = client.resource_for("jobset.x-k8s.io/v1alpha2", "JobSet")
            threading.Thread(target=self._watch, args=(client, res), daemon=True).start()

    def _watch(self, client, res) -> None:
        for ev in client.watch(res, STAGING, stop=self.stop.is_set, timeout_seconds=60):
            objs = ev.items if ev.type == "RELIST" else ((ev.object,) if ev.type == "ADDED" else ())
            now = time.perf_counter()
            with self.cond:
                for o in objs:
                    name = o["metadata"]["name"]
                    if name in self.seen:
                        self.dups.append(name)
                    else:
                        self.seen[name] = now
                self.cond.notify_all()

    def wait(self, names: set[str], timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        with self.cond:
            while not names <= set(self.seen):
                left = deadline - time.perf_counter()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True


def start_inrepo(directory: str):
    fleet = start_fleet(("hub", "alpha", "beta"), directory, bookmark_interval=1.0)
    # room for everything: 2 x 80 nodes x 8 GPUs = 1280 GPUs for 1-GPU workloads
    fleet["alpha"].seed(gpu_nodes("a", 80))
    fleet["beta"].seed(gpu_nodes("b", 80))
    return fleet


class RealFleet:
    """The same world on hack/kube-env control planes (what Env and this benchmark use of a fleet)."""

    def __init__(self, directory: str):
        from tests.kubeenv import RealKube, require_binaries, upstream_crds

        require_binaries()
        crds = upstream_crds().get("jobset")
        if not crds:
            raise SystemExit("--real needs the upstream JobSet CRD in ../shared/corpus/upstream/jobset")
        self.env = RealKube(Path(directory) / "real", ("hub", "alpha", "beta"))
        self.kubeconfig = self.env.kubeconfig
        for name in ("hub", "alpha", "beta"):
            self.env.install_crds(name, crds)
        self.env.nodes("alpha", count=80, prefix="a", gpus=8)
        self.env.nodes("beta", count=80, prefix="b", gpus=8)
        for ns in (STAGING, "baseline"):
            self.env.namespace("hub", ns)

    def stop(self) -> None:
        self.env.down()


def start_real(directory: str):
    return RealFleet(directory)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--steady", type=int, default=200, help="arrivals at --rate")
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--window", type=float, default=0.1, help="daemon --batch-window")
    ap.add_argument("--real", action="store_true", help="real control planes (hack/kube-env)")
    args = ap.parse_args()
    logging.getLogger("urllib3").setLevel(logging.ERROR)

    directory = tempfile.mkdtemp()
    fleet = start_real(directory) if args.real else start_inrepo(directory)
    env = Env(fleet)
    user = Kube(str(fleet.kubeconfig), max_workers=16)
    hub = user.client("hub")
    res = hub.resource_for("jobset.x-k8s.io/v1alpha2", "JobSet")
    arrivals = Arrivals(user, ["alpha", "beta"])

    # baseline: one create round trip on the hub (then deleted)
    base = []
    for i in range(50):
        t = time.perf_counter()
        hub.create(res, jobset(f"baseline-{i}", ns="baseline"), "baseline")
        base.append(time.perf_counter() - t)

    d = env.daemon(batch_window=args.window, time_limit=2.0)
    assert d.wait_idle(60)

    # steady arrivals
    created: dict[str, float] = {}
    pool = ThreadPoolExecutor(8)

    def create(name: str) -> None:
        hub.create(res, jobset(name, pods=1, gpus=1), STAGING)
        created[name] = time.perf_counter()
    t0 = time.perf_counter()
    futures = []
    for i in range(args.steady):
        target = t0 + i / args.rate
        time.sleep(max(0.0, target - time.perf_counter()))
        futures.append(pool.submit(create, f"s{i:04d}"))
    for f in futures:
        f.result()
    names = {f"s{i:04d}" for i in range(args.steady)}
    ok = arrivals.wait(names, 60)
    lat = [arrivals.seen[n] - created[n] for n in names if n in arrivals.seen]
    steady = (len(lat), pct(lat, 50), pct(lat, 99), max(lat)) if lat else (0, 0, 0, 0)
    assert d.wait_idle(60)

    # burst
    burst = [f"b{i:04d}" for i in range(args.burst)]
    t1 = time.perf_counter()
    list(pool.map(create, burst))
    created_s = time.perf_counter() - t1
    ok_burst = arrivals.wait(set(burst), 120)
    done = max(arrivals.seen.get(n, float("inf")) for n in burst) - t1
    rounds = d.metrics.value("placer_solve_seconds")
    env.stop()
    pool.shutdown()
    fleet.stop()

    server = "real kube-apiserver (hack/kube-env)" if args.real else "in-repo test server"
    print(f"# placer daemon benchmark ({server}: hub + 2 clusters x 80 nodes x 8 GPUs, "
          f"batch window {args.window}s)")
    print(f"baseline: hub create round trip p50 {statistics.median(base) * 1000:.1f} ms")
    print("| scenario | workloads | placed | p50 (s) | p99 (s) | max (s) | total (s) | target |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| steady {args.rate:g}/s | {args.steady} | {steady[0]}{'' if ok else ' (TIMEOUT)'} | "
          f"{steady[1]:.3f} | {steady[2]:.3f} | {steady[3]:.3f} | - | p99 <= 1 s: "
          f"{'met' if steady[2] <= 1 else 'MISSED'} |")
    print(f"| burst | {args.burst} | {sum(1 for n in burst if n in arrivals.seen)}"
          f"{'' if ok_burst else ' (TIMEOUT)'} | - | - | - | {done:.1f} (creates took {created_s:.1f}) | "
          f"< 60 s: {'met' if done < 60 else 'MISSED'} |")
    print(f"duplicates: {len(arrivals.dups)}; planning rounds: {int(rounds)}")


if __name__ == "__main__":
    main()
