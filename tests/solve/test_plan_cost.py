"""What a plan costs follows what is asked of it (issue 24, item 2): best fit searches the
levels of free GPUs without sorting them for every pod, and a minimised CP-SAT stage whose
share of the effort would end inside the model's presolve is not started. Counted, not
timed; best fit is judged against a brute-force search of every node."""

from __future__ import annotations

import random

import placer.solve as S
from placer.solve import stages as STG
from placer.solve import state as ST
from placer.solve.greedy import BASELINES
from placer.solve.groups import MANY_CLASSES
from tests.builders import fleet, groups, wl
from tests.solve import oracle as O


def test_best_fit_sorts_no_levels_per_pod(monkeypatch):
    fl = fleet("c0: 6x8 used=3 | 6x8 used=5 | 4x8", "c1: 8x8 used=1 | 2x4")
    gs = groups(*(wl(f"ml/w{i:02d}", f"{1 + i % 4}x{1 + i % 3}") for i in range(30)))
    problem = S.prepare(fl, gs)
    states = problem.state()
    calls = []
    monkeypatch.setattr(ST, "sorted", lambda *a, **k: calls.append(1) or sorted(*a, **k), raising=False)
    placed = S.greedy(problem, states)
    assert len(placed) > 20
    # the old search sorted each class's levels for every pod it placed (hundreds here)
    assert calls == []


def _brute_best(st: ST.ClusterState, demand, gpu: int, classes) -> int | None:
    """The documented best fit, by looking at every node: the fewest free GPUs left, then the
    class's position in `classes` (not when the pod may use many classes), then node order."""
    many = len(classes) > MANY_CLASSES
    found = [(st.gpu[i], 0 if many else pos, i) for pos, k in enumerate(classes) for i in st.info.class_nodes[k]
             if st.gpu[i] >= gpu and all(v <= st.free[i].get(r, 0) for r, v in demand.items())]
    return min(found)[2] if found else None


def test_best_fit_is_the_brute_force_best_node_through_takes_and_gives():
    rng = random.Random(7)
    fl = fleet("c0: 5x8 used=2 | 5x8 used=6 cpu=20 | 3x4 | 4x8 used=7 | 2x0")      # every node a class
    assert len(fl.clusters[0].nodes) > MANY_CLASSES
    problem = S.prepare(fl, groups(wl("ml/x", "1x1")))
    st = problem.state()[0]
    ks = list(range(len(st.info.class_nodes)))
    held: list[tuple[int, dict[str, int]]] = []
    for step in range(1500):
        gpu = rng.choice([0, 1, 1, 2, 4, 8])
        demand = {"nvidia.com/gpu": gpu, "cpu": rng.choice([1, 4, 16]) * 1000}
        # few classes (searched class by class) and many (searched level by level)
        classes = rng.sample(ks, rng.choice([1, 3, 8, MANY_CLASSES, len(ks)]))
        want = _brute_best(st, demand, gpu, classes)
        assert st.best_node(demand, gpu, classes) == want, step
        if want is not None and rng.random() < 0.6:
            st.take(want, demand)
            held.append((want, demand))
        elif held and rng.random() < 0.5:
            i, d = held.pop(rng.randrange(len(held)))
            st.give(i, d)
    # the copy searches the same
    other = st.copy()
    for gpu in (0, 1, 2, 4, 8):
        demand = {"nvidia.com/gpu": gpu}
        assert other.best_node(demand, gpu, ks) == _brute_best(st, demand, gpu, ks)


def _contested():
    fl = fleet("c0: 3x8 used=3 | 2x8", "c1: 2x8 used=5 | 1x4")
    gs = groups(*(wl(f"ml/a{i:02d}", "2x4", prio=i % 2) for i in range(12)),
                *(wl(f"ml/b{i:02d}", "1x3") for i in range(6)))
    return fl, gs


def _stages_run(monkeypatch) -> list[str]:
    ran: list[str] = []
    run = STG._run_stage
    monkeypatch.setattr(STG, "_run_stage", lambda m, stage, *a: ran.append(stage.label) or run(m, stage, *a))
    return ran


def test_a_polish_stage_below_the_models_presolve_is_not_started(monkeypatch):
    fl, gs = _contested()
    ran = _stages_run(monkeypatch)
    said: list[str] = []
    # the estimate as large as a 10,000-node model's presolve is against this small one
    monkeypatch.setattr(STG, "PRESOLVE_EFFORT_PER_TERM", 1.0)
    plan = S.solve(fl, gs, time_limit=60, progress=said.append)
    assert "fragmentation" not in ran and any(r.startswith("priorit") for r in ran)
    assert any(m.startswith("fragmentation: not searched") for m in said)
    # not proven, so not called optimal
    assert plan.summary.status == "feasible"
    assert plan.summary.gpus_placed > 0 and plan.unplaced


