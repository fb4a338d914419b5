"""What would make it fit (placer.solve.options), judged independently.

Every option offered is applied to the input (the workloads taken out, the nodes added, the
constraint dropped) and the exact node-level judge of tests/solve/oracle.py, written without the
solver, must then fit the workload beside the plan's other placements, held where they are.
Options must be minimal (brute-forced: no smaller removal set, no fewer nodes works), must
be offered where the judge says one exists (the random instances have at most three clusters,
all of which the search re-solves), never where none does, and come out the same for the
same input. The CLI and the live path (running pods read from a test API server)
are covered at the end.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from pathlib import Path
from typing import AbstractSet as Set
from typing import Sequence

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.model.fleet import Fleet, Node
from placer.model.plan import Plan
from placer.model.topology import TopologyRequest
from placer.model.workload import PlacementGroup
from placer.solve import solve
from placer.solve.options import Option, Running, what_would_fit, with_options
from tests.builders import cluster, fleet, group, groups, wl
from tests.solve import oracle as O

GPU = "nvidia.com/gpu"
ROOT = Path(__file__).resolve().parents[2]
CASES = int(os.environ.get("PLACER_OPTIONS_CASES", "12"))


# --- the independent judge -----------------------------------------------------------------

def _minus(f: Fleet, taken: Sequence[Running]) -> Fleet:
    """The fleet with these running workloads gone: their usage off the nodes."""
    out = []
    for cl in f.clusters:
        nodes = []
        for n in cl.nodes:
            used = dict(n.used)
            for r in taken:
                if r.cluster == cl.name:
                    for res, v in r.usage.get(n.name, {}).items():
                        used[res] = used.get(res, 0) - v
            nodes.append(dataclasses.replace(n, used=used))
        out.append(dataclasses.replace(cl, nodes=tuple(nodes)))
    return Fleet(tuple(out), f.taken_at)


def _plus_nodes(f: Fleet, where: str, option: Option) -> Fleet:
    assert option.node is not None
    extra = tuple(Node(f"judge-new-{i}", dict(option.node.allocatable), {}, dict(option.node.labels),
                       option.node.taints) for i in range(option.count))
    return Fleet(tuple(dataclasses.replace(c, nodes=c.nodes + extra) if c.name == where else c
                       for c in f.clusters), f.taken_at)


def judge_fits(f: Fleet, gs: Sequence[PlacementGroup], plan: Plan, target: PlacementGroup, where: str,
               dropped: Set[str] = frozenset(), taken: Sequence[Running] = ()) -> bool:
    """Does `target` fit cluster `where` with the plan's placements held (less the groups
    `dropped`) and the running workloads `taken` gone? The oracle's exact node-level check."""
    f2 = _minus(f, taken)
    cl = f2.cluster(where)
    if cl is None or not O.policy_ok(target, cl) or not O.levels_ok(target, cl):
        return False
    caps = O.plan_load(f2, gs, plan, keep=lambda g: g.key not in dropped)[where]
    return O.fits([i for _, i in O.instances(target)], cl.nodes, caps, O.units(target))


def _planned_on(plan: Plan, gs, where: str) -> dict[str, PlacementGroup]:
    keys = {p.group for p in plan.placements if p.cluster == where}
    return {g.key: g for g in gs if g.key in keys}


def candidates(f, gs, plan, target, where: str, kind: str, running: Sequence[Running]):
    """(name, gpus, dropped group keys, running taken, workload names) for each unit the option may take out,
    by the option's definition: lower priority (preempt) planned or running; running (wait)."""
    prio = O.priority(target)
    out: list[tuple[str, int, set[str], tuple[Running, ...], set[str]]] = []
    if kind == "preempt":
        for key, g in sorted(_planned_on(plan, gs, where).items()):
            if O.priority(g) < prio:
                out.append((key, O.gpus(g), {key}, (), {w.key for w in g.workloads}))
    for r in running:
        if r.cluster == where and (kind == "wait" or r.priority < prio):
            out.append((r.workload, sum(d.get(GPU, 0) for d in r.usage.values()), set(), (r,), {r.workload}))
    return out


