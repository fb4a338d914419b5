"""placer beside Kueue MultiKueue (with Topology-Aware Scheduling) and an aggregate greedy, on the
same real clusters, the same KWOK nodes and the same workloads, counted from the workers' API servers.

    python3 benchmarks/peers.py [--scenario fragmented heterogeneous ...] [--system placer multikueue
                                aggregate] [--workers 4] [--seed 1] [--settle 30] [--dir DIR] [--keep]

Each (scenario, system) run starts from a clean fleet: its own `hack/kube-env up` (a hub with no
workload controller and no scheduler; W workers with the JobSet operator and KWOK), the scenario's
KWOK nodes and, for a fragmented fleet, pods already bound on them (KWOK runs them); torn down after
the run. The workloads (Jobs and JobSets; every pod of a workload is one gang) are the same
manifests for each system:

- placer: `placer daemon` (a subprocess of this checkout) on the hub's staging namespace; the
  workloads are created there, the daemon copies each onto the worker it plans;
- multikueue: Kueue on the hub (the MultiKueue manager) and on every worker, configured by
  `hack/kube-env multikueue` (TAS on kubernetes.io/hostname on the workers, quotas = the workers'
  allocatable; see hack/kubeenvlib/kueue.py); the same workloads, labelled
  kueue.x-k8s.io/queue-name, created on the hub;
- aggregate: what cluster-total tools do (Nova's style): in arrival order, each workload onto the
  worker with the most free GPUs among the nodes it may use, if that total covers it, created there
  directly; the worker's scheduler binds what it can.

After the run settles (every workload bound, or nothing changed on the workers for --settle s) the
judge reads every worker's pods in the run's namespace: GPUs requested, GPUs of workloads whose pods
are all bound, pods that exist but are unbound (admitted but unschedulable, or gated), workloads left
waiting, seconds from the first create to the last workload bound, placements per second over that
time, and the peak RSS (VmHWM) of the system's own processes (the daemon; every Kueue)."""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.kubeenv import RealKube, kube_env  # noqa: E402

GPU = "nvidia.com/gpu"
PRODUCT = "nvidia.com/gpu.product"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
HUB = "hub"


# --- the fleet and the workloads ---------------------------------------------------------------

@dataclass(frozen=True)
class Pool:
    """`count` KWOK nodes of one worker."""
    worker: str
    prefix: str
    count: int
    gpus: int
    product: str = "H100"
    taint: str | None = None         # k=v:Effect
    used: tuple[int, ...] = ()       # GPUs already taken per node (pods bound before the run)
    cpu: str = "128"
    memory: str = "2Ti"


@dataclass(frozen=True)
class Load:
    """One workload: a Job of `pods` pods or a JobSet of `jobs` Jobs of `pods` pods each."""
    name: str
    kind: str                        # Job | JobSet
    pods: int
    gpus: int                        # per pod
    jobs: int = 1
    product: str | None = None       # nodeSelector on PRODUCT
    tolerate: bool = False
    cpu_m: int | None = None         # per pod (default 2 CPUs and 8 GiB per GPU)
    memory_mi: int | None = None

    @property
    def total_pods(self) -> int:
        return self.pods * self.jobs

    @property
    def total_gpus(self) -> int:
        return self.total_pods * self.gpus


@dataclass
class Scenario:
    name: str
    pools: list[Pool]
    loads: list[Load]
    notes: str = ""


def fragmented(workers: list[str], rng: random.Random) -> Scenario:
    """12 nodes x 8 GPUs per worker, 3 to 6 GPUs of each already taken: every cluster's free total
    is large, no node has more than 5 free. Gangs of 1-4 pods of 2-5 GPUs, demand ~ free GPUs."""
    pools = [Pool(w, f"{w}-n", 12, 8, used=tuple(rng.randint(3, 6) for _ in range(12))) for w in workers]
    free = sum(p.gpus * p.count - sum(p.used) for p in pools)
    loads, demand, i = [], 0, 0
    while demand < free:
        kind = "JobSet" if i % 3 == 2 else "Job"
        load = Load(f"w{i:03d}", kind, pods=rng.choice((1, 2, 2, 3, 4)), gpus=rng.choice((2, 3, 4, 4, 5)),
                    jobs=2 if kind == "JobSet" else 1)
        loads.append(load)
        demand += load.total_gpus
        i += 1
    return Scenario("fragmented", pools, loads, f"{len(workers)} workers x 12 nodes x 8 GPUs, {free} free")


