"""`placer plan --dry-run -o json --timings` end to end in two or more trees, alternately, N rounds:
wall and CPU seconds of the child, the import floor (`python -c "import placer.cli"`, best of 3)
and the load beside each run, the timings line, and a hash of the output without its summary (the
same hash: the same plan and reasons). A markdown table for benchmarks/RESULTS.md.

    python benchmarks/interleave.py --tree base=/path/a --tree branch=/path/b -f WL --clusters C.yaml \
        [--rounds 2] [-- EXTRA PLAN FLAGS]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], tree: str) -> tuple[float, float, subprocess.CompletedProcess]:
    wall, cpu = time.monotonic(), child_cpu()
    done = subprocess.run(cmd, cwd=tree, env={**os.environ, "PYTHONPATH": tree}, capture_output=True, text=True)
    return time.monotonic() - wall, child_cpu() - cpu, done


def import_floor(tree: str) -> tuple[float, float]:
    return min(timed([sys.executable, "-c", "import placer.cli"], tree)[:2] for _ in range(3))


def row(round_: int, name: str, tree: str, args) -> str:
    floor = import_floor(tree)
    load = os.getloadavg()[0]
    cmd = [sys.executable, "-m", "placer", "plan", "--dry-run", "-f", args.f, "--clusters", args.clusters,
           "-o", "json", "--timings", *args.extra]
    wall, cpu, done = timed(cmd, tree)
    if done.returncode not in (0, 3):
        return f"| {round_} | {name} | {load:.1f} | exit {done.returncode}: {done.stderr.strip()[-200:]} |"
    out = json.loads(done.stdout)
    summary = out.pop("summary")
    digest = hashlib.sha1(json.dumps(out, sort_keys=True).encode()).hexdigest()[:10]
    timings = next((x for x in done.stderr.splitlines() if x.startswith("timings:")), "").removeprefix("timings: ")
    return (f"| {round_} | {name} | {load:.1f} | {floor[0]:.2f}/{floor[1]:.2f} | {wall:.2f} | {cpu:.2f} | "
            f"{done.returncode} | {timings} | {summary['gpusPlaced']} | {summary['status']} | {digest} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH, in the order run")
    ap.add_argument("-f", required=True)
    ap.add_argument("--clusters", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("extra", nargs="*")
    args = ap.parse_args()
    trees = [t.split("=", 1) for t in args.tree]
    print("| round | tree | load 1m | import floor wall/CPU s | wall s | CPU s | exit | timings | GPUs | status "
          "| output hash |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
        for name, tree in trees:
            print(row(round_, name, os.path.abspath(tree), args), flush=True)


if __name__ == "__main__":
    main()
