"""`placer plan`'s CPU split between the parent and its forked children (issue 24, placer on two
cores): `plan_files` in process on DATADIR's files (import included), the parent's CPU
(time.process_time), the reaped children's (RUSAGE_CHILDREN), the wall, the parent's waits
(`wait-load`, `wait-greedy` laps) and the load. Run it alternately in two trees; PLACER_SERIAL=0
forks even on a busy machine.

    PLACER_SERIAL=0 PYTHONPATH=TREE python benchmarks/fork_split.py WORKLOADS CLUSTERS.yaml
"""
import os
import resource
import sys
import time

t0, c0 = time.monotonic(), time.process_time()
import placer.ops.plan as OP  # noqa: E402

files, clusters = sys.argv[1], sys.argv[2]
plan = OP.plan_files([files], clusters=clusters).plan
wall, cpu = time.monotonic() - t0, time.process_time() - c0
children = resource.getrusage(resource.RUSAGE_CHILDREN)
laps = plan.summary.timings
waits = {k: round(v, 3) for k, v in laps.items() if k.startswith("wait-")}
print(f"parent_cpu={cpu:.3f} children_cpu={children.ru_utime + children.ru_stime:.3f} wall={wall:.3f} "
      f"waits={waits} load={os.getloadavg()[0]:.1f} gpus={plan.summary.gpus_placed}")
