"""The exchange passes over what cannot move without changing a move (issue 24, item 2): a
candidate whose GPU pods find too few GPU blocks once the placed group is out is refused by
every try of that swap, and a swap whose candidates could not beat the group even together is
not tried. Judged against the exchange trying every candidate of every swap (the plain one);
the tries counted, not timed."""

from __future__ import annotations

import random
import sys

import pytest

from placer.solve.greedy import BASELINES, greedy
from placer.solve.problem import prepare
from tests.builders import fleet, groups, wl

EX = sys.modules["placer.solve.exchange"]     # `placer.solve.exchange` is also the function's name


def _plain_candidates(st, h, assign, fit, gpus, needs, usable):
    need = gpus[h.index]
    return [g for g in fit if gpus[g.index] != need] + [g for g in fit if gpus[g.index] == need]


def _instance(rng: random.Random):
    specs = []
    for c in range(rng.randint(1, 3)):
        pools = []
        for _ in range(rng.randint(1, 3)):
            gpus = rng.choice((4, 8, 8))
            used = rng.choice(("", "", f" used={rng.randint(1, gpus - 1)}"))
            label = rng.choice(("", " gpu=a", " gpu=b"))
            pools.append(f"{rng.randint(1, 5)}x{gpus}{used}{label} cpu={rng.choice((16, 96))}")
        specs.append(f"c{c}: " + " | ".join(pools))
    wls = []
    for i in range(rng.randint(8, 30)):
        parts = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            size = rng.choice((0, 1, 2, 4, 8))
            sel = rng.choice(("", "", " gpu=a", " gpu=b"))
            parts.append(f"{rng.randint(1, 6)}x{size}{sel} cpu={rng.choice((1, 4, 12))}")
        wls.append(wl(f"ns/w{i:02d}", *parts, prio=rng.choice((0, 0, 5))))
    return fleet(*specs), groups(*wls)


def _exchanged(problem, result, plain: bool, monkeypatch):
    tries = [0]
    real = EX.try_place

    def counted(st, g):
        tries[0] += 1
        return real(st, g)
    with monkeypatch.context() as m:
        m.setattr(EX, "try_place", counted)
        if plain:
            m.setattr(EX, "_candidates", _plain_candidates)
            m.setattr(EX, "enough_blocks", lambda st, need: True)
        states: dict = {}
        out = EX.exchange(problem, dict(result), into=states)
    content = {c: (list(st.free), st.free_gpus) for c, st in states.items()}
    return out, content, tries[0]


@pytest.mark.parametrize("seed", range(4))
def test_the_exchange_makes_the_plain_exchanges_moves(seed, monkeypatch):
    rng = random.Random(seed)
    moved = fewer = 0
    for _ in range(60):
        fl, gs = _instance(rng)
        problem = prepare(fl, gs)
        order = rng.choice(list(BASELINES.values()))
        result = greedy(problem, problem.state(), order=order)
        pruned, content, tries = _exchanged(problem, result, False, monkeypatch)
        plain, plain_content, plain_tries = _exchanged(problem, result, True, monkeypatch)
        assert pruned == plain and content == plain_content
        assert tries <= plain_tries
        moved += pruned is not None
        fewer += tries < plain_tries
    assert moved >= 3 and fewer >= 3          # the instances exercise both


def test_a_swap_that_cannot_win_is_not_tried(monkeypatch):
    # a 16-GPU group on two whole nodes; the waiting ones want 16 GPUs each on one pool: out,
    # it frees room for one of them only (a tie, not a win), so no swap is tried at all
    fl = fleet("c0: 2x8 gpu=a | 2x8 used=7 gpu=a")
    gs = groups(wl("ns/h", "2x8", prio=0), wl("ns/w1", "2x8 gpu=a", prio=0), wl("ns/w2", "4x4 gpu=a", prio=0))
    problem = prepare(fl, gs)
    result = greedy(problem, problem.state())
    assert len(result) == 1
    swaps: list[int] = []
    real = EX._swap
    monkeypatch.setattr(EX, "_swap", lambda *a: swaps.append(1) or real(*a))
    assert EX.exchange(problem, dict(result)) is None
    assert not swaps
    monkeypatch.setattr(EX, "_candidates", _plain_candidates)
    assert EX.exchange(problem, dict(result)) is None
    assert swaps                           # the plain exchange tries it, and finds nothing
