"""The pure parts of benchmarks/quotas.py (issue 23, Must-show 3): teams with bursts of gang
workloads on a GPU fleet, a discrete-event simulation on a simulated clock, and its accounting.

- **Fleet**: `clusters` x `nodes` x `gpus` GPUs (one shape for every node). A job's pods ask for
  GPUs, and CPU and memory in proportion (8 CPUs, 64 GiB per GPU: a node's 96 CPUs and 1 TiB
  never bind before its 8 GPUs), so GPUs are the one resource that binds.
- **Teams**: quotas in one cohort (`lab`), nominal amounts as shares of the fleet's GPUs, a
  fair-share weight, an optional borrowing limit (TEAMS); what the nominal amounts leave is the
  pool every team may borrow from, as placer's quotas do.
- **Jobs**: per team, `bursts` bursts a day at seeded times over the run; a burst asks for
  U(1.5, 3) x the team's nominal GPUs in gangs of 1-32 GPUs (SIZES; over 8 GPUs: pods of 8),
  arriving uniformly over 20 minutes; each runs for a duration drawn from a log-normal (median
  1.5 h, sigma 0.8, clipped to [10 min, 8 h]) or from the Alibaba GPU trace v2023's GPU tasks
  (deletion - scheduled, clipped the same way); a seeded `high_share` of them at priority 100
  (`placer.dev/priority`), the rest at 0.
- **Simulation**: arrivals and completions are events at their exact times; scheduling rounds
  happen on a grid of `tick` seconds (a round at the first grid point at or after an event,
  as the daemon's batch window does), only when something changed and work is waiting. A round
  is one call of the scheduler with the state; it returns jobs to start (cluster, GPUs per
  node) and running jobs to stop (preempted: requeued in arrival order, restarting from zero;
  the GPU-hours they ran still count as received). A round that stopped something asks for
  the next round one tick later (the preemptor is placed once its victims are gone, as the
  daemon does). The simulation only advances time, starts, finishes and counts.
- **Accounting** over [0, hours): per team GPU-hours received (GPUs x time running before the
  end), entitlement (below), preemptions suffered, time to placement (arrival to first start;
  jobs never started by the end are counted apart), fleet utilisation, Jain's index over the
  teams' received / entitled ratios.
- **Entitlement** (fluid, stated simply): at every moment a team's demand is the GPUs of its
  jobs that have arrived and not finished (waiting or running, in that system's own run). Its
  entitled rate is min(demand, nominal), plus a weighted max-min (water-filling by weight) share
  of what those leave of the fleet, each team capped at its demand beyond nominal and at its
  borrowing limit; integrated over the run. Gangs are ignored (GPUs are divisible here).
"""

from __future__ import annotations

import csv
import heapq
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Protocol, Sequence

GPU = "nvidia.com/gpu"
CPU_PER_GPU, MEM_GI_PER_GPU = 8, 64
NODE_CPU, NODE_MEM_GI, NODE_PODS = 96, 1024, 110
SIZES = (1, 2, 4, 8, 16, 32)
SIZE_WEIGHTS = (0.2, 0.15, 0.2, 0.2, 0.15, 0.1)
COHORT = "lab"
# name, nominal share of the fleet's GPUs, weight, borrowing limit as a share (None: unlimited)
TEAMS = (("team-a", 0.30, 2, None), ("team-b", 0.20, 1, 0.10), ("team-c", 0.15, 1, None),
         ("team-d", 0.10, 1, 0.05), ("team-e", 0.05, 1, None), ("team-f", 0.05, 1, None))
MIN_RUN, MAX_RUN = 600.0, 8 * 3600.0
HIGH = 100                      # the high priority
TRACE = Path(__file__).resolve().parent.parent.parent / "shared" / "traces" / "alibaba-gpu-v2023"


@dataclass(frozen=True)
class Shape:
    clusters: int
    nodes: int                  # per cluster
    gpus: int = 8               # per node

    @property
    def capacity(self) -> int:
        return self.clusters * self.nodes * self.gpus

    def cluster_names(self) -> list[str]:
        return [f"c{i:02d}" for i in range(self.clusters)]

    def node_names(self, cluster: str) -> list[str]:
        return [f"{cluster}-n{j:02d}" for j in range(self.nodes)]


@dataclass(frozen=True)
class Team:
    name: str
    nominal: int                # GPUs
    weight: int = 1
    limit: int | None = None    # borrowing limit in GPUs; None: may borrow all the cohort leaves


