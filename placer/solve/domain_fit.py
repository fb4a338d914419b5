"""Best fit of a group with topology units onto one cluster's state (placer.solve.state):
each required unit into one domain, preferred units into as few as they can."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Protocol, Sequence

from placer.solve.domains import Unit, by_domain, class_domain, domain_of
from placer.solve.groups import ClusterInfo, GroupInfo

PodAssign = list[tuple[int, int]]          # (part index in group, node index in cluster)


class ClusterState(Protocol):
    """What the domain search uses of placer.solve.state.ClusterState (which imports this
    module: named here, not imported)."""

    info: ClusterInfo
    buckets: list[dict[int, list[int]]]

    def best_node(self, demand: Mapping[str, int], gpu: int, classes: Sequence[int]) -> int | None: ...

    def take(self, i: int, demand: Mapping[str, int], times: int = 1) -> None: ...

    def give(self, i: int, demand: Mapping[str, int], times: int = 1) -> None: ...


def _free_gpus(st: ClusterState, classes: Iterable[int]) -> int:
    return sum(level * len(nodes) for k in classes for level, nodes in st.buckets[k].items())



def _pods(g: GroupInfo, js: Iterable[int]) -> list[int]:
    """Pods of these parts, biggest first."""
    js = sorted(js, key=lambda j: (g.parts[j].sort_key, j))
    return [j for j in js for _ in range(g.parts[j].pods)]


class _Placer:
    def __init__(self, st: ClusterState, g: GroupInfo):
        self.st, self.g, self.info = st, g, st.info
        self.allowed = [list(self.info.compat(p)) for p in g.parts]
        self.done: PodAssign = []

    def rollback(self, mark: int = 0) -> None:
        while len(self.done) > mark:
            j, i = self.done.pop()
            self.st.give(i, self.g.parts[j].demand)

    def put(self, js: Iterable[int], classes: Callable[[int], Sequence[Sequence[int]]]) -> bool:
        """Every pod of parts `js`, each on the best node of the first class list that has one."""
        mark = len(self.done)
        for j in _pods(self.g, js):
            part = self.g.parts[j]
            i = None
            for ks in classes(j):
                if ks:
                    i = self.st.best_node(part.demand, part.gpu, ks)
                if i is not None:
                    break
            if i is None:
                self.rollback(mark)
                return False
            self.st.take(i, part.demand)
            self.done.append((j, i))
        return True

    def used(self, u: Unit) -> set[str | None]:
        mine = set(u.parts)
        return {domain_of(self.info.nodes[i], u.key) for j, i in self.done if j in mine}

    def required(self, u: Unit) -> bool:
        pending = [j for j in u.parts if not any(jj == j for jj, _ in self.done)]
        fixed = self.used(u)
        if len(fixed) > 1 or None in fixed:
            return False
        doms = by_domain(self.info, dict.fromkeys(k for j in u.parts for k in self.allowed[j]), u.key)
        doms.pop(None, None)
        need = sum(self.g.parts[j].gpu * self.g.parts[j].pods for j in pending)
        cands = [v for v in doms if not fixed or v in fixed]
        # best fit: the domain left with the fewest free GPUs first, whole domains kept whole
        free = {v: _free_gpus(self.st, doms[v]) for v in cands}
        for v in sorted((v for v in cands if free[v] >= need), key=lambda v: (free[v], str(v))):
            inside = {j: [k for k in self.allowed[j] if class_domain(self.info, k, u.key) == v] for j in u.parts}
            if any(not inside[j] for j in pending):
                continue
            if self.put(pending, lambda j: (inside[j],)):
                for j in u.parts:
                    self.allowed[j] = inside[j]
                return True
        return False

    def preferred(self, u: Unit) -> bool:
        pending = [j for j in u.parts if not any(jj == j for jj, _ in self.done)]
        if not pending:
            return True
        doms = by_domain(self.info, dict.fromkeys(k for j in pending for k in self.allowed[j]), u.key, pseudo=True)
        used = {"" if v is None else v for v in self.used(u)}
        need = sum(self.g.parts[j].gpu * self.g.parts[j].pods for j in pending)
        free = {v: _free_gpus(self.st, ks) for v, ks in doms.items()}

        def inside(v):
            return lambda j: ([k for k in self.allowed[j] if k in doms[v]],)
        if not used:
            # one domain if one holds them all: the fullest that does
            for v in sorted((v for v in doms if free[v] >= need), key=lambda v: (free[v], str(v))):
                if self.put(pending, inside(v)):
                    return True
        # else fill: domains already used, then the emptiest first (fewest domains)
        order = sorted(doms, key=lambda v: (v not in used, -free[v], str(v)))
        return self.put(pending, lambda j: [[k for k in self.allowed[j] if k in doms[v]] for v in order])


def try_place_topology(st: ClusterState, g: GroupInfo) -> PodAssign | None:
    """Best fit for a group with topology units: each required unit (largest first) into the
    best-fitting domain where all its pods fit, preferred units into one domain if one holds
    them else the fewest, the rest anywhere. All or nothing (state unchanged on failure).
    The caller has checked `state.may_fit`."""
    pl = _Placer(st, g)
    if any(not a for a in pl.allowed):
        return None
    order = sorted(g.units, key=lambda u: (not u.required, -u.gpus, -u.pods, u.key, u.parts))
    for u in order:
        if not (pl.required(u) if u.required else pl.preferred(u)):
            pl.rollback()
            return None
    rest = [j for j in range(len(g.parts)) if not any(j in u.parts for u in g.units)]
    if not pl.put(rest, lambda j: (pl.allowed[j],)):
        pl.rollback()
        return None
    return pl.done