def apply_removal(f, gs, plan, target, option: Option, running: Sequence[Running]) -> bool:
    names = set(option.to_dict()["workloads"])
    dropped = {g.key for g in gs if any(w.key in names for w in g.workloads)} if option.kind == "preempt" else set()
    taken = [r for r in running if r.workload in names]
    return judge_fits(f, gs, plan, target, str(option.cluster), dropped, taken)


def check_options(f, gs, plan: Plan, running: Sequence[Running], found) -> list[str]:
    """Every option works (judge), is minimal (brute force), and every kind the judge says
    exists per cluster is offered (small instances, nothing cut short)."""
    problems = []
    for g in gs:
        if g.key not in found:
            continue
        got = found[g.key]
        where = {(o.kind, o.cluster): o for o in got.options if o.kind != "relax"}
        for cl in f.clusters:
            if not cl.reachable or not cl.nodes:
                continue
            for kind in ("preempt", "wait"):
                cands = candidates(f, gs, plan, g, cl.name, kind, running)
                every = judge_fits(f, gs, plan, g, cl.name, set().union(*(c[2] for c in cands)),
                                   [r for c in cands for r in c[3]])
                o = where.get((kind, cl.name))
                if o is None:
                    if every and cands and got.incomplete is None:
                        problems.append(f"{g.key}: {kind} on {cl.name} exists but was not offered")
                    continue
                if not apply_removal(f, gs, plan, g, o, running):
                    problems.append(f"{g.key}: offered {o.render()} does not fit")
                named = set(o.to_dict()["workloads"])
                units = sum(1 for c in cands if c[4] <= named)
                chosen = [c for c in cands if c[4] <= named]
                for c in chosen:                     # irreducible: no one of them can stay
                    rest = [x for x in chosen if x is not c]
                    if judge_fits(f, gs, plan, g, cl.name, set().union(*(x[2] for x in rest)),
                                  [r for x in rest for r in x[3]]):
                        problems.append(f"{g.key}: {o.render()} works without {c[0]}")
                seen: set = set()
                for k in range(len(cands) + 1):
                    for subset in itertools.combinations(cands, k):
                        gpus = sum(c[1] for c in subset)
                        if (gpus, len(subset)) >= (o.gpus, units):
                            continue
                        # subsets freeing the very same things are one check (1-GPU pieces of a node)
                        key = tuple(sorted(_freed_key(c) for c in subset))
                        if key in seen:
                            continue
                        seen.add(key)
                        if judge_fits(f, gs, plan, g, cl.name, set().union(*(c[2] for c in subset)),
                                      [r for c in subset for r in c[3]]):
                            problems.append(f"{g.key}: {o.render()} is not minimal: "
                                            f"{[c[0] for c in subset]} ({gpus} GPUs) works")
            o = where.get(("add-nodes", cl.name))
            if o is not None:
                if not judge_fits(_plus_nodes(f, cl.name, o), gs, plan, g, cl.name):
                    problems.append(f"{g.key}: offered {o.render()} does not fit")
                fewer = dataclasses.replace(o, count=o.count - 1)
                if judge_fits(_plus_nodes(f, cl.name, fewer), gs, plan, g, cl.name):
                    problems.append(f"{g.key}: {o.render()} is not minimal")
        for o in got.options:
            if o.kind == "relax":
                relaxed = relax(g, str(o.constraint))
                if not judge_fits(f, gs, plan, relaxed, str(o.cluster)):
                    problems.append(f"{g.key}: offered {o.render()} does not fit")
    return problems


