"""Interpretation throughput per workload type.

Generates N objects (default 10,000) spread over every type that has an example in
examples/, varying names, replica counts and GPU requests generically (a walk over the
object, no per-type code), then interprets each with the shipped catalog on one core.

Baseline, measured in the same run on the same objects: handing each object to jq and
back with the identity program, the floor cost of any jq-based interpretation. The
ratio column says how many of those the full interpretation costs. The last three
columns split one interpretation: jq parsing the JSON text (a program that outputs
nothing), jq evaluating the fused program beyond that, and Python (serialising, rows to
frozen values, quantities, gangs).

The run makes --repeat passes (default 3) over all types, timing baseline then
interpretation for each, and reports each type's best pass (as timeit does): on a shared,
noisy machine the fastest pass is the one least disturbed by other tenants, and spreading
a type's passes over the whole run keeps one slow stretch from marking down one type.

Karta rows: each type that a Workload Map (Karta) definition in --karta DIR (default: the
test Kartas in tests/fixtures/karta) also serves is interpreted a second time, on the same
objects, through that Karta (`prefer="karta"`); `vs built-in` is its time over the built-in
definition's, measured in the same run.

    python benchmarks/interpret.py [--objects 10000] [--seed 1] [--repeat 3] [--only TEXT ...] [--karta DIR]
                                   [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import jq
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from placer.definitions.catalog import load_catalog  # noqa: E402
from placer.definitions.interpret import interpret, jq_view, json_text  # noqa: E402
from placer.inputs.manifests import read_documents  # noqa: E402


def seeds(catalog) -> dict[str, dict]:
    """One workload object per definition, from examples/."""
    out: dict[str, dict] = {}
    for doc in read_documents([str(ROOT / "examples")]):
        d = catalog.lookup(doc.obj["apiVersion"], doc.obj["kind"])
        if d is not None:
            out.setdefault(f"{doc.obj['kind']} ({doc.obj['apiVersion'].split('/')[-1]})", doc.obj)
    return out


def vary(obj: dict, i: int, rng: random.Random) -> dict:
    o = copy.deepcopy(obj)
    o["metadata"]["name"] = f"{obj['metadata']['name']}-{i}"

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("replicas", "minReplicas") and isinstance(v, int) and v > 0:
                    node[k] = rng.randint(1, 8)
                elif k == "nvidia.com/gpu":
                    node[k] = rng.choice([1, 2, 4, 8])
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(o)
    return o


CLOCK = time.perf_counter


def measure(fn, objs) -> float:
    start = CLOCK()
    for o in objs:
        fn(o)
    return CLOCK() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="passes over all types; each type's best is reported")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="only the types whose name contains TEXT (repeatable)")
    ap.add_argument("--karta", default=str(ROOT / "tests" / "fixtures" / "karta"), metavar="DIR",
                    help="Kartas to time beside the built-in definitions ('' for none)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this process's CPU time (time.process_time), steadier on a loaded machine")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    catalog = load_catalog()
    kartas = load_catalog([args.karta], prefer="karta") if args.karta else None
    rng = random.Random(args.seed)
    types = {k: v for k, v in seeds(catalog).items() if not args.only or any(t in k for t in args.only)}
    per_type = max(1, args.objects // len(types))
    identity = jq.compile(".")
    table = Table("type", "objects", "objects/s", "µs/object", "jq identity µs", "ratio",
                  "jq parse µs", "jq eval µs", "python µs", "vs built-in", box=None)
    objects = {name: [vary(seed, i, rng) for i in range(per_type)] for name, seed in sorted(types.items())}
    served = {name: catalog for name in objects}
    for name, objs in list(objects.items()):
        d = kartas.lookup(objs[0]["apiVersion"], objs[0]["kind"]) if kartas else None
        if d is not None and d.format == "karta":
            objects[f"{name} karta {d.name}"] = objs       # the same objects, through the Karta
            served[f"{name} karta {d.name}"] = kartas
    for name, objs in objects.items():
        interpret(objs[0], served[name])                  # warm caches, fail early
    nothing = jq.compile("null")                          # jq parsing the input, and no more
    parts = ("identity", "interpret", "parse", "program")
    best = {part: defaultdict(lambda: float("inf")) for part in parts}
    for _ in range(max(1, args.repeat)):                  # passes over every type, so each type's
        for name, objs in objects.items():                # best comes from across the whole run
            cat = served[name]
            program = cat.lookup(objs[0]["apiVersion"], objs[0]["kind"]).program
            runs = {"identity": lambda o: identity.input_value(o).first(),
                    "interpret": lambda o, cat=cat: interpret(o, cat),
                    "parse": lambda o: nothing.input_text(json_text(jq_view(o))).first(),
                    "program": lambda o: program.input_text(json_text(jq_view(o))).first()}
            for part, fn in runs.items():
                best[part][name] = min(best[part][name], measure(fn, objs))
    base = best["identity"]
    totals = defaultdict(float)
    slowest = None
    for name in objects:
        took = best["interpret"][name]
        parse, program = best["parse"][name], best["program"][name]
        rate = per_type / took
        builtin = name.split(" karta ")[0]
        if builtin == name:                               # the floor and totals: built-in rows
            slowest = rate if slowest is None else min(slowest, rate)
            totals["objects"] += per_type
            totals["seconds"] += took
        versus = f"{took / best['interpret'][builtin]:.2f}x" if builtin != name else ""
        table.add_row(name, str(per_type), f"{rate:,.0f}", f"{took / per_type * 1e6:.0f}",
                      f"{base[name] / per_type * 1e6:.0f}", f"{took / base[name]:.1f}x",
                      *(f"{t / per_type * 1e6:.0f}" for t in (parse, program - parse, took - program)), versus)
    table.add_row("all", f"{totals['objects']:.0f}", f"{totals['objects'] / totals['seconds']:,.0f}",
                  f"{totals['seconds'] / totals['objects'] * 1e6:.0f}", "", "", "", "", "", "")
    Console(width=160).print(table)
    print(f"slowest type: {slowest:,.0f} objects/s on one core (target >= 5,000); best of {args.repeat} passes")


if __name__ == "__main__":
    main()