def heterogeneous(workers: list[str], rng: random.Random) -> Scenario:
    """Per worker three pools (H100 8 GPUs, A100 8 GPUs, L40S 4 GPUs), one of them tainted
    dedicated=ml:NoSchedule on half the workers; workloads pinned to a product 60% of the time,
    tolerating the taint 30%, gangs of 1-8 pods; demand ~1.3x the fleet."""
    pools = []
    for k, w in enumerate(workers):
        tainted = ("H100", "A100", "L40S")[k % 3] if k % 2 == 0 else None
        for product, count, gpus in (("H100", 4, 8), ("A100", 4, 8), ("L40S", 6, 4)):
            taint = "dedicated=ml:NoSchedule" if product == tainted else None
            pools.append(Pool(w, f"{w}-{product.lower()}", count, gpus, product, taint))
    supply = sum(p.count * p.gpus for p in pools)
    loads, demand, i = [], 0, 0
    while demand < 1.3 * supply:
        kind = "JobSet" if i % 4 == 3 else "Job"
        product = rng.choice(("H100", "A100", "L40S")) if rng.random() < 0.6 else None
        gpus = rng.choice((1, 2, 4)) if product == "L40S" else rng.choice((1, 2, 4, 8))
        load = Load(f"w{i:03d}", kind, pods=rng.choice((1, 1, 2, 4, 8)) if kind == "Job" else rng.choice((1, 2)),
                    gpus=gpus, jobs=2 if kind == "JobSet" else 1, product=product, tolerate=rng.random() < 0.3)
        loads.append(load)
        demand += load.total_gpus
        i += 1
    return Scenario("heterogeneous", pools, loads, f"{len(workers)} workers x (4 H100x8, 4 A100x8, 6 L40Sx4)")


TRACE = REPO.parent / "shared" / "traces" / "alibaba-gpu-v2023"


def trace(workers: list[str], rng: random.Random, scale: float = 0.1) -> Scenario:
    """The Alibaba GPU trace v2023 (openb): every k-th GPU node (k = 1/scale, in the file's order
    within each GPU model) dealt round-robin per model onto the workers, so each gets the same
    mix; every k-th task asking GPUs (creation order) as a one-pod Job with the task's CPU, memory
    and GPU count. A GPU-sharing task (gpu_milli < 1000) asks one whole GPU (Kubernetes counts
    nvidia.com/gpu in whole units); gpu_spec is empty in this file: no model constraint."""
    k = max(1, round(1 / scale))
    with open(TRACE / "openb_node_list_gpu_node.csv") as f:
        rows = list(csv.DictReader(f))
    by_model: dict[str, list[dict]] = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    shapes: dict[tuple, int] = {}
    for model, nodes in sorted(by_model.items()):
        for i, r in enumerate(nodes[::k]):
            key = (workers[i % len(workers)], model, int(r["gpu"]), int(r["cpu_milli"]), int(r["memory_mib"]))
            shapes[key] = shapes.get(key, 0) + 1
    pools = [Pool(w, f"{w}-{model.lower()}-{gpu}g{cpu // 1000}c{mem // 1024}", n, gpu, model, cpu=f"{cpu}m",
                  memory=f"{mem}Mi") for (w, model, gpu, cpu, mem), n in sorted(shapes.items())]
    with open(TRACE / "openb_pod_list_default.csv") as f:
        tasks = [r for r in csv.DictReader(f) if int(r["num_gpu"]) > 0]
    tasks.sort(key=lambda r: (int(r["creation_time"]), r["name"]))
    loads = [Load(f"t{i:04d}", "Job", 1, int(r["num_gpu"]), cpu_m=int(r["cpu_milli"]), memory_mi=int(r["memory_mib"]))
             for i, r in enumerate(tasks[::k])]
    nodes = sum(p.count for p in pools)
    return Scenario("trace", pools, loads, f"every {k}th of 1,213 nodes ({nodes}) and of 7,064 GPU tasks, "
                                           f"{len(workers)} workers")


SCENARIOS = {"fragmented": fragmented, "heterogeneous": heterogeneous, "trace": trace}


