"""Gang-aware placement of placement groups onto clusters: CP-SAT over node classes.

Pure: a fleet snapshot and pending groups in, a verified `Plan` out.

How it scales by structure rather than brute force:
- nodes with identical free capacity, labels and taints form a class; pods of identical
  requests and predicates form a type; CP-SAT decides group -> cluster (one bool per
  eligible pair) and how many pods of each type go to each class;
- per class, GPUs are constrained exactly: when the GPU sizes landing there form a
  divisibility chain (1, 2, 4, 8) by "block" constraints (for each size s, pods of size
  >= s use at most N * floor(F/s) blocks of s, which first-fit-decreasing then realises);
  otherwise by node patterns (multisets of sizes that fit one node); CPU, memory and pod
  slots are aggregate constraints plus a per-pod limit per node; on small fleets
  (NODE_EXACT_MAX_NODES) every node is its own class, which makes every resource exact;
- the aggregate answer is decoded into concrete pod -> node assignments (first-fit
  decreasing with best fit inside classes); a group whose pods do not decode (possible
  only through CPU/memory interplay) is placed again greedily;
- three node-level greedy plans (priority then size, first-fit decreasing, arrival order)
  are each repaired (placer.solve.repair: fill, then displace lower priority) and the best
  seeds the solver as a hint; the decoded answer is repaired too, and the better of the two
  (lexicographically by priority) is returned, so the plan is never below a baseline;
- the objective is lexicographic, solved in stages: per priority level (highest first)
  maximise GPUs placed (then workloads placed), fixing each level's value before the next
  (a level the incumbent places entirely is fixed without a search, so the effort goes to
  contested levels); then minimise whole nodes broken open, then (small models) a
  tie-break by cluster order then name; `optimal` means every stage was proven on the model
  (a relaxation of the real problem) and the returned plan reaches the model's value;
- reasons (placer.solve.explain) are true at node level against the cluster as it is and
  the plan's higher-priority placements on it;
- determinism: CP-SAT runs its interleaved search (a fixed set of subsolvers in batches of
  fixed size, results exchanged only between batches) and each stage stops on deterministic
  time (`effort`); each repair is bounded by node-level placement tries and the exchange runs
  when the looks it would take fit a bound, both sized from the instance (placer.solve.budget);
  so the same input gives the same plan whatever the thread count or the machine's load;
- time: the wall clock is a safety net: `time_limit` (by default placer.solve.budget's
  `default_time_limit`, which grows with the instance) bounds the whole solve (search 60%,
  repair 80%, explanations 93%); a step it ends early is flagged `time_limit_hit` (such a plan
  may differ between runs);
- every plan goes through `placer.solve.verify` before it is returned.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import partial
from typing import Iterable, Mapping, Sequence

from placer.model.fleet import Fleet
from placer.model.names import ANN_PIN, ANN_PRIORITY, ANN_SELECTOR  # noqa: F401 (re-exported)
from placer.model.plan import Placement, Plan, Summary, Unplaced
from placer.model.reasons import Reason
from placer.model.workload import PlacementGroup
from placer.solve.accepts import creates
from placer.solve.baselines import Ahead
from placer.solve.baselines import best_baseline as _best_baseline
from placer.solve.budget import ALL_BASELINES_MAX_GROUPS, REPAIR_TRIES_PER_GROUP, Work, default_time_limit, within_looks
from placer.solve.decode import decode
from placer.solve.exchange import exchange
from placer.solve.explain import explain_all
from placer.solve.fairshare import key as fair_key
from placer.solve.fairshare import model_key as fair_model_key
from placer.solve.greedy import greedy
from placer.solve.groups import GPU_RESOURCES, GroupInfo
from placer.solve.model import build_aggregate, values_from
from placer.solve.preference import active, better, cost_of, model_key, passed_reason, plan_key, prefer
from placer.solve.problem import Problem, prepare, rebase
from placer.solve.quotas import figures as quota_figures
from placer.solve.quotas import over_quota
from placer.solve.ranking import costed
from placer.solve.repair import Result, repair
from placer.solve.shares import merge as merge_shares
from placer.solve.shares import verify_shares
from placer.solve.spread import Family, legalize
from placer.solve.spread import constrain as spread_constrain
from placer.solve.spread import expand as spread_expand
from placer.solve.spread import hint as spread_hint
from placer.solve.spread import tag as spread_tag
from placer.solve.stages import DEFAULT_EFFORT, DEFAULT_WORKERS, Progress, solve_stages
from placer.solve.state import ClusterState, PodAssign, try_place
from placer.solve.topology import choices, compact, spread
from placer.solve.verify import verify

# shares of the time limit: the search ends at SEARCH_END, the repair after it at REPAIR_END,
# explanations at EXPLAIN_END; what is left is verification's
SEARCH_END, REPAIR_END, EXPLAIN_END = 0.6, 0.8, 0.93
MODEL_MAX_VARS = 20_000      # beyond, building the class model (Python) costs more than the time limit allows

def _model_size(problem: Problem, groups: Sequence[GroupInfo], most: int | None = None) -> int:
    """How many (pod kind, node class) count variables the model would have (counting stops
    once past `most`)."""
    kinds: set = set()
    size = 0
    # a pod kind on a cluster depends on its kind key and topology tag alone: each (cluster,
    # key, tag) looked at once (issue 24: 10,000 groups x 100 clusters cost 1.5 s per call)
    seen: dict[tuple, set[int]] = {}
    for g in groups:
        for p in g.parts:
            done = seen.setdefault((p.kind_key, p.topo), set())
            for c in [c for c in g.eligible if c not in done]:
                done.add(c)
                kind = (c, tuple(sorted(p.demand.items())), problem.infos[c].compat(p), p.topo)
                if kind not in kinds:
                    kinds.add(kind)
                    size += len(kind[2])
                    if most is not None and size > most:
                        return size
    return size


def _model_lex(agg, values: Sequence[int], problem: Problem, ng: int) -> tuple:
    """The lexicographic value of the model's answer: an upper bound on any plan's."""
    per: dict[int, int] = {}
    for sg in agg.sigs:
        for c in sg.rep.eligible:
            per[sg.rep.priority] = per.get(sg.rep.priority, 0) + (sg.rep.gpus * ng + 1) * values[agg.z[(sg.index, c)]]
    levels = sorted({g.priority for g in problem.groups}, reverse=True)
    return tuple(per.get(p, 0) for p in levels)


def _lex_value(groups_by_idx: Mapping[int, GroupInfo], placed: Iterable[int], ng: int) -> tuple:
    per: dict[int, int] = {}
    for gi in placed:
        g = groups_by_idx[gi]
        per[g.priority] = per.get(g.priority, 0) + g.gpus * ng + 1
    levels = sorted({g.priority for g in groups_by_idx.values()}, reverse=True)
    return tuple(per.get(p, 0) for p in levels)


def time_limit_for(fleet: Fleet, groups: int) -> float:
    """The default wall-clock safety net for `groups` groups on `fleet` (placer.solve.budget)."""
    return default_time_limit(groups, sum(len(c.nodes) for c in fleet.clusters))


def solve(fleet: Fleet, groups: Sequence[PlacementGroup], *, time_limit: float | None = None,
          workers: int = DEFAULT_WORKERS, seed: int = 0,
          committed: Sequence[tuple[PlacementGroup, str]] = (),
          progress: Progress | None = None, use_solver: bool = True,
          effort: float = DEFAULT_EFFORT, gpu_resources: Sequence[str] = GPU_RESOURCES,
          effort_by_gap: bool = False, parallel: bool = False) -> Plan:
    """Plan `groups` onto `fleet`. `committed` groups are already placed on the named
    cluster but their pods are not bound yet: they take their capacity first.
    `effort` bounds the search in CP-SAT deterministic time, and the repairs and the
    exchange are bounded by counted work (the same plan for the same input, whatever
    `workers` or the machine's load); `time_limit` (wall seconds; None: `time_limit_for`
    the instance) bounds the whole solve, explanations included, as a safety net: a step
    it cuts short says so (`summary.timeLimitHit`) and may vary.
    `use_solver=False` returns the greedy plan (a baseline for benchmarks); `effort_by_gap`:
    placer.solve.gap (an option: it may change the plan); `parallel`: a contender baseline
    computed in a forked child where that is safe (placer.solve.baselines; the same plan)."""
    t0 = time.monotonic()
    clock = _Clock(t0)
    given, (groups, families) = groups, spread_expand(fleet, groups)
    problem = prepare(fleet, groups, committed, gpu_resources)
    if progress:
        progress(f"prepared {len(problem.groups)} groups on {len(problem.infos)} reachable clusters")
    problem, committed_assign, overcommitted = _take_committed(problem)
    spread_tag(problem, families)
    clock.lap("prepare")
    rank = _Rank(problem, {g.index: g for g in problem.groups}, len(problem.groups) + 1, tuple(families))
    # the search ends early enough to leave explanations and verification their share
    limit = max(0.05, time_limit_for(fleet, len(groups)) if time_limit is None else time_limit)
    run = _Run(t0 + limit * SEARCH_END, t0 + limit * REPAIR_END, workers, seed, effort, progress, effort_by_gap,
               REPAIR_TRIES_PER_GROUP * max(1, len(problem.groups)))
    early: list = []                     # the model, built while waiting for a child
    work, candidates = problem.state(), [g for g in problem.groups if g.eligible]
    result, waited = _baselines(problem, work, candidates, rank, run, parallel, early) if use_solver else \
        (greedy(problem, work), 0.0)
    result = legalize(problem, result, families)
    clock.lap("greedy", waited)
    status, timed_out = "greedy", False
    proven: _Proven | None = None
    if use_solver and candidates:
        result, proven, timed_out = _search(problem, candidates, result, work, rank, run, clock, *early)
    elif not candidates:
        status = "optimal"
    if use_solver:
        result = _prefer(problem, result, rank, run)       # each group on the best cluster it fits (issue 21)
        compact(problem, result, run.repair_end)         # fewer domains for preferred requests, same GPUs
        run.passed(run.repair_end, "repair")
    status = status if proven is None else _status(problem, result, rank, proven)
    plan = _build_plan(problem, result, committed_assign, overcommitted, status=status,
                       seconds=time.monotonic() - t0, deadline=t0 + limit * EXPLAIN_END)
    run.passed(t0 + limit * EXPLAIN_END, "explanations")
    clock.lap("explain")
    verify(fleet, groups, plan, committed=committed)
    plan = merge_shares(problem, plan, families, result)
    if families:
        verify_shares(fleet, given, plan)
    clock.lap("verify")
    run.tell(limit)
    summary = replace(plan.summary, solve_seconds=time.monotonic() - t0, time_limit_hit=timed_out or bool(run.cuts),
                      timings=dict(clock.laps))
    return replace(plan, summary=summary, quotas=quota_figures(problem, result))


def _baselines(problem: Problem, work: dict[int, ClusterState], candidates: Sequence[GroupInfo], rank: "_Rank",
               run: "_Run", parallel: bool, early: list) -> tuple[Result, float]:
    """The best repaired baseline from the seed greedy plan on `work` (`parallel`: the first
    contender computed in a forked child meanwhile, and while the child still works, the
    class model built into `early` when the search will want it), and how long the solve
    waited for the child."""
    every = _every(problem, candidates)
    model = partial(_early_model, early, problem, candidates, rank)
    ahead = Ahead(problem, run, every, idle=model) if parallel else None
    try:
        return _best_baseline(problem, greedy(problem, work), work, rank, run, every, ahead), \
            ahead.waited if ahead else 0.0
    finally:
        if ahead:
            ahead.stop()                 # whatever happened on the way (Ctrl-C, an error)


def _early_model(into: list, problem: Problem, candidates: Sequence[GroupInfo], rank: _Rank) -> None:
    if candidates and _model_size(problem, candidates, MODEL_MAX_VARS) <= MODEL_MAX_VARS:
        into.append(_model(problem, candidates, rank))


# what the model proved: optimal, the priority bound, the fair-share key, the preference key,
# the least spread
_Proven = tuple[bool, tuple, tuple, tuple, int]


def _every(problem: Problem, candidates: Sequence[GroupInfo]) -> bool:
    """Whether every baseline is repaired: not on a large instance or model, where the ones that
    ignore priority are repaired only when they can win (placer.solve._best_baseline)."""
    return len(problem.groups) <= ALL_BASELINES_MAX_GROUPS and (
        _model_size(problem, candidates, MODEL_MAX_VARS) <= MODEL_MAX_VARS)


def _status(problem: Problem, result: Result, rank: "_Rank", proven: _Proven) -> str:
    """optimal: every stage proven on a relaxation of the real problem, and reached."""
    optimal, bound, fair, best_pref, least_spread = proven
    reached = (rank.lex(result) == bound and rank.fair(result) == fair and rank.pref(result) == best_pref
               and spread(problem, result) <= least_spread)
    return "optimal" if optimal and reached else "feasible"


@dataclass(frozen=True)
class _Run:
    """One solve's deadlines (monotonic), search settings and work bounds; `cuts` names the
    steps the wall clock may have ended early (the plan is then flagged `time_limit_hit`)."""

    search_end: float
    repair_end: float
    workers: int
    seed: int
    effort: float
    progress: Progress | None
    by_gap: bool = False
    repair_tries: int | None = None      # node-level placement tries per repair (None: unbounded)
    cuts: list[str] = field(default_factory=list)

    def work(self) -> Work | None:
        """A fresh bound for one repair."""
        return None if self.repair_tries is None else Work(self.repair_tries)

    def tell(self, limit: float) -> None:
        if self.cuts and self.progress:
            self.progress(f"the wall clock ({limit:.1f} s) cut: {', '.join(self.cuts)}")

    def passed(self, deadline: float, step: str) -> bool:
        """Whether the wall clock is past `deadline` after `step` (which may then have been cut)."""
        late = time.monotonic() >= deadline
        if late and step not in self.cuts:
            self.cuts.append(step)
        return late


@dataclass(frozen=True)
class _Rank:
    """Plans compared lexicographically by priority (per level: GPUs, then groups placed),
    then by fair share of borrowed capacity (issue 23), then by cluster preference and cost
    (issue 21), then by preferred topology requests spanning fewer domains."""

    problem: Problem
    by_idx: Mapping[int, GroupInfo]
    ng: int
    families: tuple[Family, ...] = ()

    def lex(self, result: Result) -> tuple:
        return _lex_value(self.by_idx, result, self.ng)

    def fair(self, result: Result) -> tuple:
        return fair_key(self.problem, result)

    def pref(self, result: Result) -> tuple:
        return plan_key(self.problem, result, self.ng)

    def key(self, result: Result) -> tuple:
        return (self.lex(result), self.fair(result), self.pref(result), -spread(self.problem, result))


def _take_committed(problem: Problem) -> tuple[Problem, list[tuple[GroupInfo, int, PodAssign]], dict[str, str]]:
    """Committed groups placed first; the capacity left is what the groups compete for."""
    base = problem.state()
    overcommitted: dict[str, str] = {}
    committed_assign: list[tuple[GroupInfo, int, PodAssign]] = []
    for g, c in problem.committed:
        assign = try_place(base[c], g) if c in base else None
        if assign is None:
            overcommitted[g.key] = f"no longer fits on {problem.clusters[c].name}"
        else:
            committed_assign.append((g, c, assign))
    return rebase(problem, base), committed_assign, overcommitted


def _exchange(problem: Problem, result: Result, rank: _Rank, run: _Run) -> Result:
    """A placed group out for more of its priority in (placer.solve.exchange), then the repair
    (the group taken out gets its turn): kept when better."""
    if rank.families or not within_looks(problem, result, run.progress):
        return result
    states: dict[int, ClusterState] = {}
    moved = exchange(problem, result, run.repair_end, into=states)
    run.passed(run.repair_end, "exchange")
    if moved is None:
        return result
    moved = repair(problem, moved, run.repair_end, states, work=(work := run.work()))
    if work is not None and work.out:
        return result                   # its repair ran out of work: not a finished plan
    return moved if rank.key(moved) > rank.key(result) else result


def _prefer(problem: Problem, result: Result, rank: _Rank, run: _Run) -> Result:
    """Groups moved to clusters they rank better where they fit beside the rest, then the
    repair (a move may free room): kept when at least as good."""
    moved = dict(result)
    found = prefer(problem, moved, run.repair_end)
    run.passed(run.repair_end, "preferences")
    if not found:
        return result
    moved = repair(problem, moved, run.repair_end, work=(work := run.work()))
    if work is not None and work.out:
        return result                   # its repair ran out of work: not a finished plan
    moved = legalize(problem, moved, rank.families)
    return moved if rank.key(moved) >= rank.key(result) else result


def _search(problem: Problem, candidates: Sequence[GroupInfo], result: Result, work: Mapping[int, ClusterState],
            rank: _Rank, run: _Run, clock: "_Clock", early=None) -> tuple[Result, _Proven | None, bool]:
    """The class model (`early`: built while the solve waited for a child) solved in stages,
    decoded and repaired: kept when at least as good as the greedy `result`. Returns the plan,
    what the model proved (optimal, bound, least spread; None without a model answer) and
    whether the wall clock cut the search short."""
    size = _model_size(problem, candidates, MODEL_MAX_VARS)
    if size > MODEL_MAX_VARS:
        if run.progress:
            run.progress(f"model too large (over {MODEL_MAX_VARS} pod-kind x node-class pairs): "
                         "the repaired greedy plan stands")
        return result, None, False
    if time.monotonic() >= run.search_end:
        return result, None, True          # reading and the greedy plans used the search's time
    if run.progress:
        run.progress(f"greedy placed {len(result)} of {len(problem.groups)} groups; building model")
    agg = early or _model(problem, candidates, rank)
    hint = values_from(agg, result, problem, work)
    spread_hint(agg, hint)
    clock.lap("model")
    sol = solve_stages(agg, problem, candidates, hint, run.search_end, run.workers, run.seed, run.progress,
                       effort=run.effort, by_gap=run.by_gap)
    clock.lap("cpsat")
    if sol is None:
        timed_out = time.monotonic() >= run.search_end
        clock.lap("decode")
        return result, None, timed_out
    # decoded even when the model's answer is the hint: first-fit decreasing by class may place
    # better than the plan it came from (the large scenario: 53,380 GPUs against 53,348)
    result = _decoded(problem, agg, sol.values, candidates, result, rank, run)
    bound = _model_lex(agg, sol.values, problem, rank.ng)
    proven = (sol.status == "optimal", bound, fair_model_key(agg, problem, sol.values),
              model_key(agg, sol.values, problem, rank.ng),
              sum(sol.values[s] for s in agg.spread))
    clock.lap("decode")
    result = _exchange(problem, result, rank, run)
    clock.lap("exchange")
    return result, proven, sol.timed_out


def _model(problem: Problem, candidates: Sequence[GroupInfo], rank: _Rank):
    """The class model of `candidates`, without a hint (it does not depend on any plan)."""
    agg = build_aggregate(problem, candidates)
    spread_constrain(agg, problem, rank.families)
    return agg


def _decoded(problem: Problem, agg, values: list[int], candidates: Sequence[GroupInfo], result: Result,
             rank: _Rank, run: _Run) -> Result:
    """The model's answer decoded to nodes and repaired: the plan when at least as good as
    `result` (after GPUs: preferred topology requests spanning fewer domains)."""
    states = problem.state()
    decoded, dropped = decode(problem, states, agg, values, candidates)
    if dropped:
        decoded.update(greedy(problem, states, dropped))
    decoded = repair(problem, decoded, run.repair_end, work=(work := run.work()))
    if work is not None and work.out:
        return result                   # its repair ran out of work: not a finished plan
    decoded = legalize(problem, decoded, rank.families)
    return decoded if rank.key(decoded) >= rank.key(result) else result


class _Clock:
    def __init__(self, t0: float):
        self.last = t0
        self.laps: dict[str, float] = {}

    def lap(self, name: str, waited: float = 0.0) -> None:
        """The time since the last lap; `waited` of it (for a forked child) a lap of its own."""
        now = time.monotonic()
        self.laps[name] = round(self.laps.get(name, 0.0) + now - self.last - waited, 4)
        if waited:
            self.laps[f"wait-{name}"] = round(self.laps.get(f"wait-{name}", 0.0) + waited, 4)
        self.last = now



def _build_plan(problem: Problem, result: Mapping[int, tuple[int, PodAssign]],
                committed_assign, overcommitted, *, status: str, seconds: float,
                deadline: float | None = None) -> Plan:
    placements: list[Placement] = []
    unplaced: list[Unplaced] = []
    by_idx = {g.index: g for g in problem.groups}
    # issue 21: why each cluster a placed group ranks better (or finds cheaper) did not take it
    ahead = {gi: better(problem, by_idx[gi], c) for gi, (c, _) in result.items()} if any(active(problem)) else {}
    reasons = explain_all(problem, result, deadline, placed=[gi for gi, cs in ahead.items() if cs])
    with_cost = costed(problem.clusters)
    for g in problem.groups:
        if g.index in result:
            c, assign = result[g.index]
            why = reasons.get(g.index, {})
            passed = {problem.clusters[d].name: passed_reason(why[problem.clusters[d].name], g, c, d)
                      for d in ahead.get(g.index, ()) if problem.clusters[d].name in why}
            placements += _placements(problem, g, c, assign, passed, with_cost)
        else:
            why = over_quota(problem, result, g, reasons[g.index])      # issue 23
            for w in g.group.workloads:
                unplaced.append(Unplaced(w.key, w.kind, g.key, w.gpus, w.pods, g.priority, why, ref=w.ref))
    committed = [p for g, c, a in committed_assign for p in _placements(problem, g, c, a)]
    nw = sum(len(g.group.workloads) for g in problem.groups)
    total = sum((p.cost for p in placements if p.cost is not None), Decimal(0)) if with_cost else None
    summary = Summary(
        workloads=nw, placed=len(placements),
        gpus_requested=sum(g.gpus for g in problem.groups),
        gpus_placed=sum(p.gpus for p in placements),
        solve_seconds=seconds, optimal=status == "optimal", status=status,
        groups=len(problem.groups), groups_placed=len(result), cost=total)
    return Plan(tuple(placements), tuple(unplaced), summary, tuple(committed), overcommitted)


def _placements(problem: Problem, g: GroupInfo, c: int, assign: PodAssign,
                passed: Mapping[str, Reason] | None = None, with_cost: bool | None = None) -> list[Placement]:
    info = problem.infos[c]
    refs = [w.ref for w in g.group.workloads]
    per_wl: list[dict[str, dict[str, int]]] = [{} for _ in refs]
    # each part's workload (by position: a ref hashes its fields) and instance named once, not
    # once per pod (issue 24)
    at = {r: n for n, r in enumerate(refs)}
    names = [(at[part.workload.ref], part.instance.key) for part in g.parts]
    order, names_of = info.pos, info.nodes
    # a node's pods of a part counted at once, in the order they first come (issue 24: one
    # step per pod was half of the explanations' phase at 4,000 workloads)
    for (j, i), n in Counter(assign).items():
        k, ikey = names[j]
        slot = per_wl[k].setdefault(names_of[i].name, {})
        slot[ikey] = slot.get(ikey, 0) + n
    out = []
    with_cost = costed(problem.clusters) if with_cost is None else with_cost
    for w, ref, on in zip(g.group.workloads, refs, per_wl):
        nodes = dict(sorted(on.items(), key=lambda kv: order[kv[0]]))
        out.append(Placement(w.key, w.kind, g.key, problem.clusters[c].name, w.gpus, w.pods,
                             g.priority, nodes, ref=ref, topology=choices(g, w.key, info, assign),
                             creates=creates(g.group, problem.clusters[c]),
                             cost=cost_of(problem.clusters[c], w.gpus, with_cost),
                             passed_over=dict(passed or {})))
    return out