@dataclass(frozen=True)
class Job:
    id: str
    team: str
    gpus: int
    arrival: float              # seconds
    duration: float             # seconds of running to finish
    priority: int = 0

    @property
    def per_pod(self) -> int:
        return min(8, self.gpus)

    @property
    def pods(self) -> int:
        return self.gpus // self.per_pod


def make_teams(n: int, capacity: int) -> list[Team]:
    if not 2 <= n <= len(TEAMS):
        raise SystemExit(f"--teams: 2 to {len(TEAMS)}")
    return [Team(name, int(share * capacity), weight, None if lim is None else int(lim * capacity))
            for name, share, weight, lim in TEAMS[:n]]


def trace_durations() -> list[float]:
    """The Alibaba GPU trace v2023's GPU tasks' run times (deletion - scheduled), in seconds."""
    with open(TRACE / "openb_pod_list_default.csv") as f:
        return [float(int(r["deletion_time"]) - int(r["scheduled_time"])) for r in csv.DictReader(f)
                if int(r["num_gpu"]) > 0 and r["deletion_time"] and r["scheduled_time"]]


def make_jobs(teams: Sequence[Team], hours: float, seed: int, durations: Sequence[float] | None = None,
              bursts_per_day: float = 6.0, high_share: float = 0.0) -> list[Job]:
    """Seeded bursts per team (module docstring); `durations`: draw from these instead of the
    log-normal. In arrival order (ties by id)."""
    rnd = random.Random(seed)
    horizon = hours * 3600.0
    jobs = []
    for t in teams:
        bursts = max(1, round(bursts_per_day * hours / 24))
        for b in range(bursts):
            start = rnd.uniform(0, horizon)
            want, asked, k = rnd.uniform(1.5, 3.0) * t.nominal, 0, 0
            while asked < want:
                g = rnd.choices(SIZES, SIZE_WEIGHTS)[0]
                d = rnd.choice(durations) if durations else math.exp(math.log(5400) + 0.8 * rnd.gauss(0, 1))
                prio = HIGH if rnd.random() < high_share else 0
                jobs.append(Job(f"{t.name}-b{b}-{k:03d}", t.name, g, start + rnd.uniform(0, 1200),
                                min(MAX_RUN, max(MIN_RUN, d)), prio))
                asked, k = asked + g, k + 1
    return sorted(jobs, key=lambda j: (j.arrival, j.id))


# --- what a scheduler sees and answers ----------------------------------------------------------

@dataclass
class Run:
    job: Job
    cluster: str
    nodes: Mapping[str, int]     # node -> GPUs
    start: float

    @property
    def end(self) -> float:
        return self.start + self.job.duration


@dataclass(frozen=True)
class Start:
    job: str
    cluster: str
    nodes: Mapping[str, int]     # node -> GPUs


@dataclass
class State:
    """The fleet as a round sees it: GPUs used per node, what runs, what waits (arrival order)."""

    shape: Shape
    teams: Sequence[Team]
    used: dict[str, dict[str, int]]              # cluster -> node -> GPUs in use
    running: dict[str, Run] = field(default_factory=dict)
    pending: list[Job] = field(default_factory=list)

    def team_use(self) -> dict[str, int]:
        out = {t.name: 0 for t in self.teams}
        for r in self.running.values():
            out[r.job.team] += r.job.gpus
        return out


class Scheduler(Protocol):
    name: str

    def round(self, state: State, now: float) -> tuple[list[Start], list[str]]:
        """Jobs to start, and running jobs to stop (preempted: they go back to waiting)."""
        ...


# --- the simulation -----------------------------------------------------------------------------

@dataclass
class Outcome:
    """What one system did over the run."""

    system: str
    teams: Sequence[Team]
    capacity: int
    horizon: float
    received: dict[str, float]                   # team -> GPU-hours before the end
    entitled: dict[str, float]                   # team -> GPU-hours (fluid fair share)
    preempted: dict[str, int]                    # team -> preemptions suffered
    waits: dict[str, list[float]]                # team -> seconds from arrival to first start
    never: dict[str, int]                        # team -> jobs never started before the end
    lost: dict[str, float] = field(default_factory=dict)   # team -> GPU-hours of runs preempted (restarted)
    high_waits: list[float] = field(default_factory=list)  # waits of the jobs at priority HIGH
    rounds: int = 0
    round_seconds: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def utilisation(self) -> float:
        return sum(self.received.values()) / (self.capacity * self.horizon / 3600.0)

    def ratio(self, team: str) -> float:
        e = self.entitled[team]
        return self.received[team] / e if e > 0 else float("nan")

    def jain(self) -> float:
        xs = [self.ratio(t.name) for t in self.teams if self.entitled[t.name] > 0]
        return jain(xs)