def _freed_key(c) -> tuple:
    """What taking a candidate out frees, whoever it is."""
    if c[2]:
        return ("group", tuple(sorted(c[2])))
    return ("running",) + tuple(sorted((r.cluster, n, tuple(sorted(d.items()))) for r in c[3] for n, d in r.usage.items()))


def relax(g: PlacementGroup, constraint: str) -> PlacementGroup:
    """The judge's own way of dropping a constraint from a group."""
    ann = {"pin": "placer.dev/cluster", "cluster-selector": "placer.dev/cluster-selector"}.get(constraint)
    ws = []
    for w in g.workloads:
        if ann:
            w = dataclasses.replace(w, annotations={k: v for k, v in w.annotations.items() if k != ann})
        elif constraint == "nodeSelector":
            w = dataclasses.replace(w, instances=tuple(
                dataclasses.replace(i, pod=dataclasses.replace(i.pod, node_selector={})) for i in w.instances))
        elif constraint == "topology":
            w = dataclasses.replace(w, gangs=tuple(dataclasses.replace(x, topology=()) for x in w.gangs))
        ws.append(w)
    return dataclasses.replace(g, workloads=tuple(ws))


def options(f, gs, running=(), **kw):
    plan = solve(f, gs, time_limit=30, workers=1)
    return plan, what_would_fit(f, gs, plan, running=running, **kw)


# --- each kind where it should be ---------------------------------------------------------

def busy_east() -> tuple[Fleet, list[Running]]:
    """east: 3 nodes x 8 GPUs, all in use by running work of priorities 0, 5 and 100."""
    f = fleet(cluster("east", "3x8 used=8"), cluster("west", "1x8 used=4"))
    run = [Running("team-a/etl", "Job", "east", 0, {"east-0-0": {GPU: 8}}),
           Running("team-b/train-3", "PyTorchJob", "east", 5, {"east-0-1": {GPU: 8}}),
           Running("team-c/serve", "Deployment", "east", 100, {"east-0-2": {GPU: 8}}),
           Running("team-d/small", "Job", "west", 0, {"west-0-0": {GPU: 4}})]
    return f, run


def test_preempt_the_fewest_gpus_of_lower_priority_work():
    f, run = busy_east()
    gs = groups(wl("ml/urgent", "2x8", prio=50))
    plan, found = options(f, gs, run)
    got = found["ml/urgent"]
    pre = [o for o in got.options if o.kind == "preempt"]
    assert [(o.cluster, o.to_dict()["workloads"]) for o in pre] == [("east", ["team-a/etl", "team-b/train-3"])]
    assert pre[0].render() == ("preempt team-a/etl (8 GPUs, priority 0, running), team-b/train-3 (8 GPUs, "
                               "priority 5, running) on east")
    assert check_options(f, gs, plan, run, found) == []


def test_wait_may_name_higher_priority_work_and_takes_the_fewest_gpus():
    f, run = busy_east()
    gs = groups(wl("ml/one", "1x8", prio=1))
    plan, found = options(f, gs, run)
    kinds = {(o.kind, o.cluster): o.to_dict().get("workloads") for o in found["ml/one"].options}
    # preempt: only the priority-0 job is lower; wait: any one 8-GPU workload, the first by name
    assert kinds[("preempt", "east")] == ["team-a/etl"]
    assert kinds[("wait", "east")] == ["team-a/etl"]
    assert kinds[("wait", "west")] == ["team-d/small"]        # 4 GPUs freed there: fewer disturbed
    assert ("preempt", "west") in kinds
    assert check_options(f, gs, plan, run, found) == []
    # best first: preempt before wait, fewest GPUs first within a kind
    order = [(o.kind, o.gpus) for o in found["ml/one"].options]
    assert order == sorted(order, key=lambda t: ({"preempt": 0, "wait": 1, "add-nodes": 2, "relax": 3}[t[0]], t[1]))


