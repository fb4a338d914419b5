"""Teams with bursts on a 20-cluster fleet (issue 23, Must-show 3): per team, GPU-hours received
against its fair share, preemptions, time to placement p50/p95; placer against a FIFO-per-team
greedy, in one seeded discrete-event simulation (benchmarks/quotas_sim.py says what is simulated
and how each figure is counted).

placer's rounds are the daemon's: every round plans all waiting work with
`placer.daemon.decide.decide` (the entry the daemon's full rounds use: `placer.solve.solve`)
on a Fleet whose nodes carry what runs as used (bound pods, held where they are) and whose
quotas count it (`Quotas.counted`, as the daemon counts its placed copies). The baseline,
FIFO per team with first fit by node, is written in quotas_sim.py apart from placer's code.

    python3 benchmarks/quotas.py [--seed 1] [--teams 5] [--clusters 20] [--nodes 8] [--hours 24]
        [--tick 120] [--bursts 6] [--durations lognormal|alibaba] [--high-share 0.25]
        [--preemption off reclaim priority] [--min-run 900] [--preemption-rate 10] [--rate-window 3600] [--time-limit 20]
        [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks import quotas_sim as S  # noqa: E402
from placer.daemon.decide import PendingGroup, Snapshot, decide  # noqa: E402
from placer.model.fleet import Cluster, Fleet, Node  # noqa: E402
from placer.model.names import ANN_PRIORITY  # noqa: E402
from placer.model.quota import Quota, Quotas  # noqa: E402
from placer.model.workload import Gang, Instance, Phase, PlacementGroup, PodShape, Workload  # noqa: E402
from placer.solve.preemption import POLICIES, Eligible, preemptions  # noqa: E402

GI = 2**30


def workload(job: S.Job) -> Workload:
    """A job as a pending JobSet-like workload in its team's namespace: one gang of its pods."""
    req = {S.GPU: job.per_pod, "cpu": 1000 * S.CPU_PER_GPU * job.per_pod, "memory": S.MEM_GI_PER_GPU * job.per_pod * GI}
    inst = Instance("workers", "0", job.pods, 1, job.pods, PodShape(requests=req), job.per_pod)
    gang = Gang(job.id, (("workers", "0", job.pods),), job.pods, job.pods, job.gpus)
    return Workload("jobset.x-k8s.io/v1alpha2", "JobSet", job.team, job.id, "jobset", Phase.PENDING, "", "",
                    (inst,), (gang,), annotations={ANN_PRIORITY: str(job.priority)} if job.priority else {})


def requests(gpus: int, pods: int) -> dict[str, int]:
    """What `gpus` GPUs in `pods` pods ask of a node."""
    return {S.GPU: gpus, "cpu": 1000 * S.CPU_PER_GPU * gpus, "memory": S.MEM_GI_PER_GPU * gpus * GI, "pods": pods}


def quotas(teams: Sequence[S.Team]) -> Quotas:
    return Quotas(tuple(Quota(t.name, {S.GPU: t.nominal}, namespaces=frozenset({t.name}),
                              borrowing_limit=None if t.limit is None else {S.GPU: t.limit},
                              cohort=S.COHORT, weight=t.weight) for t in teams))


def fleet(state: S.State, q: Quotas) -> Fleet:
    """The fleet as the daemon's caches would show it: what runs is bound pods on their nodes,
    and each quota's running work counted."""
    alloc = {S.GPU: state.shape.gpus, "cpu": 1000 * S.NODE_CPU, "memory": S.NODE_MEM_GI * GI, "pods": S.NODE_PODS}
    pods: dict[tuple[str, str], int] = {}
    for r in state.running.values():
        for n, g in r.nodes.items():
            pods[(r.cluster, n)] = pods.get((r.cluster, n), 0) + g // r.job.per_pod
    clusters = []
    for c, nodes in state.used.items():
        clusters.append(Cluster(c, {}, tuple(
            Node(n, alloc, requests(g, pods.get((c, n), 0)) if g else {})
            for n, g in nodes.items())))
    counted = {t.name: {S.GPU: u} for t, u in zip(state.teams, state.team_use().values())}
    return Fleet(tuple(clusters), quotas=Quotas(q.entries, counted=counted))


