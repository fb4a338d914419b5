"""Reading many files on two cores (issue 24): the later files read and interpreted in a forked
child (placer.model.forked) while the parent does the earlier ones.

The result is the serial one: documents and workloads come back in file order, and every
error is the serial run's, because whatever fails is done again serially: a failure in the
parent's part reads every file again in one process (the serial run raises the first error of
its first failing step: parsing every file, then -n, then interpretation, so an earlier step's
error in the child's part wins over the parent's), and a child that fails or dies has its part
read by the parent (the parent's part passed every step, so the first error is the child's).
Small inputs stay serial (the fork costs more than it earns). The programs of the kinds the
child's files name are compiled before the fork, so that the child inherits them instead of
compiling them a second time (about 0.1 s of its time on the 1k benchmark's 17 kinds).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from placer.definitions.catalog import Catalog
from placer.inputs.manifests import Batch, classify, expand_paths, groups_of, read_files
from placer.inputs.priority import PriorityClasses
from placer.model.forked import Child
from placer.model.podspec import DEFAULT_GPU_RESOURCES
from placer.model.workload import PlacementGroup

MIN_BYTES = 256 * 1024       # below, one process reads faster than two (the child's compiles, the fork)
# of the bytes: the parent also compiles the programs, scans the child's files, forks and
# unpickles the child's part. 0.68 balanced the CPU of the two sides on the 1k benchmark under
# load, but on a quiet machine it gained nothing there (1k: 1.51 s against 1.55 s, the same
# within the noise), and at 10,000 workloads the parent waited 2.8 s for the child (reading
# and waiting 5.2 s against 3.8 s serial; at 0.55, 2.9 s): the unpickling of a larger part
# costs the parent more than the reading it saves (benchmarks/RESULTS.md, seventh section)
CHILD_SHARE = 0.55
# the child is given up on (and its part read here) after this long: a hang is never waited out
TIMEOUT_FLOOR, TIMEOUT_FACTOR = 10.0, 10.0


@dataclass
class Reading:
    """How the files were read: `wait` seconds the parent waited for the child (None: serially)."""

    wait: float | None = None


def load_groups(paths: Sequence[str], catalog: Catalog, *, gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
                namespace: str | None = None, priority_classes: PriorityClasses | None = None,
                reading: Reading | None = None, waiting: Callable[[], None] | None = None,
                idle: Callable[[], None] | None = None) -> list[PlacementGroup]:
    """placer.inputs.manifests.load_groups, the later files read in a child when that pays;
    `reading` is told how long the parent waited, `waiting` is called before it waits, and
    `idle` (work that does not depend on the files) when the child is still working then."""
    files = expand_paths(paths)
    read = _reader(catalog, gpu_resources, namespace)
    cut = _cut(files)
    if cut:
        _compile_ahead(files[cut:], catalog)
    child = Child.start(lambda: read(files[cut:])) if cut else None
    if child is None:
        return groups_of(read(files), priority_classes)
    t = time.monotonic()
    try:
        try:
            mine = read(files[:cut])
        except Exception:
            child.stop()
            return groups_of(read(files), priority_classes)   # the serial run's error
        if waiting:
            waiting()
        if idle and child.working():
            idle()
        theirs = child.result(TIMEOUT_FLOOR + TIMEOUT_FACTOR * (time.monotonic() - t))
    finally:
        child.stop()                                          # Ctrl-C, or any error on the way
    if reading is not None:
        reading.wait = child.waited
    if theirs is None:
        theirs = read(files[cut:])                            # the child failed or died: done here
    return groups_of(_joined(mine, theirs), priority_classes)


# an `apiVersion` or `kind` field in YAML or JSON and its value (nested ones too, such as an
# owner reference's: at worst a program compiled that the files did not need); two patterns,
# each found by its literal start (one alternation scans 2-3 times slower)
_API = re.compile(rb'apiVersion"?[ \t]*:[ \t]*["\']?([A-Za-z0-9][-A-Za-z0-9./]*)')
_KIND = re.compile(rb'kind"?[ \t]*:[ \t]*["\']?([A-Za-z0-9]+)')


def _compile_ahead(files: Sequence[str], catalog: Catalog) -> None:
    """The programs of the catalog's kinds that `files` name, compiled here before the fork
    (a scan of their bytes: 5-10 ms for the 1k benchmark's child's 2.2 MB). A program that does
    not compile is left to the reading, which says so where the serial run does."""
    apis: set[bytes] = set()
    kinds: set[bytes] = set()
    for f in files:
        try:
            with open(f, "rb") as stream:
                data = stream.read()
        except OSError:
            return                                            # said by the reading
        apis.update(_API.findall(data))
        kinds.update(_KIND.findall(data))
    for (api, kind), compiled in catalog.by_gvk.items():
        if kind.encode() in kinds and api.encode() in apis:
            try:
                compiled.program
            except Exception:                                 # noqa: BLE001 (raised again where it is used)
                pass


def _reader(catalog: Catalog, gpu_resources: Sequence[str], namespace: str | None) -> Callable[[list[str]], Batch]:
    def read(files: list[str]) -> Batch:
        return classify(read_files(files, namespace=namespace), catalog, gpu_resources=gpu_resources)
    return read


def _cut(files: Sequence[str]) -> int:
    """Where the child's part starts (0: no child): at CHILD_SHARE of the bytes from the end."""
    if "-" in files:
        return 0                                              # stdin is read once, here
    sizes = []
    for f in files:
        try:
            sizes.append(os.stat(f).st_size)
        except OSError:
            return 0                                          # said by the serial run
    total = sum(sizes)
    if total < MIN_BYTES or len(files) < 2:
        return 0
    seen = 0
    for i, size in enumerate(sizes):
        if seen >= total * (1 - CHILD_SHARE):
            return i
        seen += size
    return len(files) - 1


def _joined(first: Batch, second: Batch) -> Batch:
    return Batch(first.workloads + second.workloads, first.companions + second.companions,
                 first.priority_classes + second.priority_classes)