def test_planned_lower_priority_work_is_preempted_when_the_plan_held_it():
    """A committed group (promised, pods not bound) of a running workload takes its capacity
    first; taking that workload out frees its promise too."""
    f = fleet(cluster("east", "2x8"))
    promised = group(wl("ml/mine", "2x8", prio=0), key="promised:east/ml/mine")
    run = [Running("ml/mine", "JobSet", "east", 0, {}, promise="promised:east/ml/mine")]
    gs = groups(wl("ml/urgent", "1x8", prio=10))
    plan = solve(f, gs, committed=[(promised, "east")], workers=1)
    assert plan.unplaced and plan.committed
    found = what_would_fit(f, gs, plan, committed=[(promised, "east")], running=run)
    kinds = {(o.kind, o.cluster): o for o in found["ml/urgent"].options}
    assert kinds[("preempt", "east")].to_dict()["workloads"] == ["ml/mine"]
    assert kinds[("preempt", "east")].gpus == 16


def test_many_candidates_shrink_to_an_irreducible_set_of_the_lowest_priorities():
    """Past ten candidates, the removal set is shrunk by arithmetic, highest priorities leaving
    first, then re-solved: here the two lowest-priority of twelve full nodes."""
    f = fleet(cluster("east", "12x8 used=8"))
    run = [Running(f"t/r{i:02d}", "Job", "east", (7 * i) % 12 * 10, {f"east-0-{i}": {GPU: 8}}) for i in range(12)]
    gs = groups(wl("ml/urgent", "2x8", prio=1000))
    plan, found = options(f, gs, run)
    pre = next(o for o in found["ml/urgent"].options if o.kind == "preempt")
    assert sorted((v.priority, v.workload) for v in pre.victims) == [(0, "t/r00"), (10, "t/r07")]
    assert check_options(f, gs, plan, run, found) == []


def test_add_nodes_fewest_of_an_existing_shape():
    f = fleet(cluster("east", "2x8 used=6 gpu=h100", "2x4 gpu=l40s"))
    gs = groups(wl("ml/big", "5x4 gpu=h100"))
    plan, found = options(f, gs)
    [add] = [o for o in found["ml/big"].options if o.kind == "add-nodes"]
    # 5 pods x 4 GPUs on h100 nodes with 2 free each: 3 new 8-GPU nodes hold 6 such pods, 2 hold 4
    assert (add.cluster, add.count, add.node.like) == ("east", 3, "east-0-0")
    assert add.node.labels == {"gpu": "h100"}
    assert check_options(f, gs, plan, [], found) == []


def test_add_nodes_picks_the_shape_needing_fewest():
    f = fleet(cluster("east", "3x4 used=4", "1x8 used=8"))
    gs = groups(wl("ml/w", "2x8"))
    plan, found = options(f, gs)
    [add] = [o for o in found["ml/w"].options if o.kind == "add-nodes"]
    assert (add.count, add.node.allocatable[GPU]) == (2, 8)
    assert check_options(f, gs, plan, [], found) == []


@pytest.mark.parametrize("constraint,kw,wanted", [
    ("pin", {"pin": "east"}, "west"),
    ("cluster-selector", {"selector": "region=us-east"}, "west"),
])
def test_relax_the_workloads_own_cluster_constraint(constraint, kw, wanted):
    f = fleet(cluster("east", "1x8 used=8", labels={"region": "us-east"}),
              cluster("west", "1x8", labels={"region": "us-west"}))
    gs = groups(wl("ml/w", "1x8", **kw))
    plan, found = options(f, gs)
    [r] = [o for o in found["ml/w"].options if o.kind == "relax"]
    assert (r.constraint, r.cluster) == (constraint, wanted)
    assert r.to_dict()["workloads"] == ["ml/w"]
    assert check_options(f, gs, plan, [], found) == []


