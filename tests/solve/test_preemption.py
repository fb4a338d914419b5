"""Issue 23 item 4: the pure preemption step (placer.solve.preemption). The victims run
(their pods bound: the snapshot's `used`, their quota use counted as the daemon counts it);
the preemptor waits unplaced. Judged by tests/solve/oracle_quota.placeable (an exact
node-level placement check written without placer's solver) over every subset of the
victims the policy allows, in the order the issue asks: fewest GPUs, then fewest
workloads, then the youngest."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest

from placer.model.fleet import Fleet
from placer.model.quota import Quotas
from placer.solve import solve
from placer.solve.preemption import Eligible, preemptions
from tests.builders import GPU, fleet, group, wl
from tests.solve import oracle as O
from tests.solve import oracle_quota as OQ

RANK = {"within-quota": 0, "reclaim": 1, "priority": 2}


def _running(f: Fleet, qs, victims):
    """Place `victims` (groups) on `f` and make them run: the fleet with their pods' usage,
    the plan that placed them (for the oracle), and their Eligible entries (the first one
    placed the oldest)."""
    plan = solve(f, victims, time_limit=20, workers=1)
    assert not plan.unplaced, plan.unplaced
    by = {g.key: g for g in victims}
    used: dict[tuple[str, str], dict[str, int]] = {}
    frees: dict[str, dict[str, dict[str, int]]] = {}
    for p in plan.placements:
        insts = {i.key: i for w in by[p.group].workloads for i in w.instances}
        for node, counts in p.nodes.items():
            for ikey, n in counts.items():
                for r, v in O.demand(insts[ikey]).items():
                    for slot in (used.setdefault((p.cluster, node), {}),
                                 frees.setdefault(p.group, {}).setdefault(node, {})):
                        slot[r] = slot.get(r, 0) + v * n
    clusters = []
    for c in f.clusters:
        nodes = tuple(replace(n, used={r: n.used.get(r, 0) + used.get((c.name, n.name), {}).get(r, 0)
                                       for r in {*n.used, *used.get((c.name, n.name), {})}}) for n in c.nodes)
        clusters.append(replace(c, nodes=nodes))
    where = {p.group: p.cluster for p in plan.placements}
    elig = [Eligible(g.key, g, where[g.key], O.priority(g), float(i), frees.get(g.key, {}))
            for i, g in enumerate(victims)]
    counted: dict[str, dict[str, int]] = {}
    for g in victims:
        for q, n in OQ.use(qs, g).items():
            counted.setdefault(q, {GPU: 0})[GPU] += n
    loaded = replace(f, clusters=tuple(clusters))
    if qs:
        loaded = replace(loaded, quotas=Quotas(OQ.to_yaml_quotas(qs).entries, counted=counted))
    return loaded, plan, elig


def _decide(f, qs, victims, arrivals, policy):
    loaded, vplan, elig = _running(f, qs, victims)
    plan = solve(loaded, arrivals, time_limit=20, workers=1)
    return loaded, vplan, elig, plan, preemptions(loaded, arrivals, plan, policy, elig)


def _rule(qs, g, v, victims_use) -> str:
    mine = OQ.owner(qs, g.workloads[0].namespace) if qs else None
    theirs = OQ.owner(qs, v.workloads[0].namespace) if qs else None
    if (mine and mine.name) == (theirs and theirs.name):
        return "within-quota"
    if theirs is not None and mine is not None and victims_use.get(theirs.name, 0) > theirs.nominal:
        return "reclaim"
    return "priority"


def _expected(f, qs, victims, vplan, elig, plan, arrivals, policy):
    """By brute force: the first unplaced arrival (highest priority, then key) with a subset
    of allowed victims that the oracle says lets it in, and that subset (fewest GPUs, then
    fewest workloads, then the youngest)."""
    gpus = {g.key: O.gpus(g) for g in victims}
    age = {e.key: e.placed_at for e in elig}
    used: dict[str, int] = {}
    for g in victims:
        for q, n in OQ.use(qs, g).items():
            used[q] = used.get(q, 0) + n
    unplaced = {u.group for u in plan.unplaced}
    for g in sorted((g for g in arrivals if g.key in unplaced), key=lambda g: (-O.priority(g), g.key)):
        allowed = [v for v in victims if O.priority(v) < O.priority(g)
                   and RANK[_rule(qs, g, v, used)] <= RANK[policy]]
        subsets = [s for k in range(1, len(allowed) + 1) for s in itertools.combinations(allowed, k)]
        subsets.sort(key=lambda s: (sum(gpus[v.key] for v in s), len(s), sorted(-age[v.key] for v in s)))
        mine = OQ.owner(qs, g.workloads[0].namespace) if qs else None
        for s in subsets:
            if policy == "reclaim" and any(_rule(qs, g, v, used) == "reclaim" for v in s):
                left = used.get(mine.name, 0) - sum(OQ.use(qs, v).get(mine.name, 0) for v in s)
                if left + OQ.use(qs, g).get(mine.name, 0) > mine.nominal:
                    continue
            # the other arrivals the plan placed are held too
            held = replace(vplan, placements=vplan.placements + plan.placements)
            if OQ.placeable(f, qs, victims + arrivals, held, g, without=[v.key for v in s]):
                return g.key, sorted(v.key for v in s)
    return None


def test_off_or_nothing_eligible_preempts_nothing():
    f = fleet("a: 1x8")
    victims = [group(wl("t/low", "1x8", prio=0))]
    arrivals = [group(wl("t/high", "1x8", prio=10))]
    for policy in ("off", "bogus"):
        assert _decide(f, [], victims, arrivals, policy)[-1] == ()
    loaded, _, _, plan, _ = _decide(f, [], victims, arrivals, "within-quota")
    assert preemptions(loaded, arrivals, plan, "within-quota", []) == ()


def test_within_quota_takes_the_lowest_priority_never_equal():
    """One 8-GPU node holding two 4-GPU jobs: priority 5 (older) and priority 10. A
    priority-10 arrival may take only the priority-5 one: nothing (an equal priority never
    goes). A priority-20 arrival of 4 GPUs takes one job: the youngest of equal cost."""
    f = fleet("a: 1x8")
    victims = [group(wl("t/old", "1x4", prio=5)), group(wl("t/young", "1x4", prio=10))]
    got = _decide(f, [], victims, [group(wl("t/ten", "1x8", prio=10))], "within-quota")[-1]
    assert got == ()
    got = _decide(f, [], victims, [group(wl("t/eleven", "1x4", prio=10))], "within-quota")[-1]
    assert [p.victims for p in got] == [("t/old",)] and got[0].rule == "within-quota"
    got = _decide(f, [], victims, [group(wl("t/top", "1x4", prio=20))], "within-quota")[-1]
    assert [p.victims for p in got] == [("t/young",)]
    assert got[0].cluster == "a" and got[0].gpus == 4 and "t/top (priority 20)" in got[0].reason


def test_reclaim_takes_borrowed_work_only_and_keeps_the_preemptor_within_nominal():
    """red borrowed blue's idle nominal (16 on a 16-GPU fleet, nominal 8 each). A blue job of
    4 arrives: within-quota finds nothing (no blue work runs), reclaim takes the youngest of
    red's 4-GPU jobs; a blue job of 12 (beyond blue's nominal 8) is never let in by reclaim."""
    f = fleet("a: 2x8")
    qs = [OQ.Q("red", ("red",), 8, None, "lab"), OQ.Q("blue", ("blue",), 8, None, "lab")]
    victims = [group(wl(f"red/r{i}", "1x4", prio=0)) for i in range(4)]
    arrivals = [group(wl("blue/b", "1x4", prio=5))]
    assert _decide(f, qs, victims, arrivals, "within-quota")[-1] == ()
    got = _decide(f, qs, victims, arrivals, "reclaim")[-1]
    assert [(p.preemptor, p.victims, p.rule) for p in got] == [("blue/b", ("red/r3",), "reclaim")]
    big = [group(wl("blue/big", "3x4", prio=5))]
    assert _decide(f, qs, victims, big, "reclaim")[-1] == ()
    # priority lets it in across quotas: it takes three (the youngest)
    got = _decide(f, qs, victims, big, "priority")[-1]
    assert len(got) == 1 and sorted(got[0].victims) == ["red/r1", "red/r2", "red/r3"] and got[0].rule == "priority"


def test_reclaim_never_takes_a_quota_within_its_nominal():
    """red uses exactly its nominal: it borrows nothing, so reclaim takes nothing of it."""
    f = fleet("a: 2x8")
    qs = [OQ.Q("red", ("red",), 8, None, "lab"), OQ.Q("blue", ("blue",), 8, None, "lab")]
    victims = [group(wl(f"red/r{i}", "1x4", prio=0)) for i in range(2)] + [group(wl("blue/x", "2x4", prio=0))]
    arrivals = [group(wl("blue/b", "1x4", prio=5))]
    got = _decide(f, qs, victims, arrivals, "reclaim")[-1]
    # blue is at its nominal already: only its own lower-priority work may go
    assert [(p.victims, p.rule) for p in got] == [(("blue/x",), "within-quota")]


def _instance(seed: int):
    rnd = random.Random(seed)
    f = fleet(*(f"c{i}: {rnd.randint(1, 2)}x8" for i in range(rnd.randint(1, 2))))
    total = sum(n.allocatable.get(GPU, 0) for c in f.clusters for n in c.nodes)
    qs = [OQ.Q("red", ("red",), rnd.choice((0, 4, 8)), None, "lab"),
          OQ.Q("blue", ("blue",), rnd.choice((4, 8)), None, "lab")] if rnd.random() < 0.7 else []
    victims, load = [], 0
    for i in range(rnd.randint(2, 6)):
        size = rnd.choice((2, 4, 4, 8))
        if load + size > total:
            continue
        load += size
        victims.append(group(wl(f"{rnd.choice(('red', 'red', 'blue'))}/v{i}", f"1x{size}", prio=rnd.choice((0, 5)))))
    arrivals = [group(wl(f"{rnd.choice(('red', 'blue'))}/a{i}", f"1x{rnd.choice((2, 4, 8))}",
                         prio=rnd.choice((5, 10, 10)))) for i in range(rnd.randint(1, 2))]
    return f, qs, victims, arrivals, rnd.choice(("within-quota", "reclaim", "priority"))


@pytest.mark.parametrize("seed", range(24))
def test_random_small_fleets_minimal_by_brute_force(seed):
    f, qs, victims, arrivals, policy = _instance(seed)
    if not victims:
        pytest.skip("no victim fits this instance")
    fq = replace(f, quotas=OQ.to_yaml_quotas(qs)) if qs else f
    try:
        loaded, vplan, elig, plan, got = _decide(fq, qs, victims, arrivals, policy)
    except AssertionError:
        pytest.skip("the victims do not all fit under these quotas")
    want = _expected(f, qs, victims, vplan, elig, plan, arrivals, policy)
    have = (got[0].preemptor, sorted(got[0].victims)) if got else None
    assert have == want, (policy, qs, [g.key for g in victims], got)
    for p in got:
        g = next(a for a in arrivals if a.key == p.preemptor)
        assert all(e.priority < O.priority(g) for e in elig if e.key in p.victims)


def test_many_candidates_are_searched_per_cluster_and_stay_minimal():
    """24 running 2-GPU jobs on three clusters (more than the exact enumeration takes): a 4-GPU
    arrival takes two jobs of one node; the oracle says those two let it in and no single job does."""
    f = fleet("c0: 2x8", "c1: 2x8", "c2: 2x8")
    victims = [group(wl(f"t/v{i:02d}", "1x2", prio=0)) for i in range(24)]
    arrivals = [group(wl("t/big", "1x4", prio=10))]
    loaded, vplan, elig, plan, got = _decide(f, [], victims, arrivals, "within-quota")
    assert len(got) == 1 and len(got[0].victims) == 2 and got[0].gpus == 4, got
    held = replace(vplan, placements=vplan.placements + plan.placements)
    assert OQ.placeable(f, [], victims + arrivals, held, arrivals[0], without=list(got[0].victims))
    assert not any(OQ.placeable(f, [], victims + arrivals, held, arrivals[0], without=[v.key])
                   for v in victims[:8])            # one job frees 2 GPUs on a full node: never enough
    nodes = {n for p in vplan.placements if p.group in got[0].victims for n in p.nodes}
    assert len(nodes) == 1                          # both on the node it then takes
