"""CPU seconds (time.process_time) per phase of `placer plan`, in process, and a hash of the
plan's JSON without its timings: the figures of benchmarks/RESULTS.md's "Reading,
explanations and the time limit at 10,000 workloads". DATADIR holds `workloads/` and
`clusters.yaml` (e.g. written by `generate.write_manifests` / `write_clusters_file` with
benchmarks/plan.py's SCALE specs, seeds 2 and 1). The default time limit is 10,000 s: no
deadline, so the hash compares plans and reasons of two trees.

usage: PYTHONPATH=TREE python benchmarks/plan_cpu.py DATADIR [TIME_LIMIT]"""
import hashlib
import json
import sys
import time

from cpu_laps import cpu_clock

import placer.ops.context as CTX
import placer.ops.plan as OP
import placer.solve as S

P = time.process_time
cpu: dict[str, float] = {}


def wrap(mod, name, label):
    f = getattr(mod, name)

    def g(*a, **k):
        t = P()
        try:
            return f(*a, **k)
        finally:
            cpu[label] = cpu.get(label, 0.0) + P() - t
    setattr(mod, name, g)


wrap(OP, "_groups", "load")
wrap(OP, "_fleet", "fleet")
wrap(CTX, "resolve_clusters", "clusters")
wrap(CTX, "load_catalog", "catalog")


Clock = cpu_clock(S._Clock, cpu)
S._Clock = Clock
d = sys.argv[1]
tl = float(sys.argv[2]) if len(sys.argv) > 2 else 10000.0
t0, w0 = P(), time.monotonic()
r = OP.plan_files([d + "/workloads"], clusters=d + "/clusters.yaml", time_limit=tl)
total, wall = P() - t0, time.monotonic() - w0
t = P()
doc = r.plan.to_dict()
json.dumps(doc, sort_keys=True)
cpu["render"] = P() - t
sm = doc["summary"]
for k in ("solveSeconds", "timings"):
    sm.pop(k, None)
h = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
print(json.dumps({"cpu": {k: round(v, 3) for k, v in cpu.items()}, "total_cpu": round(total, 2), "wall": round(wall, 2),
                  "gpus": sm["gpusPlaced"], "limitHit": sm["timeLimitHit"], "status": sm["status"], "hash": h}))
