"""Arrivals placed against the committed plan with the last round's node classes and capacity
(`placer.solve.incremental`, issue 24 item 4). Judged by the exact oracle (tests/solve/oracle.py):
on every round of random sequences (arrivals join what is committed, committed work departs),
each pod an arrival was given lands on a node it may run on, and all the committed pods of the
cluster still fit (an exact CP-SAT check) beside them; the fast path answers only with every
arrival placed, and it answers on most rounds. Reuse is read from its counters: an unchanged
cluster's classes are not built again, a departure gives its capacity back."""

from __future__ import annotations

import dataclasses
import random

from placer.actuate.steer import nodes_by_workload, pinned
from placer.model.fleet import Fleet
from placer.solve.groups import GPU_RESOURCES
from placer.solve.incremental import Reuse, place_arrivals
from placer.solve.problem import group_info, uses_match_fields
from tests.builders import cluster, fleet, group, wl
from tests.solve import oracle as O


def judge(f: Fleet, arrivals, committed, plan) -> None:
    """Every arrival placed, whole, on nodes it may run on; and every committed pod of each
    cluster still fits (exactly) in what the arrivals leave."""
    assert {p.workload for p in plan.placements} == {w.key for g in arrivals for w in g.workloads}
    insts = {(w.key, i.key): i for g in arrivals for w in g.workloads for i in w.instances}
    left = {cl.name: [O.free(n) for n in cl.nodes] for cl in f.clusters}
    for g in arrivals:
        assert len({p.cluster for p in plan.placements if p.group == g.key}) == 1, f"{g.key} split"
    for p in plan.placements:
        cl = f.cluster(p.cluster)
        pos = {n.name: i for i, n in enumerate(cl.nodes)}
        counted = {}
        for node, per in p.nodes.items():
            for ikey, n in per.items():
                inst = insts[(p.workload, ikey)]
                assert O.may_run(inst, cl.nodes[pos[node]]), f"{p.workload} may not run on {node}"
                for r, a in O.demand(inst).items():
                    left[p.cluster][pos[node]][r] -= a * n
                counted[ikey] = counted.get(ikey, 0) + n
        assert counted == {i.key: i.pods for i in next(w for g in arrivals for w in g.workloads
                                                        if w.key == p.workload).instances}
    for cl in f.clusters:
        caps = left[cl.name]
        assert all(v >= 0 for cap in caps for v in cap.values()), f"{cl.name} overfull"
        parts = [i for g, c in committed if c == cl.name for w in g.workloads for i in w.instances]
        if parts:
            assert O.fits(parts, cl.nodes, caps, []), f"{cl.name}: committed pods no longer fit"


def random_fleet(rng: random.Random) -> Fleet:
    clusters = []
    for c in range(rng.randint(1, 3)):
        specs = [f"{rng.randint(1, 4)}x{rng.choice((4, 8))} used={rng.choice((0, 0, 1, 2))}"
                 + (" gpu=a100" if rng.random() < 0.5 else "") for _ in range(rng.randint(1, 3))]
        clusters.append(cluster(f"c{c}", *specs))
    return fleet(*clusters)


def random_group(rng: random.Random, key: str):
    specs = [f"{rng.randint(1, 3)}x{rng.choice((1, 1, 2, 4))}" + (" gpu=a100" if rng.random() < 0.2 else "")
             for _ in range(rng.randint(1, 2))]
    return group(wl(f"ns/{key}", *specs, prio=rng.choice((0, 10, 50))))


def test_random_rounds_place_exactly_against_what_is_committed():
    answered = rounds = 0
    for seed in range(60):
        rng = random.Random(seed)
        f = random_fleet(rng)
        reuse = Reuse()
        committed: list = []
        for r in range(6):
            if committed and rng.random() < 0.3:          # a departure
                committed.pop(rng.randrange(len(committed)))
            arrivals = [random_group(rng, f"s{seed}-r{r}-{i}") for i in range(rng.randint(1, 3))]
            plan = place_arrivals(reuse, f, arrivals, committed)
            rounds += 1
            if plan is None:
                continue
            answered += 1
            judge(f, arrivals, committed, plan)
            where = {p.group: p.cluster for p in plan.placements}
            committed += [(dataclasses.replace(g, key=f"creating:{g.key}"), where[g.key]) for g in arrivals]
    assert answered >= rounds // 2, f"the fast path answered {answered} of {rounds} rounds"


