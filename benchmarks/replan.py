"""What a daemon planning round spends re-reading what is already placed.

Each round lists every placed object on every cluster and works out what capacity each
still has promised (`placer.actuate.promised`), interpreting every object. Between rounds
almost none of them change. Measured on N placed JobSets re-read as fresh objects each
round (as from the API server), with the daemon's `Interpreter` (which remembers
interpretations by content) against plain `interpret` in the same run.

    python benchmarks/replan.py [--placed 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placer import actuate as A  # noqa: E402
from placer.definitions.catalog import load_catalog  # noqa: E402
from placer.definitions.interpret import Interpreter  # noqa: E402
from tests.daemon.daemon_helpers import jobset  # noqa: E402


def placed_jobsets(n: int) -> dict[str, A.PlacedRef]:
    out = {}
    for i in range(n):
        o = jobset(f"job-{i}", pods=2, gpus=4)
        o["metadata"].update(uid=f"u{i}", resourceVersion=str(1000 + i), creationTimestamp="2026-12-02T10:00:00Z",
                             managedFields=[{"manager": "placer", "operation": "Apply"}])
        o["metadata"]["annotations"].update({A.WORKLOAD: f"staging/job-{i}", A.PLAN: "p1", A.PLACED_CLUSTER: "alpha"})
        o["status"] = {"replicatedJobsStatus": [{"name": "workers", "ready": 0, "active": 0}]}
        out[f"staging/job-{i}"] = A.PlacedRef("alpha", o)
    return out


def reread(placed: dict[str, A.PlacedRef]) -> dict[str, A.PlacedRef]:
    """A fresh list, as the next round reads it: new objects, same content."""
    return {k: A.PlacedRef(r.cluster, json.loads(json.dumps(r.object))) for k, r in placed.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--placed", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    catalog = load_catalog()
    rounds = [reread(placed_jobsets(args.placed)) for _ in range(args.rounds + 1)]
    remember = Interpreter(catalog)
    A.promised(rounds[0], {}, catalog, interpreter=remember)       # the first round fills it
    remember.sweep()
    plain, cached = [], []
    for r in rounds[1:]:                                              # alternate, best of each
        t = time.perf_counter()
        A.promised(r, {}, catalog)
        plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        A.promised(r, {}, catalog, interpreter=remember)
        cached.append(time.perf_counter() - t)
        remember.sweep()
    table = Table("placed workloads", "promised(), interpret (ms)", "promised(), Interpreter (ms)", "ratio",
                  "hits", "misses", box=None)
    table.add_row(str(args.placed), f"{min(plain) * 1e3:.0f}", f"{min(cached) * 1e3:.0f}",
                  f"{min(plain) / min(cached):.1f}x", str(remember.hits), str(remember.misses))
    Console(width=120).print(table)
    print(f"best of {args.rounds} rounds each")


if __name__ == "__main__":
    main()
