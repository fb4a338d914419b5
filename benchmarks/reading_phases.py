"""`placer plan`'s reading phases in process: catalog (built-ins, uncached), load (the files'
placement groups) and fleet (the clusters file's nodes), each repeated R times, best CPU seconds
(process_time), with digests of the groups and the fleet read (two trees that print the same read
the same), and per round the counts: jq compiles, fused-program runs, pod shapes read. Each round
starts as a fresh process would (compiled definitions and remembered shapes forgotten). What
issue 24 item 2 asks of everything before the solver; run in each tree alternately.

    PYTHONPATH=$PWD python benchmarks/reading_phases.py WORKLOADS_DIR CLUSTERS_FILE [R]
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import time
from typing import Any, Callable

import jq

from placer.definitions import catalog as K
from placer.definitions import interpret as I
from placer.definitions import pods as P
from placer.fleetview.view import read_fleet
from placer.inputs.manifests import load_groups
from placer.ops.context import Scope, open_context

BEST: dict[str, float] = {}
COUNTS: dict[str, int] = {}


def counted(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    def call(*a: Any, **k: Any) -> Any:
        COUNTS[name] = COUNTS.get(name, 0) + 1
        return f(*a, **k)
    return call


def timed(name: str, f: Callable[[], Any]) -> Any:
    t = time.process_time()
    value = f()
    BEST[name] = min(BEST.get(name, 9e9), time.process_time() - t)
    return value


def digest(value: Any) -> str:
    return hashlib.sha1(repr(value).encode()).hexdigest()[:10]


def main(workloads: str, clusters: str, rounds: int) -> None:
    jq.compile = counted("jq compiles", jq.compile)
    I._first = counted("program runs", I._first)
    if hasattr(P, "read_pod_shape"):
        P.read_pod_shape = counted("shapes read", P.read_pod_shape)
    else:                                                # a tree without the memory of shapes
        I.pod_shape = counted("shapes read", I.pod_shape)
    for _ in range(rounds):
        K._LAYERS.clear()                                # each round compiles the catalog again
        getattr(P, "_SHAPES", {}).clear()                # and reads every pod shape again
        COUNTS.clear()
        timed("catalog", lambda: K.load_catalog(()))
        ctx = timed("context", lambda: open_context(Scope(clusters=clusters)))
        groups = timed("load", lambda: load_groups([workloads], ctx.catalog, gpu_resources=ctx.gpu_resources))
        view = timed("fleet", lambda: read_fleet(ctx.entries, ctx.kube, ctx.catalog, gpu_resources=ctx.gpu_resources))
    total = BEST["catalog"] + BEST["load"] + BEST["fleet"]
    print(" ".join(f"{k}={v:.3f}" for k, v in BEST.items()), f"catalog+load+fleet={total:.3f}",
          f"groups={len(groups)} {digest(groups)} fleet {digest(dataclasses.replace(view.fleet, taken_at=None))}")
    print("per round:", ", ".join(f"{k} {v}" for k, v in sorted(COUNTS.items())))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
