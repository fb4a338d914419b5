"""The bookkeeping under a cluster's state (placer.solve.state): a node's free capacity as a
dict that is never changed once made (so nodes with the same capacity may share one), and the
level indexes, nodes by free GPUs, each level's nodes in node order (for a deterministic best
fit), with their sorted levels beside them, and the GPU blocks they hold (`blocks`)."""

from __future__ import annotations

import bisect
from typing import Any, Mapping, Sequence

from placer.solve.groups import MANY_CLASSES

FEW = 8                   # up to this many nodes, moved one by one between the lists of two levels


def less(free: Mapping[str, int], demand: Mapping[str, int], times: int) -> dict[str, int]:
    """A new free capacity: `free` less `times` pods of `demand` (negative: given back)."""
    out = dict(free)
    for r, v in demand.items():
        out[r] = out.get(r, 0) - v * times
    return out


def fits(need: Sequence[tuple[str, int]], free: Mapping[str, int]) -> bool:
    """`fits_resources` for a demand given as its items (the same answer, without a generator)."""
    for r, v in need:
        if v > free.get(r, 0):
            return False
    return True


def shift(index: dict[int, list[int]], keys: list[int], i: int, old: int, new: int) -> None:
    """Node i from level `old` to `new` of a level index, `keys` its sorted levels."""
    lst = index[old]
    if len(lst) == 1:
        del index[old]
        del keys[bisect.bisect_left(keys, old)]
    else:
        del lst[bisect.bisect_left(lst, i)]     # kept in node order: found by bisection
    got = index.get(new)
    if got is None:
        index[new] = [i]
        bisect.insort(keys, new)
    elif got[-1] < i:
        got.append(i)
    else:
        bisect.insort(got, i)


def shift_many(index: dict[int, list[int]], keys: list[int], nodes: list[int], old: int, new: int) -> None:
    """`shift` of several nodes from one level to another, at once: `nodes` (distinct, each at
    level `old`; the list becomes the index's) leave as a slice when they are the level's first,
    as best fit takes them (issue 24: a group's pods moved their nodes one by one, a bisection
    and a list insertion each); a few scattered ones move one by one."""
    m = len(nodes)
    if m > 1:
        nodes.sort()
    lst = index[old]
    if m == len(lst):
        del index[old]
        del keys[bisect.bisect_left(keys, old)]
    elif lst[:m] == nodes:
        del lst[:m]
    elif m <= FEW:
        for i in nodes:
            del lst[bisect.bisect_left(lst, i)]
    else:
        drop = set(nodes)
        lst[:] = [i for i in lst if i not in drop]
    got = index.get(new)
    if got is None:
        index[new] = nodes
        bisect.insort(keys, new)
    elif got[-1] < nodes[0]:
        got.extend(nodes)
    elif m <= FEW:
        for i in nodes:
            bisect.insort(got, i)
    else:
        got.extend(nodes)
        got.sort()


def blocks(st: Any, classes: tuple[int, ...], size: int) -> int:
    """GPU blocks of `size` free on the nodes of `classes` of a ClusterState `st` (over all nodes when a pod may
    use many classes: weaker, as a necessary condition), remembered while the content
    is unchanged, and per class while none of its nodes moved (issue 24: `may_fit`
    summed them for every group on every cluster a greedy pass tried, though most of
    those clusters, and most classes of the others, had not changed since)."""
    if st.block_version != st.version:
        st.block_memo = {}
        st.block_version = st.version
    key = (classes, size)
    got = st.block_memo.get(key)
    if got is None:
        if len(classes) > MANY_CLASSES:
            got = sum(len(nodes) * (level // size) for level, nodes in st.levels.items() if level >= size)
        else:
            got = 0
            memo, stamp = st.class_blocks, st.class_stamp
            for k in classes:
                known = memo.get((k, size))
                if known is None or known[0] != stamp[k]:
                    n = 0
                    for level, nodes in st.buckets[k].items():
                        if level >= size:
                            n += len(nodes) * (level // size)
                    known = memo[(k, size)] = (stamp[k], n)
                got += known[1]
        st.block_memo[key] = got
    return got
