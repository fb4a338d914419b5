"""Mutable free capacity per node of one cluster, and the best-fit placement of a group
onto it: node by node, or domain by domain for a group with topology units. All or
nothing: a group that does not fit leaves the state unchanged."""

from __future__ import annotations

import bisect
import itertools
from typing import Iterable, Iterator, Mapping, Sequence

from placer.solve.domain_fit import PodAssign, try_place_topology
from placer.solve.groups import MANY_CLASSES, ClusterInfo, GroupInfo, gpus_of, runs
from placer.solve.levels import blocks, fits, less, shift, shift_many
from placer.solve.scheduling import fits_resources

# content stamps, unique across all states: a stamp never names two different contents
_STAMPS = itertools.count(1)


class ClusterState:
    """Mutable free capacity per node of one cluster, indexed for best-fit search."""

    def __init__(self, info: ClusterInfo):
        self.info = info
        # a node's free capacity is a dict never changed once made, shared by every node whose
        # capacity it is: at first each class's, by all of its nodes; a take or give makes a
        # new one (issue 24: copying a state copied every node's; best fit computes how many
        # pods a node holds once for a run of nodes that share one, and a take of one demand
        # from such a run makes one new dict for all of them)
        self.node_class = self._class_of_nodes()
        self.free: list[Mapping[str, int]] = [info.class_free[k] for k in self.node_class]
        self.gpu = [gpus_of(f, info.gpu_names) for f in self.free]
        self.buckets: list[dict[int, list[int]]] = []
        for k, members in enumerate(info.class_nodes):
            b: dict[int, list[int]] = {}
            for i in members:
                b.setdefault(self.gpu[i], []).append(i)
            self.buckets.append(b)
        self.free_gpus = sum(self.gpu)
        # every node by free GPUs, in node order: the search when a pod may use many classes,
        # kept only on a cluster that has that many (issue 24: else never read, yet moved on
        # every take, half of each take's cost)
        self.many = len(info.class_nodes) > MANY_CLASSES
        self.levels: dict[int, list[int]] = {}
        for i, lv in enumerate(self.gpu if self.many else ()):
            self.levels.setdefault(lv, []).append(i)
        # the levels of each class's buckets and of `levels`, kept sorted (issue 24: best fit
        # sorted every class's levels for every pod)
        self.keys = [sorted(b) for b in self.buckets]
        self.level_keys = sorted(self.levels)
        self._allowed: dict[tuple[int, ...], frozenset[int]] = {}
        # the state's content changes with `version`; what a group's pods (its `shape`) gave
        # on this content is remembered (issue 24: the greedy passes, the repair and the
        # reasons try the same pods on an unchanged cluster again and again)
        self.version = next(_STAMPS)
        self.memo: dict[tuple, tuple[int, object]] = {}
        # stamped whenever capacity is given back: a group proven not to fit stays so until then
        self.grown = self.version
        self.no_fit: dict[tuple, int] = {}
        self._init_fast()

    def _init_fast(self) -> None:
        # the one GPU resource, when there is one: a node's GPUs are one lookup (issue 24:
        # `take` is called for every node a pod goes to, 100,000s of times at 10,000 nodes)
        names = self.info.gpu_names
        self.gpu1: str | None = names[0] if len(names) == 1 else None
        # GPU blocks free per (classes, block size) on this content, and per (class, block
        # size) at the class's stamp, which changes whenever one of its nodes moves (`blocks`)
        self.block_memo: dict[tuple[tuple[int, ...], int], int] = {}
        self.block_version = 0
        self.class_blocks: dict[tuple[int, int], tuple[int, int]] = {}
        self.class_stamp = [0] * len(self.buckets)

    def copy(self) -> "ClusterState":
        """An independent state with the same free capacity (cheaper than from the info)."""
        new = ClusterState.__new__(ClusterState)
        new.info, new.node_class, new._allowed, new.many = self.info, self.node_class, self._allowed, self.many
        new.free = list(self.free)      # the dicts are never changed: shared
        new.gpu = list(self.gpu)
        new.buckets = [{lv: list(ns) for lv, ns in b.items()} for b in self.buckets]
        new.levels = {lv: list(ns) for lv, ns in self.levels.items()}
        new.keys = [list(ks) for ks in self.keys]
        new.level_keys = list(self.level_keys)
        new.free_gpus = self.free_gpus
        new.version = new.grown = next(_STAMPS)
        new.memo, new.no_fit = {}, {}
        new._init_fast()
        return new

    def mark(self) -> tuple[int, int]:
        return self.version, self.grown

    def restore(self, mark: tuple[int, int]) -> None:
        """The content is back to what it was at `mark` (every take given back, or the reverse)."""
        self.version, self.grown = mark

    def proven_no_fit(self, shape: tuple) -> bool:
        """Pods of this shape were proven (exactly) not to fit, and no capacity came back since."""
        return self.no_fit.get(shape) == self.grown

    def prove_no_fit(self, shape: tuple) -> None:
        self.no_fit[shape] = self.grown

    def recall(self, key: tuple) -> object:
        """What `key` gave on this content (None: not known)."""
        got = self.memo.get(key)
        return got[1] if got is not None and got[0] == self.version else None

    def remember(self, key: tuple, value: object) -> None:
        self.memo[key] = (self.version, value)

    def _class_of_nodes(self) -> list[int]:
        out = [0] * len(self.info.nodes)
        for k, members in enumerate(self.info.class_nodes):
            for i in members:
                out[i] = k
        return out

    def best_node(self, demand: Mapping[str, int], gpu: int, classes: Sequence[int]) -> int | None:
        """Best fit: the node left with the fewest free GPUs (fill partly used nodes first,
        keep whole nodes whole), then class preference order, then node order. When the pod
        may use many classes (nodes that differ, as live ones do): the fewest free GPUs, then
        node order, searched over all nodes at once."""
        if len(classes) > MANY_CLASSES:
            return self._best_node_many(demand, gpu, classes)
        best: tuple[int, int, int] | None = None
        free = self.free
        need = list(demand.items())
        for pos, k in enumerate(classes):
            b, keys = self.buckets[k], self.keys[k]
            for n in range(bisect.bisect_left(keys, gpu), len(keys)):
                level = keys[n]
                if best is not None and level >= best[0]:
                    break               # a later class wins only with fewer free GPUs left
                hit = next((i for i in b[level] if fits(need, free[i])), None)
                if hit is not None:
                    best = (level, pos, hit)
                    break
        return None if best is None else best[2]

    def best_nodes(self, demand: Mapping[str, int], gpu: int, classes: Sequence[int],
                   pods: int) -> list[tuple[int, int]] | None:
        """`pods` pods of one kind by best fit, one after another, as (node, pods) in the order
        `best_node` would give them, without taking them (None: they do not all fit). Taking
        pods from the best node leaves every other node as it was, and the node itself out once
        it holds no more: so the pods go to the nodes where one fits, in best-fit order (free
        GPUs, class position, node), each filled (issue 24: one search per pod, most of a
        greedy plan's time at 10,000 nodes)."""
        out: list[tuple[int, int]] = []
        free = self.free
        # a request > 0 limits how many pods fit, one <= 0 only whether any does (taking pods
        # never lowers what is free of it below what it was)
        limits = [(r, v) for r, v in demand.items() if v > 0]
        floors = [(r, v) for r, v in demand.items() if v <= 0]
        last: Mapping[str, int] | None = None
        room = 0
        for nodes in self._fitting_lists(gpu, classes):
            for i in nodes:
                f = free[i]
                if f is not last:       # nodes that share their free capacity: one count
                    last, room = f, pods
                    for r, v in limits:
                        got = f.get(r, 0) // v
                        if got < room:
                            room = got
                            if room <= 0:
                                break
                    if room > 0 and floors and not fits(floors, f):
                        room = 0
                if room > 0:
                    n = room if room < pods else pods
                    out.append((i, n))
                    pods -= n
                    if not pods:
                        return out
        return None

    def _fitting_lists(self, gpu: int, classes: Sequence[int]) -> Iterator[Iterable[int]]:
        """The nodes of `classes` with at least `gpu` free GPUs in best-fit order, as lists
        read in turn (issue 24: a generator resumed per node cost as much as the search)."""
        if len(classes) > MANY_CLASSES:
            ok, nc = self.allowed(classes), self.node_class
            keys = self.level_keys
            for n in range(bisect.bisect_left(keys, gpu), len(keys)):
                yield (i for i in self.levels[keys[n]] if nc[i] in ok)     # lazily: a level holds 1,000s
            return
        buckets = self.buckets
        if len(classes) == 1:
            b, keys = buckets[classes[0]], self.keys[classes[0]]
            for n in range(bisect.bisect_left(keys, gpu), len(keys)):
                yield b[keys[n]]
            return
        # the levels of all the classes, merged: a set of a few small ints, taken lowest first
        # as the search goes on (issue 24: heapq.merge's generator cost more than the nodes it
        # ordered, and the search mostly stops at the first level)
        levels: set[int] = set()
        for k in classes:
            keys = self.keys[k]
            levels.update(keys[bisect.bisect_left(keys, gpu):])
        while levels:
            level = min(levels)
            levels.discard(level)
            for k in classes:
                got = buckets[k].get(level)
                if got:
                    yield got

    def allowed(self, classes: Sequence[int]) -> frozenset[int]:
        key = tuple(classes)
        got = self._allowed.get(key)
        if got is None:
            got = self._allowed[key] = frozenset(key)
        return got

    def _best_node_many(self, demand: Mapping[str, int], gpu: int, classes: Sequence[int]) -> int | None:
        ok = self.allowed(classes)
        keys = self.level_keys
        for n in range(bisect.bisect_left(keys, gpu), len(keys)):
            for i in self.levels[keys[n]]:
                if self.node_class[i] in ok and fits_resources(demand, self.free[i]):
                    return i
        return None

    def _move(self, i: int, new_gpu: int) -> None:
        old = self.gpu[i]
        if old != new_gpu:
            k = self.node_class[i]
            shift(self.buckets[k], self.keys[k], i, old, new_gpu)
            if self.many:
                shift(self.levels, self.level_keys, i, old, new_gpu)
            self.class_stamp[k] += 1
            self.free_gpus += new_gpu - old
            self.gpu[i] = new_gpu

    def take(self, i: int, demand: Mapping[str, int], times: int = 1) -> None:
        """`times` pods of `demand` on node i."""
        self.version = next(_STAMPS)
        f = self.free[i] = less(self.free[i], demand, times)
        self._move(i, self._gpus(f))

    def take_runs(self, runs: Iterable[tuple[int, int]], demand: Mapping[str, int]) -> None:
        """`take(i, demand, n)` for each (i, n) of `runs`, each node once (as `best_nodes` gives
        them), one content stamp for all. Nodes that shared a free capacity and take as many pods
        share the new one, made once, and the nodes of a class that go from one level to
        another move at once (issue 24: best fit takes a group's pods, node by node, most of
        the greedy plans' time)."""
        self.version = next(_STAMPS)
        free, gpu, node_class = self.free, self.gpu, self.node_class
        moves: dict[tuple[int, int, int], list[int]] = {}
        last: Mapping[str, int] | None = None
        last_n = last_k = -1
        new: dict[str, int] = {}
        level = 0
        went: list[int] | None = None
        for i, n in runs:
            f, k = free[i], node_class[i]
            if f is not last or n != last_n or k != last_k:
                old = gpu[i]
                if f is not last or n != last_n:
                    new = less(f, demand, n)
                    level = self._gpus(new)
                last, last_n, last_k = f, n, k
                went = None if level == old else moves.setdefault((k, old, level), [])
            free[i] = new
            if went is not None:
                went.append(i)
                gpu[i] = level
        self._move_all(moves)

    def _move_all(self, moves: Mapping[tuple[int, int, int], list[int]]) -> None:
        """The nodes of class k from level `old` to `new` for each ((k, old, new), nodes) (`gpu`
        already says `new`)."""
        across: dict[tuple[int, int], list[int]] = {}
        for (k, old, new), nodes in moves.items():
            if self.many:
                across.setdefault((old, new), []).extend(nodes)
            shift_many(self.buckets[k], self.keys[k], nodes, old, new)
            self.class_stamp[k] += 1
            self.free_gpus += (new - old) * len(nodes)
        for (old, new), nodes in across.items():
            shift_many(self.levels, self.level_keys, nodes, old, new)

    def give(self, i: int, demand: Mapping[str, int], times: int = 1) -> None:
        """`times` pods of `demand` off node i."""
        self.version = self.grown = next(_STAMPS)
        f = self.free[i] = less(self.free[i], demand, -times)
        self._move(i, self._gpus(f))

    def give_all(self, pods: Iterable[tuple[int, Mapping[str, int]]]) -> None:
        """`give` of many pods at once, each node's bucket moved once (the same content as
        one `give` per pod: the buckets keep node order; issue 24: taking a cluster's
        lower-priority work out pod by pod moved each node through every level between)."""
        self.version = self.grown = next(_STAMPS)
        own: dict[int, dict[str, int]] = {}
        free = self.free
        for i, demand in pods:
            f = own.get(i)
            if f is None:               # a capacity of its own first: the shared ones never change
                f = own[i] = free[i] = dict(free[i])
            for r, v in demand.items():
                f[r] = f.get(r, 0) + v
        moves: dict[tuple[int, int, int], list[int]] = {}
        gpu, node_class = self.gpu, self.node_class
        for i, f in own.items():
            level, old = self._gpus(f), gpu[i]
            if level != old:
                gpu[i] = level
                moves.setdefault((node_class[i], old, level), []).append(i)
        self._move_all(moves)

    def _gpus(self, f: Mapping[str, int]) -> int:
        g1 = self.gpu1
        return f.get(g1, 0) if g1 is not None else gpus_of(f, self.info.gpu_names)


