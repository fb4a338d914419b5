"""What `placer plan` costs outside its laps (issue 24, i28-exit), in one or more trees, interleaved:

    python benchmarks/outside_laps.py end ROUNDS TREE... -- PLAN ARGS   # last atexit handler -> exit seen
    python benchmarks/outside_laps.py rss ROUNDS TREE... -- PLAN ARGS   # wall, CPU, peak RSS, GPUs
    python benchmarks/outside_laps.py gc TREE -- PLAN ARGS              # the collector's collections

`end`: from the process's last atexit handler (registered first, so run last) to the parent seeing it
exit: Python's teardown, or the hard exit's. `rss`: the run's wall, its CPU with its forked child's
(RUSAGE_CHILDREN of a fresh measuring process), the process's own peak RSS, the placed GPUs (give
`-o json`). `gc`: collections per (generation, gen-0 threshold), the objects they freed and the
seconds inside them (`gc.callbacks`). Set PLACER_SERIAL=1 for runs without the forked child.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time

END = """import atexit, os, runpy, sys, time
atexit.register(lambda: os.write(2, f"LAST {time.monotonic()}\\n".encode()))
sys.argv = ['placer'] + sys.argv[1:]
runpy.run_module('placer', run_name='__main__')
"""
RSS = """import atexit, resource, runpy, sys
atexit.register(lambda: print('maxrss_kb=%d' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))
sys.argv = ['placer'] + sys.argv[1:]
runpy.run_module('placer', run_name='__main__')
"""
GC = """import atexit, gc, runpy, sys, time
stats, t0 = {}, [0.0]
def counted(phase, info):
    if phase == 'start':
        t0[0] = time.perf_counter()
        return
    s = stats.setdefault((info['generation'], gc.get_threshold()[0]), [0, 0, 0.0])
    s[0] += 1; s[1] += info['collected']; s[2] += time.perf_counter() - t0[0]
gc.callbacks.append(counted)
atexit.register(lambda: [print('GC gen %d threshold %d: %d collections, %d freed, %.3f s' % (*k, *v), file=sys.stderr)
                         for k, v in sorted(stats.items())])
sys.argv = ['placer'] + sys.argv[1:]
runpy.run_module('placer', run_name='__main__')
"""


def _run(probe: str, tree: str, args: list[str], stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", probe, *args], cwd=tree, env={**os.environ, "PYTHONPATH": tree},
                          stdout=stdout, stderr=subprocess.PIPE, text=True)


def end(rounds: int, trees: list[str], args: list[str]) -> None:
    got: dict[str, list[float]] = {t: [] for t in trees}
    for _ in range(rounds):
        for t in trees:
            with open(os.devnull, "w") as out:
                done = _run(END, t, args, stdout=out)
            seen = time.monotonic()
            last = next(x for x in done.stderr.splitlines() if x.startswith("LAST "))
            got[t].append(seen - float(last.split()[1]))
    for t, v in got.items():
        print(f"{t}: median {statistics.median(v):.3f} s, {min(v):.3f}-{max(v):.3f} ({', '.join(f'{x:.3f}' for x in v)})")
    print(f"load {os.getloadavg()[0]:.1f}")


def rss(rounds: int, trees: list[str], args: list[str]) -> None:
    print("| round | tree | load 1m | wall s | CPU s | peak MiB | exit | placed GPUs |\n|---|---|---|---|---|---|---|---|")
    for r in range(1, rounds + 1):
        for t in trees:
            load = os.getloadavg()[0]
            pid = os.fork()
            if pid == 0:                      # a fresh process: its RUSAGE_CHILDREN is this run's
                wall = time.monotonic()
                done = _run(RSS, t, args)
                wall = time.monotonic() - wall
                use = resource.getrusage(resource.RUSAGE_CHILDREN)
                peak = int(next(x for x in done.stderr.splitlines() if x.startswith("maxrss_kb=")).split("=")[1])
                gpus = json.loads(done.stdout)["summary"]["gpusPlaced"] if done.stdout.startswith("{") else "-"
                print(f"| {r} | {t} | {load:.1f} | {wall:.2f} | {use.ru_utime + use.ru_stime:.2f} | {peak / 1024:.0f} | "
                      f"{done.returncode} | {gpus} |", flush=True)
                os._exit(0)
            os.waitpid(pid, 0)


def main() -> None:
    mode, rest = sys.argv[1], sys.argv[2:]
    cut = rest.index("--")
    head, args = rest[:cut], rest[cut + 1:]
    if mode == "gc":
        done = _run(GC, head[0], args, stdout=subprocess.DEVNULL)
        print("\n".join(x for x in done.stderr.splitlines() if x.startswith("GC ")))
    else:
        {"end": end, "rss": rss}[mode](int(head[0]), head[1:], args)


if __name__ == "__main__":
    main()