class Placer:
    """placer's daemon round: all waiting work planned by `decide` against what runs; with a
    preemption policy, then `placer.solve.preemption.preemptions` on that round's plan (at most
    one preemption a round, as the daemon calls it), the victims among the jobs that ran at
    least `min_run` seconds; rate-limited as the daemon's `--preemption-rate` is (placer/daemon/
    preempt.py): a preemption whose victims would take the victims of the last `window` seconds
    over `rate` is not carried out."""

    def __init__(self, teams: Sequence[S.Team], time_limit: float = 20.0, policy: str = "off",
                 min_run: float = 900.0, rate: int = 10, window: float = 3600.0):
        self.quotas = quotas(teams)
        self.time_limit = time_limit
        self.policy, self.min_run, self.rate, self.window = policy, min_run, rate, window
        self.name = "placer" if policy == "off" else f"placer {policy}"
        self.workloads: dict[str, Workload] = {}
        self.limit_hit = 0
        self.statuses: dict[str, int] = {}
        self.recent: list[float] = []             # when each victim of the last window was taken
        self.held_back = 0                         # preemptions found but over the rate
        self.searches = self.search_seconds = 0.0
        self.preemptors: dict[str, float] = {}     # job -> when its preemption was carried out
        self.events = self.served = 0              # preemptions, and those whose preemptor started next round

    def group(self, job: S.Job) -> PlacementGroup:
        w = self.workloads.get(job.id) or self.workloads.setdefault(job.id, workload(job))
        return PlacementGroup(w.key, (w,))

    def round(self, state: S.State, now: float) -> tuple[list[S.Start], list[str]]:
        groups = [self.group(j) for j in state.pending]
        pending = [PendingGroup(g, (g.workloads[0].ref,)) for g in groups]
        snap = Snapshot(fleet(state, self.quotas))
        d = decide(snap, pending, now, time_limit=self.time_limit)
        if d.error:
            raise SystemExit(f"placer's round failed: {d.error}")
        assert d.plan is not None
        self.limit_hit += d.plan.summary.time_limit_hit
        self.statuses[d.plan.summary.status] = self.statuses.get(d.plan.summary.status, 0) + 1
        by_name = {j.id: j for j in state.pending}
        starts = []
        for c in d.creates:
            for p in c.placements:
                job = by_name[p.ref.name if p.ref else p.workload.rpartition("/")[2]]
                starts.append(S.Start(job.id, c.cluster, {n: sum(per.values()) * job.per_pod
                                                          for n, per in p.nodes.items()}))
                if self.preemptors.pop(job.id, None) is not None:
                    self.served += 1
        self.preemptors.clear()                    # not started by the round after its preemption
        return starts, self.preempt(state, snap, groups, d.plan, now)

    def preempt(self, state: S.State, snap: Snapshot, groups: list[PlacementGroup], plan, now: float) -> list[str]:
        """The victims of this round's one preemption (none: off, rate-limited, or none proven)."""
        self.recent = [t for t in self.recent if t > now - self.window]
        if self.policy == "off" or not plan.unplaced or len(self.recent) >= self.rate:
            return []
        eligible = []
        for r in state.running.values():
            if now - r.start >= self.min_run:
                g = self.group(r.job)
                eligible.append(Eligible(g.key, g, r.cluster, r.job.priority, r.start,
                                         {n: requests(x, x // r.job.per_pod) for n, x in r.nodes.items()}))
        if not eligible:
            return []
        t0 = time.perf_counter()
        got = preemptions(snap.fleet, groups, plan, self.policy, eligible)
        self.searches += 1
        self.search_seconds += time.perf_counter() - t0
        if not got:
            return []
        if len(self.recent) + len(got[0].victims) > self.rate:
            self.held_back += 1
            return []
        self.recent += [now] * len(got[0].victims)
        self.events += 1
        self.preemptors[next(j.id for j in state.pending if self.group(j).key == got[0].preemptor)] = now
        keys = set(got[0].victims)
        return [r.job.id for r in state.running.values() if self.group(r.job).key in keys]


# --- report ---------------------------------------------------------------------------------------

def fmt(x: float, digits: int = 0) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def team_table(outs: Sequence[S.Outcome], jobs: Sequence[S.Job]) -> Table:
    t = Table(title="per team (GPU-hours over the run; waits from arrival to first start, minutes)")
    for col in ("team", "nominal", "weight", "limit", "asked GPU-h", "system", "received", "entitled",
                "recv/entitled", "preempted", "lost GPU-h", "wait p50", "wait p95", "never started"):
        t.add_column(col, justify="left" if col in ("team", "system") else "right")
    asked = {}
    for j in jobs:
        asked[j.team] = asked.get(j.team, 0.0) + j.gpus * j.duration / 3600
    for team in outs[0].teams:
        for i, o in enumerate(outs):
            w = o.waits[team.name]
            head = (team.name, str(team.nominal), str(team.weight), "-" if team.limit is None else str(team.limit),
                    fmt(asked.get(team.name, 0.0))) if i == 0 else ("", "", "", "", "")
            t.add_row(*head, o.system, fmt(o.received[team.name]), fmt(o.entitled[team.name]),
                      fmt(o.ratio(team.name), 2), str(o.preempted[team.name]), fmt(o.lost.get(team.name, 0.0)),
                      fmt(S.percentile(w, 50) / 60, 1), fmt(S.percentile(w, 95) / 60, 1), str(o.never[team.name]),
                      end_section=i == len(outs) - 1)
    return t


def system_table(outs: Sequence[S.Outcome]) -> Table:
    t = Table(title="per system")
    for col in ("system", "utilisation", "GPU-hours", "Jain (recv/entitled)", "min ratio", "wait p50 min",
                "wait p95 min", "prio 100 p50/p95 min", "never started", "preemptions", "lost GPU-h", "rounds",
                "round s p50", "round s max"):
        t.add_column(col, justify="left" if col == "system" else "right")
    for o in outs:
        waits = [w for ws in o.waits.values() for w in ws]
        ratios = [o.ratio(x.name) for x in o.teams if o.entitled[x.name] > 0]
        t.add_row(o.system, f"{o.utilisation:.1%}", fmt(sum(o.received.values())), fmt(o.jain(), 3),
                  fmt(min(ratios), 2), fmt(S.percentile(waits, 50) / 60, 1), fmt(S.percentile(waits, 95) / 60, 1),
                  f"{fmt(S.percentile(o.high_waits, 50) / 60, 1)} / {fmt(S.percentile(o.high_waits, 95) / 60, 1)}",
                  str(sum(o.never.values())), str(sum(o.preempted.values())), fmt(sum(o.lost.values())), str(o.rounds),
                  fmt(S.percentile(o.round_seconds, 50), 2), fmt(max(o.round_seconds, default=float("nan")), 2))
    return t


def as_json(o: S.Outcome) -> dict:
    return {"system": o.system, "utilisation": o.utilisation, "jain": o.jain(), "rounds": o.rounds,
            "high_wait_p50_s": S.percentile(o.high_waits, 50), "high_wait_p95_s": S.percentile(o.high_waits, 95),
            "teams": {t.name: {"received": o.received[t.name], "entitled": o.entitled[t.name],
                               "ratio": o.ratio(t.name), "preempted": o.preempted[t.name],
                               "lost": o.lost.get(t.name, 0.0),
                               "wait_p50_s": S.percentile(o.waits[t.name], 50),
                               "wait_p95_s": S.percentile(o.waits[t.name], 95), "never": o.never[t.name]}
                      for t in o.teams}, "notes": o.notes}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--teams", type=int, default=5)
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=8, help="8-GPU nodes per cluster")
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--tick", type=float, default=120.0, help="seconds between scheduling rounds (at most one per tick)")
    ap.add_argument("--bursts", type=float, default=6.0, help="bursts per team per day")
    ap.add_argument("--durations", choices=("lognormal", "alibaba"), default="lognormal")
    ap.add_argument("--time-limit", type=float, default=20.0, help="placer's solve time limit per round (wall s)")
    ap.add_argument("--system", nargs="+", default=["placer", "fifo-per-team"], choices=("placer", "fifo-per-team"))
    ap.add_argument("--preemption", nargs="+", default=["off"], choices=POLICIES,
                    help="placer's preemption policies, one placer run each (off: none)")
    ap.add_argument("--high-share", type=float, default=0.25, help="share of jobs at priority 100 (the rest 0)")
    ap.add_argument("--min-run", type=float, default=900.0, help="s a job runs before it may be preempted")
    ap.add_argument("--preemption-rate", type=int, default=10, help="at most this many victims per --rate-window")
    ap.add_argument("--rate-window", type=float, default=3600.0, help="the rate limit's sliding window, s")
    ap.add_argument("--quick", action="store_true", help="4 clusters x 8 nodes, 3 teams, 12 hours")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--width", type=int, default=200, help="table width (characters)")
    args = ap.parse_args(argv)
    if args.quick:
        args.clusters, args.nodes, args.teams, args.hours = 4, 8, 3, 12.0
    shape = S.Shape(args.clusters, args.nodes)
    teams = S.make_teams(args.teams, shape.capacity)
    jobs = S.make_jobs(teams, args.hours, args.seed, S.trace_durations() if args.durations == "alibaba" else None,
                       args.bursts, args.high_share)
    console = Console(width=args.width)
    console.print(f"fleet {shape.clusters} clusters x {shape.nodes} nodes x {shape.gpus} GPUs = {shape.capacity} GPUs; "
                  f"{len(teams)} teams in cohort {S.COHORT} (nominal {sum(t.nominal for t in teams)}, pool "
                  f"{shape.capacity - sum(t.nominal for t in teams)}); {len(jobs)} jobs, "
                  f"{sum(j.gpus * j.duration for j in jobs) / 3600:,.0f} GPU-hours asked over {args.hours:g} h; "
                  f"durations {args.durations}; rounds every {args.tick:g} s; seed {args.seed}")
    outs = []
    runs: list[tuple[str, str]] = [("placer", p) for p in args.preemption] if "placer" in args.system else []
    runs += [("fifo-per-team", "")] if "fifo-per-team" in args.system else []
    for name, policy in runs:
        sched = Placer(teams, args.time_limit, policy, args.min_run, args.preemption_rate, args.rate_window) \
            if name == "placer" \
            else S.FifoPerTeam()
        t0 = time.perf_counter()
        o = S.simulate(sched, shape, teams, jobs, args.hours, args.tick, clock=time.perf_counter)
        if isinstance(sched, Placer):
            o.notes.append(f"solve statuses {sched.statuses}; time limit hit in {sched.limit_hit} rounds")
            if policy != "off":
                o.notes.append(f"{sched.searches:.0f} preemption searches, {sched.search_seconds:.0f} s; "
                               f"{sched.events} preemptions ({sched.held_back} more held back by the rate), "
                               f"{sched.served} of their preemptors started by the next round")
        o.notes.append(f"simulated in {time.perf_counter() - t0:.0f} s")
        outs.append(o)
        console.print(f"{o.system}: " + "; ".join(o.notes))
    console.print(team_table(outs, jobs))
    console.print(system_table(outs))
    if args.json:
        Path(args.json).write_text(json.dumps([as_json(o) for o in outs], indent=1))


if __name__ == "__main__":
    main()
