"""benchmarks/quotas.py's simulation and accounting (issue 23, Must-show 3) on hand-made tiny
instances with hand-computed figures: GPU-hours received, waits, fluid fair-share entitlements,
Jain's index, preemption accounting, and the FIFO-per-team baseline's rules (head-of-line
blocking, round-robin, quotas); placer's rounds (the daemon's decide) on the same instance."""
from __future__ import annotations

import math

import pytest

from benchmarks import quotas as Q
from benchmarks import quotas_sim as S

SHAPE = S.Shape(clusters=1, nodes=2, gpus=8)                     # 16 GPUs
TEAMS = [S.Team("a", nominal=8, weight=1), S.Team("b", nominal=4, weight=1, limit=2)]   # pool 4
JOBS = [S.Job("a1", "a", 8, 0.0, 3600.0), S.Job("a2", "a", 8, 0.0, 3600.0),
        S.Job("b1", "b", 4, 600.0, 1800.0)]


def check_story(o: S.Outcome) -> None:
    """a1 and a2 take the fleet at 0 (a borrows b's idle 4 and the pool's 4); b1 arrives at 600 and
    waits for them to finish at 3600, then runs 30 min. Over 2 h:
    received a = 16 GPUs x 1 h = 16, b = 4 x 0.5 = 2.
    entitled: [0, 600) a alone wants 16: 8 nominal + the 8 left = 16 -> 16 x 1/6 h = 2.667;
    [600, 3600) a 16, b 4: nominal 8 and 4, the 4 left to a (b wants nothing beyond nominal):
    a 12 x 5/6 h = 10, b 4 x 5/6 h = 3.333; [3600, 5400) b alone, 4 -> 4 x 0.5 h = 2.
    a = 12.667, b = 5.333."""
    assert o.received == pytest.approx({"a": 16.0, "b": 2.0})
    assert o.entitled == pytest.approx({"a": 2 + 2 / 3 + 10, "b": 10 / 3 + 2})
    assert o.ratio("a") == pytest.approx(16 / (38 / 3)) and o.ratio("b") == pytest.approx(2 / (16 / 3))
    x, y = 16 / (38 / 3), 2 / (16 / 3)
    assert o.jain() == pytest.approx((x + y) ** 2 / (2 * (x * x + y * y)))
    assert o.utilisation == pytest.approx(18 / (16 * 2))
    assert sorted(o.waits["a"]) == [0.0, 0.0] and o.waits["b"] == [3000.0]
    assert o.never == {"a": 0, "b": 0} and o.preempted == {"a": 0, "b": 0}


@pytest.mark.parametrize("system", ["fifo", "placer"])
def test_both_systems_account_the_hand_made_story(system):
    sched = S.FifoPerTeam() if system == "fifo" else Q.Placer(TEAMS, time_limit=10.0)
    o = S.simulate(sched, SHAPE, TEAMS, JOBS, hours=2.0, tick=60.0)
    check_story(o)
    assert o.rounds == 3          # arrivals at 0, b1 at 600 (nothing fits), a's ends at 3600; b1's end: nothing waits


def test_a_round_waits_for_the_tick_and_a_job_running_past_the_end_counts_until_the_end():
    jobs = [S.Job("a1", "a", 4, 10.0, 7200.0)]             # arrives at 10 s: starts at the 60 s round
    o = S.simulate(S.FifoPerTeam(), SHAPE, TEAMS, jobs, hours=1.0, tick=60.0)
    assert o.waits["a"] == [50.0]
    assert o.received["a"] == pytest.approx(4 * (3600 - 60) / 3600)
    assert o.entitled["a"] == pytest.approx(4 * (3600 - 10) / 3600)    # demand from its arrival


def test_late_arrivals_never_started_are_counted_apart():
    jobs = [S.Job("a1", "a", 16, 0.0, 7200.0), S.Job("b1", "b", 4, 100.0, 60.0)]
    o = S.simulate(S.FifoPerTeam(), SHAPE, TEAMS, jobs, hours=1.0, tick=60.0)
    assert o.never == {"a": 0, "b": 1} and o.waits["b"] == []
    assert o.entitled["b"] == pytest.approx(4 * 3500 / 3600)          # nominal, wanted all along


class Scripted:
    """Starts and stops what the script says at each round time."""

    name = "scripted"

    def __init__(self, script):
        self.script = script

    def round(self, state, now):
        return self.script.get(now, ([], []))


def test_a_preempted_job_counts_what_it_ran_restarts_from_zero_and_keeps_its_first_wait():
    """a1 (8 GPUs, 1 h) starts at 0 and is preempted by the round at 600 s for b1 (4 GPUs, 1800 s,
    arriving then); the round a preemption asks for, one tick later (1200 s), restarts a1, which
    runs its full hour again: received a = 8 x 600 s + 8 x 3600 s = 9.333 GPU-h, b = 4 x 0.5 h = 2;
    a's wait stays 0 (time to first placement); no round at b1's end (nothing waits)."""
    jobs = [S.Job("a1", "a", 8, 0.0, 3600.0), S.Job("b1", "b", 4, 600.0, 1800.0)]
    n0, n1 = SHAPE.node_names("c00")
    script = {0.0: ([S.Start("a1", "c00", {n0: 8})], []),
              600.0: ([S.Start("b1", "c00", {n0: 4})], ["a1"]),
              1200.0: ([S.Start("a1", "c00", {n1: 8})], [])}
    o = S.simulate(Scripted(script), SHAPE, TEAMS, jobs, hours=3.0, tick=600.0)
    assert o.rounds == 3 and o.preempted == {"a": 1, "b": 0}
    assert o.received == pytest.approx({"a": 8 * (600 + 3600) / 3600, "b": 2.0})
    assert o.waits == {"a": [0.0], "b": [0.0]} and o.never == {"a": 0, "b": 0}
    assert o.lost == pytest.approx({"a": 8 * 600 / 3600})       # the run taken out, done again