def pod_spec(load: Load) -> dict:
    container = {"name": "train", "image": "registry.example/train:1",
                 "resources": {"requests": {"cpu": f"{load.cpu_m or 2000 * load.gpus}m",
                                            "memory": f"{load.memory_mi or 8192 * load.gpus}Mi",
                                            GPU: str(load.gpus)}, "limits": {GPU: str(load.gpus)}}}
    spec: dict = {"restartPolicy": "Never", "containers": [container]}
    if load.product:
        spec["nodeSelector"] = {PRODUCT: load.product}
    if load.tolerate:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    return spec


def manifest(load: Load, ns: str, labels: dict[str, str], suspend: bool = True) -> dict:
    """Suspended for the hub (placer's daemon un-suspends its copy, Kueue admits by un-suspending);
    not for what is created straight on a worker."""
    meta = {"name": load.name, "namespace": ns, "labels": dict(labels)}
    job = {"parallelism": load.pods, "completions": load.pods, "backoffLimit": 0,
           "template": {"spec": pod_spec(load)}}
    if load.kind == "Job":
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"suspend": suspend, **job}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta,
            "spec": {"suspend": suspend, "replicatedJobs": [{"name": "workers", "replicas": load.jobs,
                                                          "template": {"spec": job}}]}}


def owner(pod: dict) -> str | None:
    labels = pod["metadata"].get("labels") or {}
    return labels.get("jobset.sigs.k8s.io/jobset-name") or labels.get("batch.kubernetes.io/job-name")


# --- one run --------------------------------------------------------------------------------------

@dataclass
class Result:
    requested: int = 0
    bound_gpus: int = 0
    unbound_pods: int = 0
    waiting: int = 0
    placed: int = 0
    seconds: float = 0.0
    rss_mib: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.placed / self.seconds if self.seconds > 0 else 0.0


