"""Scheduler fidelity benchmark: placer's plan against the real kube-scheduler's binding.

    python3 benchmarks/fidelity.py [--scenarios 200] [--spread 0] [--seed 1] [--clusters 3] [--dir DIR] [--keep]

Seeded random scenarios, each one cluster's worth of nodes (GPUs, CPU, memory, pod slots,
an extended resource, labels, taints of every effect, cordons) with pods already bound to
some of them (some terminated), and one workload of a random kind (Job, Deployment,
StatefulSet, Pod, JobSet, LeaderWorkerSet, RayCluster, PyTorchJob) whose pods use requests,
init containers, restartable sidecars, RuntimeClass overhead, nodeSelector, required node
affinity with every operator and tolerations. placer plans it as `placer submit --dry-run`
does against the live cluster; then the workload is forced onto the cluster (real
controllers for the built-in kinds, operator-style pods for the CRDs) and the real
scheduler binds what it can. Agreement both ways: placer places it -> every pod bound;
placer leaves it unplaced -> some pod unschedulable with the scheduler's reason.

`--spread N` adds N spread scenarios (benchmarks/fidelity_spread.py): one `placer.dev/spread`
workload over all the clusters, placer's shares against a cluster-totals division, per share.

Control planes come from `hack/kube-env up` (in --dir, else a temporary directory that is
torn down at the end); scenarios run one at a time per cluster, the clusters in parallel.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from placer.definitions.catalog import load_catalog  # noqa: E402
from tests.realkube import manifests as M  # noqa: E402
from tests.realkube.cluster import BoundPod, NodeSpec  # noqa: E402
from tests.realkube.env import KubeEnv, unavailable  # noqa: E402
from tests.realkube.scenario import Pool, Scenario, Verdict  # noqa: E402

GPU = "nvidia.com/gpu"
FPGA = "example.com/fpga"
RUNTIME_CLASSES = {"fid-overhead": {"overhead": {"podFixed": {"cpu": "500m", "memory": "512Mi"}}}, "fid-plain": None,
                   "fid-pool": {"scheduling": {"nodeSelector": {"tier": "a"},
                                               "tolerations": [{"key": "dedicated", "operator": "Exists"}]}}}
TAINTS = [("dedicated", "ml", "NoSchedule"), ("dedicated", "web", "NoSchedule"), ("gpu", "true", "NoExecute"),
          ("spot", "", "PreferNoSchedule"), ("maintenance", "", "NoExecute")]
TOLERATIONS = [{"operator": "Exists"},
               {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
               {"key": "dedicated", "operator": "Exists"},
               {"key": "dedicated", "operator": "Equal", "value": "ml"},
               {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoExecute"},
               {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
               {"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]
KINDS = ("Job", "Deployment", "StatefulSet", "Pod", "JobSet", "LeaderWorkerSet", "RayCluster", "PyTorchJob")


# --- random scenarios -----------------------------------------------------------------------

def _cpu(milli: int) -> str:
    return f"{milli}m"


def _node(rng: random.Random, name: str, feats: Counter) -> NodeSpec:
    gpus = rng.choice([0, 2, 4, 8, 8])
    alloc = {"cpu": rng.choice(["4", "8", "16", "32"]), "memory": rng.choice(["16Gi", "32Gi", "64Gi"])}
    if gpus:
        alloc[GPU] = str(gpus)
    pods = rng.choice(["110", "110", "110", "4", "3", None]) if rng.random() < 0.5 else "110"
    if pods is not None:
        alloc["pods"] = pods
    else:
        feats["node without pods allocatable"] += 1
    if rng.random() < 0.2:
        alloc[FPGA] = str(rng.randint(1, 2))
    labels = {}
    if rng.random() < 0.8:
        labels["tier"] = rng.choice("abc")
    if rng.random() < 0.7:
        labels["cores"] = str(rng.choice([8, 16, 32, 64, 128]))
    if rng.random() < 0.4:
        labels["zone"] = rng.choice(["z1", "z2"])
    taints = []
    if rng.random() < 0.25:
        k, v, e = rng.choice(TAINTS)
        taints.append({"key": k, "value": v, "effect": e} if v else {"key": k, "effect": e})
        feats[f"taint {e}"] += 1
    cordon = rng.random() < 0.08
    feats["cordoned node"] += cordon
    return NodeSpec(name, alloc, labels, tuple(taints), cordon)


def _bound(rng: random.Random, prefix: str, nodes: list[NodeSpec], feats: Counter) -> list[BoundPod]:
    out = []
    for n in nodes:
        if rng.random() >= 0.45:
            continue
        gpus = int(n.allocatable.get(GPU, "0"))
        req = {"cpu": _cpu(rng.choice([250, 500, 1000, 2000])), "memory": rng.choice(["256Mi", "1Gi", "4Gi"])}
        if gpus:
            req[GPU] = str(rng.randint(1, gpus))
        phase = "Succeeded" if rng.random() < 0.2 else None
        feats["terminated pod bound" if phase else "pod already bound"] += 1
        out.append(BoundPod(f"{prefix}-old-{len(out)}", n.name, req, phase))
    return out


def _expr(rng: random.Random) -> tuple:
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    if op in ("Gt", "Lt"):
        return ("cores", op, str(rng.choice([8, 16, 32, 64, 100])))
    key = rng.choice(["tier", "tier", "zone"])
    if op in ("In", "NotIn"):
        values = ["a", "b", "c"] if key == "tier" else ["z1", "z2"]
        return (key, op, *rng.sample(values, rng.randint(1, 2)))
    return (key, op)


def _spec(rng: random.Random, feats: Counter, edges: list[tuple[int, int]] = ()) -> dict[str, Any]:
    req: dict[str, str] = {"cpu": _cpu(rng.choice([100, 250, 500, 1000, 2000, 3000, 6000])),
                           "memory": rng.choice(["256Mi", "1Gi", "4Gi", "12Gi"])}
    g = rng.choice([0, 0, 1, 1, 2, 2, 4, 8])
    if edges and rng.random() < 0.25:
        # on the boundary: exactly what one node has free, or one unit more
        free_gpu, free_cpu = rng.choice(edges)
        over = rng.random() < 0.4
        g = max(0, free_gpu + over) if free_gpu or over else 0
        req["cpu"] = _cpu(max(1, free_cpu + (rng.random() < 0.3)))
        feats["request at a node's free capacity (+1 40% of the time)"] += 1
    if g:
        req[GPU] = str(g)
    if rng.random() < 0.12:
        req[FPGA] = "1"
        feats["extended resource"] += 1
    kw: dict[str, Any] = {}
    if rng.random() < 0.2:
        kw["init"] = [{"cpu": _cpu(rng.choice([500, 2000, 4000, 8000]))}]
        feats["init container"] += 1
    if rng.random() < 0.2:
        kw["sidecars"] = [(0, {"cpu": _cpu(rng.choice([250, 1000, 3000])), "memory": "256Mi"})]
        feats["restartable sidecar"] += 1
    if rng.random() < 0.15:
        kw["runtime_class"] = rng.choice(sorted(RUNTIME_CLASSES) + ["fid-missing"])
        feats[f"runtimeClass {kw['runtime_class']}"] += 1
    if rng.random() < 0.15:
        kw["node_selector"] = {"tier": rng.choice("ab")}
        feats["nodeSelector"] += 1
    if rng.random() < 0.25:
        terms = [M.term(*[_expr(rng) for _ in range(rng.choice([1, 1, 2]))]) for _ in range(rng.choice([1, 1, 2]))]
        for t in terms:
            for e in t["matchExpressions"]:
                feats[f"affinity {e['operator']}"] += 1
        kw["terms"] = terms
    if rng.random() < 0.45:
        kw["tolerations"] = rng.sample(TOLERATIONS, rng.randint(1, 2))
        feats["tolerations"] += 1
        feats["tolerate everything"] += {"operator": "Exists"} in kw["tolerations"]
    return M.pod_spec(req, **kw)


def _workload(rng: random.Random, name: str, feats: Counter, edges: list[tuple[int, int]]) -> dict[str, Any]:
    kind = rng.choice(KINDS)
    feats[f"kind {kind}"] += 1
    n = rng.randint(1, 4)
    if kind == "Job":
        return M.job(name, n, _spec(rng, feats, edges), indexed=rng.random() < 0.5)
    if kind == "Deployment":
        return M.deployment(name, n, _spec(rng, feats, edges))
    if kind == "StatefulSet":
        return M.statefulset(name, n, _spec(rng, feats, edges))
    if kind == "Pod":
        return M.pod(name, _spec(rng, feats, edges))
    if kind == "JobSet":
        jobs = [("workers", rng.randint(1, 2), rng.randint(1, 2), _spec(rng, feats, edges))]
        if rng.random() < 0.5:
            jobs.append(("driver", 1, 1, _spec(rng, feats, edges)))
        return M.jobset(name, jobs)
    if kind == "LeaderWorkerSet":
        leader = _spec(rng, feats, edges) if rng.random() < 0.5 else None
        return M.leaderworkerset(name, rng.randint(1, 2), rng.randint(1, 3), _spec(rng, feats, edges), leader)
    if kind == "RayCluster":
        return M.raycluster(name, _spec(rng, feats, edges), rng.randint(1, 3), _spec(rng, feats, edges))
    return M.pytorchjob(name, rng.randint(1, 2), _spec(rng, feats, edges))


def scenario(seed: int, index: int, feats: Counter) -> Scenario:
    rng = random.Random(f"{seed}/{index}")
    prefix = f"s{seed}-{index}"
    nodes = [_node(rng, f"{prefix}-n{i}", feats) for i in range(rng.randint(2, 5))]
    bound = _bound(rng, prefix, nodes, feats)
    return Scenario(prefix, tuple(nodes), _workload(rng, f"w{index}", feats, _edges(nodes, bound)), tuple(bound))


def _edges(nodes: list[NodeSpec], bound: list[BoundPod]) -> list[tuple[int, int]]:
    """(free GPUs, free millicores) of each node after its active bound pods."""
    out = []
    for n in nodes:
        active = [b for b in bound if b.node == n.name and not b.phase]
        gpus = int(n.allocatable.get(GPU, "0")) - sum(int(b.requests.get(GPU, "0")) for b in active)
        cpu = int(n.allocatable["cpu"]) * 1000 - sum(int(b.requests["cpu"].rstrip("m")) for b in active)
        out.append((gpus, cpu))
    return out


# --- running and reporting --------------------------------------------------------------------

def report(verdicts: list[Verdict | BaseException], feats: Counter, seconds: float, clusters: int) -> None:
    ok = [v for v in verdicts if isinstance(v, Verdict)]
    errors = [e for e in verdicts if not isinstance(e, Verdict)]
    placed = [v for v in ok if v.placer_fits]
    refused = [v for v in ok if not v.placer_fits]
    admission = [v for v in refused if v.outcome.refused]
    n = max(1, len(verdicts))
    print(f"# scheduler fidelity: {len(verdicts)} scenarios on {clusters} real control planes in {seconds:.0f} s "
          f"({seconds * clusters / n:.1f} s of one cluster per scenario)")
    print("| placer's verdict | scenarios | pods | scheduler agrees | agreement |")
    print("|---|---|---|---|---|")
    for label, vs in (("places it (every pod must bind)", placed),
                      ("leaves it unplaced (a pod must stay unschedulable)", refused), ("all", ok)):
        agree = sum(v.agree for v in vs)
        pct = f"{100 * agree / len(vs):.1f}%" if vs else "-"
        print(f"| {label} | {len(vs)} | {sum(v.pods for v in vs)} | {agree} | {pct} |")
    print(f"refused by the API server's admission (not created) where placer refused: {len(admission)} scenarios")
    print(f"pods bound where placer placed: {sum(sum(1 for p in v.outcome.pods if p.node) for v in placed)}"
          f" of {sum(v.pods for v in placed)}; scheduler reasons seen where placer refused: "
          + ", ".join(f"{k} x{n}" for k, n in _reasons(refused).most_common(8)))
    print("coverage: " + ", ".join(f"{k} {n}" for k, n in sorted(feats.items())))
    for v in ok:
        for p in v.problems:
            print(f"DISAGREE {v.scenario} on {v.cluster}: {p}")
    for e in errors:
        print(f"ERROR {e}")


def _reasons(vs: list[Verdict]) -> Counter:
    """The scheduler's per-node reasons (`0/3 nodes are available: 1 Too many pods, 2 ...`)."""
    import re
    out: Counter = Counter()
    for v in vs:
        for p in v.outcome.unschedulable:
            text = (p.unschedulable or "").split(" preemption:")[0].rstrip(".")
            for part in text.split("available: ", 1)[-1].split(", "):
                out[re.sub(r"^\d+ (node\(s\) )?", "", part.strip())] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenarios", type=int, default=200)
    ap.add_argument("--spread", type=int, default=0, help="spread scenarios (over all the clusters)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--clusters", type=int, default=3)
    ap.add_argument("--names", help="the clusters' names, comma-separated (default fid0,fid1,...)")
    ap.add_argument("--dir", help="hack/kube-env directory to use (started if needed, left running)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for a placed workload's pods")
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args()
    why = unavailable()
    if why:
        sys.exit(f"fidelity: real control planes unavailable: {why}")
    names = args.names.split(",") if args.names else [f"fid{i}" for i in range(args.clusters)]
    directory = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="placer-fidelity-"))
    t0 = time.monotonic()
    env = KubeEnv.up(directory, names)
    print(f"control planes up in {time.monotonic() - t0:.0f} s ({directory})", file=sys.stderr)
    try:
        with tempfile.TemporaryDirectory() as work:
            pool = Pool(env.kubeconfig, names, load_catalog(), Path(work))
            pool.prepare(RUNTIME_CLASSES)
            feats: Counter = Counter()
            scenarios = [scenario(args.seed, i, feats) for i in range(args.scenarios)]

            def done(s: Scenario, v: Any) -> None:
                if not args.verbose:
                    return
                what = f"ERROR {v}"
                if isinstance(v, Verdict):
                    what = (f"{'places' if v.placer_fits else 'refuses'}, "
                            f"{'AGREE' if v.agree else 'DISAGREE'} {v.outcome.seconds:.1f}s")
                print(f"{s.name}: {s.workload['kind']} {what}", file=sys.stderr)

            if scenarios:
                t1 = time.monotonic()
                verdicts = pool.run(scenarios, timeout=args.timeout, done=done, keep_errors=True)
                report(verdicts, feats, time.monotonic() - t1, len(names))
            if args.spread:
                _spread(args, pool, Path(work))
    finally:
        if not args.dir:
            env.down()


def _spread(args: argparse.Namespace, pool: Pool, work: Path) -> None:
    import fidelity_spread as FS

    from tests.realkube.spread import run_all

    feats: Counter = Counter()
    scenarios = [FS.scenario(args.seed, i, pool.contexts, feats) for i in range(args.spread)]

    def done(s: Any, v: Any) -> None:
        if args.verbose:
            what = f"ERROR {v}" if isinstance(v, BaseException) else (
                f"{v.kind} {v.mode}: placer {[(x.cluster, x.replicas, x.bound, x.pods) for x in v.placer]} "
                f"totals {[(x.cluster, x.replicas, x.bound, x.pods) for x in v.totals]}")
            print(f"{s.name}: {what}", file=sys.stderr)

    t0 = time.monotonic()
    verdicts = run_all(scenarios, clusters=dict(zip(pool.contexts, pool.clusters)), kube=pool.kubes[0],
                       catalog=pool.catalog, namespace=pool.namespace, workdir=work, timeout=args.timeout,
                       done=done)
    FS.report(verdicts, feats, time.monotonic() - t0, len(pool.contexts))


if __name__ == "__main__":
    main()
