"""What the repair's displacements cost (issue 24, item 3): a cluster is emptied of its
lower-priority work on a copy, once while its content is unchanged, and the copy gives the
same answers and the same state as emptying the cluster pod by pod."""

from placer.solve.problem import prepare
from placer.solve.repair import repair
from placer.solve.state import ClusterState, try_place
from tests.builders import fleet, groups, wl


def _content(st: ClusterState) -> tuple:
    return (st.free, st.gpu, st.buckets, st.levels, st.keys, st.level_keys, st.free_gpus)


def test_give_all_is_the_same_content_as_one_give_per_pod():
    problem = prepare(fleet("east: 4x8 | 2x4"), groups(wl("ml/a", "3x2", "1x4"), wl("ml/b", "2x3")))
    one, many = problem.state()[0], problem.state()[0]
    placed = [(g, try_place(one, g)) for g in problem.groups]
    for g, _ in placed:
        try_place(many, g)
    assert _content(one) == _content(many)
    pods = [(i, g.parts[j].demand) for g, assign in placed for j, i in assign]
    for i, demand in reversed(pods):
        one.give(i, demand)
    many.give_all(pods)
    assert _content(one) == _content(many) == _content(problem.state()[0])
    assert many.free_gpus == 40


def test_a_cluster_that_cannot_hold_the_group_even_emptied_is_emptied_once_on_a_copy(monkeypatch):
    """`a1` and `a2` (priority 30, two pods of 5 GPUs) find east holding 10 free GPUs once `b`
    (priority 10, 4 GPUs of node 0) leaves, but no two nodes with 5 free each (`h`, priority
    50, holds 6 of node 1). Neither may displace `b`: the old repair took `b` out of the cluster and put it
    back for each of them (a `give` per pod each time); now the cluster is left as it is and
    one emptied copy answers both."""
    f = fleet("east: 2x8")
    gs = groups(wl("ml/b", "1x4", prio=10), wl("ml/h", "1x6", prio=50),
                wl("ml/a1", "2x5", prio=30), wl("ml/a2", "2x5", prio=30))
    problem = prepare(f, gs)
    states = problem.state()
    start = {g.index: (0, try_place(states[0], g)) for g in problem.groups if g.key in ("ml/h", "ml/b")}
    assert [i for _, i in start[0][1]] != [i for _, i in start[1][1]]    # h and b on different nodes
    calls = {"give": 0, "give_all": 0}
    for name in calls:
        real = getattr(ClusterState, name, None)
        if real is None:
            continue                    # (the old code had no `give_all`)

        def counted(self, *a, _real=real, _name=name):
            calls[_name] += 1
            return _real(self, *a)
        monkeypatch.setattr(ClusterState, name, counted)
    before = states[0].mark(), _content(states[0])
    out = repair(problem, start, states=states)
    assert set(out) == set(start)
    assert calls == {"give": 0, "give_all": 1}
    assert (states[0].mark(), _content(states[0])) == before
