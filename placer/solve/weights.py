"""Weighted shares (`placer.dev/spread-weights`): how far the nodes as they are force a divided
workload's shares from its weights. A share is within one unit of its weight when
|W k_c - w_c T| <= W; the excess is max(0, |W k_c - w_c T| - W). The least total excess the
clusters' own room allows (each cluster's room alone, at the largest total they hold) is the
slack a plan may use: zero when the nodes allow the weights, so contention with other work never
bends them; more only where the nodes themselves cannot take a weighted share."""

from __future__ import annotations

from typing import Mapping

from placer.solve.state import ClusterState, try_place

DP_MAX = 2_000_000          # beyond this many steps the slack is not bounded (the objective still minimises it)


def room(problem, g, c: int, most: int) -> int:
    """How many copies of group `g` the cluster as it is holds at node level (up to `most`)."""
    if c not in problem.infos or c not in g.eligible:
        return 0
    st = ClusterState(problem.infos[c])
    n = 0
    while n < most and try_place(st, g) is not None:
        n += 1
    return n


def excess(share: Mapping[int, int], weights: Mapping[int, int], total: int) -> int:
    W = sum(weights.values())
    return sum(max(0, abs(W * share.get(c, 0) - w * total) - W) for c, w in weights.items())


def least_excess(rooms: Mapping[int, int], weights: Mapping[int, int], units: int, clusters: int | None) -> int | None:
    """The least total excess over share vectors k_c <= rooms[c] (of the weighted clusters, at
    most `clusters` of them non-empty) at the largest total they reach; None when too large to
    work out."""
    caps = sorted((min(rooms.get(c, 0), units) for c in weights), reverse=True)
    T = min(units, sum(caps[:clusters] if clusters else caps))
    limit = min(clusters or len(weights), len(weights))
    if T == 0:
        return 0
    if len(weights) * (T + 1) * (T + 1) * (limit + 1) > DP_MAX:
        return None
    W = sum(weights.values())
    INF = 1 << 60
    best = [[INF] * (limit + 1) for _ in range(T + 1)]     # [units so far][non-empty clusters]
    best[0][0] = 0
    for c, w in weights.items():
        nxt = [[INF] * (limit + 1) for _ in range(T + 1)]
        for t in range(T + 1):
            for n in range(limit + 1):
                if best[t][n] >= INF:
                    continue
                nxt[t][n] = min(nxt[t][n], best[t][n] + max(0, w * T - W))          # c left empty
                if n < limit:
                    for k in range(1, min(rooms.get(c, 0), T - t) + 1):
                        cost = best[t][n] + max(0, abs(W * k - w * T) - W)
                        nxt[t + k][n + 1] = min(nxt[t + k][n + 1], cost)
        best = nxt
    return min(best[T])
