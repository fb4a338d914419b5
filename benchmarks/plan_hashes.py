"""Every benchmarks/plan.py scenario solved without a deadline: the hashes of the plan's placements
and of its unplaced entries with their reasons, GPUs/groups per priority level, CPU seconds, phases.
Two trees that print the same hashes made the same plan and said the same reasons; no wall clock
cuts anything (time_limit=1000), so the comparison holds on a loaded machine.

    PYTHONPATH=$PWD python benchmarks/plan_hashes.py [--parallel] [SCENARIO ...]      # run in each tree

--parallel: as `placer plan` solves, a contender baseline in a forked child (placer.solve.baselines;
the phases then show a wait-greedy lap); the hashes must be the serial run's.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from plan import GPU, GPU_NAMES, SCENARIOS, make_fleet, make_workloads, plan_levels  # noqa: E402

from placer import solve as S  # noqa: E402


def digest(data) -> str:
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:10]


def main(names: list[str], parallel: bool = False) -> None:
    for name in names or list(SCENARIOS):
        fspec, mspec = SCENARIOS[name]
        gpus = GPU_NAMES.get(name, (GPU,))
        fleet, groups = make_fleet(fspec, seed=1), make_workloads(mspec, seed=2)
        start = time.process_time()
        plan = S.solve(fleet, groups, time_limit=1000.0, gpu_resources=gpus, parallel=parallel)
        cpu = time.process_time() - start
        out = plan.to_dict()
        levels = plan_levels(fleet, groups, plan, gpus)
        per_level = " ".join(f"{p}:{levels[p][0]}/{levels[p][1]}" for p in sorted(levels, reverse=True))
        phases = " ".join(f"{k}={v:.2f}" for k, v in plan.summary.timings.items())
        print(f"{name:20s} cpu {cpu:6.2f} status {plan.summary.status:8s} gpus {plan.summary.gpus_placed} "
              f"plan {digest(out['placements'])} reasons {digest(out['unplaced'])} | {per_level} | {phases}",
              flush=True)


if __name__ == "__main__":
    main([a for a in sys.argv[1:] if a != "--parallel"], "--parallel" in sys.argv)