def test_relax_node_selector():
    f = fleet(cluster("east", "1x8 gpu=h100 used=8", "1x8 gpu=a100"))
    gs = groups(wl("ml/w", "1x8 gpu=h100"))
    plan, found = options(f, gs)
    [r] = [o for o in found["ml/w"].options if o.kind == "relax"]
    assert (r.constraint, r.value, r.cluster) == ("nodeSelector", "gpu=h100", "east")
    assert r.render() == "drop nodeSelector gpu=h100 of ml/w c0/0: it then fits on east"
    assert check_options(f, gs, plan, [], found) == []


def test_a_pin_placer_set_is_never_offered_for_relaxing():
    f = fleet(cluster("east", "1x8 used=8"), cluster("west", "1x8"))
    gs = groups(wl("ml/w", "1x8", pin="east"))
    plan, found = options(f, gs, held_pins={"ml/w"})
    assert not [o for o in found["ml/w"].options if o.kind == "relax"]


def test_relax_topology_when_no_rack_holds_the_gang():
    # room for four 4-GPU pods in all, for two in each rack: the 3-pod gang needs one rack
    racks = cluster("east", "1x8 example.com/rack=r1", "2x8 example.com/rack=r2 used=4")
    racks = dataclasses.replace(racks, topology=("example.com/rack",))
    w = wl("ml/gang", "3x4")
    w = dataclasses.replace(w, gangs=tuple(dataclasses.replace(g, topology=(TopologyRequest("example.com/rack", True),))
                                          for g in w.gangs))
    f, gs = fleet(racks), groups(w)
    plan = solve(f, gs, workers=1)
    assert [u.workload for u in plan.unplaced] == ["ml/gang"]
    found = what_would_fit(f, gs, plan)
    [r] = [o for o in found["ml/gang"].options if o.kind == "relax"]
    assert r.constraint == "topology" and r.value == "topology-required example.com/rack"
    assert check_options(f, gs, plan, [], found) == []


# --- never when impossible; deterministic; shape -------------------------------------------

def test_nothing_offered_when_nothing_would_work():
    # 16 GPUs in one pod: no node of any shape holds it; nothing to preempt, wait for or relax
    f, run = busy_east()
    gs = groups(wl("ml/huge", "1x16", prio=1000))
    plan, found = options(f, gs, run)
    assert found["ml/huge"].options == () and found["ml/huge"].incomplete is None


def test_no_preempt_when_even_all_lower_priority_work_is_not_enough():
    f, run = busy_east()
    gs = groups(wl("ml/big", "3x8", prio=50, pin="east"))        # needs the priority-100 node too
    plan, found = options(f, gs, run)
    kinds = {o.kind for o in found["ml/big"].options}
    assert "preempt" not in kinds and "wait" in kinds
    assert check_options(f, gs, plan, run, found) == []


def test_same_input_same_options_in_the_same_order():
    f, run = busy_east()
    gs = groups(wl("ml/a", "2x8", prio=50), wl("ml/b", "1x8 gpu=h100", prio=1), wl("ml/c", "3x4", pin="west"))
    first = [o.to_dict() for v in options(f, gs, run)[1].values() for o in v.options]
    again = [o.to_dict() for v in options(f, gs, run)[1].values() for o in v.options]
    assert first == again and first


def test_json_shape_of_each_kind():
    f, run = busy_east()
    gs = groups(wl("ml/a", "2x8", prio=50), wl("ml/b", "1x4 gpu=h100", prio=1))
    plan, found = options(f, gs, run)
    out = with_options(plan, found).to_dict()
    by_kind = {o["kind"]: o for u in out["unplaced"] for o in u["options"]}
    assert set(by_kind) == {"preempt", "wait", "add-nodes", "relax"}
    assert set(by_kind["preempt"]) == {"kind", "cluster", "workloads", "gpus", "details", "text"}
    assert set(by_kind["preempt"]["details"][0]) == {"workload", "kind", "gpus", "priority", "state"}
    assert set(by_kind["add-nodes"]) == {"kind", "cluster", "count", "node", "text"}
    assert set(by_kind["add-nodes"]["node"]) >= {"allocatable", "labels", "like"}
    assert by_kind["add-nodes"]["node"]["allocatable"][GPU] == "8"
    assert set(by_kind["relax"]) == {"kind", "constraint", "value", "workloads", "cluster", "text"}
    json.dumps(out)
    # a plan without the search has no options key (additive)
    assert "options" not in plan.to_dict()["unplaced"][0]


