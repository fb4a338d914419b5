"""The plan does not depend on the machine's speed (issue 24): the search is bounded by
CP-SAT's deterministic time and the repairs by counted work, the wall clock is only a safety
net, and a plan it changes says so (`timeLimitHit`).

A fake monotonic clock that moves a fixed step at every read stands for a slower or busier
machine (the more steps, the further each phase's work carries it); a frozen clock stands
for an infinitely fast one. Whatever the step, the plan is the frozen clock's plan, or it is
flagged: before, a repair, the exchange or the explanations cut by the clock changed the plan
or its reasons without a word."""

from __future__ import annotations

import time

import pytest

import placer.solve as S
from placer.solve import solve, stages
from placer.solve.greedy import BASELINES, Bar, greedy
from placer.solve.problem import prepare
from tests.solve import oracle as O


class _Clock:
    """time.monotonic for a machine where every read comes `step` seconds after the last."""

    def __init__(self, step: float):
        self.now, self.step, self.reads = 1000.0, step, 0

    def __call__(self) -> float:
        self.now += self.step
        self.reads += 1
        return self.now


def _solve(monkeypatch, f, gs, step: float, time_limit: float | None) -> tuple[tuple[list, list], bool, int]:
    """The plan's placements and unplaced entries with their reasons, whether it is flagged,
    and how often the solve read the clock."""
    clock = _Clock(step)
    real = stages._search_parameters

    def unhurried(p, workers, seed, effort, wall):
        real(p, workers, seed, effort, wall)
        p.max_time_in_seconds = 3600.0

    with monkeypatch.context() as m:
        m.setattr(time, "monotonic", clock)
        # CP-SAT's own safety net runs on the real clock (its effort bounds it here): only the
        # fake clock may cut, so that the same steps cut the same way on a loaded machine
        m.setattr(stages, "_search_parameters", unhurried)
        plan = solve(f, gs, time_limit=time_limit, workers=2)
    out = plan.to_dict()
    return (out["placements"], out["unplaced"]), plan.summary.time_limit_hit, clock.reads


@pytest.mark.parametrize("family,seed", [("medium-gpu", 0), ("medium-hetero", 0)])
def test_a_plan_the_clock_changed_is_flagged(monkeypatch, family, seed):
    """Steps such that the solve's reads carry the clock from 30% to 145% of the limit, so
    that each share's end (search, repair, explanations) falls inside some solve."""
    f, gs = O.instance(O.MEDIUM[family], seed)
    want, hit, reads = _solve(monkeypatch, f, gs, 0.0, 10.0)
    assert not hit
    silent = []
    for x in [0.3 + 0.1 * i for i in range(12)]:
        got, hit, _ = _solve(monkeypatch, f, gs, 10.0 * x / reads, 10.0)
        if got != want and not hit:
            silent.append(round(x, 2))
    assert not silent, f"plans changed by the clock without timeLimitHit, the clock at {silent} of the limit"


# a phase of placer.solve, and the share of the limit the clock is past when it starts
# (explanations cut past their share, unflagged, changed a plan's reasons before: issue 24)
LATE = [("explain_all", 0.95)]


@pytest.mark.parametrize("phase,share", LATE)
def test_a_phase_started_past_its_share_says_so(monkeypatch, phase, share):
    """A machine so slow that a phase starts past its share of the limit (the clock frozen
    otherwise): the plan either is the unhurried one or is flagged; and on some instance the
    cut does change it (else this test could not fail)."""
    changed = 0
    for family, seed in [("medium-gpu", 0), ("medium-gpu", 1), ("medium-gpu", 2), ("medium-hetero", 0)]:
        f, gs = O.instance(O.MEDIUM[family], seed)
        want, _, _ = _solve(monkeypatch, f, gs, 0.0, 10.0)
        clock = _Clock(0.0)
        real = getattr(S, phase)

        def late(*args, **kwargs):
            clock.now = 1000.0 + 10.0 * share
            return real(*args, **kwargs)

        with monkeypatch.context() as m:
            m.setattr(time, "monotonic", clock)
            m.setattr(S, phase, late)
            plan = solve(f, gs, time_limit=10.0, workers=2)
        out = plan.to_dict()
        if (out["placements"], out["unplaced"]) != want:
            changed += 1
            assert plan.summary.time_limit_hit, f"{family} seed {seed}: {phase} cut by the clock, not flagged"
    assert changed, f"no instance where a late {phase} changes the plan: the test could not fail"


@pytest.mark.parametrize("seed", range(6))
def test_a_greedy_pass_stops_only_when_it_cannot_beat_the_bar(seed):
    """greedy.Bar: the pass with a bar gives the full pass's plan unless the full pass ends
    at or below the bar lexicographically (then nothing is lost by stopping)."""
    f, gs = O.instance(O.MEDIUM["medium-gpu" if seed % 2 else "medium-hetero"], seed)
    problem = prepare(f, gs)
    ng = len(problem.groups) + 1
    by_idx = {g.index: g for g in problem.groups}
    levels = sorted({g.priority for g in problem.groups}, reverse=True)

    def lex(res):
        return tuple(sum(by_idx[i].gpus * ng + 1 for i in res if by_idx[i].priority == p) for p in levels)

    best = lex(greedy(problem, problem.state()))
    stopped = 0
    for order in BASELINES.values():
        full = greedy(problem, problem.state(), order=order)
        barred = greedy(problem, problem.state(), order=order, bar=Bar(problem.groups, best, ng))
        if barred != full:
            stopped += 1
            assert lex(full) <= best and lex(barred) <= best
        else:
            assert lex(barred) == lex(full)
    assert stopped <= len(BASELINES)