def test_an_arrival_that_does_not_fit_leaves_the_round_to_the_full_solve():
    f = fleet("east: 1x8")
    reuse = Reuse()
    big = group(wl("ns/big", "1x8"))
    assert place_arrivals(reuse, f, [group(wl("ns/other", "1x1")), big], [(group(wl("ns/held", "1x4")), "east")]) is None
    # nothing was taken by the refused attempt: a 4-GPU arrival still fits beside the committed 4
    plan = place_arrivals(reuse, f, [group(wl("ns/four", "1x4"))], [(group(wl("ns/held", "1x4")), "east")])
    assert plan is not None and [p.workload for p in plan.placements] == ["ns/four"]


def test_unchanged_clusters_keep_their_classes_and_departures_give_capacity_back():
    f = fleet("east: 2x8", "west: 2x8")
    reuse = Reuse()
    held = [(group(wl(f"ns/h{i}", "1x8")), "east") for i in range(2)]
    assert place_arrivals(reuse, f, [group(wl("ns/a", "1x8"))], held) is not None
    assert (reuse.rebuilt, reuse.reused) == (2, 0)
    # east is full: a second 8-GPU arrival goes to west's last node; a third fits nowhere
    plan = place_arrivals(reuse, f, [group(wl("ns/b", "1x8"))], held + [(group(wl("ns/a", "1x8")), "west")])
    assert plan is not None and plan.placements[0].cluster == "west"
    full = held + [(group(wl("ns/a", "1x8")), "west"), (group(wl("ns/b", "1x8")), "west")]
    assert place_arrivals(reuse, f, [group(wl("ns/c", "1x8"))], full) is None
    # one of east's departs: its node is free again, with the classes kept
    plan = place_arrivals(reuse, f, [group(wl("ns/c", "1x8"))], full[1:])
    assert plan is not None and plan.placements[0].cluster == "east"
    assert reuse.rebuilt == 2 and reuse.reused == 6
    # a cluster that changed (a node more on west) is built again, the other not
    grown = Fleet((f.clusters[0], cluster("west", "3x8")), f.taken_at)
    plan = place_arrivals(reuse, grown, [group(wl("ns/d", "1x8"))], full[1:] + [(group(wl("ns/c", "1x8")), "east")])
    assert plan is not None and plan.placements[0].cluster == "west"
    assert reuse.rebuilt == 3 and reuse.reused == 7


def test_arrivals_competing_for_one_node_are_left_to_the_full_solve():
    """Two arrivals of different priorities want the one free node: the fast path answers
    only with both placed, so with room for one it hands the round to the full solve (which
    gives the node to the higher priority and the other its reason)."""
    f = fleet("east: 1x8")
    low, high = group(wl("ns/low", "1x8", prio=0)), group(wl("ns/high", "1x8", prio=100))
    assert place_arrivals(Reuse(), f, [low, high]) is None
    plan = place_arrivals(Reuse(), fleet("east: 2x8"), [low, high])
    assert plan is not None and sorted(p.workload for p in plan.placements) == ["ns/high", "ns/low"]


def test_clusters_kept_node_by_node_serve_every_later_round():
    """The daemon steers copies to their nodes by name (matchFields), so a committed copy
    needs each node its own class. Built so from the start (`by_name`, the daemon's idle-time
    warm-up), the first steered copy committed rebuilds nothing; and kept so, a round with no
    steered copy left reuses them too (each node its own class is exact for every group)."""
    f = fleet("east: 60x8", "west: 60x8")             # beyond NODE_EXACT_MAX_NODES: classes by default
    reuse = Reuse()
    assert place_arrivals(reuse, f, [], by_name=True) is not None
    assert (reuse.rebuilt, reuse.reused) == (2, 0)
    a = group(wl("ns/a", "1x8"))
    plan = place_arrivals(reuse, f, [a], by_name=True)
    assert plan is not None
    steered = [(pinned(a, nodes_by_workload(plan.placements)), plan.placements[0].cluster)]
    assert uses_match_fields([group_info(0, steered[0][0], GPU_RESOURCES)])
    b = group(wl("ns/b", "1x8"))
    plan = place_arrivals(reuse, f, [b], steered)
    assert plan is not None and reuse.rebuilt == 2
    judge(f, [b], [(a, steered[0][1])], plan)        # (the oracle knows no affinity)
    # classes first (no steering asked for): the first steered copy needs nodes, once
    reuse = Reuse()
    assert place_arrivals(reuse, f, [a]) is not None and reuse.rebuilt == 2
    plan = place_arrivals(reuse, f, [b], steered)
    assert plan is not None and reuse.rebuilt == 4
    c = group(wl("ns/c", "1x4"))
    plan = place_arrivals(reuse, f, [c], [(b, plan.placements[0].cluster)])     # the steered one gone
    assert plan is not None and reuse.rebuilt == 4