def test_budget_and_deadline_say_so():
    f, run = busy_east()
    gs = groups(wl("ml/a", "2x8", prio=50))
    plan = solve(f, gs, workers=1)
    late = what_would_fit(f, gs, plan, running=run, deadline=0.0)
    assert late["ml/a"] .options == () and late["ml/a"].incomplete == "time limit"


def test_the_judge_can_fail():
    """check_options rejects an option that is not minimal and one that does not work."""
    from placer.solve.options import NewNode, Options, Victim
    f, run = busy_east()
    gs = groups(wl("ml/one", "1x8", prio=1))
    plan = solve(f, gs, workers=1)
    v = {r.workload: Victim(r.workload, r.kind, 8, r.priority, "running") for r in run}
    too_many = Option("wait", "east", (v["team-a/etl"], v["team-b/train-3"]))
    assert any("is not minimal" in p for p in check_options(f, gs, plan, run, {"ml/one": Options((too_many,))}))
    small = Option("add-nodes", "east", count=1, node=NewNode("east-0-0", {GPU: 4, "cpu": 96000}, {}))
    assert any("does not fit" in p for p in check_options(f, gs, plan, run, {"ml/one": Options((small,))}))


# --- random instances, judged -------------------------------------------------------------

def _running_from_used(f: Fleet, seed: int) -> list[Running]:
    """Attribute each node's GPUs in use to running workloads of random priorities: one per
    node, or (odd seeds) one per GPU, so that past ten candidates the shrinking path runs too."""
    import random
    rnd = random.Random(seed)
    out = []
    for cl in f.clusters:
        for n in cl.nodes:
            used = n.used.get(GPU, 0)
            pieces = [used] if seed % 2 == 0 else [1] * used
            for k, size in enumerate(p for p in pieces if p):
                out.append(Running(f"run/{n.name}-{k}", "Job", cl.name, rnd.choice((0, 50, 100)),
                                   {n.name: {GPU: size}}))
    return out


@pytest.mark.parametrize("family", ["gpu", "mixed-sizes", "predicates"])
def test_random_instances_every_option_works_and_is_minimal(family):
    fam = dataclasses.replace(O.FAMILIES[family], workloads=(4, 9))
    problems, offered = [], 0
    for seed in range(CASES):
        f, gs = O.instance(fam, 7000 + seed)
        run = _running_from_used(f, seed)
        plan, found = options(f, gs, run)
        offered += sum(len(v.options) for v in found.values())
        problems += [f"seed {seed}: {p}" for p in check_options(f, gs, plan, run, found)]
    assert problems == []
    assert offered > 0


# --- the command line ----------------------------------------------------------------------

runner = CliRunner()


@pytest.fixture
def _isolated(unconfigured):
    return unconfigured             # see tests/conftest.py


TIGHT = str(ROOT / "tests" / "fleets" / "tight.yaml")


