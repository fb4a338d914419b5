"""FleetQuota in the daemon (issue 23 item 1) against test API servers: a burst of 1-GPU JobSets
from two teams, placed without quotas and then with a FleetQuota per team whose nominal amount
admits only part of each team's work. Counted from the servers: copies created per team (the
targets' request logs), duplicates, the hub's LIST and status-write requests on fleetquotas;
from the daemon: its rounds and solve seconds; wall time until every workload is placed or
told why not.

    python3 benchmarks/fleetquota.py [--burst 400] [--clusters 2] [--nodes-per-cluster 40] [--admit 0.5]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placer.daemon import LeaseTiming  # noqa: E402
from placer.model.names import ANN_MESSAGE, PLACED_CLUSTER  # noqa: E402
from tests.daemon.daemon_helpers import STAGING, Env, gpu_nodes, jobset, token_kubeconfig  # noqa: E402

TOKEN = "bench-daemon"
CRD = Path(__file__).resolve().parent.parent / "catalog" / "crd" / "fleetquotas.placer.dev.yaml"
API = "placer.dev/v1alpha1"


def serve(names: list[str], directory: str, nodes: int, conn) -> None:
    from tests.kubeapi import start_fleet

    fleet = start_fleet(["hub", *names], directory, bookmark_interval=1.0)
    for name in names:
        fleet[name].seed(gpu_nodes(f"{name}-n", nodes))
    fleet["hub"].install_crds([yaml.safe_load(CRD.read_text())])
    conn.send(str(fleet.kubeconfig))
    while True:
        cmd = conn.recv()
        if cmd == "stop":
            fleet.stop()
            conn.send(None)
            return
        if cmd == "created":
            out: dict[str, list[str]] = {}
            for name in names:
                for r in fleet[name].requests.created("jobsets"):
                    if r.namespace == STAGING:
                        out.setdefault(r.name, []).append(name)
            conn.send(out)
        elif cmd == "quota-requests":
            reqs = [r for r in fleet["hub"].requests.select(token=TOKEN) if r.resource.startswith("fleetquotas")]
            conn.send({"list": sum(r.verb == "list" for r in reqs), "watch": sum(r.verb == "watch" for r in reqs),
                       "status writes": sum(r.verb in ("patch", "update") for r in reqs)})


class Fleet:
    def __init__(self, directory: str, names: list[str], nodes: int):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(names, directory, nodes, child), daemon=True)
        self.proc.start()
        self.kubeconfig = Path(self.conn.recv())

    def ask(self, cmd: str):
        self.conn.send(cmd)
        return self.conn.recv()

    def stop(self) -> None:
        self.ask("stop")
        self.proc.join(30)


def team_job(name: str, team: str) -> dict:
    obj = jobset(name, pods=1, gpus=1)
    obj["metadata"]["labels"] = {"team": team}
    return obj


def run(args, quotas: dict[str, int] | None) -> dict:
    names = [f"c{i}" for i in range(args.clusters)]
    with tempfile.TemporaryDirectory() as tmp:
        fleet = Fleet(tmp, names, args.nodes_per_cluster)
        env = Env(fleet, clusters=names)
        try:
            for team, gpus in (quotas or {}).items():
                env.hub.create(env.hub.resource_for(API, "FleetQuota"), {
                    "apiVersion": API, "kind": "FleetQuota", "metadata": {"name": team},
                    "spec": {"members": {"selector": f"team={team}"}, "nominal": {"nvidia.com/gpu": gpus}}})
            d = env.daemon(kubeconfig=token_kubeconfig(fleet, Path(tmp) / "d.kubeconfig", TOKEN),
                           batch_window=0.1, time_limit=2.0,
                           lease=LeaseTiming(duration=15.0, renew_deadline=10.0, retry_period=2.0))
            d.wait_idle(120)
            jobs = [team_job(f"{team}-{i:04d}", team) for i in range(args.burst // 2) for team in ("team-a", "team-b")]
            res = env.hub.resource_for("jobset.x-k8s.io/v1alpha2", "JobSet")
            t0 = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(env.create, jobs))

            def settled() -> bool:
                items = env.hub.list(res, STAGING).items
                anns = [o["metadata"].get("annotations") or {} for o in items]
                return len(items) == len(jobs) and all(
                    a.get(PLACED_CLUSTER) or a.get(ANN_MESSAGE, "").startswith("unplaced") for a in anns)
            while not settled():
                if time.perf_counter() - t0 > args.timeout:
                    raise SystemExit(f"not settled after {args.timeout:.0f}s")
                time.sleep(0.5)
            seconds = time.perf_counter() - t0
            d.wait_idle(60)
            created = fleet.ask("created")
            rounds = {k: int(d.metrics.value("placer_solves_total", {"round": k})) for k in ("arrivals", "full")}
            out = {"seconds": seconds, "rounds": rounds,
                   "copies": {t: sum(1 for n in created if n.startswith(t)) for t in ("team-a", "team-b")},
                   "duplicates": sum(1 for cs in created.values() if len(cs) > 1),
                   "requests": fleet.ask("quota-requests")}
            if quotas:
                q = env.hub.get(env.hub.resource_for(API, "FleetQuota"), "team-a")
                out["status team-a"] = {k: q.get("status", {}).get(k) for k in ("used", "pending")}
            return out
        finally:
            env.stop()
            fleet.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--burst", type=int, default=400)
    ap.add_argument("--clusters", type=int, default=2)
    ap.add_argument("--nodes-per-cluster", type=int, default=40, help="8-GPU nodes per cluster")
    ap.add_argument("--admit", type=float, default=0.5, help="each team's nominal, as a share of its work")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    nominal = int(args.burst // 2 * args.admit)
    for label, quotas in (("no quotas", None), (f"FleetQuota {nominal} GPUs per team", {"team-a": nominal,
                                                                                        "team-b": nominal})):
        r = run(args, quotas)
        print(f"{label}: {r['seconds']:.1f}s to settle {args.burst} arrivals; copies {r['copies']}, "
              f"duplicates {r['duplicates']}; rounds {r['rounds']}; "
              f"hub fleetquotas requests {r['requests']}" + (f"; team-a status {r['status team-a']}"
                                                             if 'status team-a' in r else ""))


if __name__ == "__main__":
    main()
