"""The repaired greedy baselines the plan is never below (placer.solve), and the first contender
computed in a forked child while the parent repairs the seed (issue 24: `placer plan` on the
machine's second core).

The child computes what the serial run would: the contender's greedy plan and its repair, from
`problem` alone; the parent takes its answer in the serial run's place in the same loop, with
the same choice rule, so the plan is the serial one. Only a contender that is not gated goes
to the child (a gated one depends on the best plan before it); a child that fails or dies has
its work done by the parent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional

from placer.model.forked import Child
from placer.solve.greedy import BASELINES, Bar, greedy, greedy_order, priority_arrival_order
from placer.solve.groups import GroupInfo
from placer.solve.problem import Problem
from placer.solve.repair import Result, repair
from placer.solve.state import ClusterState

if TYPE_CHECKING:
    from placer.solve import _Rank, _Run

Order = Callable[[Iterable[GroupInfo]], list[GroupInfo]]
# the child is given up on (and its work done here) after this long past the search's end
TIMEOUT_FLOOR = 10.0
# below, a contender's greedy pass and repair cost less than forking for it (examples/: 18 groups)
MIN_GROUPS = 250


@dataclass(frozen=True)
class _Job:
    name: str
    order: Order
    gated: bool              # repaired only when its greedy plan is above the best so far


def _jobs(problem: Problem, every: bool) -> list[_Job]:
    """The contenders the loop tries, in order, one per distinct greedy sequence."""
    contenders: list[tuple[str, Order]] = [] if every else [("priority-arrival", priority_arrival_order)]
    contenders += [(name, order) for name, order in BASELINES.items() if name != "priority"]
    done, jobs = {_sequence(problem, greedy_order)}, []
    for name, order in contenders:
        if (seq := _sequence(problem, order)) in done:
            continue                    # the same greedy plan, repaired the same: no other result
        done.add(seq)
        jobs.append(_Job(name, order, not every and name in BASELINES))
    return jobs


def _sequence(problem: Problem, order: Order) -> tuple[int, ...]:
    """The groups a greedy pass in `order` tries, in turn: two orders that try them alike give
    the same plan (e.g. first-fit decreasing and priority-then-size when every group has one
    priority, as by default)."""
    return tuple(g.index for g in order(problem.groups) if g.eligible)


def _contender(problem: Problem, job: _Job, run: "_Run") -> Optional[Result]:
    """An ungated contender's greedy plan, repaired on its own capacity; None when its repair
    ran out of work (not a finished plan)."""
    states = problem.state()
    other = greedy(problem, states, order=job.order)
    other = repair(problem, other, run.search_end, states, work := run.work())
    return None if work is not None and work.out else other


class Ahead:
    """The first contender, computed by a forked child while the parent works on."""

    def __init__(self, problem: Problem, run: "_Run", every: bool, idle: Callable[[], None] | None = None) -> None:
        self.idle = idle          # the parent's work that depends on no plan, done while the child works
        jobs = _jobs(problem, every) if len(problem.groups) >= MIN_GROUPS else []
        self.job = jobs[0] if jobs and not jobs[0].gated else None
        self.started = time.monotonic()
        # the answer boxed: a contender dropped (None) is told apart from a child that failed (None)
        self.child = Child.start(lambda: (_contender(problem, job, run),)) if (job := self.job) else None
        self.waited = 0.0

    def take(self, problem: Problem, job: _Job, run: "_Run") -> tuple[bool, Optional[Result]]:
        """Whether the child had `job`, and its answer (computed here when the child failed)."""
        if self.child is None or job != self.job:
            return False, None
        if run.progress:
            run.progress(f"greedy baseline {job.name}: waiting for the second process")
        timeout = max(TIMEOUT_FLOOR, run.search_end - time.monotonic() + TIMEOUT_FLOOR,
                      10 * (time.monotonic() - self.started))
        if self.idle and self.child.working():
            self.idle()
        child, self.child = self.child, None
        got = child.result(timeout)
        self.waited += child.waited
        return True, got[0] if got is not None else _contender(problem, job, run)   # failed or died: done here

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None


def best_baseline(problem: Problem, seed_plan: Result, seed_states: Mapping[int, ClusterState], rank: "_Rank",
                  run: "_Run", every: bool, ahead: Ahead | None = None) -> Result:
    """Every baseline, repaired: the plan is never below any of them. Unless `every` (a
    model small enough to search, at most ALL_BASELINES_MAX_GROUPS groups), the seeds are the
    two greedy plans in priority order (then size; then arrival), whose repair moves little,
    and a baseline that ignores priority (first-fit decreasing, arrival) is repaired only when
    its greedy plan is lexicographically above the best seed; its greedy pass stops once it
    cannot be (issue 24: at 10,000 groups repairing those two cost 12 s of CPU, mostly moving
    lower-priority work out of the way, for a plan no better than priority then arrival).
    Each repair but the seed's is bounded by counted work: one that runs out is dropped.
    `ahead`: the first contender computed by a child (`Ahead`), taken in its turn."""
    # the seed's capacity copied, not rebuilt pod by pod (the seed's own states hint the model)
    seeded = {c: st.copy() for c, st in seed_states.items()}
    # the seed's repair is not bounded: it is the plan when every other one is dropped
    best_name, result = "priority", repair(problem, seed_plan, run.search_end, seeded)
    for job in _jobs(problem, every):
        if run.passed(run.search_end, "baselines"):
            break                       # the safety net: flagged
        had, other = ahead.take(problem, job, run) if ahead else (False, None)
        if not had:
            other = _gated(problem, job, rank, run, result)
        # at equal GPUs, the plan whose preferred topology requests span fewer domains
        if other is not None and rank.key(other) > rank.key(result):
            best_name, result = job.name, other
    run.passed(run.search_end, "baselines")
    if run.progress:
        run.progress(f"best greedy baseline (repaired): {best_name}")
    return result


def _gated(problem: Problem, job: _Job, rank: "_Rank", run: "_Run", best: Result) -> Optional[Result]:
    """A contender computed here: a gated one's greedy pass stops once it cannot end above
    `best`, and is repaired only when it ends above; None when it is not a finished plan."""
    if not job.gated:
        return _contender(problem, job, run)
    states = problem.state()
    other = greedy(problem, states, order=job.order, bar=Bar(problem.groups, rank.lex(best), rank.ng))
    if rank.lex(other) <= rank.lex(best):
        return None                     # the plan is already at least this baseline
    other = repair(problem, other, run.search_end, states, work := run.work())    # the greedy's capacity
    return None if work is not None and work.out else other