def test_cli_plan_explain_examples_on_a_tight_fleet(_isolated):
    r = runner.invoke(app, ["plan", "--explain", "-f", str(ROOT / "examples"), "--clusters", TIGHT])
    assert r.exit_code == 3, r.output
    assert "would fit after any one of:" in r.stdout
    assert "1. add 1 node like h100-0 (8 GPUs, 192 CPU, 2Ti memory) to east" in r.stdout
    j = runner.invoke(app, ["plan", "--explain", "-f", str(ROOT / "examples"), "--clusters", TIGHT, "-o", "json"])
    out = json.loads(j.stdout)
    assert out["unplaced"] and all(u["options"] for u in out["unplaced"])
    # every option of the examples is a real one: the judge-free check here is the CLI's own
    # re-solve; the option's node shape exists on that cluster
    fleet_file = yaml.safe_load(Path(TIGHT).read_text())
    shapes = {c["name"]: [n["namePrefix"] for n in c["nodes"]] for c in fleet_file["clusters"]}
    for u in out["unplaced"]:
        for o in u["options"]:
            assert o["kind"] == "add-nodes" and o["node"]["like"].rstrip("0123456789") in shapes[o["cluster"]]
    again = runner.invoke(app, ["plan", "--explain", "-f", str(ROOT / "examples"), "--clusters", TIGHT,
                                "-o", "json"])
    assert [u["options"] for u in json.loads(again.stdout)["unplaced"]] == [u["options"] for u in out["unplaced"]]
    # without --explain the table keeps its old form
    plain = runner.invoke(app, ["plan", "-f", str(ROOT / "examples"), "--clusters", TIGHT])
    assert "would fit after" not in plain.stdout


def test_without_explain_a_plan_pays_nothing_for_options(_isolated):
    """Issue 24: the options search is a search of its own (seconds on a large fleet); a plan
    that was not asked for it neither runs it (no `options` phase in --timings) nor prints it."""
    j = runner.invoke(app, ["plan", "-f", str(ROOT / "examples"), "--clusters", TIGHT, "-o", "json", "--timings"])
    out = json.loads(j.stdout)
    assert out["unplaced"] and not any(u.get("options") for u in out["unplaced"])
    assert "timings:" in j.stderr and "options=" not in j.stderr
    e = runner.invoke(app, ["plan", "--explain", "-f", str(ROOT / "examples"), "--clusters", TIGHT, "-o", "json",
                            "--timings"])
    assert "options=" in e.stderr and all(u["options"] for u in json.loads(e.stdout)["unplaced"])


def test_cli_plan_examples_on_the_bundled_fleet_has_nothing_to_explain(_isolated):
    r = runner.invoke(app, ["plan", "--explain", "-f", str(ROOT / "examples")])
    assert r.exit_code == 0 and "would fit after" not in r.stdout


# --- live clusters: running pods and placer's own copies read back -------------------------

def jobset(name: str, ns: str, *, replicas: int, gpus: int, priority: int | None = None) -> str:
    meta: dict = {"name": name, "namespace": ns}
    if priority is not None:
        meta["annotations"] = {"placer.dev/priority": str(priority)}
    spec = {"replicatedJobs": [{"name": "worker", "replicas": replicas, "template": {"spec": {
        "parallelism": 1, "completions": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "train", "image": "train:1", "resources": {
                "requests": {"cpu": "4", "memory": "16Gi", GPU: gpus}, "limits": {GPU: gpus}}}]}}}}}]}
    return json.dumps({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta, "spec": spec})


