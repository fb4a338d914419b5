"""The smallest change the options search (placer.solve.options) can prove: the fewest
workloads to take out, the fewest nodes to add. Each candidate is judged by callables the
search passes in: `cheap` (capacity arithmetic, free) and `works` (a counted re-solve, which
raises `Stop` when the budget or the deadline ends the search). Each function returns what
it proved and why it stopped short (None: it did not)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from placer.model.fleet import Cluster
from placer.solve.changes import NewNode, Victim
from placer.solve.fits import PodKind, first_true
from placer.solve.removal import Kind, fewest
from placer.solve.resolve import Stop

EXACT_MAX_CANDIDATES = 10      # up to this many, removal sets are enumerated exactly

Check = Callable[[Sequence["Cand"]], bool]
Cut = str | None
# a shape for new nodes: (lower bound, upper bound, order, shape), by the arithmetic
Shape = tuple[int, int, int, NewNode]


@dataclass(frozen=True)
class Cand:
    """A candidate to take out: a planned group, or one running workload (and its promise)."""

    victims: tuple[Victim, ...]
    gpus: int
    drop: frozenset[str]                          # held group keys it takes out
    contrib: Mapping[str, Mapping[str, int]]      # node -> what taking it out frees there
    name: str

    @property
    def priority(self) -> int:
        return max(v.priority for v in self.victims)


def removal_order(s: Sequence[Cand]) -> tuple:
    """Fewest GPUs, then fewest workloads, then the lowest priorities (as the kube-scheduler
    picks victims), then names."""
    return (sum(c.gpus for c in s), len(s), sorted((c.priority for c in s), reverse=True), [c.name for c in s])


def minimal_removal(cands: Sequence[Cand], cheap: Check, works: Check,
                    model: Callable[[], tuple[list[Cand] | None, Cut]],
                    order: Callable[[Sequence[Cand]], Any] = removal_order) -> tuple[Sequence[Cand] | None, Cut]:
    """The smallest removal set that re-solves: the node-level model's pick, proven by
    one re-solve; failing that, exactly over every subset (few candidates, the first by
    `order`), else by shrinking the set of all. A `Stop` proving the set of all is not caught."""
    try:
        pick, cut = model()
        if pick and cheap(pick) and works(pick):
            return pick, cut
    except Stop as stop:
        return None, stop.why
    if not works(cands):
        return None, None
    if len(cands) <= EXACT_MAX_CANDIDATES:
        return _exact(cands, cheap, works, order)
    return _shrunk(cands, cheap, works)


def _exact(cands: Sequence[Cand], cheap: Check, works: Check,
           order: Callable[[Sequence[Cand]], Any] = removal_order) -> tuple[Sequence[Cand], Cut]:
    """The first subset by `order` that works; else all of them. A budget cut keeps the
    proven set, said incomplete."""
    subsets = [s for k in range(1, len(cands)) for s in itertools.combinations(cands, k)]
    subsets.sort(key=order)
    try:
        for s in subsets:
            if cheap(s) and works(s):
                return s, None
    except Stop as stop:
        return cands, stop.why
    return cands, None


def _shrunk(cands: Sequence[Cand], cheap: Check, works: Check) -> tuple[Sequence[Cand], Cut]:
    """Shrink by arithmetic alone (free), the least wanted victims leaving first (most GPUs,
    highest priority, last name), and re-solve what is left: usually it works, and it is
    irreducible (taking any one out fails the arithmetic). Else shrink the set of all one
    by one, re-solving each step. A budget cut keeps the proven set, said incomplete."""
    best: Sequence[Cand] = cands
    try:
        wanted = sorted(cands, key=lambda c: (c.gpus, c.priority, c.name), reverse=True)
        lean = list(cands)
        for c in wanted:
            trial = [x for x in lean if x is not c]
            if trial and cheap(trial):
                lean = trial
        if len(lean) < len(cands) and works(lean):
            return lean, None
        for c in wanted:
            trial = [x for x in best if x is not c]
            if trial and cheap(trial) and works(trial):
                best = trial
    except Stop as stop:
        return best, stop.why
    return best, None


def fewest_removal(cl: Cluster, parts: Sequence[PodKind], usable: Mapping[str, frozenset[int]],
                   held: Mapping[str, Mapping[str, int]], cands: Sequence[Cand]) -> tuple[list[Cand] | None, Cut]:
    """The removal set of fewest GPUs (then fewest workloads, then lowest priorities) by
    the node-level model of placer.solve.removal; None when it finds none."""
    by_name = {n.name: n for n in cl.nodes}
    res = {r for p in parts for r in p.demand}
    room, unlimited = {}, {}
    for name in usable:
        node = by_name[name]
        room[name] = {r: node.allocatable.get(r, 0) - held[name].get(r, 0) for r in res}
        unlimited[name] = frozenset({"pods"} - set(node.allocatable))
    # nodes where not even taking every candidate out makes room for one pod stay out
    full = {n: {r: v + sum(c.contrib.get(n, {}).get(r, 0) for c in cands) for r, v in room[n].items()}
            for n in room}
    keep = {n for n in room if any(j in usable[n] and all(full[n].get(r, 0) >= v or r in unlimited[n]
                                                          for r, v in p.demand.items())
                                   for j, p in enumerate(parts))}
    kinds = [Kind(p.demand, p.pods, p.nodes & keep) for p in parts]
    n = len(cands)
    by_prio = {c.name: i for i, c in enumerate(sorted(cands, key=lambda c: (c.priority, c.name)))}
    count_w = n * n + 1
    gpu_w = (n + 1) * count_w + 1
    weights = [c.gpus * gpu_w + count_w + by_prio[c.name] for c in cands]
    got = fewest(kinds, {k: room[k] for k in keep}, unlimited, [c.contrib for c in cands], weights)
    if got is None:
        return None, None
    chosen, proven = got
    return [cands[i] for i in chosen], None if proven else "search budget"


def fewest_nodes(shapes: Sequence[Shape],
                 works: Callable[[NewNode, int], bool]) -> tuple[tuple[int, NewNode] | None, Cut]:
    """The fewest new nodes of one shape that re-solve, and that shape; the shapes needing
    fewest nodes by arithmetic first."""
    best: tuple[int, NewNode] | None = None
    for lo, hi, _, shape in shapes:
        if best is not None:
            hi = min(hi, best[0] - 1)                # only a shape needing fewer matters
        if lo > hi:
            continue
        n, cut = _least_nodes(lo, hi, partial(works, shape))
        if n is not None and (best is None or n < best[0]):
            best = (n, shape)
        if cut:
            return best, cut
    return best, None


def _least_nodes(lo: int, hi: int, works: Callable[[int], bool]) -> tuple[int | None, Cut]:
    """More empty nodes never hurt, so the checks are monotone in n: the arithmetic bound
    `lo` is usually the answer; else prove `hi`, then bisect. What is proven so far stands
    when the search is cut short."""
    proven: list[int] = []

    def check(n: int) -> bool:
        ok = works(n)
        if ok:
            proven.append(n)
        return ok

    cut: Cut = None
    try:
        if not check(lo) and lo < hi and check(hi):
            first_true(lo + 1, hi, check)
    except Stop as stop:
        cut = stop.why
    return (min(proven) if proven else None), cut