def test_a_small_models_polish_stages_are_searched(monkeypatch):
    fl, gs = _contested()
    ran = _stages_run(monkeypatch)
    S.solve(fl, gs, time_limit=60)
    assert "fragmentation" in ran


def test_a_baselines_repair_starts_from_its_greedys_capacity(monkeypatch):
    import sys
    repair_mod = sys.modules["placer.solve.repair"]
    fl, gs = _contested()
    problem = S.prepare(fl, gs)
    rank = S._Rank(problem, {g.index: g for g in problem.groups}, len(problem.groups) + 1)
    run = S._Run(float("inf"), float("inf"), 2, 0, 1.0, None)
    work = problem.state()
    seed = S.greedy(problem, work)
    rebuilt = []
    states_of = repair_mod.states_of
    monkeypatch.setattr(repair_mod, "states_of", lambda *a, **k: rebuilt.append(1) or states_of(*a, **k))
    S._best_baseline(problem, seed, work, rank, run, True)
    # the seed's states serve the model's hint: its repair starts from a copy of them (3
    # rebuilt on the older code, 1 on the last)
    assert rebuilt == []


def test_a_repair_from_the_greedys_capacity_is_the_repair_from_scratch():
    rng = random.Random(3)
    for case in range(6):
        fl = fleet(*(f"c{c}: {rng.randint(2, 5)}x8 used={rng.randint(0, 6)} | {rng.randint(1, 3)}x4"
                     for c in range(3)))
        gs = groups(*(wl(f"ml/w{i:02d}", f"{rng.randint(1, 4)}x{rng.choice([1, 2, 4, 8])}", prio=rng.choice([0, 5, 9]))
                      for i in range(rng.randint(10, 30))))
        problem = S.prepare(fl, gs)
        for name, order in BASELINES.items():
            states = problem.state()
            plan = S.greedy(problem, states, order=order)
            assert S.repair(problem, plan, None, states) == S.repair(problem, plan), (case, name)


def test_effort_by_gap_is_an_option_off_by_default(monkeypatch):
    fl, gs = _contested()
    monkeypatch.setattr(STG, "lp_bound", lambda *a: (_ for _ in ()).throw(AssertionError("LP solved")))
    plan = S.solve(fl, gs, time_limit=60)
    assert plan.summary.gpus_placed > 0


def test_the_stages_lp_bound_bounds_the_exact_optimum(monkeypatch):
    # one priority level: the stage is GPUs x (groups + 1) + 1 per group placed
    fl = fleet("c0: 3x8 used=3 | 2x8", "c1: 2x8 used=5 | 1x4")
    gs = groups(*(wl(f"ml/a{i:02d}", f"{1 + i % 3}x{2 + 2 * (i % 2)}") for i in range(10)),
                *(wl(f"ml/b{i:02d}", "1x3") for i in range(5)))
    bounds: list[tuple[str, float | None]] = []
    real = STG.lp_bound
    monkeypatch.setattr(STG, "lp_bound", lambda m, terms, *kept: bounds.append(("", real(m, terms, *kept))) or bounds[-1][1])
    said: list[str] = []
    plan = S.solve(fl, gs, time_limit=60, effort_by_gap=True, progress=said.append)
    assert plan.unplaced, "the instance must be contested"
    assert len(bounds) == 1 and bounds[0][1] is not None
    (gpus, placed), = O.optimum(fl, gs)
    assert bounds[0][1] >= gpus * (len(gs) + 1) + placed - 1e-6
    assert any("LP bound" in m for m in said)


def test_a_stage_gets_its_share_by_its_gap():
    assert STG.scaled(1.0, 99, 100.0) == 1.0                # 1% below the bound: the whole share
    assert STG.scaled(0.5, 80, 100.0) == 0.5
    assert abs(STG.scaled(1.0, 995, 1000.0) - 0.5) < 1e-9   # 0.5%: half
    assert STG.scaled(1.0, 1000, 1000.0) == 0.1             # at the bound: the least share
    assert STG.scaled(1.0, None, 1000.0) == 1.0 and STG.scaled(1.0, 5, None) == 1.0