def test_live_options_name_running_pods_by_owner_and_placers_own_copies(fresh_fleet, tmp_path, _isolated):
    from tests.kubeapi.builders import bound_pod, gpu_node
    old = bound_pod("old-abcde", "a0", gpus=8, namespace="batch", owner={"apiVersion": "batch/v1", "kind": "Job",
                                                                         "name": "old", "uid": "u1"})
    vip = bound_pod("serve-1", "b0", gpus=8, namespace="prod", owner={"apiVersion": "apps/v1",
                                                                      "kind": "ReplicaSet", "name": "serve-7f", "uid": "u2"})
    vip["spec"]["priority"] = 1000
    fresh_fleet["alpha"].seed([gpu_node("a0"), gpu_node("a1"), old])
    fresh_fleet["beta"].seed([gpu_node("b0"), vip])
    clusters = tmp_path / "c.yaml"
    clusters.write_text("clusters:\n- name: alpha\n  context: alpha\n- name: beta\n  context: beta\n")
    common = ["--clusters", str(clusters), "--kubeconfig", str(fresh_fleet.kubeconfig)]
    (tmp_path / "mine.yaml").write_text(jobset("mine", "ml", replicas=1, gpus=8))
    r = runner.invoke(app, ["submit", "-f", str(tmp_path / "mine.yaml"), *common])
    assert r.exit_code == 0, r.output                     # on a1; its pod never starts: promised
    (tmp_path / "urgent.yaml").write_text(jobset("urgent", "ml", replicas=2, gpus=8, priority=50))
    r = runner.invoke(app, ["plan", "--explain", "-f", str(tmp_path / "urgent.yaml"), *common, "-o", "json"])
    assert r.exit_code == 3, r.output
    [u] = json.loads(r.stdout)["unplaced"]
    kinds = {(o["kind"], o["cluster"]): o for o in u["options"]}
    pre = kinds[("preempt", "alpha")]
    assert sorted(pre["workloads"]) == ["batch/old", "ml/mine"] and pre["gpus"] == 16
    assert {d["workload"]: (d["kind"], d["state"]) for d in pre["details"]} == {
        "batch/old": ("Job", "running"), "ml/mine": ("JobSet", "placed")}
    assert ("preempt", "beta") not in kinds                  # priority 1000 is not below 50
    assert ("wait", "alpha") in kinds and ("wait", "beta") not in kinds   # beta: 8 of 16 freed
    assert kinds[("add-nodes", "beta")]["count"] == 2 and kinds[("add-nodes", "alpha")]["count"] == 2
    t = runner.invoke(app, ["plan", "--explain", "-f", str(tmp_path / "urgent.yaml"), *common])
    assert "preempt batch/old (8 GPUs, priority 0, running), ml/mine (8 GPUs, priority 0, placed) on alpha" \
        in " ".join(t.stdout.split())


def test_the_docs_worked_example_is_what_placer_prints(make_fleet, tmp_path, _isolated):
    """The worked example of docs/planning.md, run against the test API server: its table is the output."""
    from tests.kubeapi.builders import bound_pod, gpu_node
    fl = make_fleet(names=("east", "west"))
    etl = bound_pod("etl-nightly-x7k2p", "h100-0", gpus=8, namespace="team-a",
                    owner={"apiVersion": "batch/v1", "kind": "Job", "name": "etl-nightly", "uid": "u1"})
    chat = bound_pod("chat-6f9c-abcde", "a100-0", gpus=8, namespace="prod",
                     owner={"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "chat-6f9c", "uid": "u2"})
    chat["spec"]["priority"] = 1000
    fl["east"].seed([gpu_node("h100-0"), gpu_node("h100-1"), etl])
    fl["west"].seed([gpu_node("a100-0", product="NVIDIA-A100-SXM4-80GB"), chat])
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text("clusters:\n- name: east\n  context: east\n- name: west\n  context: west\n")
    common = ["--clusters", str(clusters), "--kubeconfig", str(fl.kubeconfig)]
    (tmp_path / "train-3.yaml").write_text(jobset("train-3", "team-b", replicas=1, gpus=8, priority=60))
    assert runner.invoke(app, ["submit", "-f", str(tmp_path / "train-3.yaml"), *common]).exit_code == 0
    (tmp_path / "finetune.yaml").write_text(jobset("finetune", "research", replicas=1, gpus=8, priority=50))
    r = runner.invoke(app, ["plan", "--explain", "-f", str(tmp_path / "finetune.yaml"), *common],
                      env={"COLUMNS": "100"})
    assert r.exit_code == 3, r.output
    doc = (ROOT / "docs" / "planning.md").read_text()
    block = doc.split("$ placer plan --explain -f finetune.yaml --clusters clusters.yaml\n", 1)[1]
    block = block.split("```", 1)[0]
    assert r.stdout.startswith(block), r.stdout
