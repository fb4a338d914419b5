"""Interpretation throughput per workload type.

Generates N objects (default 10,000) spread over every type that has an example in
examples/, varying names, replica counts and GPU requests generically (a walk over the
object, no per-type code), then interprets each with the shipped catalog on one core.

Baseline, measured in the same run on the same objects: handing each object to jq and
back with the identity program, the floor cost of any jq-based interpretation. The
ratio column says how many of those the full interpretation costs.

Each type's objects are timed --repeat times (default 3), interleaving baseline and
interpretation, and the best pass of each is reported (as timeit does): on a shared,
noisy machine the fastest pass is the one least disturbed by other tenants.

    python benchmarks/interpret.py [--objects 10000] [--seed 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import jq
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from placer.catalog import load_catalog  # noqa: E402
from placer.interpret import interpret  # noqa: E402
from placer.manifests import read_documents  # noqa: E402


def seeds(catalog) -> dict[str, dict]:
    """One workload object per definition, from examples/."""
    out: dict[str, dict] = {}
    for doc in read_documents([str(ROOT / "examples")]):
        d = catalog.lookup(doc.obj["apiVersion"], doc.obj["kind"])
        if d is not None:
            out.setdefault(f"{doc.obj['kind']} ({doc.obj['apiVersion'].split('/')[-1]})", doc.obj)
    return out


def vary(obj: dict, i: int, rng: random.Random) -> dict:
    o = copy.deepcopy(obj)
    o["metadata"]["name"] = f"{obj['metadata']['name']}-{i}"

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("replicas", "minReplicas") and isinstance(v, int) and v > 0:
                    node[k] = rng.randint(1, 8)
                elif k == "nvidia.com/gpu":
                    node[k] = rng.choice([1, 2, 4, 8])
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(o)
    return o


def measure(fn, objs) -> float:
    start = time.perf_counter()
    for o in objs:
        fn(o)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="passes per type; the best is reported")
    args = ap.parse_args()
    catalog = load_catalog()
    rng = random.Random(args.seed)
    types = seeds(catalog)
    per_type = max(1, args.objects // len(types))
    identity = jq.compile(".")
    table = Table("type", "objects", "objects/s", "µs/object", "jq identity µs", "ratio", box=None)
    totals = defaultdict(float)
    slowest = None
    for name, seed in sorted(types.items()):
        objs = [vary(seed, i, rng) for i in range(per_type)]
        interpret(objs[0], catalog)                       # warm caches, fail early
        base = took = float("inf")
        for _ in range(max(1, args.repeat)):
            base = min(base, measure(lambda o: identity.input_value(o).first(), objs))
            took = min(took, measure(lambda o: interpret(o, catalog), objs))
        rate = per_type / took
        slowest = rate if slowest is None else min(slowest, rate)
        totals["objects"] += per_type
        totals["seconds"] += took
        table.add_row(name, str(per_type), f"{rate:,.0f}", f"{took / per_type * 1e6:.0f}",
                      f"{base / per_type * 1e6:.0f}", f"{took / base:.1f}x")
    table.add_row("all", f"{totals['objects']:.0f}", f"{totals['objects'] / totals['seconds']:,.0f}",
                  f"{totals['seconds'] / totals['objects'] * 1e6:.0f}", "", "")
    Console(width=120).print(table)
    print(f"slowest type: {slowest:,.0f} objects/s on one core (target >= 5,000); best of {args.repeat} passes")


if __name__ == "__main__":
    main()