def simulate(scheduler: Scheduler, shape: Shape, teams: Sequence[Team], jobs: Sequence[Job], hours: float,
             tick: float = 60.0, clock=None) -> Outcome:
    """Run `jobs` through `scheduler` until `hours` (module docstring). `clock`: a
    perf-counter to time the rounds (None: not timed)."""
    horizon = hours * 3600.0
    state = State(shape, teams, {c: {n: 0 for n in shape.node_names(c)} for c in shape.cluster_names()})
    by_id = {j.id: j for j in jobs}
    arrivals = sorted(jobs, key=lambda j: (j.arrival, j.id))
    ai = 0
    ends: list[tuple[float, str]] = []           # (end, job id) of what runs
    names = [t.name for t in teams]
    out = Outcome(scheduler.name, teams, shape.capacity, horizon, dict.fromkeys(names, 0.0),
                  dict.fromkeys(names, 0.0), dict.fromkeys(names, 0), {n: [] for n in names}, dict.fromkeys(names, 0))
    demand = dict.fromkeys(names, 0)
    first: dict[str, float] = {}
    last_t, dirty = 0.0, False
    again = math.inf                              # a round asked for by the last one (it preempted)

    def advance(to: float) -> None:               # integrate the entitlement up to `to`
        nonlocal last_t
        to = min(to, horizon)
        if to > last_t:
            rate = entitlement(demand, teams, shape.capacity)
            for n in names:
                out.entitled[n] += rate[n] * (to - last_t) / 3600.0
            last_t = to

    def finish(run: Run, at: float) -> None:
        out.received[run.job.team] += run.job.gpus * (min(at, horizon) - run.start) / 3600.0
        for node, g in run.nodes.items():
            state.used[run.cluster][node] -= g

    t = 0.0
    while t < horizon:
        nxt = min(arrivals[ai].arrival if ai < len(arrivals) else math.inf, ends[0][0] if ends else math.inf, again)
        if nxt == math.inf or nxt >= horizon:
            break
        t = math.ceil(nxt / tick) * tick if tick else nxt       # the round this event waits for
        if nxt == again:
            again, dirty = math.inf, True
        while True:                                             # every event up to the round, in time order
            na = arrivals[ai].arrival if ai < len(arrivals) else math.inf
            ne = ends[0][0] if ends else math.inf
            if min(na, ne) > t:
                break
            if ne <= na:
                end, jid = heapq.heappop(ends)
                run = state.running.get(jid)
                if run is None or run.end != end:      # preempted meanwhile: a stale end
                    continue
                advance(end)
                del state.running[jid]
                finish(run, end)
                demand[run.job.team] -= run.job.gpus
                dirty = True
            else:
                j = arrivals[ai]
                ai += 1
                advance(j.arrival)
                demand[j.team] += j.gpus
                state.pending.append(j)
                dirty = True
        if t >= horizon:
            break
        advance(t)
        if not (dirty and state.pending):
            continue
        dirty = False
        t0 = clock() if clock else 0.0
        starts, stops = scheduler.round(state, t)
        if clock:
            out.round_seconds.append(clock() - t0)
        out.rounds += 1
        for jid in stops:
            run = state.running.pop(jid)
            finish(run, t)
            out.preempted[run.job.team] += 1
            out.lost[run.job.team] = out.lost.get(run.job.team, 0.0) + run.job.gpus * (t - run.start) / 3600
            state.pending.append(run.job)
        if stops:
            again = t + (tick or 1.0)
        state.pending.sort(key=lambda j: (j.arrival, j.id))
        started = set()
        for s in starts:
            job = by_id[s.job]
            assert s.job not in state.running and sum(s.nodes.values()) == job.gpus, s
            for node, g in s.nodes.items():
                state.used[s.cluster][node] += g
                assert state.used[s.cluster][node] <= shape.gpus, (s, node)
            run = Run(job, s.cluster, dict(s.nodes), t)
            state.running[s.job] = run
            heapq.heappush(ends, (run.end, s.job))
            started.add(s.job)
            if s.job not in first:
                first[s.job] = t
                out.waits[job.team].append(t - job.arrival)
                if job.priority >= HIGH:
                    out.high_waits.append(t - job.arrival)
        state.pending = [j for j in state.pending if j.id not in started]
    advance(horizon)
    for run in state.running.values():
        finish(run, horizon)
    for j in arrivals[:ai]:
        if j.id not in first:
            out.never[j.team] += 1
    return out


# --- accounting ---------------------------------------------------------------------------------

