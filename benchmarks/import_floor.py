"""The import floor of `placer plan`, in two or more trees, alternately, N rounds (issue 24).

Per round and tree, in fresh interpreters: the CPU seconds of the process `python -c pass` (the
interpreter and site, whatever this machine's site-packages runs at start); then, measured inside
the child around the import statements, `import placer.cli`, `placer.ops.plan` with it (what
`placer plan` imports before its first line of work) and the LP bound's `pywraplp`, alone and
after `placer.cli`;
then one `python -X importtime -m placer plan --dry-run -o json` of the given files: the sum of
every import the plan made, lazy ones included (the LP bound's, CP-SAT's), the module count, and
whether CP-SAT's native layer was loaded. Best and median per tree, the ratio to the first tree
(measured in the same run), and the top modules by self and cumulative import time (best of
the rounds). Markdown for benchmarks/RESULTS.md.

    python benchmarks/import_floor.py --tree base=/path/a --tree branch=/path/b \
        [-f WL --clusters C.yaml] [--rounds 5] [--top 15]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
from collections import defaultdict

# name -> (imported first, measured): the process CPU of the measured imports, in the child
PROBES = {"import placer.cli": ("", "placer.cli"),
          "+ placer.ops.plan": ("", "placer.cli, placer.ops.plan"),
          # with the LP bound's pywraplp: every module a plan settled without a CP-SAT model imports
          # (1,000 on 10,000 nodes: checked against sys.modules after such a plan)
          "+ pywraplp (LP bound)": ("", "placer.cli, placer.ops.plan, ortools.linear_solver.pywraplp"),
          # what `placer plan` itself imports: its command module (with every other command's
          # before i27-import, whose placer.cli loads the named command only), the plan, the LP bound
          "placer.cli.plan + ops.plan + pywraplp": ("", "placer.cli.plan, placer.ops.plan, "
                                                        "ortools.linear_solver.pywraplp"),
          "placer.ops.plan after placer.cli": ("placer.cli", "placer.ops.plan"),
          "both after placer.cli": ("placer.cli", "placer.ops.plan, ortools.linear_solver.pywraplp")}
CP_SAT = "ortools.sat.python.cp_model_helper"
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def _run(cmd: list[str], tree: str) -> tuple[float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, cwd=tree, env={**os.environ, "PYTHONPATH": tree}, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def importtime(text: str) -> dict[str, tuple[int, int, int]]:
    """module -> (self us, cumulative us, depth) from `-X importtime` lines."""
    return {m[4]: (int(m[1]), int(m[2]), len(m[3])) for m in map(LINE.match, text.splitlines()) if m}


def _probe(tree: str, first: str, measured: str) -> float:
    code = (f"import time\n{'import ' + first if first else ''}\nt = time.process_time()\n"
            f"import {measured}\nprint(time.process_time() - t)")
    return float(_run([sys.executable, "-c", code], tree)[1].stdout)


def one_round(tree: str, args) -> tuple[dict[str, float], dict[str, tuple[int, int, int]]]:
    row = {"python -c pass (process)": _run([sys.executable, "-c", "pass"], tree)[0]}
    row.update({name: _probe(tree, *imports) for name, imports in PROBES.items()})
    if not args.f:
        return {**row, "load 1m": os.getloadavg()[0]}, {}
    cmd = [sys.executable, "-X", "importtime", "-m", "placer", "plan", "--dry-run", "-f", args.f,
           "--clusters", args.clusters, "-o", "json"]
    cpu, done = _run(cmd, tree)
    if done.returncode not in (0, 3):
        raise SystemExit(f"{tree}: plan exit {done.returncode}: {done.stderr.strip()[-300:]}")
    mods = importtime(done.stderr)
    row["plan CPU (importtime on)"] = cpu
    row["plan: all imports"] = sum(c for _, c, d in mods.values() if d == 1) / 1e6
    row["plan: modules"] = len(mods)
    row["plan: CP-SAT loaded"] = float(CP_SAT in mods)
    row["load 1m"] = os.getloadavg()[0]
    return row, mods


def _table(rows: dict[str, list[dict[str, float]]]) -> None:
    names = list(rows)
    keys = [k for k in next(iter(rows.values()))[0] if k != "load 1m"]
    print("| measure | " + " | ".join(f"{n} best | {n} median" for n in names)
          + "".join(f" | {n}/{names[0]} (best)" for n in names[1:]) + " |")
    print("|---" * (1 + 2 * len(names) + len(names) - 1) + "|")
    for k in keys:
        best = {n: min(r[k] for r in rows[n]) for n in names}
        med = {n: statistics.median(r[k] for r in rows[n]) for n in names}
        ratios = "".join(f" | {best[n] / best[names[0]]:.2f}" if best[names[0]] else " | -" for n in names[1:])
        print(f"| {k} | " + " | ".join(f"{best[n]:.3f} | {med[n]:.3f}" for n in names) + ratios + " |")
    loads = [r["load 1m"] for n in names for r in rows[n]]
    print(f"\nload 1m during the rounds: {min(loads):.1f}-{max(loads):.1f}")


def _top(name: str, runs: list[dict[str, tuple[int, int, int]]], top: int) -> None:
    selfs, cums = defaultdict(list), defaultdict(list)
    for mods in runs:
        for m, (s, c, _) in mods.items():
            selfs[m].append(s)
            cums[m].append(c)
    print(f"\n{name}: top {top} imports of the plan, best of {len(runs)} (ms)\n")
    print("| by self | self | cumulative | by cumulative | self | cumulative |\n|---|---|---|---|---|---|")
    by_self = sorted(selfs, key=lambda m: -min(selfs[m]))[:top]
    by_cum = sorted(cums, key=lambda m: -min(cums[m]))[:top]
    for a, b in zip(by_self, by_cum):
        print(f"| {a} | {min(selfs[a]) / 1e3:.1f} | {min(cums[a]) / 1e3:.1f} "
              f"| {b} | {min(selfs[b]) / 1e3:.1f} | {min(cums[b]) / 1e3:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH, in the order run")
    ap.add_argument("-f", help="workloads to plan under -X importtime (without: the probes only)")
    ap.add_argument("--clusters")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    trees = [(n, os.path.abspath(p)) for n, p in (t.split("=", 1) for t in args.tree)]
    rows: dict[str, list[dict[str, float]]] = {n: [] for n, _ in trees}
    times: dict[str, list[dict[str, tuple[int, int, int]]]] = {n: [] for n, _ in trees}
    for _ in range(args.rounds):
        for name, tree in trees:                   # interleaved: the load drifts alike for all
            row, mods = one_round(tree, args)
            rows[name].append(row)
            times[name].append(mods)
    print("CPU seconds (a count for modules; 1 = loaded for CP-SAT)\n")
    _table(rows)
    for name, _ in trees if args.f else ():
        _top(name, times[name], args.top)


if __name__ == "__main__":
    main()