class Run:
    def __init__(self, scenario: Scenario, system: str, workers: list[str], directory: Path, settle: float,
                 steer: str | None = None):
        self.scenario, self.system, self.workers, self.settle = scenario, system, workers, settle
        self.steer = steer                    # `placer`'s clusters' `steer` (--steer), None: the default
        self.dir = directory
        self.ns = f"peers-{scenario.name}"
        operators = "jobset,kueue" if system.startswith("multikueue") else "jobset"
        self.env = RealKube(directory, (HUB, *workers), operators=operators, hub=HUB)
        self.procs: list[subprocess.Popen] = []

    def fleet(self) -> None:
        for pool in self.scenario.pools:
            options: dict = {"label": [f"{PRODUCT}={pool.product}"], "cpu": pool.cpu, "memory": pool.memory,
                             "kwok": True}
            if pool.taint:
                options["taint"] = [pool.taint]
            self.env.nodes(pool.worker, count=pool.count, prefix=pool.prefix, gpus=pool.gpus, **options)
        for w in self.workers:
            self.env.namespace(w, "fill")
        for pool in self.scenario.pools:
            for i, used in enumerate(pool.used):
                if used:
                    self.env.client(pool.worker).create("pods", filler(f"{pool.prefix}-{i}", used), "fill")
        for w in self.workers:
            n = sum(1 for p in self.scenario.pools if p.worker == w for u in p.used if u)
            wait_until(lambda w=w, n=n: sum(1 for p in self.env.pods(w, "fill")
                                            if (p.get("status") or {}).get("phase") == "Running") >= n,
                       300, f"fillers running on {w}")

    def submit(self) -> float:
        loads = self.scenario.loads
        if self.system == "aggregate":
            from benchmarks.peers_aggregate import choice  # it imports this module

            targets = choice(self.scenario, self.workers)
            for w in set(targets.values()):
                self.env.namespace(w, self.ns)
            t0 = time.monotonic()
            for load in loads:
                if load.name in targets:
                    self.env.client(targets[load.name]).create(plural(load), manifest(load, self.ns, {}, suspend=False),
                                                            self.ns)
            return t0
        labels = {QUEUE_LABEL: "kube-env"} if self.system.startswith("multikueue") else {}
        hub = self.env.client(HUB)
        t0 = time.monotonic()
        for load in loads:
            hub.create(plural(load), manifest(load, self.ns, labels), self.ns)
        return t0

    def start_system(self) -> None:
        self.env.namespace(HUB, self.ns)
        if self.system.startswith("multikueue"):
            factor = "1" if self.system == "multikueue" else "100"
            kube_env("multikueue", "--dir", str(self.dir), "--manager", HUB, "--namespace", self.ns,
                     "--manager-quota", factor, *self.workers, timeout=600)
        elif self.system.startswith("placer"):
            # placer-unsteered / placer-preferred: the clusters' `steer` off / preferred (issue 22)
            steer = {"placer-unsteered": {"steer": "off"}, "placer-preferred": {"steer": "preferred"},
                     "placer": {"steer": self.steer} if self.steer else {}}
            clusters = self.dir / "clusters.yaml"
            clusters.write_text(json.dumps({"hub": {"context": HUB, "stagingNamespace": self.ns},
                                            "clusters": [{"name": w, "context": w, **steer.get(self.system, {})}
                                                         for w in self.workers]}))
            log = open(self.dir / "daemon.log", "w")
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "placer", "daemon", "--clusters", str(clusters), "--kubeconfig",
                 str(self.env.kubeconfig)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(REPO)}))

    def rss_pids(self) -> list[int]:
        if self.system.startswith("placer"):
            return [p.pid for p in self.procs]
        if self.system.startswith("multikueue"):
            state = json.loads((self.dir / "state.json").read_text())
            return [c["procs"]["operator-kueue"]["pid"] for c in state["clusters"].values()
                    if "operator-kueue" in c.get("procs", {})]
        return []

    def observe(self, t0: float) -> Result:
        loads = {ld.name: ld for ld in self.scenario.loads}
        last_sig, last_change, last_bound_at = None, time.monotonic(), t0
        bound_names: set[str] = set()
        pods: list[dict] = []
        while True:
            pods = [p for w in self.workers for p in self.env.pods(w, self.ns)]
            bound = count_bound(pods, loads)
            now = time.monotonic()
            if set(bound) - bound_names:
                last_bound_at = now
            bound_names = set(bound)
            sig = (len(pods), sum(1 for p in pods if p["spec"].get("nodeName")), len(bound))
            if sig != last_sig:
                last_sig, last_change = sig, now
            if len(bound) == len(loads) or now - last_change > self.settle:
                break
            time.sleep(0.5)
        r = Result(requested=sum(ld.total_gpus for ld in loads.values()))
        r.placed = len(bound_names)
        r.bound_gpus = sum(loads[n].total_gpus for n in bound_names)
        r.unbound_pods = sum(1 for p in pods if not p["spec"].get("nodeName"))
        if r.unbound_pods:
            self.evidence(pods)
        r.waiting = len(loads) - r.placed
        r.seconds = last_bound_at - t0 if r.placed else 0.0
        pids = self.rss_pids()
        r.rss_mib = sum(vm_hwm(p) for p in pids) / 1024 if pids else None
        return r

    def evidence(self, pods: list[dict]) -> None:
        """Beside the run's directory (removed at the end): every pod of the run, the nodes' pods
        and the daemon's log, to tell why a pod stayed unbound."""
        target = self.dir.parent / f"{self.dir.name}.evidence"
        target.mkdir(parents=True, exist_ok=True)
        (target / "pods.json").write_text(json.dumps(pods, indent=1, default=str))
        if (self.dir / "daemon.log").exists():
            shutil.copy(self.dir / "daemon.log", target / "daemon.log")

    def close(self, keep: bool) -> None:
        for p in self.procs:
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        if not keep:
            self.env.down()
            shutil.rmtree(self.dir, ignore_errors=True)


def filler(node: str, gpus: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"fill-{node}"},
            "spec": {"nodeName": node, "restartPolicy": "Never",
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "f", "image": "registry.example/fill:1",
                                     "resources": {"requests": {GPU: str(gpus), "cpu": "1", "memory": "1Gi"},
                                                   "limits": {GPU: str(gpus)}}}]}}


def plural(load: Load) -> str:
    return "jobs" if load.kind == "Job" else "jobsets"


def count_bound(pods: list[dict], loads: dict[str, Load]) -> list[str]:
    """Workloads whose pods all exist and are bound (on one worker or several: counted as found)."""
    by: dict[str, list[dict]] = {}
    for p in pods:
        name = owner(p)
        if name in loads:
            by.setdefault(name, []).append(p)
    return [n for n, ps in by.items()
            if len(ps) >= loads[n].total_pods and sum(1 for p in ps if p["spec"].get("nodeName")) >= loads[n].total_pods]