def may_fit(st: ClusterState, g: GroupInfo) -> bool:
    """A cheap necessary condition: the cluster's GPUs in total, and for each pod kind enough
    GPU blocks of its size on the nodes it may use (CPU and memory aside)."""
    return g.gpus <= st.free_gpus and enough_blocks(st, st.info.kinds(g)[1])


def enough_blocks(st: ClusterState, need: Iterable[tuple[tuple[int, ...], int, int]]) -> bool:
    """Whether `st` has, for each (node classes, block size, pods) of `need`, that many blocks."""
    for classes, size, pods in need:
        if blocks(st, classes, size) < pods:
            return False
    return True


def holds(st: ClusterState, g: GroupInfo) -> bool | None:
    """Whether all the pods of a group of one pod kind without topology fit the state at once,
    exactly, without placing them (None: the group is not of that form). Pods of one kind
    on independent nodes: node i holds min over resources of free // request of them, and
    they fit iff those counts add up to the pods (best fit finds a place for each then, so
    the answer is the one placing would give; issue 24: reasons placed and gave back every
    pod of every unplaced group on every cluster, up to three times)."""
    if g.units or len(g.parts) != 1:
        return None
    p = g.parts[0]
    need = p.pods
    if g.gpus > st.free_gpus:
        return False
    demand = [(r, v) for r, v in p.demand.items() if v > 0]
    floors = [r for r, v in p.demand.items() if v <= 0]      # fits only while free >= request
    for k in st.info.compat(p):
        for level, nodes in st.buckets[k].items():
            if level < p.gpu:
                continue
            for i in nodes:
                f = st.free[i]
                if any(f.get(r, 0) < p.demand[r] for r in floors):
                    continue
                need -= max(0, min((f.get(r, 0) // v for r, v in demand), default=need))
                if need <= 0:
                    return True
    return need <= 0


def try_place(state: ClusterState, g: GroupInfo) -> PodAssign | None:
    """Place every pod of the group on this cluster or nothing (state unchanged then). Best
    fit is deterministic, so pods of the same shape that found no room on this content find
    none again (remembered until the content changes). A group proven not to fit at all
    (`may_fit` fails, or best fit for pods of one kind, which is exact) stays so while only
    pods are taken (`proven_no_fit`; issue 24: a greedy pass tried every group again on
    every cluster that had taken anything since)."""
    if g.units:
        return try_place_topology(state, g) if may_fit(state, g) else None
    shape = g.shape
    if state.no_fit.get(shape) == state.grown:
        return None
    key = ("best-fit", shape)
    got = state.memo.get(key)          # `recall`, inline: most calls at scale end here
    if got is not None and got[1] is False and got[0] == state.version:
        return None
    kinds = state.info.kinds(g)
    if g.gpus > state.free_gpus or not enough_blocks(state, kinds[1]):     # `may_fit`, inline
        state.prove_no_fit(shape)
        return None
    mark = state.mark()
    done = _best_fit(state, g, kinds[0])
    if done is None:
        state.restore(mark)                # rolled back: the same content
        state.remember(key, False)
        if len(g.parts) == 1:
            state.prove_no_fit(shape)
    return done


def _best_fit(state: ClusterState, g: GroupInfo, compat: Sequence[tuple[int, ...]]) -> PodAssign | None:
    if not all(compat):
        return None
    done: PodAssign = []
    for j, pods in runs(g):
        part = g.parts[j]
        got = state.best_nodes(part.demand, part.gpu, compat[j], pods)
        if got is None:
            undo(state, g, done)
            return None
        state.take_runs(got, part.demand)
        for i, n in got:
            done += [(j, i)] * n
    return done


def undo(state: ClusterState, g: GroupInfo, assign: PodAssign) -> None:
    """`g`'s pods given back from the nodes `assign` names, each node moved once (`give_all`)."""
    parts = g.parts
    state.give_all((i, parts[j].demand) for j, i in assign)


def redo(state: ClusterState, g: GroupInfo, assign: PodAssign) -> None:
    """`g`'s pods taken on the nodes `assign` names (what `undo` gives back), part by part
    with `take_runs` (issue 24: the exchange put back every group it tried out, node by node)."""
    per_part: dict[int, dict[int, int]] = {}
    for j, i in assign:
        on = per_part.setdefault(j, {})
        on[i] = on.get(i, 0) + 1
    for j, on in per_part.items():
        state.take_runs(on.items(), g.parts[j].demand)


def redo_all(st: ClusterState, placed: Iterable[tuple[GroupInfo, PodAssign]]) -> None:
    """`redo` of many groups at once: the same content, each touched class's buckets built
    once, in node order, as `shift` keeps them (issue 24: replaying a plan moved each node
    level by level through its buckets; at 4,000 workloads most of the explanations' time)."""
    st.version = next(_STAMPS)
    node_class, gpu, free = st.node_class, st.gpu, st.free
    # (free capacity, demand, pods) -> the capacity left, made once for all the nodes that
    # share the capacity and take as many pods of that demand (kept with the keys' objects,
    # so an id names no other while this runs)
    made: dict[tuple[int, int, int], tuple[Mapping[str, int], Mapping[str, int], dict[str, int]]] = {}
    touched: dict[int, None] = {}
    for g, assign in placed:
        parts = g.parts
        for j, i, n in _same_node_runs(assign):
            f, d = free[i], parts[j].demand
            key = (id(f), id(d), n)
            got = made.get(key)
            if got is None:
                got = made[key] = (f, d, less(f, d, n))
            free[i] = got[2]
            touched[i] = None
    for i in touched:
        gpu[i] = st._gpus(free[i])
    for k in {node_class[i] for i in touched}:
        b: dict[int, list[int]] = {}
        for i in st.info.class_nodes[k]:
            b.setdefault(gpu[i], []).append(i)
        st.buckets[k], st.keys[k] = b, sorted(b)
        st.class_stamp[k] += 1
    if st.many and touched:
        st.levels = {}
        for i, lv in enumerate(gpu):
            st.levels.setdefault(lv, []).append(i)
        st.level_keys = sorted(st.levels)
    st.free_gpus = sum(gpu)


def _same_node_runs(assign: PodAssign) -> list[tuple[int, int, int]]:
    """(part, node, pods) for each run of equal entries: best fit lists a node's pods of a
    part together, and one take of n pods leaves what n takes do (issue 24: rebuilding a
    plan's states took and moved every pod alone)."""
    out: list[tuple[int, int, int]] = []
    for j, i in assign:
        if out and out[-1][0] == j and out[-1][1] == i:
            out[-1] = (j, i, out[-1][2] + 1)
        else:
            out.append((j, i, 1))
    return out
