"""Spread scenarios of the scheduler fidelity benchmark (issue 21): `python3 benchmarks/fidelity.py
--spread N` (with `--scenarios 0` for spread alone).

Each scenario is one `placer.dev/spread` workload over all the benchmark's clusters: a Deployment,
StatefulSet or LeaderWorkerSet divided (weights on two or three clusters, or `spread-clusters`, or
neither), or duplicated onto 2 clusters. The nodes are of 4 or 8 GPUs, most with pods already bound
that leave 1 to 3 GPUs free, so that cluster totals promise more than the nodes hold. placer's shares and
a cluster-totals division (Nova/Karmada-like, tests/realkube/spread.py) are each forced onto the
real clusters in turn, and the real kube-scheduler binds what it can; per share: pods planned
against pods bound (placer must bind 100%).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Sequence

from tests.realkube import manifests as M
from tests.realkube.cluster import BoundPod, NodeSpec
from tests.realkube.spread import Share, SpreadScenario, SpreadVerdict

GPU = "nvidia.com/gpu"


def _nodes(rng: random.Random, prefix: str) -> tuple[tuple[NodeSpec, ...], tuple[BoundPod, ...]]:
    nodes, bound = [], []
    for i in range(rng.randint(3, 6)):
        gpus = rng.choice([4, 8, 8])
        nodes.append(NodeSpec(f"{prefix}{i}", {"cpu": "32", "memory": "128Gi", "pods": "110", GPU: str(gpus)}))
        if rng.random() < 0.85:                  # partly used: 1 to 3 GPUs left (small blocks)
            used = gpus - rng.randint(1, 3)
            bound.append(BoundPod(f"{prefix}old{i}", f"{prefix}{i}", {"cpu": "100m", GPU: str(used)}))
    return tuple(nodes), tuple(bound)


def _spec(gpus: int) -> dict[str, Any]:
    return M.pod_spec({"cpu": "100m", "memory": "64Mi", GPU: str(gpus)})


def scenario(seed: int, index: int, contexts: Sequence[str], feats: Counter) -> SpreadScenario:
    rng = random.Random(f"spread/{seed}/{index}")
    name = f"sp{index}"
    nodes, bound = {}, {}
    for k, ctx in enumerate(contexts):
        nodes[ctx], bound[ctx] = _nodes(rng, f"{name}-{'abcdefgh'[k]}")
    kind = rng.choice(["Deployment", "Deployment", "StatefulSet", "LeaderWorkerSet"])
    gpus = rng.choice([1, 2, 2, 4, 4])
    if kind == "LeaderWorkerSet":
        obj = M.leaderworkerset(name, rng.randint(2, 4), 2, _spec(gpus))
    elif kind == "StatefulSet":
        obj = M.statefulset(name, rng.randint(3, 8), _spec(gpus))
    else:
        obj = M.deployment(name, rng.randint(4, 10), _spec(gpus))
    ann = {"placer.dev/spread": "divide"}
    roll = rng.random()
    if roll < 0.2:
        ann = {"placer.dev/spread": "duplicate", "placer.dev/spread-clusters": "2"}
        if kind != "LeaderWorkerSet":
            obj["spec"]["replicas"] = rng.randint(1, 3)
    elif roll < 0.65:
        chosen = rng.sample(list(contexts), rng.randint(2, len(contexts)))
        ann["placer.dev/spread-weights"] = ",".join(f"{c}={rng.randint(1, 3)}" for c in chosen)
    elif roll < 0.8:
        ann["placer.dev/spread-clusters"] = "2"
    obj["metadata"]["annotations"] = ann
    policy = ann["placer.dev/spread"] + (" weights" if "placer.dev/spread-weights" in ann else "") + (
        " clusters" if "placer.dev/spread-clusters" in ann else "")
    feats[f"{kind} {policy}"] += 1
    return SpreadScenario(name, nodes, obj, bound)


def _row(label: str, sent: list[tuple[Share, ...]], total: int) -> str:
    shares = [s for x in sent for s in x]
    pods, bound = sum(s.pods for s in shares), sum(s.bound for s in shares)
    pending = sum(1 for s in shares if not s.all_bound)
    whole = sum(1 for x in sent if all(s.all_bound for s in x))
    pct = f"{100 * bound / pods:.1f}%" if pods else "-"
    return f"| {label} | {len(sent)} of {total} | {whole} | {len(shares)} | {pending} | {pods} | {bound} | {pct} |"


def report(verdicts: list[SpreadVerdict | BaseException], feats: Counter, seconds: float, clusters: int) -> None:
    ok = [v for v in verdicts if isinstance(v, SpreadVerdict)]
    errors = [e for e in verdicts if not isinstance(e, SpreadVerdict)]
    print(f"\n# spread fidelity: {len(verdicts)} spread workloads over {clusters} real control planes "
          f"in {seconds:.0f} s (both plans forced in turn)")
    print("| plan | workloads sent | every pod bound | shares sent | shares with a pod not bound | pods sent "
          "| pods bound | bound |")
    print("|---|---|---|---|---|---|---|---|")
    for mode in ("divide", "duplicate", None):
        vs = [v for v in ok if mode is None or v.mode == mode]
        what = mode or "all"
        print(_row(f"placer, {what}", [v.placer for v in vs if v.placer], len(vs)))
        print(_row(f"cluster totals (Nova/Karmada-like), {what}", [v.totals for v in vs if v.totals], len(vs)))
    both = [v for v in ok if v.placer and v.totals]
    moved = sum(1 for v in both if {s.cluster: s.replicas for s in v.placer} != {s.cluster: s.replicas for s in v.totals})
    print(f"sent by both: {len(both)}; shares differ in {moved}. placer leaves unplaced: "
          f"{sum(1 for v in ok if not v.placer)} (the totals send {sum(1 for v in ok if not v.placer and v.totals)} "
          f"of them, {sum(1 for v in ok if not v.placer and v.totals and all(s.all_bound for s in v.totals))} "
          "binding every pod)")
    print("coverage: " + ", ".join(f"{k} {n}" for k, n in sorted(feats.items())))
    for v in ok:
        for s in v.placer:
            if not s.all_bound:
                print(f"PLACER SHARE NOT BOUND {v.scenario} {v.kind} on {s.cluster}: {s.bound}/{s.pods} "
                      f"{s.pending[:1]}")
        if not v.placer and v.totals and all(s.all_bound for s in v.totals):
            print(f"PLACER REFUSED WHAT THE TOTALS BOUND {v.scenario} {v.kind}: {v.placer_reason}")
    for e in errors:
        print(f"ERROR {e}")
