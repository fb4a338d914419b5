"""The repair pass (placer.solve.repair) on plans written by hand: strict priority holds
after it whatever plan it is given (issue 24), judged by tests/solve/oracle.py's exact checker."""

from placer.model.plan import Plan
from placer.solve import _build_plan, solve
from placer.solve.problem import prepare
from placer.solve.repair import repair
from placer.solve.state import try_place
from tests.builders import GPU, MIG, fleet, groups, wl
from tests.solve import oracle as O
from tests.solve import oracle_hetero as OH


def _start(problem, where: dict[str, str]):
    """A plan placing the named groups on the named clusters (best fit), in that order."""
    states = problem.state()
    names = {cl.name: c for c, cl in enumerate(problem.clusters)}
    result = {}
    for g in problem.groups:
        if g.key in where:
            c = names[where[g.key]]
            assign = try_place(states[c], g)
            assert assign is not None, g.key
            result[g.index] = (c, assign)
    return result


def _plan(problem, result) -> Plan:
    return _build_plan(problem, result, [], {}, status="feasible", seconds=0.0)


def test_a_displaced_group_takes_a_cluster_from_still_lower_work():
    """`a` (priority 30) takes east from `b` (20); `b` fits nowhere beside the plan, but west
    holds only `c` (10): `b` must take west from it. The old repair gave a displaced group no
    turn of its own: `b` stayed out while `c` kept what it needed."""
    f = fleet("east: 1x8", "west: 1x8")
    gs = groups(wl("ml/a", "1x8", prio=30), wl("ml/b", "1x8", prio=20), wl("ml/c", "1x4", prio=10))
    problem = prepare(f, gs)
    start = _start(problem, {"ml/b": "east", "ml/c": "west"})
    assert O.strict_priority_violations(f, gs, _plan(problem, start))     # the judge sees the start's fault
    plan = _plan(problem, repair(problem, start))
    assert O.strict_priority_violations(f, gs, plan) == []
    assert {p.workload: p.cluster for p in plan.placements} == {"ml/a": "east", "ml/b": "west"}
    assert O.false_reasons(f, gs, plan) == []


def test_displacement_chains_down_the_levels():
    """Four levels, one cluster each step down: every displaced group gets its turn, so the
    chain ends with the lowest level out, never a middle one."""
    f = fleet("c1: 1x8", "c2: 1x8", "c3: 1x8")
    gs = groups(wl("ml/p40", "1x8", prio=40), wl("ml/p30", "1x8", prio=30),
                wl("ml/p20", "1x8", prio=20), wl("ml/p10", "1x8", prio=10))
    problem = prepare(f, gs)
    start = _start(problem, {"ml/p30": "c1", "ml/p20": "c2", "ml/p10": "c3"})
    plan = _plan(problem, repair(problem, start))
    assert O.strict_priority_violations(f, gs, plan) == []
    assert {p.workload for p in plan.placements} == {"ml/p40", "ml/p30", "ml/p20"}



def test_issue_24_fleet_where_the_old_repair_left_higher_priority_work_out():
    """A heterogeneous fleet (tests/solve/oracle_hetero.py; 3 clusters, 165 nodes, 76 groups,
    12 levels) on which the old repair left two groups (priorities 43 and 40) unplaced on
    clusters where lower-priority work held what they needed: through the whole solve now."""
    f, gs = OH.hetero_instance("medium", 4)
    plan = solve(f, gs, time_limit=60, workers=2, gpu_resources=(GPU, MIG))
    assert O.strict_priority_violations(f, gs, plan) == []
    assert O.false_reasons(f, gs, plan) == []


def test_issue_24_live_like_fleet_at_full_size():
    """10 clusters, ~1,100 nodes each its own class (as live nodes are), 400 workloads of every
    core kind, 12 levels, MIG counted as GPUs: the old repair left priority-20 work out of two
    clusters where lower-priority work held what it needed (3 pairs)."""
    f, gs = OH.hetero_instance("live", 2)
    plan = solve(f, gs, time_limit=60, workers=2, gpu_resources=(GPU, MIG))
    assert O.strict_priority_violations(f, gs, plan) == []
