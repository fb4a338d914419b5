"""`placer plan`: where would these workloads go, and why not the rest.

Resolve the clusters (one rule for every command), load the files' placement groups
(with no files: the pending objects of the hub's staging namespace), and plan them on
the fleet as `submit` sees it: promised capacity counted, workloads already placed set
aside (`placer.fleetview.view`). Nothing is changed anywhere.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Callable, Sequence

from placer.fleetview.view import FleetView, plan_groups, read_fleet, split_already_placed, with_counted_quotas
from placer.inputs.parallel import Reading, load_groups
from placer.inputs.priority import read_classes
from placer.inputs.quotas import to_quotas
from placer.inputs.targets import Targets
from placer.model.errors import InputError
from placer.model.plan import Plan
from placer.model.words import plural
from placer.model.workload import PlacementGroup
from placer.ops.checks import DEFAULT_TIME_LIMIT, check_number
from placer.ops.context import Context, Scope, open_context
from placer.ops.staged import staging_groups
from placer.solve import DEFAULT_EFFORT, DEFAULT_WORKERS, solve, time_limit_for
from placer.solve.gap import warm as warm_lp
from placer.solve.policy import unknown_order_names

OPTIONS_END = 0.97             # the options search ends here, leaving the output its share of --time-limit

Say = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


@dataclass(frozen=True)
class PlanResult:
    plan: Plan
    clusters_source: str
    fleet: Any = None                    # the snapshot planned against (for the picture)
    gpus_per_pod: Any = None             # (workload ref, component/instance) -> GPUs per pod
    gpu_resources: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return 0 if self.plan.all_placed else 3


@dataclass(frozen=True)
class PlanRequest:
    """What to plan and how long: files (none: the hub's staging namespace)."""

    files: tuple[str, ...] = ()
    namespace: str | None = None
    time_limit: float | None = DEFAULT_TIME_LIMIT      # None: the solver's default for the instance
    workers: int | None = None
    effort: float | None = None
    started: float = field(default_factory=time.monotonic)   # for --timings: clusters, catalog
    # also search what would make each unplaced group fit (--explain): a search of its own that
    # can cost more than the plan, so a plan that was not asked for it pays nothing for it
    explain: bool = False
    effort_by_gap: bool = False          # --effort-by-gap (placer.solve.gap)


@dataclass(frozen=True)
class Hooks:
    """Where a plan says what it does: notes (`announce`), a status line (`progress`)."""

    announce: Say = _quiet
    progress: Say | None = None


def plan_files(files: Sequence[str], *, clusters: str | None = None, kubeconfig: str | None = None,
               contexts: tuple[str, ...] = (), all_contexts: bool = False,
               time_limit: float | None = DEFAULT_TIME_LIMIT, catalog_dirs: Sequence[str] | None = None,
               gpu: tuple[str, ...] | None = None, workers: int | None = None,
               effort: float | None = None, announce: Say | None = None, progress: Say | None = None,
               notice: Say | None = None, namespace: str | None = None, explain: bool = False,
               effort_by_gap: bool = False) -> PlanResult:
    """The use case of `placer plan`: check the numbers, build the Context once, plan."""
    check_number("--time-limit", time_limit)
    check_number("--effort", effort)
    check_number("--workers", workers, minimum=1, inclusive=True)
    request = PlanRequest(tuple(files), namespace, time_limit, workers, effort, explain=explain,
                          effort_by_gap=effort_by_gap)
    hooks = Hooks(announce or _quiet, progress)
    scope = Scope(clusters, kubeconfig, tuple(contexts), all_contexts, tuple(catalog_dirs or ()),
                  *([tuple(gpu)] if gpu else []))
    timings: dict[str, float] = {}
    with open_context(scope, warn=hooks.announce, notice=notice,
                      check=partial(_check, request, hooks, timings)) as ctx:
        timings["catalog"] = time.monotonic() - request.started - timings["clusters"]
        return plan_in(ctx, request, hooks, timings)


def _check(request: PlanRequest, hooks: Hooks, timings: dict[str, float], targets: Targets) -> None:
    """Refused before anything is read: -n without files, no files and no hub."""
    timings["clusters"] = time.monotonic() - request.started
    if not request.files and request.namespace:
        raise InputError(f"-n {request.namespace}: applies to the objects of -f files; the namespace planned "
                         "without files is the hub's stagingNamespace of the clusters file")
    if not request.files and targets.hub is None:
        raise InputError("nothing to plan: pass -f FILE or -f DIR with the workloads to plan. To plan what waits "
                         "in a hub's staging namespace instead, use a clusters file with a hub: section "
                         f"(context, stagingNamespace). Clusters in use: {targets.description}.")
    if hooks.progress:
        hooks.progress("reading workloads")


def plan_in(ctx: Context, request: PlanRequest, hooks: Hooks, timings: dict[str, float] | None = None
            ) -> PlanResult:
    """Plan the request's groups on the Context's fleet (with `request.explain`, also options
    for what does not fit)."""
    timings = dict(timings or {})
    t = time.monotonic()
    reading = Reading()
    groups = _groups(ctx, request, hooks, reading)
    timings["load"] = time.monotonic() - t - (reading.wait or 0.0)
    if reading.wait is not None:           # the files read on two cores: how long the parent waited
        timings["wait-load"] = reading.wait
    t = time.monotonic()
    view = _fleet(ctx, hooks)
    timings["fleet"] = time.monotonic() - t
    pending = _pending(view, groups, hooks.announce)
    for note in unknown_order_names(pending, view.fleet.clusters):    # issue 21: skipped, said
        hooks.announce(note)
    plan = _solve(ctx, view, pending, groups, request, hooks, timings)
    summary = replace(plan.summary, timings={**timings, **plan.summary.timings})
    per_pod = {(w.ref, i.key): i.gpus_per_pod for g in groups for w in g.workloads for i in w.instances}
    return PlanResult(replace(plan, summary=summary), ctx.targets.description, view.fleet, per_pod,
                      ctx.gpu_resources)


def _groups(ctx: Context, request: PlanRequest, hooks: Hooks, reading: Reading) -> list[PlacementGroup]:
    """The files' groups (many files: read on two cores, placer.inputs.parallel), or the
    pending objects of the hub's staging namespace."""
    if request.files:
        waiting = partial(hooks.progress, "reading workloads: waiting for the second reader") \
            if hooks.progress else None
        groups = load_groups(list(request.files), ctx.catalog, gpu_resources=ctx.gpu_resources,
                             namespace=request.namespace, priority_classes=cluster_priority_classes(ctx),
                             reading=reading, waiting=waiting, idle=warm_lp)
        for note in dict.fromkeys(n for g in groups for n in g.notes):
            hooks.announce(note)
        return groups
    hub = ctx.targets.hub
    assert hub is not None, "no files and no hub was refused by _check"
    hooks.announce(f"planning the pending objects of namespace {hub.stagingNamespace} on hub context {hub.context}")
    return staging_groups(ctx, hub.context, hub.stagingNamespace, warn=hooks.announce)


def cluster_priority_classes(ctx: Context):
    """PriorityClasses and WorkloadPriorityClasses of the hub and the live clusters, when
    there are any (a simulated fleet has none: classes then come from the files)."""
    hub = ctx.targets.hub
    contexts = ([hub.context] if hub else []) + [e.context for e in ctx.live]
    return read_classes(ctx.kube, contexts) if contexts else None


def _fleet(ctx: Context, hooks: Hooks) -> FleetView:
    if hooks.progress:
        hooks.progress(f"inventorying {plural(len(ctx.entries), 'cluster')}")
    view = read_fleet(ctx.entries, ctx.kube, ctx.catalog, gpu_resources=ctx.gpu_resources)
    view = with_quotas(ctx, view)
    for c in view.fleet.clusters:
        if c.error:                                # said even when everything fits elsewhere
            hooks.announce(f"{c.name}: {c.error}; planning without it")
    return view


def with_quotas(ctx: Context, view: FleetView) -> FleetView:
    """The view with the clusters file's fleet-wide quotas (issue 23), which bound the solve."""
    quotas = to_quotas(getattr(ctx.targets.file, "quotas", None))
    # what placer's copies already run counts, bound or not (not only what they still promise)
    return with_counted_quotas(view, quotas, ctx.catalog, gpu_resources=ctx.gpu_resources) if quotas else view


def _pending(view: FleetView, groups: Sequence[PlacementGroup], announce: Say) -> list[PlacementGroup]:
    pending, already, split = split_already_placed(groups, view.placed)
    for a in already:
        announce(f"{a.workload}: already placed on {a.cluster}" + (f" by plan {a.plan}" if a.plan else ""))
    for key, why in split.items():
        announce(f"group {key}: {why}; left out")
    return pending


def _solve(ctx: Context, view: FleetView, pending: list[PlacementGroup], groups: Sequence[PlacementGroup],
           request: PlanRequest, hooks: Hooks, timings: dict[str, float]) -> Plan:
    # --time-limit counts from here, once everything is read (as for `submit`): reading takes
    # what the input's size costs, not the clock's budget, so how long the files, the clusters
    # and the catalog took (the machine's load) never changes what the search may do
    start = time.monotonic()
    plan = plan_groups(view, pending, ctx.catalog, solve=solve, gpu_resources=ctx.gpu_resources,
                       time_limit=request.time_limit,
                       workers=request.workers or DEFAULT_WORKERS, effort=request.effort or DEFAULT_EFFORT,
                       effort_by_gap=request.effort_by_gap,
                       progress=hooks.progress, parallel=True)      # a baseline on a second core
    if not plan.unplaced or not request.explain:
        return plan
    if hooks.progress:
        hooks.progress("searching what would make the rest fit")
    # loaded only when asked for: the options search imports CP-SAT's Python layer (pandas) and
    # the actuation package, about 0.3 s that a plan without --explain does not pay (issue 24)
    from placer.ops.options import plan_with_options

    t = time.monotonic()
    limit = request.time_limit or time_limit_for(view.fleet, len(pending))
    plan = plan_with_options(ctx, plan, view, pending, groups, deadline=start + limit * OPTIONS_END)
    timings["options"] = time.monotonic() - t
    return plan
