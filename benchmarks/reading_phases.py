"""`placer plan`'s reading phases in process: catalog (built-ins, uncached), load (the files'
placement groups) and fleet (the clusters file's nodes), each repeated R times, best CPU seconds
(process_time), with digests of the groups and the fleet read (two trees that print the same read
the same). What issue 24 item 2 asks of everything before the solver; run in each tree alternately.

    PYTHONPATH=$PWD python benchmarks/reading_phases.py WORKLOADS_DIR CLUSTERS_FILE [R]
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import time
from typing import Any, Callable

from placer.definitions import catalog as K
from placer.fleetview.view import read_fleet
from placer.inputs.manifests import load_groups
from placer.ops.context import Scope, open_context

BEST: dict[str, float] = {}


def timed(name: str, f: Callable[[], Any]) -> Any:
    t = time.process_time()
    value = f()
    BEST[name] = min(BEST.get(name, 9e9), time.process_time() - t)
    return value


def digest(value: Any) -> str:
    return hashlib.sha1(repr(value).encode()).hexdigest()[:10]


def main(workloads: str, clusters: str, rounds: int) -> None:
    for _ in range(rounds):
        K._LAYERS.clear()                                # each round compiles the catalog again
        timed("catalog", lambda: K.load_catalog(()))
        ctx = timed("context", lambda: open_context(Scope(clusters=clusters)))
        groups = timed("load", lambda: load_groups([workloads], ctx.catalog, gpu_resources=ctx.gpu_resources))
        view = timed("fleet", lambda: read_fleet(ctx.entries, ctx.kube, ctx.catalog, gpu_resources=ctx.gpu_resources))
    total = BEST["catalog"] + BEST["load"] + BEST["fleet"]
    print(" ".join(f"{k}={v:.3f}" for k, v in BEST.items()), f"catalog+load+fleet={total:.3f}",
          f"groups={len(groups)} {digest(groups)} fleet {digest(dataclasses.replace(view.fleet, taken_at=None))}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