def vm_hwm(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out: {what}")
        time.sleep(0.5)


# --- driver -------------------------------------------------------------------------------------

def run_one(scenario: Scenario, system: str, workers: list[str], base: Path, settle: float, keep: bool,
            steer: str | None = None) -> Result:
    directory = base / f"{scenario.name}-{system}"
    started, load0 = time.monotonic(), os.getloadavg()[0]
    run = Run(scenario, system, workers, directory, settle, steer)
    try:
        run.fleet()
        run.start_system()
        t0 = run.submit()
        result = run.observe(t0)
    finally:
        run.close(keep)
    result.extra["wall"] = time.monotonic() - started
    print(f"  {scenario.name}/{system}: {result.bound_gpus}/{result.requested} GPUs bound, "
          f"{result.unbound_pods} pods unbound, {result.waiting} waiting, {result.seconds:.1f}s "
          f"(run {result.extra['wall']:.0f}s, load average {load0:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end)", file=sys.stderr, flush=True)
    return result


def table(scenario: Scenario, results: dict[str, Result]) -> str:
    systems = list(results)
    rows = [("GPUs requested", lambda r: f"{r.requested}"),
            ("GPUs of workloads all bound", lambda r: f"{r.bound_gpus}"),
            ("pods unbound (admitted, unschedulable or gated)", lambda r: f"{r.unbound_pods}"),
            ("workloads left waiting", lambda r: f"{r.waiting}"),
            ("s until the last placement", lambda r: f"{r.seconds:.1f}"),
            ("placements/s", lambda r: f"{r.rate:.2f}"),
            ("peak RSS, MiB", lambda r: "-" if r.rss_mib is None else f"{r.rss_mib:.0f}")]
    out = [f"### {scenario.name}: {len(scenario.loads)} workloads, "
           f"{sum(ld.total_pods for ld in scenario.loads)} pods; {scenario.notes}", "",
           "| | " + " | ".join(systems) + (" | placer / multikueue |" if {"placer", "multikueue"} <= set(systems)
                                            else " |"),
           "|---" * (len(systems) + 1 + ({"placer", "multikueue"} <= set(systems))) + "|"]
    for label, cell in rows:
        line = f"| {label} | " + " | ".join(cell(results[s]) for s in systems)
        if {"placer", "multikueue"} <= set(systems):
            line += " | " + ratio(label, results["placer"], results["multikueue"])
        out.append(line + " |")
    return "\n".join(out)


def ratio(label: str, p: Result, m: Result) -> str:
    values = {"GPUs of workloads all bound": (p.bound_gpus, m.bound_gpus),
              "placements/s": (p.rate, m.rate), "s until the last placement": (p.seconds, m.seconds),
              "peak RSS, MiB": (p.rss_mib or 0, m.rss_mib or 0)}
    if label not in values:
        return ""
    a, b = values[label]
    return f"{a / b:.2f}" if b else "-"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    ap.add_argument("--system", nargs="+", default=["placer", "multikueue", "aggregate"],
                    choices=["placer", "placer-unsteered", "placer-preferred", "multikueue", "multikueue-open",
                             "aggregate"],
                    help="multikueue-open: the manager's quotas 100x the workers' (every workload dispatched); "
                         "placer-unsteered / placer-preferred: placer with `steer: off` / `preferred`")
    ap.add_argument("--steer", choices=["required", "pinned", "preferred", "off"],
                    help="the `steer` of the clusters of the `placer` system (default: placer's own, required)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trace-scale", type=float, default=0.1, help="share of the trace's nodes and GPU tasks")
    ap.add_argument("--settle", type=float, default=30.0, help="seconds without change on the workers = settled")
    ap.add_argument("--dir", help="where the environments go (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="leave each run's environment up")
    args = ap.parse_args(argv)
    workers = [f"w{i}" for i in range(args.workers)]
    base = Path(args.dir or tempfile.mkdtemp(prefix="peers-"))
    print(f"# peers: seed {args.seed}, {args.workers} workers, settle {args.settle:.0f}s, steer {args.steer}, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for name in args.scenario:
        make = SCENARIOS[name]
        rng = random.Random(args.seed)
        scenario = trace(workers, rng, args.trace_scale) if name == "trace" else make(workers, rng)
        results = {}
        for system in args.system:
            try:
                results[system] = run_one(scenario, system, workers, base, args.settle, args.keep, args.steer)
            except (RuntimeError, OSError) as e:    # one failed run: say so, run the others
                print(f"  {name}/{system} failed: {str(e)[-400:]}", file=sys.stderr, flush=True)
        if not results:
            continue
        print(table(scenario, results), flush=True)
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
