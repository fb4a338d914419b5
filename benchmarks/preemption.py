"""The daemon's preemption decision (placer.solve.preemption) on a full fleet: how long one
decision takes, and what it takes out.

    python3 benchmarks/preemption.py [--clusters 20] [--nodes 8]

Every node (8 GPUs) of every cluster holds two running 4-GPU jobs of quota red (priority 0);
one 8-GPU job of quota blue (priority 10) arrives. With quotas (red and blue nominal half the
fleet each, cohort lab: red borrows all of blue's) the policy is reclaim; without, priority.
The fewest GPUs that let it in are the two jobs on one node (8 GPUs). Timed: the decision
alone, its 2 s deadline (the daemon's --time-limit) as in the daemon.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from placer.solve import solve  # noqa: E402
from placer.solve.preemption import preemptions  # noqa: E402
from tests.builders import fleet, group, wl  # noqa: E402
from tests.solve import oracle_quota as OQ  # noqa: E402
from tests.solve.test_preemption import _running  # noqa: E402


def run(clusters: int, nodes: int, quotas: bool) -> dict:
    f = fleet(*(f"c{i}: {nodes}x8" for i in range(clusters)))
    total = clusters * nodes * 8
    qs = [OQ.Q("red", ("red",), total // 2, None, "lab"), OQ.Q("blue", ("blue",), total // 2, None, "lab")] \
        if quotas else []
    victims = [group(wl(f"red/v{i}", "1x4", prio=0)) for i in range(total // 4)]
    loaded, _, eligible = _running(replace(f, quotas=OQ.to_yaml_quotas(qs)) if qs else f, qs, victims)
    arrivals = [group(wl("blue/a", "1x8", prio=10))]
    plan = solve(loaded, arrivals, time_limit=20, workers=1)
    t0 = time.perf_counter()
    got = preemptions(loaded, arrivals, plan, "reclaim" if quotas else "priority", eligible,
                      deadline=time.monotonic() + 2.0)
    took = time.perf_counter() - t0
    return {"clusters": clusters, "nodes": nodes, "quotas": quotas, "eligible": len(eligible),
            "seconds": round(took, 3), "victims": len(got[0].victims) if got else 0,
            "gpus": got[0].gpus if got else 0, "rule": got[0].rule if got else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=8)
    a = ap.parse_args()
    for clusters, nodes in ((2, 4), (a.clusters, a.nodes)):
        for quotas in (True, False):
            print(run(clusters, nodes, quotas))


if __name__ == "__main__":
    main()