def entitlement(demand: Mapping[str, int], teams: Sequence[Team], capacity: int) -> dict[str, float]:
    """GPUs each team is entitled to at one moment (module docstring): min(demand, nominal),
    then what is left of the fleet by weighted water-filling, capped by each team's demand
    beyond nominal and its borrowing limit."""
    base = {t.name: float(min(demand.get(t.name, 0), t.nominal)) for t in teams}
    cap = {t.name: float(max(0, demand.get(t.name, 0) - t.nominal)) for t in teams}
    for t in teams:
        if t.limit is not None:
            cap[t.name] = min(cap[t.name], float(t.limit))
    left = max(0.0, capacity - sum(base.values()))
    extra = water_fill(left, cap, {t.name: float(t.weight) for t in teams})
    return {n: base[n] + extra[n] for n in base}


def water_fill(amount: float, caps: Mapping[str, float], weights: Mapping[str, float]) -> dict[str, float]:
    """`amount` divided in proportion to weights, none above its cap, what a capped one leaves
    given to the others (weighted max-min)."""
    out = dict.fromkeys(caps, 0.0)
    active = {n for n, c in caps.items() if c > 0}
    while active and amount > 1e-12:
        w = sum(weights[n] for n in active)
        level = amount / w                        # per unit weight
        capped = {n for n in active if caps[n] - out[n] <= level * weights[n] + 1e-12}
        if not capped:
            for n in active:
                out[n] += level * weights[n]
            return out
        for n in capped:
            amount -= caps[n] - out[n]
            out[n] = caps[n]
        active -= capped
    return out


def jain(xs: Sequence[float]) -> float:
    """Jain's fairness index: (sum x)^2 / (n sum x^2); 1 when all equal."""
    xs = [x for x in xs if not math.isnan(x)]
    if not xs or not any(xs):
        return float("nan")
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def percentile(xs: Sequence[float], p: float) -> float:
    """The nearest-rank percentile (p in [0, 100]); nan for none."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


# --- the baseline: FIFO per team, greedy, written apart from placer ------------------------------

class FifoPerTeam:
    """Each team's queue in arrival order, its head blocking the rest of it; teams served
    round-robin (the first team turns each round), one head at a time, until every team's head
    is blocked; first fit by node (clusters in order, each pod on the first node with room; the
    whole gang on one cluster or not at all); the quotas enforced as placer's are (a team within
    nominal + its borrowing limit, the cohort's use beyond the nominal amounts within the pool);
    no fair share, no preemption."""

    name = "fifo-per-team"

    def __init__(self) -> None:
        self.turn = 0

    def round(self, state: State, now: float) -> tuple[list[Start], list[str]]:
        use = state.team_use()
        teams = list(state.teams)
        pool = state.shape.capacity - sum(t.nominal for t in teams)
        queues = {t.name: [j for j in state.pending if j.team == t.name] for t in teams}
        order = teams[self.turn % len(teams):] + teams[:self.turn % len(teams)]
        self.turn += 1
        free = {c: {n: state.shape.gpus - u for n, u in nodes.items()} for c, nodes in state.used.items()}
        blocked: set[str] = set()
        starts = []
        while len(blocked) < len(teams):
            for t in order:
                if t.name in blocked:
                    continue
                if not queues[t.name]:
                    blocked.add(t.name)
                    continue
                job = queues[t.name][0]
                spot = None
                if within_quota(teams, use, pool, t, job.gpus):
                    spot = first_fit(free, job)
                if spot is None:
                    blocked.add(t.name)
                    continue
                cluster, nodes = spot
                for n, g in nodes.items():
                    free[cluster][n] -= g
                use[t.name] += job.gpus
                queues[t.name].pop(0)
                starts.append(Start(job.id, cluster, nodes))
        return starts, []


def within_quota(teams: Sequence[Team], use: Mapping[str, int], pool: int, team: Team, gpus: int) -> bool:
    after = dict(use)
    after[team.name] += gpus
    if team.limit is not None and after[team.name] > team.nominal + team.limit:
        return False
    # one cohort: its use beyond the sum of its nominal amounts (a team's unused nominal lent) within the pool
    return sum(after.values()) - sum(t.nominal for t in teams) <= pool


def first_fit(free: Mapping[str, Mapping[str, int]], job: Job) -> tuple[str, dict[str, int]] | None:
    for cluster, nodes in free.items():
        left = dict(nodes)
        took: dict[str, int] = {}
        for _ in range(job.pods):
            node = next((n for n, f in left.items() if f >= job.per_pod), None)
            if node is None:
                break
            left[node] -= job.per_pod
            took[node] = took.get(node, 0) + job.per_pod
        else:
            return cluster, took
    return None
