"""Best fit takes the pods a node still holds at once (issue 24): the assignment and the
free capacity left are those of placing one pod at a time, each on the best node found
afresh (the documented best fit, judged here by `best_node` itself, pod by pod)."""

from __future__ import annotations

import random

import placer.solve as S
from placer.solve import state as ST
from placer.solve.groups import MANY_CLASSES, expand
from tests.builders import fleet, groups, wl


def _pod_by_pod(st: ST.ClusterState, g) -> list[tuple[int, int]] | None:
    done = []
    for j in expand(g):
        part = g.parts[j]
        i = st.best_node(part.demand, part.gpu, st.info.compat(part))
        if i is None:
            for jj, ii in reversed(done):
                st.give(ii, g.parts[jj].demand)
            return None
        st.take(i, part.demand)
        done.append((j, i))
    return done


def test_batched_best_fit_is_pod_by_pod_best_fit():
    rng = random.Random(11)
    for case in range(12):
        fl = fleet(*(f"c{c}: {rng.randint(2, 6)}x8 used={rng.randint(0, 7)} | {rng.randint(1, 4)}x4 "
                     f"used={rng.randint(0, 3)} | {rng.randint(0, 3)}x8" for c in range(2)),
                   # more classes than MANY_CLASSES: pods searched over all nodes at once
                   "c2: " + " | ".join(f"{rng.randint(1, 3)}x8 used={rng.randint(0, 7)} z=z{k}"
                                       for k in range(MANY_CLASSES + 4)))
        gs = groups(*(wl(f"ml/w{i:02d}", f"{rng.randint(1, 9)}x{rng.choice([1, 1, 2, 3, 4, 8])}")
                      for i in range(rng.randint(8, 25))))
        problem = S.prepare(fl, gs)
        batched, single = problem.state(), problem.state()
        placed = 0
        for g in problem.groups:
            for c in g.eligible:
                got = ST.try_place(batched[c], g)
                want = _pod_by_pod(single[c], g)
                assert got == want, (case, g.key, c)
                assert batched[c].free == single[c].free and batched[c].buckets == single[c].buckets
                placed += got is not None and c == 2
        # every group tried on every cluster (placed wherever it fits): the many-class cluster
        # takes some, so the comparison is not empty
        assert placed >= 3 and len(problem.infos[2].classes) > MANY_CLASSES, case


def test_redo_and_undo_by_runs_leave_what_one_pod_at_a_time_leaves():
    fl = fleet("c0: 3x8 used=2 | 2x4 | 4x8")
    gs = groups(wl("ml/a", "6x2"), wl("ml/b", "3x8"), wl("ml/c", "5x1"))
    problem = S.prepare(fl, gs)
    first = problem.state()[0]
    placed = {g.index: ST.try_place(first, g) for g in problem.groups}
    assert all(placed.values()) and any(len(set(a)) < len(a) for a in placed.values())   # runs exist
    by_runs, one_by_one = problem.state()[0], problem.state()[0]
    for g in problem.groups:
        ST.redo(by_runs, g, placed[g.index])
        for j, i in placed[g.index]:
            one_by_one.take(i, g.parts[j].demand)
    assert (by_runs.free, by_runs.buckets, by_runs.free_gpus) == (one_by_one.free, one_by_one.buckets,
                                                                  one_by_one.free_gpus)
    assert by_runs.free == first.free
    pristine = problem.state()[0]
    for g in problem.groups:
        ST.undo(by_runs, g, placed[g.index])
    assert (by_runs.free, by_runs.buckets, by_runs.free_gpus) == (pristine.free, pristine.buckets,
                                                                  pristine.free_gpus)