def test_fifo_head_of_line_blocks_its_team_only_and_teams_take_turns():
    """a's head (16 GPUs) does not fit beside a0: a's 1-GPU job behind it waits, b's goes."""
    state = S.State(SHAPE, TEAMS, {"c00": dict.fromkeys(SHAPE.node_names("c00"), 0)})
    state.running["a0"] = S.Run(S.Job("a0", "a", 8, 0.0, 99.0), "c00", {"c00-n00": 8}, 0.0)
    state.used["c00"]["c00-n00"] = 8
    state.pending = [S.Job("a-big", "a", 16, 1.0, 9.0), S.Job("a-small", "a", 1, 2.0, 9.0),
                     S.Job("b-small", "b", 1, 3.0, 9.0)]
    starts, stops = S.FifoPerTeam().round(state, 60.0)
    assert [s.job for s in starts] == ["b-small"] and stops == []
    assert starts[0].nodes == {"c00-n01": 1}                  # first fit by node


def test_fifo_enforces_nominal_borrowing_limit_and_pool():
    """b: nominal 4 + limit 2 = 6; a: no limit, but the cohort's use beyond its nominal amounts
    (12) within the pool (4): a may borrow what b leaves unused and the pool."""
    assert S.within_quota(TEAMS, {"a": 0, "b": 4}, 4, TEAMS[1], 2)
    assert not S.within_quota(TEAMS, {"a": 0, "b": 4}, 4, TEAMS[1], 3)
    assert S.within_quota(TEAMS, {"a": 8, "b": 0}, 4, TEAMS[0], 8)        # b's idle 4 and the pool's 4
    assert not S.within_quota(TEAMS, {"a": 8, "b": 0}, 4, TEAMS[0], 9)
    assert not S.within_quota(TEAMS, {"a": 10, "b": 6}, 4, TEAMS[0], 1)    # 2 + 2 borrowed: the pool is spent
    assert S.within_quota(TEAMS, {"a": 8, "b": 2}, 4, TEAMS[0], 6)         # b's 2 idle and the pool's 4


def test_entitlement_is_nominal_then_weighted_max_min_of_what_is_left():
    teams = [S.Team("a", 8, weight=2), S.Team("b", 4, weight=1, limit=2), S.Team("c", 4, weight=1)]
    # 24 GPUs: nominal 8 + 4 (c wants 0); 12 left by weight 2:1 -> a 8, b 4 over its limit 2 -> a 10
    assert S.entitlement({"a": 20, "b": 20, "c": 0}, teams, 24) == pytest.approx({"a": 18, "b": 6, "c": 0})
    # a wants 9: capped at its demand; b its limit; c what is left (weights 2:1:1 first)
    assert S.entitlement({"a": 9, "b": 9, "c": 30}, teams, 24) == pytest.approx({"a": 9, "b": 6, "c": 9})
    assert S.water_fill(6, {"x": 10, "y": 10}, {"x": 2, "y": 1}) == pytest.approx({"x": 4, "y": 2})


def test_jain_and_percentiles():
    assert S.jain([1, 1, 1]) == pytest.approx(1.0)
    assert S.jain([1, 0]) == pytest.approx(0.5)
    assert S.percentile([5, 1, 3, 2, 4], 50) == 3 and S.percentile([5, 1, 3, 2, 4], 95) == 5
    assert math.isnan(S.percentile([], 50))


def test_jobs_are_seeded_bursts_within_the_stated_shapes():
    teams = S.make_teams(5, 2560)
    assert [t.nominal for t in teams] == [768, 512, 384, 256, 128] and teams[1].limit == 256
    jobs = S.make_jobs(teams, 24.0, seed=3, bursts_per_day=4)
    assert jobs == S.make_jobs(teams, 24.0, seed=3, bursts_per_day=4) and jobs != S.make_jobs(teams, 24.0, seed=4)
    assert all(j.gpus in S.SIZES and S.MIN_RUN <= j.duration <= S.MAX_RUN and 0 <= j.arrival <= 86400 + 1200
               for j in jobs)
    assert all(j.pods * j.per_pod == j.gpus and j.per_pod <= 8 for j in jobs)
    for t in teams:                     # 4 bursts a day, each 1.5 to 3 x nominal GPUs
        asked = sum(j.gpus for j in jobs if j.team == t.name)
        assert 4 * 1.5 * t.nominal <= asked <= 4 * 3 * t.nominal + 4 * 32
